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
import subprocess
import sys

from server_harness import BIN, SAN, SMOL, Checks, Server, need, template

openai, jsonschema = need("test_tool_server", [SMOL], ["openai", "jsonschema"])

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city"}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone"}}]
MSGS = [{"role": "system", "content": "Answer with short JSON."},
        {"role": "user", "content": "Weather in Paris?"}]
T = Checks()
check = T.expect

QWQ = template("Qwen-QwQ-32B.jinja")
QWEN3 = template("Qwen-Qwen3-0.6B.jinja")
QWEN25 = template("Qwen-Qwen2.5-7B-Instruct.jinja")
MINIMAX = template("MiniMax-M2.jinja")
SEED = template("ByteDance-Seed-OSS.jinja")


def serve(fn, *extra):
    with Server(SMOL, *extra) as srv:
        T.server = srv
        fn(srv.client())
    T.server = None


def main():
    serve(run)
    r = subprocess.run([BIN, "serve", "-m", SMOL, "--reasoning-format", "sometimes"],
                       capture_output=True, text=True)
    check("--reasoning-format refuses a bad value", r.returncode == 2 and "auto" in r.stderr,
          r.stderr)
    if QWEN3:
        serve(run_hermes, "--chat-template-file", QWEN3)
    else:
        print("skip: Qwen 3's template is absent (the Hermes-format checks)")
    if QWEN25:
        serve(run_lazy, "--chat-template-file", QWEN25)
    else:
        print("skip: Qwen 2.5's template is absent (the lazy-grammar checks)")
    if QWQ:
        serve(run_think, "--chat-template-file", QWQ)
    for name, path, marker in (("minimax-m2", MINIMAX, "<minimax:tool_call>"),
                               ("seed-oss", SEED, "<seed:tool_call>")):
        if path:
            serve(lambda c: run_xml(c, name, marker), "--chat-template-file", path)
        else:
            print(f"skip: the {name} template is absent (its XML call checks)")
    print(f"{T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


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


# A tool whose schema the few-shot history below breaks: its calls pass
# {"location", "when"}, the schema wants {"city" of three, "days" 1-3}.
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city", "days"],
                   "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 3}}}}}


def few_shot(question):
    """Four questions each answered by a call, then question: SmolLM2 copies
    the pattern and opens its reply with the format's marker."""
    out = []
    for i, city in enumerate(["Rome", "Oslo", "Cairo", "Lima"]):
        args = json.dumps({"location": city, "when": "today"})
        out += [{"role": "user", "content": f"Weather in {city}?"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"call_{i}", "type": "function",
                     "function": {"name": "get_weather", "arguments": args}}]}]
    return out + [{"role": "user", "content": question}]


def schema_errors(calls, tool):
    """Why the calls do not fit tool's schema ([] when they all do)."""
    errs = []
    for c in calls:
        if c.function.name != tool["function"]["name"]:
            errs.append(f"name {c.function.name}")
            continue
        try:
            jsonschema.validate(json.loads(c.function.arguments), tool["function"]["parameters"])
        except (ValueError, jsonschema.ValidationError) as e:
            errs.append(str(e).splitlines()[0])
    return errs


def run_lazy(client, marker="<tool_call>", extra=None):
    """tool_choice "auto": the grammar switches on at the format's opening
    marker. Unconstrained (tool_choice "none") the model writes the marker
    and then the history's arguments, which break the schema; with "auto"
    the same reply becomes a call whose arguments validate. A reply without
    the marker stays free text."""
    kw = dict(model="m", messages=few_shot("Weather in Paris?"), tools=[WEATHER], temperature=0,
              max_tokens=120, extra_body=extra)
    free = client.chat.completions.create(**kw, tool_choice="none").choices[0]
    text = free.message.content or ""
    bad_args = True
    try:
        jsonschema.validate(json.loads(text[text.index("{"):text.rindex("}") + 1])["arguments"],
                            WEATHER["function"]["parameters"])
        bad_args = False
    except (ValueError, KeyError, jsonschema.ValidationError):
        pass
    # What the model writes unconstrained is its own choice: the ASan build's
    # logits differ in the last bits (another -O level), so there only the
    # constrained properties below are asserted.
    check(f"lazy {marker}: unconstrained, the model opens a call whose arguments break the schema",
          SAN or (marker in text and bad_args), repr(text))
    r = client.chat.completions.create(**kw, tool_choice="auto").choices[0]
    calls = r.message.tool_calls or []
    check(f"lazy {marker}: auto: the call is constrained from its marker on and validates",
          (SAN and not calls) or (calls and r.finish_reason == "tool_calls" and
                                  not schema_errors(calls, WEATHER) and
                                  not (r.message.content or "").strip()),
          f"{r} {schema_errors(calls, WEATHER)}")
    with client.beta.chat.completions.stream(**kw, tool_choice="auto") as st:
        fm = st.get_final_completion().choices[0].message
    check(f"lazy {marker}: auto, streamed: the same calls",
          [(c.function.name, c.function.arguments) for c in (fm.tool_calls or [])] ==
          [(c.function.name, c.function.arguments) for c in calls], f"{fm}")
    r = client.chat.completions.create(**dict(kw, messages=[{"role": "user", "content": "Say hello."}]),
                                       tool_choice="auto").choices[0]
    check(f"lazy {marker}: auto, a reply without the marker is free text ending by itself",
          SAN or (r.finish_reason == "stop" and not r.message.tool_calls and r.message.content and
                  marker not in r.message.content), str(r))
    log = T.server.logtext()
    check(f"lazy {marker}: no call left unconstrained", "does not fit its grammar" not in log,
          log[-2000:])


# Parameters of every kind an XML call format writes: raw strings (free,
# enum, bounded), an integer range, a boolean, an object, an optional one.
BOOKING = {"type": "function", "function": {
    "name": "book_room", "description": "Book a hotel room",
    "parameters": {"type": "object", "required": ["city", "nights", "guest", "breakfast", "extras"],
                   "properties": {
                       "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
                       "nights": {"type": "integer", "minimum": 1, "maximum": 14},
                       "guest": {"type": "string", "minLength": 2, "maxLength": 40},
                       "breakfast": {"type": "boolean"},
                       "extras": {"type": "object", "required": ["view"],
                                  "properties": {"view": {"enum": ["sea", "city"]}},
                                  "additionalProperties": False},
                       "note": {"type": "string", "description": "optional"}}}}}


def run_xml(client, name, marker):
    """An XML call format (MiniMax M2, Seed-OSS) on SmolLM2: tool_choice
    "required" and a named function are enforced by the grammar of the
    format (raw strings, JSON for the rest), so the parsed arguments
    validate; the stream assembles the same calls; a string parameter with
    a pattern (which raw text cannot enforce) is refused with a 400."""
    msgs = [{"role": "user", "content": "Book two nights in Tokyo for Ada, breakfast included."}]
    for choice in ("required", {"type": "function", "function": {"name": "book_room"}}):
        kw = dict(model="m", messages=msgs, tools=[WEATHER, BOOKING], tool_choice=choice,
                  temperature=0, max_tokens=200, parallel_tool_calls=False)
        r = client.chat.completions.create(**kw)
        calls = r.choices[0].message.tool_calls or []
        tool = {c["function"]["name"]: c for c in (WEATHER, BOOKING)}
        errs = [e for c in calls for e in schema_errors([c], tool.get(c.function.name, BOOKING))]
        check(f"{name}: tool_choice {choice}: a call in {marker} whose arguments validate",
              calls and r.choices[0].finish_reason == "tool_calls" and not errs and
              (choice == "required" or all(c.function.name == "book_room" for c in calls)),
              f"{r} {errs}")
        with client.beta.chat.completions.stream(**kw) as st:
            fm = st.get_final_completion().choices[0].message
        check(f"{name}: tool_choice {choice}: the stream assembles the same calls",
              [(c.function.name, c.function.arguments) for c in (fm.tool_calls or [])] ==
              [(c.function.name, c.function.arguments) for c in calls], f"{fm}")
    pat = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}}}}}
    bad(client, f"{name}: 400: a raw string's pattern cannot be enforced", "tools", tools=[pat],
        tool_choice="required")


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
