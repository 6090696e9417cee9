#!/usr/bin/env python3
"""Multi-token-prediction (MTP) references for the Qwen 3.5 fixtures:

    nice python3 scripts/make-mtp-fixtures.py

For qwen3_5 and qwen3_5_moe of tests/fixtures/hf-tiny-next it writes
<name>_mtp/: the same checkpoint plus one random MTP block under the
released checkpoints' names (mtp.fc, mtp.pre_fc_norm_embedding,
mtp.pre_fc_norm_hidden, mtp.layers.0.* a full-attention decoder layer of
the family, mtp.norm; config mtp_num_hidden_layers 1), and the reference of
that block on the prompt. transformers loads the checkpoint and ignores
mtp.* (its Qwen 3.5 classes do not implement MTP), so the block is run
here from transformers' own modules, as vLLM's Qwen3NextMTP and llama.cpp's
llama_model_qwen35::graph_mtp compose them:

    h[t]  = the main model's final hidden state at t (after model.norm)
    x[t]  = fc(cat(pre_fc_norm_embedding(embed(ids[t])),
                   pre_fc_norm_hidden(h[t - 1])))      (h[-1] = 0)
    y     = mtp.layers.0 over x (causal, positions 0..T-1), then mtp.norm
    logits[t] = lm_head(y[t])   (predicts ids[t + 2])

The layer and the final norm are a 1-layer model of the family
(num_hidden_layers 1, layer_types [full_attention]) whose layer and norm ARE
mtp.layers.0 and mtp.norm; the two pre-fc norms are the family's RMSNorm
(zero-centred: x * (1 + w)). reference.safetensors gains mtp_logits [T,
vocab], mtp_hidden [T, hidden] (y) and mtp_h_in [T, hidden] (the shifted
h); the main model's references are the source fixture's, unchanged.
"""
import importlib.util
import json
import os
import shutil

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "tests", "fixtures", "hf-tiny-next")
spec = importlib.util.spec_from_file_location("mnf", os.path.join(HERE, "make-next-fixtures.py"))
mnf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mnf)


def make(src_name):
    src = os.path.join(ROOT, src_name)
    dst = os.path.join(ROOT, src_name + "_mtp")
    cfg = json.load(open(os.path.join(src, "config.json")))
    ref = json.load(open(os.path.join(src, "reference.json")))
    main = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager").eval()
    gen = torch.Generator().manual_seed(mnf.SEED + 4242)
    torch.manual_seed(mnf.SEED + 4243)
    # the block's decoder layer and final norm: a 1-layer model of the family
    c1 = dict(cfg)
    for k in ("architectures", "transformers_version", "dtype"):
        c1.pop(k, None)
    c1.update(num_hidden_layers=1, layer_types=["full_attention"])
    blk = AutoModelForCausalLM.from_config(AutoConfig.for_model(c1.pop("model_type"), **c1),
                                           attn_implementation="eager", dtype=torch.float32).eval()
    mnf.randomize(blk, mnf.VARIANTS[src_name], gen)
    H = cfg["hidden_size"]
    norm_cls = type(main.model.norm)
    enorm, hnorm = norm_cls(H, eps=cfg["rms_norm_eps"]), norm_cls(H, eps=cfg["rms_norm_eps"])
    fc = torch.nn.Linear(2 * H, H, bias=False)
    with torch.no_grad():
        enorm.weight.copy_(0.1 * torch.randn(H, generator=gen))
        hnorm.weight.copy_(0.1 * torch.randn(H, generator=gen))
        fc.weight.copy_(torch.randn(H, 2 * H, generator=gen) / (2 * H) ** 0.5)
    ids = torch.tensor([ref["prompt_ids"]])
    with torch.no_grad():
        h = main.model(ids).last_hidden_state[0]
        h_in = torch.cat([torch.zeros(1, H), h[:-1]], 0)
        x = fc(torch.cat([enorm(main.model.embed_tokens(ids)[0]), hnorm(h_in)], -1))
        y = blk.model(inputs_embeds=x[None]).last_hidden_state[0]
        logits = main.lm_head(y)
    mtp = {"mtp.fc.weight": fc.weight, "mtp.pre_fc_norm_embedding.weight": enorm.weight,
           "mtp.pre_fc_norm_hidden.weight": hnorm.weight, "mtp.norm.weight": blk.model.norm.weight}
    w = load_file(os.path.join(src, "model.safetensors"))
    for k, v in blk.model.layers[0].state_dict().items():
        mtp["mtp.layers.0." + k] = v
    if "mtp.layers.0.mlp.experts.gate_up_proj" in mtp:
        # the released checkpoints' (and save_pretrained's) per-expert names:
        # gate_up_proj [E, 2I, H] is [gate; up] per expert, down_proj [E, H, I]
        # (checked against how the main model's layer 0 was saved)
        fused = main.model.layers[0].mlp.experts.gate_up_proj
        I = fused.shape[1] // 2
        assert torch.equal(fused[1, :I], w["model.layers.0.mlp.experts.1.gate_proj.weight"])
        assert torch.equal(fused[1, I:], w["model.layers.0.mlp.experts.1.up_proj.weight"])
        assert torch.equal(main.model.layers[0].mlp.experts.down_proj[1],
                           w["model.layers.0.mlp.experts.1.down_proj.weight"])
        gu, dn = mtp.pop("mtp.layers.0.mlp.experts.gate_up_proj"), mtp.pop("mtp.layers.0.mlp.experts.down_proj")
        for e in range(gu.shape[0]):
            mtp[f"mtp.layers.0.mlp.experts.{e}.gate_proj.weight"] = gu[e, :I]
            mtp[f"mtp.layers.0.mlp.experts.{e}.up_proj.weight"] = gu[e, I:]
            mtp[f"mtp.layers.0.mlp.experts.{e}.down_proj.weight"] = dn[e]
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(dst):
        os.remove(os.path.join(dst, f))
    w.update({k: v.detach().contiguous().float() for k, v in mtp.items()})
    save_file(w, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    cfg["mtp_num_hidden_layers"] = 1
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(src, f)):
            shutil.copy(os.path.join(src, f), dst)
    # transformers ignores mtp.*: the checkpoint is still the source model
    re = AutoModelForCausalLM.from_pretrained(dst, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        assert torch.equal(re(ids).logits, main(ids).logits)
    ref["notes"] += (" MTP: " + src_name + "'s checkpoint plus one random multi-token-prediction block (mtp.*, "
                     "config mtp_num_hidden_layers 1); mtp_logits [T, vocab]: row t from the block on "
                     "(prompt_ids[t], the main model's final hidden state at t - 1, zeros at t = 0), "
                     "predicting prompt_ids[t + 2]; mtp_hidden: the block's output after mtp.norm; mtp_h_in: "
                     "the hidden rows it was given (scripts/make-mtp-fixtures.py).")
    ref["mtp_tensors"] = {k: list(v.shape) for k, v in sorted(mtp.items())}
    json.dump(ref, open(os.path.join(dst, "reference.json"), "w"), indent=1)
    blobs = load_file(os.path.join(src, "reference.safetensors"))
    blobs.update(mtp_logits=logits.contiguous(), mtp_hidden=y.contiguous(), mtp_h_in=h_in.contiguous())
    save_file(blobs, os.path.join(dst, "reference.safetensors"))
    print(dst, "mtp argmax", logits.argmax(-1).tolist()[:8], "std", float(logits.std()))


if __name__ == "__main__":
    for name in ("qwen3_5", "qwen3_5_moe"):
        make(name)
