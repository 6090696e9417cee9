"""What the `ferrox serve` tests share: paths, skipping, checks and a server
under test (tests/test_server.py, test_structured.py, test_tool_server.py).

usage in a test: `from server_harness import ...` (the tests' own folder is
on sys.path when they run as scripts). BIN is argv[1] or build/bin/ferrox;
FX_MODELS_DIR the models folder (default models/); FX_TEST_THREADS the
server's -t; FX_SANITIZE_RUN=1 under ASan; FX_REQUIRE_MODELS=1 turns a
skip (exit 77) into a failure (exit 1).
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "ferrox")
MODELS = os.environ.get("FX_MODELS_DIR", os.path.join(ROOT, "models"))
REQUIRE = os.environ.get("FX_REQUIRE_MODELS") == "1"
GEMMA = os.path.join(MODELS, "gemma-3-270m-q4_k_m.gguf")
SMOL = os.path.join(MODELS, "SmolLM2-135M-Instruct.Q4_1.gguf")
TEMPLATES = os.path.join(os.path.dirname(ROOT), "shared", "templates")
THREADS = os.environ.get("FX_TEST_THREADS", "2")
SAN = os.environ.get("FX_SANITIZE_RUN") == "1"  # ASan: ~10x slower


def skip(prog, why):
    print(f"{prog}: {why}", file=sys.stderr)
    sys.exit(1 if REQUIRE else 77)


def need(prog, models, modules):
    """Skip unless every model file exists and every module imports; the
    modules, imported, in the order given."""
    for path in models:
        if not os.path.exists(path):
            skip(prog, f"missing {path} (scripts/get-model.sh); skipping")
    out = []
    for name in modules:
        try:
            out.append(__import__(name))
        except ImportError:
            skip(prog, f"{name} is missing (scripts/install-deps.sh installs it); skipping")
    return out


def template(name):
    """Path of a chat template in ../shared/templates, or None when absent."""
    p = os.path.join(TEMPLATES, name)
    return p if os.path.exists(p) else None


class Checks:
    """Counts checks; on a failure prints the traceback and the tail of the
    current server's log (log_bytes of it)."""

    def __init__(self, log_bytes=3000):
        self.passed = self.failed = 0
        self.log_bytes = log_bytes
        self.server = None  # the server under test, for its log on failure

    def check(self, name, fn):
        """Run fn(); an exception fails the check."""
        t0 = time.time()
        try:
            fn()
            self.passed += 1
            print(f"ok   {name} ({time.time() - t0:.1f} s)", flush=True)
        except Exception:
            self.failed += 1
            print(f"FAIL {name}", flush=True)
            traceback.print_exc()
            self.log_tail()

    def expect(self, name, ok, detail=""):
        """A check on a value already computed."""
        self.passed += bool(ok)
        self.failed += not ok
        print(("ok   " if ok else "FAIL ") + name + ("" if ok else f" {detail}"), flush=True)
        if not ok:
            self.log_tail()

    def log_tail(self):
        if self.server:
            n = self.log_bytes
            print(f"---- server log (last {n} bytes) ----\n" + self.server.logtext()[-n:])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Logged:
    """A child process (self.proc) whose output goes to self.log: a context
    manager that stops it, and its log's text."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()


class Server(Logged):
    """`ferrox serve -m model *args` on a free port, healthy when built; its
    log in a temporary file (gone when the test ends)."""

    def __init__(self, model, *args):
        self.port = free_port()
        self.log = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [BIN, "serve", "-m", model, "--port", str(self.port), "-t", THREADS, *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.logtext()}")
            try:
                st, _, _ = self.raw("GET", "/health", timeout=5)
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not become healthy: {self.logtext()[-2000:]}")

    def raw(self, method, path, body=None, headers=None, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request(method, path, body=body, headers=headers or {})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def post(self, path, obj, headers=None):
        return self.raw("POST", path, json.dumps(obj).encode(),
                        {"Content-Type": "application/json", **(headers or {})})

    def metrics(self):
        """/metrics as {name{labels}: value} and the raw text."""
        st, _, data = self.raw("GET", "/metrics")
        assert st == 200, st
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out, data.decode()

    def client(self, key="none", timeout=300):
        import openai
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key,
                             max_retries=0, timeout=timeout)

    def stop(self):
        """SIGTERM (the server drains), SIGKILL after 60 s; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
