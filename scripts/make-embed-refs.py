#!/usr/bin/env python3
"""Reference pooled embeddings for tests/test_embed.c, from transformers.

For several tiny checkpoints of tests/fixtures/hf-tiny and hf-tiny-next
(random float32 weights; see those folders' READMEs; three hybrid
recurrent ones among them), transformers runs each input with no
cache, in float32 with eager attention, and keeps its last_hidden_state
(the base model's output, after the final norm; checked equal to the
fixture's own reference.safetensors last hidden.N on the prompt). That is pooled
as llama.cpp's pooling types do (last token, mean over every token, first
token) and L2-normalized with torch.nn.functional.normalize; both the raw
and the normalized vectors are written to tests/data/embed-refs.json.

Inputs per fixture: the fixture's prompt_ids, its first 7 ids, prompt +
greedy ids (all_ids), and one id alone; llama_long's prompt is 200 ids
(several KV blocks, ubatch chunks), mistral_swa's and gemma3's windows are
8 (inputs longer than the window).

Usage: scripts/make-embed-refs.py [--out tests/data/embed-refs.json]
Needs torch and transformers (5.23 made the committed file); CI does not
run it.
"""
import argparse
import json
import os

import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf-tiny")
NEXT = os.path.join(ROOT, "..", "hf-tiny-next")
# (name, folder): attention families, then hybrid recurrent ones (their
# state is a KV backing of its own: short convolutions, Gated DeltaNet, Mamba-2)
FIXTURES = [(n, os.path.join(ROOT, n)) for n in
            ["llama", "llama_long", "qwen3", "gemma3", "mistral_swa", "gemma2", "qwen2"]] + \
           [(n, os.path.join(NEXT, n)) for n in ["lfm2", "qwen3_next", "granitemoehybrid_dense"]]


def last_hidden(model, ids):
    """The base model's last_hidden_state [n, hidden] for ids, no cache."""
    with torch.no_grad():
        out = model.model(input_ids=torch.tensor([ids]), use_cache=False)
    return out.last_hidden_state[0]


def f32(v):
    """A float32 vector as the shortest decimals that read back to it."""
    return [float("%.9g" % x) for x in v.tolist()]


def pooled(h):
    return {"last": h[-1], "mean": h.mean(dim=0), "cls": h[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "..", "..", "data", "embed-refs.json"))
    args = ap.parse_args()
    torch.manual_seed(0)
    refs = {"transformers": transformers.__version__, "torch": torch.__version__, "fixtures": {}}
    repo = os.path.normpath(os.path.join(ROOT, "..", "..", ".."))
    for name, d in FIXTURES:
        meta = json.load(open(os.path.join(d, "reference.json")))
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                     attn_implementation="eager").eval()
        prompt, all_ids = meta["prompt_ids"], meta["all_ids"]
        # the fixture's own reference: our hidden rows are the ones it checked
        ref = load_file(os.path.join(d, "reference.safetensors"))
        h = last_hidden(model, prompt)
        last = max((k for k in ref if k.startswith("hidden.")), key=lambda k: int(k.split(".")[1]))
        err = (h - ref[last]).abs().max().item()
        assert err < 1e-5, f"{name}: last_hidden_state differs from the fixture's by {err}"
        inputs = [prompt, prompt[:7], all_ids, [prompt[3]]]
        entry = {"dir": os.path.relpath(os.path.normpath(d), repo), "inputs": inputs, "raw": {}, "norm": {}}
        for p in ("last", "mean", "cls"):
            entry["raw"][p], entry["norm"][p] = [], []
        for ids in inputs:
            for p, v in pooled(last_hidden(model, ids)).items():
                entry["raw"][p].append(f32(v))
                entry["norm"][p].append(f32(F.normalize(v, dim=0)))
        refs["fixtures"][name] = entry
        print(f"{name}: {len(inputs)} inputs, hidden {h.shape[1]}, fixture check {err:.2e}")
    with open(args.out, "w") as f:
        json.dump(refs, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", os.path.normpath(args.out))


if __name__ == "__main__":
    main()
