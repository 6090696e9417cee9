#!/usr/bin/env python3
"""A Hugging Face checkpoint made from the default model, through ferrox:

    test_hf_checkpoint.py FERROX

scripts/make-hf-checkpoint.py turns SmolLM2-135M-Instruct.Q4_1.gguf
($FX_MODELS_DIR) into an f32 checkpoint directory (gguf + numpy only);
`ferrox convert DIR -o f32.gguf` writes it back as GGUF, tokenizer included
(io/hf_vocab.c). Checked:
- the converted GGUF tokenizes the prompt as the original GGUF does;
- greedy text from the converted GGUF (`ferrox run --temp 0 -n 32`);
- the directory tokenizes the prompt as the original GGUF does, generates
  greedily the same text as the converted GGUF (f32 KV cache both), and
  `ferrox chat DIR` answers with its template;
- the directory and the converted GGUF give the same logits over the
  prompt + that text (`ferrox logits --ids`, both with an f32 KV cache),
  the same argmax on every row, and that argmax is the greedy path. The
  directory is compared through token ids because ferrox loads no
  tokenizer for a directory yet (tokenizer.json's native path lands apart).
Skipped (77) without the model, gguf or numpy, unless FX_REQUIRE_MODELS=1.
"""
import os
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FX_MODELS_DIR") or os.path.join(ROOT, "models")
MODEL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = "The three primary colors are"
N_GEN = 32


def skip(msg):
    print("skip: " + msg)
    sys.exit(1 if os.environ.get("FX_REQUIRE_MODELS") == "1" else 77)


def run(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd[:3])}...: {r.stderr.strip()[-600:]}")
    return r.stdout


def ids_of(ferrox, model, text):
    out = run(ferrox, "tokenize", "-m", model, "--ids", "-p", text).strip()
    return [int(x) for x in out.strip("[]").split(",") if x.strip()]


def logits(ferrox, model, ids, path, *opts):
    run(ferrox, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "--out", path, *opts)
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 4
    vals = struct.unpack(f"<{n}f", data)
    nv = n // len(ids)
    return [vals[i * nv:(i + 1) * nv] for i in range(len(ids))]


def argmax(row):
    return max(range(len(row)), key=row.__getitem__)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: test_hf_checkpoint.py FERROX")
    ferrox = sys.argv[1]
    if not os.path.exists(MODEL):
        skip(MODEL + " absent")
    try:
        import gguf  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        skip(f"{e} (pip install gguf numpy)")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d, g = os.path.join(tmp, "hf"), os.path.join(tmp, "f32.gguf")
        t0 = time.time()
        run(sys.executable, os.path.join(ROOT, "scripts", "make-hf-checkpoint.py"), MODEL, d)
        t1 = time.time()
        run(ferrox, "convert", d, "-o", g)
        t2 = time.time()
        print(f"make-hf-checkpoint.py {t1 - t0:.1f} s, ferrox convert {t2 - t1:.1f} s")
        prompt = ids_of(ferrox, g, PROMPT)
        want = ids_of(ferrox, MODEL, PROMPT)
        print(f"prompt ids: converted {prompt}, original {want}")
        bad += prompt != want
        text = run(ferrox, "run", "-m", g, "-p", PROMPT, "--temp", "0", "-n", str(N_GEN))
        text = text[:-1] if text.endswith("\n") else text  # the newline run prints last
        print(f"greedy ({N_GEN} tokens, converted GGUF): {text!r}")
        seq = ids_of(ferrox, g, PROMPT + text)
        bad += seq[:len(prompt)] != prompt
        ld = logits(ferrox, d, seq, os.path.join(tmp, "dir.bin"))
        lg = logits(ferrox, g, seq, os.path.join(tmp, "gguf.bin"), "--cache-type-k", "f32",
                    "--cache-type-v", "f32")
        diff = max(abs(a - b) for rd, rg in zip(ld, lg) for a, b in zip(rd, rg))
        top_d, top_g = [argmax(r) for r in ld], [argmax(r) for r in lg]
        same_top = sum(a == b for a, b in zip(top_d, top_g))
        path = range(len(prompt) - 1, len(seq) - 1)
        greedy = sum(top_d[t] == seq[t + 1] for t in path)
        print(f"directory vs converted GGUF over {len(seq)} ids: max |logit diff| {diff:.2e}, "
              f"argmax equal on {same_top} of {len(seq)} rows, directory's argmax follows the "
              f"greedy text on {greedy} of {len(path)} steps")
        bad += diff > 1e-3 or same_top != len(seq) or greedy != len(path)
        # the directory itself, through its tokenizer.json: the same prompt
        # ids as the GGUF's vocabulary, the same greedy text as the converted
        # GGUF (both with an f32 KV cache, the directory's default)
        dir_ids = ids_of(ferrox, d, PROMPT)
        print(f"prompt ids: directory {dir_ids}")
        bad += dir_ids != want
        kv32 = ("--cache-type-k", "f32", "--cache-type-v", "f32")
        t_dir = run(ferrox, "run", "-m", d, "-p", PROMPT, "--temp", "0", "-n", str(N_GEN))
        t_g32 = run(ferrox, "run", "-m", g, "-p", PROMPT, "--temp", "0", "-n", str(N_GEN), *kv32)
        print(f"greedy, directory: {t_dir!r}; converted GGUF (f32 KV): {t_g32!r}")
        bad += t_dir != t_g32 or not t_dir.strip()
        # chat with the directory's own template (tokenizer_config.json)
        r = subprocess.run([ferrox, "chat", "-m", d, "-n", "8", "--temp", "0"], input="Hello!\n/exit\n",
                           capture_output=True, text=True, timeout=300)
        print(f"ferrox chat DIR: exit {r.returncode}, reply {r.stdout.strip()[:80]!r}")
        bad += r.returncode != 0 or not r.stdout.strip()
    print("ok" if not bad else "FAIL")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
