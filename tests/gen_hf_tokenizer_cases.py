#!/usr/bin/env python3
"""Writes tests/data/hf_tokenizer/cases.txt for tests/test_hf_tokenizer.c.

The oracle is the `tokenizers` package (PyPI, 0.23.3 when written; the
Precompiled case's charsmap comes from `sentencepiece`'s trainer): each
small tokenizer.json below is built with its Python API, and every expected
id list and decoded piece stream is what that package gives. The C test
needs no Python: it reads the committed output.

Format, one record a line:
  T name                      a tokenizer follows
  J json                      its tokenizer.json (one line)
  E add parse hex ids         encode(hex text, add_special_tokens=add) with
                              special-token texts matched when parse; ids
                              comma-separated or "-"
  D ids hex                   the pieces of ids streamed (special tokens
                              skipped), as decode([a] + ids) less decode([a])
  X code text                 loading must fail with status code and a
                              message containing text
Run: python3 tests/gen_hf_tokenizer_cases.py > tests/data/hf_tokenizer/cases.txt
(the WordPiece trainer breaks ties in hash order, so its vocabulary may
differ between runs; the committed output is the test's data).
"""
import json
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

CORPUS = ["Hello world, hello there! It's a lovely day in the world.",
          "The quick brown fox jumps over the lazy dog 1234567890 times.",
          "naïve café — résumé; 日本語 and 中文 text 😀 emoji.",
          "def hello_world():\n    return 'hello'  # comment\n\n\tx = 42",
          "lowest newer wider longest widest hello hello hello world world"] * 4

TEXTS = ["Hello world", " hello  there ", "It's 42, isn't it?", "a\n\nb\r\n c\t d",
         "naïve 日本語 😀!", "", "   ", "hello_world()  # x", "worldworld hello,hello",
         "ab<mask>cd <mask> x", "<s>Hello</s>", "Hi <s> there </s>", "[SEP][SEP]x",
         "the ▁ mark", "e\u0301 \u00a0nbsp\u3000ideo", "1,234.5 + 6-7", "zzz qqq ☃"]
BAD_UTF8 = [b"ab\xffcd", b"\xe6\x97 x", b"hello\xc3", b"\xed\xa0\x80 surrogate", b"\xf0\x9f\x98 \x80"]


def out(*a):
    print(*a)


def bpe_trained(vocab_size=320, **kw):
    t = Tokenizer(models.BPE(**kw))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(CORPUS, tr)
    return t


def char_bpe(extra_merges=(), **kw):
    """A character-level BPE over the test texts' characters plus a few merges."""
    chars = sorted(set("".join(TEXTS + CORPUS)) | set("▁<>/[]"))
    vocab = {c: i for i, c in enumerate(chars)}
    merges = []
    for a, b in [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("w", "o"), ("r", "l"),
                 ("wo", "rl"), ("worl", "d"), ("▁", "hello"), ("▁", "world"), ("i", "t"),
                 ("'", "s")] + list(extra_merges):
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
        merges.append((a, b))
    return vocab, merges


def emit(name, t, texts=TEXTS, modes=((False, True), (True, True), (False, False)), anchor="a",
         json_text=None):
    out("T", name)
    out("J", json_text or json.dumps(json.loads(t.to_str()), ensure_ascii=False, separators=(",", ":")))
    for s in texts:
        raw = s if isinstance(s, bytes) else s.encode()
        text = raw.decode("utf-8", "replace")
        for add, parse in modes:
            t.encode_special_tokens = not parse
            ids = t.encode(text, add_special_tokens=add).ids
            out("E", int(add), int(parse), raw.hex() or "-", ",".join(map(str, ids)) or "-")
    t.encode_special_tokens = False
    a = t.token_to_id(anchor)
    for s in texts:
        if isinstance(s, bytes):
            continue
        ids = t.encode(s, add_special_tokens=False).ids
        if not ids or a is None:
            continue
        w = t.decode([a] + ids, skip_special_tokens=True)
        w0 = t.decode([a], skip_special_tokens=True)
        out("D", ",".join(map(str, ids)), w[len(w0):].encode().hex() or "-")


def added(t):
    t.add_special_tokens([AddedToken("<s>", special=True, normalized=False),
                          AddedToken("</s>", special=True, normalized=False, rstrip=True),
                          AddedToken("[SEP]", special=True, normalized=False, lstrip=True)])
    t.add_tokens([AddedToken("<mask>", single_word=True, lstrip=True),
                  AddedToken("hello,", normalized=True), AddedToken("zzz", normalized=False)])


def main():
    # 1. byte-level BPE (GPT-2 / SmolLM2 style), added tokens, template
    t = bpe_trained()
    added(t)
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
    emit("bytelevel", t, TEXTS + BAD_UTF8)
    # merges written as "a b" strings (the older serialization)
    j = json.loads(t.to_str())
    j["model"]["merges"] = [" ".join(m) for m in j["model"]["merges"]]
    emit("bytelevel-string-merges", t, TEXTS[:6],
         json_text=json.dumps(j, ensure_ascii=False, separators=(",", ":")))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    emit("bytelevel-prefix", t, TEXTS[:12])

    # 2. Llama-3 style: Split regex then ByteLevel without its regex; Roberta post
    t = bpe_trained()
    added(t)
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")))
    emit("split-llama3", t)

    # 3. Split behaviours (String and Regex, invert) on a character BPE
    vocab, merges = char_bpe()
    for beh in ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]:
        for pat, inv in [(" ", False), (Regex(r"[lo]+"), False), (Regex(r"\s+"), True)]:
            t = Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges)))
            t.pre_tokenizer = pre_tokenizers.Split(pat, beh, invert=inv)
            emit(f"split-{beh}-{'re' if isinstance(pat, Regex) else 'str'}-{int(inv)}", t,
                 TEXTS[:9], modes=((False, True),))

    # 4. SentencePiece style: byte fallback, unk, normalizers, Metaspace, decoders
    vocab, merges = char_bpe()
    for b in [0x0A, 0x20, 0xC3, 0xA9, 0xE2, 0x98, 0x83, 0x80, 0xFF]:
        vocab[f"<0x{b:02X}>"] = len(vocab)
    vocab["<unk>"] = len(vocab)
    for b in range(0x100):  # most bytes, but not 0xE6 / 0x97 (日's), so some fall back to unk
        if f"<0x{b:02X}>" not in vocab and b not in (0xE6, 0x97, 0x9C, 0x9F, 0xA5):
            vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in "日本語中文😀ïé—☃":
        vocab.pop(c, None)
    vocab = {k: i for i, k in enumerate(vocab)}
    sp_dec = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                decoders.Strip(" ", 1, 0)])
    for fuse in (True, False):
        t = Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges), byte_fallback=True,
                                 unk_token="<unk>", fuse_unk=fuse))
        added(t)
        t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        t.decoder = sp_dec
        t.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", t.token_to_id("<s>"))])
        emit(f"spm-llama2-fuse{int(fuse)}", t, TEXTS + BAD_UTF8)
    for scheme in ("first", "always", "never"):
        for split in (True, False):
            t = Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges), byte_fallback=True,
                                     unk_token="<unk>", fuse_unk=True))
            added(t)
            t.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
            t.decoder = decoders.Metaspace(prepend_scheme=scheme, split=split)
            emit(f"metaspace-{scheme}-{int(split)}", t, TEXTS[:13])
    t = Tokenizer(models.BPE(vocab=dict(vocab), merges=list(merges), byte_fallback=True))
    t.normalizer = normalizers.Sequence([normalizers.Replace(Regex(r"\s+"), " "), normalizers.Replace(" ", "▁")])
    t.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_previous")
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    emit("replace-regex-no-unk", t, TEXTS)

    # 5. model options: subword prefix / word suffix, ignore_merges, Bert post
    vocab, merges = char_bpe()
    v2 = dict(vocab)
    for k in list(vocab):
        if len(k) == 1:
            v2["##" + k] = len(v2)
            v2[k + "</w>"] = len(v2)
            v2["##" + k + "</w>"] = len(v2)
    v2["hello</w>"] = len(v2)
    v2["##ll"] = len(v2)
    v2["[CLS]"] = len(v2)
    v2["[SEP]"] = len(v2)
    t = Tokenizer(models.BPE(vocab=v2, merges=[("h", "##e"), ("l", "##l")], continuing_subword_prefix="##",
                             end_of_word_suffix="</w>"))
    t.pre_tokenizer = pre_tokenizers.Split(" ", "removed")
    t.post_processor = processors.BertProcessing(("[SEP]", v2["[SEP]"]), ("[CLS]", v2["[CLS]"]))
    emit("affixes-bert", t, TEXTS[:9], anchor="a</w>")
    vocab, merges = char_bpe()
    vocab["worldworld"] = len(vocab)
    t = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    t.pre_tokenizer = pre_tokenizers.Split(" ", "removed")
    t.post_processor = processors.Sequence([processors.ByteLevel(), processors.TemplateProcessing(
        single="[SEP] $A [SEP]", special_tokens=[("[SEP]", vocab["["])])])
    emit("ignore-merges-seqpost", t, TEXTS[:9], modes=((False, True), (True, True)))
    unicode_parts()
    errors()


UNI_TEXTS = TEXTS + ["ÉCOLE Straße İstanbul ΑΣ", "ﬁ ½ Ⅻ ｆｕｌｌ ①", "e\u0301 a\u0308 \u093e x\u20dd",
                     "\u3000 x\u200by\ue000z\u0001 中文字 ㄱ  ", "Don't do not 'm 've 're ...?!",
                     "3.14159 ٣٤ ²³ 12345", "tab\tnew\nline\r\nend", "hello!!! (world) [x] {y} $5 #tag @me"]


def unicode_parts():
    """Steps 3-4: Unicode normalizers, character-class pre-tokenizers,
    WordPiece and Unigram."""
    chars = sorted(set("".join(UNI_TEXTS + CORPUS)))
    wp_train = CORPUS + UNI_TEXTS * 3
    for name, norm in [("nfc", normalizers.NFC()), ("nfd", normalizers.NFD()), ("nfkc", normalizers.NFKC()),
                       ("nfkd", normalizers.NFKD()), ("lowercase", normalizers.Lowercase()),
                       ("strip", normalizers.Strip(left=True, right=False)),
                       ("stripaccents", normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()])),
                       ("bert", normalizers.BertNormalizer()),
                       ("bert-cased", normalizers.BertNormalizer(lowercase=False, strip_accents=None,
                                                                 handle_chinese_chars=False))]:
        t = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[], byte_fallback=False))
        t.normalizer = norm
        t.add_tokens([AddedToken("école", normalized=True)])
        emit("norm-" + name, t, UNI_TEXTS, modes=((False, True),))
    for name, pre in [("digits", pre_tokenizers.Digits(individual_digits=False)),
                      ("digits-individual", pre_tokenizers.Digits(individual_digits=True)),
                      ("punct", pre_tokenizers.Punctuation()),
                      ("punct-next", pre_tokenizers.Punctuation("merged_with_next")),
                      ("whitespace", pre_tokenizers.Whitespace()),
                      ("whitespacesplit", pre_tokenizers.WhitespaceSplit()),
                      ("bertpre", pre_tokenizers.BertPreTokenizer())]:
        t = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
        t.pre_tokenizer = pre
        emit("pre-" + name, t, UNI_TEXTS, modes=((False, True),))
    # WordPiece (BERT uncased style) with its decoder and post-processor
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=12))
    t.normalizer = normalizers.BertNormalizer()
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    t.train_from_iterator(wp_train, trainers.WordPieceTrainer(vocab_size=300, show_progress=False,
                          special_tokens=["[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")), ("[CLS]", t.token_to_id("[CLS]")))
    t.decoder = decoders.WordPiece()
    emit("wordpiece", t, UNI_TEXTS + ["supercalifragilistic word", "x\u2603y"])
    # Unigram, with and without byte fallback
    for bf in (False, True):
        t = Tokenizer(models.Unigram())
        t.normalizer = normalizers.NFKC()
        t.pre_tokenizer = pre_tokenizers.Metaspace()
        t.decoder = decoders.Metaspace()
        t.train_from_iterator(wp_train, trainers.UnigramTrainer(vocab_size=150, show_progress=False,
                              unk_token="<unk>", special_tokens=["<unk>", "<s>", "</s>"]))
        j = json.loads(t.to_str())
        if bf:
            j["model"]["byte_fallback"] = True
            for b in range(256):
                if b not in (0xE2, 0x98):  # so that some fall back to unk
                    j["model"]["vocab"].append([f"<0x{b:02X}>", -20.0])
        t = Tokenizer.from_str(json.dumps(j))
        emit(f"unigram-bf{int(bf)}", t, UNI_TEXTS + ["x\u2603y ☃☃ zzqq"], anchor="▁")
        if not bf:
            t.normalizer = normalizers.Sequence([normalizers.Precompiled(charsmap()),
                                                 normalizers.Replace(Regex(" {2,}"), " ")])
            emit("unigram-precompiled", t, UNI_TEXTS + PRECOMPILED_TEXTS, anchor="▁")


PRECOMPILED_TEXTS = ["ＡａＡａ ABCD abc", "e\u0301 e\u0301\u0301 caf\u00e9", "Ⅰ ﬁsh\u3000ﬁ", "ABC ABCABC AB"]


def charsmap():
    """A small SentencePiece charsmap (sentencepiece's trainer, custom
    rules): one-to-one, one-to-many, many-to-one and grapheme rules."""
    import io
    import os
    import tempfile
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb
    rules = "FF21\t41\nFF41\t61\n65 301\tE9\n2160\t49\nFB01\t66 69\n3000\t20\n41 42 43\t78\n"
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "rules.tsv")
        with open(path, "w") as f:
            f.write(rules)
        m = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["Hello world this is a test of the precompiled charsmap"] * 50),
                                       model_writer=m, vocab_size=20, model_type="unigram",
                                       normalization_rule_tsv=path, minloglevel=2)
    p = pb.ModelProto()
    p.ParseFromString(m.getvalue())
    return p.normalizer_spec.precompiled_charsmap


def errors():
    vocab, merges = char_bpe()
    base = {"version": "1.0", "added_tokens": [], "normalizer": None, "pre_tokenizer": None,
            "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "vocab": vocab, "merges": [list(m) for m in merges]}}

    def err(name, code, msg, mutate=None, text=None):
        j = json.loads(json.dumps(base))
        if mutate:
            mutate(j)
        out("T", name)
        out("J", text if text is not None else json.dumps(j, ensure_ascii=False, separators=(",", ":")))
        out("X", code, msg)

    def setp(path, value):
        def f(j):
            o = j
            for k in path[:-1]:
                o = o[k]
            o[path[-1]] = value
        return f
    err("bad-json", -3, "not valid JSON", text='{"model": {"type": "BPE", "vocab": {"a": 0}')
    err("merge-missing", -3, "merge 0 names 'q!'", setp(["model", "merges"], [["q!", "a"]]))
    err("merge-result-missing", -3, "which is not in the vocabulary", setp(["model", "merges"], [["a", "b"]]))
    err("merge-bad-string", -3, "two tokens separated by one space", setp(["model", "merges"], ["a b c"]))
    err("added-id-range", -3, "added token '<x>' has id 99999",
        setp(["added_tokens"], [{"id": 99999, "content": "<x>", "special": True}]))
    err("unk-missing", -3, "unk_token '<unk>' is not in the vocabulary", setp(["model", "unk_token"], "<unk>"))
    err("vocab-missing", -3, "model.vocab is missing", setp(["model", "vocab"], None))
    err("template-undefined", -3, "special token '<s>', which its special_tokens do not define",
        setp(["post_processor"], {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
             {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {}}))
    err("pre-unsupported", -4, "tokenizer.json: pre_tokenizer 'CharDelimiterSplit' is not supported",
        setp(["pre_tokenizer"], {"type": "CharDelimiterSplit", "delimiter": "x"}))
    err("model-unsupported", -4, "tokenizer.json: model 'WordLevel' is not supported", setp(["model", "type"], "WordLevel"))
    err("normalizer-unsupported", -4, "tokenizer.json: normalizer 'Nmt' is not supported",
        setp(["normalizer"], {"type": "Nmt"}))
    err("decoder-unsupported", -4, "tokenizer.json: decoder 'CTC' is not supported", setp(["decoder"], {"type": "CTC"}))
    err("post-unsupported", -4, "tokenizer.json: post_processor 'Foo' is not supported",
        setp(["post_processor"], {"type": "Foo"}))
    err("prepend-scheme", -4, "Metaspace prepend_scheme 'sometimes' is not supported",
        setp(["pre_tokenizer"], {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "sometimes"}))
    err("dropout", -4, "model.dropout (BPE-dropout, random) is not supported", setp(["model", "dropout"], 0.1))
    err("split-behavior", -4, "Split behavior 'Sideways' is not supported",
        setp(["pre_tokenizer"], {"type": "Split", "pattern": {"String": " "}, "behavior": "Sideways", "invert": False}))
    err("nul-token", -4, "a string with U+0000", setp(["model", "vocab", "x\0y"], 999))
    err("bad-regex", -4, "PCRE2 rejects it",
        setp(["pre_tokenizer"], {"type": "Split", "pattern": {"Regex": "(ab"}, "behavior": "Isolated", "invert": False}))


if __name__ == "__main__":
    main()
