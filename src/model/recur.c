/* Recurrent mixers: layers that carry a per-sequence state from token to
 * token instead of attending over a K/V cache. The state lives in the
 * sequence's slot of the recurrent backing (kv_view.rs, at the layer's
 * rs_off) and is updated in place in the step form, one token after
 * another in row order (a sequence's rows of a ubatch are in position
 * order), so a token's result never depends on where a ubatch starts or
 * on how many sequences share it: batch invariance by construction, as
 * llama.cpp's ssm_conv / ssm_scan step. The projections around the step
 * are ordinary matmuls over all rows. */
#include "model/forward.h"

#include "kernels/kern.h"

/* One gated short-convolution step per row over channels [c0, c1). */
struct shortconv_args {
	const struct layer *L;
	const struct kv_view *kv;
	const float *bcx; /* [n][3 n_embd]: B, C, x */
	float *y;         /* [n][n_embd] */
	int32_t n;
	int64_t e;
	int k;            /* taps */
};

static void shortconv_worker(void *arg, int ith, int nth)
{
	const struct shortconv_args *a = arg;
	long c0, c1;
	fx_split((long)a->e, ith, nth, &c0, &c1);
	int64_t e = a->e;
	int k = a->k;
	for (int32_t t = 0; t < a->n; t++) {
		const float *b = a->bcx + (size_t)t * 3 * e, *cg = b + e, *x = b + 2 * e;
		/* the conv window: k - 1 earlier inputs per channel, oldest first */
		float *st = a->kv[t].rs + a->L->rs_off;
		float *y = a->y + (size_t)t * e;
		for (long c = c0; c < c1; c++) {
			const float *w = a->L->sc_conv + (size_t)c * k;
			float bx = b[c] * x[c], acc = 0.0f;
			for (int j = 0; j < k - 1; j++)
				acc += w[j] * st[(size_t)j * e + c];
			acc += w[k - 1] * bx;
			for (int j = 0; j + 1 < k - 1; j++)
				st[(size_t)j * e + c] = st[(size_t)(j + 1) * e + c];
			if (k > 1)
				st[(size_t)(k - 2) * e + c] = bx;
			y[c] = cg[c] * acc;
		}
	}
}

void shortconv_forward(const struct fx_model *m, int il, struct fx_pool *pool,
		       struct fwd_scratch *s, const struct kv_view *kv, const int32_t *pos,
		       int32_t n, const float *h, float *out)
{
	(void)pos; /* the state is the position */
	const struct layer *L = &m->layers[il];
	int64_t e = m->hp.n_embd;
	float *bcx = s->rs, *y = s->rs + (size_t)n * 3 * e;
	op_matmul(pool, &L->sc_in, h, n, bcx, s->qbuf);
	struct shortconv_args a = { .L = L, .kv = kv, .bcx = bcx, .y = y, .n = n, .e = e,
				    .k = m->hp.conv_kernel };
	fx_pool_run(pool, shortconv_worker, &a);
	op_matmul(pool, &L->sc_out, y, n, out, s->qbuf);
}
