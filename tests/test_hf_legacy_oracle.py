#!/usr/bin/env python3
"""ferrox on tokenizer folders without tokenizer.json (src/tokenizer/hf_legacy.c)
against transformers' fast tokenizer for the same folder.

    python3 tests/test_hf_legacy_oracle.py build/bin/tok_dump

Folders, written under <build>/hf-legacy from the byte-level vocabularies
of tests/test_hf_tokenizer_oracle.py (gpt-2, smollm2-135m; generated into
<build>/hf-tokenizers on first use): vocab.json = model.vocab, merges.txt =
"#version: 0.2" + model.merges, and a tokenizer_config.json per case:
- gpt2: tokenizer_class GPT2Tokenizer only (GPT-2's default specials);
- gpt2-noconfig: no tokenizer_config.json, config.json model_type gpt2;
- gpt2-options: add_prefix_space, add_bos_token, add_eos_token, an added
  non-special token and a pad token that vocab.json lacks (new ids);
- smollm2: the original added tokens as added_tokens_decoder, its bos/eos.
The oracle is AutoTokenizer.from_pretrained(folder) (transformers 5.x,
GPT2Tokenizer), its backend `tokenizers` object encoding each string with
the four add_special / parse_special combinations (as the tokenizer.json
oracle maps them); ferrox is tok_dump on the folder. Every id list must be
equal. Then malformed folders must fail to load with the file named.

Skips (77) without transformers / tokenizers or the source vocabularies,
unless FX_REQUIRE_MODELS=1.
"""
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
N_RANDOM = 300


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(1 if REQUIRE else 77)


def write_folder(d, tj, cfg, extra=None):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(tj["model"]["vocab"], f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in tj["model"]["merges"]:
            f.write((m if isinstance(m, str) else " ".join(m)) + "\n")
    if cfg is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False)
    for name, text in (extra or {}).items():
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(text)


def added_decoder(tj):
    return {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "rstrip", "normalized",
                                             "single_word", "special")} for a in tj["added_tokens"]}


def cases(src, out):
    gpt2 = json.load(open(os.path.join(src, "gpt-2", "tokenizer.json"), encoding="utf-8"))
    smol = json.load(open(os.path.join(src, "smollm2-135m", "tokenizer.json"), encoding="utf-8"))
    smol_cfg = json.load(open(os.path.join(src, "smollm2-135m", "tokenizer_config.json"), encoding="utf-8"))
    made = []
    for name, tj, cfg, extra in [
        ("gpt2", gpt2, {"tokenizer_class": "GPT2Tokenizer"}, None),
        ("gpt2-noconfig", gpt2, None, {"config.json": '{"model_type": "gpt2"}'}),
        ("gpt2-options", gpt2, {"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": True,
                                "add_bos_token": True, "add_eos_token": True, "pad_token": "<pad>",
                                "added_tokens_decoder": {"50257": {
                                    "content": "<think>", "lstrip": False, "rstrip": False,
                                    "normalized": False, "single_word": False, "special": False}}},
         None),
        ("smollm2", smol, {"tokenizer_class": "GPT2Tokenizer", "added_tokens_decoder": added_decoder(smol),
                           "bos_token": smol_cfg.get("bos_token"), "eos_token": smol_cfg.get("eos_token"),
                           "unk_token": smol_cfg.get("unk_token")}, None),
    ]:
        d = os.path.join(out, name)
        write_folder(d, tj, cfg, extra)
        made.append((name, d))
    return made, gpt2


def malformed(tok_dump, out, gpt2):
    """(folder, expected text in the error) for each broken folder."""
    bad = []
    for name, cfg, merge_line, want in [
        ("bad-merge", None, "Ġzzqx Ġqqzy", "merges.txt line 50002: 'Ġzzqx' is not in vocab.json"),
        ("bad-merged", None, "Ġthe Ġthe",
         "merges.txt line 50002: the merge makes 'ĠtheĠthe', which is not in vocab.json"),
        ("bad-line", None, "a b c", "merges.txt line 50002: 'a b c' is not two tokens"),
        ("bad-vocab", None, None, "vocab.json: not a JSON object"),
        ("no-merges", None, None, "vocab.json without merges.txt"),
        ("roberta", {"tokenizer_class": "RobertaTokenizer"}, None, "tokenizer_class RobertaTokenizer"),
    ]:
        d = os.path.join(out, name)
        write_folder(d, gpt2, cfg)
        if merge_line:
            with open(os.path.join(d, "merges.txt"), "a", encoding="utf-8") as f:
                f.write(merge_line + "\n")
        if name == "bad-vocab":
            open(os.path.join(d, "vocab.json"), "w").write('["a", "b"]')
        if name == "no-merges":
            os.remove(os.path.join(d, "merges.txt"))
        bad.append((d, want))
    fails = []
    for d, want in bad:
        r = subprocess.run([tok_dump, d], input=b"", capture_output=True)
        msg = (r.stdout + r.stderr).decode("utf-8", "replace")
        ok = r.returncode != 0 and want in msg
        print("%s: %s (%s)" % (os.path.basename(d), "refused as expected" if ok else "WRONG",
                               msg.strip()[:200]))
        if not ok:
            fails.append("%s: want an error naming %r, got rc %d: %s" % (d, want, r.returncode, msg[:300]))
    return fails


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tok_dump = sys.argv[1]
    for mod in ("tokenizers", "transformers", "sentencepiece", "google.protobuf"):
        if importlib.util.find_spec(mod.split(".")[0]) is None or importlib.util.find_spec(mod) is None:
            skip("python package %s missing" % mod)
    from transformers import AutoTokenizer

    orc = types_ns(runpy.run_path(os.path.join(ROOT, "tests", "test_hf_tokenizer_oracle.py")))
    mk = orc.load_maker()
    build = os.path.dirname(os.path.dirname(os.path.abspath(tok_dump)))
    src = os.path.join(build, "hf-tokenizers")
    have = {v[0] for v in mk.ensure(src, ["gpt-2", "smollm2-135m"])}
    if have != {"gpt-2", "smollm2-135m"}:
        skip("gpt-2 / smollm2-135m vocabularies not available")
    out = os.path.join(build, "hf-legacy")
    made, gpt2 = cases(src, out)
    tricky = orc.tricky_strings()
    failures = []
    for name, d in made:
        tok = AutoTokenizer.from_pretrained(d)._tokenizer
        texts = tricky + orc.random_strings(name, tok, N_RANDOM)
        fx = orc.ferrox_encode(tok_dump, d, texts)
        hf = orc.hf_encode(tok, texts) if not isinstance(fx, str) else None
        equal, total, first = orc.compare(texts, hf, fx)
        print("%s: %d of %d equal%s" % (name, equal, total, " (first difference: %s)" % first if first else ""),
              flush=True)
        if equal != total or total == 0:
            failures.append("%s: %d of %d differ" % (name, total - equal, total))
    failures += malformed(tok_dump, out, gpt2)
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


def types_ns(d):
    import types
    return types.SimpleNamespace(**d)


if __name__ == "__main__":
    main()
