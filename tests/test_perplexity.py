#!/usr/bin/env python3
"""`ferrox perplexity --kl-divergence-base / --kl-divergence` end to end.

    python3 tests/test_perplexity.py FERROX_BIN

On SmolLM2-135M Q4_1 (FX_MODELS_DIR, default models/) over Debian's GPL-3,
in 128-token chunks:
- the saved file has llama-perplexity's layout (tools/kld.h): header, the
  text's tokens, one record per scored position;
- every record decodes to the log-softmax of `ferrox logits` for the same
  position (an independent run) within the 16-bit step;
- reading its own file back gives zero KL, the same top token everywhere
  and the same perplexity;
- against an f32-cache run, the printed mean KL, ln(PPL(Q)/PPL(base)) and
  same-top share equal what this script computes from the file and that
  run's logits;
- a truncated file, a file of another kind, a vocabulary mismatch and a
  missing base are refused with a message, no crash.
Exit 77 (skip) when the model or the text is missing, unless
FX_REQUIRE_MODELS=1. Prints `N passed, N failed`.
"""
import array
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from pycheck import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
TEXT = "/usr/share/common-licenses/GPL-3"
CTX, CHUNKS = 128, 2
FIRST = CTX // 2
N_SCORED = CTX - 1 - FIRST

check = Checks()


def run(*args):
    return subprocess.run([FERROX, *args], capture_output=True, text=True)


def value(out, label):
    """The first number after `label` on its line of the tool's output."""
    for line in out.splitlines():
        if line.startswith(label):
            return float(line.split(":", 1)[1].split()[0])
    raise AssertionError(f"no line '{label}' in:\n{out}")


def log_softmax(row):
    mx = max(row)
    lse = math.log(math.fsum(math.exp(x - mx) for x in row))
    return [x - mx - lse for x in row]


def read_base(path):
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:8]
    n_ctx, n_vocab, n_chunk = struct.unpack_from("<Iii", data, 8)
    off = 20
    tokens = list(struct.unpack_from(f"<{n_chunk * n_ctx}i", data, off))
    off += 4 * n_chunk * n_ctx
    nv = 2 * ((n_vocab + 1) // 2) + 4
    recs = []
    while off < len(data):
        scale, min_lp = struct.unpack_from("<ff", data, off)
        codes = array.array("H", data[off + 8:off + 2 * nv])
        recs.append([scale * c + min_lp for c in codes[:n_vocab]])
        off += 2 * nv
    return magic, n_ctx, n_vocab, n_chunk, tokens, recs, len(data)


def main():
    if not os.path.exists(MODEL) or not os.path.exists(TEXT):
        print(f"skip: needs {MODEL} and {TEXT}")
        return 1 if REQUIRE else 77
    tmp = tempfile.mkdtemp()
    base = os.path.join(tmp, "base.bin")
    common = ["-m", MODEL, "-c", str(CTX), "-t", "2"]

    r = run("perplexity", *common, "-f", TEXT, "--chunks", str(CHUNKS), "--kl-divergence-base", base)
    check(r.returncode == 0, f"save run exits 0 ({r.stderr[-300:]})")
    ppl = float(r.stdout.split("Final estimate: PPL = ")[1].split()[0])

    magic, n_ctx, n_vocab, n_chunk, tokens, recs, size = read_base(base)
    nv = 2 * ((n_vocab + 1) // 2) + 4
    check(magic == b"_logits_", "magic")
    check((n_ctx, n_vocab, n_chunk) == (CTX, 49152, CHUNKS), f"header {n_ctx} {n_vocab} {n_chunk}")
    check(size == 20 + 4 * CHUNKS * CTX + CHUNKS * N_SCORED * nv * 2, f"file size {size}")
    ids = json.loads(run("tokenize", "-m", MODEL, "-p", open(TEXT, encoding="utf-8").read(), "--ids").stdout)
    check(tokens == ids[:CHUNKS * CTX], "tokens are the text's")
    check(len(recs) == CHUNKS * N_SCORED, f"{len(recs)} records")

    # The same chunks through `ferrox logits`, each chunk's first id
    # replaced by BOS as perplexity does when the model adds one.
    bos = json.loads(run("tokenize", "-m", MODEL, "-p", "", "--ids").stdout)
    seqs = [bos[:1] + tokens[c * CTX + len(bos[:1]):(c + 1) * CTX] for c in range(CHUNKS)]
    idf = os.path.join(tmp, "ids.txt")
    with open(idf, "w") as f:
        f.write("\n".join(",".join(map(str, s)) for s in seqs) + "\n")

    def logits(*opts):
        out = os.path.join(tmp, "l.bin")
        r = run("logits", "-m", MODEL, "--ids-file", idf, "--out", out, "-t", "2", *opts)
        assert r.returncode == 0, r.stderr
        a = array.array("f")
        with open(out, "rb") as f:
            a.frombytes(f.read())
        return [a[i * n_vocab:(i + 1) * n_vocab] for i in range(len(a) // n_vocab)]

    rows = logits()
    scored = [c * CTX + p for c in range(CHUNKS) for p in range(FIRST, CTX - 1)]
    nexts = [tokens[c * CTX + p + 1] for c in range(CHUNKS) for p in range(FIRST, CTX - 1)]
    worst = 0.0
    for k in (0, 1, N_SCORED // 2, N_SCORED - 1, N_SCORED, len(scored) - 1):
        true = log_softmax(rows[scored[k]])
        top = max(true)
        step = 16 / 65535
        for i, lp in enumerate(true):
            if lp > top - 16 + step:
                worst = max(worst, abs(recs[k][i] - lp) / step)
    check(worst <= 0.51, f"records decode to the logits' log-softmax within half a step (worst {worst:.3f})")

    # Read back: the same run again.
    r = run("perplexity", *common, "--kl-divergence-base", base, "--kl-divergence")
    check(r.returncode == 0, f"self compare exits 0 ({r.stderr[-300:]})")
    out = r.stdout
    check(abs(value(out, "Mean PPL(Q)") - ppl) < 1e-4, "same perplexity as the save run")
    check(abs(value(out, "Mean    KLD")) < 1e-5, f"self KL {value(out, 'Mean    KLD')}")
    check(abs(value(out, "Mean ln(PPL(Q)/PPL(base))")) < 1e-4, "self ln ratio")
    check(value(out, "Same top p") == 100.0, "self same top")

    # Against an f32 cache: the printed statistics are this computation.
    r = run("perplexity", *common, "-ctk", "f32", "-ctv", "f32", "--kl-divergence-base", base, "--kl-divergence")
    check(r.returncode == 0, f"f32 compare exits 0 ({r.stderr[-300:]})")
    out = r.stdout
    rows32 = logits("--cache-type-k", "f32", "--cache-type-v", "f32")
    kl = nll = nll_b = same = 0.0
    chunk_diff = [0.0] * CHUNKS
    for k, pos in enumerate(scored):
        q = log_softmax(rows32[pos])
        p = recs[k]
        kl += math.fsum(math.exp(lp) * (lp - lq) for lp, lq in zip(p, q) if lp > -16)
        nll += -q[nexts[k]]
        nll_b += -p[nexts[k]]
        same += q.index(max(q)) == p.index(max(p))
        chunk_diff[k // N_SCORED] += (p[nexts[k]] - q[nexts[k]]) / N_SCORED
    n = len(scored)
    got_kl = value(out, "Mean    KLD")
    check(1e-5 < kl / n < 0.05, f"f32 cache moves the distributions a little (KL {kl / n:.2e})")
    check(abs(got_kl - kl / n) < 2e-6, f"mean KL {got_kl} vs {kl / n:.6f}")
    check(abs(value(out, "Mean ln(PPL(Q)/PPL(base))") - (nll - nll_b) / n) < 2e-6, "ln ratio")
    check(abs(value(out, "Same top p") - 100 * same / n) < 1e-3, "same top share")
    m = sum(chunk_diff) / CHUNKS
    se = math.sqrt(sum((d - m) ** 2 for d in chunk_diff) / CHUNKS / (CHUNKS - 1))
    check(abs(value(out, f"  its SE from the {CHUNKS} chunks' means") - se) < 2e-6, "chunk-level SE")

    # Refusals.
    cut = os.path.join(tmp, "cut.bin")
    with open(base, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:size - 1000])
    r = run("perplexity", *common, "--kl-divergence-base", cut, "--kl-divergence")
    check(r.returncode == 1 and "truncated" in r.stderr, f"truncated file refused: {r.stderr.strip()[-200:]}")
    r = run("perplexity", *common, "--kl-divergence-base", TEXT, "--kl-divergence")
    check(r.returncode == 1 and "not a log-probability file" in r.stderr, "other file refused")
    bad = os.path.join(tmp, "vocab.bin")
    with open(base, "rb") as f, open(bad, "wb") as g:
        d = bytearray(f.read())
        struct.pack_into("<i", d, 12, 49151)  # same record length
        g.write(d)
    r = run("perplexity", *common, "--kl-divergence-base", bad, "--kl-divergence")
    check(r.returncode == 1 and "the model has 49152" in r.stderr, "vocabulary mismatch refused")

    def edited(what, edit):
        with open(base, "rb") as f:
            d = bytearray(f.read())
        edit(d)
        with open(bad, "wb") as g:
            g.write(d)
        r = run("perplexity", *common, "--kl-divergence-base", bad, "--kl-divergence")
        check(r.returncode == 1 and "error: " in r.stderr and "Traceback" not in r.stderr,
              f"{what} refused: {r.stderr.strip()[-160:]}")
        return r.stderr

    edited("fewer chunks than the file holds", lambda d: struct.pack_into("<i", d, 16, CHUNKS - 1))
    edited("a shorter n_ctx", lambda d: struct.pack_into("<I", d, 8, CTX // 2))
    edited("bytes after the last record", lambda d: d.extend(b"\0" * 64))
    rec0 = 20 + 4 * CHUNKS * CTX
    err = edited("a NaN scale", lambda d: struct.pack_into("<f", d, rec0, float("nan")))
    check("corrupt" in err, "a NaN scale is called corrupt")
    edited("an infinite floor", lambda d: struct.pack_into("<f", d, rec0 + 4, float("-inf")))
    nv = 2 * ((49152 + 1) // 2) + 4
    err = edited("a record that is no distribution",
                 lambda d: d.__setitem__(slice(rec0 + 8, rec0 + 2 * nv), b"\xff" * (2 * nv - 8)))
    check("do not sum to 1" in err, "a record whose probabilities do not sum to 1 is named so")
    r = run("perplexity", *common, "-f", TEXT, "--chunks", "1",
            "--kl-divergence-base", os.path.join(tmp, "no", "such", "dir", "b.bin"))
    check(r.returncode == 1 and "No such file or directory" in r.stderr, "save into a missing folder")
    if os.path.exists("/dev/full"):
        r = run("perplexity", *common, "-f", TEXT, "--chunks", "1", "--kl-divergence-base", "/dev/full")
        check(r.returncode == 1 and "cannot write /dev/full" in r.stderr and os.path.exists("/dev/full"),
              "a full device: refused, and left in place")
    with open(base, "rb") as f, open(bad, "wb") as g:
        d = bytearray(f.read(4096))
        struct.pack_into("<i", d, 16, 1 << 20)
        g.write(d)
    r = run("perplexity", *common, "--kl-divergence-base", bad, "--kl-divergence")
    check(r.returncode == 1 and "header promises" in r.stderr, "a header larger than the file refused")
    r = run("perplexity", *common, "--kl-divergence")
    check(r.returncode == 2 and "--kl-divergence-base" in r.stderr, "--kl-divergence alone refused")

    return check.summary()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    FERROX = sys.argv[1]
    sys.exit(main())
