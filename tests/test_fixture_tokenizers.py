#!/usr/bin/env python3
"""The tiny checkpoints in tests/fixtures run from text.

usage: tests/test_fixture_tokenizers.py FERROX TOK_DUMP

- their tokenizer.json / tokenizer_config.json are what
  scripts/make-fixture-tokenizers.py makes (--check);
- every fixture gives the ids of the `tokenizers` package (the oracle) on
  200 strings, with and without special tokens: the tokenizer.json as it
  is, or, with transformers installed, AutoTokenizer's backend_tokenizer,
  which differs where the class transformers picks rebuilds the pipeline
  (hf-tiny/qwen2: model_type qwen2 gives Qwen2Tokenizer, whose NFC and
  Qwen2 split replace the fixture's plain ByteLevel; tokenizer/hf_class.c);
  without transformers such a fixture is not checked, saying so;
- `ferrox run -m DIR --temp 0 -n 8` generates on every fixture, and the
  prompt ids it reports are the oracle's (with BOS where the fixture's
  post-processor adds one).
Exit 77 without `tokenizers` unless FX_REQUIRE_MODELS=1. Prints one line
per fixture and "N passed, N failed".
"""
import glob
import json
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
PROMPT = "Beautiful is better than ugly."


def strings(seed):
    rng = random.Random(seed)
    words = ["Beautiful", "is", "better", "than", "ugly", "Explicit", "implicit", "Zen", "Python",
             "<s>", "</s>", "<unk>", "<pad>", "héllo", "日本語", "🙂", "  ", "\n", "\t", "--", "1234"]
    out = ["", " ", PROMPT, "Namespaces are one honking great idea -- let's do more of those!"]
    while len(out) < 200:
        out.append((rng.choice(["", " "])).join(rng.choice(words) for _ in range(rng.randint(1, 12))))
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_fixture_tokenizers.py FERROX TOK_DUMP")
    ferrox, dump = sys.argv[1], sys.argv[2]
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"SKIP: {e}")
        return 1 if REQUIRE else 77
    try:
        sys.modules.setdefault("torch", None)  # the tokenizer path never uses it
        import transformers
        from transformers import AutoTokenizer
        transformers.logging.set_verbosity_error()
    except ImportError:
        AutoTokenizer = None
    passed = failed = 0
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-fixture-tokenizers.py"), "--check"],
                       capture_output=True, text=True)
    ok = r.returncode == 0
    print(("ok  " if ok else "FAIL") + " make-fixture-tokenizers.py --check: " + r.stdout.strip())
    passed, failed = passed + ok, failed + (not ok)
    for d in sorted(glob.glob(os.path.join(ROOT, "tests/fixtures/hf-tiny*/*/tokenizer.json"))):
        d = os.path.dirname(d)
        name = os.path.relpath(d, os.path.join(ROOT, "tests/fixtures"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        if AutoTokenizer is not None:
            tok = AutoTokenizer.from_pretrained(d).backend_tokenizer
        elif name == "hf-tiny/qwen2":
            print("skip %s: transformers rebuilds its pipeline (Qwen2Tokenizer); not installed" % name)
            if REQUIRE:
                failed += 1
            continue
        texts = strings(name)
        lines, want = [], []
        for t in texts:
            for add in (0, 1):
                lines.append(f"{t.encode().hex() or '-'} {add} 1")
                want.append(tok.encode(t, add_special_tokens=bool(add)).ids)
        r = subprocess.run([dump, d], input="\n".join(lines) + "\n", capture_output=True, text=True)
        got = [[int(x) for x in ln.split(",")] if ln and not ln.startswith("ERR") else ln
               for ln in r.stdout.split("\n")[:len(lines)]]
        got = [g if g != "" else [] for g in got]
        eq = sum(g == w for g, w in zip(got, want))
        run = subprocess.run([ferrox, "run", "-m", d, "-p", PROMPT, "--temp", "0", "-n", "8", "-t", "1"],
                             capture_output=True, text=True, timeout=300)
        prompt_n = len(tok.encode(PROMPT).ids)
        ran = run.returncode == 0 and f"prompt {prompt_n} tokens" in run.stderr
        ok = eq == len(want) and ran
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {eq} of {len(want)} encodes equal; run exit "
              f"{run.returncode}, {run.stdout.strip()[:40]!r}" + ("" if ran else f" {run.stderr[-300:]!r}"))
        passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
