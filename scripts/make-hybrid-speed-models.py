#!/usr/bin/env python3
"""Speed-test models for the hybrid families (issue 22): ~1B-parameter
random checkpoints of a Qwen 3.5 shape (Gated DeltaNet + gated attention)
and a Granite 4.0-H shape (Mamba-2 + attention, dense), written as Hugging
Face checkpoints (f16 safetensors) and turned into Q8_0 GGUF by ferrox's own
converter with SmolLM2's tokenizer copied in (so llama.cpp loads the same
files).

    python3 scripts/make-hybrid-speed-models.py [--out models]
    (needs numpy, and torch + transformers for the tensor shapes only: the
    model is built on the "meta" device, nothing is allocated)

Weights are N(0, 0.02) from a fixed seed (norms 1, or 0 where the family
stores 1 + w; Mamba/DeltaNet A_log, dt_bias and D in their usual ranges).
Their text is noise: the files are only for speed.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = 49152  # SmolLM2's tokenizer, the one at hand

QWEN35 = {
    "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
    "hidden_size": 1536, "intermediate_size": 4608, "num_hidden_layers": 24,
    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
    "linear_num_key_heads": 16, "linear_num_value_heads": 16,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0,
                        "partial_rotary_factor": 0.25},
    "rms_norm_eps": 1e-6, "vocab_size": VOCAB, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
}
GRANITE = {
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
    "hidden_size": 1536, "intermediate_size": 4096, "shared_intermediate_size": 4096,
    "num_local_experts": 0, "num_experts_per_tok": 0, "num_hidden_layers": 32,
    "num_attention_heads": 12, "num_key_value_heads": 4,
    "layer_types": (["mamba"] * 7 + ["attention"]) * 4,
    "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1,
    "mamba_d_conv": 4, "mamba_expand": 2, "mamba_chunk_size": 256, "mamba_conv_bias": True,
    "mamba_proj_bias": False, "position_embedding_type": "nope",
    "attention_multiplier": 0.015625, "embedding_multiplier": 12.0,
    "residual_multiplier": 0.22, "logits_scaling": 6.0, "rms_norm_eps": 1e-5,
    "vocab_size": VOCAB, "max_position_embeddings": 4096, "tie_word_embeddings": True,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
}


def shapes(cfg):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    c = AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(c)
    sd = m.state_dict()
    names = [k for k in sd if not (cfg["tie_word_embeddings"] and k == "lm_head.weight")]
    return [(k, tuple(sd[k].shape)) for k in names], c.to_dict()


def value(name, shape, rng, plus_one):
    n = int(np.prod(shape))
    if name.endswith("A_log"):
        return np.log(rng.uniform(1, 16, n)).astype(np.float32)
    if name.endswith("dt_bias"):
        return np.log(np.expm1(rng.uniform(0.001, 0.1, n))).astype(np.float32)
    if name.endswith(".D"):
        return np.ones(n, np.float32)
    if len(shape) == 1 or "norm" in name:
        gated = "linear_attn.norm" in name or "mamba.norm" in name
        return np.zeros(n, np.float32) if plus_one and not gated else np.ones(n, np.float32)
    return None


def write(d, cfg):
    os.makedirs(d, exist_ok=True)
    plus_one = cfg["model_type"].startswith("qwen3_5")
    tens, full = shapes(cfg)
    with open(os.path.join(d, "config.json"), "w") as fh:
        json.dump({k: v for k, v in full.items() if not k.startswith("_")} | {"dtype": "float16"}, fh, indent=1)
    meta, off = {}, 0
    for name, shape in tens:
        n = int(np.prod(shape)) * 2
        meta[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    head = json.dumps(meta).encode()
    head += b" " * (-len(head) % 8)
    rng = np.random.default_rng(4321)
    with open(os.path.join(d, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head)
        for name, shape in tens:
            v = value(name, shape, rng, plus_one)
            if v is not None:
                fh.write(v.astype(np.float16).tobytes())
                continue
            flat = (shape[0], int(np.prod(shape[1:])))
            for r0 in range(0, flat[0], 512):
                rows = min(512, flat[0] - r0)
                a = rng.standard_normal((rows, flat[1]), dtype=np.float32) * 0.02
                fh.write(a.astype(np.float16).tobytes())
    return sum(int(np.prod(s)) for _, s in tens)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--vocab", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    a = ap.parse_args()
    if not os.path.exists(a.vocab):
        sys.exit(f"{a.vocab} missing: run scripts/get-model.sh smollm2-135m first")
    ferrox = os.path.join(ROOT, "build", "bin", "ferrox")
    for tag, cfg in (("qwen35-shape", QWEN35), ("granite4h-shape", GRANITE)):
        ck = os.path.join(a.out, f"{tag}-hf")
        if not os.path.exists(os.path.join(ck, "model.safetensors")):
            n = write(ck, cfg)
            print(f"wrote {ck}: {n / 1e9:.2f} B parameters", flush=True)
        out = os.path.join(a.out, f"{tag}-q8_0.gguf")
        if not os.path.exists(out):
            subprocess.run([ferrox, "convert", ck, "-o", out, "--type", "q8_0", "--vocab-from", a.vocab],
                           check=True)
        print(out)


if __name__ == "__main__":
    main()
