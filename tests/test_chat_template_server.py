#!/usr/bin/env python3
"""`ferrox serve --chat-template NAME`: a base model (Gemma 3 270M, which
ships no chat template) answers /v1/chat/completions through a built-in
template, and the prompt it builds is llama.cpp's.

usage: tests/test_chat_template_server.py [PATH/TO/ferrox]

- with --chat-template gemma (and --jinja, accepted as a no-op): for
  conversations of tests/data/chat/builtin_refs.json (llama.cpp's own
  llama_chat_apply_template output, scripts/make-chat-builtin-refs.py),
  the token ids /v1/chat/completions/render gives equal /tokenize of
  llama.cpp's text with BOS (add_special, parse_special), and a chat
  completion answers with usage.prompt_tokens that count;
- --chat-template-file F with a template in a file renders the same;
- without a template the server refuses chat (400) with a message naming
  --chat-template; an unknown name stops `serve` before it loads anything,
  listing the built-in names;
- `ferrox run --chat-template gemma -sys S -p P --echo` prints <bos> and
  llama.cpp's text for [system S, user P]; `run -sys` on the base model
  without a template is refused naming --chat-template; `ferrox chat` with
  --chat-template answers a turn, and refuses an unknown name.
Exit 77 (skip) without the model unless FX_REQUIRE_MODELS=1.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

from server_harness import BIN, GEMMA, ROOT, THREADS, Checks, Server, need

need("test_chat_template_server", [GEMMA], [])
T = Checks(log_bytes=3000)
REFS = os.path.join(ROOT, "tests", "data", "chat", "builtin_refs.json")
# conversations without Gemma's own control-token texts in the messages
# (typed ones stay text in a chat prompt; /tokenize would parse them)
CONVS = ["system_user", "multi_turn", "two_systems", "whitespace", "tool_role"]


def refs(name):
    with open(REFS, encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    return {c["conversation"]: c for c in cases if c["name"] == name and c["agp"]}


def tokenize(srv, text):
    st, _, body = srv.post("/tokenize", {"content": text, "add_special": True, "parse_special": True})
    assert st == 200, (st, body)
    return json.loads(body)["tokens"]


def rendered(srv, messages):
    st, _, body = srv.post("/v1/chat/completions/render", {"model": "x", "messages": messages})
    assert st == 200, (st, body)
    return json.loads(body)["token_ids"]


def same_as_llama_cpp(srv, ref, conv):
    want = tokenize(srv, ref[conv]["expect"])
    got = rendered(srv, json.loads(ref[conv]["messages_json"]))
    assert got == want, f"{conv}:\n ferrox    {got}\n llama.cpp {want}"
    assert got[0] == want[0] and got[1] != got[0], f"{conv}: one BOS first: {got[:3]}"


def chat_answers(srv, ref):
    msgs = json.loads(ref["system_user"]["messages_json"])
    st, _, body = srv.post("/v1/chat/completions",
                           {"messages": msgs, "max_tokens": 8, "temperature": 0})
    assert st == 200, (st, body)
    r = json.loads(body)
    assert isinstance(r["choices"][0]["message"]["content"], str), r
    assert r["usage"]["prompt_tokens"] == len(tokenize(srv, ref["system_user"]["expect"])), r["usage"]
    assert 1 <= r["usage"]["completion_tokens"] <= 8, r["usage"]


def with_builtin():
    ref = refs("gemma")
    with Server(GEMMA, "--chat-template", "gemma", "--jinja", "--ctx-size", "512",
                "--parallel", "2") as srv:
        T.server = srv
        for conv in CONVS:
            T.check(f"gemma built-in: {conv} tokens as llama.cpp's text", lambda: same_as_llama_cpp(srv, ref, conv))
        T.check("gemma built-in: /v1/chat/completions answers", lambda: chat_answers(srv, ref))


def with_file():
    """A template file (here chatml's formatting, written by hand) instead."""
    ref = refs("chatml")
    with tempfile.NamedTemporaryFile("w", suffix=".jinja") as f:
        f.write("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
                "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
        f.flush()
        with Server(GEMMA, "--chat-template-file", f.name, "--ctx-size", "256", "--parallel", "1") as srv:
            T.server = srv
            T.check("--chat-template-file: tokens as llama.cpp's chatml text",
                    lambda: same_as_llama_cpp(srv, ref, "multi_turn"))


def refuses_without():
    with Server(GEMMA, "--ctx-size", "256", "--parallel", "1") as srv:
        T.server = srv

        def refused():
            st, _, body = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
            msg = json.loads(body)["error"]["message"]
            assert st == 400 and "--chat-template" in msg and "no chat template" in msg, (st, msg)
        T.check("no template: chat refused, naming --chat-template", refused)


def unknown_name():
    t0 = time.time()
    r = subprocess.run([BIN, "serve", "-m", GEMMA, "--chat-template", "gemma4-nope"],
                       capture_output=True, text=True, timeout=60)
    T.expect("unknown --chat-template: refused before loading, names listed",
             r.returncode != 0 and "gemma4-nope" in r.stderr and "chatml" in r.stderr and
             "zephyr" in r.stderr and time.time() - t0 < 30, r.stderr)


def cli():
    """`ferrox run` and `ferrox chat` with the same flags (llama.cpp's)."""
    ref = refs("gemma")["system_user"]
    sys_msg, user = [m["content"] for m in json.loads(ref["messages_json"])]
    base = ["-m", GEMMA, "-t", THREADS, "--temp", "0", "-c", "256"]
    r = subprocess.run([BIN, "run", *base, "--chat-template", "gemma", "--jinja", "-sys", sys_msg, "-p", user,
                        "-n", "1", "--echo"], capture_output=True, text=True, timeout=300)
    T.expect("run --chat-template gemma -sys: -p rendered as llama.cpp renders it, one BOS",
             r.returncode == 0 and r.stdout.startswith("<bos>" + ref["expect"]), r.stdout + r.stderr)
    r = subprocess.run([BIN, "run", *base, "--system-prompt", "x", "-p", "hi", "-n", "1"],
                       capture_output=True, text=True, timeout=300)
    T.expect("run -sys on a base model without --chat-template: refused, naming the flag",
             r.returncode != 0 and "--chat-template" in r.stderr, r.stderr)
    r = subprocess.run([BIN, "chat", *base, "--chat-template", "gemma", "-sys", sys_msg, "-n", "4"],
                       input=user + "\n", capture_output=True, text=True, timeout=300)
    T.expect("chat --chat-template gemma -sys: answers one turn", r.returncode == 0 and r.stdout.strip(),
             r.stdout + r.stderr)
    r = subprocess.run([BIN, "chat", *base, "--chat-template", "nope"], input="hi\n", capture_output=True,
                       text=True, timeout=300)
    T.expect("chat --chat-template nope: refused, names listed", r.returncode != 0 and "gemma" in r.stderr,
             r.stderr)


if __name__ == "__main__":
    t0 = time.time()
    for part in (unknown_name, with_builtin, with_file, refuses_without, cli):
        try:
            part()
        except Exception:
            T.failed += 1
            traceback.print_exc()
    print(f"{T.passed} passed, {T.failed} failed ({time.time() - t0:.0f} s)")
    sys.exit(1 if T.failed else 0)
