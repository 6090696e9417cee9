#!/usr/bin/env python3
"""llama.cpp's command-line flags on `ferrox run`, `chat` and `serve`, end to end.

    python3 tests/test_cli_flags.py FERROX_BIN

Each flag is checked by its effect, greedy, on SmolLM2-135M-Instruct and
Gemma 3 270M:
- -f FILE gives the text -p gives for the same content (one trailing
  newline dropped); -e (the default) turns \\n into a newline: the prompt's
  token count is `ferrox tokenize`'s for the real newline, --no-escape's
  for the backslash;
- special-token text in a run prompt is read as control tokens (the count
  `tokenize --special` gives); -sp prints the end-of-turn token the plain
  run leaves out, and nothing else changes;
- -r stops at the reverse prompt: a prefix of the plain text ending at it;
- --ignore-eos runs past the end-of-generation token to -n, its text
  starting with the plain run's;
- a prompt starting with <bos> is not given a second one: the token count
  of the plain prompt, one notice on stderr, the same text;
- -b / -ub, --no-mmap, --mlock, -fa / -ngl change nothing in the text;
- an unknown flag is an error naming the closest known flag of that
  command; --help lists the new flags;
- `ferrox serve`: a raw /v1/completions prompt starting with <bos> gets
  the plain prompt's token count and text, one line in the log;
  --ignore-eos runs requests to max_tokens unless they say otherwise,
  -sp shows the end-of-turn token, --context-shift runs a request past
  its context;
- `ferrox --version` / `-v`: CMakeLists.txt's version, git's commit, the
  build type and the kernel sets with the one this CPU runs.
Exit 77 (skip) when a model is missing, unless FX_REQUIRE_MODELS=1.
Under ASan (FX_SANITIZE_RUN=1) the Gemma checks are left out.
Prints `N passed, N failed`.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

from pycheck import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
SAN = os.environ.get("FX_SANITIZE_RUN") == "1"
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
GEMMA = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
CHAT_PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"

check = Checks()


def ferrox(binary, *args, stdin=None):
    return subprocess.run([binary, *args], capture_output=True, text=True, input=stdin, timeout=300)


def run(binary, model, *extra, n=16):
    """stdout, stderr, prompt tokens, generated tokens, stop reason of a greedy run."""
    r = ferrox(binary, "run", "-m", model, "--temp", "0", "-n", str(n), "-t", "2", *extra)
    if r.returncode != 0:
        print(r.stderr)
    m = re.search(r"prompt (\d+) tokens.*generation (\d+) tokens", r.stderr)
    stop = re.search(r"stopped at (.*)", r.stderr)
    return (r.stdout, r.stderr, int(m.group(1)) if m else -1, int(m.group(2)) if m else -1,
            stop.group(1) if stop else None)


def n_tokens(binary, model, text, special):
    r = ferrox(binary, "tokenize", "-m", model, "-p", text, "--ids", *(["--special"] if special else []))
    return len(re.findall(r"-?\d+", r.stdout)) if r.returncode == 0 else -1


def test_version(binary):
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        version = re.search(r"project\(ferrox VERSION ([0-9.]+)", f.read()).group(1)
    for flag in ("--version", "-v"):
        r = ferrox(binary, flag)
        check(r.returncode == 0, f"{flag} exits 0")
        check(f"version: {version} " in r.stdout, f"{flag} names version {version}: {r.stdout!r}")
        check(re.search(r"(Release|Debug|RelWithDebInfo|MinSizeRel) build", r.stdout), f"{flag}: build type")
        m = re.search(r"kernel sets: ([a-z0-9 ]+) \(this CPU: ([a-z0-9]+)\)", r.stdout)
        check(m and "portable" in m.group(1).split() and m.group(2) in m.group(1).split(),
              f"{flag}: kernel sets and this CPU's among them: {r.stdout!r}")
        # a commit of this repository (HEAD's when the build is fresh; a
        # build older than the last commit names the one it was built at)
        c = re.search(r"commit ([0-9a-f]{7,40})(-dirty)?,", r.stdout)
        g = subprocess.run(["git", "-C", ROOT, "rev-parse", "--git-dir"], capture_output=True, text=True)
        if g.returncode == 0:
            ok = c and subprocess.run(["git", "-C", ROOT, "cat-file", "-e", c.group(1) + "^{commit}"],
                                      capture_output=True).returncode == 0
            check(ok, f"{flag}: a git commit of this repository: {r.stdout!r}")


def test_unknown(binary):
    for cmd, bad, want in (("run", "--top_p", "--top-p"), ("run", "--ignore-eso", "--ignore-eos"),
                           ("chat", "--tmep", "--temp"), ("serve", "--portt", "--port"),
                           ("run", "--ubatch", "--ubatch-size")):
        r = ferrox(binary, cmd, "-m", SMOL, bad, "1")
        check(r.returncode == 2 and f"'{bad}'" in r.stderr and f"did you mean {want}?" in r.stderr,
              f"{cmd} {bad}: error naming it and {want}: {r.stderr!r}")
    for cmd, bad, want in (("bench", "--n-prmpt", "--n-prompt"), ("grammar", "--regexx", "--regex"),
                           ("perplexity", "--chunk", "--chunks"), ("tokenize", "--spceial", "--special")):
        r = ferrox(binary, cmd, bad)
        check(r.returncode == 2 and f"did you mean {want}?" in r.stderr, f"{cmd} {bad}: {r.stderr!r}")
    r = ferrox(binary, "srve")
    check(r.returncode == 2 and "unknown command 'srve'; did you mean serve?" in r.stderr,
          f"an unknown command names the nearest: {r.stderr[:80]!r}")
    r = ferrox(binary, "run", "-m", SMOL, "--frobnicate-widely")
    check(r.returncode == 2 and "'--frobnicate-widely'" in r.stderr and "did you mean" not in r.stderr,
          f"a far flag: named, nothing suggested: {r.stderr!r}")
    r = ferrox(binary, "run", "-m", SMOL, "-cnv")
    check(r.returncode == 2 and "ferrox chat" in r.stderr and "did you mean" not in r.stderr,
          f"a llama.cpp flag ferrox lacks: what to do instead, no misleading suggestion: {r.stderr!r}")
    r = ferrox(binary, "serve", SMOL)
    check(r.returncode == 2 and "-m MODEL" in r.stderr, f"a positional argument: use -m: {r.stderr!r}")
    r = ferrox(binary, "run", "-m", SMOL, "-p", "x", "-fa", "sometimes")
    check(r.returncode == 2 and "on, off or auto" in r.stderr, f"-fa with a bad value: {r.stderr!r}")
    for cmd in ("run", "chat", "serve"):
        h = ferrox(binary, cmd, "--help").stdout
        for flag in ("-b, --batch-size", "-ub, --ubatch-size", "--no-mmap", "--mlock", "-fa", "-ngl",
                     "--no-warmup", "-sp"):
            check(flag in h, f"{cmd} --help lists {flag}")
    h = ferrox(binary, "run", "--help").stdout
    for flag in ("-f, --file", "-e, --escape", "-r, --reverse-prompt", "--ignore-eos", "--context-shift"):
        check(flag in h, f"run --help lists {flag}")


def test_smol(binary):
    plain, err, n_p, n_g, stop = run(binary, SMOL, "-p", CHAT_PROMPT, n=48)
    check(stop == "an end-of-generation token" and 0 < n_g < 48, f"plain chat reply ends at EOG: {stop} {n_g}")
    # the prompt's special-token text is parsed as control tokens
    check(n_p == n_tokens(binary, SMOL, CHAT_PROMPT, True) and
          n_p < n_tokens(binary, SMOL, CHAT_PROMPT, False),
          f"run parses special tokens in the prompt ({n_p} tokens)")
    sp, _, _, n_g2, _ = run(binary, SMOL, "-p", CHAT_PROMPT, "-sp", n=48)
    check("<|im_end|>" not in plain and sp == plain.rstrip("\n") + "<|im_end|>\n",
          f"-sp shows the end-of-turn token: {plain!r} vs {sp!r}")
    ign, _, _, n_g3, stop3 = run(binary, SMOL, "-p", CHAT_PROMPT, "--ignore-eos", n=n_g + 12)
    check(n_g3 == n_g + 12 and stop3 == "the -n limit" and ign.startswith(plain.rstrip("\n")) and
          len(ign) > len(plain), f"--ignore-eos runs to -n: {n_g3} tokens, {ign!r}")
    # -r: a word from the middle of the plain reply
    words = plain.split()
    if len(words) >= 3:
        rev = " " + words[2]
        out, _, _, n_g4, stop4 = run(binary, SMOL, "-p", CHAT_PROMPT, "-r", rev, n=48)
        cut = plain.find(rev) + len(rev)
        check(stop4 == "a reverse prompt" and n_g4 < n_g and out.rstrip("\n").endswith(plain[:cut][-len(rev):])
              or (stop4 == "a reverse prompt" and rev in out[-len(rev) - 3:]),
              f"-r {rev!r} stops there: {out!r} ({stop4})")
        check(plain.startswith(out.rstrip("\n")), f"-r: a prefix of the plain reply: {out!r}")
    else:
        check(False, f"plain reply too short for the -r check: {plain!r}")
    # -b / -ub, -fa / -ngl, --no-mmap, --mlock: the same text
    for extra in (("-b", "5", "-ub", "3", "-fa", "on", "-ngl", "99", "--no-warmup"), ("-ub", "1"),
                  ("--no-mmap", "--mlock"), ("-fa", "off", "-ngl", "0", "-tb", "2")):
        out, e, *_ = run(binary, SMOL, "-p", CHAT_PROMPT, *extra, n=48)
        check(out == plain, f"{' '.join(extra)}: same text: {out!r}")
        if "on" in extra:
            check(e.count("no GPU backend") == 1 and "-ngl and -fa" in e, f"-fa/-ngl: one notice naming both: {e!r}")
        if "off" in extra:
            check("GPU" not in e, f"-fa off / -ngl 0 ask nothing of a GPU: no notice: {e!r}")
        if "--mlock" in extra:
            check("warning" not in e or "ulimit" in e, f"--mlock: locked, or a warning naming the limit: {e!r}")
    # chat: -p is the first message: the reply run gives for the prompt
    # the model's template renders (render-template)
    question = "What is the capital of France?"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write('[{"role": "user", "content": "%s"}]' % question)
        msgs = f.name
    try:
        rendered = ferrox(binary, "render-template", "-m", SMOL, "--messages", msgs,
                          "--add-generation-prompt").stdout
    finally:
        os.unlink(msgs)
    ref, *_ = run(binary, SMOL, "-p", rendered, "--no-escape", n=48)
    r = ferrox(binary, "chat", "-m", SMOL, "--temp", "0", "-n", "48", "-t", "2", "-p", question, stdin="")
    check(r.returncode == 0 and r.stdout.strip() == ref.strip() and ref.strip(),
          f"chat -p: the reply run gives for the rendered prompt: {r.stdout!r} vs {ref!r}")


def test_gemma(binary):
    text = "The capital of France is"
    plain, err, n_p, _, _ = run(binary, GEMMA, "-p", text)
    bos, err_b, n_pb, _, _ = run(binary, GEMMA, "-p", "<bos>" + text)
    check(n_pb == n_p and bos == plain, f"<bos> prompt: {n_pb} tokens as the plain {n_p}, same text")
    check(err_b.count("already starts with BOS") == 1 and "already starts with BOS" not in err,
          f"one BOS notice: {err_b!r}")
    check(n_tokens(binary, GEMMA, "<bos>" + text, True) == n_p + 1, "tokenize shows the doubled BOS run avoids")
    two = "Line one\nLine two"
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(two + "\n")
        path = f.name
    try:
        by_p, _, n1, _, _ = run(binary, GEMMA, "-p", two)
        by_f, _, n2, _, _ = run(binary, GEMMA, "-f", path)
        check(by_f == by_p and n1 == n2, f"-f gives -p's text: {by_f!r} vs {by_p!r}")
        esc, _, n3, _, _ = run(binary, GEMMA, "-p", "Line one\\nLine two")
        check(esc == by_p and n3 == n1 == n_tokens(binary, GEMMA, two, False),
              f"-e (default): \\n is a newline ({n3} tokens)")
        _, _, n4, _, _ = run(binary, GEMMA, "-p", "Line one\\nLine two", "--no-escape")
        check(n4 == n_tokens(binary, GEMMA, "Line one\\nLine two", False) and n4 != n1,
              f"--no-escape keeps the backslash ({n4} tokens)")
    finally:
        os.unlink(path)
    out, *_ = run(binary, GEMMA, "-p", text, "-b", "2", "-ub", "1")
    check(out == plain, f"Gemma -b 2 -ub 1: same text: {out!r}")


def test_serve(binary):
    """The server's raw /v1/completions prompt gets no second BOS (one log
    line); -ub, -b and -sp are taken."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import server_harness as h
    h.BIN = binary
    with h.Server(GEMMA, "-ub", "64", "-b", "256", "--no-warmup") as srv:
        usage, texts = [], []
        for prompt in ("<bos>The capital of France is", "The capital of France is"):
            st, _, body = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": 4, "temperature": 0})
            d = json.loads(body) if st == 200 else {}
            usage.append(d.get("usage", {}).get("prompt_tokens", -1))
            texts.append(d.get("choices", [{}])[0].get("text"))
        log = srv.logtext()
    check(usage[0] == usage[1] > 0 and texts[0] == texts[1],
          f"serve: a <bos> prompt has the plain prompt's tokens and text: {usage} {texts}")
    check(log.count("already starts with BOS") == 1, "serve: one BOS line in the log")
    # --ignore-eos: past the end of turn unless the request says otherwise;
    # -sp: the end-of-turn token in the text
    # --context-shift: a request runs past its 64-token context to max_tokens
    with h.Server(SMOL, "--ignore-eos", "-sp", "--ctx-size", "64", "--context-shift") as srv:
        st, _, body = srv.post("/v1/completions", {"prompt": "The history of the city of Rome",
                                                    "max_tokens": 150, "temperature": 0})
        d = json.loads(body) if st == 200 else {}
        u = d.get("usage", {})
        check(u.get("completion_tokens") == 150 and u.get("prompt_tokens", 99) < 20 and
              d["choices"][0]["finish_reason"] == "length" and "refused" not in srv.logtext(),
              f"serve --context-shift: 150 tokens past a 64-token context: {u}")
        got = []
        for extra in ({}, {"ignore_eos": False}):
            st, _, body = srv.post("/v1/completions", {"prompt": CHAT_PROMPT, "max_tokens": 60,
                                                        "temperature": 0, **extra})
            d = json.loads(body) if st == 200 else {}
            c = d.get("choices", [{}])[0]
            got.append((c.get("text") or "", c.get("finish_reason"), d.get("usage", {}).get("completion_tokens")))
    (past, why, n), (own, why2, n2) = got
    check(why == "length" and n == 60 and "<|im_end|>" in past,
          f"serve --ignore-eos -sp: on to max_tokens, the end of turn shown: {got[0]}")
    check(why2 == "stop" and n2 < 60 and past.startswith(own) and own.strip(),
          f"serve: a request's ignore_eos false stops at the end of turn: {got[1]}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    missing = [p for p in (SMOL, GEMMA) if not os.path.exists(p)]
    if missing:
        print("missing:", *missing)
        return 1 if REQUIRE else 77
    test_version(binary)
    test_unknown(binary)
    test_smol(binary)
    if not SAN:
        test_gemma(binary)
        test_serve(binary)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
