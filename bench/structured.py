#!/usr/bin/env python3
"""Generation speed with a JSON schema against the same run unconstrained,
for ferrox and llama.cpp on the same GGUF file, in one run.

ferrox: `ferrox run -j SCHEMA` (greedy), then `ferrox run` without it for
the same number of tokens; both print generation tokens/s and the time
per token spent sampling and matching the grammar. llama.cpp: llama-server
/completion with "json_schema", then without it, n_predict equal; its
timings.predicted_per_second. Rounds alternate engines and modes (these
machines are noisy); the table gives medians and the constrained /
unconstrained ratio per engine.

usage: bench/structured.py [--rounds 3] [-t 2] [--ferrox-only] [MODEL.gguf ...]
       (default: both default models; llama.cpp from bench/llama.sh)
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FERROX = os.path.join(ROOT, "build", "bin", "ferrox")
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
DEFAULT = [os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf"),
           os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")]
PROMPT = "A JSON list of eight employees with their name, age, e-mail and department:\n"
SCHEMA = {
    "type": "array", "minItems": 8, "maxItems": 8,
    "items": {"type": "object", "additionalProperties": False,
              "required": ["name", "age", "email", "department"],
              "properties": {"name": {"type": "string", "maxLength": 24},
                             "age": {"type": "integer", "minimum": 18, "maximum": 70},
                             "email": {"type": "string", "format": "email"},
                             "department": {"enum": ["sales", "engineering", "finance", "support"]}}}}


def llama_bin(threads):
    out = subprocess.run(["bash", "-c", f'root="{ROOT}"; threads={threads}; source "{ROOT}/bench/llama.sh" >&2; echo "$llama_bin"'],
                         capture_output=True, text=True)
    d = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    return d if os.path.exists(os.path.join(d, "llama-server")) else None


def ferrox_run(model, threads, n, schema):
    args = [FERROX, "run", "-m", model, "-p", PROMPT, "--temp", "0", "-n", str(n), "-t", str(threads), "-c", "2048"]
    if schema:
        args += ["-j", json.dumps(schema)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise RuntimeError(r.stderr)
    m = re.search(r"generation (\d+) tokens, ([\d.]+) tokens/s", r.stderr)
    s = re.search(r"per token", r.stderr) and re.search(r"([\d.]+) ms per token", r.stderr)
    return int(m.group(1)), float(m.group(2)), float(s.group(1)) if s else float("nan"), r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, bindir, model, threads, extra=("-c", "2048", "-np", "1")):
        self.port = free_port()
        self.proc = subprocess.Popen([os.path.join(bindir, "llama-server"), "-m", model, "--port", str(self.port),
                                      "-t", str(threads), *extra],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("llama-server did not start")

    def get(self, path):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()

    def complete(self, n, schema):
        body = {"prompt": PROMPT, "n_predict": n, "temperature": 0, "cache_prompt": False}
        if schema:
            body["json_schema"] = schema
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        c.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
        d = json.loads(c.getresponse().read())
        return d["timings"]["predicted_n"], d["timings"]["predicted_per_second"], d["content"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--ferrox-only", action="store_true",
                    help="skip llama.cpp (finding or building it)")
    ap.add_argument("models", nargs="*", default=DEFAULT)
    a = ap.parse_args()
    bindir = None if a.ferrox_only else llama_bin(a.t)
    if not bindir:
        print("note: llama-server not found or built; ferrox only", file=sys.stderr)
    rows = []
    for model in a.models:
        fx = {"json": [], "free": [], "ms": []}
        ll = {"json": [], "free": []}
        srv = LlamaServer(bindir, model, a.t) if bindir else None
        try:
            for r in range(a.rounds):
                n, tps, ms, out = ferrox_run(model, a.t, 1024, SCHEMA)
                json.loads(out)  # the output is JSON (validated in tests/test_structured.py)
                fx["json"].append(tps)
                fx["ms"].append(ms)
                fx["free"].append(ferrox_run(model, a.t, n, None)[1])
                if srv:
                    ln, ltps, _ = srv.complete(1024, SCHEMA)
                    ll["json"].append(ltps)
                    ll["free"].append(srv.complete(ln, None)[1])
                print(f"{os.path.basename(model)} round {r + 1}: ferrox {fx['json'][-1]:.1f} / {fx['free'][-1]:.1f} t/s "
                      f"({n} tokens)" + (f", llama.cpp {ll['json'][-1]:.1f} / {ll['free'][-1]:.1f} t/s ({ln} tokens)" if srv else ""),
                      flush=True)
        finally:
            if srv:
                srv.stop()
        med = statistics.median
        row = [os.path.basename(model), f"{med(fx['json']):.1f}", f"{med(fx['free']):.1f}",
               f"{med(fx['json']) / med(fx['free']):.3f}", f"{med(fx['ms']):.3f}"]
        if ll["json"]:
            row += [f"{med(ll['json']):.1f}", f"{med(ll['free']):.1f}", f"{med(ll['json']) / med(ll['free']):.3f}",
                    f"{med(fx['json']) / med(ll['json']):.2f}"]
        rows.append(row)
    print("\n| model | ferrox json t/s | ferrox free t/s | ratio | ferrox sampling+grammar ms/token |"
          " llama.cpp json t/s | llama.cpp free t/s | ratio | ferrox/llama.cpp (json) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row + ["-"] * (9 - len(row))) + " |")


if __name__ == "__main__":
    main()
