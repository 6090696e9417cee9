/* Where a row's K/V lives: a tagged variant the one attention body takes
 * as a parameter. A caller must name its backing; there is no default.
 * Only the contiguous single-sequence cache exists so far; the batched and
 * paged arms (issue 4) are further kinds with their own row lookups. */
#ifndef FX_KV_KV_H
#define FX_KV_KV_H

#include <stddef.h>
#include <stdint.h>

/* One sequence's cache: per layer, n_ctx rows of K and of V, f32.
 * k: [n_layer][n_ctx][k_width], v: [n_layer][n_ctx][v_width], row-major;
 * k_width = n_head_kv * head_dim, v_width = n_head_kv * head_dim_v. */
struct kv_contig {
	int32_t n_layer, n_ctx;
	int64_t k_width, v_width;
	float *k, *v;
};

enum kv_kind {
	KV_CONTIG = 1, /* single-sequence contiguous cache */
};

struct kv_view {
	enum kv_kind kind;
	union {
		struct kv_contig *contig;
	};
};

/* Errors: FX_E_NOMEM, FX_E_INVALID (sizes). Caller owns *c (kv_contig_fini). */
int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width);
void kv_contig_fini(struct kv_contig *c);

/* K (or V) row of layer il at position pos: k_width (v_width) floats.
 * pos must be < the backing's capacity: callers check before writing. */
static inline float *kv_k_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_CONTIG: {
		const struct kv_contig *c = kv->contig;
		return c->k + ((size_t)il * (size_t)c->n_ctx + (size_t)pos) * (size_t)c->k_width;
	}
	}
	return NULL;
}

static inline float *kv_v_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_CONTIG: {
		const struct kv_contig *c = kv->contig;
		return c->v + ((size_t)il * (size_t)c->n_ctx + (size_t)pos) * (size_t)c->v_width;
	}
	}
	return NULL;
}

#endif
