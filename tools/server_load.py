#!/usr/bin/env python3
"""Load benchmark of build/mllama-server: prints numbers (a benchmark, not a test; the numbers go in
the manual and reports, not in code).

  build/venv/bin/python tools/server_load.py mixed [--clients 64] [--requests 192] [--slots 8]
  build/venv/bin/python tools/server_load.py throughput -m build/bench-mllama-11b-t5-v4+1.gguf \\
      --vocab tests/fixtures/text/tok-llama3.gguf [--slots 8] [--tokens 64]
  build/venv/bin/python tools/server_load.py prompt-steps -m build/bench-mllama-11b-t5-v4+1.gguf \\
      --vocab tests/fixtures/text/tok-llama3.gguf [--long 2048]
  build/venv/bin/python tools/server_load.py store [--budget-mib 1]

mixed (the demo model by default): --clients threads send --requests requests in all through the
official `openai` and `ollama` clients, mixing text, one- and two-picture requests, streaming and
not, both APIs, greedy. Each distinct request is first run alone (one at a time) for its expected
answer; under load every answer must equal it (nothing lost, nothing mixed up between clients).
Prints the counts, the wall time, the completion tokens/s and the image store against its budget.

throughput: --k1-requests streaming clients on a server with 1 slot (they run one after the
other: the rate is each one's tokens after its first text over the time from it to its end), then
--slots clients at once on a server with --slots slots (the rate: the tokens generated once every
client has its first text, over the time from then to the last answer's end, as the engine's own
bench, build/batch --bench --engine, measures). Each request: a different raw 32-token prompt,
--tokens tokens, greedy. The model file is build/batch
--bench's random 11B-shaped weights, which have no tokenizer: --vocab gives one. Compare with
`build/batch --bench --text-layers 5` (the library alone) run in the same session.

prompt-steps: one client streams an answer; after 12 tokens another client sends a raw --long-token
prompt (the server's -b is --batch). Prints the first client's time between pieces of text alone and while the
long prompt goes in (the engine takes at most n_batch tokens a step, the generating token
included), and the long prompt's time to its first token.

store: the demo model with --image-store --budget-mib: requests with new pictures one after the
other (each a different picture), /metrics read after each: the store's bytes against its
budget, and a picture sent again after it was evicted (encoded again)."""
import argparse
import json
import os
import random
import re
import struct
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import server_test as st  # noqa: E402

import ollama  # noqa: E402
import openai  # noqa: E402


def one(url, kind, prompt, images, max_tokens):
    """One greedy request of kind 0 (OpenAI), 1 (OpenAI streaming), 2 (Ollama chat), 3 (Ollama
    generate, streaming): (text, completion tokens)."""
    oc = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=3600)
    ol = ollama.Client(host=url, timeout=3600)
    opts = {"temperature": 0}
    if max_tokens:
        opts["num_predict"] = max_tokens
    if kind == 0:
        r = oc.chat.completions.create(model=st.NAME, messages=st.openai_messages(prompt, images), temperature=0, max_tokens=max_tokens or None)
        return r.choices[0].message.content, r.usage.completion_tokens
    if kind == 1:
        chunks = list(oc.chat.completions.create(model=st.NAME, messages=st.openai_messages(prompt, images), temperature=0, stream=True,
                                                 stream_options={"include_usage": True}, max_tokens=max_tokens or None))
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks[-1].usage.completion_tokens
    if kind == 2:
        r = ol.chat(model=st.NAME, messages=st.ollama_messages(prompt, images), options=opts)
        return r.message.content, r.eval_count
    parts = list(ol.generate(model=st.NAME, prompt=prompt, images=[st.b64(i) for i in images], options=opts, stream=True))
    return "".join(p.response for p in parts), parts[-1].eval_count


def metrics(srv):
    _, _, body = srv.request("GET", "/metrics")
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"^(mllama_\w+) (\S+)$", body.decode(), re.M)}


def server(args, *extra):
    flags = ["-a", st.NAME, "-v", "-t", str(args.threads)] + (["--vocab", args.vocab] if args.vocab else []) + list(extra)
    return st.Server(*flags, model=args.model or st.MODEL, ready_timeout=1800)


def load_line():
    return "load average %s" % " ".join(open("/proc/loadavg").read().split()[:3])


def mixed(args):
    prompts = [("Describe this image.", ["circle.png"]), ("What colour is the triangle?", ["triangle.jpg"]),
               ("Which picture shows a red circle?", ["three-shapes.png", "circle.png"]), ("How many shapes are there?", ["three-shapes.png"]),
               ("Hello, who are you?", []), ("Describe this image.", ["ring-wide.png"]), ("Which picture shows a diamond?", ["diamond-tall.png", "circle.png"]),
               ("What is the capital of France?", [])]
    srv = server(args, "-np", str(args.slots), "--max-queue", "256", "--max-images", "2")
    try:
        work = [(i % 4, prompts[(i // 4) % len(prompts)]) for i in range(args.requests)]
        alone = {}
        for kind, (p, imgs) in work:
            if (kind, p, tuple(imgs)) not in alone:
                alone[(kind, p, tuple(imgs))] = one(srv.url, kind, p, imgs, 0)[0]
        random.Random(1).shuffle(work)
        lock = threading.Lock()
        res = {"ok": 0, "wrong": [], "tokens": 0, "store_max": 0}
        queue = list(work)
        done = threading.Event()

        def client():
            while True:
                with lock:
                    if not queue:
                        return
                    kind, (p, imgs) = queue.pop()
                try:
                    text, n = one(srv.url, kind, p, imgs, 0)
                except Exception as e:  # noqa: BLE001 - a lost request is counted as wrong
                    text, n = "%s: %s" % (type(e).__name__, e), 0
                with lock:
                    res["tokens"] += n
                    if text == alone[(kind, p, tuple(imgs))]:
                        res["ok"] += 1
                    else:
                        res["wrong"].append((kind, p, text))

        def watch():   # the image store's bytes while the load runs
            while not done.is_set():
                res["store_max"] = max(res["store_max"], metrics(srv).get("mllama_image_store_bytes", 0))
                time.sleep(0.05)

        before = metrics(srv)
        t0 = time.time()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        watcher = threading.Thread(target=watch)
        watcher.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        done.set()
        watcher.join()
        m = metrics(srv)
        print("mixed load (%s): %d clients, %d requests (%d distinct, each run alone first), %d slots: %d equal to alone, %d wrong or lost %s" %
              (load_line(), args.clients, args.requests, len(alone), args.slots, res["ok"], len(res["wrong"]), res["wrong"][:2]))
        print("  wall %.1f s, %d completion tokens, %.1f tokens/s, %.1f requests/s" % (wall, res["tokens"], res["tokens"] / wall, args.requests / wall))
        print("  pictures %d, encoded %d; cached prompt tokens %d of %d; longest step %.1f ms; refused %d, cancelled %d, failed %d" %
              (m["mllama_images_total"] - before["mllama_images_total"], m["mllama_images_encoded_total"] - before["mllama_images_encoded_total"],
               m["mllama_cached_tokens_total"] - before["mllama_cached_tokens_total"], m["mllama_prompt_tokens_total"] - before["mllama_prompt_tokens_total"],
               1e3 * m["mllama_step_seconds_max"], m["mllama_requests_refused_total"], m["mllama_requests_cancelled_total"], m["mllama_requests_failed_total"]))
        print("  image store: at most %.0f bytes seen under load, %.0f at the end, budget %.0f bytes" %
              (res["store_max"], m["mllama_image_store_bytes"], m["mllama_image_store_budget_bytes"]))
        print("BENCH name=server_mixed clients=%d requests=%d slots=%d equal=%d wrong=%d wall_s=%.2f tokens_per_s=%.1f" %
              (args.clients, args.requests, args.slots, res["ok"], len(res["wrong"]), wall, res["tokens"] / wall))
    finally:
        srv.stop()


def stream_times(url, prompt, max_tokens, raw=False):
    """A streamed greedy answer: the arrival time of each piece of text, the completion tokens, the text."""
    times, parts = [], []
    if raw:
        stream = ollama.Client(host=url, timeout=3600).generate(model=st.NAME, prompt=prompt, raw=True, stream=True,
                                                                 options={"temperature": 0, "num_predict": max_tokens})
        n = 0
        for p in stream:
            if p.response:
                times.append(time.time())
                parts.append(p.response)
            if p.done:
                n = p.eval_count
        return times, n, "".join(parts)
    oc = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=3600)
    n = 0
    for c in oc.chat.completions.create(model=st.NAME, messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=max_tokens,
                                        stream=True, stream_options={"include_usage": True}):
        if c.choices and c.choices[0].delta.content:
            times.append(time.time())
            parts.append(c.choices[0].delta.content)
        if c.usage:
            n = c.usage.completion_tokens
    return times, n, "".join(parts)


def raw_prompt(k, n):
    """A raw prompt of n tokens with the Llama 3 tokenizer (BOS, a word, then " the"), different for each k."""
    words = [" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel"]
    return "<|begin_of_text|>" + words[k % 8] + " the" * (n - 2)


def throughput(args):
    rates = {}
    for slots in (1, args.slots):
        srv = server(args, "-np", str(slots), "-c", "512", "--max-images", "1")
        try:
            n_req = args.slots if slots > 1 else args.k1_requests
            res = [None] * n_req
            errors = []

            def one_request(i):
                try:
                    res[i] = stream_times(srv.url, raw_prompt(i, 32), args.tokens, raw=True)
                except Exception as e:  # noqa: BLE001 - a lost request is reported, with the server's log
                    errors.append("request %d: %s: %s" % (i, type(e).__name__, e))
            t0 = time.time()
            threads = [threading.Thread(target=one_request, args=(i,)) for i in range(n_req)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.time() - t0
            if errors:
                code = srv.stop()
                raise SystemExit("%d slot(s): %s; the server exited with %s; its log:\n%s" % (slots, errors, code, "".join(srv.log[-40:])))
            short = [n for _, n, _ in res if n != args.tokens]
            if slots == 1:   # one after the other: each request's own rate, from its first text to its end
                gen = sum(n - 1 for _, n, _ in res)
                span = sum(times[-1] - times[0] for times, _, _ in res)
            else:            # from the moment every request has its first text to the last one's end
                start = max(times[0] for times, _, _ in res)
                gen = sum(n for _, n, _ in res) - n_req
                span = max(times[-1] for times, _, _ in res) - start
            rates[slots] = gen / span
            print("%d slot%s (%s): %d requests of %d tokens, %.1f s wall; %d tokens in %.2f s: %.2f tokens/s%s" %
                  (slots, "s" if slots > 1 else "", load_line(), n_req, args.tokens, wall, gen, span, rates[slots],
                   "; %d ended early: %s" % (len(short), short) if short else ""))
        finally:
            srv.stop()
    ratio = rates[args.slots] / rates[1]
    print("%d slots / 1 slot: x%.2f" % (args.slots, ratio))
    print("BENCH name=server_decode k1_tokens_per_s=%.2f k%d_tokens_per_s=%.2f vs_k1=%.2f tokens=%d" %
          (rates[1], args.slots, rates[args.slots], ratio, args.tokens))


def prompt_steps(args):
    srv = server(args, "-np", "2", "-c", str(args.long + 256), "--max-images", "1", "-b", str(args.batch))
    try:
        out = {}
        first = threading.Thread(target=lambda: out.__setitem__("a", stream_times(srv.url, raw_prompt(0, 32), args.tokens, raw=True)))
        first.start()
        deadline = time.time() + 600
        while time.time() < deadline and metrics(srv).get("mllama_completion_tokens_total", 0) < 12:
            time.sleep(0.01)
        t_long = time.time()
        times_b, _, _ = stream_times(srv.url, raw_prompt(1, args.long), 1, raw=True)
        t_long_first = times_b[0] if times_b else time.time()
        first.join()
        times_a, n_a, _ = out["a"]
        gaps = [(b - a, b) for a, b in zip(times_a, times_a[1:])]
        alone = sorted(g for g, end in gaps if end < t_long)
        during = sorted(g for g, end in gaps if end > t_long and end - g < t_long_first)   # overlapping the long prompt's intake
        after = sorted(g for g, end in gaps if end - g >= t_long_first)
        m = metrics(srv)

        def med(x):
            return x[len(x) // 2] * 1e3 if x else float("nan")
        print("prompt steps (%s): n_batch %d; a generating request's time between pieces of text:" % (load_line(), args.batch))
        print("  alone: median %.1f ms (%d gaps); while a %d-token prompt goes in (%.1f s to its first token): %d gaps, median %.1f ms, "
              "longest %.1f ms; after: median %.1f ms (%d); engine's longest step %.1f ms" %
              (med(alone), len(alone), args.long, t_long_first - t_long, len(during), med(during), max(during) * 1e3 if during else float("nan"),
               med(after), len(after), m["mllama_step_seconds_max"] * 1e3))
        print("BENCH name=server_step_beside_prompt n_batch=%d plain_ms=%.1f prompt_tokens=%d during_median_ms=%.1f during_max_ms=%.1f "
              "prompt_first_token_s=%.2f" % (args.batch, med(alone), args.long, med(during), max(during) * 1e3 if during else float("nan"), t_long_first - t_long))
    finally:
        srv.stop()


def png(seed, side):
    """A PNG of random coloured blocks (a different picture for each seed)."""
    rnd = random.Random(seed)
    cells = [[bytes((rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))) for _ in range(8)] for _ in range(8)]
    rows = b"".join(b"\x00" + b"".join(cells[y * 8 // side][x * 8 // side] for x in range(side)) for y in range(side))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def store(args):
    import base64
    srv = server(args, "-np", "2", "--image-store", str(args.budget_mib))
    try:
        ol = ollama.Client(host=srv.url, timeout=3600)
        budget = metrics(srv)["mllama_image_store_budget_bytes"]
        most = 0
        pictures = [base64.b64encode(png(i, 560)).decode() for i in range(args.pictures)]
        for i, pic in enumerate(pictures + pictures[:1]):
            r = ol.chat(model=st.NAME, messages=[{"role": "user", "content": "Describe this image.", "images": [pic]}],
                        options={"temperature": 0, "num_predict": 4})
            m = metrics(srv)
            most = max(most, m["mllama_image_store_bytes"])
            print("  picture %d%s: store %.0f bytes of %.0f; encoded so far %d (%d tokens)" %
                  (i % args.pictures, " again" if i == args.pictures else "", m["mllama_image_store_bytes"], budget,
                   m["mllama_images_encoded_total"], r.eval_count))
        print("image store (%s): budget %.0f bytes (--image-store %d MiB), at most %.0f bytes after a request; %d pictures encoded for %d requests" %
              (load_line(), budget, args.budget_mib, most, m["mllama_images_encoded_total"], args.pictures + 1))
        print("BENCH name=server_image_store budget_bytes=%.0f most_bytes=%.0f pictures=%d encoded=%d" %
              (budget, most, args.pictures, m["mllama_images_encoded_total"]))
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["mixed", "throughput", "prompt-steps", "store"])
    ap.add_argument("-m", "--model", help="model file (default: the demo model)")
    ap.add_argument("--vocab", help="the tokenizer's GGUF, for a model file without one")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--tokens", type=int, default=32, help="tokens per answer (throughput, prompt-steps)")
    ap.add_argument("--k1-requests", type=int, default=2, help="requests one after the other on the 1-slot server (throughput)")
    ap.add_argument("--long", type=int, default=2048, help="the long prompt's tokens (prompt-steps)")
    ap.add_argument("--batch", type=int, default=512, help="the server's -b: most tokens a step (prompt-steps)")
    ap.add_argument("--budget-mib", type=int, default=1, help="the image store's budget (store)")
    ap.add_argument("--pictures", type=int, default=6, help="different pictures (store)")
    args = ap.parse_args()
    {"mixed": mixed, "throughput": throughput, "prompt-steps": prompt_steps, "store": store}[args.what](args)


if __name__ == "__main__":
    main()
