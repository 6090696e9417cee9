#!/usr/bin/env python3
"""Does llama.cpp's multi-token-prediction graph (llama_model_qwen35::
graph_mtp, an LLAMA_CONTEXT_TYPE_MTP context) agree with the MTP
references of tests/fixtures/hf-tiny-next/*_mtp on the GGUF `ferrox
convert` writes (blk.N.nextn.*)?

Run by hand, like scripts/llamacpp-next-check.py (llama-cpp-python built
from the sdist, outside the repo):
    /path/to/venv/bin/python scripts/llamacpp-mtp-check.py [build/bin/ferrox]
For each *_mtp fixture: convert (f32, a 256-token tokenizer copied in),
load with load_mtp, one MTP context (f32 K/V), one batch of the prompt's
tokens each with the reference's hidden input row (mtp_h_in: transformers'
final hidden state of the position before, zeros first) as the token's
embedding (llama_batch_ext_set_embd_token: an entry with both, as common_speculative's
MTP hook batches), positions 0..T-1; prints max |logit - mtp_logits| /
max(1, max|mtp_logits|). ferrox's own figure is tests/test_mtp.c's.
"""
import ctypes
import importlib.util
import json
import os
import sys
import tempfile

import llama_cpp
import numpy as np
from safetensors.numpy import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEXT = os.path.join(ROOT, "tests", "fixtures", "hf-tiny-next")
QUIET = llama_cpp.llama_log_callback(lambda *a: None)
_spec = importlib.util.spec_from_file_location(
    "nextcheck", os.path.join(ROOT, "scripts", "llamacpp-next-check.py"))
NEXTCHECK = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(NEXTCHECK)  # its convert()


def one(ferrox, name):
    d = os.path.join(NEXT, name)
    ref = json.load(open(os.path.join(d, "reference.json")))
    blobs = load_file(os.path.join(d, "reference.safetensors"))
    ids = ref["prompt_ids"]
    h_in = np.ascontiguousarray(blobs["mtp_h_in"], dtype=np.float32)
    want = blobs["mtp_logits"].astype(np.float64)
    with tempfile.TemporaryDirectory() as tmp:
        out, why = NEXTCHECK.convert(ferrox, d, tmp)
        if why:
            return f"| {name} | ferrox convert: {why} | |"
        mp = llama_cpp.llama_model_default_params()
        mp.load_mtp = True
        model = llama_cpp.llama_model_load_from_file(out.encode(), mp)
        if not model:
            return f"| {name} | refused the file | |"
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads = 64, 64, 64, 2
        cp.type_k = cp.type_v = 0  # f32
        cp.ctx_type = 1  # LLAMA_CONTEXT_TYPE_MTP
        ctx = llama_cpp.llama_init_from_model(model, cp)
        if not ctx:
            return f"| {name} | no MTP context | |"
        nl = llama_cpp.llama_model_n_layer_nextn(model)
        b = llama_cpp.llama_batch_ext_init(ctx)
        rows = []
        for t, tok in enumerate(ids):
            i = llama_cpp.llama_batch_ext_add_token(b, 0, tok)
            pos = llama_cpp.llama_pos(t)
            llama_cpp.llama_batch_ext_set_pos(b, i, ctypes.byref(pos))
            e = llama_cpp.llama_embd(h_in[t].ctypes.data_as(ctypes.POINTER(ctypes.c_float)), 1, h_in.shape[1])
            rows.append(e)
            assert llama_cpp.llama_batch_ext_set_embd_token(b, i, e)
            llama_cpp.llama_batch_ext_set_output_logits(b, i, True)
        rc = llama_cpp.llama_process(ctx, 1, b)  # LLAMA_PROCESS_TYPE_DECODE
        if rc:
            return f"| {name} | llama_process returned {rc} | |"
        nv = want.shape[1]
        got = np.array([np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, t), shape=(nv,))
                        for t in range(len(ids))], dtype=np.float64)
        err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
        return f"| {name} | {nl} MTP block, runs | {err:.2e} |"


def main():
    ferrox = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "ferrox")
    llama_cpp.llama_log_set(QUIET, None)
    print("| fixture | llama.cpp MTP context | max rel err vs the reference |")
    print("|---|---|---|")
    for name in sorted(os.listdir(NEXT)):
        if name.endswith("_mtp"):
            print(one(ferrox, name), flush=True)


if __name__ == "__main__":
    main()
