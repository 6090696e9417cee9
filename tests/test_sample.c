/* Sampler chain: each sampler on hand-computed distributions, the chain
 * through the public API, reproducibility, and parameter checks. */
#include <math.h>
#include <string.h>

#include "ferrox.h"
#include "check.h"
#include "sample/sample.h"

#define N_DRAWS 20000

/* 6 sigma of a frequency estimated from N_DRAWS draws is at most 0.0212. */
#define FREQ_TOL 0.022

static struct fx_sampler_params plain_params(float temp, uint64_t seed)
{
	struct fx_sampler_params p = fx_sampler_default_params();

	p.temp = temp;
	p.top_k = 0;
	p.top_p = 1.0f;
	p.min_p = 0.0f;
	p.repeat_penalty = 1.0f;
	p.seed = seed;
	return p;
}

static struct fx_sampler *make(const struct fx_sampler_params *p, int32_t n_vocab)
{
	struct fx_sampler *s = NULL;
	struct fx_err err = { 0 };
	int rc = fx_sampler_create(p, n_vocab, &s, &err);

	CHECKF(rc == FX_OK && s, "create: %d %s", rc, err.msg);
	return s;
}

/* Logits whose softmax is exactly probs (up to rounding). */
static void logits_from_probs(const double *probs, int n, float *logits)
{
	for (int i = 0; i < n; i++)
		logits[i] = probs[i] > 0 ? (float)log(probs[i]) : -INFINITY;
}

/* Draw N_DRAWS tokens; check that each token's frequency matches want[]
 * (0 means: never drawn). */
static void check_freqs(const char *what, const struct fx_sampler_params *p,
			const float *logits, int n, const double *want)
{
	struct fx_sampler *s = make(p, n);
	int hist[16] = { 0 };

	if (!s)
		return;
	for (int i = 0; i < N_DRAWS; i++) {
		fx_token t = fx_sampler_sample(s, logits);

		CHECKF(t >= 0 && t < n, "%s: token %d out of range", what, t);
		if (t >= 0 && t < n)
			hist[t]++;
	}
	for (int t = 0; t < n; t++) {
		double f = (double)hist[t] / N_DRAWS;

		if (want[t] == 0)
			CHECKF(hist[t] == 0, "%s: token %d drawn %d times, want never", what, t, hist[t]);
		else
			CHECKF(fabs(f - want[t]) < FREQ_TOL, "%s: token %d freq %.4f, want %.4f",
			       what, t, f, want[t]);
	}
	fx_sampler_free(s);
}

/* Sorted ids of the candidates in play. */
static int kept_ids(const struct sample_cands *c, int *ids)
{
	int n = c->n;

	for (int i = 0; i < n; i++)
		ids[i] = c->data[i].id;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	return n;
}

static void check_set(const char *what, const struct sample_cands *c,
		      const int *want, int n_want)
{
	int ids[16];
	int n = kept_ids(c, ids);

	CHECKF(n == n_want, "%s: kept %d tokens, want %d", what, n, n_want);
	for (int i = 0; i < n && i < n_want; i++)
		CHECKF(ids[i] == want[i], "%s: kept[%d] = %d, want %d", what, i, ids[i], want[i]);
}

static void test_defaults(void)
{
	struct fx_sampler_params p = fx_sampler_default_params();

	CHECK(p.size == sizeof(p));
	CHECK(p.temp == 0.8f && p.top_k == 40 && p.top_p == 0.95f && p.min_p == 0.05f);
	CHECK(p.repeat_penalty == 1.0f && p.repeat_last_n == 64);
	fx_sampler_free(NULL);
	CHECK(fx_sampler_sample(NULL, NULL) == -1);
	fx_sampler_accept(NULL, 0);
}

static void test_greedy(void)
{
	const float logits[6] = { 0.5f, -1.0f, 3.25f, 3.0f, -INFINITY, 2.0f };
	const float ties[5] = { 1.0f, 4.0f, 2.0f, 4.0f, 4.0f };
	struct fx_sampler_params p = plain_params(0.0f, 1);
	struct fx_sampler *s;

	p.top_k = 40; /* greedy ignores the filters */
	p.top_p = 0.5f;
	p.min_p = 0.3f;
	if (!(s = make(&p, 6)))
		return;
	for (int i = 0; i < 10; i++)
		CHECK(fx_sampler_sample(s, logits) == 2);
	fx_sampler_free(s);

	p.temp = -1.0f;
	if (!(s = make(&p, 5)))
		return;
	CHECKF(fx_sampler_sample(s, ties) == 1, "ties go to the lowest id");
	fx_sampler_free(s);

	/* NaN logits never win */
	const float nans[3] = { NAN, 0.1f, NAN };
	if (!(s = make(&p, 3)))
		return;
	CHECK(fx_sampler_sample(s, nans) == 1);
	fx_sampler_free(s);
}

static uint64_t test_rng_state = 0x1234;

static float test_uniform(void)
{
	test_rng_state = test_rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((test_rng_state >> 40) * 0x1.0p-24);
}

static void test_top_k1_is_greedy(void)
{
	enum { N = 1000 };
	static float logits[N];
	const float temps[] = { 0.05f, 0.7f, 1.0f, 5.0f, 1000.0f };

	for (int round = 0; round < 20; round++) {
		int best = 0;

		for (int i = 0; i < N; i++) {
			logits[i] = 8.0f * test_uniform() - 4.0f;
			if (logits[i] > logits[best])
				best = i;
		}
		for (size_t k = 0; k < sizeof(temps) / sizeof(temps[0]); k++) {
			struct fx_sampler_params p = plain_params(temps[k], round);
			struct fx_sampler *s;

			p.top_k = 1;
			if (!(s = make(&p, N)))
				return;
			for (int d = 0; d < 5; d++)
				CHECKF(fx_sampler_sample(s, logits) == best, "temp %g", (double)temps[k]);
			fx_sampler_free(s);
		}
	}
}

static void test_top_k(void)
{
	/* ids:              0     1     2     3     4     5     6 */
	const float l[7] = { 1.0f, 5.0f, 3.0f, 5.0f, 2.0f, 3.0f, -1.0f };
	struct sample_cand buf[7];
	struct sample_cands c;

	sample_cands_init(&c, buf, l, 7);
	sample_top_k(&c, 3);
	CHECK(c.sorted && c.n == 3);
	/* sorted by logit, ties by lower id: 1, 3, 2 (5 loses the tie to 2) */
	CHECK(buf[0].id == 1 && buf[1].id == 3 && buf[2].id == 2);

	sample_cands_init(&c, buf, l, 7);
	sample_top_k(&c, 0);
	CHECK(c.n == 7);
	sample_top_k(&c, 7);
	CHECK(c.n == 7);
	sample_top_k(&c, 100);
	CHECK(c.n == 7);

	/* through the chain: top-k 2 at temp 1 keeps {1, 3}, equally likely */
	struct fx_sampler_params p = plain_params(1.0f, 7);
	const double want[7] = { 0, 0.5, 0, 0.5, 0, 0, 0 };

	p.top_k = 2;
	check_freqs("top-k 2", &p, l, 7, want);
}

static void test_top_p(void)
{
	/* probabilities in shuffled id order:
	 * id 3: 0.5, id 0: 0.25, id 4: 0.15, id 1: 0.06, id 2: 0.04 */
	const double probs[5] = { 0.25, 0.06, 0.04, 0.5, 0.15 };
	float l[5];
	struct sample_cand buf[5];
	struct sample_cands c;

	logits_from_probs(probs, 5, l);

	/* cumulative 0.5, 0.75, 0.90, 0.96, 1.0 */
	sample_cands_init(&c, buf, l, 5);
	sample_top_p(&c, 0.7f);
	check_set("top-p 0.7", &c, (const int[]){ 0, 3 }, 2);
	sample_cands_init(&c, buf, l, 5);
	sample_top_p(&c, 0.8f);
	check_set("top-p 0.8", &c, (const int[]){ 0, 3, 4 }, 3);
	sample_cands_init(&c, buf, l, 5);
	sample_top_p(&c, 0.1f);
	check_set("top-p 0.1 keeps one", &c, (const int[]){ 3 }, 1);
	sample_cands_init(&c, buf, l, 5);
	sample_top_p(&c, 0.0f);
	check_set("top-p 0 keeps one", &c, (const int[]){ 3 }, 1);
	sample_cands_init(&c, buf, l, 5);
	sample_top_p(&c, 1.0f);
	CHECK(c.n == 5);

	/* the chain: renormalised over the kept set */
	struct fx_sampler_params p = plain_params(1.0f, 11);

	p.top_p = 0.7f;
	check_freqs("top-p 0.7", &p, l, 5, (const double[]){ 1.0 / 3, 0, 0, 2.0 / 3, 0 });
	p.top_p = 0.8f;
	check_freqs("top-p 0.8", &p, l, 5,
		    (const double[]){ 0.25 / 0.9, 0, 0, 0.5 / 0.9, 0.15 / 0.9 });
	/* top-p sees the untempered distribution; temperature 2 then
	 * flattens the kept pair to sqrt(0.5) : sqrt(0.25) */
	p.top_p = 0.7f;
	p.temp = 2.0f;
	check_freqs("top-p 0.7 temp 2", &p, l, 5,
		    (const double[]){ 0.5 / (0.5 + sqrt(0.5)), 0, 0, sqrt(0.5) / (0.5 + sqrt(0.5)), 0 });
	/* after top-k 3 the mass is renormalised over {3, 0, 4} (sum 0.9):
	 * 0.5/0.9 = 0.556 < 0.6 <= 0.75/0.9 = 0.833, so {3, 0} */
	p.temp = 1.0f;
	p.top_k = 3;
	p.top_p = 0.6f;
	check_freqs("top-k 3 top-p 0.6", &p, l, 5, (const double[]){ 1.0 / 3, 0, 0, 2.0 / 3, 0 });
}

/* A large vocabulary takes top-p's bucketed path: it must keep the set a
 * full sort keeps. */
static void test_top_p_large(void)
{
	enum { N = 5000 };
	static float l[N];
	static struct sample_cand a[N], b[N];
	static int ia[N], ib[N];
	const float ps[] = { 0.0f, 0.01f, 0.3f, 0.9f, 0.95f, 0.999f };

	for (int round = 0; round < 6; round++) {
		float scale = round == 0 ? 0.01f : 3.0f * round; /* flat to peaked */

		for (int i = 0; i < N; i++)
			l[i] = scale * (test_uniform() - 0.5f) * 4.0f;
		if (round == 4) /* ties and masked tokens */
			for (int i = 0; i < N; i += 3)
				l[i] = i % 2 ? -INFINITY : l[0];
		for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
			struct sample_cands ca, cb;
			int na, nb;

			sample_cands_init(&ca, a, l, N);
			sample_top_p(&ca, ps[k]);
			sample_cands_init(&cb, b, l, N);
			sample_sort(&cb);
			sample_top_p(&cb, ps[k]);
			na = kept_ids(&ca, ia);
			nb = kept_ids(&cb, ib);
			CHECKF(na == nb, "top-p %g scale %g: kept %d, full sort keeps %d",
			       (double)ps[k], (double)scale, na, nb);
			if (na == nb && memcmp(ia, ib, (size_t)na * sizeof(ia[0])))
				CHECKF(0, "top-p %g scale %g: kept sets differ", (double)ps[k], (double)scale);
		}
	}
}

static void test_min_p(void)
{
	/* id 2: 0.4, id 0: 0.3, id 4: 0.15, id 1: 0.1, id 3: 0.05 */
	const double probs[5] = { 0.3, 0.1, 0.4, 0.05, 0.15 };
	float l[5];
	struct sample_cand buf[5];
	struct sample_cands c;

	logits_from_probs(probs, 5, l);

	/* 0.3 * 0.4 = 0.12: keeps 0.4, 0.3, 0.15 */
	sample_cands_init(&c, buf, l, 5);
	sample_min_p(&c, 0.3f);
	check_set("min-p 0.3", &c, (const int[]){ 0, 2, 4 }, 3);
	/* 0.5 * 0.4 = 0.2: keeps 0.4, 0.3 */
	sample_cands_init(&c, buf, l, 5);
	sample_min_p(&c, 0.5f);
	check_set("min-p 0.5", &c, (const int[]){ 0, 2 }, 2);
	/* relative to the max, not absolute: 0.9 * 0.4 = 0.36 keeps only id 2 */
	sample_cands_init(&c, buf, l, 5);
	sample_min_p(&c, 0.9f);
	check_set("min-p 0.9", &c, (const int[]){ 2 }, 1);
	sample_cands_init(&c, buf, l, 5);
	sample_min_p(&c, 2.0f);
	check_set("min-p 2 keeps the max", &c, (const int[]){ 2 }, 1);
	sample_cands_init(&c, buf, l, 5);
	sample_min_p(&c, 0.0f);
	CHECK(c.n == 5);
	sample_min_p(&c, -1.0f);
	CHECK(c.n == 5);

	struct fx_sampler_params p = plain_params(1.0f, 13);

	p.min_p = 0.3f;
	check_freqs("min-p 0.3", &p, l, 5,
		    (const double[]){ 0.3 / 0.85, 0, 0.4 / 0.85, 0, 0.15 / 0.85 });
	/* top-p 0.8 keeps {2, 0, 4} (cum 0.85), min-p 0.5 then {2, 0} */
	p.top_p = 0.8f;
	p.min_p = 0.5f;
	check_freqs("top-p 0.8 min-p 0.5", &p, l, 5,
		    (const double[]){ 0.3 / 0.7, 0, 0.4 / 0.7, 0, 0 });
}

static void test_temperature(void)
{
	const double probs[3] = { 0.5, 0.25, 0.25 };
	float l[3];
	struct fx_sampler_params p = plain_params(1.0f, 17);
	double z;

	logits_from_probs(probs, 3, l);
	check_freqs("temp 1", &p, l, 3, probs);
	/* temp 2: p ~ sqrt(p) */
	p.temp = 2.0f;
	z = sqrt(0.5) + 2 * sqrt(0.25);
	check_freqs("temp 2", &p, l, 3, (const double[]){ sqrt(0.5) / z, 0.5 / z, 0.5 / z });
	/* temp 0.5: p ~ p^2 */
	p.temp = 0.5f;
	z = 0.25 + 2 * 0.0625;
	check_freqs("temp 0.5", &p, l, 3, (const double[]){ 0.25 / z, 0.0625 / z, 0.0625 / z });
}

static void test_repeat_penalty(void)
{
	struct fx_sampler_params p = plain_params(0.0f, 1);
	struct fx_sampler *s;

	p.repeat_penalty = 1.5f;
	p.repeat_last_n = 3;

	/* positive logits are divided: 2.0 / 1.5 = 1.333 < 1.8 */
	const float pos[4] = { 2.0f, 1.8f, -0.5f, -0.4f };
	if (!(s = make(&p, 4)))
		return;
	CHECK(fx_sampler_sample(s, pos) == 0);
	fx_sampler_accept(s, 0);
	CHECKF(fx_sampler_sample(s, pos) == 1, "penalised argmax moves to 1");
	fx_sampler_free(s);

	/* negative logits are multiplied: -1.0 * 1.5 = -1.5 < -1.2
	 * (dividing would give -0.667 and keep token 0) */
	const float neg[4] = { -1.0f, -1.2f, -5.0f, -5.0f };
	if (!(s = make(&p, 4)))
		return;
	fx_sampler_accept(s, 0);
	CHECKF(fx_sampler_sample(s, neg) == 1, "negative logit multiplied");
	fx_sampler_free(s);

	/* once per distinct token: 2.0 / 1.5 = 1.333 > 1.2 (2.0 / 1.5^2 would not be) */
	const float once[2] = { 2.0f, 1.2f };
	if (!(s = make(&p, 2)))
		return;
	fx_sampler_accept(s, 0);
	fx_sampler_accept(s, 0);
	fx_sampler_accept(s, 0);
	CHECKF(fx_sampler_sample(s, once) == 0, "penalty applied once");
	fx_sampler_free(s);

	/* only the last repeat_last_n = 3 accepted tokens count */
	if (!(s = make(&p, 4)))
		return;
	fx_sampler_accept(s, 0);
	fx_sampler_accept(s, 2);
	fx_sampler_accept(s, 3);
	CHECK(fx_sampler_sample(s, pos) == 1);
	fx_sampler_accept(s, 3); /* 0 leaves the window */
	CHECK(fx_sampler_sample(s, pos) == 0);
	fx_sampler_accept(s, 0);
	CHECK(fx_sampler_sample(s, pos) == 1);
	fx_sampler_accept(s, -1); /* out of range: ignored */
	fx_sampler_accept(s, 4);
	CHECK(fx_sampler_sample(s, pos) == 1);
	fx_sampler_free(s);

	/* penalty 1 and repeat_last_n 0 are off */
	p.repeat_penalty = 1.0f;
	if (!(s = make(&p, 4)))
		return;
	fx_sampler_accept(s, 0);
	CHECK(fx_sampler_sample(s, pos) == 0);
	fx_sampler_free(s);
	p.repeat_penalty = 1.5f;
	p.repeat_last_n = 0;
	if (!(s = make(&p, 4)))
		return;
	fx_sampler_accept(s, 0);
	CHECK(fx_sampler_sample(s, pos) == 0);
	fx_sampler_free(s);

	/* the penalty runs before the filters: with top-k 1 at temp 1 the
	 * penalised token 0 loses its place to token 1 */
	p = plain_params(1.0f, 3);
	p.repeat_penalty = 1.5f;
	p.top_k = 1;
	if (!(s = make(&p, 4)))
		return;
	fx_sampler_accept(s, 0);
	for (int i = 0; i < 20; i++)
		CHECK(fx_sampler_sample(s, pos) == 1);
	fx_sampler_free(s);
}

static void run_seq(uint64_t seed, fx_token *out, int n)
{
	enum { V = 8 };
	float l[V];
	struct fx_sampler_params p = fx_sampler_default_params();
	struct fx_sampler *s;

	p.seed = seed;
	p.temp = 1.0f;
	p.repeat_penalty = 1.1f;
	if (!(s = make(&p, V)))
		return;
	for (int i = 0; i < n; i++) {
		/* a logits sequence that depends on the step only */
		for (int t = 0; t < V; t++)
			l[t] = 0.3f * (float)((t * 7 + i * 3) % V);
		out[i] = fx_sampler_sample(s, l);
		fx_sampler_accept(s, out[i]);
	}
	fx_sampler_free(s);
}

static void test_seed(void)
{
	enum { N = 200 };
	fx_token a[N], b[N], c[N];

	run_seq(42, a, N);
	run_seq(42, b, N);
	run_seq(43, c, N);
	CHECK(memcmp(a, b, sizeof(a)) == 0);
	CHECK(memcmp(a, c, sizeof(a)) != 0);

	struct sample_rng r1, r2;

	sample_rng_seed(&r1, 0);
	sample_rng_seed(&r2, 0);
	CHECK(sample_rng_next(&r1) == sample_rng_next(&r2));
	for (int i = 0; i < 1000; i++) {
		double u = sample_rng_uniform(&r1);

		CHECK(u >= 0.0 && u < 1.0);
	}
}

static void expect_invalid(const char *what, const struct fx_sampler_params *p, int32_t n_vocab)
{
	struct fx_sampler *s = (struct fx_sampler *)&s; /* must be cleared */
	struct fx_err err = { 0 };
	int rc = fx_sampler_create(p, n_vocab, &s, &err);

	CHECKF(rc == FX_E_INVALID, "%s: rc %d", what, rc);
	CHECKF(err.code == FX_E_INVALID && err.msg[0], "%s: no message", what);
	CHECKF(s == NULL, "%s: *out not cleared", what);
	if (rc == FX_OK)
		fx_sampler_free(s);
	else
		printf("  %s -> %s\n", what, err.msg);
}

static void test_invalid(void)
{
	struct fx_sampler_params d = fx_sampler_default_params(), p;
	struct fx_err err = { 0 };

	expect_invalid("n_vocab 0", &d, 0);
	expect_invalid("n_vocab -5", &d, -5);
	p = d; p.temp = NAN;
	expect_invalid("temp NaN", &p, 10);
	p = d; p.temp = INFINITY;
	expect_invalid("temp inf", &p, 10);
	p = d; p.top_p = NAN;
	expect_invalid("top_p NaN", &p, 10);
	p = d; p.min_p = NAN;
	expect_invalid("min_p NaN", &p, 10);
	p = d; p.repeat_penalty = 0.0f;
	expect_invalid("repeat_penalty 0", &p, 10);
	p = d; p.repeat_penalty = NAN;
	expect_invalid("repeat_penalty NaN", &p, 10);
	p = d; p.repeat_last_n = -1;
	expect_invalid("repeat_last_n -1", &p, 10);
	p = d; p.size = 0;
	expect_invalid("size 0", &p, 10);
	p = d; p.size = sizeof(p) + 8;
	expect_invalid("size too big", &p, 10);
	CHECK(fx_sampler_create(&d, 10, NULL, &err) == FX_E_INVALID);
	CHECK(fx_sampler_create(&d, 0, NULL, NULL) == FX_E_INVALID);

	/* NULL params: the defaults */
	struct fx_sampler *s = NULL;

	CHECK(fx_sampler_create(NULL, 10, &s, &err) == FX_OK && s);
	fx_sampler_free(s);
	/* neutral and edge values are valid */
	p = d; p.temp = 0.0f; p.top_k = -3; p.top_p = 5.0f; p.min_p = -1.0f;
	p.repeat_penalty = 0.5f; p.repeat_last_n = 0;
	s = NULL;
	CHECK(fx_sampler_create(&p, 1, &s, &err) == FX_OK && s);
	if (s) {
		const float one = 3.0f;

		CHECK(fx_sampler_sample(s, &one) == 0);
		CHECK(fx_sampler_sample(s, NULL) == -1);
	}
	fx_sampler_free(s);
}

/* The default chain on a realistic vocabulary stays in range and never
 * picks a token that min-p must drop. */
static void test_default_chain(void)
{
	enum { V = 32000 };
	static float l[V];
	struct fx_sampler *s = make(NULL, V);

	if (!s)
		return;
	for (int i = 0; i < V; i++)
		l[i] = 4.0f * test_uniform();
	l[123] = 20.0f; /* p(others) / p(123) <= e^-16 < min-p 0.05 */
	for (int i = 0; i < 200; i++) {
		fx_token t = fx_sampler_sample(s, l);

		CHECK(t == 123);
		fx_sampler_accept(s, t);
	}
	fx_sampler_free(s);
}

/* fx_sampler_ban: banned tokens are never drawn, greedy or not; the
 * caller's logits are untouched; a new list replaces the old. */
static void test_ban(void)
{
	const float logits[6] = { 0.5f, -1.0f, 3.25f, 3.0f, -INFINITY, 2.0f };
	float copy[6];
	struct fx_sampler_params p = plain_params(0.0f, 1);
	struct fx_sampler *s;
	struct fx_err err = { 0 };
	const fx_token ban2[] = { 2 }, ban23[] = { 3, 2 }, bad[] = { 6 };

	memcpy(copy, logits, sizeof(copy));
	if (!(s = make(&p, 6)))
		return;
	CHECK(fx_sampler_ban(s, ban2, 1, &err) == FX_OK);
	CHECKF(fx_sampler_sample(s, logits) == 3, "greedy: the best one left");
	CHECK(fx_sampler_ban(s, ban23, 2, &err) == FX_OK);
	CHECK(fx_sampler_sample(s, logits) == 5);
	CHECK(!memcmp(copy, logits, sizeof(copy)));
	CHECK(fx_sampler_ban(s, bad, 1, &err) == FX_E_INVALID);
	CHECK(fx_sampler_sample(s, logits) == 5); /* a refused list changes nothing */
	CHECK(fx_sampler_ban(s, NULL, 0, &err) == FX_OK);
	CHECK(fx_sampler_sample(s, logits) == 2);
	fx_sampler_free(s);

	/* sampled at temperature 1: token 2 (~49% unbanned) never comes */
	p = plain_params(1.0f, 7);
	if (!(s = make(&p, 6)))
		return;
	CHECK(fx_sampler_ban(s, ban2, 1, &err) == FX_OK);
	int hits[6] = { 0 };
	for (int i = 0; i < 2000; i++) {
		fx_token t = fx_sampler_sample(s, logits);
		if (t >= 0 && t < 6)
			hits[t]++;
	}
	CHECKF(hits[2] == 0 && hits[3] > 0 && hits[4] == 0, "banned %d, next %d", hits[2], hits[3]);
	fx_sampler_free(s);
}

int main(void)
{
	test_defaults();
	test_greedy();
	test_top_k1_is_greedy();
	test_top_k();
	test_top_p();
	test_top_p_large();
	test_min_p();
	test_temperature();
	test_repeat_penalty();
	test_seed();
	test_invalid();
	test_default_chain();
	test_ban();
	return check_exit();
}
