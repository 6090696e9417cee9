#include <string.h>

#include "kv/backing.h"

#include "core/alloc.h"
#include "ferrox.h"
#include "quant/quant.h"

bool kv_type_ok(int type, int64_t head_width)
{
	if (type != FX_TYPE_F32 && type != FX_TYPE_F16 && type != FX_TYPE_Q8_0)
		return false;
	return head_width > 0 && head_width % fx_type_get(type)->blck_size == 0;
}

int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width, int k_type, int v_type)
{
	*c = (struct kv_contig){ .n_layer = n_layer, .n_ctx = n_ctx, .k_width = k_width,
				 .v_width = v_width, .k_type = k_type, .v_type = v_type };
	if (n_layer == 0 && n_ctx > 0)
		return FX_OK; /* no attention layer (Mamba-2): positions only */
	if (n_layer <= 0 || n_ctx <= 0 || k_width <= 0 || v_width <= 0 ||
	    !kv_type_ok(k_type, k_width) || !kv_type_ok(v_type, v_width))
		return FX_E_INVALID;
	c->k_row = fx_row_size(k_type, k_width);
	c->v_row = fx_row_size(v_type, v_width);
	size_t rows = (size_t)n_layer * (size_t)n_ctx;
	/* rows on cache lines where their size allows; resident from here */
	c->k = fx_calloc_lines(rows, c->k_row);
	c->v = fx_calloc_lines(rows, c->v_row);
	c->bytes = fx_lines_bytes(rows, c->k_row) + fx_lines_bytes(rows, c->v_row);
	if (!c->k || !c->v) {
		kv_contig_fini(c);
		return FX_E_NOMEM;
	}
	return FX_OK;
}

void kv_contig_fini(struct kv_contig *c)
{
	fx_free(c->k);
	fx_free(c->v);
	c->k = c->v = NULL;
}

/* ---- the contiguous backing ------------------------------------------- */

struct contig_backing {
	struct kv_backing base;
	struct kv_contig *kv; /* [n_seq] */
	int32_t *n_tokens;    /* [n_seq] each sequence's position */
};

#define CB(b) ((struct contig_backing *)(b))

static void cb_begin(struct kv_backing *b)
{
	(void)b;
}

/* Rows are allocated up front: the engine's n_ctx check is all there is. */
static int cb_admit(struct kv_backing *b, int32_t seq, int32_t n, int32_t n_ubatch)
{
	(void)n_ubatch;
	return CB(b)->n_tokens[seq] + (int64_t)n <= b->n_ctx ? FX_OK : FX_E_KV_FULL;
}

static int cb_reserve(struct kv_backing *b, int32_t seq, int32_t n)
{
	return CB(b)->n_tokens[seq] + (int64_t)n <= b->n_ctx ? FX_OK : FX_E_KV_FULL;
}

static void cb_commit(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	(void)tok;
	CB(b)->n_tokens[seq] += n;
}

static int cb_rm(struct kv_backing *b, int32_t seq, int32_t pos)
{
	if (pos < 0)
		pos = 0;
	if (pos < CB(b)->n_tokens[seq])
		CB(b)->n_tokens[seq] = pos;
	return FX_OK;
}

/* Rows move down in place (memmove), then each moved K row is re-rotated. */
static int cb_shift(struct kv_backing *b, int32_t seq, int32_t p0, int32_t delta,
		    const struct kv_rerot *rr)
{
	struct contig_backing *cb = CB(b);
	struct kv_contig *c = &cb->kv[seq];
	int32_t n = cb->n_tokens[seq], d0 = p0 + delta;
	size_t moved = (size_t)(n - p0);
	for (int il = 0; il < c->n_layer; il++) {
		memmove(contig_row(c, c->k, c->k_row, il, d0), contig_row(c, c->k, c->k_row, il, p0),
			moved * c->k_row);
		memmove(contig_row(c, c->v, c->v_row, il, d0), contig_row(c, c->v, c->v_row, il, p0),
			moved * c->v_row);
		for (int32_t r = d0; r < n + delta; r++)
			rr->fn(rr->ctx, il, contig_row(c, c->k, c->k_row, il, r));
	}
	cb->n_tokens[seq] = n + delta;
	return FX_OK;
}

static int cb_fork(struct kv_backing *b, int32_t src, int32_t dst)
{
	struct contig_backing *cb = CB(b);
	const struct kv_contig *a = &cb->kv[src];
	struct kv_contig *d = &cb->kv[dst];
	size_t n = (size_t)cb->n_tokens[src];
	if (cb->n_tokens[dst])
		return FX_E_INVALID;
	for (int il = 0; il < a->n_layer; il++) {
		size_t o = (size_t)il * (size_t)a->n_ctx;
		memcpy(d->k + o * a->k_row, a->k + o * a->k_row, n * a->k_row);
		memcpy(d->v + o * a->v_row, a->v + o * a->v_row, n * a->v_row);
	}
	cb->n_tokens[dst] = (int32_t)n;
	return FX_OK;
}

static void cb_clear(struct kv_backing *b, int32_t seq)
{
	CB(b)->n_tokens[seq] = 0;
}

static int32_t cb_pos(const struct kv_backing *b, int32_t seq)
{
	return ((const struct contig_backing *)b)->n_tokens[seq];
}

static struct kv_view cb_view(struct kv_backing *b, int32_t seq)
{
	struct kv_contig *k = &CB(b)->kv[seq];
	if (b->n_seq == 1)
		return (struct kv_view){ .kind = KV_DECODE, .decode = k };
	return (struct kv_view){ .kind = KV_BATCHED, .batched = k };
}

static int32_t cb_reuse(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			int32_t max_rows)
{
	(void)b, (void)seq, (void)tok, (void)n, (void)max_rows;
	return 0;
}

static void cb_stats(const struct kv_backing *b, struct kv_stats *st)
{
	const struct contig_backing *cb = (const struct contig_backing *)b;
	*st = (struct kv_stats){ 0 };
	for (int32_t i = 0; i < b->n_seq; i++)
		st->bytes += cb->kv[i].bytes;
}

static void cb_destroy(struct kv_backing *b)
{
	struct contig_backing *cb = CB(b);
	for (int32_t i = 0; cb->kv && i < b->n_seq; i++)
		kv_contig_fini(&cb->kv[i]);
	fx_free(cb->kv);
	fx_free(cb->n_tokens);
	fx_free(cb);
}

static const struct kv_ops contig_ops = {
	.begin = cb_begin, .admit = cb_admit, .reserve = cb_reserve, .commit = cb_commit,
	.rm = cb_rm, .shift = cb_shift, .fork = cb_fork, .clear = cb_clear, .pos = cb_pos, .view = cb_view,
	.reuse = cb_reuse, .stats = cb_stats, .destroy = cb_destroy,
};

int kv_contig_create(const struct kv_geom *g, int32_t n_seq, int32_t n_ctx,
		     struct kv_backing **out)
{
	*out = NULL;
	if (n_seq <= 0 || n_ctx <= 0)
		return FX_E_INVALID;
	struct contig_backing *cb = fx_calloc(1, sizeof(*cb));
	if (!cb)
		return FX_E_NOMEM;
	cb->base = (struct kv_backing){ .ops = &contig_ops, .n_seq = n_seq, .n_ctx = n_ctx };
	cb->kv = fx_calloc((size_t)n_seq, sizeof(*cb->kv));
	cb->n_tokens = fx_calloc((size_t)n_seq, sizeof(*cb->n_tokens));
	int rc = cb->kv && cb->n_tokens ? FX_OK : FX_E_NOMEM;
	for (int32_t i = 0; !rc && i < n_seq; i++)
		rc = kv_contig_init(&cb->kv[i], g->n_layer, n_ctx, g->k_width, g->v_width, g->k_type,
				    g->v_type);
	if (rc) {
		cb_destroy(&cb->base);
		return rc;
	}
	*out = &cb->base;
	return FX_OK;
}
