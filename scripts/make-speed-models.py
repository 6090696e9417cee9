#!/usr/bin/env python3
"""Speed-test models: a TinyLlama-1.1B-shaped Llama with random weights,
written as a Hugging Face checkpoint (f16 safetensors) and turned into GGUF
by ferrox's own converter, as Q4_K_M and Q8_0, with SmolLM2's tokenizer
copied in (so llama.cpp loads the same files).

    python3 scripts/make-speed-models.py [--out models]   (needs numpy)

Shape: TinyLlama-1.1B (hidden 2048, 22 layers, 32 query heads, 4 KV heads,
FFN 5632, RoPE theta 10000) except the vocabulary: SmolLM2's 49152 tokens
instead of Llama's 32000, since that is the tokenizer at hand. Weights are
N(0, 0.02) from a fixed seed; norms are 1. The files are only for speed:
their text is noise.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CFG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
    "num_attention_heads": 32, "num_key_value_heads": 4, "vocab_size": 49152,
    "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float16",
    "bos_token_id": 1, "eos_token_id": 2,
}


def tensors():
    h, f, L = CFG["hidden_size"], CFG["intermediate_size"], CFG["num_hidden_layers"]
    kv = h // CFG["num_attention_heads"] * CFG["num_key_value_heads"]
    yield "model.embed_tokens.weight", (CFG["vocab_size"], h)
    for i in range(L):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (h,)
        yield p + "self_attn.q_proj.weight", (h, h)
        yield p + "self_attn.k_proj.weight", (kv, h)
        yield p + "self_attn.v_proj.weight", (kv, h)
        yield p + "self_attn.o_proj.weight", (h, h)
        yield p + "post_attention_layernorm.weight", (h,)
        yield p + "mlp.gate_proj.weight", (f, h)
        yield p + "mlp.up_proj.weight", (f, h)
        yield p + "mlp.down_proj.weight", (h, f)
    yield "model.norm.weight", (h,)
    yield "lm_head.weight", (CFG["vocab_size"], h)


def write_checkpoint(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump(CFG, fh, indent=1)
    meta, off = {}, 0
    for name, shape in tensors():
        n = int(np.prod(shape)) * 2
        meta[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    head = json.dumps(meta).encode()
    head += b" " * (-len(head) % 8)
    rng = np.random.default_rng(1234)
    with open(os.path.join(d, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head)
        for name, shape in tensors():
            if len(shape) == 1:
                fh.write(np.ones(shape, np.float16).tobytes())
                continue
            for r0 in range(0, shape[0], 1024):
                rows = min(1024, shape[0] - r0)
                a = rng.standard_normal((rows, shape[1]), dtype=np.float32) * 0.02
                fh.write(a.astype(np.float16).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        sys.exit(f"{a.vocab} missing: run scripts/get-model.sh smollm2-135m first")
    ck = os.path.join(a.out, "tinyllama-shape-hf")
    if not os.path.exists(os.path.join(ck, "model.safetensors")):
        print("writing", ck, flush=True)
        write_checkpoint(ck)
    ferrox = os.path.join(ROOT, "build", "bin", "ferrox")
    for t in ("q4_k_m", "q8_0"):
        out = os.path.join(a.out, f"tinyllama-shape-{t}.gguf")
        if not os.path.exists(out):
            subprocess.run([ferrox, "convert", ck, "-o", out, "--type", t, "--vocab-from", a.vocab],
                           check=True)
        print(out)


if __name__ == "__main__":
    main()
