"""ferrox.Model against the `ferrox` CLI on the two default models:
generation (greedy and seeded) equals `ferrox run`, chat equals `ferrox
chat`, tokenize equals `ferrox tokenize --ids`; streaming, detokenizing,
stop strings, and errors carrying the library's message."""
import json

import pytest

import ferrox
from ferrox import _lib, _model

from conftest import model_path

PROMPTS = {
    "smollm2": ["The capital of France is", "The capital of France is a city where", "def fibonacci(n):"],
    "gemma3": ["The history of the printing press", "The history of the printing press began", "Water boils at"],
}
_runs = {}


def run_greedy(cli, model, prompt, n):
    """`ferrox run --temp 0`'s stdout, once per (model, prompt, n)."""
    key = (model.path, prompt, n)
    if key not in _runs:
        _runs[key] = cli("run", "-m", model.path, "-p", prompt, "-n", str(n), "--temp", "0")
    return _runs[key]
TEXTS = ["Hello world", "  leading spaces and\ttabs\n\nnew lines", "naïve café, Ünïcödé: 日本語の文章 😀👍",
         "<|im_start|>user<|im_end|> <start_of_turn>model <bos>", "x" * 300, "1234567890 3.14159"]


def test_generate_greedy_matches_run(model, cli):
    n = 24
    # in sequence on one Model: a longer prompt reuses the shorter one's
    # tokens from the context, going back to it removes the tail
    for prompt in PROMPTS[model.name][:2] + PROMPTS[model.name][:1]:
        want = run_greedy(cli, model, prompt, n)
        got = model.generate(prompt, max_tokens=n, temperature=0)
        assert got + "\n" == want, prompt
        assert got.strip()


def test_generate_seeded_matches_run(model, cli):
    prompt, n = PROMPTS[model.name][0], 24
    want = cli("run", "-m", model.path, "-p", prompt, "-n", str(n), "--temp", "0.9", "--seed", "1234")
    assert model.generate(prompt, max_tokens=n, temperature=0.9, seed=1234) + "\n" == want
    # other seeds, other text (two tries: one could coincide by chance)
    others = {model.generate(prompt, max_tokens=n, temperature=0.9, seed=s) for s in (1, 2)}
    assert len(others | {want[:-1]}) > 1


def test_stream_pieces_concatenate_to_generate(model):
    prompt = PROMPTS[model.name][2]
    pieces = list(model.stream(prompt, max_tokens=32, temperature=0))
    assert len(pieces) > 5 and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == model.generate(prompt, max_tokens=32, temperature=0)


def test_generate_until_the_context_is_full(smollm2, cli):
    prompt = PROMPTS["smollm2"][2]
    want = cli("run", "-m", smollm2.path, "-p", prompt, "-c", "48", "-n", "-1", "--temp", "0")
    with ferrox.Model(smollm2.path, n_ctx=48) as m:
        got = m.generate(prompt, max_tokens=-1, temperature=0)
        assert got + "\n" == want
        # n_ctx - n_prompt + 1 tokens: the last one sampled, not decoded
        n_prompt = len(m.tokenize(prompt, parse_special=True))
        assert len(m.tokenize(got, add_special=False)) == pytest.approx(48 - n_prompt + 1, abs=3)
        assert m.generate(prompt, max_tokens=0) == ""


def test_prompt_spelling_bos_gets_one(gemma3):
    plain = gemma3.tokenize("Water boils at", parse_special=True)
    assert plain[0] == gemma3.bos  # Gemma asks for BOS
    assert gemma3.tokenize("<bos>Water boils at", parse_special=True)[:2] == [gemma3.bos] * 2
    assert gemma3._prompt_tokens("<bos>Water boils at") == plain
    assert gemma3.generate("<bos>Water boils at", max_tokens=8, temperature=0) == \
        gemma3.generate(plain, max_tokens=8, temperature=0)


def test_token_ids_prompt(model):
    prompt = PROMPTS[model.name][0]
    ids = model.tokenize(prompt, add_special=True, parse_special=True)
    assert model.generate(ids, max_tokens=12, temperature=0) == model.generate(prompt, max_tokens=12,
                                                                               temperature=0)


def test_stream_never_splits_utf8(smollm2):
    # byte-level BPE spells 😀 and 語 with byte tokens: some tokens alone are
    # not whole UTF-8, so the detokenizer must hold bytes back
    text = "日本語の文章 😀👍 naïve"
    ids = smollm2.tokenize(text, add_special=False)
    raw = [smollm2.token_to_piece(t) for t in ids]
    assert b"".join(raw) == text.encode()
    incomplete = 0
    for r in raw:
        try:
            r.decode("utf-8")
        except UnicodeDecodeError:
            incomplete += 1
    assert incomplete > 0
    d = _model._Detok(smollm2._m)
    pieces = [d.push(t) for t in ids] + [d.flush()]
    assert "".join(pieces) == text
    assert "\ufffd" not in "".join(pieces)


def test_stop_strings(model):
    prompt = PROMPTS[model.name][0]
    full = model.generate(prompt, max_tokens=32, temperature=0)
    words = full.split()
    assert len(words) > 3
    stop = words[2]
    cut = full[:full.index(stop)]
    assert model.generate(prompt, max_tokens=32, temperature=0, stop=[stop]) == cut
    assert "".join(model.stream(prompt, max_tokens=32, temperature=0, stop=["\x00never", stop])) == cut
    assert model.generate(prompt, max_tokens=32, temperature=0, stop=["\x00never"]) == full


def test_chat_matches_ferrox_chat(smollm2, cli):
    q = "What is the capital of France?"
    want = cli("chat", "-m", smollm2.path, "--temp", "0", "-n", "40", stdin=(q + "\n").encode())
    msgs = [{"role": "user", "content": q}]
    got = smollm2.chat(msgs, max_tokens=40, temperature=0)
    assert got.strip() and got + "\n" == want
    assert "".join(smollm2.chat(msgs, max_tokens=40, temperature=0, stream=True)) == got
    # the rendered prompt is the template's: the message inside the turn
    text = smollm2.apply_chat_template(msgs)
    assert "<|im_start|>user\n" + q + "<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")


def test_chat_with_given_template(gemma3):
    assert gemma3.chat_template is None  # a base model
    with pytest.raises(ferrox.Error, match="no chat template"):
        gemma3.chat([{"role": "user", "content": "Hi"}])
    tmpl = ("{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n"
            "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
    msgs = [{"role": "user", "content": "Say <start_of_turn> twice"}]
    text = gemma3.apply_chat_template(msgs, template=tmpl)
    assert text == "<bos><start_of_turn>user\nSay <start_of_turn> twice<end_of_turn>\n<start_of_turn>model\n"
    ids = gemma3.tokenize(text, add_special=False, parse_special=True)
    turn = gemma3.tokenize("<start_of_turn>", add_special=False, parse_special=True)
    assert len(turn) == 1
    # the template's turn markers become control tokens, the user's stays text
    chat_ids = _chat_ids(gemma3, msgs, tmpl)
    assert chat_ids.count(turn[0]) == 2 and ids.count(turn[0]) == 3
    assert isinstance(gemma3.chat(msgs, template=tmpl, max_tokens=8, temperature=0), str)


def _chat_ids(m, msgs, tmpl):
    return m._chat_tokens(msgs, tmpl, None, {})


@pytest.mark.parametrize("add_special", [True, False])
@pytest.mark.parametrize("parse_special", [False, True])
def test_tokenize_matches_cli(model, cli, add_special, parse_special):
    for text in TEXTS[:4]:
        args = ["tokenize", "-m", model.path, "-p", text, "--ids"]
        args += [] if add_special else ["--no-bos"]
        args += ["--special"] if parse_special else []
        want = json.loads(cli(*args))
        assert model.tokenize(text, add_special=add_special, parse_special=parse_special) == want, text


def test_detokenize_round_trip(model):
    for text in TEXTS:
        ids = model.tokenize(text, add_special=False)
        assert model.detokenize(ids) == text
        assert model.detokenize(model.tokenize(text)) == text  # BOS has no text
    bos = model.bos
    assert bos is not None
    assert model.detokenize([bos], special=True) == model.token_to_piece(bos).decode()
    assert model.tokenize(text.encode()) == model.tokenize(text)


def test_properties(model):
    assert model.n_ctx == 4096 and model.n_vocab > 1000 and model.n_embd > 0
    assert model.arch in ("llama", "gemma3")
    assert model.is_eog(model.eos)


def test_errors_carry_the_message(tmp_path):
    assert issubclass(ferrox.Error, RuntimeError)
    with pytest.raises(ferrox.Error) as e:
        ferrox.Model(str(tmp_path / "missing.gguf"))
    assert "missing.gguf" in str(e.value) and "No such file" in str(e.value)
    assert e.value.code == _lib.FX_E_IO and e.value.status == "I/O error"
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope" * 20)
    with pytest.raises(ferrox.Error, match="not a GGUF file") as e:
        ferrox.Model(bad)
    assert e.value.code == _lib.FX_E_FORMAT
    with pytest.raises(ValueError):
        ferrox.Model(bad, n_ctx=-1)


def test_errors_from_a_loaded_model(smollm2):
    with pytest.raises(ferrox.Error, match="template line 1") as e:
        smollm2.chat([{"role": "user", "content": "x"}], template="{{ raise_exception('no thanks') }}")
    assert "no thanks" in str(e.value) and e.value.code == _lib.FX_E_INVALID
    with pytest.raises(ferrox.Error) as e:
        smollm2.apply_chat_template([], template="{% for %}")
    assert e.value.code == _lib.FX_E_FORMAT and "line" in str(e.value)
    with pytest.raises(ferrox.Error, match="out of range|invalid") as e:
        smollm2.detokenize([smollm2.n_vocab + 5])
    with pytest.raises(ferrox.Error, match="no room to generate"):
        smollm2.generate("word " * 5000)
    with pytest.raises(ferrox.Error, match="empty"):
        smollm2.generate([])
    with pytest.raises(ferrox.Error) as e:  # a bad id reaches fx_decode: its message
        smollm2.generate([1, smollm2.n_vocab + 7], max_tokens=2)
    assert e.value.code == _lib.FX_E_INVALID and str(e.value)
    # after the errors the model still works
    assert smollm2.generate("The capital of France is", max_tokens=4, temperature=0)


def test_interleaved_streams_and_close():
    m = ferrox.Model(model_path("smollm2"), n_ctx=256)
    a = m.stream("One, two, three,", max_tokens=16, temperature=0)
    next(a)
    b = m.generate("Hello", max_tokens=4, temperature=0)
    assert b
    with pytest.raises(ferrox.Error, match="another generation"):
        list(a)
    s = m.stream("One, two, three,", max_tokens=16, temperature=0)
    next(s)
    m.close()
    with pytest.raises(ferrox.Error, match="closed"):
        list(s)
    with pytest.raises(ferrox.Error, match="closed"):
        m.tokenize("x")
    m.close()  # twice is fine
    m = ferrox.Model(model_path("smollm2"), n_ctx=64)
    with m._lock:  # as if another thread were inside a call
        with pytest.raises(ferrox.Error, match="busy in another thread"):
            m.generate("Hello", max_tokens=2)
    assert m.generate("Hello", max_tokens=2, temperature=0)
    m.close()
    with ferrox.Model(model_path("smollm2"), n_ctx=128) as m2:
        assert m2.n_ctx == 128
    with pytest.raises(ferrox.Error, match="closed"):
        m2.generate("x")


def test_embed(smollm2):
    if not _lib.has_embed:
        with pytest.raises(NotImplementedError, match="fx_embed"):
            smollm2.embed("hello")
        pytest.skip("this libferrox has no fx_embed")
    text = "The quick brown fox jumps over the lazy dog"
    n = smollm2.n_embd
    raw = {p: smollm2.embed(text, pooling=p, normalize=False) for p in ferrox.POOLINGS}
    for p, v in raw.items():
        assert len(v) == n
        norm = sum(x * x for x in v) ** 0.5
        assert norm > 0
        unit = smollm2.embed(text, pooling=p)
        assert abs(sum(x * x for x in unit) - 1) < 1e-4
        assert max(abs(a / norm - b) for a, b in zip(v, unit)) < 1e-5
    assert raw["last"] != raw["mean"] and raw["cls"] != raw["mean"]
    # last pooling of a prefix is the first-tokens' state: cls of the text
    ids = smollm2.tokenize(text, parse_special=True)
    assert smollm2.embed(ids[:1], pooling="last", normalize=False) == pytest.approx(raw["cls"], abs=1e-4)
    assert smollm2.embed(ids, pooling="last", normalize=False) == pytest.approx(raw["last"], abs=1e-4)
    with pytest.raises(ValueError):
        smollm2.embed(text, pooling="max")


def test_embed_matches_ferrox_embed(model):
    """Where the CLI has `ferrox embed` (llama-embedding's flags): the same
    vectors, per pooling, to its 7 printed decimals."""
    import subprocess
    from conftest import CLI
    if not _lib.has_embed:
        pytest.skip("this libferrox has no fx_embed")
    if subprocess.run([CLI, "embed", "--help"], capture_output=True).returncode != 0:
        pytest.skip("this ferrox has no embed command")
    text = "Embeddings of a short sentence."
    for pooling in ferrox.POOLINGS:
        r = subprocess.run([CLI, "embed", "-m", model.path, "-p", text, "--pooling", pooling,
                            "--embd-output-format", "array"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        want = json.loads(r.stdout)[0]
        assert model.embed(text, pooling=pooling) == pytest.approx(want, abs=2e-6), pooling
