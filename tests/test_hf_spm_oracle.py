#!/usr/bin/env python3
"""ferrox on tokenizer folders with SentencePiece's tokenizer.model and no
tokenizer.json (src/tokenizer/hf_spm.c) against transformers' tokenizer for
the same folder.

    python3 tests/test_hf_spm_oracle.py build/bin/tok_dump [NAME ...]

Folders, written under <build>/hf-spm around three tokenizer.model files
(scripts/make-spm-tokenizers.py): llama-bpe and unigram-nfkc (trained by
sentencepiece, committed in tests/fixtures/spm) and gemma (made from the
default Gemma 3 270M GGUF's vocabulary on first use; 262,144 pieces):
- llama: LlamaTokenizer, add_bos_token, a Llama-2-style added_tokens_decoder
  (legacy false: Metaspace prepend "first");
- llama-legacy: legacy true (prepend "always"), add_bos and add_eos;
- llama-noprefix: add_prefix_space false (prepend "never", no Strip);
- llama-modeltype: no tokenizer_config.json, config.json model_type llama
  (which registers no tokenizer class: TokenizersBackend),
  special_tokens_map.json naming bos / eos / pad;
- llama-noclass: no tokenizer_config.json (TokenizersBackend: BPE with
  the proto's unk piece, no pre-tokenizer);
- llama-custom-tokens: model-specific *_token keys (a string, an
  AddedToken object, a plain object that transformers ignores, one in
  special_tokens_map.json: new ids in transformers' order) and
  additional_special_tokens naming a new token and a user-defined piece;
- llama-beside-vocab-json: no class, and a vocab.json + merges.txt beside
  tokenizer.model, which TokenizersBackend reads instead;
- mistral-llamaclass: LlamaTokenizer but config.json model_type mistral,
  which registers TokenizersBackend: TokenizersBackend;
- unigram-pretrainedfast: tokenizer_class PreTrainedTokenizerFast;
- unigram: no class (Unigram, Precompiled nmt_nfkc charsmap, Replace);
- unigram-eos: no class, add_eos_token;
- t5: T5Tokenizer (100 <extra_id_N>, WhitespaceSplit + Metaspace, $A </s>);
- t5-saved: the same with the tokenizer_config.json save_pretrained writes
  (additional_special_tokens, added_tokens_decoder of the extra ids);
- gemma: GemmaTokenizer, add_bos_token;
- llama-spm, llama-spm-legacy: Llama's 32,000 pieces (from llama.cpp's
  ggml-vocab-llama-spm.gguf, when the llama-cpp-python sdist is there:
  scripts/get-llama-sdist.sh), under Llama 2's own tokenizer_config.json
  and special_tokens_map.json (named tokens as AddedToken dicts), and
  legacy true; llama.cpp's test strings for it are added;
- gemma-saved: Gemma 3's own tokenizer_config.json keys (named tokens,
  model-specific boi_token / image_token, additional_special_tokens, which
  replace the control and user-defined pieces as extra special tokens, an
  added_tokens_decoder).
The oracle is AutoTokenizer.from_pretrained(folder) (transformers 5.x): its
backend `tokenizers` object encodes each string with the four add_special /
parse_special combinations (as tests/test_hf_tokenizer_oracle.py maps them);
ferrox is tok_dump on the folder. Strings: that test's tricky strings plus
N_RANDOM random ones per folder (its generator). Every id list must be
equal. Decoding: the ids of each string (add 0, parse 1) through ferrox's
streaming detokenizer must equal the backend's decode of the same ids as
tokens that do not start the text (decode([anchor] + ids) less
decode([anchor]): ferrox's pieces are never the first), specials skipped.
Then `ferrox inspect / tokenize / run` on a checkpoint whose tokenizer is
a tokenizer.model (cli_checks), and malformed and unsupported folders
must fail to load naming the problem.

Skips (77) without the packages, or (gemma only) without the model, unless
FX_REQUIRE_MODELS=1.
"""
import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
N_RANDOM = 300 if os.environ.get("FX_SANITIZE_RUN") == "1" else 2000
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "spm")
GEMMA_GGUF = "gemma-3-270m-q4_k_m.gguf"

LLAMA2_DECODER = {str(i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False,
                           "single_word": False, "special": True}
                  for i, c in enumerate(["<unk>", "<s>", "</s>"])}


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(1 if REQUIRE else 77)


def added(content, special=True):
    """An added_tokens_decoder entry as save_pretrained writes it."""
    return {"content": content, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
            "special": special}


def write_folder(d, model, files):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(model, os.path.join(d, "tokenizer.model"))
    for name, obj in files.items():
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False))


def added_dict(content):
    """A named token as older save_pretrained wrote it in tokenizer_config.json."""
    return {"__type": "AddedToken", "content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False}


def cases(out, gemma_model, llama_spm):
    llama = os.path.join(FIXTURES, "llama-bpe", "tokenizer.model")
    uni = os.path.join(FIXTURES, "unigram-nfkc", "tokenizer.model")
    cfg = "tokenizer_config.json"
    all_cases = [
        ("llama", llama, {cfg: {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
                                "add_eos_token": False, "legacy": False, "bos_token": "<s>",
                                "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
                                "added_tokens_decoder": LLAMA2_DECODER}}),
        ("llama-legacy", llama, {cfg: {"tokenizer_class": "LlamaTokenizerFast", "legacy": True,
                                       "add_bos_token": True, "add_eos_token": True}}),
        ("llama-noprefix", llama, {cfg: {"tokenizer_class": "LlamaTokenizer", "add_prefix_space": False}}),
        ("llama-modeltype", llama, {"config.json": {"model_type": "llama"},
                                    "special_tokens_map.json": {"bos_token": "<s>", "eos_token": "</s>",
                                                                "pad_token": "<mask>"}}),
        ("llama-noclass", llama, {}),
        ("llama-custom-tokens", llama, {
            cfg: {"tokenizer_class": "LlamaTokenizer", "image_token": "<image>",
                  "boi_token": dict(added_dict("<boi>")), "plain_token": {"content": "<plain>"},
                  "additional_special_tokens": ["<new>", "<think>"]},
            "special_tokens_map.json": {"audio_token": added("<audio>"), "bos_token": "<s>"}}),
        ("llama-beside-vocab-json", llama, {"vocab.json": {"a": 0, "b": 1, "ab": 2}, "merges.txt": "a b\n"}),
        ("mistral-llamaclass", llama, {"config.json": {"model_type": "mistral"},
                                       cfg: {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True}}),
        ("unigram-pretrainedfast", uni, {cfg: {"tokenizer_class": "PreTrainedTokenizerFast"}}),
        ("unigram", uni, {}),
        ("unigram-eos", uni, {cfg: {"add_eos_token": True}}),
        ("t5", uni, {cfg: {"tokenizer_class": "T5Tokenizer"}}),
        ("t5-saved", uni, {cfg: {"tokenizer_class": "T5Tokenizer", "extra_ids": 100, "eos_token": "</s>",
                                 "pad_token": "<pad>", "unk_token": "<unk>",
                                 "additional_special_tokens": ["<extra_id_%d>" % i for i in range(100)],
                                 "added_tokens_decoder": dict(
                                     [(str(i), added(c)) for i, c in enumerate(["<pad>", "</s>", "<unk>"])] +
                                     [(str(3000 + i), added("<extra_id_%d>" % (99 - i))) for i in range(100)])}}),
    ]
    if gemma_model:
        all_cases.append(("gemma", gemma_model, {cfg: {"tokenizer_class": "GemmaTokenizer",
                                                       "add_bos_token": True}}))
        all_cases.append(("gemma-saved", gemma_model, {cfg: {
            "tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False,
            "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
            "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
            "spaces_between_special_tokens": False, "sp_model_kwargs": {},
            "boi_token": "<start_of_image>", "image_token": "<image_soft_token>",
            "added_tokens_decoder": {str(i): added(c, special=(i != 5)) for i, c in
                                     [(0, "<pad>"), (1, "<eos>"), (2, "<bos>"), (3, "<unk>"), (4, "<mask>"),
                                      (5, "[multimodal]"), (105, "<start_of_turn>"), (106, "<end_of_turn>")]}}}))
    if llama_spm:  # Llama 2's own tokenizer_config.json / special_tokens_map.json
        named = {"bos_token": added_dict("<s>"), "eos_token": added_dict("</s>"), "unk_token": added_dict("<unk>")}
        all_cases.append(("llama-spm", llama_spm, {
            cfg: dict(named, add_bos_token=True, add_eos_token=False, clean_up_tokenization_spaces=False,
                      legacy=False, model_max_length=1000000000000000019884624838656, pad_token=None,
                      padding_side="right", sp_model_kwargs={}, tokenizer_class="LlamaTokenizer"),
            "special_tokens_map.json": {k: {kk: vv for kk, vv in v.items() if kk != "__type"}
                                        for k, v in named.items()}}))
        all_cases.append(("llama-spm-legacy", llama_spm, {cfg: {"tokenizer_class": "LlamaTokenizerFast",
                                                                 "legacy": True, "add_bos_token": True}}))
    made = []
    for name, model, files in all_cases:
        d = os.path.join(out, name)
        write_folder(d, model, files)
        made.append((name, d))
    return made


def llama_spm_source(out, mk):
    """<out>/llama-spm-src/tokenizer.model made from llama.cpp's
    ggml-vocab-llama-spm.gguf (kept), or None when that is absent."""
    vd = mk.llama_vocab_dir()
    gguf = os.path.join(vd, "ggml-vocab-llama-spm.gguf") if vd else ""
    path = os.path.join(out, "llama-spm-src", "tokenizer.model")
    if not os.path.isfile(gguf):
        if REQUIRE and os.environ.get("FX_LLAMA_VOCAB_DIR"):
            sys.exit("FAIL: FX_REQUIRE_MODELS=1 and %s is missing" % gguf)
        print("llama-spm: llama.cpp's ggml-vocab-llama-spm.gguf not found (scripts/get-llama-sdist.sh), skipped")
        return None
    if not os.path.isfile(path) or os.path.getmtime(path) < os.path.getmtime(gguf):
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-spm-tokenizers.py"), "--llama", gguf,
                        os.path.dirname(path)], check=True)
    return path


def gemma_source(out):
    """<out>/gemma-src/tokenizer.model made from the GGUF (kept), or None."""
    gguf = os.path.join(os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models")), GEMMA_GGUF)
    path = os.path.join(out, "gemma-src", "tokenizer.model")
    if os.path.isfile(path) and os.path.getmtime(path) >= os.path.getmtime(gguf if os.path.isfile(gguf) else path):
        return path
    if not os.path.isfile(gguf):
        if REQUIRE:
            sys.exit("FAIL: FX_REQUIRE_MODELS=1 and %s is missing" % gguf)
        print("gemma: %s missing, skipped" % gguf)
        return None
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make-spm-tokenizers.py"), "--gemma", gguf,
                    os.path.dirname(path)], check=True)
    return path


# ---- decoding -----------------------------------------------------------------------------------

def ferrox_decode(tok_dump, d, id_lists):
    req = "".join("D %s\n" % (",".join(map(str, ids)) if ids else "-") for ids in id_lists)
    p = subprocess.run([tok_dump, d], input=req.encode(), capture_output=True)
    if p.returncode != 0:
        return None
    out = []
    for ln in p.stdout.decode().split("\n")[:-1]:
        out.append(ln if ln.startswith("ERR") else b"" if ln == "-" else bytes.fromhex(ln))
    return out


def anchor_id(tok):
    """A plain one-character piece to put before the ids, so none of them
    is decoded as the first token."""
    vocab = tok.get_vocab(with_added_tokens=False)
    added = tok.get_added_tokens_decoder()
    for cand in ("a", "\u2581a", "e", "\u2581e"):
        if cand in vocab and vocab[cand] not in added:
            return vocab[cand]
    raise SystemExit("no anchor piece")


def hf_decode(tok, id_lists):
    a = anchor_id(tok)
    head = tok.decode([a], skip_special_tokens=True)
    out = []
    for ids in id_lists:
        s = tok.decode([a] + ids, skip_special_tokens=True)
        out.append(s[len(head):].encode("utf-8") if s.startswith(head) else None)
    return out


# ---- malformed folders --------------------------------------------------------------------------

def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def malformed(tok_dump, out):
    """(folder, expected text in the error) for each broken folder."""
    good = open(os.path.join(FIXTURES, "llama-bpe", "tokenizer.model"), "rb").read()
    piece = b"\x0a\x01a\x15\x00\x00\x00\x00\x18\x01"  # piece "a", score 0, type NORMAL
    bad = [
        ("truncated", good[:len(good) // 2], {}, "tokenizer.model: offset"),
        ("bad-varint", b"\x0a" + b"\xff" * 11, {}, "varint overflows 64 bits"),
        ("length-past-end", b"\x0a\x7f\x0a\x01a", {}, "length runs past the end"),
        ("wrong-wire-type", b"\x0a" + varint(len(piece)) + piece[:-2] + b"\x1d\x01\x00\x00\x00",
         {}, "piece type has wire type 5, not 0"),
        ("pieces-wire-type", b"\x0d\x00\x00\x00\x00", {}, "pieces has wire type 5, not 2"),
        ("type-range", b"\x0a" + varint(len(piece)) + piece[:-1] + b"\x07", {}, "piece type is not one of"),
        ("group", b"\x0b\x0c", {}, "group"),
        ("no-pieces", b"\x12\x02\x18\x02", {}, "no pieces"),
        ("not-utf8", b"\x0a\x03\x0a\x01\xff", {}, "piece is not UTF-8"),
        ("duplicate", good + b"\x0a\x03\x0a\x01a", {}, "appears twice"),
        ("roberta", good, {"tokenizer_config.json": {"tokenizer_class": "XLMRobertaTokenizer"}},
         "tokenizer_class XLMRobertaTokenizer"),
        ("modeltype", good, {"config.json": {"model_type": "qwen2"}}, "model_type qwen2"),
        ("renamed", good, {"tokenizer_config.json": {"added_tokens_decoder": {"7": {"content": "<x>"}}}},
         "renaming pieces is not supported"),
    ]
    from sentencepiece import sentencepiece_model_pb2 as pb
    m = pb.ModelProto()
    m.ParseFromString(open(os.path.join(FIXTURES, "unigram-nfkc", "tokenizer.model"), "rb").read())
    m.normalizer_spec.precompiled_charsmap = b"\x10\x00\x00\x00abc"
    bad.append(("bad-charsmap", m.SerializeToString(), {},
                "tokenizer.model (read as the tokenizer.json transformers builds from it): "
                "precompiled_charsmap is truncated"))
    fails = []
    for name, data, files, want in bad:
        d = os.path.join(out, "bad-" + name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        with open(os.path.join(d, "tokenizer.model"), "wb") as f:
            f.write(data)
        for fn, obj in files.items():
            with open(os.path.join(d, fn), "w") as f:
                json.dump(obj, f)
        r = subprocess.run([tok_dump, d], input=b"", capture_output=True)
        msg = (r.stdout + r.stderr).decode("utf-8", "replace")
        ok = r.returncode != 0 and want in msg
        print("%s: %s (%s)" % (name, "refused as expected" if ok else "WRONG", msg.strip()[:200]))
        if not ok:
            fails.append("%s: want an error naming %r, got rc %d: %s" % (name, want, r.returncode, msg[:300]))
    return fails


# ---- the CLI on a checkpoint ---------------------------------------------------------------------

def cli_checks(tok_dump, out, AutoTokenizer):
    """`ferrox inspect / tokenize / run` on tests/fixtures/hf-tiny/llama with its
    tokenizer.json replaced by a tokenizer.model of the same 256 pieces
    (LlamaTokenizer, add_bos_token): the kind is reported, `tokenize --ids`
    gives AutoTokenizer's ids, `run` generates."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    ferrox = os.path.join(os.path.dirname(os.path.abspath(tok_dump)), "ferrox")
    src = os.path.join(ROOT, "tests", "fixtures", "hf-tiny", "llama")
    d = os.path.join(out, "cli-tiny-llama")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(src, f), d)
    tj = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    m = pb.ModelProto()
    for tok, i in sorted(tj["model"]["vocab"].items(), key=lambda x: x[1]):
        p = m.pieces.add()
        p.piece, p.score = tok, -float(i)
        p.type = (pb.ModelProto.SentencePiece.UNKNOWN if tok == "<unk>" else
                  pb.ModelProto.SentencePiece.CONTROL if tok in ("<s>", "</s>", "<pad>") else
                  pb.ModelProto.SentencePiece.BYTE if len(tok) == 6 and tok.startswith("<0x") else
                  pb.ModelProto.SentencePiece.NORMAL)
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    with open(os.path.join(d, "tokenizer.model"), "wb") as f:
        f.write(m.SerializeToString())
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True}, f)
    fails = []
    text = "Hello world, the tiny model"
    want = AutoTokenizer.from_pretrained(d)(text)["input_ids"]

    def run(*args):
        r = subprocess.run([ferrox] + list(args), capture_output=True, timeout=300)
        return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")

    rc, msg = run("inspect", "-m", d)
    if rc or "tokenizer.model (LlamaTokenizer, BPE), 256 tokens" not in msg:
        fails.append("ferrox inspect: rc %d: %s" % (rc, msg[-300:]))
    rc, msg = run("tokenize", "-m", d, "-p", text, "--ids")
    got = msg.strip().splitlines()[-1] if msg.strip() else ""
    if rc or got != str(want):
        fails.append("ferrox tokenize --ids: rc %d, %s, transformers %s" % (rc, got, want))
    rc, msg = run("run", "-m", d, "-p", text, "-n", "6", "--temp", "0")
    if rc or "generation 6 tokens" not in msg:
        fails.append("ferrox run: rc %d: %s" % (rc, msg[-300:]))
    print("cli (hf-tiny llama with tokenizer.model): tokenize %s, %s" % (
        got, "inspect / tokenize / run as expected" if not fails else "FAILED"))
    return fails


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    tok_dump, only = args[0], set(args[1:])
    for mod in ("tokenizers", "transformers", "sentencepiece", "google.protobuf", "gguf"):
        if importlib.util.find_spec(mod.split(".")[0]) is None or importlib.util.find_spec(mod) is None:
            skip("python package %s missing" % mod)
    sys.modules.setdefault("torch", None)  # the tokenizer path needs no torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.set_verbosity_error()

    orc = types.SimpleNamespace(**runpy.run_path(os.path.join(ROOT, "tests", "test_hf_tokenizer_oracle.py")))
    build = os.path.dirname(os.path.dirname(os.path.abspath(tok_dump)))
    out = os.path.join(build, "hf-spm")
    os.makedirs(out, exist_ok=True)
    gemma = gemma_source(out) if not only or any(n.startswith("gemma") for n in only) else None
    mk = orc.load_maker()
    lspm = llama_spm_source(out, mk) if not only or any(n.startswith("llama-spm") for n in only) else None
    made = [(n, d) for n, d in cases(out, gemma, lspm) if not only or n in only]
    tricky = orc.tricky_strings()
    failures = []
    for name, d in made:
        full = AutoTokenizer.from_pretrained(d)
        tok = full._tokenizer
        texts = tricky + orc.random_strings(name, tok, N_RANDOM)
        if name.startswith("llama-spm"):  # llama.cpp's own test strings for this vocabulary
            texts += [t for t in orc.inp_strings(mk, "llama-spm") if t not in texts]
        fx = orc.ferrox_encode(tok_dump, d, texts)
        hf = orc.hf_encode(tok, texts) if not isinstance(fx, str) else None
        equal, total, first = orc.compare(texts, hf, fx)
        print("%s (%s): %d of %d equal%s" % (name, type(full).__name__, equal, total,
                                             " (first difference: %s)" % first if first else ""), flush=True)
        if equal != total or total == 0:
            failures.append("%s: %d of %d differ" % (name, total - equal, total))
            continue
        ids = hf[(0, 1)]
        fd, hd = ferrox_decode(tok_dump, d, ids), hf_decode(tok, ids)
        same = sum(1 for a, b in zip(fd or [], hd) if a == b)
        back = sum(1 for a, t in zip(fd or [], texts) if a == t.encode("utf-8"))
        firstd = next(("%r: tokenizers %r, ferrox %r" % (t[:60], b, a) for a, b, t in zip(fd or [], hd, texts)
                       if a != b), None)
        print("%s decode: %d of %d equal to tokenizers' (%d give the input text back)%s" % (
            name, same, len(ids), back, " (first difference: %s)" % firstd if firstd else ""), flush=True)
        if same != len(ids):
            failures.append("%s decode: %d of %d differ" % (name, len(ids) - same, len(ids)))
    if not only:
        failures += cli_checks(tok_dump, out, AutoTokenizer)
        failures += malformed(tok_dump, out)
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
