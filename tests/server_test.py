#!/usr/bin/env python3
"""mllama-server end to end, with the official clients: the server runs on a free loopback port with
the demo model; the official `openai` and `ollama` Python packages (pinned in
tests/requirements-server.txt, installed in build/venv by `make build/venv/ok`) and raw sockets
drive it. The expected answers come from build/mllama run on the same messages (greedy), not
from the server; the expected parameter counts from llama.cpp's GGUF reader (the gguf package).

Checks: non-streaming and streaming answers of both APIs equal build/mllama's, with one picture,
two pictures in one message, a picture in each of two messages, and none; structured answers
(OpenAI response_format json_schema through the client's own parse() with a pydantic model,
json_object; Ollama format with a schema and "json") validate with jsonschema and equal
build/mllama --json-schema's, and schemas the server cannot follow get 400 naming why; a returning
conversation reuses its prefix (cached tokens reported; Ollama's prompt_eval_count is the whole
prompt, as Ollama counts it) and answers as build/mllama's chat and a fresh server do; the
listings give the parameters and quantization of a GGUF, a quantized GGUF, the two-file layout
and a Hugging Face folder; every bad request (malformed JSON, wrong types, unknown model, too
many pictures, an undecodable or huge picture, an http URL, a body over the limit, a head over
the limit, a slow client, bad auth) gets its status and error object and the server keeps
serving; a client that disconnects cancels its request; SIGTERM finishes the request in flight
and exits 0.

Run: build/venv/bin/python tests/server_test.py (make test runs it as build/tests/server_test).
Prints PASS/FAIL/SKIP lines and "N passed, N failed, N skipped". Environment: MLLAMA_SERVER and
MLLAMA_CLI to test other builds."""
import base64
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.environ.get("MLLAMA_SERVER", os.path.join(ROOT, "build", "mllama-server"))
CLI = os.environ.get("MLLAMA_CLI", os.path.join(ROOT, "build", "mllama"))
QUANTIZE = os.path.join(ROOT, "build", "quantize")
MODEL = os.path.join(ROOT, "models", "mllama-demo.gguf")
IMAGES = os.path.join(ROOT, "examples", "images")
NAME = "mllama-demo"

results = {"passed": 0, "failed": 0, "skipped": 0}


def case(fn):
    """Runs one check; an exception or a failed assert is a failure with its message."""
    try:
        fn()
        results["passed"] += 1
        print("PASS", fn.__name__, flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        results["failed"] += 1
        print("FAIL %s: %s: %s" % (fn.__name__, type(e).__name__, e), flush=True)


def summary():
    print("%d passed, %d failed, %d skipped" % (results["passed"], results["failed"], results["skipped"]), flush=True)
    sys.exit(1 if results["failed"] else 0)


try:
    import gguf  # noqa: F401  (llama.cpp's GGUF reader: the parameter counts the listings must give)
    import jsonschema  # someone else's validator for the structured answers
    import ollama
    import openai
    import pydantic  # the models the official clients turn into JSON Schemas and parse answers with
except ImportError as e:
    print("FAIL the official clients: %s (make build/venv/ok installs tests/requirements-server.txt)" % e)
    results["failed"] += 1
    summary()


class Server:
    """build/mllama-server on a free loopback port (--port 0; the port is read from its first line)."""

    def __init__(self, *args, model=MODEL, ready_timeout=60):
        self.proc = subprocess.Popen([SERVER, "-m", model, "--port", "0", "-t", "1"] + list(args),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
        self.log = []
        line = self.proc.stderr.readline()
        self.log.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError("the server did not start: %r" % line)
        self.port = int(m.group(1))
        self.url = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._drain, daemon=True).start()
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            if self.request("GET", "/health")[0] == 200:
                return
            time.sleep(0.05)
        raise RuntimeError("the server did not become ready")

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """One request on a new connection: (status, headers, body bytes)."""
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            h = {"Content-Type": "application/json"}
            h.update(headers or {})
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        except (ConnectionError, OSError):
            return 0, {}, b""
        finally:
            c.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return -9
        return self.proc.returncode


def b64(name):
    with open(os.path.join(IMAGES, name), "rb") as f:
        return base64.b64encode(f.read()).decode()


def data_url(name):
    return "data:image/png;base64," + b64(name)


def cli(prompt, images=(), system=None, extra=()):
    """build/mllama's greedy answer."""
    args = [CLI, "-m", MODEL, "-q", "-t", "1"] + list(extra)
    for i in images:
        args += ["--image", os.path.join(IMAGES, i)]
    if system:
        args += ["--system", system]
    out = subprocess.run(args + ["-p", prompt], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout[:-1] if out.stdout.endswith("\n") else out.stdout


def cli_chat(lines):
    """build/mllama -i: the answer of each turn (one line each)."""
    out = subprocess.run([CLI, "-m", MODEL, "-q", "-t", "1", "-i"], input="\n".join(lines + ["/quit"]) + "\n",
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("\n")[:-1]


def png(width, height):
    """A white PNG (written here with zlib, so a huge picture is a small file)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\x00" + b"\xff" * (width * 3) for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def openai_client(server, key="unused"):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def openai_messages(text, images=()):
    if not images:
        return [{"role": "user", "content": text}]
    return [{"role": "user", "content": [{"type": "text", "text": text}] +
             [{"type": "image_url", "image_url": {"url": data_url(i)}} for i in images]}]


def ollama_messages(text, images=()):
    m = {"role": "user", "content": text}
    if images:
        m["images"] = [b64(i) for i in images]
    return [m]


# Structured output: what the official clients send for these models (the openai package's strict
# schema, with $defs/$ref for the enum; pydantic's own for Ollama).
if "pydantic" in globals():
    class Colour(str, __import__("enum").Enum):
        red = "red"
        green = "green"
        blue = "blue"
        yellow = "yellow"

    class ShapeAnswer(pydantic.BaseModel):
        shape: __import__("typing").Literal["circle", "square", "triangle", "star"]
        colour: Colour
        position: __import__("typing").Literal["left", "right", "top", "bottom", "centre"]

CAPTION_SCHEMA = {"type": "object", "properties": {"caption": {"type": "string", "maxLength": 40}, "count": {"type": "integer", "minimum": 1,
                  "maximum": 3}}, "required": ["caption", "count"], "additionalProperties": False}


def cli_json(prompt, images, schema):
    """build/mllama --json-schema: the CLI's greedy structured answer, the server's reference."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
    try:
        return cli(prompt, images, extra=["--json-schema", f.name])
    finally:
        os.unlink(f.name)


# The requests the answers are compared on: (prompt, pictures)
CASES = [
    ("Describe this image.", ["circle.png"]),
    ("What colour is the triangle?", ["triangle.jpg"]),
    ("Which picture shows a red circle?", ["three-shapes.png", "circle.png"]),
    ("Hello, who are you?", []),
]


def main():
    if not os.path.exists(SERVER) or not os.path.exists(CLI):
        print("FAIL programs: %s and %s are needed (make examples)" % (SERVER, CLI))
        results["failed"] += 1
        summary()
    expected = {(p, tuple(i)): cli(p, i) for p, i in CASES}
    srv = Server("-np", "2", "--max-images", "2", "--max-pixels", "1000000", "--max-body", "4000000",
                 "--max-header-bytes", "4096", "--request-timeout", "2", "-v")   # -v: every request's log line too
    try:
        run_cases(srv, expected)
    finally:
        code = srv.stop()
        if code != 0:
            print("FAIL server exit: status %s; log:\n%s" % (code, "".join(srv.log[-20:])))
            results["failed"] += 1
    case(check_quantized_described)
    case(check_disconnect_cancels)
    case(check_api_key)
    case(check_sigterm_drains)
    summary()


def run_cases(srv, expected):
    oc = openai_client(srv)
    ol = ollama.Client(host=srv.url)

    def openai_equal_cli():
        for (p, imgs), want in expected.items():
            r = oc.chat.completions.create(model=NAME, messages=openai_messages(p, imgs), temperature=0)
            got = r.choices[0].message.content
            assert got == want, "%r %r: server %r, cli %r" % (p, imgs, got, want)
            assert r.choices[0].finish_reason == "stop" and r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0
            assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

    def openai_stream_equal_cli():
        for (p, imgs), want in expected.items():
            chunks = list(oc.chat.completions.create(model=NAME, messages=openai_messages(p, imgs), temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
            assert text == want, "%r: server %r, cli %r" % (p, text, want)
            assert finishes == ["stop"], finishes
            assert chunks[0].choices[0].delta.role == "assistant"
            assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0, chunks[-1]
            assert len({c.id for c in chunks}) == 1

    def ollama_chat_equal_cli():
        for (p, imgs), want in expected.items():
            r = ol.chat(model=NAME, messages=ollama_messages(p, imgs), options={"temperature": 0})
            assert r.message.content == want, "%r: server %r, cli %r" % (p, r.message.content, want)
            assert r.done and r.done_reason == "stop" and r.eval_count > 0 and r.prompt_eval_count > 0
            assert r.total_duration >= r.eval_duration > 0

    def ollama_chat_stream_equal_cli():
        for (p, imgs), want in expected.items():
            parts = list(ol.chat(model=NAME + ":latest", messages=ollama_messages(p, imgs), options={"temperature": 0}, stream=True))
            text = "".join(x.message.content for x in parts)
            assert text == want, "%r: server %r, cli %r" % (p, text, want)
            assert parts[-1].done and parts[-1].done_reason == "stop" and not any(x.done for x in parts[:-1])

    def ollama_generate_equal_cli():
        for (p, imgs), want in expected.items():
            r = ol.generate(model=NAME, prompt=p, images=[b64(i) for i in imgs], options={"temperature": 0})
            assert r.response == want, "%r: server %r, cli %r" % (p, r.response, want)
            text = "".join(x.response for x in ol.generate(model=NAME, prompt=p, images=[b64(i) for i in imgs],
                                                            options={"temperature": 0}, stream=True))
            assert text == want, "%r stream: server %r, cli %r" % (p, text, want)

    def ollama_generate_raw():
        prompt = "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n<|image|>Describe this image.<|eot_id|>" \
                 "<|start_header_id|>assistant<|end_header_id|>\n\n"
        r = ol.generate(model=NAME, prompt=prompt, raw=True, images=[b64("circle.png")], options={"temperature": 0})
        assert r.response == expected[("Describe this image.", ("circle.png",))], r.response

    def limits_and_stop():
        r = oc.chat.completions.create(model=NAME, messages=openai_messages("Describe this image.", ["circle.png"]), temperature=0, max_tokens=2)
        assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 2, r
        full = expected[("Describe this image.", ("circle.png",))]
        word = full.split()[2]
        r = oc.chat.completions.create(model=NAME, messages=openai_messages("Describe this image.", ["circle.png"]), temperature=0, stop=[word])
        assert r.choices[0].message.content == full[:full.index(word)], (r.choices[0].message.content, full)
        r = ol.chat(model=NAME, messages=ollama_messages("Describe this image.", ["circle.png"]), options={"temperature": 0, "num_predict": 2})
        assert r.done_reason == "length" and r.eval_count == 2, r

    def seeded_sampling_repeats():
        kw = dict(model=NAME, messages=openai_messages("Describe this image.", ["circle.png"]), temperature=1.5, seed=7)
        assert oc.chat.completions.create(**kw).choices[0].message.content == oc.chat.completions.create(**kw).choices[0].message.content

    def returning_conversation_reuses_prefix():
        """Turn 2 resends turn 1: its prefix comes from the slot's KV cache (cached tokens), and the
        answer is build/mllama's chat and a fresh server's. Ollama counts the whole prompt (its
        runners count the prompt's inputs before the cache is looked up), as OpenAI's prompt_tokens."""
        q1, q2 = "Describe this image.", "What colour is the circle?"
        want = cli_chat(["/image " + os.path.join(IMAGES, "circle.png"), q1, q2])
        assert len(want) == 2, want
        turn1 = openai_messages(q1, ["circle.png"])
        r1 = oc.chat.completions.create(model=NAME, messages=turn1, temperature=0)
        assert r1.choices[0].message.content == want[0], (r1.choices[0].message.content, want[0])
        turn2 = turn1 + [{"role": "assistant", "content": want[0]}, {"role": "user", "content": q2}]
        r2 = oc.chat.completions.create(model=NAME, messages=turn2, temperature=0)
        assert r2.choices[0].message.content == want[1], (r2.choices[0].message.content, want[1])
        cached = r2.usage.prompt_tokens_details.cached_tokens
        assert r1.usage.prompt_tokens - 1 <= cached < r2.usage.prompt_tokens, \
            "turn 2 reused %d of turn 1's %d prompt tokens" % (cached, r1.usage.prompt_tokens)
        oturn2 = ollama_messages(q1, ["circle.png"]) + [{"role": "assistant", "content": want[0]}, {"role": "user", "content": q2}]
        o2 = ol.chat(model=NAME, messages=oturn2, options={"temperature": 0})
        assert o2.message.content == want[1] and o2.prompt_eval_count == r2.usage.prompt_tokens, (o2.message.content, o2.prompt_eval_count)
        fresh = Server("-np", "1")
        try:
            r3 = openai_client(fresh).chat.completions.create(model=NAME, messages=turn2, temperature=0)
            assert r3.choices[0].message.content == want[1] and r3.usage.prompt_tokens_details.cached_tokens == 0, r3
            assert r3.usage.prompt_tokens == r2.usage.prompt_tokens
            # the same conversation again: all of it but the last prompt token from the cache
            r4 = openai_client(fresh).chat.completions.create(model=NAME, messages=turn2, temperature=0)
            assert r4.choices[0].message.content == want[1] and r4.usage.prompt_tokens_details.cached_tokens == r4.usage.prompt_tokens - 1, r4
            assert metric(fresh, "mllama_cached_tokens_total") == r4.usage.prompt_tokens - 1
        finally:
            fresh.stop()

    def pictures_in_two_messages():
        """A conversation with a picture in each of two user turns: build/mllama's chat answer."""
        q1, q2 = "Describe this image.", "Which picture shows a triangle?"
        want = cli_chat(["/image " + os.path.join(IMAGES, "circle.png"), q1, "/image " + os.path.join(IMAGES, "triangle.jpg"), q2])
        assert len(want) == 2, want
        msgs = openai_messages(q1, ["circle.png"]) + [{"role": "assistant", "content": want[0]}] + openai_messages(q2, ["triangle.jpg"])
        r = oc.chat.completions.create(model=NAME, messages=msgs, temperature=0)
        assert r.choices[0].message.content == want[1], (r.choices[0].message.content, want[1])
        omsgs = ollama_messages(q1, ["circle.png"]) + [{"role": "assistant", "content": want[0]}] + ollama_messages(q2, ["triangle.jpg"])
        text = "".join(x.message.content for x in ol.chat(model=NAME, messages=omsgs, options={"temperature": 0}, stream=True))
        assert text == want[1], (text, want[1])

    def listings():
        assert [m.id for m in oc.models.list().data] == [NAME]
        assert [m.model for m in ol.list().models] == [NAME]
        assert "vision" in ol.show(NAME).capabilities
        assert [m.model for m in ol.ps().models] == [NAME]
        st, _, body = srv.request("GET", "/api/version")
        assert st == 200 and json.loads(body)["version"]
        st, _, body = srv.request("GET", "/metrics")
        text = body.decode()
        assert st == 200 and re.search(r"^mllama_requests_total \d+", text, re.M) and "mllama_image_store_budget_bytes" in text, text[:300]
        check_weights_described(srv, *gguf_weights(MODEL))

    def bad_request(name, method, path, body, status, code=None, ollama_shape=False, headers=None):
        st, hdr, data = srv.request(method, path, body, headers)
        assert st == status, "%s: status %d, want %d: %r" % (name, st, status, data[:300])
        err = json.loads(data)["error"]
        if ollama_shape:
            assert isinstance(err, str) and err, name
        else:
            assert set(err) == {"message", "type", "param", "code"} and err["message"], (name, err)
            if code:
                assert err["code"] == code, (name, err)
        assert srv.request("GET", "/health")[0] == 200, "%s: the server stopped serving" % name

    def bad_requests():
        big = base64.b64encode(png(1100, 1000)).decode()
        hello = [{"role": "user", "content": "hi"}]
        chat = "/v1/chat/completions"
        bad_request("malformed JSON", "POST", chat, b'{"model": "mllama-demo", "messages": [', 400, "invalid_json")
        bad_request("malformed JSON (Ollama)", "POST", "/api/chat", b'{"model": ', 400, ollama_shape=True)
        bad_request("wrong type", "POST", chat, {"model": NAME, "messages": hello, "temperature": "warm"}, 400, "invalid_type")
        bad_request("wrong type (Ollama)", "POST", "/api/chat", {"model": NAME, "messages": hello, "options": {"num_predict": "9"}}, 400, ollama_shape=True)
        bad_request("unknown model", "POST", chat, {"model": "gpt-4o", "messages": hello}, 404, "model_not_found")
        bad_request("unknown model (Ollama)", "POST", "/api/generate", {"model": "llama3", "prompt": "hi"}, 404, ollama_shape=True)
        bad_request("too many pictures", "POST", chat, {"model": NAME, "messages": openai_messages("x", ["circle.png"] * 3)}, 400, "too_many_images")
        bad_request("too many pictures (Ollama)", "POST", "/api/chat", {"model": NAME, "messages": ollama_messages("x", ["circle.png"] * 3)}, 400,
                    ollama_shape=True)
        bad_request("undecodable picture", "POST", chat, {"model": NAME, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"not a picture").decode()}}]}]}, 400,
            "invalid_image")
        bad_request("cut picture", "POST", "/api/chat", {"model": NAME, "messages": [{"role": "user", "content": "x",
                    "images": [base64.b64encode(base64.b64decode(b64("circle.png"))[:200]).decode()]}]}, 400, ollama_shape=True)
        bad_request("huge picture", "POST", chat, {"model": NAME, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + big}}]}]}, 400, "image_too_large")
        bad_request("http URL", "POST", chat, {"model": NAME, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]}, 400, "image_url_not_supported")
        bad_request("body over the limit", "POST", chat, b"{" + b" " * 4000001 + b"}", 413, "request_too_large")
        bad_request("head over the limit", "GET", "/v1/models", None, 431, headers={"X-Big": "a" * 5000})
        bad_request("unknown path", "GET", "/v1/nothing", None, 404)
        # a body bigger than the first read moves the connection's buffer: the answer still names the path
        st, _, data = srv.request("POST", "/api/nothing", b"{" + b" " * 100000 + b"}")
        assert st == 404 and json.loads(data)["error"] == "no endpoint at /api/nothing", (st, data[:200])
        st, _, data = srv.request("PUT", "/v1/chat/completions", b"{" + b" " * 100000 + b"}")
        assert st == 405 and "PUT is not served on /v1/chat/completions" in json.loads(data)["error"]["message"], (st, data[:200])
        bad_request("wrong method", "GET", chat, None, 405)
        bad_request("tools", "POST", chat, {"model": NAME, "messages": hello, "tools": [{"type": "function", "function": {"name": "f"}}]}, 400,
                    "unsupported_parameter")
        # the official clients raise their own errors for these
        try:
            oc.chat.completions.create(model="nope", messages=hello)
            raise AssertionError("no error")
        except openai.NotFoundError as e:
            assert e.status_code == 404 and e.body["code"] == "model_not_found"
        try:
            ol.chat(model="nope", messages=hello)
            raise AssertionError("no error")
        except ollama.ResponseError as e:
            assert e.status_code == 404 and "not found" in e.error

    def slow_client_gets_408():
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":")   # and then nothing
        s.settimeout(10)
        t = time.time()
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        assert data.startswith(b"HTTP/1.1 408") and time.time() - t < 6, data[:100]
        assert srv.request("GET", "/health")[0] == 200

    def many_idle_connections():
        # Hundreds of keep-alive connections answered at once go back to the dispatcher together; its
        # lists of idle connections and of poll entries must grow together (they once did not: a heap
        # overflow that ASan reports here, and glibc now and then under load).
        socks = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(300)]
        try:
            for _ in range(3):
                for s in socks:
                    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                for s in socks:
                    s.settimeout(10)
                    assert s.recv(4096).startswith(b"HTTP/1.1 200"), "a kept connection's request was not answered"
        finally:
            for s in socks:
                s.close()
        assert srv.request("GET", "/health")[0] == 200


    def openai_json_schema():
        # the official client's own path: a pydantic model in, its strict schema sent, the answer parsed
        # and validated back into the model by the client (pydantic), and by jsonschema here
        msgs = openai_messages("Describe this image.", ["circle.png"])
        r = oc.chat.completions.parse(model=NAME, messages=msgs, temperature=0, response_format=ShapeAnswer)
        got = r.choices[0].message
        assert r.choices[0].finish_reason == "stop" and isinstance(got.parsed, ShapeAnswer), r
        from openai.lib._pydantic import to_strict_json_schema
        schema = to_strict_json_schema(ShapeAnswer)
        assert "$defs" in schema, schema   # the enum travels by $ref, as the client writes it
        jsonschema.validate(json.loads(got.content), schema)
        assert got.content == cli_json("Describe this image.", ["circle.png"], schema), (got.content, "the CLI's answer differs")
        # a plain schema with bounds, streamed: the chunks join into the CLI's answer
        rf = {"type": "json_schema", "json_schema": {"name": "caption", "schema": CAPTION_SCHEMA, "strict": True}}
        chunks = list(oc.chat.completions.create(model=NAME, messages=msgs, temperature=0, stream=True, response_format=rf))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        jsonschema.validate(json.loads(text), CAPTION_SCHEMA)
        assert text == cli_json("Describe this image.", ["circle.png"], CAPTION_SCHEMA), text
        # strict false is followed all the same
        rf["json_schema"]["strict"] = False
        r = oc.chat.completions.create(model=NAME, messages=msgs, temperature=0, response_format=rf)
        assert r.choices[0].message.content == text

    def openai_json_object():
        # any JSON object: sampled (greedy never closes the demo model's first key), so several seeds;
        # every finished answer is a JSON object, a cut one at least starts as one
        msgs = openai_messages("Describe this image.", ["circle.png"])
        finished = 0
        for seed in range(1, 9):
            r = oc.chat.completions.create(model=NAME, messages=msgs, temperature=1.5, seed=seed, max_tokens=60,
                                           response_format={"type": "json_object"})
            text = r.choices[0].message.content
            if r.choices[0].finish_reason == "stop":
                assert isinstance(json.loads(text), dict), text
                finished += 1
            else:
                assert r.choices[0].finish_reason == "length" and text.startswith("{"), (r.choices[0].finish_reason, text)
        assert finished > 0, "no seed of 8 finished a JSON object"

    def ollama_format():
        schema = ShapeAnswer.model_json_schema()
        for fn in ("chat", "generate"):
            if fn == "chat":
                r = ol.chat(model=NAME, messages=ollama_messages("Describe this image.", ["triangle.jpg"]), format=schema,
                            options={"temperature": 0})
                text = r.message.content
            else:
                r = ol.generate(model=NAME, prompt="Describe this image.", images=[b64("triangle.jpg")], format=schema,
                                options={"temperature": 0})
                text = r.response
            assert r.done_reason == "stop", r
            jsonschema.validate(json.loads(text), schema)
            ShapeAnswer.model_validate_json(text)
            assert text == cli_json("Describe this image.", ["triangle.jpg"], schema), (fn, text)
        finished = 0
        for seed in range(1, 9):
            r = ol.chat(model=NAME, messages=ollama_messages("Describe this image.", ["circle.png"]), format="json",
                        options={"temperature": 1.5, "seed": seed, "num_predict": 60})
            if r.done_reason == "stop":
                assert isinstance(json.loads(r.message.content), dict), r.message.content
                finished += 1
            else:
                assert r.message.content.startswith("{"), r.message.content
        assert finished > 0, "no seed of 8 finished a JSON object"

    def structured_bad_requests():
        hello = [{"role": "user", "content": "hi"}]
        chat = "/v1/chat/completions"

        def rf(schema, **kw):
            return {"type": "json_schema", "json_schema": dict({"name": "x", "schema": schema}, **kw)}
        for name, body, code, words in (
                ("unsupported keyword", {"response_format": rf({"type": "object", "patternProperties": {"^a": {}}})}, "invalid_schema",
                 "patternProperties"),
                ("schema not an object", {"response_format": rf([1])}, "invalid_type", "schema"),
                ("no schema", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "invalid_value", "schema"),
                ("no name", {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}}}, "invalid_value", "name"),
                ("bad name", {"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": {}}}}, "invalid_value", "name"),
                ("unknown type", {"response_format": {"type": "yaml"}}, "invalid_value", "yaml"),
                ("strict not a boolean", {"response_format": rf({"type": "object"}, strict="yes")}, "invalid_type", "strict"),
                ("a schema nothing satisfies", {"response_format": rf({"type": "integer", "minimum": 5, "maximum": 2})}, "invalid_schema", "")):
            st, _, data = srv.request("POST", chat, dict({"model": NAME, "messages": hello}, **body))
            err = json.loads(data)["error"]
            assert st == 400 and err["code"] == code and words in err["message"], (name, st, err)
            assert err["param"].startswith("response_format"), (name, err)
        for name, fmt, words in (("unknown format", "yaml", "yaml"), ("unsupported keyword", {"type": "object", "not": {}}, "not"),
                                 ("wrong type", 5, "format")):
            for path, body in (("/api/chat", {"messages": hello}), ("/api/generate", {"prompt": "hi"})):
                st, _, data = srv.request("POST", path, dict({"model": NAME, "format": fmt}, **body))
                err = json.loads(data)["error"]
                assert st == 400 and isinstance(err, str) and words in err, (name, path, st, err)
        try:
            oc.chat.completions.create(model=NAME, messages=hello, response_format=rf({"type": "string", "format": "ipv4"}))
            raise AssertionError("no error")
        except openai.BadRequestError as e:
            assert e.status_code == 400 and "format" in e.body["message"], e.body
        assert srv.request("GET", "/health")[0] == 200

    for fn in (openai_equal_cli, openai_stream_equal_cli, ollama_chat_equal_cli, ollama_chat_stream_equal_cli, ollama_generate_equal_cli,
               ollama_generate_raw, limits_and_stop, seeded_sampling_repeats, returning_conversation_reuses_prefix, pictures_in_two_messages,
               listings, bad_requests, openai_json_schema, openai_json_object, ollama_format, structured_bad_requests,
               slow_client_gets_408, many_idle_connections):
        case(fn)


def gguf_weights(path):
    """A GGUF file's tensor elements and general.file_type's name, read with llama.cpp's own reader
    (the gguf package), not the server's."""
    r = gguf.GGUFReader(path)
    n = sum(int(t.n_elements) for t in r.tensors)
    f = r.fields.get("general.file_type")
    name = None
    if f is not None:
        name = gguf.LlamaFileType(int(f.parts[f.data[0]][0])).name.replace("MOSTLY_", "").replace("ALL_", "")
    return n, name


def human_count(n):
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= div:
            return "%.1f%s" % (n / div, unit)
    return str(n)


def safetensors_weights(folder):
    """A Hugging Face folder's tensor elements and the dtype of most of its matrices, read from the
    safetensors headers with Python's json."""
    n, by_type = 0, {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, name), "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        for key, t in header.items():
            if key == "__metadata__":
                continue
            k = 1
            for d in t["shape"]:
                k *= d
            n += k
            if len(t["shape"]) >= 2:
                by_type[t["dtype"]] = by_type.get(t["dtype"], 0) + k
    return n, max(by_type, key=by_type.get)


def check_weights_described(srv, n, quant):
    """/api/show and /api/tags give the parameters and the quantization of the files served."""
    show = ollama.Client(host=srv.url).show(NAME)
    assert show.modelinfo["general.parameter_count"] == n, (show.modelinfo, n)
    assert show.details.parameter_size == human_count(n) and show.details.quantization_level == quant, (show.details, n, quant)
    tags = ollama.Client(host=srv.url).list().models[0].details
    assert tags.parameter_size == human_count(n) and tags.quantization_level == quant, tags


def check_quantized_described():
    """The listings' parameters and quantization for a Q8_0 copy of the demo model (build/quantize),
    the two-file layout (both files counted) and a Hugging Face folder."""
    tmp = tempfile.mkdtemp()
    try:
        q8 = os.path.join(tmp, NAME + ".gguf")
        out = subprocess.run([QUANTIZE, MODEL, q8, "q8_0"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert gguf_weights(q8) == (gguf_weights(MODEL)[0], "Q8_0"), gguf_weights(q8)
        fixtures = os.path.join(ROOT, "tests", "fixtures")
        text = os.path.join(fixtures, "demo", "mllama-demo-text.gguf")
        proj = os.path.join(fixtures, "demo", "mllama-demo-proj.gguf")
        folder = os.path.join(fixtures, "mllama", "gqa", "hf")
        for args, (n, quant) in (([q8], gguf_weights(q8)),
                                 ([text, "--mmproj", proj], (gguf_weights(text)[0] + gguf_weights(proj)[0], gguf_weights(text)[1])),
                                 ([folder], safetensors_weights(folder))):
            srv = Server("-a", NAME, *args[1:], model=args[0])
            try:
                check_weights_described(srv, n, quant)
            finally:
                assert srv.stop() == 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def metric(srv, name):
    st, _, body = srv.request("GET", "/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M)
    return float(m.group(1)) if m else -1


def check_disconnect_cancels():
    """Clients that leave while their requests wait are cancelled and free the queue; the others are answered.

    One slot and 12 picture requests at once (the demo model answers in milliseconds, so the
    requests that leave are those still queued): 4 clients read their answers, 8 close their
    connection right after sending. Then a client leaves while its long prompt is going into the
    slot (2 tokens a step): the request is cancelled, not finished, and the slot is free again."""
    srv = Server("-np", "1", "-b", "2")
    try:
        want = cli("Describe this image.", ["circle.png"])
        before = metric(srv, "mllama_requests_cancelled_total")
        body = json.dumps({"model": NAME, "stream": False, "options": {"temperature": 0},
                           "messages": ollama_messages("Describe this image.", ["circle.png"])}).encode()
        head = b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
        socks = []
        for i in range(12):
            s = socket.create_connection(("127.0.0.1", srv.port))
            s.sendall(head + body)
            socks.append(s)
        for s in socks[4:]:
            s.close()
        for s in socks[:4]:
            s.settimeout(60)
            data = b""
            while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + int(re.search(rb"Content-Length: (\d+)", data).group(1)):
                chunk = s.recv(65536)
                assert chunk, data
                data += chunk
            s.close()
            assert json.loads(data.split(b"\r\n\r\n", 1)[1])["message"]["content"] == want
        deadline = time.time() + 30
        while time.time() < deadline and (metric(srv, "mllama_busy_slots") != 0 or metric(srv, "mllama_queue_length") != 0):
            time.sleep(0.05)
        cancelled = metric(srv, "mllama_requests_cancelled_total") - before
        assert 1 <= cancelled <= 8, "cancelled %s" % cancelled
        assert metric(srv, "mllama_busy_slots") == 0 and metric(srv, "mllama_queue_length") == 0
        # a client that leaves while its request is in the slot (a long prompt, taken 2 tokens a step)
        before = {k: metric(srv, k) for k in ("mllama_prompt_tokens_total", "mllama_requests_cancelled_total", "mllama_requests_finished_total")}
        long_body = json.dumps({"model": NAME, "stream": True, "messages": [{"role": "user", "content": " ".join(str(i) for i in range(400))}]})
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"POST /api/chat HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(long_body), long_body.encode()))
        deadline = time.time() + 30
        while time.time() < deadline and metric(srv, "mllama_prompt_tokens_total") < before["mllama_prompt_tokens_total"] + 400:
            time.sleep(0.005)
        assert metric(srv, "mllama_busy_slots") == 1
        s.close()
        while time.time() < deadline and metric(srv, "mllama_busy_slots") != 0:
            time.sleep(0.005)
        assert metric(srv, "mllama_requests_cancelled_total") == before["mllama_requests_cancelled_total"] + 1
        assert metric(srv, "mllama_requests_finished_total") == before["mllama_requests_finished_total"]
        assert ollama.Client(host=srv.url).chat(model=NAME, messages=ollama_messages("Describe this image.", ["circle.png"]),
                                                options={"temperature": 0}).message.content == want
    finally:
        assert srv.stop() == 0


def check_api_key():
    srv = Server("--api-key", "sk-test")
    try:
        hello = [{"role": "user", "content": "hi"}]
        st, hdr, body = srv.request("POST", "/v1/chat/completions", {"model": NAME, "messages": hello})
        assert st == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", body
        st, _, _ = srv.request("GET", "/api/tags", headers={"Authorization": "Bearer sk-wrong"})
        assert st == 401
        assert srv.request("GET", "/health")[0] == 200   # probes need no key
        try:
            openai_client(srv, "sk-wrong").models.list()
            raise AssertionError("no error")
        except openai.AuthenticationError:
            pass
        r = openai_client(srv, "sk-test").chat.completions.create(model=NAME, messages=hello, temperature=0)
        assert r.choices[0].message.content == cli("hi")
        assert ollama.Client(host=srv.url, headers={"Authorization": "Bearer sk-test"}).list().models[0].model == NAME
    finally:
        assert srv.stop() == 0


def check_sigterm_drains():
    """SIGTERM during a streamed answer: the answer completes, new connections are refused, exit 0."""
    srv = Server("-np", "1")
    want = cli("Describe this image.", ["circle.png"])
    got = {}

    def client():
        c = openai_client(srv)
        parts = []
        for ch in c.chat.completions.create(model=NAME, messages=openai_messages("Describe this image.", ["circle.png"]), temperature=0,
                                            stream=True):
            if ch.choices and ch.choices[0].delta.content:
                parts.append(ch.choices[0].delta.content)
                got.setdefault("first", time.time())
        got["text"] = "".join(parts)

    t = threading.Thread(target=client)
    t.start()
    deadline = time.time() + 30
    while "first" not in got and time.time() < deadline and t.is_alive():
        time.sleep(0.001)
    srv.proc.send_signal(signal.SIGTERM)
    t.join(60)
    code = srv.proc.wait(30)
    assert got.get("text") == want, (got, want)
    assert code == 0, code
    assert srv.request("GET", "/health")[0] == 0   # nothing listens any more


if __name__ == "__main__":
    main()
