/* The samplers of the chain, one function each, over a candidates array.
 *
 * Definitions and edge cases follow llama.cpp's llama-sampling.cpp (the
 * parity oracle); each function names the source of its definition. The
 * one difference by design: ties in logit are broken by the lower token id
 * everywhere (llama.cpp leaves them to std::sort), so a run is reproducible
 * on any libc.
 */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>

void sample_cands_init(struct sample_cands *c, struct sample_cand *data,
		       const float *logits, int32_t n_vocab)
{
	for (int32_t i = 0; i < n_vocab; i++) {
		data[i].id = i;
		data[i].logit = isnan(logits[i]) ? -INFINITY : logits[i];
		data[i].p = 0.0f;
	}
	c->data = data;
	c->n = n_vocab;
	c->sorted = false;
}

bool sample_cand_before(const struct sample_cand *a, const struct sample_cand *b)
{
	if (a->logit != b->logit)
		return a->logit > b->logit;
	return a->id < b->id;
}

static int cand_cmp(const void *pa, const void *pb)
{
	const struct sample_cand *a = pa, *b = pb;

	if (sample_cand_before(a, b))
		return -1;
	return sample_cand_before(b, a) ? 1 : 0;
}

void sample_sort(struct sample_cands *c)
{
	if (c->sorted)
		return;
	qsort(c->data, (size_t)c->n, sizeof(c->data[0]), cand_cmp);
	c->sorted = true;
}

/* exp(l - max) for l <= max, defined also when max is infinite (the max
 * itself weighs 1, anything below an infinite max weighs 0). */
static float shifted_exp(float l, float max)
{
	if (l == max)
		return 1.0f;
	return expf(l - max);
}

static float max_logit(const struct sample_cands *c)
{
	float max = c->data[0].logit;

	if (c->sorted)
		return max;
	for (int32_t i = 1; i < c->n; i++)
		if (c->data[i].logit > max)
			max = c->data[i].logit;
	return max;
}

void sample_probs(struct sample_cands *c)
{
	float max = max_logit(c);
	double sum = 0.0; /* >= 1: the max contributes exactly 1 */

	for (int32_t i = 0; i < c->n; i++) {
		c->data[i].p = shifted_exp(c->data[i].logit, max);
		sum += c->data[i].p;
	}
	for (int32_t i = 0; i < c->n; i++)
		c->data[i].p = (float)(c->data[i].p / sum);
}

/* Repetition penalty: Keskar et al. 2019, "CTRL: A Conditional Transformer
 * Language Model for Controllable Generation", as implemented by llama.cpp's
 * penalties sampler: a seen token's logit is divided by the penalty when
 * positive and multiplied when <= 0 (CTRL only divides, which would favour
 * tokens with negative logits). Applied once per distinct seen token. */
void sample_penalty(struct sample_cands *c, const int32_t *count, float penalty)
{
	if (penalty == 1.0f || !count)
		return;
	for (int32_t i = 0; i < c->n; i++) {
		struct sample_cand *d = &c->data[i];

		if (count[d->id] <= 0)
			continue;
		if (d->logit <= 0.0f)
			d->logit *= penalty;
		else
			d->logit /= penalty;
	}
	c->sorted = false;
}

/* Heap of the m best seen so far, worst at the root. */
static void heap_sift_down(struct sample_cand *h, size_t m, size_t i)
{
	for (;;) {
		size_t w = i, l = 2 * i + 1, r = l + 1;
		struct sample_cand t;

		if (l < m && sample_cand_before(&h[w], &h[l]))
			w = l;
		if (r < m && sample_cand_before(&h[w], &h[r]))
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

/* Move the m best of d[0..n) to d[0..m), sorted; 0 < m < n. O(n log m),
 * in place: the rest stay in d[m..n) in some order. */
static void select_best(struct sample_cand *d, size_t n, size_t m)
{
	for (size_t i = m / 2; i-- > 0;)
		heap_sift_down(d, m, i);
	for (size_t j = m; j < n; j++) {
		if (!sample_cand_before(&d[j], &d[0]))
			continue;
		struct sample_cand t = d[0];

		d[0] = d[j];
		d[j] = t;
		heap_sift_down(d, m, 0);
	}
	qsort(d, m, sizeof(d[0]), cand_cmp);
}

/* Top-k: Fan, Lewis and Dauphin 2018, "Hierarchical Neural Story
 * Generation". llama.cpp semantics: k <= 0 is off; k >= n keeps all. */
void sample_top_k(struct sample_cands *c, int32_t k)
{
	if (k <= 0 || k >= c->n)
		return;
	if (!c->sorted)
		select_best(c->data, (size_t)c->n, (size_t)k);
	c->n = k;
	c->sorted = true;
}

/* Index of the first candidate at which mass + the running sum of p
 * reaches want, or -1. */
static int32_t mass_reaches(const struct sample_cand *d, int32_t m, double mass, float want)
{
	for (int32_t i = 0; i < m; i++) {
		mass += d[i].p;
		if (mass >= want)
			return i;
	}
	return -1;
}

/* A large unsorted set is cut without sorting it: histogram the mass by
 * logit into buckets (bucket 0 holds the max), find the bucket where the
 * mass reaches p, and sort that bucket alone. The bucket index never grows
 * with the logit, so the buckets before it hold exactly the candidates that
 * precede it in the sorted order. O(n) plus the sort of one bucket. */
enum { TOP_P_BUCKETS = 512, TOP_P_SORT_MAX = 1024 };

static int32_t top_p_bucket(float l, float max, float scale)
{
	float b = (max - l) * scale;

	return b < TOP_P_BUCKETS - 1 ? (int32_t)b : TOP_P_BUCKETS - 1;
}

/* Returns false (nothing done) when the logits don't spread over a finite
 * range; the caller then sorts. */
static bool top_p_bucketed(struct sample_cands *c, float p)
{
	struct sample_cand *d = c->data;
	double mass[TOP_P_BUCKETS] = { 0 }, cum = 0.0;
	float max = d[0].logit, min = d[0].logit, scale;
	int32_t b, cut, j = 0, k;

	for (int32_t i = 1; i < c->n; i++) {
		max = d[i].logit > max ? d[i].logit : max;
		min = d[i].logit < min ? d[i].logit : min;
	}
	if (!isfinite(max) || !(max > min))
		return false;
	/* exp(-64) is below float resolution: the tail shares the last bucket */
	scale = (TOP_P_BUCKETS - 1) / fminf(max - min, 64.0f);
	for (int32_t i = 0; i < c->n; i++)
		mass[top_p_bucket(d[i].logit, max, scale)] += d[i].p;
	for (b = 0; b < TOP_P_BUCKETS; b++) {
		if (cum + mass[b] >= p)
			break;
		cum += mass[b];
	}
	if (b == TOP_P_BUCKETS)
		return true; /* rounding: the mass never reaches p, keep all */
	for (int32_t i = 0; i < c->n; i++) {
		if (top_p_bucket(d[i].logit, max, scale) < b) {
			struct sample_cand t = d[i];

			d[i] = d[j];
			d[j++] = t;
		}
	}
	for (int32_t i = k = j; i < c->n; i++) {
		if (top_p_bucket(d[i].logit, max, scale) == b) {
			struct sample_cand t = d[i];

			d[i] = d[k];
			d[k++] = t;
		}
	}
	qsort(d + j, (size_t)(k - j), sizeof(d[0]), cand_cmp);
	cut = mass_reaches(d + j, k - j, cum, p);
	c->n = cut >= 0 ? j + cut + 1 : k;
	c->sorted = false;
	return true;
}

/* Top-p (nucleus): Holtzman et al. 2019, "The Curious Case of Neural Text
 * Degeneration". llama.cpp semantics: probabilities are the softmax over
 * the candidates still in play; keep the shortest prefix of the sorted
 * order with mass >= p, but at least one token; p >= 1 is off. The kept
 * set is not left sorted when it came from top_p_bucketed. */
void sample_top_p(struct sample_cands *c, float p)
{
	int32_t last;

	if (p >= 1.0f)
		return;
	sample_probs(c);
	if (!c->sorted && c->n > TOP_P_SORT_MAX && top_p_bucketed(c, p))
		return;
	sample_sort(c);
	last = mass_reaches(c->data, c->n, 0.0, p);
	if (last >= 0)
		c->n = last + 1;
}

/* Min-p: Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling for
 * Creative and Coherent LLM Outputs", as in llama.cpp: keep tokens whose
 * probability is >= p times the largest, i.e. logit >= max + log(p); the
 * best token always stays (p > 1 keeps it alone); p <= 0 is off. */
void sample_min_p(struct sample_cands *c, float p)
{
	float min_logit;
	int32_t j = 0;

	if (p <= 0.0f)
		return;
	min_logit = max_logit(c) + logf(p);
	for (int32_t i = 0; i < c->n; i++)
		if (c->data[i].logit >= min_logit)
			c->data[j++] = c->data[i];
	if (j == 0) {
		/* nothing was moved: put the best first and keep it */
		int32_t best = 0;

		for (int32_t i = 1; i < c->n; i++)
			if (sample_cand_before(&c->data[i], &c->data[best]))
				best = i;
		c->data[0] = c->data[best];
		j = 1;
	}
	c->n = j;
}

/* Softmax temperature (Ackley, Hinton and Sejnowski 1985; as in llama.cpp's
 * temp sampler): logits / temp. Rounding may tie neighbours, so the
 * id-tie-break order is no longer promised. */
void sample_temp(struct sample_cands *c, float temp)
{
	for (int32_t i = 0; i < c->n; i++)
		c->data[i].logit /= temp;
	c->sorted = false;
}

fx_token sample_argmax(const struct sample_cands *c)
{
	int32_t best = 0;

	for (int32_t i = 1; i < c->n; i++)
		if (sample_cand_before(&c->data[i], &c->data[best]))
			best = i;
	return c->data[best].id;
}

/* Inverse-CDF draw from softmax(logit) over the candidates in play (llama.cpp's
 * dist sampler, with our RNG in place of std::mt19937). Zero-probability
 * candidates are never drawn. */
fx_token sample_dist(struct sample_cands *c, double u)
{
	double acc = 0.0;
	int32_t last = 0;

	sample_probs(c);
	for (int32_t i = 0; i < c->n; i++) {
		if (c->data[i].p <= 0.0f)
			continue;
		acc += c->data[i].p;
		last = i;
		if (u < acc)
			return c->data[i].id;
	}
	return c->data[last].id; /* rounding left acc just below u */
}

static uint64_t rotl64(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

/* splitmix64 (Steele, Lea and Flood 2014) expands the seed. */
void sample_rng_seed(struct sample_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++) {
		uint64_t z = (seed += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		r->s[i] = z ^ (z >> 31);
	}
}

/* xoshiro256** 1.0 (Blackman and Vigna 2018). */
uint64_t sample_rng_next(struct sample_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return out;
}

double sample_rng_uniform(struct sample_rng *r)
{
	return (double)(sample_rng_next(r) >> 11) * 0x1.0p-53;
}

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double sample_noise(uint64_t seed, int64_t pos)
{
	uint64_t z = mix64(seed + 0x9e3779b97f4a7c15ull);
	z = mix64(z ^ ((uint64_t)pos * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
	return (double)(z >> 11) * 0x1.0p-53;
}
