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
	    !kv_type_ok(k_type, k_width) || !kv_type_ok(v_type, v_width))
		return FX_E_INVALID;
	p->k_row = fx_row_size(k_type, k_width);
	p->v_row = fx_row_size(v_type, v_width);
	size_t rows = (size_t)n_layer * (size_t)n_blocks * (size_t)block_size;
	p->k = fx_malloc_lines(rows, p->k_row); /* rows on cache lines where their size allows */
	p->v = fx_malloc_lines(rows, p->v_row);
	p->bytes = fx_lines_bytes(rows, p->k_row) + fx_lines_bytes(rows, p->v_row);
	p->ref = fx_calloc((size_t)n_blocks, sizeof(*p->ref));
	p->free_list = fx_malloc_array((size_t)n_blocks, sizeof(*p->free_list));
	p->key = fx_calloc((size_t)n_blocks, sizeof(*p->key));
	p->last_use = fx_calloc((size_t)n_blocks, sizeof(*p->last_use));
	if (!p->k || !p->v || !p->ref || !p->free_list || !p->key || !p->last_use) {
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
	fx_free(p->key);
	fx_free(p->last_use);
	memset(p, 0, sizeof(*p));
}

int32_t kv_pool_n_used(const struct kv_pool *p)
{
	return p->n_blocks - p->n_free - p->n_cached_idle;
}

/* A cached block keeps its contents when its last reference goes. */
static void unref(struct kv_pool *p, int32_t b)
{
	if (--p->ref[b])
		return;
	if (p->key[b]) {
		p->n_cached_idle++;
		p->last_use[b] = ++p->clock;
	} else {
		p->free_list[p->n_free++] = b;
	}
}

/* A block to write: a free one, else the least recently released cached
 * one (its key is forgotten). The caller checked availability. */
static int32_t take_block(struct kv_pool *p)
{
	int32_t b = -1;
	if (p->n_free) {
		b = p->free_list[--p->n_free];
	} else {
		for (int32_t i = 0; i < p->n_blocks; i++)
			if (!p->ref[i] && p->key[i] && (b < 0 || p->last_use[i] < p->last_use[b]))
				b = i;
		p->key[b] = 0;
		p->n_cached_idle--;
	}
	p->ref[b] = 1;
	return b;
}

/* Key of a full block: FNV-1a over its parent's key and its tokens (never 0). */
static uint64_t block_key(uint64_t parent, const int32_t *tok, int32_t n)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (int32_t i = 0; i < n; i++) {
		uint32_t t = (uint32_t)tok[i];
		for (int k = 0; k < 4; k++) {
			h ^= (t >> (8 * k)) & 0xff;
			h *= 1099511628211ull;
		}
	}
	return h ? h : 1;
}

static int32_t find_key(const struct kv_pool *p, uint64_t key)
{
	for (int32_t i = 0; i < p->n_blocks; i++)
		if (p->key[i] == key)
			return i;
	return -1;
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

int32_t kv_pool_n_available(const struct kv_pool *p)
{
	return p->n_free + p->n_cached_idle;
}

int32_t kv_seq_need(const struct kv_pool *p, const struct kv_seq *s, int32_t n)
{
	if (n <= 0)
		return 0;
	int32_t first = s->n_tokens / p->block_size;
	int32_t last = (s->n_tokens + n - 1) / p->block_size;
	/* New blocks past the table, plus a copy of a shared block about to
	 * be written (only the first can be partial). */
	int32_t need = last + 1 > s->n_blocks ? last + 1 - s->n_blocks : 0;
	return need + (first < s->n_blocks && s->blocks[first] >= 0 && p->ref[s->blocks[first]] > 1);
}

void kv_seq_release_before(struct kv_pool *p, struct kv_seq *s, int32_t pos)
{
	for (int32_t b = 0; b < s->n_blocks && (b + 1) * p->block_size <= pos; b++) {
		if (s->blocks[b] >= 0) {
			unref(p, s->blocks[b]);
			s->blocks[b] = -1;
		}
	}
}

static int grow_tokens(struct kv_seq *s, int32_t n);

int kv_seq_reserve(struct kv_pool *p, struct kv_seq *s, int32_t n)
{
	if (n <= 0)
		return FX_OK;
	int32_t first = s->n_tokens / p->block_size;
	int32_t last = (s->n_tokens + n - 1) / p->block_size;
	bool cow = first < s->n_blocks && s->blocks[first] >= 0 && p->ref[s->blocks[first]] > 1;
	if (kv_seq_need(p, s, n) > kv_pool_n_available(p))
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
	/* Room to record the n tokens too, so the kv_seq_commit after the
	 * forward pass cannot fail (its K/V would be written, unrecorded). */
	if (grow_tokens(s, s->n_tokens + n))
		return FX_E_NOMEM;
	if (cow) {
		int32_t nb = take_block(p);
		copy_block(p, nb, s->blocks[first]);
		unref(p, s->blocks[first]);
		s->blocks[first] = nb;
	}
	while (s->n_blocks <= last)
		s->blocks[s->n_blocks++] = take_block(p);
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
	if (src->n_tokens > dst->tok_cap) {
		int32_t *t = fx_realloc_array(dst->tokens, (size_t)src->n_tokens, sizeof(*t));
		if (!t)
			return FX_E_NOMEM;
		dst->tokens = t;
		dst->tok_cap = src->n_tokens;
	}
	for (int32_t i = 0; i < src->n_blocks; i++) {
		dst->blocks[i] = src->blocks[i];
		if (src->blocks[i] >= 0)
			p->ref[src->blocks[i]]++;
	}
	if (src->n_tokens)
		memcpy(dst->tokens, src->tokens, (size_t)src->n_tokens * sizeof(*dst->tokens));
	dst->n_blocks = src->n_blocks;
	dst->n_tokens = src->n_tokens;
	dst->n_keyed = src->n_keyed;
	dst->chain = src->chain;
	return FX_OK;
}

void kv_seq_clear(struct kv_pool *p, struct kv_seq *s)
{
	/* Release the newest blocks first, so LRU evicts a chain's tail
	 * before its head (a head is worth more: every longer prefix needs it). */
	for (int32_t i = s->n_blocks - 1; i >= 0; i--)
		if (s->blocks[i] >= 0)
			unref(p, s->blocks[i]);
	s->n_blocks = 0;
	s->n_tokens = 0;
	s->n_keyed = 0;
	s->chain = 0;
}

static int grow_tokens(struct kv_seq *s, int32_t n)
{
	if (n <= s->tok_cap)
		return FX_OK;
	int32_t cap = s->tok_cap ? s->tok_cap : 64;
	while (cap < n)
		cap *= 2;
	int32_t *t = fx_realloc_array(s->tokens, (size_t)cap, sizeof(*t));
	if (!t)
		return FX_E_NOMEM;
	s->tokens = t;
	s->tok_cap = cap;
	return FX_OK;
}

int32_t kv_seq_reuse_prefix(struct kv_pool *p, struct kv_seq *s, const int32_t *tok, int32_t n,
			    int32_t max_blocks)
{
	int32_t bs = p->block_size, k = 0;
	uint64_t chain = 0;
	if (s->n_blocks || s->n_tokens)
		return 0;
	for (; k < max_blocks && (k + 1) * bs <= n; k++) {
		uint64_t key = block_key(chain, tok + k * bs, bs);
		int32_t b = find_key(p, key);
		if (b < 0)
			break;
		if (k + 1 > s->cap) {
			int32_t *nb = fx_realloc_array(s->blocks, (size_t)(k + 8), sizeof(*nb));
			if (!nb)
				break;
			s->blocks = nb;
			s->cap = k + 8;
		}
		if (grow_tokens(s, (k + 1) * bs))
			break;
		if (!p->ref[b]++)
			p->n_cached_idle--;
		s->blocks[s->n_blocks++] = b;
		chain = key;
	}
	if (k) {
		memcpy(s->tokens, tok, (size_t)(k * bs) * sizeof(*tok));
		s->n_tokens = k * bs;
		s->n_keyed = k;
		s->chain = chain;
		p->n_hit_blocks += k;
	}
	return s->n_tokens;
}

int kv_seq_commit(struct kv_pool *p, struct kv_seq *s, const int32_t *tok, int32_t n)
{
	int32_t bs = p->block_size;
	if (grow_tokens(s, s->n_tokens + n))
		return FX_E_NOMEM;
	memcpy(s->tokens + s->n_tokens, tok, (size_t)n * sizeof(*tok));
	s->n_tokens += n;
	while (!p->no_cache && (s->n_keyed + 1) * bs <= s->n_tokens && s->n_keyed < s->n_blocks) {
		int32_t b = s->blocks[s->n_keyed];
		uint64_t key = block_key(s->chain, s->tokens + s->n_keyed * bs, bs);
		/* A twin computed concurrently keeps the key; this copy stays private. */
		if (!p->key[b] && find_key(p, key) < 0)
			p->key[b] = key;
		s->chain = key;
		s->n_keyed++;
	}
	return FX_OK;
}

void kv_seq_fini(struct kv_pool *p, struct kv_seq *s)
{
	kv_seq_clear(p, s);
	fx_free(s->blocks);
	fx_free(s->tokens);
	memset(s, 0, sizeof(*s));
}
