#!/usr/bin/env python3
"""ferrox's tokenizer against Hugging Face `tokenizers` on tokenizer.json files.

    python3 tests/test_hf_tokenizer_oracle.py build/bin/tok_dump [--gguf] [NAME ...]

The vocabularies are the folders scripts/make-hf-tokenizers.py writes (17
converted from GGUF files by transformers, bert-bge built by us, a trained
WordPiece and a trained sentencepiece Unigram); they are generated into
<build>/hf-tokenizers on the first run (about a minute) and reused while
the script, its inputs and the package versions stay the same.

For each vocabulary, every string below is encoded by `tokenizers`
(Tokenizer.from_file(tokenizer.json)) and by ferrox (tests/tok_dump.c, one
process) with the four combinations of add_special and parse_special, and
the ids are compared exactly. Strings:
- llama.cpp's ggml-vocab-NAME.gguf.inp strings, where NAME has them;
- the inputs of tests/data/tokenizer/*.txt (scripts/make-tokenizer-refs.py's
  tricky strings), those that are valid UTF-8 (`tokenizers` takes str);
- 10,000 random strings from a fixed seed per vocabulary (random_strings).

Special tokens. `tokenizers` always adds the post-processor's tokens when
add_special_tokens is true (BOS, or [CLS] ... [SEP]: what tokenizer.json
says, which save_pretrained wrote from add_bos_token / add_eos_token), and
always matches added tokens in the text. The harness maps:
- add_special   -> encode(..., add_special_tokens=add_special);
- parse_special=1 -> the default: every added token is matched whole;
- parse_special=0 -> Tokenizer.encode_special_tokens = True: tokens marked
  "special" are tokenized as plain text, added tokens not marked special
  (llama.cpp's USER_DEFINED, e.g. <think>) are still matched, as llama.cpp
  matches them without parse_special.

Prints one line per vocabulary: "NAME: N of M equal (first difference:
...)". Asserted: every comparison of the vocabularies in EXPECTED_EQUAL;
that tok_dump answers every request of a vocabulary it loads; with --gguf,
the agreement floors in GGUF_FLOORS. The rest is reported only.

--gguf runs tok_dump on each vocabulary's source GGUF file instead of its
folder: ferrox's GGUF tokenizer (which follows llama.cpp) against
`tokenizers` on transformers' conversion of the same file. Differences
there are expected (the two conversions disagree in places); the mode
proves the plumbing, and its floors catch a broken harness.

Skips (77) without tokenizers / transformers / sentencepiece / protobuf or
without any source file, unless FX_REQUIRE_MODELS=1 (then the packages
and the two default models in $FX_MODELS_DIR are required, and llama.cpp's
vocabularies too when FX_LLAMA_VOCAB_DIR is set, as scripts/test.sh sets
it; otherwise they are used where found, see make-hf-tokenizers.py).
"""
import importlib.util
import os
import random
import runpy
import subprocess
import sys
import time
import types
import zlib

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
# under ASan (FX_SANITIZE_RUN=1, ~10x slower) fewer random strings
N_RANDOM = 500 if os.environ.get("FX_SANITIZE_RUN") == "1" else 10000

# Vocabularies whose tokenizer.json ferrox must match on every string:
# all of them (measured 2026-12-04: 19 of 19, 40,200-40,400 comparisons
# each).
EXPECTED_EQUAL = ["bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
                  "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder",
                  "smollm2-135m", "gemma-3-270m", "wordpiece-trained", "unigram-trained"]

# --gguf: the least share of equal comparisons per vocabulary: measured on
# 2026-12-04 (ferrox 7fe5f70's GGUF tokenizer, tokenizers 0.23.3,
# transformers 5.23.0; in the comment), less about 0.02. Where the two
# disagree it is mostly the conversion's doing: transformers gives
# byte-level vocabularies whose pre-tokenizer it does not know GPT-2's
# split (deepseek-*, mpt, falcon, starcoder, refact, smollm, command-r),
# omits llama-bpe's ignore_merges, and prefixes SentencePiece text with
# Metaspace's rules rather than llama.cpp's. ferrox refuses bert-bge,
# gemma-4 and qwen35 (no floor). A floor under the measured share catches
# a harness or a GGUF tokenizer that broke, not conversion differences.
GGUF_FLOORS = {
    "gpt-2": 0.995,           # 40384 of 40384
    "qwen2": 0.995,           # 40384 of 40384
    "gemma-3-270m": 0.995,    # 40192 of 40200
    "refact": 0.94,           # 38696 of 40384
    "starcoder": 0.94,        # 38648 of 40384
    "falcon": 0.93,           # 38344 of 40384
    "smollm2-135m": 0.93,     # 38068 of 40200
    "command-r": 0.92,        # 38084 of 40384
    "phi-3": 0.88,            # 36578 of 40384
    "llama-spm": 0.77,        # 31902 of 40384
    "mpt": 0.73,              # 30238 of 40384
    "llama-bpe": 0.47,        # 20022 of 40384
    "deepseek-coder": 0.44,   # 18810 of 40384
    "deepseek-llm": 0.44,     # 18621 of 40384
}


def skip(msg):
    print("SKIP: " + msg)
    sys.exit(1 if REQUIRE else 77)


def load_maker():
    """scripts/make-hf-tokenizers.py as a namespace (its name is no module name)."""
    return types.SimpleNamespace(**runpy.run_path(os.path.join(ROOT, "scripts", "make-hf-tokenizers.py")))


# ---- strings ------------------------------------------------------------------------------------

def inp_strings(mk, name):
    """llama.cpp's .inp strings for this vocabulary (tests/test-tokenizer-0.cpp's split)."""
    vd = mk.llama_vocab_dir()
    path = os.path.join(vd, "ggml-vocab-%s.gguf.inp" % name) if vd else None
    if not path or not os.path.isfile(path):
        return []
    with open(path, "rb") as f:
        raw = f.read()
    sep, out, pos = b"\n__ggml_vocab_test__\n", [], 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            out.append(raw[pos:])
            break
        out.append(raw[pos:nxt])
        pos = nxt + len(sep)
    return [s.decode("utf-8") for s in out]


def tricky_strings():
    """The distinct valid-UTF-8 inputs of tests/data/tokenizer/*.txt."""
    seen, out = set(), []
    d = os.path.join(ROOT, "tests", "data", "tokenizer")
    for fn in sorted(os.listdir(d)):
        with open(os.path.join(d, fn)) as f:
            for line in f:
                if not line.startswith("C "):
                    continue
                hx = line.split(" ")[1]
                b = b"" if hx == "-" else bytes.fromhex(hx)
                if b in seen:
                    continue
                seen.add(b)
                try:
                    out.append(b.decode("utf-8"))
                except UnicodeDecodeError:
                    pass
    return out


LETTERS = [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x531, 0x587),
           (0x5D0, 0x5EA), (0x620, 0x64A), (0x905, 0x939), (0x985, 0x9B9), (0xE01, 0xE30), (0x10A0, 0x10FF),
           (0x1100, 0x1112), (0x3041, 0x3096), (0x30A1, 0x30FA), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
           (0xFF21, 0xFF5A), (0x10330, 0x1034A), (0x1D400, 0x1D6A5), (0x20000, 0x2A6DF)]
MARKS = [(0x300, 0x36F), (0x93E, 0x94D), (0x64B, 0x65F), (0xE31, 0xE3A), (0x1AB0, 0x1ABE)]
DIGITS = [(0x30, 0x39), (0x30, 0x39), (0x660, 0x669), (0x966, 0x96F), (0xFF10, 0xFF19), (0x2460, 0x2473),
          (0x2070, 0x2079), (0x1D7CE, 0x1D7FF)]
EMOJI = [(0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F900, 0x1F9FF), (0x2600, 0x26FF)]
SYMBOLS = list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + list("…—–«»“”‘’€£¥©®™°±×÷∑∫√∞≈≠≤≥←→↑↓•·¡¿§¶")
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u200b",
          "\u2028", "\x0b", "\x0c", "\u0085", "\u1680"]
WORDS = ["the", "Hello", "world", "don't", "it's", "I'M", "we'll", "they've", "'s", "x", "A", "http://a.b/c?d=1",
         "def", "return", "<div>", "</p>", "user@example.org", "3.14", "1,000", "0x1F", "___", "...", "==="]


class Gen:
    """Random strings for one vocabulary (see random_strings)."""

    def __init__(self, seed, specials, pieces):
        self.rng = random.Random(seed)
        self.specials, self.pieces = specials, pieces

    def pick(self, seq):
        return seq[int(self.rng.random() * len(seq))]

    def char(self, ranges):
        lo, hi = self.pick(ranges)
        return chr(lo + int(self.rng.random() * (hi - lo + 1)))

    def emoji(self):
        r = self.rng.random()
        if r < 0.15:  # a flag: two regional indicators
            return chr(0x1F1E6 + int(self.rng.random() * 26)) + chr(0x1F1E6 + int(self.rng.random() * 26))
        parts = []
        for _ in range(1 + int(self.rng.random() ** 2 * 4)):
            e = self.char(EMOJI)
            if self.rng.random() < 0.3:
                e += chr(0x1F3FB + int(self.rng.random() * 5))  # skin tone
            if self.rng.random() < 0.3:
                e += "\ufe0f"                                    # variation selector 16
            parts.append(e)
        return "\u200d".join(parts)                              # ZWJ sequence

    def segment(self):
        r, g = self.rng.random(), self.rng
        if r < 0.22:
            s = "".join(self.char(LETTERS[:1] + LETTERS) for _ in range(1 + int(g.random() * 8)))
            if g.random() < 0.3:
                s += "".join(self.char(MARKS) for _ in range(1 + int(g.random() * 3)))
            return s
        if r < 0.30:
            return "".join(self.char(DIGITS) for _ in range(1 + int(g.random() * 12)))
        if r < 0.38:
            return self.emoji()
        if r < 0.50:
            return "".join(self.pick(SPACES) for _ in range(1 + int(g.random() * 6)))
        if r < 0.58:
            return "".join(self.pick(SYMBOLS) for _ in range(1 + int(g.random() * 4)))
        if r < 0.68:
            return self.pick(WORDS)
        if r < 0.78 and self.specials:
            return self.pick(self.specials)
        if self.pieces:
            return self.pieces(self.rng)
        return self.pick(WORDS)

    def string(self):
        n = 1 + int(self.rng.random() * 10)
        out = []
        for _ in range(n):
            out.append(self.segment())
            if self.rng.random() < 0.35:
                out.append(" ")
        return "".join(out)


def random_strings(name, tok, n):
    """n strings from a seed fixed per vocabulary: letters of many scripts
    and planes with combining marks, digits of several systems, emoji (ZWJ
    sequences, skin tones, VS16, flags), whitespace runs (tabs, newlines,
    \\r\\n, NBSP, ideographic space, ...), symbols, the vocabulary's added
    token texts anywhere in the string, and runs of 1-4 vocabulary tokens
    decoded to text, glued to their neighbours."""
    added = tok.get_added_tokens_decoder()
    specials = sorted(t.content for t in added.values())
    size = tok.get_vocab_size(with_added_tokens=False)

    def pieces(rng):
        ids = []
        while len(ids) < 1 + int(rng.random() * 4):
            i = int(rng.random() * size)
            if i not in added:
                ids.append(i)
        return tok.decode(ids, skip_special_tokens=True)

    g = Gen(20261204 + zlib.crc32(name.encode()), specials, pieces)
    return [g.string() for _ in range(n)]


# ---- the two encoders --------------------------------------------------------------------------

COMBOS = [(add, parse) for add in (0, 1) for parse in (1, 0)]


def hf_encode(tok, texts):
    """{(add, parse): [ids per text]} by `tokenizers` (mapping in the docstring)."""
    out = {}
    for add, parse in COMBOS:
        tok.encode_special_tokens = not parse
        out[(add, parse)] = [e.ids for e in tok.encode_batch(texts, add_special_tokens=bool(add))]
    tok.encode_special_tokens = False
    return out


def ferrox_encode(tok_dump, target, texts):
    """{(add, parse): [ids or 'ERR ...' per text]} by tok_dump, or a load error string."""
    reqs = []
    for add, parse in COMBOS:
        for t in texts:
            b = t.encode("utf-8")
            reqs.append("%s %d %d\n" % (b.hex() if b else "-", add, parse))
    p = subprocess.run([tok_dump, target], input="".join(reqs).encode(), capture_output=True)
    if p.returncode != 0:
        return "tok_dump exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip())
    lines = p.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(reqs), "%s: tok_dump answered %d of %d requests" % (target, len(lines), len(reqs))
    out, k = {}, 0
    for combo in COMBOS:
        row = []
        for _ in texts:
            ln = lines[k]
            k += 1
            row.append(ln if ln.startswith("ERR") else [int(x) for x in ln.split(",")] if ln else [])
        out[combo] = row
    return out


def compare(texts, hf, fx):
    """(equal, total, first difference or None)."""
    total = len(texts) * len(COMBOS)
    if isinstance(fx, str):
        return 0, total, fx
    equal, first = 0, None
    for combo in COMBOS:
        for t, a, b in zip(texts, hf[combo], fx[combo]):
            if a == b:
                equal += 1
            elif first is None:
                first = "%r add=%d parse=%d: tokenizers %s, ferrox %s" % (
                    t[:80], combo[0], combo[1], a[:16], b[:16] if isinstance(b, list) else b)
    return equal, total, first


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    tok_dump, gguf_mode = args[0], "--gguf" in args
    only = [a for a in args[1:] if a != "--gguf"]
    if not os.access(tok_dump, os.X_OK):
        sys.exit("%s: not an executable" % tok_dump)
    for mod in ("tokenizers", "transformers", "sentencepiece", "google.protobuf"):
        if importlib.util.find_spec(mod.split(".")[0]) is None or importlib.util.find_spec(mod) is None:
            skip("python package %s missing (scripts/install-deps.sh installs it)" % mod)
    from tokenizers import Tokenizer

    mk = load_maker()
    if REQUIRE:
        models = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
        for _, f in mk.MODELS:
            if not os.path.isfile(os.path.join(models, f)):
                sys.exit("FX_REQUIRE_MODELS=1 but %s is missing from %s" % (f, models))
    wanted = only or [n for n, _ in mk.gguf_sources()] + mk.TRAINED
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(tok_dump))), "hf-tokenizers")
    vocabs = mk.ensure(out, wanted)
    if REQUIRE and os.environ.get("FX_LLAMA_VOCAB_DIR"):
        missing = sorted(set(wanted) - {v[0] for v in vocabs})
        if missing:
            sys.exit("FX_REQUIRE_MODELS=1 and FX_LLAMA_VOCAB_DIR is set, but these are missing: "
                     + " ".join(missing))
    if gguf_mode:
        vocabs = [v for v in vocabs if v[2]]
    if not vocabs:
        skip("no vocabulary source found")
    tricky = tricky_strings()
    failures = []
    for name, folder, src in vocabs:
        t0 = time.monotonic()
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        texts = inp_strings(mk, name) + tricky + random_strings(name, tok, N_RANDOM)
        fx = ferrox_encode(tok_dump, src if gguf_mode else folder, texts)
        hf = hf_encode(tok, texts) if not isinstance(fx, str) else None
        equal, total, first = compare(texts, hf, fx)
        print("%s: %d of %d equal%s [%.1f s]" % (name, equal, total,
              " (first difference: %s)" % first if first else "", time.monotonic() - t0), flush=True)
        if not gguf_mode and name in EXPECTED_EQUAL and equal != total:
            failures.append("%s: expected all %d equal, %d differ" % (name, total, total - equal))
        floor = GGUF_FLOORS.get(name) if gguf_mode else None
        if floor is not None and equal < floor * total:
            failures.append("%s: %d of %d equal, below the floor %.3f" % (name, equal, total, floor))
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
