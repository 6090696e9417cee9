#!/usr/bin/env python3
"""Tokenizer folders that differ only in tokenizer_config.json, for
tests/test_hf_tokenizer_config.py.

    python3 scripts/make-hf-tokenizer-configs.py OUTDIR NAME=SRCDIR ...

Each SRCDIR holds a tokenizer.json (the repository's fixtures,
tests/fixtures/hf-tiny/*, or a folder scripts/make-hf-tokenizers.py made).
For every source, every tokenizer_class of CLASSES[NAME] (None: the key
absent) and every add_bos_token / add_eos_token pair of FLAGS (None: the
key absent), OUTDIR/NAME--CLASS--bosB-eosE/ gets
- tokenizer.json: a symbolic link to the source's (the files are up to
  33 MB; both readers follow links), or to a patched copy (PATCH) under
  OUTDIR/_patched-NAME;
- special_tokens_map.json: copied when the source has one;
- tokenizer_config.json: the source's (bos/eos/unk/pad names and
  added_tokens_decoder kept) without tokenizer_class, add_bos_token,
  add_eos_token and model_max_length, then the variant's keys;
  model_max_length cycles through MAX_LENGTHS (absent, 512,
  transformers' int(1e30) and 1e30 as a float), which a reader must
  accept without it changing the ids.
No config.json: AutoTokenizer then picks the class from tokenizer_config.json
alone. Prints one line per folder: its name and its path.

Which class each source is paired with follows what transformers 5.23
does with a class (AutoTokenizer, models/auto/tokenization_auto.py, and
TokenizersBackend.convert_to_native_format): a class with its own __init__
(LlamaTokenizer, GemmaTokenizer) rebuilds the normalizer / pre-tokenizer /
decoder from its own code and keeps only tokenizer.json's vocabulary,
merges and post-processor, so it is paired with the tokenizer.json whose
pipeline it rebuilds (Metaspace BPE for Llama, Gemma's for Gemma, Qwen2's
for Qwen2), and with classes whose pipeline differs from the file's (the fixtures); a
LlamaTokenizer class over a ByteLevel tokenizer.json is loaded as
TokenizersBackend instead (kept: smollm2-135m); PreTrainedTokenizerFast
and no class are TokenizersBackend over the file as it is.
"""
import json
import os
import shutil
import sys

CLASSES = {
    # the fixture's Metaspace splits on spaces (split true); LlamaTokenizer
    # rebuilds it with split false, GemmaTokenizer and Qwen2Tokenizer with
    # their own pipelines (and named tokens: Gemma's <mask> is appended)
    "fixture-llama": [None, "PreTrainedTokenizerFast", "LlamaTokenizer", "LlamaTokenizerFast",
                      "GemmaTokenizer", "Qwen2Tokenizer"],
    "fixture-qwen2": [None, "PreTrainedTokenizerFast", "LlamaTokenizerFast", "Qwen2Tokenizer",
                      "GPT2Tokenizer"],
    "llama-spm": [None, "PreTrainedTokenizerFast", "LlamaTokenizer", "LlamaTokenizerFast"],
    "gemma-3-270m": [None, "PreTrainedTokenizerFast", "GemmaTokenizer"],
    "smollm2-135m": [None, "PreTrainedTokenizerFast", "LlamaTokenizer"],
    "bert-bge": [None, "PreTrainedTokenizerFast"],
    "qwen2": [None, "PreTrainedTokenizerFast", "Qwen2Tokenizer", "Qwen2TokenizerFast"],
    # the llama fixture with "<s> $A </s>": a post-processor that adds EOS
    "fixture-llama-eos": [None, "PreTrainedTokenizerFast"],
    # the llama fixture with an added_tokens_decoder (CFG_PATCH), which a
    # rebuilding class reads instead of tokenizer.json's added_tokens
    "fixture-llama-atd": ["LlamaTokenizer", "GemmaTokenizer"],
}
# tokenizer.json keys replaced before use: transformers' GGUF converter
# (scripts/make-hf-tokenizers.py) leaves Qwen2's NFC normalizer out, which
# Qwen2's published tokenizer.json and Qwen2Tokenizer both have
PATCH = {"qwen2": {"normalizer": {"type": "NFC"}},
         "fixture-llama-eos": {"post_processor": {
             "type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "</s>", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                      {"SpecialToken": {"id": "</s>", "type_id": 1}}],
             "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                                "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}}}
# tokenizer_config.json keys set for a source: the piece "er" as a special
# added token (it splits words; id 54 in the fixture) and a new token
# appended after the 256 pieces
def _added(content, special=True):
    return {"content": content, "lstrip": False, "normalized": not special, "rstrip": False,
            "single_word": False, "special": special}


_ATD = {"added_tokens_decoder": {"0": _added("<pad>"), "1": _added("<s>"), "2": _added("</s>"),
                                 "3": _added("<unk>"), "54": _added("er"), "256": _added("<tool>")}}
CFG_PATCH = {"fixture-llama-atd": _ATD}
# classes transformers rebuilds the pipeline with that ferrox does not
# reproduce: ferrox must refuse these folders, naming the class (checked
# by tests/test_hf_tokenizer_config.py, not against transformers)
REFUSED = {"fixture-qwen2": ["CLIPTokenizer", "BertTokenizerFast"]}
FLAGS = [(None, None), (True, False), (False, False), (True, True), (False, True)]
MAX_LENGTHS = [None, 512, int(1e30), 1e30]
DROP = ("tokenizer_class", "add_bos_token", "add_eos_token", "model_max_length")


def flag_name(v):
    return "-" if v is None else "T" if v else "F"


def variants(out, sources, refused=False):
    """[(folder name, path)] for sources [(NAME, SRCDIR)], written under out;
    with refused, REFUSED's classes too."""
    made, k = [], 0
    for name, src in sources:
        tj = os.path.abspath(os.path.join(src, "tokenizer.json"))
        if name in PATCH:
            with open(tj, encoding="utf-8") as f:
                j = json.load(f)
            j.update(PATCH[name])
            os.makedirs(os.path.join(out, "_patched-" + name), exist_ok=True)
            tj = os.path.abspath(os.path.join(out, "_patched-" + name, "tokenizer.json"))
            with open(tj, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False)
        base = {}
        p = os.path.join(src, "tokenizer_config.json")
        if os.path.exists(p):
            with open(p, encoding="utf-8") as f:
                base = {key: v for key, v in json.load(f).items() if key not in DROP}
        base.update(CFG_PATCH.get(name, {}))
        for cls in CLASSES[name] + (REFUSED.get(name, []) if refused else []):
            for bos, eos in FLAGS:
                cfg = dict(base)
                if cls is not None:
                    cfg["tokenizer_class"] = cls
                if bos is not None:
                    cfg["add_bos_token"] = bos
                if eos is not None:
                    cfg["add_eos_token"] = eos
                mml = MAX_LENGTHS[k % len(MAX_LENGTHS)]
                k += 1
                if mml is not None:
                    cfg["model_max_length"] = mml
                folder = "%s--%s--bos%s-eos%s" % (name, cls or "noclass", flag_name(bos), flag_name(eos))
                d = os.path.join(out, folder)
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d)
                os.symlink(tj, os.path.join(d, "tokenizer.json"))
                stm = os.path.join(src, "special_tokens_map.json")
                if os.path.exists(stm):
                    shutil.copy(stm, d)
                with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                    json.dump(cfg, f, ensure_ascii=False, indent=1)
                made.append((folder, d))
    return made


def main():
    if len(sys.argv) < 3 or any("=" not in a for a in sys.argv[2:]):
        sys.exit(__doc__)
    sources = [tuple(a.split("=", 1)) for a in sys.argv[2:]]
    for name, _ in sources:
        if name not in CLASSES:
            sys.exit("unknown source name %s (known: %s)" % (name, ", ".join(CLASSES)))
    for folder, d in variants(sys.argv[1], sources):
        print(folder, d)


if __name__ == "__main__":
    main()
