/* Where a row's K/V lives: a tagged variant the one attention body takes
 * as a parameter, one per batch row. A caller must name its backing; there
 * is no default:
 *   KV_DECODE   a single sequence's contiguous cache (the only arm a
 *               device-resident cache may serve later);
 *   KV_BATCHED  one sequence of a batch, each with its own contiguous cache:
 *               the same math, never the resident hook;
 *   KV_PAGED    a block table into a pool of fixed-size blocks shared by all
 *               sequences (vLLM's PagedAttention layout, Kwon et al. 2023). */
#ifndef FX_KV_KV_H
#define FX_KV_KV_H

#include <stdbool.h>
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
	size_t bytes;             /* k and v as allocated (fx_lines_bytes) */
};

/* The paged pool: per layer, n_blocks blocks of block_size rows of K and V.
 * k: [n_layer][n_blocks][block_size][k_width] (v likewise), elements of
 * k_type / v_type. Blocks are reference counted (shared prefixes, forks)
 * and handed out from a free list. A full block is also cached under a key
 * hashing its tokens and its parent block's key (vLLM's automatic prefix
 * caching): when its last reference goes it stays cached, and a new
 * sequence whose prompt starts with the same tokens reuses it; cached
 * unreferenced blocks are evicted least recently used first when the free
 * list runs dry. */
struct kv_pool {
	int32_t n_layer, n_blocks, block_size;
	int64_t k_width, v_width;
	int k_type, v_type;
	size_t k_row, v_row;
	uint8_t *k, *v;
	size_t bytes;        /* k and v as allocated (fx_lines_bytes) */
	int32_t *ref;        /* [n_blocks] references; 0: free or cached */
	int32_t *free_list;  /* [n_blocks] stack of free (uncached, unreferenced) ids */
	int32_t n_free;
	uint64_t *key;       /* [n_blocks] prefix-cache key, 0: not cached */
	uint64_t *last_use;  /* [n_blocks] clock of the last release, for LRU */
	uint64_t clock;
	int32_t n_cached_idle;  /* cached blocks with no reference (evictable) */
	int64_t n_hit_blocks;   /* prefix-cache hits, for reports */
	struct kv_ev_log *log;  /* prefix-cache events (paged.c), or NULL: not recorded */
};

/* The paged layout's pools, shared by all sequences. Layers are grouped by
 * what they attend to: group 0 full-attention layers, group 1 sliding-
 * window layers. A group-1 block wholly outside every future window (and
 * the 32 rows kept for roll-back) is released after each ubatch, so
 * sliding layers hold at most about window + 32 + ubatch tokens per
 * sequence (llama.cpp's iSWA cache keeps the two kinds apart the same
 * way); a released full block stays in the prefix cache until evicted.
 * Sequences' block tables and the lifecycle: src/kv/paged.c, backing.h. */
enum { KV_GROUPS = 2 };

struct kv_paged {
	struct kv_pool pool[KV_GROUPS]; /* pool[g].n_layer == 0: no such layers */
	uint8_t *group;                 /* [n_layer] group of each model layer */
	int32_t *slot;                  /* [n_layer] the layer's index in its pool */
	int32_t window;                 /* group 1's window in tokens */
	int k_type, v_type;
};

enum kv_kind {
	KV_DECODE = 1,
	KV_BATCHED,
	KV_PAGED,
};

struct kv_view {
	enum kv_kind kind;
	/* The sequence's recurrent state (kv/recurrent.c): the floats of every
	 * recurrent layer, each at its layer's offset (struct layer's rs_off),
	 * updated in place token by token; NULL for attention-only models. */
	float *rs;
	/* Its roll-back ring (kv/recurrent.c, n_rollback > 0), or NULL: a
	 * recurrent mixer that moved a row at position p to the state after
	 * it copies its layer's part of that state into kv_rs_kept(v, p). */
	float *rs_ring;
	int32_t rs_ring_n;   /* states in the ring */
	int64_t rs_floats;   /* floats of one state */
	union {
		struct kv_contig *decode;
		struct kv_contig *batched;
		struct {
			const struct kv_paged *set;
			const int32_t *blocks[KV_GROUPS]; /* logical -> pool block */
		} paged;
	};
};

/* Errors: FX_E_NOMEM, FX_E_INVALID (sizes or types). kv_pool_fini frees. */
int kv_pool_init(struct kv_pool *p, int32_t n_layer, int32_t n_blocks, int32_t block_size,
		 int64_t k_width, int64_t v_width, int k_type, int v_type);
void kv_pool_fini(struct kv_pool *p);

/* K/V element types a backing can hold: f32, f16 (llama.cpp's default) and
 * q8_0 (32-value blocks, as llama.cpp's --cache-type-k q8_0), given that
 * width (one KV head's) divides into the type's blocks. */
bool kv_type_ok(int type, int64_t head_width);

/* Errors: FX_E_NOMEM, FX_E_INVALID (sizes, or a type kv_type_ok refuses).
 * Caller owns *c (kv_contig_fini). */
int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width, int k_type, int v_type);
void kv_contig_fini(struct kv_contig *c);

/* Element types of the backing's K and V rows. */
static inline int kv_k_type(const struct kv_view *kv)
{
	switch (kv->kind) {
	case KV_DECODE: return kv->decode->k_type;
	case KV_BATCHED: return kv->batched->k_type;
	case KV_PAGED: return kv->paged.set->k_type;
	}
	return -1;
}

static inline int kv_v_type(const struct kv_view *kv)
{
	switch (kv->kind) {
	case KV_DECODE: return kv->decode->v_type;
	case KV_BATCHED: return kv->batched->v_type;
	case KV_PAGED: return kv->paged.set->v_type;
	}
	return -1;
}

static inline uint8_t *contig_row(const struct kv_contig *c, uint8_t *base, size_t row, int il,
				  int32_t pos)
{
	return base + ((size_t)il * (size_t)c->n_ctx + (size_t)pos) * row;
}

/* K (or V) row off of block blk of the pool's layer slot. */
static inline uint8_t *kv_pool_row(const struct kv_pool *p, bool is_k, int32_t slot, int32_t blk,
				   int32_t off)
{
	size_t row = is_k ? p->k_row : p->v_row;
	return (is_k ? p->k : p->v) +
	       (((size_t)slot * (size_t)p->n_blocks + (size_t)blk) * (size_t)p->block_size +
		(size_t)off) * row;
}

static inline uint8_t *paged_row(const struct kv_view *kv, bool is_k, int il, int32_t pos)
{
	const struct kv_paged *set = kv->paged.set;
	int g = set->group[il];
	const struct kv_pool *p = &set->pool[g];
	return kv_pool_row(p, is_k, set->slot[il], kv->paged.blocks[g][pos / p->block_size],
			   pos % p->block_size);
}

/* K (or V) row of layer il at position pos: k_width (v_width) elements of
 * kv_k_type (kv_v_type). pos must be reserved in the backing: callers
 * check (and for paged, kv_seq_reserve) before the forward pass. */
static inline void *kv_k_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_DECODE: return contig_row(kv->decode, kv->decode->k, kv->decode->k_row, il, pos);
	case KV_BATCHED: return contig_row(kv->batched, kv->batched->k, kv->batched->k_row, il, pos);
	case KV_PAGED: return paged_row(kv, true, il, pos);
	}
	return NULL;
}

static inline void *kv_v_row(const struct kv_view *kv, int il, int32_t pos)
{
	switch (kv->kind) {
	case KV_DECODE: return contig_row(kv->decode, kv->decode->v, kv->decode->v_row, il, pos);
	case KV_BATCHED: return contig_row(kv->batched, kv->batched->v, kv->batched->v_row, il, pos);
	case KV_PAGED: return paged_row(kv, false, il, pos);
	}
	return NULL;
}

/* The K and V rows of layer il at positions [j0, j0 + n), into k[n] and
 * v[n]: k[r] and v[r] are kv_k_row / kv_v_row of position j0 + r, looked
 * up once per run of rows adjacent in memory (a paged block, or all of a
 * contiguous cache) instead of once per row: attention walks its keys a
 * chunk at a time. Same preconditions as kv_k_row. */
static inline void kv_rows(const struct kv_view *kv, int il, int32_t j0, int n, const uint8_t **k,
			   const uint8_t **v)
{
	const struct kv_contig *c = NULL;
	const struct kv_pool *p = NULL;
	switch (kv->kind) {
	case KV_DECODE: c = kv->decode; break;
	case KV_BATCHED: c = kv->batched; break;
	case KV_PAGED: p = &kv->paged.set->pool[kv->paged.set->group[il]]; break;
	}
	size_t ks = c ? c->k_row : p->k_row, vs = c ? c->v_row : p->v_row;
	for (int r = 0; r < n;) {
		int32_t pos = j0 + r;
		int run = n - r;
		if (p && p->block_size - pos % p->block_size < run)
			run = p->block_size - pos % p->block_size;
		const uint8_t *kb = kv_k_row(kv, il, pos), *vb = kv_v_row(kv, il, pos);
		for (int i = 0; i < run; i++, r++) {
			k[r] = kb + (size_t)i * ks;
			v[r] = vb + (size_t)i * vs;
		}
	}
}

/* Whether two views are the same sequence's cache (its rows at a
 * position are the same memory): a per-sequence pointer decides. */
static inline bool kv_view_same(const struct kv_view *a, const struct kv_view *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == KV_PAGED)
		return a->paged.blocks[0] == b->paged.blocks[0] && a->paged.blocks[1] == b->paged.blocks[1];
	return a->decode == b->decode;
}

/* Where the state after the row at position pos is kept for a roll-back
 * (a whole state; each layer writes its part at its rs_off), or NULL. */
static inline float *kv_rs_kept(const struct kv_view *v, int32_t pos)
{
	return v->rs_ring ? v->rs_ring + (size_t)((pos + 1) % v->rs_ring_n) * (size_t)v->rs_floats : NULL;
}

#endif
