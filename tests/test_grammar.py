#!/usr/bin/env python3
"""GBNF acceptance against an independent implementation (llguidance).

For each grammar in tests/data/grammars: strings sampled from ferrox's
matcher (`ferrox grammar --sample`) and one-edit mutations of them (a
character inserted, deleted or replaced), at least 1,000 in all; ferrox
(`ferrox grammar --check`) and llguidance (its GBNF front end, over a
byte-level tokenizer) must agree on every one, and at least 40% must be
accepted. Then bad grammars: each is an error naming line and column.

usage: test_grammar.py FERROX_BINARY
Skips (77) when llguidance is missing, unless FX_REQUIRE_MODELS=1.
"""
import glob
import json
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_SAMPLE = 500       # sampled sentences per grammar (before dedupe)
N_STRINGS = 1000     # strings checked per grammar, at least
EXTRA = "aZ09 ,.;:-_\"\\{}[]()\n\té«α一😀"

try:
    import llguidance
except ImportError:
    if os.environ.get("FX_REQUIRE_MODELS") == "1":
        raise
    print("skip: llguidance is not installed (pip install llguidance)")
    sys.exit(77)


class ByteTokenizer:
    """256 one-byte tokens and an EOS: llguidance then matches bytes."""
    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"<eos>"]
    special_token_ids = [256]

    def __call__(self, s):
        return list(s)


TOK = llguidance.LLTokenizer(llguidance.TokenizerWrapper(ByteTokenizer()), slices=[])


def oracle_accepts(grammar, s):
    m = llguidance.LLMatcher(TOK, grammar, log_level=0)
    for b in s.encode("utf-8"):
        if not m.consume_token(b):
            return False
    return m.is_accepting()


def oracle_text(text):
    """The grammar as llguidance's GBNF front end reads it the way llama.cpp
    does: its converter turns \\u00e9 into an invalid "\\ue9" (so escapes
    are written out as the characters), and its `.` is a regex dot without
    newline, where llama.cpp's matches any code point."""
    text = re.sub(r'(?<![\\"\[])\.(?=\{)', lambda m: r"[\x00-\U0010FFFF]", text)
    return re.sub(r"\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})",
                  lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def mutate(s, rng, alphabet):
    """One edit: insert, delete or replace one character."""
    op = rng.randrange(3)
    i = rng.randrange(len(s) + (op == 0)) if s or op == 0 else 0
    c = rng.choice(alphabet)
    if op == 0:
        return s[:i] + c + s[i:]
    if not s:
        return c
    if op == 1:
        return s[:i] + s[i + 1:]
    return s[:i] + c + s[i + 1:]


def check_grammar(ferrox, path, seed):
    text = open(path, encoding="utf-8").read()
    r = run([ferrox, "grammar", "--grammar-file", path, "--sample", str(N_SAMPLE),
             "--seed", str(seed), "--max-bytes", "400"])
    if r.returncode:
        return [f"{path}: ferrox grammar --sample failed: {r.stderr.strip()}"], None
    samples = list(dict.fromkeys(json.loads(l) for l in r.stdout.split("\n") if l))
    rng = random.Random(seed)
    alphabet = sorted(set("".join(samples)) | set(EXTRA))
    strings = list(samples)
    while len(strings) < max(N_STRINGS, 2 * len(samples)):
        strings.append(mutate(rng.choice(samples), rng, alphabet))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
        check = f.name
    r = run([ferrox, "grammar", "--grammar-file", path, "--check", check])
    os.unlink(check)
    if r.returncode:
        return [f"{path}: ferrox grammar --check failed: {r.stderr.strip()}"], None
    ours = [l == "1" for l in r.stdout.split()]
    grammar = llguidance.grammar_from("gbnf", oracle_text(text))
    err = llguidance.LLMatcher.validate_grammar(grammar, TOK)
    if err:
        return [f"{path}: llguidance refuses the grammar: {err}"], None
    theirs = [oracle_accepts(grammar, s) for s in strings]
    bad = [f"{os.path.basename(path)}: {json.dumps(s)}: ferrox {'accepts' if a else 'rejects'}, llguidance {'accepts' if b else 'rejects'}"
           for s, a, b in zip(strings, ours, theirs) if a != b]
    n_acc = sum(theirs)
    if n_acc < 0.4 * len(strings):
        bad.append(f"{path}: only {n_acc} of {len(strings)} accepted (want >= 40%)")
    if any(not ours[i] for i in range(len(samples))):
        bad.append(f"{path}: ferrox rejects a string it sampled")
    return bad, (len(strings), n_acc, len(samples))


BAD_GRAMMARS = [
    ('root ::= "abc', "line 1, column 10: unterminated string literal"),
    ('root ::= [a-', "line 1, column 10: unterminated character class"),
    ('root ::= (\n "a" | "b"\n', "line 1, column 10: expected ) to close this group"),
    ('root ::= foo', "line 1: undefined rule 'foo'"),
    ('root ::= "a"{3,1}', "line 1, column 13: repetition {3,1} has max below min"),
    ('root ::= "a"{20000}', "repetition bound over 10000"),
    ('root ::= root "a" | "b"', "rule 'root' is left-recursive"),
    ('root ::= x\nx ::= "y"? root', "left-recursive"),
    ('root ::= "a"\nroot ::= "b"', "line 2, column 1: rule 'root' is defined twice"),
    ('a ::= "x"', "no rule named 'root'"),
    ('root ::= "\\q"', "line 1, column 11: unknown escape"),
    ('root = "a"', "line 1, column 6: expected ::= after rule name 'root'"),
    ('root ::= * "a"', "line 1, column 10: '*' follows nothing"),
    ('root ::= [z-a]', "line 1, column 10: character range"),
    ('root ::= "\\uD800"', "not a Unicode scalar value"),
]


def check_bad(ferrox):
    bad = []
    for text, want in BAD_GRAMMARS:
        r = run([ferrox, "grammar", "--grammar", text, "--check", os.devnull])
        if r.returncode == 0 or want not in r.stderr:
            bad.append(f"bad grammar {text!r}: exit {r.returncode}, stderr {r.stderr.strip()!r}, want {want!r}")
    return bad


def main():
    ferrox = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/bin/ferrox")
    failures, total, total_acc = [], 0, 0
    paths = sorted(glob.glob(os.path.join(ROOT, "tests/data/grammars/*.gbnf")))
    if len(paths) < 12:
        failures.append(f"want at least 12 grammars, found {len(paths)}")
    for k, path in enumerate(paths):
        bad, fig = check_grammar(ferrox, path, 1000 + k)
        failures += bad
        if fig:
            n, acc, ns = fig
            total += n
            total_acc += acc
            print(f"{os.path.basename(path):16s} {n:5d} strings, {acc:5d} accepted ({100 * acc / n:.0f}%), "
                  f"{ns} sampled, {len(bad)} disagreements")
    failures += check_bad(ferrox)
    for f in failures[:400]:
        print("FAIL:", f)
    n_pass = len(paths) + len(BAD_GRAMMARS) - len(failures)
    print(f"grammar: {total} strings over {len(paths)} grammars, {total_acc} accepted by llguidance")
    print(f"{max(n_pass, 0)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
