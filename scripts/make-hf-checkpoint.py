#!/usr/bin/env python3
"""A Hugging Face checkpoint directory from a llama-architecture GGUF
(SmolLM2-135M-Instruct.Q4_1.gguf, the default model):

    python3 scripts/make-hf-checkpoint.py MODEL.gguf OUTDIR

OUTDIR gets what transformers' save_pretrained writes for a LlamaForCausalLM
with a fast tokenizer: model.safetensors (every tensor dequantized to f32),
config.json, generation_config.json, tokenizer.json, tokenizer_config.json
(with the GGUF's chat template).

Only the gguf package and numpy (no torch, no transformers):
- weights: gguf.quants.dequantize; names and layout undone as llama.cpp's
  convert_hf_to_gguf.py made them (LlamaModel.modify_tensors: Q and K rows
  permuted for adjacent-pair RoPE, here permuted back; GGUF ne [in, out] is
  numpy's [out, in], HF's layout). A GGUF without output.weight ties the
  embeddings (tie_word_embeddings).
- tokenizer.json: a tokenizers BPE model from tokenizer.ggml.tokens /
  merges, control tokens as added special tokens, and the pre-tokenizer
  named by tokenizer.ggml.pre in the form its models publish (smollm /
  starcoder: Digits(individual) then ByteLevel; gpt-2: ByteLevel).
  Byte-level BPE ("gpt2") only.
"""
import json
import os
import struct
import sys
import time

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

LAYER = {  # GGUF blk.N.<name> -> HF model.layers.N.<name>
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
TOP = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
       "output.weight": "lm_head.weight"}
PRE = {  # tokenizer.ggml.pre -> the tokenizer.json pre_tokenizer its models publish
    "smollm": [{"type": "Digits", "individual_digits": True}],
    "starcoder": [{"type": "Digits", "individual_digits": True}],
    "gpt-2": [],
}
BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
              "use_regex": True}


def field(r, key, default=None):
    f = r.fields.get(key)
    return default if f is None else f.contents()


def unpermute(w, n_head):
    """Inverse of convert_hf_to_gguf's LlamaModel.permute (rows of Q or K)."""
    rows = w.shape[0]
    return (w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def weights(r, n_head, n_kv):
    out = {}
    for t in r.tensors:
        w = dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(x) for x in reversed(t.shape)])
        if t.name.startswith("blk."):
            _, il, rest = t.name.split(".", 2)
            if rest == "attn_q.weight":
                w = unpermute(w, n_head)
            elif rest == "attn_k.weight":
                w = unpermute(w, n_kv)
            out[f"model.layers.{il}.{LAYER[rest]}"] = w
        else:
            out[TOP[t.name]] = w
    return out


def write_safetensors(path, tensors):
    header, off = {}, 0
    names = sorted(tensors)
    for n in names:
        nb = tensors[n].nbytes
        header[n] = {"dtype": "F32", "shape": list(tensors[n].shape),
                     "data_offsets": [off, off + nb]}
        off += nb
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n in names:
            f.write(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes())


def tokenizer_files(r, out):
    if field(r, "tokenizer.ggml.model") != "gpt2":
        sys.exit("only byte-level BPE (tokenizer.ggml.model gpt2) is written")
    pre = field(r, "tokenizer.ggml.pre", "gpt-2")
    if pre not in PRE:
        sys.exit(f"tokenizer.ggml.pre {pre!r}: no tokenizer.json form known here")
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, (t, ty) in enumerate(zip(tokens, types)) if ty == 3]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": None,
          "pre_tokenizer": {"type": "Sequence", "pretokenizers": PRE[pre] + [BYTE_LEVEL]},
          "post_processor": dict(BYTE_LEVEL, use_regex=True),
          "decoder": dict(BYTE_LEVEL, use_regex=True),
          "model": {"type": "BPE", "dropout": None, "unk_token": None,
                    "continuing_subword_prefix": None, "end_of_word_suffix": None,
                    "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": {t: i for i, t in enumerate(tokens)},
                    "merges": [m.split(" ", 1) for m in merges]}}
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)

    def tok(key):
        i = field(r, f"tokenizer.ggml.{key}_token_id")
        return None if i is None else tokens[i]
    tc = {"add_bos_token": bool(field(r, "tokenizer.ggml.add_bos_token", False)),
          "add_eos_token": bool(field(r, "tokenizer.ggml.add_eos_token", False)),
          "bos_token": tok("bos"), "eos_token": tok("eos"), "unk_token": tok("unknown"),
          "pad_token": tok("padding"), "clean_up_tokenization_spaces": False,
          "model_max_length": int(field(r, "llama.context_length", 2048)),
          "tokenizer_class": "GPT2Tokenizer"}
    if field(r, "tokenizer.chat_template"):
        tc["chat_template"] = field(r, "tokenizer.chat_template")
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=2)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    t0 = time.time()
    r = GGUFReader(src)
    if field(r, "general.architecture") != "llama":
        sys.exit(f"{src}: general.architecture is not llama")
    a = "llama."
    n_embd = int(field(r, a + "embedding_length"))
    n_head = int(field(r, a + "attention.head_count"))
    n_kv = int(field(r, a + "attention.head_count_kv", n_head))
    os.makedirs(out, exist_ok=True)
    w = weights(r, n_head, n_kv)
    tie = "lm_head.weight" not in w
    write_safetensors(os.path.join(out, "model.safetensors"), w)
    n_vocab = w["model.embed_tokens.weight"].shape[0]
    bos, eos = field(r, "tokenizer.ggml.bos_token_id"), field(r, "tokenizer.ggml.eos_token_id")
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
           "hidden_size": n_embd, "intermediate_size": int(field(r, a + "feed_forward_length")),
           "num_hidden_layers": int(field(r, a + "block_count")),
           "num_attention_heads": n_head, "num_key_value_heads": n_kv,
           "head_dim": n_embd // n_head, "hidden_act": "silu",
           "max_position_embeddings": int(field(r, a + "context_length")),
           "rms_norm_eps": float(field(r, a + "attention.layer_norm_rms_epsilon")),
           "rope_theta": float(field(r, a + "rope.freq_base", 10000.0)),
           "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
           "tie_word_embeddings": tie, "vocab_size": n_vocab, "bos_token_id": bos,
           "eos_token_id": eos, "torch_dtype": "float32"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f, indent=2)
    tokenizer_files(r, out)
    print(f"{out}: {len(w)} tensors, f32, from {src} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
