#!/usr/bin/env python3
"""llama.cpp's own renderings of its built-in chat templates, for
tests/test_chat_builtin.c (ferrox's built-ins, src/chat/templates.c, must
give the same bytes).

Run by hand (CI does not: it has no llama.cpp) with a llama.cpp build:

    scripts/make-chat-builtin-refs.py [LLAMA_CPP_SRC [LLAMA_LIB_DIR]]

defaults: /work/oracle/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp and
/work/oracle/llama-build-noamx/bin. It compiles scripts/llama-chat-ref.c
against llama.h and libllama (into a temporary directory, never the repo),
calls llama_chat_apply_template(NAME, ...) through it for every name and
conversation below, with add_generation_prompt (add_ass) off and on, and
writes tests/data/chat/builtin_refs.json:
    {"llama_cpp": SOURCE DIR, "cases": [{"name", "conversation",
     "messages_json", "agp", "expect"}]}
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/oracle/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp"
LIB = sys.argv[2] if len(sys.argv) > 2 else "/work/oracle/llama-build-noamx/bin"

# ferrox's built-in names (llama.cpp's own; "mistral" is not one of its
# names but llama.cpp accepts it: its detection sends it to llama2).
NAMES = [
    "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral",
    "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken",
    "phi3", "phi4", "falcon3", "zephyr", "monarch", "gemma", "orion", "openchat", "vicuna",
    "vicuna-orca", "deepseek", "deepseek2", "deepseek3", "command-r", "llama3", "chatglm3",
    "chatglm4", "exaone3",
]

S, U, A = "system", "user", "assistant"
CONVERSATIONS = {
    "user": [(U, "Hello!")],
    "system_user": [(S, "You are a helpful assistant."), (U, "What is 2+2?")],
    "multi_turn": [(S, "Be brief."), (U, "Hi"), (A, "Hello! How can I help?"), (U, "Tell me a joke.")],
    "ends_with_assistant": [(U, "Q1"), (A, "A1"), (U, "Q2"), (A, "A2")],
    "whitespace": [(S, "  Be\tterse.\n"), (U, "\n hi there \t"), (A, " \x0b\x0canswer\r\n "), (U, "again ")],
    "two_systems": [(S, "Rule one."), (S, " Rule two."), (U, "Go")],
    "unicode": [(U, "h\u00e9llo, \u65e5\u672c\u8a9e \U0001f680 <|im_start|>"), (A, "\u00e7a va \u2713")],
    # whitespace that Python's str.strip() removes and C's isspace() does not
    "unicode_space_edges": [(U, "\u00a0hi\u00a0"), (A, "\u2003ok\u3000"), (U, "\x1cq\x1f")],
    "tool_role": [(U, "Weather?"), (A, "Calling."), ("tool", '{"temp": 21}'), (U, "Thanks")],
    "empty": [(S, ""), (U, ""), (A, "")],
    "assistant_first": [(A, "I start."), (U, "ok")],
    "system_only": [(S, "Only a system prompt.")],
}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "llama-chat-ref")
        subprocess.run(["cc", "-O1", "-Wall", "-I" + os.path.join(SRC, "include"),
                        "-I" + os.path.join(SRC, "ggml", "include"),
                        os.path.join(ROOT, "scripts", "llama-chat-ref.c"), "-L" + LIB, "-lllama",
                        "-Wl,-rpath," + LIB, "-o", exe], check=True)
        cases = []
        for name in NAMES:
            for conv, msgs in CONVERSATIONS.items():
                for agp in (False, True):
                    args = [exe, name, "1" if agp else "0"]
                    for role, content in msgs:
                        args += [role, content]
                    r = subprocess.run(args, capture_output=True)
                    if r.returncode:
                        sys.exit("llama.cpp refused %s (exit %d): %s" % (name, r.returncode, r.stderr))
                    cases.append({
                        "name": name, "conversation": conv, "agp": agp,
                        "messages_json": json.dumps([{"role": ro, "content": c} for ro, c in msgs],
                                                    ensure_ascii=False),
                        "expect": r.stdout.decode("utf-8"),
                    })
    out = os.path.join(ROOT, "tests", "data", "chat", "builtin_refs.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"llama_cpp": SRC, "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("%s: %d cases, %d templates" % (out, len(cases), len(NAMES)))


if __name__ == "__main__":
    main()
