/* The attention half of a decoder layer, written once. Decorations come
 * from the architecture row and hparams; where K/V rows live comes from the
 * kv_view. Sources: Vaswani et al. 2017 (scaled dot-product attention),
 * Ainslie et al. 2023 (GQA), Su et al. 2021 (RoPE), Beltagy et al. 2020
 * (sliding window), Gemma 2 report (attention softcap). */
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern.h"
#include "model/forward.h"
#include "quant/quant.h"

struct attn_args {
	const struct fx_model *m;
	int il;
	int kvl;                    /* the layer's index among the backing's K/V layers */
	struct fwd_scratch *s;
	const struct kv_view *kv;   /* [n]: each row's backing */
	const struct kern_set *ks;  /* the pool's kernels */
	const int32_t *pos;
	int32_t n;
	atomic_int next;            /* attend_worker's next unclaimed token */
};

static void add_bias(float *x, const float *b, int32_t n, int64_t width)
{
	for (int32_t t = 0; t < n; t++)
		for (int64_t i = 0; i < width; i++)
			x[(size_t)t * width + i] += b[i];
}

struct decorate_args {
	const struct fx_model *m;
	const struct layer *L;
	float *x;
	int n_heads;
	const float *bias, *norm_w;
	bool query;  /* the rows are queries (attention temperature applies) */
	const int32_t *pos;
	int32_t n;
	float *tab;  /* [n, rot] this forward's RoPE cos/sin for the layer's inv_freq */
	size_t rot;  /* floats a token in tab */
	bool fill;   /* tab not made yet: each thread makes its tokens' rows */
};

/* Q or K rows [n, n_heads * head_dim], in place: optional bias, Q/K norm
 * (per head, or over the whole projection), RoPE on this layer's rotated
 * dims unless it is a NoPE layer; then Llama 4's weightless per-head norm
 * (RoPE layers) and, on queries of NoPE layers, its attention temperature
 * (HF Llama4TextAttention.forward). Tokens are split across threads; each
 * token's result is independent of the split. */
static void decorate_worker(void *arg, int ith, int nth)
{
	const struct decorate_args *a = arg;
	const struct fx_model *m = a->m;
	const struct hparams *hp = &m->hp;
	int hd = a->L->head_dim, n_rot = a->L->n_rot;
	int64_t width = (int64_t)a->n_heads * hd;
	long t0, t1;
	fx_split(a->n, ith, nth, &t0, &t1);
	for (long t = t0; t < t1; t++) {
		float *row = a->x + (size_t)t * width;
		if (a->bias)
			add_bias(row, a->bias, 1, width);
		if (a->norm_w && m->arch->qk_norm == QK_NORM_FULL)
			op_rmsnorm(row, a->norm_w, width, hp->eps, row);
		float *cs = a->tab + (size_t)t * a->rot;
		if (a->L->rope && a->fill)
			op_rope_table(cs, n_rot, (float)a->pos[t], a->L->inv_freq, hp->rope_mscale);
		for (int hh = 0; hh < a->n_heads; hh++) {
			float *head = row + (size_t)hh * hd;
			if (a->norm_w && m->arch->qk_norm == QK_NORM_HEAD)
				op_rmsnorm(head, a->norm_w, hd, hp->eps, head);
			if (a->L->rope)
				op_rope_apply(head, n_rot, cs, m->arch->rope == ROPE_NEOX);
			if (a->L->rope && hp->qk_l2)
				op_rmsnorm(head, NULL, hd, hp->eps, head);
		}
		if (a->query && !a->L->rope && hp->attn_temp_scale != 0) {
			float ts = log1pf(floorf(((float)a->pos[t] + 1.0f) / hp->attn_temp_floor)) *
				   hp->attn_temp_scale + 1.0f;
			for (int64_t i = 0; i < width; i++)
				row[i] *= ts;
		}
	}
}

bool attn_k_shift_table(const struct fx_model *m, int il, int32_t delta, float *cs)
{
	const struct layer *L = &m->layers[il];
	if (!L->rope)
		return false;
	op_rope_table(cs, L->n_rot, (float)delta, L->inv_freq, 1.0f);
	return true;
}

void attn_k_shift_row(const struct fx_model *m, int il, const float *cs, float *k)
{
	const struct layer *L = &m->layers[il];
	for (int hh = 0; hh < L->n_head_kv; hh++)
		op_rope_apply(k + (size_t)hh * L->head_dim, L->n_rot, cs, m->arch->rope == ROPE_NEOX);
}

static void qk_decorate(const struct fx_model *m, const struct layer *L, struct fx_pool *pool,
			struct fwd_scratch *s, float *x, int n_heads, const float *bias,
			const float *norm_w, bool query, const int32_t *pos, int32_t n)
{
	/* A token's angles depend on its position and the layer's inv_freq
	 * only, so one table a forward serves Q and K of every layer that
	 * shares an inv_freq (all, or the sliding and the global ones). */
	int slot = 0;
	while (slot < 2 && !(s->rope_key[slot] == L->inv_freq && s->rope_nrot[slot] == L->n_rot))
		slot++;
	bool fill = slot == 2;
	if (fill)
		slot = s->rope_key[0] && !s->rope_key[1]; /* a free table, else the first again */
	struct decorate_args a = { .m = m, .L = L, .x = x, .n_heads = n_heads, .bias = bias,
				   .norm_w = norm_w, .query = query, .pos = pos, .n = n,
				   .tab = s->rope_tab + (size_t)slot * (size_t)s->n_max * s->rope_rot,
				   .rot = s->rope_rot, .fill = fill };
	if (n > 1)
		fx_pool_run(pool, decorate_worker, &a);
	else
		decorate_worker(&a, 0, 1);
	if (fill && L->rope) {
		s->rope_key[slot] = L->inv_freq;
		s->rope_nrot[slot] = L->n_rot;
	}
}

/* Keys per online-softmax step (forward.h) and per prefetch step. */
enum { KCHUNK = FWD_KCHUNK, PF_STEP = 8 };

/* Ask for bytes [off, off + bytes) of rows[0..n) ahead of use. At a batch
 * of decodes each sequence's cache was last touched a whole step ago, so
 * the rows come from DRAM, and a chunk's compute is too short to hide the
 * misses of demand loads (measured: a SmolLM2 step at 8 sequences ~10%
 * faster with the prefetch spread as attend_heads does than without).
 * Into L2 (T1): perf found ~80% of attend_run's own samples on T0
 * prefetches waiting for L1 fill buffers; with T1 bench/ab.sh at eight
 * sequences gave SmolLM2 0.991x / 0.987x, Gemma 3 0.992x, one sequence
 * 1.000x. */
#if defined(__GNUC__)
/* Inlined: GCC finds a separate prefetch-only function free of side
 * effects ("pure") and deletes its calls. */
__attribute__((always_inline))
#endif
static inline void prefetch_rows(const uint8_t *const *rows, int n, size_t off, size_t bytes)
{
#if defined(__GNUC__)
	/* Every 64-byte line a span touches: rows need not start on a line
	 * (a pool from malloc, rows of 136-byte q8_0 heads). */
	for (int r = 0; r < n; r++) {
		uintptr_t x = (uintptr_t)rows[r] + off;
		for (uintptr_t a = x & ~(uintptr_t)63; a < x + bytes; a += 64)
			__builtin_prefetch((const void *)a, 0, 2);
	}
#else
	(void)rows, (void)n, (void)off, (void)bytes;
#endif
}

/* The share of the next chunk's rows (nk1 of them) that keys [r0, r0 +
 * mk) of a chunk of nk keys prefetch: in proportion, so that a chunk's
 * PF_STEP-key steps together ask for all of it. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void prefetch_share(const uint8_t *const *rows1, int nk1, int nk, int r0, int mk,
				  size_t off, size_t bytes)
{
	int p0 = r0 * nk1 / nk, p1 = (r0 + mk) * nk1 / nk;
	prefetch_rows(rows1 + p0, p1 - p0, off, bytes);
}

/* Token t's first visible key (*lo: 0, the start of a sliding window, or
 * of its aligned chunk of n_swa tokens where the row says swa_chunked)
 * and the number of keys in its first chunk. */
static int first_chunk(const struct attn_args *a, int32_t t, int32_t *lo)
{
	const struct hparams *hp = &a->m->hp;
	int32_t p = a->pos[t];
	*lo = 0;
	if (a->m->layers[a->il].swa && hp->n_swa > 0 && a->m->arch->swa_chunked)
		*lo = p - p % hp->n_swa;
	else if (a->m->layers[a->il].swa && hp->n_swa > 0 && p - hp->n_swa + 1 > 0)
		*lo = p - hp->n_swa + 1;
	return p - *lo + 1 < KCHUNK ? p - *lo + 1 : KCHUNK;
}

/* A thread's attention rows (running max and sum, a chunk's scores, the
 * running V sums, the converted query) for T tokens from query head h0:
 * with one token row i is head h0 + i; with a pair (all heads) the rows go
 * KV head by KV head, each token's heads of the group in turn, so that a
 * group's rows are contiguous for both tokens. */
static inline int attend_row(int T, int G, int h0, int tok, int h)
{
	return T == 1 ? h - h0 : (h / G) * T * G + tok * G + h % G;
}

/* What a chunk's kernels share within one pass (attend_heads). */
struct attend_pass {
	const struct kern_set *ks;
	kern_qk_fn qk;             /* scores of f32/f16 caches, or NULL: kd / vec_dot */
	kern_dot_fn kd;
	kern_pv_fn pv;
	bool key_as_weight;        /* see attend_heads */
	const struct fx_type_traits *ktt;
	const void *const *qd;     /* [rows] each row's query (f32, f16-rounded or quantized) */
	size_t q_stride;           /* bytes between rows' converted queries (kd) */
	size_t qk_stride;          /* floats between rows' queries (qk) */
	int hd, dv, step;
	float *sc, *mx, *l, *acc, *vtmp;
	float scale, softcap;
};

/* Rows [r0, r0 + nr) of one KV head against the chunk's nk keys kg / vg:
 * scores, softcap, the online softmax step, the rows' sums rescaled where
 * their max rose, the weighted V rows added. Each kernel step after its
 * share of the next chunk's prefetch (nk1 rows at knext / vnext, 0: none;
 * the split changes no sum). */
static void attend_run(const struct attend_pass *c, int r0, int nr, int nk, const uint8_t *const *kg,
		       const uint8_t *const *vg, const uint8_t *const *knext, const uint8_t *const *vnext,
		       int nk1, size_t k_off, size_t v_off, size_t k_head, size_t v_head)
{
	const int hd = c->hd, dv = c->dv, step = c->step;
	float *sg = c->sc + (size_t)r0 * KCHUNK;
	/* q . k_j for every row (see key_as_weight). */
	if (!c->qk)
		prefetch_share(knext, nk1, nk, 0, nk, k_off, k_head);
	if (c->qk) {
		for (int j0 = 0; j0 < nk; j0 += step) {
			int mk = nk - j0 < step ? nk - j0 : step;
			prefetch_share(knext, nk1, nk, j0, mk, k_off, k_head);
			c->qk(hd, nr, (const float *)c->qd[r0], c->qk_stride, mk, (const void *const *)kg + j0, sg + j0,
			      KCHUNK);
		}
	} else if (c->kd && c->key_as_weight) {
		for (int r = 0; r < nk; r++)
			c->kd(hd, kg[r], c->qd[r0], c->q_stride, nr, sg + r, KCHUNK);
	} else {
		for (int i = r0; i < r0 + nr; i++) {
			float *si = c->sc + (size_t)i * KCHUNK;
			for (int r = 0; r < nk;) {
				int run = 1;
				ptrdiff_t st = nk > r + 1 ? kg[r + 1] - kg[r] : 0;
				while (c->kd && r + run < nk && run < KERN_NT_MAX && st > 0 &&
				       kg[r + run] - kg[r + run - 1] == st)
					run++;
				if (c->kd)
					c->kd(hd, c->qd[i], kg[r], (size_t)st, run, si + r, 1);
				else
					c->ktt->vec_dot(hd, si + r, kg[r], c->qd[i]);
				r += run;
			}
		}
	}
	/* Per row: softcap, then the kernel's scale, running max, the chunk's
	 * weights e^(s - max) and their sum; what the row has so far is
	 * rescaled where the max rose. */
	for (int i = 0; c->softcap > 0 && i < nr; i++)
		for (int r = 0; r < nk; r++)
			sg[i * KCHUNK + r] = c->softcap * tanhf(sg[i * KCHUNK + r] * c->scale / c->softcap);
	float rs[FWD_TOK_TILE * FX_MAX_HEADS];
	c->ks->softmax(sg, KCHUNK, nr, nk, c->softcap > 0 ? 1.0f : c->scale, c->mx + r0, c->l + r0, rs);
	for (int i = 0; i < nr; i++) {
		float *o = c->acc + (size_t)(r0 + i) * dv;
		if (rs[i] != 1.0f)
			for (int e = 0; e < dv; e++)
				o[e] *= rs[i];
	}
	/* The chunk's V rows, key by key, into every row's sum. */
	for (int j0 = 0; j0 < nk; j0 += step) {
		int mk = nk - j0 < step ? nk - j0 : step;
		prefetch_share(vnext, nk1, nk, j0, mk, v_off, v_head);
		c->pv(dv, nr, mk, sg + j0, KCHUNK, (const void *const *)vg + j0, c->acc + (size_t)r0 * dv,
		      (size_t)dv, c->vtmp);
	}
}

/* The pass's rows' queries as its kernels take them (c->qd = qd,
 * c->qk_stride), their max, sum and V sums reset. qk wants the rows'
 * queries evenly spaced: an f16 cache's (rounded to f16 once for all
 * chunks) and a pair's go to qconv; the dot kernels take them quantized
 * to the cache's dot type. */
static void attend_queries(const struct attn_args *a, struct attend_pass *c, int ith, int32_t t, int T,
			   int h0, int nh, int kt, const void **qd)
{
	const struct hparams *hp = &a->m->hp;
	struct fwd_scratch *s = a->s;
	const size_t rows_max = (size_t)FWD_TOK_TILE * (size_t)hp->n_head;
	int G = hp->n_head / a->m->layers[a->il].n_head_kv, hd = c->hd;
	bool conv = c->qk && (kt == FX_TYPE_F16 || T > 1);
	bool quant = !c->qk && c->ktt->vec_dot_type != FX_TYPE_F32;
	for (int tok = 0; tok < T; tok++)
		for (int h = h0; h < h0 + nh; h++) {
			int i = attend_row(T, G, h0, tok, h);
			const float *q = s->q + ((size_t)(t + tok) * hp->n_head + h) * hd;
			void *qc = (uint8_t *)s->qconv + ((size_t)ith * rows_max + (size_t)i) * s->qconv_stride;
			if (conv && kt == FX_TYPE_F16)
				c->ks->round_f16(q, qc, hd);
			else if (conv)
				memcpy(qc, q, (size_t)hd * sizeof(float));
			else if (quant)
				c->ks->act_quant[c->ktt->vec_dot_type](q, qc, hd);
			qd[i] = conv || quant ? qc : (const void *)q;
			c->mx[i] = -INFINITY;
			c->l[i] = 0;
			memset(c->acc + (size_t)i * c->dv, 0, (size_t)c->dv * sizeof(float));
		}
	c->qd = qd;
	c->qk_stride = conv ? s->qconv_stride / sizeof(float) : (size_t)hd;
}

/* Each row's output: its V sum over its softmax denominator (with the
 * layer's attention sink, gpt-oss, joining the denominator without a
 * value: Xiao et al. 2023), into s->att. */
static void attend_finish(const struct attn_args *a, const struct attend_pass *c, int32_t t, int T, int h0,
			  int nh)
{
	const struct hparams *hp = &a->m->hp;
	const struct layer *L = &a->m->layers[a->il];
	int G = hp->n_head / L->n_head_kv, dv = c->dv;
	for (int tok = 0; tok < T; tok++)
		for (int h = h0; h < h0 + nh; h++) {
			int i = attend_row(T, G, h0, tok, h);
			float *o = c->acc + (size_t)i * dv, sum = c->l[i];
			if (L->sinks) {
				float sk = L->sinks[h];
				if (sk > c->mx[i]) {
					float ms = expf(c->mx[i] - sk);
					for (int e = 0; e < dv; e++)
						o[e] *= ms;
					sum = sum * ms + 1.0f;
				} else {
					sum += expf(sk - c->mx[i]);
				}
			}
			float inv = 1.0f / sum;
			float *out = a->s->att + ((size_t)(t + tok) * hp->n_head + h) * dv;
			for (int e = 0; e < dv; e++)
				out[e] = o[e] * inv;
		}
}

/* Query heads [h0, h0 + nh) of T tokens from t (T = 2: consecutive
 * tokens of one sequence, all heads; attend_pairs) in one pass over the
 * visible keys with an online softmax (Milakov & Gimelshein 2018; the
 * FlashAttention recurrence, Dao et al. 2022, here over chunks of KCHUNK
 * keys): each K row is dotted with the queries of the rows that share it
 * (GQA, and both tokens of a pair) and each V row added into their running
 * sums, so K/V are read (and converted) once and no score row is kept.
 * The heads may span several KV heads: a chunk's rows are then used for
 * all of them while in L1, which reads each row of a cache block once and
 * in order (a decode batch streams every sequence's cache from DRAM each
 * step). Per row: m is the running max, l the running sum of e^(score -
 * m); when a chunk raises m the sums are rescaled by e^(m_old - m_new). A
 * pair's two tokens go through the chunks both see whole together, and
 * each alone through its own last one. An attention sink (gpt-oss) joins
 * the denominator at the end without a value (Xiao et al. 2023). A row's
 * result depends only on its own query and the keys, never on h0, nh, T,
 * the thread or the batch. With an f16 cache Q is rounded to f16 for the
 * K dot product, as llama.cpp does. */
static void attend_heads(const struct attn_args *a, int ith, int32_t t, int T, int h0, int nh,
			 int32_t t_next, bool prefetched)
{
	const struct fx_model *m = a->m;
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[a->il];
	struct fwd_scratch *s = a->s;
	const size_t rows_max = (size_t)FWD_TOK_TILE * (size_t)hp->n_head;
	int G = hp->n_head / L->n_head_kv; /* GQA: query heads per KV head */
	int hd = L->head_dim, dv = L->head_dim_v;
	float *mx = s->scores + (size_t)ith * (2 + KCHUNK) * rows_max, *l = mx + rows_max;
	float *acc = s->vrow + (size_t)ith * (rows_max + 1) * (size_t)dv;
	const struct kv_view *kv = &a->kv[t];
	int kt = kv_k_type(kv), vt = kv_v_type(kv);
	const struct fx_type_traits *ktt = fx_type_get(kt);
	const struct kern_set *ks = a->ks;
	/* A kernel's activation rows may carry more than the cache's blocks
	 * (the set's act_arrays): then the keys go in as the
	 * kernel's "weight" rows and the rows' queries as its activation
	 * rows (the same products, so the same sums), q_stride bytes apart.
	 * Otherwise each row's query is the weight row against runs of up
	 * to KERN_NT_MAX keys: fewer calls, which measured faster than one
	 * call per key for all heads (K rows are L1-resident anyway).
	 * f32/f16 caches under AVX2: one qk call per chunk scores every row
	 * of a KV head, each K row converted once. */
	struct attend_pass c = {
		.ks = ks, .qk = kern_qk_for(ks, kt, hd), .kd = ks->dot[kt], .pv = ks->pv[vt], .ktt = ktt,
		.hd = hd, .dv = dv, .sc = l + rows_max, .mx = mx, .l = l, .acc = acc,
		.vtmp = acc + rows_max * (size_t)dv, .scale = hp->attn_scale, .softcap = hp->attn_softcap,
	};
	c.q_stride = ktt->vec_dot_type != FX_TYPE_F32 ? s->qconv_stride : (size_t)hd * sizeof(float);
	c.key_as_weight = ktt->vec_dot_type != FX_TYPE_F32 &&
			  kern_act_row_bytes(ks, ktt->vec_dot_type, hd) != fx_row_size(ktt->vec_dot_type, hd);
	const void *qd[FWD_TOK_TILE * FX_MAX_HEADS];
	attend_queries(a, &c, ith, t, T, h0, nh, kt, qd);
	int32_t p0 = a->pos[t], p = a->pos[t + T - 1], lo;
	int nk0 = first_chunk(a, t + T - 1, &lo);
	/* The KV heads used and their bytes in a row, for the prefetch. */
	int g0 = h0 / G, g1 = (h0 + nh - 1) / G;
	size_t k_lo = fx_row_size(kt, (int64_t)g0 * hd), v_lo = fx_row_size(vt, (int64_t)g0 * dv);
	size_t k_span = fx_row_size(kt, (int64_t)(g1 + 1) * hd) - k_lo;
	size_t v_span = fx_row_size(vt, (int64_t)(g1 + 1) * dv) - v_lo;
	size_t k_head = fx_row_size(kt, hd), v_head = fx_row_size(vt, dv);
	/* This chunk's K/V rows and the next one's (found once: they serve
	 * the prefetch a chunk ahead, then the chunk itself). */
	const uint8_t *krow[KCHUNK], *vrow[KCHUNK], *knext[KCHUNK], *vnext[KCHUNK];
	const uint8_t *kg[KCHUNK], *vg[KCHUNK];
	kv_rows(kv, a->kvl, lo, nk0, krow, vrow);
	/* Prefetch: each KV head's K (V) rows of the next chunk before its
	 * scores (weighted sum) of this one, spread so that the requests do
	 * not queue all at once; after the last chunk, the next token's
	 * first (t_next, -1: none). */
	if (!prefetched) {
		prefetch_rows(krow, nk0, k_lo, k_span);
		prefetch_rows(vrow, nk0, v_lo, v_span);
	}
	/* Keys per kernel call: PF_STEP, each call after its share of the
	 * next chunk's prefetch, where the next token reads another
	 * sequence's cache (a decode batch: the rows come from DRAM); a
	 * whole chunk where it reads this one's (a prefill: the rows are
	 * in cache, and a quarter of the calls measured 3-8% faster
	 * SmolLM2 pp512), with no prefetch (every token of a prefill reads
	 * the same rows: skipping it measured ~2.6% faster SmolLM2 pp512,
	 * four paired runs). The split changes no sum. */
	const bool same = t_next >= 0 && kv_view_same(kv, &a->kv[t_next]);
	const int pf_k = same ? 0 : 1;
	c.step = same ? KCHUNK : PF_STEP;
	for (int32_t j0 = lo; j0 <= p; j0 += KCHUNK) {
		int nk = p - j0 + 1 < KCHUNK ? p - j0 + 1 : KCHUNK;
		int32_t j1 = j0 + KCHUNK, nk1 = 0;
		if (j1 <= p) {
			nk1 = p - j1 + 1 < KCHUNK ? p - j1 + 1 : KCHUNK;
			kv_rows(kv, a->kvl, j1, nk1, knext, vnext);
		} else if (t_next >= 0) {
			nk1 = first_chunk(a, t_next, &j1);
			kv_rows(&a->kv[t_next], a->kvl, j1, nk1, knext, vnext);
		}
		/* the first token's keys of this chunk (a pair's last chunk
		 * may have one fewer, or none) */
		int nkf = p0 - j0 + 1 < KCHUNK ? p0 - j0 + 1 : KCHUNK;
		for (int g = g0; g <= g1; g++) {
			int hs = h0 > g * G ? h0 : g * G, he = h0 + nh < (g + 1) * G ? h0 + nh : (g + 1) * G;
			int ng = he - hs, r0 = attend_row(T, G, h0, 0, hs);
			size_t k_off = fx_row_size(kt, (int64_t)g * hd), v_off = fx_row_size(vt, (int64_t)g * dv);
			for (int r = 0; r < nk; r++) {
				kg[r] = krow[r] + k_off;
				vg[r] = vrow[r] + v_off;
			}
			if (nkf == nk) { /* every token sees the whole chunk */
				attend_run(&c, r0, T * ng, nk, kg, vg, knext, vnext, nk1 * pf_k, k_off, v_off, k_head,
					   v_head);
				continue;
			}
			for (int tok = 0; tok < T; tok++) {
				int nkt = a->pos[t + tok] - j0 + 1 < KCHUNK ? a->pos[t + tok] - j0 + 1 : KCHUNK;
				if (nkt > 0) /* the prefetch with the last token's */
					attend_run(&c, r0 + tok * ng, ng, nkt, kg, vg, knext, vnext,
						   tok == T - 1 ? nk1 * pf_k : 0, k_off, v_off, k_head, v_head);
			}
		}
		memcpy(krow, knext, (size_t)nk1 * sizeof(krow[0]));
		memcpy(vrow, vnext, (size_t)nk1 * sizeof(vrow[0]));
	}
	attend_finish(a, &c, t, T, h0, nh);
}

/* Tokens t and t + 1 go through attend_heads together: the next position
 * of the same sequence, whose first visible key is t's (no window moves
 * between them), with a qk kernel for the cache (the pair's rows need
 * it). */
static bool attend_pairs(const struct attn_args *a, int32_t t)
{
	int32_t lo0, lo1;
	if (t + 1 >= a->n || a->pos[t + 1] != a->pos[t] + 1 || !kv_view_same(&a->kv[t], &a->kv[t + 1]))
		return false;
	first_chunk(a, t, &lo0);
	first_chunk(a, t + 1, &lo1);
	return lo0 == lo1 && kern_qk_for(a->ks, kv_k_type(&a->kv[t]), a->m->layers[a->il].head_dim);
}

/* Work items: with at least two tokens per thread, pairs of tokens (all
 * heads; attend_heads reads their cache rows once, in order), claimed one
 * pair at a time from a shared counter, so that a thread slowed by the
 * machine or a causal prefill's longer later tokens do not leave the
 * other waiting; each thread claims its next pair before it starts the
 * current one, to prefetch it. A pair attend_pairs refuses goes one token
 * at a time. With fewer tokens, (token, KV head, slice of its query
 * heads): slices are halved until there are enough items for the
 * threads. */
static void attend_worker(void *arg, int ith, int nth)
{
	struct attn_args *a = arg;
	const struct hparams *hp = &a->m->hp;
	if (a->n >= 2L * nth) {
		int32_t t = atomic_fetch_add_explicit(&a->next, FWD_TOK_TILE, memory_order_relaxed);
		for (bool pre = false; t < a->n; pre = true) {
			int32_t t_next = atomic_fetch_add_explicit(&a->next, FWD_TOK_TILE, memory_order_relaxed);
			int32_t tn = t_next < a->n ? t_next : -1;
			if (attend_pairs(a, t)) {
				attend_heads(a, ith, t, 2, 0, hp->n_head, tn, pre);
			} else {
				attend_heads(a, ith, t, 1, 0, hp->n_head, t + 1 < a->n ? t + 1 : tn, pre);
				if (t + 1 < a->n)
					attend_heads(a, ith, t + 1, 1, 0, hp->n_head, tn, true);
			}
			t = t_next;
		}
		return;
	}
	int nkv = a->m->layers[a->il].n_head_kv, G = hp->n_head / nkv, hpi = G;
	while (hpi % 2 == 0 && (long)a->n * nkv * (G / hpi) < 4L * nth)
		hpi /= 2;
	long per_tok = (long)nkv * (G / hpi), n_items = (long)a->n * per_tok;
	for (long i = ith; i < n_items; i += nth) {
		long r = i % per_tok;
		attend_heads(a, ith, (int32_t)(i / per_tok), 1, (int)(r * hpi), hpi, -1, false);
	}
}

/* Multi-head latent attention's projections (DeepSeek-V2, 2024), written
 * into the same per-head Q/K/V rows plain attention uses. Each Q and K head
 * is laid out [rope part (n_rot), no-rope part]: a permutation of HF's
 * [nope, rope] applied to both Q and K, so every dot product is unchanged
 * and the usual RoPE on the first n_rot dims applies. The K RoPE part comes
 * from the shared latent and is copied to every head. */
static void mla_project(const struct fx_model *m, const struct layer *L, struct fx_pool *pool,
			struct fwd_scratch *s, int32_t n, const float *h)
{
	const struct hparams *hp = &m->hp;
	int hd = hp->head_dim, r = hp->n_rot, nope = hd - r, dv = hp->head_dim_v;
	int64_t qw = (int64_t)hp->n_head * hd, kvaw = hp->kv_lora + r;
	int64_t kvbw = (int64_t)hp->n_head * (nope + dv);
	float *qa = s->mla, *qf = qa + (size_t)n * (hp->q_lora > 0 ? hp->q_lora : 0);
	float *kva = qf + (size_t)n * qw, *kvb = kva + (size_t)n * kvaw;
	if (hp->q_lora > 0) {
		op_matmul(pool, &L->wq_a, h, n, qa, s->qbuf);
		for (int32_t t = 0; t < n; t++)
			op_rmsnorm(qa + (size_t)t * hp->q_lora, L->q_a_norm, hp->q_lora, hp->eps,
				   qa + (size_t)t * hp->q_lora);
		op_matmul(pool, &L->wq_b, qa, n, qf, s->qbuf);
	} else {
		op_matmul(pool, &L->wq, h, n, qf, s->qbuf);
	}
	op_matmul(pool, &L->wkv_a, h, n, kva, s->qbuf);
	/* Norm the latent in place (its first kv_lora values), then expand it. */
	float *lat = s->att; /* free until attention runs: [n, kv_lora] */
	for (int32_t t = 0; t < n; t++)
		op_rmsnorm(kva + (size_t)t * kvaw, L->kv_a_norm, hp->kv_lora, hp->eps,
			   lat + (size_t)t * hp->kv_lora);
	op_matmul(pool, &L->wkv_b, lat, n, kvb, s->qbuf);
	for (int32_t t = 0; t < n; t++) {
		for (int hh = 0; hh < hp->n_head; hh++) {
			const float *qsrc = qf + (size_t)t * qw + (size_t)hh * hd;
			float *q = s->q + (size_t)t * qw + (size_t)hh * hd;
			memcpy(q, qsrc + nope, (size_t)r * sizeof(float));
			memcpy(q + r, qsrc, (size_t)nope * sizeof(float));
			const float *kv = kvb + (size_t)t * kvbw + (size_t)hh * (nope + dv);
			float *k = s->k + (size_t)t * qw + (size_t)hh * hd;
			memcpy(k, kva + (size_t)t * kvaw + hp->kv_lora, (size_t)r * sizeof(float));
			memcpy(k + r, kv, (size_t)nope * sizeof(float));
			memcpy(s->v + ((size_t)t * hp->n_head + hh) * dv, kv + nope,
			       (size_t)dv * sizeof(float));
		}
	}
}

/* Gated attention (Qwen 3.5): s->qg [n][n_head][query head_dim; gate
 * head_dim] into the queries s->q [n][n_head * head_dim] and the output
 * gates s->qgate (same shape), as HF's view(..., 2 * head_dim).chunk(2). */
static void split_query_gate(const struct hparams *hp, struct fwd_scratch *s, int32_t n)
{
	size_t hd = (size_t)hp->head_dim, bytes = hd * sizeof(float);
	for (int32_t t = 0; t < n; t++)
		for (int hh = 0; hh < hp->n_head; hh++) {
			size_t o = (size_t)t * hp->n_head + (size_t)hh;
			const float *src = s->qg + 2 * o * hd;
			memcpy(s->q + o * hd, src, bytes);
			memcpy(s->qgate + o * hd, src + hd, bytes);
		}
}

void attn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		  const struct kv_view *kv, const int32_t *pos, int32_t n, const float *h, float *out)
{
	const struct hparams *hp = &m->hp;
	const struct layer *L = &m->layers[il];
	int64_t kw = (int64_t)L->n_head_kv * L->head_dim, vw = (int64_t)L->n_head_kv * L->head_dim_v;
	if (L->wkv_a.data) {
		mla_project(m, L, pool, s, n, h);
	} else if (L->kv_shared) { /* K/V are an earlier layer's, already cached */
		op_matmul(pool, &L->wq, h, n, s->q, s->qbuf);
	} else {
		/* no V projection (Gemma 4 k_eq_v): V is the K projection */
		const struct wmat *w[] = { &L->wq, &L->wk, &L->wv };
		float *y[] = { m->arch->attn_out_gate ? s->qg : s->q, s->k, s->v };
		op_matmul_n(pool, L->wv.data ? 3 : 2, w, h, n, y, s->qbuf);
		if (!L->wv.data)
			memcpy(s->v, s->k, (size_t)n * (size_t)kw * sizeof(float));
		if (m->arch->attn_out_gate)
			split_query_gate(hp, s, n);
	}
	qk_decorate(m, L, pool, s, s->q, hp->n_head, L->bq, L->q_norm, true, pos, n);
	if (!L->kv_shared) {
		qk_decorate(m, L, pool, s, s->k, L->n_head_kv, L->bk, L->k_norm, false, pos, n);
		if (L->bv)
			add_bias(s->v, L->bv, n, vw);
		if (m->arch->v_norm) /* Gemma 4: weightless RMSNorm per V head */
			for (int64_t r = 0; r < (int64_t)n * L->n_head_kv; r++)
				op_rmsnorm(s->v + r * L->head_dim_v, NULL, L->head_dim_v, hp->eps,
					   s->v + r * L->head_dim_v);
		for (int32_t t = 0; t < n; t++) {
			fx_type_get(kv_k_type(&kv[t]))->from_float(s->k + t * kw, kv_k_row(&kv[t], L->kv_il, pos[t]), kw);
			fx_type_get(kv_v_type(&kv[t]))->from_float(s->v + t * vw, kv_v_row(&kv[t], L->kv_il, pos[t]), vw);
		}
	}
	struct attn_args a = { .m = m, .il = il, .kvl = L->kv_il, .s = s, .kv = kv, .pos = pos, .n = n,
			       .ks = fx_pool_kernels(pool) };
	atomic_init(&a.next, 0);
	fx_pool_run(pool, attend_worker, &a);
	if (m->arch->attn_out_gate) {
		size_t nw = (size_t)n * (size_t)hp->n_head * (size_t)L->head_dim_v;
		for (size_t i = 0; i < nw; i++)
			s->att[i] *= 1.0f / (1.0f + expf(-s->qgate[i]));
	}
	op_matmul(pool, &L->wo, s->att, n, out, s->qbuf);
	if (L->bo)
		add_bias(out, L->bo, n, hp->n_embd);
}
