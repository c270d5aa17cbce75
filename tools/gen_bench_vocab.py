#!/usr/bin/env python3
"""Writes the whole genuine Llama 3 vocabulary (128,000 BPE tokens, 256 special tokens and
Llama 3.2 Vision's <|image|> = 128256) as a GGUF for build/bench_constrain, which measures constrained
decoding at the real vocabulary size (tests/fixtures/text/tok-llama3.gguf keeps only the tokens of
the tokenizer tests' corpus). The ranks come from Meta's tokenizer.model in the PyPI wheel of
llama-models, under the Llama 3 Community License, so the file is made here, not committed:

    pip download --no-deps llama-models==0.3.0 -d build/
    build/venv/bin/python tools/gen_bench_vocab.py build/llama_models-0.3.0-py3-none-any.whl build/tok-llama3-full.gguf

Tokens are written in GPT-2's byte-to-character form, as Llama 3's tokenizer.json has them. One merge
only is written (the key is required): the constraint engine reads token bytes, and nothing should
tokenize with this file.
Needs the gguf package (tests/requirements-server.txt's venv has it)."""
import base64
import sys
import zipfile

import os

import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from byte_level import bytes_to_unicode  # noqa: E402




def main():
    wheel, out = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(wheel) as z:
        model = z.read("llama_models/llama3/tokenizer.model").decode()
    enc = bytes_to_unicode()
    ranks = {}
    for line in model.splitlines():
        if line.strip():
            tok, rank = line.split()
            ranks[int(rank)] = "".join(enc[b] for b in base64.b64decode(tok))
    assert len(ranks) == 128000 and sorted(ranks) == list(range(128000))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
                "<|finetune_right_pad_id|>", "<|step_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>",
                "<|eot_id|>", "<|python_tag|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(2, 2 + 256 - len(specials))]
    tokens = [ranks[i] for i in range(128000)] + specials + ["<|image|>"]
    types = [1] * 128000 + [3] * 256 + [4]
    w = gguf.GGUFWriter(out, "mllama")
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    assert "Ġt" in tokens
    w.add_token_merges(["Ġ t"])   # one merge: the loader requires the key; nothing here tokenizes
    w.add_bos_token_id(128000)
    w.add_eos_token_id(128009)
    w.add_array("tokenizer.ggml.eos_token_ids", [128001, 128008, 128009])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{len(tokens)} tokens -> {out}")


if __name__ == "__main__":
    main()
