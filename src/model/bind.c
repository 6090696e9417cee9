/* Binding: the architecture's row -> which of a file's tensors become
 * which weights, every shape checked before use, and a file refused when
 * it holds tensors the row does not allow or leaves any unbound (llama.cpp
 * refuses "wrong number of tensors"). Tensor names are llama.cpp's
 * (llama-arch.cpp). */
#include "model/bind.h"

#include <string.h>

#include "core/alloc.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

/* Which layers use the sliding window: the file's per-layer pattern when
 * present, else the architecture's period, else none. */
static int read_swa_layers(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	char k[128];
	const struct gguf_kv *kv = gguf_find(m->g, model_key(ld, k, sizeof(k), "attention.sliding_window_pattern"));
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
static void *own(struct model_loader *ld, void *p)
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
static int requant(struct model_loader *ld, struct wmat *w)
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

/* A tensor the row requires is absent: named, with what it is for. */
static int missing(const struct model_loader *ld, const char *name)
{
	const char *what;
	arch_tensor_group(ld->m->arch, name, strlen(name), &what);
	return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s (%s) is missing; architecture %s "
		       "requires it", name, what, ld->arch);
}

/* Tensor `name` (NULL when absent), marked as bound: check_tensors then
 * refuses a file with tensors nothing bound (llama.cpp: "wrong number of
 * tensors"), which would otherwise be silently ignored. Probes that only
 * choose a layout call gguf_find_tensor. */
static const struct gguf_tensor *take(struct model_loader *ld, const char *name)
{
	const struct gguf_tensor *t = gguf_find_tensor(ld->m->g, name);
	if (t)
		ld->used[t - ld->m->g->tensors] = true;
	return t;
}

/* Bind matrix `name` with n_in columns and n_out rows. */
static int bind_mat(struct model_loader *ld, const char *name, int64_t n_in, int64_t n_out,
		    bool required, struct wmat *w)
{
	const struct gguf_tensor *t = take(ld, name);
	memset(w, 0, sizeof(*w));
	if (!t)
		return required ? missing(ld, name) : FX_OK;
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
static int bind_vec(struct model_loader *ld, const char *name, int64_t n, bool required,
		    const float **out)
{
	const struct gguf_tensor *t = take(ld, name);
	*out = NULL;
	if (!t)
		return required ? missing(ld, name) : FX_OK;
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

/* Like bind_vec, for a required tensor of n elements of any shape. */
static int bind_vec_n(struct model_loader *ld, const char *name, int64_t n, const float **out)
{
	const struct gguf_tensor *t = take(ld, name);
	*out = NULL;
	if (!t)
		return missing(ld, name);
	if (t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] != n)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s has %lld elements, want %lld",
			       name, (long long)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]), (long long)n);
	float *buf = own(ld, fx_malloc_array((size_t)n, sizeof(float)));
	if (!buf)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %s", name);
	fx_type_get(t->type)->to_float(t->data, buf, n);
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
static int bind_mla(struct model_loader *ld, int il, struct layer *L)
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
static int bind_qkv(struct model_loader *ld, int il, struct layer *L, int64_t e, int64_t q, int64_t kd,
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
	if ((rc = bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_q.weight", il), n), e, q, true, &L->wq)))
		return rc;
	if (L->kv_shared) /* reads an earlier layer's K/V: no projections */
		return FX_OK;
	if ((rc = bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_k.weight", il), n), e, kd, true, &L->wk)))
		return rc;
	/* Gemma 4's k_eq_v layers: V is the K projection (then needs K's width) */
	bool v_opt = ld->m->arch->v_from_k && kd == vd;
	return bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.attn_v.weight", il), n), e, vd, !v_opt, &L->wv);
}

/* Gate and up: separate, or (AT_FUSED) ffn_up holding [gate; up] (Phi-3's
 * gate_up); elsewhere a missing ffn_gate is named as such. */
static int bind_gate_up(struct model_loader *ld, int il, struct layer *L, int64_t e, int64_t f)
{
	char n[96];
	int rc;
	if (ld->m->arch->act == ACT_RELU2) /* non-gated: up only */
		return bind_mat(ld, (snprintf(n, sizeof(n), "blk.%d.ffn_up.weight", il), n), e, f, true,
				&L->ffn_up);
	snprintf(n, sizeof(n), "blk.%d.ffn_gate.weight", il);
	if ((arch_groups(ld->m->arch) & AT_FUSED) && !gguf_find_tensor(ld->m->g, n)) {
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
static int bind_experts(struct model_loader *ld, int il, struct layer *L)
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
	bool gated = ld->m->arch->act != ACT_RELU2; /* non-gated experts have no ffn_gate_exps */
	/* Gemma 4: gate and up fused, ffn_gate_up_exps [n_embd, 2 f, n_expert],
	 * each expert's gate rows first */
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_up_exps.weight", il);
	bool fused = (arch_groups(ld->m->arch) & AT_MOE_PAR) && gguf_find_tensor(ld->m->g, n);
	for (int k = gated ? 0 : 1; k < 3; k++) {
		if (fused && k == 1)
			continue;
		int64_t in = k == 2 ? f : e, out = k == 2 ? e : (fused ? 2 * f : f);
		snprintf(n, sizeof(n), "blk.%d.%s.weight", il, fused && k == 0 ? "ffn_gate_up_exps" : kind[k]);
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
		for (int x = 0; x < hp->n_expert; x++) {
			L->exp[3 * x + k] = mat_rows(&all, (int64_t)x * out, fused && k == 0 ? f : out);
			if (fused && k == 0)
				L->exp[3 * x + 1] = mat_rows(&all, (int64_t)x * out + f, f);
		}
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
	/* The selection bias: required by the sigmoid router (DeepSeek-V3),
	 * optional where the row allows it beside another (ERNIE 4.5 MoE). */
	snprintf(n, sizeof(n), "blk.%d.exp_probs_b.bias", il);
	if ((arch_groups(ld->m->arch) & AT_EXP_PROBS_B) &&
	    (rc = bind_vec(ld, n, hp->n_expert, ld->m->arch->router == ROUTER_SIGMOID_BIAS,
			   &L->exp_probs_b)))
		return rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp_shexp.weight", il);
	if ((rc = bind_vec(ld, n, e, false, &L->sh_router)))
		return rc;
	if (!hp->n_ff_shexp)
		return FX_OK;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((gated &&
	     (rc = bind_mat(ld, NAME("ffn_gate_shexp.weight"), e, hp->n_ff_shexp, true, &L->sh_gate))) ||
	    (rc = bind_mat(ld, NAME("ffn_up_shexp.weight"), e, hp->n_ff_shexp, true, &L->sh_up)) ||
	    (rc = bind_mat(ld, NAME("ffn_down_shexp.weight"), hp->n_ff_shexp, e, true, &L->sh_down)))
		return rc;
#undef NAME
	return FX_OK;
}

/* Gemma 4's MoE beside the dense MLP (AT_MOE_PAR): its norms, router
 * scales and experts. */
static int bind_moe_par(struct model_loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	int64_t e = hp->n_embd;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_vec(ld, NAME("pre_ffw_norm_2.weight"), e, true, &L->moe_pre_norm)) ||
	    (rc = bind_vec(ld, NAME("post_ffw_norm_1.weight"), e, true, &L->moe_post_norm_1)) ||
	    (rc = bind_vec(ld, NAME("post_ffw_norm_2.weight"), e, true, &L->moe_post_norm_2)) ||
	    (rc = bind_vec(ld, NAME("ffn_gate_inp.scale"), e, true, &L->router_scale)) ||
	    (rc = bind_mat(ld, NAME("ffn_gate_inp.weight"), e, hp->n_expert, true, &L->router)) ||
	    (rc = bind_experts(ld, il, L)) ||
	    (rc = bind_vec(ld, NAME("ffn_down_exps.scale"), hp->n_expert, true, &L->exp_scale)))
		return rc;
#undef NAME
	if (L->sh_up.data || L->router_b || L->exp_b[0] || L->exp_b[1] || L->exp_b[2])
		return fx_fail(ld->err, FX_E_FORMAT, "blk.%d: a MoE beside the MLP takes no shared "
			       "expert nor biases", il);
	return FX_OK;
}

/* The MLP: a router (ffn_gate_inp) makes it an MoE layer, else dense;
 * pre_ffw_norm_2 (AT_MOE_PAR) adds a MoE beside the dense MLP. */
static int bind_ffn(struct model_loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	char n[96];
	int rc;
	snprintf(n, sizeof(n), "blk.%d.pre_ffw_norm_2.weight", il);
	if ((arch_groups(ld->m->arch) & AT_MOE_PAR) && gguf_find_tensor(ld->m->g, n) &&
	    (rc = bind_moe_par(ld, il, L)))
		return rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_gate_inp.weight", il);
	if (!L->moe_pre_norm && gguf_find_tensor(ld->m->g, n)) {
		if ((rc = bind_mat(ld, n, hp->n_embd, hp->n_expert, true, &L->router)))
			return rc;
		return bind_experts(ld, il, L);
	}
	if ((rc = bind_gate_up(ld, il, L, hp->n_embd, hp->n_ff)))
		return rc;
	snprintf(n, sizeof(n), "blk.%d.ffn_down.weight", il);
	return bind_mat(ld, n, hp->n_ff, hp->n_embd, true, &L->ffn_down);
}

/* The attention mixer's tensors (Q/K/V/O, biases, Q/K norms, sinks). */
static int bind_attn(struct model_loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	const struct arch_desc *a = ld->m->arch;
	int64_t e = hp->n_embd, q = (int64_t)hp->n_head * L->head_dim;
	int64_t kd = (int64_t)L->n_head_kv * L->head_dim, vd = (int64_t)L->n_head_kv * L->head_dim_v;
	int64_t qn = a->qk_norm == QK_NORM_FULL ? q : L->head_dim;
	int64_t kn = a->qk_norm == QK_NORM_FULL ? kd : L->head_dim;
	/* weighted Q/K norms (Llama 4's L2 one has no tensors) */
	bool qk = a->qk_norm == QK_NORM_HEAD || a->qk_norm == QK_NORM_FULL, kq = qk && !L->kv_shared;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	/* gated attention: attn_q holds [query; gate] per head */
	if (a->attn_out_gate && L->head_dim != L->head_dim_v)
		return fx_fail(ld->err, FX_E_UNSUPPORTED, "GGUF: gated attention needs key_length == "
			       "value_length (%d, %d)", L->head_dim, L->head_dim_v);
	if ((rc = bind_qkv(ld, il, L, e, a->attn_out_gate ? 2 * q : q, kd, vd)) ||
	    (rc = bind_mat(ld, NAME("attn_output.weight"), (int64_t)hp->n_head * L->head_dim_v, e,
			   true, &L->wo)) ||
	    (rc = bind_vec(ld, NAME("attn_q.bias"), q, false, &L->bq)) ||
	    (rc = bind_vec(ld, NAME("attn_k.bias"), kd, false, &L->bk)) ||
	    (rc = bind_vec(ld, NAME("attn_v.bias"), vd, false, &L->bv)) ||
	    (rc = bind_vec(ld, NAME("attn_output.bias"), e, false, &L->bo)) ||
	    (qk && (rc = bind_vec(ld, NAME("attn_q_norm.weight"), qn, true, &L->q_norm))) ||
	    (kq && (rc = bind_vec(ld, NAME("attn_k_norm.weight"), kn, true, &L->k_norm))) ||
	    (rc = bind_vec(ld, NAME("attn_sinks.weight"), hp->n_head, false, &L->sinks)))
		return rc;
#undef NAME
	return FX_OK;
}

/* A 2-D float tensor [rows][cols] converted once into an owned f32 buffer
 * (as bind_vec; the short convolution's taps). */
static int bind_taps(struct model_loader *ld, const char *name, int64_t rows, int64_t cols,
		     const float **out)
{
	const struct gguf_tensor *t = gguf_find_tensor(ld->m->g, name);
	if (t && (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is [%lld, %lld], want [%lld, %lld]",
			       name, (long long)t->ne[0], (long long)t->ne[1], (long long)cols,
			       (long long)rows);
	return bind_vec_n(ld, name, rows * cols, out);
}

/* The gated short convolution's tensors (LFM2; llama.cpp's shortconv.*). */
static int bind_shortconv(struct model_loader *ld, int il, struct layer *L)
{
	int64_t e = ld->m->hp.n_embd;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_mat(ld, NAME("shortconv.in_proj.weight"), e, 3 * e, true, &L->sc_in)) ||
	    (rc = bind_mat(ld, NAME("shortconv.out_proj.weight"), e, e, true, &L->sc_out)) ||
	    (rc = bind_taps(ld, NAME("shortconv.conv.weight"), e, ld->m->hp.conv_kernel, &L->sc_conv)))
		return rc;
#undef NAME
	return FX_OK;
}

/* The Mamba-2 mixer's tensors (llama.cpp's ssm_*; A already -exp(A_log)). */
static int bind_mamba2(struct model_loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	int64_t e = hp->n_embd, di = hp->ssm_inner, nh = hp->n_ssm_head;
	int64_t cd = di + 2 * (int64_t)hp->n_ssm_group * hp->ssm_state;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_mat(ld, NAME("ssm_in.weight"), e, di + cd + nh, true, &L->ssm_in)) ||
	    (rc = bind_taps(ld, NAME("ssm_conv1d.weight"), cd, hp->conv_kernel, &L->ssm_conv)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_conv1d.bias"), cd, &L->ssm_conv_b)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_dt.bias"), nh, &L->ssm_dt_b)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_a"), nh, &L->ssm_a)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_d"), nh, &L->ssm_d)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_norm.weight"), di, &L->ssm_norm)) ||
	    (rc = bind_mat(ld, NAME("ssm_out.weight"), di, e, true, &L->ssm_out)))
		return rc;
#undef NAME
	return FX_OK;
}

/* The Gated DeltaNet mixer's tensors (llama.cpp's qwen35 names; A already
 * -exp(A_log)). */
static int bind_gdn(struct model_loader *ld, int il, struct layer *L)
{
	const struct hparams *hp = &ld->m->hp;
	int64_t e = hp->n_embd, vw = hp->ssm_inner, nv = hp->n_ssm_head;
	int64_t cd = 2 * (int64_t)hp->n_ssm_group * hp->ssm_state + vw;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_mat(ld, NAME("attn_qkv.weight"), e, cd, true, &L->gdn_qkv)) ||
	    (rc = bind_mat(ld, NAME("attn_gate.weight"), e, vw, true, &L->gdn_z)) ||
	    (rc = bind_mat(ld, NAME("ssm_beta.weight"), e, nv, true, &L->gdn_beta)) ||
	    (rc = bind_mat(ld, NAME("ssm_alpha.weight"), e, nv, true, &L->gdn_alpha)) ||
	    (rc = bind_taps(ld, NAME("ssm_conv1d.weight"), cd, hp->conv_kernel, &L->ssm_conv)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_dt.bias"), nv, &L->ssm_dt_b)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_a"), nv, &L->ssm_a)) ||
	    (rc = bind_vec_n(ld, NAME("ssm_norm.weight"), vw / nv, &L->ssm_norm)) ||
	    (rc = bind_mat(ld, NAME("ssm_out.weight"), vw, e, true, &L->ssm_out)))
		return rc;
#undef NAME
	return FX_OK;
}

static int bind_nothing(struct model_loader *ld, int il, struct layer *L)
{
	(void)ld, (void)il, (void)L;
	return FX_OK;
}

/* Whether layer il has an MLP: always, unless the row allows none and the
 * file has none of its tensors. */
static bool layer_has_ffn(const struct model_loader *ld, int il)
{
	static const char *const names[] = { "ffn_down.weight", "ffn_up.weight", "ffn_gate_inp.weight" };
	if (!ld->m->arch->ffn_optional)
		return true;
	char n[96];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(n, sizeof(n), "blk.%d.%s", il, names[i]);
		if (gguf_find_tensor(ld->m->g, n))
			return true;
	}
	return false;
}

static int bind_layer(struct model_loader *ld, int il)
{
	const struct hparams *hp = &ld->m->hp;
	const struct arch_desc *a = ld->m->arch;
	struct layer *L = &ld->m->layers[il];
	int64_t e = hp->n_embd;
	bool pre = !a->no_pre_norms;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	static int (*const bind_mixer[])(struct model_loader *, int, struct layer *) = {
		[MIX_ATTN] = bind_attn, [MIX_SHORTCONV] = bind_shortconv, [MIX_MAMBA2] = bind_mamba2,
		[MIX_GDN] = bind_gdn, [MIX_NONE] = bind_nothing,
	};
	/* a layer without a mixer normalises once: attn_norm feeds its MLP */
	bool ffn_pre = pre && L->mixer != MIX_NONE;
	L->has_ffn = layer_has_ffn(ld, il);
	if ((rc = bind_vec(ld, NAME("attn_norm.weight"), e, pre, &L->attn_norm)) ||
	    (rc = bind_mixer[L->mixer](ld, il, L)) || (rc = bind_mixer[L->par_mixer](ld, il, L)) ||
	    (a->post_norms &&
	     (rc = bind_vec(ld, NAME("post_attention_norm.weight"), e, true, &L->post_attn_norm))) ||
	    (L->has_ffn && L->mixer != MIX_NONE &&
	     (rc = bind_vec(ld, (snprintf(n, sizeof(n), "blk.%d.%s.weight", il,
					  a->ffn_norm_name ? a->ffn_norm_name : "ffn_norm"), n),
			    e, ffn_pre, &L->ffn_norm))) ||
	    (L->has_ffn && (rc = bind_ffn(ld, il, L))) ||
	    (a->post_norms &&
	     (rc = bind_vec(ld, NAME("post_ffw_norm.weight"), e, true, &L->post_ffn_norm))) ||
	    (rc = bind_vec(ld, NAME("layer_output_scale.weight"), 1, false, &L->out_scale)))
		return rc;
	int64_t p = hp->n_embd_ple;
	if (p > 0 &&
	    ((rc = bind_mat(ld, NAME("inp_gate.weight"), e, p, true, &L->ple_gate)) ||
	     (rc = bind_mat(ld, NAME("proj.weight"), p, e, true, &L->ple_proj)) ||
	     (rc = bind_vec(ld, NAME("post_norm.weight"), e, true, &L->ple_norm))))
		return rc;
#undef NAME
	return FX_OK;
}

/* Each layer's mixer, its index among the K/V layers and its offset in the
 * recurrent state. A layer attends unless the file says it has no K/V
 * heads (a 0 in the per-layer attention.head_count_kv llama.cpp writes for
 * hybrids, or attention.head_count 0 for a model with no attention at
 * all); such a layer's mixer is the recurrent one whose tensors it holds,
 * if the row allows it. */
static int read_mixers(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	unsigned groups = arch_groups(m->arch);
	char k[128], n[96];
	const struct gguf_kv *kv = gguf_find(m->g, model_key(ld, k, sizeof(k), "attention.head_count_kv"));
	bool per_layer = kv && kv->type == GGUF_T_ARRAY; /* checked by model.c's get_head_count_kv */
	hp->n_layer_kv = 0;
	hp->rs_floats = 0;
	for (int il = 0; il < hp->n_layer; il++) {
		struct layer *L = &m->layers[il];
		*L = (struct layer){ .mixer = MIX_ATTN, .par_mixer = MIX_NONE, .kv_il = -1, .rs_off = -1 };
#define HAS(s) (snprintf(n, sizeof(n), "blk.%d." s, il), gguf_find_tensor(m->g, n))
		/* A layer holding a DeltaNet's tensors is one whatever one K/V
		 * head count says (llama.cpp's qwen35 files flag their layers in
		 * attention.recurrent_layers). */
		bool gdn = (groups & AT_GDN) && HAS("ssm_beta.weight");
		if (!gdn && (per_layer ? gguf_arr_num(kv, (uint64_t)il) != 0 : hp->n_head > 0)) {
			L->kv_il = hp->n_layer_kv++;
			L->n_head_kv = per_layer ? (int32_t)gguf_arr_num(kv, (uint64_t)il) : hp->n_head_kv;
			if (!m->arch->parallel_ssm || !HAS("ssm_in.weight"))
				continue;
			L->par_mixer = MIX_MAMBA2; /* beside the attention */
		} else if ((groups & AT_SHORTCONV) && HAS("shortconv.in_proj.weight"))
			L->mixer = MIX_SHORTCONV;
		else if ((groups & AT_SSM) && HAS("ssm_in.weight"))
			L->mixer = MIX_MAMBA2;
		else if ((groups & AT_GDN) && HAS("ssm_beta.weight"))
			L->mixer = MIX_GDN;
		else if (m->arch->mixer_optional && (HAS("ffn_up.weight") || HAS("ffn_gate_inp.weight")))
			L->mixer = MIX_NONE;
		else
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: layer %d has no attention (no K/V "
				       "heads) and none of the recurrent mixers architecture %s allows",
				       il, ld->arch);
#undef HAS
		if (L->mixer == MIX_NONE)
			continue;
		if (hp->conv_kernel < 1 || hp->conv_kernel > 64)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: layer %d is recurrent but its conv "
				       "width (%s.shortconv.l_cache or ssm.conv_kernel) is %d, not 1..64",
				       il, ld->arch, hp->conv_kernel);
		L->rs_off = hp->rs_floats;
		int64_t taps = hp->conv_kernel - 1;
		enum layer_mixer rec = L->par_mixer != MIX_NONE ? L->par_mixer : L->mixer;
		if (rec == MIX_SHORTCONV) {
			hp->rs_floats += taps * hp->n_embd;
			continue;
		}
		int64_t di = hp->ssm_inner, nh = hp->n_ssm_head, ng = hp->n_ssm_group, ns = hp->ssm_state;
		if (di <= 0 || nh <= 0 || ng <= 0 || ns <= 0 || di % nh || nh % ng || di % ng ||
		    di > (1 << 20) || ns > 4096)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: recurrent sizes do not fit together "
				       "(%s.ssm.inner_size %lld, time_step_rank %lld heads, group_count "
				       "%lld, state_size %lld)", ld->arch, (long long)di, (long long)nh,
				       (long long)ng, (long long)ns);
		if (rec == MIX_GDN && (ns > 512 || di / nh > 512))
			return fx_fail(ld->err, FX_E_UNSUPPORTED, "GGUF: Gated DeltaNet heads of %lld x %lld "
				       "(ferrox keeps at most 512 x 512)", (long long)ns, (long long)(di / nh));
		if (rec == MIX_GDN) {
			/* conv window over q, k, v; then a [key width][value width]
			 * state per value head */
			hp->rs_floats += taps * (2 * ng * ns + di) + nh * ns * (di / nh);
			continue;
		}
		/* conv window over x, B, C, then the state [head][head_dim][N] */
		hp->rs_floats += taps * (di + 2 * ng * ns) + di * ns;
	}
	return FX_OK;
}

/* A bool key k into *v (kept when absent); a key of another type is an
 * error that says so (nonzero, message in ld->err). */
static int get_bool_key(struct model_loader *ld, const char *k, bool *v)
{
	if (gguf_find(ld->m->g, k) && !gguf_get_bool(ld->m->g, k, v))
		return gguf_type_error(ld->m->g, k, "bool", ld->err);
	return FX_OK;
}

/* Each attention layer's geometry (the sliding layers' own head size where
 * the file gives one, its K/V head count), the K/V-shared layers (the last
 * n_kv_shared: kv_il of the last earlier layer of the same kind, sliding
 * or global, as Gemma 4's kv_sharing "reuse"; the others renumbered), and
 * the backing's row widths. FX_E_FORMAT when a layer's heads do not divide
 * or a shared layer has no earlier layer of its kind. */
static int read_geometry(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	int32_t first_shared = hp->n_layer - hp->n_kv_shared;
	int64_t kw = 0, vw = 0;
	bool any = false;
	hp->n_layer_kv = 0;
	for (int il = 0; il < hp->n_layer; il++) {
		struct layer *L = &m->layers[il];
		if (L->kv_il < 0)
			continue;
		L->head_dim = L->swa ? hp->head_dim_swa : hp->head_dim;
		L->head_dim_v = L->swa ? hp->head_dim_v_swa : hp->head_dim_v;
		L->n_rot = L->swa ? hp->n_rot_swa : hp->n_rot;
		if (L->n_head_kv <= 0 || hp->n_head % L->n_head_kv)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: layer %d has %d K/V heads for %d "
				       "query heads", il, L->n_head_kv, hp->n_head);
		if (il >= first_shared) {
			int src = -1;
			for (int j = first_shared - 1; j >= 0 && src < 0; j--)
				if (m->layers[j].kv_il >= 0 && m->layers[j].swa == L->swa)
					src = j;
			if (src < 0 || m->layers[src].n_head_kv != L->n_head_kv ||
			    m->layers[src].head_dim != L->head_dim)
				return fx_fail(ld->err, FX_E_FORMAT, "GGUF: layer %d shares K/V (%s."
					       "attention.shared_kv_layers %d) but no earlier %s layer "
					       "has its K/V shape", il, ld->arch, hp->n_kv_shared,
					       L->swa ? "sliding-window" : "global");
			L->kv_il = m->layers[src].kv_il;
			L->kv_shared = true;
			continue;
		}
		L->kv_il = hp->n_layer_kv++;
		int64_t k = (int64_t)L->n_head_kv * L->head_dim, v = (int64_t)L->n_head_kv * L->head_dim_v;
		kw = k > kw ? k : kw;
		vw = v > vw ? v : vw;
		any = true;
	}
	hp->kv_k_width = any ? kw : (int64_t)hp->n_head_kv * hp->head_dim;
	hp->kv_v_width = any ? vw : (int64_t)hp->n_head_kv * hp->head_dim_v;
	return FX_OK;
}

/* Which layers apply RoPE: the file's list ({arch}.rope.layers), else the
 * architecture's NoPE period, else all (none where the row reads
 * rope.scaling.finetuned as a switch and the file sets it false). */
static int read_rope_layers(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	char k[128];
	const struct gguf_kv *kv = gguf_find(m->g, model_key(ld, k, sizeof(k), "rope.layers"));
	if (kv && (kv->type != GGUF_T_ARRAY || kv->n != (uint64_t)m->hp.n_layer || !kv->data ||
		   kv->arr_type == GGUF_T_STRING))
		return fx_fail(ld->err, FX_E_FORMAT, "%s must list one flag per layer", k);
	int p = m->arch->no_rope_period;
	bool ft = true; /* llama.cpp's Granite: rope.scaling.finetuned false, no RoPE */
	char kf[128];
	int rc;
	if (m->arch->rope_finetuned_switch && !kv &&
	    (rc = get_bool_key(ld, model_key(ld, kf, sizeof(kf), "rope.scaling.finetuned"), &ft)))
		return rc;
	for (int il = 0; il < m->hp.n_layer; il++)
		m->layers[il].rope = kv ? gguf_arr_num(kv, (uint64_t)il) != 0
				   : ft && !(p > 0 && (il + 1) % p == 0);
	return FX_OK;
}

/* Whether tensor i is refused, and *what it is: before binding (!bound),
 * a tensor of a group the row does not allow (Q/K norms in a Llama file,
 * a selection bias beside a softmax router) or one no group knows; after,
 * one nothing bound (a layer past block_count, a shared expert without
 * its width). Either would be read by nobody and the model run without it. */
static bool refused(const struct model_loader *ld, uint64_t i, bool bound, const char **what)
{
	const struct gguf_str *nm = &ld->m->g->tensors[i].name;
	const struct hparams *hp = &ld->m->hp;
	long grp = arch_tensor_group(ld->m->arch, nm->p, nm->n, what);
	char buf[64];
	int il = 0, off = 0;
	/* llama.cpp's multi-token-prediction blocks: not run, not refused */
	if (hp->n_nextn && nm->n < sizeof(buf)) {
		memcpy(buf, nm->p, nm->n);
		buf[nm->n] = 0;
		if (sscanf(buf, "blk.%d.%n", &il, &off) == 1 && off > 0 && il >= hp->n_layer &&
		    il < hp->n_layer + hp->n_nextn)
			return false;
	}
	if (bound)
		return !ld->used[i];
	return grp < 0 || (grp > 0 && !(arch_groups(ld->m->arch) & (unsigned long)grp));
}

/* FX_E_FORMAT naming up to four refused tensors (refused()), or FX_OK. */
static int check_tensors(struct model_loader *ld, bool bound)
{
	const struct gguf_file *g = ld->m->g;
	char names[512] = "";
	size_t len = 0;
	uint64_t n_bad = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const char *what;
		if (!refused(ld, i, bound, &what))
			continue;
		const struct gguf_str *nm = &g->tensors[i].name;
		if (++n_bad <= 4 && len < sizeof(names))
			len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%.*s (%s)",
						n_bad > 1 ? ", " : "", (int)(nm->n < 63 ? nm->n : 63),
						nm->p, what);
	}
	if (!n_bad)
		return FX_OK;
	len = len < sizeof(names) ? len : sizeof(names) - 1;
	if (n_bad > 4)
		snprintf(names + len, sizeof(names) - len, " and %llu more",
			 (unsigned long long)(n_bad - 4));
	return fx_fail(ld->err, FX_E_FORMAT,
		       "GGUF: %llu of %llu tensors are not used by architecture %s: %s",
		       (unsigned long long)n_bad, (unsigned long long)g->n_tensors, ld->arch, names);
}

/* token_embd (its rows give n_vocab), output_norm, the lm head (tied to
 * the embeddings when absent), and room for the layers. */
static int bind_globals(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	const struct gguf_tensor *te = gguf_find_tensor(m->g, "token_embd.weight");
	int rc;
	if (!te)
		return missing(ld, "token_embd.weight");
	hp->n_vocab = (int32_t)te->ne[1];
	/* checkpoints pad the embeddings past tokenizer.json's ids */
	if (m->vocab && (vocab_n_tokens(m->vocab) > hp->n_vocab ||
			 (!vocab_is_hf(m->vocab) && vocab_n_tokens(m->vocab) != hp->n_vocab)))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: token_embd has %d rows but the vocabulary %d tokens",
			       hp->n_vocab, vocab_n_tokens(m->vocab));
	if ((rc = bind_mat(ld, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->tok_embd)) ||
	    (rc = bind_vec(ld, m->arch->output_norm_name ? m->arch->output_norm_name
							 : "output_norm.weight",
			   hp->n_embd, true, &m->output_norm)) ||
	    (rc = bind_mat(ld, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output)))
		return rc;
	if (!fx_type_get(m->tok_embd.type)->to_float)
		return fx_fail(ld->err, FX_E_UNSUPPORTED, "token_embd type cannot be dequantized");
	int64_t lp = (int64_t)hp->n_layer * hp->n_embd_ple;
	if (hp->n_embd_ple > 0 &&
	    ((rc = bind_mat(ld, "per_layer_token_embd.weight", lp, hp->n_vocab, true, &m->ple_embd)) ||
	     (rc = bind_mat(ld, "per_layer_model_proj.weight", hp->n_embd, lp, true, &m->ple_model_proj)) ||
	     (rc = bind_vec(ld, "per_layer_proj_norm.weight", hp->n_embd_ple, true, &m->ple_proj_norm))))
		return rc;
	if (m->ple_embd.data && !fx_type_get(m->ple_embd.type)->to_float)
		return fx_fail(ld->err, FX_E_UNSUPPORTED, "per_layer_token_embd type cannot be dequantized");
	if (!m->output.data)
		m->output = m->tok_embd; /* tied embeddings */
	m->layers = fx_calloc((size_t)hp->n_layer, sizeof(*m->layers));
	m->inv_freq = fx_calloc((size_t)(hp->n_rot / 2 + hp->n_rot_swa / 2) + 1, sizeof(float));
	if (!m->layers || !m->inv_freq)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %d layers", hp->n_layer);
	return FX_OK;
}

/* The RoPE frequencies of global and sliding-window layers. */
static int bind_rope(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	float *f_global = m->inv_freq, *f_swa = m->inv_freq + hp->n_rot / 2;
	const float *factors = NULL; /* llama.cpp's rope_freqs (Llama 3 GGUFs) */
	int rc;
	if (gguf_find_tensor(m->g, "rope_freqs.weight") &&
	    (rc = bind_vec(ld, "rope_freqs.weight", hp->n_rot / 2, true, &factors)))
		return rc;
	struct rope_scaling none = { .type = ROPE_SCALING_NONE };
	rope_inv_freq(f_global, hp->n_rot, hp->rope_base, &hp->rope_sc, factors);
	/* Sliding layers have their own RoPE only where the family says so
	 * (Gemma 3: base 10000, no scaling); elsewhere they share the global one. */
	if (hp->has_rope_swa)
		rope_inv_freq(f_swa, hp->n_rot_swa, hp->rope_base_swa, &none, NULL);
	else if (hp->n_rot_swa != hp->n_rot) /* their own head size, the global base */
		rope_inv_freq(f_swa, hp->n_rot_swa, hp->rope_base, &none, NULL);
	else
		memcpy(f_swa, f_global, (size_t)(hp->n_rot / 2) * sizeof(float));
	for (int il = 0; il < hp->n_layer; il++)
		m->layers[il].inv_freq = m->layers[il].swa ? f_swa : f_global;
	return FX_OK;
}

int model_bind_weights(struct model_loader *ld)
{
	struct fx_model *m = ld->m;
	int rc;
	if (!(ld->used = fx_calloc(m->g->n_tensors ? m->g->n_tensors : 1, sizeof(*ld->used))))
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %llu tensors",
			       (unsigned long long)m->g->n_tensors);
	if ((rc = check_tensors(ld, false)) || (rc = bind_globals(ld)) || (rc = read_mixers(ld)) ||
	    (rc = read_swa_layers(ld)) || (rc = read_geometry(ld)) || (rc = read_rope_layers(ld)) ||
	    (rc = bind_rope(ld)))
		goto out;
	for (int il = 0; il < m->hp.n_layer && !rc; il++)
		rc = bind_layer(ld, il);
	if (!rc)
		rc = check_tensors(ld, true);
out:
	fx_free(ld->used);
	ld->used = NULL;
	return rc;
}
