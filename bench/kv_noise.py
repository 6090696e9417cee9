#!/usr/bin/env python3
"""How far an f16 KV cache moves ferrox's next-token distributions.

    python3 bench/kv_noise.py MODEL.gguf [TEXT] [--chunks N] [--ferrox BIN] [-- EXTRA...]

Tokenizes TEXT (default: Debian's GPL-3, the perplexity text in
docs/BENCHMARKS.md), cuts it into 512-token chunks as `ferrox perplexity`
does (the first token of a chunk replaced by BOS where the model has one)
and runs `ferrox logits` over the first N chunks twice: with an f32 KV
cache (no rounding of K, V or Q) and with the f16 default (EXTRA options go
to that second run, e.g. --portable). Over the scored positions (each
chunk's second half) it prints the mean KL divergence of the f16 run's
distribution from the f32 run's, how often their top tokens agree, and
the change in mean negative log-likelihood (ln of the perplexity ratio).

These are the storage rounding's own effect, for comparing with the
differences between engines: a change that moves perplexity by less than
this is inside the noise of the cache type. Needs numpy; logits are
n_vocab floats per position, so keep N small for large vocabularies
(Gemma 3: 1 GiB per 1000 positions).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTX = 512


def log_softmax(x):
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("text", nargs="?", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--ferrox", default=os.path.join(ROOT, "build", "bin", "ferrox"))
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    ids = json.loads(subprocess.check_output(
        [a.ferrox, "tokenize", "-m", a.model, "-p", text, "--ids"], stderr=subprocess.DEVNULL))
    bos = json.loads(subprocess.check_output(
        [a.ferrox, "tokenize", "-m", a.model, "-p", "", "--ids"], stderr=subprocess.DEVNULL))
    n = min(a.chunks, len(ids) // CTX)
    if n < 1:
        sys.exit(f"kv_noise: {a.text} has fewer than {CTX} tokens")
    seqs = [ids[c * CTX:(c + 1) * CTX] for c in range(n)]
    if bos:
        seqs = [bos[:1] + s[1:] for s in seqs]
    with tempfile.TemporaryDirectory() as tmp:
        idf = os.path.join(tmp, "ids.txt")
        with open(idf, "w") as f:
            f.write("\n".join(",".join(map(str, s)) for s in seqs) + "\n")

        def logits(opts):
            out = os.path.join(tmp, "l.bin")
            subprocess.check_call([a.ferrox, "logits", "-m", a.model, "--ids-file", idf, "--out", out] + opts,
                                  stderr=subprocess.DEVNULL)
            x = np.fromfile(out, dtype=np.float32)
            return x.reshape(n * CTX, -1)

        # Scored positions: each chunk's second half, predicting the next id.
        pos = np.concatenate([np.arange(c * CTX + CTX // 2, (c + 1) * CTX - 1) for c in range(n)])
        tgt = np.concatenate([np.array(s[CTX // 2 + 1:]) for s in seqs])
        ref = log_softmax(logits(["--cache-type-k", "f32", "--cache-type-v", "f32"])[pos])
        got = log_softmax(logits(extra)[pos])
    rows = np.arange(len(pos))
    kl = (np.exp(ref) * (ref - got)).sum(axis=1)
    dnll = -got[rows, tgt].mean() + ref[rows, tgt].mean()
    top = (got.argmax(axis=1) == ref.argmax(axis=1)).mean()
    print(f"{os.path.basename(a.model)}: {len(pos)} positions in {n} chunks, f16 cache{' ' + ' '.join(extra) if extra else ''} vs f32")
    print(f"  mean KL {kl.mean():.3e} nats (99th percentile {np.percentile(kl, 99):.3e})")
    print(f"  top token agrees at {100 * top:.2f}% of positions")
    print(f"  mean NLL change {dnll:+.5f} (perplexity x{np.exp(dnll):.5f})")


if __name__ == "__main__":
    main()
