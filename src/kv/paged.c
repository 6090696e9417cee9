/* The paged KV pool: fixed-size blocks, reference counted, a free list,
 * per-sequence block tables with copy-on-write on the first write into a
 * shared block (Kwon et al. 2023, "Efficient Memory Management for Large
 * Language Model Serving with PagedAttention"). */
#include <stdbool.h>
#include <string.h>

#include "core/alloc.h"
#include "ferrox.h"
#include "kv/kv.h"
#include "quant/quant.h"

int kv_pool_init(struct kv_pool *p, int32_t n_layer, int32_t n_blocks, int32_t block_size,
		 int64_t k_width, int64_t v_width, int k_type, int v_type)
{
	*p = (struct kv_pool){ .n_layer = n_layer, .n_blocks = n_blocks, .block_size = block_size,
			       .k_width = k_width, .v_width = v_width, .k_type = k_type,
			       .v_type = v_type };
	if (n_layer <= 0 || n_blocks <= 0 || block_size <= 0 || k_width <= 0 || v_width <= 0 ||
	    (k_type != FX_TYPE_F32 && k_type != FX_TYPE_F16) ||
	    (v_type != FX_TYPE_F32 && v_type != FX_TYPE_F16))
		return FX_E_INVALID;
	p->k_row = fx_row_size(k_type, k_width);
	p->v_row = fx_row_size(v_type, v_width);
	size_t rows = (size_t)n_layer * (size_t)n_blocks * (size_t)block_size;
	p->k = fx_malloc_array(rows, p->k_row);
	p->v = fx_malloc_array(rows, p->v_row);
	p->ref = fx_calloc((size_t)n_blocks, sizeof(*p->ref));
	p->free_list = fx_malloc_array((size_t)n_blocks, sizeof(*p->free_list));
	if (!p->k || !p->v || !p->ref || !p->free_list) {
		kv_pool_fini(p);
		return FX_E_NOMEM;
	}
	/* Hand out low block ids first. */
	for (int32_t i = 0; i < n_blocks; i++)
		p->free_list[i] = n_blocks - 1 - i;
	p->n_free = n_blocks;
	return FX_OK;
}

void kv_pool_fini(struct kv_pool *p)
{
	fx_free(p->k);
	fx_free(p->v);
	fx_free(p->ref);
	fx_free(p->free_list);
	memset(p, 0, sizeof(*p));
}

int32_t kv_pool_n_used(const struct kv_pool *p)
{
	return p->n_blocks - p->n_free;
}

static void unref(struct kv_pool *p, int32_t b)
{
	if (--p->ref[b] == 0)
		p->free_list[p->n_free++] = b;
}

/* Copy block src's rows of every layer into dst. */
static void copy_block(struct kv_pool *p, int32_t dst, int32_t src)
{
	for (int32_t il = 0; il < p->n_layer; il++) {
		size_t kb = (size_t)p->block_size * p->k_row, vb = (size_t)p->block_size * p->v_row;
		size_t base = (size_t)il * (size_t)p->n_blocks;
		memcpy(p->k + (base + (size_t)dst) * kb, p->k + (base + (size_t)src) * kb, kb);
		memcpy(p->v + (base + (size_t)dst) * vb, p->v + (base + (size_t)src) * vb, vb);
	}
}

int kv_seq_reserve(struct kv_pool *p, struct kv_seq *s, int32_t n)
{
	if (n <= 0)
		return FX_OK;
	int32_t first = s->n_tokens / p->block_size;
	int32_t last = (s->n_tokens + n - 1) / p->block_size;
	/* Blocks needed: new ones past the table, plus a copy of a shared
	 * block we are about to write into (only the first can be partial). */
	int32_t need = last + 1 > s->n_blocks ? last + 1 - s->n_blocks : 0;
	bool cow = first < s->n_blocks && p->ref[s->blocks[first]] > 1;
	if (need + cow > p->n_free)
		return FX_E_KV_FULL;
	if (last + 1 > s->cap) {
		int32_t cap = s->cap ? s->cap : 8;
		while (cap < last + 1)
			cap *= 2;
		int32_t *b = fx_realloc_array(s->blocks, (size_t)cap, sizeof(*b));
		if (!b)
			return FX_E_NOMEM;
		s->blocks = b;
		s->cap = cap;
	}
	if (cow) {
		int32_t nb = p->free_list[--p->n_free];
		p->ref[nb] = 1;
		copy_block(p, nb, s->blocks[first]);
		unref(p, s->blocks[first]);
		s->blocks[first] = nb;
	}
	while (s->n_blocks <= last) {
		int32_t nb = p->free_list[--p->n_free];
		p->ref[nb] = 1;
		s->blocks[s->n_blocks++] = nb;
	}
	return FX_OK;
}

int kv_seq_fork(struct kv_pool *p, const struct kv_seq *src, struct kv_seq *dst)
{
	if (dst->n_blocks)
		return FX_E_INVALID;
	if (src->n_blocks > dst->cap) {
		int32_t *b = fx_realloc_array(dst->blocks, (size_t)src->n_blocks, sizeof(*b));
		if (!b)
			return FX_E_NOMEM;
		dst->blocks = b;
		dst->cap = src->n_blocks;
	}
	for (int32_t i = 0; i < src->n_blocks; i++) {
		dst->blocks[i] = src->blocks[i];
		p->ref[src->blocks[i]]++;
	}
	dst->n_blocks = src->n_blocks;
	dst->n_tokens = src->n_tokens;
	return FX_OK;
}

void kv_seq_clear(struct kv_pool *p, struct kv_seq *s)
{
	for (int32_t i = 0; i < s->n_blocks; i++)
		unref(p, s->blocks[i]);
	s->n_blocks = 0;
	s->n_tokens = 0;
}

void kv_seq_fini(struct kv_pool *p, struct kv_seq *s)
{
	kv_seq_clear(p, s);
	fx_free(s->blocks);
	memset(s, 0, sizeof(*s));
}
