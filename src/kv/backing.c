/* The KV backings by public layout: a table, so the engine never names one. */
#include "kv/backing.h"

#include "core/status.h"
#include "ferrox.h"

static int make_contig(const struct kv_geom *g, const struct kv_shape *s, struct kv_backing **out,
		       struct fx_err *err)
{
	/* Row indices are 32-bit: every sequence's n_ctx rows must fit. */
	uint64_t rows = (uint64_t)s->n_ctx * (uint64_t)s->n_seq;
	if (rows > INT32_MAX)
		return fx_fail(err, FX_E_INVALID, "n_ctx %d x n_seq_max %d = %llu KV rows is more "
			       "than %d: use a smaller n_ctx or n_seq_max, or the paged layout",
			       s->n_ctx, s->n_seq, (unsigned long long)rows, INT32_MAX);
	int rc = kv_contig_create(g, s->n_seq, s->n_ctx, out);
	if (rc)
		return fx_fail(err, rc, "no memory for %d KV caches of %d tokens (try a smaller -c "
			       "or the paged layout)", s->n_seq, s->n_ctx);
	return FX_OK;
}

static int make_paged(const struct kv_geom *g, const struct kv_shape *s, struct kv_backing **out,
		      struct fx_err *err)
{
	if (s->block_size <= 0 || s->block_size > s->n_ctx)
		return fx_fail(err, FX_E_INVALID, "block size %d must be in [1, n_ctx %d]",
			       s->block_size, s->n_ctx);
	int rc = kv_paged_create(g, s->n_seq, s->n_ctx, s->block_size, s->n_ubatch, s->events, out);
	if (rc)
		return fx_fail(err, rc, "no memory for a KV pool of %d tokens (try a smaller -c)",
			       s->n_ctx);
	return FX_OK;
}

static const struct {
	int32_t layout;
	int (*make)(const struct kv_geom *, const struct kv_shape *, struct kv_backing **,
		    struct fx_err *);
} backings[] = {
	{ FX_KV_CONTIGUOUS, make_contig },
	{ FX_KV_PAGED, make_paged },
};

int kv_backing_create(int32_t layout, const struct kv_geom *g, const struct kv_shape *s,
		      struct kv_backing **out, struct fx_err *err)
{
	*out = NULL;
	/* No layer keeps K/V (a pure recurrent model): the contiguous backing
	 * with no rows keeps the positions; blocks would hold nothing. */
	if (g->n_layer == 0 && (layout == FX_KV_CONTIGUOUS || layout == FX_KV_PAGED))
		layout = FX_KV_CONTIGUOUS;
	for (size_t i = 0; i < sizeof(backings) / sizeof(backings[0]); i++) {
		if (backings[i].layout != layout)
			continue;
		int rc = backings[i].make(g, s, out, err);
		if (rc || g->rs_floats <= 0)
			return rc;
		struct kv_backing *inner = *out;
		*out = NULL;
		/* Snapshots where a prefix can be reused: behind the paged
		 * cache's blocks, or anywhere when no layer keeps K/V. Every 64
		 * tokens (and whole blocks), at most 2 per sequence + 8. */
		bool rows = g->n_layer > 0;
		int32_t every = rows && layout != FX_KV_PAGED ? 0
				: (s->block_size > 64 ? s->block_size : 64 / s->block_size * s->block_size);
		if (s->block_size <= 0)
			every = rows ? 0 : 64;
		if ((rc = kv_recurrent_wrap(inner, s->n_seq, g->rs_floats, every, 2 * s->n_seq + 8, rows,
					    g->rs_rollback, out)))
			return fx_fail(err, rc, "no memory for %d recurrent states of %lld floats",
				       s->n_seq, (long long)g->rs_floats);
		return FX_OK;
	}
	return fx_fail(err, FX_E_INVALID, "kv_layout %d: use FX_KV_CONTIGUOUS or FX_KV_PAGED", layout);
}
