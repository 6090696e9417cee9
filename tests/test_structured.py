#!/usr/bin/env python3
"""Structured output through `ferrox serve` and `ferrox run`, with the
official openai client and jsonschema as the judge.

usage: tests/test_structured.py [PATH/TO/ferrox]

SmolLM2-135M-Instruct (chat): client.chat.completions.parse with a pydantic
model; every schema of tests/data/schemas at temperature 0 and 1 with
max_tokens 1024 (the reply must parse, validate and end by itself:
finish_reason "length" fails); GBNF, regex and choice constraints; a
constrained and a free request decoding together give their lone greedy
texts; streaming equals non-streaming; bad constraints are 400s in
OpenAI's error shape and the server keeps serving. Gemma 3 270M (a base
model, no chat template): /v1/completions with json_schema, and
`ferrox run -j`. Exit 77 when a model or a package is missing, unless
FX_REQUIRE_MODELS=1. Prints one line per check and "N passed, N failed".
"""
import concurrent.futures as cf
import glob
import json
import os
import re
import subprocess
import sys

from server_harness import BIN, GEMMA, ROOT, SAN, SMOL, THREADS, Checks, Server, need

MAX_TOKENS = 1024
SUITE_TOKENS = 256 if SAN else MAX_TOKENS  # the suite's cut replies cost minutes under ASan

jsonschema, openai, pydantic = need("test_structured", [GEMMA, SMOL],
                                    ["jsonschema", "openai", "pydantic"])
T = Checks(log_bytes=2000)
check = T.check


def chat(c, content, **kw):
    return c.chat.completions.create(model="m", messages=[{"role": "user", "content": content}], **kw)


# JSON tokens (RFC 8259), whole and as a cut reply's last, unfinished one.
_TOKEN = re.compile(r'\s+|[{}\[\]:,]|true|false|null|"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
                    r'|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?')
_TAIL_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\(?:u[0-9a-fA-F]{0,3})?)?')
_TAIL_NUMBER = re.compile(r'-|-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?')


def json_prefix_ok(s):
    """True when s is the start of some JSON text: what a json_object
    grammar lets a reply cut at max_tokens be. A pushdown pass over the
    whole tokens; the rest must start a token the position allows."""
    stack, want, i = [], "value", 0  # want: value, key, colon, next (',' or a close), end
    while i < len(s):
        m = _TOKEN.match(s, i)
        if not m or m.group()[0] in "-0123456789" and _TAIL_NUMBER.fullmatch(s, i) or \
                m.group()[0] in "tfn" and m.end() == len(s):
            break  # the unfinished last token (a number that may go on: "1.5e")
        t, i = m.group(), m.end()
        if t.isspace():
            continue
        if want == "colon":
            if t != ":":
                return False
            want = "value"
        elif want == "next":
            if t == "," and stack:
                want = "key" if stack[-1] == "{" else "value"
            elif t in "}]" and stack and "{[".index(stack[-1]) == "}]".index(t):
                stack.pop()
                want = "next" if stack else "end"
            else:
                return False
        elif want == "key":
            if t.startswith('"'):
                want = "colon"
            elif t == "}" and stack and stack[-1] == "{" and s[:m.start()].rstrip().endswith("{"):
                stack.pop()
                want = "next" if stack else "end"
            else:
                return False
        elif want == "value":
            if t in "{[":
                stack.append(t)
                want = "key" if t == "{" else "value"
            elif t == "]" and stack and stack[-1] == "[" and s[:m.start()].rstrip().endswith("["):
                stack.pop()
                want = "next" if stack else "end"
            elif t in "}:,]":
                return False
            else:
                want = "next" if stack else "end"
        else:
            return False
    rest = s[i:]
    if not rest:
        return True
    if want == "key":
        return bool(_TAIL_STRING.fullmatch(rest))
    if want != "value":
        return False
    return bool(_TAIL_STRING.fullmatch(rest) or _TAIL_NUMBER.fullmatch(rest) or
                any(w.startswith(rest) for w in ("true", "false", "null")))


assert all(json_prefix_ok(s) for s in ('', '{', '{"a": [1, tr', '{"a": "x\\u00', '[-', '{"k": 1.5e', '{}', '[[]]'))
assert not any(json_prefix_ok(s) for s in ('{"a" 1', '{1', '[1 2', '{"a": tx', '{"a": 1}}', '{,'))


def schemas():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/data/schemas/*.json"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path)[:-5], json.load(f)))
    return out


def prompt_for(name, schema):
    desc = schema.get("description") or schema.get("title") or name.replace("_", " ")
    return f"Write one example of {desc} as JSON."


def suite_prompt(name, schema):
    """The suite's prompt: the schema in it, as applications send it (the
    model then knows what the grammar will allow)."""
    return (prompt_for(name, schema) + " Use this JSON Schema:\n" + json.dumps(schema) +
            "\nKeep strings short.")


def test_schema_suite(srv):
    suite = schemas()
    if len(suite) < 30:
        raise AssertionError(f"want at least 30 schemas in tests/data/schemas, found {len(suite)}")
    if SAN:
        suite = suite[:4]
    c = srv.client(timeout=600)
    bad = []

    def one(item, temp):
        name, d = item
        # frequency_penalty 0.3: greedy SmolLM2 135M repeats itself (a
        # string of digits, an array of nulls) until max_tokens otherwise
        r = chat(c, suite_prompt(name, d["schema"]), temperature=temp, seed=7, max_tokens=SUITE_TOKENS,
                 frequency_penalty=0.3,
                 response_format={"type": "json_schema",
                                  "json_schema": {"name": name, "schema": d["schema"], "strict": True}})
        ch = r.choices[0]
        if ch.finish_reason == "length":
            return "length", f"{name} t={temp}: cut at {SUITE_TOKENS} tokens: ...{ch.message.content[-80:]!r}"
        try:
            # formats are annotations unless asked for (JSON Schema 2020-12);
            # Python's time checker also refuses RFC 3339's long fractions
            jsonschema.validate(json.loads(ch.message.content), d["schema"])
        except Exception as e:
            return "bad", f"{name} t={temp} ({ch.finish_reason}): {ch.message.content[:200]!r}: {str(e)[:200]}"
        return "ok", None

    cut = []
    with cf.ThreadPoolExecutor(4) as ex:
        for kind, msg in ex.map(lambda a: one(*a), [(it, t) for t in (0.0, 1.0) for it in suite]):
            (bad if kind == "bad" else cut if kind == "length" else []).append(msg)
    n = 2 * len(suite)
    print(f"     {n - len(bad) - len(cut)} of {n} replies valid, {len(cut)} cut at max_tokens "
          f"(SmolLM2 135M at temperature 1: recursion without end, strings that never close), "
          f"{len(bad)} invalid")
    for m in cut:
        print("     cut:", m)
    # Every reply that ended validates. The cut ones are the model's
    # (random strings under an unanchored pattern or an email format,
    # recursion that keeps opening, a value string that never closes): 7 of
    # 64 here (2026-12-05), 2 of them greedy. Which replies run on moves
    # with the logits' last bits (the softmax of 2026-12-05 turned 5 and 0
    # into 7 and 2); a broken engine cuts most. A grammar cannot end them
    # without refusing valid values. Under ASan the suite stops at 256
    # tokens, so more are cut there.
    assert not bad, "\n".join(bad)
    t0 = [m for m in cut if " t=0.0:" in m]
    assert SAN or len(t0) <= n // 16, f"{len(t0)} greedy replies cut at max_tokens"
    assert len(cut) <= (n // 2 if SAN else n // 8), f"{len(cut)} of {n} replies cut at max_tokens"


def test_pydantic_parse(srv):
    # Every string bounded: the grammar is then finite and the reply ends
    # whatever the logits (CI's ASan build, whose last bits differ, looped
    # greedily in an unbounded string to 1024 tokens on 2026-12-05).
    class City(pydantic.BaseModel):
        name: str = pydantic.Field(description="the city's name", max_length=32)
        country: str = pydantic.Field(max_length=32)
        population: int = pydantic.Field(ge=0, le=40000000)

    class Answer(pydantic.BaseModel):
        cities: list[City] = pydantic.Field(min_length=1, max_length=3)
        capital_of: str | None = pydantic.Field(None, max_length=32)

    r = srv.client(timeout=600).chat.completions.parse(
        model="m", messages=[{"role": "user", "content": "List two large cities in France."}],
        response_format=Answer, temperature=0, max_tokens=MAX_TOKENS)
    msg = r.choices[0].message
    assert r.choices[0].finish_reason == "stop", r.choices[0].finish_reason
    assert isinstance(msg.parsed, Answer), msg
    assert 1 <= len(msg.parsed.cities) <= 3
    assert all(0 <= x.population <= 40000000 for x in msg.parsed.cities)


def test_grammar_forms(srv):
    c = srv.client(timeout=600)
    g = 'root ::= "{\\"n\\": " [1-9] [0-9]{0,2} ", \\"ok\\": " ("true" | "false") "}"'
    for temp in (0.0, 1.0):
        r = chat(c, "Give a number and a flag as JSON.", temperature=temp, seed=3, n=2,
                 extra_body={"grammar": g})
        for ch in r.choices:
            assert re.fullmatch(r'\{"n": [1-9][0-9]{0,2}, "ok": (true|false)\}', ch.message.content), ch
            assert ch.finish_reason == "stop"
    r = chat(c, "Is water wet?", temperature=1.0, seed=5,
             extra_body={"structured_outputs": {"choice": ["yes", "no", "it depends"]}})
    assert r.choices[0].message.content in ("yes", "no", "it depends"), r
    r = chat(c, "Is water wet?", temperature=0, extra_body={"guided_choice": ["Yes", "No"]})
    assert r.choices[0].message.content in ("Yes", "No"), r
    r = chat(c, "A US phone number:", temperature=1.0, seed=9,
             extra_body={"structured_outputs": {"regex": r"\(\d{3}\) \d{3}-\d{4}"}})
    assert re.fullmatch(r"\(\d{3}\) \d{3}-\d{4}", r.choices[0].message.content), r
    r = chat(c, "A person as JSON.", temperature=0, max_tokens=MAX_TOKENS,
             response_format={"type": "json_object"})
    # a greedy reply of this small model may loop to max_tokens (the ASan
    # build's last-bit logits did; since the FMA float step, the Release
    # build's too): then what it wrote must still be the start of a JSON object
    content = r.choices[0].message.content
    if r.choices[0].finish_reason == "length":
        assert content.lstrip().startswith("{") and json_prefix_ok(content), r
    else:
        assert isinstance(json.loads(content), dict), r
    # additionalProperties false: the grammar admits only {"age": N}, so the
    # reply ends whatever the logits (CI's ASan run looped in an extra
    # string property when other keys were allowed)
    r = chat(c, "A person as JSON.", temperature=0, max_tokens=MAX_TOKENS,
             extra_body={"json_schema": {"type": "object", "properties": {"age": {"type": "integer", "minimum": 18, "maximum": 99}},
                                         "required": ["age"], "additionalProperties": False}})
    assert r.choices[0].finish_reason == "stop", r
    reply = json.loads(r.choices[0].message.content)
    assert list(reply) == ["age"] and 18 <= reply["age"] <= 99, r


def test_batch_and_stream(srv):
    """A constrained and a free request decoding together give their lone
    greedy texts; the constrained stream equals the non-streamed reply."""
    c = srv.client(timeout=600)
    g = 'root ::= "[" [a-z]{2,8} (", " [a-z]{2,8}){0,3} "]"'
    con = dict(temperature=0, max_tokens=64, extra_body={"grammar": g})
    free = dict(temperature=0, max_tokens=48)
    alone_c = chat(c, "Name some fruits.", **con).choices[0].message.content
    alone_f = chat(c, "Name some fruits.", **free).choices[0].message.content
    with cf.ThreadPoolExecutor(6) as ex:
        fs = [ex.submit(chat, c, "Name some fruits.", **(con if i % 2 else free)) for i in range(6)]
        outs = [f.result().choices[0].message.content for f in fs]
    for i, o in enumerate(outs):
        assert o == (alone_c if i % 2 else alone_f), (i, o, alone_c, alone_f)
    s = chat(c, "Name some fruits.", stream=True, **con)
    streamed = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
    assert streamed == alone_c, (streamed, alone_c)


def test_bad_constraints(srv):
    c = srv.client(timeout=600)
    cases = [
        ({"grammar": 'root ::= ("a"'}, "line 1"),
        ({"grammar": "root ::= root \"a\""}, "left-recursive"),
        ({"grammar": 12}, "must be a string"),
        ({"response_format": {"type": "xml"}}, "not one of"),
        ({"response_format": {"type": "json_schema"}}, "must be an object with a 'schema'"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "multipleOf": 3}}}},
         "multipleOf"),
        ({"json_schema": {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}}, "missing"),
        ({"grammar": 'root ::= "a"', "guided_choice": ["a"]}, "send one"),
        ({"structured_outputs": {"regex": "(a"}}, "regex"),
        ({"structured_outputs": {"choice": []}}, "non-empty"),
    ]
    for extra, want in cases:
        try:
            chat(c, "hi", max_tokens=4, extra_body=extra)
            raise AssertionError(f"{extra}: accepted")
        except openai.BadRequestError as e:
            body = e.response.json()
            assert body["error"]["type"] == "invalid_request_error", body
            assert want in body["error"]["message"], (extra, body)
    r = chat(c, "hi", max_tokens=4)   # still serving
    assert r.choices[0].message.content is not None


def test_gemma_completions(srv):
    c = srv.client(timeout=600)
    schema = {"type": "object", "properties": {
        "title": {"type": "string", "maxLength": 40},
        "year": {"type": "integer", "minimum": 1400, "maximum": 2030},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["fiction", "history", "science"]},
                 "maxItems": 3}},
        "required": ["title", "year"], "additionalProperties": False}
    for temp in (0.0, 1.0):
        r = c.completions.create(model="m", prompt="A book record in JSON: ", temperature=temp, seed=11,
                                 max_tokens=MAX_TOKENS, extra_body={"json_schema": schema})
        ch = r.choices[0]
        assert ch.finish_reason == "stop", ch
        jsonschema.validate(json.loads(ch.text), schema)


def test_run_json_schema():
    # A closed object (no additional properties, a bounded string): the
    # grammar ends after a few dozen tokens whatever the model picks, so the
    # check is the stop, not the luck of a 270M base model's greedy path (an
    # open object let it write one unbounded "address" string to -n).
    schema = json.dumps({"type": "object", "properties": {"name": {"type": "string", "maxLength": 30},
                                                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                         "required": ["name", "age"], "additionalProperties": False})
    for args in (["--temp", "0"], ["--temp", "1", "--seed", "4"]):
        r = subprocess.run([BIN, "run", "-m", GEMMA, "-p", "A person in JSON:", "-n", str(MAX_TOKENS),
                            "-t", THREADS, "-j", schema, *args], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "stopped at the end of the grammar" in r.stderr or "end-of-generation" in r.stderr, r.stderr
        jsonschema.validate(json.loads(r.stdout), json.loads(schema))
    r = subprocess.run([BIN, "run", "-m", GEMMA, "-p", "x", "-j", '{"type": "string", "format": "hostname"}'],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "hostname" in r.stderr, r.stderr


def main():
    srv = Server(SMOL, "--parallel", "4")
    T.server = srv
    try:
        check("chat: json_schema suite, temperature 0 and 1", lambda: test_schema_suite(srv))
        check("chat: completions.parse with a pydantic model", lambda: test_pydantic_parse(srv))
        check("chat: grammar, choice, regex, json_object, json_schema fields", lambda: test_grammar_forms(srv))
        check("chat: constrained and free together; stream", lambda: test_batch_and_stream(srv))
        check("chat: bad constraints are 400s", lambda: test_bad_constraints(srv))
    finally:
        srv.stop()
    srv = Server(GEMMA, "--parallel", "2")
    T.server = srv
    try:
        check("completions (Gemma 3): json_schema", lambda: test_gemma_completions(srv))
    finally:
        srv.stop()
    T.server = None
    check("run -j (Gemma 3)", test_run_json_schema)
    print(f"{T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
