/* The tokenizer class transformers 5.23 loads a folder's tokenizer.json
 * with, and what that class does to the file's pipeline.
 *
 * AutoTokenizer.from_pretrained (models/auto/tokenization_auto.py) picks
 * a class from tokenizer_config.json's tokenizer_class, config.json's
 * tokenizer_class and model_type (hftok_class_resolve). Then
 * TokenizersBackend.convert_to_native_format (tokenization_utils_
 * tokenizers.py) decides by the class alone: TokenizersBackend itself, or
 * a subclass without its own __init__, loads tokenizer.json as it is; a
 * subclass with its own __init__ takes only the vocabulary, merges,
 * post-processor, padding / truncation and (through from_pretrained) the
 * added tokens, and builds the model options, normalizer, pre-tokenizer
 * and decoder from its own code. hf_class_table.h (made by
 * scripts/gen-hf-class-table.py from transformers) lists every class name
 * and model type with what it does; hftok_class_apply rewrites the tree
 * for the rebuilding classes ferrox reproduces (LlamaTokenizer,
 * GemmaTokenizer, Qwen2Tokenizer, GPT2Tokenizer; Llama's and Gemma's are
 * the pipelines hf_spm.c builds from tokenizer.model) and refuses the
 * other rebuilding classes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json.h"
#include "core/status.h"
#include "tokenizer/hf_impl.h"

enum hfc_kind { HFC_FILE, HFC_REBUILD, HFC_OTHER };

struct hfc_type {
	const char *type;  /* config.json model_type */
	const char *cls;   /* TOKENIZER_MAPPING_NAMES' class name */
	bool incorrect;    /* in MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS */
};

struct hfc_name {
	const char *name;  /* a name tokenizer_class_from_name resolves */
	enum hfc_kind kind;
	const char *cls;   /* HFC_REBUILD: the class object's own name */
};

#include "tokenizer/hf_class_table.h"

#define HFC_N(a) (sizeof(a) / sizeof(*(a)))

static const cJSON *hfc_item(const cJSON *o, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* The hfc_names row of name, or NULL (tokenizer_class_from_name gives
 * None: AutoTokenizer falls back to TokenizersBackend). */
static const struct hfc_name *hfc_name_row(const char *name)
{
	for (size_t k = 0; k < HFC_N(hfc_names); k++)
		if (!strcmp(hfc_names[k].name, name))
			return &hfc_names[k];
	return NULL;
}

/* The registered class of model type t, or NULL. */
static const struct hfc_type *hfc_type_row(const char *t)
{
	for (size_t k = 0; k < HFC_N(hfc_types); k++)
		if (!strcmp(hfc_types[k].type, t))
			return &hfc_types[k];
	return NULL;
}

/* s without a trailing "Fast" into buf (removesuffix). */
static const char *hfc_strip(const char *s, char *buf, size_t cap)
{
	size_t n = strlen(s);

	if (n >= 4 && !strcmp(s + n - 4, "Fast"))
		n -= 4;
	snprintf(buf, cap, "%.*s", (int)n, s);
	return buf;
}

/* The row for a hub class name: its name less "Fast", else with "Fast"
 * (the tokenizer_config.json branch of from_pretrained). */
static const struct hfc_name *hfc_hub_row(const char *s)
{
	char a[160], b[168];
	const struct hfc_name *r = hfc_name_row(hfc_strip(s, a, sizeof(a)));

	snprintf(b, sizeof(b), "%sFast", a);
	return r ? r : hfc_name_row(b);
}

static bool hfc_generic(const char *s)
{
	return !strcmp(s, "TokenizersBackend") || !strcmp(s, "PythonBackend") ||
	       !strcmp(s, "PreTrainedTokenizerFast") || !strcmp(s, "MistralCommonBackend");
}

const char *hftok_class_resolve(const cJSON *cfg, const cJSON *mcfg, bool byte_level,
				const char **hub_out)
{
	const cJSON *tc = hfc_item(cfg, "tokenizer_class"), *mtc = hfc_item(mcfg, "tokenizer_class");
	const cJSON *mt = hfc_item(mcfg, "model_type");
	const char *hub = cJSON_IsString(tc) ? tc->valuestring : cJSON_IsString(mtc) ? mtc->valuestring : NULL;
	const struct hfc_type *reg = cJSON_IsString(mt) && *mt->valuestring ? hfc_type_row(mt->valuestring) : NULL;
	const struct hfc_name *r = NULL;
	char a[160], b[160];

	*hub_out = hub;
	if (hfc_item(cfg, "auto_map"))
		return NULL; /* remote code: ferrox keeps the file's pipeline, as before */
	/* LlamaTokenizer declared over a ByteLevel file (Llama 3 style) */
	if (hub && !strcmp(hfc_strip(hub, a, sizeof(a)), "LlamaTokenizer") && byte_level &&
	    !(reg && (reg->incorrect || !strcmp(hfc_strip(reg->cls, b, sizeof(b)), "MistralCommonBackend"))))
		return NULL;
	if (hub && reg && strcmp(hfc_strip(reg->cls, a, sizeof(a)), hfc_strip(hub, b, sizeof(b)))) {
		if (hfc_generic(a))
			return NULL;
		r = hfc_name_row(reg->incorrect ? a : hub);
		return r && r->kind != HFC_FILE ? (r->kind == HFC_REBUILD ? r->cls : r->name) : NULL;
	}
	if (cJSON_IsString(tc))
		r = hfc_hub_row(tc->valuestring);
	else if (cJSON_IsString(mtc))
		r = hfc_hub_row(mtc->valuestring);
	else if (reg)
		r = hfc_name_row(reg->cls);
	if (!r || r->kind == HFC_FILE)
		return NULL;
	return r->kind == HFC_REBUILD ? r->cls : r->name;
}

const char *hftok_class_registered(const char *type, bool *incorrect)
{
	const struct hfc_type *r = hfc_type_row(type);

	*incorrect = r && r->incorrect;
	return r ? r->cls : NULL;
}

/* ---- rewriting the tree ---------------------------------------------------- */

/* Replace (or add) j[key] with the JSON text s. FX_E_NOMEM. */
static int hfc_set_json(cJSON *j, const char *key, const char *s)
{
	cJSON *o = NULL;
	int rc = s ? fx_json_parse(s, strlen(s), &o, NULL) : FX_OK;

	if (rc)
		return rc;
	if (!o && !(o = cJSON_CreateNull()))
		return FX_E_NOMEM;
	if (hfc_item(j, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(j, key, o) ? FX_OK : (cJSON_Delete(o), FX_E_NOMEM);
	return cJSON_AddItemToObject(j, key, o) ? FX_OK : (cJSON_Delete(o), FX_E_NOMEM);
}

/* Replace model[key] with a bool, a string, or null (s NULL, b < 0). */
static int hfc_set_opt(cJSON *model, const char *key, int b, const char *s)
{
	cJSON *o = b >= 0 ? cJSON_CreateBool(b) : s ? cJSON_CreateString(s) : cJSON_CreateNull();

	if (!o)
		return FX_E_NOMEM;
	if (hfc_item(model, key))
		return cJSON_ReplaceItemInObjectCaseSensitive(model, key, o) ? FX_OK : (cJSON_Delete(o), FX_E_NOMEM);
	return cJSON_AddItemToObject(model, key, o) ? FX_OK : (cJSON_Delete(o), FX_E_NOMEM);
}

/* The BPE options GPT2Tokenizer and Qwen2Tokenizer set (byte-level: no unk,
 * no byte fallback, no subword prefix or suffix). Errors as hfc_set_opt. */
static int hfc_byte_level_opts(cJSON *model)
{
	int rc;
	if ((rc = hfc_set_opt(model, "unk_token", -1, NULL)) ||
	    (rc = hfc_set_opt(model, "fuse_unk", 0, NULL)) ||
	    (rc = hfc_set_opt(model, "byte_fallback", 0, NULL)) ||
	    (rc = hfc_set_opt(model, "continuing_subword_prefix", -1, "")) ||
	    (rc = hfc_set_opt(model, "end_of_word_suffix", -1, "")))
		return rc;
	return FX_OK;
}

/* A boolean option of tokenizer_config.json into *out (def when absent or
 * null). FX_E_UNSUPPORTED for another type. */
static int hfc_cfg_bool(const cJSON *cfg, const char *dir, const char *key, bool def, bool *out,
			struct fx_err *err)
{
	const cJSON *o = hfc_item(cfg, key);

	*out = def;
	if (!o || cJSON_IsNull(o))
		return FX_OK;
	if (!cJSON_IsBool(o))
		return fx_fail(err, FX_E_UNSUPPORTED, "%s/tokenizer_config.json: %s that is not true, "
			       "false or null is not supported", dir, key);
	*out = cJSON_IsTrue(o);
	return FX_OK;
}

/* The named token key as __init__ receives it: tokenizer_config.json's,
 * else special_tokens_map.json's when the config has no
 * added_tokens_decoder (from_pretrained's legacy branch), else the class's
 * default dflt. *none: set to null explicitly. */
static const char *hfc_named(const cJSON *cfg, const cJSON *map, const char *key, const char *dflt)
{
	const cJSON *t = hfc_item(cfg, key);

	if (!t && !hfc_item(cfg, "added_tokens_decoder"))
		t = hfc_item(map, key);
	if (!t)
		return dflt;
	return hflegacy_content(t); /* null: none */
}

/* The largest id of the model's vocabulary and the added tokens, + 1. */
static int32_t hfc_next_id(const cJSON *j)
{
	const cJSON *vocab = hfc_item(hfc_item(j, "model"), "vocab"), *e;
	int32_t next = 0;

	cJSON_ArrayForEach(e, vocab)
		if (cJSON_IsNumber(e) && e->valuedouble >= next)
			next = (int32_t)e->valuedouble + 1;
	cJSON_ArrayForEach(e, hfc_item(j, "added_tokens")) {
		const cJSON *id = hfc_item(e, "id");

		if (cJSON_IsNumber(id) && id->valuedouble >= next)
			next = (int32_t)id->valuedouble + 1;
	}
	return next;
}

/* The added tokens a rebuilding class starts from: from_pretrained passes
 * tokenizer_config.json's added_tokens_decoder when it has one (then
 * tokenizer.json's added_tokens are not read: convert_to_native_format
 * takes the file's vocabulary without them), else tokenizer.json's list
 * stays. Entries in id order, as TokenizersBackend.__init__ adds them.
 * FX_E_FORMAT (a malformed entry), FX_E_NOMEM. */
static int hfc_added_from_cfg(cJSON *j, const char *dir, const cJSON *cfg, struct fx_err *err)
{
	const cJSON *dec = hfc_item(cfg, "added_tokens_decoder"), *e;
	cJSON *list;
	long last = -1;

	if (!dec)
		return FX_OK;
	if (!cJSON_IsObject(dec))
		return fx_fail(err, FX_E_FORMAT, "%s/tokenizer_config.json: added_tokens_decoder is not "
			       "an object", dir);
	if (!(list = cJSON_CreateArray()))
		return FX_E_NOMEM;
	for (;;) { /* the next larger id each round: entries are few */
		const cJSON *best = NULL;
		long best_id = 0;

		cJSON_ArrayForEach(e, dec) {
			char *endp;
			long id = strtol(e->string, &endp, 10);

			if (!hflegacy_content(e) || *endp || endp == e->string || id < 0 || id >= (1L << 28)) {
				cJSON_Delete(list);
				return fx_fail(err, FX_E_FORMAT, "%s/tokenizer_config.json: added_tokens_"
					       "decoder entry '%.20s' is not an id with a content", dir,
					       e->string);
			}
			if (id > last && (!best || id < best_id)) {
				best = e;
				best_id = id;
			}
		}
		if (!best)
			break;
		last = best_id;
		if (hflegacy_added_id(list, hflegacy_content(best)) < 0 &&
		    hflegacy_add_token(list, (int)best_id, hflegacy_content(best), best)) {
			cJSON_Delete(list);
			return FX_E_NOMEM;
		}
	}
	if (hfc_item(j, "added_tokens"))
		return cJSON_ReplaceItemInObjectCaseSensitive(j, "added_tokens", list) ? FX_OK
			: (cJSON_Delete(list), FX_E_NOMEM);
	return cJSON_AddItemToObject(j, "added_tokens", list) ? FX_OK : (cJSON_Delete(list), FX_E_NOMEM);
}

/* TokenizersBackend.__init__ after the class's __init__: each named token
 * (the class's defaults, overridden by the config) not yet an added token
 * becomes a special one, at its vocabulary id or appended. Also records
 * them in j's "ferrox" object (class: cls, for the vocabulary's kind;
 * special_tokens: defaults for load_dir_specials). FX_E_NOMEM. */
static int hfc_named_tokens(cJSON *j, const char *cls, const cJSON *cfg, const cJSON *map,
			    const char *const dflt[7])
{
	static const char *const keys[7] = {
		"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"
	};
	const cJSON *vocab = hfc_item(hfc_item(j, "model"), "vocab");
	cJSON *list = cJSON_GetObjectItemCaseSensitive(j, "added_tokens"), *f, *st;
	int32_t next = hfc_next_id(j);
	int rc;

	if (!list && !(list = cJSON_AddArrayToObject(j, "added_tokens")))
		return FX_E_NOMEM;
	if (!(f = cJSON_AddObjectToObject(j, "ferrox")) || !cJSON_AddStringToObject(f, "class", cls) ||
	    !(st = cJSON_AddObjectToObject(f, "special_tokens")))
		return FX_E_NOMEM;
	for (int k = 0; k < 7; k++) {
		const char *s = hfc_named(cfg, map, keys[k], dflt[k]);
		const cJSON *v;

		if (!s)
			continue;
		if (!cJSON_AddStringToObject(st, keys[k], s))
			return FX_E_NOMEM;
		if (hflegacy_added_id(list, s) >= 0)
			continue;
		v = hfc_item(vocab, s);
		if ((rc = hflegacy_add_token(list, cJSON_IsNumber(v) ? v->valueint : next++, s, NULL)))
			return rc;
	}
	return FX_OK;
}

#define HFC_TO_META "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}"
#define HFC_FROM_META "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},\"content\":\" \"}"
#define HFC_BYTES "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}"
#define HFC_QWEN2_RE "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| " \
	"?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+"

int hftok_class_apply(cJSON *j, const char *cls, const char *dir, const cJSON *cfg, const cJSON *map,
		      struct fx_err *err)
{
	static const char *const llama[7] = { "<s>", "</s>", "<unk>" };
	static const char *const gemma[7] = { "<bos>", "<eos>", "<unk>", NULL, "<pad>", NULL, "<mask>" };
	static const char *const gpt2[7] = { "<|endoftext|>", "<|endoftext|>", "<|endoftext|>" };
	static const char *const qwen2[7] = { NULL, "<|endoftext|>", "<|endoftext|>", NULL, "<|endoftext|>" };
	cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
	const cJSON *type = hfc_item(model, "type");
	const char *const *dflt;
	char pre[512], dec[512];
	bool prefix, legacy;
	int rc;

	if (strcmp(cls, "LlamaTokenizer") && strcmp(cls, "GemmaTokenizer") && strcmp(cls, "Qwen2Tokenizer") &&
	    strcmp(cls, "GPT2Tokenizer"))
		return fx_fail(err, FX_E_UNSUPPORTED, "%s: transformers 5.23 loads this tokenizer.json "
			       "with %s, which replaces the file's normalizer / pre-tokenizer / decoder "
			       "with its own; ferrox reproduces only LlamaTokenizer, GemmaTokenizer, "
			       "Qwen2Tokenizer and GPT2Tokenizer (set tokenizer_class to PreTrainedTokenizerFast in "
			       "tokenizer_config.json to use the file's pipeline)", dir, cls);
	if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
		return fx_fail(err, FX_E_UNSUPPORTED, "%s: %s over a tokenizer.json whose model is not "
			       "BPE is not supported", dir, cls);
	if (!strcmp(cls, "LlamaTokenizer")) {
		/* tokenization_llama.py; prepend scheme as convert_slow_tokenizer's
		 * _get_prepend_scheme */
		if ((rc = hfc_cfg_bool(cfg, dir, "add_prefix_space", true, &prefix, err)) ||
		    (rc = hfc_cfg_bool(cfg, dir, "legacy", false, &legacy, err)))
			return rc;
		dflt = llama;
		if ((rc = hfc_set_opt(model, "unk_token", -1, NULL)) ||
		    (rc = hfc_set_opt(model, "fuse_unk", 1, NULL)) ||
		    (rc = hfc_set_opt(model, "byte_fallback", 1, NULL)) ||
		    (rc = hfc_set_opt(model, "continuing_subword_prefix", -1, NULL)) ||
		    (rc = hfc_set_opt(model, "end_of_word_suffix", -1, NULL)))
			return rc;
		snprintf(pre, sizeof(pre), "{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\","
			 "\"prepend_scheme\":\"%s\",\"split\":false}",
			 !prefix ? "never" : legacy ? "always" : "first");
		snprintf(dec, sizeof(dec), "{\"type\":\"Sequence\",\"decoders\":[" HFC_FROM_META ","
			 HFC_BYTES "%s]}", prefix ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,"
			 "\"stop\":0}" : "");
		rc = hfc_set_json(j, "normalizer", NULL);
	} else if (!strcmp(cls, "GemmaTokenizer")) { /* tokenization_gemma.py */
		const char *unk = hfc_named(cfg, map, "unk_token", "<unk>");

		dflt = gemma;
		if ((rc = hfc_set_opt(model, "unk_token", -1, unk)) ||
		    (rc = hfc_set_opt(model, "fuse_unk", 1, NULL)) ||
		    (rc = hfc_set_opt(model, "byte_fallback", 1, NULL)) ||
		    (rc = hfc_set_opt(model, "continuing_subword_prefix", -1, NULL)) ||
		    (rc = hfc_set_opt(model, "end_of_word_suffix", -1, NULL)))
			return rc;
		snprintf(pre, sizeof(pre), "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
			 "\"behavior\":\"MergedWithPrevious\",\"invert\":false}");
		snprintf(dec, sizeof(dec), "{\"type\":\"Sequence\",\"decoders\":[" HFC_FROM_META ","
			 HFC_BYTES "]}");
		rc = hfc_set_json(j, "normalizer", HFC_TO_META);
	} else if (!strcmp(cls, "GPT2Tokenizer")) { /* tokenization_gpt2.py */
		if ((rc = hfc_cfg_bool(cfg, dir, "add_prefix_space", false, &prefix, err)))
			return rc;
		dflt = gpt2;
		if ((rc = hfc_byte_level_opts(model)))
			return rc;
		snprintf(pre, sizeof(pre), "{\"type\":\"ByteLevel\",\"add_prefix_space\":%s,"
			 "\"trim_offsets\":true,\"use_regex\":true}", prefix ? "true" : "false");
		snprintf(dec, sizeof(dec), "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
			 "\"trim_offsets\":true,\"use_regex\":true}");
		rc = hfc_set_json(j, "normalizer", NULL);
	} else { /* tokenization_qwen2.py */
		if ((rc = hfc_cfg_bool(cfg, dir, "add_prefix_space", false, &prefix, err)))
			return rc;
		dflt = qwen2;
		if ((rc = hfc_byte_level_opts(model)))
			return rc;
		snprintf(pre, sizeof(pre), "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
			 "\"pattern\":{\"Regex\":\"" HFC_QWEN2_RE "\"},\"behavior\":\"Isolated\","
			 "\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":%s,"
			 "\"trim_offsets\":true,\"use_regex\":false}]}", prefix ? "true" : "false");
		snprintf(dec, sizeof(dec), "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
			 "\"trim_offsets\":true,\"use_regex\":true}");
		rc = hfc_set_json(j, "normalizer", "{\"type\":\"NFC\"}");
	}
	/* the class's BPE is built without these (their defaults) */
	if (rc || (rc = hfc_set_opt(model, "ignore_merges", 0, NULL)) ||
	    (rc = hfc_set_opt(model, "dropout", -1, NULL)) || (rc = hfc_set_json(j, "pre_tokenizer", pre)) ||
	    (rc = hfc_set_json(j, "decoder", dec)))
		return rc;
	if ((rc = hfc_added_from_cfg(j, dir, cfg, err)))
		return rc;
	return hfc_named_tokens(j, cls, cfg, map, dflt);
}
