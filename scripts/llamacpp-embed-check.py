#!/usr/bin/env python3
"""ferrox serve --embeddings beside llama.cpp's llama-server --embeddings on
the same GGUF: both /v1/embeddings answers for two texts and each pooling
(last, mean, cls), compared by cosine and max abs difference (quantized
weights and different kernels: not bit-equal; SmolLM2-135M Q4_1 gave
cos >= 0.9997, Gemma 3 270M Q4_K_M >= 0.998). Not run by CI.

usage: scripts/llamacpp-embed-check.py MODEL.gguf [LLAMA_SERVER]
(LLAMA_SERVER default ../oracle/llama-build-noamx/bin/llama-server;
ferrox from build/bin.)
"""
import json
import os
import subprocess
import sys
import time
import urllib.request
def post(port, body):
    rq = urllib.request.Request(f"http://127.0.0.1:{port}/v1/embeddings", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(rq, timeout=120).read())
def wait(port):
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2); return
        except Exception: time.sleep(0.2)
texts = ["The cat sat on the mat.", "A completely different sentence about ships and the sea, longer than the first one by a few words."]
model = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
llama = sys.argv[2] if len(sys.argv) > 2 else os.path.join(root, "..", "oracle", "llama-build-noamx", "bin", "llama-server")
for pool in ["last", "mean", "cls"]:
    a = subprocess.Popen([llama, "-m", model, "--port", "18501", "--embeddings", "--pooling", pool, "-t", "2", "-c", "512"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    b = subprocess.Popen([os.path.join(root, "build", "bin", "ferrox"), "serve", "-m", model, "--port", "18502", "--embeddings", "--pooling", pool, "-t", "2", "-c", "512"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait(18501); wait(18502)
    ea = post(18501, {"input": texts, "model": "x"}); eb = post(18502, {"input": texts, "model": "x"})
    for i in range(len(texts)):
        x = ea["data"][i]["embedding"]; y = eb["data"][i]["embedding"]
        cos = sum(p*q for p, q in zip(x, y)); md = max(abs(p-q) for p, q in zip(x, y))
        print(f"{model.split('/')[-1]} {pool} input {i}: cos {cos:.6f} maxdiff {md:.2e} tokens llama {ea['usage']['prompt_tokens']} ferrox {eb['usage']['prompt_tokens']}")
    a.terminate(); b.terminate(); a.wait(); b.wait()
