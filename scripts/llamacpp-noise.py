#!/usr/bin/env python3
"""How far llama.cpp's own logits move between its own settings.

Run by hand with llama-cpp-python installed outside the repo, after
scripts/get-model.sh fetched both models:
    /path/to/venv/bin/python scripts/llamacpp-noise.py
For a fixed token sequence it evaluates each model under llama.cpp's
default settings (f16 KV cache, no flash attention, 2 threads) and under
variants (1 thread, f32 KV cache, ubatch 1), and prints the largest
|logit difference| per position against the default. This bounds how
closely any other engine can be expected to match llama.cpp's logits, and
so its greedy choices at near-ties (tests/test_parity.c).
"""
import os

import llama_cpp
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    ("gemma-3-270m-q4_k_m.gguf",
     [2, 818, 5279, 529, 7001, 563, 506, 5279, 529, 506, 2891, 529, 7001, 236761, 1030, 563]),
    ("SmolLM2-135M-Instruct.Q4_1.gguf",
     [504, 3575, 282, 4649, 314, 7042, 30, 198, 198, 504, 1797]),
]
VARIANTS = [
    ("default", {}),
    ("1 thread", dict(n_threads=1)),
    ("f32 KV cache", dict(type_k=0, type_v=0)),
    ("ubatch 1", dict(n_batch=1, n_ubatch=1)),
]

for file, ids in CASES:
    res = {}
    for name, kw in VARIANTS:
        kw = dict(kw)
        kw.setdefault("n_threads", 2)
        llm = llama_cpp.Llama(model_path=os.path.join(ROOT, "models", file), n_ctx=512,
                              logits_all=True, verbose=False, **kw)
        llm.eval(ids)
        res[name] = np.array(llm.scores[:len(ids)])
    print(f"{file} (llama-cpp-python {llama_cpp.__version__})")
    for name in res:
        if name != "default":
            d = np.abs(res[name] - res["default"]).max(1)
            print(f"  {name:14s} vs default: max |dlogit| per position {np.round(d, 3).tolist()}")
