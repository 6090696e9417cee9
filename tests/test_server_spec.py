#!/usr/bin/env python3
"""`ferrox serve --spec-type ngram-simple` against a plain server: the same
text, token for token, greedy and sampled with a seed.

usage: tests/test_server_spec.py [PATH/TO/ferrox]     (default: build/bin/ferrox)

A prompt that repeats a list, so ngram-simple (--spec-ngram-simple-size-n 3)
finds drafts and the model accepts many of them: timings.draft_n_accepted
(llama-server's field) and vLLM's vllm:spec_decode_* counters must grow.
Also: two concurrent requests on the speculative server (one drafting, one
with speculative.n_max 0), streaming, n = 2, logprobs with penalties and
logit_bias, a stop string, chat, Gemma 3 (sliding-window layers on the
paged layout), bad speculative.* values (400), and a hybrid model (the Qwen
3.5 fixture: recurrent layers cannot roll back), which decodes plainly. Exit 77 (skip) when a
model is missing, unless FX_REQUIRE_MODELS=1.
"""
import concurrent.futures as cf
import json
import os
import shutil
import sys
import time
import traceback

from server_harness import BIN, GEMMA, SMOL, Checks, Server, need

need("test_server_spec", [GEMMA, SMOL], [])
T = Checks(log_bytes=3000)
check = T.check

LIST = "1. apple\n2. banana\n3. cherry\n4. grape\n5. lemon\n6. mango\n7. orange\n8. peach\n\n"
PROMPT = "Repeat the list.\n" + LIST + "Again:\n" + LIST + "Again:\n1."
SPEC = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3"]
COMMON = ["--parallel", "2", "--ctx-size", "1024"]


def completion(srv, **kw):
    body = {"prompt": PROMPT, "max_tokens": 64, **kw}
    st, _, data = srv.post("/v1/completions", body)
    assert st == 200, (st, data[:300])
    return json.loads(data)


def texts(r):
    return [(c["text"], c["finish_reason"], c.get("logprobs")) for c in r["choices"]]


def stream(srv, **kw):
    """The streamed text and the last chunk's timings."""
    body = {"prompt": PROMPT, "max_tokens": 64, "stream": True, **kw}
    st, _, data = srv.post("/v1/completions", body)
    assert st == 200, (st, data[:300])
    text, timings, done = "", None, False
    for line in data.decode().split("\n\n"):
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            continue
        ev = json.loads(line[6:])
        text += "".join(c.get("text", "") for c in ev["choices"])
        timings = ev.get("timings", timings)
    assert done
    return text, timings


def spec_metrics(srv):
    m, _ = srv.metrics()
    out = {}
    for k, v in m.items():
        for name in ("drafts", "draft_tokens", "accepted_tokens"):
            if k.startswith(f"vllm:spec_decode_num_{name}_total{{"):
                out[name] = v
    assert len(out) == 3, out
    return out


def run_model(model, name, cases, extra):
    plain = Server(model, *COMMON)
    T.server = plain
    want = {}
    try:
        for key, kw in cases:
            want[key] = texts(completion(plain, **kw))
        if extra:
            want["chat"] = chat(plain)
    finally:
        plain.stop()
    spec = Server(model, *COMMON, *SPEC)
    T.server = spec
    got = {}
    try:
        m0 = spec_metrics(spec)
        assert m0 == {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0}, m0

        def same(key, kw, accept):
            def fn():
                r = completion(spec, **kw)
                tm = r["timings"]
                got[key] = tm
                assert texts(r) == want[key], (texts(r), want[key])
                if accept:
                    assert tm.get("draft_n_accepted", 0) > 0, tm
                    assert tm["draft_n"] >= tm["draft_n_accepted"], tm
                if "rejected" in key:
                    assert tm["draft_n"] > tm.get("draft_n_accepted", 0), tm
                print(f"     {name} {key}: {tm}", flush=True)
            return fn

        for key, kw in cases:
            check(f"{name}: {key}: same text as plain decoding",
                  same(key, kw, key in ("greedy", "sampled")))

        def counters():
            m = spec_metrics(spec)
            assert m["drafts"] > 0 and m["accepted_tokens"] > 0, m
            assert m["draft_tokens"] >= m["accepted_tokens"], m
            acc = sum(t.get("draft_n_accepted", 0) for t in got.values())
            drafted = sum(t.get("draft_n", 0) for t in got.values())
            assert m["accepted_tokens"] == acc and m["draft_tokens"] == drafted, (m, acc, drafted)
            print(f"     {name} metrics: {m}", flush=True)
        check(f"{name}: vllm:spec_decode_* counters grew with the timings", counters)
        if not extra:
            return

        def concurrent():
            m0 = spec_metrics(spec)
            with cf.ThreadPoolExecutor(2) as ex:
                a = ex.submit(completion, spec, temperature=0.8, seed=42)
                b = ex.submit(completion, spec, temperature=0, **{"speculative.n_max": 0})
                ra, rb = a.result(), b.result()
            assert texts(ra) == want["sampled"], (texts(ra), want["sampled"])
            assert texts(rb) == want["greedy"], (texts(rb), want["greedy"])
            assert ra["timings"].get("draft_n_accepted", 0) > 0, ra["timings"]
            assert "draft_n" not in rb["timings"], rb["timings"]
            m = spec_metrics(spec)
            assert m["accepted_tokens"] - m0["accepted_tokens"] == ra["timings"]["draft_n_accepted"]
            print(f"     concurrent: {ra['timings']} beside {rb['timings']}", flush=True)
        check(f"{name}: two at once, one with speculative.n_max 0: same texts", concurrent)

        def streaming():
            for key, kw in (("greedy", {"temperature": 0}),
                            ("sampled", {"temperature": 0.8, "seed": 42})):
                text, tm = stream(spec, **kw)
                assert text == want[key][0][0], (text, want[key][0][0])
                assert tm and tm.get("draft_n_accepted", 0) > 0, tm
                text, tm = stream(spec, stream_options={"include_usage": True}, **kw)
                assert text == want[key][0][0], (text, want[key][0][0])
                assert tm and tm.get("draft_n_accepted", 0) > 0, tm
                print(f"     stream {key}: {tm}", flush=True)
        check(f"{name}: streaming: same text, timings on the last chunk", streaming)

        def chat_same():
            assert chat(spec) == want["chat"], (chat(spec), want["chat"])
        check(f"{name}: chat, greedy: same text", chat_same)

        def bad_values():
            for field, v in (("speculative.n_max", -1), ("speculative.n_max", 10**9),
                             ("speculative.n_max", "8"), ("speculative.n_min", -3),
                             ("speculative.ngram_size_n", 0), ("speculative.p_min", 2),
                             ("speculative.type", "draft-model-x"), ("speculative.type", 5)):
                st, _, data = spec.post("/v1/completions", {"prompt": "x", field: v})
                err = json.loads(data)["error"]
                assert st == 400 and err["param"] == field and err["message"], (field, v, st, err)
            # the same fields in a "speculative" object; a non-object is refused
            for body in ({"speculative": {"n_max": -1}}, {"speculative": {"type": "draft-mtp"}},
                         {"speculative": "x"}, {"speculative": [8]}):
                st, _, data = spec.post("/v1/completions", {"prompt": "x", **body})
                err = json.loads(data)["error"]
                assert st == 400 and err["message"], (body, st, err)
            st, _, data = spec.raw("GET", "/health")
            assert st == 200, st
        check(f"{name}: bad speculative.* values: 400 naming the field", bad_values)

        def nested_off():
            r = completion(spec, temperature=0, speculative={"n_max": 0})
            assert "draft_n" not in r["timings"], r["timings"]
            r = completion(spec, temperature=0, speculative={"n_max": 4})
            assert r["timings"].get("draft_n", 0) > 0, r["timings"]
        check(f"{name}: a \"speculative\" object overrides too (n_max 0: no drafts)", nested_off)
    finally:
        st = spec.stop()
        T.server = None
        T.expect(f"{name}: the speculative server drains and exits 0", st == 0, f"exit {st}")


def chat(srv):
    st, _, data = srv.post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Repeat this list twice:\n" + LIST}],
        "max_tokens": 48, "temperature": 0})
    assert st == 200, (st, data[:300])
    return json.loads(data)["choices"][0]["message"]["content"]


SMOL_CASES = [
    ("greedy", {"temperature": 0}),
    ("sampled", {"temperature": 0.8, "seed": 42}),
    ("n 2", {"temperature": 0.8, "seed": 7, "n": 2}),
    ("logprobs, penalties, logit_bias",
     {"temperature": 1.0, "seed": 3, "logprobs": 2, "frequency_penalty": 0.5,
      "presence_penalty": 0.3, "logit_bias": {"198": -1}}),
    ("stop string", {"temperature": 0, "stop": ["6."]}),
    ("max_tokens 5", {"temperature": 0, "max_tokens": 5}),
]
# past Gemma 3's sliding window (512): drafts rolled back there too
LONG = "Repeat the list.\n" + ("Again:\n" + LIST) * 16 + "Again:\n1."
GEMMA_CASES = [
    ("greedy", {"temperature": 0, "max_tokens": 48}),
    ("sampled", {"temperature": 0.8, "seed": 42, "max_tokens": 48}),
    ("past the sliding window, drafts rejected (frequency_penalty)",
     {"prompt": LONG, "temperature": 1.0, "seed": 1, "frequency_penalty": 1.5,
      "max_tokens": 80}),
]

def run_hybrid():
    """The Qwen 3.5 fixture (Gated DeltaNet layers) with the qwen2 fixture's
    tokenizer: its recurrent state rolls drafts back (the context keeps the
    states of the draft length), the text is plain's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tmp = os.path.join("/tmp", f"fx_spec_hybrid_{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(os.path.join(root, "tests", "fixtures", "hf-tiny-next", "qwen3_5"), tmp)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(root, "tests", "fixtures", "hf-tiny", "qwen2", f), tmp)
    try:
        kw = {"temperature": 0.8, "seed": 42, "max_tokens": 24}
        with Server(tmp, *COMMON) as plain:
            want = texts(completion(plain, **kw))
        with Server(tmp, *COMMON, *SPEC) as spec:
            T.server = spec

            def fn():
                r = completion(spec, **kw)
                assert texts(r) == want, (texts(r), want)
                print(f"  hybrid: {r['timings']}")
            check("Qwen 3.5 (hybrid): speculative text equals plain decoding's", fn)
    finally:
        T.server = None
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if not os.path.exists(BIN):
        print(f"test_server_spec: no binary at {BIN}", file=sys.stderr)
        sys.exit(1)
    t0 = time.time()
    for model, name, cases, extra in ((SMOL, "SmolLM2", SMOL_CASES, True),
                                      (GEMMA, "Gemma 3", GEMMA_CASES, False)):
        try:
            run_model(model, name, cases, extra)
        except Exception:
            T.failed += 1
            traceback.print_exc()
    try:
        run_hybrid()
    except Exception:
        T.failed += 1
        traceback.print_exc()
    print(f"{T.passed} passed, {T.failed} failed ({time.time() - t0:.0f} s)")
    sys.exit(1 if T.failed else 0)
