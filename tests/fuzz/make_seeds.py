#!/usr/bin/env python3
"""Write the synthetic seed inputs of the file-format fuzz targets.

  tests/fuzz/make_seeds.py [FIXTURES]   (FIXTURES: ../shared/fixtures/hf-tiny)

corpus/gguf: tiny GGUF files made with the `gguf` package (PyPI): a
llama model with a byte-level BPE vocabulary and a chat template, one with
a SentencePiece vocabulary and K-quant/legacy-quant matrices, and a
vocabulary-only file. A few KB each: the real models stay out of git.

corpus/hf: Hugging Face checkpoints as the fuzz_hf target reads them:
config.json, NUL, tokenizer_config.json (may be empty), NUL, then
model.safetensors. Each is an hf-tiny fixture's config with every width
divided by f (8, or 4) and one layer, and F16 weights of the shapes that
follows (each tensor dimension divisible by f divided by f: widths are
linear in the scale, counts such as experts are not).

corpus/request: request bodies of the kinds tests/test_server.py,
test_structured.py and test_tool_server.py send (completions, chat,
structured output, tools).

corpus/hf_tokenizer: tokenizer.json, NUL, a text (or 0x01, a length, a
  tokenizer.model, a text: spm-bpe, spm-unigram): the fixtures'
SentencePiece-style and byte-level BPE (tests/fixtures/hf-tiny/llama and
qwen2), and small WordPiece (Bert normalizer, pre-tokenizer and
post-processor) and Unigram (Metaspace, NFKC) ones built here with the
`tokenizers` package.

corpus/tokenizer: a few texts (ASCII, accents, CJK, emoji, control-token
texts, whitespace runs, a broken UTF-8 sequence).

Deterministic (fixed random seed), so a rerun rewrites the same bytes.
"""
import json
import os
import struct
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20)
Q = gguf.GGMLQuantizationType

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_chars():
    """GPT-2's byte -> printable character table (bytes_to_unicode)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocab(all_bytes):
    """Specials, byte tokens (all 256, or a few letters and marks) and some merges."""
    bc = byte_chars()
    toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [3, 3, 3]
    for b in (range(256) if all_bytes else b" abehinrtw.,!?"):
        toks.append(bc[b])
        types.append(1)
    g = bc[ord(" ")]
    merges = [f"{g} t", "h e", f"{g}t he", "i n", f"{g} a", "e r", f"{g} w"]
    for m in merges:
        toks.append(m.replace(" ", ""))
        types.append(1)
    return toks, types, merges


def spm_vocab():
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(32, 128)]
    types = [2, 3, 3] + [6] * 96
    scores = [0.0] * len(toks)
    for i, p in enumerate(["\u2581", "\u2581a", "\u2581the", "e", "t", "h", "\u2581t", "he", "a"]):
        toks.append(p)
        types.append(1)
        scores.append(-1.0 - i)
    toks.append("<start_of_turn>")
    types.append(3)
    scores.append(0.0)
    return toks, types, scores


def add_bpe(w, all_bytes):
    toks, types, merges = bpe_vocab(all_bytes)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    return len(toks)


def add_spm(w):
    toks, types, scores = spm_vocab()
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_scores(scores)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    return len(toks)


def mat(w, name, rows, cols, qtype):
    """A [rows, cols] matrix (cols contiguous) stored as qtype."""
    x = (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)
    if qtype == Q.F32:
        w.add_tensor(name, x)
    elif qtype == Q.F16:
        w.add_tensor(name, x.astype(np.float16))
    else:
        w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)


def llama(path, vocab, qtype):
    """One layer, n_embd 32, two heads of 16 (one KV head): token_embd in
    qtype (f16, q4_1), the rest in qtype unless f16 (then q8_0)."""
    embd, ff = 32, 32
    w = gguf.GGUFWriter(path, "llama")
    n_vocab = add_bpe(w, False) if vocab == "bpe" else add_spm(w)
    w.add_context_length(64)
    w.add_embedding_length(embd)
    w.add_block_count(1)
    w.add_feed_forward_length(ff)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    hd = embd // 2
    mat(w, "token_embd.weight", n_vocab, embd, qtype)
    qtype = Q.Q8_0 if qtype == Q.F16 else qtype
    w.add_tensor("output_norm.weight", np.ones(embd, np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(embd, np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(embd, np.float32))
    mat(w, "blk.0.attn_q.weight", embd, embd, qtype)
    mat(w, "blk.0.attn_k.weight", hd, embd, qtype)
    mat(w, "blk.0.attn_v.weight", hd, embd, qtype)
    mat(w, "blk.0.attn_output.weight", embd, embd, qtype)
    mat(w, "blk.0.ffn_gate.weight", ff, embd, qtype)
    mat(w, "blk.0.ffn_up.weight", ff, embd, qtype)
    mat(w, "blk.0.ffn_down.weight", embd, ff, Q.Q8_0)
    finish(w)


def vocab_only(path):
    w = gguf.GGUFWriter(path, "llama")
    add_bpe(w, True)
    finish(w)


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def shrink(v, key, f):
    keep = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    if isinstance(v, bool) or not isinstance(v, int) or key in keep:
        return v
    if key.endswith(("_size", "head_dim", "_dim", "lora_rank")) and v % f == 0:
        return v // f
    return v


def hf_seed(fixture, out, f):
    cfg = json.load(open(os.path.join(fixture, "config.json")))
    small = {k: shrink(v, k, f) for k, v in cfg.items()}
    small["num_hidden_layers"] = 1
    for k in ("layer_types", "mlp_only_layers"):
        if isinstance(small.get(k), list):
            small[k] = small[k][:1]
    raw = open(os.path.join(fixture, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    meta, off, blobs = {}, 0, []
    for name in sorted(hdr):
        if name == "__metadata__" or (".layers." in name and ".layers.0." not in name):
            continue
        shape = [d // f if d % f == 0 else d for d in hdr[name]["shape"]]
        x = (rng.standard_normal(shape) * 0.1).astype(np.float16).tobytes()
        meta[name] = {"dtype": "F16", "shape": shape, "data_offsets": [off, off + len(x)]}
        off += len(x)
        blobs.append(x)
    h = json.dumps(meta, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    st = struct.pack("<Q", len(h)) + h + b"".join(blobs)
    tok = b""
    if os.path.basename(fixture) == "qwen3":
        tok = json.dumps({"chat_template": TEMPLATE}).encode()
    with open(out, "wb") as f:
        f.write(json.dumps(small, indent=1).encode() + b"\0" + tok + b"\0" + st)


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                          "parameters": {"type": "object", "properties": {
                                              "city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone"}}]
MSGS = [{"role": "system", "content": "Answer with short JSON."},
        {"role": "user", "content": "Weather in Paris?"}]
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
REQUESTS = {
    "completion": {"model": "x", "prompt": "The capital of France is", "max_tokens": 12,
                   "temperature": 0, "stop": ["\n", "."], "seed": 7},
    "completion-options": {"prompt": ["Once upon a time"], "max_tokens": 8, "temperature": 0.9,
                           "top_p": 0.9, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5,
                           "frequency_penalty": 0.2, "logit_bias": {"13": -100, "42": 5},
                           "logprobs": 3, "echo": True, "n": 2, "stream": True,
                           "stream_options": {"include_usage": True}, "ignore_eos": True},
    "completion-ids": {"prompt": [[1, 510, 3575, 282]], "max_tokens": 4},
    "completion-grammar": {"prompt": "A book record in JSON: ", "max_tokens": 32,
                           "grammar": "root ::= \"{\" [a-z]+ \"}\""},
    "chat": {"model": "m", "messages": MSGS, "max_completion_tokens": 16, "temperature": 0},
    "chat-parts": {"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                             {"type": "text", "text": "there"}]}],
                   "chat_template_kwargs": {"enable_thinking": False}, "logprobs": True,
                   "top_logprobs": 2},
    "chat-schema": {"messages": [{"role": "user", "content": "A person as JSON."}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "person", "strict": True, "schema": PERSON}}},
    "chat-json-object": {"messages": MSGS, "response_format": {"type": "json_object"}},
    "chat-guided": {"messages": MSGS, "guided_regex": "[0-9]{3}-[a-z]+"},
    "chat-choice": {"messages": MSGS, "structured_outputs": {"choice": ["yes", "no"]}},
    "chat-tools": {"messages": MSGS, "tools": TOOLS, "tool_choice": "auto",
                   "parallel_tool_calls": False, "max_tokens": 8},
    "chat-tool-named": {"messages": MSGS, "tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "get_weather"}}, "reasoning_format": "none"},
    "chat-tool-history": {"messages": MSGS + [
        {"role": "assistant", "content": None, "reasoning_content": "Call it.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C"}],
        "tools": TOOLS, "tool_choice": "required"},
}
TEXTS = {
    "ascii": b"Hello, world! The quick brown fox jumps over 13 lazy dogs.",
    "unicode": "h\u00e9llo w\u00f6rld \u4f60\u597d \U0001f600 \u0394\u03b9".encode(),
    "specials": b"<|im_start|>user\nhi<|im_end|>\n<start_of_turn>model <s></s>",
    "spaces": b"  two  spaces\t\ttabs\n\n\nnewlines   ",
    "broken": b"ok \xe4\xbd then \xff\xfe bytes \xc3",
}


def hf_tokenizer_seeds(d):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    text = "Hello w\u00f6rld, \u65e5\u672c [CLS] <s> 12345  \t\n\xe4\xbd ok".encode("utf-8", "surrogatepass")
    text = text.replace(b"\xc3\xa4\xc2\xbd", b"\xe4\xbd")  # a broken UTF-8 sequence
    for name in ("llama", "qwen2"):
        with open(os.path.join(HERE, "..", "fixtures", "hf-tiny", name, "tokenizer.json"), "rb") as f:
            js = f.read()
        with open(os.path.join(d, name), "wb") as f:
            f.write(js + b"\0" + text)
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "w",
                                         "##or", "##ld", ",", "1", "##2", "##345", "ok"])}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.normalizer = normalizers.BertNormalizer(lowercase=True)
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    wp.decoder = decoders.WordPiece()
    pieces = [("<unk>", 0.0), ("\u2581", -1.0), ("\u2581hello", -2.0), ("o", -3.0), ("l", -3.5),
              ("w", -4.0), ("rld", -4.5), ("1", -5.0), ("2", -5.0), ("ok", -2.5)]
    ug = Tokenizer(models.Unigram(pieces, unk_id=0, byte_fallback=False))
    ug.normalizer = normalizers.NFKC()
    ug.pre_tokenizer = pre_tokenizers.Metaspace()
    ug.decoder = decoders.Metaspace()
    for name, tok in (("wordpiece", wp), ("unigram", ug)):
        with open(os.path.join(d, name), "wb") as f:
            f.write(tok.to_str().encode() + b"\0" + text)
    spm_seeds(d, text)


def spm_seeds(d, text):
    """tokenizer.model mode (0x01, length, the ModelProto, the text): a
    BPE with byte fallback and a Unigram with a user-defined piece."""
    import struct
    from sentencepiece import sentencepiece_model_pb2 as pb
    T = pb.ModelProto.SentencePiece
    for name, mtype, pieces in (
            ("spm-bpe", pb.TrainerSpec.BPE,
             [("<unk>", 0, T.UNKNOWN), ("<s>", 0, T.CONTROL), ("</s>", 0, T.CONTROL)] +
             [("<0x%02X>" % b, 0, T.BYTE) for b in range(256)] +
             [(p, -i, T.NORMAL) for i, p in enumerate(["\u2581", "h", "e", "l", "o", "he", "ll", "\u2581he",
                                                       "llo", "\u2581hello", "w", "r", "d"])]),
            ("spm-unigram", pb.TrainerSpec.UNIGRAM,
             [("<unk>", 0, T.UNKNOWN), ("<sep>", 0, T.USER_DEFINED), ("\u2581", -1, T.NORMAL),
              ("\u2581hello", -2, T.NORMAL), ("o", -3, T.NORMAL), ("ok", -2.5, T.NORMAL)])):
        m = pb.ModelProto()
        for p, sc, ty in pieces:
            x = m.pieces.add()
            x.piece, x.score, x.type = p, sc, ty
        m.trainer_spec.model_type = mtype
        m.trainer_spec.byte_fallback = mtype == pb.TrainerSpec.BPE
        m.trainer_spec.bos_id = 1 if mtype == pb.TrainerSpec.BPE else -1
        m.trainer_spec.eos_id = 2 if mtype == pb.TrainerSpec.BPE else -1
        blob = m.SerializeToString()
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"\x01" + struct.pack("<I", len(blob)) + blob + text)


def main():
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        HERE, "..", "..", "..", "shared", "fixtures", "hf-tiny")
    d = os.path.join(HERE, "corpus", "gguf")
    os.makedirs(d, exist_ok=True)
    llama(os.path.join(d, "llama-bpe-q8_0.seed"), "bpe", Q.F16)
    llama(os.path.join(d, "llama-spm-q4_1.seed"), "spm", Q.Q4_1)
    vocab_only(os.path.join(d, "vocab-bpe.seed"))
    d = os.path.join(HERE, "corpus", "hf")
    os.makedirs(d, exist_ok=True)
    # phi3 (partial rotary) and deepseek_v3 (split head dims) need even
    # rotary widths: divided by 4 only
    for name, f in (("llama", 8), ("qwen3", 8), ("gemma3", 8), ("mixtral", 8), ("phi3", 4),
                    ("qwen2_moe", 8), ("deepseek_v3", 4)):
        if os.path.isdir(os.path.join(fixtures, name)):
            hf_seed(os.path.join(fixtures, name), os.path.join(d, name), f)
    d = os.path.join(HERE, "corpus", "hf_tokenizer")
    os.makedirs(d, exist_ok=True)
    hf_tokenizer_seeds(d)
    for sub, items in (("request", {k: json.dumps(v).encode() for k, v in REQUESTS.items()}),
                       ("tokenizer", TEXTS)):
        d = os.path.join(HERE, "corpus", sub)
        os.makedirs(d, exist_ok=True)
        for name, data in items.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
