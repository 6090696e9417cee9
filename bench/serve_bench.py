#!/usr/bin/env python3
"""Serving benchmark: ferrox serve against llama.cpp's llama-server, same
model, same machine, one run.

usage: bench/serve_bench.py [-m MODEL] [--clients 1,8] [--requests 3] [--rounds 2]
                            [--max-tokens 64] [--prompts mixed|short|medium|long]
                            [--parallel 8] [--ctx-size 1024] [-t THREADS]
                            [--ferrox build/bin/ferrox] [--llama-server PATH]
                            [--only ferrox|llama] [-o md|json]

Both servers run side by side (an idle one sleeps); for each client count N
the rounds alternate between them, and in each round N client threads each
send --requests streaming /v1/completions requests one after another (temperature
0, ignore_eos so every request generates exactly --max-tokens tokens), with
prompts cycling through short (~13), medium (~105) and long (~385 Gemma 3 token)
texts. Reports aggregate generation throughput (generated tokens over the
wall time of the rounds), time to first token p50/p99 (nearest rank) and the speedup
of each N over N=1. Clients are plain http.client threads (cheap on the CPU
the servers share).

llama-server is found as $LLAMA_BIN/llama-server, on PATH, or in
../oracle/llama-build/bin (bench/compare.sh builds llama.cpp there; it
builds the llama-server target too).
"""
import argparse
import http.client
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORDS = ("the printing press changed how knowledge moved across europe because books "
         "became cheap enough for merchants students and craftsmen to own and read at home ").split()


def prompt(kind, i):
    n = {"short": 8, "medium": 100, "long": 380}[kind]
    words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(n)]
    return f"Request {i}: " + " ".join(words)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_llama_server(path):
    if path:
        return path
    env = os.environ.get("LLAMA_BIN")
    if env and os.access(os.path.join(env, "llama-server"), os.X_OK):
        return os.path.join(env, "llama-server")
    if shutil.which("llama-server"):
        return shutil.which("llama-server")
    oracle = os.environ.get("ORACLE", os.path.join(os.path.dirname(ROOT), "oracle"))
    # bench/llama.sh's order: the no-AMX build first where it was made
    for build in ("llama-build-noamx", "llama-build"):
        cand = os.path.join(oracle, build, "bin", "llama-server")
        if os.access(cand, os.X_OK):
            return cand
    return None


class Server:
    def __init__(self, name, argv, port):
        self.name, self.port = name, port
        self.log = open(f"/tmp/serve_bench_{name}_{port}.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited; see {self.log.name}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/health")
                ok = c.getresponse().status == 200
                c.close()
                if ok:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{name} did not become healthy")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def one_request(port, text, max_tokens):
    """Stream one completion; return (ttft seconds, generated tokens, total seconds)."""
    body = json.dumps({"model": "m", "prompt": text, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "ignore_eos": True,
                       "stream_options": {"include_usage": True}})
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]}")
    ttft, chunks, usage = None, 0, None
    for raw in r:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        obj = json.loads(data)
        if obj.get("usage"):
            usage = obj["usage"].get("completion_tokens")
        for ch in obj.get("choices") or []:
            if ch.get("text"):
                chunks += 1
                if ttft is None:
                    ttft = time.perf_counter() - t0
    c.close()
    return ttft if ttft is not None else time.perf_counter() - t0, usage or chunks, \
        time.perf_counter() - t0


def round_(port, n_clients, n_requests, max_tokens, kinds=("short", "medium", "long")):
    ttfts, toks, errors = [], [0], []
    lock = threading.Lock()

    def client(ci):
        for k in range(n_requests):
            i = ci * n_requests + k
            try:
                t, n, _ = one_request(port, prompt(kinds[i % len(kinds)], i), max_tokens)
            except Exception as e:  # reported, not fatal
                with lock:
                    errors.append(str(e))
                continue
            with lock:
                ttfts.append(t)
                toks[0] += n

    t0 = time.perf_counter()
    th = [threading.Thread(target=client, args=(c,)) for c in range(n_clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    ttfts.sort()
    return {"clients": n_clients, "requests": len(ttfts), "errors": len(errors),
            "gen_tokens": toks[0], "wall_s": wall, "gen_tok_s": toks[0] / wall,
            "ttft_p50_s": pct(ttfts, 50), "ttft_p99_s": pct(ttfts, 99), "ttfts": ttfts}


def pct(xs, p):
    """Nearest-rank percentile of a sorted list."""
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, math.ceil(p / 100 * len(xs)) - 1))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--requests", type=int, default=3, help="requests per client and round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per client count, alternating servers")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompts", choices=["mixed", "short", "medium", "long"], default="mixed",
                    help="prompt lengths: cycle through all three (default) or one")
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx-size", type=int, default=1024, help="tokens per sequence")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ferrox", default=os.path.join(ROOT, "build", "bin", "ferrox"))
    ap.add_argument("--llama-server", default=None)
    ap.add_argument("--only", choices=["ferrox", "llama"], default=None)
    ap.add_argument("-o", "--output", choices=["md", "json"], default="md")
    a = ap.parse_args()
    clients = [int(x) for x in a.clients.split(",")]
    kinds = ("short", "medium", "long") if a.prompts == "mixed" else (a.prompts,)
    servers = []
    if a.only != "llama":
        servers.append(("ferrox", lambda port: [a.ferrox, "serve", "-m", a.model, "--port", str(port),
                                                "--parallel", str(a.parallel), "--ctx-size",
                                                str(a.ctx_size), "-t", str(a.threads),
                                                "--queue", "1024"]))
    if a.only != "ferrox":
        ls = find_llama_server(a.llama_server)
        if not ls:
            print("llama-server not found (set LLAMA_BIN or --llama-server; bench/compare.sh "
                  "builds it, or in an existing build: cmake -DLLAMA_BUILD_SERVER=ON "
                  "../oracle/llama-build && cmake --build ../oracle/llama-build --target "
                  "llama-server): measuring ferrox only", file=sys.stderr)
        else:
            servers.append(("llama.cpp", lambda port: [ls, "-m", a.model, "--port", str(port),
                                                      "-np", str(a.parallel), "-c",
                                                      str(a.ctx_size * a.parallel), "-t",
                                                      str(a.threads), "-tb", str(a.threads),
                                                      "--no-webui", "-fa", "off"]))
    # Both servers stay up (an idle one sleeps) and the rounds alternate
    # between them, so both see the same machine state (other load, heat).
    running = []
    try:
        for name, argv in servers:
            port = free_port()
            running.append((name, Server(name.replace(".", ""), argv(port), port)))
            one_request(port, prompt("short", 999), 8)  # warm-up
        results = []
        for n in clients:
            acc = {name: [] for name, _ in running}
            for rnd in range(a.rounds):
                for name, srv in running:
                    r = round_(srv.port, n, a.requests, a.max_tokens, kinds)
                    acc[name].append(r)
                    print(f"{name:9s} clients={n:2d} round {rnd + 1}: {r['gen_tok_s']:7.1f} gen tok/s  "
                          f"TTFT p50 {r['ttft_p50_s']:.3f} s p99 {r['ttft_p99_s']:.3f} s "
                          f"({r['requests']} requests, {r['errors']} errors, {r['wall_s']:.1f} s)",
                          file=sys.stderr, flush=True)
            for name, rs in acc.items():
                ttfts = sorted(t for r in rs for t in r["ttfts"])
                tok = sum(r["gen_tokens"] for r in rs)
                wall = sum(r["wall_s"] for r in rs)
                results.append({"server": name, "clients": n, "rounds": a.rounds,
                                "requests": len(ttfts), "errors": sum(r["errors"] for r in rs),
                                "gen_tokens": tok, "wall_s": wall, "gen_tok_s": tok / wall,
                                "ttft_p50_s": pct(ttfts, 50), "ttft_p99_s": pct(ttfts, 99)})
    finally:
        for _, srv in running:
            srv.stop()
    if a.output == "json":
        print(json.dumps(results, indent=1))
        return
    order = [name for name, _ in servers]
    results.sort(key=lambda r: (order.index(r["server"]), r["clients"]))
    base = {r["server"]: r["gen_tok_s"] for r in results if r["clients"] == clients[0]}
    print(f"model {os.path.basename(a.model)}, {a.threads} threads, --parallel {a.parallel}, "
          f"{a.rounds} rounds x {a.requests} requests per client, {a.max_tokens} tokens each, "
          f"prompts: {a.prompts} (short ~13, medium ~105, long ~385 tokens)\n")
    print(f"| server | clients | requests | gen tokens | wall s | gen tok/s | vs {clients[0]} client(s) | TTFT p50 s | TTFT p99 s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['server']} | {r['clients']} | {r['requests']} | {r['gen_tokens']} | "
              f"{r['wall_s']:.1f} | {r['gen_tok_s']:.1f} | {r['gen_tok_s'] / base[r['server']]:.2f}x | "
              f"{r['ttft_p50_s']:.3f} | {r['ttft_p99_s']:.3f} |")
    if any(r["errors"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
