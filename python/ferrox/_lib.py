"""ctypes declarations of include/ferrox.h's public API (libferrox.so).

The structures below mirror ferrox.h field for field; tests/test_layout.py
compiles a C program against the header bundled with the package and
compares every mirrored struct's size and field offsets with these, so a
header change that this file misses fails the tests rather than corrupting
memory. Only ``fx_`` names are used: the shared library exports nothing
else (README, "Libraries").
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)

__all__ = ["lib", "path", "STRUCTS", "has_embed"]

# ---- status (ferrox.h, "status") ----
FX_OK = 0
FX_E_NOMEM = -1
FX_E_IO = -2
FX_E_FORMAT = -3
FX_E_UNSUPPORTED = -4
FX_E_INVALID = -5
FX_E_CTX_FULL = -6
FX_E_KV_FULL = -7

# FX_SAMPLING_* bits (fx_model_sampling_defaults)
FX_SAMPLING_TEMP = 1 << 0
FX_SAMPLING_TOP_K = 1 << 1
FX_SAMPLING_TOP_P = 1 << 2
FX_SAMPLING_MIN_P = 1 << 3
FX_SAMPLING_REPEAT_PENALTY = 1 << 4
FX_SAMPLING_REPEAT_LAST_N = 1 << 5


class FxErr(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * 512)]


# bool (*progress)(float p, void *arg): fx_model_params.progress
FX_PROGRESS_FN = CFUNCTYPE(c_bool, c_float, c_void_p)


class FxModelParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("vocab_only", c_bool),
        ("quant", c_char_p),
        ("repack", c_bool),
        ("no_mmap", c_bool),
        ("progress", FX_PROGRESS_FN),
        ("progress_arg", c_void_p),
    ]


class FxContextParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_ctx", c_uint32),
        ("n_ubatch", c_uint32),
        ("n_threads", c_int32),
        ("type_k", c_int32),
        ("type_v", c_int32),
        ("n_seq_max", c_uint32),
        ("kv_layout", c_int32),
        ("block_size", c_uint32),
        ("kernels", c_int32),
        ("hidden", c_bool),
        ("mtp", c_bool),
        ("n_rollback", c_uint32),
        ("kv_events", c_bool),
    ]


class FxSamplerParams(Structure):
    _fields_ = [
        ("size", c_size_t),
        ("temp", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("repeat_last_n", c_int32),
        ("seed", c_uint64),
    ]


class FxDetok(Structure):
    _fields_ = [("pending", c_uint8 * 8), ("n_pending", c_int)]


class FxChatSpan(Structure):
    _fields_ = [("off", c_size_t), ("len", c_size_t)]


class FxChatPrompt(Structure):
    _fields_ = [("text", c_void_p), ("len", c_size_t), ("data", POINTER(FxChatSpan)), ("n_data", c_size_t)]


# C struct name -> mirror, for the layout test.
STRUCTS = {
    "fx_err": FxErr,
    "fx_model_params": FxModelParams,
    "fx_context_params": FxContextParams,
    "fx_sampler_params": FxSamplerParams,
    "fx_detok": FxDetok,
    "fx_chat_span": FxChatSpan,
    "fx_chat_prompt": FxChatPrompt,
}


def _find_library():
    """The libferrox.so bundled beside this file (FERROX_LIBRARY overrides,
    for running against a build tree)."""
    env = os.environ.get("FERROX_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libferrox.so")


path = _find_library()
try:
    lib = ctypes.CDLL(path)
except OSError as e:  # a broken install: say which file and why
    raise ImportError("ferrox: cannot load %s: %s" % (path, e)) from e

_P = c_void_p  # opaque handles (struct fx_model *, fx_context *, fx_sampler *)
_I32P = POINTER(c_int32)
_SZP = POINTER(c_size_t)


def _decl(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)


_decl("fx_status_str", c_char_p, c_int)
_decl("fx_model_default_params", FxModelParams)
_decl("fx_model_load", c_int, c_char_p, POINTER(FxModelParams), POINTER(_P), POINTER(FxErr))
_decl("fx_model_free", None, _P)
_decl("fx_model_n_vocab", c_int32, _P)
_decl("fx_model_has_vocab", c_bool, _P)
_decl("fx_model_n_ctx_train", c_int32, _P)
_decl("fx_model_arch_name", c_char_p, _P)
_decl("fx_model_n_embd", c_int32, _P)
_decl("fx_model_chat_template", c_char_p, _P)
_decl("fx_model_sampling_defaults", c_uint32, _P, c_uint32, POINTER(FxSamplerParams))
_decl("fx_token_bos", c_int32, _P)
_decl("fx_token_eos", c_int32, _P)
_decl("fx_add_bos", c_bool, _P)
_decl("fx_token_is_eog", c_bool, _P, c_int32)
_decl("fx_tokenize", c_int, _P, c_char_p, c_size_t, c_bool, c_bool, _I32P, c_size_t, _SZP)
_decl("fx_token_to_piece", c_int, _P, c_int32, c_bool, c_char_p, c_size_t, _SZP)
_decl("fx_detok_push", c_int, _P, POINTER(FxDetok), c_int32, c_bool, c_char_p, c_size_t, _SZP)
_decl("fx_detok_flush", c_int, POINTER(FxDetok), c_char_p, c_size_t, _SZP)
_decl("fx_context_default_params", FxContextParams)
_decl("fx_context_create", c_int, _P, POINTER(FxContextParams), POINTER(_P), POINTER(FxErr))
_decl("fx_context_free", None, _P)
_decl("fx_context_n_ctx", c_uint32, _P)
_decl("fx_context_n_past", c_uint32, _P)
_decl("fx_context_reset", None, _P)
_decl("fx_context_errmsg", c_char_p, _P)
_decl("fx_seq_rm", c_int, _P, c_int32, c_uint32)
_decl("fx_decode", c_int, _P, _I32P, c_int32, c_bool)
_decl("fx_get_logits", POINTER(c_float), _P, _I32P)
_decl("fx_sampler_default_params", FxSamplerParams)
_decl("fx_sampler_create", c_int, POINTER(FxSamplerParams), c_int32, POINTER(_P), POINTER(FxErr))
_decl("fx_sampler_free", None, _P)
_decl("fx_sampler_sample_at", c_int32, _P, POINTER(c_float), c_int64)
_decl("fx_sampler_accept", None, _P, c_int32)
_decl("fx_chat_render", c_int, c_char_p, c_char_p, c_char_p, c_char_p, c_bool, c_char_p, c_char_p, c_int64,
      POINTER(POINTER(FxChatPrompt)), POINTER(FxErr))
_decl("fx_chat_prompt_free", None, POINTER(FxChatPrompt))
_decl("fx_tokenize_prompt", c_int, _P, POINTER(FxChatPrompt), c_bool, _I32P, c_size_t, _SZP)

# fx_embed(ctx, seq, tokens, n_tokens, pooling, normalize, out[n_embd]):
# newer libraries only; Model.embed says so when it is missing.
has_embed = hasattr(lib, "fx_embed")
if has_embed:
    _decl("fx_embed", c_int, _P, c_int32, _I32P, c_int32, c_int32, c_bool, POINTER(c_float))
