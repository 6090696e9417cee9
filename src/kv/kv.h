/* Where a row's K/V lives: a tagged variant the one attention body takes
 * as a parameter. A caller must name its backing; there is no default.
 * Only the contiguous single-sequence cache exists so far; the batched and
 * paged arms (issue 4) are further kinds with their own row lookups. */
#ifndef FX_KV_KV_H
#define FX_KV_KV_H

#include <stddef.h>
#include <stdint.h>

/* One sequence's cache: per layer, n_ctx rows of K and of V.
 * k: [n_layer][n_ctx][k_width], v: [n_layer][n_ctx][v_width], row-major,
 * elements of type k_type / v_type (FX_TYPE_F32 or FX_TYPE_F16: f16 is
 * llama.cpp's default and halves the cache);
 * k_width = n_head_kv * head_dim, v_width = n_head_kv * head_dim_v. */
struct kv_contig {
	int32_t n_layer, n_ctx;
	int64_t k_width, v_width;
	int k_type, v_type;       /* enum fx_type */
	size_t k_row, v_row;      /* bytes per row */
	uint8_t *k, *v;
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

/* Errors: FX_E_NOMEM, FX_E_INVALID (sizes, or a type other than f32/f16).
 * Caller owns *c (kv_contig_fini). */
int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width, int k_type, int v_type);
void kv_contig_fini(struct kv_contig *c);

/* Element types of the backing's K and V rows. */
static inline int kv_k_type(const struct kv_view *kv)
{
	switch (kv->kind) {
	case KV_CONTIG: return kv->contig->k_type;
	}
	return -1;
}

static inline int kv_v_type(const struct kv_view *kv)
{
	switch (kv->kind) {
	case KV_CONTIG: return kv->contig->v_type;
	}
	return -1;
}

/* K (or V) row of layer il at position pos: k_width (v_width) elements of
 * kv_k_type (kv_v_type). pos must be < the backing's capacity: callers
 * check before writing. */
static inline void *kv_k_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_CONTIG: {
		const struct kv_contig *c = kv->contig;
		return c->k + ((size_t)il * (size_t)c->n_ctx + (size_t)pos) * c->k_row;
	}
	}
	return NULL;
}

static inline void *kv_v_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_CONTIG: {
		const struct kv_contig *c = kv->contig;
		return c->v + ((size_t)il * (size_t)c->n_ctx + (size_t)pos) * c->v_row;
	}
	}
	return NULL;
}

#endif
