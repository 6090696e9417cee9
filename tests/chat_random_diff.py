#!/usr/bin/env python3
"""Random differential test of the chat-template interpreter against jinja2.

Generates random templates of one kind and renders each through
`ferrox render-template` and through jinja2 set up as transformers'
apply_chat_template (tests/gen_chat_expect.py's env); prints the first
differences and a count. Not part of ctest (it takes minutes); run it after
changing src/chat:

  python3 tests/chat_random_diff.py --ferrox build/bin/ferrox --kind expr  --seed 1 -n 2000
  python3 tests/chat_random_diff.py --ferrox build/bin/ferrox --kind ws    --seed 1 -n 2000
  python3 tests/chat_random_diff.py --ferrox build/bin/ferrox --kind scope --seed 1 -n 2000

expr: expressions, operators, filters, tests, methods over varied values;
ws: whitespace control, trim/lstrip_blocks, comments, raw blocks, CRLF;
scope: set/for/if/macro/with/filter/set blocks sharing names (jinja2's
frames). Known, accepted differences: printing a range (ferrox refuses),
'str' % Undefined. Exit 1 when anything differs.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_chat_expect import env, NOW  # noqa: E402

# ---- expr -----------------------------------------------------------------
X = {"s": "Hello World", "u": "héllo ✓", "n": 7, "f": 2.5, "l": [3, 1, 2], "e": [], "d": {"b": 2, "a": 1}, "t": True, "z": None, "m": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}], "neg": -3, "zero": 0, "fl": 0.1}
lits = ["1", "0", "-2", "2.5", "0.1", "'a'", "''", "'Ab c'", "true", "false", "none", "[1, 2]", "[]", "{'k': 1}", "(1, 'x')", "s", "u", "n", "f", "l", "e", "d", "t", "z", "m", "neg", "zero", "fl", "nope", "m[0]", "m[0].role", "d.a", "l[1:]", "s[::-1]", "m|length"]
binops = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in", "and", "or", "**"]
filters = ["length", "trim", "upper", "lower", "title", "capitalize", "first", "last", "list", "string", "int", "float", "abs", "round", "tojson", "reverse|list", "sort", "unique|list", "join(',')", "default('D')", "default('D', true)", "items|list", "dictsort", "sum", "min", "max", "wordcount", "replace('l', 'L')", "indent(2)", "select|list", "map('string')|list", "count", "safe", "center(9)", "truncate(5)", "tojson(indent=1)"]
tests = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence", "boolean", "true", "false", "odd", "even", "lower", "upper", "in [1, 'a']", "equalto 1", "eq 'a'", "ne 2", "gt 1", "lt 3"]
methods = ["upper()", "lower()", "strip()", "split()", "split('l')", "startswith('H')", "endswith('d')", "replace('o', '0')", "title()", "find('l')", "count('l')", "items()|list", "keys()|list", "values()|list", "get('a')", "get('q', 9)", "index(1)", "lstrip('H')", "rsplit(' ', 1)", "capitalize()", "format(1)", "removeprefix('He')"]

def ex(d=0):
    r = random.random()
    if d > 2 or r < 0.3: return random.choice(lits)
    if r < 0.5: return "(%s %s %s)" % (ex(d+1), random.choice(binops), ex(d+1))
    if r < 0.65: return "%s|%s" % (ex(d+1), random.choice(filters))
    if r < 0.75: return "(%s is %s%s)" % (ex(d+1), random.choice(["", "not "]), random.choice(tests))
    if r < 0.85: return "%s.%s" % (random.choice(["s", "u", "d", "l", "m[0]", "'x y'"]), random.choice(methods))
    if r < 0.93: return "(%s if %s else %s)" % (ex(d+1), ex(d+1), ex(d+1))
    return "(not %s)" % ex(d+1)


def gen_expr():
    return "{{ %s }}" % ex(), X


# ---- ws -------------------------------------------------------------------
texts = ["", " ", "  ", "\n", "\n\n", " \n", "\t", "x", " y ", "\n  ", "  \n  z", "\r\n", "a\n", "\u00a0", " \u3000"]
def mod(): return random.choice(["", "", "", "-", "+"])
def tag(body): return "{%" + mod() + " " + body + " " + random.choice(["", "", "-", "+"]) + "%}"
def var(expr): return "{{" + random.choice(["", "", "-"]) + " " + expr + " " + random.choice(["", "", "-"]) + "}}"
def comment(): return "{#" + random.choice(["", "-"]) + " c " + random.choice(["", "-"]) + "#}"
def block(d=0):
    out = []
    for _ in range(random.randint(1, 4)):
        r = random.random()
        out.append(random.choice(texts))
        if r < 0.25: out.append(var(random.choice(["1", "'s'", "x", "loop.index if loop is defined else 0"])))
        elif r < 0.35: out.append(comment())
        elif r < 0.55 and d < 3:
            out.append(tag("if " + random.choice(["true", "false", "x"])) + block(d+1))
            if random.random() < 0.4: out.append(tag("else") + block(d+1))
            out.append(tag("endif"))
        elif r < 0.7 and d < 3:
            out.append(tag("for i in [1, 2]") + block(d+1) + tag("endfor"))
        elif r < 0.8: out.append(tag("set x = " + random.choice(["1", "'q'"])))
        elif r < 0.85 and d < 2:
            out.append(tag("set y") + block(d+1) + tag("endset") + var("y"))
        elif r < 0.9: out.append(tag("raw") + random.choice(texts) + "{{ x }}" + random.choice(texts) + tag("endraw"))
        out.append(random.choice(texts))
    return "".join(out)


def gen_ws():
    return block(), {"x": "X"}


# ---- scope ----------------------------------------------------------------
names = ["x", "y", "z"]
macros = []
def sexpr():
    r = random.random()
    if r < 0.6: return random.choice(names)
    if r < 0.8: return "%s ~ '%s'" % (random.choice(names), random.choice("abc"))
    return "'%s'" % random.choice("pq")
def sblock(d=0):
    out = []
    for _ in range(random.randint(1, 4)):
        r = random.random()
        if r < 0.3: out.append("[{{ %s }}]" % random.choice(names))
        elif r < 0.5: out.append("{%% set %s = %s %%}" % (random.choice(names), sexpr()))
        elif r < 0.62 and d < 3: out.append("{%% for i in [1, 2] %%}%s{%% endfor %%}" % sblock(d+1))
        elif r < 0.74 and d < 3:
            s = "{%% if %s %%}%s" % (random.choice(["true", "false", "i is defined"]), sblock(d+1))
            if random.random() < 0.5: s += "{% else %}" + sblock(d+1)
            out.append(s + "{% endif %}")
        elif r < 0.8 and d < 2:
            m = "m%d" % len(macros); macros.append(m)
            out.append("{%% macro %s() %%}%s{%% endmacro %%}{{ %s() }}" % (m, sblock(d+1), m))
        elif r < 0.85 and d < 3: out.append("{%% with %s = %s %%}%s{%% endwith %%}" % (random.choice(names), sexpr(), sblock(d+1)))
        elif r < 0.9 and d < 3: out.append("{%% set %s %%}%s{%% endset %%}" % (random.choice(names), sblock(d+1)))
        elif r < 0.95 and d < 3: out.append("{%% filter upper %%}%s{%% endfilter %%}" % sblock(d+1))
        elif macros: out.append("{{ %s() }}" % random.choice(macros))
    return "".join(out)


def gen_scope():
    macros.clear()
    return sblock(), {"x": "X", "y": "Y"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferrox", required=True)
    ap.add_argument("--kind", choices=["expr", "ws", "scope"], required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=1000)
    args = ap.parse_args()
    random.seed(args.seed)
    e = env()
    gen = {"expr": gen_expr, "ws": gen_ws, "scope": gen_scope}[args.kind]
    fail = 0
    with tempfile.TemporaryDirectory() as tmp:
        tp, xp, mp = (os.path.join(tmp, f) for f in ("t.jinja", "x.json", "m.json"))
        with open(mp, "w") as f:
            json.dump([], f)
        for _ in range(args.n):
            t, ctx = gen()
            try:
                want = e.from_string(t).render(messages=[], tools=None, documents=None,
                                               add_generation_prompt=False, **ctx)
            except Exception as ex_:  # jinja2 refuses: ferrox must too
                want, werr = None, "%s: %s" % (type(ex_).__name__, ex_)
            with open(tp, "w", encoding="utf-8", newline="") as f:
                f.write(t)
            with open(xp, "w") as f:
                json.dump(ctx, f)
            r = subprocess.run([args.ferrox, "render-template", "--template", tp, "--messages", mp,
                                "--extra", xp, "--now", str(NOW)], capture_output=True)
            got = r.stdout.decode("utf-8", "replace") if r.returncode == 0 else None
            if (want is None and got is None) or want == got:
                continue
            fail += 1
            if fail <= 10:
                print("=== %r\n  jinja2: %r\n  ferrox: %r" % (
                    t, want if want is not None else werr,
                    got if got is not None else r.stderr.decode(errors="replace")[:300]))
    print("%s: %d of %d differ" % (args.kind, fail, args.n))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
