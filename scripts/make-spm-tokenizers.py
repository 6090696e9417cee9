#!/usr/bin/env python3
"""Write SentencePiece tokenizer folders (tokenizer.model, no tokenizer.json)
for tests/test_hf_spm_oracle.py (src/tokenizer/hf_spm.c).

    python3 scripts/make-spm-tokenizers.py --trained OUTDIR   # the committed fixtures
    python3 scripts/make-spm-tokenizers.py --gemma GGUF OUTDIR
    python3 scripts/make-spm-tokenizers.py --llama GGUF OUTDIR

--trained writes two models trained by sentencepiece on make-hf-tokenizers.py's
corpus_text (fixed seeds, one thread), committed under tests/fixtures/spm:
- llama-bpe/tokenizer.model: BPE, 3,000 pieces, byte fallback, split digits,
  identity normalization, add_dummy_prefix, as Llama's tokenizer.model;
  user-defined <think> </think>, control <mask>; unk 0, bos 1, eos 2.
- unigram-nfkc/tokenizer.model: Unigram, 3,000 pieces, nmt_nfkc
  normalization (a real Precompiled charsmap), no byte fallback, a
  user-defined <sep>; pad 0, eos 1, unk 2 (T5's layout), no bos.
--gemma writes OUTDIR/tokenizer.model from a Gemma GGUF's vocabulary
(tokenizer.ggml.tokens / scores / token_type -> ModelProto pieces; BPE,
byte fallback, unk 3, bos 2, eos 1, pad 0, identity normalization without
the dummy prefix, as Gemma's own tokenizer.model), about 4 MB, so it is
made at test time from the model and not committed.
--llama does the same for llama.cpp's ggml-vocab-llama-spm.gguf (Llama's
32,000 pieces: unk 0, bos 1, eos 2, add_dummy_prefix, as Llama's own
tokenizer.model), from the llama-cpp-python sdist
(scripts/get-llama-sdist.sh) when present.

The tokenizer_config.json variants around these models are written by the
test itself.
"""
import os
import runpy
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_SIZE = 3000


def corpus(path, seed):
    mk = runpy.run_path(os.path.join(ROOT, "scripts", "make-hf-tokenizers.py"))
    with open(path, "w", encoding="utf-8") as f:
        f.write(mk["corpus_text"](seed=seed, n_bytes=1 << 19))


def train(outdir):
    import sentencepiece as spm

    for name, kw in [
        ("llama-bpe", dict(model_type="bpe", byte_fallback=True, split_digits=True,
                           normalization_rule_name="identity", add_dummy_prefix=True,
                           remove_extra_whitespaces=False, allow_whitespace_only_pieces=True,
                           user_defined_symbols=["<think>", "</think>"], control_symbols=["<mask>"],
                           unk_id=0, bos_id=1, eos_id=2, pad_id=-1)),
        ("unigram-nfkc", dict(model_type="unigram", normalization_rule_name="nmt_nfkc",
                              user_defined_symbols=["<sep>"], pad_id=0, eos_id=1, unk_id=2, bos_id=-1)),
    ]:
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        text = os.path.join(d, "corpus.txt")
        corpus(text, seed=3)
        spm.set_random_generator_seed(3)
        prefix = os.path.join(d, "spm")
        spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=VOCAB_SIZE,
                                       character_coverage=0.9995, num_threads=1, minloglevel=2, **kw)
        os.replace(prefix + ".model", os.path.join(d, "tokenizer.model"))
        os.remove(prefix + ".vocab")
        os.remove(text)
        print("%s: %d bytes" % (name, os.path.getsize(os.path.join(d, "tokenizer.model"))))


def gguf_vocab(path):
    import gguf

    r = gguf.GGUFReader(path)

    def arr(key, conv):
        f = r.fields[key]
        return [conv(f.parts[i]) for i in f.data]

    toks = arr("tokenizer.ggml.tokens", lambda p: bytes(p).decode("utf-8"))
    scores = arr("tokenizer.ggml.scores", lambda p: float(p[0]))
    types = arr("tokenizer.ggml.token_type", lambda p: int(p[0]))
    return toks, scores, types


def from_gguf(gguf_path, outdir, unk, bos, eos, pad, names, add_dummy_prefix):
    """OUTDIR/tokenizer.model from a SentencePiece-style GGUF vocabulary:
    pieces, scores and types as the GGUF has them (piece unk made UNKNOWN),
    BPE, byte fallback, identity normalization."""
    from sentencepiece import sentencepiece_model_pb2 as pb

    toks, scores, types = gguf_vocab(gguf_path)
    m = pb.ModelProto()
    for i, (t, s, ty) in enumerate(zip(toks, scores, types)):
        p = m.pieces.add()
        p.piece, p.score = t, s
        # llama.cpp's converter marks Gemma's <unk> CONTROL; sentencepiece needs one UNKNOWN
        p.type = pb.ModelProto.SentencePiece.UNKNOWN if i == unk else ty
    ts = m.trainer_spec
    ts.model_type = pb.TrainerSpec.BPE
    ts.vocab_size = len(toks)
    ts.byte_fallback = True
    ts.split_digits = True
    ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id = unk, bos, eos, pad
    ts.unk_piece, ts.bos_piece, ts.eos_piece, ts.pad_piece = names
    ns = m.normalizer_spec
    ns.name = "identity"
    ns.add_dummy_prefix = add_dummy_prefix
    ns.remove_extra_whitespaces = False
    ns.escape_whitespaces = True
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "tokenizer.model"), "wb") as f:
        f.write(m.SerializeToString())


def gemma(gguf_path, outdir):
    from_gguf(gguf_path, outdir, 3, 2, 1, 0, ("<unk>", "<bos>", "<eos>", "<pad>"), False)


def llama(gguf_path, outdir):
    from_gguf(gguf_path, outdir, 0, 1, 2, -1, ("<unk>", "<s>", "</s>", "<pad>"), True)


def main():
    a = sys.argv[1:]
    if len(a) == 2 and a[0] == "--trained":
        train(a[1])
    elif len(a) == 3 and a[0] == "--gemma":
        gemma(a[1], a[2])
    elif len(a) == 3 and a[0] == "--llama":
        llama(a[1], a[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
