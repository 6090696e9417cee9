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

#include <math.h>
#include <string.h>

#include "kernels/kern.h"

/* A conv window's channels [c0, c1) ([taps][ch] from st) into the same
 * place of the state kept for a roll-back after row t (kv_rs_kept), if
 * the view keeps one. */
static void keep_window(const struct kv_view *v, int32_t pos, int64_t off, const float *st, int taps,
			int64_t ch, long c0, long c1)
{
	float *kept = kv_rs_kept(v, pos);
	if (!kept)
		return;
	for (int j = 0; j < taps; j++)
		memcpy(kept + off + (size_t)j * ch + c0, st + (size_t)j * ch + c0, (size_t)(c1 - c0) * sizeof(float));
}

/* Floats [i0, i1) of a state part at off (st) into the kept state. */
static void keep_span(const struct kv_view *v, int32_t pos, int64_t off, const float *st, size_t i0, size_t i1)
{
	float *kept = kv_rs_kept(v, pos);
	if (kept)
		memcpy(kept + off + i0, st + i0, (i1 - i0) * sizeof(float));
}

/* One gated short-convolution step per row over channels [c0, c1). */
struct shortconv_args {
	const struct layer *L;
	const struct kv_view *kv;
	const int32_t *pos;
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
		keep_window(&a->kv[t], a->pos[t], a->L->rs_off, st, k - 1, e, c0, c1);
	}
}

void shortconv_forward(const struct fx_model *m, int il, struct fx_pool *pool,
		       struct fwd_scratch *s, const struct kv_view *kv, const int32_t *pos,
		       int32_t n, const float *h, float *out)
{
	const struct layer *L = &m->layers[il];
	int64_t e = m->hp.n_embd;
	float *bcx = s->rs, *y = s->rs + (size_t)n * 3 * e;
	op_matmul(pool, &L->sc_in, h, n, bcx, s->qbuf);
	struct shortconv_args a = { .L = L, .kv = kv, .pos = pos, .bcx = bcx, .y = y, .n = n, .e = e,
				    .k = m->hp.conv_kernel };
	fx_pool_run(pool, shortconv_worker, &a);
	op_matmul(pool, &L->sc_out, y, n, out, s->qbuf);
}

static float silu(float x)
{
	return x / (1.0f + expf(-x));
}

/* torch.nn.functional.softplus (beta 1, threshold 20). */
static float softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

/* A causal depthwise convolution + SiLU, one row (token) after another:
 * out[t][c] = silu(b[c] + sum_j w[c][j] window[j][c] + w[c][taps] in[t][c])
 * for channels [c0, c1) of ch, the window (the sequence's previous `taps`
 * inputs, oldest first, in kv[t].rs at off) shifted by one. Mamba-2's xBC
 * and the Gated DeltaNet's qkv (no bias) (HF causal_conv1d_update). */
struct conv_args {
	const struct kv_view *kv;
	const int32_t *pos;
	int64_t off;       /* floats into the state */
	const float *in;   /* [n][stride], the channels from in[t * stride] */
	size_t stride;
	float *out;        /* [n][ch] */
	const float *w, *b; /* [ch][taps + 1], [ch] or NULL */
	int64_t ch;
	int32_t n;
	int taps;
};

static void conv_worker(void *arg, int ith, int nth)
{
	const struct conv_args *a = arg;
	long c0, c1;
	fx_split((long)a->ch, ith, nth, &c0, &c1);
	int k = a->taps + 1;
	for (int32_t t = 0; t < a->n; t++) {
		const float *x = a->in + (size_t)t * a->stride;
		float *st = a->kv[t].rs + a->off;
		float *c = a->out + (size_t)t * a->ch;
		for (long ch = c0; ch < c1; ch++) {
			const float *w = a->w + (size_t)ch * k;
			float acc = a->b ? a->b[ch] : 0.0f;
			for (int j = 0; j < a->taps; j++)
				acc += w[j] * st[(size_t)j * a->ch + ch];
			acc += w[a->taps] * x[ch];
			for (int j = 0; j + 1 < a->taps; j++)
				st[(size_t)j * a->ch + ch] = st[(size_t)(j + 1) * a->ch + ch];
			if (a->taps > 0)
				st[(size_t)(a->taps - 1) * a->ch + ch] = x[ch];
			c[ch] = silu(acc);
		}
		keep_window(&a->kv[t], a->pos[t], a->off, st, a->taps, a->ch, c0, c1);
	}
}

struct mamba2_args {
	const struct fx_model *m;
	const struct layer *L;
	const struct kv_view *kv;
	const int32_t *pos;
	const float *p;   /* [n][di + cd + nh]: z, xBC, dt */
	float *c;         /* [n][cd]: conv + SiLU of xBC */
	float *y;         /* [n][di] */
	int32_t n;
	int64_t di, cd, nh, hd, ng, ns, pw;
	int taps;
};

/* The state update and output of heads [h0, h1), row by row. */
static void mamba2_scan_worker(void *arg, int ith, int nth)
{
	const struct mamba2_args *a = arg;
	const struct layer *L = a->L;
	long h0, h1;
	fx_split((long)a->nh, ith, nth, &h0, &h1);
	int64_t hd = a->hd, ns = a->ns, per_group = a->nh / a->ng;
	for (int32_t t = 0; t < a->n; t++) {
		const float *c = a->c + (size_t)t * a->cd;
		const float *dtr = a->p + (size_t)t * a->pw + a->di + a->cd;
		float *st = a->kv[t].rs + L->rs_off + (size_t)a->taps * a->cd; /* [nh][hd][ns] */
		float *y = a->y + (size_t)t * a->di;
		for (long h = h0; h < h1; h++) {
			int64_t g = h / per_group;
			const float *x = c + h * hd, *B = c + a->di + g * ns, *C = c + a->di + (a->ng + g) * ns;
			float dt = softplus(dtr[h] + L->ssm_dt_b[h]);
			float da = expf(dt * L->ssm_a[h]);
			for (int64_t i = 0; i < hd; i++) {
				float *sv = st + ((size_t)h * hd + i) * ns, xv = x[i], dx = dt * xv, acc = 0.0f;
				for (int64_t j = 0; j < ns; j++) {
					sv[j] = sv[j] * da + dx * B[j];
					acc += sv[j] * C[j];
				}
				y[h * hd + i] = acc + L->ssm_d[h] * xv;
			}
		}
		keep_span(&a->kv[t], a->pos[t], L->rs_off + (int64_t)a->taps * a->cd, st,
			  (size_t)h0 * hd * ns, (size_t)h1 * hd * ns);
	}
}

/* y * silu(z), RMS-normed per group of channels, times ssm_norm: rows
 * [t0, t1). */
static void mamba2_norm_worker(void *arg, int ith, int nth)
{
	const struct mamba2_args *a = arg;
	long t0, t1;
	fx_split(a->n, ith, nth, &t0, &t1);
	int64_t gs = a->di / a->ng;
	float eps = a->m->hp.eps;
	for (long t = t0; t < t1; t++) {
		const float *z = a->p + (size_t)t * a->pw;
		float *y = a->y + (size_t)t * a->di;
		for (int64_t i = 0; i < a->di; i++)
			y[i] *= silu(z[i]);
		for (int64_t g = 0; g < a->ng; g++) {
			float *yg = y + g * gs, ss = 0.0f;
			for (int64_t i = 0; i < gs; i++)
				ss += yg[i] * yg[i];
			float r = 1.0f / sqrtf(ss / (float)gs + eps);
			for (int64_t i = 0; i < gs; i++)
				yg[i] = yg[i] * r * a->L->ssm_norm[g * gs + i];
		}
	}
}

void mamba2_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		    const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h,
		    float *out)
{
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[il];
	struct mamba2_args a = { .m = m, .L = L, .kv = kv, .pos = pos, .n = n, .di = hp->ssm_inner,
				 .nh = hp->n_ssm_head, .ng = hp->n_ssm_group, .ns = hp->ssm_state,
				 .taps = hp->conv_kernel - 1 };
	a.cd = a.di + 2 * a.ng * a.ns;
	a.hd = a.di / a.nh;
	a.pw = a.di + a.cd + a.nh;
	float *p = s->rs;
	a.p = p;
	a.c = p + (size_t)n * a.pw;
	a.y = a.c + (size_t)n * a.cd;
	op_matmul(pool, &L->ssm_in, h, n, p, s->qbuf);
	struct conv_args ca = { .kv = kv, .pos = pos, .off = L->rs_off, .in = p + a.di, .stride = (size_t)a.pw,
				.out = a.c, .w = L->ssm_conv, .b = L->ssm_conv_b, .ch = a.cd, .n = n,
				.taps = a.taps };
	fx_pool_run(pool, conv_worker, &ca);
	fx_pool_run(pool, mamba2_scan_worker, &a);
	if (n > 1)
		fx_pool_run(pool, mamba2_norm_worker, &a);
	else
		mamba2_norm_worker(&a, 0, 1);
	op_matmul(pool, &L->ssm_out, a.y, n, out, s->qbuf);
}

/* ---- Gated DeltaNet ---------------------------------------------------- */

/* Largest key / value head width gdn_forward keeps on the stack (checked
 * at load: model/bind.c). */
enum { GDN_MAX_HEAD = 512 };

struct gdn_args {
	const struct fx_model *m;
	const struct layer *L;
	const struct kv_view *kv;
	const int32_t *pos;
	const float *qkv, *z, *b, *a; /* [n][cd], [n][vw], [n][nv], [n][nv] */
	float *c, *o;                 /* [n][cd] conv + SiLU, [n][vw] */
	int32_t n;
	int64_t cd, vw, nv, nk, dk, dv;
	int taps;
};

/* x[0..n) scaled to unit L2 norm (eps 1e-6 under the root, HF l2norm),
 * times mul, into out. */
static void l2norm(const float *x, int64_t n, float mul, float *out)
{
	float ss = 0.0f;
	for (int64_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	float r = mul / sqrtf(ss + 1e-6f);
	for (int64_t i = 0; i < n; i++)
		out[i] = x[i] * r;
}

/* The delta rule and gated norm of value heads [j0, j1), row by row. */
static void gdn_head_worker(void *arg, int ith, int nth)
{
	const struct gdn_args *a = arg;
	const struct layer *L = a->L;
	long j0, j1;
	fx_split((long)a->nv, ith, nth, &j0, &j1);
	int64_t dk = a->dk, dv = a->dv, kw = a->nk * dk;
	float qn[GDN_MAX_HEAD], kn[GDN_MAX_HEAD], d[GDN_MAX_HEAD];
	float eps = a->m->hp.eps, qmul = 1.0f / sqrtf((float)dk);
	for (int32_t t = 0; t < a->n; t++) {
		const float *c = a->c + (size_t)t * a->cd;
		float *st = a->kv[t].rs + L->rs_off + (size_t)a->taps * a->cd; /* [nv][dk][dv] */
		for (long j = j0; j < j1; j++) {
			/* value heads tiled over key heads (qwen35) or grouped (qwen3next) */
			int64_t kh = L->gdn_grouped ? j / (a->nv / a->nk) : j % a->nk;
			l2norm(c + kh * dk, dk, qmul, qn);
			l2norm(c + kw + kh * dk, dk, 1.0f, kn);
			const float *v = c + 2 * kw + j * dv;
			float beta = 1.0f / (1.0f + expf(-a->b[(size_t)t * a->nv + j]));
			float decay = expf(L->ssm_a[j] * softplus(a->a[(size_t)t * a->nv + j] + L->ssm_dt_b[j]));
			float *S = st + (size_t)j * dk * dv;
			for (int64_t i = 0; i < dk * dv; i++)
				S[i] *= decay;
			for (int64_t e = 0; e < dv; e++)
				d[e] = 0.0f;
			for (int64_t i = 0; i < dk; i++)
				for (int64_t e = 0; e < dv; e++)
					d[e] += S[i * dv + e] * kn[i];
			for (int64_t e = 0; e < dv; e++)
				d[e] = beta * (v[e] - d[e]);
			float *o = a->o + (size_t)t * a->vw + j * dv;
			for (int64_t e = 0; e < dv; e++)
				o[e] = 0.0f;
			for (int64_t i = 0; i < dk; i++)
				for (int64_t e = 0; e < dv; e++) {
					S[i * dv + e] += kn[i] * d[e];
					o[e] += S[i * dv + e] * qn[i];
				}
			/* gated RMSNorm over the head: norm first, then the gate */
			float ss = 0.0f;
			for (int64_t e = 0; e < dv; e++)
				ss += o[e] * o[e];
			float r = 1.0f / sqrtf(ss / (float)dv + eps);
			const float *z = a->z + (size_t)t * a->vw + j * dv;
			for (int64_t e = 0; e < dv; e++)
				o[e] = o[e] * r * L->ssm_norm[e] * silu(z[e]);
		}
		keep_span(&a->kv[t], a->pos[t], L->rs_off + (int64_t)a->taps * a->cd, st,
			  (size_t)j0 * dk * dv, (size_t)j1 * dk * dv);
	}
}

void gdn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h, float *out)
{
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[il];
	struct gdn_args a = { .m = m, .L = L, .kv = kv, .pos = pos, .n = n, .vw = hp->ssm_inner,
			      .nv = hp->n_ssm_head, .nk = hp->n_ssm_group, .dk = hp->ssm_state,
			      .taps = hp->conv_kernel - 1 };
	a.dv = a.vw / a.nv;
	a.cd = 2 * a.nk * a.dk + a.vw;
	float *qkv = s->rs, *z = qkv + (size_t)n * a.cd, *b = z + (size_t)n * a.vw;
	float *al = b + (size_t)n * a.nv;
	a.qkv = qkv, a.z = z, a.b = b, a.a = al;
	a.c = al + (size_t)n * a.nv;
	a.o = a.c + (size_t)n * a.cd;
	const struct wmat *w[] = { &L->gdn_qkv, &L->gdn_z, &L->gdn_beta, &L->gdn_alpha };
	/* fused ssm_ba: into the conv / output space (n (cd + vw) >= n 2 nv
	 * floats, both written later), then split per key head into b, a */
	float *y[] = { qkv, z, L->gdn_grouped ? a.c : b, al };
	op_matmul_n(pool, L->gdn_grouped ? 3 : 4, w, h, n, y, s->qbuf);
	if (L->gdn_grouped) {
		int64_t r = a.nv / a.nk;
		for (int32_t t = 0; t < n; t++)
			for (int64_t g = 0; g < a.nk; g++) {
				const float *ba = a.c + (size_t)t * 2 * a.nv + (size_t)g * 2 * r;
				memcpy(b + (size_t)t * a.nv + g * r, ba, (size_t)r * sizeof(float));
				memcpy(al + (size_t)t * a.nv + g * r, ba + r, (size_t)r * sizeof(float));
			}
	}
	struct conv_args ca = { .kv = kv, .pos = pos, .off = L->rs_off, .in = qkv, .stride = (size_t)a.cd,
				.out = a.c, .w = L->ssm_conv, .b = NULL, .ch = a.cd, .n = n, .taps = a.taps };
	fx_pool_run(pool, conv_worker, &ca);
	fx_pool_run(pool, gdn_head_worker, &a);
	op_matmul(pool, &L->ssm_out, a.o, n, out, s->qbuf);
}
