#!/usr/bin/env python3
"""The schema suite of tests/test_structured.py (tests/data/schemas, the
schema in the prompt, max_tokens 1024, frequency_penalty 0.3) sent to
ferrox serve and to llama-server on the same GGUF file, in one run: how
many replies validate, how many are cut at max_tokens (finish_reason
"length") and how many are invalid, per engine and sampler setting.

Why: a constrained reply that never ends is the model's choice among the
values the schema allows (a string under a pattern that never closes,
recursion that keeps opening); this measures how often that happens at
temperature 1 with the peer's own structured output on the same model.

Settings (each at temperature 0 once, and at temperature 1 with each
--seeds value):
  full      the request as the test sends it: no top-k / top-p / min-p
            (ferrox's default; llama-server is sent top_k 0, top_p 1, min_p 0)
  llama     llama-server's default samplers sent explicitly to both
            (top_k 40, top_p 0.95, min_p 0.05)

usage: bench/structured_suite.py [--seeds 7,8] [-t 2] [--parallel 4] [--ferrox-only | --llama-only]
                                 [MODEL.gguf]
       (default: SmolLM2-135M-Instruct; llama.cpp from bench/llama.sh)
"""
import argparse
import concurrent.futures as cf
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import server_harness  # noqa: E402
from server_harness import Server  # noqa: E402
from structured import LlamaServer, llama_bin  # noqa: E402

MAX_TOKENS = 1024
SAMPLERS = {"full": {"top_k": 0, "top_p": 1.0, "min_p": 0.0},
            "llama": {"top_k": 40, "top_p": 0.95, "min_p": 0.05}}


def schemas():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/data/schemas/*.json"))):
        with open(path, encoding="utf-8") as f:
            out.append((os.path.basename(path)[:-5], json.load(f)["schema"]))
    return out


def prompt(name, schema):
    # the same words as tests/test_structured.py's suite_prompt
    desc = schema.get("description") or schema.get("title") or name.replace("_", " ")
    return (f"Write one example of {desc} as JSON. Use this JSON Schema:\n" + json.dumps(schema) +
            "\nKeep strings short.")


def one(client, jsonschema, name, schema, temp, seed, extra):
    body = dict(model="m", messages=[{"role": "user", "content": prompt(name, schema)}], temperature=temp,
                seed=seed, max_tokens=MAX_TOKENS, frequency_penalty=0.3,
                response_format={"type": "json_schema",
                                 "json_schema": {"name": name, "schema": schema, "strict": True}})
    try:
        r = client.chat.completions.create(**body, extra_body=extra)
    except Exception as e:  # noqa: BLE001 - a refused schema is counted, not fatal
        return "refused", f"{name} t={temp} seed={seed}: {str(e)[:160]}"
    ch = r.choices[0]
    if ch.finish_reason == "length":
        return "cut", f"{name} t={temp} seed={seed}: ...{ch.message.content[-60:]!r}"
    try:
        jsonschema.validate(json.loads(ch.message.content), schema)
    except Exception as e:  # noqa: BLE001 - any parse or validation failure
        return "invalid", f"{name} t={temp} seed={seed}: {str(e)[:120]}"
    return "ok", None


def run_engine(label, client, jsonschema, suite, seeds, parallel):
    rows = []
    for sname, extra in SAMPLERS.items():
        jobs = [(n, s, 0.0, seeds[0]) for n, s in suite] + [(n, s, 1.0, sd) for sd in seeds for n, s in suite]
        t0 = time.time()
        with cf.ThreadPoolExecutor(parallel) as ex:
            res = list(ex.map(lambda j: (j[2],) + one(client, jsonschema, j[0], j[1], j[2], j[3], extra), jobs))
        for temp in (0.0, 1.0):
            got = [r for r in res if r[0] == temp]
            count = {k: sum(1 for r in got if r[1] == k) for k in ("ok", "cut", "invalid", "refused")}
            rows.append((label, sname, temp, len(got), count["ok"], count["cut"], count["invalid"],
                         count["refused"]))
            for r in got:
                if r[1] != "ok":
                    print(f"  {label} {sname}: {r[1]} {r[2]}", flush=True)
        print(f"{label} {sname}: {time.time() - t0:.0f} s", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="7,8")
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ferrox-only", action="store_true")
    ap.add_argument("--llama-only", action="store_true")
    ap.add_argument("model", nargs="?",
                    default=os.path.join(os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models")),
                                         "SmolLM2-135M-Instruct.Q4_1.gguf"))
    a = ap.parse_args()
    server_harness.BIN = os.path.join(ROOT, "build", "bin", "ferrox")  # it reads argv[1] otherwise
    server_harness.THREADS = str(a.t)
    import jsonschema
    seeds = [int(s) for s in a.seeds.split(",")]
    suite = schemas()
    rows = []
    if not a.llama_only:
        with Server(a.model, "--parallel", str(a.parallel), "--ctx-size", "2048") as srv:
            rows += run_engine("ferrox", srv.client(timeout=900), jsonschema, suite, seeds, a.parallel)
    bindir = None if a.ferrox_only else llama_bin(a.t)
    if bindir:
        ll = LlamaServer(bindir, a.model, a.t, ["-np", str(a.parallel), "-c", str(2048 * a.parallel)])
        try:
            import openai
            c = openai.OpenAI(base_url=f"http://127.0.0.1:{ll.port}/v1", api_key="none", max_retries=0,
                              timeout=900)
            rows += run_engine("llama.cpp", c, jsonschema, suite, seeds, a.parallel)
        finally:
            ll.stop()
    ver = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(f"\n{os.path.basename(a.model)}, {len(suite)} schemas, seeds {a.seeds}, max_tokens {MAX_TOKENS}, "
          f"ferrox {ver.stdout.strip()}")
    print("| engine | samplers | temperature | replies | valid | cut at max_tokens | invalid | schema refused |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
