#!/usr/bin/env python3
"""Fixtures for reading real weights as their makers wrote them (tests/fixtures/mllama/<cfg>/; not run
by CI, outputs committed):

    python tools/gen_mllama_layout_fixtures.py [--out tests/fixtures/mllama] [--only gqa,mha] [--reordered]

Two tiny random MllamaForConditionalGeneration configurations unlike tiny1/tiny4:
  gqa  GQA 3:1 (3 heads, 1 KV head), llama3 rope scaling (one smoothed frequency), max_num_tiles 2
       (aspect ratios [1,1] [1,2] [2,1]), image_size 28, taps [1, 2, 4] of 5 local layers
  mha  n_head_kv = n_head = 4, no rope scaling (no rope_freqs.weight), max_num_tiles 3 (five aspect
       ratios), image_size 42, a single tap [0] of 3 local layers, 2 global layers
Both: untied embeddings, non-uniform norms, gates of both signs (|g| 0.3..1.2), bias everywhere HF has one.

For each <cfg>/ it writes:
  hf/          the Hugging Face checkpoint as transformers saves it (float32, two safetensors shards +
               model.safetensors.index.json, config/generation/preprocessor/tokenizer files, Llama 3's
               pre-tokenizer and chat template)
  hf-bf16/     the same checkpoint saved in bfloat16 (one file)
  ollama.gguf  (a) tools/ollama_mllama_gguf.py: Ollama's converter rule by rule (F16 matrices)
  mmsched.gguf (b) tools/convert_hf_to_gguf.py --outtype f32
  mmsched-auto.gguf  (b') tools/convert_hf_to_gguf.py with its default types (Ollama's), to compare with (a)
  text.gguf, proj.gguf  (d) tools/convert_hf_to_gguf.py --split --outtype f32
  ref.gguf       transformers float32 (eager, PIL processor, Meta's taps) on the float32 weights, with
                 the contract of tools/gen_mllama_fixtures.py (images, vision/projector outputs, prompts)
  ref-f16w.gguf  the prompts again on the weights as (a) holds them (matrices rounded to f16), and
  ref-bf16.gguf  on the bf16 checkpoint's weights (prompt.{p}.* keys only; images from ref.gguf)
  hf-reordered-config.json  (--reordered, from the committed hf/) hf/'s config.json as transformers
                 saves it with vision_config.supported_aspect_ratios reversed: transformers reads only
                 the list's length, an image's id comes from the processor's own order. Checked here:
                 the checkpoint saved with that config holds hf/'s tensors, transformers run on it
                 gives the same bytes (vision and projector outputs, logits, greedy tokens) as on hf/
                 in the same run, and ref.gguf's values to float32 rounding (another machine's
                 kernels). tests/test_mllama.c loads hf/ with this config against ref.gguf.
Every prompt records prompt.{p}.greedy_min_margin: the smallest top-1 minus top-2 logit gap along its
greedy path in that reference.
"""

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import GenerationConfig, MllamaConfig, MllamaForConditionalGeneration  # noqa: E402

import convert_hf_to_gguf as conv  # noqa: E402
import gen_mllama_fixtures as base  # noqa: E402
import ollama_mllama_gguf as ollama  # noqa: E402

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

CONFIGS = {
    "gqa": dict(seed=2001, max_num_tiles=2, image_size=28, taps=[1, 2, 4], cross=[1, 3],
                text=dict(hidden_size=24, num_hidden_layers=4, num_attention_heads=3, num_key_value_heads=1,
                          intermediate_size=48, rope_theta=500000.0,
                          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                            original_max_position_embeddings=512)),
                vision=dict(hidden_size=16, num_hidden_layers=5, num_global_layers=1, attention_heads=2,
                            intermediate_size=32),
                images=[(28, 28), (40, 20), (20, 50), (33, 33)],
                prompts=[["I0", 7], [4, "I1", 6], [10], [2, "I2", 3, "I3", 4]]),
    "mha": dict(seed=2002, max_num_tiles=3, image_size=42, taps=[0], cross=[2],
                text=dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                          intermediate_size=64, rope_theta=10000.0, rope_scaling=dict(rope_type="default")),
                vision=dict(hidden_size=16, num_hidden_layers=3, num_global_layers=2, attention_heads=2,
                            intermediate_size=32),
                images=[(42, 42), (120, 40), (30, 100), (70, 50)],
                prompts=[["I1", 8], [5, "I2", 5], [9], ["I0", "I3", 6]]),
}

# HF names of the tensors Ollama's converter keeps F32 (besides 1-D ones)
KEEP_F32_HF = ("gated_positional_embedding.embedding", "gated_positional_embedding.tile_embedding.weight",
               "pre_tile_positional_embedding.embedding.weight", "post_tile_positional_embedding.embedding.weight")


def make_config(c):
    T = c["max_num_tiles"]
    sar = [[w, h] for w in range(1, T + 1) for h in range(1, T + 1) if w * h <= T]
    v = dict(c["vision"])
    v.update(hidden_act="gelu", num_attention_heads=v["attention_heads"], num_channels=3,
             vision_output_dim=v["hidden_size"] * (1 + len(c["taps"])), image_size=c["image_size"], patch_size=14,
             norm_eps=1e-5, max_num_tiles=T, intermediate_layers_indices=list(c["taps"]), supported_aspect_ratios=sar)
    t = dict(c["text"])
    t.update(vocab_size=base.VOCAB, hidden_act="silu", rms_norm_eps=1e-5, max_position_embeddings=1024,
             tie_word_embeddings=False, cross_attention_layers=list(c["cross"]), bos_token_id=base.BOS,
             eos_token_id=[base.EOT_TEXT, base.EOM, base.EOT], pad_token_id=base.PAD)
    return MllamaConfig(vision_config=v, text_config=t, image_token_index=base.IMAGE_TOKEN)


def build_model(c):
    torch.manual_seed(0)
    model = MllamaForConditionalGeneration(make_config(c)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(base.init_value(base.ondisk_name(name), tuple(p.shape), c["seed"]).astype(np.float32)))
    return model


def build_tokenizer():
    """The tiny byte-level BPE of gen_mllama_fixtures.py with Llama 3's pre-tokenizer (a Split on its
    regex, then byte-level without a regex) and the Llama 3.2 Vision chat template."""
    from tokenizers import Regex, pre_tokenizers
    tok = base.build_tokenizer()
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    with open(os.path.join(HERE, "templates", "llama-3.2-vision-instruct.jinja"), encoding="utf-8") as f:
        tok.chat_template = f.read()
    return tok


def save_checkpoint(model, c, folder, dtype, shard):
    from transformers.models.mllama.image_processing_mllama import MllamaImageProcessor
    S, T = c["image_size"], c["max_num_tiles"]
    m = model.to(dtype)
    m.save_pretrained(folder, safe_serialization=True, max_shard_size=shard)
    model.to(torch.float32)
    MllamaImageProcessor(size={"height": S, "width": S}, image_mean=base.MEAN, image_std=base.STD,
                         max_image_tiles=T).save_pretrained(folder)
    build_tokenizer().save_pretrained(folder, save_jinja_files=False)   # the template in tokenizer_config.json, as Meta's folder has it
    for junk in ("special_tokens_map.json",):
        p = os.path.join(folder, junk)
        if os.path.exists(p):
            os.remove(p)


def load_reference(folder):
    kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
    model = MllamaForConditionalGeneration.from_pretrained(folder, attn_implementation="eager", **{kw: torch.float32}).eval()
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32, name
    for cf in (model.config, model.config.vision_config, model.config.text_config):
        assert cf._attn_implementation == "eager"
    return model


def round_like_ollama(model):
    """The weights as Ollama's converter stores an f32 checkpoint: >= 2-D tensors rounded to f16,
    except the four position tables; 1-D tensors as they are."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2 and not base.ondisk_name(name).endswith(KEEP_F32_HF):
                p.copy_(p.half().float())


def images_of(c, ip, vision, w, taps):
    T, S = c["max_num_tiles"], c["image_size"]
    out = []
    with torch.no_grad():
        for k, (W, H) in enumerate(c["images"]):
            rgb = base.make_image(W, H, c["seed"])
            feat = base.process_image(ip, rgb)
            pv = feat["pixel_values"].astype(np.float32)
            assert pv.shape == (1, 1, T, 3, S, S), pv.shape
            arid = int(feat["aspect_ratio_ids"][0, 0])
            armask = [int(x) for x in feat["aspect_ratio_mask"][0, 0]]
            ntiles = int(feat["num_tiles"][0][0])
            rw, rh, cols, rows = base.fit_size(ip, W, H, T, S)
            assert rows * cols == ntiles
            out.append(dict(pv=pv, arid=arid, armask=armask, ntiles=ntiles))
            if w is None:
                continue
            vo = vision(pixel_values=torch.from_numpy(pv), aspect_ratio_ids=torch.tensor([[arid]]),
                        aspect_ratio_mask=torch.tensor([armask]))[0]
            po = w.projector(vo)
            vo_np, po_np = vo[0, 0].numpy(), po[0, 0].reshape(-1, po.shape[-1]).numpy()
            w.add_tensor(f"img.{k}.rgb", np.ascontiguousarray(rgb.reshape(H, W * 3)).view(np.int8))
            for key, val in (("width", W), ("height", H), ("aspect_ratio_id", arid), ("num_tiles", ntiles),
                             ("resized_width", rw), ("resized_height", rh)):
                w.add_uint32(f"img.{k}.{key}", val)
            base.i32_array(w, f"img.{k}.aspect_ratio_mask", armask)
            w.add_uint64(f"img.{k}.pixel_values_fnv1a64", base.fnv1a64(np.ascontiguousarray(pv[0, 0]).tobytes()))
            w.add_tensor(f"img.{k}.vision_out", np.ascontiguousarray(vo_np))
            w.add_tensor(f"img.{k}.proj_out", np.ascontiguousarray(po_np))
            print(f"  img.{k}: {W}x{H} -> {rows}x{cols} (id {arid}, {ntiles} tiles)")
    if taps is not None:
        assert taps.calls == len(c["images"])
    return out


def prompts_of(c, model, imgs, w, label):
    T = c["max_num_tiles"]
    rng = np.random.default_rng([c["seed"], 7])
    gen_cfg = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=base.N_GREEDY, min_new_tokens=0,
                               eos_token_id=[base.IMAGE_TOKEN], pad_token_id=base.PAD, bos_token_id=base.BOS,
                               use_cache=True, repetition_penalty=1.0)
    model.generation_config.eos_token_id = [base.IMAGE_TOKEN]
    margins = []
    for p, segs in enumerate(c["prompts"]):
        ids, used = [base.BOS], []
        for s in segs:
            if isinstance(s, str):
                ids.append(base.IMAGE_TOKEN)
                used.append(int(s[1:]))
            else:
                ids += [int(x) for x in rng.integers(0, base.BOS, s)]
        n = len(ids)
        inputs = dict(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, n, dtype=torch.long))
        cam = None
        if used:
            nt = [imgs[k]["ntiles"] for k in used]
            cam = base.cross_mask(ids, nt, T)
            assert np.array_equal(cam, base.hf_cross_mask(ids, nt, T))
            inputs.update(pixel_values=torch.from_numpy(np.concatenate([imgs[k]["pv"] for k in used], axis=1)),
                          aspect_ratio_ids=torch.tensor([[imgs[k]["arid"] for k in used]]),
                          aspect_ratio_mask=torch.tensor([[imgs[k]["armask"] for k in used]]),
                          cross_attention_mask=torch.from_numpy(cam[None].astype(np.int64)))
        with torch.no_grad():
            logits = model(**inputs, use_cache=False).logits[0].float().numpy()
            gen = model.generate(**inputs, generation_config=gen_cfg)
        greedy = [int(x) for x in gen[0, n:]]
        assert len(greedy) == base.N_GREEDY and greedy[0] == int(np.argmax(logits[-1]))
        margin = base.check_greedy_nocache(model, inputs, ids, greedy, cam)
        margins.append(margin)
        base.i32_array(w, f"prompt.{p}.tokens", ids)
        base.i32_array(w, f"prompt.{p}.images", used)
        w.add_tensor(f"prompt.{p}.logits", np.ascontiguousarray(logits))
        base.i32_array(w, f"prompt.{p}.greedy", greedy)
        w.add_float32(f"prompt.{p}.greedy_min_margin", margin)
        if used:
            w.add_tensor(f"prompt.{p}.cross_attention_mask", np.ascontiguousarray(cam))
        print(f"  {label} prompt.{p}: {n} tokens, images {used}, greedy {greedy}, min margin {margin:.4f}")
    return margins


def write_ref(path, c, model, ip, with_images, label, taps=None):
    w = base.RefWriter(path, "mllama_ref")
    w.add_string("ref.transformers_version", transformers.__version__)
    w.add_string("ref.torch_version", torch.__version__)
    w.add_string("ref.tap_rule", "meta")
    w.add_string("ref.weights", label)
    w.add_uint32("ref.n_images", len(c["images"]))
    w.add_uint32("ref.n_prompts", len(c["prompts"]))
    vision, projector, _ = base.parts(model)
    w.projector = projector
    imgs = images_of(c, ip, vision, w if with_images else None, taps)
    if taps is not None:
        w.add_string("ref.tap_rule_source", "native" if taps.native else "hooks")
    margins = prompts_of(c, model, imgs, w, label)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return margins


def generate(name, c, out_root):
    print(f"=== {name} ===")
    d = os.path.join(out_root, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    hf, hf16 = os.path.join(d, "hf"), os.path.join(d, "hf-bf16")
    model = build_model(c)
    save_checkpoint(model, c, hf, torch.float32, "100KB")
    save_checkpoint(model, c, hf16, torch.bfloat16, "10GB")
    del model

    ollama.convert(hf, os.path.join(d, "ollama.gguf"))
    conv.convert(hf, os.path.join(d, "mmsched.gguf"), "f32")
    conv.convert(hf, os.path.join(d, "mmsched-auto.gguf"), "auto")
    conv.convert(hf, os.path.join(d, "text.gguf"), "f32", split=True, proj_outfile=os.path.join(d, "proj.gguf"))

    ip = base.pil_image_processor(hf)
    margins = {}
    model = load_reference(hf)
    vision, _, _ = base.parts(model)
    taps = base.MetaTaps(vision, c["taps"], model.config.vision_config.hidden_size)
    margins["f32"] = write_ref(os.path.join(d, "ref.gguf"), c, model, ip, True, "f32", taps)
    print(f"  vision taps: {taps.hidden_counts[0]} hidden states for {taps.n_local} layers -> "
          f"{'native' if taps.native else 'hooks'}")
    round_like_ollama(model)
    margins["f16w"] = write_ref(os.path.join(d, "ref-f16w.gguf"), c, model, ip, False, "f16w")
    del model
    model = load_reference(hf16)
    vision, _, _ = base.parts(model)
    base.MetaTaps(vision, c["taps"], model.config.vision_config.hidden_size)
    margins["bf16"] = write_ref(os.path.join(d, "ref-bf16.gguf"), c, model, ip, False, "bf16")
    for k, v in margins.items():
        print(f"  {k}: smallest greedy margin per prompt {[round(x, 4) for x in v]}")
    for root, _, files in os.walk(d):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            print(f"  {os.path.relpath(p, out_root)}: {os.path.getsize(p)} bytes, sha256 {base.sha(p)}")


def generate_reordered(name, c, out_root):
    import safetensors.numpy
    from gguf import GGUFReader
    print(f"=== {name}: supported_aspect_ratios reordered ===")
    d = os.path.join(out_root, name)
    hf = os.path.join(d, "hf")
    cfg = MllamaConfig.from_pretrained(hf)
    order = [list(x) for x in cfg.vision_config.supported_aspect_ratios]
    cfg.vision_config.supported_aspect_ratios = order[::-1]
    assert order[::-1] != order
    kw = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
    with tempfile.TemporaryDirectory() as tmp:
        MllamaForConditionalGeneration.from_pretrained(hf, config=cfg, **{kw: torch.float32}).save_pretrained(
            tmp, safe_serialization=True, max_shard_size="100KB")
        for fn in os.listdir(hf):   # processor and tokenizer files as they are
            if not os.path.exists(os.path.join(tmp, fn)):
                shutil.copy(os.path.join(hf, fn), tmp)

        def tensors(folder):
            out = {}
            for fn in sorted(os.listdir(folder)):
                if fn.endswith(".safetensors"):
                    out.update(safetensors.numpy.load_file(os.path.join(folder, fn)))
            return out
        a, b = tensors(hf), tensors(tmp)
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), "the tensors changed"
        refs = {}
        for label, folder in (("in the processor's order", hf), ("reordered", tmp)):
            model = load_reference(folder)
            vision, _, _ = base.parts(model)
            taps = base.MetaTaps(vision, c["taps"], model.config.vision_config.hidden_size)
            refs[label] = os.path.join(tmp, f"ref-{len(refs)}.gguf")
            write_ref(refs[label], c, model, base.pil_image_processor(folder), True, "f32", taps)
        assert [list(x) for x in model.config.vision_config.supported_aspect_ratios] == order[::-1]

        def contents(path):
            r = GGUFReader(path)
            return ({t.name: np.array(t.data) for t in r.tensors},
                    {k: [bytes(f.parts[i]) for i in f.data] for k, f in r.fields.items()})
        (ta, fa), (tb, fb) = contents(refs["in the processor's order"]), contents(refs["reordered"])
        assert ta.keys() == tb.keys() and all(np.array_equal(ta[k], tb[k]) for k in ta), "transformers' outputs changed"
        assert fa == fb, [k for k in fa if fa.get(k) != fb.get(k)]
        print(f"  transformers, list reordered or not: {len(ta)} tensors and {len(fa)} keys the same bytes")
        tc, _ = contents(os.path.join(d, "ref.gguf"))   # and ref.gguf's figures, to float32 rounding on this machine
        for k in tc:
            x, y = tc[k].astype(np.float64), tb[k].astype(np.float64)
            assert np.abs(x - y).max() <= 1e-5 * max(1.0, np.abs(x).max()), (k, np.abs(x - y).max())
        shutil.copy(os.path.join(tmp, "config.json"), os.path.join(d, "hf-reordered-config.json"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "tests", "fixtures", "mllama"))
    ap.add_argument("--only", default=",".join(CONFIGS))
    ap.add_argument("--reordered", action="store_true", help="only hf-reordered-config.json, from the hf/ folders there")
    a = ap.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    for name in a.only.split(","):
        if not a.reordered:
            generate(name, CONFIGS[name], os.path.abspath(a.out))
        generate_reordered(name, CONFIGS[name], os.path.abspath(a.out))


if __name__ == "__main__":
    main()
