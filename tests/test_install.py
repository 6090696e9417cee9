#!/usr/bin/env python3
"""`cmake --install` and docs/API.md's programs against the installed tree.

    python3 tests/test_install.py BUILD_DIR

Installs BUILD_DIR into a temporary prefix, checks what lands there (both
binaries, libferrox.so with its SONAME link, libferrox.a, ferrox.h,
ferrox.pc), runs the installed `ferrox --help` and `ferrox serve --help`
(which runs the installed ferrox-serve), then extracts every program of
docs/API.md (a ```c block after `<!-- example: NAME -->`), compiles each
with `-std=c11 -Wall -Wextra -Werror` and `pkg-config --cflags --libs
ferrox` from the installed tree only (one also with `--static`), and runs
it on SmolLM2-135M-Instruct, checking its output against the installed
`ferrox` command that does the same job:
- load: architecture and vocabulary size as `ferrox inspect`;
- tokenize: ids as `ferrox tokenize --ids`, the text back unchanged;
- generate: the greedy text of `ferrox run --temp 0`;
- batch: each prompt's text as `generate` gives it alone;
- sample: `ferrox run --seed 42 --generation-config none`'s text;
- chat: the prompt as `ferrox render-template`, the answer as `ferrox run`
  on that prompt;
- embed: each text's mean-pooled vector as `ferrox embed --pooling mean`.
Exit 77 (skip) without the model, cc or pkg-config, unless
FX_REQUIRE_MODELS=1. Prints `N passed, N failed`.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
passed = failed = 0


def check(cond, what, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}" + (f"\n     {detail}" if detail else ""))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def skip(why):
    if os.environ.get("FX_REQUIRE_MODELS") == "1":
        print(f"FAIL {why} (FX_REQUIRE_MODELS=1)")
        sys.exit(1)
    print(f"skip: {why}")
    sys.exit(77)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = os.path.abspath(sys.argv[1])
    model = os.path.join(os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models")),
                         "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(model):
        skip(f"{model} missing")
    for tool in ("cc", "pkg-config"):
        if not shutil.which(tool):
            skip(f"{tool} not found")
    prefix = tempfile.mkdtemp(prefix="ferrox-install-")
    try:
        return body(build, prefix, model)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def body(build, prefix, model):
    r = run(["cmake", "--install", build, "--prefix", prefix])
    check(r.returncode == 0, "cmake --install", r.stderr[-2000:])
    if r.returncode:
        return 1
    pcdirs = glob.glob(os.path.join(prefix, "lib*", "pkgconfig"))
    check(len(pcdirs) == 1, "one pkgconfig folder", str(pcdirs))
    libdir = os.path.dirname(pcdirs[0])
    for rel in ("bin/ferrox", "bin/ferrox-serve", "include/ferrox.h"):
        check(os.path.isfile(os.path.join(prefix, rel)), f"installed {rel}")
    for name in ("libferrox.so", "libferrox.so.0", "libferrox.a", "pkgconfig/ferrox.pc",
                 "pkgconfig/ferrox-static.pc"):
        check(os.path.exists(os.path.join(libdir, name)), f"installed {os.path.basename(libdir)}/{name}")
    ferrox = os.path.join(prefix, "bin", "ferrox")
    r = run([ferrox, "--help"])
    check(r.returncode == 0 and "serve" in r.stdout, "installed ferrox --help")
    r = run([ferrox, "serve", "--help"])
    check(r.returncode == 0 and "--port" in r.stdout + r.stderr,
          "installed `ferrox serve --help` runs the installed ferrox-serve", r.stderr[-500:])

    env = dict(os.environ, PKG_CONFIG_PATH=pcdirs[0])
    flags = run(["pkg-config", "--cflags", "--libs", "ferrox"], env=env)
    sflags = run(["pkg-config", "--cflags", "--libs", "ferrox-static"], env=env)
    check(flags.returncode == 0 and prefix in flags.stdout, "pkg-config points into the prefix",
          flags.stdout + flags.stderr)
    check(sflags.returncode == 0 and "libferrox.a" in sflags.stdout, "pkg-config ferrox-static: the archive",
          sflags.stdout + sflags.stderr)

    doc = open(os.path.join(ROOT, "docs", "API.md"), encoding="utf-8").read()
    examples = dict(re.findall(r"<!-- example: (\w+) -->\n```c\n(.*?)```", doc, re.S))
    want = {"load", "tokenize", "generate", "batch", "sample", "chat", "embed"}
    check(want <= set(examples), "docs/API.md has every example", str(sorted(examples)))
    work = os.path.join(prefix, "work")
    os.makedirs(work)
    bins = {}
    for name, src in examples.items():
        c = os.path.join(work, name + ".c")
        with open(c, "w", encoding="utf-8") as f:
            f.write(src)
        exe = os.path.join(work, name)
        r = run(["cc", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", c, "-o", exe]
                + flags.stdout.split() + [f"-Wl,-rpath,{libdir}"], env=env)
        check(r.returncode == 0, f"{name}.c compiles against the installed tree", r.stderr[-2000:])
        if r.returncode == 0:
            bins[name] = exe
    if "generate" in examples:
        # The archive: the program carries the library; no libferrox.so needed.
        exe = os.path.join(work, "generate_static")
        r = run(["cc", "-std=c11", "-O1", os.path.join(work, "generate.c"), "-o", exe] + sflags.stdout.split(),
                env=env)
        check(r.returncode == 0, "generate.c links statically (pkg-config ferrox-static)", r.stderr[-2000:])
        if r.returncode == 0:
            ldd = run(["ldd", exe])
            check("libferrox" not in ldd.stdout, "the static program needs no libferrox.so", ldd.stdout)
            bins["generate_static"] = exe

    def ex(name, *args):
        r = run([bins[name], *args], cwd=work)
        if r.returncode:
            print(r.stderr[-2000:])
        return r

    def cli(*args):
        return run([ferrox, *args], cwd=work)

    if "load" in bins:
        r = ex("load", model)
        info = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
        ins = cli("inspect", "-m", model).stdout
        arch = re.search(r"^architecture:\s+(\S+)", ins, re.M)
        check(r.returncode == 0 and arch and info.get("architecture") == arch.group(1)
              and info.get("vocabulary") == "49152", "load: architecture and vocabulary", r.stdout)
    if "tokenize" in bins:
        text = "Hello world, ferrox! 1234 héllo"
        r = ex("tokenize", model, text)
        lines = r.stdout.split("\n")
        ids = cli("tokenize", "-m", model, "-p", text, "--ids").stdout.strip()
        check(r.returncode == 0 and "[" + lines[0].replace(",", ", ") + "]" == ids,
              "tokenize: ids as `ferrox tokenize --ids`", f"{lines[0]} vs {ids}")
        check(len(lines) > 1 and lines[1] == text, "tokenize: the text comes back", repr(lines[1:2]))
    prompts = ["The capital of France is", "Once upon a time", "def fibonacci(n):"]
    alone = {}
    if "generate" in bins:
        for p in prompts:
            r = ex("generate", model, p, "24")
            alone[p] = r.stdout
            ref = cli("run", "-m", model, "-p", p, "-n", "24", "--temp", "0").stdout
            check(r.returncode == 0 and r.stdout == ref and len(r.stdout.strip()) > 10,
                  f"generate {p!r}: `ferrox run --temp 0`'s text", f"{r.stdout!r} vs {ref!r}")
        if "generate_static" in bins:
            r = ex("generate_static", model, prompts[0], "24")
            check(r.returncode == 0 and r.stdout == alone[prompts[0]], "the static build: same text")
    if "batch" in bins and alone:
        r = ex("batch", model, "24", *prompts)
        parts = re.split(r"^== sequence (\d+)\n", r.stdout, flags=re.M)
        got = dict(zip(parts[1::2], parts[2::2]))
        for i, p in enumerate(prompts):
            check(r.returncode == 0 and got.get(str(i)) == alone[p],
                  f"batch: sequence {i} as alone", f"{got.get(str(i))!r} vs {alone[p]!r}")
    if "sample" in bins:
        for seed in ("42", "7"):
            r = ex("sample", model, prompts[1], "32", seed)
            ref = cli("run", "-m", model, "-p", prompts[1], "-n", "32", "--seed", seed,
                      "--generation-config", "none").stdout
            check(r.returncode == 0 and r.stdout == ref, f"sample seed {seed}: `ferrox run --seed`'s text",
                  f"{r.stdout!r} vs {ref!r}")
    if "chat" in bins:
        msgs = [{"role": "system", "content": "You are brief."},
                {"role": "user", "content": "Name three colours."}]
        mf = os.path.join(work, "messages.json")
        with open(mf, "w") as f:
            json.dump(msgs, f)
        r = ex("chat", model, json.dumps(msgs))
        rendered = cli("render-template", "-m", model, "--messages", mf, "--add-generation-prompt").stdout
        check(r.returncode == 0 and r.stdout.startswith(rendered) and len(rendered) > 20,
              "chat: the prompt as `ferrox render-template`", f"{r.stdout[:200]!r} vs {rendered[:200]!r}")
        answer = r.stdout[len(rendered):]
        ref = cli("run", "-m", model, "-p", rendered, "-n", "256", "--temp", "0").stdout
        check(answer == ref and len(answer.strip()) > 3, "chat: the answer as `ferrox run` on that prompt",
              f"{answer!r} vs {ref!r}")
    if "embed" in bins:
        texts = ["The cat sat on the mat.", "Ships sail."]
        r = ex("embed", model, *texts)
        got = [[float(x) for x in line.split(",")] for line in r.stdout.split()]
        ref = json.loads(cli("embed", "-m", model, "-p", "\n".join(texts), "--pooling", "mean",
                             "--embd-output-format", "array").stdout or "[]")
        check(r.returncode == 0 and len(got) == 2 and got == ref and len(got[0]) == 576,
              "embed: `ferrox embed --pooling mean`'s vectors", r.stderr[-500:])
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
