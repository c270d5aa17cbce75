#!/usr/bin/env python3
"""Load benchmark of build/mllama-server (a benchmark, not a test: it prints numbers).

  build/venv/bin/python tools/server_load.py [-m MODEL] [--clients 64] [--requests 192] [--slots 8]
  build/venv/bin/python tools/server_load.py -m big.gguf --throughput --tokens 64   # decode tok/s, 8 slots vs 1

Mixed load (default): --clients threads send --requests requests in all through the official
`openai` and `ollama` clients, mixing text, one- and two-picture requests, streaming and not, both
APIs, greedy. Every request is first run alone (one at a time) for its expected answer; under load
each answer must equal it (nothing lost, nothing mixed up between clients). Prints the counts, the
wall time, the aggregate completion tokens/s and the image store's bytes against its budget from
/metrics.

--throughput: the same text prompt from N clients at once, max_tokens --tokens, on a server with
1 slot and then with --slots slots: aggregate decode tokens/s of each and the ratio (compare with
`build/batch --bench` on the same machine and model for what the library alone reaches)."""
import argparse
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import server_test as st  # noqa: E402

import ollama  # noqa: E402
import openai  # noqa: E402


def one(url, kind, prompt, images, max_tokens):
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


def mixed(args):
    prompts = [("Describe this image.", ["circle.png"]), ("What colour is the triangle?", ["triangle.jpg"]),
               ("Which picture shows a red circle?", ["three-shapes.png", "circle.png"]), ("How many shapes are there?", ["three-shapes.png"]),
               ("Hello, who are you?", []), ("Describe this image.", ["ring-wide.png"]), ("Which picture shows a diamond?", ["diamond-tall.png", "circle.png"])]
    srv = st.Server("-np", str(args.slots), "--max-queue", "256", "-t", str(args.threads))
    try:
        work = [(i % 4, prompts[i % len(prompts)]) for i in range(args.requests)]
        alone = {}
        for kind, (p, imgs) in work[:4 * len(prompts)]:
            alone[(kind, p, tuple(imgs))] = one(srv.url, kind, p, imgs, 0)[0]
        lock = threading.Lock()
        res = {"ok": 0, "wrong": [], "tokens": 0}
        queue = list(work)

        def client():
            while True:
                with lock:
                    if not queue:
                        return
                    kind, (p, imgs) = queue.pop()
                try:
                    text, n = one(srv.url, kind, p, imgs, 0)
                except Exception as e:  # noqa: BLE001
                    text, n = "%s: %s" % (type(e).__name__, e), 0
                with lock:
                    res["tokens"] += n
                    if text == alone[(kind, p, tuple(imgs))]:
                        res["ok"] += 1
                    else:
                        res["wrong"].append((kind, p, text))

        t0 = time.time()
        threads = [threading.Thread(target=client) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.time() - t0
        m = metrics(srv)
        print("mixed load: %d clients, %d requests, %d slots: %d equal to alone, %d wrong or lost %s" %
              (args.clients, args.requests, args.slots, res["ok"], len(res["wrong"]), res["wrong"][:2]))
        print("  wall %.1f s, %d completion tokens, %.1f tokens/s aggregate" % (wall, res["tokens"], res["tokens"] / wall))
        print("  image store %.0f of %.0f bytes; images %d, encoded %d; cached tokens %d of %d prompt tokens; step max %.1f ms" %
              (m.get("mllama_image_store_bytes", -1), m.get("mllama_image_store_budget_bytes", -1), m.get("mllama_images_total", -1),
               m.get("mllama_images_encoded_total", -1), m.get("mllama_cached_tokens_total", -1), m.get("mllama_prompt_tokens_total", -1),
               1e3 * m.get("mllama_step_seconds_max", 0)))
    finally:
        srv.stop()


def throughput(args):
    rates = {}
    for slots in (1, args.slots):
        srv = st.Server("-np", str(slots), "-t", str(args.threads))
        try:
            n = args.slots
            done = []
            t0 = time.time()
            threads = [threading.Thread(target=lambda: done.append(one(srv.url, 0, "Write a long story about a lighthouse.", [], args.tokens)[1]))
                       for _ in range(n)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            m = metrics(srv)
            gen = sum(done)
            step_s = m["mllama_step_seconds_total"]
            rates[slots] = gen / step_s if step_s > 0 else 0
            print("%d slot%s: %d requests, %d tokens in %.1f s wall, %.1f tokens/s in the engine's steps (%.1f wall)" %
                  (slots, "s" if slots > 1 else "", n, gen, time.time() - t0, rates[slots], gen / (time.time() - t0)))
        finally:
            srv.stop()
    print("%d slots / 1 slot: %.2fx" % (args.slots, rates[args.slots] / rates[1] if rates[1] else 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", help="model file (default: the demo model)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    if args.model:
        st.MODEL = args.model
    (throughput if args.throughput else mixed)(args)


if __name__ == "__main__":
    main()
