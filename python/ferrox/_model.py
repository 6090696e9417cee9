"""ferrox.Model: a loaded model, one context, and generation over it.

Generation follows `ferrox run` (tools/run.c) step for step: the prompt is
tokenized with BOS as the model asks and special-token texts parsed, its
tokens recorded in the sampler's penalty history, each token sampled at its
position (fx_sampler_sample_at) from the model's sampling defaults under
the caller's values, text produced through the streaming detokenizer, and
generation ends at an end-of-generation token, after max_tokens, or when
the context is full. So greedy output equals `ferrox run --temp 0`'s, and
the same seed gives `ferrox run --seed S`'s. chat() follows `ferrox chat`
(tools/chat.c): the model's template rendered by fx_chat_render, tokenized
by fx_tokenize_prompt (message text stays plain text).
"""
import ctypes
import contextlib
import json
import os
import threading
from ctypes import POINTER, byref, c_float, c_int32, c_size_t, c_void_p

from . import _lib as L

POOLINGS = {"last": 0, "mean": 1, "cls": 2}  # fx_embed's pooling argument
_lib = L.lib


def _status_str(code):
    s = _lib.fx_status_str(code)
    return s.decode("utf-8", "replace") if s else "status %d" % code


class Error(RuntimeError):
    """A libferrox failure. str(e) is the library's message; e.code the
    FX_E_* status (negative int), e.status its short name."""

    def __init__(self, message, code=L.FX_E_INVALID):
        super().__init__(message)
        self.code = code
        self.status = _status_str(code)


def _from_err(err, rc, prefix=""):
    msg = err.msg.decode("utf-8", "replace") or _status_str(rc)
    return Error(prefix + msg, rc)


def _ids(tokens):
    arr = (c_int32 * len(tokens))()
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError("token ids must be ints, got %r" % (t,))
        if not -2**31 <= t < 2**31:
            raise Error("token id %d is out of range" % t, L.FX_E_INVALID)
        arr[i] = t
    return arr


class _Detok:
    """fx_detok_push/flush: text pieces that never split a UTF-8 character
    (an incomplete one is held until its last byte arrives)."""

    def __init__(self, model, special=False):
        self._m = model
        self._special = special
        self._st = L.FxDetok()
        self._buf = ctypes.create_string_buffer(256)

    def _call(self, fn):
        n = c_size_t()
        rc = fn(n)
        if rc == L.FX_E_INVALID and n.value > len(self._buf):  # room for a long piece
            self._buf = ctypes.create_string_buffer(n.value)
            rc = fn(n)
        if rc:
            return rc, ""
        # strict: a split character here would be a library bug, not data
        return 0, self._buf.raw[:n.value].decode("utf-8")

    def push(self, t):
        rc, s = self._call(lambda n: _lib.fx_detok_push(self._m, byref(self._st), t, self._special, self._buf,
                                                        len(self._buf), byref(n)))
        if rc:
            raise Error("detokenize: token %d: %s" % (t, _status_str(rc)), rc)
        return s

    def flush(self):
        rc, s = self._call(lambda n: _lib.fx_detok_flush(byref(self._st), self._buf, len(self._buf), byref(n)))
        if rc:
            raise Error("detokenize: %s" % _status_str(rc), rc)
        return s


class _StopFilter:
    """Cuts text at the first stop string; holds back a tail that may be
    the start of one until the next piece decides."""

    def __init__(self, stop):
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        self.stop = [s for s in stop if s]
        self.pending = ""

    def feed(self, piece):
        """(text safe to emit, stopped)"""
        self.pending += piece
        if not self.stop:
            out, self.pending = self.pending, ""
            return out, False
        hits = [i for i in (self.pending.find(s) for s in self.stop) if i >= 0]
        if hits:
            out, self.pending = self.pending[:min(hits)], ""
            return out, True
        keep = 0
        for k in range(min(len(self.pending), max(map(len, self.stop)) - 1), 0, -1):
            if any(s.startswith(self.pending[-k:]) for s in self.stop):
                keep = k
                break
        cut = len(self.pending) - keep
        out, self.pending = self.pending[:cut], self.pending[cut:]
        return out, False

    def finish(self):
        out, self.pending = self.pending, ""
        return out


class Model:
    """A model file (GGUF, or a Hugging Face checkpoint directory) loaded
    with one context of n_ctx tokens.

    n_ctx: tokens the context holds, prompt and output (default 4096, as
    `ferrox run -c`; 0 or more than the model's training context: the
    training context). n_threads: 0 = one per online core. n_ubatch: rows
    per forward step (0 = n_ctx).

    Use as a context manager or call close(); one thread at a time. The
    context keeps the tokens of the last generation, so a prompt that
    extends it (a chat's next turn) computes only the new tokens.
    Raises Error with the library's message when the file cannot be loaded.
    """

    def __init__(self, path, n_ctx=4096, n_threads=0, n_ubatch=0):
        self._m = self._ctx = self._ectx = None
        self._lock = threading.Lock()
        for name, v in (("n_ctx", n_ctx), ("n_threads", n_threads), ("n_ubatch", n_ubatch)):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**31:
                raise ValueError("%s must be an int >= 0, got %r" % (name, v))
        self.path = os.fspath(path)
        self._n_threads = n_threads
        mp = _lib.fx_model_default_params()
        err = L.FxErr()
        out = c_void_p()
        rc = _lib.fx_model_load(os.fsencode(self.path), byref(mp), byref(out), byref(err))
        if rc:
            raise _from_err(err, rc)
        self._m = out
        if not _lib.fx_model_has_vocab(self._m):
            self.close()
            raise Error("%s has no tokenizer, so it cannot run from text" % self.path, L.FX_E_UNSUPPORTED)
        n_train = _lib.fx_model_n_ctx_train(self._m)
        cp = _lib.fx_context_default_params()
        cp.n_ctx = n_train if n_ctx == 0 or n_ctx > n_train else n_ctx
        cp.n_threads = n_threads
        cp.n_ubatch = n_ubatch
        self._cp = cp
        self._ctx = self._new_context(cp)
        self._held = []    # the tokens the context holds, in order
        self._gen = 0      # generations started: an older stream stops when it changes

    def _new_context(self, cp):
        err = L.FxErr()
        out = c_void_p()
        rc = _lib.fx_context_create(self._m, byref(cp), byref(out), byref(err))
        if rc:
            raise _from_err(err, rc)
        return out

    # ---- life ----

    @contextlib.contextmanager
    def _busy(self):
        """The contexts run one call at a time: a second thread gets an
        Error instead of corrupting them (ctypes releases the GIL)."""
        if not self._lock.acquire(blocking=False):
            raise Error("this Model is busy in another thread (one call at a time)", L.FX_E_INVALID)
        try:
            yield
        finally:
            self._lock.release()

    def close(self):
        """Free the context(s) and the model; later calls raise Error.
        Waits for a call running in another thread."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before it
            return
        with lock:
            self._free()

    def _free(self):
        for attr, free in (("_ectx", _lib.fx_context_free), ("_ctx", _lib.fx_context_free),
                           ("_m", _lib.fx_model_free)):
            h = getattr(self, attr, None)
            if h is not None:
                setattr(self, attr, None)
                free(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        if self._m is None:
            return "<ferrox.Model %r (closed)>" % self.path
        return "<ferrox.Model %r arch=%s n_ctx=%d>" % (self.path, self.arch, self.n_ctx)

    def _live(self):
        if self._m is None:
            raise Error("the model is closed", L.FX_E_INVALID)

    # ---- facts ----

    @property
    def n_ctx(self):
        self._live()
        return _lib.fx_context_n_ctx(self._ctx)

    @property
    def n_vocab(self):
        self._live()
        return _lib.fx_model_n_vocab(self._m)

    @property
    def n_embd(self):
        self._live()
        return _lib.fx_model_n_embd(self._m)

    @property
    def n_ctx_train(self):
        self._live()
        return _lib.fx_model_n_ctx_train(self._m)

    @property
    def arch(self):
        self._live()
        return _lib.fx_model_arch_name(self._m).decode()

    @property
    def bos(self):
        """BOS token id, or None."""
        self._live()
        t = _lib.fx_token_bos(self._m)
        return None if t < 0 else t

    @property
    def eos(self):
        self._live()
        t = _lib.fx_token_eos(self._m)
        return None if t < 0 else t

    @property
    def chat_template(self):
        """The model's Jinja chat template (str), or None."""
        self._live()
        t = _lib.fx_model_chat_template(self._m)
        return None if t is None else t.decode("utf-8")

    def is_eog(self, token):
        self._live()
        return bool(_lib.fx_token_is_eog(self._m, token))

    # ---- text <-> tokens ----

    def tokenize(self, text, add_special=True, parse_special=False):
        """Token ids of text (str, or UTF-8 bytes). add_special: BOS where
        the model asks for it; parse_special: texts such as "<|im_start|>"
        become their control tokens (else plain text). As `ferrox tokenize`
        (--no-bos, --special)."""
        self._live()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        cap = len(data) + 8
        while True:
            out = (c_int32 * cap)()
            n = c_size_t()
            rc = _lib.fx_tokenize(self._m, data, len(data), add_special, parse_special, out, cap, byref(n))
            if rc == L.FX_E_INVALID and n.value > cap:
                cap = n.value
                continue
            if rc:
                raise Error("tokenize: %s" % _status_str(rc), rc)
            return out[:n.value]

    def detokenize(self, tokens, special=False):
        """The text of token ids. special: control tokens give their text
        (else nothing). Invalid UTF-8 the tokens spell becomes U+FFFD."""
        self._live()
        d = _Detok(self._m, special)
        return "".join(d.push(t) for t in _ids(tokens)) + d.flush()

    def token_to_piece(self, token, special=True):
        """The bytes of one token's text."""
        self._live()
        buf = ctypes.create_string_buffer(256)
        n = c_size_t()
        rc = _lib.fx_token_to_piece(self._m, token, special, buf, len(buf), byref(n))
        if rc == L.FX_E_INVALID and n.value > len(buf):
            buf = ctypes.create_string_buffer(n.value)
            rc = _lib.fx_token_to_piece(self._m, token, special, buf, len(buf), byref(n))
        if rc:
            raise Error("token %d: %s" % (token, _status_str(rc)), rc)
        return buf.raw[:n.value]

    # ---- generation ----

    def _sampler(self, temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n, seed):
        sp = _lib.fx_sampler_default_params()
        given = 0
        for bit, field, v in ((L.FX_SAMPLING_TEMP, "temp", temperature), (L.FX_SAMPLING_TOP_K, "top_k", top_k),
                              (L.FX_SAMPLING_TOP_P, "top_p", top_p), (L.FX_SAMPLING_MIN_P, "min_p", min_p),
                              (L.FX_SAMPLING_REPEAT_PENALTY, "repeat_penalty", repeat_penalty),
                              (L.FX_SAMPLING_REPEAT_LAST_N, "repeat_last_n", repeat_last_n)):
            if v is not None:
                setattr(sp, field, v)
                given |= bit
        # the model's own defaults for what the caller left out (as run's
        # --generation-config auto); fields in `given` are left alone
        _lib.fx_model_sampling_defaults(self._m, given, byref(sp))
        if sp.repeat_last_n < 0:
            sp.repeat_last_n = self.n_ctx
        if seed is None:  # as `ferrox run`: a fresh seed unless one is given
            seed = int.from_bytes(os.urandom(8), "little") >> 1
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError("seed must be an int in [0, 2**64), got %r" % (seed,))
        sp.seed = seed
        err = L.FxErr()
        out = c_void_p()
        rc = _lib.fx_sampler_create(byref(sp), self.n_vocab, byref(out), byref(err))
        if rc:
            raise _from_err(err, rc, "sampler: ")
        return out

    def _feed(self, tokens):
        """Decode tokens into sequence 0, reusing the common prefix the
        context already holds (the last token is always computed, for its
        logits)."""
        held = self._held
        same = 0
        while same < len(tokens) and same < len(held) and tokens[same] == held[same]:
            same += 1
        if same == len(tokens):
            same -= 1
        if same < len(held):
            # a model whose state cannot go back that far starts over
            if same == 0 or _lib.fx_seq_rm(self._ctx, 0, same) != 0:
                _lib.fx_context_reset(self._ctx)
                same = 0
            del held[same:]
        rest = tokens[same:]
        rc = _lib.fx_decode(self._ctx, _ids(rest), len(rest), False)
        if rc:
            raise Error(_lib.fx_context_errmsg(self._ctx).decode("utf-8", "replace") or _status_str(rc), rc)
        held.extend(rest)

    def _prompt_tokens(self, prompt):
        if not isinstance(prompt, str):
            return list(prompt)
        toks = self.tokenize(prompt, add_special=True, parse_special=True)
        # a prompt that spells BOS itself gets no second one (as llama.cpp)
        bos = self.bos
        if len(toks) > 1 and bos is not None and toks[0] == toks[1] == bos and _lib.fx_add_bos(self._m):
            del toks[0]
        return toks

    def _start(self, tokens, max_tokens, stop, sampling):
        """Check the arguments now, generate lazily."""
        self._live()
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < -1:
            raise ValueError("max_tokens must be an int >= -1 (-1: until the context is full)")
        _ids(tokens)
        if not tokens:
            raise Error("the prompt is empty", L.FX_E_INVALID)
        if len(tokens) >= self.n_ctx:
            raise Error("the prompt has %d tokens; the context of %d leaves no room to generate (raise n_ctx)"
                        % (len(tokens), self.n_ctx), L.FX_E_CTX_FULL)
        smp = self._sampler(**sampling)
        return self._pieces(tokens, max_tokens, _StopFilter(stop), smp)

    def _pieces(self, tokens, max_tokens, stop, smp):
        """Each step, under the model's lock: decode the token sampled last
        time, sample the next one, detokenize it; the text is yielded
        outside the lock (the caller may start another call meanwhile)."""
        try:
            if max_tokens == 0:  # (`ferrox run -n 0` still prints one token)
                return
            with self._busy():
                self._gen += 1
                gen = self._gen
                for t in tokens:
                    _lib.fx_sampler_accept(smp, t)
                self._feed(tokens)
            detok = _Detok(self._m)
            n_gen = 0
            n_rows = c_int32()
            last = None  # sampled, not yet decoded
            while True:
                with self._busy():
                    self._live()  # closed while the caller held the stream
                    if self._gen != gen:
                        raise Error("another generation started on this Model while this stream was open",
                                    L.FX_E_INVALID)
                    if last is not None:
                        self._feed_one(last)
                    logits = _lib.fx_get_logits(self._ctx, byref(n_rows))
                    t = _lib.fx_sampler_sample_at(smp, logits, _lib.fx_context_n_past(self._ctx))
                    if t < 0:
                        raise Error("the sampler picked no token", L.FX_E_INVALID)
                    if _lib.fx_token_is_eog(self._m, t):
                        break
                    _lib.fx_sampler_accept(smp, t)
                    n_gen += 1
                    text, stopped = stop.feed(detok.push(t))
                    # as `ferrox run`: -n reached, or a full context (t not decoded)
                    done = stopped or 0 <= max_tokens <= n_gen or \
                        _lib.fx_context_n_past(self._ctx) >= _lib.fx_context_n_ctx(self._ctx)
                    last = t
                if text:
                    yield text
                if stopped:
                    return
                if done:
                    break
            text, stopped = stop.feed(detok.flush())
            text += "" if stopped else stop.finish()
            if text:
                yield text
        finally:
            _lib.fx_sampler_free(smp)

    def _feed_one(self, t):
        one = (c_int32 * 1)(t)
        rc = _lib.fx_decode(self._ctx, one, 1, False)
        if rc:
            raise Error(_lib.fx_context_errmsg(self._ctx).decode("utf-8", "replace") or _status_str(rc), rc)
        self._held.append(t)

    def stream(self, prompt, max_tokens=128, temperature=None, top_p=None, top_k=None, min_p=None,
               repeat_penalty=None, repeat_last_n=None, seed=None, stop=None):
        """Generate a continuation of prompt (str, or a list of token ids),
        yielding text pieces as they are produced (each one whole UTF-8
        characters). Arguments as generate(). Arguments are checked when
        stream() is called; generation runs as the iterator is consumed."""
        return self._start(self._prompt_tokens(prompt), max_tokens, stop,
                           dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed))

    def generate(self, prompt, max_tokens=128, temperature=None, top_p=None, top_k=None, min_p=None,
                 repeat_penalty=None, repeat_last_n=None, seed=None, stop=None):
        """The continuation of prompt (str, or a list of token ids), as
        `ferrox run -p PROMPT -n MAX_TOKENS` prints it.

        max_tokens: at most this many tokens (-1: until the context is
        full). temperature (0: greedy), top_p, top_k, min_p,
        repeat_penalty, repeat_last_n: None takes the model's own default
        (its generation config), else llama.cpp's (0.8, 0.95, 40, 0.05,
        1.0, 64). seed: None draws one. stop: strings that end the text
        (the stop string itself is not returned)."""
        return "".join(self.stream(prompt, max_tokens, temperature, top_p, top_k, min_p, repeat_penalty,
                                   repeat_last_n, seed, stop))

    # ---- chat ----

    def _render(self, messages, add_generation_prompt, template, tools, extra):
        self._live()
        tmpl = template if template is not None else self.chat_template
        if tmpl is None:
            raise Error("%s has no chat template: pass template=\"...\" (Jinja source)" % self.path,
                        L.FX_E_INVALID)

        def text_of(t):
            return None if t is None else self.token_to_piece(t, True)
        p = POINTER(L.FxChatPrompt)()
        err = L.FxErr()
        rc = _lib.fx_chat_render(tmpl.encode("utf-8"), json.dumps(list(messages)).encode("utf-8"),
                                 None if tools is None else json.dumps(tools).encode("utf-8"),
                                 None if not extra else json.dumps(extra).encode("utf-8"),
                                 add_generation_prompt, text_of(self.bos), text_of(self.eos), 0, byref(p),
                                 byref(err))
        if rc:
            raise _from_err(err, rc)
        return p

    def apply_chat_template(self, messages, add_generation_prompt=True, template=None, tools=None, **extra):
        """The prompt text the chat template gives for messages (a list of
        {"role", "content"} dicts; OpenAI's shape), as transformers'
        apply_chat_template(tokenize=False). extra: template variables."""
        p = self._render(messages, add_generation_prompt, template, tools, extra)
        try:
            return ctypes.string_at(p.contents.text, p.contents.len).decode("utf-8")
        finally:
            _lib.fx_chat_prompt_free(p)

    def _chat_tokens(self, messages, template, tools, extra):
        p = self._render(messages, True, template, tools, extra)
        try:
            need = c_size_t()
            _lib.fx_tokenize_prompt(self._m, p, False, None, 0, byref(need))
            out = (c_int32 * max(need.value, 1))()
            n = c_size_t()
            rc = _lib.fx_tokenize_prompt(self._m, p, False, out, need.value, byref(n))
            if rc:
                raise Error("tokenize the chat prompt: %s" % _status_str(rc), rc)
            return out[:n.value]
        finally:
            _lib.fx_chat_prompt_free(p)

    def chat(self, messages, max_tokens=128, temperature=None, top_p=None, top_k=None, min_p=None,
             repeat_penalty=None, repeat_last_n=None, seed=None, stop=None, template=None, tools=None,
             stream=False, **extra):
        """The assistant's reply to messages (OpenAI-style dicts), rendered
        with the model's chat template (or template, Jinja source) and
        add_generation_prompt, as `ferrox chat` answers. Sampling arguments
        as generate(); stream=True returns an iterator of pieces instead.
        Raises Error when the model has no template and none is given."""
        pieces = self._start(self._chat_tokens(messages, template, tools, extra), max_tokens, stop,
                             dict(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                                  repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed))
        return pieces if stream else "".join(pieces)

    # ---- embeddings ----

    def embed(self, text, pooling="last", normalize=True):
        """The embedding of text (str, or a list of token ids): the final
        hidden states (after the final norm) pooled over its tokens, "last"
        (the last token's), "mean" or "cls" (the first token's), L2-normalized
        unless normalize=False; a list of n_embd floats. Text is tokenized
        with BOS and special tokens parsed. Runs in a second context of this
        model's n_ctx (created on first use). Needs libferrox's fx_embed."""
        self._live()
        if not L.has_embed:
            raise NotImplementedError("Model.embed needs fx_embed, which this libferrox (%s) does not export"
                                      % L.path)
        if pooling not in POOLINGS:
            raise ValueError("pooling must be one of %s, got %r" % (", ".join(POOLINGS), pooling))
        tokens = self._prompt_tokens(text)
        if not tokens:
            raise Error("the text is empty", L.FX_E_INVALID)
        arr = _ids(tokens)
        with self._busy():
            self._live()
            return self._embed(arr, len(tokens), POOLINGS[pooling], bool(normalize))

    def _embed(self, arr, n, pooling, normalize):
        if self._ectx is None:
            cp = L.FxContextParams.from_buffer_copy(self._cp)
            cp.hidden = True
            self._ectx = self._new_context(cp)
        _lib.fx_context_reset(self._ectx)
        out = (c_float * self.n_embd)()
        rc = _lib.fx_embed(self._ectx, 0, arr, n, pooling, normalize, out)
        if rc:
            raise Error(_lib.fx_context_errmsg(self._ectx).decode("utf-8", "replace") or _status_str(rc), rc)
        return list(out)
