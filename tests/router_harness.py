"""Routers in front of ferrox replicas: what tests/test_routers.py and
bench/route_bench.py share.

Router(kind, policy, workers, *extra) starts vllm-router ("vllm") or
sglang-router ("sglang") from the PyPI packages that
scripts/install-deps.sh installs (`python3 -m vllm_router.launch_router`,
`python3 -m sglang_router.launch_router`: ~/.local/bin need not be on PATH)
on 127.0.0.1, a free port and a free Prometheus port, its log in a
temporary file, and waits until it answers. The short health-check and
retry settings below are the ones test_routers.py measured with;
`health=False` leaves the routers' defaults (60 s checks).
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from server_harness import Logged, free_port

MODULES = {"vllm": "vllm_router", "sglang": "sglang_router"}
# flags both routers take, same names (router_args.py of each). The circuit
# breaker opening on a worker's first failure matters as much as the health
# checks: vllm-router 0.1.17 picks the worker again for each retry, and a
# dead replica still counted healthy can take all 5 retries of a request
# within the second before the next health check (seen once in ~10 runs
# with the default threshold).
FAST_HEALTH = ["--health-check-interval-secs", "1", "--health-failure-threshold", "1",
               "--health-success-threshold", "1", "--health-check-timeout-secs", "2",
               "--retry-max-retries", "5", "--retry-initial-backoff-ms", "50",
               "--retry-max-backoff-ms", "500", "--cb-failure-threshold", "1",
               "--cb-timeout-duration-secs", "5"]


def router_missing(kind):
    """None when the router's package imports, else why not."""
    try:
        __import__(MODULES[kind])
        return None
    except ImportError as e:
        return f"{MODULES[kind]} is missing ({e}; scripts/install-deps.sh installs it)"


def request(port, method, path, body=None, timeout=120, headers=None):
    """(status, headers, body bytes) of one HTTP request to 127.0.0.1:port;
    body (an object) is sent as JSON."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        h = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, path, body=data, headers={**h, **(headers or {})})
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()


def post_json(port, path, body, timeout=120):
    """(status, parsed JSON or the raw text) of a POST."""
    st, _, data = request(port, "POST", path, body, timeout)
    try:
        return st, json.loads(data)
    except ValueError:
        return st, data.decode("utf-8", "replace")


def stream_ttft(port, path, body, timeout=120):
    """A streaming request: (status, seconds to the first content byte of
    an SSE data event or None, whole text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.time()
    ttft, text = None, []
    try:
        c.request("POST", path, body=json.dumps({**body, "stream": True}).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            r.read()
            return r.status, None, ""
        for line in r:
            line = line.strip()
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            ev = json.loads(line[5:])
            for ch in ev.get("choices", []):
                piece = ch.get("text") or (ch.get("delta") or {}).get("content") or ""
                if piece and ttft is None:
                    ttft = time.time() - t0
                text.append(piece)
        return 200, ttft, "".join(text)
    finally:
        c.close()


def metric_sum(port, name):
    """The sum of every series of a metric in the replica's /metrics."""
    st, _, data = request(port, "GET", "/metrics", timeout=10)
    assert st == 200, st
    total = 0.0
    for line in data.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Router(Logged):
    def __init__(self, kind, policy, workers, *extra, health=True, log_level="info"):
        self.kind, self.port = kind, free_port()
        self.log = tempfile.TemporaryFile("w+")
        cmd = [sys.executable, "-m", MODULES[kind] + ".launch_router", "--host", "127.0.0.1",
               "--port", str(self.port), "--policy", policy, "--worker-urls", *workers,
               "--prometheus-port", str(free_port()), "--log-level", log_level,
               *(FAST_HEALTH if health else []), *extra]
        self.cmd = cmd
        env = dict(os.environ, NO_COLOR="1", RUST_LOG_STYLE="never")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"router exited: {self.logtext()[-3000:]}")
            try:
                # sglang-router answers /health before its workers are
                # registered; /readiness waits for a healthy one
                probe = "/readiness" if kind == "sglang" else "/health"
                st, _, _ = request(self.port, "GET", probe, timeout=2)
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"router did not answer: {self.logtext()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
