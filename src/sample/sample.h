/* Sampler chain internals: the candidates array, one function per sampler,
 * and the seeded RNG behind the final draw.
 *
 * Each sampler is a small function over a candidates array (token id,
 * logit, p), as in llama.cpp's llama-sampling.cpp; fx_sampler_sample
 * (sampler.c) runs them in llama.cpp common's default order: penalty,
 * top-k, top-p, min-p, temperature, draw. Every function works in place on
 * storage the caller owns and allocates nothing, so the chain does no
 * allocation per token. Exposed here so the tests can check each sampler
 * on hand-computed distributions.
 */
#ifndef FX_SAMPLE_SAMPLE_H
#define FX_SAMPLE_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrox.h"

struct sample_cand {
	fx_token id;
	float logit; /* never NaN: sample_cands_init maps NaN to -inf */
	float p;     /* probability, valid after sample_probs */
};

struct sample_cands {
	struct sample_cand *data; /* [n] borrowed: the sampler's scratch */
	int32_t n;                /* candidates still in play, >= 1 */
	bool sorted;              /* data is in sample_cand_before order */
};

/* Fill c from logits[0..n_vocab) (ids 0..n_vocab-1, unsorted). data must
 * hold n_vocab entries; n_vocab >= 1. */
void sample_cands_init(struct sample_cands *c, struct sample_cand *data,
		       const float *logits, int32_t n_vocab);

/* The chain's one total order: higher logit first, lower id on ties. */
bool sample_cand_before(const struct sample_cand *a, const struct sample_cand *b);

/* Sort c in sample_cand_before order (no-op when already sorted). */
void sample_sort(struct sample_cands *c);

/* p = softmax(logit) over the candidates in play. */
void sample_probs(struct sample_cands *c);

/* Repetition penalty: count[id] > 0 marks a token seen in the recent
 * history; its logit is divided by penalty when positive and multiplied
 * when <= 0, once however often it was seen. penalty == 1 is a no-op. */
void sample_penalty(struct sample_cands *c, const int32_t *count, float penalty);

/* Keep the k best candidates, sorted (k >= n: all, as they were). k <= 0: off. */
void sample_top_k(struct sample_cands *c, int32_t k);

/* Keep the shortest prefix of the sorted order whose probability mass
 * reaches p (at least one token). Fills p; the kept set may be left
 * unsorted (a large set is cut by buckets, not sorted). p >= 1: off. */
void sample_top_p(struct sample_cands *c, float p);

/* Keep candidates with probability >= p times the largest (at least the
 * largest). Keeps the current order. p <= 0: off. */
void sample_min_p(struct sample_cands *c, float p);

/* Divide every logit by temp (> 0). */
void sample_temp(struct sample_cands *c, float temp);

/* Id of the best candidate: highest logit, lowest id on ties. */
fx_token sample_argmax(const struct sample_cands *c);

/* 64-bit RNG: xoshiro256** (Blackman and Vigna 2018) seeded through
 * splitmix64, so any seed, 0 included, gives a full-period state. */
struct sample_rng {
	uint64_t s[4];
};

void sample_rng_seed(struct sample_rng *r, uint64_t seed);
uint64_t sample_rng_next(struct sample_rng *r);
double sample_rng_uniform(struct sample_rng *r); /* in [0, 1), 53 bits */

/* The uniform in [0, 1) (53 bits) that position pos of a stream draws
 * under seed: a pure function of (seed, pos), so a position's draw is the
 * same whether it is sampled alone (plain decoding) or as one of the rows a
 * speculative step verifies (counter-based, as Salmon et al. 2011's
 * Philox: here two rounds of splitmix64's finaliser). */
double sample_noise(uint64_t seed, int64_t pos);

/* The grammar matcher set on s (fx_sampler_set_matcher), or NULL. */
struct fx_matcher *sample_matcher(const struct fx_sampler *s);

/* Draw one candidate from softmax(logit) by inverse CDF at the uniform u
 * in [0, 1). Returns its id. */
fx_token sample_dist(struct sample_cands *c, double u);

#endif
