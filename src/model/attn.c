/* The attention half of a decoder layer, written once. Decorations come
 * from the architecture row and hparams; where K/V rows live comes from the
 * kv_view. Sources: Vaswani et al. 2017 (scaled dot-product attention),
 * Ainslie et al. 2023 (GQA), Su et al. 2021 (RoPE), Beltagy et al. 2020
 * (sliding window), Gemma 2 report (attention softcap). */
#include <math.h>
#include <string.h>

#include "model/forward.h"

struct attn_args {
	const struct fx_model *m;
	int il;
	struct fwd_scratch *s;
	const struct kv_view *kv;
	const int32_t *pos;
	int32_t n;
};

/* Per-head Q/K norm and RoPE on rows [n, n_heads * head_dim], in place. */
static void qk_decorate(const struct fx_model *m, const struct layer *L, float *x, int n_heads,
			const float *norm_w, const int32_t *pos, int32_t n)
{
	const struct hparams *hp = &m->hp;
	for (int32_t t = 0; t < n; t++) {
		for (int hh = 0; hh < n_heads; hh++) {
			float *head = x + ((size_t)t * n_heads + hh) * hp->head_dim;
			if (norm_w)
				op_rmsnorm(head, norm_w, hp->head_dim, hp->eps, head);
			op_rope(head, hp->n_rot, (float)pos[t], L->inv_freq, m->arch->rope == ROPE_NEOX);
		}
	}
}

/* One (token, head) pair: softmax(q·K^T * scale) V over the visible keys. */
static void attend_one(const struct attn_args *a, float *scores, int32_t t, int hh)
{
	const struct fx_model *m = a->m;
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[a->il];
	int g = hh / (hp->n_head / hp->n_head_kv); /* GQA: query heads share a KV head */
	const float *q = a->s->q + ((size_t)t * hp->n_head + hh) * hp->head_dim;
	float *out = a->s->att + ((size_t)t * hp->n_head + hh) * hp->head_dim_v;
	int32_t p = a->pos[t];
	int32_t lo = 0;
	if (L->swa && hp->n_swa > 0 && p - hp->n_swa + 1 > 0)
		lo = p - hp->n_swa + 1;
	int32_t nk = p - lo + 1;
	for (int32_t j = 0; j < nk; j++) {
		const float *k = kv_k_row(a->kv, a->il, lo + j) + (size_t)g * hp->head_dim;
		float d = 0;
		for (int i = 0; i < hp->head_dim; i++)
			d += q[i] * k[i];
		d *= hp->attn_scale;
		if (hp->attn_softcap > 0)
			d = hp->attn_softcap * tanhf(d / hp->attn_softcap);
		scores[j] = d;
	}
	op_softmax(scores, nk);
	memset(out, 0, (size_t)hp->head_dim_v * sizeof(float));
	for (int32_t j = 0; j < nk; j++) {
		const float *v = kv_v_row(a->kv, a->il, lo + j) + (size_t)g * hp->head_dim_v;
		float w = scores[j];
		for (int i = 0; i < hp->head_dim_v; i++)
			out[i] += w * v[i];
	}
}

static void attend_worker(void *arg, int ith, int nth)
{
	const struct attn_args *a = arg;
	int n_head = a->m->hp.n_head;
	float *scores = a->s->scores + (size_t)ith * a->s->n_ctx;
	long i0, i1;
	fx_split((long)a->n * n_head, ith, nth, &i0, &i1);
	for (long i = i0; i < i1; i++)
		attend_one(a, scores, (int32_t)(i / n_head), (int)(i % n_head));
}

void attn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		  const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h, float *out)
{
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[il];
	op_matmul(pool, &L->wq, h, n, s->q, s->qbuf);
	op_matmul(pool, &L->wk, h, n, s->k, s->qbuf);
	op_matmul(pool, &L->wv, h, n, s->v, s->qbuf);
	qk_decorate(m, L, s->q, hp->n_head, L->q_norm, pos, n);
	qk_decorate(m, L, s->k, hp->n_head_kv, L->k_norm, pos, n);
	size_t kw = (size_t)hp->n_head_kv * hp->head_dim, vw = (size_t)hp->n_head_kv * hp->head_dim_v;
	for (int32_t t = 0; t < n; t++) {
		memcpy(kv_k_row(kv, il, pos[t]), s->k + t * kw, kw * sizeof(float));
		memcpy(kv_v_row(kv, il, pos[t]), s->v + t * vw, vw * sizeof(float));
	}
	struct attn_args a = { .m = m, .il = il, .s = s, .kv = kv, .pos = pos, .n = n };
	fx_pool_run(pool, attend_worker, &a);
	op_matmul(pool, &L->wo, s->att, n, out, s->qbuf);
}
