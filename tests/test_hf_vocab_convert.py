#!/usr/bin/env python3
"""tokenizer.json -> `ferrox convert` -> GGUF -> ferrox's GGUF tokenizer
must give llama.cpp's ids (io/hf_vocab.c).

    test_hf_vocab_convert.py FERROX TEST_VOCAB_CORPUS

Tokenizer folders (tokenizer.json + tokenizer_config.json) come from
$FX_HF_TOKENIZERS, else are made into a temporary directory by
scripts/make-hf-tokenizers.py (transformers' GGUF tokenizer converters over
llama.cpp's ggml-vocab-*.gguf and the default models). Skipped (77) when
neither is available, a failure with FX_REQUIRE_MODELS=1.

transformers' GGUF converter drops pre-tokenizer steps it has no GGUF key
for; the folders are patched back to what the models' own repositories
publish (SmolLM2 / StarCoder / Refact / Command-R: Digits(individual) then
ByteLevel; Llama 3: ignore_merges; MPT: its runs of spaces are added
tokens) before converting. Each folder gets the
weights of the tiny llama fixture (the tokenizer needs no matching model:
tokenize loads vocab_only).

- llama.cpp's vocabularies: the converted GGUF through test_vocab_corpus
  (GGUF_DIR NAME... mode) against llama.cpp's .inp/.out ids.
- SmolLM2 and Gemma 3 (the default models, $FX_MODELS_DIR): the converted
  GGUF against the original GGUF, both through `ferrox tokenize`, on the
  llama-spm test strings plus chat-shaped ones, with specials parsed.
- WordPiece (bert-bge, wordpiece-trained) becomes llama.cpp's "bert"
  vocabulary: bert-bge's converted GGUF against llama.cpp's .out ids (as
  above), and both converted GGUFs against their own folder's
  tokenizer.json path, `ferrox tokenize` with specials added, on bert-bge's
  .inp strings plus EXTRA.
- Vocabularies whose tokenizer.json llama.cpp has no name for (or that
  ferrox's GGUF tokenizer cannot run: Unigram, llama.cpp's t5) must be
  refused by convert with a message naming the pre-tokenizer / model.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA_DIR = os.environ.get("FX_LLAMA_VOCAB_DIR") or os.path.join(
    ROOT, "..", "oracle", "sdist", "llama_cpp_python-0.3.36", "vendor", "llama.cpp", "models")
MODELS = os.environ.get("FX_MODELS_DIR") or os.path.join(ROOT, "models")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "hf-tiny", "llama")
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"

DIGITS_BYTELEVEL = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
# name -> patch for the folder's tokenizer.json (None: as made)
COMPARE = {
    "gpt-2": None, "mpt": "space_tokens", "qwen2": None, "qwen35": None,
    "llama-spm": None, "phi-3": None,
    "starcoder": DIGITS_BYTELEVEL, "refact": DIGITS_BYTELEVEL, "command-r": DIGITS_BYTELEVEL,
    "llama-bpe": "ignore_merges", "bert-bge": None,
}
# WordPiece folders: converted GGUF == the folder's tokenizer.json path
WORDPIECE = ["bert-bge", "wordpiece-trained"]
DEFAULTS = {"smollm2-135m": ("SmolLM2-135M-Instruct.Q4_1.gguf", DIGITS_BYTELEVEL),
            "gemma-3-270m": ("gemma-3-270m-q4_k_m.gguf", None)}
# convert must refuse these, naming what it cannot map:
# name -> (tokenizer folder, patch, text the message must hold)
THREE_DIGITS = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
REFUSED = {"unigram-trained": ("unigram-trained", None, "Unigram model is not converted: llama.cpp writes it as its t5"),
           "wordpiece-whitespace": ("wordpiece-trained", "whitespace", "WordPiece with pre-tokenizer Whitespace"),
           "three-digits": ("gpt-2", THREE_DIGITS, "/\\p{N}{1,3}/ then /'s|'t"),
           # a normalizer llama.cpp's BPE vocabularies would not run (found by a
           # new user: it was dropped silently and the GGUF tokenized otherwise)
           "lowercase": ("gpt-2", "lowercase", "normalizer 'Lowercase' has no place")}
EXTRA = ["<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
         "<start_of_turn>user\nHello, world!<end_of_turn>\n<start_of_turn>model\n",
         "Numbers: 1234567890 and 3.14159, dates 2024-06-01.",
         "  indented\n\tcode()  \n\n", "naïve café — 日本語のテキスト 🙂"]


def skip(msg):
    print("skip: " + msg)
    sys.exit(1 if REQUIRE else 77)


def tokenizer_dirs(tmp):
    have = os.environ.get("FX_HF_TOKENIZERS")
    if have:
        return have
    maker = os.path.join(ROOT, "scripts", "make-hf-tokenizers.py")
    if not os.path.exists(maker):
        skip("no $FX_HF_TOKENIZERS and no scripts/make-hf-tokenizers.py")
    out = os.path.join(tmp, "tok")
    names = sorted(set(list(COMPARE) + list(DEFAULTS) + WORDPIECE + [v[0] for v in REFUSED.values()]))
    r = subprocess.run([sys.executable, maker, out] + names, capture_output=True, text=True)
    if r.returncode:
        skip("make-hf-tokenizers.py failed (transformers missing?): " + r.stderr[-400:])
    return out


def checkpoint(src, dst, patch):
    shutil.copytree(src, dst)
    for f in os.listdir(FIXTURE):
        if f == "config.json" or f.endswith(".safetensors"):
            shutil.copy(os.path.join(FIXTURE, f), dst)
    if patch:
        p = os.path.join(dst, "tokenizer.json")
        with open(p, encoding="utf-8") as f:
            j = json.load(f)
        if patch == "ignore_merges":
            j["model"]["ignore_merges"] = True
        elif patch == "whitespace":
            j["pre_tokenizer"] = {"type": "Whitespace"}
        elif patch == "lowercase":
            j["normalizer"] = {"type": "Lowercase"}
        elif patch == "space_tokens":
            j["added_tokens"] += [  # byte-level "ĠĠ" in the vocab, "  " added
                {"id": i, "content": " " * len(t), "single_word": False, "lstrip": False,
                 "rstrip": False, "normalized": True, "special": False}
                for t, i in j["model"]["vocab"].items() if len(t) > 1 and t.strip("\u0120") == ""]
        else:
            j["pre_tokenizer"] = patch
        with open(p, "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)


def tokenize(ferrox, gguf, text, add_special=False):
    r = subprocess.run([ferrox, "tokenize", "-m", gguf, "--ids", "--special", "-p", text] +
                       ([] if add_special else ["--no-bos"]), capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "error: " + r.stderr.strip()


# Under ASan (FX_SANITIZE_RUN=1, ~10x slower) two vocabularies, one of each
# kind, and not the default models (each comparison loads a model per text).
if os.environ.get("FX_SANITIZE_RUN") == "1":
    COMPARE = {k: COMPARE[k] for k in ("gpt-2", "llama-spm", "bert-bge")}
    DEFAULTS = {}
    WORDPIECE = ["bert-bge"]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_hf_vocab_convert.py FERROX TEST_VOCAB_CORPUS")
    ferrox, corpus = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(LLAMA_DIR, "ggml-vocab-gpt-2.gguf")):
        skip("llama.cpp's test vocabularies are absent (scripts/get-llama-sdist.sh)")
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        toks = tokenizer_dirs(tmp)
        out = os.path.join(tmp, "gguf")
        os.makedirs(out)
        done = []
        todo = list(COMPARE.items()) + [(k, v[1]) for k, v in DEFAULTS.items()]
        todo += [(k, None) for k in WORDPIECE if k not in COMPARE]
        for name, patch in todo:
            src = os.path.join(toks, name)
            if not os.path.isdir(src):
                print(f"{name}: no tokenizer folder, not checked")
                bad += REQUIRE
                continue
            ck = os.path.join(tmp, "ck-" + name)
            checkpoint(src, ck, patch)
            r = subprocess.run([ferrox, "convert", ck, "-o", os.path.join(out, name + ".gguf")],
                               capture_output=True, text=True)
            if r.returncode:
                print(f"FAIL {name}: convert: {r.stderr.strip()}")
                bad += 1
                continue
            done.append(name)
        llama = [n for n in done if n in COMPARE]
        if llama:
            r = subprocess.run([corpus, out] + llama, capture_output=True, text=True,
                               env=dict(os.environ, FX_LLAMA_VOCAB_DIR=LLAMA_DIR))
            print(r.stdout, end="")
            if r.returncode:
                print(r.stderr[-3000:], end="")
                bad += 1
        with open(os.path.join(LLAMA_DIR, "ggml-vocab-llama-spm.gguf.inp"), encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")[:-1] + EXTRA
        for name in [n for n in done if n in DEFAULTS]:
            orig = os.path.join(MODELS, DEFAULTS[name][0])
            if not os.path.exists(orig):
                print(f"{name}: {orig} absent, not compared")
                bad += REQUIRE
                continue
            conv = os.path.join(out, name + ".gguf")
            same = sum(tokenize(ferrox, orig, t) == tokenize(ferrox, conv, t) for t in texts)
            print(f"{name:15} {same} of {len(texts)} (converted GGUF == {DEFAULTS[name][0]})")
            bad += same != len(texts)
        with open(os.path.join(LLAMA_DIR, "ggml-vocab-bert-bge.gguf.inp"), encoding="utf-8") as f:
            texts = f.read().split("\n__ggml_vocab_test__\n")[:-1] + EXTRA
        for name in [n for n in done if n in WORDPIECE]:
            ck, conv = os.path.join(tmp, "ck-" + name), os.path.join(out, name + ".gguf")
            same = shown = 0
            for t in texts:
                a, b = tokenize(ferrox, ck, t, True), tokenize(ferrox, conv, t, True)
                ok = a == b and not a.startswith("error")
                same += ok
                if not ok and shown < 3:
                    shown += 1
                    print(f"  {name} {t!r}: tokenizer.json {a} GGUF {b}")
            print(f"{name:15} {same} of {len(texts)} (converted GGUF == tokenizer.json, specials added)")
            bad += same != len(texts)
        for name, (folder, patch, kind) in REFUSED.items():
            src = os.path.join(toks, folder)
            if not os.path.isdir(src):
                continue
            ck = os.path.join(tmp, "ck-" + name)
            checkpoint(src, ck, patch)
            r = subprocess.run([ferrox, "convert", ck, "-o", os.path.join(out, name + ".gguf")],
                               capture_output=True, text=True)
            ok = r.returncode != 0 and kind in r.stderr
            print(f"{name:15} refused: {r.stderr.strip()[-200:]}" if ok else
                  f"FAIL {name}: convert should refuse naming {kind}: rc {r.returncode} "
                  f"{r.stderr.strip()[-300:]}")
            bad += not ok
    print("ok" if not bad else f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
