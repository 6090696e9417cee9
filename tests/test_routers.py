#!/usr/bin/env python3
"""ferrox replicas behind the real routers (issue 24), all on 127.0.0.1.

usage: tests/test_routers.py [PATH/TO/ferrox]     (default: build/bin/ferrox)

Two `ferrox serve` replicas of SmolLM2-135M-Instruct (FX_MODELS_DIR) behind
vllm-router 0.1.17 and sglang-router 0.3.2 (PyPI; scripts/install-deps.sh):

a. vllm-router round_robin: completions and chat answer through it, greedy
   text equal to a lone replica's, and both replicas served requests.
b. a replica SIGKILLed under load (router health checks every 1 s, one
   failure marks a worker down; retries on): no non-streaming request
   fails (the router retries them on the other replica).
c. SIGTERM on a replica under load: its /health is 503 within 0.5 s and no
   request fails (it finishes what it accepted; the router retries what it
   refused).
d. sglang-router cache_aware: completions, chat and SGLang's /generate answer
   with the lone replica's greedy text; the router reads the replicas'
   /get_load and /get_model_info (compat.c).
e. vllm-router kv_aware (no KV events): it turns requests into token ids
   through the replicas' /v1/completions/render and
   /v1/chat/completions/render, and the counts it logs equal the prompt
   token counts ferrox reports.
f. vllm-router kv_aware with ferrox's KV events (--kv-events-endpoint;
   skipped, saying so, when this ferrox lacks it): a repeated long system
   prompt is credited as cached from the events and stays on one replica.

Each part runs for well under 60 s. Exit 77 (skip) without the model or
both routers (a part whose router is missing is skipped, saying so), unless
FX_REQUIRE_MODELS=1. Prints one line per check and "N passed, N failed".
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

# two replicas share this machine's cores: one thread each unless told
os.environ.setdefault("FX_TEST_THREADS", "1")
import server_harness  # noqa: E402
from server_harness import SMOL, Checks, Server, free_port, need, skip  # noqa: E402
from router_harness import (Router, metric_sum, post_json, request,  # noqa: E402
                            router_missing, stream_ttft)

need("test_routers", [SMOL], [])
MISSING = {k: router_missing(k) for k in ("vllm", "sglang")}
if all(MISSING.values()):
    skip("test_routers", "; ".join(MISSING.values()) + "; skipping")
T = Checks(log_bytes=3000)
check = T.check
MODEL = os.path.basename(SMOL)
CMPL = {"model": MODEL, "prompt": "The capital of France is", "max_tokens": 16, "temperature": 0}
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "Name three colors."}],
        "max_tokens": 16, "temperature": 0}


def text_of(resp):
    ch = resp["choices"][0]
    return ch["text"] if "text" in ch else ch["message"]["content"]


def served(srv):
    return metric_sum(srv.port, "vllm:request_success_total")


class Load:
    """conc threads sending non-streaming completions (distinct prompts,
    8 tokens) to port until stop(), plus `streams` threads sending streaming
    ones; counts successes and failures of each kind (streams apart: a
    stream cut off mid-way cannot be retried by a router)."""

    def __init__(self, port, conc=4, streams=0):
        self.port, self.ok, self.failed, self.errors = port, 0, 0, []
        self.s_ok = self.s_failed = 0
        self.lock, self.done = threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i, i >= conc))
                        for i in range(conc + streams)]
        for t in self.threads:
            t.start()

    def run(self, i, stream):
        n = 0
        while not self.done.is_set():
            body = {"model": MODEL, "prompt": f"Request {i}.{n}: count from one to ten:",
                    "max_tokens": 8, "temperature": 0}
            n += 1
            try:
                if stream:
                    st, t, text = stream_ttft(self.port, "/v1/completions", body, timeout=60)
                    good, why = st == 200 and bool(text), None
                else:
                    st, resp = post_json(self.port, "/v1/completions", body, timeout=60)
                    good = st == 200 and isinstance(resp, dict) and resp.get("choices")
                    why = None if good else f"{st} {str(resp)[:200]}"
            except (OSError, ValueError, http.client.HTTPException) as e:
                good, why = False, None if stream else f"{type(e).__name__}: {e}"
            with self.lock:
                if stream:
                    self.s_ok += bool(good)
                    self.s_failed += not good
                    continue
                self.ok += bool(good)
                self.failed += not good
                if why and len(self.errors) < 5:
                    self.errors.append(why)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()
        return self.ok, self.failed


def lone_reference(srv):
    """Greedy completion and chat texts of one replica, asked directly."""
    st, c = post_json(srv.port, "/v1/completions", CMPL)
    assert st == 200, (st, c)
    st, h = post_json(srv.port, "/v1/chat/completions", CHAT)
    assert st == 200, (st, h)
    return text_of(c), text_of(h)


def part_a(a, b, ref):
    with Router("vllm", "round_robin", [f"http://127.0.0.1:{a.port}",
                                        f"http://127.0.0.1:{b.port}"]) as r:
        before = served(a), served(b)
        texts = []
        for _ in range(2):
            for body, path in ((CMPL, "/v1/completions"), (CHAT, "/v1/chat/completions")):
                st, resp = post_json(r.port, path, body)
                assert st == 200, (st, resp)
                texts.append(text_of(resp))
        want = [ref[0], ref[1], ref[0], ref[1]]
        da, db = served(a) - before[0], served(b) - before[1]
        print(f"     round_robin: 4 requests, replica A served {da:.0f}, B {db:.0f}; "
              f"completion {texts[0]!r}")
        assert texts == want, (texts, want)
        assert da >= 1 and db >= 1, (da, db)


def part_b(a, b):
    with Router("vllm", "round_robin", [f"http://127.0.0.1:{a.port}",
                                        f"http://127.0.0.1:{b.port}"]) as r:
        load = Load(r.port, streams=1)
        time.sleep(3)
        a0 = served(a)
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        t_kill = time.time()
        time.sleep(8)
        ok, failed = load.stop()
        da = served(a) - a0
        print(f"     SIGKILL at 3 s, 8 s more: {ok} answered, {failed} failed "
              f"(A served {da:.0f} after the kill); errors: {load.errors[:3]}; streaming "
              f"(not asserted): {load.s_ok} answered, {load.s_failed} failed")
        # after the router noticed (1 s checks), requests still came back
        assert ok > 0 and da > 0, (ok, da)
        assert failed == 0, load.errors
        assert time.time() - t_kill < 30


def part_c(a, c):
    with Router("vllm", "round_robin", [f"http://127.0.0.1:{a.port}",
                                        f"http://127.0.0.1:{c.port}"]) as r:
        load = Load(r.port)
        time.sleep(3)
        t0 = time.time()
        c.proc.send_signal(signal.SIGTERM)
        seen, first = None, None
        while time.time() - t0 < 2 and seen is None:
            try:
                st, _, _ = request(c.port, "GET", "/health", timeout=1)
                first = first or st
                if st == 503:
                    seen = time.time() - t0
            except OSError as e:
                first = first or type(e).__name__
                break  # gone before it was seen draining
            time.sleep(0.01)
        time.sleep(5)
        ok, failed = load.stop()
        rc = c.proc.wait(60)
        linger = re.findall(r"drain: kept refusing new work for \S+ s", c.logtext())
        print(f"     SIGTERM: /health 503 after {seen if seen is None else round(seen, 3)} s "
              f"(first answer {first}); replica exit {rc} ({linger or 'no linger'}); "
              f"{ok} answered, {failed} failed; errors: {load.errors[:3]}")
        assert seen is not None and seen < 0.5, (seen, first)
        assert rc == 0, rc
        assert ok > 0 and failed == 0, load.errors


def part_d(a, b, ref):
    with Router("sglang", "cache_aware", [f"http://127.0.0.1:{a.port}",
                                          f"http://127.0.0.1:{b.port}"]) as r:
        got = []
        for body, path in ((CMPL, "/v1/completions"), (CHAT, "/v1/chat/completions")) * 2:
            st, resp = post_json(r.port, path, body)
            assert st == 200, (st, resp)
            got.append(text_of(resp))
        st, gen = post_json(r.port, "/generate", {
            "text": CMPL["prompt"], "sampling_params": {"max_new_tokens": 16, "temperature": 0}})
        assert st == 200, (st, gen)
        print(f"     cache_aware: completion {got[0]!r}, chat {got[1]!r}; "
              f"/generate {gen['text']!r} {gen['meta_info']}")
        assert got == [ref[0], ref[1]] * 2, (got, ref)
        assert gen["text"] == ref[0] and gen["meta_info"]["completion_tokens"] == 16, gen
        # the router's own views of the workers, from compat.c's endpoints
        st, _, data = request(r.port, "GET", "/get_loads")
        loads = [w["load"] for w in json.loads(data)["workers"]]
        st2, _, mi = request(r.port, "GET", "/get_model_info")
        mi = json.loads(mi)
        print(f"     /get_loads {loads}; /get_model_info model_type {mi.get('model_type')}")
        assert st == 200 and len(loads) == 2 and all(x >= 0 for x in loads), loads
        assert st2 == 200 and mi.get("is_generation") is True, mi


def part_e(a, b):
    # static sources at ports nobody publishes on: the subscriber waits, the
    # policy falls back to load, and still tokenizes each request
    srcs = []
    for s in (a, b):
        srcs += ["--kv-event-source", f"http://127.0.0.1:{s.port}=tcp://127.0.0.1:{free_port()}"]
    with Router("vllm", "kv_aware", [f"http://127.0.0.1:{a.port}", f"http://127.0.0.1:{b.port}"],
                *srcs, "--kv-event-block-size", "16", "--kv-event-model", MODEL,
                log_level="debug") as r:
        st, c = post_json(r.port, "/v1/completions", CMPL)
        assert st == 200, (st, c)
        st, h = post_json(r.port, "/v1/chat/completions", CHAT)
        assert st == 200, (st, h)
        want = [c["usage"]["prompt_tokens"], h["usage"]["prompt_tokens"]]
        log = re.sub(r"\x1b\[[0-9;]*m", "", r.logtext())
        seen = [int(x) for x in re.findall(r"KV prefix decision .*?input_tokens=(\d+)", log)]
        print(f"     kv_aware: router's input_tokens {seen}, ferrox's prompt_tokens {want}")
        assert seen == want, (seen, want)


def has_kv_events():
    """Whether this ferrox's serve takes --kv-events-endpoint."""
    out = subprocess.run([server_harness.BIN, "serve", "--help"], capture_output=True, text=True)
    return "--kv-events-endpoint" in out.stdout + out.stderr


def part_f():
    """Two fresh replicas publishing KV events; the same long system prompt
    three times (other questions): the router credits the cached prefix
    from the events and keeps the requests on the replica that holds it."""
    ports = [free_port() for _ in range(2)]
    reps = [Server(SMOL, "--parallel", "4", "-c", "2048", "--block-size", "16",
                   "--kv-events-endpoint", f"tcp://127.0.0.1:{p}") for p in ports]
    try:
        urls = [f"http://127.0.0.1:{x.port}" for x in reps]
        srcs = []
        for u, p in zip(urls, ports):
            srcs += ["--kv-event-source", f"{u}=tcp://127.0.0.1:{p}"]
        with Router("vllm", "kv_aware", urls, *srcs, "--kv-event-block-size", "16",
                    "--kv-event-model", MODEL, log_level="debug") as r:
            system = " ".join(["Answer politely, cite the refund policy and the order number."] * 20)
            n = []
            for i in range(3):
                body = {**CHAT, "max_tokens": 2, "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"Question {i}: where is my order?"}]}
                st, resp = post_json(r.port, "/v1/chat/completions", body)
                assert st == 200, (st, resp)
                n.append(resp["usage"]["prompt_tokens"])
                time.sleep(0.5)  # the events of its blocks reach the router
            log = re.sub(r"\x1b\[[0-9;]*m", "", r.logtext())
            dec = re.findall(r'KV prefix decision .*?worker="([^"]+)" input_tokens=(\d+) '
                             r'new_prefill_tokens=\d+ credited_prefix_tokens=(\d+)', log)
            print(f"     kv_aware with events: prompt tokens {n}; decisions "
                  f"{[(w[-5:], int(i), int(c)) for w, i, c in dec]}")
            assert len(dec) == 3 and int(dec[0][2]) == 0, dec
            # everything but the last partial block and the question is credited
            assert all(int(c) >= int(i) - 48 for _, i, c in dec[1:]), dec
            assert len({w for w, _, _ in dec}) == 1, dec
    finally:
        for x in reps:
            x.stop()


def main():
    t_all = time.time()
    a = Server(SMOL, "--parallel", "4", "-c", "2048")
    b = Server(SMOL, "--parallel", "4", "-c", "2048")
    c = None
    try:
        T.server = a
        ref = [None]

        def reference():
            ref[0] = lone_reference(a)
            print(f"     lone replica: completion {ref[0][0]!r}, chat {ref[0][1]!r}")

        check("lone replica reference", reference)
        if ref[0] is None:
            return
        for part, kind, fn in (("a. vllm-router round_robin", "vllm", lambda: part_a(a, b, ref[0])),
                               ("d. sglang-router cache_aware", "sglang",
                                lambda: part_d(a, b, ref[0])),
                               ("e. vllm-router kv_aware tokenizes via /render", "vllm",
                                lambda: part_e(a, b)),
                               ("b. SIGKILL on a replica: no failed request", "vllm",
                                lambda: part_b(a, b))):
            if MISSING[kind]:
                print(f"skip {part}: {MISSING[kind]}")
                continue
            check(part, fn)
        if MISSING["vllm"]:
            pass
        elif not has_kv_events():
            print("skip f. kv_aware with ferrox's KV events: this ferrox has no "
                  "--kv-events-endpoint")
        else:
            check("f. vllm-router kv_aware credits the prefix from ferrox's KV events", part_f)
        if not MISSING["vllm"]:
            c = Server(SMOL, "--parallel", "4", "-c", "2048")
            check("c. SIGTERM on a replica: 503 at once, no failed request", lambda: part_c(a, c))
    finally:
        for s in (a, b, c):
            if s:
                s.stop()
    print(f"{T.passed} passed, {T.failed} failed ({time.time() - t_all:.0f} s)")
    sys.exit(1 if T.failed else 0)


if __name__ == "__main__":
    main()
