#!/usr/bin/env python3
"""Write the reference data that tests/test_quant.c checks src/quant/ against.

The oracle is the PyPI `gguf` package (gguf-py from llama.cpp), module
gguf.quants, whose numpy (de)quantizers reproduce ggml-quants.c bit for bit.
Output goes to tests/data/quant/ (about 250 KB), all little-endian, no
headers; the C test derives counts from file sizes and the block size:

  <type>.blocks  raw blocks: random bytes, with the fp16 scale fields
                 replaced by random finite halves (normal and subnormal)
  <type>.deq     f32: gguf.quants.dequantize(<type>.blocks)
  <type>.qin     f32 rows to quantize (random, plus edge-case blocks)
  <type>.qout    gguf.quants.quantize(<type>.qin) bytes

.blocks/.deq: f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 mxfp4 q2_K q3_K q4_K q5_K q6_K
.qin/.qout:   f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 mxfp4, and q8_1 q8_K.

gguf has no q8_1 or q8_K quantizer (they are ggml's activation formats), so
for those two .qout comes from quantize_q8_1/quantize_q8_K below: numpy
ports of ggml-quants.c's quantize_row_q8_1_ref / quantize_row_q8_K_ref,
written with gguf's own rounding helper. They are a second reading of the
C reference, not an independent oracle.

Run from the repository root (was run with gguf 0.19.0 and numpy 2.4.6):

  /work/oracle/venv/bin/python scripts/make-quant-refs.py

The output is deterministic for a given seed (SEED below); commit it.
"""

import os
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

SEED = 20240611
OUT = os.path.join("tests", "data", "quant")
N_SMALL = 64   # blocks of the 32-element types
N_K = 16       # blocks of the 256-element types
N_FLOAT = 2048 # values of the f16/bf16 files

# type -> (qtype, byte offsets of fp16 scale fields)
DEQ_TYPES = {
    "q4_0": (T.Q4_0, [0]),
    "q4_1": (T.Q4_1, [0, 2]),
    "q5_0": (T.Q5_0, [0]),
    "q5_1": (T.Q5_1, [0, 2]),
    "q8_0": (T.Q8_0, [0]),
    "mxfp4": (T.MXFP4, []),
    "q2_K": (T.Q2_K, [80, 82]),
    "q3_K": (T.Q3_K, [108]),
    "q4_K": (T.Q4_K, [0, 2]),
    "q5_K": (T.Q5_K, [0, 2]),
    "q6_K": (T.Q6_K, [208]),
}
QUANT_TYPES = {
    "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1,
    "q8_0": T.Q8_0, "mxfp4": T.MXFP4,
}


def sane_halves(rng, n):
    """Finite fp16 values of either sign, magnitude 2^-20 .. 2^4
    (the bottom of the range is subnormal in fp16)."""
    mag = np.exp2(rng.uniform(-20.0, 4.0, n))
    sign = rng.choice([-1.0, 1.0], n)
    return (sign * mag).astype(np.float16)


def random_blocks(rng, qtype, scale_offsets, nblk):
    bs, ts = quants.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(nblk, ts), dtype=np.uint8)
    for off in scale_offsets:
        raw[:, off:off + 2] = sane_halves(rng, nblk).view(np.uint8).reshape(nblk, 2)
    if qtype == T.MXFP4:
        # E8M0 exponent: keep 2^(e-128) * 12 well inside f32
        raw[:, 0] = rng.integers(100, 156, size=nblk, dtype=np.uint8)
    return raw


def quant_input(rng, bs, nblk):
    """nblk blocks of bs floats: mostly random with a per-block scale, plus
    blocks that hit the quantizers' edges (zero, constant, exact integers,
    exact halves that round away from zero, a lone spike)."""
    x = rng.standard_normal((nblk, bs)).astype(np.float32)
    x *= np.exp2(rng.uniform(-8.0, 4.0, (nblk, 1))).astype(np.float32)
    x[0] = 0.0
    x[1] = 0.75
    x[2] = rng.integers(-8, 8, bs).astype(np.float32)
    x[2, 0] = -8.0
    x[3] = rng.integers(-127, 127, bs).astype(np.float32) + 0.5
    x[3, 0] = 127.0
    x[4] = 0.0
    x[4, bs // 3] = -3.0
    x[5] = np.abs(x[5])
    x[6] = -np.abs(x[6])
    return x.reshape(-1)


def quantize_q8_1(x):
    """quantize_row_q8_1_ref: block = half d, half s, int8 qs[32]."""
    b = x.reshape(-1, 32)
    d = (np.abs(b).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = quants.np_roundf((b * idv).astype(np.float32)).astype(np.int8)
    s = (q.astype(np.int32).sum(axis=1, keepdims=True).astype(np.float32) * d)
    return np.concatenate([d.astype(np.float16).view(np.uint8),
                           s.astype(np.float32).astype(np.float16).view(np.uint8),
                           q.view(np.uint8)], axis=1).reshape(-1)


def quantize_q8_K(x):
    """quantize_row_q8_K_ref: block = f32 d, int8 qs[256], int16 bsums[16].
    nearest_int rounds half to even (np.rint); an all-zero block is all
    zero bytes (ggml leaves its bsums stale; ferrox zeroes them)."""
    out = []
    for b in x.reshape(-1, 256):
        imax = int(np.argmax(np.abs(b)))
        mx = b[imax]
        if mx == 0:
            out.append(np.zeros(292, dtype=np.uint8))
            continue
        iscale = np.float32(-127.0) / np.float32(mx)
        v = np.rint((iscale * b).astype(np.float32)).astype(np.int32)
        q = np.minimum(127, v).astype(np.int8)
        bsums = q.astype(np.int32).reshape(16, 16).sum(axis=1).astype(np.int16)
        d = np.array([np.float32(1.0) / iscale], dtype=np.float32)
        out.append(np.concatenate([d.view(np.uint8), q.view(np.uint8),
                                   bsums.view(np.uint8)]))
    return np.concatenate(out)


def half_edges(rng):
    """f32 values for the f32 -> f16 rounding check: random in the half
    range, exact ties between neighbouring halves, and the boundaries."""
    h = rng.integers(0, 0x7bff, N_FLOAT // 2).astype(np.uint16)
    lo = h.view(np.float16).astype(np.float64)
    hi = (h + 1).view(np.float16).astype(np.float64)
    ties = ((lo + hi) / 2).astype(np.float32)  # exact: 12 significant bits
    bits = (rng.integers(100, 146, N_FLOAT // 2 - 32).astype(np.uint32) << 23) | \
        rng.integers(0, 1 << 23, N_FLOAT // 2 - 32).astype(np.uint32)
    edges = np.array([0.0, 65504.0, 65519.996, 65520.0, 65536.0, 1e30, np.inf,
                      2.0 ** -25, 2.0 ** -25 * (1 + 2.0 ** -23), 2.0 ** -24,
                      1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 2.0 ** -14,
                      2.0 ** -14 - 2.0 ** -25, 1e-30, 2.0 ** -149,
                      1.0, 1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11,
                      0.1, 1 / 3, 2.0 ** 15, 2048.5, 4096.0 + 2, 65000.7,
                      3.14159, 1e-7, 5.96e-8, 6.1e-5, 6.09e-5, 100.0, -0.0],
                     dtype=np.float32)
    vals = np.concatenate([ties, bits.view(np.float32), edges])
    vals *= rng.choice(np.array([-1.0, 1.0], dtype=np.float32), vals.size)
    return vals.astype(np.float32)


def bf16_edges(rng):
    """f32 values for f32 -> bf16: random non-NaN patterns, exact ties."""
    bits = rng.integers(0, 0x7f800001, N_FLOAT, dtype=np.int64).astype(np.uint32)
    bits[: N_FLOAT // 4] = (bits[: N_FLOAT // 4] & 0xffff0000) | 0x8000
    bits |= rng.integers(0, 2, N_FLOAT).astype(np.uint32) << 31
    return bits.view(np.float32)


def write(name, arr):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(np.ascontiguousarray(arr).tobytes())
    return os.path.getsize(path)


def main():
    rng = np.random.default_rng(SEED)
    os.makedirs(OUT, exist_ok=True)
    total = 0

    for name, (qt, offs) in DEQ_TYPES.items():
        bs, _ = quants.GGML_QUANT_SIZES[qt]
        nblk = N_K if bs == 256 else N_SMALL
        raw = random_blocks(rng, qt, offs, nblk)
        deq = quants.dequantize(raw.reshape(1, -1), qt).astype(np.float32)
        assert np.all(np.isfinite(deq)), name
        total += write(name + ".blocks", raw)
        total += write(name + ".deq", deq)

    for name, qt in QUANT_TYPES.items():
        x = quant_input(rng, 32, N_SMALL)
        q = quants.quantize(x.reshape(1, -1), qt)
        total += write(name + ".qin", x)
        total += write(name + ".qout", q)

    x = quant_input(rng, 32, N_SMALL)
    total += write("q8_1.qin", x)
    total += write("q8_1.qout", quantize_q8_1(x))
    x = quant_input(rng, 256, N_K)
    total += write("q8_K.qin", x)
    total += write("q8_K.qout", quantize_q8_K(x))

    # f16: random finite halves; rounding of f32 to f16.
    h = sane_halves(rng, N_FLOAT)
    total += write("f16.blocks", h)
    total += write("f16.deq", quants.dequantize(h.view(np.uint8), T.F16))
    x = half_edges(rng)
    total += write("f16.qin", x)
    with np.errstate(over="ignore"):  # the inf cases are meant
        total += write("f16.qout", quants.quantize(x, T.F16))

    # bf16: any non-NaN pattern; rounding of f32 to bf16.
    b = rng.integers(0, 1 << 16, N_FLOAT).astype(np.uint16)
    b = b[(b & 0x7fff) <= 0x7f80][:N_FLOAT // 2]
    total += write("bf16.blocks", b)
    total += write("bf16.deq", quants.dequantize(b.view(np.uint8), T.BF16))
    x = bf16_edges(rng)
    total += write("bf16.qin", x)
    total += write("bf16.qout", quants.quantize(x.reshape(1, -1), T.BF16))

    print(f"wrote {total} bytes to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
