/* A context: one sequence's contiguous KV cache, the thread pool and the
 * scratch of the forward pass, all sized at creation (nothing is allocated
 * per token), and the logits of the last fx_decode. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "engine/context.h"
#include "core/threadpool.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/model.h"

struct fx_context {
	const struct fx_model *m; /* borrowed */
	uint32_t n_ctx, n_ubatch;
	struct fx_pool *pool;
	struct kv_contig kv;
	struct fwd_scratch s;
	int32_t *pos;             /* [n_ubatch] */
	uint32_t n_past;
	float *logits;            /* [logits_rows, n_vocab] */
	int32_t logits_rows, n_logits;
	struct fx_err err;
};

struct fx_context_params fx_context_default_params(void)
{
	return (struct fx_context_params){ .size = sizeof(struct fx_context_params),
					   .n_ctx = 4096, .n_ubatch = 512,
					   .type_k = FX_KV_DEFAULT, .type_v = FX_KV_DEFAULT };
}

int fx_context_create(const struct fx_model *m, const struct fx_context_params *p,
		      struct fx_context **out, struct fx_err *err)
{
	struct fx_context_params dp = fx_context_default_params();
	int rc;
	if (!m || !out)
		return fx_fail(err, FX_E_INVALID, "fx_context_create: model and out are required");
	*out = NULL;
	if (m->vocab_only)
		return fx_fail(err, FX_E_INVALID, "the model was loaded vocab_only: no weights to run");
	if (!p)
		p = &dp;
	const struct hparams *hp = &m->hp;
	uint32_t n_ctx = p->n_ctx ? p->n_ctx : (uint32_t)hp->n_ctx_train;
	if (n_ctx > (1u << 24))
		return fx_fail(err, FX_E_INVALID, "n_ctx %u is too large", n_ctx);
	uint32_t n_ub = p->n_ubatch ? p->n_ubatch : n_ctx;
	if (n_ub > n_ctx)
		n_ub = n_ctx;
	struct fx_context *c = fx_calloc(1, sizeof(*c));
	if (!c)
		return fx_fail(err, FX_E_NOMEM, "no memory for a context");
	c->m = m;
	c->n_ctx = n_ctx;
	c->n_ubatch = n_ub;
	if ((rc = fx_pool_create(p->n_threads, &c->pool))) {
		rc = fx_fail(err, rc, "cannot start %d threads", p->n_threads);
		goto out_free;
	}
	if ((rc = kv_contig_init(&c->kv, hp->n_layer, (int32_t)n_ctx,
				 (int64_t)hp->n_head_kv * hp->head_dim,
				 (int64_t)hp->n_head_kv * hp->head_dim_v,
				 p->type_k == FX_KV_DEFAULT ? hp->kv_type : p->type_k,
				 p->type_v == FX_KV_DEFAULT ? hp->kv_type : p->type_v))) {
		rc = rc == FX_E_INVALID
			? fx_fail(err, rc, "KV cache types %d/%d: only f32 (%d) and f16 (%d) are supported",
				  p->type_k, p->type_v, FX_KV_F32, FX_KV_F16)
			: fx_fail(err, rc, "no memory for a KV cache of %u tokens (try a smaller -c)", n_ctx);
		goto out_pool;
	}
	if ((rc = fwd_scratch_init(&c->s, m, (int32_t)n_ub, (int32_t)n_ctx,
				   fx_pool_n_threads(c->pool)))) {
		rc = fx_fail(err, rc, "no memory for %u-token batches (try a smaller ubatch)", n_ub);
		goto out_kv;
	}
	c->pos = fx_calloc(n_ub, sizeof(*c->pos));
	c->logits_rows = 1;
	c->logits = fx_malloc_array((size_t)hp->n_vocab, sizeof(float));
	if (!c->pos || !c->logits) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory for logits");
		goto out_scratch;
	}
	*out = c;
	return FX_OK;
out_scratch:
	fx_free(c->pos);
	fx_free(c->logits);
	fwd_scratch_fini(&c->s);
out_kv:
	kv_contig_fini(&c->kv);
out_pool:
	fx_pool_free(c->pool);
out_free:
	fx_free(c);
	return rc;
}

void fx_context_free(struct fx_context *c)
{
	if (!c)
		return;
	fx_free(c->pos);
	fx_free(c->logits);
	fwd_scratch_fini(&c->s);
	kv_contig_fini(&c->kv);
	fx_pool_free(c->pool);
	fx_free(c);
}

uint32_t fx_context_n_ctx(const struct fx_context *c)
{
	return c->n_ctx;
}

uint32_t fx_context_n_past(const struct fx_context *c)
{
	return c->n_past;
}

void fx_context_reset(struct fx_context *c)
{
	c->n_past = 0;
	c->n_logits = 0;
}

const char *fx_context_errmsg(const struct fx_context *c)
{
	return c->err.msg;
}

int fx_decode(struct fx_context *c, const fx_token *tokens, int32_t n, bool all_logits)
{
	const struct fx_model *m = c->m;
	int32_t nv = m->hp.n_vocab;
	if (n <= 0 || !tokens)
		return fx_fail(&c->err, FX_E_INVALID, "fx_decode: no tokens");
	if ((uint64_t)c->n_past + (uint64_t)n > c->n_ctx)
		return fx_fail(&c->err, FX_E_CTX_FULL,
			       "%u tokens in the cache + %d new exceed the context of %u tokens (raise -c)",
			       c->n_past, n, c->n_ctx);
	for (int32_t i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= nv)
			return fx_fail(&c->err, FX_E_INVALID, "token id %d at %d is outside [0, %d)",
				       tokens[i], i, nv);
	int32_t rows = all_logits ? n : 1;
	if (rows > c->logits_rows) {
		float *l = fx_realloc_array(c->logits, (size_t)rows * (size_t)nv, sizeof(float));
		if (!l)
			return fx_fail(&c->err, FX_E_NOMEM, "no memory for %d rows of logits", rows);
		c->logits = l;
		c->logits_rows = rows;
	}
	struct kv_view kv = { .kind = KV_CONTIG, .contig = &c->kv };
	for (int32_t i = 0; i < n; i += (int32_t)c->n_ubatch) {
		int32_t nb = n - i < (int32_t)c->n_ubatch ? n - i : (int32_t)c->n_ubatch;
		for (int32_t t = 0; t < nb; t++)
			c->pos[t] = (int32_t)c->n_past + t;
		/* Without all_logits only the final chunk runs the LM head. */
		float *dst = all_logits ? c->logits + (size_t)i * nv
			   : i + nb == n ? c->logits : NULL;
		model_forward(m, c->pool, &c->s, &kv, tokens + i, c->pos, nb, all_logits, dst);
		c->n_past += (uint32_t)nb;
	}
	c->n_logits = rows;
	return FX_OK;
}

const float *fx_get_logits(const struct fx_context *c, int32_t *n_rows)
{
	if (n_rows)
		*n_rows = c->n_logits;
	return c->n_logits ? c->logits : NULL;
}

void context_set_capture(struct fx_context *c, float *buf)
{
	c->s.capture = buf;
}
