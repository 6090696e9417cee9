#!/usr/bin/env python3
"""End-to-end test of `ferrox serve` with the official `openai` client.

usage: tests/test_server.py [PATH/TO/ferrox]     (default: build/bin/ferrox)

Starts the server on free ports with the real default models (FX_MODELS_DIR,
default models/): Gemma 3 270M for completions, batching, hostile input,
disconnects and metrics; SmolLM2-135M-Instruct (with --api-key) for chat,
authentication and the queue limit. Exit 77 (skip) when a model or the
`openai` package is missing, unless FX_REQUIRE_MODELS=1. Prints one line per
check and "N passed, N failed".
"""
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

from server_harness import BIN, GEMMA, REQUIRE, SAN, SMOL, Checks, Server, need

# Under ASan (scripts/test.sh sets FX_SANITIZE_RUN) the forward pass is ~10x
# slower: fewer concurrent clients and tokens, same checks.
N_CONC, N_TOK = (16, 6) if SAN else (32, 16)

(openai,) = need("test_server", [GEMMA, SMOL], ["openai"])
T = Checks(log_bytes=3000)
check = T.check


def metric(m, name):
    """The value of a metric, whatever its labels."""
    for k, v in m.items():
        if k == name or k.startswith(name + "{"):
            return v
    raise KeyError(name)


PROMPTS = [
    "The history of the printing press",
    "Once upon a time, in a small village",
    "The three laws of thermodynamics are",
    "def fibonacci(n):",
    "The capital of France is Paris. The capital of Germany is",
    "In 1969, the first humans",
    "A recipe for pancakes: first,",
    "Photosynthesis is the process by which",
]

# ---------------------------------------------------------------- completions


def run_gemma():
    srv = Server(GEMMA, "--parallel", "8", "--ctx-size", "1024", "--max-body", "1MiB",
                 "--queue", "64")
    T.server = srv
    cl = srv.client()
    lone = {}

    def completions_basic():
        r = cl.completions.create(model="anything", prompt=PROMPTS[0], max_tokens=12,
                                  temperature=0)
        ch = r.choices[0]
        assert ch.finish_reason == "length", ch.finish_reason
        assert r.usage.completion_tokens == 12, r.usage
        assert r.usage.prompt_tokens > 3
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
        assert len(ch.text) > 10, ch.text
        lone[0] = ch.text

    def completions_stream():
        text, usage, finish = "", None, None
        chunks = cl.completions.create(model="x", prompt=PROMPTS[0], max_tokens=12,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
        for c in chunks:
            if c.usage:
                usage = c.usage
            for ch in c.choices:
                text += ch.text
                finish = ch.finish_reason or finish
        assert text == lone[0], (text, lone[0])
        assert finish == "length", finish
        assert usage and usage.completion_tokens == 12, usage

    def stop_strings():
        full = cl.completions.create(model="x", prompt=PROMPTS[1], max_tokens=24,
                                     temperature=0).choices[0].text
        # a stop string that spans token boundaries, starting mid-word
        i = len(full) // 3
        stop = full[i:i + 7]
        want = full[:full.index(stop)]
        r = cl.completions.create(model="x", prompt=PROMPTS[1], max_tokens=24, temperature=0,
                                  stop=[stop, "never-appears-xyz"])
        assert r.choices[0].text == want, (r.choices[0].text, want, stop)
        assert r.choices[0].finish_reason == "stop"
        text = ""
        for c in cl.completions.create(model="x", prompt=PROMPTS[1], max_tokens=24,
                                       temperature=0, stop=stop, stream=True):
            text += "".join(ch.text for ch in c.choices)
        assert text == want, (text, want)
        assert stop not in text

    def sampling_options():
        a = cl.completions.create(model="x", prompt=PROMPTS[2], max_tokens=8, temperature=0.9,
                                  top_p=0.9, seed=42, n=2, extra_body={"top_k": 40, "min_p": 0.05})
        b = cl.completions.create(model="x", prompt=PROMPTS[2], max_tokens=8, temperature=0.9,
                                  top_p=0.9, seed=42, n=2, extra_body={"top_k": 40, "min_p": 0.05})
        assert [c.text for c in a.choices] == [c.text for c in b.choices]
        assert len(a.choices) == 2 and a.usage.completion_tokens == 16
        r = cl.completions.create(model="x", prompt=PROMPTS[2], max_tokens=6, temperature=0,
                                  logprobs=3, presence_penalty=1.5, frequency_penalty=1.0)
        lp = r.choices[0].logprobs
        assert len(lp.tokens) == 6 and len(lp.top_logprobs[0]) == 3, lp
        assert all(x <= 0 for x in lp.token_logprobs)
        # logit_bias: forbid the greedy first token
        tok = srv.post("/tokenize", {"content": lone[0]})[2]
        first = json.loads(tok)["tokens"][0]
        r = cl.completions.create(model="x", prompt=PROMPTS[0], max_tokens=3, temperature=0,
                                  logit_bias={str(first): -100})
        ids = json.loads(srv.post("/tokenize", {"content": r.choices[0].text})[2])["tokens"]
        assert ids[0] != first, ids

    def echo():
        r = cl.completions.create(model="x", prompt=PROMPTS[0], max_tokens=4, temperature=0,
                                  echo=True)
        assert r.choices[0].text.startswith(PROMPTS[0]), r.choices[0].text
        text = "".join(ch.text for c in cl.completions.create(
            model="x", prompt=PROMPTS[0], max_tokens=4, temperature=0, echo=True, stream=True)
            for ch in c.choices)
        assert text == r.choices[0].text, (text, r.choices[0].text)

    def tokenize_roundtrip():
        st, _, d = srv.post("/tokenize", {"content": "Hello world", "with_pieces": True})
        assert st == 200
        toks = json.loads(d)["tokens"]
        assert "".join(t["piece"] for t in toks) == "Hello world", toks
        st, _, d = srv.post("/detokenize", {"tokens": [t["id"] for t in toks]})
        assert st == 200 and json.loads(d)["content"] == "Hello world", d
        models = cl.models.list()
        assert len(models.data) == 1 and models.data[0].id.endswith(".gguf")

    def batch_invariance():
        for i, p in enumerate(PROMPTS):
            lone[("b", i)] = cl.completions.create(model="x", prompt=p, max_tokens=N_TOK,
                                                   temperature=0).choices[0].text
        m0, _ = srv.metrics()

        def one(k):
            text = ""
            for c in cl.completions.create(model="x", prompt=PROMPTS[k % len(PROMPTS)],
                                           max_tokens=N_TOK, temperature=0, stream=True):
                text += "".join(ch.text for ch in c.choices)
            return k, text

        with cf.ThreadPoolExecutor(N_CONC) as ex:
            res = list(ex.map(one, range(N_CONC)))
        bad = [(k, t) for k, t in res if t != lone[("b", k % len(PROMPTS))]]
        assert not bad, bad[:3]
        m1, _ = srv.metrics()
        single = m1['ferrox_step_sequences_bucket{le="1"}'] - m0['ferrox_step_sequences_bucket{le="1"}']
        steps = m1["ferrox_step_sequences_count"] - m0["ferrox_step_sequences_count"]
        assert steps - single > 0, (steps, single)
        print(f"     {steps:.0f} steps, {steps - single:.0f} of them with > 1 sequence")

    def hostile():
        cases = [
            ("bad json", b'{"prompt": "x",', 400),
            ("not an object", b'[1,2,3]', 400),
            ("wrong type max_tokens", json.dumps({"prompt": "x", "max_tokens": "ten"}).encode(), 400),
            ("wrong type temperature", json.dumps({"prompt": "x", "temperature": "hot"}).encode(), 400),
            ("wrong type prompt", json.dumps({"prompt": {"a": 1}}).encode(), 400),
            ("wrong type stream", json.dumps({"prompt": "x", "stream": "yes"}).encode(), 400),
            ("negative max_tokens", json.dumps({"prompt": "x", "max_tokens": -5}).encode(), 400),
            ("thousands of stops", json.dumps({"prompt": "x", "stop": ["s%d" % i for i in range(5000)]}).encode(), 400),
            ("invalid utf-8", b'{"prompt": "\xff\xfe bad \xc3"}', 400),
            ("bad token id", json.dumps({"prompt": [1, 2, 10**9]}).encode(), 400),
            ("bad logit_bias", json.dumps({"prompt": "x", "logit_bias": {"abc": 1}}).encode(), 400),
            ("prompt too long", json.dumps({"prompt": "word " * 3000}).encode(), 400),
            ("huge body", b'{"prompt": "' + b"a" * (2 << 20) + b'"}', 413),
            ("empty chat messages", json.dumps({"messages": []}).encode(), 400),
        ]
        for name, body, want in cases:
            path = "/v1/chat/completions" if "chat" in name else "/v1/completions"
            try:
                st, _, data = srv.raw("POST", path, body, {"Content-Type": "application/json"})
            except (ConnectionResetError, BrokenPipeError):
                st, data = 413 if want == 413 else -1, b'{"error":{}}'
            assert st == want, (name, st, data[:200])
            err = json.loads(data)["error"]
            assert "message" in err or want == 413, (name, data)
        # every field with values of the wrong type or range: 4xx or 200, never 5xx
        fields = ["max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "n",
                  "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
                  "top_logprobs", "stream", "stream_options", "echo", "prompt", "messages",
                  "tools", "chat_template_kwargs"]
        values = [None, True, "s", -1, 1e308, [], {}, [1, "a"], {"0": 1e9}, 2**63]
        for path, base in (("/v1/completions", {"prompt": "hi"}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})):
            for f in fields:
                for v in values:
                    body = dict(base, max_tokens=2)
                    body[f] = v
                    st, _, data = srv.post(path, body)
                    assert st < 500 and (st == 200 or b'"error"' in data), (path, f, v, st, data[:200])
        st, _, _ = srv.raw("GET", "/no/such/path")
        assert st == 404
        r = cl.completions.create(model="x", prompt=PROMPTS[0], max_tokens=12, temperature=0)
        assert r.choices[0].text == lone[0]

    def disconnect():
        m0, _ = srv.metrics()
        assert metric(m0, "ferrox_kv_blocks_used") == 0, m0
        s = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": PROMPTS[3], "max_tokens": 900, "temperature": 0,
                           "stream": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        got = b""
        while got.count(b"data:") < 3:
            got += s.recv(4096)
        m1, _ = srv.metrics()
        assert metric(m1, "vllm:num_requests_running") == 1, m1
        assert metric(m1, "ferrox_kv_blocks_used") > 0
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            m2, _ = srv.metrics()
            if metric(m2, "ferrox_kv_blocks_used") == 0 and metric(m2, "vllm:num_requests_running") == 0:
                break
            time.sleep(0.1)
        assert metric(m2, "ferrox_kv_blocks_used") == 0, m2
        assert metric(m2, "vllm:num_requests_running") == 0
        gen = metric(m2, "vllm:generation_tokens_total") - metric(m1, "vllm:generation_tokens_total")
        assert gen < 200, gen  # cancelled well before 900 tokens
        # the same for a plain (non-streaming) request abandoned mid-way
        s = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": PROMPTS[4], "max_tokens": 900, "temperature": 0}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        deadline = time.time() + 30
        while metric(srv.metrics()[0], "ferrox_kv_blocks_used") == 0 and time.time() < deadline:
            time.sleep(0.05)
        s.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            m3, _ = srv.metrics()
            if metric(m3, "ferrox_kv_blocks_used") == 0 and metric(m3, "vllm:num_requests_running") == 0:
                break
            time.sleep(0.1)
        assert metric(m3, "ferrox_kv_blocks_used") == 0, m3
        gen = metric(m3, "vllm:generation_tokens_total") - metric(m2, "vllm:generation_tokens_total")
        assert gen < 200, gen

    def metrics_format():
        _, text = srv.metrics()
        families, types = set(), {}
        for line in text.splitlines():
            if line.startswith("# HELP "):
                families.add(line.split()[2])
            elif line.startswith("# TYPE "):
                _, _, name, typ = line.split()
                types[name] = typ
        assert families == set(types), families ^ set(types)
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert name in types or (types.get(base) == "histogram"), line
            float(line.rsplit(" ", 1)[1])
        for name, typ in types.items():
            if typ == "histogram":
                buckets = re.findall(r'^%s_bucket\{le="([^"]+)"[^}]*\} (\S+)$' % re.escape(name),
                                     text, re.M)
                assert buckets[-1][0] == "+Inf", name
                counts = [float(c) for _, c in buckets]
                assert counts == sorted(counts), name
                cnt = re.search(r"^%s_count(\{[^}]*\})? (\S+)$" % re.escape(name), text, re.M)
                assert float(cnt.group(2)) == counts[-1], name
            if typ == "counter":
                assert name.endswith("_total"), name
        # Prometheus's own checker, when installed (scripts/install-deps.sh
        # installs Debian's prometheus for it). Its one lint it cannot pass
        # is about vLLM's names themselves: a ':' is meant for recording
        # rules, and the issue asks for vLLM's names because routers and
        # autoscalers read them. Any other problem, or a parse error
        # (exit 1), fails.
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                               capture_output=True, timeout=60)
            out = (r.stdout + r.stderr).decode(errors="replace")
            problems = [l for l in out.splitlines() if l.strip() and
                        not re.match(r"^vllm:\S+ metric names should not contain ':'$", l)]
            assert r.returncode in (0, 3) and not problems, (r.returncode, problems)
        elif REQUIRE:
            raise AssertionError("promtool not installed (scripts/install-deps.sh installs it)")
        m, _ = srv.metrics()
        assert metric(m, "vllm:time_to_first_token_seconds_count") > 0
        assert metric(m, "vllm:generation_tokens_total") > 0

    def drain():
        # The running stream must outlast the probes below, or the server may
        # finish its drain between them and close the listening socket (a
        # reset, not a 503: what CI once saw with a 40-token stream).
        # ignore_eos and a long max_tokens keep it running; the probes then
        # assert it still was.
        results = {}
        n_stream = 120 if SAN else 600
        started = threading.Event()

        def streamer():
            text = ""
            for c in cl.completions.create(model="x", prompt=PROMPTS[5], max_tokens=n_stream,
                                           temperature=0, stream=True,
                                           extra_body={"ignore_eos": True}):
                text += "".join(ch.text for ch in c.choices)
                started.set()
            results["text"] = text

        t = threading.Thread(target=streamer)
        t.start()
        assert started.wait(120), "the stream never started"
        srv.proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        st, _, _ = srv.raw("GET", "/health")
        assert st == 503, st
        st, _, _ = srv.post("/v1/completions", {"prompt": "x", "max_tokens": 2})
        assert st == 503, st
        assert t.is_alive(), "the stream ended before the probes: they tested nothing"
        t.join(300)
        rc = srv.proc.wait(60)
        assert rc == 0, rc
        assert len(results.get("text", "")) > 20, results
        log = srv.logtext()
        assert "runtime error" not in log and "Sanitizer" not in log, log[-4000:]

    try:
        check("completions: text, usage, finish_reason=length", completions_basic)
        check("completions: streaming with include_usage", completions_stream)
        check("stop strings across token boundaries (plain and streaming)", stop_strings)
        check("sampling options, n, seed, logprobs, penalties, logit_bias", sampling_options)
        check("echo (plain and streaming)", echo)
        check("tokenize/detokenize/models", tokenize_roundtrip)
        check(f"{N_CONC} concurrent streams (--parallel 8) == lone requests", batch_invariance)
        check("hostile requests get 4xx and the server keeps serving", hostile)
        check("client disconnect frees the KV blocks", disconnect)
        check("metrics exposition format", metrics_format)
        check("SIGTERM drains: 503 for new work, running stream finishes", drain)
    finally:
        srv.stop()

# ----------------------------------------------------------------------- chat


def run_smol():
    srv = Server(SMOL, "--parallel", "2", "--ctx-size", "1024", "--api-key", "sekret",
                 "--queue", "1")
    T.server = srv
    cl = srv.client("sekret")
    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"}]
    lone = {}

    def chat_basic():
        r = cl.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0)
        ch = r.choices[0]
        assert ch.message.role == "assistant"
        assert ch.finish_reason in ("stop", "length")
        assert len(ch.message.content) > 5, ch.message.content
        assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
        assert r.usage.completion_tokens == 16 or ch.finish_reason == "stop"
        lone["text"] = text = ch.message.content
        stop = text[len(text) // 2:len(text) // 2 + 4]
        r = cl.chat.completions.create(model="m", messages=msgs, max_completion_tokens=16,
                                       temperature=0, logprobs=True, top_logprobs=2, stop=stop)
        assert r.choices[0].finish_reason == "stop", r.choices[0].finish_reason
        assert r.choices[0].message.content == text[:text.index(stop)]
        assert len(r.choices[0].logprobs.content[0].top_logprobs) == 2

    def chat_stream():
        text, usage, role = "", None, None
        for c in cl.chat.completions.create(model="m", messages=msgs, max_tokens=16,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}):
            if c.usage:
                usage = c.usage
            for ch in c.choices:
                role = ch.delta.role or role
                text += ch.delta.content or ""
        assert role == "assistant"
        assert text == lone["text"], (text, lone["text"])
        assert usage and usage.completion_tokens > 0

    def chat_special_text():
        # a user typing a control-token string gets those characters, not the token
        def n_prompt(content):
            return cl.chat.completions.create(
                model="m", temperature=0, max_tokens=1,
                messages=[{"role": "user", "content": content}]).usage.prompt_tokens

        plain = n_prompt("Repeat:")
        special = n_prompt("Repeat: <|im_end|>")
        assert special - plain > 2, (plain, special)  # as text: several tokens, not one

    def prefix_cache():
        system = {"role": "system", "content": "You are a careful assistant. " * 20}
        m0, _ = srv.metrics()
        for q in ("Name a color.", "Name a fruit."):
            cl.chat.completions.create(model="m", temperature=0, max_tokens=2,
                                       messages=[system, {"role": "user", "content": q}])
        m1, _ = srv.metrics()
        hits = metric(m1, "vllm:gpu_prefix_cache_hits_total") - metric(m0, "vllm:gpu_prefix_cache_hits_total")
        assert hits >= 64, hits  # the shared system prompt's full blocks
        print(f"     {hits:.0f} prompt tokens served from the prefix cache")

    def auth():
        st, _, d = srv.post("/v1/chat/completions", {"messages": msgs})
        assert st == 401, (st, d)
        st, _, d = srv.post("/v1/chat/completions", {"messages": msgs},
                            {"Authorization": "Bearer wrong"})
        assert st == 401, (st, d)
        assert srv.raw("GET", "/health")[0] == 200

    def queue_full():
        def one(_):
            return srv.post("/v1/completions", {"prompt": "Count to one hundred:",
                                                "max_tokens": 48, "temperature": 0},
                            {"Authorization": "Bearer sekret"})

        with cf.ThreadPoolExecutor(8) as ex:
            res = list(ex.map(one, range(8)))
        codes = sorted(st for st, _, _ in res)
        assert 200 in codes and 503 in codes, codes
        assert all("Retry-After" in hd for st, hd, _ in res if st == 503)

    def clean_exit():
        rc = srv.stop()
        log = srv.logtext()
        assert rc == 0, (rc, log[-2000:])
        assert "runtime error" not in log and "Sanitizer" not in log, log[-4000:]

    try:
        check("chat: message, finish_reason, usage, logprobs", chat_basic)
        check("chat: streaming deltas equal the plain response", chat_stream)
        check("chat: control-token text in content", chat_special_text)
        check("shared system prompt reuses cached KV blocks", prefix_cache)
        check("--api-key: 401 without the key", auth)
        check("queue full: 503 with Retry-After", queue_full)
        check("SIGTERM: clean exit, no sanitizer reports", clean_exit)
    finally:
        srv.stop()


# ------------------------------------------- prefix caching, sliding layers


def shared_prefix(srv, n_tokens):
    """Deterministic prose of at least n_tokens Gemma tokens (counted by the
    server's /tokenize), varied so no block repeats another."""
    words = ("river stone lantern harvest orbit meadow copper signal violet anchor "
             "thunder pebble quiet maple falcon ember glacier whistle saddle ribbon").split()
    out, i = [], 0
    while True:
        out.append(" ".join(words[(i * 7 + k * 3) % len(words)] for k in range(9)) + f" ({i}).")
        i += 1
        if i % 20 == 0:
            st, _, d = srv.post("/tokenize", {"content": " ".join(out)})
            assert st == 200, (st, d)
            if len(json.loads(d)["tokens"]) >= n_tokens:
                return " ".join(out)


def stream_ttft(cl, prompt, n):
    """(seconds to the first streamed text, the whole text) of a greedy
    completion."""
    t0, first, text = time.time(), None, ""
    for c in cl.completions.create(model="m", prompt=prompt, max_tokens=n, temperature=0,
                                   stream=True):
        if c.choices and c.choices[0].text:
            first = first or time.time() - t0
            text += c.choices[0].text
    return first, text


def prefix_case(model, name, what):
    """A second request sharing a ~1,000-token prefix with the first is
    served from the cache (prefix hits on /metrics, TTFT below a third of
    the first's), and its greedy text equals a fresh server's."""
    args = ("--parallel", "2", "--ctx-size", "2048")
    qa, qb = "\n\nQuestion: which word comes first?", "\n\nQuestion: which word comes last?"
    res = {}
    with Server(model, *args) as srv:
        T.server = srv
        cl = srv.client()
        prefix = shared_prefix(srv, 1000)

        def reuse():
            stream_ttft(cl, "Hello", 2)  # weights paged in, threads up
            m0, _ = srv.metrics()
            t_a, _ = stream_ttft(cl, prefix + qa, 8)
            m1, _ = srv.metrics()
            t_b, res["b"] = stream_ttft(cl, prefix + qb, 16)
            m2, _ = srv.metrics()

            def hits(x, y):
                return metric(y, "vllm:gpu_prefix_cache_hits_total") - metric(x, "vllm:gpu_prefix_cache_hits_total")
            print(f"     TTFT {t_a * 1000:.0f} ms cold, {t_b * 1000:.0f} ms sharing the prefix "
                  f"({t_b / t_a:.2f}x); prefix hits {hits(m0, m1):.0f} then {hits(m1, m2):.0f}")
            assert hits(m0, m1) == 0, hits(m0, m1)
            assert hits(m1, m2) >= 900, hits(m1, m2)
            assert t_b < t_a / 3, (t_a, t_b)

        check(f"{name}: a ~1,000-token shared prefix is served from the cache ({what})", reuse)
    with Server(model, *args) as srv:
        T.server = srv

        def fresh():
            assert "b" in res, "no reply from the cached run"
            _, text = stream_ttft(srv.client(), prefix + qb, 16)
            assert text == res["b"], (text, res["b"])
            assert len(text) > 0

        check(f"{name}: the cached reply equals a fresh server's", fresh)


def run_gemma_prefix():
    """Gemma 3 has sliding-window layers (window 512): full layers reuse the
    whole prefix, sliding layers its last window."""
    prefix_case(GEMMA, "Gemma 3", "full blocks, and the sliding layers' last window")


def run_hybrid_prefix():
    """A hybrid model (the Qwen 3.5 fixture: Gated DeltaNet + attention, with
    the qwen2 fixture's 256-token tokenizer) has no per-token history to
    share: the second request starts from a state snapshot (taken every 64
    tokens) and the paged cache's blocks (measured: 314 ms cold, 10 ms
    sharing ~2,000 prefix tokens)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = os.path.join("/tmp", f"fx_hybrid_{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(os.path.join(root, "tests", "fixtures", "hf-tiny-next", "qwen3_5"), tmp)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(root, "tests", "fixtures", "hf-tiny", "qwen2", f), tmp)
    try:
        prefix_case(tmp, "Qwen 3.5 (hybrid)", "a state snapshot")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if not os.path.exists(BIN):
        print(f"test_server: no binary at {BIN}", file=sys.stderr)
        sys.exit(1)
    t0 = time.time()
    try:
        run_gemma()
    except Exception:
        T.failed += 1
        traceback.print_exc()
    try:
        run_gemma_prefix()
    except Exception:
        T.failed += 1
        traceback.print_exc()
    try:
        run_hybrid_prefix()
    except Exception:
        T.failed += 1
        traceback.print_exc()
    try:
        run_smol()
    except Exception:
        T.failed += 1
        traceback.print_exc()
    print(f"{T.passed} passed, {T.failed} failed ({time.time() - t0:.0f} s)")
    sys.exit(1 if T.failed else 0)
