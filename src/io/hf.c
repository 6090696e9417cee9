/* Hugging Face checkpoint directories (config.json + *.safetensors) mapped
 * onto a GGUF-shaped view with llama.cpp's key and tensor names, applying
 * the same weight transforms as llama.cpp's convert_hf_to_gguf.py (Q/K row
 * permutation for adjacent-pair RoPE, Gemma's (1 + w) norms folded in), so
 * the model loader sees one shape whatever the file format.
 *
 * config.json is read in both styles: transformers 4 (rope_theta,
 * rope_scaling{rope_type|type}, rope_local_base_freq, partial_rotary_factor,
 * torch_dtype) and transformers 5 (rope_parameters, per layer type for
 * Gemma 3; dtype).
 */
#include "io/hf.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "core/alloc.h"
#include "core/json.h"
#include "io/hf_gdn.h"
#include "io/hf_mtp.h"
#include "io/hf_gemma4.h"
#include "io/hf_moe.h"
#include "io/hf_mup.h"
#include "io/hf_ssm.h"
#include "io/hf_rope.h"
#include "io/hf_vocab.h"
#include "io/safetensors.h"
#include "quant/quant.h"

/* HF per-layer tensor suffix -> GGUF suffix (NULL: the family decides). */
static const struct {
	const char *hf, *gguf;
} layer_names[] = {
	{ "input_layernorm.weight", "attn_norm.weight" },
	{ "self_attn.q_proj.weight", "attn_q.weight" },
	{ "eh_proj.weight", "nextn.eh_proj.weight" }, /* MTP blocks (hf_mtp.c) */
	{ "enorm.weight", "nextn.enorm.weight" },
	{ "hnorm.weight", "nextn.hnorm.weight" },
	{ "shared_head.norm.weight", "nextn.shared_head_norm.weight" },
	{ "self_attn.k_proj.weight", "attn_k.weight" },
	{ "self_attn.v_proj.weight", "attn_v.weight" },
	{ "self_attn.o_proj.weight", "attn_output.weight" },
	{ "self_attn.q_proj.bias", "attn_q.bias" },
	{ "self_attn.k_proj.bias", "attn_k.bias" },
	{ "self_attn.v_proj.bias", "attn_v.bias" },
	{ "self_attn.o_proj.bias", "attn_output.bias" },
	{ "self_attn.qkv_proj.weight", "attn_qkv.weight" },
	{ "self_attn.q_norm.weight", "attn_q_norm.weight" },
	{ "self_attn.k_norm.weight", "attn_k_norm.weight" },
	{ "post_attention_layernorm.weight", NULL },
	{ "pre_feedforward_layernorm.weight", "ffn_norm.weight" },
	{ "post_feedforward_layernorm.weight", "post_ffw_norm.weight" },
	{ "mlp.gate_proj.weight", "ffn_gate.weight" },
	{ "mlp.up_proj.weight", "ffn_up.weight" },
	{ "mlp.down_proj.weight", "ffn_down.weight" },
	{ "mlp.gate_up_proj.weight", "ffn_up.weight" }, /* fused [gate; up] (Phi-3) */
	{ "block_sparse_moe.gate.weight", "ffn_gate_inp.weight" }, /* MoE routers */
	{ "mlp.gate.weight", "ffn_gate_inp.weight" },
	{ "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight" },
	{ "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight" },
	{ "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight" },
	{ "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight" },
	{ "self_attn.sinks", "attn_sinks.weight" },
	{ "mlp.router.weight", "ffn_gate_inp.weight" },
	{ "mlp.router.bias", "ffn_gate_inp.bias" },
	{ "self_attn.q_a_proj.weight", "attn_q_a.weight" }, /* MLA */
	{ "self_attn.q_a_layernorm.weight", "attn_q_a_norm.weight" },
	{ "self_attn.q_b_proj.weight", "attn_q_b.weight" },
	{ "self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a_mqa.weight" },
	{ "self_attn.kv_a_layernorm.weight", "attn_kv_a_norm.weight" },
	{ "self_attn.kv_b_proj.weight", "attn_kv_b.weight" },
	{ "mlp.gate.e_score_correction_bias", "exp_probs_b.bias" },
	{ "mlp.moe_statics.e_score_correction_bias", "exp_probs_b.bias" }, /* ERNIE 4.5 MoE */
	{ "block_sparse_moe.e_score_correction_bias", "exp_probs_b.bias" }, /* MiniMax-M2 */
	{ "mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight" },
	{ "mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight" },
	{ "mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight" },
	{ "operator_norm.weight", "attn_norm.weight" }, /* LFM2 */
	{ "ffn_norm.weight", "ffn_norm.weight" },
	{ "feed_forward.w1.weight", "ffn_gate.weight" },
	{ "feed_forward.w3.weight", "ffn_up.weight" },
	{ "feed_forward.w2.weight", "ffn_down.weight" },
	{ "self_attn.out_proj.weight", "attn_output.weight" },
	{ "self_attn.q_layernorm.weight", "attn_q_norm.weight" },
	{ "self_attn.k_layernorm.weight", "attn_k_norm.weight" },
	{ "conv.in_proj.weight", "shortconv.in_proj.weight" },
	{ "conv.out_proj.weight", "shortconv.out_proj.weight" },
	{ "conv.conv.weight", "shortconv.conv.weight" }, /* [n_embd, 1, K] -> [n_embd][K] */
	{ "norm.weight", "attn_norm.weight" }, /* Mamba-2 */
	{ "mixer.in_proj.weight", "ssm_in.weight" },
	{ "mixer.conv1d.weight", "ssm_conv1d.weight" },
	{ "mixer.conv1d.bias", "ssm_conv1d.bias" },
	{ "mixer.dt_bias", "ssm_dt.bias" },
	{ "mixer.A_log", "ssm_a" }, /* stored as A = -exp(A_log) */
	{ "mixer.D", "ssm_d" },
	{ "mixer.norm.weight", "ssm_norm.weight" },
	{ "mixer.out_proj.weight", "ssm_out.weight" },
	{ "mamba.in_proj.weight", "ssm_in.weight" }, /* Granite 4.0-H */
	{ "mamba.conv1d.weight", "ssm_conv1d.weight" },
	{ "mamba.conv1d.bias", "ssm_conv1d.bias" },
	{ "mamba.dt_bias", "ssm_dt.bias" },
	{ "mamba.A_log", "ssm_a" },
	{ "mamba.D", "ssm_d" },
	{ "mamba.norm.weight", "ssm_norm.weight" },
	{ "mamba.out_proj.weight", "ssm_out.weight" },
	{ "linear_attn.in_proj_qkv.weight", "attn_qkv.weight" }, /* Gated DeltaNet (Qwen 3.5) */
	{ "linear_attn.in_proj_z.weight", "attn_gate.weight" },
	{ "linear_attn.in_proj_b.weight", "ssm_beta.weight" },
	{ "linear_attn.in_proj_a.weight", "ssm_alpha.weight" },
	{ "linear_attn.conv1d.weight", "ssm_conv1d.weight" },
	{ "linear_attn.dt_bias", "ssm_dt.bias" },
	{ "linear_attn.A_log", "ssm_a" },
	{ "linear_attn.norm.weight", "ssm_norm.weight" },
	{ "linear_attn.out_proj.weight", "ssm_out.weight" },
	{ "pre_ff_layernorm.weight", "ffn_norm" }, /* Falcon-H1, as llama.cpp: no .weight */
	{ "feed_forward.gate_proj.weight", "ffn_gate.weight" },
	{ "feed_forward.up_proj.weight", "ffn_up.weight" },
	{ "feed_forward.down_proj.weight", "ffn_down.weight" },
	{ "mixer.q_proj.weight", "attn_q.weight" }, /* Nemotron-H: every block is the mixer */
	{ "mixer.k_proj.weight", "attn_k.weight" },
	{ "mixer.v_proj.weight", "attn_v.weight" },
	{ "mixer.o_proj.weight", "attn_output.weight" },
	{ "mixer.up_proj.weight", "ffn_up.weight" },
	{ "mixer.down_proj.weight", "ffn_down.weight" },
	{ "mixer.gate.weight", "ffn_gate_inp.weight" },
	{ "mixer.gate.e_score_correction_bias", "exp_probs_b.bias" },
	{ "mixer.shared_experts.up_proj.weight", "ffn_up_shexp.weight" },
	{ "mixer.shared_experts.down_proj.weight", "ffn_down_shexp.weight" },
	{ "feed_forward.gate.weight", "ffn_gate_inp.weight" }, /* LFM2-MoE */
	{ "feed_forward.expert_bias", "exp_probs_b.bias" },
	{ "block_sparse_moe.router.layer.weight", "ffn_gate_inp.weight" },
	{ "feed_forward.gate_proj.weight", "ffn_gate.weight" }, /* Llama 4 */
	{ "feed_forward.up_proj.weight", "ffn_up.weight" },
	{ "feed_forward.down_proj.weight", "ffn_down.weight" },
	{ "feed_forward.router.weight", "ffn_gate_inp.weight" },
	{ "feed_forward.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight" },
	{ "feed_forward.shared_expert.up_proj.weight", "ffn_up_shexp.weight" },
	{ "feed_forward.shared_expert.down_proj.weight", "ffn_down_shexp.weight" },
	{ "block_sparse_moe.output_linear.weight", "ffn_down_exps.weight" },
	{ "shared_mlp.output_linear.weight", "ffn_down_shexp.weight" },
	{ "layer_scalar", "layer_output_scale.weight" }, /* Gemma 4 */
	{ "per_layer_input_gate.weight", "inp_gate.weight" },
	{ "per_layer_projection.weight", "proj.weight" },
	{ "post_per_layer_input_norm.weight", "post_norm.weight" },
	{ "pre_feedforward_layernorm_2.weight", "pre_ffw_norm_2.weight" },
	{ "post_feedforward_layernorm_1.weight", "post_ffw_norm_1.weight" },
	{ "post_feedforward_layernorm_2.weight", "post_ffw_norm_2.weight" },
	{ "router.proj.weight", "ffn_gate_inp.weight" },
	{ "router.scale", "ffn_gate_inp.scale" },
	{ "router.per_expert_scale", "ffn_down_exps.scale" },
	/* [E][2I][n_embd] and [E][n_embd][I]: llama.cpp's {n_embd, 2I, E} and
	 * {I, n_embd, E} byte for byte */
	{ "experts.gate_up_proj", "ffn_gate_up_exps.weight" },
	{ "experts.down_proj", "ffn_down_exps.weight" },
};

/* Per-expert HF tensors (%d: expert) -> the stacked GGUF tensor kind. */
static const struct {
	const char *hf;
	int kind; /* 0 gate, 1 up, 2 down */
} expert_names[] = {
	{ "block_sparse_moe.experts.%d.w1.weight%n", 0 },
	{ "block_sparse_moe.experts.%d.w3.weight%n", 1 },
	{ "block_sparse_moe.experts.%d.w2.weight%n", 2 },
	{ "mlp.experts.%d.gate_proj.weight%n", 0 },
	{ "mlp.experts.%d.up_proj.weight%n", 1 },
	{ "mlp.experts.%d.down_proj.weight%n", 2 },
	{ "feed_forward.experts.%d.w1.weight%n", 0 }, /* LFM2-MoE */
	{ "feed_forward.experts.%d.w3.weight%n", 1 },
	{ "feed_forward.experts.%d.w2.weight%n", 2 },
	{ "mixer.experts.%d.up_proj.weight%n", 1 }, /* Nemotron-H: non-gated */
	{ "mixer.experts.%d.down_proj.weight%n", 2 },
};

static const char *const stack_names[3] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };

/* One stacked expert tensor being assembled: llama.cpp keeps experts as
 * one [n_in, n_out, n_expert] tensor; HF checkpoints as one per expert. */
struct stack {
	int layer, kind, type;
	int64_t ne0, ne1;
	size_t bytes;        /* per expert */
	uint8_t *buf;        /* owned by the view */
	uint64_t seen;       /* bit per expert (n_expert <= 64 here) */
};

static const struct {
	const char *hf, *gguf;
} global_names[] = {
	{ "model.embed_tokens.weight", "token_embd.weight" },
	{ "model.norm.weight", "output_norm.weight" },
	{ "lm_head.weight", "output.weight" },
	{ "model.embedding_norm.weight", "token_embd_norm.weight" }, /* LFM2's final norm */
	{ "backbone.embeddings.weight", "token_embd.weight" }, /* Mamba-2 */
	{ "backbone.embedding.weight", "token_embd.weight" },
	{ "backbone.norm_f.weight", "output_norm.weight" },
	{ "model.final_layernorm.weight", "output_norm.weight" }, /* Falcon-H1 */
	{ "model.embed_tokens_per_layer.weight", "per_layer_token_embd.weight" }, /* Gemma 4 */
	{ "model.per_layer_model_projection.weight", "per_layer_model_proj.weight" },
	{ "model.per_layer_projection_norm.weight", "per_layer_proj_norm.weight" },
};

struct hf {
	struct gguf_file *g;
	struct st_set *st;
	const struct hf_family *fam;
	const char *arch;             /* GGUF general.architecture */
	cJSON *cfg;
	struct fx_err *err;
	const char *dir;
	int n_head, n_head_kv, head_dim, head_dim_v, n_rot, n_layer, n_expert;
	bool per_layer_kv;            /* attention.head_count_kv is an array (map_mixers) */
	int ssm_groups;               /* Mamba-2 n_groups (map_ssm), 0: none */
	bool gdn;                     /* Gated DeltaNet sizes present (map_gdn) */
	bool shexp_set;               /* a shared expert's width was given by name */
	struct hf_gdn gdn_sz;         /* its key / value heads and widths */
	int n_nextn;                  /* multi-token-prediction layers after the last
				       * (GLM-4.5 num_nextn_predict_layers): skipped */
	int n_mtp;                    /* Qwen's mtp.* blocks, kept as blk.{n_layer + i} */
	struct stack *stacks;
	int n_stacks;
};

/* ---- config.json ------------------------------------------------------- */

static const cJSON *cfg_get(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return v && !cJSON_IsNull(v) ? v : NULL;
}

static bool cfg_num(const cJSON *o, const char *k, double *out)
{
	const cJSON *v = cfg_get(o, k);
	if (!v || !cJSON_IsNumber(v))
		return false;
	*out = v->valuedouble;
	return true;
}

/* A required positive integer; the error names the key. */
static int cfg_int(struct hf *h, const char *k, int *out)
{
	double d;
	if (!cfg_num(h->cfg, k, &d))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: required key '%s' is missing",
			       h->dir, k);
	if (d < 1 || d > 1e9 || d != floor(d))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: '%s' is %g, want a positive integer",
			       h->dir, k, d);
	*out = (int)d;
	return FX_OK;
}

/* An optional width or count: absent (or null) leaves *out as it is;
 * present, it must be a whole number in [0, 2^30), else FX_E_FORMAT naming
 * the key. Every config number that becomes an integer goes through here
 * or cfg_int: converting an out-of-range double is undefined behaviour
 * (fuzz_hf found two such conversions). */
static int cfg_dim(struct hf *h, const cJSON *o, const char *k, int *out)
{
	const cJSON *v = cfg_get(o, k);
	if (!v)
		return FX_OK;
	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < (double)(1 << 30)) ||
	    v->valuedouble != floor(v->valuedouble))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: '%s' is not a whole number in "
			       "[0, 2^30)", h->dir, k);
	*out = (int)v->valuedouble;
	return FX_OK;
}

/* The file at path (at most max bytes) into *out, NUL-terminated.
 * FX_E_IO: cannot open or read it, or it is larger; FX_E_NOMEM. */
static int read_text(const char *path, size_t max, char **out)
{
	*out = NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return FX_E_IO;
	char *buf = fx_malloc_array(max + 1, 1);
	size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
	bool bad = buf && (ferror(f) || n > max);
	fclose(f);
	if (!buf || bad) {
		fx_free(buf);
		return buf ? FX_E_IO : FX_E_NOMEM;
	}
	buf[n] = 0;
	*out = buf;
	return FX_OK;
}

/* dir/name parsed into *out: NULL when the file is absent. Errors name
 * the file: FX_E_IO (unreadable, over max bytes), FX_E_FORMAT (not a JSON
 * object), FX_E_NOMEM. */
static int read_json_file(const char *dir, const char *name, size_t max, cJSON **out,
			  struct fx_err *err)
{
	char path[4096];
	struct stat st;
	char *text = NULL;
	*out = NULL;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (stat(path, &st) != 0)
		return FX_OK;
	int rc = read_text(path, max, &text);
	if (rc)
		return fx_fail(err, rc, "%s: %s", path, rc == FX_E_NOMEM ? "out of memory reading it"
			       : "cannot read it (or it is too large)");
	rc = fx_json_parse(text, strlen(text), out, NULL);
	fx_free(text);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, rc, "%s: out of memory parsing it", path);
	if (!*out || !cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return fx_fail(err, FX_E_FORMAT, "%s: not a JSON object", path);
	}
	return FX_OK;
}

/* ---- context length ----------------------------------------------------- */

/* A length key of o that is an integer in 1..2^31-1 into *out. Larger
 * values (transformers' "no limit" int(1e30), 1e30 as a float) are no
 * length. */
static bool ctx_value(const cJSON *o, const char *k, int32_t *out)
{
	double d;
	if (!cfg_num(o, k, &d) || d < 1 || d > 2147483647.0 || d != floor(d))
		return false;
	*out = (int32_t)d;
	return true;
}

/* See hf_context_info; cfg is config.json (borrowed). tokenizer_config.json
 * is read only when config.json has no length or with want_mml. */
static int ctx_info(const char *dir, const cJSON *cfg, bool want_mml, struct hf_ctx_info *out,
		    struct fx_err *err)
{
	static const char *const keys[] = { "max_position_embeddings", "n_ctx", "n_positions",
					    "max_length", "max_sequence_length", "model_max_length" };
	cJSON *tc = NULL;
	int rc = FX_OK;
	bool from_cfg = false;
	*out = (struct hf_ctx_info){ .n_ctx_train = 4096 };
	snprintf(out->from, sizeof(out->from), "default");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !from_cfg; i++)
		if ((from_cfg = ctx_value(cfg, keys[i], &out->n_ctx_train)))
			snprintf(out->from, sizeof(out->from), "config.json %s", keys[i]);
	if (from_cfg && !want_mml)
		return FX_OK;
	/* tokenizer_configs hold chat templates and 100k-entry added-token
	 * tables: tens of MiB are seen */
	if ((rc = read_json_file(dir, "tokenizer_config.json", (size_t)64 << 20, &tc, err)))
		return rc;
	ctx_value(tc, "model_max_length", &out->model_max_length);
	cJSON_Delete(tc);
	if (!from_cfg && out->model_max_length) {
		out->n_ctx_train = out->model_max_length;
		snprintf(out->from, sizeof(out->from), "tokenizer_config.json model_max_length");
	}
	return FX_OK;
}

int hf_context_info(const char *dir, struct hf_ctx_info *out, struct fx_err *err)
{
	cJSON *cfg = NULL;
	int rc = read_json_file(dir, "config.json", 1 << 20, &cfg, err);
	if (!rc && !cfg)
		rc = fx_fail(err, FX_E_IO, "%s: no config.json", dir);
	if (!rc)
		rc = ctx_info(dir, cfg, true, out, err);
	cJSON_Delete(cfg);
	return rc;
}

/* ---- generation_config.json -------------------------------------------- */

/* generation_config.json (optional) as llama.cpp's general.sampling.* keys,
 * the mapping of its converter (gguf-py's Metadata.load: top_k, top_p,
 * min_p, temperature, penalty_last_n, repetition_penalty or
 * penalty_repeat), so a checkpoint directory and the GGUF converted from it
 * carry the same sampling defaults. Values are range-checked where the
 * model reads them (model/sampling.c), for both formats alike. */
static int map_generation_config(struct hf *h)
{
	static const struct {
		const char *json, *key;
		bool integer;
	} map[] = {
		{ "temperature", "general.sampling.temp", false },
		{ "top_k", "general.sampling.top_k", true },
		{ "top_p", "general.sampling.top_p", false },
		{ "min_p", "general.sampling.min_p", false },
		{ "repetition_penalty", "general.sampling.penalty_repeat", false },
		{ "penalty_repeat", "general.sampling.penalty_repeat", false },
		{ "penalty_last_n", "general.sampling.penalty_last_n", true },
	};
	char path[4096];
	struct stat st;
	char *text = NULL;
	cJSON *j = NULL;
	int rc;
	snprintf(path, sizeof(path), "%s/generation_config.json", h->dir);
	if (stat(path, &st) != 0)
		return FX_OK;
	if ((rc = read_text(path, 1 << 20, &text)))
		return fx_fail(h->err, rc, "%s: %s", path,
			       rc == FX_E_NOMEM ? "out of memory reading it" : "cannot read it (at most 1 MiB)");
	rc = fx_json_parse(text, strlen(text), &j, NULL);
	fx_free(text);
	if (rc == FX_E_NOMEM)
		return fx_fail(h->err, rc, "%s: out of memory parsing it", path);
	if (!j || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return fx_fail(h->err, FX_E_FORMAT, "%s: not a JSON object", path);
	}
	rc = FX_OK;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]) && !rc; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, map[i].json);
		if (!v || cJSON_IsNull(v))
			continue;
		/* both spellings: penalty_repeat wins, as in llama.cpp's converter */
		if (!strcmp(map[i].json, "repetition_penalty") &&
		    cJSON_GetObjectItemCaseSensitive(j, "penalty_repeat"))
			continue;
		double d = v->valuedouble;
		if (!cJSON_IsNumber(v) || (map[i].integer && (d != floor(d) || fabs(d) > 1e9)))
			rc = fx_fail(h->err, FX_E_FORMAT, "%s: '%s' is not %s", path, map[i].json,
				     map[i].integer ? "an integer" : "a number");
		else if (map[i].integer ? gguf_build_i32(h->g, map[i].key, (int32_t)d)
					: gguf_build_f32(h->g, map[i].key, (float)d))
			rc = fx_fail(h->err, FX_E_NOMEM, "no memory");
	}
	cJSON_Delete(j);
	return rc;
}

/* ---- metadata ---------------------------------------------------------- */

static int put_u32(struct hf *h, const char *suffix, uint32_t v)
{
	char k[128];
	snprintf(k, sizeof(k), "%s.%s", h->arch, suffix);
	return gguf_build_u32(h->g, k, v);
}

static int put_f32(struct hf *h, const char *suffix, float v)
{
	char k[128];
	snprintf(k, sizeof(k), "%s.%s", h->arch, suffix);
	return gguf_build_f32(h->g, k, v);
}

static int put_str(struct hf *h, const char *suffix, const char *v)
{
	char k[128];
	snprintf(k, sizeof(k), "%s.%s", h->arch, suffix);
	return gguf_build_str(h->g, k, v);
}

/* RoPE parameters of one attention kind: transformers 5 keeps them in
 * rope_parameters (for Gemma 3 one object per layer type), transformers 4
 * in rope_theta + rope_scaling at the top level. */
static const cJSON *rope_params(const cJSON *cfg, const char *layer_type)
{
	const cJSON *rp = cfg_get(cfg, "rope_parameters");
	if (rp && layer_type && cfg_get(rp, layer_type))
		return cfg_get(rp, layer_type);
	if (rp && !layer_type && cfg_get(rp, "full_attention"))
		return cfg_get(rp, "full_attention");
	return rp;
}

static int map_rope(struct hf *h)
{
	const cJSON *cfg = h->cfg;
	const cJSON *rp = rope_params(cfg, NULL);
	const cJSON *rs = cfg_get(cfg, "rope_scaling"); /* transformers 4 */
	const cJSON *sc = rp ? rp : rs;
	double theta = 10000.0, prf = 1.0;
	int rc;
	if (!(rp && cfg_num(rp, "rope_theta", &theta)))
		cfg_num(cfg, "rope_theta", &theta);
	if (!(rp && cfg_num(rp, "partial_rotary_factor", &prf)))
		cfg_num(cfg, "partial_rotary_factor", &prf);
	const cJSON *pt = sc ? cfg_get(sc, "rope_type") : NULL;
	if (pt && cJSON_IsString(pt) && !strcmp(pt->valuestring, "proportional")) {
		/* Gemma 4: every pair over the whole head, the unturned ones by
		 * frequency factors (hf_gemma4.c) */
		if ((rc = hf_gemma4_rope_freqs(h->g, h->head_dim, prf, h->err)))
			return rc;
		h->n_rot = h->head_dim;
		sc = NULL;
	}
	if ((rc = put_f32(h, "rope.freq_base", (float)theta)) ||
	    (rc = put_u32(h, "rope.dimension_count",
			   (uint32_t)(h->n_rot ? h->n_rot : lround(h->head_dim * prf)))))
		return rc;
	/* Sliding layers' base: Gemma 3's per-layer-type parameters (5) or
	 * rope_local_base_freq (4). */
	const cJSON *rsw = rope_params(cfg, "sliding_attention");
	double local;
	if ((rsw && rsw != rp && cfg_num(rsw, "rope_theta", &local)) ||
	    cfg_num(cfg, "rope_local_base_freq", &local))
		if ((rc = put_f32(h, "rope.freq_base_swa", (float)local)))
			return rc;

	const cJSON *type = sc ? cfg_get(sc, "rope_type") : NULL;
	if (!type && sc)
		type = cfg_get(sc, "type");
	if (!type || !cJSON_IsString(type) || !strcmp(type->valuestring, "default"))
		return FX_OK;
	const char *t = type->valuestring;
	double factor = 1.0;
	cfg_num(sc, "factor", &factor);
	double orig = 0;
	if (!cfg_num(sc, "original_max_position_embeddings", &orig))
		cfg_num(cfg, "max_position_embeddings", &orig);
	if (!strcmp(t, "linear")) {
		return put_str(h, "rope.scaling.type", "linear") ||
		       put_f32(h, "rope.scaling.factor", (float)factor) ? FX_E_NOMEM : FX_OK;
	}
	if (!strcmp(t, "llama3")) { /* llama.cpp's form: frequency factors (io/hf_rope.c) */
		double lo = 1.0, hi = 4.0;
		cfg_num(sc, "low_freq_factor", &lo);
		cfg_num(sc, "high_freq_factor", &hi);
		return hf_rope_llama3_freqs(h->g, h->n_rot ? h->n_rot : (int)lround(h->head_dim * prf),
					    theta, factor, lo, hi, orig, h->err);
	}
	if (!strcmp(t, "yarn")) {
		double bf = 32.0, bs = 1.0, af;
		cfg_num(sc, "beta_fast", &bf);
		cfg_num(sc, "beta_slow", &bs);
		/* transformers' default attention factor: 0.1 ln(factor) + 1 */
		if (!cfg_num(sc, "attention_factor", &af))
			af = factor <= 1 ? 1.0 : 0.1 * log(factor) + 1.0;
		const cJSON *tr = cfg_get(sc, "truncate");
		if (put_str(h, "rope.scaling.type", "yarn") ||
		    put_f32(h, "rope.scaling.factor", (float)factor) ||
		    put_f32(h, "rope.scaling.yarn_beta_fast", (float)bf) ||
		    put_f32(h, "rope.scaling.yarn_beta_slow", (float)bs) ||
		    put_f32(h, "rope.scaling.attn_factor", (float)af) ||
		    put_u32(h, "rope.scaling.original_context_length", (uint32_t)orig) ||
		    gguf_build_bool(h->g, "ferrox.rope.yarn_truncate", !tr || cJSON_IsTrue(tr)))
			return FX_E_NOMEM;
		return FX_OK;
	}
	return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/config.json: RoPE type '%s' is not supported",
		       h->dir, t);
}

/* Sliding windows: a per-layer pattern from layer_types, or every layer
 * when the family has a window and no types (Mistral). Llama 4's chunked
 * attention (attention_chunk_size, layer_types "chunked_attention") is
 * written the same way; its row reads the window as aligned chunks. */
static int map_window(struct hf *h)
{
	double w;
	const cJSON *use = cfg_get(h->cfg, "use_sliding_window");
	const char *kind = "sliding_attention";
	if (cfg_num(h->cfg, "attention_chunk_size", &w) && w > 0)
		kind = "chunked_attention";
	else if (!cfg_num(h->cfg, "sliding_window", &w) || w <= 0 || (use && cJSON_IsFalse(use)))
		return FX_OK;
	uint8_t *pat = gguf_build_alloc(h->g, (size_t)h->n_layer);
	if (!pat)
		return FX_E_NOMEM;
	const cJSON *lt = cfg_get(h->cfg, "layer_types");
	for (int il = 0; il < h->n_layer; il++) {
		const cJSON *e = lt ? cJSON_GetArrayItem(lt, il) : NULL;
		if (lt && (!e || !cJSON_IsString(e)))
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: layer_types has no entry %d",
				       h->dir, il);
		pat[il] = !e || !strcmp(e->valuestring, kind);
	}
	char k[128];
	snprintf(k, sizeof(k), "%s.attention.sliding_window_pattern", h->arch);
	if (put_u32(h, "attention.sliding_window", (uint32_t)w) ||
	    gguf_build_arr(h->g, k, GGUF_T_BOOL, pat, (uint64_t)h->n_layer))
		return FX_E_NOMEM;
	return FX_OK;
}

/* LFM2's MLP width (Lfm2MLP): with block_auto_adjust_ff_dim, 2/3 of
 * intermediate_size, and with block_ffn_dim_multiplier that times the
 * multiplier, rounded up to block_multiple_of. */
static int lfm2_ff(struct hf *h, int *n_ff)
{
	const cJSON *adj = cfg_get(h->cfg, "block_auto_adjust_ff_dim");
	if (!adj || !cJSON_IsTrue(adj))
		return FX_OK;
	int ff = (int)(2.0 * *n_ff / 3.0);
	const cJSON *mul = cfg_get(h->cfg, "block_ffn_dim_multiplier");
	if (mul && cJSON_IsNumber(mul)) {
		double of = 256;
		cfg_num(h->cfg, "block_multiple_of", &of);
		if (!(of >= 1 && of <= 1 << 20) || !(mul->valuedouble > 0 && mul->valuedouble * ff < 1e9))
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: block_multiple_of %g / "
				       "block_ffn_dim_multiplier %g", h->dir, of, mul->valuedouble);
		ff = (int)(mul->valuedouble * ff);
		ff = (int)of * ((ff + (int)of - 1) / (int)of);
	}
	*n_ff = ff;
	return FX_OK;
}

/* layer_types entries of layers that do not attend: LFM2's "conv", the
 * linear-attention / Mamba layers of Granite 4.0-H and Qwen 3.5 ("mamba"
 * is Granite's released checkpoints' spelling), Nemotron-H's MLP-only
 * blocks (layers_block_type "mlp", "moe"). The tensors tell the mixer. */
static bool recurrent_type(const char *t)
{
	return !strcmp(t, "conv") || !strcmp(t, "linear_attention") || !strcmp(t, "mamba") ||
	       !strcmp(t, "mlp") || !strcmp(t, "moe");
}

/* Layers that do not attend (layer_types entries "conv": LFM2's short
 * convolutions) get 0 in a per-layer attention.head_count_kv, as
 * llama.cpp's converter writes hybrid models; conv_L_cache is the width
 * of their convolution. A layer type ferrox does not know is refused. */
static int map_mixers(struct hf *h)
{
	const cJSON *lt = cfg_get(h->cfg, "layer_types");
	if (!lt)
		lt = cfg_get(h->cfg, "layers_block_type"); /* Nemotron-H */
	bool any = false;
	for (int il = 0; lt && il < h->n_layer; il++) {
		const cJSON *e = cJSON_GetArrayItem(lt, il);
		if (!e || !cJSON_IsString(e))
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: layer_types has no entry %d",
				       h->dir, il);
		const char *t = e->valuestring;
		if (recurrent_type(t))
			any = true;
		else if (strcmp(t, "full_attention") && strcmp(t, "sliding_attention") &&
			 strcmp(t, "chunked_attention") && strcmp(t, "attention"))
			return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/config.json: layer_types[%d] is "
				       "'%.40s'; ferrox knows full_attention, sliding_attention, "
				       "chunked_attention, conv, linear_attention, mamba, mlp and moe",
				       h->dir, il, t);
	}
	if (any && h->fam->recurrent_flags) {
		/* llama.cpp's qwen35 form: one K/V head count, and a flag per
		 * layer (the tensors tell ferrox the same) */
		int nb = h->n_layer + h->n_mtp; /* the MTP blocks attend */
		uint8_t *rec = gguf_build_alloc(h->g, (size_t)nb);
		if (!rec)
			return FX_E_NOMEM;
		for (int il = 0; il < nb; il++)
			rec[il] = il < h->n_layer && recurrent_type(cJSON_GetArrayItem(lt, il)->valuestring);
		char k[128];
		snprintf(k, sizeof(k), "%s.attention.recurrent_layers", h->arch);
		return gguf_build_arr(h->g, k, GGUF_T_BOOL, rec, (uint64_t)nb) ? FX_E_NOMEM : FX_OK;
	}
	h->per_layer_kv = any; /* map_metadata then writes no scalar count */
	if (!any)
		return FX_OK;
	uint32_t *kv = gguf_build_alloc(h->g, (size_t)h->n_layer * sizeof(uint32_t));
	if (!kv)
		return FX_E_NOMEM;
	for (int il = 0; il < h->n_layer; il++)
		kv[il] = recurrent_type(cJSON_GetArrayItem(lt, il)->valuestring) ? 0 : (uint32_t)h->n_head_kv;
	char k[128];
	snprintf(k, sizeof(k), "%s.attention.head_count_kv", h->arch);
	int lc = -1, rc;
	if ((rc = cfg_dim(h, h->cfg, "conv_L_cache", &lc)))
		return rc;
	if (gguf_build_arr(h->g, k, GGUF_T_U32, kv, (uint64_t)h->n_layer) ||
	    (lc >= 0 && put_u32(h, "shortconv.l_cache", (uint32_t)lc)))
		return FX_E_NOMEM;
	return FX_OK;
}

/* Mamba-2's sizes as llama.cpp's ssm.* keys (convert_hf_to_gguf.py's
 * Mamba2Model): d_inner = expand x hidden (or intermediate_size), heads,
 * groups, state size, conv width. time_step_limit other than (0, inf) is
 * refused: transformers clamps dt with it in prefill but not in decode. */
static int map_ssm(struct hf *h, int n_embd)
{
	double expand = 2, inner, heads, groups = 1, state, conv = 4, hd;
	/* a hybrid's keys carry a mamba_ prefix (Granite 4.0-H) or are named
	 * otherwise (Nemotron-H: mamba_num_heads, ssm_state_size) */
	bool hy = cfg_get(h->cfg, "mamba_d_state") != NULL;
	bool nemo = cfg_get(h->cfg, "ssm_state_size") != NULL;
	if (!(cfg_num(h->cfg, hy ? "mamba_n_heads" : nemo ? "mamba_num_heads" : "num_heads", &heads) &&
	      cfg_num(h->cfg, hy ? "mamba_d_state" : nemo ? "ssm_state_size" : "state_size", &state)))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: a Mamba-2 config needs num_heads "
			       "and state_size (mamba_n_heads, mamba_d_state)", h->dir);
	if (cfg_num(h->cfg, "mamba_d_ssm", &inner)) {
		/* Falcon-H1 gives the inner width itself */
	} else if (nemo && cfg_num(h->cfg, "mamba_head_dim", &hd)) {
		inner = heads * hd;
	} else if (hy || nemo || !cfg_num(h->cfg, "intermediate_size", &inner)) {
		cfg_num(h->cfg, hy ? "mamba_expand" : "expand", &expand);
		inner = expand * n_embd;
	}
	cfg_num(h->cfg, hy ? "mamba_n_groups" : "n_groups", &groups);
	cfg_num(h->cfg, hy ? "mamba_d_conv" : "conv_kernel", &conv);
	const cJSON *lim = cfg_get(h->cfg, "time_step_limit");
	const cJSON *lo = lim ? cJSON_GetArrayItem(lim, 0) : NULL, *hi = lim ? cJSON_GetArrayItem(lim, 1) : NULL;
	if (lim && (!lo || !cJSON_IsNumber(lo) || lo->valuedouble != 0 ||
		    (hi && cJSON_IsNumber(hi) && isfinite(hi->valuedouble))))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/config.json: time_step_limit other than "
			       "(0, inf) is not supported", h->dir);
	const cJSON *rn = cfg_get(h->cfg, "mamba_rms_norm"), *nbg = cfg_get(h->cfg, "mamba_norm_before_gate");
	if ((rn && cJSON_IsFalse(rn)) || (nbg && cJSON_IsTrue(nbg)))
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/config.json: a Mamba-2 output norm other "
			       "than gate-then-RMSNorm (mamba_rms_norm false or mamba_norm_before_gate "
			       "true) is not supported", h->dir);
	if (put_u32(h, "ssm.inner_size", (uint32_t)inner) || put_u32(h, "ssm.state_size", (uint32_t)state) ||
	    put_u32(h, "ssm.time_step_rank", (uint32_t)heads) ||
	    put_u32(h, "ssm.group_count", (uint32_t)groups) || put_u32(h, "ssm.conv_kernel", (uint32_t)conv))
		return FX_E_NOMEM;
	h->ssm_groups = (int)groups;
	return FX_OK;
}

/* Gated DeltaNet sizes (Qwen 3.5 / Qwen3-Next linear_* keys) as llama.cpp
 * stores them in ssm.*: conv_kernel, state_size = key head width,
 * group_count = key heads, time_step_rank = value heads, inner_size =
 * value heads x value head width; full_attention_interval beside. */
static int map_gdn(struct hf *h)
{
	double K = 4, dk, dv, nk, nv, fi;
	if (!cfg_num(h->cfg, "linear_key_head_dim", &dk) || !cfg_num(h->cfg, "linear_value_head_dim", &dv) ||
	    !cfg_num(h->cfg, "linear_num_key_heads", &nk) || !cfg_num(h->cfg, "linear_num_value_heads", &nv))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: a Gated DeltaNet config needs "
			       "linear_key_head_dim, linear_value_head_dim, linear_num_key_heads and "
			       "linear_num_value_heads", h->dir);
	cfg_num(h->cfg, "linear_conv_kernel_dim", &K);
	if (put_u32(h, "ssm.conv_kernel", (uint32_t)K) || put_u32(h, "ssm.state_size", (uint32_t)dk) ||
	    put_u32(h, "ssm.group_count", (uint32_t)nk) || put_u32(h, "ssm.time_step_rank", (uint32_t)nv) ||
	    put_u32(h, "ssm.inner_size", (uint32_t)(nv * dv)) ||
	    (cfg_num(h->cfg, "full_attention_interval", &fi) &&
	     put_u32(h, "full_attention_interval", (uint32_t)fi)))
		return FX_E_NOMEM;
	h->gdn = true;
	h->gdn_sz = (struct hf_gdn){ .nk = (int64_t)nk, .nv = (int64_t)nv, .dk = (int64_t)dk,
				     .dv = (int64_t)dv };
	return FX_OK;
}

static int map_metadata(struct hf *h)
{
	const cJSON *cfg = h->cfg;
	int n_embd = 0, n_ff = 0, rc; /* set by cfg_int; gcc cannot see it once ctx_info is inlined */
	double d;
	struct hf_ctx_info ci;
	/* A Mamba-2 model (state_size, no attention heads) has no attention
	 * and no MLP: head_count and feed_forward_length 0, as llama.cpp's
	 * converter writes them. */
	bool ssm_only = cfg_get(cfg, "state_size") && !cfg_get(cfg, "num_attention_heads");
	/* Nemotron-H gives the layers as layers_block_type only */
	const cJSON *lbt = cfg_get(cfg, "layers_block_type");
	if (!cfg_get(cfg, "num_hidden_layers") && lbt && cJSON_IsArray(lbt)) {
		h->n_layer = cJSON_GetArraySize(lbt);
		if ((rc = cfg_int(h, "hidden_size", &n_embd)))
			return rc;
	} else if ((rc = cfg_int(h, "hidden_size", &n_embd)) ||
		   (rc = cfg_int(h, "num_hidden_layers", &h->n_layer))) {
		return rc;
	}
	n_ff = h->n_head = 0;
	/* an all-MoE model (Qwen 3.5 MoE) may give only the experts' width */
	if (!cfg_get(cfg, "intermediate_size") && cfg_get(cfg, "moe_intermediate_size")) {
		if ((rc = cfg_dim(h, cfg, "moe_intermediate_size", &n_ff)))
			return rc;
	} else if (!ssm_only && (rc = cfg_int(h, "intermediate_size", &n_ff)))
		return rc;
	if (!ssm_only && (rc = cfg_int(h, "num_attention_heads", &h->n_head)))
		return rc;
	if ((ssm_only || cfg_get(cfg, "mamba_d_state") || cfg_get(cfg, "ssm_state_size")) &&
	    (rc = map_ssm(h, n_embd)))
		return rc;
	if (cfg_get(cfg, "linear_num_value_heads") && (rc = map_gdn(h)))
		return rc;
	h->n_head_kv = h->n_head;
	h->head_dim = h->n_head ? n_embd / h->n_head : 0;
	int nope = -1, rope = -1, vd = -1;
	if ((rc = cfg_dim(h, cfg, "num_key_value_heads", &h->n_head_kv)) ||
	    (rc = cfg_dim(h, cfg, "head_dim", &h->head_dim)) ||
	    (rc = cfg_dim(h, cfg, "qk_nope_head_dim", &nope)) ||
	    (rc = cfg_dim(h, cfg, "qk_rope_head_dim", &rope)) || (rc = cfg_dim(h, cfg, "v_head_dim", &vd)))
		return rc;
	h->head_dim_v = h->head_dim;
	if (nope >= 0 && rope >= 0 && vd >= 0) {
		/* MLA: a head is [no-RoPE part, RoPE part]; V is narrower. */
		h->head_dim = nope + rope;
		h->head_dim_v = vd;
		h->n_rot = rope;
	}
	if ((rc = ctx_info(h->dir, cfg, false, &ci, h->err)))
		return rc;
	double eps = 1e-6;
	if (!cfg_num(cfg, "rms_norm_eps", &eps) && !cfg_num(cfg, "norm_eps", &eps) &&
	    !cfg_num(cfg, "layer_norm_epsilon", &eps))
		return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: required key 'rms_norm_eps' is missing",
			       h->dir);
	if ((rc = lfm2_ff(h, &n_ff)))
		return rc;
	double nle;
	int sis = 0;
	if ((rc = cfg_dim(h, cfg, "shared_intermediate_size", &sis)))
		return rc;
	if (cfg_num(cfg, "num_local_experts", &nle) && nle == 0 && sis > 0)
		n_ff = sis; /* dense Granite 4.0-H: the shared MLP's width */
	if ((rc = cfg_dim(h, cfg, "intermediate_size_mlp", &n_ff))) /* Llama 4's dense layers */
		return rc;
	if ((rc = map_mixers(h)))
		return rc;
	/* Gemma 4: global layers' own head size and K/V heads, per layer */
	int hd_swa = 0;
	bool layer_heads = !h->per_layer_kv &&
			   (cfg_get(cfg, "per_layer_config") || cfg_get(cfg, "global_head_dim"));
	uint32_t *kvl = layer_heads ? gguf_build_alloc(h->g, (size_t)h->n_layer * sizeof(uint32_t)) : NULL;
	if (layer_heads && !kvl)
		return FX_E_NOMEM;
	if (kvl && hf_gemma4_heads(cfg, h->n_layer, h->n_head_kv, &h->head_dim, &hd_swa, kvl)) {
		char k[128];
		snprintf(k, sizeof(k), "%s.attention.head_count_kv", h->arch);
		h->head_dim_v = h->head_dim;
		h->per_layer_kv = true;
		if (gguf_build_arr(h->g, k, GGUF_T_U32, kvl, (uint64_t)h->n_layer) ||
		    put_u32(h, "attention.key_length_swa", (uint32_t)hd_swa) ||
		    put_u32(h, "attention.value_length_swa", (uint32_t)hd_swa) ||
		    put_u32(h, "rope.dimension_count_swa", (uint32_t)hd_swa))
			return FX_E_NOMEM;
	}
	static const char *const g4[][2] = {
		{ "num_kv_shared_layers", "attention.shared_kv_layers" },
		{ "hidden_size_per_layer_input", "embedding_length_per_layer_input" },
	};
	for (size_t i = 0; i < sizeof(g4) / sizeof(g4[0]); i++) {
		int v = -1;
		if ((rc = cfg_dim(h, cfg, g4[i][0], &v)))
			return rc;
		if (v >= 0 && put_u32(h, g4[i][1], (uint32_t)v))
			return FX_E_NOMEM;
	}
	if (gguf_build_str(h->g, "general.architecture", h->arch) ||
	    gguf_build_str(h->g, "general.source", "huggingface") ||
	    put_u32(h, "context_length", (uint32_t)ci.n_ctx_train) ||
	    put_u32(h, "embedding_length", (uint32_t)n_embd) ||
	    put_u32(h, "block_count", (uint32_t)(h->n_layer + h->n_mtp)) ||
	    (h->n_mtp && put_u32(h, "nextn_predict_layers", (uint32_t)h->n_mtp)) ||
	    (!h->fam->ff_per_layer && put_u32(h, "feed_forward_length", (uint32_t)n_ff)) ||
	    put_u32(h, "attention.head_count", (uint32_t)h->n_head) ||
	    (!h->per_layer_kv && put_u32(h, "attention.head_count_kv", (uint32_t)h->n_head_kv)) ||
	    put_u32(h, "attention.key_length", (uint32_t)h->head_dim) ||
	    put_u32(h, "attention.value_length", (uint32_t)h->head_dim_v) ||
	    put_f32(h, "attention.layer_norm_rms_epsilon", (float)eps) ||
	    (cfg_num(cfg, "layer_norm_epsilon", &d) && /* llama.cpp's converter too */
	     put_f32(h, "attention.layer_norm_epsilon", (float)d)))
		return FX_E_NOMEM;
	if ((h->fam->ff_per_layer &&
	     (rc = hf_ssm_ff_per_layer(h->g, cfg, h->arch, h->n_layer, n_ff, h->dir, h->err))) ||
	    (rc = map_rope(h)) || (rc = map_window(h)))
		return rc;
	/* Optional scalars, llama.cpp's keys. */
	static const struct {
		const char *hf, *gguf;
		int op; /* 0 as is, 1: x^-0.5 */
	} scal[] = {
		{ "final_logit_softcapping", "final_logit_softcapping", 0 },
		{ "attn_logit_softcapping", "attn_logit_softcapping", 0 },
		{ "query_pre_attn_scalar", "attention.scale", 1 },
		{ "attention_multiplier", "attention.scale", 0 },
		{ "embedding_multiplier", "embedding_scale", 0 },
		{ "residual_multiplier", "residual_scale", 0 },
		{ "logits_scaling", "logit_scale", 0 },
		{ "swiglu_limit", "swiglu_limit", 0 },
	};
	for (size_t i = 0; i < sizeof(scal) / sizeof(scal[0]); i++) {
		if (!cfg_num(cfg, scal[i].hf, &d) ||
		    (h->fam->fold_mup && !strcmp(scal[i].hf, "embedding_multiplier")))
			continue;
		if (scal[i].op == 1 && d <= 0)
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: %s is %g", h->dir,
				       scal[i].hf, d);
		if (put_f32(h, scal[i].gguf, (float)(scal[i].op == 1 ? 1.0 / sqrt(d) : d)))
			return FX_E_NOMEM;
	}
	/* Mixture of experts (0 experts, Granite 4.0-H's dense sizes: none, the
	 * shared MLP is the layer's MLP). Llama 4: intermediate_size is the
	 * experts' (and the shared expert's) width, intermediate_size_mlp the
	 * dense layers' (written as feed_forward_length above). */
	double ffm, fe_l4 = 0;
	if (cfg_num(cfg, "intermediate_size_mlp", &ffm))
		cfg_num(cfg, "intermediate_size", &fe_l4);
	if ((cfg_num(cfg, "num_local_experts", &d) || cfg_num(cfg, "num_experts", &d) ||
	     cfg_num(cfg, "n_routed_experts", &d) || cfg_num(cfg, "moe_num_experts", &d)) && d > 0) {
		double used = 0, fe = fe_l4 > 0 ? fe_l4 : n_ff, fs = fe_l4, nsh = 0;
		if (!cfg_num(cfg, "num_experts_per_tok", &used) &&
		    !cfg_num(cfg, "moe_k", &used)) /* ERNIE 4.5 MoE */
			cfg_num(cfg, "top_k_experts", &used); /* Gemma 4 */
		cfg_num(cfg, "moe_intermediate_size", &fe);
		if (fs <= 0 && !cfg_num(cfg, "shared_expert_intermediate_size", &fs) &&
		    !cfg_num(cfg, "shared_intermediate_size", &fs)) /* Granite 4.0-H */
			cfg_num(cfg, "moe_shared_expert_intermediate_size", &fs); /* Nemotron-H */
		h->shexp_set = fs > 0;
		const cJSON *nt = cfg_get(cfg, "norm_topk_prob");
		bool norm = nt ? cJSON_IsTrue(nt) : h->fam->moe_norm;
		char k[128];
		snprintf(k, sizeof(k), "%s.expert_weights_norm", h->arch);
		cfg_num(cfg, "moe_num_shared_experts", &nsh);
		/* every value range-checked before a conversion (a negative
		 * width converted to uint32_t was UB: fuzz_hf) */
		if (d > 64 || used < 1 || used > d)
			return fx_fail(h->err, FX_E_UNSUPPORTED, "%s/config.json: %g experts with %g per "
				       "token (1..64 experts supported)", h->dir, d, used);
		if (!(fe > 0 && fe <= 1 << 24) || fs > 1 << 24 || nsh > 64)
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: expert width %g, shared "
				       "width %g or %g shared experts out of range", h->dir, fe, fs, nsh);
		h->n_expert = (int)d;
		if (put_u32(h, "expert_count", (uint32_t)h->n_expert) ||
		    put_u32(h, "expert_used_count", (uint32_t)used) ||
		    put_u32(h, "expert_feed_forward_length", (uint32_t)fe) ||
		    (fs > 0 && put_u32(h, "expert_shared_feed_forward_length", (uint32_t)fs)) ||
		    (nsh > 0 && put_u32(h, "expert_shared_count", (uint32_t)nsh)) ||
		    gguf_build_bool(h->g, k, norm))
			return FX_E_NOMEM;
	}
	/* Llama 4: attention temperature tuning of the NoPE layers (llama.cpp's
	 * attention.temperature_scale / temperature_length), and its
	 * weightless Q/K norm switched off (ferrox's key: llama.cpp decides by
	 * the expert count). */
	const cJSON *att = cfg_get(cfg, "attn_temperature_tuning"), *uqk = cfg_get(cfg, "use_qk_norm");
	double ats = 0.1, fls = 8192;
	if (att && cJSON_IsTrue(att)) {
		cfg_num(cfg, "attn_scale", &ats);
		cfg_num(cfg, "floor_scale", &fls);
		if (fls < 1 || fls > 1e9)
			return fx_fail(h->err, FX_E_FORMAT, "%s/config.json: floor_scale is %g", h->dir, fls);
		if (put_f32(h, "attention.temperature_scale", (float)ats) ||
		    put_u32(h, "attention.temperature_length", (uint32_t)fls))
			return FX_E_NOMEM;
	}
	if (uqk && cJSON_IsFalse(uqk) && gguf_build_bool(h->g, "ferrox.attention.qk_l2_norm", false))
		return FX_E_NOMEM;
	/* DeepSeek: latent ranks, routed-expert scale, groups, shared experts. */
	static const struct {
		const char *hf, *gguf;
	} ds[] = {
		{ "q_lora_rank", "attention.q_lora_rank" },
		{ "kv_lora_rank", "attention.kv_lora_rank" },
		{ "n_group", "expert_group_count" },
		{ "topk_group", "expert_group_used_count" },
	};
	for (size_t i = 0; i < sizeof(ds) / sizeof(ds[0]); i++) {
		int v = -1;
		if ((rc = cfg_dim(h, cfg, ds[i].hf, &v)))
			return rc;
		if (v >= 0 && put_u32(h, ds[i].gguf, (uint32_t)v))
			return FX_E_NOMEM;
	}
	if (cfg_num(cfg, "routed_scaling_factor", &d) && put_f32(h, "expert_weights_scale", (float)d))
		return FX_E_NOMEM;
	if (cfg_num(cfg, "num_nextn_predict_layers", &d) && d > 0 && d < 64)
		h->n_nextn = (int)d;
	double nsh, fe;
	if (!h->shexp_set && cfg_num(cfg, "n_shared_experts", &nsh) && nsh > 0 &&
	    cfg_num(cfg, "moe_intermediate_size", &fe) &&
	    put_u32(h, "expert_shared_feed_forward_length", (uint32_t)(nsh * fe)))
		return FX_E_NOMEM;
	/* SmolLM3: RoPE skipped on every no_rope_layer_interval-th layer;
	 * Granite 4.0-H: on every layer (position_embedding_type "nope"). */
	const cJSON *nr = cfg_get(cfg, "no_rope_layers"), *pet = cfg_get(cfg, "position_embedding_type");
	bool nope_all = pet && cJSON_IsString(pet) && !strcmp(pet->valuestring, "nope");
	if ((nr && cJSON_IsArray(nr)) || nope_all) {
		uint8_t *use = gguf_build_alloc(h->g, (size_t)h->n_layer);
		if (!use)
			return FX_E_NOMEM;
		for (int il = 0; il < h->n_layer; il++) {
			const cJSON *e = nope_all ? NULL : cJSON_GetArrayItem(nr, il);
			use[il] = !nope_all && (!e || !cJSON_IsNumber(e) || e->valuedouble != 0);
		}
		char k[128];
		snprintf(k, sizeof(k), "%s.rope.layers", h->arch);
		if (gguf_build_arr(h->g, k, GGUF_T_BOOL, use, (uint64_t)h->n_layer))
			return FX_E_NOMEM;
		/* llama.cpp's Granite switch for the same (granite-hybrid.cpp) */
		snprintf(k, sizeof(k), "%s.rope.scaling.finetuned", h->arch);
		if (nope_all && gguf_build_bool(h->g, k, false))
			return FX_E_NOMEM;
	}
	/* llama.cpp's keys some families require: the M-RoPE sections (Qwen
	 * 3.5; for text they reduce to plain rotation over n_rot dims), the
	 * MoE layout keys (io/hf_moe.c) */
	if (h->fam->rope_sections) {
		int32_t sec[4] = { 0, 0, 0, 0 };
		const cJSON *rp = rope_params(cfg, NULL), *ms = rp ? cfg_get(rp, "mrope_section") : NULL;
		double prf = 1.0;
		if (rp)
			cfg_num(rp, "partial_rotary_factor", &prf);
		int nrot = h->n_rot ? h->n_rot : (int)lround(h->head_dim * prf);
		for (int i = 0; ms && cJSON_IsArray(ms) && i < 4 && i < cJSON_GetArraySize(ms); i++) {
			const cJSON *e = cJSON_GetArrayItem(ms, i);
			/* in range before the conversion (the sections are written
			 * for llama.cpp; ferrox reads none) */
			sec[i] = e && cJSON_IsNumber(e) && fabs(e->valuedouble) < 1 << 20
				 ? (int32_t)e->valuedouble : 0;
		}
		if (!ms)
			sec[0] = nrot / 2;
		char k[128];
		snprintf(k, sizeof(k), "%s.rope.dimension_sections", h->arch);
		int32_t *arr = gguf_build_alloc(h->g, sizeof(sec));
		if (!arr)
			return FX_E_NOMEM;
		memcpy(arr, sec, sizeof(sec));
		if (gguf_build_arr(h->g, k, GGUF_T_I32, arr, 4))
			return FX_E_NOMEM;
	}
	/* leading dense layers before the MoE ones, llama.cpp's key (ferrox
	 * reads each layer's tensors) */
	double ld;
	if ((cfg_num(cfg, "num_dense_layers", &ld) || cfg_num(cfg, "first_k_dense_replace", &ld)) &&
	    ld > 0 && put_u32(h, "leading_dense_block_count", (uint32_t)ld))
		return FX_E_NOMEM;
	/* llama.cpp's other MoE layout keys (io/hf_moe.c), last: it writes
	 * only those not written above */
	return hf_moe_keys(h->g, h->arch, cfg, h->fam->gating_func);
}

/* ---- tensors ----------------------------------------------------------- */

/* GGUF name of HF tensor `name`, or NULL with *skip set for tensors that
 * carry nothing (rotary caches). */
static const char *gguf_name(struct hf *h, const char *name, char *buf, size_t n, bool *skip)
{
	*skip = false;
	for (size_t i = 0; i < sizeof(global_names) / sizeof(global_names[0]); i++)
		if (!strcmp(name, global_names[i].hf))
			return global_names[i].gguf;
	int il, off = 0;
	if ((sscanf(name, "model.layers.%d.%n", &il, &off) == 1 ||
	     sscanf(name, "backbone.layers.%d.%n", &il, &off) == 1) && off > 0 && il >= 0 &&
	    il < h->n_layer + h->n_mtp) {
		const char *rest = name + off;
		if (strstr(rest, "rotary_emb.inv_freq")) {
			*skip = true;
			return NULL;
		}
		for (size_t i = 0; i < sizeof(layer_names) / sizeof(layer_names[0]); i++) {
			if (strcmp(rest, layer_names[i].hf))
				continue;
			const char *g = layer_names[i].gguf;
			if (!g) {
				snprintf(buf, n, "blk.%d.%s.weight", il,
					 h->fam->post_attn_name ? h->fam->post_attn_name : "ffn_norm");
				return buf;
			}
			snprintf(buf, n, "blk.%d.%s", il, g);
			return buf;
		}
	}
	return NULL;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

/* Gemma: a norm weight w becomes the f32 vector 1 + w, as llama.cpp's
 * converter stores it. */
static const void *plus_one(struct hf *h, const struct st_tensor *t, int *type)
{
	size_t n = (size_t)t->ne[0];
	float *out = gguf_build_alloc(h->g, n * sizeof(float));
	if (!out)
		return NULL; /* out of memory */
	fx_type_get(t->type)->to_float(t->data, out, (int64_t)n);
	for (size_t i = 0; i < n; i++)
		out[i] += 1.0f;
	*type = FX_TYPE_F32;
	return out;
}

/* Rows of t, which permute_rows splits into n_heads halves: false when they
 * do not divide. */
static bool permutable(const struct st_tensor *t, int n_heads)
{
	int64_t rows = t->n_dims == 1 ? t->ne[0] : t->ne[1];
	return n_heads > 0 && rows % (2 * n_heads) == 0;
}

/* llama.cpp's LlamaModel.permute: within each head, rows (half, i) move to
 * (i, half), so adjacent-pair RoPE on the result equals rotate_half RoPE on
 * the original. Rows are whole, so any element type works. NULL: out of
 * memory (the shape is checked by permutable). */
static const void *permute_rows(struct hf *h, const struct st_tensor *t, int n_heads)
{
	int64_t rows = t->n_dims == 1 ? t->ne[0] : t->ne[1];
	size_t row_bytes = t->n_dims == 1 ? fx_row_size(t->type, 1) : fx_row_size(t->type, t->ne[0]);
	uint8_t *out = gguf_build_alloc(h->g, t->nbytes);
	if (!out)
		return NULL;
	int64_t hd = rows / n_heads, half = hd / 2;
	for (int64_t hh = 0; hh < n_heads; hh++)
		for (int64_t j = 0; j < 2; j++)
			for (int64_t i = 0; i < half; i++) {
				int64_t src = hh * hd + j * half + i, dst = hh * hd + i * 2 + j;
				memcpy(out + dst * row_bytes, (const uint8_t *)t->data + src * row_bytes,
				       row_bytes);
			}
	return out;
}

/* Copy per-expert tensor t (expert x of layer il) into its stack. */
static int stack_expert(struct hf *h, const struct st_tensor *t, int il, int kind, int x)
{
	struct stack *st = NULL;
	for (int i = 0; i < h->n_stacks; i++)
		if (h->stacks[i].layer == il && h->stacks[i].kind == kind)
			st = &h->stacks[i];
	if (x < 0 || x >= h->n_expert || t->n_dims != 2)
		return fx_fail(h->err, FX_E_FORMAT, "%s: expert tensor '%s' does not fit %d experts",
			       h->dir, t->name, h->n_expert);
	if (!st) {
		struct stack *ns = fx_realloc_array(h->stacks, (size_t)h->n_stacks + 1, sizeof(*ns));
		if (!ns)
			return FX_E_NOMEM;
		h->stacks = ns;
		st = &h->stacks[h->n_stacks++];
		*st = (struct stack){ .layer = il, .kind = kind, .type = t->type, .ne0 = t->ne[0],
				      .ne1 = t->ne[1], .bytes = t->nbytes };
		st->buf = gguf_build_alloc(h->g, t->nbytes * (size_t)h->n_expert);
		if (!st->buf)
			return FX_E_NOMEM;
	}
	if (st->type != t->type || st->ne0 != t->ne[0] || st->ne1 != t->ne[1] ||
	    (st->seen >> x & 1))
		return fx_fail(h->err, FX_E_FORMAT, "%s: expert tensor '%s' differs from its siblings "
			       "or repeats", h->dir, t->name);
	memcpy(st->buf + (size_t)x * st->bytes, t->data, st->bytes);
	st->seen |= 1ull << x;
	return FX_OK;
}

static int finish_stacks(struct hf *h)
{
	uint64_t all = h->n_expert >= 64 ? ~0ull : (1ull << h->n_expert) - 1;
	for (int i = 0; i < h->n_stacks; i++) {
		struct stack *st = &h->stacks[i];
		char name[96];
		snprintf(name, sizeof(name), "blk.%d.%s.weight", st->layer, stack_names[st->kind]);
		if (st->seen != all)
			return fx_fail(h->err, FX_E_FORMAT, "%s: %s lacks some of its %d experts", h->dir,
				       name, h->n_expert);
		int64_t ne[4] = { st->ne0, st->ne1, h->n_expert, 1 };
		if (gguf_build_tensor(h->g, name, st->type, 3, ne, st->buf))
			return FX_E_NOMEM;
	}
	return FX_OK;
}

/* gpt-oss keeps each layer's experts fused: gate_up_proj [E, n_embd, 2I]
 * (x @ W form) with gate and up interleaved on the last axis (Llama 4:
 * [gate | up] halves, Llama4TextExperts' chunk(2); hf_family
 * gate_up_halves), its bias
 * [E, 2I], down_proj [E, I, n_embd], its bias [E, n_embd]. Split, transpose
 * to rows of outputs and stack as llama.cpp's converter does. */
static int map_fused_experts(struct hf *h, const struct st_tensor *t, int il, const char *rest)
{
	bool gu = !strcmp(rest, "gate_up_proj"), gub = !strcmp(rest, "gate_up_proj_bias");
	bool dn = !strcmp(rest, "down_proj"), dnb = !strcmp(rest, "down_proj_bias");
	if (!gu && !gub && !dn && !dnb)
		return fx_fail(h->err, FX_E_UNSUPPORTED, "%s: tensor '%s' has no mapping", h->dir,
			       t->name);
	int64_t E = gu || dn ? t->ne[2] : t->ne[1];
	if (E != h->n_expert || (gu || dn ? t->n_dims != 3 : t->n_dims != 2) ||
	    ((gu || gub) && t->ne[0] % 2))
		return fx_fail(h->err, FX_E_FORMAT, "%s: '%s' does not have the fused-expert shape",
			       h->dir, t->name);
	size_t n = (size_t)(t->ne[0] * t->ne[1] * t->ne[2]);
	float *src = fx_malloc_array(n, sizeof(float));
	if (!src)
		return FX_E_NOMEM;
	fx_type_get(t->type)->to_float(t->data, src, (int64_t)n);
	int rc = FX_OK;
	char name[96];
	if (gu || gub) {
		int64_t I = t->ne[0] / 2, in = gu ? t->ne[1] : 1;
		for (int k = 0; k < 2 && !rc; k++) { /* k 0: gate (even, or the first half), 1: up */
			float *dst = gguf_build_alloc(h->g, (size_t)(E * I * in) * sizeof(float));
			if (!dst) {
				rc = FX_E_NOMEM;
				break;
			}
			for (int64_t e = 0; e < E; e++)
				for (int64_t o = 0; o < I; o++)
					for (int64_t i = 0; i < in; i++)
						dst[(e * I + o) * in + i] =
							src[(e * in + i) * 2 * I +
							    (h->fam->gate_up_halves ? k * I + o : 2 * o + k)];
			snprintf(name, sizeof(name), "blk.%d.%s.%s", il, k ? "ffn_up_exps" : "ffn_gate_exps",
				 gu ? "weight" : "bias");
			int64_t ne[4] = { in, I, E, 1 };
			if (!gu)
				ne[0] = I, ne[1] = E;
			rc = gguf_build_tensor(h->g, name, FX_TYPE_F32, gu ? 3 : 2, ne, dst);
		}
	} else {
		int64_t out = t->ne[0], in = dn ? t->ne[1] : 1;
		float *dst = gguf_build_alloc(h->g, n * sizeof(float));
		if (!dst) {
			rc = FX_E_NOMEM;
		} else {
			for (int64_t e = 0; e < E; e++)
				for (int64_t o = 0; o < out; o++)
					for (int64_t i = 0; i < in; i++)
						dst[(e * out + o) * in + i] = src[(e * in + i) * out + o];
			snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.%s", il, dn ? "weight" : "bias");
			int64_t ne[4] = { in, out, E, 1 };
			if (!dn)
				ne[0] = out, ne[1] = E;
			rc = gguf_build_tensor(h->g, name, FX_TYPE_F32, dn ? 3 : 2, ne, dst);
		}
	}
	fx_free(src);
	return rc;
}

/* Mamba-2's per-head vectors in llama.cpp's shapes: ssm_a = -exp(A_log) and
 * ssm_d as [n_head, 1] (ne {1, n_head}), ssm_norm as [n_group][d_inner /
 * n_group]; f32. */
static int map_ssm_vec(struct hf *h, const struct st_tensor *t, const char *name)
{
	int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
	float *v = gguf_build_alloc(h->g, (size_t)n * sizeof(float));
	if (!v)
		return FX_E_NOMEM;
	fx_type_get(t->type)->to_float(t->data, v, n);
	/* Mamba-2: [n_head, 1]; Gated DeltaNet: 1-D (llama.cpp's shapes) */
	int64_t ne[4] = { h->gdn ? n : 1, h->gdn ? 1 : n, 1, 1 };
	if (ends_with(name, ".ssm_a"))
		for (int64_t i = 0; i < n; i++)
			v[i] = -expf(v[i]);
	if (ends_with(name, ".ssm_norm.weight") && !h->gdn) {
		int g = h->ssm_groups > 0 ? h->ssm_groups : 1;
		if (n % g)
			return fx_fail(h->err, FX_E_FORMAT, "%s: '%s' has %lld values, not a multiple of "
				       "%d groups", h->dir, t->name, (long long)n, g);
		ne[0] = n / g, ne[1] = g;
	}
	return gguf_build_tensor(h->g, name, FX_TYPE_F32, h->gdn ? 1 : 2, ne, v);
}

/* Granite's fused [gate; up] projections: input_linear [2I, n_embd] (the
 * shared MLP) or [E, 2I, n_embd] (the experts), the first I rows of each
 * expert the gate (GraniteMoeHybridMLP / ParallelExperts chunk(2)): split
 * into llama.cpp's two tensors, copied per half. */
static int map_gate_up(struct hf *h, const struct st_tensor *t, int il, const char *gate,
		       const char *up)
{
	int64_t E = t->n_dims == 3 ? t->ne[2] : 1;
	if ((t->n_dims != 2 && t->n_dims != 3) || t->ne[1] % 2)
		return fx_fail(h->err, FX_E_FORMAT, "%s: '%s' is not a fused [gate; up] projection",
			       h->dir, t->name);
	int64_t half = t->ne[1] / 2;
	size_t row = fx_row_size(t->type, t->ne[0]), hb = (size_t)half * row;
	for (int k = 0; k < 2; k++) {
		uint8_t *dst = gguf_build_alloc(h->g, hb * (size_t)E);
		if (!dst)
			return FX_E_NOMEM;
		for (int64_t e = 0; e < E; e++)
			memcpy(dst + (size_t)e * hb, (const uint8_t *)t->data + ((size_t)e * 2 + k) * hb, hb);
		char name[96];
		snprintf(name, sizeof(name), "blk.%d.%s.weight", il, k ? up : gate);
		int64_t ne[4] = { t->ne[0], half, E, 1 };
		int rc = gguf_build_tensor(h->g, name, t->type, (uint32_t)t->n_dims, ne, dst);
		if (rc)
			return rc;
	}
	return FX_OK;
}

/* A multimodal checkpoint's tensor t: the text model's under the family's
 * text_prefix mapped as if under "model." (into *tt, name in buf), others
 * (the vision tower, MTP layers) skipped; returns whether to map it. */
static bool text_tensor(const struct hf *h, const struct st_tensor *t, struct st_tensor *tt,
			char *buf, size_t n)
{
	const char *pfx = h->fam->text_prefix;
	size_t pn = strlen(pfx);
	*tt = *t;
	if (!strncmp(t->name, pfx, pn)) {
		snprintf(buf, n, "model.%s", t->name + pn);
		tt->name = buf;
		return true;
	}
	return !strncmp(t->name, "lm_head.", 8);
}

static int map_tensor_named(struct hf *h, const struct st_tensor *t);

static int map_tensor(struct hf *h, const struct st_tensor *t)
{
	char name[256];
	struct st_tensor tt = *t;
	if (hf_mtp_rename(t->name, h->n_layer, name, sizeof(name))) {
		tt.name = name;
		return map_tensor_named(h, &tt);
	}
	if (!h->fam->text_prefix)
		return map_tensor_named(h, t);
	return text_tensor(h, t, &tt, name, sizeof(name)) ? map_tensor_named(h, &tt) : FX_OK;
}

static int map_tensor_named(struct hf *h, const struct st_tensor *t)
{
	char buf[160];
	bool skip;
	int il, off = 0, x, end = 0;
	if ((sscanf(t->name, "model.layers.%d.%n", &il, &off) == 1 ||
	     sscanf(t->name, "backbone.layers.%d.%n", &il, &off) == 1) && off > 0) {
		/* GLM-4.5's multi-token-prediction layers: not run (llama.cpp
		 * keeps them as extra blocks for speculative decoding) */
		if (il >= h->n_layer && il < h->n_layer + h->n_nextn)
			return FX_OK;
		for (size_t i = 0; i < sizeof(expert_names) / sizeof(expert_names[0]); i++) {
			end = 0;
			if (sscanf(t->name + off, expert_names[i].hf, &x, &end) == 1 && end > 0 &&
			    t->name[off + end] == 0)
				return stack_expert(h, t, il, expert_names[i].kind, x);
		}
		if (!strncmp(t->name + off, "mlp.experts.", 12))
			return map_fused_experts(h, t, il, t->name + off + 12);
		if (!strncmp(t->name + off, "feed_forward.experts.", 21)) /* Llama 4 */
			return map_fused_experts(h, t, il, t->name + off + 21);
	}
	if (off > 0 && (!strcmp(t->name + off, "linear_attn.in_proj_qkvz.weight") ||
			!strcmp(t->name + off, "linear_attn.in_proj_ba.weight")))
		return hf_gdn_split_fused(h->g, &h->gdn_sz, t, il,
					  t->name[off + strlen("linear_attn.in_proj_")] == 'q',
					  !h->fam->gdn_grouped, h->dir, h->err);
	if (off > 0 && !strcmp(t->name + off, "block_sparse_moe.input_linear.weight"))
		return map_gate_up(h, t, il, "ffn_gate_exps", "ffn_up_exps");
	if (off > 0 && !strcmp(t->name + off, "shared_mlp.input_linear.weight"))
		return h->n_expert ? map_gate_up(h, t, il, "ffn_gate_shexp", "ffn_up_shexp")
				   : map_gate_up(h, t, il, "ffn_gate", "ffn_up");
	const char *name = gguf_name(h, t->name, buf, sizeof(buf), &skip);
	if (skip)
		return FX_OK;
	if (name && !h->n_expert && ends_with(name, ".ffn_down_shexp.weight")) {
		/* a dense Granite 4.0-H: shared_mlp is the MLP */
		snprintf(buf, sizeof(buf), "blk.%d.ffn_down.weight", il);
		name = buf;
	}
	if (!name)
		return fx_fail(h->err, FX_E_UNSUPPORTED,
			       "%s: tensor '%s' has no mapping for model_type %s", h->dir, t->name,
			       h->fam->model_type);
	struct st_tensor tiled;
	int rt;
	if (h->gdn && !h->fam->gdn_grouped) { /* DeltaNet value heads in llama.cpp's tiled order */
		if ((rt = hf_gdn_tile(h->g, &h->gdn_sz, t, name, &tiled, h->dir, h->err)))
			return rt;
		t = &tiled;
	}
	const void *data = t->data;
	int type = t->type;
	/* (1 + w) norms, but not a DeltaNet's gated norm (plain w in HF) */
	if (h->fam->norm_plus_one && ends_with(name, "norm.weight") && !ends_with(name, "ssm_norm.weight")) {
		data = plus_one(h, t, &type);
	} else if (h->fam->permute_qk && (strstr(name, ".attn_q.") || strstr(name, ".attn_k."))) {
		int nh = strstr(name, ".attn_q.") ? h->n_head : h->n_head_kv;
		if (!permutable(t, nh))
			return fx_fail(h->err, FX_E_FORMAT, "%s: tensor '%s' has %lld rows, not a "
				       "multiple of 2 x %d heads", h->dir, t->name,
				       (long long)(t->n_dims == 1 ? t->ne[0] : t->ne[1]), nh);
		data = permute_rows(h, t, nh);
	}
	if (!data)
		return fx_fail(h->err, FX_E_NOMEM, "%s: out of memory converting tensor '%s'",
			       h->dir, t->name);
	int rc;
	if (h->fam->fold_mup && (rc = hf_mup_fold(h->cfg, h->dir, h->g, t, name, &data, &type, h->err)))
		return rc;
	if (ends_with(name, ".ssm_a") || ends_with(name, ".ssm_d") || ends_with(name, ".ssm_norm.weight"))
		return map_ssm_vec(h, t, name);
	if ((ends_with(name, "shortconv.conv.weight") || ends_with(name, "ssm_conv1d.weight")) &&
	    t->n_dims == 3 && t->ne[1] == 1) {
		/* nn.Conv1d's [channels, 1, taps]: llama.cpp keeps [channels][taps] */
		int64_t ne[4] = { t->ne[0], t->ne[2], 1, 1 };
		return gguf_build_tensor(h->g, name, type, 2, ne, data);
	}
	return gguf_build_tensor(h->g, name, type, (uint32_t)t->n_dims, t->ne, data);
}

static void release_st(void *p)
{
	st_set_close(p);
}

/* Python's json writes float('inf') as a bare Infinity (Mamba configs'
 * time_step_limit, saved by transformers 4), which is not JSON: outside
 * strings, [-]Infinity becomes [-]1e999 (strtod's infinity, cJSON's number
 * parser) padded with spaces, in place. */
static void infinity_as_number(char *s)
{
	bool in_str = false;
	for (char *p = s; *p; p++) {
		if (in_str) {
			if (*p == '\\' && p[1])
				p++;
			else if (*p == '"')
				in_str = false;
		} else if (*p == '"') {
			in_str = true;
		} else if (!strncmp(p, "Infinity", 8)) {
			memcpy(p, "1e999   ", 8);
			p += 7;
		}
	}
}

int hf_open(const char *dir, const struct hf_registry *reg, struct gguf_file **out,
	    struct fx_err *err)
{
	struct hf h = { .err = err, .dir = dir };
	char path[4096];
	int rc;
	*out = NULL;
	snprintf(path, sizeof(path), "%s/config.json", dir);
	char *text = NULL;
	if ((rc = read_text(path, 1 << 20, &text)) == FX_E_NOMEM)
		return fx_fail(err, rc, "%s: out of memory reading config.json", dir);
	if (rc)
		return fx_fail(err, rc, "%s: cannot read config.json (a Hugging Face model directory "
			       "holds config.json of at most 1 MiB and model.safetensors)", dir);
	infinity_as_number(text);
	rc = fx_json_parse(text, strlen(text), &h.cfg, NULL);
	fx_free(text);
	if (rc == FX_E_NOMEM) {
		rc = fx_fail(err, rc, "%s: out of memory parsing config.json", dir);
		goto out;
	}
	if (!h.cfg || !cJSON_IsObject(h.cfg)) {
		rc = fx_fail(err, FX_E_FORMAT, "%s: config.json is not a JSON object%s", dir,
			     h.cfg ? "" : " (it does not parse as JSON)");
		goto out;
	}
	const cJSON *mt = cfg_get(h.cfg, "model_type");
	if (!mt || !cJSON_IsString(mt)) {
		rc = fx_fail(err, FX_E_FORMAT, "%s/config.json: required key 'model_type' is missing", dir);
		goto out;
	}
	h.fam = reg->find(mt->valuestring, &h.arch);
	if (!h.fam) {
		char names[512];
		rc = fx_fail(err, FX_E_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)",
			     dir, mt->valuestring, reg->names(names, sizeof(names)));
		goto out;
	}
	/* a multimodal wrapper: the text model's own config */
	const cJSON *tc = h.fam->text_prefix ? cfg_get(h.cfg, "text_config") : NULL;
	if (tc && cJSON_IsObject(tc)) {
		cJSON *text_cfg = cJSON_DetachItemFromObjectCaseSensitive(h.cfg, "text_config");
		cJSON_Delete(h.cfg);
		h.cfg = text_cfg;
	}
	if (h.fam->moe_arch && hf_ssm_has_moe(h.cfg))
		h.arch = h.fam->moe_arch;
	else if (h.fam->moe_arch)
		hf_ssm_drop_moe_keys(h.cfg);
	if ((rc = gguf_build_new(&h.g)) != FX_OK) {
		rc = fx_fail(err, rc, "no memory");
		goto out;
	}
	if ((rc = st_set_open_dir(dir, &h.st, err)) != FX_OK)
		goto out;
	h.g->release = release_st;
	h.g->release_arg = h.st;
	h.n_mtp = hf_mtp_count(h.st);
	if ((rc = map_metadata(&h)) != FX_OK) {
		if (rc == FX_E_NOMEM)
			fx_fail(err, rc, "no memory");
		goto out;
	}
	if ((rc = map_generation_config(&h)) != FX_OK)
		goto out;
	if ((rc = hf_vocab_map(h.g, dir, h.cfg, err)) == FX_E_NOMEM)
		goto out;
	if (rc && (rc = gguf_build_str(h.g, HF_TOKENIZER_ERROR, err ? err->msg : "tokenizer.json: not mapped")) != FX_OK) {
		rc = fx_fail(err, rc, "no memory");
		goto out;
	}
	for (size_t f = 0; f < h.st->n_files; f++)
		for (size_t i = 0; i < h.st->files[f]->n_tensors; i++)
			if ((rc = map_tensor(&h, &h.st->files[f]->tensors[i])) != FX_OK) {
				if (rc == FX_E_NOMEM)
					fx_fail(err, rc, "no memory");
				goto out;
			}
	if ((rc = finish_stacks(&h)) != FX_OK) {
		if (rc == FX_E_NOMEM)
			fx_fail(err, rc, "no memory");
		goto out;
	}
	*out = h.g;
	h.g = NULL;
out:
	gguf_close(h.g);
	fx_free(h.stacks);
	cJSON_Delete(h.cfg);
	return rc;
}

int hf_open_any(const char *path, const struct hf_registry *reg, struct gguf_file **out,
		bool *is_dir, struct fx_err *err)
{
	struct stat st;
	bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if (is_dir)
		*is_dir = dir;
	if (dir)
		return hf_open(path, reg, out, err);
	int rc = gguf_open(path, out, err);
	/* one file of a Hugging Face directory: say to pass the directory */
	size_t n = strlen(path);
	if (rc == FX_E_FORMAT && n > 5 && (!strcmp(path + n - 5, ".json") ||
					   (n > 12 && !strcmp(path + n - 12, ".safetensors")) ||
					   (n > 6 && !strcmp(path + n - 6, ".model"))))
		return fx_fail(err, rc, "%s is not a GGUF file: for a Hugging Face checkpoint, pass "
			       "its directory (config.json, *.safetensors, tokenizer files)", path);
	return rc;
}
