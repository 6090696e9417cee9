/* Model loading: GGUF metadata -> hparams, architecture row -> which
 * tensors to bind, every shape checked before use. Key and tensor names are
 * llama.cpp's (llama-arch.cpp), the names GGUF files carry. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>

#include "core/alloc.h"
#include "io/hf.h"
#include "io/mapfile.h"
#include "kernels/repack.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

struct loader {
	struct fx_model *m;
	struct fx_err *err;
	int quant;     /* --quant target type, or -1 */
	char arch[64]; /* general.architecture, NUL-terminated */
	bool *used;    /* [n_tensors]: bound by the architecture's row */
};

static const char *key(const struct loader *ld, char *buf, size_t n, const char *suffix)
{
	snprintf(buf, n, "%s.%s", ld->arch, suffix);
	return buf;
}

/* An integer hparam "{arch}.suffix"; *v keeps its default when absent and
 * not required. A per-layer array where a scalar is expected is refused. */
static int get_int(struct loader *ld, const char *suffix, int32_t *v, bool required)
{
	char k[128];
	int64_t x;
	key(ld, k, sizeof(k), suffix);
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

static int get_float(struct loader *ld, const char *suffix, float *v)
{
	char k[128];
	key(ld, k, sizeof(k), suffix);
	if (!gguf_find(ld->m->g, k))
		return FX_OK;
	if (!gguf_get_f32(ld->m->g, k, v))
		return gguf_type_error(ld->m->g, k, "float32", ld->err);
	if (!isfinite(*v))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is %g, not a finite float", k, *v);
	return FX_OK;
}

/* A bool key (full name); *v keeps its default when absent. */
static int get_bool(struct loader *ld, const char *k, bool *v)
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
static int read_rope_scaling(struct loader *ld)
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
	key(ld, k, sizeof(k), "rope.scaling.type");
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
static int check_moe(struct loader *ld)
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

static int read_hparams(struct loader *ld)
{
	struct hparams *hp = &ld->m->hp;
	int rc;
	*hp = (struct hparams){ .rope_base = 10000.0f, .eps = 1e-5f, .embd_mul = 1.0f,
				.residual_mul = 1.0f, .logit_div = 1.0f };
	if ((rc = get_int(ld, "context_length", &hp->n_ctx_train, true)) ||
	    (rc = get_int(ld, "embedding_length", &hp->n_embd, true)) ||
	    (rc = get_int(ld, "block_count", &hp->n_layer, true)) ||
	    (rc = get_int(ld, "feed_forward_length", &hp->n_ff, true)) ||
	    (rc = get_int(ld, "attention.head_count", &hp->n_head, true)))
		return rc;
	if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_ff <= 0 ||
	    hp->n_layer > 4096 || hp->n_head > FX_MAX_HEADS)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: impossible sizes (n_embd %d, n_layer %d, n_head %d, n_ff %d)",
			       hp->n_embd, hp->n_layer, hp->n_head, hp->n_ff);
	hp->n_head_kv = hp->n_head;
	hp->head_dim = hp->n_embd / hp->n_head;
	if ((rc = get_int(ld, "attention.head_count_kv", &hp->n_head_kv, false)) ||
	    (rc = get_int(ld, "attention.key_length", &hp->head_dim, false)))
		return rc;
	hp->head_dim_v = hp->head_dim;
	hp->n_rot = hp->head_dim;
	if ((rc = get_int(ld, "attention.value_length", &hp->head_dim_v, false)) ||
	    (rc = get_int(ld, "rope.dimension_count", &hp->n_rot, false)) ||
	    (rc = get_int(ld, "attention.sliding_window", &hp->n_swa, false)))
		return rc;
	if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->head_dim <= 0 ||
	    hp->head_dim_v <= 0 || hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: bad attention shape (n_head %d, n_head_kv %d, head_dim %d, n_rot %d)",
			       hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_rot);
	if ((rc = get_float(ld, "attention.layer_norm_rms_epsilon", &hp->eps)) ||
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
	if ((rc = get_bool(ld, key(ld, kb, sizeof(kb), "expert_weights_norm"), &hp->expert_norm)))
		return rc;
	if ((rc = get_int(ld, "expert_feed_forward_length", &hp->n_ff_exp, false)) ||
	    (rc = get_int(ld, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false)))
		return rc;
	if ((rc = check_moe(ld)))
		return rc;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
	if ((rc = get_float(ld, "attention.scale", &hp->attn_scale)))
		return rc;
	hp->rope_base_swa = ld->m->arch->rope_base_swa > 0 ? ld->m->arch->rope_base_swa : hp->rope_base;
	hp->has_rope_swa = ld->m->arch->rope_base_swa > 0 ||
			   gguf_find(ld->m->g, key(ld, kb, sizeof(kb), "rope.freq_base_swa"));
	if ((rc = get_float(ld, "rope.freq_base_swa", &hp->rope_base_swa)) ||
	    (rc = get_float(ld, "embedding_scale", &hp->embd_mul)) ||
	    (rc = get_float(ld, "residual_scale", &hp->residual_mul)) ||
	    (rc = get_float(ld, "logit_scale", &hp->logit_div)))
		return rc;
	if (hp->logit_div == 0)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: logit_scale is 0");
	return read_rope_scaling(ld);
}

/* Which layers use the sliding window: the file's per-layer pattern when
 * present, else the architecture's period, else none. */
static int read_swa_layers(struct loader *ld)
{
	struct fx_model *m = ld->m;
	char k[128];
	const struct gguf_kv *kv = gguf_find(m->g, key(ld, k, sizeof(k), "attention.sliding_window_pattern"));
	int period = m->arch->swa_period;
	if (kv && kv->type == GGUF_T_ARRAY) {
		if (kv->n != (uint64_t)m->hp.n_layer || kv->arr_type == GGUF_T_STRING || !kv->data)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s has %llu entries for %d layers",
				       k, (unsigned long long)kv->n, m->hp.n_layer);
		for (int il = 0; il < m->hp.n_layer; il++)
			m->layers[il].swa = gguf_arr_num(kv, (uint64_t)il) != 0;
		return FX_OK;
	}
	if (kv) {
		uint32_t p;
		if (!gguf_get_u32(m->g, k, &p))
			return gguf_type_error(m->g, k, "uint32 or an array of one flag per layer",
					       ld->err);
		period = (int)p;
	}
	for (int il = 0; il < m->hp.n_layer; il++)
		m->layers[il].swa = m->hp.n_swa > 0 && period > 0 && (il + 1) % period != 0;
	return FX_OK;
}

/* Remember an allocation the model frees. */
static void *own(struct loader *ld, void *p)
{
	struct fx_model *m = ld->m;
	float **ow = p ? fx_realloc_array(m->owned, (size_t)m->n_owned + 1, sizeof(*ow)) : NULL;
	if (!ow) {
		fx_free(p);
		return NULL;
	}
	m->owned = ow;
	m->owned[m->n_owned++] = p;
	return p;
}

/* --quant: a float matrix becomes ld->quant, or llama.cpp's fallback type
 * when its rows do not fill whole blocks (as ferrox convert and
 * llama-quantize store it), row by row into an owned buffer. Matrices
 * already quantized in the file stay as they are. */
static int requant(struct loader *ld, struct wmat *w)
{
	int q = ld->quant;
	if (q < 0 || (w->type != FX_TYPE_F32 && w->type != FX_TYPE_F16 && w->type != FX_TYPE_BF16))
		return FX_OK;
	while (w->n_in % fx_type_get(q)->blck_size && q != FX_TYPE_F16)
		q = fx_type_fallback(q);
	if (w->n_in % fx_type_get(q)->blck_size || q == w->type)
		return FX_OK;
	size_t rb = fx_row_size(q, w->n_in);
	uint8_t *dst = own(ld, fx_malloc_array((size_t)w->n_out, rb));
	float *row = fx_malloc_array((size_t)w->n_in, sizeof(float));
	if (!dst || !row) {
		fx_free(row);
		return fx_fail(ld->err, FX_E_NOMEM, "no memory to quantize a %lld x %lld matrix",
			       (long long)w->n_out, (long long)w->n_in);
	}
	const struct fx_type_traits *from = fx_type_get(w->type), *to = fx_type_get(q);
	for (int64_t r = 0; r < w->n_out; r++) {
		from->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, row, w->n_in);
		to->from_float(row, dst + (size_t)r * rb, w->n_in);
	}
	fx_free(row);
	w->data = dst;
	w->type = q;
	w->row_bytes = rb;
	return FX_OK;
}

/* Tensor `name` (NULL when absent), marked as bound: check_all_bound then
 * refuses a file with tensors the row never asked for (llama.cpp: "wrong
 * number of tensors"), which would otherwise be silently ignored. Probes
 * that only choose a layout call gguf_find_tensor. */
static const struct gguf_tensor *take(struct loader *ld, const char *name)
{
	const struct gguf_tensor *t = gguf_find_tensor(ld->m->g, name);
	if (t)
		ld->used[t - ld->m->g->tensors] = true;
	return t;
}

/* Bind matrix `name` with n_in columns and n_out rows. */
static int bind_mat(struct loader *ld, const char *name, int64_t n_in, int64_t n_out,
		    bool required, struct wmat *w)
{
	const struct gguf_tensor *t = take(ld, name);
	memset(w, 0, sizeof(*w));
	if (!t) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is missing (architecture %s)",
				       name, ld->arch);
		return FX_OK;
	}
	if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: tensor %s is [%lld, %lld, %lld], want [%lld, %lld]", name,
			       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
			       (long long)n_in, (long long)n_out);
	const struct fx_type_traits *tt = fx_type_get(t->type);
	if (!tt->vec_dot ||
	    (tt->vec_dot_type != FX_TYPE_F32 && !fx_type_get(tt->vec_dot_type)->from_float))
		return fx_fail(ld->err, FX_E_UNSUPPORTED,
			       "GGUF: tensor %s has type %s, which ferrox cannot multiply yet",
			       name, tt->name);
	*w = (struct wmat){ .data = t->data, .type = t->type, .n_in = n_in, .n_out = n_out,
			    .row_bytes = fx_row_size(t->type, n_in) };
	return requant(ld, w);
}

/* Bind a 1-D float vector of n, converted (or copied) once into an owned
 * f32 buffer: a step then reads nothing from the file mapping, whose pages
 * the kernel may map a 2 MiB folio at a time (a 2.5 KiB norm kept 2 MiB of
 * the file resident: Gemma 3 270M's RSS 19 MiB over its weights). */
static int bind_vec(struct loader *ld, const char *name, int64_t n, bool required,
		    const float **out)
{
	const struct gguf_tensor *t = take(ld, name);
	*out = NULL;
	if (!t) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is missing (architecture %s)",
				       name, ld->arch);
		return FX_OK;
	}
	if (t->ne[0] != n || t->ne[1] * t->ne[2] * t->ne[3] != 1)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s has %lld elements, want %lld",
			       name, (long long)(t->ne[0] * t->ne[1]), (long long)n);
	const struct fx_type_traits *tt = fx_type_get(t->type);
	float *buf = own(ld, fx_malloc_array((size_t)n, sizeof(float)));
	if (!buf)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %s", name);
	tt->to_float(t->data, buf, n);
	*out = buf;
	return FX_OK;
}

/* A view of rows [r0, r0 + n) of matrix w. */
static struct wmat mat_rows(const struct wmat *w, int64_t r0, int64_t n)
{
	struct wmat v = *w;
	v.data = (const uint8_t *)w->data + (size_t)r0 * w->row_bytes;
	v.n_out = n;
	return v;
}

/* Multi-head latent attention: Q through an optional low-rank latent, K
 * and V from one compressed latent plus a RoPE part shared by all heads. */
static int bind_mla(struct loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
	int64_t kvb = (int64_t)hp->n_head * (hp->head_dim - hp->n_rot + hp->head_dim_v);
	char n[96];
	int rc;
	if (hp->kv_lora <= 0 || hp->n_head_kv != hp->n_head || hp->n_rot >= hp->head_dim)
		return fx_fail(ld->err, FX_E_FORMAT, "blk.%d: MLA needs attention.kv_lora_rank, "
			       "n_head_kv == n_head and rope dims < key_length", il);
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if (hp->q_lora > 0) {
		if ((rc = bind_mat(ld, NAME("attn_q_a.weight"), e, hp->q_lora, true, &L->wq_a)) ||
		    (rc = bind_vec(ld, NAME("attn_q_a_norm.weight"), hp->q_lora, true, &L->q_a_norm)) ||
		    (rc = bind_mat(ld, NAME("attn_q_b.weight"), hp->q_lora, q, true, &L->wq_b)))
			return rc;
	} else if ((rc = bind_mat(ld, NAME("attn_q.weight"), e, q, true, &L->wq))) {
		return rc;
	}
	if ((rc = bind_mat(ld, NAME("attn_kv_a_mqa.weight"), e, hp->kv_lora + hp->n_rot, true,
			   &L->wkv_a)) ||
	    (rc = bind_vec(ld, NAME("attn_kv_a_norm.weight"), hp->kv_lora, true, &L->kv_a_norm)) ||
	    (rc = bind_mat(ld, NAME("attn_kv_b.weight"), hp->kv_lora, kvb, true, &L->wkv_b)))
		return rc;
#undef NAME
	return FX_OK;
}

/* Q, K, V: separate, or one fused attn_qkv [n_embd -> q + k + v] (Phi-3)
 * split into row views. */
static int bind_qkv(struct loader *ld, int il, struct layer *L, int64_t e, int64_t q, int64_t kd,
		    int64_t vd)
{
	char n[96];
	int rc;
	snprintf(n, sizeof(n), "blk.%d.attn_kv_a_mqa.weight", il);
	if (gguf_find_tensor(ld->m->g, n))
		return bind_mla(ld, il, L);
	snprintf(n, sizeof(n), "blk.%d.attn_qkv.weight", il);
	if (gguf_find_tensor(ld->m->g, n)) {
		struct wmat qkv;
		if ((rc = bind_mat(ld, n, e, q + kd + vd, true, &qkv)))
			return rc;
		L->wq = mat_rows(&qkv, 0, q);
		L->wk = mat_rows(&qkv, q, kd);
		L->wv = mat_rows(&qkv, q + kd, vd);
		return FX_OK;
	}
	if ((rc = bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_q.weight", il), n), e, q, true, &L->wq)) ||
	    (rc = bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_k.weight", il), n), e, kd, true, &L->wk)))
		return rc;
	return bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_v.weight", il), n), e, vd, true, &L->wv);
}

/* Gate and up: separate, or ffn_up holding [gate; up] (Phi-3's gate_up). */
static int bind_gate_up(struct loader *ld, int il, struct layer *L, int64_t e, int64_t f)
{
	char n[96];
	int rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_gate.weight", il);
	if (!gguf_find_tensor(ld->m->g, n)) {
		struct wmat gu;
		snprintf(n, sizeof(n), "blk.%d.ffn_up.weight", il);
		if ((rc = bind_mat(ld, n, e, 2 * f, true, &gu)))
			return rc;
		L->ffn_gate = mat_rows(&gu, 0, f);
		L->ffn_up = mat_rows(&gu, f, f);
		return FX_OK;
	}
	if ((rc = bind_mat(ld, n, e, f, true, &L->ffn_gate)))
		return rc;
	return bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.ffn_up.weight", il), n), e, f, true, &L->ffn_up);
}

/* Stacked experts: ffn_{gate,up,down}_exps [n_in, n_out, n_expert] become
 * n_expert matrix views each (llama.cpp's layout). */
static int bind_experts(struct loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	static const char *const kind[3] = { "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps" };
	int64_t e = hp->n_embd, f = hp->n_ff_exp;
	char n[96];
	int rc;
	if (!hp->n_expert)
		return fx_fail(ld->err, FX_E_FORMAT, "blk.%d has a router but %s.expert_count is missing",
			       il, ld->arch);
	L->exp = own(ld, fx_calloc((size_t)hp->n_expert * 3, sizeof(*L->exp)));
	if (!L->exp)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for experts");
	for (int k = 0; k < 3; k++) {
		int64_t in = k == 2 ? f : e, out = k == 2 ? e : f;
		snprintf(n, sizeof(n), "blk.%d.%s.weight", il, kind[k]);
		const struct gguf_tensor *t = take(ld, n);
		if (!t || t->n_dims != 3 || t->ne[0] != in || t->ne[1] != out || t->ne[2] != hp->n_expert)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is %s, want [%lld, %lld, %d]",
				       n, t ? "of another shape" : "missing", (long long)in,
				       (long long)out, hp->n_expert);
		const struct fx_type_traits *tt = fx_type_get(t->type);
		if (!tt->vec_dot)
			return fx_fail(ld->err, FX_E_UNSUPPORTED, "GGUF: %s has type %s, which ferrox "
				       "cannot multiply yet", n, tt->name);
		struct wmat all = { .data = t->data, .type = t->type, .n_in = in,
				    .n_out = out * hp->n_expert, .row_bytes = fx_row_size(t->type, in) };
		if ((rc = requant(ld, &all)))
			return rc;
		for (int x = 0; x < hp->n_expert; x++)
			L->exp[3 * x + k] = mat_rows(&all, (int64_t)x * out, out);
	}
	for (int k = 0; k < 3; k++) {
		int64_t out = k == 2 ? e : f;
		snprintf(n, sizeof(n), "blk.%d.%s.bias", il, kind[k]);
		const struct gguf_tensor *b = take(ld, n);
		if (!b)
			continue;
		if (b->type != FX_TYPE_F32 || b->ne[0] != out || b->ne[1] != hp->n_expert ||
		    (uintptr_t)b->data % sizeof(float))
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s must be f32 [%lld, %d]", n,
				       (long long)out, hp->n_expert);
		L->exp_b[k] = b->data;
	}
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.bias", il);
	if ((rc = bind_vec(ld, n, hp->n_expert, false, &L->router_b)))
		return rc;
	/* Only DeepSeek's router reads the selection bias. */
	snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", il);
	if (ld->m->arch->router == ROUTER_SIGMOID_BIAS &&
	    (rc = bind_vec(ld, n, hp->n_expert, true, &L->exp_probs_b)))
		return rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp_shexp.weight", il);
	if ((rc = bind_vec(ld, n, e, false, &L->sh_router)))
		return rc;
	if (!hp->n_ff_shexp)
		return FX_OK;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_mat(ld, NAME("ffn_gate_shexp.weight"), e, hp->n_ff_shexp, true, &L->sh_gate)) ||
	    (rc = bind_mat(ld, NAME("ffn_up_shexp.weight"), e, hp->n_ff_shexp, true, &L->sh_up)) ||
	    (rc = bind_mat(ld, NAME("ffn_down_shexp.weight"), hp->n_ff_shexp, e, true, &L->sh_down)))
		return rc;
#undef NAME
	return FX_OK;
}

/* The MLP: a router (ffn_gate_inp) makes it an MoE layer, else dense. */
static int bind_ffn(struct loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	char n[96];
	int rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.weight", il);
	if (gguf_find_tensor(ld->m->g, n)) {
		if ((rc = bind_mat(ld, n, hp->n_embd, hp->n_expert, true, &L->router)))
			return rc;
		return bind_experts(ld, il, L);
	}
	if ((rc = bind_gate_up(ld, il, L, hp->n_embd, hp->n_ff)))
		return rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_down.weight", il);
	return bind_mat(ld, n, hp->n_ff, hp->n_embd, true, &L->ffn_down);
}

static int bind_layer(struct loader *ld, int il)
{
	const struct hparams *hp = &ld->m->hp;
	const struct arch_desc *a = ld->m->arch;
	struct layer *L = &ld->m->layers[il];
	int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
	int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
	int64_t qn = a->qk_norm == QK_NORM_FULL ? q : hp->head_dim;
	int64_t kn = a->qk_norm == QK_NORM_FULL ? kd : hp->head_dim;
	bool pre = !a->no_pre_norms, qk = a->qk_norm != QK_NORM_NONE;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_vec(ld, NAME("attn_norm.weight"), e, pre, &L->attn_norm)) ||
	    (rc = bind_qkv(ld, il, L, e, q, kd, vd)) ||
	    (rc = bind_mat(ld, NAME("attn_output.weight"), (int64_t)hp->n_head * hp->head_dim_v, e,
			   true, &L->wo)) ||
	    (rc = bind_vec(ld, NAME("attn_q.bias"), q, false, &L->bq)) ||
	    (rc = bind_vec(ld, NAME("attn_k.bias"), kd, false, &L->bk)) ||
	    (rc = bind_vec(ld, NAME("attn_v.bias"), vd, false, &L->bv)) ||
	    (rc = bind_vec(ld, NAME("attn_output.bias"), e, false, &L->bo)) ||
	    (qk && (rc = bind_vec(ld, NAME("attn_q_norm.weight"), qn, true, &L->q_norm))) ||
	    (qk && (rc = bind_vec(ld, NAME("attn_k_norm.weight"), kn, true, &L->k_norm))) ||
	    (a->post_norms &&
	     (rc = bind_vec(ld, NAME("post_attention_norm.weight"), e, true, &L->post_attn_norm))) ||
	    (rc = bind_vec(ld, (snprintf(n, sizeof(n), "blk.%d.%s.weight", il,
					 a->ffn_norm_name ? a->ffn_norm_name : "ffn_norm"), n),
			   e, pre, &L->ffn_norm)) ||
	    (rc = bind_vec(ld, NAME("attn_sinks.weight"), hp->n_head, false, &L->sinks)) ||
	    (rc = bind_ffn(ld, il, L)) ||
	    (a->post_norms &&
	     (rc = bind_vec(ld, NAME("post_ffw_norm.weight"), e, true, &L->post_ffn_norm))))
		return rc;
#undef NAME
	return FX_OK;
}

/* Which layers apply RoPE: the file's list ({arch}.rope.layers), else the
 * architecture's NoPE period, else all. */
static int read_rope_layers(struct loader *ld)
{
	struct fx_model *m = ld->m;
	char k[128];
	const struct gguf_kv *kv = gguf_find(m->g, key(ld, k, sizeof(k), "rope.layers"));
	if (kv && (kv->type != GGUF_T_ARRAY || kv->n != (uint64_t)m->hp.n_layer || !kv->data ||
		   kv->arr_type == GGUF_T_STRING))
		return fx_fail(ld->err, FX_E_FORMAT, "%s must list one flag per layer", k);
	int p = m->arch->no_rope_period;
	for (int il = 0; il < m->hp.n_layer; il++)
		m->layers[il].rope = kv ? gguf_arr_num(kv, (uint64_t)il) != 0
				   : !(p > 0 && (il + 1) % p == 0);
	return FX_OK;
}

/* Every tensor of the file was bound: one the row does not ask for (Q/K
 * norms in a Llama file, a selection bias beside a softmax router) would
 * be read by nobody and the model run without it. The error names up to
 * four of them. */
static int check_all_bound(struct loader *ld)
{
	const struct gguf_file *g = ld->m->g;
	char names[320] = "";
	size_t len = 0;
	uint64_t n_unused = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		if (ld->used[i])
			continue;
		if (++n_unused <= 4 && len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%.*s",
						n_unused > 1 ? ", " : "",
						(int)(g->tensors[i].name.n < 63 ? g->tensors[i].name.n : 63),
						g->tensors[i].name.p);
	}
	if (!n_unused)
		return FX_OK;
	if (n_unused > 4)
		snprintf(names + (len < sizeof(names) ? len : sizeof(names) - 1),
			 sizeof(names) - (len < sizeof(names) ? len : sizeof(names) - 1),
			 " and %llu more", (unsigned long long)(n_unused - 4));
	return fx_fail(ld->err, FX_E_FORMAT,
		       "GGUF: %llu of %llu tensors are not used by architecture %s: %s",
		       (unsigned long long)n_unused, (unsigned long long)g->n_tensors, ld->arch, names);
}

static int bind_weights(struct loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	const struct gguf_tensor *te = gguf_find_tensor(m->g, "token_embd.weight");
	int rc;
	if (!te)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor token_embd.weight is missing");
	if (!(ld->used = fx_calloc(m->g->n_tensors ? m->g->n_tensors : 1, sizeof(*ld->used))))
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %llu tensors",
			       (unsigned long long)m->g->n_tensors);
	hp->n_vocab = (int32_t)te->ne[1];
	if (m->vocab && vocab_n_tokens(m->vocab) != hp->n_vocab)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: token_embd has %d rows but the vocabulary %d tokens",
			       hp->n_vocab, vocab_n_tokens(m->vocab));
	if ((rc = bind_mat(ld, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->tok_embd)) ||
	    (rc = bind_vec(ld, "output_norm.weight", hp->n_embd, true, &m->output_norm)) ||
	    (rc = bind_mat(ld, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output)))
		return rc;
	if (!fx_type_get(m->tok_embd.type)->to_float)
		return fx_fail(ld->err, FX_E_UNSUPPORTED, "token_embd type cannot be dequantized");
	if (!m->output.data)
		m->output = m->tok_embd; /* tied embeddings */
	m->layers = fx_calloc((size_t)hp->n_layer, sizeof(*m->layers));
	m->inv_freq = fx_calloc((size_t)hp->n_rot, sizeof(float));
	if (!m->layers || !m->inv_freq)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %d layers", hp->n_layer);
	float *f_global = m->inv_freq, *f_swa = m->inv_freq + hp->n_rot / 2;
	const float *factors = NULL; /* llama.cpp's rope_freqs (Llama 3 GGUFs) */
	if (gguf_find_tensor(m->g, "rope_freqs.weight") &&
	    (rc = bind_vec(ld, "rope_freqs.weight", hp->n_rot / 2, true, &factors)))
		return rc;
	struct rope_scaling none = { .type = ROPE_SCALING_NONE };
	rope_inv_freq(f_global, hp->n_rot, hp->rope_base, &hp->rope_sc, factors);
	/* Sliding layers have their own RoPE only where the family says so
	 * (Gemma 3: base 10000, no scaling); elsewhere they share the global one. */
	if (hp->has_rope_swa)
		rope_inv_freq(f_swa, hp->n_rot, hp->rope_base_swa, &none, NULL);
	else
		memcpy(f_swa, f_global, (size_t)(hp->n_rot / 2) * sizeof(float));
	if ((rc = read_swa_layers(ld)) || (rc = read_rope_layers(ld)))
		return rc;
	for (int il = 0; il < hp->n_layer; il++) {
		if ((rc = bind_layer(ld, il)))
			return rc;
		m->layers[il].inv_freq = m->layers[il].swa ? f_swa : f_global;
	}
	return check_all_bound(ld);
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

/* Where place_weights is: the arena (NULL while sizing) and its fill. */
struct placing {
	uint8_t *arena;
	size_t bytes;
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
static void place_weights(struct fx_model *m)
{
	struct placing pl = { 0 };
	each_step_matrix(m, place_one, &pl);
	if (!pl.bytes || !(m->weights = fx_malloc_lines(pl.bytes, 1)))
		return;
	pl = (struct placing){ .arena = m->weights };
	each_step_matrix(m, place_one, &pl);
	io_map_release(m->g->map, m->g->data_offset, m->g->map_size - m->g->data_offset);
}

/* Where repack_weights is: the scratch for one x8 group (NULL while
 * sizing it) and its size. */
struct repacking {
	enum kern_isa isa;
	void *tmp;
	size_t tmp_bytes;
};

static void repack_one(struct fx_model *m, struct wmat *w, void *arg)
{
	struct repacking *rp = arg;
	if (!w->data || w->x8 || w->n_out % 8 || !kern_x8_supported(w->type, rp->isa))
		return;
	if (!rp->tmp) {
		rp->tmp_bytes = 8 * w->row_bytes > rp->tmp_bytes ? 8 * w->row_bytes : rp->tmp_bytes;
		return;
	}
	for (int64_t r = 0; r < w->n_out; r += 8)
		kern_x8_pack(w->type, w->n_in, (uint8_t *)w->data + (size_t)r * w->row_bytes, rp->tmp);
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
static int repack_weights(struct fx_model *m, struct fx_err *err)
{
	struct repacking rp = { .isa = kern_isa_best() };
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
	struct loader ld = { .err = err };
	struct gguf_str arch;
	int rc;
	if (!path || !out)
		return fx_fail(err, FX_E_INVALID, "fx_model_load: path and out are required");
	*out = NULL;
	if (!p)
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
	struct stat st;
	bool hf = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
	if ((rc = hf ? hf_open(path, &m->g, err) : gguf_open(path, &m->g, err)))
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
		rc = fx_fail(err, FX_E_UNSUPPORTED,
			     "%s: architecture '%s' is not supported (supported: %s)", path,
			     ld.arch, arch_names());
		goto fail;
	}
	if ((rc = model_chat_template_load(m, path, hf, err)))
		goto fail_path;
	/* HF directories keep their tokenizer in tokenizer.json, which is not
	 * read yet: such a model runs from token ids only (vocab NULL). */
	/* A GGUF without tokenizer keys (ferrox convert of an HF directory)
	 * runs from token ids, like an HF directory. */
	if (!hf && (p->vocab_only || gguf_find(m->g, "tokenizer.ggml.model")) &&
	    (rc = vocab_load(m->g, &m->vocab, err)))
		goto fail_path;
	if (hf && p->vocab_only) {
		rc = fx_fail(err, FX_E_UNSUPPORTED,
			     "%s: tokenizer.json (Hugging Face tokenizers) is not supported yet", path);
		goto fail;
	}
	if (p->vocab_only) {
		gguf_release_meta(m->g);
		goto done;
	}
	rc = read_hparams(&ld);
	if (!rc)
		rc = bind_weights(&ld);
	fx_free(ld.used);
	if (rc)
		goto fail_path;
	/* Everything the model reads from the metadata is copied or bound by
	 * now: its pages leave the RSS before repacking makes the weights
	 * resident (peak RSS = weights + KV + scratch, issue 5). */
	gguf_release_meta(m->g);
	if (p->repack) {
		place_weights(m);
		if ((rc = repack_weights(m, err)))
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

void fx_model_free(struct fx_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_owned; i++)
		fx_free(m->owned[i]);
	fx_free(m->owned);
	fx_free(m->weights);
	fx_free(m->layers);
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
