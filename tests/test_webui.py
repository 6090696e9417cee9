#!/usr/bin/env python3
"""The web chat at GET / in a real browser: headless Chromium (Debian's
chromium and chromium-driver) driven by selenium (PyPI).

usage: tests/test_webui.py [PATH/TO/ferrox]     (default: build/bin/ferrox)

On SmolLM2-135M-Instruct: the page and its headers; the Markdown renderer
on hostile and structured text; a message typed and sent, its reply seen
growing while it streams and equal to the API's greedy answer for the same
messages (temperature 0 set in the page's settings), tokens/s shown; a long
reply stopped (it stops growing, the server counts an abort and logs the
client gone); the conversation kept across a reload; a server with
--api-key (the page open without it, its calls refused until the key is
typed in). Saves a screenshot into the build folder's Testing/ (printed).
Exit 77 (skip) without the model, chromium, chromedriver or selenium,
unless FX_REQUIRE_MODELS=1.
"""
import json
import os
import re
import shutil
import tempfile
import time

from server_harness import BIN, SMOL, Checks, Server, need, skip

need("test_webui", [SMOL], ["selenium"])
CHROMIUM = next(filter(None, map(shutil.which, ["chromium", "chromium-browser", "google-chrome"])),
                None)
DRIVER = shutil.which("chromedriver") or next(
    (p for p in ["/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver"] if os.path.exists(p)),
    None)
if not CHROMIUM or not DRIVER:
    skip("test_webui", "chromium or chromedriver is missing (scripts/install-deps.sh "
         "installs them); skipping")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

T = Checks(log_bytes=3000)
check = T.check
SHOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(BIN))), "Testing",
                    "webui.png")
QUESTION = "Explain in a few sentences what a CPU does."
STORY = "Write a very long story about a dragon who learns to program computers."


def browser(profile):
    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1000,900", f"--user-data-dir={profile}"]:
        o.add_argument(a)
    return webdriver.Chrome(options=o, service=Service(DRIVER))


def metric(srv, name, label=""):
    """A metric's value: the first of its lines with that label text."""
    m, _ = srv.metrics()
    return next(v for k, v in m.items() if k.split("{")[0] == name and label in k)


def greedy(srv, messages, max_tokens, key=None):
    """The API's own answer: non-streamed, temperature 0."""
    hdr = {"Authorization": f"Bearer {key}"} if key else {}
    st, _, data = srv.post("/v1/chat/completions", {"messages": messages, "temperature": 0,
                                                    "max_tokens": max_tokens}, hdr)
    assert st == 200, (st, data[:300])
    r = json.loads(data)
    return r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]


class Page:
    """The chat page in the browser, by the element ids of index.html."""

    def __init__(self, drv, srv):
        self.d, self.srv = drv, srv
        self.wait = WebDriverWait(drv, 30, poll_frequency=0.05)

    def el(self, id_):
        return self.d.find_element(By.ID, id_)

    def open(self):
        self.d.get(f"http://127.0.0.1:{self.srv.port}/")
        self.wait.until(lambda d: d.execute_script("return document.readyState") == "complete")

    def set_field(self, id_, value):
        if not self.el("settings").is_displayed():
            self.el("toggle").click()
        f = self.el(id_)
        f.clear()
        f.send_keys(str(value))

    def replies(self):
        return self.d.find_elements(By.CSS_SELECTOR, ".msg.assistant")

    def reply(self, i, part="content"):
        """The text shown in reply i's content or meta (read at once: the
        page replaces a streaming reply's element at each piece)."""
        return self.d.execute_script(
            "const r = document.querySelectorAll('.msg.assistant .' + arguments[1])[arguments[0]];"
            "return r ? r.innerText : null;", i, part)

    def stored(self):
        return self.d.execute_script("return JSON.parse(localStorage.getItem('ferrox.chat'))")

    def watch(self):
        """Record (time ms, length) of the last reply's text at each change."""
        self.d.execute_script("""
            window.fxSeen = [];
            new MutationObserver(() => {
              const r = document.querySelectorAll('.msg.assistant .content');
              if (r.length) fxSeen.push([performance.now(), r[r.length - 1].textContent.length]);
            }).observe(document.getElementById('messages'), {childList: true, subtree: true,
                                                              characterData: true});""")

    def send(self, text):
        box = self.el("input")
        box.clear()
        box.send_keys(text)
        box.send_keys(Keys.ENTER)  # Enter sends

    def idle(self):
        self.wait.until(lambda d: self.el("send").is_enabled())


def renderer(pg):
    pg.open()
    # hostile text: escaped, so no element of its own, and shown as typed
    evil = ('<img src=x onerror="window.pwned=1"> <script>window.pwned=1</script> '
            '**<b onmouseover=alert(1)>x</b>** `<i>` [a](javascript:alert(1))')
    got = pg.d.execute_script("""
        const m = document.getElementById('messages');
        m.innerHTML = fxMarkdown(arguments[0]);
        return [m.querySelectorAll('img, script, b, i, a').length, m.textContent,
                window.pwned === undefined];""", evil)
    assert got[0] == 0, got
    assert got[1] == evil.replace("**", "").replace("`", ""), got[1]
    assert got[2], "a handler ran"
    src = ("# Title\n\nSome **bold**, *it* and `a<b>*c*` here\n\n- one\n- two *x*\n\n"
           "3. three\n4. four\n\n```c\nint *p = a**b;\n\n<tag>\n```\n## Next\nline one\nline two")
    out = pg.d.execute_script("""
        const m = document.getElementById('messages');
        m.innerHTML = fxMarkdown(arguments[0]);
        const q = (s) => [...m.querySelectorAll(s)].map((e) => e.textContent);
        return {h1: q('h1'), h2: q('h2'), strong: q('strong'), em: q('em'), code: q('p code'),
                ul: q('ul > li'), ol: q('ol > li'), start: m.querySelector('ol').start,
                pre: q('pre > code'), lang: m.querySelector('pre > code').className,
                p: m.querySelectorAll('p').length, br: m.querySelectorAll('p br').length};""", src)
    assert out == {"h1": ["Title"], "h2": ["Next"], "strong": ["bold"], "em": ["it", "x"],
                   "code": ["a<b>*c*"], "ul": ["one", "two x"], "ol": ["three", "four"],
                   "start": 3, "pre": ["int *p = a**b;\n\n<tag>"], "lang": "language-c",
                   "p": 2, "br": 1}, out


def stream_and_compare(pg, state):
    pg.open()
    pg.set_field("temperature", 0)
    pg.set_field("max-tokens", 48)
    pg.watch()
    t0 = time.time()
    pg.send(QUESTION)
    pg.wait.until(lambda d: len(pg.replies()) == 1)
    pg.idle()
    seen = pg.d.execute_script("return fxSeen")
    lens = [n for _, n in seen]
    grew = sorted(set(n for n in lens if n))
    # streamed: the text arrived in several steps over time, never shrinking
    assert lens == sorted(lens), lens
    assert len(grew) >= 4, seen
    first = next(t for t, n in seen if n)
    assert seen[-1][0] - first > 20, seen
    want, n_tok = greedy(pg.srv, [{"role": "user", "content": QUESTION}], 48)
    chat = pg.stored()
    assert [m["role"] for m in chat] == ["user", "assistant"], chat
    assert chat[1]["content"] == want, (chat[1]["content"], want)
    shown = pg.reply(0)
    assert " ".join(shown.split()) == " ".join(re.sub(r"[*_`#]", "", want).split()), (shown, want)
    meta = pg.reply(0, "meta")
    m = re.fullmatch(r"(\d+) tokens, ([\d.]+) tok/s, first token after ([\d.]+) s", meta)
    assert m and int(m[1]) == n_tok and float(m[2]) > 0, meta
    state["reply"] = shown
    print(f"     reply in {time.time() - t0:.1f} s, {len(grew)} sizes seen: {meta}")


def stop_long(pg, state):
    srv = pg.srv
    pg.set_field("max-tokens", 900)
    aborts = metric(srv, "vllm:request_success_total", 'finished_reason="abort"')
    gen0 = metric(srv, "vllm:generation_tokens_total")
    pg.send(STORY)
    pg.wait.until(lambda d: len(pg.reply(1) or "") > 60)
    assert metric(srv, "vllm:num_requests_running") == 1
    pg.el("stop").click()
    pg.idle()
    a = pg.reply(1)
    deadline = time.time() + 10
    while time.time() < deadline:
        if metric(srv, "vllm:num_requests_running") == 0:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    assert pg.reply(1) == a, "the reply still grows after stop"
    assert metric(srv, "vllm:num_requests_running") == 0
    got = metric(srv, "vllm:request_success_total", 'finished_reason="abort"')
    assert got == aborts + 1, (aborts, got)
    gen = metric(srv, "vllm:generation_tokens_total") - gen0
    assert gen < 400, gen  # ended early: 900 were allowed
    assert re.search(r"cancelled \(client gone\) after \d+ tokens", srv.logtext()), \
        srv.logtext()[-1000:]
    meta = pg.reply(1, "meta")
    assert meta.endswith("(stopped)"), meta
    assert pg.stored()[3]["content"] and pg.stored()[3]["stopped"], pg.stored()
    print(f"     stopped after {gen:.0f} tokens: {meta}")


def reload_keeps(pg, state):
    pg.d.refresh()
    pg.wait.until(lambda d: len(pg.replies()) == 2)
    roles = [e.get_attribute("class") for e in pg.d.find_elements(By.CSS_SELECTOR, ".msg")]
    assert roles == ["msg user", "msg assistant"] * 2, roles
    assert pg.reply(0) == state["reply"]
    assert "tok/s" in pg.reply(0, "meta")
    assert pg.el("temperature").get_attribute("value") == "0"
    assert pg.el("max-tokens").get_attribute("value") == "900"
    pg.wait.until(lambda d: "SmolLM2" in pg.el("model").text)
    os.makedirs(os.path.dirname(SHOT), exist_ok=True)
    assert pg.d.save_screenshot(SHOT)
    print(f"     screenshot: {SHOT}")


def page_headers(srv):
    st, h, body = srv.raw("GET", "/")
    assert st == 200 and h["Content-Type"] == "text/html; charset=utf-8", (st, h)
    assert h["Cache-Control"] == "no-cache" and h["ETag"], h
    assert b"<title>ferrox chat</title>" in body
    # nothing loaded from elsewhere
    assert re.findall(rb'(?:src|href|url)[=(]"?([^")]*)', body) == [b"data:,"], body[:200]
    st, _, body = srv.raw("GET", "/", headers={"If-None-Match": h["ETag"]})
    assert st == 304 and not body, st
    assert srv.raw("POST", "/")[0] == 405


def with_key(drv):
    srv = Server(SMOL, "--parallel", "1", "--ctx-size", "1024", "--api-key", "sekret")
    T.server = srv
    with srv:
        pg = Page(drv, srv)

        def key():
            st, _, _ = srv.raw("GET", "/")
            assert st == 200, st  # the page itself is open
            pg.open()
            pg.wait.until(lambda d: "API key" in pg.el("model").text)
            pg.set_field("temperature", 0)
            pg.set_field("max-tokens", 16)
            pg.send("Hello! Who are you?")
            pg.wait.until(lambda d: pg.el("error").text)
            pg.idle()
            assert "401" in pg.el("error").text, pg.el("error").text
            assert not pg.replies() and pg.el("input").get_attribute("value") == \
                "Hello! Who are you?"
            pg.set_field("api-key", "sekret")
            pg.wait.until(lambda d: "SmolLM2" in pg.el("model").text)
            pg.el("send").click()
            pg.wait.until(lambda d: len(pg.replies()) == 1)
            pg.idle()
            assert not pg.el("error").text, pg.el("error").text
            want, _ = greedy(srv, [{"role": "user", "content": "Hello! Who are you?"}], 16,
                             "sekret")
            assert pg.stored()[1]["content"] == want, (pg.stored(), want)

        check("--api-key: the page open, its calls need the key typed in", key)
    T.expect("the --api-key server drains and exits 0", srv.proc.returncode == 0,
             srv.proc.returncode)


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory() as profile:
        drv = browser(profile)
        try:
            srv = Server(SMOL, "--parallel", "2", "--ctx-size", "1024")
            T.server = srv
            with srv:
                pg, state = Page(drv, srv), {}
                check("GET /: the page, its type, ETag revalidation, 405", lambda: page_headers(srv))
                check("Markdown: escaped first, blocks and spans", lambda: renderer(pg))
                check("a reply streams in and equals the API's greedy answer",
                      lambda: stream_and_compare(pg, state))
                check("stop: the reply stops, the server aborts it", lambda: stop_long(pg, state))
                check("reload keeps the conversation and settings", lambda: reload_keeps(pg, state))
            T.expect("the server drains and exits 0", srv.proc.returncode == 0,
                     srv.proc.returncode)
            with_key(drv)
        finally:
            drv.quit()
    print(f"{T.passed} passed, {T.failed} failed ({time.time() - t0:.1f} s)")
    return 1 if T.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
