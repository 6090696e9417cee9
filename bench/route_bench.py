#!/usr/bin/env python3
"""Routing policies in front of N ferrox replicas, on a shared-prefix
workload, measured in one run (issue 24).

    python3 bench/route_bench.py [--replicas 2] [--policies vllm:round_robin,vllm:kv_aware,sglang:cache_aware]
                                 [--prompts 12] [--users 6] [--system-tokens 1000] [-c 8]
                                 [--max-tokens 16] [-t 1] [--parallel 4] [--ctx 2048]
                                 [--model models/SmolLM2-135M-Instruct.Q4_1.gguf] [--ferrox build/bin/ferrox]

Workload: K (--prompts) system prompts of about --system-tokens tokens each
(deterministic filler text, measured with the replicas' /tokenize) x U
(--users) users, each asking a short distinct question under every system
prompt: K*U streaming chat requests (greedy, --max-tokens), shuffled with a
fixed seed, C (-c) at a time. The policies differ only when the system
prompts together outgrow one replica's KV pool (--parallel x --ctx tokens;
the header line says both): with 4 prompts of 1,000 tokens and 2 replicas of
4 x 2048, round_robin caches every prompt on both and hits 84% (measured),
as cache_aware (86%). Per policy the replicas are started fresh (empty
prefix caches) and so is the router (router_harness.Router: vllm-router
0.1.17 or sglang-router 0.3.2 from PyPI, 127.0.0.1, free ports).

--warmup first sends each system prompt once through the router, one at a
time, uncounted: the steady state. Without it the run starts cold, and
kv_aware pays for the lag of KV events: the blocks of a prompt are announced
once computed, and on CPU a 1,000-token prefill takes seconds, during which
the router sees the prompt's other requests as uncached and spreads them by
load (measured: cold, kv_aware 54% prefix hits against round_robin's 52% and
sglang cache_aware's 76%, which learns a prefix when it routes it). Size
the prompts to fit the pools with room for the running sequences, or kv_aware
(which places an uncached prompt by load) and round_robin both thrash: with
--warmup --system-tokens 500 one run measured round_robin 77% hits, 0.83
req/s, TTFT p99 25 s; kv_aware 88%, 2.52 req/s, 5.7 s; cache_aware 94%,
3.88 req/s, 1.7 s.

Reported per policy: requests, errors, prefix-cache hit rate (the sums over
replicas of the deltas of vllm:gpu_prefix_cache_hits_total over
vllm:gpu_prefix_cache_queries_total, in prompt tokens), how the requests
spread over the replicas, TTFT p50 / p99 (to the first streamed content),
requests/s and generated tokens/s (vllm:generation_tokens_total deltas)
over the run's wall time. Last, a Markdown table.

kv_aware: each replica gets `--kv-events-endpoint tcp://127.0.0.1:PORT`
(its KV-cache events publisher, vLLM's ZeroMQ format) and the router
`--kv-event-source http://127.0.0.1:HTTP=tcp://127.0.0.1:PORT` per replica,
`--kv-event-block-size` (--block-size, also given to the replicas as
`--block-size`) and `--kv-event-model` (--kv-event-model; default the model
file's name: for HTTP workers vllm-router 0.1.17 tokenizes through the
replicas' /v1/*/render endpoints, not with a local tokenizer; a folder from
scripts/make-hf-tokenizers.py may be given).
"""
import argparse
import concurrent.futures as cf
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

WORDS = ("policy customer account refund order shipping invoice warranty product service "
         "support request ticket priority escalation manager response review quality safety "
         "privacy security payment balance credit discount coupon delivery schedule window "
         "address region country language document record history status update notice "
         "contract renewal subscription plan tier limit usage report summary detail").split()


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--policies", default="vllm:round_robin,vllm:kv_aware,sglang:cache_aware",
                    help="comma-separated ROUTER:POLICY (ROUTER vllm or sglang)")
    ap.add_argument("--prompts", type=int, default=12, help="shared system prompts (K)")
    ap.add_argument("--users", type=int, default=6, help="users per system prompt (U)")
    ap.add_argument("--system-tokens", type=int, default=1000)
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("-t", "--threads", type=int, default=1, help="threads per replica")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--kv-event-model", default=None)
    ap.add_argument("--model", default=os.path.join(
        os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models")),
        "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--ferrox", default=os.path.join(ROOT, "build", "bin", "ferrox"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", action="store_true",
                    help="first send each system prompt once, one at a time, through the "
                         "router (not counted): the steady state, where every prefix has "
                         "been seen and its KV events have arrived")
    ap.add_argument("--router-log", default=None,
                    help="folder: each router's log (debug level) saved there as POLICY.log")
    return ap.parse_args()


ARGS = parse()
os.environ["FX_TEST_THREADS"] = str(ARGS.threads)
import server_harness  # noqa: E402
from router_harness import (Router, metric_sum, post_json, router_missing,  # noqa: E402
                            stream_ttft)
from server_harness import Server, free_port  # noqa: E402

server_harness.BIN = ARGS.ferrox
MODEL = os.path.basename(ARGS.model)
COUNTERS = ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total",
            "vllm:generation_tokens_total", "vllm:request_success_total")


def system_prompts(srv, k, target, seed):
    """k deterministic system prompts of at least target tokens each (counted
    by the replica's /tokenize), distinct from their first words on."""
    rng = random.Random(seed)
    out = []
    for i in range(k):
        words = [f"You are support assistant number {i} of the Acme company. "
                 f"Follow these rules, section {i}:"]
        while True:
            words += [rng.choice(WORDS) for _ in range(50)]
            text = " ".join(words)
            st, resp = post_json(srv.port, "/tokenize", {"content": text})
            assert st == 200, (st, resp)
            if len(resp["tokens"]) >= target:
                out.append(text + ".")
                break
    return out


def workload(systems, users, seed):
    reqs = [(k, u) for k in range(len(systems)) for u in range(users)]
    random.Random(seed).shuffle(reqs)
    return [{"model": MODEL, "max_tokens": ARGS.max_tokens, "temperature": 0,
             "messages": [{"role": "system", "content": systems[k]},
                          {"role": "user", "content": f"I am user {u}. What is {u + 3} plus "
                                                      f"{7 * k + 2}? Answer briefly."}]}
            for k, u in reqs]


def replica_args(i, kv_ports):
    a = ["--parallel", str(ARGS.parallel), "-c", str(ARGS.ctx)]
    if kv_ports:
        a += ["--kv-events-endpoint", f"tcp://127.0.0.1:{kv_ports[i]}",
              "--block-size", str(ARGS.block_size)]
    return a


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run_policy(spec, systems):
    kind, policy = spec.split(":", 1)
    why = router_missing(kind)
    if why:
        return {"policy": spec, "skipped": why}
    kv = policy == "kv_aware"
    kv_ports = [free_port() for _ in range(ARGS.replicas)] if kv else None
    reps, router = [], None
    try:
        try:
            for i in range(ARGS.replicas):
                reps.append(Server(ARGS.model, *replica_args(i, kv_ports)))
        except RuntimeError as e:
            # the server's first lines say why (an unknown option: no usage text)
            lines = [x for x in str(e).splitlines() if x.strip()]
            why = next((x for x in lines if "rror" in x), lines[0] if lines else str(e))
            return {"policy": spec, "skipped": f"a replica did not start: {why[:300]}"}
        urls = [f"http://127.0.0.1:{r.port}" for r in reps]
        extra = []
        if kv:
            for u, p in zip(urls, kv_ports):
                extra += ["--kv-event-source", f"{u}=tcp://127.0.0.1:{p}"]
            extra += ["--kv-event-block-size", str(ARGS.block_size),
                      "--kv-event-model", ARGS.kv_event_model or MODEL]
        try:
            router = Router(kind, policy, urls, *extra, health=False,
                            log_level="debug" if ARGS.router_log else "info")
        except RuntimeError as e:
            return {"policy": spec, "skipped": f"the router did not start: {str(e)[-300:]}"}
        if ARGS.warmup:
            for k, text in enumerate(systems):
                st, t, _ = stream_ttft(router.port, "/v1/chat/completions", {
                    "model": MODEL, "max_tokens": 1, "temperature": 0,
                    "messages": [{"role": "system", "content": text},
                                 {"role": "user", "content": "Hello."}]}, 300)
                assert st == 200, f"warm-up request {k}: {st}"
            time.sleep(1)  # the last events reach the router
        before = [[metric_sum(r.port, m) for m in COUNTERS] for r in reps]
        reqs = workload(systems, ARGS.users, ARGS.seed)
        ttft, errors, first_err = [], 0, None
        t0 = time.time()
        with cf.ThreadPoolExecutor(ARGS.concurrency) as ex:
            futs = [ex.submit(stream_ttft, router.port, "/v1/chat/completions", b, 300)
                    for b in reqs]
            for f in futs:
                try:
                    st, t, text = f.result()
                    ok = st == 200 and t is not None
                except OSError as e:
                    ok, st = False, f"{type(e).__name__}: {e}"
                if ok:
                    ttft.append(t)
                else:
                    errors += 1
                    first_err = first_err or st
        wall = time.time() - t0
        after = [[metric_sum(r.port, m) for m in COUNTERS] for r in reps]
        d = [[a - b for a, b in zip(x, y)] for x, y in zip(after, before)]
        hits, queries = sum(x[0] for x in d), sum(x[1] for x in d)
        return {"policy": spec, "requests": len(reqs), "errors": errors, "first_error": first_err,
                "hit_rate": hits / queries if queries else float("nan"),
                "hits": hits, "queries": queries,
                "spread": [int(x[3]) for x in d],
                "ttft_p50": pct(ttft, 50), "ttft_p99": pct(ttft, 99),
                "req_s": len(reqs) / wall, "tok_s": sum(x[2] for x in d) / wall, "wall": wall}
    finally:
        if router:
            router.stop()
            if ARGS.router_log:
                os.makedirs(ARGS.router_log, exist_ok=True)
                with open(os.path.join(ARGS.router_log, spec.replace(":", "_") + ".log"),
                          "w") as f:
                    f.write(router.logtext())
        for r in reps:
            r.stop()


def main():
    if not os.path.exists(ARGS.model):
        sys.exit(f"route_bench: missing {ARGS.model} (scripts/get-model.sh)")
    print(f"route_bench: {ARGS.replicas} replicas of {MODEL} (-t {ARGS.threads}, --parallel "
          f"{ARGS.parallel}, -c {ARGS.ctx}); {ARGS.prompts} system prompts of "
          f">= {ARGS.system_tokens} tokens x {ARGS.users} users, concurrency "
          f"{ARGS.concurrency}, {ARGS.max_tokens} tokens each"
          f"{', after a warm-up' if ARGS.warmup else ', cold'}", flush=True)
    with Server(ARGS.model, "--parallel", "1", "-c", str(ARGS.ctx)) as s:
        systems = system_prompts(s, ARGS.prompts, ARGS.system_tokens, ARGS.seed)
        total = sum(len(post_json(s.port, "/tokenize", {"content": x})[1]["tokens"])
                    for x in systems)
    print(f"route_bench: the system prompts hold {total} tokens; one replica's KV pool "
          f"{ARGS.parallel * ARGS.ctx}, all replicas' {ARGS.replicas * ARGS.parallel * ARGS.ctx}",
          flush=True)
    rows = []
    for spec in ARGS.policies.split(","):
        r = run_policy(spec.strip(), systems)
        rows.append(r)
        if "skipped" in r:
            print(f"{r['policy']}: not run: {r['skipped']}", flush=True)
            continue
        print(f"{r['policy']}: {r['requests']} requests, {r['errors']} errors"
              f"{' (first: ' + str(r['first_error']) + ')' if r['errors'] else ''}; prefix hits "
              f"{r['hit_rate']:.1%} ({r['hits']:.0f} of {r['queries']:.0f} prompt tokens); "
              f"spread {r['spread']}; TTFT p50 {r['ttft_p50'] * 1000:.0f} ms, p99 "
              f"{r['ttft_p99'] * 1000:.0f} ms; {r['req_s']:.2f} req/s, {r['tok_s']:.1f} tok/s "
              f"({r['wall']:.1f} s)", flush=True)
    print("\n| policy | requests | errors | prefix hit rate | TTFT p50 | TTFT p99 | req/s | tok/s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['policy']} | not run | | | | | | |")
        else:
            print(f"| {r['policy']} | {r['requests']} | {r['errors']} | {r['hit_rate']:.1%} | "
                  f"{r['ttft_p50'] * 1000:.0f} ms | {r['ttft_p99'] * 1000:.0f} ms | "
                  f"{r['req_s']:.2f} | {r['tok_s']:.1f} |")


if __name__ == "__main__":
    main()
