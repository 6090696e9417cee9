#!/usr/bin/env python3
"""llama-server's own endpoints on `ferrox serve` (src/server/llama.c), on
SmolLM2-135M-Instruct:

- GET /props: llama-server's fields, checked against the server's flags and
  the model (its BOS/EOS pieces tokenize to one control token each); POST
  /props is a 501 (llama-server without --props);
- POST /completion: greedy text and counts equal /v1/completions' for the
  same prompt; `tokens` (return_tokens) detokenize to the text; streamed
  chunks concatenate to the non-streamed text and tokens, the last event
  has stop=true and timings, no [DONE]; a stop string cuts the text
  (stop_type word, stopping_word); a prompt of token ids and a mixed one
  answer as the string; json_schema constrains it; bad options are 400s;
  /completions is the same endpoint;
- /slots: a request with id_slot runs there; GET lists every slot with
  its last request's counts and params; without --slot-save-path save is a 501;
  with it: save after a request writes the slot's tokens (n_saved = prompt
  + output fed back; n_written = the file's size), erase forgets them
  (n_erased; a save then is a 400), bad filenames are 400s; a fresh server
  restores the file and then serves the same prompt from the cache
  (timings.cache_n = its full blocks, prompt_n the rest) with the same
  greedy text; a truncated file, a file whose model id was changed and a
  missing file are clear 400s;
- Gemma 3 (sliding window 512, paged): save and restore the same way; a
  slot past the window plus the 32 rows kept is a clear 501.

usage: test_server_llama.py [path/to/ferrox]  (exit 77: skipped)
"""
import json
import os
import shutil
import sys
import tempfile
import threading
import time

from server_harness import GEMMA, SMOL, Checks, Server, need

T = Checks()
PROMPT = "The capital of France is Paris. The capital of Italy is"
LONG = ("You are a careful assistant who answers in one short sentence. " * 6 +
        "Question: what is the largest planet of the solar system? Answer:")
BLOCK = 16  # --block-size's default


def post(srv, path, obj):
    st, _, data = srv.post(path, obj)
    return st, json.loads(data) if data else None


def sse_events(srv, path, obj):
    st, _, data = srv.post(path, obj)
    assert st == 200, (st, data[:300])
    text = data.decode()
    assert "[DONE]" not in text, text[-200:]
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


def tokenize(srv, text, special=True):
    st, d = post(srv, "/tokenize", {"content": text, "add_special": special})
    assert st == 200, d
    return d["tokens"]


def detokenize(srv, toks):
    st, d = post(srv, "/detokenize", {"tokens": toks})
    assert st == 200, d
    return d["content"]


def run_plain(srv):
    """Server without --slot-save-path: /props, /completion, GET /slots."""
    base = {}

    def props():
        st, _, data = srv.raw("GET", "/props")
        assert st == 200, st
        p = json.loads(data)
        assert p["total_slots"] == 2, p["total_slots"]
        dg = p["default_generation_settings"]
        assert dg["n_ctx"] == 1024, dg
        assert dg["params"]["n_predict"] == -1, dg["params"]
        assert p["model_path"] == SMOL, p["model_path"]
        assert p["modalities"] == {"vision": False, "video": False, "audio": False}
        assert "<|im_start|>" in p["chat_template"], p["chat_template"][:200]
        for key in ("bos_token", "eos_token"):
            toks = tokenize(srv, p[key])
            assert len(toks) == 1, (key, p[key], toks)  # one control token
        st, _, _ = srv.post("/props", {"n_ctx": 5})
        assert st == 501, st

    def completion_vs_v1():
        st, v1 = post(srv, "/v1/completions", {"prompt": PROMPT, "max_tokens": 24, "temperature": 0})
        assert st == 200, v1
        st, d = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 24, "temperature": 0,
                                          "return_tokens": True})
        assert st == 200, d
        assert d["content"] == v1["choices"][0]["text"], (d["content"], v1["choices"][0]["text"])
        # 24 tokens, or fewer where the greedy reply ends (an end-of-text
        # token: under ASan's last-bit logits it does)
        n = d["tokens_predicted"]
        assert n == v1["usage"]["completion_tokens"] and 8 <= n <= 24, (d, v1["usage"])
        assert d["tokens_evaluated"] == v1["usage"]["prompt_tokens"]
        assert d["stop"] is True and d["stop_type"] == ("limit" if n == 24 else "eos"), d["stop_type"]
        shown = d["tokens"][:n if n == 24 else n - 1]  # the end-of-text token is not in content
        assert len(d["tokens"]) == n and detokenize(srv, shown) == d["content"], (d["tokens"], d["content"])
        t = d["timings"]
        assert t["predicted_n"] == n and t["prompt_n"] + t["cache_n"] == d["tokens_evaluated"], t
        assert d["generation_settings"]["n_predict"] == 24
        assert d["prompt"] == PROMPT, d["prompt"]
        base.update(d, shown=shown)
        st, d2 = post(srv, "/completions", {"prompt": PROMPT, "n_predict": 24, "temperature": 0})
        assert st == 200 and d2["content"] == d["content"], d2

    def streaming():
        ev = sse_events(srv, "/completion", {"prompt": PROMPT, "n_predict": 24, "temperature": 0,
                                             "stream": True, "return_tokens": True})
        assert all(e["stop"] is False for e in ev[:-1]) and ev[-1]["stop"] is True, ev[-1]
        assert "".join(e["content"] for e in ev) == base["content"]
        # the stream's events carry no end-of-text token (the non-streamed
        # reply's "tokens" ends with it when the reply ends there)
        assert sum((e["tokens"] for e in ev), []) == base["shown"]
        assert ev[-1]["timings"]["predicted_n"] == base["tokens_predicted"], ev[-1]["timings"]
        assert len(ev) > 2, len(ev)

    def stop_string():
        text = base["content"]
        stop = text[len(text) // 2:len(text) // 2 + 3]
        st, d = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 24, "temperature": 0,
                                          "stop": [stop]})
        assert st == 200, d
        assert d["content"] == text[:text.index(stop)], (d["content"], stop)
        assert d["stop_type"] == "word" and d["stopping_word"] == stop, d

    def token_prompts():
        ids = tokenize(srv, PROMPT)
        st, d = post(srv, "/completion", {"prompt": ids, "n_predict": 24, "temperature": 0})
        assert st == 200 and d["content"] == base["content"], d
        assert d["tokens_evaluated"] == len(ids)
        cut = PROMPT.index(" Italy")
        mixed = tokenize(srv, PROMPT[:cut]) + [PROMPT[cut:]]
        st, d = post(srv, "/completion", {"prompt": mixed, "n_predict": 24, "temperature": 0})
        assert st == 200, d
        assert d["tokens_evaluated"] == len(ids) and d["content"] == base["content"], d

    def json_schema():
        schema = {"type": "object", "properties": {"city": {"type": "string"}},
                  "required": ["city"]}
        st, d = post(srv, "/completion", {"prompt": "The capital of Italy as JSON:",
                                          "n_predict": 48, "temperature": 0,
                                          "json_schema": schema})
        assert st == 200, d
        obj = json.loads(d["content"])
        assert isinstance(obj.get("city"), str), obj

    def bad_requests():
        for body in ({"prompt": "x", "n": 2}, {"prompt": "x", "n_predict": "many"},
                     {"prompt": "x", "id_slot": 7}, {"prompt": "x", "return_tokens": 1},
                     {"prompt": ["a", "b"]}, {"prompt": [1, {"x": 1}]}):
            st, d = post(srv, "/completion", body)
            assert st == 400, (body, st, d)

    def slots_plain():
        st, d = post(srv, "/completion", {"prompt": PROMPT, "n_predict": 4, "temperature": 0,
                                          "id_slot": 1})
        assert st == 200 and d["id_slot"] == 1, d
        st, _, data = srv.raw("GET", "/slots")
        assert st == 200, st
        sl = json.loads(data)
        assert [s["id"] for s in sl] == [0, 1], sl
        assert all(s["n_ctx"] == 1024 and s["is_processing"] is False for s in sl), sl
        assert sl[1]["n_prompt_tokens"] == d["tokens_evaluated"], sl[1]
        assert sl[1]["next_token"][0]["n_decoded"] == 4 and sl[1]["params"]["n_predict"] == 4
        assert sl[1]["n_tokens"] == d["tokens_evaluated"] + 3, sl[1]
        # a running request: its slot is processing, its decoded count grows
        done = []
        th = threading.Thread(target=lambda: done.append(post(
            srv, "/completion", {"prompt": PROMPT, "n_predict": 200, "temperature": 0,
                                 "ignore_eos": True, "id_slot": 0})))
        th.start()
        seen = []
        while th.is_alive():
            s0 = json.loads(srv.raw("GET", "/slots")[2])[0]
            if s0["is_processing"]:
                seen.append(s0["next_token"][0]["n_decoded"])
            time.sleep(0.05)
        th.join()
        assert done and done[0][0] == 200, done
        assert len(seen) >= 2 and seen[-1] > seen[0], seen
        st, d = post(srv, "/slots/0?action=save", {"filename": "x.bin"})
        assert st == 501, (st, d)
        st, d = post(srv, "/slots/0?action=erase", {})
        assert st == 200 and d["id_slot"] == 0, d
        st, d = post(srv, "/slots/9?action=erase", {})
        assert st == 400, d
        st, d = post(srv, "/slots/0?action=dance", {})
        assert st == 400, d

    for name, fn in (("props", props), ("completion_vs_v1", completion_vs_v1),
                     ("streaming", streaming), ("stop_string", stop_string),
                     ("token_prompts", token_prompts), ("json_schema", json_schema),
                     ("bad_requests", bad_requests),
                     ("slots_plain", slots_plain)):
        T.check(name, fn)
    clean_exit(srv)


def clean_exit(srv):
    """SIGTERM: the server drains and exits 0 (under ASan: no leak)."""
    rc = srv.stop()
    T.expect("clean exit", rc == 0, f"exit status {rc}")


def run_slots(tmp):
    """Save, erase and refusals on one server; restore on a fresh one."""
    dirpath = os.path.join(tmp, "slots")
    saved = {}
    with Server(SMOL, "--parallel", "2", "--ctx-size", "1024",
                "--slot-save-path", dirpath) as srv:
        T.server = srv

        def save_erase():
            st, d = post(srv, "/completion", {"prompt": LONG, "n_predict": 16, "temperature": 0})
            assert st == 200, d
            slot = d["id_slot"]
            st, sv = post(srv, f"/slots/{slot}?action=save", {"filename": "s1.bin"})
            assert st == 200, sv
            want = d["tokens_evaluated"] + d["tokens_predicted"] - 1
            assert sv["n_saved"] == want, (sv, want)
            assert sv["n_written"] == os.path.getsize(os.path.join(dirpath, "s1.bin")), sv
            assert sv["filename"] == "s1.bin" and sv["timings"]["save_ms"] >= 0, sv
            st, _, data = srv.raw("GET", "/slots")
            assert json.loads(data)[slot]["n_tokens"] == want
            st, er = post(srv, f"/slots/{slot}?action=erase", {})
            assert st == 200 and er["n_erased"] == want, er
            st, d2 = post(srv, f"/slots/{slot}?action=save", {"filename": "s2.bin"})
            assert st == 400, d2  # nothing left to save
            saved.update(d, slot=slot)

        def bad_filenames():
            for body in ({"filename": "../x.bin"}, {"filename": "a/b"}, {"filename": ""},
                         {"filename": ".hidden"}, {"name": "x"}, {}):
                st, d = post(srv, "/slots/0?action=save", body)
                assert st == 400, (body, st, d)
            assert not os.path.exists(os.path.join(tmp, "x.bin"))

        T.check("save_erase", save_erase)
        T.check("bad_filenames", bad_filenames)
        clean_exit(srv)
    if "slot" not in saved:
        return
    path = os.path.join(dirpath, "s1.bin")
    data = open(path, "rb").read()
    with open(os.path.join(dirpath, "trunc.bin"), "wb") as f:
        f.write(data[:len(data) - 1000])
    other = bytearray(data)
    other[16] ^= 0xFF  # the model id: a file from another model
    with open(os.path.join(dirpath, "other.bin"), "wb") as f:
        f.write(bytes(other))
    with Server(SMOL, "--parallel", "2", "--ctx-size", "1024",
                "--slot-save-path", dirpath) as srv:
        T.server = srv

        def bad_files():
            for name, words in (("trunc.bin", "truncated"), ("other.bin", "another model"),
                                ("missing.bin", "cannot open")):
                st, d = post(srv, "/slots/1?action=restore", {"filename": name})
                assert st == 400 and words in d["error"]["message"], (name, st, d)
            st, _, body = srv.raw("GET", "/slots")
            assert all(s["n_tokens"] == 0 for s in json.loads(body)), body

        def restore():
            st, r = post(srv, "/slots/1?action=restore", {"filename": "s1.bin"})
            assert st == 200, r
            n = saved["tokens_evaluated"] + saved["tokens_predicted"] - 1
            assert r["n_restored"] == n and r["n_read"] == len(data), r
            st, d = post(srv, "/completion", {"prompt": LONG, "n_predict": 16, "temperature": 0})
            assert st == 200, d
            n_prompt = d["tokens_evaluated"]
            cached = (n_prompt - 1) // BLOCK * BLOCK
            t = d["timings"]
            assert t["cache_n"] == cached and t["prompt_n"] == n_prompt - cached, (t, n_prompt)
            assert d["content"] == saved["content"], (d["content"], saved["content"])
            print(f"     {cached} of {n_prompt} prompt tokens served from the restored state")

        T.check("bad_files", bad_files)
        T.check("restore", restore)
        clean_exit(srv)


def run_gemma(tmp):
    """Gemma 3 (sliding window of 512 on the paged layout): a slot saved and
    restored on a fresh server serves its prompt from the cache with the
    same text; a slot longer than the window plus the 32 rows kept is a
    clear 501."""
    dirpath = os.path.join(tmp, "gemma")
    prompt = "The quick brown fox jumps over the lazy dog. " * 8 + "Then the fox"
    body = {"prompt": prompt, "n_predict": 12, "temperature": 0}
    first = {}
    with Server(GEMMA, "--parallel", "2", "--ctx-size", "1024", "--slot-save-path", dirpath) as srv:
        T.server = srv

        def gemma_save():
            st, d = post(srv, "/completion", body)
            assert st == 200, d
            st, sv = post(srv, f"/slots/{d['id_slot']}?action=save", {"filename": "g.bin"})
            assert st == 200, sv
            first.update(d)
            st, d = post(srv, "/completion", {"prompt": "Once upon a time " * 150,
                                              "n_predict": 2, "temperature": 0})
            assert st == 200 and d["tokens_evaluated"] > 512 + 32, d["tokens_evaluated"]
            st, sv = post(srv, f"/slots/{d['id_slot']}?action=save", {"filename": "long.bin"})
            assert st == 501 and "sliding-window" in sv["error"]["message"], (st, sv)

        T.check("gemma_save", gemma_save)
        clean_exit(srv)
    if not first:
        return
    with Server(GEMMA, "--parallel", "2", "--ctx-size", "1024", "--slot-save-path", dirpath) as srv:
        T.server = srv

        def gemma_restore():
            st, r = post(srv, "/slots/0?action=restore", {"filename": "g.bin"})
            assert st == 200, r
            st, d = post(srv, "/completion", body)
            assert st == 200, d
            n = d["tokens_evaluated"]
            assert d["timings"]["cache_n"] == (n - 1) // BLOCK * BLOCK, (d["timings"], n)
            assert d["content"] == first["content"], (d["content"], first["content"])

        T.check("gemma_restore", gemma_restore)
        clean_exit(srv)


def main():
    need("test_server_llama", [SMOL], [])
    tmp = tempfile.mkdtemp(prefix="fx_llama_srv_")
    try:
        with Server(SMOL, "--parallel", "2", "--ctx-size", "1024") as srv:
            T.server = srv
            run_plain(srv)
        run_slots(tmp)
        if os.path.exists(GEMMA):
            run_gemma(tmp)
        else:
            print(f"note: {GEMMA} absent; the sliding-window checks are skipped")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{T.passed} passed, {T.failed} failed")
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
