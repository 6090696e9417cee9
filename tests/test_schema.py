#!/usr/bin/env python3
"""JSON Schema and regex to GBNF against independent implementations.

For each tests/data/schemas/*.json ({"schema", "valid", "invalid"}):
every instance is first checked with the jsonschema package (valid ones
validate, invalid ones fail, formats checked); then the GBNF from
`ferrox grammar -jf F --print-gbnf` must, in llguidance (its GBNF front
end over a byte tokenizer) and in ferrox's own matcher (`ferrox grammar
--check`), accept every valid instance written compact
(separators=(',', ':')) and pretty (indent=2), and reject every invalid
one; the two matchers must agree on all of them; 50 strings sampled from
the grammar (`--sample`) must each parse as JSON and validate. Then
schemas that must be refused (unsupported keywords, malformed JSON), and
regexes against Python's re.fullmatch (re.ASCII).

usage: test_schema.py FERROX_BINARY
Skips (77) when llguidance or jsonschema is missing, unless FX_REQUIRE_MODELS=1.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from pycheck import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N_SAMPLE = 50

try:
    import jsonschema
    import llguidance
except ImportError as e:
    if os.environ.get("FX_REQUIRE_MODELS") == "1":
        raise
    print(f"skip: {e.name} is not installed (scripts/install-deps.sh)")
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
check = Checks()


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def oracle(gbnf):
    g = llguidance.grammar_from("gbnf", gbnf)
    err = llguidance.LLMatcher.validate_grammar(g, TOK)
    return g, err


def oracle_accepts(g, s):
    m = llguidance.LLMatcher(TOK, g, log_level=0)
    for b in s.encode("utf-8"):
        if not m.consume_token(b):
            return False
    return m.is_accepting()


def ours(ferrox, flag, arg, strings):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        for s in strings:
            f.write(json.dumps(s) + "\n")
        path = f.name
    r = run([ferrox, "grammar", flag, arg, "--check", path])
    os.unlink(path)
    if r.returncode:
        return None, r.stderr.strip()
    return [l == "1" for l in r.stdout.split()], None


def forms(v):
    return [json.dumps(v, separators=(",", ":")), json.dumps(v, indent=2),
            json.dumps(v, separators=(",", ":"), ensure_ascii=False)]


def check_schema(ferrox, path):
    name = os.path.basename(path)
    d = json.load(open(path, encoding="utf-8"))
    V = jsonschema.Draft202012Validator
    val = V(d["schema"], format_checker=V.FORMAT_CHECKER)
    for v in d["valid"]:
        check(val.is_valid(v), f"{name}: jsonschema rejects the 'valid' instance {v!r}")
    for v in d["invalid"]:
        check(not val.is_valid(v), f"{name}: jsonschema accepts the 'invalid' instance {v!r}")
    r = run([ferrox, "grammar", "-jf", path + ".schema", "--print-gbnf"]) if False else None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(d["schema"], f)
        spath = f.name
    try:
        r = run([ferrox, "grammar", "-jf", spath, "--print-gbnf"])
        check(r.returncode == 0, f"{name}: conversion failed: {r.stderr.strip()}")
        if r.returncode:
            return 0
        g, err = oracle(r.stdout)
        check(not err, f"{name}: llguidance refuses the grammar: {err}")
        if err:
            return 0
        strings = [(s, True) for v in d["valid"] for s in forms(v)] + \
                  [(s, False) for v in d["invalid"] for s in forms(v)]
        mine, err = ours(ferrox, "-jf", spath, [s for s, _ in strings])
        check(mine is not None, f"{name}: ferrox grammar --check failed: {err}")
        for (s, want), a in zip(strings, mine or [None] * len(strings)):
            b = oracle_accepts(g, s)
            check(b == want, f"{name}: llguidance {'accepts' if b else 'rejects'} {s!r}")
            check(a == b, f"{name}: ferrox {'accepts' if a else 'rejects'} {s!r}, llguidance does not")
        r = run([ferrox, "grammar", "-jf", spath, "--sample", str(N_SAMPLE), "--seed", "7", "--max-bytes", "2000"])
        check(r.returncode == 0, f"{name}: --sample failed: {r.stderr.strip()}")
        samples = [json.loads(l) for l in r.stdout.split("\n") if l]
        for s in samples:
            try:
                v = json.loads(s)
                ok = val.is_valid(v)
            except ValueError:
                ok = False
            check(ok, f"{name}: sampled {s!r} is not a valid instance")
        return len(strings)
    finally:
        os.unlink(spath)


BAD = [
    ('{"type":"object","properties":{"age":{"type":"integer","multipleOf":5}}}',
     "json schema: /properties/age: unsupported keyword 'multipleOf'"),
    ('{"not":{"type":"null"}}', "unsupported keyword 'not'"),
    ('{"type":"array","uniqueItems":true}', "unsupported keyword 'uniqueItems'"),
    ('{"if":{},"then":{}}', "unsupported keyword 'if'"),
    ('{"type":"object","patternProperties":{"a":{}}}', "unsupported keyword 'patternProperties'"),
    ('{"type":"array","items":{"contains":{}}}', "/items: unsupported keyword 'contains'"),
    ('{"type":"string","format":"hostname"}', "unsupported format 'hostname'"),
    ('{"type":"number","minimum":0.5}', "'minimum' on a non-integer number"),
    ('{"type":"object",', "malformed JSON"),
    ('{"type":7}', "'type' must be"),
    ('{"type":"string","minLength":-1}', "'minLength' must be a non-negative integer"),
    ('{"$ref":"#/$defs/missing"}', "points to nothing"),
    ('{"$ref":"http://x/y.json"}', "only local $ref"),
    ('{"type":"string","pattern":"(a)\\\\1"}', "backreferences"),
    ('{"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"}', "left-recursive"),
    ('{"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]}', "oneOf branches that may overlap"),
    ('{"type":"integer","minimum":5,"maximum":4}', "no integer satisfies"),
]

REGEX = [
    (r"[A-Z]{3}-\d{4}", ["ABC-1234", "AB-1234", "ABC-12345", "abc-1234", ""]),
    (r"^(foo|ba+r)?x*$", ["", "foo", "bar", "baaarxx", "bx", "foox", "fooo"]),
    (r"\w+@\w+\.(com|org)", ["a@b.com", "a_1@x.org", "a@b.net", "@b.com", "a@b.com."]),
    (r"[^a-c\s]+", ["xyz", "xaz", "x z", "", "ÿé"]),
    (r"a{2,3}b{,2}c?", ["aa", "aaab", "aaabbc", "a", "aaaa", "aabbb"]),
    (r"(?:\d{1,3}\.){3}\d{1,3}", ["1.2.3.4", "255.255.255.255", "1.2.3", "1..2.3"]),
    (r"x.y", ["xay", "x\ny", "xy", "x€y"]),
    (r"[\]\-\\]+|\.", ["]-\\", ".", "a", "-"]),
    (r"(?P<y>\d{4})-(?P<m>0[1-9]|1[0-2])", ["2024-01", "2024-13", "2024-1"]),
    (r"a{3}\{x\}", ["aaa{x}", "aa{x}"]),
]
BAD_REGEX = [(r"(a)\1", "position 4: backreferences"), (r"a(?=b)", "lookaround"),
             (r"\bword", "position 1"), (r"a**", "multiple repeat"), (r"(ab", "missing )"),
             (r"ab)", "unbalanced )"), (r"[z-a]", "bad character range"), (r"a^b", "anchors"),
             (r"(?i)a", "inline flags")]


RANGES = [(0, 150), (-40, 60), (1, 12), (7, 7), (0, 0), (-5, -3), (-1, 1), (99, 1000),
          (123456, None), (None, -98), (-1000000007, 99999999999), (None, None), (10, 19)]


def check_ranges(ferrox):
    """Integer ranges: every integer near each bound (and some far). "-0"
    (JSON's other spelling of 0) is left out of bounded ranges: stricter,
    never looser."""
    n = 0
    for lo, hi in RANGES:
        schema = {"type": "integer"}
        if lo is not None:
            schema["minimum"] = lo
        if hi is not None:
            schema["maximum"] = hi
        near = set(range(-30, 31)) | {10 ** k for k in range(13)} | {-10 ** k for k in range(13)}
        for b in (lo, hi):
            if b is not None:
                near |= set(range(b - 30, b + 31)) | {b * 10, b // 10, -b}
        nums = sorted(near)
        strings = [str(x) for x in nums] + ["-0", "01", "1.0", "+1", ""]
        mine, err = ours(ferrox, "-j", json.dumps(schema), strings)
        check(mine is not None, f"range {schema}: {err}")
        for s, a in zip(strings, mine or []):
            want = bool(re.fullmatch(r"-?(0|[1-9][0-9]*)", s)) and (s != "-0" or lo is hi is None) and \
                (lo is None or int(s) >= lo) and (hi is None or int(s) <= hi)
            n += 1
            check(a == want, f"range {schema}: {s!r}: ferrox {a}, want {want}")
    return n


def main():
    ferrox = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/bin/ferrox")
    paths = sorted(glob.glob(os.path.join(ROOT, "tests/data/schemas/*.json")))
    n_str = 0
    for p in paths:
        n_str += check_schema(ferrox, p)
    for schema, want in BAD:
        r = run([ferrox, "grammar", "-j", schema, "--print-gbnf"])
        check(r.returncode != 0 and want in r.stderr, f"bad schema {schema}: exit {r.returncode}, {r.stderr.strip()!r}, want {want!r}")
    n_range = check_ranges(ferrox)
    n_re = 0
    for rx, strings in REGEX:
        r = run([ferrox, "grammar", "--regex", rx, "--print-gbnf"])
        check(r.returncode == 0, f"regex {rx!r}: {r.stderr.strip()}")
        if r.returncode:
            continue
        g, err = oracle(r.stdout)
        check(not err, f"regex {rx!r}: llguidance refuses: {err}")
        mine, err = ours(ferrox, "--regex", rx, strings)
        for s, a in zip(strings, mine or [None] * len(strings)):
            want = re.fullmatch(rx, s, re.ASCII) is not None
            n_re += 1
            check(a == want, f"regex {rx!r} on {s!r}: ferrox {a}, re.fullmatch {want}")
            if g is not None and not err:
                check(oracle_accepts(g, s) == want, f"regex {rx!r} on {s!r}: llguidance differs from re")
    for rx, want in BAD_REGEX:
        r = run([ferrox, "grammar", "--regex", rx, "--print-gbnf"])
        check(r.returncode != 0 and want in r.stderr, f"bad regex {rx!r}: {r.stderr.strip()!r}, want {want!r}")
    print(f"schema: {len(paths)} schemas, {n_str} instance strings, {len(BAD)} refused schemas, "
          f"{len(RANGES)} integer ranges on {n_range} numbers, {len(REGEX)} regexes on {n_re} strings, {len(BAD_REGEX)} refused regexes")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
