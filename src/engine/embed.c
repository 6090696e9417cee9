/* Pooled embeddings (fx_embed, fx_embed_batch): every input's tokens go
 * through one batch with no prefix-cache reuse (context_batch_all), so
 * every row has its final hidden state; the rows are pooled (last, mean,
 * first) and L2-normalized, then the sequences are emptied again. */
#include <math.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "engine/context.h"

/* Rows [row0, row0 + n) of the last batch pooled into out [d]. The mean
 * sums in double, in token order: the same bits whatever the batch held. */
static bool pool_rows(const struct fx_context *c, int32_t row0, int32_t n, int32_t pooling,
		      int32_t d, double *acc, float *out)
{
	if (pooling != FX_POOLING_MEAN) {
		const float *h = fx_batch_hidden(c, pooling == FX_POOLING_LAST ? row0 + n - 1 : row0);
		if (h)
			memcpy(out, h, (size_t)d * sizeof(float));
		return h != NULL;
	}
	memset(acc, 0, (size_t)d * sizeof(*acc));
	for (int32_t r = 0; r < n; r++) {
		const float *h = fx_batch_hidden(c, row0 + r);
		if (!h)
			return false;
		for (int32_t i = 0; i < d; i++)
			acc[i] += h[i];
	}
	for (int32_t i = 0; i < d; i++)
		out[i] = (float)(acc[i] / n);
	return true;
}

/* In place, as llama.cpp's common_embd_normalize (embd_normalize 2):
 * the sum of squares in double, one scale 1/norm in float. */
static void l2_normalize(float *v, int32_t d)
{
	double sum = 0.0;
	for (int32_t i = 0; i < d; i++)
		sum += (double)v[i] * v[i];
	sum = sqrt(sum);
	const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
	for (int32_t i = 0; i < d; i++)
		v[i] *= scale;
}

/* The arguments fx_embed_batch refuses before touching any sequence. */
static int check_args(struct fx_context *c, int32_t n_seq, const fx_seq *seq,
		      const int32_t *const *tokens, const int32_t *n_tokens, int32_t pooling,
		      const float *out, int64_t *total)
{
	struct fx_err *err = context_err(c);
	if (!context_keeps_hidden(c))
		return fx_fail(err, FX_E_INVALID, "fx_embed: the context keeps no hidden rows "
			       "(create it with fx_context_params.hidden = true, not as an MTP context)");
	if (n_seq <= 0 || !seq || !tokens || !n_tokens || !out)
		return fx_fail(err, FX_E_INVALID, "fx_embed: no input (or a NULL array)");
	if (pooling != FX_POOLING_LAST && pooling != FX_POOLING_MEAN && pooling != FX_POOLING_CLS)
		return fx_fail(err, FX_E_INVALID, "fx_embed: pooling %d: use FX_POOLING_LAST (0), "
			       "FX_POOLING_MEAN (1) or FX_POOLING_CLS (2)", pooling);
	uint32_t n_ctx = fx_context_n_ctx(c);
	*total = 0;
	for (int32_t i = 0; i < n_seq; i++) {
		if (n_tokens[i] <= 0 || !tokens[i])
			return fx_fail(err, FX_E_INVALID, "fx_embed: input %d has no tokens", i);
		if ((uint32_t)n_tokens[i] > n_ctx)
			return fx_fail(err, FX_E_CTX_FULL, "fx_embed: input %d has %d tokens; the "
				       "context holds %u (raise n_ctx)", i, n_tokens[i], n_ctx);
		if (!context_seq_ok(c, seq[i]))
			return fx_fail(err, FX_E_INVALID, "fx_embed: sequence %d does not exist", seq[i]);
		uint32_t past = fx_seq_n_past(c, seq[i]);
		if (past)
			return fx_fail(err, FX_E_INVALID, "fx_embed: sequence %d holds %u tokens; an "
				       "embedding needs an empty sequence", seq[i], past);
		for (int32_t j = 0; j < i; j++)
			if (seq[j] == seq[i])
				return fx_fail(err, FX_E_INVALID, "fx_embed: sequence %d is given twice",
					       seq[i]);
		*total += n_tokens[i];
	}
	if (*total > INT32_MAX)
		return fx_fail(err, FX_E_INVALID, "fx_embed: %lld tokens in one call",
			       (long long)*total);
	return FX_OK;
}

int fx_embed_batch(struct fx_context *c, int32_t n_seq, const fx_seq *seq,
		   const int32_t *const *tokens, const int32_t *n_tokens, int32_t pooling,
		   bool normalize, float *out)
{
	if (!c)
		return FX_E_INVALID;
	int64_t total = 0;
	int rc = check_args(c, n_seq, seq, tokens, n_tokens, pooling, out, &total);
	if (rc)
		return rc;
	int32_t d = fx_model_n_embd(context_model(c));
	fx_seq *bs = fx_malloc_array((size_t)total, sizeof(*bs));
	fx_token *bt = fx_malloc_array((size_t)total, sizeof(*bt));
	bool *keep = fx_calloc((size_t)total, sizeof(*keep)); /* no logits: hidden rows only */
	double *acc = fx_malloc_array((size_t)d, sizeof(*acc));
	if (!bs || !bt || !keep || !acc) {
		rc = fx_fail(context_err(c), FX_E_NOMEM, "fx_embed: no memory for %lld rows",
			     (long long)total);
		goto out_free;
	}
	for (int32_t i = 0, r = 0; i < n_seq; i++)
		for (int32_t j = 0; j < n_tokens[i]; j++, r++) {
			bs[r] = seq[i];
			bt[r] = tokens[i][j];
		}
	struct fx_batch b = { .n = (int32_t)total, .seq = bs, .token = bt, .logits = keep };
	if ((rc = context_batch_all(c, &b, NULL)))
		goto out_empty; /* the message is the batch's */
	for (int32_t i = 0, r = 0; i < n_seq; r += n_tokens[i], i++) {
		float *o = out + (size_t)i * (size_t)d;
		if (!pool_rows(c, r, n_tokens[i], pooling, d, acc, o)) {
			/* never expected: every sequence advanced, so every row was computed */
			rc = fx_fail(context_err(c), FX_E_INVALID, "fx_embed: input %d lacks a hidden row", i);
			break;
		}
		if (normalize)
			l2_normalize(o, d);
	}
out_empty:
	for (int32_t i = 0; i < n_seq; i++)
		context_seq_empty(c, seq[i]);
out_free:
	fx_free(bs);
	fx_free(bt);
	fx_free(keep);
	fx_free(acc);
	return rc;
}

int fx_embed(struct fx_context *c, fx_seq seq, const int32_t *tokens, int32_t n_tokens,
	     int32_t pooling, bool normalize, float *out)
{
	return fx_embed_batch(c, 1, &seq, &tokens, &n_tokens, pooling, normalize, out);
}
