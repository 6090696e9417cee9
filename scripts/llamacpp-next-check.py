#!/usr/bin/env python3
"""Does llama.cpp load what `ferrox convert` writes for the 2025-2026
families, and agree with transformers on it?

Run by hand, with llama-cpp-python installed outside the repo (e.g. built
from the sdist scripts/get-llama-sdist.sh fetches) and ferrox built:
    /path/to/venv/bin/python scripts/llamacpp-next-check.py [build/bin/ferrox]
For every fixture in tests/fixtures/hf-tiny-next it copies the checkpoint
with a 256-token tokenizer (tests/fixtures/hf-tiny/qwen2's, byte-level BPE:
llama.cpp needs a vocabulary to load a model; the fixtures run from ids),
converts it to an f32 GGUF with ferrox, evaluates the fixture's prompt ids
with llama.cpp (f32 KV cache, 2 threads) and prints the largest |logit
difference| against transformers' reference, relative to max(1, max|ref|)
as tests/test_fixtures.c measures ferrox, or why llama.cpp refused the file.
Nothing is written in the repo.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEXT = os.path.join(ROOT, "tests", "fixtures", "hf-tiny-next")
TOK = os.path.join(ROOT, "tests", "fixtures", "hf-tiny", "qwen2")


def ref_logits(d, n):
    from safetensors.numpy import load_file
    return load_file(os.path.join(d, "reference.safetensors"))["logits"][:n]


def main():
    ferrox = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "ferrox")
    if len(sys.argv) > 2:  # one fixture, in a child process (llama.cpp may abort)
        return one(ferrox, sys.argv[2])
    print("| fixture | llama.cpp | max rel err vs transformers |")
    print("|---|---|---|")
    for name in sorted(os.listdir(NEXT)):
        if not os.path.isfile(os.path.join(NEXT, name, "reference.json")):
            continue
        r = subprocess.run([sys.executable, __file__, ferrox, name], capture_output=True, text=True)
        line = r.stdout.strip()
        if r.returncode or not line:
            last = (r.stderr.strip().splitlines() or ["no output"])[-1]
            line = f"| {name} | crashed (exit {r.returncode}): {last[:100]} | |"
        print(line, flush=True)


QUIET = llama_cpp.llama_log_callback(lambda *a: None)  # kept: llama.cpp holds the pointer


def convert(ferrox, d, tmp):
    """Fixture d (with a 256-token tokenizer copied in) as an f32 GGUF in
    tmp, by ferrox convert: (path, None), or (None, why)."""
    src = os.path.join(tmp, "src")
    shutil.copytree(d, src)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOK, f), src)
    out = os.path.join(tmp, "m.gguf")
    r = subprocess.run([ferrox, "convert", src, "-o", out, "--type", "f32"], capture_output=True, text=True)
    return (None, r.stderr.strip()[:120]) if r.returncode else (out, None)


def one(ferrox, name):
    llama_cpp.llama_log_set(QUIET, None)
    if True:
        d = os.path.join(NEXT, name)
        ref = json.load(open(os.path.join(d, "reference.json")))
        ids = ref["prompt_ids"]
        with tempfile.TemporaryDirectory() as tmp:
            out, why = convert(ferrox, d, tmp)
            if why:
                print(f"| {name} | ferrox convert: {why} | |")
                return
            try:
                m = llama_cpp.Llama(out, n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
                                    type_k=0, type_v=0, verbose=False)
            except Exception as e:  # llama.cpp refuses the file
                print(f"| {name} | refused: {str(e)[:100]} | |")
                return
            m.eval(ids)
            got = np.array(m.scores[:len(ids)], dtype=np.float64)
            want = ref_logits(d, len(ids)).astype(np.float64)
            err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            print(f"| {name} | loads | {err:.2e} |")
            del m


if __name__ == "__main__":
    main()
