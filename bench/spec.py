#!/usr/bin/env python3
"""Speculative decoding (ngram-simple, prompt lookup) against plain decoding:
ferrox and llama.cpp on the same GGUF files, prompts and settings, in one run.
bench/spec.sh finds the binaries and models and calls this; see its header
for the table and the exact command.

    bench/spec.py --ferrox build/bin/ferrox --llama-server DIR/llama-server
                  --model smollm2-135m=PATH [--model gemma3-270m=PATH ...]
                  [-t 2] [-n 128] [--rounds 5] [--prompts edit,code,story]
                  [--size-n 3] [--size-m 16] [--draft-max 16] [--raw FILE]

For each model two llama-servers run side by side (an idle one sleeps): one
plain, one with --spec-type ngram-simple; speculation is a server setting
(no per-request switch). For each prompt, one warm-up request per server,
then --rounds rounds of the four runs (ferrox plain, ferrox spec, llama.cpp
plain, llama.cpp spec), the order rotated by one each round so that every
configuration takes every place. ferrox runs as `ferrox run` (a process per
run; its generation tokens/s from stderr leaves the load and the prompt
out); llama.cpp through POST /completion (n_predict, temperature 0,
cache_prompt false), its timings.predicted_per_second and, when it drafted,
timings.draft_n / draft_n_accepted.
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

# 1 (edit): a ~300-token passage and an instruction to repeat it with small
# edits, so the answer copies the passage: lookup should draft well.
PASSAGE = (
    "The lighthouse on Carrow Point was built in 1871 to guard the narrow channel between "
    "the headland and the Skerry Rocks, where more than forty ships had been lost in the "
    "previous half century. Its tower is made of granite blocks quarried on the island "
    "itself and rises thirty-two metres above the high-water mark. For almost a hundred "
    "years the light was kept by three families who lived in the cottages at the foot of "
    "the tower, taking turns to trim the wicks, wind the clockwork that turned the lens and "
    "record the weather every four hours in a leather-bound log. The original lens, a "
    "first-order Fresnel lens made in Paris, weighed nearly four tonnes and floated on a "
    "bath of mercury so that it could turn smoothly with very little force. In clear "
    "weather its beam could be seen from thirty kilometres away. In 1968 the light was "
    "converted to electricity, and in 1989 the last keepers left when the station was "
    "automated. Today the cottages house a small museum that displays the old log books, "
    "a collection of brass instruments and photographs of the keepers and their children. "
    "Visitors can climb the one hundred and twelve steps to the lantern room on summer "
    "afternoons, and on a calm day they can watch seals resting on the rocks below while "
    "fishing boats pass through the channel that the light still protects."
)
EDIT = ("Repeat the text above exactly, word for word, but write the numbers in words "
        "instead of digits.")

# 2 (code): a source file whose next function repeats the earlier pattern
# (raw text, no chat template).
CODE = '''import json
from dataclasses import dataclass


@dataclass
class Config:
    host: str = "localhost"
    port: int = 8080
    timeout: float = 30.0
    retries: int = 3
    verbose: bool = False


def parse_host(data: dict, config: Config) -> None:
    if "host" in data:
        if not isinstance(data["host"], str):
            raise ValueError("host must be a string")
        config.host = data["host"]


def parse_port(data: dict, config: Config) -> None:
    if "port" in data:
        if not isinstance(data["port"], int):
            raise ValueError("port must be an int")
        config.port = data["port"]


def parse_timeout(data: dict, config: Config) -> None:
    if "timeout" in data:
        if not isinstance(data["timeout"], float):
            raise ValueError("timeout must be a float")
        config.timeout = data["timeout"]


def parse_retries(data: dict, config: Config) -> None:
    if "retries" in data:
        if not isinstance(data["retries"], int):
            raise ValueError("retries must be an int")
        config.retries = data["retries"]


def parse_verbose(data: dict, config: Config) -> None:'''  # no "\n" after the ':' (with one,
# SmolLM2 closes a code block and explains the code instead of continuing)

# 3 (story): a free story, nothing to copy; a raw opening, not a chat turn
# (the Gemma 3 270M GGUF is the base model, without a chat template: asked
# for a story in a chat turn it echoes the request and repeats one token).
STORY = ("Once upon a time, a young fox named Pip found a small brass key under the roots "
         "of an old oak tree.")


def chat(model, user):
    """The model's chat template around one user turn, written out (both
    engines parse special tokens in the prompt text and add the BOS).
    Gemma 3 270M here is the base model; its turn markers still make it
    copy the passage."""
    if model.startswith("gemma"):
        return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"
    return (f"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            f"Hugging Face<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")


def prompt_text(model, kind):
    if kind == "edit":
        return chat(model, PASSAGE + "\n\n" + EDIT)
    if kind == "code":
        return CODE
    if kind == "story":
        return STORY
    raise SystemExit(f"unknown prompt {kind!r} (edit, code, story)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, name, argv, logdir):
        self.name, self.port = name, free_port()
        self.log = os.path.join(logdir, f"llama-server-{name}.log")
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(argv + ["--port", str(self.port)],
                                         stdout=f, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"llama-server {name} exited; see {self.log}:\n"
                                 + open(self.log).read()[-2000:])
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
                if ok:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise SystemExit(f"llama-server {name} did not become healthy; see {self.log}:\n"
                         + open(self.log).read()[-2000:])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def complete(self, text, n):
        body = json.dumps({"prompt": text, "n_predict": n, "temperature": 0,
                           "repeat_penalty": 1.0, "cache_prompt": False, "seed": 0})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        c.request("POST", "/completion", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status != 200:
            raise SystemExit(f"llama-server {self.name}: HTTP {r.status}: {data[:300]!r}")
        o = json.loads(data)
        t = o["timings"]
        return {"tps": t["predicted_per_second"], "gen": t["predicted_n"],
                "prompt": t["prompt_n"], "draft": t.get("draft_n", 0),
                "accepted": t.get("draft_n_accepted", 0), "text": o["content"],
                "stop": o.get("stop_type", "")}


FX_RE = re.compile(r"prompt (\d+) tokens, [\d.]+ tokens/s \| generation (\d+) tokens, "
                   r"([\d.]+) tokens/s(?: \| draft (\d+), accepted (\d+))?")


def run_ferrox(a, path, text, spec):
    argv = [a.ferrox, "run", "-m", path, "-p", text, "-n", str(a.n), "--temp", "0",
            "--repeat-penalty", "1", "-t", str(a.threads)]
    if spec:
        argv += spec_flags(a)
    p = subprocess.run(argv, capture_output=True, text=True)
    m = FX_RE.search(p.stderr)
    if p.returncode or not m:
        raise SystemExit(f"ferrox failed ({p.returncode}): {' '.join(argv[:4])} ...\n"
                         + p.stderr[-2000:])
    stop = re.search(r"stopped at (.*)", p.stderr)
    out = p.stdout[:-1] if p.stdout.endswith("\n") else p.stdout  # run prints a closing "\n"
    return {"tps": float(m.group(3)), "gen": int(m.group(2)), "prompt": int(m.group(1)),
            "draft": int(m.group(4) or 0), "accepted": int(m.group(5) or 0), "text": out,
            "stop": stop.group(1) if stop else ""}


def spec_flags(a):
    # the same spelling on both engines (ferrox takes llama.cpp's flags)
    return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.size_n),
            "--spec-ngram-simple-size-m", str(a.size_m), "--spec-draft-n-max", str(a.draft_max)]


CONFIGS = ("fx-plain", "fx-spec", "lc-plain", "lc-spec")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferrox", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompts", default="edit,code,story")
    ap.add_argument("--size-n", type=int, default=3)
    ap.add_argument("--size-m", type=int, default=16)
    ap.add_argument("--draft-max", type=int, default=16)
    ap.add_argument("--raw", help="write every run (texts included) as JSON here")
    ap.add_argument("--logdir", default="/tmp")
    a = ap.parse_args()

    def stop(sig, frame):  # so that `finally` stops the llama-servers
        raise SystemExit(f"stopped by signal {sig}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    prompts = a.prompts.split(",")
    for k in prompts:
        prompt_text("x", k)
    raw, rows, notes = [], [], []
    print(f"# speculative decoding (ngram-simple, size-n {a.size_n}, size-m {a.size_m}, "
          f"draft max {a.draft_max}): ferrox vs llama.cpp, {a.threads} threads, greedy, "
          f"-n {a.n}, median of {a.rounds} interleaved rounds, {time.strftime('%F', time.gmtime())}")
    print()
    print("| model | prompt | prompt tok | gen tok fx / lc | ferrox plain t/s | ferrox spec t/s "
          "| fx accepted / drafted | fx spec / plain | llama.cpp plain t/s | llama.cpp spec t/s "
          "| lc accepted / drafted | lc spec / plain | fx spec / lc spec | fx spec text = plain "
          "| lc spec text = plain |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| --- | --- |")
    sys.stdout.flush()
    for spec_m in a.model:
        name, path = spec_m.split("=", 1)
        base = [a.llama_server, "-m", path, "--host", "127.0.0.1", "-c", "4096", "-np", "1",
                "-t", str(a.threads), "-tb", str(a.threads)]
        servers = {}
        try:
            servers["lc-plain"] = Server(f"{name}-plain", base, a.logdir)
            servers["lc-spec"] = Server(f"{name}-spec", base + spec_flags(a), a.logdir)
            for kind in prompts:
                text = prompt_text(name, kind)
                for s in servers.values():  # warm-up
                    s.complete(text, min(a.n, 8))
                res = {c: [] for c in CONFIGS}
                for r in range(a.rounds):
                    order = CONFIGS[r % 4:] + CONFIGS[:r % 4]
                    for c in order:
                        if c.startswith("fx"):
                            o = run_ferrox(a, path, text, c == "fx-spec")
                        else:
                            o = servers[c].complete(text, a.n)
                        res[c].append(o)
                        raw.append(dict(o, model=name, case=kind, round=r, config=c))
                        print(f"  {name} {kind} round {r + 1}: {c} {o['tps']:.2f} t/s, "
                              f"{o['gen']} tokens, draft {o['draft']} accepted {o['accepted']}",
                              file=sys.stderr)
                rows.append(row(name, kind, res, notes))
                print(rows[-1])
                sys.stdout.flush()
        finally:
            for s in servers.values():
                s.stop()
    if notes:
        print()
        for n in notes:
            print(f"- {n}")
    if a.raw:
        with open(a.raw, "w") as f:
            json.dump(raw, f, indent=1)


def row(name, kind, res, notes):
    med = {c: statistics.median(o["tps"] for o in res[c]) for c in CONFIGS}

    def acc(c):
        o = res[c][0]
        if any((x["draft"], x["accepted"]) != (o["draft"], o["accepted"]) for x in res[c]):
            notes.append(f"{name} {kind} {c}: drafts differ between rounds: " + ", ".join(
                f"{x['accepted']}/{x['draft']}" for x in res[c]))
        return (f"{o['accepted']}/{o['draft']} ({100 * o['accepted'] / o['draft']:.0f}%)"
                if o["draft"] else "0/0")

    def same(p, s):
        plain = {o["text"] for o in res[p]}
        spec = {o["text"] for o in res[s]}
        if len(plain) == 1 and plain == spec:
            return "yes"
        return f"NO ({len(plain)} plain, {len(spec)} spec variants)"

    def gens(c):
        g = sorted({o["gen"] for o in res[c]})
        return "/".join(map(str, g))

    fx_p, lc_p = res["fx-plain"][0]["prompt"], res["lc-plain"][0]["prompt"]
    if fx_p != lc_p:
        notes.append(f"{name} {kind}: prompt tokens differ, ferrox {fx_p}, llama.cpp {lc_p}")
    for c in CONFIGS:
        stops = sorted({o["stop"] for o in res[c]})
        if c.startswith("fx") and stops != ["the -n limit"] or c.startswith("lc") and stops != ["limit"]:
            notes.append(f"{name} {kind} {c}: stopped at {', '.join(stops)}")
    if res["fx-plain"][0]["text"] != res["lc-plain"][0]["text"]:
        a, b = res["fx-plain"][0]["text"], res["lc-plain"][0]["text"]
        i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        notes.append(f"{name} {kind}: ferrox's plain text differs from llama.cpp's from "
                     f"character {i} ({a[i:i + 30]!r} vs {b[i:i + 30]!r})")
    gen = f"{gens('fx-plain')},{gens('fx-spec')} / {gens('lc-plain')},{gens('lc-spec')}"
    return (f"| {name} | {kind} | {fx_p} | {gen} | {med['fx-plain']:.2f} | {med['fx-spec']:.2f} "
            f"| {acc('fx-spec')} | {med['fx-spec'] / med['fx-plain']:.2f}x "
            f"| {med['lc-plain']:.2f} | {med['lc-spec']:.2f} | {acc('lc-spec')} "
            f"| {med['lc-spec'] / med['lc-plain']:.2f}x | {med['fx-spec'] / med['lc-spec']:.2f}x "
            f"| {same('fx-plain', 'fx-spec')} | {same('lc-plain', 'lc-spec')} |")


if __name__ == "__main__":
    main()
