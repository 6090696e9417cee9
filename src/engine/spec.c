/* Speculative decoding: proposers draft tokens for a sequence, one batched
 * forward verifies them (bit-identical to decoding them one by one), each
 * verified row is sampled exactly as plain decoding samples that position
 * (noise keyed by the position: fx_sampler_sample_at), the drafts agreeing
 * with those samples are kept and the rest rolled back in the KV backing
 * (fx_seq_rm). Lossless by construction at any temperature (Leviathan et
 * al. 2023 accept by a ratio test instead; this scheme gives up some
 * acceptance for identical output); drafting follows llama.cpp's
 * common/speculative.cpp and ngram-map.cpp. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "engine/context.h"
#include "sample/sample.h"

struct fx_spec_params fx_spec_default_params(void)
{
	return (struct fx_spec_params){ .size = sizeof(struct fx_spec_params), .types = 0, .n_max = 16,
					.n_min = 0, .ngram_size_n = 12, .ngram_size_m = 48, .p_min = 0.0f };
}

int fx_spec_types_parse(const char *list, uint32_t *types, struct fx_err *err)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} known[] = { { "ngram-simple", FX_SPEC_NGRAM_SIMPLE }, { "draft-simple", FX_SPEC_DRAFT_SIMPLE },
		      { "draft-mtp", FX_SPEC_DRAFT_MTP } };
	/* llama.cpp's other types, refused by name until ferrox has them */
	static const char *const later[] = { "draft-eagle3", "draft-dflash", "draft-dspark",
					     "ngram-mod", "ngram-map-k", "ngram-map-k4v", "ngram-cache" };
	*types = 0;
	const char *p = list ? list : "";
	while (*p) {
		size_t n = strcspn(p, ",");
		bool found = false;
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && !found; i++)
			if (strlen(known[i].name) == n && !strncmp(p, known[i].name, n)) {
				*types |= known[i].bit;
				found = true;
			}
		if (!found && !(n == 4 && !strncmp(p, "none", 4))) {
			for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++)
				if (strlen(later[i]) == n && !strncmp(p, later[i], n))
					return fx_fail(err, FX_E_INVALID, "--spec-type %.*s: not supported by "
						       "ferrox yet (supported: ngram-simple, draft-simple, draft-mtp, none)", (int)n, p);
			return fx_fail(err, FX_E_INVALID, "--spec-type: unknown type '%.*s' (supported: "
				       "ngram-simple, draft-simple, draft-mtp, none)", (int)n, p);
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return FX_OK;
}

int32_t fx_spec_draft(const struct fx_spec_params *p, const fx_token *hist, int32_t n, fx_token *draft,
		      int32_t cap)
{
	if (!p || !hist || !draft || !(p->types & FX_SPEC_NGRAM_SIMPLE) || p->ngram_size_n < 1 ||
	    p->ngram_size_m < 1)
		return 0;
	/* llama.cpp's names: cur_len tokens before the sampled one (hist[n - 1]) */
	long cur = (long)n - 1, nn = p->ngram_size_n, mm = p->ngram_size_m;
	if (cap > p->n_max)
		cap = p->n_max;
	if (cap <= 0 || cur <= nn + mm + 1)
		return 0;
	/* the pattern: the last nn tokens, the sampled one included */
	const fx_token *pat = hist + n - nn;
	long match = 0; /* position 0 means no match, as there */
	for (long j = cur - nn - 1; j > 0 && !match; j--)
		if (!memcmp(hist + j, pat, (size_t)nn * sizeof(*pat)))
			match = j;
	if (!match)
		return 0;
	long copy = mm < cur - (match + nn) ? mm : cur - (match + nn);
	if (copy < nn)
		return 0;
	if (copy > cap)
		copy = cap;
	memcpy(draft, hist + match + nn, (size_t)copy * sizeof(*draft));
	return (int32_t)copy;
}

struct fx_spec_drafter {
	struct fx_spec_params p;
	const struct fx_model *dm; /* draft model, or NULL */
	struct fx_context *dctx;   /* its context: sequence 0 holds held[0..n_held) */
	fx_token *held;
	int32_t n_held, cap;
	/* draft-mtp: the target's MTP block in a context of its own, whose
	 * rows 0..n_mheld were computed on the target's hidden rows (later
	 * ones, drafts chained on the block's own, are rolled back) */
	const struct fx_model *tm;
	struct fx_context *mctx;
	int32_t d;                 /* n_embd */
	float *h;                  /* [cap_h][d] the target's hidden row per position */
	int32_t n_h, cap_h;        /* positions 0..n_h known */
	fx_token *mheld;
	int32_t n_mheld, cap_m;
	float *hin;                /* [n_max + 1 + ...][d] hidden inputs of a catch-up batch */
	int32_t cap_in;
	/* The draft length adapts to what the target accepts: after a step
	 * the next draft is at most its accepted run + 1, doubled after a
	 * wholly accepted one (up to n_max), so a text drafts fail on pays
	 * for short verifications only. */
	int32_t k_cur;             /* the next draft's length, at most */
	int32_t last_k;            /* tokens last drafted, -1 when no step is pending */
};

int fx_spec_drafter_create(const struct fx_spec_params *p, const struct fx_model *target,
			   const struct fx_model *draft, uint32_t n_ctx, int32_t n_threads,
			   struct fx_spec_drafter **out, struct fx_err *err)
{
	*out = NULL;
	if (!p || !target)
		return fx_fail(err, FX_E_INVALID, "fx_spec_drafter_create: params and target are required");
	if ((p->types & FX_SPEC_DRAFT_SIMPLE) && !draft)
		return fx_fail(err, FX_E_INVALID, "--spec-type draft-simple needs a draft model (-md FILE)");
	/* llama.cpp's common_speculative_are_compatible checks the vocabulary
	 * type and special tokens; the same ids must mean the same tokens */
	if (draft && (fx_model_n_vocab(draft) != fx_model_n_vocab(target) ||
		      fx_token_bos(draft) != fx_token_bos(target) || fx_token_eos(draft) != fx_token_eos(target)))
		return fx_fail(err, FX_E_INVALID, "the draft model's vocabulary (%d tokens, BOS %d, EOS %d) "
			       "is not the target's (%d, %d, %d)", fx_model_n_vocab(draft), fx_token_bos(draft),
			       fx_token_eos(draft), fx_model_n_vocab(target), fx_token_bos(target),
			       fx_token_eos(target));
	struct fx_spec_drafter *d = fx_calloc(1, sizeof(*d));
	if (!d)
		return fx_fail(err, FX_E_NOMEM, "no memory for a drafter");
	d->p = *p;
	d->k_cur = p->n_max;
	d->last_k = -1;
	if (p->types & FX_SPEC_DRAFT_MTP) {
		struct fx_context_params cp = fx_context_default_params();
		cp.n_ctx = n_ctx;
		cp.n_threads = n_threads;
		cp.mtp = true;
		cp.hidden = true;
		int rc = fx_context_create(target, &cp, &d->mctx, err);
		if (rc) {
			fx_spec_drafter_free(d);
			return rc == FX_E_INVALID ? fx_fail(err, rc, "--spec-type draft-mtp: %s has no "
							    "multi-token-prediction block", fx_model_arch_name(target))
						  : rc;
		}
		d->tm = target;
		d->d = fx_model_n_embd(target);
	}
	if (draft) {
		struct fx_context_params cp = fx_context_default_params();
		cp.n_ctx = n_ctx;
		cp.n_threads = n_threads;
		/* recurrent layers: states to take back the target's rejections */
		cp.n_rollback = p->n_max > 0 ? (uint32_t)p->n_max : 1;
		int rc = fx_context_create(draft, &cp, &d->dctx, err);
		if (rc) {
			fx_spec_drafter_free(d);
			return rc;
		}
		d->dm = draft;
		d->p.types |= FX_SPEC_DRAFT_SIMPLE;
	}
	*out = d;
	return FX_OK;
}

void fx_spec_drafter_free(struct fx_spec_drafter *d)
{
	if (!d)
		return;
	fx_context_free(d->dctx);
	fx_context_free(d->mctx);
	fx_free(d->held);
	fx_free(d->h);
	fx_free(d->mheld);
	fx_free(d->hin);
	fx_free(d);
}

/* The draft model's greedy token from logits [nv] and its probability. */
static fx_token greedy(const float *l, int32_t nv, float *prob)
{
	fx_token best = 0;
	for (int32_t i = 1; i < nv; i++)
		if (l[i] > l[best])
			best = i;
	double sum = 0;
	for (int32_t i = 0; i < nv; i++)
		sum += exp((double)(l[i] - l[best]));
	*prob = (float)(1.0 / sum);
	return best;
}

/* Grow *buf to hold n items of size sz (*cap items). */
static bool grow(void **buf, int32_t *cap, int32_t n, size_t sz)
{
	if (n <= *cap)
		return true;
	int32_t c = n * 2 + 64;
	void *p = fx_realloc_array(*buf, (size_t)c, sz);
	if (!p)
		return false;
	*buf = p;
	*cap = c;
	return true;
}

/* How many of the first n - 1 tokens of hist a context holding held[0..m)
 * keeps (the last one is always decoded again, for its logits). */
static int32_t common_prefix(const fx_token *held, int32_t m, const fx_token *hist, int32_t n)
{
	int32_t c = 0;
	while (c < m && c < n - 1 && held[c] == hist[c])
		c++;
	return c;
}

/* The draft model's context holds hist[0..n) afterwards: the prefix it
 * shares with what it held stays, the rest is rolled back, the new tokens
 * decoded (the last row's logits kept); room for extra more in held.
 * False on failure (the context is then emptied). */
static bool sync_draft(struct fx_spec_drafter *d, const fx_token *hist, int32_t n, int32_t extra)
{
	int32_t c = common_prefix(d->held, d->n_held, hist, n);
	if (!grow((void **)&d->held, &d->cap, n + extra, sizeof(*hist)))
		return false;
	if ((uint32_t)n + 1 > fx_context_n_ctx(d->dctx) || fx_seq_rm(d->dctx, 0, (uint32_t)c) ||
	    fx_decode(d->dctx, hist + c, n - c, false)) {
		fx_context_reset(d->dctx);
		d->n_held = 0;
		return false;
	}
	memcpy(d->held + c, hist + c, (size_t)(n - c) * sizeof(*hist));
	d->n_held = n;
	return true;
}

int fx_spec_drafter_observe(struct fx_spec_drafter *d, const struct fx_context *target_ctx, int32_t row0,
			    int32_t pos0, int32_t n)
{
	if (d && d->last_k > 0 && n >= 1) {
		int32_t acc = n - 1; /* the rows kept after last: accepted drafts */
		d->k_cur = acc >= d->last_k ? (d->k_cur < d->p.n_max / 2 ? 2 * d->k_cur : d->p.n_max) : acc + 1;
	}
	if (d)
		d->last_k = -1;
	if (!d || !d->mctx)
		return FX_OK;
	if (pos0 < 0 || n < 0 || pos0 > d->n_h)
		return FX_E_INVALID;
	if (!grow((void **)&d->h, &d->cap_h, pos0 + n, (size_t)d->d * sizeof(float)))
		return FX_E_NOMEM;
	for (int32_t i = 0; i < n; i++) {
		const float *h = fx_batch_hidden(target_ctx, row0 + i);
		if (!h)
			return FX_E_INVALID;
		memcpy(d->h + (size_t)(pos0 + i) * d->d, h, (size_t)d->d * sizeof(float));
	}
	d->n_h = pos0 + n;
	return FX_OK;
}

/* The MTP block's rows for hist[0..n): rows up to the prefix it shares
 * with what it holds stay; the rest are computed, row p on (hist[p], the
 * target's hidden row of p - 1; zeros at 0); the last row's logits and
 * hidden state kept. Returns the rows computed (the last one is row - 1
 * of the batch); 0 when a row's hidden input is not known yet or a step
 * fails (the context then emptied). */
static int32_t sync_mtp(struct fx_spec_drafter *d, const fx_token *hist, int32_t n)
{
	int32_t c = common_prefix(d->mheld, d->n_mheld, hist, n);
	if (d->n_h < n - 1 || (uint32_t)n + 1 > fx_context_n_ctx(d->mctx) ||
	    !grow((void **)&d->mheld, &d->cap_m, n, sizeof(*hist)) ||
	    !grow((void **)&d->hin, &d->cap_in, n - c, (size_t)d->d * sizeof(float)))
		return 0;
	size_t rb = (size_t)d->d * sizeof(float);
	for (int32_t p = c; p < n; p++) {
		if (p)
			memcpy(d->hin + (size_t)(p - c) * d->d, d->h + (size_t)(p - 1) * d->d, rb);
		else
			memset(d->hin, 0, rb);
	}
	fx_seq *sq = fx_calloc((size_t)(n - c), sizeof(*sq));
	bool ok = sq && fx_seq_rm(d->mctx, 0, (uint32_t)c) == FX_OK;
	if (ok) {
		struct fx_batch b = { .n = n - c, .seq = sq, .token = hist + c, .hidden = d->hin };
		ok = fx_batch_decode(d->mctx, &b, NULL) == FX_OK;
	}
	fx_free(sq);
	if (!ok) {
		fx_context_reset(d->mctx);
		d->n_mheld = 0;
		return 0;
	}
	memcpy(d->mheld + c, hist + c, (size_t)(n - c) * sizeof(*hist));
	d->n_mheld = n;
	return n - c;
}

/* Greedy drafts from the MTP block: the synced last row's prediction,
 * then each draft fed back with the block's own hidden row (llama.cpp's
 * draft-mtp chain for a single head). */
static int32_t draft_mtp(struct fx_spec_drafter *d, const fx_token *hist, int32_t n, fx_token *draft,
			 int32_t cap)
{
	int32_t r = sync_mtp(d, hist, n), nv = fx_model_n_vocab(d->tm), k = 0;
	if (!r)
		return 0;
	const float *lg = fx_batch_logits(d->mctx, r - 1), *hh = fx_batch_hidden(d->mctx, r - 1);
	while (lg && hh && k < cap) {
		float prob;
		fx_token t = greedy(lg, nv, &prob);
		if (prob < d->p.p_min)
			break;
		draft[k++] = t;
		if (k == cap || (uint32_t)(n + k) + 1 > fx_context_n_ctx(d->mctx))
			break;
		memcpy(d->hin, hh, (size_t)d->d * sizeof(float));
		fx_seq s0 = 0;
		struct fx_batch b = { .n = 1, .seq = &s0, .token = &t, .hidden = d->hin };
		if (fx_batch_decode(d->mctx, &b, NULL))
			break;
		lg = fx_batch_logits(d->mctx, 0);
		hh = fx_batch_hidden(d->mctx, 0);
	}
	return k;
}

static int32_t propose(struct fx_spec_drafter *d, const fx_token *hist, int32_t n, fx_token *draft,
		       int32_t cap);

int32_t fx_spec_drafter_draft(struct fx_spec_drafter *d, const fx_token *hist, int32_t n, fx_token *draft,
			      int32_t cap)
{
	if (!d || !hist || n <= 0 || !draft)
		return 0;
	if (cap > d->p.n_max)
		cap = d->p.n_max;
	if (cap > d->k_cur)
		cap = d->k_cur > 0 ? d->k_cur : 1;
	d->last_k = propose(d, hist, n, draft, cap);
	return d->last_k;
}

/* fx_spec_drafter_draft's proposers in turn, at most cap tokens. */
static int32_t propose(struct fx_spec_drafter *d, const fx_token *hist, int32_t n, fx_token *draft,
		       int32_t cap)
{
	int32_t k = fx_spec_draft(&d->p, hist, n, draft, cap);
	if (k > 0 || cap <= 0)
		return k;
	if (!d->dctx)
		return d->mctx ? draft_mtp(d, hist, n, draft, cap) : 0;
	if (!sync_draft(d, hist, n, cap))
		return 0;
	int32_t nv = fx_model_n_vocab(d->dm);
	while (k < cap) {
		float prob;
		fx_token t = greedy(fx_get_logits(d->dctx, NULL), nv, &prob);
		if (prob < d->p.p_min)
			break;
		draft[k++] = t;
		/* the drafts stay in the draft context; the next sync rolls back
		 * those the target rejected */
		if (k == cap || d->n_held + 2 > (int32_t)fx_context_n_ctx(d->dctx) ||
		    fx_decode(d->dctx, &t, 1, false))
			break;
		d->held[d->n_held++] = t;
	}
	return k;
}

int fx_spec_accept(struct fx_context *ctx, fx_seq seq, struct fx_sampler *smp, int32_t row,
		   const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out)
{
	const struct fx_model *m = context_model(ctx);
	struct fx_matcher *mt = smp ? sample_matcher(smp) : NULL;
	*n_out = 0;
	if (!smp || k < 0 || (k > 0 && !draft) || !out || fx_seq_n_past(ctx, seq) < (uint32_t)k + 1)
		return FX_E_INVALID;
	if (k > fx_context_roll_back_max(ctx))
		return FX_E_UNSUPPORTED;
	/* the rows' positions: last at p, the drafts after it */
	int64_t p = (int64_t)fx_seq_n_past(ctx, seq) - k - 1;
	int32_t n = 0;
	for (int32_t i = 0; i <= k; i++) {
		const float *lg = fx_batch_logits(ctx, row + i);
		if (!lg)
			return FX_E_INVALID;
		fx_token t = fx_sampler_sample_at(smp, lg, p + i + 1);
		if (t < 0)
			return FX_E_INVALID;
		out[n++] = t;
		if (fx_token_is_eog(m, t))
			break;
		if (mt && fx_matcher_accept(mt, t))
			return FX_E_NOMEM;
		fx_sampler_accept(smp, t);
		if ((mt && fx_matcher_is_done(mt)) || i == k || t != draft[i])
			break;
	}
	*n_out = n;
	/* keep last and the n - 1 drafts that were sampled: the next token to
	 * decode is out[n - 1] */
	return n <= k ? fx_seq_rm(ctx, seq, (uint32_t)(p + n)) : FX_OK;
}

int fx_spec_verify(struct fx_context *ctx, fx_seq seq, struct fx_sampler *smp, fx_token last,
		   const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out)
{
	*n_out = 0;
	if (k < 0 || k > 4096 || (k > 0 && !draft))
		return FX_E_INVALID;
	if (k > fx_context_roll_back_max(ctx))
		return FX_E_UNSUPPORTED;
	fx_seq *sq = fx_malloc_array((size_t)k + 1, sizeof(*sq));
	fx_token *tk = fx_malloc_array((size_t)k + 1, sizeof(*tk));
	bool *keep = fx_malloc_array((size_t)k + 1, sizeof(*keep));
	int rc = FX_E_NOMEM;
	if (sq && tk && keep) {
		for (int32_t i = 0; i <= k; i++) {
			sq[i] = seq;
			tk[i] = i ? draft[i - 1] : last;
			keep[i] = true;
		}
		struct fx_batch b = { .n = k + 1, .seq = sq, .token = tk, .logits = keep };
		rc = fx_batch_decode(ctx, &b, NULL);
		if (rc == FX_OK)
			rc = fx_spec_accept(ctx, seq, smp, 0, draft, k, out, n_out);
	}
	fx_free(sq);
	fx_free(tk);
	fx_free(keep);
	return rc;
}
