#!/usr/bin/env python3
"""Two mllama-servers behind HAProxy (Debian's package), one stopped under load: no request is lost
that the balancer could retry. The HAProxy configuration is written here (the README shows the
same settings): /health checks every 200 ms, the server that answers 503 or refuses connections
leaves the pool, retries on a refused or failed connection, an empty answer or a 503 go to the
other server (redispatch), and the servers finish their requests in flight when told to stop.

Load: 6 client threads, each sending requests one after another through HAProxy (both APIs,
streaming and not, with and without a picture) until 60 have been answered; after the 12th
answer a request with a long prompt goes straight to A (A takes prompts 2 tokens a step, so it
stays in flight a while) and A gets SIGTERM once its /metrics shows it in a slot. Every answer
must be a 200 with build/mllama's answer (the long one: B's answer to it); server A must exit 0
having had at least one request in flight when it stopped accepting (its log says how many it
finished), and server B must have answered after it stopped.

Prints PASS/FAIL lines and "N passed, N failed, N skipped"; a missing haproxy is a failure (CI
installs it)."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_test as st  # noqa: E402  (the servers, the clients, the reference answers)

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


CONFIG = """global
    maxconn 256
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout 503
    option http-server-close
frontend mllama
    bind 127.0.0.1:{front}
    default_backend servers
backend servers
    balance leastconn
    option httpchk GET /health
    http-check expect status 200
    default-server inter 200ms fall 1 rise 2
    server a 127.0.0.1:{a} check
    server b 127.0.0.1:{b} check
"""


def main():
    import openai
    if not os.path.exists(HAPROXY):
        print("FAIL haproxy: not installed (apt-get install haproxy)")
        print("0 passed, 1 failed, 0 skipped")
        sys.exit(1)
    requests = [("Describe this image.", ["circle.png"]), ("What colour is the triangle?", ["triangle.jpg"]), ("Hello, who are you?", [])]
    expected = {(p, tuple(i)): st.cli(p, i) for p, i in requests}
    a = st.Server("-np", "2", "-b", "2")   # prompts go in 2 tokens a step: A's requests last long enough to be stopped mid-way
    b = st.Server("-np", "2")
    front = free_port()
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(front=front, a=a.port, b=b.port))
    hap = subprocess.Popen([HAPROXY, "-f", cfg, "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ok = 0
    failures = []
    lock = threading.Lock()
    answered = []
    stopped_at = {}
    try:
        url = "http://127.0.0.1:%d" % front
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", front), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(1)   # both servers seen healthy (rise 2 at 200 ms)

        def client(k):
            import ollama
            import openai
            oc = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
            ol = ollama.Client(host=url)
            i = k
            while True:
                with lock:
                    if len(answered) >= 60:
                        return
                p, imgs = requests[i % len(requests)]
                kind = i % 4
                i += 1
                try:
                    if kind == 0:
                        got = oc.chat.completions.create(model=st.NAME, messages=st.openai_messages(p, imgs), temperature=0).choices[0].message.content
                    elif kind == 1:
                        got = "".join(c.choices[0].delta.content or "" for c in oc.chat.completions.create(
                            model=st.NAME, messages=st.openai_messages(p, imgs), temperature=0, stream=True) if c.choices)
                    elif kind == 2:
                        got = ol.chat(model=st.NAME, messages=st.ollama_messages(p, imgs), options={"temperature": 0}).message.content
                    else:
                        got = "".join(x.response for x in ol.generate(model=st.NAME, prompt=p, images=[st.b64(x) for x in imgs],
                                                                       options={"temperature": 0}, stream=True))
                    good = got == expected[(p, tuple(imgs))]
                except Exception as e:  # noqa: BLE001 - a lost request
                    good = False
                    got = "%s: %s" % (type(e).__name__, e)
                with lock:
                    answered.append(time.time())
                    if not good:
                        failures.append((p, kind, got))
                    if len(answered) == 12:
                        twelve.set()

        long_prompt = "Read these numbers: " + " ".join(str(i) for i in range(400))
        long_answer = {}

        def stopper():
            """After the 12th answer, a long prompt straight to A (it takes prompts 2 tokens a step,
            so it is in flight for a while), and SIGTERM to A once its /metrics counts it in a slot."""
            import http.client
            twelve.wait(300)
            before = st.metric(a, "mllama_prompt_tokens_total")
            c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=120)
            c.request("POST", "/v1/chat/completions", json.dumps({"model": st.NAME, "messages": st.openai_messages(long_prompt),
                                                                  "temperature": 0, "max_tokens": 4}), {"Content-Type": "application/json"})
            deadline = time.time() + 30
            while time.time() < deadline and st.metric(a, "mllama_prompt_tokens_total") < before + 400:
                time.sleep(0.002)
            stopped_at["t"] = time.time()
            a.proc.send_signal(signal.SIGTERM)
            r = c.getresponse()
            long_answer["a"] = (r.status, json.loads(r.read()))
            c.close()

        twelve = threading.Event()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(6)] + [threading.Thread(target=stopper)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        code_a = a.proc.wait(60)
        # the long request A finished while stopping, against the same request to B
        want_long = openai.OpenAI(base_url=b.url + "/v1", api_key="x", max_retries=0).chat.completions.create(
            model=st.NAME, messages=st.openai_messages(long_prompt), temperature=0, max_tokens=4)
        status, got_long = long_answer.get("a", (0, {}))
        if status != 200 or got_long["choices"][0]["message"]["content"] != want_long.choices[0].message.content or \
                got_long["usage"]["prompt_tokens"] != want_long.usage.prompt_tokens:
            failures.append(("the long request in flight on A", status, got_long, want_long.choices[0].message.content))
        m = re.search(r"finishing the (\d+) requests in flight", "".join(a.log))
        drained = int(m.group(1)) if m else -1
        after = sum(1 for t in answered if t > stopped_at.get("t", 1e18))
        ok = not failures and code_a == 0 and drained >= 1 and after >= 30 and b.proc.poll() is None
        print("%s two servers behind HAProxy, A stopped after 12 of %d answers: %d wrong or lost %s, A exited %s with %d requests "
              "in flight to finish at SIGTERM, %d answered after" % ("PASS" if ok else "FAIL", len(answered), len(failures), failures[:3],
                                                                        code_a, drained, after))
    finally:
        hap.terminate()
        hap.wait(10)
        a.stop()
        b.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (1 if ok else 0, 0 if ok else 1))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
