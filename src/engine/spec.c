/* Speculative decoding: proposers draft tokens for a sequence, one batched
 * forward verifies them (bit-identical to decoding them one by one), each
 * verified row is sampled exactly as plain decoding samples that position
 * (noise keyed by the position: fx_sampler_sample_at), the drafts agreeing
 * with those samples are kept and the rest rolled back in the KV backing
 * (fx_seq_rm). Lossless by construction at any temperature (Leviathan et
 * al. 2023 accept by a ratio test instead; this scheme gives up some
 * acceptance for identical output); drafting follows llama.cpp's
 * common/speculative.cpp and ngram-map.cpp. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "engine/context.h"
#include "sample/sample.h"

struct fx_spec_params fx_spec_default_params(void)
{
	return (struct fx_spec_params){ .size = sizeof(struct fx_spec_params), .types = 0, .n_max = 16,
					.n_min = 0, .ngram_size_n = 12, .ngram_size_m = 48 };
}

int fx_spec_types_parse(const char *list, uint32_t *types, struct fx_err *err)
{
	static const struct {
		const char *name;
		uint32_t bit;
	} known[] = { { "ngram-simple", FX_SPEC_NGRAM_SIMPLE } };
	/* llama.cpp's other types, refused by name until ferrox has them */
	static const char *const later[] = { "draft-simple", "draft-mtp", "draft-eagle3", "ngram-mod",
					     "ngram-map-k", "ngram-map-k4v", "ngram-cache" };
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
						       "ferrox yet (supported: ngram-simple, none)", (int)n, p);
			return fx_fail(err, FX_E_INVALID, "--spec-type: unknown type '%.*s' (supported: "
				       "ngram-simple, none)", (int)n, p);
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

int fx_spec_accept(struct fx_context *ctx, fx_seq seq, struct fx_sampler *smp, int32_t row,
		   const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out)
{
	const struct fx_model *m = context_model(ctx);
	struct fx_matcher *mt = smp ? sample_matcher(smp) : NULL;
	*n_out = 0;
	if (!smp || k < 0 || (k > 0 && !draft) || !out || fx_seq_n_past(ctx, seq) < (uint32_t)k + 1)
		return FX_E_INVALID;
	if (k > 0 && !fx_context_can_roll_back(ctx))
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
	if (k > 0 && !fx_context_can_roll_back(ctx))
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
