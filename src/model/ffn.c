/* The MLP half of a decoder layer: a gated MLP (Shazeer 2020, "GLU Variants
 * Improve Transformer"): down(act(gate h) * up h), or a mixture of such
 * experts chosen per token by a router (Shazeer et al. 2017; Mixtral, Jiang
 * et al. 2024), with an optional always-on shared expert (Qwen2-MoE). */
#include <math.h>
#include <string.h>

#include "model/forward.h"

/* out[n, n_embd] = down(act(gate h) * up h) through scratch gate/up. */
static void glu(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		const struct wmat *gate, const struct wmat *up, const struct wmat *down, int32_t n,
		const float *h, float *out)
{
	size_t nf = (size_t)n * (size_t)gate->n_out;
	op_matmul(pool, gate, h, n, s->gate, s->qbuf);
	op_matmul(pool, up, h, n, s->up, s->qbuf);
	if (m->arch->act == ACT_GELU_TANH && m->hp.gelu_f16) {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_gelu_tanh_f16(s->gate[i]) * s->up[i];
	} else if (m->arch->act == ACT_GELU_TANH) {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_gelu_tanh(s->gate[i]) * s->up[i];
	} else {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_silu(s->gate[i]) * s->up[i];
	}
	op_matmul(pool, down, s->gate, n, out, s->qbuf);
}

/* The kept experts of one token: softmax over all router logits, the top k
 * (lower index first on ties), optionally renormalised to sum to 1. */
static int route_softmax_topk(const struct hparams *hp, float *p, int *idx, float *w)
{
	op_softmax(p, hp->n_expert);
	int k = hp->n_expert_used;
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int x = 0; x < hp->n_expert; x++) {
			bool taken = false;
			for (int i = 0; i < j; i++)
				taken |= idx[i] == x;
			if (!taken && (best < 0 || p[x] > p[best]))
				best = x;
		}
		idx[j] = best;
		w[j] = p[best];
	}
	if (hp->expert_norm) {
		float sum = 0;
		for (int j = 0; j < k; j++)
			sum += w[j];
		for (int j = 0; j < k; j++)
			w[j] /= sum;
	}
	return k;
}

static void moe(const struct fx_model *m, const struct layer *L, struct fx_pool *pool,
		struct fwd_scratch *s, int32_t n, const float *h, float *out)
{
	const struct hparams *hp = &m->hp;
	int64_t d = hp->n_embd;
	int idx[64];
	float w[64];
	op_matmul(pool, &L->router, h, n, s->router, s->qbuf);
	/* One token at a time: its result depends on nothing else in the batch. */
	for (int32_t t = 0; t < n; t++) {
		const float *ht = h + (size_t)t * d;
		float *ot = out + (size_t)t * d;
		int k = route_softmax_topk(hp, s->router + (size_t)t * hp->n_expert, idx, w);
		memset(ot, 0, (size_t)d * sizeof(float));
		for (int j = 0; j < k; j++) {
			const struct wmat *e = &L->exp[3 * idx[j]];
			glu(m, pool, s, &e[0], &e[1], &e[2], 1, ht, s->exp_out);
			for (int64_t i = 0; i < d; i++)
				ot[i] += w[j] * s->exp_out[i];
		}
		if (L->sh_gate.data) {
			glu(m, pool, s, &L->sh_gate, &L->sh_up, &L->sh_down, 1, ht, s->exp_out);
			float g = 1.0f;
			if (L->sh_router) {
				float z = 0;
				for (int64_t i = 0; i < d; i++)
					z += L->sh_router[i] * ht[i];
				g = 1.0f / (1.0f + expf(-z));
			}
			for (int64_t i = 0; i < d; i++)
				ot[i] += g * s->exp_out[i];
		}
	}
}

void ffn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 int32_t n, const float *h, float *out)
{
	const struct layer *L = &m->layers[il];
	if (L->router.data)
		moe(m, L, pool, s, n, h, out);
	else
		glu(m, pool, s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, n, h, out);
}
