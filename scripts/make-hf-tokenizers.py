#!/usr/bin/env python3
"""Write Hugging Face tokenizer folders (tokenizer.json + tokenizer_config.json)
for the tokenizer.json oracle test (tests/test_hf_tokenizer_oracle.py) and
bench/tokenize_speed.py.

    python3 scripts/make-hf-tokenizers.py [--retrain-wordpiece] OUTDIR [NAME ...]

One folder per vocabulary under OUTDIR (existing ones are replaced), and
OUTDIR/sources.txt: each folder's name, the file it came from, how it was
built, its tokenizer.json size and the seconds it took.

- From GGUF files, by transformers' own GGUF tokenizer converters
  (transformers.integrations.gguf: GGUF_TOKENIZER_MAPPING,
  convert_gguf_tokenizer), the path AutoTokenizer.from_pretrained(dir,
  gguf_file=...) takes, then PreTrainedTokenizerFast.save_pretrained.
  transformers' own GGUF reader imports torch (it also reads tensors), so
  the metadata is read here with struct, the same way; torch is kept out
  (sys.modules["torch"] = None), since the tokenizer path never uses it.
  Sources: llama.cpp's ggml-vocab-*.gguf test vocabularies (the llama-cpp-
  python 0.3.36 sdist's vendor/llama.cpp/models: $FX_LLAMA_VOCAB_DIR, else
  $ORACLE/sdist/llama_cpp_python-*/vendor/llama.cpp/models with ORACLE
  defaulting to ../oracle beside the repository, as bench/llama.sh) and
  the two default models in $FX_MODELS_DIR (default models/). A file that
  is missing is skipped, saying so.
- bert-bge: transformers cannot convert a WordPiece GGUF ("bert"), so it is
  our construction with the tokenizers API: the GGUF's tokens with
  llama.cpp's phantom-space spelling undone (convert_hf_to_gguf's
  conversion/bert.py: "##x" became "x", "x" became "\u2581x"), WordPiece +
  BertNormalizer (lowercase) + BertPreTokenizer + BertProcessing, as
  bge-small-en's own tokenizer.json.
- wordpiece-trained: a 4,000-token WordPiece trained by tokenizers'
  WordPieceTrainer on corpus_text() (below), Bert components around it.
  The trainer is not deterministic (see train_wordpiece), so its output is
  committed, xz-compressed, and --retrain-wordpiece rewrites it.
- unigram-trained: a 4,000-piece Unigram trained by sentencepiece
  (nmt_nfkc normalization, byte fallback off) on the same text, converted by
  transformers' SpmConverter, so tokenizer.json carries a Precompiled
  normalizer (needs protobuf, as SpmConverter does).

Everything is deterministic: fixed seeds, one trainer thread; the same
packages give the same files.

The module also gives corpus_text(), the mixed-language text generator the
oracle test and the speed bench share.
"""
import hashlib
import os
import random
import struct
import sys
import time

# transformers' tokenizer code needs no torch; a torch present (or half
# installed) would only cost its import time. Must precede the import.
if "torch" not in sys.modules:
    sys.modules["torch"] = None
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA_VOCABS = ["bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
                "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
MODELS = [("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf"), ("gemma-3-270m", "gemma-3-270m-q4_k_m.gguf")]
TRAINED = ["wordpiece-trained", "unigram-trained"]
TRAINED_VOCAB_SIZE = 4000


def llama_vocab_dir():
    """llama.cpp's models/ folder (ggml-vocab-*.gguf and their .inp/.out), or None."""
    d = os.environ.get("FX_LLAMA_VOCAB_DIR")
    if d:
        return d
    oracle = os.environ.get("ORACLE", os.path.join(os.path.dirname(ROOT), "oracle"))
    sdist = os.path.join(oracle, "sdist")
    if os.path.isdir(sdist):
        for name in sorted(os.listdir(sdist)):
            d = os.path.join(sdist, name, "vendor", "llama.cpp", "models")
            if name.startswith("llama_cpp_python-") and os.path.isdir(d):
                return d
    return None


def gguf_sources():
    """[(name, gguf path)] for every GGUF vocabulary this script knows."""
    vd = llama_vocab_dir() or "<no llama.cpp models dir>"
    models = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
    return ([(n, os.path.join(vd, "ggml-vocab-%s.gguf" % n)) for n in LLAMA_VOCABS] +
            [(n, os.path.join(models, f)) for n, f in MODELS])


# ---- GGUF metadata (the layout transformers' reader.py walks) -------------

_KV_FORMAT = {0: "<B", 1: "<b", 7: "<?", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path):
    """A GGUF file's metadata as {key: value}; arrays as lists."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    _version, _n_tensors, n_kv = struct.unpack_from("<IQQ", blob, 4)

    def string(pos):
        (n,) = struct.unpack_from("<Q", blob, pos)
        return blob[pos + 8:pos + 8 + n].decode("utf-8"), pos + 8 + n

    def value(pos, vtype):
        if vtype in _KV_FORMAT:
            return struct.unpack_from(_KV_FORMAT[vtype], blob, pos)[0], pos + struct.calcsize(_KV_FORMAT[vtype])
        if vtype == 8:
            return string(pos)
        if vtype != 9:
            raise ValueError("%s: metadata value type %d" % (path, vtype))
        etype, count = struct.unpack_from("<IQ", blob, pos)
        pos += 12
        if etype in _KV_FORMAT:
            fmt = "<%d%s" % (count, _KV_FORMAT[etype][1])
            return list(struct.unpack_from(fmt, blob, pos)), pos + struct.calcsize(fmt)
        out = []
        for _ in range(count):
            v, pos = value(pos, etype)
            out.append(v)
        return out, pos

    md, pos = {}, 24
    for _ in range(n_kv):
        key, pos = string(pos)
        (vtype,) = struct.unpack_from("<I", blob, pos)
        md[key], pos = value(pos + 4, vtype)
    return md


# ---- builders -----------------------------------------------------------------

def save(tokenizer, config, outdir):
    """tokenizer.json + tokenizer_config.json (+ chat_template.jinja) as
    transformers' save_pretrained writes them."""
    from transformers import PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **config).save_pretrained(outdir)


def from_gguf(path, outdir):
    """transformers' conversion, as AutoTokenizer.from_pretrained(gguf_file=)
    does it (get_gguf_tokenizer, whose reader needs torch, restated)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        GGUF_TOKENIZER_MAPPING, _SPECIAL_TOKENS, convert_gguf_tokenizer)

    md = read_gguf_metadata(path)
    if md.get("tokenizer.ggml.model") == "bert":
        return bert_from_gguf(md, outdir)
    grouped = {group: {name: md["tokenizer." + key] for key, name in renames.items() if "tokenizer." + key in md}
               for group, renames in GGUF_TOKENIZER_MAPPING.items()}
    tok_dict, config = grouped["tokenizer"], grouped["tokenizer_config"]
    if tok_dict.get("tokenizer_type") == "llama":
        config.setdefault("add_bos_token", True)
    elif tok_dict.get("tokenizer_type") == "gemma4":
        config["add_bos_token"] = False
    for name, key in _SPECIAL_TOKENS.items():
        token_id = md.get("tokenizer.ggml." + key)
        config[name] = tok_dict["tokens"][token_id] if token_id is not None else None
    tokenizer, extra = convert_gguf_tokenizer(md["general.architecture"], tok_dict)
    config.update(extra)
    save(tokenizer, config, outdir)
    return "transformers convert_gguf_tokenizer (%s, pre %s)" % (
        tok_dict.get("tokenizer_type"), tok_dict.get("pre_tokenizer_type"))


def bert_pipeline(tokenizer, cls_id, sep_id):
    from tokenizers import normalizers, pre_tokenizers, processors, decoders

    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=None, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", sep_id), ("[CLS]", cls_id))
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    return tokenizer


def bert_config():
    return dict(cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]", pad_token="[PAD]", mask_token="[MASK]",
                do_lower_case=True)


def bert_from_gguf(md, outdir):
    """Our construction: WordPiece from the GGUF's tokens (see the docstring)."""
    from tokenizers import AddedToken, Tokenizer, models

    tokens, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    vocab = {}
    for i, (t, ty) in enumerate(zip(tokens, types)):
        if ty == 3 or (t.startswith("[unused") and t.endswith("]")):
            word = t                     # control tokens and [unusedN] kept as they were
        elif t.startswith("\u2581"):
            word = t[1:]
        else:
            word = "##" + t
        if word in vocab:
            raise ValueError("bert vocabulary: %r twice (ids %d, %d)" % (word, vocab[word], i))
        vocab[word] = i
    unk = tokens[md["tokenizer.ggml.unknown_token_id"]]
    tok = Tokenizer(models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=100))
    bert_pipeline(tok, md["tokenizer.ggml.cls_token_id"], md["tokenizer.ggml.seperator_token_id"])
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    save(tok, bert_config(), outdir)
    return "our construction: WordPiece + Bert normalizer/pre-tokenizer/processing from the GGUF tokens"


WORDPIECE_XZ = os.path.join(ROOT, "tests", "data", "hf-tokenizers", "wordpiece-trained.tokenizer.json.xz")


def train_wordpiece(outdir, retrain=False):
    """tokenizers' trainers break ties between equally frequent pairs in
    hash-map order, which changes from process to process (48 of 4,000
    tokens differed between two runs), so the trained tokenizer.json is
    committed (WORDPIECE_XZ, 19 KB) and unpacked; --retrain-wordpiece trains
    anew and rewrites that file."""
    import lzma
    from tokenizers import Tokenizer, models, trainers

    if retrain:
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        bert_pipeline(tok, 2, 3)
        trainer = trainers.WordPieceTrainer(vocab_size=TRAINED_VOCAB_SIZE, special_tokens=specials,
                                            show_progress=False)
        tok.train_from_iterator(corpus_text(seed=1, n_bytes=1 << 20).split("\n"), trainer)
        assert tok.token_to_id("[CLS]") == 2 and tok.token_to_id("[SEP]") == 3
        os.makedirs(os.path.dirname(WORDPIECE_XZ), exist_ok=True)
        with lzma.open(WORDPIECE_XZ, "wb", preset=9 | lzma.PRESET_EXTREME) as f:
            f.write(tok.to_str(pretty=False).encode("utf-8"))
    with lzma.open(WORDPIECE_XZ, "rb") as f:
        tok = Tokenizer.from_str(f.read().decode("utf-8"))
    save(tok, bert_config(), outdir)
    return "tokenizers WordPieceTrainer, %d tokens, corpus_text(seed=1, 1 MiB); the committed %s" % (
        tok.get_vocab_size(), os.path.relpath(WORDPIECE_XZ, ROOT))


def train_unigram(outdir):
    import sentencepiece as spm
    from transformers.convert_slow_tokenizer import SpmConverter

    os.makedirs(outdir, exist_ok=True)
    corpus = os.path.join(outdir, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(corpus_text(seed=2, n_bytes=1 << 20))
    spm.set_random_generator_seed(2)
    prefix = os.path.join(outdir, "spm")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="unigram", vocab_size=TRAINED_VOCAB_SIZE,
        normalization_rule_name="nmt_nfkc", character_coverage=0.9995, num_threads=1,
        user_defined_symbols=["<sep>", "<cls>"], control_symbols=["<mask>"],
        bos_id=1, eos_id=2, unk_id=0, pad_id=-1, minloglevel=2)

    class Slow:                          # what SpmConverter reads of a slow tokenizer
        vocab_file = prefix + ".model"
    tok = SpmConverter(Slow()).converted()
    for leftover in (corpus, prefix + ".model", prefix + ".vocab"):
        os.remove(leftover)
    save(tok, dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", add_bos_token=False), outdir)
    return "sentencepiece unigram (nmt_nfkc), %d pieces, SpmConverter" % tok.get_vocab_size()


# ---- text -------------------------------------------------------------------------------

# Syllables of several scripts; words are 1-4 syllables of one script.
SCRIPTS = {
    "latin": "ka ri to ne sa mi lu the re an in er on at es or ch st qu ph ll ai ou ee ä ö ü é ß ç ñ".split(),
    "cyrillic": "ка ри то не са ми лу ст ор ен пр ов ни ль ая ый щи жи ю ё".split(),
    "greek": "κα ρι το νε σα μι λυ στ ορ εν πρ ου ης ος ά έ ί ώ".split(),
    "arabic": "كا ري تو ني سا مي لو ال من في ة ى ؤ ئ".split(),
    "devanagari": "क र त न स म ल कि री तो ने सा मी ्र ं ः".split(),
    "cjk": list("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切").copy(),
    "kana": list("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト"),
    "hangul": list("가나다라마바사아자차카타파하고노도로모보소오조초코토포호한국어세계안녕"),
    "thai": "กา รี โต เน สา มี ลู ที่ และ ของ ใน".split(),
    "hebrew": "כא רי טו נה סא מי לו של את".split(),
}
PUNCT = [". ", ", ", "; ", ": ", "! ", "? ", " - ", " (", ") ", "\"", "'", "\n", "\n\n", "\t", "  "]


def corpus_text(seed, n_bytes):
    """n_bytes (about; cut at a character) of mixed-language running text:
    Zipf-distributed words per script, numbers, punctuation, newlines."""
    rng = random.Random(seed)
    lexicon = {}
    for name, syl in SCRIPTS.items():
        words = []
        for _ in range(400):
            n = 1 + int(rng.random() * 4)
            words.append("".join(syl[int(rng.random() * len(syl))] for _ in range(n)))
        lexicon[name] = words
    names = sorted(SCRIPTS)
    weights = [6 if n == "latin" else 2 if n in ("cjk", "cyrillic") else 1 for n in names]
    total = sum(weights)
    out, size = [], 0
    while size < n_bytes:
        r, script = rng.random() * total, names[-1]
        for n, w in zip(names, weights):
            if r < w:
                script = n
                break
            r -= w
        words = lexicon[script]
        sep = "" if script in ("cjk", "kana") else " "
        sentence = []
        for _ in range(3 + int(rng.random() * 12)):
            x = rng.random()
            if x < 0.05:
                sentence.append(str(int(rng.random() ** 3 * 100000)))
            else:
                sentence.append(words[int(len(words) * rng.random() ** 2.5)])  # Zipf-like
            if rng.random() < 0.08:
                sentence.append(PUNCT[int(rng.random() * len(PUNCT))].strip(" ") or ",")
        text = sep.join(sentence)
        if script == "latin" and text:
            text = text[0].upper() + text[1:]
        text += PUNCT[int(rng.random() * len(PUNCT))]
        out.append(text)
        size += len(text.encode("utf-8"))
    s = "".join(out).encode("utf-8")[:n_bytes]
    return s.decode("utf-8", "ignore")


# ---- main -------------------------------------------------------------------------------

def build(name, outdir, retrain=False):
    """Build one vocabulary folder; returns a description, or None when its source is missing."""
    if name == "wordpiece-trained":
        return train_wordpiece(outdir, retrain)
    if name == "unigram-trained":
        return train_unigram(outdir)
    path = dict(gguf_sources())[name]
    if not os.path.isfile(path):
        return None
    return from_gguf(path, outdir) + ", from " + path


def stamp_of(name, source):
    """What a folder is built from: this script, the committed WordPiece,
    the source file's path, size and mtime, the package versions."""
    import tokenizers
    import transformers
    h = hashlib.sha256()
    for p in (os.path.abspath(__file__), WORDPIECE_XZ):
        with open(p, "rb") as f:
            h.update(f.read())
    if source:
        st = os.stat(source)
        h.update(("%s %d %d" % (source, st.st_size, int(st.st_mtime))).encode())
    h.update(("%s %s %s" % (name, tokenizers.__version__, transformers.__version__)).encode())
    return h.hexdigest()


def ensure(out, names):
    """[(name, folder, source GGUF or None)] for those of names whose source
    exists, building under out the folders whose .stamp is missing or stale
    (the tests and the bench call this; a build is about a minute for all)."""
    sources = dict(gguf_sources())
    found = []
    for name in names:
        src = sources.get(name)
        if src is not None and not os.path.isfile(src):
            print("%s: not available, %s is missing" % (name, src))
            continue
        d = os.path.join(out, name)
        stamp = stamp_of(name, src)
        try:
            with open(os.path.join(d, ".stamp")) as f:
                fresh = f.read() == stamp
        except OSError:
            fresh = False
        if not fresh:
            t0 = time.monotonic()
            clear(d)
            build(name, d)
            with open(os.path.join(d, ".stamp"), "w") as f:
                f.write(stamp)
            print("%s: built %s in %.1f s" % (name, d, time.monotonic() - t0), flush=True)
        found.append((name, d, src))
    return found


def clear(d):
    if os.path.isdir(d):
        for f in os.listdir(d):
            os.remove(os.path.join(d, f))


def main():
    if len([a for a in sys.argv[1:] if a != "--retrain-wordpiece"]) < 1:
        sys.exit(__doc__)
    retrain = "--retrain-wordpiece" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--retrain-wordpiece"]
    out = args[0]
    known = [n for n, _ in gguf_sources()] + TRAINED
    names = args[1:] or known
    for n in names:
        if n not in known:
            sys.exit("unknown vocabulary %r; known: %s" % (n, " ".join(known)))
    os.makedirs(out, exist_ok=True)
    lines = []
    for n in names:
        d = os.path.join(out, n)
        clear(d)
        t0 = time.monotonic()
        how = build(n, d, retrain)
        if how is None:
            print("%s: skipped, source missing" % n, file=sys.stderr)
            continue
        size = os.path.getsize(os.path.join(d, "tokenizer.json"))
        line = "%s\t%s\t%d bytes\t%.1f s" % (n, how, size, time.monotonic() - t0)
        print(line, file=sys.stderr)
        lines.append(line)
    import tokenizers
    import transformers
    with open(os.path.join(out, "sources.txt"), "w") as f:
        f.write("# scripts/make-hf-tokenizers.py; tokenizers %s, transformers %s\n"
                % (tokenizers.__version__, transformers.__version__))
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
