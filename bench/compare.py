#!/usr/bin/env python3
"""Prompt and generation tokens/s of ferrox and llama.cpp on the same GGUF,
same threads, measured in one run.

    /path/to/venv-with-llama-cpp-python/bin/python bench/compare.py [-t 2] [-n 64]

llama.cpp runs through llama-cpp-python's low-level eval (the prompt as one
batch, then one token per eval with greedy argmax), ferrox through
`build/bin/ferrox run --temp 0`, whose stderr reports both rates. Each
engine's number is the best of --reps runs (these machines are noisy).
Prints a Markdown table for docs/BENCHMARKS.md.
"""
import argparse
import os
import re
import subprocess
import time

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = [
    ("Gemma 3 270M Q4_K_M", "gemma-3-270m-q4_k_m.gguf"),
    ("SmolLM2-135M-Instruct Q4_1", "SmolLM2-135M-Instruct.Q4_1.gguf"),
]
PROMPT = ("The history of the printing press begins in the fifteenth century, when "
          "Johannes Gutenberg of Mainz combined movable metal type, oil-based ink and a "
          "wooden screw press into a system that could produce books quickly and cheaply. "
          "Within a few decades, printing shops had spread across Europe, and")


def run_ferrox(path, threads, n):
    out = subprocess.run([os.path.join(ROOT, "build", "bin", "ferrox"), "run", "-m", path,
                          "-p", PROMPT, "-n", str(n), "--temp", "0", "-t", str(threads)],
                         capture_output=True, text=True, check=True)
    m = re.search(r"prompt (\d+) tokens, ([\d.]+) tokens/s \| generation (\d+) tokens, ([\d.]+)",
                  out.stderr)
    return int(m.group(1)), float(m.group(2)), int(m.group(3)), float(m.group(4))


def run_llama(llm, n):
    ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(ids)
    t1 = time.perf_counter()
    gen = 0
    for _ in range(n):
        tok = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        if llm.token_eos() == tok:
            break
        llm.eval([tok])
        gen += 1
    t2 = time.perf_counter()
    return len(ids), len(ids) / (t1 - t0), gen, gen / (t2 - t1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print(f"threads {a.threads}, {a.n} generated tokens, best of {a.reps}; "
          f"llama.cpp via llama-cpp-python {llama_cpp.__version__}\n")
    print("| model | prompt tokens | ferrox pp t/s | llama.cpp pp t/s | ratio | "
          "ferrox tg t/s | llama.cpp tg t/s | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for name, file in MODELS:
        path = os.path.join(ROOT, "models", file)
        llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, n_threads=a.threads,
                              n_threads_batch=a.threads, logits_all=False, verbose=False)
        fx = [run_ferrox(path, a.threads, a.n) for _ in range(a.reps)]
        ll = [run_llama(llm, a.n) for _ in range(a.reps)]
        fpp, ftg = max(r[1] for r in fx), max(r[3] for r in fx)
        lpp, ltg = max(r[1] for r in ll), max(r[3] for r in ll)
        print(f"| {name} | {fx[0][0]} | {fpp:.1f} | {lpp:.1f} | {fpp / lpp:.2f} | "
              f"{ftg:.1f} | {ltg:.1f} | {ftg / ltg:.2f} |")


if __name__ == "__main__":
    main()
