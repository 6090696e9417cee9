/* The MLP half of a decoder layer: a gated MLP (Shazeer 2020, "GLU Variants
 * Improve Transformer"): down(act(gate h) * up h) (or, ACT_RELU2, the
 * non-gated down(relu(up h)^2)), or a mixture of such
 * experts chosen per token by a router (Shazeer et al. 2017; Mixtral, Jiang
 * et al. 2024), with an optional always-on shared expert (Qwen2-MoE). */
#include <math.h>
#include <string.h>

#include "kernels/kern.h"
#include "model/forward.h"

static void add_bias(float *x, const float *b, int32_t n, int64_t width)
{
	for (int32_t t = 0; t < n; t++)
		for (int64_t i = 0; i < width; i++)
			x[(size_t)t * width + i] += b[i];
}

struct glu_args {
	int act;           /* enum of the arch row's activation */
	float lim;         /* gpt-oss clamp */
	float *gate;       /* [n] in: gate projection; out: act(gate) * up */
	const float *up;   /* [n] */
	long n;
	kern_glu_fn glu;   /* silu / GELU row kernel of the pool's set */
};

/* Elementwise GLU over a slice; each element's value is independent of
 * the split. */
static void glu_worker(void *arg, int ith, int nth)
{
	const struct glu_args *a = arg;
	long i0, i1;
	fx_split(a->n, ith, nth, &i0, &i1);
	float *g = a->gate;
	const float *u = a->up;
	if (a->act == ACT_RELU2) {
		for (long i = i0; i < i1; i++) {
			float r = fmaxf(g[i], 0.0f);
			g[i] = r * r;
		}
	} else if (a->act == ACT_SWIGLU_OAI) {
		for (long i = i0; i < i1; i++) {
			float gg = fminf(g[i], a->lim), uu = fmaxf(fminf(u[i], a->lim), -a->lim);
			g[i] = gg / (1.0f + expf(-1.702f * gg)) * (uu + 1.0f);
		}
	} else {
		a->glu(g + i0, u + i0, i1 - i0);
	}
}

/* out[n, n_embd] = down(act(gate h) * up h) through scratch gate/up; the
 * biases b[3] (gate, up, down; each may be NULL) are added after each
 * projection. */
static void glu(const struct fx_model *m, struct fx_pool *pool, struct fwd_scratch *s,
		const struct wmat *gate, const struct wmat *up, const struct wmat *down,
		const float *const b[3], int32_t n, const float *h, float *out)
{
	if (m->arch->act == ACT_RELU2) {
		/* non-gated: act(up h) in place of act(gate h) * up h */
		op_matmul(pool, up, h, n, s->gate, s->qbuf);
		if (b && b[1])
			add_bias(s->gate, b[1], n, up->n_out);
	} else {
		const struct wmat *w[] = { gate, up };
		float *y[] = { s->gate, s->up };
		op_matmul_n(pool, 2, w, h, n, y, s->qbuf);
		if (b && b[0])
			add_bias(s->gate, b[0], n, gate->n_out);
		if (b && b[1])
			add_bias(s->up, b[1], n, up->n_out);
	}
	struct glu_args ga = { .act = m->arch->act, .lim = m->hp.swiglu_limit, .gate = s->gate,
			       .up = s->up, .n = (long)n * (long)up->n_out,
			       .glu = fx_pool_kernels(pool)->glu[m->arch->act == ACT_GELU_TANH ? KERN_GLU_GELU
												      : KERN_GLU_SILU] };
	if (ga.n >= 4096)
		fx_pool_run(pool, glu_worker, &ga);
	else
		glu_worker(&ga, 0, 1);
	op_matmul(pool, down, s->gate, n, out, s->qbuf);
	if (b && b[2])
		add_bias(out, b[2], n, down->n_out);
}

/* idx[0..k) = the k largest scores (among allowed ones, if given), largest
 * first, the lower index first on ties: a fixed order, so routing never
 * depends on the batch. */
static void top_k(const float *score, int n, int k, const bool *allowed, int *idx)
{
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int x = 0; x < n; x++) {
			bool taken = allowed && !allowed[x];
			for (int i = 0; i < j; i++)
				taken |= idx[i] == x;
			if (!taken && (best < 0 || score[x] > score[best]))
				best = x;
		}
		idx[j] = best;
	}
}

/* The kept experts of one token: softmax over all router logits, the top k
 * (lower index first on ties) of the probabilities, or of probabilities +
 * bias when the layer has a selection bias (ERNIE 4.5 MoE's moe_statics:
 * Ernie4_5_MoeTopKRouter), weighted by the plain probabilities, optionally
 * renormalised to sum to 1. */
static int route_softmax_topk(const struct hparams *hp, const float *bias, float *p, int *idx,
			      float *w)
{
	op_softmax(p, hp->n_expert);
	int k = hp->n_expert_used;
	if (bias) {
		float choice[1024];
		for (int x = 0; x < hp->n_expert; x++)
			choice[x] = p[x] + bias[x];
		top_k(choice, hp->n_expert, k, NULL, idx);
	} else {
		top_k(p, hp->n_expert, k, NULL, idx);
	}
	for (int j = 0; j < k; j++)
		w[j] = p[idx[j]];
	if (hp->expert_norm) {
		float sum = 0;
		for (int j = 0; j < k; j++)
			sum += w[j];
		for (int j = 0; j < k; j++)
			w[j] /= sum;
	}
	return k;
}

/* The top k of the router logits, then softmax over those k (gpt-oss). */
static int route_topk_softmax(const struct hparams *hp, float *p, int *idx, float *w)
{
	int k = hp->n_expert_used;
	top_k(p, hp->n_expert, k, NULL, idx);
	for (int j = 0; j < k; j++)
		w[j] = p[idx[j]];
	op_softmax(w, k);
	return k;
}

/* Llama 4 (Llama4Router): the top k of the logits, each weighted by its
 * sigmoid. */
static int route_topk_sigmoid(const struct hparams *hp, const float *p, int *idx, float *w)
{
	int k = hp->n_expert_used;
	top_k(p, hp->n_expert, k, NULL, idx);
	for (int j = 0; j < k; j++)
		w[j] = 1.0f / (1.0f + expf(-p[idx[j]]));
	return k;
}

/* DeepSeek-V3: sigmoid scores; experts chosen by score + bias, only from
 * the n_group_used groups whose two best biased scores sum highest; the
 * weights are the plain scores, renormalised, times expert_scale. */
static int route_sigmoid_bias(const struct hparams *hp, const float *bias, float *p, int *idx,
			      float *w)
{
	int ne = hp->n_expert, per = ne / hp->n_group, k = hp->n_expert_used;
	float choice[1024];
	bool allowed[1024];
	for (int x = 0; x < ne; x++) {
		p[x] = 1.0f / (1.0f + expf(-p[x]));
		choice[x] = p[x] + bias[x];
		allowed[x] = hp->n_group == 1;
	}
	if (hp->n_group > 1) {
		float gs[1024];
		for (int g = 0; g < hp->n_group; g++) {
			float b1 = -INFINITY, b2 = -INFINITY;
			for (int x = g * per; x < (g + 1) * per; x++) {
				if (choice[x] > b1) {
					b2 = b1;
					b1 = choice[x];
				} else if (choice[x] > b2) {
					b2 = choice[x];
				}
			}
			gs[g] = per > 1 ? b1 + b2 : b1;
		}
		for (int j = 0; j < hp->n_group_used; j++) {
			int best = -1;
			for (int g = 0; g < hp->n_group; g++)
				if (!allowed[g * per] && (best < 0 || gs[g] > gs[best]))
					best = g;
			for (int x = best * per; x < (best + 1) * per; x++)
				allowed[x] = true;
		}
	}
	float sum = 0;
	top_k(choice, ne, k, allowed, idx);
	for (int j = 0; j < k; j++) {
		w[j] = p[idx[j]];
		sum += w[j];
	}
	for (int j = 0; j < k; j++)
		w[j] = (hp->expert_norm ? w[j] / (sum + 1e-20f) : w[j]) * hp->expert_scale;
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
		float *rl = s->router + (size_t)t * hp->n_expert;
		if (L->router_b)
			for (int x = 0; x < hp->n_expert; x++)
				rl[x] += L->router_b[x];
		int k = m->arch->router == ROUTER_TOPK_SOFTMAX ? route_topk_softmax(hp, rl, idx, w)
			: m->arch->router == ROUTER_TOPK_SIGMOID ? route_topk_sigmoid(hp, rl, idx, w)
			: m->arch->router == ROUTER_SIGMOID_BIAS ? route_sigmoid_bias(hp, L->exp_probs_b, rl, idx, w)
							       : route_softmax_topk(hp, L->exp_probs_b, rl, idx, w);
		memset(ot, 0, (size_t)d * sizeof(float));
		for (int j = 0; j < k; j++) {
			const struct wmat *e = &L->exp[3 * idx[j]];
			const float *b[3];
			for (int q = 0; q < 3; q++)
				b[q] = L->exp_b[q] ? L->exp_b[q] + (size_t)idx[j] * e[q].n_out : NULL;
			if (m->arch->moe_weight_in) { /* Llama 4: expert(w x) */
				for (int64_t i = 0; i < d; i++)
					s->exp_in[i] = ht[i] * w[j];
				glu(m, pool, s, &e[0], &e[1], &e[2], b, 1, s->exp_in, s->exp_out);
				for (int64_t i = 0; i < d; i++)
					ot[i] += s->exp_out[i];
				continue;
			}
			glu(m, pool, s, &e[0], &e[1], &e[2], b, 1, ht, s->exp_out);
			for (int64_t i = 0; i < d; i++)
				ot[i] += w[j] * s->exp_out[i];
		}
		if (L->sh_up.data) {
			glu(m, pool, s, &L->sh_gate, &L->sh_up, &L->sh_down, NULL, 1, ht, s->exp_out);
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

/* Gemma 4's MoE beside the dense MLP (Gemma4TextDecoderLayer.forward,
 * Gemma4TextRouter, Gemma4TextExperts): out = post_1(MLP(h)) +
 * post_2(experts), the experts on RMSNorm(x) pre_2 and routed from
 * RMSNorm(x) (no weight) x router_scale / sqrt(n_embd), where x is the
 * residual stream s->x; h [n, n_embd] is overwritten once the dense MLP has
 * read it. */
static void moe_parallel(const struct fx_model *m, const struct layer *L, struct fx_pool *pool,
			 struct fwd_scratch *s, int32_t n, float *h, float *out)
{
	const struct hparams *hp = &m->hp;
	int64_t d = hp->n_embd;
	int idx[64];
	float w[64], rs = 1.0f / sqrtf((float)d);
	glu(m, pool, s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, NULL, n, h, out);
	for (int32_t t = 0; t < n; t++) {
		float *ht = h + (size_t)t * d;
		op_rmsnorm(out + (size_t)t * d, L->moe_post_norm_1, d, hp->eps, out + (size_t)t * d);
		op_rmsnorm(s->x + (size_t)t * d, NULL, d, hp->eps, ht);
		for (int64_t i = 0; i < d; i++)
			ht[i] = ht[i] * L->router_scale[i] * rs;
	}
	op_matmul(pool, &L->router, h, n, s->router, s->qbuf);
	for (int32_t t = 0; t < n; t++) {
		float *ht = h + (size_t)t * d, *ot = out + (size_t)t * d, *acc = s->moe_acc;
		op_rmsnorm(s->x + (size_t)t * d, L->moe_pre_norm, d, hp->eps, ht);
		int k = route_softmax_topk(hp, NULL, s->router + (size_t)t * hp->n_expert, idx, w);
		memset(acc, 0, (size_t)d * sizeof(float));
		for (int j = 0; j < k; j++) {
			const struct wmat *e = &L->exp[3 * idx[j]];
			float wj = w[j] * L->exp_scale[idx[j]];
			glu(m, pool, s, &e[0], &e[1], &e[2], NULL, 1, ht, s->exp_out);
			for (int64_t i = 0; i < d; i++)
				acc[i] += wj * s->exp_out[i];
		}
		op_rmsnorm(acc, L->moe_post_norm_2, d, hp->eps, acc);
		for (int64_t i = 0; i < d; i++)
			ot[i] += acc[i];
	}
}

void ffn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 int32_t n, float *h, float *out)
{
	const struct layer *L = &m->layers[il];
	if (L->moe_pre_norm)
		moe_parallel(m, L, pool, s, n, h, out);
	else if (L->router.data)
		moe(m, L, pool, s, n, h, out);
	else
		glu(m, pool, s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, NULL, n, h, out);
}
