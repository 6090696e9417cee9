#!/usr/bin/env python3
"""Greedy-decoding references from llama.cpp for tests/test_parity.c.

Run (once, by hand; CI does not run it) with llama-cpp-python installed in
an environment OUTSIDE the repo, after scripts/get-model.sh has fetched the
models:

    /path/to/venv/bin/python scripts/make-greedy-refs.py

For each model and prompt it tokenizes the prompt as llama.cpp does
(add BOS when the model asks, special tokens parsed), evaluates it, then
takes 32 greedy steps, recording at each step the argmax token and the gap
between the two best logits (the test tolerates a divergence right after a
step whose gap is under 0.01). Output: tests/data/greedy/<model>.tsv with
one prompt per line:
    prompt as hex <TAB> prompt ids <TAB> greedy ids <TAB> top1-top2 gaps
"""
import os
import sys

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {
    "gemma3-270m": "gemma-3-270m-q4_k_m.gguf",
    "smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf",
}
PROMPTS = {
    "gemma3-270m": [
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    ],
    "smollm2-135m": [
        "The capital of France is",
        "Once upon a time, in a small village by the sea,",
        "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    ],
}
N_GEN = 32
# Long-context check (Gemma 3's 512-token sliding window): N_LONG ids of
# this repo's README, their llama.cpp argmax and top-2 gap at every row.
N_LONG = 768


def main():
    out_dir = os.path.join(ROOT, "tests", "data", "greedy")
    os.makedirs(out_dir, exist_ok=True)
    for name, file in MODELS.items():
        path = os.path.join(ROOT, "models", file)
        llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, n_batch=512,
                              logits_all=True, verbose=False)
        lines = [f"# llama-cpp-python {llama_cpp.__version__}; {file}; "
                 f"{N_GEN} greedy steps; made by scripts/make-greedy-refs.py"]
        for prompt in PROMPTS[name]:
            ids = llm.tokenize(prompt.encode(), add_bos=True, special=True)
            llm.reset()
            llm.eval(ids)
            gen, gaps = [], []
            for _ in range(N_GEN):
                logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
                top = np.argsort(-logits, kind="stable")[:2]
                gen.append(int(top[0]))
                gaps.append(float(logits[top[0]] - logits[top[1]]))
                llm.eval([int(top[0])])
            lines.append("\t".join([
                prompt.encode().hex(),
                ",".join(map(str, ids)),
                ",".join(map(str, gen)),
                ",".join(f"{g:.4f}" for g in gaps),
            ]))
            print(name, repr(prompt), "->", repr(llm.detokenize(gen).decode("utf-8", "replace")),
                  file=sys.stderr)
        with open(os.path.join(out_dir, name + ".tsv"), "w") as f:
            f.write("\n".join(lines) + "\n")
        if name == "gemma3-270m":
            write_long(path, file, out_dir, name)


def write_long(path, file, out_dir, name):
    """One prefill of N_LONG tokens: argmax and top-2 gap of every row."""
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_threads=2, n_batch=1024,
                          n_ubatch=1024, logits_all=True, verbose=False)
    with open(os.path.join(ROOT, "README.md"), "rb") as f:
        text = f.read() * 4
    ids = llm.tokenize(text, add_bos=True, special=False)[:N_LONG]
    llm.eval(ids)
    sc = np.array(llm.scores[:len(ids)], dtype=np.float32)
    top = np.argsort(-sc, axis=1, kind="stable")[:, :2]
    gaps = sc[np.arange(len(ids)), top[:, 0]] - sc[np.arange(len(ids)), top[:, 1]]
    with open(os.path.join(out_dir, name + "-long.tsv"), "w") as f:
        f.write(f"# llama-cpp-python {llama_cpp.__version__}; {file}; one prefill of "
                f"{len(ids)} ids; per row: id, llama.cpp argmax, top1-top2 gap\n")
        for i, t in enumerate(ids):
            f.write(f"{t}\t{int(top[i, 0])}\t{gaps[i]:.4f}\n")


if __name__ == "__main__":
    main()
