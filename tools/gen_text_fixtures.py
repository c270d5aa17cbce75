#!/usr/bin/env python3
"""References for the chat template and the sampler, from transformers.

    python tools/gen_text_fixtures.py [--out tests/fixtures/text/chat-sampling-ref.gguf]

Chat: conversations rendered by transformers' own Jinja environment (the one apply_chat_template
uses: trim_blocks, lstrip_blocks, raise_exception, tojson) with the instruct template of
Llama 3.2 Vision in tools/templates/. Sampling: random logits run through transformers' logits
processors (RepetitionPenalty, Temperature, TopK, TopP, MinP, in generate's order) and a softmax,
giving the distribution the next draw uses; for greedy, the argmax after the penalty.

Keys (case i):
  chat.count                     u32
  chat.i.roles, chat.i.texts     string arrays, one entry per message ("" text with has_text 0 = no text)
  chat.i.has_text, chat.i.images i32 arrays per message
  chat.i.generation_prompt       bool
  chat.i.date                    string (passed as date_string)
  chat.i.expected                string: the rendering, or "" when the template raises
  chat.i.error                   string: the exception's message, or ""
  sampling.count                 u32
  sampling.i.temperature, .top_p, .min_p, .repeat_penalty   f32
  sampling.i.top_k               i32
  sampling.i.history             i32 array (may be empty: then [-1])
  sampling.i.greedy_id           i32 (-1 unless temperature is 0)
  tensors sampling.i.logits, sampling.i.probs   F32 [n_vocab]
Cases whose top-p or min-p cut falls within 1e-5 of a token's mass are skipped (float32 ties).
"""
import argparse
import os
import sys

import numpy as np
import torch
import gguf
import transformers
from transformers.utils.chat_template_utils import _compile_jinja_template
from transformers.generation.logits_process import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor, TemperatureLogitsWarper,
                                                    TopKLogitsWarper, TopPLogitsWarper)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = os.path.join(ROOT, "tools", "templates", "llama-3.2-vision-instruct.jinja")


def chat_cases():
    U, A, S = "user", "assistant", "system"
    c = []
    c.append(([(U, "Describe this image in two sentences", 1)], True, "26 Jul 2024"))
    c.append(([(U, "What is in the picture?", 1)], False, "26 Jul 2024"))
    c.append(([(U, "Hello!", 0)], True, "26 Jul 2024"))
    c.append(([(S, "  You are terse.\n", 0), (U, "Hi", 0)], True, "01 Jan 2025"))
    c.append(([(S, "You are terse.", 0), (U, "Look", 1)], True, "26 Jul 2024"))                      # raises
    c.append(([(S, " \t\n", 0), (U, "Look", 1)], True, "26 Jul 2024"))                               # empty after trim: fine
    c.append(([(U, "First", 1), (A, "a red circle", 0), (U, "And this one?", 1)], True, "26 Jul 2024"))
    c.append(([(U, "Two pictures", 2)], True, "26 Jul 2024"))
    c.append(([(U, None, 1)], True, "26 Jul 2024"))
    c.append(([(U, "  keep  my  spaces \n", 0)], True, "26 Jul 2024"))
    c.append(([(U, "tool please", 0), (A, "calling", 0), ("tool", 'result "x"\n\ttab\x01 é', 0)], True, "26 Jul 2024"))
    c.append(([(U, "q", 0), ("ipython", "42", 0)], False, "26 Jul 2024"))
    c.append(([(U, "a", 0), (S, "late system", 0), (U, "b", 0)], True, "26 Jul 2024"))
    c.append(([(S, "\u3000\u00a0sys\u2003", 0), (U, "x", 0)], True, "26 Jul 2024"))
    c.append(([(U, "<|image|>inline token text", 0)], True, "26 Jul 2024"))
    c.append(([(U, "Ünïcödé ✓ 日本語 🙂", 1), (A, "ok", 0)], False, "26 Jul 2024"))
    c.append(([(S, "only system", 0)], True, "26 Jul 2024"))
    c.append(([], True, "26 Jul 2024"))
    return c


def render(template, msgs, gen, date):
    messages = []
    for role, text, n_img in msgs:
        if role in ("tool", "ipython") or (role == "system" and not messages):
            messages.append({"role": role, "content": text or ""})
            continue
        content = [{"type": "image"} for _ in range(n_img)]
        if text is not None:
            content.append({"type": "text", "text": text})
        messages.append({"role": role, "content": content})
    if not messages:   # the template reads messages[0]
        messages = []
    try:
        return template.render(messages=messages, bos_token="<|begin_of_text|>", add_generation_prompt=gen, date_string=date), ""
    except Exception as e:  # the template's raise_exception
        return "", str(e)


def sampling_cases(rng):
    cases = []
    base = [
        dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0),
        dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.3),
        dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0),
        dict(temperature=0.6, top_k=0, top_p=0.9, min_p=0.0, repeat_penalty=1.0),
        dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repeat_penalty=1.1),
        dict(temperature=1.5, top_k=5, top_p=1.0, min_p=0.0, repeat_penalty=1.0),
        dict(temperature=0.3, top_k=0, top_p=0.5, min_p=0.0, repeat_penalty=0.8),
        dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.2, repeat_penalty=1.0),
        dict(temperature=1.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0),
        dict(temperature=2.0, top_k=100, top_p=0.7, min_p=0.01, repeat_penalty=1.5),
    ]
    for rep in range(4):
        for p in base:
            n = int(rng.choice([7, 50, 300, 2000]))
            logits = (rng.standard_normal(n) * rng.choice([1.0, 3.0, 8.0])).astype(np.float32)
            hist = rng.integers(0, n, size=int(rng.integers(0, 12))).astype(np.int32)
            cases.append((dict(p), logits, hist))
    # ties: the k-th logit repeated (top-k keeps every tie); greedy takes the first largest
    t = np.array([0.5, 2.0, 1.0, 2.0, 1.0, 1.0, -3.0], dtype=np.float32)
    cases.append((dict(temperature=1.0, top_k=3, top_p=1.0, min_p=0.0, repeat_penalty=1.0), t, np.zeros(0, np.int32)))
    cases.append((dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0), t, np.zeros(0, np.int32)))
    return cases


def hf_probs(p, logits, hist):
    ids = torch.tensor(hist[None, :].astype(np.int64)) if len(hist) else torch.zeros((1, 0), dtype=torch.long)
    scores = torch.tensor(logits[None, :])
    if p["repeat_penalty"] != 1.0 and len(hist):
        scores = RepetitionPenaltyLogitsProcessor(p["repeat_penalty"])(ids, scores)
    if p["temperature"] == 0.0:
        probs = np.zeros_like(logits)
        g = int(torch.argmax(scores[0]))
        probs[g] = 1.0
        return probs, g, True
    scores = TemperatureLogitsWarper(p["temperature"])(ids, scores)
    if p["top_k"] > 0:
        scores = TopKLogitsWarper(p["top_k"])(ids, scores)
    ok = True
    if p["top_p"] < 1.0:
        s = torch.sort(scores[0], descending=False)[0].softmax(-1).cumsum(-1).numpy()
        ok &= bool(np.all(np.abs(s - (1 - p["top_p"])) > 1e-5))
        scores = TopPLogitsWarper(p["top_p"])(ids, scores)
    if p["min_p"] > 0.0:
        pr = scores[0].softmax(-1).numpy()
        ok &= bool(np.all(np.abs(pr - p["min_p"] * pr.max()) > 1e-5 * max(pr.max(), 1e-30)))
        scores = MinPLogitsWarper(p["min_p"])(ids, scores)
    return scores[0].softmax(-1).numpy().astype(np.float32), -1, ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "text", "chat-sampling-ref.gguf"))
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    template = _compile_jinja_template(open(TEMPLATE, encoding="utf-8").read())
    w = gguf.GGUFWriter(args.out, "mmsched-text-ref")
    w.add_string("ref.transformers", transformers.__version__)
    w.add_string("ref.torch", torch.__version__)

    cases = chat_cases()
    w.add_uint32("chat.count", len(cases))
    for i, (msgs, gen, date) in enumerate(cases):
        out, err = render(template, msgs, gen, date)
        w.add_array(f"chat.{i}.roles", [m[0] for m in msgs] or [""])
        w.add_array(f"chat.{i}.texts", [m[1] or "" for m in msgs] or [""])
        w.add_array(f"chat.{i}.has_text", [int(m[1] is not None) for m in msgs] or [-1])
        w.add_array(f"chat.{i}.images", [m[2] for m in msgs] or [-1])
        w.add_bool(f"chat.{i}.generation_prompt", gen)
        w.add_string(f"chat.{i}.date", date)
        w.add_string(f"chat.{i}.expected", out)
        w.add_string(f"chat.{i}.error", err)
        print(f"chat {i}: {len(msgs)} messages -> {'error: ' + err if err else repr(out[:70])}")

    rng = np.random.default_rng(20261129)
    kept = 0
    for p, logits, hist in sampling_cases(rng):
        probs, greedy, ok = hf_probs(p, logits, hist)
        if not ok:
            continue
        i = kept
        kept += 1
        for k in ("temperature", "top_p", "min_p", "repeat_penalty"):
            w.add_float32(f"sampling.{i}.{k}", float(p[k]))
        w.add_int32(f"sampling.{i}.top_k", int(p["top_k"]))
        w.add_array(f"sampling.{i}.history", [int(x) for x in hist] or [-1])
        w.add_int32(f"sampling.{i}.greedy_id", greedy)
        w.add_tensor(f"sampling.{i}.logits", logits)
        w.add_tensor(f"sampling.{i}.probs", probs)
    w.add_uint32("sampling.count", kept)
    print(f"sampling: {kept} cases")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
