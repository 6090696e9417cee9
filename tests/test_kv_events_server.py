#!/usr/bin/env python3
"""`ferrox serve --kv-events-endpoint`: vLLM-format KV-cache events, checked
by a subscriber that sees only the events (pyzmq + msgpack, the way
vllm-router and llm-d read them).

- A mixed workload (shared prefixes, distinct prompts, more than the pool
  holds, so blocks are evicted) through a small pool: the set of blocks the
  events leave announced equals the server's own view (GET /kv_cache_blocks)
  at the same sequence number; frames are [topic, 8-byte big-endian seq,
  msgpack EventBatch], seqs 0, 1, ... without a gap; every BlockStored holds
  block_size token ids that are the prompt's own (POST /tokenize), its
  parent announced before it; /metrics shows prefix hits and the events.
- A late subscriber replays from 0 through the ROUTER socket and rebuilds
  the same set.
- A subscriber that never reads does not slow decoding (timed both ways).
- /get_server_info (and /server_info): the served name, block size and
  event sources routers read at registration.
- Bad input: an endpoint that cannot be bound, a bad --kv-events-config, a
  publisher we do not have: each a clear start-up error.

usage: test_kv_events_server.py [BIN]  (skips (77) without SmolLM2, pyzmq or
msgpack unless FX_REQUIRE_MODELS=1)
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import BIN, SMOL, Checks, Server, free_port, need  # noqa: E402

PROG = "test_kv_events_server"
BS = 16


class Mirror:
    """A consumer's view: announced hashes, rebuilt from batches."""

    def __init__(self):
        self.held, self.ever, self.next_seq = set(), set(), 0
        self.stored = self.removed = self.cleared = 0
        self.problems = []
        self.tokens = {}  # hash -> token ids

    def batch(self, seq, payload, msgpack):
        if seq != self.next_seq:
            self.problems.append(f"seq {seq} after {self.next_seq - 1}")
        self.next_seq = seq + 1
        b = msgpack.unpackb(payload, raw=False)
        if not (isinstance(b, list) and len(b) == 3 and isinstance(b[0], float) and b[2] == 0):
            self.problems.append(f"batch shape {type(b)} {b[:1] if isinstance(b, list) else b}")
            return
        for e in b[1]:
            t = e.get("type")
            if t == "BlockStored":
                self.stored += 1
                hs, p, toks = e["block_hashes"], e["parent_block_hash"], e["token_ids"]
                if e["block_size"] != BS or len(toks) != BS * len(hs) or e["medium"] != "GPU":
                    self.problems.append(f"BlockStored fields {e}")
                if p is not None and p not in self.ever:
                    self.problems.append(f"parent {p} never announced")
                for i, h in enumerate(hs):
                    self.held.add(h)
                    self.ever.add(h)
                    self.tokens[h] = toks[i * BS:(i + 1) * BS]
            elif t == "BlockRemoved":
                self.removed += 1
                for h in e["block_hashes"]:
                    if h not in self.held:
                        self.problems.append(f"removed {h} not held")
                    self.held.discard(h)
            elif t == "AllBlocksCleared":
                self.cleared += 1
                self.held.clear()
            else:
                self.problems.append(f"event type {t}")


def drain(sub, mirror, msgpack, until_seq, topic, timeout=20):
    """Receive until batches 0 .. until_seq - 1 are in."""
    import zmq
    deadline = time.time() + timeout
    while mirror.next_seq < until_seq and time.time() < deadline:
        if sub.poll(200, zmq.POLLIN):
            t, sq, payload = sub.recv_multipart()
            assert t == topic.encode(), t
            mirror.batch(int.from_bytes(sq, "big"), payload, msgpack)


def blocks(srv):
    import json
    st, _, body = srv.raw("GET", "/kv_cache_blocks")
    assert st == 200, st
    return json.loads(body)


def prompts():
    """Three shared prefixes (~110 tokens) x 4 questions, and 6 distinct
    prompts: more blocks than the 48-block pool, so some are evicted."""
    heads = [f"System prompt {k}: you are assistant number {k}. " + " ".join(
        f"Rule {i}: answer about topic {k * 100 + i} briefly." for i in range(12)) for k in range(3)]
    out = [h + f" User {u}: what is {u} + {k}?" for k, h in enumerate(heads) for u in range(4)]
    out += [f"Distinct prompt {j}: " + " ".join(f"word{j}x{i}" for i in range(30)) for j in range(6)]
    return out


def complete(srv, prompt, n=4):
    st, _, body = srv.post("/v1/completions", {"prompt": prompt, "max_tokens": n,
                                               "temperature": 0})
    assert st == 200, body[:300]


def workload(c, srv, sub, msgpack, topic):
    import json
    from concurrent.futures import ThreadPoolExecutor
    m = Mirror()
    ps = prompts()
    with ThreadPoolExecutor(2) as ex:
        list(ex.map(lambda p: complete(srv, p), ps))
    view = blocks(srv)
    drain(sub, m, msgpack, view["seq"], topic)
    c.expect("events reached the server's view's sequence number", m.next_seq == view["seq"],
             f"{m.next_seq} vs {view['seq']}")
    c.expect("no gap, bad field or unknown parent in the stream", not m.problems,
             str(m.problems[:5]))
    own = set(view["hashes"])
    print(f"  {view['seq']} batches, {m.stored} stored, {m.removed} removed, {len(own)} held "
          f"(server), {len(m.held)} held (events)")
    c.expect("the events' set equals the server's own", m.held == own,
             f"only events {len(m.held - own)}, only server {len(own - m.held)}")
    c.expect("blocks were evicted (the pool is smaller than the workload)", m.removed > 0,
             str(m.removed))
    # The first block of prefix 0 carries the prompt's own first 16 ids.
    st, _, body = srv.post("/tokenize", {"content": ps[0]})
    ids = json.loads(body)["tokens"]
    c.expect("token_ids are the prompt's own tokens", ids[:BS] in list(m.tokens.values()),
             str(ids[:BS]))
    met, _ = srv.metrics()
    hits = sum(v for k, v in met.items() if k.startswith("vllm:gpu_prefix_cache_hits_total"))
    c.expect("shared prefixes were served from the cache", hits > 0, str(hits))
    return m, view


def replay(c, port, msgpack, view, mirror, topic):
    import zmq
    ctx = zmq.Context.instance()
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(f"tcp://127.0.0.1:{port}")
    d.send_multipart([b"", (0).to_bytes(8, "big")])
    r = Mirror()
    deadline = time.time() + 20
    while time.time() < deadline and d.poll(2000, zmq.POLLIN):
        f = d.recv_multipart()
        if f[2] == b"\xff" * 8:  # [b"", b"", -1, b""]: the end
            break
        assert len(f) == 4 and f[1] == topic.encode(), f[:2]
        r.batch(int.from_bytes(f[2], "big"), f[3], msgpack)
    d.close()
    c.expect("a replay from 0 rebuilds the same set", r.held == mirror.held and
             r.next_seq >= view["seq"] and not r.problems,
             f"{len(r.held)} vs {len(mirror.held)}, seq {r.next_seq}, {r.problems[:3]}")


def timed_decode(srv, n=96):
    t0 = time.time()
    st, _, _ = srv.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": n,
                                            "temperature": 0, "ignore_eos": True})
    assert st == 200
    return n / (time.time() - t0)


def stalled(c, srv, port, topic):
    """tokens/s of a decode without a subscriber and with one that never
    reads (a receive buffer of one message, filled first), interleaved
    five times each; medians compared. The bound is loose (0.5x) because
    tests share the machine: a publisher that blocked on the subscriber
    would stop decoding outright, far below it."""
    import statistics
    import zmq
    plain, stall = [], []
    for r in range(5):
        plain.append(timed_decode(srv))
        s = zmq.Context.instance().socket(zmq.SUB)
        s.setsockopt(zmq.RCVHWM, 1)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt_string(zmq.SUBSCRIBE, "")
        s.connect(f"tcp://127.0.0.1:{port}")
        time.sleep(0.3)
        for p in prompts()[r * 2 % 16:r * 2 % 16 + 2]:  # events it never reads
            complete(srv, p + f" again {r}", 2)
        stall.append(timed_decode(srv))
        s.close()
    a, b = statistics.median(plain), statistics.median(stall)
    print(f"  decode: {a:.1f} tok/s without, {b:.1f} tok/s with a stalled subscriber "
          f"({b / a:.2f}x; runs {[round(x) for x in plain]} / {[round(x) for x in stall]})")
    c.expect("a stalled subscriber does not slow decoding (median >= 0.5x: a shared machine)",
             b >= 0.5 * a, f"{b:.1f} vs {a:.1f}")


def bad_start(c):
    port = free_port()
    busy = free_port()
    import zmq
    hold = zmq.Context.instance().socket(zmq.PUB)
    hold.bind(f"tcp://127.0.0.1:{busy}")
    cases = [
        (["--kv-events-endpoint", f"tcp://127.0.0.1:{busy}"], "cannot bind the KV-events PUB"),
        (["--kv-events-endpoint", "nonsense"], "cannot bind the KV-events PUB"),
        (["--kv-events-config", "{not json"], "not a JSON object"),
        (["--kv-events-config", '{"enable_kv_cache_events": true, "publisher": "nats"}'],
         "publisher 'nats'"),
        (["--kv-events-config", '{"enable_kv_cache_events": true, "buffer_steps": "x"}'],
         "wrong type or range"),
    ]
    for args, want in cases:
        p = subprocess.run([BIN, "serve", "-m", SMOL, "--port", str(port), *args],
                           capture_output=True, text=True, timeout=60)
        c.expect(f"start-up error for {args[-1][:40]!r}", p.returncode != 0 and want in p.stderr,
                 f"rc {p.returncode}: {p.stderr[-300:]}")
    hold.close()


def main():
    zmq, msgpack = need(PROG, [SMOL], ["zmq", "msgpack"])
    c = Checks()
    bad_start(c)
    pub, rep = free_port(), free_port()
    topic = "kv@pod0@smol"
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
    sub.connect(f"tcp://127.0.0.1:{pub}")
    with Server(SMOL, "--parallel", "2", "-c", "384", "--served-model-name", "smol",
                "--kv-events-endpoint", f"tcp://127.0.0.1:{pub}",
                "--kv-events-replay-endpoint", f"tcp://127.0.0.1:{rep}",
                "--kv-events-topic", topic) as srv:
        c.server = srv
        time.sleep(0.5)  # the SUB's connection settles (PUB drops before it)
        import json
        st, _, body = srv.raw("GET", "/kv_event_sources")
        src = json.loads(body) if st == 200 else None
        c.expect("/kv_event_sources names the endpoints and topic",
                 src == [{"data_parallel_rank": 0, "endpoint": f"tcp://127.0.0.1:{pub}",
                          "replay_endpoint": f"tcp://127.0.0.1:{rep}", "topic": topic}], str(src))
        for path in ("/get_server_info", "/server_info"):
            st, _, body = srv.raw("GET", path)
            si = json.loads(body) if st == 200 else {}
            c.expect(f"{path}: the served name, block size and event sources for routers",
                     si.get("served_model_name") == "smol" and si.get("kv_block_size") == BS and
                     si.get("vllm_config", {}).get("cache_config", {}).get("block_size") == BS and
                     si.get("vllm_config", {}).get("model_config", {}).get("model") == "smol" and
                     si.get("kv_event_sources") == src and si.get("max_running_requests") == 2,
                     str(si)[:400])
        st, _, body = srv.raw("GET", "/v1/models")
        c.expect("--served-model-name is the model's id",
                 json.loads(body)["data"][0]["id"] == "smol", body[:200])
        m, view = workload(c, srv, sub, msgpack, topic)
        replay(c, rep, msgpack, view, m, topic)
        stalled(c, srv, pub, topic)
        rc = srv.stop()  # a sanitizer report at exit is a non-zero status
        c.expect("the server drained and exited 0", rc == 0, f"exit {rc}")
    sub.close()
    print(f"{PROG}: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
