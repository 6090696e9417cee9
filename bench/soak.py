#!/usr/bin/env python3
"""Soak test: `ferrox serve` under N concurrent streaming clients for T
seconds, watching for errors, memory growth, leaked KV blocks and greedy
replies that change under load.

usage: bench/soak.py [--clients 64] [--seconds 600] [--server-bin build/bin/ferrox]
                     [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--parallel 8]
                     [--ctx-size N] [-t THREADS] [--no-fill] [--sample-every 5]
                     [--warmup 0.2] [--rss-tol 0.05] [--seed 1] [--samples CSV]
                     [--log FILE]

Phases:
  1. references: every greedy case (temperature 0) sent by one client alone,
     streamed, on the fresh server; its text per choice is the reference.
  2. fill (unless --no-fill): distinct long prompts (max_tokens 1) until
     their tokens exceed the paged KV pool 1.1 times over, so that every
     block of the pool has been written once. The allocator keeps freed
     prefix-cached blocks cached while untouched blocks remain (vLLM's
     policy), so without this RSS climbs through the run up to the pool's
     ceiling (docs/RELIABILITY.md) and "flat after warm-up" would measure
     how fast the prefix cache fills, not whether anything leaks.
  3. the run: --clients threads, each sending streaming requests one after
     another for --seconds: /v1/completions and /v1/chat/completions, short
     / medium / long prompts (some sharing a preamble, for prefix-cache
     hits), stop strings, n of 1 to 3, sampled or greedy (one of the
     reference cases); about 1 in 8 is cut: the client closes the
     connection after a few events (an expected disconnect, not an error).
     The server's VmRSS (/proc/PID/status) and ferrox_kv_blocks_used
     (/metrics) are sampled every --sample-every seconds.
  4. drain: in-flight requests finish, then the server is stopped with
     SIGTERM and its log scanned for sanitizer reports.

Checks (exit status 1 when one fails): no errors besides the cuts; every
greedy reply equal to its reference, choice by choice; KV blocks used back
to 0 after the drain; the last RSS sample within --rss-tol of the one at
--warmup of the run; the server exits 0 with no sanitizer report in its
log (run it against an ASan build with ASAN_OPTIONS=detect_leaks=1 in the
environment: the server inherits it). Plain http.client threads, stdlib
only.
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 16  # tokens per KV block: cp.block_size in src/server/http.c

WORDS = """time person year way day thing man world life hand part child eye woman
place work week case point government company number group problem fact river
mountain garden kitchen window letter market bridge castle forest island engine
button pencil candle ladder mirror basket rocket planet harbor valley desert
winter summer autumn spring morning evening quiet bright heavy gentle ancient
modern simple strange careful sudden golden silver wooden narrow distant open
build carry follow listen measure notice prepare protect remember travel wonder
explain discover imagine describe compare balance gather wander whisper answer
because although while before after during under above between among toward
red green blue yellow purple orange black white seven twelve hundred thousand
music paper stone water light shadow story song dream voice idea reason memory""".split()

PREAMBLE = ("You are a careful assistant. Answer in plain English, keep every answer "
            "short, and never repeat the question. The following notes describe the "
            "town of Alder Bay, its harbor, its market and the people who live there. ")


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sizes:
    """Prompt lengths in words for a per-sequence context of ctx tokens
    (about 1.3 SmolLM2 tokens a word; long prompts take at most half of
    it, so prompt + max_tokens always fits)."""

    def __init__(self, ctx):
        self.long_max = max(40, int(ctx * 0.5 / 1.4))
        self.buckets = {"short": (4, 20), "medium": (60, min(250, self.long_max)),
                        "long": (min(400, self.long_max // 2), self.long_max)}

    def pick(self, rng, kind=None):
        kind = kind or rng.choice(["short", "short", "medium", "medium", "long"])
        lo, hi = self.buckets[kind]
        return rng.randint(lo, hi)


def make_request(rng, sizes, chat_ok, greedy):
    """(path, body) of one random request; greedy: temperature 0."""
    n_words = sizes.pick(rng)
    text = words(rng, n_words)
    if rng.random() < 0.5:
        text = PREAMBLE + text  # shared prefix: prefix-cache hits
    stops = [[], [], ["."], ["\n"], ["the", "and"], ["\n\n", "?"]]
    body = {"max_tokens": rng.choice([8, 16, 32, 48, 64, 96]),
            "n": rng.choice([1, 1, 1, 2, 3]), "stream": True}
    stop = rng.choice(stops)
    if stop:
        body["stop"] = stop
    if greedy:
        body["temperature"] = 0
    else:
        body["temperature"] = rng.choice([0.6, 0.8, 1.0])
        body["top_p"] = 0.95
    if chat_ok and rng.random() < 0.5:
        body["messages"] = [{"role": "user", "content": "Continue these notes: " + text}]
        return "/v1/chat/completions", body
    body["prompt"] = text
    return "/v1/completions", body


class Result:
    __slots__ = ("kind", "texts", "finish", "detail", "events")

    def __init__(self, kind, texts=None, finish=None, detail="", events=0):
        self.kind, self.texts, self.finish = kind, texts, finish
        self.detail, self.events = detail, events


def stream(port, path, body, cut=None, timeout=900):
    """Send one streaming request; kind 'ok' (texts and finish reasons per
    choice), 'cut' (closed by us after `cut` events) or 'error'."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, json.dumps(body).encode(),
                     {"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            return Result("error", detail=f"HTTP {r.status}: {r.read()[:200]!r}")
        n = body.get("n", 1)
        texts, finish, events, done = [""] * n, [None] * n, 0, False
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            obj = json.loads(data)
            if "error" in obj:
                return Result("error", detail=f"stream error event: {obj['error']}")
            for ch in obj.get("choices", []):
                i = ch["index"]
                texts[i] += ch.get("text") or (ch.get("delta") or {}).get("content") or ""
                if ch.get("finish_reason"):
                    finish[i] = ch["finish_reason"]
            events += 1
            if cut is not None and events >= cut:
                # Close mid-stream without reading the rest: the server
                # must notice, abort the request and release its blocks.
                r.close()
                conn.close()
                return Result("cut", events=events)
        if not done:
            return Result("error", detail=f"stream ended without [DONE] after {events} events")
        if None in finish:
            return Result("error", detail=f"a choice without finish_reason: {finish}")
        return Result("ok", texts, finish, events=events)
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError) as e:
        return Result("error", detail=f"{type(e).__name__}: {e}")
    finally:
        conn.close()


class Server:
    def __init__(self, args, log):
        self.port = free_port()
        cmd = [args.server_bin, "serve", "-m", args.model, "--port", str(self.port),
               "--parallel", str(args.parallel), "-t", str(args.threads),
               "--queue", str(max(args.clients + 8, 4 * args.parallel))]
        if args.ctx_size:
            cmd += ["--ctx-size", str(args.ctx_size)]
        self.cmd = cmd
        self.log = log
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError("server did not become healthy")

    def get(self, path, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def post(self, path, obj, timeout=900):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, json.dumps(obj).encode(), {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def metrics(self):
        st, data = self.get("/metrics")
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def rss(self):
        """(VmRSS, RssAnon - AnonHugePages) in KiB: all of it, and the anonymous
        memory on small pages (heap, stacks: where a leak shows; the KV pool
        and the weights are on huge pages where THP allows)."""
        vals = {}
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(("VmRSS:", "RssAnon:")):
                        vals[line.split(":")[0]] = int(line.split()[1])
            with open(f"/proc/{self.proc.pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("AnonHugePages:"):
                        vals["huge"] = int(line.split()[1])
        except OSError:
            return None, None
        return vals.get("VmRSS"), vals.get("RssAnon", 0) - vals.get("huge", 0)

    def stop(self, wait=300):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def metric(m, name, label=""):
    """Sum of /metrics series `name` (any labels) whose labels contain label."""
    return sum(v for k, v in m.items()
               if (k == name or k.startswith(name + "{")) and label in k)


def mib(kb):
    return "-" if kb is None else f"{kb / 1024:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--server-bin", default=os.path.join(ROOT, "build", "bin", "ferrox"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx-size", type=int, default=0, help="per sequence (server default: 0)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--no-fill", action="store_true", help="skip writing the whole KV pool first")
    ap.add_argument("--greedy-cases", type=int, default=16)
    ap.add_argument("--sample-every", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=0.2, help="fraction of the run")
    ap.add_argument("--rss-tol", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", help="write the RSS samples to this CSV file")
    ap.add_argument("--log", help="server log file (default: a temporary file, kept on failure)")
    args = ap.parse_args()

    if args.log:
        log = open(args.log, "w+")
    else:
        log = tempfile.NamedTemporaryFile("w+", prefix="soak-server-", suffix=".log", delete=False)
    print(f"soak: {args.clients} clients, {args.seconds:g} s, {args.server_bin}, "
          f"{os.path.basename(args.model)}, --parallel {args.parallel}; server log {log.name}",
          flush=True)
    srv = Server(args, log)
    print("soak: server: " + " ".join(srv.cmd), flush=True)
    rss_idle = srv.rss()[0]
    # The server's default is the model's training context, at most 4096
    # (both models here train on more).
    ctx = args.ctx_size or 4096
    sizes = Sizes(ctx)
    m0 = srv.metrics()
    blocks_total = int(metric(m0, "ferrox_kv_blocks_used") + metric(m0, "ferrox_kv_blocks_free"))
    chat_ok = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                                "max_tokens": 1})[0] == 200

    # 1. references, one client alone
    cases = []
    crng = random.Random(args.seed * 7919 + 1)
    for _ in range(args.greedy_cases):
        path, body = make_request(crng, sizes, chat_ok, greedy=True)
        cases.append((path, body))
    refs = []
    t0 = time.time()
    for path, body in cases:
        r = stream(srv.port, path, body)
        if r.kind != "ok":
            print(f"soak: reference request failed: {r.detail}", file=sys.stderr)
            srv.stop()
            return 1
        refs.append(r)
    print(f"soak: {len(refs)} greedy references in {time.time() - t0:.1f} s", flush=True)

    # 2. fill the pool once
    filled = 0
    if not args.no_fill and blocks_total:
        t0 = time.time()
        frng = random.Random(args.seed * 104729 + 3)
        want = int(1.1 * blocks_total * BLOCK)
        lock = threading.Lock()
        fill_err = []
        claimed = 0  # tokens of the fill requests sent so far (estimated)
        per = [None]  # tokens of one fill prompt, once the first is back

        def fill_one():
            nonlocal filled
            with lock:
                text = f"Fill {frng.random()}: " + words(frng, sizes.long_max)
            st, data = srv.post("/v1/completions", {"prompt": text, "max_tokens": 1})
            if st != 200:
                return f"HTTP {st}: {data[:200]!r}"
            n = json.loads(data)["usage"]["prompt_tokens"]
            with lock:
                filled += n
                per[0] = per[0] or n
            return None

        def filler():
            nonlocal claimed
            while True:
                with lock:
                    if claimed >= want or fill_err:
                        return
                    claimed += per[0]
                e = fill_one()
                if e:
                    with lock:
                        fill_err.append(e)
                    return

        # One alone first: its size tells how many more the pool needs, so
        # the parallel ones stop at the mark instead of overshooting it.
        e = fill_one()
        if e:
            fill_err.append(e)
        claimed = filled
        ths = [threading.Thread(target=filler) for _ in range(args.parallel)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        if fill_err:
            print(f"soak: fill failed: {fill_err[0]}", file=sys.stderr)
            srv.stop()
            return 1
        print(f"soak: fill: {filled} prompt tokens for a pool of {blocks_total} blocks "
              f"({blocks_total * BLOCK} tokens) in {time.time() - t0:.1f} s", flush=True)
    rss_start = srv.rss()[0]

    # 3. the run
    stats = {"requests": 0, "ok": 0, "cut": 0, "errors": 0, "greedy": 0, "mismatch": 0,
             "choices": 0}
    errors, mismatches = [], []
    lock = threading.Lock()
    samples = []  # (t, rss_kb, small_kb, blocks_used)
    t_start = time.time()
    t_end = t_start + args.seconds
    stop_sampling = threading.Event()

    def sampler():
        while True:
            rss, small = srv.rss()
            try:
                used = int(metric(srv.metrics(), "ferrox_kv_blocks_used"))
            except (OSError, http.client.HTTPException):
                used = None
            samples.append((time.time() - t_start, rss, small, used))
            if stop_sampling.wait(args.sample_every):
                return

    def client(ci):
        crng = random.Random(args.seed * 1000003 + ci)
        while time.time() < t_end:
            greedy = crng.random() < 0.35
            if greedy:
                ri = crng.randrange(len(cases))
                path, body = cases[ri]
            else:
                path, body = make_request(crng, sizes, chat_ok, greedy=False)
            cut = crng.randint(1, 8) if crng.random() < 0.125 else None
            r = stream(srv.port, path, body, cut)
            with lock:
                stats["requests"] += 1
                if r.kind == "error":
                    stats["errors"] += 1
                    errors.append(f"{path} {json.dumps(body)[:120]}: {r.detail}")
                    continue
                if r.kind == "cut":
                    stats["cut"] += 1
                    continue
                stats["ok"] += 1
                stats["choices"] += len(r.texts)
                if greedy:
                    stats["greedy"] += 1
                    ref = refs[ri]
                    # Every choice of a greedy request is the lone reply.
                    if r.texts != ref.texts or r.finish != ref.finish:
                        stats["mismatch"] += 1
                        mismatches.append(f"case {ri}: got {r.texts!r} {r.finish}, "
                                          f"want {ref.texts!r} {ref.finish}")

    sth = threading.Thread(target=sampler, daemon=True)
    sth.start()
    ths = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
    for th in ths:
        th.start()
    last_report = t_start
    while any(th.is_alive() for th in ths):
        time.sleep(1)
        if time.time() - last_report >= 30:
            last_report = time.time()
            s = samples[-1] if samples else (0, None, None, None)
            with lock:
                print(f"soak: {time.time() - t_start:5.0f} s: {stats['requests']} requests, "
                      f"{stats['errors']} errors, {stats['mismatch']} greedy mismatches, "
                      f"RSS {mib(s[1])} MiB, blocks used {s[3]}", flush=True)
    t_run = time.time() - t_start

    # 4. drain: blocks back to 0 once nothing runs
    blocks_end, m = None, {}
    deadline = time.time() + 60
    while time.time() < deadline:
        m = srv.metrics()
        blocks_end = int(metric(m, "ferrox_kv_blocks_used"))
        if (blocks_end == 0 and not metric(m, "vllm:num_requests_running")
                and not metric(m, "vllm:num_requests_waiting")):
            break
        time.sleep(0.5)
    stop_sampling.set()
    sth.join()
    rss_end, small_end = srv.rss()
    samples.append((time.time() - t_start, rss_end, small_end, blocks_end))
    rc = srv.stop()
    log.flush()
    log.seek(0)
    logtext = log.read()
    san = [ln for ln in logtext.splitlines()
           if "Sanitizer" in ln or "runtime error:" in ln or "LeakSanitizer" in ln]

    # The sample nearest the warm-up point, and the last one of the run.
    run = [s for s in samples if s[1] is not None]
    warm = min(run, key=lambda s: abs(s[0] - args.warmup * args.seconds))
    last = run[-1]
    rss_max = max(s[1] for s in run)
    drift = (last[1] - warm[1]) / warm[1]

    if args.samples:
        with open(args.samples, "w") as f:
            f.write("t_s,rss_kib,small_page_anon_kib,kv_blocks_used\n")
            for s in samples:
                f.write(",".join("" if x is None else f"{x:.1f}" if isinstance(x, float) else str(x)
                                 for x in s) + "\n")
    print()
    print("RSS over the run (MiB; small pages = RssAnon - AnonHugePages):")
    step = max(1, len(run) // 10)
    for s in run[::step] + ([run[-1]] if (len(run) - 1) % step else []):
        print(f"  {s[0]:6.0f} s  RSS {mib(s[1]):>7}  small pages {mib(s[2]):>7}  blocks used {s[3]}")
    print()
    rows = [
        ("clients", args.clients), ("seconds (to the last reply)", f"{t_run:.0f}"),
        ("requests", stats["requests"]), ("replies (complete)", stats["ok"]),
        ("choices", stats["choices"]), ("disconnects (cut)", stats["cut"]),
        ("errors", stats["errors"]), ("greedy replies checked", stats["greedy"]),
        ("greedy mismatches", stats["mismatch"]),
        ("generated tokens (server)", int(metric(m, "vllm:generation_tokens_total"))),
        ("prompt tokens (server)", int(metric(m, "vllm:prompt_tokens_total"))),
        ("prefix-cache hit tokens", int(metric(m, "vllm:gpu_prefix_cache_hits_total"))),
        ("requests aborted (server)", int(metric(m, "vllm:request_success_total", "abort"))),
        ("RSS idle / after fill (MiB)", f"{mib(rss_idle)} / {mib(rss_start)}"),
        (f"RSS at warm-up ({warm[0]:.0f} s) (MiB)", mib(warm[1])),
        ("RSS at end (MiB)", mib(last[1])), ("RSS max (MiB)", mib(rss_max)),
        ("RSS drift warm-up -> end", f"{100 * drift:+.2f}%"),
        ("small-page anon warm-up -> end (MiB)", f"{mib(warm[2])} -> {mib(last[2])}"),
        ("KV blocks total", blocks_total), ("KV blocks used at end", blocks_end),
        ("server exit status", rc), ("sanitizer report lines", len(san)),
    ]
    w = max(len(k) for k, _ in rows)
    print(f"| {'figure'.ljust(w)} | value |")
    print(f"|{'-' * (w + 2)}|-------|")
    for k, v in rows:
        print(f"| {k.ljust(w)} | {v} |")
    print()

    checks = [
        ("no errors besides disconnects", stats["errors"] == 0),
        ("replies completed", stats["ok"] > 0),
        ("greedy replies equal their references", stats["greedy"] > 0 and stats["mismatch"] == 0),
        ("KV blocks used back to 0", blocks_end == 0),
        (f"RSS within {100 * args.rss_tol:g}% of warm-up", abs(drift) <= args.rss_tol),
        ("server exited 0", rc == 0),
        ("no sanitizer report", not san),
    ]
    for name, ok in checks:
        print(("ok   " if ok else "FAIL ") + name)
    for e in errors[:10]:
        print("error: " + e)
    for e in mismatches[:10]:
        print("mismatch: " + e)
    for ln in san[:20]:
        print("sanitizer: " + ln)
    failed = not all(ok for _, ok in checks)
    if failed:
        print(f"soak: FAILED; server log kept in {log.name}")
    elif not args.log:
        os.unlink(log.name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
