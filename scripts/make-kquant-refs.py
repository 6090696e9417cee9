#!/usr/bin/env python3
"""Write the reference data that tests/test_quant_k.c checks the k-quant
quantizers (q2_K .. q6_K from_float in src/quant/q_k.c) against.

The oracle is llama.cpp itself, through llama-cpp-python: its f32 rows are
written as the weights of a tiny one-layer "llama" GGUF (gguf.GGUFWriter),
llama_model_quantize() quantizes that file once per k-quant ftype with
`pure` set (every weight gets the ftype's base type, no per-tensor mix) and
no importance matrix, and gguf.GGUFReader reads the quantized blocks back.
Without an imatrix llama.cpp's quantize_q*_K calls quantize_row_q*_K_ref,
the function our from_float follows. llama_model_quantize reads only the
hyperparameters and the tensors, it never builds the model, so the layer
shapes need not be consistent with each other.

The script then checks that the bytes equal those of ggml_quantize_chunk()
called directly in llama-cpp-python's libggml-base (no model, no threads),
so the data does not depend on llama-quantize's type mix or chunking.

Output, in tests/data/quant_k/ (about 200 KB), little-endian, no headers:

  tensors.txt   one line per tensor: name, value count, what the rows hold;
                the other files are these tensors, in this order
  input.f32     the f32 values
  <type>.ref    llama.cpp's bytes for them, type in q2_K q3_K q4_K q5_K q6_K

Run from the repository root (was run with llama-cpp-python 0.3.36, gguf
0.19.0, numpy 2.4.6):

  /work/oracle/venv/bin/python scripts/make-kquant-refs.py

The output is deterministic for a given seed (SEED below); commit it.
"""

import ctypes
import os
import sys
import tempfile

import numpy as np
import gguf
import llama_cpp

SEED = 20250611
OUT = os.path.join("tests", "data", "quant_k")
QK_K = 256

# type name -> (llama ftype, ggml type id)
TYPES = {
    "q2_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q2_K, gguf.GGMLQuantizationType.Q2_K),
    "q3_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q3_K_S, gguf.GGMLQuantizationType.Q3_K),
    "q4_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_S, gguf.GGMLQuantizationType.Q4_K),
    "q5_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q5_K_S, gguf.GGMLQuantizationType.Q5_K),
    "q6_K": (llama_cpp.LLAMA_FTYPE_MOSTLY_Q6_K, gguf.GGMLQuantizationType.Q6_K),
}


def edge_rows(rng):
    """Blocks (rows of 256) that exercise the quantizers' special cases."""
    b = []
    b.append(np.zeros(QK_K))                              # all zero
    z = rng.normal(0, 1, QK_K)
    z[:128] = 0                                           # zero sub-blocks
    b.append(z)
    z = rng.normal(0, 1, QK_K)
    z[rng.random(QK_K) < 0.7] = 0                         # sparse
    b.append(z)
    b.append(np.full(QK_K, 0.37))                         # constant > 0
    b.append(np.full(QK_K, -2.5))                         # constant < 0
    b.append(rng.uniform(0.5, 1.5, QK_K))                 # all positive
    b.append(-rng.uniform(0.5, 1.5, QK_K))                # all negative
    b.append(rng.normal(0, 1e-6, QK_K))                   # tiny (fp16 d underflows)
    b.append(rng.normal(0, 1e-3, QK_K))
    b.append(rng.normal(0, 300.0, QK_K))                  # large
    z = rng.normal(0, 0.02, QK_K)
    z[rng.integers(0, QK_K)] = 1.0                        # one outlier
    b.append(z)
    z = rng.normal(0, 0.02, QK_K)
    z[rng.integers(0, QK_K)] = -1.0
    b.append(z)
    b.append(np.round(rng.normal(0, 4, QK_K)))            # integers (ties)
    b.append(np.round(rng.normal(0, 4, QK_K)) / 8 + 0.5)
    z = np.zeros(QK_K)
    z[::16] = 1.0                                          # one value per group
    b.append(z)
    b.append(np.repeat(rng.normal(0, 1, QK_K // 16), 16))  # constant groups
    return np.concatenate(b)


def make_tensors(rng):
    """(gguf tensor name, what, values [rows, cols]) of the reference."""
    t = []

    def add(name, what, x, cols):
        t.append((name, what, np.asarray(x, dtype=np.float32).reshape(-1, cols)))

    add("token_embd.weight", "normal(0, 0.02), 2 rows of 4096",
        rng.normal(0, 0.02, 2 * 4096), 4096)
    add("output.weight", "uniform(-1, 1), 8 rows of 512",
        rng.uniform(-1, 1, 8 * 512), 512)
    add("blk.0.attn_q.weight", "student-t df=3, 4 rows of 1024",
        rng.standard_t(3, 4 * 1024), 1024)
    add("blk.0.attn_k.weight", "laplace(0, 0.05), 4 rows of 768",
        rng.laplace(0, 0.05, 4 * 768), 768)
    x = rng.normal(0, 0.02, 16 * 256)
    idx = rng.choice(x.size, 48, replace=False)
    x[idx] = rng.choice([-1, 1], 48) * rng.uniform(0.2, 2.0, 48)
    add("blk.0.attn_v.weight", "normal(0, 0.02) with 48 outliers, 16 rows of 256",
        x, 256)
    add("blk.0.attn_output.weight", "normal(0.05, 0.02): offset, 2 rows of 1280",
        rng.normal(0.05, 0.02, 2 * 1280), 1280)
    add("blk.0.ffn_up.weight", "edge-case blocks, rows of 256",
        edge_rows(rng), 256)
    x = rng.normal(0, 1, 32 * 256) * np.exp(rng.normal(0, 2, 32 * 256))
    add("blk.0.ffn_down.weight", "lognormal-scaled normal, 32 rows of 256",
        x, 256)
    return t


def write_f32_gguf(path, tensors):
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(256)
    w.add_embedding_length(256)
    w.add_block_count(1)
    w.add_feed_forward_length(256)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(llama_cpp.LLAMA_FTYPE_ALL_F32)
    for name, _, x in tensors:
        w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_quantize(src, dst, ftype):
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = ftype
    p.pure = True
    p.nthread = 4
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc != 0:
        sys.exit(f"llama_model_quantize({dst}) failed: {rc}")


def read_blocks(path, names, qtype):
    r = gguf.GGUFReader(path)
    by = {t.name: t for t in r.tensors}
    out = []
    for name in names:
        t = by[name]
        if t.tensor_type != qtype:
            sys.exit(f"{path}: {name} is {t.tensor_type.name}, want {qtype.name}")
        out.append(np.asarray(t.data).reshape(-1).view(np.uint8).tobytes())
    return out


def ggml_chunk(qtype, x):
    """ggml_quantize_chunk() of libggml-base: the row quantizer, no imatrix."""
    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__),
                                   "lib", "libggml-base.so"))
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_void_p]
    rows, cols = x.shape
    x = np.ascontiguousarray(x, dtype=np.float32)
    buf = ctypes.create_string_buffer(x.size * 4)
    n = f(int(qtype), x.ctypes.data, buf, 0, rows, cols, None)
    return buf.raw[:n]


@llama_cpp.llama_log_callback
def quiet(level, text, user_data):
    pass


def main():
    llama_cpp.llama_log_set(quiet, None)
    rng = np.random.default_rng(SEED)
    tensors = make_tensors(rng)
    names = [n for n, _, _ in tensors]
    os.makedirs(OUT, exist_ok=True)

    with open(os.path.join(OUT, "tensors.txt"), "w") as f:
        for name, what, x in tensors:
            f.write(f"{name} {x.size} {what}\n")
    with open(os.path.join(OUT, "input.f32"), "wb") as f:
        for _, _, x in tensors:
            f.write(x.astype("<f4").tobytes())

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "f32.gguf")
        write_f32_gguf(src, tensors)
        for tname, (ftype, qtype) in TYPES.items():
            dst = os.path.join(tmp, f"{tname}.gguf")
            llama_quantize(src, dst, ftype)
            blobs = read_blocks(dst, names, qtype)
            for (name, _, x), b in zip(tensors, blobs):
                if b != ggml_chunk(qtype, x):
                    sys.exit(f"{tname} {name}: llama_model_quantize and "
                             "ggml_quantize_chunk disagree")
            with open(os.path.join(OUT, f"{tname}.ref"), "wb") as f:
                for b in blobs:
                    f.write(b)
            print(f"{tname}: {sum(len(b) for b in blobs)} bytes")
    total = sum(os.path.getsize(os.path.join(OUT, e)) for e in os.listdir(OUT))
    print(f"wrote {OUT} ({total} bytes)")


if __name__ == "__main__":
    main()
