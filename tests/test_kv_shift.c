/* Context shift, fx_seq_shift (issue 20), on both layouts:
 *   - exact reference, sliding-window fixtures (also: a long shift on a
 *     paged pool with room for one window and little more) (gemma3: sliding layers 0
 *     and 1 of window 8, full layer 2 with another RoPE base and linear
 *     scaling; mistral_swa: every layer sliding): tokens repeat with period
 *     D = the tokens dropped, and K/V of layers 0..2 depend only on the 15
 *     tokens up to their own (two window-8 layers below), so after keeping
 *     16, dropping D and shifting the rest down by D the cache holds, to
 *     rounding, what a fresh run of the first N - D tokens holds: the next
 *     tokens' logits are compared with that run's (max abs diff printed,
 *     tolerance 1e-4 * max(1, max |ref|));
 *   - any fixture (llama, qwen3_yarn: mscale, phi3: partial rotary,
 *     smollm3: a NoPE layer, gemma3): two shifts give the logits of the one
 *     shift they add up to (rotations compose; a rotation that scaled, or
 *     moved the wrong rows or layers, would not);
 *   - contiguous and paged give bit-identical logits after a shift;
 *   - bad ranges are refused, changing nothing (the next logits are a
 *     fresh run's, bit for bit); paged with sliding layers, a shift that
 *     needs released rows is refused the same way;
 *   - prefix cache (paged): a freed shifted sequence's blocks serve only
 *     its kept, unshifted prefix; a fork shifted leaves its source exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

enum { N = 100, KEEP = 16, D = 24, N_NEXT = 3 };

static fx_token tok(int s, int i, int32_t nv)
{
	return (fx_token)((s * 7919 + i * 104729 + 17) % (nv < 4096 ? nv : 4096));
}

static struct fx_context *make_typed(const struct fx_model *m, int layout, uint32_t ubatch,
				     int32_t type_k, uint32_t n_seq)
{
	struct fx_context_params p = fx_context_default_params();
	p.type_k = type_k;
	p.n_ctx = 256;
	p.n_seq_max = n_seq;
	p.n_ubatch = ubatch;
	p.kv_layout = layout;
	p.block_size = 4;
	p.n_threads = 2;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(0, "context: %s", err.msg);
	return c;
}

static struct fx_context *make(const struct fx_model *m, int layout, uint32_t ubatch)
{
	return make_typed(m, layout, ubatch, FX_KV_DEFAULT, 2);
}

/* Decode x[0..n) one at a time after what c holds; logits into out[n][nv]. */
static bool step(struct fx_context *c, const fx_token *x, int n, float *out, int32_t nv)
{
	for (int i = 0; i < n; i++) {
		if (fx_decode(c, &x[i], 1, false))
			return false;
		memcpy(out + (size_t)i * nv, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	}
	return true;
}

/* max |a - b| over n, and max |b| into *ref. */
static double max_diff(const float *a, const float *b, size_t n, double *ref)
{
	double d = 0;
	*ref = 0;
	for (size_t i = 0; i < n; i++) {
		d = fmax(d, fabs((double)a[i] - b[i]));
		*ref = fmax(*ref, fabs((double)b[i]));
	}
	return d;
}

static const char *lay_name(int layout)
{
	return layout == FX_KV_PAGED ? "paged" : "contiguous";
}

/* The exact check's run: n tokens of period D, KEEP kept, drop (a
 * multiple of D) dropped, the shifted context with n_seq sequences and
 * ubatches of ubatch rows. */
struct exact_run {
	int n, drop;
	uint32_t ubatch, n_seq;
};

/* Sliding fixtures: keep KEEP, drop e->drop, shift; == a fresh run of the
 * first n - drop tokens. out: the shifted context's logits, [N_NEXT][nv].
 * With a rounded K cache (type_k f16 or q8_0, else FX_KV_DEFAULT) the
 * shifted rows are rounded twice, so the bound is the cache type's own
 * error: at most twice how far the fresh run's logits are from an
 * f32-cache run's, plus the f32 bound 1e-4 * max(1, max |ref|). */
static void check_exact_run(const char *name, const struct fx_model *m, int layout, int32_t type_k,
			    const struct exact_run *e, float *out)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token t[256], x[N_NEXT];
	for (int i = 0; i < e->n; i++)
		t[i] = tok(1, i % D, nv);
	for (int i = 0; i < N_NEXT; i++)
		x[i] = tok(2, i, nv);
	size_t nl = (size_t)N_NEXT * nv;
	float *want = calloc(nl, sizeof(float)), *f32 = calloc(nl, sizeof(float));
	struct fx_context *c = make_typed(m, layout, e->ubatch, type_k, e->n_seq);
	struct fx_context *f = make_typed(m, FX_KV_CONTIGUOUS, 7, type_k, 1);
	struct fx_context *g = make_typed(m, FX_KV_CONTIGUOUS, 7, FX_KV_F32, 1);
	const char *ty = type_k == FX_KV_F16 ? "f16 K" : type_k == FX_KV_Q8_0 ? "q8_0 K" : "K";
	int n1 = e->n - e->drop;
	CHECK(fx_decode(c, t, e->n, false) == FX_OK);
	int rc = fx_seq_shift(c, 0, KEEP + e->drop, -1, -e->drop);
	CHECKF(rc == FX_OK, "%s %s: shift: %s", name, lay_name(layout), fx_context_errmsg(c));
	CHECK(fx_seq_n_past(c, 0) == (uint32_t)n1);
	CHECK(step(c, x, N_NEXT, out, nv));
	CHECK(fx_decode(f, t, n1, false) == FX_OK && step(f, x, N_NEXT, want, nv));
	CHECK(fx_decode(g, t, n1, false) == FX_OK && step(g, x, N_NEXT, f32, nv));
	double ref, d = max_diff(out, want, nl, &ref), err = max_diff(want, f32, nl, &ref);
	double tol = 2 * err + 1e-4 * fmax(1, ref);
	printf("%-12s %-10s %s: keep %d, drop %d of %d, %d tokens on: max |diff| %.3g vs a fresh "
	       "run (its own vs f32 cache %.3g; max |ref| %.3g, tolerance %.3g)\n", name,
	       lay_name(layout), ty, KEEP, e->drop, e->n, N_NEXT, d, err, ref, tol);
	CHECKF(d <= tol, "%s %s %s: shifted logits differ from a fresh run by %g (tol %g)", name,
	       lay_name(layout), ty, d, tol);
	fx_context_free(c);
	fx_context_free(f);
	fx_context_free(g);
	free(want);
	free(f32);
}

static void check_exact_typed(const char *name, const struct fx_model *m, int layout, int32_t type_k,
			      float *out)
{
	check_exact_run(name, m, layout, type_k, &(struct exact_run){ N, D, 7, 2 }, out);
}

static void check_exact(const char *name, const struct fx_model *m, int layout, float *out)
{
	check_exact_typed(name, m, layout, FX_KV_DEFAULT, out);
}

/* Any fixture, N tokens: shift (keep 10, drop 10) then (keep 10, drop 8)
 * == shift (keep 10, drop 18) (not whole blocks of 4: paged sliding layers
 * keep the rows they need to the row). out: the two-shift logits, [N_NEXT][nv]. */
static void check_compose(const char *name, const struct fx_model *m, int layout, float *out)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token t[N], x[N_NEXT];
	for (int i = 0; i < N; i++)
		t[i] = tok(3, i, nv);
	for (int i = 0; i < N_NEXT; i++)
		x[i] = tok(4, i, nv);
	size_t nl = (size_t)N_NEXT * nv;
	float *want = calloc(nl, sizeof(float));
	struct fx_context *a = make(m, layout, 16), *b = make(m, layout, 16);
	CHECK(fx_decode(a, t, N, false) == FX_OK && fx_decode(b, t, N, false) == FX_OK);
	CHECK(fx_seq_shift(a, 0, 20, -1, -10) == FX_OK && fx_seq_n_past(a, 0) == N - 10);
	CHECK(fx_seq_shift(a, 0, 18, N - 10, -8) == FX_OK && fx_seq_n_past(a, 0) == N - 18);
	CHECK(fx_seq_shift(b, 0, 28, -1, -18) == FX_OK && fx_seq_n_past(b, 0) == N - 18);
	CHECK(step(a, x, N_NEXT, out, nv) && step(b, x, N_NEXT, want, nv));
	double ref, d = max_diff(out, want, nl, &ref), tol = 1e-4 * fmax(1, ref);
	printf("%-12s %-10s shifts by -10 then -8 vs -18 at once: max |diff| %.3g (tolerance %.3g)\n",
	       name, lay_name(layout), d, tol);
	CHECKF(d <= tol, "%s %s: two shifts differ from their sum by %g", name, lay_name(layout), d);
	fx_context_free(a);
	fx_context_free(b);
	free(want);
}

/* Contiguous and paged logits after the same shifts, bit for bit. */
static void check_layouts(const char *name, const struct fx_model *m, bool exact)
{
	size_t nl = (size_t)N_NEXT * fx_model_n_vocab(m);
	float *l[2] = { calloc(nl, sizeof(float)), calloc(nl, sizeof(float)) };
	for (int k = 0; k < 2; k++) {
		if (exact)
			check_exact(name, m, k ? FX_KV_PAGED : FX_KV_CONTIGUOUS, l[k]);
		else
			check_compose(name, m, k ? FX_KV_PAGED : FX_KV_CONTIGUOUS, l[k]);
	}
	CHECKF(!memcmp(l[0], l[1], nl * sizeof(float)), "%s: paged and contiguous logits after a "
	       "shift differ", name);
	free(l[0]);
	free(l[1]);
}

/* Next-token logits of c after x equal a fresh run of t[0..n) then x. */
static bool same_as_fresh(struct fx_context *c, const struct fx_model *m, const fx_token *t, int n,
			  fx_token x)
{
	int32_t nv = fx_model_n_vocab(m);
	float *a = calloc((size_t)nv, sizeof(float)), *b = calloc((size_t)nv, sizeof(float));
	struct fx_context *f = make(m, FX_KV_CONTIGUOUS, 7);
	bool ok = step(c, &x, 1, a, nv) && fx_decode(f, t, n, false) == FX_OK && step(f, &x, 1, b, nv) &&
		  !memcmp(a, b, (size_t)nv * sizeof(float));
	fx_context_free(f);
	free(a);
	free(b);
	return ok;
}

/* Refusals change nothing. */
static void check_errors(const char *name, const struct fx_model *m, int layout, bool swa)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token t[N];
	for (int i = 0; i < N; i++)
		t[i] = tok(5, i, nv);
	struct fx_context *c = make(m, layout, 9);
	CHECK(fx_decode(c, t, 30, false) == FX_OK);
	static const struct { int32_t seq, p0, p1, delta; int rc; } bad[] = {
		{ 1, 20, -1, -5, FX_E_INVALID },      /* sequence 1 was never added */
		{ 7, 20, -1, -5, FX_E_INVALID },      /* past n_seq_max */
		{ 0, -1, -1, -5, FX_E_INVALID },      /* p0 < 0 */
		{ 0, 31, -1, -5, FX_E_INVALID },      /* p0 past n_past */
		{ 0, 5, -1, -6, FX_E_INVALID },       /* p0 + delta < 0 */
		{ 0, 20, 10, -5, FX_E_INVALID },      /* p1 < p0 */
		{ 0, 20, -1, 3, FX_E_UNSUPPORTED },   /* up: a hole */
		{ 0, 20, 25, -5, FX_E_UNSUPPORTED },  /* not the tail: a hole */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = fx_seq_shift(c, bad[i].seq, bad[i].p0, bad[i].p1, bad[i].delta);
		CHECKF(rc == bad[i].rc && fx_seq_n_past(c, 0) == 30, "%s %s: shift(%d, %d, %d, %d) "
		       "gave %d, want %d", name, lay_name(layout), bad[i].seq, bad[i].p0, bad[i].p1,
		       bad[i].delta, rc, bad[i].rc);
	}
	CHECK(fx_seq_shift(c, 0, 20, -1, 0) == FX_OK && fx_seq_n_past(c, 0) == 30);
	CHECKF(same_as_fresh(c, m, t, 30, tok(6, 0, nv)), "%s %s: refused shifts changed the cache",
	       name, lay_name(layout));
	/* Dropping the tail only (p0 == n_past) is a roll-back. */
	CHECK(fx_seq_shift(c, 0, 31, -1, -6) == FX_OK && fx_seq_n_past(c, 0) == 25);
	CHECK(same_as_fresh(c, m, t, 25, tok(6, 1, nv)));
	if (layout == FX_KV_PAGED && swa) {
		/* At 100 the sliding layers hold rows 60 on; keeping 4 and
		 * moving 90.. to 4.. would need rows 0..3 and 60..89 dropped. */
		fx_seq_free(c, 0);
		CHECK(fx_decode(c, t, N, false) == FX_OK);
		int32_t used = fx_context_kv_blocks_used(c);
		int rc = fx_seq_shift(c, 0, 90, -1, -86);
		CHECKF(rc == FX_E_UNSUPPORTED, "%s paged: a shift into released rows gave %d", name, rc);
		CHECK(fx_seq_n_past(c, 0) == N && fx_context_kv_blocks_used(c) == used);
		CHECK(same_as_fresh(c, m, t, N, tok(6, 2, nv)));
		printf("%-12s paged      shift needing released sliding rows: refused (%s)\n", name,
		       fx_context_errmsg(c));
	}
	fx_context_free(c);
}

/* Paged: a shifted sequence, freed, serves only its kept prefix from the
 * cache; a shifted fork leaves its source as it was. */
static void check_prefix(const char *name, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token t[40], v[36];
	for (int i = 0; i < 40; i++)
		t[i] = tok(7, i, nv);
	struct fx_context *c = make(m, FX_KV_PAGED, 16);
	CHECK(fx_decode(c, t, 40, false) == FX_OK);
	fx_seq f;
	CHECK(fx_seq_fork(c, 0, &f) == FX_OK);
	CHECK(fx_seq_shift(c, f, 20, -1, -10) == FX_OK && fx_seq_n_past(c, f) == 30);
	CHECKF(same_as_fresh(c, m, t, 40, tok(8, 0, nv)), "%s: shifting a fork changed its source",
	       name);
	fx_seq_free(c, 0);
	fx_seq_free(c, f);
	CHECK(fx_context_kv_blocks_used(c) == 0);
	fx_context_free(c);
	/* The kept tokens: t[0..10) t[20..40), then 6 more past a block edge. */
	memcpy(v, t, 10 * sizeof(*v));
	memcpy(v + 10, t + 20, 20 * sizeof(*v));
	for (int i = 30; i < 36; i++)
		v[i] = tok(9, i, nv);

	c = make(m, FX_KV_PAGED, 16);
	CHECK(fx_decode(c, t, 40, false) == FX_OK);
	CHECK(fx_seq_shift(c, 0, 20, -1, -10) == FX_OK);
	CHECK(fx_decode(c, v + 30, 6, false) == FX_OK);
	fx_seq_free(c, 0);
	int64_t before = fx_context_prefix_hits(c);
	CHECK(fx_decode(c, v, 35, false) == FX_OK);
	int64_t hits = fx_context_prefix_hits(c) - before;
	CHECKF(hits == 8, "%s: %lld prefix hits on the shifted tokens, want 8 (the two blocks "
	       "before the first moved row)", name, (long long)hits);
	CHECKF(same_as_fresh(c, m, v, 35, v[35]), "%s: a prompt after a freed shifted sequence "
	       "differs from a fresh run", name);
	printf("%-12s paged      prompt == a freed shifted sequence's tokens: %lld prefix hits "
	       "(its unshifted 2 blocks)\n", name, (long long)hits);
	fx_context_free(c);
}

static struct fx_model *load(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "tests/fixtures/hf-tiny/%s", name);
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(path, NULL, &m, &err))
		CHECKF(0, "%s: %s", name, err.msg);
	return m;
}

int main(void)
{
	static const struct { const char *name; bool swa; } fx[] = {
		{ "llama", false }, { "qwen3_yarn", false }, { "phi3", false },
		{ "smollm3", false }, { "gemma3", true }, { "mistral_swa", true },
	};
	for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
		struct fx_model *m = load(fx[i].name);
		if (!m)
			continue;
		check_layouts(fx[i].name, m, false);
		if (fx[i].swa) {
			check_layouts(fx[i].name, m, true);
			/* Rounded caches round again after the rotation. */
			float *l = calloc((size_t)N_NEXT * fx_model_n_vocab(m), sizeof(float));
			check_exact_typed(fx[i].name, m, FX_KV_CONTIGUOUS, FX_KV_F16, l);
			if (i == 4) /* gemma3: heads of 32, q8_0's block */
				check_exact_typed(fx[i].name, m, FX_KV_PAGED, FX_KV_Q8_0, l);
			/* One sequence, ubatch 1: the sliding pool holds 12 blocks of
			 * 4, the window part 10 of them; the 104 rows left land in
			 * released blocks, so a shift that took them all before
			 * giving any back would not fit. */
			check_exact_run(fx[i].name, m, FX_KV_PAGED, FX_KV_DEFAULT,
					&(struct exact_run){ 200, 4 * D, 1, 1 }, l);
			free(l);
		}
		check_errors(fx[i].name, m, FX_KV_CONTIGUOUS, fx[i].swa);
		check_errors(fx[i].name, m, FX_KV_PAGED, fx[i].swa);
		if (i == 0 || fx[i].swa)
			check_prefix(fx[i].name, m);
		fx_model_free(m);
	}
	return check_exit();
}
