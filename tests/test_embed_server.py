#!/usr/bin/env python3
"""POST /v1/embeddings through `ferrox serve --embeddings` and the official
openai client.

usage: tests/test_embed_server.py [PATH/TO/ferrox]

On SmolLM2-135M-Instruct (FX_MODELS_DIR): the client's default request
(base64) and encoding_format "float" give the same float32 vectors, of unit
length; several inputs in one request give what each gives alone, bit for
bit; token ids (flat, and a list of lists) give what their text gives;
usage counts the tokens; `dimensions` is the first N floats renormalized;
the vectors equal `ferrox embed`'s (same pooling, same library call) to
its printed precision; --pooling mean differs from last; a greedy stream
running beside a burst of embedding requests gives its text alone (the
engine interleaves them); OpenAI-shaped 400s for bad input; without
--embeddings a 501 naming the flag; `ferrox embed`'s separator,
--embd-normalize and output formats. Exit 77 without the model or openai
unless FX_REQUIRE_MODELS=1.
"""
import base64
import json
import math
import struct
import subprocess
import threading

from server_harness import BIN, SMOL, Checks, Server, need

(openai,) = need("test_embed_server", [SMOL], ["openai"])

T = Checks()
check = T.expect
TEXTS = ["The cat sat on the mat.", "A completely different sentence about ships.",
         "Hi", "The cat sat on the mat."]


def f32(xs):
    """Python floats rounded to float32, as the server's vectors are."""
    return [struct.unpack("<f", struct.pack("<f", x))[0] for x in xs]


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def tokenize(srv, text):
    st, _, body = srv.post("/tokenize", {"content": text, "add_special": True})
    assert st == 200, body
    return json.loads(body)["tokens"]


def cli_embed(text, pooling):
    r = subprocess.run([BIN, "embed", "-m", SMOL, "-p", text, "--pooling", pooling,
                        "--embd-output-format", "json"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["data"][0]["embedding"]


def run_main(srv):
    cl = srv.client()
    # the client's default: base64 (seen on the wire), decoded by the client into floats
    rsp = cl.embeddings.with_raw_response.create(model="any", input=TEXTS[0])
    sent = json.loads(rsp.http_request.content)
    check("the openai client asks for base64 by default", sent.get("encoding_format") == "base64",
          sent)
    d64 = rsp.parse()
    st, _, raw = srv.post("/v1/embeddings", {"input": TEXTS[0]})
    check("a request without encoding_format answers floats", st == 200 and
          isinstance(json.loads(raw)["data"][0]["embedding"], list), raw[:200])
    dfl = cl.embeddings.create(model="any", input=TEXTS[0], encoding_format="float")
    v64, vfl = d64.data[0].embedding, dfl.data[0].embedding
    n_embd = len(vfl)
    check("base64 and float give the same float32 vector", v64 == f32(vfl) and n_embd == 576,
          f"{len(v64)} {len(vfl)}")
    check("the vector has unit length", abs(norm(vfl) - 1) < 1e-5, norm(vfl))
    st, _, raw = srv.post("/v1/embeddings", {"input": TEXTS[0], "encoding_format": "base64"})
    b = base64.b64decode(json.loads(raw)["data"][0]["embedding"])
    check("base64 is little-endian float32", len(b) == 4 * n_embd and
          list(struct.unpack(f"<{n_embd}f", b)) == v64)

    # several inputs at once == one at a time, bit for bit
    many = cl.embeddings.create(model="any", input=TEXTS)
    alone = [cl.embeddings.create(model="any", input=t).data[0].embedding for t in TEXTS]
    check("several inputs in one request equal each alone",
          [d.embedding for d in many.data] == alone and [d.index for d in many.data] == [0, 1, 2, 3])
    check("the same text twice gives the same vector", alone[0] == alone[3])
    check("different texts differ", alone[0] != alone[1])
    ids = [tokenize(srv, t) for t in TEXTS]
    m0 = srv.metrics()[0]
    cl.embeddings.create(model="any", input=TEXTS)
    m1 = srv.metrics()[0]
    key = next(k for k in m1 if k.startswith("vllm:prompt_tokens_total"))
    check("vllm:prompt_tokens_total counts embedded tokens",
          m1[key] - m0[key] == sum(map(len, ids)), f"{m0[key]} -> {m1[key]}")
    check("usage.prompt_tokens counts every input's tokens",
          many.usage.prompt_tokens == sum(map(len, ids)) == many.usage.total_tokens,
          f"{many.usage} {list(map(len, ids))}")

    # token ids: flat, and a list of lists
    one = cl.embeddings.create(model="any", input=ids[1])
    check("token ids give their text's vector", one.data[0].embedding == alone[1])
    lol = cl.embeddings.create(model="any", input=ids[:3])
    check("a list of token-id lists gives each text's vector",
          [d.embedding for d in lol.data] == alone[:3])

    # dimensions: the first N floats, renormalized
    short = cl.embeddings.create(model="any", input=TEXTS[1], dimensions=64).data[0].embedding
    full = alone[1][:64]
    s = norm(full)
    check("dimensions 64: the first 64 floats renormalized", len(short) == 64 and
          max(abs(a - b / s) for a, b in zip(short, full)) < 1e-6 and abs(norm(short) - 1) < 1e-5)

    # the same library call as `ferrox embed` (printed with 7 decimals)
    ref = cli_embed(TEXTS[1], "last")
    check("equal to ferrox embed's vector", len(ref) == n_embd and
          max(abs(a - b) for a, b in zip(ref, alone[1])) < 1e-6)

    # errors, OpenAI-shaped
    bad = [({"input": []}, "input"), ({"input": ""}, "input"), ({}, "input"),
           ({"input": {"a": 1}}, "input"), ({"input": [1, 2, 10 ** 7]}, "input"),
           ({"input": [[1, 2], 3.5]}, "input"), ({"input": "x", "encoding_format": "int8"},
                                                 "encoding_format"),
           ({"input": "x", "dimensions": 0}, "dimensions"),
           ({"input": "x", "dimensions": n_embd + 1}, "dimensions"),
           ({"input": "word " * 200}, "input")]  # longer than --ctx-size 128
    for body, param in bad:
        st, _, raw = srv.post("/v1/embeddings", body)
        err = json.loads(raw).get("error", {})
        check(f"400 for {json.dumps(body)[:60]}", st == 400 and err.get("param") == param and
              err.get("type") == "invalid_request_error" and err.get("message"), raw[:300])
    try:
        cl.embeddings.create(model="any", input="")
        check("the client raises BadRequestError", False)
    except openai.BadRequestError:
        check("the client raises BadRequestError", True)

    # a greedy stream beside a burst of embeddings gives its text alone
    msgs = [{"role": "user", "content": "Count from one to twenty in words."}]

    def chat():
        out = []
        for ch in cl.chat.completions.create(model="any", messages=msgs, max_tokens=48,
                                             temperature=0, stream=True):
            if ch.choices and ch.choices[0].delta.content:
                out.append(ch.choices[0].delta.content)
        return "".join(out)

    solo = chat()
    got, vecs = [], []
    th = threading.Thread(target=lambda: got.append(chat()))
    th.start()
    for _ in range(6):
        vecs.append([d.embedding for d in cl.embeddings.create(model="any", input=TEXTS).data])
    th.join()
    check("a stream beside embeddings gives its text alone", got == [solo] and len(solo) > 10,
          f"{got!r} vs {solo!r}")
    check("embeddings beside a stream are unchanged", all(v == alone for v in vecs))
    return alone


def clean_exit(srv, name):
    """The server drains and exits 0, and its log has no sanitizer report."""
    rc = srv.stop()
    log = srv.logtext()
    check(f"{name}: clean exit", rc == 0 and "runtime error" not in log and "Sanitizer" not in log,
          f"rc {rc}: {log[-3000:]}")


def cli_checks():
    """ferrox embed's flags and formats (llama-embedding's)."""
    def run(*args):
        return subprocess.run([BIN, "embed", "-m", SMOL, *args], capture_output=True, text=True)
    two = "The cat sat on the mat.<#>Ships sail."
    js = json.loads(run("-p", two, "--embd-separator", "<#>", "--embd-output-format", "json").stdout)
    vs = [d["embedding"] for d in js["data"]]
    check("embed: two prompts split at --embd-separator, unit vectors",
          len(vs) == 2 and all(abs(norm(v) - 1) < 1e-5 for v in vs) and vs[0] != vs[1])
    alone = cli_embed("Ships sail.", "last")
    check("embed: a prompt among others gives its vector alone",
          max(abs(a - b) for a, b in zip(alone, vs[1])) < 1e-6)
    raw = json.loads(run("-p", "Ships sail.", "--embd-normalize", "-1",
                         "--embd-output-format", "array").stdout)[0]
    check("embed: --embd-normalize -1 leaves the vector as pooled",
          abs(norm(raw) - 1) > 1e-2 and max(abs(a / norm(raw) - b) for a, b in zip(raw, alone)) < 1e-5)
    lines = run("-p", two, "--embd-separator", "<#>", "--embd-output-format", "raw").stdout.splitlines()
    check("embed: raw prints one line per prompt", len(lines) == 2 and len(lines[0].split()) == len(alone))
    out = run("-p", two, "--embd-separator", "<#>").stdout
    check("embed: the default format prints the vectors and the cosine matrix",
          "embedding 1:" in out and "cosine similarity matrix" in out, out[-500:])
    r = run("-p", "x", "--pooling", "rank")
    check("embed: --pooling rank is refused by name", r.returncode == 2 and "rank" in r.stderr, r.stderr)


def main():
    cli_checks()
    with Server(SMOL, "--embeddings", "--ctx-size", "128", "--parallel", "2") as srv:
        T.server = srv
        T.check("embeddings (pooling last)", lambda: run_main(srv))
        clean_exit(srv, "--embeddings")
    with Server(SMOL, "--embeddings", "--pooling", "mean") as srv:
        T.server = srv

        def mean():
            v = srv.client().embeddings.create(model="any", input=TEXTS[1], encoding_format="float")
            v = v.data[0].embedding
            ref = cli_embed(TEXTS[1], "mean")
            check("--pooling mean equals ferrox embed --pooling mean",
                  max(abs(a - b) for a, b in zip(ref, v)) < 1e-6)
            last = cli_embed(TEXTS[1], "last")
            check("mean pooling differs from last", max(abs(a - b) for a, b in zip(last, v)) > 1e-3)
        T.check("pooling mean", mean)
        clean_exit(srv, "--pooling mean")
    with Server(SMOL) as srv:
        T.server = srv
        st, _, raw = srv.post("/v1/embeddings", {"input": "x"})
        err = json.loads(raw).get("error", {})
        check("without --embeddings: 501 naming the flag", st == 501 and
              "--embeddings" in err.get("message", ""), raw[:300])
    T.server = None
    r = subprocess.run([BIN, "serve", "-m", SMOL, "--pooling", "none"], capture_output=True, text=True)
    check("--pooling none is refused by name", r.returncode == 2 and "none" in r.stderr, r.stderr)
    print(f"{T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
