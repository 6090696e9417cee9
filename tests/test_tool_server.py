#!/usr/bin/env python3
"""Tool calling through `ferrox serve` with the official openai client.

usage: tests/test_tool_server.py [PATH/TO/ferrox]

SmolLM2-135M-Instruct (FX_MODELS_DIR) has a template without a tool
format, so its calls use the generic JSON format; tool_choice "required"
or a named function makes the grammar force a call. Checks: OpenAI-shaped
400s for bad tools / tool_choice / history; a forced call comes back as
message.tool_calls with finish_reason "tool_calls" and arguments that are
compact JSON; the same request streamed (greedy) assembles, in the openai
client's stream helper, the same message; parallel_tool_calls false gives
one call; a named tool_choice calls that function; history with string
arguments is accepted; with --chat-template-file Qwen 3's template, the same
through the native <tool_call> format. Exit 77 without the model or openai unless
FX_REQUIRE_MODELS=1.
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "ferrox")
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")


def skip(why):
    print(f"test_tool_server: {why}", file=sys.stderr)
    sys.exit(1 if REQUIRE else 77)


if not os.path.exists(SMOL):
    skip(f"missing {SMOL}; skipping")
try:
    import openai
except ImportError:
    skip("the openai package is missing; skipping")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city"}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone"}}]
MSGS = [{"role": "system", "content": "Answer with short JSON."},
        {"role": "user", "content": "Weather in Paris?"}]
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f" {detail}"), flush=True)


QWQ = os.path.join(os.path.dirname(ROOT), "shared", "templates", "Qwen-QwQ-32B.jinja")
QWEN3 = os.path.join(os.path.dirname(ROOT), "shared", "templates", "Qwen-Qwen3-0.6B.jinja")


def serve(fn, *extra):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(os.path.join(ROOT, "build", "test_tool_server.log"), "a")
    proc = subprocess.Popen([BIN, "serve", "-m", SMOL, "--port", str(port), "-t",
                             os.environ.get("FX_TEST_THREADS", "2"), *extra], stdout=log, stderr=log)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        fn(openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    serve(run)
    r = subprocess.run([BIN, "serve", "-m", SMOL, "--reasoning-format", "sometimes"],
                       capture_output=True, text=True)
    check("--reasoning-format refuses a bad value", r.returncode == 2 and "auto" in r.stderr,
          r.stderr)
    if os.path.exists(QWEN3):
        serve(run_hermes, "--chat-template-file", QWEN3)
    else:
        print(f"skip: {QWEN3} is absent (the Hermes-format checks)")
    if os.path.exists(QWQ):
        serve(run_think, "--chat-template-file", QWQ)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def run_think(client):
    """QwQ's generation prompt opens <think>: the reply starts as reasoning."""
    kw = dict(model="m", messages=MSGS[1:], max_tokens=12, temperature=0)
    r = client.chat.completions.create(**kw).choices[0].message
    rc = getattr(r, "reasoning_content", None) or (r.model_extra or {}).get("reasoning_content")
    check("thinking opened by the prompt: reasoning_content, no content",
          rc and not r.content, str(r))
    n = client.chat.completions.create(**kw, extra_body={"reasoning_format": "none"})
    n = n.choices[0].message
    check("reasoning_format none: the thinking stays in content",
          n.content and n.content.strip() == (rc or "").strip() and
          not (n.model_extra or {}).get("reasoning_content"), f"{n} vs {rc!r}")
    got = ""
    for ch in client.chat.completions.create(**kw, stream=True):
        if ch.choices:
            got += (ch.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
    check("stream: delta.reasoning_content assembles the same reasoning", got == rc, repr(got))


def run_hermes(client):
    """Qwen 3's template on SmolLM2: the native <tool_call> format, forced by
    its grammar, parsed back; the stream assembles the same calls."""
    kw = dict(model="m", messages=MSGS, tools=TOOLS, tool_choice="required", temperature=0,
              max_tokens=300, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    r = client.chat.completions.create(**kw)
    calls = r.choices[0].message.tool_calls or []
    check("hermes format: a forced call parsed from <tool_call>",
          calls and r.choices[0].finish_reason == "tool_calls" and
          all(isinstance(json.loads(c.function.arguments), dict) for c in calls), str(r))
    with client.beta.chat.completions.stream(**kw) as st:
        fm = st.get_final_completion().choices[0].message
    check("hermes format: the stream helper assembles the same calls",
          [(c.function.name, c.function.arguments) for c in (fm.tool_calls or [])] ==
          [(c.function.name, c.function.arguments) for c in calls], f"{fm}")
    r = client.chat.completions.create(**dict(kw, parallel_tool_calls=False))
    check("hermes format: parallel_tool_calls false: one call",
          len(r.choices[0].message.tool_calls or []) == 1, str(r))


def bad(client, name, param, **kw):
    try:
        client.chat.completions.create(model="m", messages=kw.pop("messages", MSGS), **kw)
        check(name, False, "no error")
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        check(name, e.status_code == 400 and err.get("param") == param and err.get("message"),
              str(e.body))


def run(client):
    bad(client, "400: tool without type", "tools", tools=[{"function": {"name": "f"}}])
    bad(client, "400: bad function name", "tools",
        tools=[{"type": "function", "function": {"name": "no spaces"}}])
    bad(client, "400: parameters not an object", "tools",
        tools=[{"type": "function", "function": {"name": "f", "parameters": "x"}}])
    bad(client, "400: duplicate names", "tools", tools=TOOLS + TOOLS[:1])
    bad(client, "400: tool_choice names an unknown function", "tool_choice", tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "nope"}})
    bad(client, "400: tool_choice required without tools", "tool_choice", tool_choice="required")
    bad(client, "400: tool_choice garbage", "tool_choice", tools=TOOLS, tool_choice="sometimes")
    bad(client, "400: history arguments not JSON", "messages", tools=TOOLS, messages=MSGS + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{x"}}]}])

    kw = dict(model="m", messages=MSGS, tools=TOOLS, tool_choice="required", temperature=0,
              max_tokens=300)
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    calls = m.tool_calls or []
    check("required: tool_calls, finish_reason tool_calls",
          calls and r.choices[0].finish_reason == "tool_calls" and m.content is None, str(r))
    check("required: names from tools, compact JSON object arguments",
          all(c.function.name in ("get_weather", "get_time") and c.type == "function" and c.id and
              isinstance(json.loads(c.function.arguments), dict) and
              json.dumps(json.loads(c.function.arguments), separators=(",", ":"),
                         ensure_ascii=False) == c.function.arguments for c in calls), str(calls))
    with client.beta.chat.completions.stream(**kw) as st:
        final = st.get_final_completion()
    fm = final.choices[0].message
    check("stream: the client's helper assembles the same calls",
          [(c.function.name, c.function.arguments) for c in (fm.tool_calls or [])] ==
          [(c.function.name, c.function.arguments) for c in calls] and
          final.choices[0].finish_reason == "tool_calls", f"{fm}\nvs {m}")

    r = client.chat.completions.create(**dict(kw, parallel_tool_calls=False))
    check("parallel_tool_calls false: one call", len(r.choices[0].message.tool_calls or []) == 1,
          str(r))
    r = client.chat.completions.create(**dict(kw, tool_choice={"type": "function",
                                                               "function": {"name": "get_weather"}}))
    calls = r.choices[0].message.tool_calls or []
    check("named tool_choice: calls that function",
          calls and all(c.function.name == "get_weather" for c in calls), str(r))

    # content "": SmolLM2's template concatenates it (None is a template error)
    hist = MSGS + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    r = client.chat.completions.create(model="m", messages=hist, tools=TOOLS, max_tokens=8,
                                       temperature=0)
    check("history with string arguments and a tool message: 200",
          r.choices[0].finish_reason in ("stop", "length", "tool_calls"), str(r))
    r = client.chat.completions.create(model="m", messages=MSGS, tools=TOOLS, tool_choice="none",
                                       max_tokens=8, temperature=0)
    check("tool_choice none: text", not r.choices[0].message.tool_calls and
          isinstance(r.choices[0].message.content, str), str(r))


if __name__ == "__main__":
    sys.exit(main())
