#!/usr/bin/env python3
"""tokenizer_config.json beside a tokenizer.json: add_bos_token /
add_eos_token and model_max_length.

    python3 tests/test_hf_tokenizer_config.py FERROX TOK_DUMP

1. add_bos_token / add_eos_token. transformers 5.23 drops both keys from
   tokenizer_config.json when the folder has a tokenizer.json
   (PreTrainedTokenizerBase._from_pretrained pops them when
   resolved_vocab_files has tokenizer_file), so TokenizersBackend's
   update_post_processor runs only when tokenizer.json has no
   post-processor, with both flags false: the post-processor alone decides,
   whatever the tokenizer_class (per-model classes take the post-processor
   from tokenizer.json too, convert_to_native_format). ferrox does the
   same (tokenizer/hf_load.c; the keys count only without tokenizer.json,
   hf_legacy.c). Folders from scripts/make-hf-tokenizer-configs.py: the
   tiny fixtures' tokenizer.json (tests/fixtures/hf-tiny/llama: Metaspace,
   BOS template, and the same with a "<s> $A </s>" template; qwen2:
   ByteLevel, no post-processor) always, and
   llama-spm, gemma-3-270m, smollm2-135m, bert-bge and qwen2 when
   scripts/make-hf-tokenizers.py can make them (llama.cpp's vocabularies,
   the default models), each with tokenizer_class LlamaTokenizer /
   LlamaTokenizerFast / GemmaTokenizer / Qwen2Tokenizer(Fast) /
   PreTrainedTokenizerFast / absent
   where the class fits the file (see that script) and add_bos_token /
   add_eos_token true / false / absent. Every folder: ferrox's ids
   (tok_dump, specials added and parsed) must equal
   AutoTokenizer.from_pretrained(folder).encode(text) on the 50 strings of
   tests/data/tokenizer plus 20 random ones, also where the class rebuilds
   a pipeline other than the file's (the fixture's Metaspace split true
   under LlamaTokenizer / GemmaTokenizer / Qwen2Tokenizer, the Qwen2
   fixture under Qwen2Tokenizer / GPT2Tokenizer: tokenizer/hf_class.c rebuilds it as
   transformers does). Folders whose class rebuilds a pipeline ferrox does
   not reproduce (REFUSED: CLIPTokenizer, BertTokenizerFast) must be
   refused with an error naming the class.
2. model_max_length (io/hf.c hf_context_info): the tiny llama checkpoint
   with config.json's max_position_embeddings removed takes its context
   from tokenizer_config.json's model_max_length (1536): `ferrox inspect`
   says so and `ferrox convert` writes llama.context_length 1536;
   transformers' no-limit values (int(1e30), 1e30) leave the default 4096;
   max_position_embeddings present wins (256) and inspect still shows
   model_max_length; a malformed tokenizer_config.json is refused, named,
   when it is needed. This part needs no Python packages.
3. `ferrox convert`'s tokenizer.ggml.add_bos_token / add_eos_token (the
   GGUF follows llama.cpp's converter, not transformers: tokenizer_config's
   flags count where the post-processor leaves them open) against llama.cpp's
   gguf-py SpecialVocab (vendored in the llama-cpp-python sdist,
   scripts/get-llama-sdist.sh; not checked, saying so, when absent) on the
   no-class folders of part 1, with the tiny llama weights.

4. The class with config.json (part_class_resolution): the tiny llama and
   qwen2 checkpoints under 7 model_types x 10 tokenizer_class values; the
   class ferrox rebuilds with (`ferrox inspect`) or refuses must be the
   one AutoTokenizer loads, and the ids equal on the 50 strings.

Parts 1 and 4 skip (77) without transformers / tokenizers; sources that cannot
be made are skipped, saying so; FX_REQUIRE_MODELS=1 turns both into
failures.
"""
import importlib.util
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "hf-tiny")
LLAMA_DIR = os.environ.get("FX_LLAMA_VOCAB_DIR") or os.path.join(
    ROOT, "..", "oracle", "sdist", "llama_cpp_python-0.3.36", "vendor", "llama.cpp", "models")
MADE = ["llama-spm", "gemma-3-270m", "smollm2-135m", "bert-bge", "qwen2"]
N_RANDOM = 20


def ns(path):
    return types.SimpleNamespace(**runpy.run_path(path))


def ferrox_ids(tok_dump, d, texts):
    """ids per text (specials added and parsed), or a load error string."""
    reqs = "".join("%s 1 1\n" % (t.encode().hex() if t else "-") for t in texts)
    p = subprocess.run([tok_dump, d], input=reqs.encode(), capture_output=True)
    if p.returncode:
        return "tok_dump exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip())
    lines = p.stdout.decode().split("\n")[:-1]
    return [ln if ln.startswith("ERR") else [int(x) for x in ln.split(",")] if ln else [] for ln in lines]


def part_flags(ferrox, tok_dump, tmp):
    """Part 1: (failures, skipped reason or None)."""
    for mod in ("tokenizers", "transformers"):
        if importlib.util.find_spec(mod) is None:
            return [], "python package %s missing" % mod
    sys.modules.setdefault("torch", None)  # the tokenizer path never uses it
    import transformers
    from transformers import AutoTokenizer
    transformers.logging.set_verbosity_error()

    orc = ns(os.path.join(ROOT, "tests", "test_hf_tokenizer_oracle.py"))
    mk = orc.load_maker()
    build = os.path.dirname(os.path.dirname(os.path.abspath(tok_dump)))
    sources = [("fixture-llama", os.path.join(FIXTURES, "llama")),
               ("fixture-llama-eos", os.path.join(FIXTURES, "llama")),
               ("fixture-llama-atd", os.path.join(FIXTURES, "llama")),
               ("fixture-qwen2", os.path.join(FIXTURES, "qwen2"))]
    found = {v[0]: v[1] for v in mk.ensure(os.path.join(build, "hf-tokenizers"), MADE)}
    fails = []
    for name in MADE:
        if name in found:
            sources.append((name, found[name]))
        else:
            print("%s: not available (scripts/make-hf-tokenizers.py could not make it), not checked" % name)
            if REQUIRE:
                fails.append("%s: source missing" % name)
    cfgs = ns(os.path.join(ROOT, "scripts", "make-hf-tokenizer-configs.py"))
    made = cfgs.variants(os.path.join(tmp, "cfg"), sources, refused=True)
    texts_of = {}
    for folder, d in made:
        src, cls = folder.split("--")[:2]
        if cls in cfgs.REFUSED.get(src, []):
            # transformers rebuilds the pipeline with a class ferrox does not
            # reproduce: refused, naming the class (less "Fast")
            fx = ferrox_ids(tok_dump, d, ["a"])
            ok = isinstance(fx, str) and cls.removesuffix("Fast") in fx
            print("%-58s refused: %s%s" % (folder, fx if isinstance(fx, str) else "no, ids %s" % fx,
                                           "" if ok else "  FAIL"), flush=True)
            if not ok:
                fails.append("%s: not refused naming %s" % (folder, cls))
            continue
        tok = AutoTokenizer.from_pretrained(d)
        if src not in texts_of:
            texts_of[src] = orc.tricky_strings() + orc.random_strings(src, tok._tokenizer, N_RANDOM)
        texts = texts_of[src]
        hf = [tok.encode(t) for t in texts]
        fx = ferrox_ids(tok_dump, d, texts)
        if isinstance(fx, str):
            fails.append("%s: %s" % (folder, fx))
            print("FAIL %s: %s" % (folder, fx))
            continue
        equal = sum(a == b for a, b in zip(hf, fx))
        first = next((t for t, a, b in zip(texts, hf, fx) if a != b), None)
        with_bos = sum(1 for ids in hf if ids and tok.bos_token_id is not None and ids[0] == tok.bos_token_id)
        print("%-58s %-24s %d of %d equal (BOS first in %d)%s" % (
            folder, type(tok).__name__, equal, len(texts), with_bos,
            "" if first is None else "; first difference %r: transformers %s ferrox %s" % (
                first, hf[texts.index(first)], fx[texts.index(first)])), flush=True)
        if equal != len(texts):
            fails.append("%s: %d of %d differ" % (folder, len(texts) - equal, len(texts)))
    print("%d folders checked" % len(made))
    fails += part_class_resolution(ferrox, tok_dump, tmp, orc)
    fails += part_convert_flags(ferrox, tmp, cfgs, sources)
    return fails, None


RES_CLASSES = [None, "PreTrainedTokenizerFast", "LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer",
               "Qwen2TokenizerFast", "GPT2Tokenizer", "BertTokenizer", "CLIPTokenizer", "FooTokenizer"]
RES_TYPES = ["llama", "qwen2", "qwen3", "gemma3_text", "phi3", "mistral", "mixtral"]


def part_class_resolution(ferrox, tok_dump, tmp, orc):
    """Part 4: failures. The tiny llama (Metaspace) and qwen2 (ByteLevel)
    checkpoints with config.json's model_type and tokenizer_config.json's
    tokenizer_class varied (RES_TYPES x RES_CLASSES): the class AutoTokenizer
    loads (hub class against the model type's registered one, the
    ByteLevel-LlamaTokenizer rule, MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS)
    must be the one `ferrox inspect` names ("tokenizer.json as CLASS" for a
    class that rebuilds the pipeline, nothing for TokenizersBackend), or
    ferrox refuses naming it; the ids must equal AutoTokenizer's."""
    from transformers import AutoTokenizer
    from transformers.tokenization_utils_tokenizers import TokenizersBackend
    texts = orc.tricky_strings()
    fails, n, n_ref = [], 0, 0
    for src in ("llama", "qwen2"):
        for cls in RES_CLASSES:
            for mt in RES_TYPES:
                d = os.path.join(tmp, "res-%s-%s-%s" % (src, cls or "noclass", mt))
                os.makedirs(d)
                for f in ("tokenizer.json", "model.safetensors"):
                    os.symlink(os.path.join(FIXTURES, src, f), os.path.join(d, f))
                for f, key, val in (("config.json", "model_type", mt), ("tokenizer_config.json", "tokenizer_class", cls)):
                    with open(os.path.join(FIXTURES, src, f), encoding="utf-8") as fh:
                        c = json.load(fh)
                    c.pop(key, None)
                    if val is not None:
                        c[key] = val
                    with open(os.path.join(d, f), "w", encoding="utf-8") as fh:
                        json.dump(c, fh)
                tok = AutoTokenizer.from_pretrained(d)
                k = type(tok)
                want = None if k is TokenizersBackend or "__init__" not in k.__dict__ else k.__name__
                rc, out, err = run([ferrox, "inspect", "-m", d])
                m = re.search(r"tokenizer.json as (\w+)", out)
                got = m.group(1) if m else None
                name = os.path.basename(d)
                n += 1
                if rc:
                    ok = want is not None and ("with %s, which" % want) in err
                    n_ref += ok
                    print("%-52s %-16s refused%s" % (name, want, "" if ok else "  FAIL: " + err.strip()[-200:]))
                    if not ok:
                        fails.append("%s: refused (%s), transformers loads %s" % (name, err.strip()[-120:], want))
                    continue
                fx = ferrox_ids(tok_dump, d, texts)
                equal = 0 if isinstance(fx, str) else sum(tok.encode(t) == ids for t, ids in zip(texts, fx))
                ok = got == want and equal == len(texts)
                print("%-52s transformers %-16s ferrox %-16s %d of %d equal%s" % (
                    name, want, got, equal, len(texts), "" if ok else "  FAIL"))
                if not ok:
                    fails.append("%s: class %s (transformers %s), %d of %d equal" % (name, got, want, equal, len(texts)))
    print("part 4: %d folders, %d refused naming the class, %d failures" % (n, n_ref, len(fails)))
    return fails


def part_convert_flags(ferrox, tmp, cfgs, sources):
    """Part 3: failures."""
    gguf_py = os.path.join(LLAMA_DIR, "..", "gguf-py")
    if not os.path.isdir(os.path.join(gguf_py, "gguf")):
        print("part 3: llama.cpp's gguf-py is absent (scripts/get-llama-sdist.sh), not checked")
        return ["gguf-py missing"] if REQUIRE else []
    sys.path.insert(0, gguf_py)
    import logging
    from pathlib import Path
    import gguf
    logging.getLogger("gguf").setLevel(logging.ERROR)
    mk = ns(os.path.join(ROOT, "scripts", "make-hf-tokenizers.py"))
    fails, n = [], 0
    if os.environ.get("FX_SANITIZE_RUN") == "1":
        # ASan: a convert of gemma-3-270m's 33 MB tokenizer.json takes ~30 s;
        # the fixtures alone cover every post-processor kind but Bert's
        sources = [s for s in sources if s[0].startswith("fixture-")]
    for folder, d in cfgs.variants(os.path.join(tmp, "sv"), sources):
        if "--noclass--" not in folder:
            continue  # the class does not reach SpecialVocab
        for f in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(FIXTURES, "llama", f), d)
        sv = gguf.SpecialVocab(Path(d), load_merges=False).add_special_token
        out = d + ".gguf"
        rc, _, err = run([ferrox, "convert", d, "-o", out])
        if rc:
            fails.append("%s: convert: %s" % (folder, err.strip()[-200:]))
            continue
        md = mk.read_gguf_metadata(out)
        ours = [md.get("tokenizer.ggml.add_%s_token" % k) for k in ("bos", "eos")]
        theirs = [sv.get(k) for k in ("bos", "eos")]
        # SpecialVocab writes no key for a flag nothing decides; ferrox false
        ok = all(o == t or (t is None and o in (None, False)) for o, t in zip(ours, theirs))
        n += 1
        print("%-48s convert add_bos/eos %-16s SpecialVocab %-16s%s" % (
            folder, ours, theirs, "" if ok else "  FAIL"))
        if not ok:
            fails.append("%s: convert's add_bos/add_eos %s, SpecialVocab's %s" % (folder, ours, theirs))
    print("part 3: %d converted folders, %d differ from SpecialVocab" % (n, len(fails)))
    return fails


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def checkpoint(tmp, name, mpe, mml, raw_cfg=None):
    """The tiny llama checkpoint, max_position_embeddings mpe (None: key
    removed), model_max_length mml (None: absent) or raw_cfg as the whole
    tokenizer_config.json text."""
    d = os.path.join(tmp, name)
    shutil.copytree(os.path.join(FIXTURES, "llama"), d)
    with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    cfg.pop("max_position_embeddings", None)
    if mpe is not None:
        cfg["max_position_embeddings"] = mpe
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    p = os.path.join(d, "tokenizer_config.json")
    if raw_cfg is not None:
        with open(p, "w", encoding="utf-8") as f:
            f.write(raw_cfg)
        return d
    with open(p, encoding="utf-8") as f:
        tc = json.load(f)
    tc.pop("model_max_length", None)
    if mml is not None:
        tc["model_max_length"] = mml
    with open(p, "w", encoding="utf-8") as f:
        json.dump(tc, f)
    return d


def part_max_length(ferrox, tmp):
    """Part 2: failures."""
    fails = []
    cases = [  # name, max_position_embeddings, model_max_length, context, from, inspect's model_max_length
        ("mml-1536", None, 1536, 1536, "tokenizer_config.json model_max_length", "1536"),
        ("mml-int1e30", None, int(1e30), 4096, "default", "none"),
        ("mml-float1e30", None, 1e30, 4096, "default", "none"),
        ("mml-absent", None, None, 4096, "default", "none"),
        ("mpe-wins", 256, 1536, 256, "config.json max_position_embeddings", "1536"),
    ]
    for name, mpe, mml, ctx, src, shown in cases:
        d = checkpoint(tmp, name, mpe, mml)
        rc, out, err = run([ferrox, "inspect", "-m", d])
        got_ctx = re.search(r"^  context_length\s+(\d+)$", out, re.M)
        ok = (rc == 0 and got_ctx and int(got_ctx.group(1)) == ctx and
              "context:       %d (%s)" % (ctx, src) in out and
              re.search(r"^model_max_length: %s\b" % shown, out, re.M))
        gguf = os.path.join(tmp, name + ".gguf")
        rc2, _, err2 = run([ferrox, "convert", d, "-o", gguf])
        rc3, out3, _ = run([ferrox, "inspect", "-m", gguf]) if rc2 == 0 else (1, "", "")
        conv = re.search(r"^  context_length\s+(\d+)$", out3, re.M)
        ok = ok and rc3 == 0 and conv and int(conv.group(1)) == ctx
        print("%-14s context %s from %r, model_max_length %s; converted GGUF context_length %s%s" % (
            name, got_ctx.group(1) if got_ctx else "?", src, shown, conv.group(1) if conv else "?",
            "" if ok else "  FAIL (inspect rc %d: %s %s; convert rc %d: %s)" % (
                rc, out[-400:], err.strip(), rc2, err2.strip())))
        if not ok:
            fails.append("model_max_length case %s" % name)
    d = checkpoint(tmp, "mml-malformed", None, None, raw_cfg="{\"model_max_length\": 1536,")
    rc, out, err = run([ferrox, "inspect", "-m", d])
    ok = rc != 0 and "tokenizer_config.json" in err
    print("mml-malformed  refused: %s%s" % (err.strip()[-160:], "" if ok else "  FAIL (rc %d)" % rc))
    if not ok:
        fails.append("malformed tokenizer_config.json not refused by name")
    return fails


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ferrox, tok_dump = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        fails = part_max_length(ferrox, tmp)
        flag_fails, skipped = part_flags(ferrox, tok_dump, tmp)
        fails += flag_fails
    for f in fails:
        print("FAIL: " + f)
    if fails:
        return 1
    if skipped:
        print("SKIP (part 1): " + skipped)
        return 1 if REQUIRE else 77
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
