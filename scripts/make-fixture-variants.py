#!/usr/bin/env python3
"""Variants of the copied hf-tiny fixtures for tests/test_fixtures.c.

    python3 scripts/make-fixture-variants.py

1. config.v4.json beside config.json for several fixtures: the same model
   described in transformers-4 keys (rope_theta, rope_scaling with
   rope_type or the older type, rope_local_base_freq,
   partial_rotary_factor at the top level, torch_dtype), the style most
   released checkpoints use; the shared fixtures are written in the 5 style.
2. tests/fixtures/hf-tiny-sharded/<name>/: the checkpoint split into two
   safetensors shards plus model.safetensors.index.json, as transformers
   writes large checkpoints (the byte ranges are copied, not re-encoded).
3. tests/fixtures/hf-tiny-dtypes/<name>-<dtype>/: the weights stored as F16
   or BF16 (round to nearest even), as most released checkpoints are.
Only the standard library is needed.
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "tests", "fixtures")
V4 = {  # fixture -> key the rope type goes under in rope_scaling
    "llama3_rope": "rope_type",
    "llama_linear_rope": "type",
    "qwen3_yarn": "type",
    "gemma3": "rope_type",
    "phi3": None,
}
SHARDED = ["llama", "gemma3"]
DTYPES = {"llama": ["F16", "BF16"], "gemma2": ["BF16"]}


def to_v4(cfg, type_key):
    c = dict(cfg)
    if "dtype" in c:
        c["torch_dtype"] = c.pop("dtype")
    rp = c.pop("rope_parameters", None) or {}
    if "full_attention" in rp:  # Gemma 3: one object per layer type
        c["rope_local_base_freq"] = rp["sliding_attention"]["rope_theta"]
        rp = rp["full_attention"]
    rp = dict(rp)
    c["rope_theta"] = rp.pop("rope_theta")
    if "partial_rotary_factor" in rp:
        c["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
    rtype = rp.pop("rope_type", "default")
    if rtype != "default":
        c["rope_scaling"] = {type_key: rtype, **rp}
    return c


def read_safetensors(path):
    """(header without __metadata__, data section bytes) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return header, blob[8 + n:]


def write_safetensors(path, header, chunks):
    """A safetensors file: header (padded to 8 bytes) then the data chunks."""
    hj = json.dumps(header).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(chunks))


def split(name):
    src = os.path.join(ROOT, "hf-tiny", name)
    dst = os.path.join(ROOT, "hf-tiny-sharded", name)
    os.makedirs(dst, exist_ok=True)
    header, data = read_safetensors(os.path.join(src, "model.safetensors"))
    names = sorted(header)
    halves = [names[:len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, part in enumerate(halves):
        fname = f"model-{i + 1:05d}-of-00002.safetensors"
        h, chunks, off = {}, [], 0
        for k in part:
            b, e = header[k]["data_offsets"]
            h[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"],
                    "data_offsets": [off, off + e - b]}
            chunks.append(data[b:e])
            off += e - b
            weight_map[k] = fname
        write_safetensors(os.path.join(dst, fname), h, chunks)
    with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": len(data)}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(src, "config.json")) as f, \
         open(os.path.join(dst, "config.json"), "w") as g:
        g.write(f.read())


def f32_to(dtype, raw):
    """F32 bytes -> F16 or BF16 bytes, round to nearest even."""
    n = len(raw) // 4
    vals = struct.unpack(f"<{n}f", raw)
    if dtype == "F16":
        return struct.pack(f"<{n}e", *vals)
    out = []
    for u in struct.unpack(f"<{n}I", raw):
        if (u & 0x7F800000) == 0x7F800000 and u & 0x7FFFFF:
            out.append((u >> 16) | 0x40)  # NaN stays NaN
        else:
            out.append((u + 0x7FFF + ((u >> 16) & 1)) >> 16 & 0xFFFF)
    return struct.pack(f"<{n}H", *out)


def retype(name, dtype):
    src = os.path.join(ROOT, "hf-tiny", name)
    dst = os.path.join(ROOT, "hf-tiny-dtypes", f"{name}-{dtype.lower()}")
    os.makedirs(dst, exist_ok=True)
    header, data = read_safetensors(os.path.join(src, "model.safetensors"))
    h, chunks, off = {}, [], 0
    for k in sorted(header):
        b, e = header[k]["data_offsets"]
        c = f32_to(dtype, data[b:e])
        h[k] = {"dtype": dtype, "shape": header[k]["shape"], "data_offsets": [off, off + len(c)]}
        chunks.append(c)
        off += len(c)
    write_safetensors(os.path.join(dst, "model.safetensors"), h, chunks)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg["dtype"] = dtype.lower().replace("bf16", "bfloat16").replace("f16", "float16")
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def main():
    for name, type_key in V4.items():
        d = os.path.join(ROOT, "hf-tiny", name)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        with open(os.path.join(d, "config.v4.json"), "w") as f:
            json.dump(to_v4(cfg, type_key or "rope_type"), f, indent=2)
            f.write("\n")
    for name in SHARDED:
        split(name)
    for name, dts in DTYPES.items():
        for dt in dts:
            retype(name, dt)


if __name__ == "__main__":
    main()
