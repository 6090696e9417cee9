/* The layer loop: embeddings, n_layer x (attention, MLP) with pre norms and
 * the row's optional post norms, final norm, LM head, optional softcap.
 * One body for prefill and decode, every architecture, every KV backing. */
#include "model/forward.h"

#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "kernels/kern.h"
#include "kernels/repack.h"
#include "quant/quant.h"

static size_t max_sz(size_t a, size_t b)
{
	return a > b ? a : b;
}

/* fx_malloc_array that also counts the bytes into s->bytes. */
static void *scratch_alloc(struct fwd_scratch *s, size_t n, size_t size)
{
	void *p = fx_malloc_array(n, size);
	if (p)
		s->bytes += n * size;
	return p;
}

int fwd_scratch_init(struct fwd_scratch *s, const struct fx_model *m, int32_t n_max,
		     int32_t n_ctx, int n_threads, bool mtp)
{
	const struct hparams *hp = &m->hp;
	size_t n = (size_t)n_max;
	/* the widest layer's heads (sliding layers may have their own size;
	 * hp->n_head_kv is the largest count) */
	size_t hd = max_sz((size_t)hp->head_dim, (size_t)hp->head_dim_swa);
	size_t dv = max_sz((size_t)hp->head_dim_v, (size_t)hp->head_dim_v_swa);
	size_t rot = max_sz((size_t)hp->n_rot, (size_t)hp->n_rot_swa);
	size_t qw = (size_t)hp->n_head * hd, aw = (size_t)hp->n_head * dv;
	size_t kw = (size_t)hp->n_head_kv * hd, vw = (size_t)hp->n_head_kv * dv;
	*s = (struct fwd_scratch){ .n_max = n_max, .n_ctx = n_ctx, .n_threads = n_threads };
	/* The widest activation row any matmul converts, in the widest format. */
	size_t qb = 0;
	for (int il = 0; il < hp->n_layer + hp->n_nextn; il++) {
		const struct layer *L = &m->layers[il];
		const struct wmat *ws[LAYER_MATS];
		for (int i = 0; i < layer_mats(L, ws); i++)
			if (ws[i]->data)
				qb = max_sz(qb, op_matmul_scratch(ws[i], n_max));
		for (int x = 0; L->exp && x < 3 * hp->n_expert; x++)
			qb = max_sz(qb, op_matmul_scratch(&L->exp[x], 1));
	}
	qb = max_sz(qb, op_matmul_scratch(&m->output, n_max));
	for (int i = 0; i < hp->n_nextn; i++) {
		qb = max_sz(qb, op_matmul_scratch(&m->nextn[i].eh_proj, n_max));
		if (m->nextn[i].head.data)
			qb = max_sz(qb, op_matmul_scratch(&m->nextn[i].head, n_max));
	}
	s->x = scratch_alloc(s, n * hp->n_embd, sizeof(float));
	s->h = scratch_alloc(s, n * hp->n_embd, sizeof(float));
	s->o = scratch_alloc(s, n * hp->n_embd, sizeof(float));
	s->q = scratch_alloc(s, n * qw, sizeof(float));
	s->att = scratch_alloc(s, n * aw, sizeof(float));
	s->k = scratch_alloc(s, n * kw, sizeof(float));
	s->v = scratch_alloc(s, n * vw, sizeof(float));
	size_t ff = max_sz(max_sz((size_t)hp->n_ff, (size_t)hp->n_ff_exp), (size_t)hp->n_ff_shexp);
	s->gate = scratch_alloc(s, n * ff, sizeof(float));
	s->up = scratch_alloc(s, n * ff, sizeof(float));
	s->router = scratch_alloc(s, n * (size_t)(hp->n_expert ? hp->n_expert : 1), sizeof(float));
	s->exp_out = scratch_alloc(s, (size_t)hp->n_embd, sizeof(float));
	s->exp_in = scratch_alloc(s, (size_t)hp->n_embd, sizeof(float));
	if (hp->kv_lora > 0) {
		size_t w = (size_t)(hp->q_lora > 0 ? hp->q_lora : 0) + qw + (size_t)hp->kv_lora +
			   (size_t)hp->n_rot +
			   (size_t)hp->n_head * (size_t)(hp->head_dim - hp->n_rot + hp->head_dim_v);
		s->mla = scratch_alloc(s, n * w, sizeof(float));
		if (!s->mla || (size_t)hp->kv_lora > aw) {
			fwd_scratch_fini(s);
			return FX_E_NOMEM; /* the latent is normed into att: it must fit */
		}
	}
	size_t rows = (size_t)FWD_TOK_TILE * (size_t)hp->n_head; /* attention rows per thread */
	s->scores = scratch_alloc(s, (size_t)n_threads * (2 + FWD_KCHUNK) * rows, sizeof(float));
	s->qbuf = scratch_alloc(s, qb ? qb : 1, 1);
	s->vrow = scratch_alloc(s, (size_t)n_threads * (rows + 1) * dv, sizeof(float));
	/* A query converted for the K cache: f32 at most, or q8_0/q8_1 with
	 * the AVX2 kernels' scale arrays (q8_1's are the larger). */
	s->qconv_stride = max_sz(hd * sizeof(float), kern_act_row_bytes_max(FX_TYPE_Q8_1, (int64_t)hd));
	s->qconv_stride = (s->qconv_stride + 63) & ~(size_t)63;
	s->qconv = scratch_alloc(s, (size_t)n_threads * rows, s->qconv_stride);
	s->erow = scratch_alloc(s, m->tok_embd.row_bytes, 1);
	if (m->arch->attn_out_gate &&
	    (!(s->qg = scratch_alloc(s, n * 2 * qw, sizeof(float))) ||
	     !(s->qgate = scratch_alloc(s, n * qw, sizeof(float))))) {
		fwd_scratch_fini(s);
		return FX_E_NOMEM;
	}
	/* recur.c's per-row widths: a short convolution's [B; C; x] and y; a
	 * Mamba-2 mixer's in_proj output, conv output and y; a Gated
	 * DeltaNet's qkv, z, beta, alpha, conv output and o */
	size_t rw = 0, cd = (size_t)hp->ssm_inner + 2 * (size_t)hp->n_ssm_group * hp->ssm_state;
	bool par = false;
	for (int il = 0; il < hp->n_layer; il++) {
		par |= m->layers[il].par_mixer != MIX_NONE;
		if (m->layers[il].par_mixer == MIX_MAMBA2)
			rw = max_sz(rw, 2 * (size_t)hp->ssm_inner + 2 * cd + (size_t)hp->n_ssm_head);
		if (m->layers[il].mixer == MIX_SHORTCONV)
			rw = max_sz(rw, 4 * (size_t)hp->n_embd);
		if (m->layers[il].mixer == MIX_MAMBA2)
			rw = max_sz(rw, 2 * (size_t)hp->ssm_inner + 2 * cd + (size_t)hp->n_ssm_head);
		if (m->layers[il].mixer == MIX_GDN) {
			size_t gc = 2 * (size_t)hp->n_ssm_group * hp->ssm_state + (size_t)hp->ssm_inner;
			rw = max_sz(rw, 2 * gc + 2 * (size_t)hp->ssm_inner + 2 * (size_t)hp->n_ssm_head);
		}
	}
	if ((rw && !(s->rs = scratch_alloc(s, n * rw, sizeof(float)))) ||
	    (par && !(s->o2 = scratch_alloc(s, n * hp->n_embd, sizeof(float))))) {
		fwd_scratch_fini(s);
		return FX_E_NOMEM;
	}
	s->rope_rot = rot > 0 ? rot : 1;
	s->rope_tab = scratch_alloc(s, 2 * n * s->rope_rot, sizeof(float));
	for (int il = 0; il < hp->n_layer && !s->moe_acc; il++)
		if (m->layers[il].moe_pre_norm &&
		    !(s->moe_acc = scratch_alloc(s, (size_t)hp->n_embd, sizeof(float)))) {
			fwd_scratch_fini(s);
			return FX_E_NOMEM;
		}
	size_t lp = (size_t)hp->n_layer * (size_t)hp->n_embd_ple;
	if (lp && (!(s->ple = scratch_alloc(s, n * lp, sizeof(float))) ||
		   !(s->ple_g = scratch_alloc(s, n * lp, sizeof(float))))) {
		fwd_scratch_fini(s);
		return FX_E_NOMEM;
	}
	if (mtp && !(s->cat = scratch_alloc(s, n * 2 * (size_t)hp->n_embd, sizeof(float)))) {
		fwd_scratch_fini(s);
		return FX_E_NOMEM;
	}
	if (!s->x || !s->h || !s->o || !s->q || !s->att || !s->k || !s->v || !s->gate || !s->up ||
	    !s->scores || !s->qbuf || !s->vrow || !s->qconv || !s->erow || !s->rope_tab || !s->router || !s->exp_out ||
	    !s->exp_in) {
		fwd_scratch_fini(s);
		return FX_E_NOMEM;
	}
	return FX_OK;
}

void fwd_scratch_fini(struct fwd_scratch *s)
{
	float *bufs[] = { s->x, s->h, s->o, s->q, s->att, s->k, s->v, s->gate, s->up, s->scores,
			  s->vrow, s->router, s->exp_out, s->exp_in, s->mla, s->rope_tab, s->rs, s->qg, s->qgate,
			  s->o2, s->ple, s->ple_g, s->moe_acc, s->cat };
	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		fx_free(bufs[i]);
	fx_free(s->qbuf);
	fx_free(s->qconv);
	fx_free(s->erow);
	memset(s, 0, sizeof(*s));
}

/* Rows of the embedding matrix e for tok[n] into x [n, n_embd], times
 * sc. */
static void embed_rows(const struct wmat *e, int64_t d, float sc, const fx_token *tok, int32_t n,
		       float *x, void *erow)
{
	const struct fx_type_traits *tt = fx_type_get(e->type);
	for (int32_t t = 0; t < n; t++) {
		float *row = x + (size_t)t * d;
		const uint8_t *src = (const uint8_t *)e->data + (size_t)tok[t] * e->row_bytes;
		if (e->x8) { /* repacked with a tied lm head */
			kern_x8_unpack_row(e->type, d, src - (size_t)(tok[t] % 8) * e->row_bytes,
					   tok[t] % 8, erow);
			src = erow;
		}
		tt->to_float(src, row, d);
		if (sc != 1.0f)
			for (int64_t i = 0; i < d; i++)
				row[i] *= sc;
	}
}

static void embed(const struct fx_model *m, const fx_token *tok, int32_t n, float *x, void *erow)
{
	int64_t d = m->hp.n_embd;
	/* Gemma scales by sqrt(n_embd), Granite by embedding_scale. */
	float sc = (m->arch->embd_scale ? sqrtf((float)d) : 1.0f) * m->hp.embd_mul;
	embed_rows(&m->tok_embd, d, sc, tok, n, x, erow);
}

/* RMSNorm each row; w NULL (no pre norm, OLMo 2) copies the rows. */
static void norm_rows(const float *x, const float *w, int32_t n, int64_t d, float eps, float *out)
{
	if (!w) {
		if (out != x)
			memcpy(out, x, (size_t)n * (size_t)d * sizeof(float));
		return;
	}
	for (int32_t t = 0; t < n; t++)
		op_rmsnorm(x + (size_t)t * d, w, d, eps, out + (size_t)t * d);
}

/* The rows' work between sublayers, split over the pool by rows (each
 * row's operations are the same whatever the split): the finished
 * sublayer's output o gets its post norm (post_w, or none), joins the
 * residual stream (x += mul * o; Granite's residual_multiplier, 1
 * elsewhere), and h = the next sublayer's pre norm of x (norm_w; NULL
 * copies x, OLMo 2 has none). o NULL: only the norm; pre false: no norm
 * (after the last layer). */
struct rows_args {
	float *x, *o, *h;
	const float *post_w, *norm_w;
	bool pre;
	int32_t n;
	int64_t d;
	float eps, mul;
};

static void rows_worker(void *arg, int ith, int nth)
{
	const struct rows_args *a = arg;
	long t0, t1;
	fx_split(a->n, ith, nth, &t0, &t1);
	for (long t = t0; t < t1; t++) {
		float *x = a->x + (size_t)t * a->d, *h = a->h + (size_t)t * a->d;
		if (a->o) {
			float *o = a->o + (size_t)t * a->d;
			if (a->post_w)
				op_rmsnorm(o, a->post_w, a->d, a->eps, o);
			if (a->mul == 1.0f) {
				for (int64_t i = 0; i < a->d; i++)
					x[i] += o[i];
			} else {
				for (int64_t i = 0; i < a->d; i++)
					x[i] += o[i] * a->mul;
			}
		}
		if (a->pre && a->norm_w)
			op_rmsnorm(x, a->norm_w, a->d, a->eps, h);
		else if (a->pre)
			memcpy(h, x, (size_t)a->d * sizeof(float));
	}
}

static void rows_step(struct fx_pool *pool, const struct fx_model *m, struct fwd_scratch *s,
		      float *o, const float *post_w, bool pre, const float *norm_w, int32_t n)
{
	struct rows_args a = { .x = s->x, .o = o, .h = s->h, .post_w = post_w, .norm_w = norm_w,
			       .pre = pre, .n = n, .d = m->hp.n_embd, .eps = m->hp.eps,
			       .mul = m->hp.residual_mul };
	if (n > 1)
		fx_pool_run(pool, rows_worker, &a);
	else
		rows_worker(&a, 0, 1);
}

/* Gemma 4's per-layer inputs (Gemma4TextModel.get_per_layer_inputs and
 * project_per_layer_inputs) from the scaled embeddings s->x [n, n_embd]
 * into s->ple [n][n_layer][P]: per layer, (RMSNorm(per_layer_model_proj(x)
 * / sqrt(n_embd)) * per_layer_proj_norm + per_layer_token_embd[tok] *
 * sqrt(P)) / sqrt(2). */
static void ple_inputs(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		       const fx_token *tok, int32_t n)
{
	const struct hparams *hp = &m->hp;
	int64_t P = hp->n_embd_ple, LP = (int64_t)hp->n_layer * P;
	const struct fx_type_traits *tt = fx_type_get(m->ple_embd.type);
	float ps = 1.0f / sqrtf((float)hp->n_embd), ts = sqrtf((float)P), r2 = 1.0f / sqrtf(2.0f);
	op_matmul(pool, &m->ple_model_proj, s->x, n, s->ple, s->qbuf);
	for (int32_t t = 0; t < n; t++) {
		float *row = s->ple + (size_t)t * LP, *tk = s->ple_g;
		tt->to_float((const uint8_t *)m->ple_embd.data + (size_t)tok[t] * m->ple_embd.row_bytes, tk, LP);
		for (int64_t l = 0; l < hp->n_layer; l++) {
			float *p = row + l * P;
			for (int64_t i = 0; i < P; i++)
				p[i] *= ps;
			op_rmsnorm(p, m->ple_proj_norm, P, hp->eps, p);
			for (int64_t i = 0; i < P; i++)
				p[i] = (p[i] + tk[l * P + i] * ts) * r2;
		}
	}
}

/* After layer il's last sublayer (its residual added, no pre norm yet):
 * Gemma 4's per-layer input, x += post_norm(proj(gelu_tanh(inp_gate x) *
 * ple[il])), then the residual stream times layer_output_scale
 * (Gemma4TextDecoderLayer.forward). */
static void layer_tail(const struct fx_model *m, int il, struct fx_pool *pool,
		       struct fwd_scratch *s, int32_t n)
{
	const struct layer *L = &m->layers[il];
	int64_t d = m->hp.n_embd, P = m->hp.n_embd_ple, LP = (int64_t)m->hp.n_layer * P;
	if (L->ple_gate.data) {
		kern_glu_fn gelu = fx_pool_kernels(pool)->glu[KERN_GLU_GELU];
		op_matmul(pool, &L->ple_gate, s->x, n, s->ple_g, s->qbuf);
		for (int32_t t = 0; t < n; t++)
			gelu(s->ple_g + (size_t)t * P, s->ple + (size_t)t * LP + (size_t)il * P, P);
		op_matmul(pool, &L->ple_proj, s->ple_g, n, s->o, s->qbuf);
		rows_step(pool, m, s, s->o, L->ple_norm, false, NULL, n);
	}
	if (L->out_scale) {
		size_t nd = (size_t)n * (size_t)d;
		for (size_t i = 0; i < nd; i++)
			s->x[i] *= L->out_scale[0];
	}
}

/* Each layer's token mixer by its kind (struct layer's mixer): one body,
 * the mixer a field of the layer. */
typedef void (*mixer_fn)(const struct fx_model *m, int il, struct fx_pool *pool,
			 struct fwd_scratch *s, const struct kv_view *kv, const int32_t *pos,
			 int32_t n, const float *h, float *out);
static const mixer_fn mixers[] = {
	[MIX_ATTN] = attn_forward,
	[MIX_SHORTCONV] = shortconv_forward,
	[MIX_MAMBA2] = mamba2_forward,
	[MIX_GDN] = gdn_forward,
};

/* Layer il's token mixing of s->h into s->o: its mixer, plus a parallel
 * one's output when it has one (Falcon-H1). */
static void mix(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		const struct kv_view *kv, const int32_t *pos, int32_t n)
{
	const struct layer *L = &m->layers[il];
	mixers[L->mixer](m, il, pool, s, kv, pos, n, s->h, s->o);
	if (L->par_mixer == MIX_NONE)
		return;
	mixers[L->par_mixer](m, il, pool, s, kv, pos, n, s->h, s->o2);
	size_t nd = (size_t)n * (size_t)m->hp.n_embd;
	for (size_t i = 0; i < nd; i++)
		s->o[i] += s->o2[i];
}

/* Layers [il0, il1) on the residual stream s->x [n, n_embd], s->h
 * holding layer il0's pre norm of it; afterwards s->x is the last layer's
 * output (no final norm). Captures hidden states (s->capture) per layer. */
static void run_layers(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		       const struct kv_view *kv, const int32_t *pos, int32_t n, int il0, int il1)
{
	size_t nd = (size_t)n * (size_t)m->hp.n_embd;
	s->rope_key[0] = s->rope_key[1] = NULL; /* new positions: no RoPE table yet */
	for (int il = il0; il < il1; il++) {
		const struct layer *L = &m->layers[il];
		/* tail: Gemma 4's per-layer input and output scale come after
		 * the layer's last residual add, before the next pre norm */
		bool tail = L->out_scale || L->ple_gate.data;
		bool more = il + 1 < il1, pre = more && !tail;
		const float *next_norm = more ? m->layers[il + 1].attn_norm : NULL;
		if (L->mixer == MIX_NONE) {
			/* the MLP is the layer: on this layer's pre-norm, in h */
			ffn_forward(m, il, pool, s, n, s->h, s->o);
			rows_step(pool, m, s, s->o, L->post_ffn_norm, pre, next_norm, n);
		} else if (L->has_ffn) {
			mix(m, il, pool, s, kv, pos, n);
			rows_step(pool, m, s, s->o, L->post_attn_norm, true, L->ffn_norm, n);
			ffn_forward(m, il, pool, s, n, s->h, s->o);
			rows_step(pool, m, s, s->o, L->post_ffn_norm, pre, next_norm, n);
		} else {
			mix(m, il, pool, s, kv, pos, n);
			rows_step(pool, m, s, s->o, L->post_attn_norm, pre, next_norm, n);
		}
		if (tail) {
			layer_tail(m, il, pool, s, n);
			if (more)
				rows_step(pool, m, s, NULL, NULL, true, next_norm, n);
		}
		if (s->capture && more)
			memcpy(s->capture + (size_t)(il + 1) * nd, s->x, nd * sizeof(float));
	}
}

/* The final norm (norm_w) of every row of s->x into hidden [n, n_embd]
 * when it is not NULL, and of the wanted rows through the LM head out into
 * logits [n_wanted, n_vocab] (Granite's logit scale, the final softcap).
 * Each row's norm is the same operation either way. */
static void lm_head(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		    const float *norm_w, const struct wmat *out, int32_t n, const bool *want,
		    float *logits, float *hidden)
{
	const struct hparams *hp = &m->hp;
	int64_t d = hp->n_embd;
	if (hidden)
		norm_rows(s->x, norm_w, n, d, hp->eps, hidden);
	/* Only the rows whose logits are wanted go through the LM head. */
	int32_t n_out = 0;
	for (int32_t t = 0; want && t < n; t++) {
		if (!want[t])
			continue;
		float *dst = s->h + (size_t)n_out++ * d;
		if (hidden)
			memcpy(dst, hidden + (size_t)t * d, (size_t)d * sizeof(float));
		else
			norm_rows(s->x + (size_t)t * d, norm_w, 1, d, hp->eps, dst);
	}
	if (!n_out)
		return;
	op_matmul(pool, out, s->h, n_out, logits, s->qbuf);
	size_t nl = (size_t)n_out * (size_t)hp->n_vocab;
	if (hp->logit_div != 1.0f)
		for (size_t i = 0; i < nl; i++)
			logits[i] /= hp->logit_div;
	if (hp->final_softcap > 0)
		for (size_t i = 0; i < nl; i++)
			logits[i] = hp->final_softcap * tanhf(logits[i] / hp->final_softcap);
}

void model_forward(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		   const struct kv_view *kv, const fx_token *tok, const int32_t *pos, int32_t n,
		   const bool *want, float *logits, float *hidden)
{
	const struct hparams *hp = &m->hp;
	int64_t d = hp->n_embd;
	size_t nd = (size_t)n * (size_t)d;
	embed(m, tok, n, s->x, s->erow);
	if (m->ple_embd.data)
		ple_inputs(m, pool, s, tok, n);
	if (s->capture)
		memcpy(s->capture, s->x, nd * sizeof(float));
	rows_step(pool, m, s, NULL, NULL, true, m->layers[0].attn_norm, n);
	run_layers(m, pool, s, kv, pos, n, 0, hp->n_layer);
	if (s->capture) {
		float *last = s->capture + (size_t)hp->n_layer * nd;
		norm_rows(s->x, m->output_norm, n, d, hp->eps, last);
	}
	lm_head(m, pool, s, m->output_norm, &m->output, n, want, logits, hidden);
}

void model_forward_mtp(const struct fx_model *m, int blk, struct fx_pool *pool,
		       struct fwd_scratch *s, const struct kv_view *kv, const fx_token *tok,
		       const float *h_in, const int32_t *pos, int32_t n, const bool *want,
		       float *logits, float *hidden)
{
	const struct hparams *hp = &m->hp;
	const struct nextn *x = &m->nextn[blk];
	int64_t d = hp->n_embd;
	int il = hp->n_layer + blk;
	/* [enorm(embd(t)); hnorm(h)] per row, then eh_proj: the block's input */
	embed_rows(x->embd.data ? &x->embd : &m->tok_embd, d, 1.0f, tok, n, s->h, s->erow);
	for (int32_t t = 0; t < n; t++) {
		float *c = s->cat + (size_t)t * 2 * (size_t)d;
		op_rmsnorm(s->h + (size_t)t * d, x->enorm, d, hp->eps, c);
		op_rmsnorm(h_in + (size_t)t * d, x->hnorm, d, hp->eps, c + d);
	}
	op_matmul(pool, &x->eh_proj, s->cat, n, s->x, s->qbuf);
	rows_step(pool, m, s, NULL, NULL, true, m->layers[il].attn_norm, n);
	run_layers(m, pool, s, kv, pos, n, il, il + 1);
	lm_head(m, pool, s, x->head_norm ? x->head_norm : m->output_norm,
		x->head.data ? &x->head : &m->output, n, want, logits, hidden);
}
