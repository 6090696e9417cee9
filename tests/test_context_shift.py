#!/usr/bin/env python3
"""`ferrox run --context-shift` (llama.cpp's flag) end to end.

    python3 tests/test_context_shift.py FERROX_BIN

On SmolLM2-135M (full attention) and Gemma 3 270M (sliding layers, a
per-layer RoPE base) with -c 64, greedy:
- without the flag, generation stops at the full context after
  n_ctx - n_prompt + 1 tokens;
- with it, generation runs to -n (150 tokens, past 64), making the number
  of shifts llama.cpp's rule gives (keep n_keep, drop half of the rest),
  and its text up to the first shift is the plain run's, byte for byte.
Exit 77 (skip) when a model is missing, unless FX_REQUIRE_MODELS=1.
Prints `N passed, N failed`.
"""
import os
import re
import subprocess
import sys

from pycheck import Checks

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
CTX, N_PREDICT = 64, 150
PROMPT = "The history of the city of Rome"

check = Checks()


def run(binary, model, *extra):
    r = subprocess.run([binary, "run", "-m", model, "-p", PROMPT, "-c", str(CTX), "-n", str(N_PREDICT),
                        "--temp", "0", "-t", "2", *extra], capture_output=True, timeout=600)
    err = r.stderr.decode("utf-8", "replace")
    m = re.search(r"prompt (\d+) tokens.*generation (\d+) tokens", err)
    shifts = re.search(r"(\d+) context shifts \(keeping (\d+) tokens\)", err)
    stop = re.search(r"stopped at (.*)", err)
    return (r.returncode, r.stdout, int(m.group(1)) if m else -1, int(m.group(2)) if m else -1,
            int(shifts.group(1)) if shifts else 0, int(shifts.group(2)) if shifts else -1,
            stop.group(1) if stop else "", err)


def expected_shifts(n_prompt, n_keep):
    """The shifts run.c's loop makes: before each decode at a full context."""
    n_past, shifts = n_prompt, 0
    for _ in range(N_PREDICT - 1):  # every emitted token is decoded but the last (-n reached)
        if n_past >= CTX:
            n_past -= (n_past - n_keep) // 2
            shifts += 1
        n_past += 1
    return shifts


def check_model(binary, name, path, keep):
    rc, plain, n_prompt, n_gen, _, _, stop, err = run(binary, path)
    check(rc == 0, f"{name}: plain run failed: {err[-300:]}")
    check(stop == "a full context" and n_gen == CTX - n_prompt + 1,
          f"{name}: plain run stopped at '{stop}' after {n_gen} tokens, want a full context after "
          f"{CTX - n_prompt + 1}")
    rc, shifted, n_prompt2, n_gen2, shifts, n_keep, stop2, err2 = run(binary, path, "--context-shift",
                                                                       "--keep", str(keep))
    check(rc == 0, f"{name}: --context-shift run failed: {err2[-300:]}")
    want = expected_shifts(n_prompt2, n_keep)
    check(n_gen2 == N_PREDICT and stop2 == "the -n limit",
          f"{name}: --context-shift generated {n_gen2} tokens, stopped at '{stop2}'")
    check(shifts == want and shifts >= 2, f"{name}: {shifts} context shifts, want {want}")
    check(0 < n_keep <= n_prompt2, f"{name}: kept {n_keep} of a {n_prompt2}-token prompt")
    head = plain.rstrip(b"\n")
    check(shifted.startswith(head) and len(shifted) > len(head) + 40,
          f"{name}: the shifted run's text does not begin with the plain run's, or stops short")
    print(f"{name}: -c {CTX}, prompt {n_prompt2} tokens, keep {n_keep}: plain run {n_gen} tokens; "
          f"--context-shift {n_gen2} tokens with {shifts} shifts")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    models = [("SmolLM2-135M", "SmolLM2-135M-Instruct.Q4_1.gguf", 4),
              ("Gemma-3-270M", "gemma-3-270m-q4_k_m.gguf", 0)]
    ran = 0
    for name, file, keep in models:
        path = os.path.join(MODELS, file)
        if not os.path.exists(path):
            print(f"note: {path} absent; skipped")
            if REQUIRE:
                check(False, f"{path} missing (run scripts/get-model.sh)")
            continue
        check_model(sys.argv[1], name, path, keep)
        ran += 1
    if check.summary():
        return 1
    return 0 if ran else 77


if __name__ == "__main__":
    sys.exit(main())
