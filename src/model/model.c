/* Model loading: GGUF metadata -> hparams, architecture row -> which
 * tensors to bind, every shape checked before use. Key and tensor names are
 * llama.cpp's (llama-arch.cpp), the names GGUF files carry. */
#include "model/model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <strings.h>

#include "core/alloc.h"
#include "io/gguf_write.h"
#include "io/hf.h"
#include "io/mapfile.h"
#include "kernels/kern.h"
#include "kernels/repack.h"
#include "model/bind.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

/* An integer hparam "{arch}.suffix"; *v keeps its default when absent and
 * not required. A per-layer array where a scalar is expected is refused. */
static int get_int(struct model_loader *ld, const char *suffix, int32_t *v, bool required)
{
	char k[128];
	int64_t x;
	model_key(ld, k, sizeof(k), suffix);
	const struct gguf_kv *kv = gguf_find(ld->m->g, k);
	if (!kv) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: required key %s is missing", k);
		return FX_OK;
	}
	if (kv->type == GGUF_T_ARRAY && kv->arr_type != GGUF_T_STRING && kv->arr_type != GGUF_T_ARRAY)
		return fx_fail(ld->err, FX_E_UNSUPPORTED,
			       "GGUF: %s is a per-layer array; ferrox supports one value for all layers", k);
	if (!gguf_get_i64(ld->m->g, k, &x))
		return gguf_type_error(ld->m->g, k, "uint32", ld->err);
	if (x < 0 || x > INT32_MAX)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is %lld, not a valid count", k,
			       (long long)x);
	*v = (int32_t)x;
	return FX_OK;
}

/* attention.head_count_kv: one value, or one per layer (hybrid models, as
 * llama.cpp writes them: 0 for a layer without attention, which
 * model_bind_weights gives a recurrent mixer; Gemma 4: global layers with
 * fewer K/V heads). *v becomes the largest count (the scratch's size;
 * each layer's is struct layer's n_head_kv); it keeps its default when the
 * key is absent. */
static int get_head_count_kv(struct model_loader *ld, int32_t *v)
{
	char k[128];
	const struct gguf_kv *kv = gguf_find(ld->m->g, model_key(ld, k, sizeof(k), "attention.head_count_kv"));
	if (!kv || kv->type != GGUF_T_ARRAY)
		return get_int(ld, "attention.head_count_kv", v, false);
	int32_t n_layer = ld->m->hp.n_layer, got = 0;
	if (!model_layer_arr_ok(&ld->m->hp, kv) || kv->arr_type == GGUF_T_STRING ||
	    kv->arr_type == GGUF_T_ARRAY || !kv->data)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s has %llu entries for %d layers", k,
			       (unsigned long long)kv->n, n_layer);
	for (int32_t il = 0; il < n_layer; il++) {
		double x = gguf_arr_num(kv, (uint64_t)il);
		if (x < 0 || x > FX_MAX_HEADS || x != (int32_t)x)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s[%d] is %g, not a K/V head count "
				       "of 0..%d", k, il, x, FX_MAX_HEADS);
		got = x > got ? (int32_t)x : got;
	}
	*v = got ? got : *v; /* no attention layer at all: the count is not used */
	return FX_OK;
}

/* feed_forward_length: one value, or one per layer (llama.cpp's nemotron_h:
 * 0 for a layer without an MLP). *v becomes the largest (the scratch's
 * size; model/bind.c binds each MLP at its layer's width). */
static int get_ff_length(struct model_loader *ld, int32_t *v)
{
	char k[128];
	const struct gguf_kv *kv = gguf_find(ld->m->g, model_key(ld, k, sizeof(k), "feed_forward_length"));
	if (!kv || kv->type != GGUF_T_ARRAY)
		return get_int(ld, "feed_forward_length", v, true);
	int32_t n_layer = ld->m->hp.n_layer;
	if (kv->n != (uint64_t)n_layer || kv->arr_type == GGUF_T_STRING ||
	    kv->arr_type == GGUF_T_ARRAY || !kv->data)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s has %llu entries for %d layers", k,
			       (unsigned long long)kv->n, n_layer);
	*v = 0;
	for (int32_t il = 0; il < n_layer; il++) {
		double x = gguf_arr_num(kv, (uint64_t)il);
		if (x < 0 || x > INT32_MAX || x != (int32_t)x)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s[%d] is %g, not a width", k, il, x);
		*v = x > *v ? (int32_t)x : *v;
	}
	return FX_OK;
}

static int get_float(struct model_loader *ld, const char *suffix, float *v)
{
	char k[128];
	model_key(ld, k, sizeof(k), suffix);
	if (!gguf_find(ld->m->g, k))
		return FX_OK;
	if (!gguf_get_f32(ld->m->g, k, v))
		return gguf_type_error(ld->m->g, k, "float32", ld->err);
	if (!isfinite(*v))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is %g, not a finite float", k, *v);
	return FX_OK;
}

/* A bool key (full name); *v keeps its default when absent. */
static int get_bool(struct model_loader *ld, const char *k, bool *v)
{
	if (gguf_find(ld->m->g, k) && !gguf_get_bool(ld->m->g, k, v))
		return gguf_type_error(ld->m->g, k, "bool", ld->err);
	return FX_OK;
}

static bool str_is(const struct gguf_str *s, const char *c)
{
	return s->n == strlen(c) && !memcmp(s->p, c, s->n);
}

/* {arch}.rope.scaling.*: linear (Chen et al. 2023), llama3, yarn. */
static int read_rope_scaling(struct model_loader *ld)
{
	struct hparams *hp = &ld->m->hp;
	struct rope_scaling *sc = &hp->rope_sc;
	char k[128];
	struct gguf_str st;
	int rc;
	*sc = (struct rope_scaling){ .type = ROPE_SCALING_NONE, .factor = 1, .low_freq = 1,
				     .high_freq = 4, .beta_fast = 32, .beta_slow = 1,
				     .yarn_truncate = true, .orig_ctx = hp->n_ctx_train };
	hp->rope_mscale = 1.0f;
	model_key(ld, k, sizeof(k), "rope.scaling.type");
	if (!gguf_find(ld->m->g, k))
		return FX_OK;
	if (!gguf_get_str(ld->m->g, k, &st))
		return gguf_type_error(ld->m->g, k, "string", ld->err);
	if (str_is(&st, "none"))
		return FX_OK;
	if (str_is(&st, "linear"))
		sc->type = ROPE_SCALING_LINEAR;
	else if (str_is(&st, "llama3"))
		sc->type = ROPE_SCALING_LLAMA3;
	else if (str_is(&st, "yarn"))
		sc->type = ROPE_SCALING_YARN;
	else
		return fx_fail(ld->err, FX_E_UNSUPPORTED,
			       "RoPE scaling '%.*s' is not supported (linear, llama3, yarn are)",
			       (int)st.n, st.p);
	bool trunc = true;
	if ((rc = get_bool(ld, "ferrox.rope.yarn_truncate", &trunc)))
		return rc;
	sc->yarn_truncate = trunc;
	if ((rc = get_float(ld, "rope.scaling.factor", &sc->factor)) ||
	    (rc = get_float(ld, "rope.scaling.low_freq_factor", &sc->low_freq)) ||
	    (rc = get_float(ld, "rope.scaling.high_freq_factor", &sc->high_freq)) ||
	    (rc = get_float(ld, "rope.scaling.yarn_beta_fast", &sc->beta_fast)) ||
	    (rc = get_float(ld, "rope.scaling.yarn_beta_slow", &sc->beta_slow)) ||
	    (rc = get_float(ld, "rope.scaling.attn_factor", &hp->rope_mscale)) ||
	    (rc = get_int(ld, "rope.scaling.original_context_length", &sc->orig_ctx, false)))
		return rc;
	if (sc->factor <= 0 || sc->orig_ctx <= 0 || sc->high_freq <= sc->low_freq)
		return fx_fail(ld->err, FX_E_FORMAT, "bad RoPE scaling parameters (factor %g)",
			       sc->factor);
	return FX_OK;
}

/* The routing parameters agree with each other, so routing always finds
 * n_expert_used distinct experts (ffn.c's top_k gives -1 when fewer are
 * allowed, an out-of-bounds read) and its fixed-size buffers (1024 experts,
 * 64 used) hold them. Group routing (DeepSeek-V3) keeps n_group_used of
 * n_group equal groups: n_expert / n_group experts each. */
static int check_moe(struct model_loader *ld)
{
	const struct hparams *hp = &ld->m->hp;
	const char *a = ld->arch;
	if (hp->n_expert > 1024)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_count %d is over ferrox's 1024",
			       a, hp->n_expert);
	if (hp->n_expert_used > hp->n_expert || hp->n_expert_used > 64 ||
	    (hp->n_expert && hp->n_expert_used <= 0))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_used_count %d must be 1..%d "
			       "(%s.expert_count %d%s)", a, hp->n_expert_used,
			       hp->n_expert < 64 ? hp->n_expert : 64, a, hp->n_expert,
			       hp->n_expert > 64 ? "; ferrox routes at most 64" : "");
	if (hp->n_group < 1 || (hp->n_expert && hp->n_expert % hp->n_group))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_group_count %d does not divide "
			       "%s.expert_count %d", a, hp->n_group, a, hp->n_expert);
	if (hp->n_group_used < 1 || hp->n_group_used > hp->n_group)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_group_used_count %d must be "
			       "1..%s.expert_group_count %d", a, hp->n_group_used, a, hp->n_group);
	int64_t kept = (int64_t)hp->n_group_used * (hp->n_expert / hp->n_group);
	if (hp->n_expert && hp->n_group > 1 && kept < hp->n_expert_used)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_group_used_count %d of %d groups "
			       "keeps %lld experts, fewer than %s.expert_used_count %d", a,
			       hp->n_group_used, hp->n_group, (long long)kept, a, hp->n_expert_used);
	return FX_OK;
}

static int read_hparams(struct model_loader *ld)
{
	struct hparams *hp = &ld->m->hp;
	int rc;
	*hp = (struct hparams){ .rope_base = 10000.0f, .eps = 1e-5f, .embd_mul = 1.0f,
				.residual_mul = 1.0f, .logit_div = 1.0f };
	if ((rc = get_int(ld, "context_length", &hp->n_ctx_train, true)) ||
	    (rc = get_int(ld, "embedding_length", &hp->n_embd, true)) ||
	    (rc = get_int(ld, "block_count", &hp->n_layer, true)) ||
	    (rc = get_ff_length(ld, &hp->n_ff)) ||
	    (rc = get_int(ld, "attention.head_count", &hp->n_head, true)))
		return rc;
	/* the multi-token-prediction blocks come after the decoder layers */
	if ((rc = get_int(ld, "nextn_predict_layers", &hp->n_nextn, false)))
		return rc;
	if (hp->n_nextn > 16 || hp->n_nextn >= hp->n_layer)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.nextn_predict_layers is %d of %d blocks "
			       "(at most 16, and fewer than block_count)", ld->arch, hp->n_nextn, hp->n_layer);
	hp->n_layer -= hp->n_nextn;
	/* n_head and n_ff may be 0 in models without attention or MLP (Mamba-2);
	 * the layers that have them check their shapes when bound. */
	if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head < 0 || hp->n_ff < 0 ||
	    hp->n_layer > 4096 || hp->n_head > FX_MAX_HEADS)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: impossible sizes (n_embd %d, n_layer %d, n_head %d, n_ff %d)",
			       hp->n_embd, hp->n_layer, hp->n_head, hp->n_ff);
	hp->n_head_kv = hp->n_head;
	hp->head_dim = hp->n_head ? hp->n_embd / hp->n_head : 0;
	if ((rc = get_head_count_kv(ld, &hp->n_head_kv)) ||
	    (rc = get_int(ld, "attention.key_length", &hp->head_dim, false)) ||
	    (rc = get_int(ld, "shortconv.l_cache", &hp->conv_kernel, false)) ||
	    (rc = get_int(ld, "ssm.conv_kernel", &hp->conv_kernel, false)) ||
	    (rc = get_int(ld, "ssm.inner_size", &hp->ssm_inner, false)) ||
	    (rc = get_int(ld, "ssm.state_size", &hp->ssm_state, false)) ||
	    (rc = get_int(ld, "ssm.time_step_rank", &hp->n_ssm_head, false)) ||
	    (rc = get_int(ld, "ssm.group_count", &hp->n_ssm_group, false)))
		return rc;
	hp->head_dim_v = hp->head_dim;
	hp->n_rot = hp->head_dim;
	if ((rc = get_int(ld, "attention.value_length", &hp->head_dim_v, false)) ||
	    (rc = get_int(ld, "rope.dimension_count", &hp->n_rot, false)) ||
	    (rc = get_int(ld, "attention.sliding_window", &hp->n_swa, false)))
		return rc;
	hp->head_dim_swa = hp->head_dim;
	hp->head_dim_v_swa = hp->head_dim_v;
	hp->n_rot_swa = hp->n_rot;
	if ((rc = get_int(ld, "attention.key_length_swa", &hp->head_dim_swa, false)) ||
	    (rc = get_int(ld, "attention.value_length_swa", &hp->head_dim_v_swa, false)) ||
	    (rc = get_int(ld, "rope.dimension_count_swa", &hp->n_rot_swa, false)) ||
	    (rc = get_int(ld, "attention.shared_kv_layers", &hp->n_kv_shared, false)) ||
	    (rc = get_int(ld, "embedding_length_per_layer_input", &hp->n_embd_ple, false)))
		return rc;
	if (hp->n_head &&
	    (hp->head_dim_swa <= 0 || hp->head_dim_v_swa <= 0 || hp->n_rot_swa <= 0 ||
	     hp->n_rot_swa > hp->head_dim_swa || hp->n_rot_swa % 2 || hp->n_kv_shared >= hp->n_layer ||
	     hp->n_embd_ple > (1 << 16)))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: bad sliding-layer or shared attention shape "
			       "(key_length_swa %d, rope dims %d, shared_kv_layers %d of %d, "
			       "embedding_length_per_layer_input %d)", hp->head_dim_swa, hp->n_rot_swa,
			       hp->n_kv_shared, hp->n_layer, hp->n_embd_ple);
	if (hp->n_head &&
	    (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->head_dim <= 0 ||
	     hp->head_dim_v <= 0 || hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2))
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: bad attention shape (n_head %d, n_head_kv %d, head_dim %d, n_rot %d)",
			       hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_rot);
	/* llama.cpp's nemotron_h files give only the LayerNorm key (its loader
	 * falls back to it, as here) */
	if ((rc = get_float(ld, "attention.layer_norm_epsilon", &hp->eps)) ||
	    (rc = get_float(ld, "attention.layer_norm_rms_epsilon", &hp->eps)) ||
	    (rc = get_float(ld, "rope.freq_base", &hp->rope_base)) ||
	    (rc = get_float(ld, "final_logit_softcapping", &hp->final_softcap)) ||
	    (rc = get_float(ld, "attn_logit_softcapping", &hp->attn_softcap)))
		return rc;
	if ((rc = get_int(ld, "expert_count", &hp->n_expert, false)) ||
	    (rc = get_int(ld, "expert_used_count", &hp->n_expert_used, false)))
		return rc;
	hp->n_ff_exp = hp->n_ff;
	hp->expert_scale = 1.0f;
	hp->n_group = hp->n_group_used = 1;
	if ((rc = get_float(ld, "expert_weights_scale", &hp->expert_scale)) ||
	    (rc = get_int(ld, "expert_group_count", &hp->n_group, false)) ||
	    (rc = get_int(ld, "expert_group_used_count", &hp->n_group_used, false)) ||
	    (rc = get_int(ld, "attention.q_lora_rank", &hp->q_lora, false)) ||
	    (rc = get_int(ld, "attention.kv_lora_rank", &hp->kv_lora, false)))
		return rc;
	hp->swiglu_limit = 7.0f;
	if ((rc = get_float(ld, "swiglu_limit", &hp->swiglu_limit)))
		return rc;
	hp->expert_norm = ld->m->arch->moe_norm;
	char kb[128];
	if ((rc = get_bool(ld, model_key(ld, kb, sizeof(kb), "expert_weights_norm"), &hp->expert_norm)))
		return rc;
	int32_t n_shared = 0;
	if ((rc = get_int(ld, "expert_feed_forward_length", &hp->n_ff_exp, false)) ||
	    (rc = get_int(ld, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false)) ||
	    (rc = get_int(ld, "expert_shared_count", &n_shared, false)))
		return rc;
	/* llama.cpp gives ERNIE 4.5 MoE's shared experts as a count of
	 * expert-wide MLPs, fused into one (Ernie4_5_MoeMLP) */
	if (!hp->n_ff_shexp && n_shared > 0) {
		if (n_shared > 1024)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.expert_shared_count %d is over 1024",
				       ld->arch, n_shared);
		hp->n_ff_shexp = n_shared * hp->n_ff_exp;
	}
	if ((rc = check_moe(ld)))
		return rc;
	hp->attn_scale = hp->head_dim ? 1.0f / sqrtf((float)hp->head_dim) : 1.0f;
	if (ld->m->arch->attn_scale > 0)
		hp->attn_scale = ld->m->arch->attn_scale;
	if ((rc = get_float(ld, "attention.scale", &hp->attn_scale)))
		return rc;
	hp->rope_base_swa = ld->m->arch->rope_base_swa > 0 ? ld->m->arch->rope_base_swa : hp->rope_base;
	hp->has_rope_swa = ld->m->arch->rope_base_swa > 0 ||
			   gguf_find(ld->m->g, model_key(ld, kb, sizeof(kb), "rope.freq_base_swa"));
	if ((rc = get_float(ld, "rope.freq_base_swa", &hp->rope_base_swa)) ||
	    (rc = get_float(ld, "embedding_scale", &hp->embd_mul)) ||
	    (rc = get_float(ld, "residual_scale", &hp->residual_mul)) ||
	    (rc = get_float(ld, "logit_scale", &hp->logit_div)))
		return rc;
	if (hp->logit_div == 0)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: logit_scale is 0");
	int32_t temp_len = 1;
	hp->qk_l2 = ld->m->arch->qk_norm == QK_NORM_L2;
	if ((rc = get_float(ld, "attention.temperature_scale", &hp->attn_temp_scale)) ||
	    (rc = get_int(ld, "attention.temperature_length", &temp_len, false)) ||
	    (rc = get_bool(ld, "ferrox.attention.qk_l2_norm", &hp->qk_l2)))
		return rc;
	if (temp_len < 1)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s.attention.temperature_length is 0", ld->arch);
	hp->attn_temp_floor = (float)temp_len;
	hp->qk_l2 = hp->qk_l2 && ld->m->arch->qk_norm == QK_NORM_L2;
	return read_rope_scaling(ld);
}

int fx_convert(const char *src, const char *dst, const char *type_name, const char *vocab_from,
	       struct fx_err *err)
{
	return gguf_convert(src, &arch_hf, dst, type_name, vocab_from, err);
}

struct fx_model_params fx_model_default_params(void)
{
	return (struct fx_model_params){ .size = sizeof(struct fx_model_params), .repack = true };
}

/* The dense matrices a forward pass reads whole every step, which
 * place_weights moves and repack_weights repacks: each layer's and the lm
 * head (with tok_embd's data when the head is tied). MoE
 * experts are not among them: a step reads only the routed ones, and they
 * stay in the mapping, loaded on first use and reclaimable. */
static void each_step_matrix(struct fx_model *m, void (*f)(struct fx_model *, struct wmat *, void *),
			     void *arg)
{
	f(m, &m->output, arg);
	for (int il = 0; il < m->hp.n_layer; il++) {
		const struct wmat *ws[LAYER_MATS];
		for (int i = 0; i < layer_mats(&m->layers[il], ws); i++)
			f(m, (struct wmat *)ws[i], arg);
	}
}

/* fx_model_params.progress across the load's phases: a phase reports its
 * own fraction, mapped into [lo, hi] of the whole. */
struct load_progress {
	bool (*fn)(float, void *);
	void *arg;
	float lo, hi;
	bool cancelled;
};

static bool load_report(struct load_progress *lp, double frac)
{
	if (lp && lp->fn && !lp->cancelled && !lp->fn(lp->lo + (lp->hi - lp->lo) * (float)frac, lp->arg))
		lp->cancelled = true;
	return !(lp && lp->cancelled);
}

static bool read_progress(double frac, void *arg)
{
	return load_report(arg, frac);
}

/* Where place_weights is: the arena (NULL while sizing), its fill and the
 * total (progress). */
struct placing {
	uint8_t *arena;
	size_t bytes, total;
	struct load_progress *lp;
};

/* Whether w lies wholly in a mapping gguf_open made (not a caller's
 * buffer, nor an HF checkpoint's built view, whose map is NULL). */
static bool in_mapping(const struct fx_model *m, const struct wmat *w)
{
	const struct gguf_file *g = m->g;
	uintptr_t d = (uintptr_t)w->data, b = (uintptr_t)(g ? g->map : NULL);
	size_t wb = (size_t)w->n_out * w->row_bytes;
	return d && g && g->map && g->owns_map && d >= b && wb <= g->map_size &&
	       d - b <= g->map_size - wb;
}

static void place_one(struct fx_model *m, struct wmat *w, void *arg)
{
	struct placing *pl = arg;
	if (!in_mapping(m, w))
		return;
	const uint8_t *src = w->data;
	size_t wb = (size_t)w->n_out * w->row_bytes, off = (size_t)((uintptr_t)src - (uintptr_t)m->g->map);
	if (pl->arena) {
		uint8_t *dst = pl->arena + pl->bytes;
		/* 2 MiB at a time, each piece's file pages given back as soon
		 * as it is copied, so the resident size never holds two copies
		 * (the pages a piece shares with the next are released with
		 * the data section, in place_weights). */
		for (size_t a = 0; a < wb; a += (size_t)2 << 20) {
			size_t n = wb - a < ((size_t)2 << 20) ? wb - a : ((size_t)2 << 20);
			memcpy(dst + a, src + a, n);
			io_map_release(m->g->map, off + a, n);
			/* a mapped file is read here, page by page */
			load_report(pl->lp, (double)(pl->bytes + a + n) / (double)pl->total);
		}
		if (m->tok_embd.data == w->data)
			m->tok_embd.data = dst;
		w->data = dst;
	}
	pl->bytes += (wb + 63) & ~(size_t)63;
}

/* The dense matrices a step reads, copied out of a GGUF file's mapping
 * into one anonymous allocation (fx_malloc_lines: transparent huge pages
 * where the system allows). A step streams all of them: on 4 KiB file
 * pages each page costs a TLB miss and stops the hardware prefetcher at its
 * edge (measured: a SmolLM2 Q4_1 one-sequence decode step ~12% faster,
 * eight sequences ~3%). The file's pages are released as they are copied,
 * so the resident size stays one copy of the weights. Nothing is ever
 * written into a GGUF mapping (bind_* only point into it, bind_vec copies),
 * so a released page that is read again (an untied tok_embd row, an
 * expert) comes back from the file unchanged. Matrices outside the mapping
 * (quantized on load, HF checkpoints) stay where they are; without memory
 * for the copy the weights stay in the mapping. */
static void place_weights(struct fx_model *m, struct load_progress *lp)
{
	struct placing pl = { 0 };
	each_step_matrix(m, place_one, &pl);
	if (!pl.bytes || !(m->weights = fx_malloc_lines(pl.bytes, 1)))
		return;
	pl = (struct placing){ .arena = m->weights, .total = pl.bytes, .lp = lp };
	each_step_matrix(m, place_one, &pl);
	io_map_release(m->g->map, m->g->data_offset, m->g->map_size - m->g->data_offset);
}

/* Where repack_weights is: the scratch for one x8 group (NULL while
 * sizing it) and its size. */
struct repacking {
	struct kern_set ks; /* the set a context will use (the best) */
	void *tmp;
	size_t tmp_bytes;
	int n_mats, n_done;  /* matrices to repack (sizing pass), done: progress */
	struct load_progress *lp;
};

static void repack_one(struct fx_model *m, struct wmat *w, void *arg)
{
	struct repacking *rp = arg;
	if (!w->data || w->x8 || w->n_out % 8 || !rp->ks.gemm_x8[w->type])
		return;
	if (!rp->tmp) {
		rp->tmp_bytes = 8 * w->row_bytes > rp->tmp_bytes ? 8 * w->row_bytes : rp->tmp_bytes;
		rp->n_mats++;
		return;
	}
	for (int64_t r = 0; r < w->n_out; r += 8)
		kern_x8_pack(w->type, w->n_in, (uint8_t *)w->data + (size_t)r * w->row_bytes, rp->tmp);
	load_report(rp->lp, (double)++rp->n_done / (double)rp->n_mats);
	w->x8 = true;
	m->repacked = true;
	if (w->data == m->tok_embd.data)
		m->tok_embd.x8 = true;
}

/* Every dense matrix the best kernel set has an x8 kernel for, rewritten
 * in place into x8 groups (kernels/repack.h): in place_weights' copy, or
 * (HF checkpoints, or no memory for the copy) in the mapping, which is
 * private and writable (io_map): a repacked page becomes the process's own
 * copy and the file is untouched. MoE experts stay plain; a tied lm head is
 * repacked with the embeddings (embed reads their rows through
 * kern_x8_unpack_row). */
static int repack_weights(struct fx_model *m, struct load_progress *lp, struct fx_err *err)
{
	struct repacking rp = { .lp = lp };
	kern_set_init(&rp.ks, kern_isa_best());
	each_step_matrix(m, repack_one, &rp);
	if (!rp.tmp_bytes)
		return FX_OK;
	if (!(rp.tmp = fx_calloc(1, rp.tmp_bytes)))
		return fx_fail(err, FX_E_NOMEM, "no memory to repack the weights");
	each_step_matrix(m, repack_one, &rp);
	fx_free(rp.tmp);
	return FX_OK;
}

int fx_model_load(const char *path, const struct fx_model_params *p, struct fx_model **out,
		  struct fx_err *err)
{
	struct fx_model_params dp = fx_model_default_params();
	struct model_loader ld = { .err = err };
	struct gguf_str arch;
	int rc;
	if (!path || !out)
		return fx_fail(err, FX_E_INVALID, "fx_model_load: path and out are required");
	*out = NULL;
	if (p) {
		/* an older caller's smaller struct keeps the defaults of the
		 * fields it does not have (no_mmap, progress, ...) */
		if (p->size < sizeof(p->size) || p->size > sizeof(dp))
			return fx_fail(err, FX_E_INVALID, "fx_model_load: params size is %zu, want %zu..%zu "
				       "(start from fx_model_default_params)", p->size, sizeof(p->size), sizeof(dp));
		memcpy(&dp, p, p->size);
		dp.size = sizeof(dp);
	}
	p = &dp;
	struct fx_model *m = fx_calloc(1, sizeof(*m));
	if (!m)
		return fx_fail(err, FX_E_NOMEM, "no memory");
	ld.m = m;
	ld.quant = -1;
	m->vocab_only = p->vocab_only;
	if (p->quant && p->quant[0]) {
		static const int allowed[] = { FX_TYPE_F16, FX_TYPE_BF16, FX_TYPE_Q8_0, FX_TYPE_Q4_0,
					       FX_TYPE_Q4_1, FX_TYPE_Q5_0, FX_TYPE_Q5_1, FX_TYPE_Q2_K,
					       FX_TYPE_Q3_K, FX_TYPE_Q4_K, FX_TYPE_Q5_K, FX_TYPE_Q6_K };
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			if (!strcasecmp(p->quant, fx_type_get(allowed[i])->name) &&
			    fx_type_get(allowed[i])->from_float)
				ld.quant = allowed[i];
		if (ld.quant < 0) {
			fx_free(m);
			return fx_fail(err, FX_E_INVALID, "--quant %s: not a type ferrox can quantize to "
				       "(f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, "
				       "q6_K)", p->quant);
		}
		m->requantized = true;
	}
	bool hf;
	struct stat st;
	if (p->vocab_only && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		/* A tokenizer folder needs no config.json nor weights. */
		if ((rc = vocab_load_hf(path, &m->vocab, err)) ||
		    (rc = model_chat_template_load(m, path, true, err)))
			goto fail_path;
		if (!m->vocab) {
			rc = fx_fail(err, FX_E_IO, "%s: no tokenizer.json (nor vocab.json + merges.txt, nor tokenizer.model) in this directory", path);
			goto fail;
		}
		goto done;
	}
	/* Progress: reading or moving the matrices (where a mapped file is
	 * read), then repacking them. */
	struct load_progress lp = { .fn = p->progress, .arg = p->progress_arg, .hi = p->repack ? 0.9f : 1.0f };
	hf = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	rc = p->no_mmap && !hf && !p->vocab_only ? gguf_open_read(path, read_progress, &lp, &m->g, err)
						 : hf_open_any(path, &arch_hf, &m->g, &hf, err);
	if (rc)
		goto fail;
	if (gguf_find(m->g, "general.architecture") &&
	    !gguf_get_str(m->g, "general.architecture", &arch)) {
		rc = gguf_type_error(m->g, "general.architecture", "string", err);
		goto fail_path;
	}
	if (!gguf_get_str(m->g, "general.architecture", &arch)) {
		/* Vocabulary-only files (llama.cpp's ggml-vocab-*.gguf) may lack it. */
		if (!p->vocab_only) {
			rc = fx_fail(err, FX_E_FORMAT, "%s: general.architecture is missing", path);
			goto fail;
		}
		arch = (struct gguf_str){ .p = "", .n = 0 };
	}
	snprintf(ld.arch, sizeof(ld.arch), "%.*s", (int)(arch.n < 63 ? arch.n : 63), arch.p);
	m->arch = arch_find(arch.p, arch.n);
	if (!m->arch && !p->vocab_only) {
		char names[256];
		rc = fx_fail(err, FX_E_UNSUPPORTED,
			     "%s: architecture '%s' is not supported (supported: %s)", path,
			     ld.arch, arch_names(names, sizeof(names)));
		goto fail;
	}
	if ((rc = model_chat_template_load(m, path, hf, err)))
		goto fail_path;
	if ((rc = model_sampling_load(m, err)))
		goto fail_path;
	/* HF directories keep their tokenizer in tokenizer.json (older ones in
	 * vocab.json + merges.txt, hf_legacy.c, or tokenizer.model, hf_spm.c);
	 * one without
	 * it runs from token ids only (vocab NULL), as does a GGUF without
	 * tokenizer keys (ferrox convert of such a directory). */
	if (hf && (rc = vocab_load_hf(path, &m->vocab, err)))
		goto fail_path;
	if (!hf && (p->vocab_only || gguf_find(m->g, "tokenizer.ggml.model")) &&
	    (rc = vocab_load(m->g, &m->vocab, err)))
		goto fail_path;
	if (p->vocab_only) {
		gguf_release_meta(m->g);
		goto done;
	}
	rc = read_hparams(&ld);
	if (!rc)
		rc = model_bind_weights(&ld);
	if (rc)
		goto fail_path;
	/* Everything the model reads from the metadata is copied or bound by
	 * now: its pages leave the RSS before repacking makes the weights
	 * resident (peak RSS = weights + KV + scratch, issue 5). */
	gguf_release_meta(m->g);
	if (p->repack) {
		/* memory read in is where place_weights would move it to */
		if (!m->g->read_in)
			place_weights(m, &lp);
		lp.lo = lp.hi;
		lp.hi = 1.0f;
		if ((rc = repack_weights(m, &lp, err)))
			goto fail_path;
	}
	lp.lo = lp.hi = 1.0f; /* the last report is exactly 1 */
	if (!load_report(&lp, 1.0)) {
		rc = fx_fail(err, FX_E_IO, "loading cancelled");
		goto fail_path;
	}
	/* The KV cache defaults to llama.cpp's f16 for GGUF files and to
	 * transformers' f32 for HF checkpoints. */
	m->hp.kv_type = hf ? FX_KV_F32 : FX_KV_F16;
done:
	*out = m;
	return FX_OK;
fail_path:
	fx_err_prefix(err, path);
fail:
	fx_model_free(m);
	return rc;
}

/* fx_model_lock's walk: the first errno, and the bytes asked for. */
struct locking {
	int errnum;
	size_t bytes;
};

static void lock_one(struct fx_model *m, struct wmat *w, void *arg)
{
	struct locking *lk = arg;
	size_t b = w->data ? (size_t)w->n_out * w->row_bytes : 0;
	(void)m;
	if (!b || lk->errnum)
		return;
	lk->bytes += b;
	if (mlock(w->data, b))
		lk->errnum = errno;
}

int fx_model_lock(struct fx_model *m, struct fx_err *err)
{
	struct locking lk = { 0 };
	if (!m || m->vocab_only)
		return fx_fail(err, FX_E_INVALID, "fx_model_lock: a model with weights is required");
	each_step_matrix(m, lock_one, &lk);
	if (m->tok_embd.data != m->output.data)
		lock_one(m, &m->tok_embd, &lk);
	for (int il = 0; il < m->hp.n_layer; il++)
		for (int x = 0; m->layers[il].exp && x < 3 * m->hp.n_expert; x++)
			lock_one(m, &m->layers[il].exp[x], &lk);
	if (lk.errnum)
		return fx_fail(err, FX_E_IO, "mlock of the model's %.1f MiB failed (%s)%s", (double)lk.bytes / 1048576.0,
			       strerror(lk.errnum),
			       lk.errnum == ENOMEM || lk.errnum == EPERM || lk.errnum == EAGAIN
				       ? ": raise the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK)"
				       : "");
	return FX_OK;
}

void fx_model_free(struct fx_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_owned; i++)
		fx_free(m->owned[i]);
	fx_free(m->owned);
	fx_free(m->weights);
	fx_free(m->layers);
	fx_free(m->nextn);
	fx_free(m->inv_freq);
	vocab_free(m->vocab);
	gguf_close(m->g);
	fx_free(m->chat_template);
	fx_free(m);
}

int32_t fx_model_n_vocab(const struct fx_model *m)
{
	return m->vocab_only ? vocab_n_tokens(m->vocab) : m->hp.n_vocab;
}

int32_t fx_model_n_ctx_train(const struct fx_model *m)
{
	return m->hp.n_ctx_train;
}

int32_t fx_model_n_embd(const struct fx_model *m)
{
	return m->hp.n_embd;
}

int32_t fx_model_n_mtp(const struct fx_model *m)
{
	return m->hp.n_nextn;
}

const char *fx_model_arch_name(const struct fx_model *m)
{
	return m->arch ? m->arch->name : "";
}

bool fx_model_has_vocab(const struct fx_model *m)
{
	return m->vocab != NULL;
}

const struct vocab *model_vocab(const struct fx_model *m)
{
	return m->vocab;
}

static uint64_t mat_bytes(const struct wmat *w)
{
	return w->data ? (uint64_t)w->n_out * w->row_bytes : 0;
}

void fx_model_weight_bytes(const struct fx_model *m, uint64_t *total, uint64_t *per_token,
			   uint64_t *n_params)
{
	const struct hparams *hp = &m->hp;
	uint64_t all = 0, step = 0, np = 0;
	for (int il = 0; il < hp->n_layer; il++) {
		const struct layer *L = &m->layers[il];
		const struct wmat *ws[LAYER_MATS];
		for (int i = 0; i < layer_mats(L, ws); i++) {
			all += mat_bytes(ws[i]);
			step += mat_bytes(ws[i]);
			np += ws[i]->data ? (uint64_t)ws[i]->n_in * (uint64_t)ws[i]->n_out : 0;
		}
		uint64_t eb = 0;
		for (int x = 0; L->exp && x < 3 * hp->n_expert; x++) {
			eb += mat_bytes(&L->exp[x]);
			np += (uint64_t)L->exp[x].n_in * (uint64_t)L->exp[x].n_out;
		}
		all += eb;
		if (hp->n_expert > 0)
			step += eb / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
	}
	uint64_t emb = mat_bytes(&m->tok_embd);
	all += emb;
	np += (uint64_t)m->tok_embd.n_in * (uint64_t)m->tok_embd.n_out;
	if (m->output.data == m->tok_embd.data) {
		step += emb;
	} else {
		all += mat_bytes(&m->output);
		step += mat_bytes(&m->output) + m->tok_embd.row_bytes;
		np += (uint64_t)m->output.n_in * (uint64_t)m->output.n_out;
	}
	/* The file's own tensors when they are what runs (not requantized):
	 * every tensor counts, norms included, as llama-bench's size and
	 * parameter columns do. */
	if (!m->requantized && m->g) {
		uint64_t fb = 0, fp = 0;
		for (uint64_t i = 0; i < m->g->n_tensors; i++) {
			const struct gguf_tensor *t = &m->g->tensors[i];
			fb += t->nbytes;
			fp += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
		}
		all = fb;
		np = fp;
	}
	*total = all;
	*per_token = step;
	*n_params = np;
}

void fx_model_macs(const struct fx_model *m, uint64_t *layers, uint64_t *lm_head)
{
	const struct hparams *hp = &m->hp;
	uint64_t lm = 0;
	for (int il = 0; il < hp->n_layer; il++) {
		const struct layer *L = &m->layers[il];
		const struct wmat *ws[LAYER_MATS];
		for (int i = 0; i < layer_mats(L, ws); i++)
			lm += ws[i]->data ? (uint64_t)ws[i]->n_in * (uint64_t)ws[i]->n_out : 0;
		uint64_t e = 0;
		for (int x = 0; L->exp && x < 3 * hp->n_expert; x++)
			e += (uint64_t)L->exp[x].n_in * (uint64_t)L->exp[x].n_out;
		if (hp->n_expert > 0)
			lm += e / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
	}
	const struct wmat *head = m->output.data ? &m->output : &m->tok_embd;
	if (layers)
		*layers = lm;
	if (lm_head)
		*lm_head = (uint64_t)head->n_in * (uint64_t)head->n_out;
}
