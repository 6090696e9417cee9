#!/usr/bin/env python3
"""Tokenizer speed: ferrox against Hugging Face `tokenizers`, single thread.

    python3 bench/tokenize_speed.py [--tok-dump build/bin/tok_dump] [--gguf] [--rounds 5] [--bytes N] [NAME ...]

The text: 1 MiB (--bytes) of mixed-language running text (make-hf-tokenizers.py's
corpus_text(seed=3): Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari,
Thai, CJK, kana, Hangul words, numbers, punctuation, newlines and tabs),
the same bytes every run. The vocabularies: the folders
scripts/make-hf-tokenizers.py writes (built into build/hf-tokenizers when
missing or stale); default the two default models', NAME picks others.

For each vocabulary, the best of --rounds encodings of the whole text
(after one warm-up), add_special off:
- tokenizers: Tokenizer.from_file(tokenizer.json).encode(text), with
  RAYON_NUM_THREADS=1 and TOKENIZERS_PARALLELISM=false;
- ferrox: `tok_dump --bench` (fx_tokenize over the whole text in process,
  one thread) on the folder, or with --gguf on the GGUF file the folder was
  converted from (ferrox's GGUF tokenizer against tokenizers on the
  converted tokenizer.json: not the same tokenization, see
  tests/test_hf_tokenizer_oracle.py, but the same text and vocabulary).
Prints tokens, seconds and tokens/s for both, and ferrox / tokenizers.
"""
import argparse
import os
import runpy
import subprocess
import sys
import tempfile
import time
import types

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_maker():
    """scripts/make-hf-tokenizers.py as a namespace (its name is no module name)."""
    return types.SimpleNamespace(**runpy.run_path(os.path.join(ROOT, "scripts", "make-hf-tokenizers.py")))


def hf_speed(folder, text, rounds):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    n, best = 0, None
    for r in range(rounds + 1):  # round 0: warm-up
        t0 = time.perf_counter()
        n = len(tok.encode(text, add_special_tokens=False).ids)
        dt = time.perf_counter() - t0
        if r and (best is None or dt < best):
            best = dt
    return n, best


def ferrox_speed(tok_dump, target, path, rounds):
    p = subprocess.run([tok_dump, "--bench", target, path, str(rounds)], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    f = p.stdout.split()  # tokens N bytes B best_s S tokens_per_s T
    return int(f[1]), float(f[5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tok-dump", default=os.path.join(ROOT, "build", "bin", "tok_dump"))
    ap.add_argument("--gguf", action="store_true", help="ferrox on the source GGUF instead of the folder")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=1 << 20, help="text size (default 1 MiB)")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    mk = load_maker()
    names = a.names or [n for n, _ in mk.MODELS]
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.tok_dump))), "hf-tokenizers")
    vocabs = mk.ensure(out, names)
    text = mk.corpus_text(seed=3, n_bytes=a.bytes)
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        print("text: %d bytes, %d characters; best of %d rounds, one thread" % (
            len(text.encode("utf-8")), len(text), a.rounds))
        print("%-16s %10s %9s %12s   %10s %9s %12s  %7s" % (
            "vocabulary", "hf tokens", "hf s", "hf tok/s", "fx tokens", "fx s", "fx tok/s", "fx/hf"))
        for name, folder, src in vocabs:
            hn, hs = hf_speed(folder, text, a.rounds)
            target = src if a.gguf else folder
            if a.gguf and not src:
                print("%-16s no GGUF source" % name)
                continue
            fn, fs = ferrox_speed(a.tok_dump, target, path, a.rounds)
            if fn is None:
                print("%-16s %10d %9.4f %12.0f   ferrox: %s" % (name, hn, hs, hn / hs, fs))
                continue
            print("%-16s %10d %9.4f %12.0f   %10d %9.4f %12.0f  %7.2f" % (
                name, hn, hs, hn / hs, fn, fs, fn / fs, (fn / fs) / (hn / hs)))
    finally:
        os.remove(path)


if __name__ == "__main__":
    sys.exit(main())
