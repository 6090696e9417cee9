#!/usr/bin/env python3
"""Write the tokenizer parity references in tests/data/tokenizer/.

llama.cpp (through llama-cpp-python) is the oracle: for each model this
script tokenizes a fixed list of tricky strings with every combination of
add_bos / special (for the extra pre-tokenizer files: add_bos off), and records the ids, the detokenized bytes, the bytes a
streaming UTF-8 decoder should print, a sample of token_to_piece results
and the BOS/EOS/EOG facts. tests/test_tokenizer.c reads the files back.

Run (from the repository root, models fetched by scripts/get-model.sh):

    python -m venv /tmp/venv && /tmp/venv/bin/pip install llama-cpp-python gguf
    /tmp/venv/bin/python scripts/make-tokenizer-refs.py [models-dir]

The files in git were made with llama-cpp-python 0.3.36 (vendored llama.cpp
commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f); the version used is
written into each file's header.

File format, one record per line, fields separated by one space; "-"
stands for an empty field; byte strings are lowercase hex:
    # comment
    M <key> <value>                    facts: n_vocab, bos, eos, add_bos, eog
                                       (eog: comma-separated ids)
    C <input> <add_bos> <special> <ids> <detok> <stream>
        input   the text's bytes
        ids     comma-separated token ids llama_tokenize gives
        detok   concatenated llama_token_to_piece(id, special=False)
        stream  detok as a UTF-8 stream prints it: bytes.decode("utf-8",
                "replace") re-encoded (U+FFFD per maximal ill-formed part)
    P <id> <piece special=False> <piece special=True>
"""
import ctypes
import os
import sys
import tempfile

import llama_cpp

MODELS = [
    ("gemma-3-270m-q4_k_m.gguf", "gemma-3-270m.txt"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m.txt"),
]

# Other pre-tokenizers, checked with SmolLM2's vocabulary and merges under a
# different tokenizer.ggml.pre (the test rewrites that key the same way).
PRE_VARIANTS = [
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "llama-bpe", "smollm2-135m-pre-llama-bpe.txt"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "qwen2", "smollm2-135m-pre-qwen2.txt"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "default", "smollm2-135m-pre-default.txt"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "deepseek-llm", "smollm2-135m-pre-deepseek-llm.txt"),
]

LONG_PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog. Meanwhile, in a galaxy far, far "
    "away, 42 droids (and 7 wookiees) debated whether tabs\tor spaces were better; "
    "nobody won. \"It's complicated,\" said the captain -- who'd seen it all -- "
    "before pressing the big red button labelled DO-NOT-PRESS. Results: 3.5% "
    "improvement, 12,345 errors, and one very confused hamster named Mr. Whiskers."
)

CASES = [
    b"",
    b"Hello world",
    b" Hello world",
    b"  leading two spaces",
    b"trailing spaces   ",
    b"a  b   c    d     e",
    b"\t\ttabs\tand\t \t mixed",
    b"line1\nline2\n\nline4\n\n\n",
    b"windows\r\nline\r\n\r\nend\r",
    b"\n",
    b" ",
    b"    ",
    b"1234567890 12 123 1234 31415926535897932384626433",
    b"3.14159, -42, +7, 1e10, 0x1F, 1,000,000",
    b"Hello, world! How's it going? I'm fine; you'll see: they've, we'd, she's.",
    b"HOW'S IT GOING? I'M FINE. YOU'LL SEE. 'S 'T 'Re 'vE",
    b"!!!???...,,,;;;:::---___***@@@###$$$%%%^^^&&&",
    b"(parens) [brackets] {braces} <angles> \"quotes\" 'single' `tick`",
    "😀 😃🎉 👍🏽 👨‍👩‍👧‍👦 🇫🇷".encode(),
    "你好，世界！这是一个测试。".encode(),
    "こんにちは世界、カタカナとひらがな".encode(),
    "안녕하세요 세계".encode(),
    "مرحبا بالعالم، كيف حالك؟".encode(),
    "Привет мир שלום עולם".encode(),
    "e\u0301 a\u0300 n\u0303 café naïve Zoë coöperate".encode(),
    "नमस्ते दुनिया".encode(),
    "สวัสดีชาวโลก".encode(),
    "∑∫√π≈≠ α β γ δ ∞ ≤ ≥".encode(),
    "١٢٣ ٤٥٦ ①②③ Ⅳ ½ ²³".encode(),
    "a\u00a0b\u2003c\u3000d\u2028e\u0085f\u1680g".encode(),
    "zero\u200bwidth\u200djoiner\ufeffbom".encode(),
    "<0x41> \u2581 literal byte-token text and \u2581\u2581 marks".encode(),
    b"abc\xff\xfedef",
    b"x\xe4\xb8",
    b"\x80\x81 abc",
    b"\xc0\xaf \xe0\x80\xaf overlong",
    b"\xed\xa0\x80z surrogate",
    b"a" * 300,
    b"supercalifragilisticexpialidocious" * 10,
    b"9" * 100,
    b"nul\x00byte",
    b"\x01\x02\x1b[31mred\x1b[0m\x7f",
    b"def f(x):\n    return x**2  # comment\n\tif x:\n\t\tpass\n",
    b'{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    b"https://example.com/path?q=1&r=2#frag user@example.org",
    b"<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    b"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    b"<bos><eos><pad><unk><mask>",
    b"<|endoftext|>text<|endoftext|>",
    b"[multimodal] <start_of_image> <unused0> <end_of_image>",
    b"<div><p>text</p><br/><table><tr><td>x</td></tr></table></div>",
    b"\n" * 10 + b"x" + b"\t" * 40 + b"y" + b" " * 40 + b"z",
    b"<start_of_turn <|im_start <<start_of_turn>> <|im_end|>>",
    b"   <start_of_turn>   spaced   <end_of_turn>   ",
    LONG_PARAGRAPH.encode(),
]


def piece(vocab, tok, special):
    buf = ctypes.create_string_buffer(4096)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, len(buf), 0, special)
    assert 0 <= n <= len(buf), (tok, n)
    return buf.raw[:n]


def hx(b):
    return b.hex() if b else "-"


def with_pre(src, dst, pre):
    """Copy src's metadata (no tensors) to dst with tokenizer.ggml.pre = pre."""
    import gguf  # the gguf package from PyPI (llama.cpp's gguf-py)

    r = gguf.GGUFReader(src)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
    w = gguf.GGUFWriter(dst, arch)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        t = f.types[0]
        if name == "tokenizer.ggml.pre":
            w.add_string(name, pre)
        elif t == gguf.GGUFValueType.ARRAY:
            st = f.types[1]
            if st == gguf.GGUFValueType.STRING:
                val = [bytes(f.parts[i]) for i in f.data]
            else:
                val = [f.parts[i].tolist()[0] for i in f.data]
            w.add_key_value(name, val, t, sub_type=st)
        elif t == gguf.GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[-1]).decode("utf-8", "replace"), t)
        else:
            w.add_key_value(name, f.parts[-1].tolist()[0], t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_model(path, label, out_name, combos, with_pieces):
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llm._model.vocab
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    lines = [
        "# tokenizer references for %s, written by scripts/make-tokenizer-refs.py" % label,
        "# llama-cpp-python %s, llama_version() = %s"
        % (llama_cpp.__version__, llama_cpp.llama_version().decode()),
        "M n_vocab %d" % n_vocab,
        "M bos %d" % llama_cpp.llama_vocab_bos(vocab),
        "M eos %d" % llama_cpp.llama_vocab_eos(vocab),
        "M add_bos %d" % int(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "M eog %s" % ",".join(str(t) for t in range(n_vocab)
                              if llama_cpp.llama_vocab_is_eog(vocab, t)),
    ]
    for text in CASES:
        for add_bos, special in combos:
            ids = llm.tokenize(text, add_bos=add_bos, special=special)
            detok = b"".join(piece(vocab, t, False) for t in ids)
            stream = detok.decode("utf-8", "replace").encode("utf-8")
            lines.append("C %s %d %d %s %s %s" % (
                hx(text), add_bos, special,
                ",".join(map(str, ids)) if ids else "-", hx(detok), hx(stream)))
    sample = []
    if with_pieces:
        sample = sorted(set(list(range(min(n_vocab, 1024))) + list(range(0, n_vocab, 97))))
    for t in sample:
        lines.append("P %d %s %s" % (t, hx(piece(vocab, t, False)), hx(piece(vocab, t, True))))
    out = os.path.join("tests", "data", "tokenizer", out_name)
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("%s: %d cases, %d pieces" % (out, len(CASES) * len(combos), len(sample)))


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FX_MODELS_DIR", "models")
    os.makedirs(os.path.join("tests", "data", "tokenizer"), exist_ok=True)
    all_combos = [(a, s) for a in (False, True) for s in (False, True)]
    for gguf, out_name in MODELS:
        write_model(os.path.join(models_dir, gguf), gguf, out_name, all_combos, True)
    with tempfile.TemporaryDirectory() as tmp:
        for gguf, pre, out_name in PRE_VARIANTS:
            path = os.path.join(tmp, "pre.gguf")
            with_pre(os.path.join(models_dir, gguf), path, pre)
            write_model(path, "%s with tokenizer.ggml.pre = %s" % (gguf, pre), out_name,
                        [(False, False), (False, True)], False)


if __name__ == "__main__":
    main()
