/* fx_sampler: the public sampler chain (see "sampling" in ferrox.h).
 *
 * All storage is allocated by fx_sampler_create: the candidates scratch and,
 * when the repetition penalty is on, the history ring and the per-token
 * counts over it. fx_sampler_sample and fx_sampler_accept allocate nothing.
 */
#include "sample/sample.h"

#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"

/* The default seed is fixed, not drawn from the clock: a run is repeatable
 * unless the caller asks otherwise by passing its own seed. */
#define SAMPLE_DEFAULT_SEED 0x5eedf0e5ull

struct fx_sampler {
	struct fx_sampler_params p; /* validated copy */
	int32_t n_vocab;
	struct sample_cand *cand;   /* [n_vocab] scratch for one sample */
	fx_token *ring;             /* [p.repeat_last_n] last accepted tokens, or NULL (penalty off) */
	int32_t *count;             /* [n_vocab] occurrences in ring, or NULL */
	int32_t ring_len;           /* tokens in ring, <= p.repeat_last_n */
	int32_t ring_head;          /* next slot to write; the oldest once full */
	int64_t draws;              /* fx_sampler_sample calls so far: their positions */
	struct fx_matcher *matcher; /* borrowed, or NULL: no constraint */
	float *masked;              /* [n_vocab] logits under the matcher's mask, on first need */
	fx_token *ban;              /* [n_ban] tokens never picked (fx_sampler_ban), or NULL */
	int32_t n_ban;
	float *unbanned;            /* [n_vocab] logits with the banned ones -inf, on first need */
};

struct fx_sampler_params fx_sampler_default_params(void)
{
	struct fx_sampler_params p = {
		.size = sizeof(struct fx_sampler_params),
		.temp = 0.8f,
		.top_k = 40,
		.top_p = 0.95f,
		.min_p = 0.05f,
		.repeat_penalty = 1.0f,
		.repeat_last_n = 64,
		.seed = SAMPLE_DEFAULT_SEED,
	};
	return p;
}

static int check_params(const struct fx_sampler_params *p, int32_t n_vocab,
			struct fx_err *err)
{
	if (n_vocab <= 0)
		return fx_fail(err, FX_E_INVALID, "sampler: n_vocab is %d, want > 0", n_vocab);
	if (!isfinite(p->temp))
		return fx_fail(err, FX_E_INVALID, "sampler: temp is %g, want a finite number (<= 0: greedy)",
			       (double)p->temp);
	if (!isfinite(p->top_p))
		return fx_fail(err, FX_E_INVALID, "sampler: top_p is %g, want a finite number (>= 1: off)",
			       (double)p->top_p);
	if (!isfinite(p->min_p))
		return fx_fail(err, FX_E_INVALID, "sampler: min_p is %g, want a finite number (<= 0: off)",
			       (double)p->min_p);
	if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0.0f)
		return fx_fail(err, FX_E_INVALID, "sampler: repeat_penalty is %g, want > 0 (1: off)",
			       (double)p->repeat_penalty);
	if (p->repeat_last_n < 0)
		return fx_fail(err, FX_E_INVALID, "sampler: repeat_last_n is %d, want >= 0 (0: off)",
			       p->repeat_last_n);
	return FX_OK;
}

int fx_sampler_create(const struct fx_sampler_params *p, int32_t n_vocab,
		      struct fx_sampler **out, struct fx_err *err)
{
	struct fx_sampler_params q = fx_sampler_default_params();
	struct fx_sampler *s;
	int rc;

	if (!out)
		return fx_fail(err, FX_E_INVALID, "sampler: out is NULL");
	*out = NULL;
	if (p) {
		/* an older caller's smaller struct keeps our defaults for the rest */
		if (p->size < sizeof(p->size) || p->size > sizeof(q))
			return fx_fail(err, FX_E_INVALID,
				       "sampler: params size is %zu, want %zu..%zu (start from fx_sampler_default_params)",
				       p->size, sizeof(p->size), sizeof(q));
		memcpy(&q, p, p->size);
		q.size = sizeof(q);
	}
	if ((rc = check_params(&q, n_vocab, err)) != FX_OK)
		return rc;

	if (!(s = fx_calloc(1, sizeof(*s))))
		return fx_fail(err, FX_E_NOMEM, "sampler: out of memory");
	s->p = q;
	s->n_vocab = n_vocab;
	if (!(s->cand = fx_calloc((size_t)n_vocab, sizeof(*s->cand)))) {
		rc = fx_fail(err, FX_E_NOMEM, "sampler: out of memory for %d candidates", n_vocab);
		goto out_free_s;
	}
	if (q.repeat_penalty != 1.0f && q.repeat_last_n > 0) {
		if (!(s->ring = fx_calloc((size_t)q.repeat_last_n, sizeof(*s->ring))) ||
		    !(s->count = fx_calloc((size_t)n_vocab, sizeof(*s->count)))) {
			rc = fx_fail(err, FX_E_NOMEM, "sampler: out of memory for a %d-token history",
				     q.repeat_last_n);
			goto out_free_ring;
		}
	}
	*out = s;
	return FX_OK;

out_free_ring:
	fx_free(s->ring);
	fx_free(s->cand);
out_free_s:
	fx_free(s);
	return rc;
}

void fx_sampler_free(struct fx_sampler *s)
{
	if (!s)
		return;
	fx_free(s->masked);
	fx_free(s->ban);
	fx_free(s->unbanned);
	fx_free(s->count);
	fx_free(s->ring);
	fx_free(s->cand);
	fx_free(s);
}

/* sample_argmax's token straight from the logits (highest, lowest id on
 * ties, NaN below everything): greedy decoding without a penalty needs no
 * candidates array (Gemma 3's 262k: ~1 ms a token less here). */
static fx_token argmax_logits(const float *x, int32_t n)
{
	fx_token best = 0;
	float bv = isnan(x[0]) ? -INFINITY : x[0];
	for (int32_t i = 1; i < n; i++)
		if (x[i] > bv) { /* false for NaN */
			bv = x[i];
			best = i;
		}
	return best;
}

/* The chain over logits (not modified), drawing at position pos. */
static fx_token run_chain(struct fx_sampler *s, const float *logits, int64_t pos)
{
	const struct fx_sampler_params *p = &s->p;
	struct sample_cands c;

	if (p->temp <= 0.0f && !s->count)
		return argmax_logits(logits, s->n_vocab);

	sample_cands_init(&c, s->cand, logits, s->n_vocab);
	sample_penalty(&c, s->count, p->repeat_penalty);
	/* Greedy: every filter keeps the argmax, so skip them. */
	if (p->temp <= 0.0f)
		return sample_argmax(&c);
	sample_top_k(&c, p->top_k);
	sample_top_p(&c, p->top_p);
	sample_min_p(&c, p->min_p);
	sample_temp(&c, p->temp);
	return sample_dist(&c, sample_noise(p->seed, pos));
}

/* Returns -1 when s or logits is NULL, or the matcher allows nothing. */
fx_token fx_sampler_sample(struct fx_sampler *s, const float *logits)
{
	return s ? fx_sampler_sample_at(s, logits, s->draws) : -1;
}

fx_token fx_sampler_sample_at(struct fx_sampler *s, const float *logits, int64_t pos)
{
	fx_token t;

	if (!s || !logits)
		return -1;
	s->draws++;
	if (s->n_ban) { /* the chain reads a copy with the banned logits at -inf */
		if (!s->unbanned && !(s->unbanned = fx_malloc_array((size_t)s->n_vocab, sizeof(float))))
			return -1;
		memcpy(s->unbanned, logits, (size_t)s->n_vocab * sizeof(float));
		for (int32_t i = 0; i < s->n_ban; i++)
			s->unbanned[s->ban[i]] = -INFINITY;
		logits = s->unbanned;
	}
	t = run_chain(s, logits, pos);
	if (!s->matcher || fx_matcher_allows(s->matcher, t))
		return t;
	/* Rejected: mask every token the grammar cannot take and run the
	 * chain again (llama.cpp's common_sampler_sample resampling). */
	if (!s->masked && !(s->masked = fx_malloc_array((size_t)s->n_vocab, sizeof(float))))
		return -1;
	memcpy(s->masked, logits, (size_t)s->n_vocab * sizeof(float));
	if (fx_matcher_mask(s->matcher, s->masked) <= 0)
		return -1;
	return run_chain(s, s->masked, pos);
}

int fx_sampler_ban(struct fx_sampler *s, const fx_token *toks, int32_t n, struct fx_err *err)
{
	if (!s || n < 0 || (n && !toks))
		return fx_fail(err, FX_E_INVALID, "fx_sampler_ban: a sampler and n >= 0 tokens are required");
	for (int32_t i = 0; i < n; i++)
		if (toks[i] < 0 || toks[i] >= s->n_vocab)
			return fx_fail(err, FX_E_INVALID, "fx_sampler_ban: token %d is outside the vocabulary (%d)",
				       toks[i], s->n_vocab);
	fx_token *b = NULL;
	if (n && !(b = fx_malloc_array((size_t)n, sizeof(*b))))
		return fx_fail(err, FX_E_NOMEM, "sampler: out of memory for %d banned tokens", n);
	if (n)
		memcpy(b, toks, (size_t)n * sizeof(*b));
	fx_free(s->ban);
	s->ban = b;
	s->n_ban = n;
	return FX_OK;
}

struct fx_matcher *sample_matcher(const struct fx_sampler *s)
{
	return s->matcher;
}

void fx_sampler_set_matcher(struct fx_sampler *s, struct fx_matcher *m)
{
	if (s)
		s->matcher = m;
}

/* Tokens outside [0, n_vocab) are ignored. A no-op while the penalty is off. */
void fx_sampler_accept(struct fx_sampler *s, fx_token t)
{
	if (!s || !s->ring || t < 0 || t >= s->n_vocab)
		return;
	if (s->ring_len == s->p.repeat_last_n)
		s->count[s->ring[s->ring_head]]--;
	else
		s->ring_len++;
	s->ring[s->ring_head] = t;
	s->count[t]++;
	s->ring_head = (s->ring_head + 1) % s->p.repeat_last_n;
}
