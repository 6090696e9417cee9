/* The paged KV pool: fixed-size blocks, reference counted, a free list,
 * per-sequence block tables with copy-on-write on the first write into a
 * shared block (Kwon et al. 2023, "Efficient Memory Management for Large
 * Language Model Serving with PagedAttention"). */
#include <stdbool.h>
#include <string.h>

#include "core/alloc.h"
#include "ferrox.h"
#include "kv/backing.h"
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
	/* rows on cache lines where their size allows; resident from here */
	p->k = fx_calloc_lines(rows, p->k_row);
	p->v = fx_calloc_lines(rows, p->v_row);
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

static int32_t pool_used(const struct kv_pool *p)
{
	return p->n_blocks - p->n_free - p->n_cached_idle;
}

/* ---- prefix-cache events (fx_context_kv_events) ----------------------
 * The log of one pool: the pool whose blocks decide whether a prefix is
 * reused (full attention; the sliding group only when there is no other).
 * A record that cannot grow the log empties it and marks it lost: the
 * drain then starts with CLEARED, so a consumer never believes in a block
 * the pool does not hold. */
struct kv_ev_log {
	struct fx_kv_event *ev; /* [cap]; a STORED event's tokens point into tok
				 * only while draining (tok_off until then) */
	int64_t *tok_off;       /* [cap] */
	int64_t n, cap;
	int32_t *tok;           /* [tok_cap] */
	int64_t n_tok, tok_cap;
	bool lost;
};

static void ev_record(struct kv_ev_log *L, int32_t kind, uint64_t hash, uint64_t parent,
		      const int32_t *tok, int32_t n_tok)
{
	if (!L)
		return;
	if (L->n == L->cap) {
		int64_t c = L->cap ? 2 * L->cap : 64;
		struct fx_kv_event *e = fx_realloc_array(L->ev, (size_t)c, sizeof(*e));
		if (e)
			L->ev = e;
		int64_t *o = e ? fx_realloc_array(L->tok_off, (size_t)c, sizeof(*o)) : NULL;
		if (!o)
			goto lose;
		L->tok_off = o;
		L->cap = c;
	}
	if (L->n_tok + n_tok > L->tok_cap) {
		int64_t c = L->tok_cap ? L->tok_cap : 1024;
		while (c < L->n_tok + n_tok)
			c *= 2;
		int32_t *t = fx_realloc_array(L->tok, (size_t)c, sizeof(*t));
		if (!t)
			goto lose;
		L->tok = t;
		L->tok_cap = c;
	}
	L->ev[L->n] = (struct fx_kv_event){ .kind = kind, .n_tokens = n_tok, .hash = hash,
					    .parent = parent };
	L->tok_off[L->n++] = L->n_tok;
	if (n_tok)
		memcpy(L->tok + L->n_tok, tok, (size_t)n_tok * sizeof(*tok));
	L->n_tok += n_tok;
	return;
lose:
	L->lost = true; /* and later events are recorded after the loss */
	L->n = L->n_tok = 0;
}

static void ev_log_free(struct kv_ev_log *L)
{
	if (!L)
		return;
	fx_free(L->ev);
	fx_free(L->tok_off);
	fx_free(L->tok);
	fx_free(L);
}

/* Block b of p is no longer what its key says (evicted or rewritten). */
static void forget_key(struct kv_pool *p, int32_t b)
{
	if (p->key[b])
		ev_record(p->log, FX_KV_EVENT_REMOVED, p->key[b], 0, NULL, 0);
	p->key[b] = 0;
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
		forget_key(p, b);
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

static int32_t pool_available(const struct kv_pool *p)
{
	return p->n_free + p->n_cached_idle;
}

/* ---- the paged backing ------------------------------------------------ */

/* One sequence: its tokens (the one position counter is n_tokens), the
 * keys of its leading full blocks, and per layer group a block table:
 * positions [0, n_tokens) of group g live in t[g].blocks[pos / block_size]
 * (-1: released, outside every window still to come). Every table, keys
 * and tokens have room for cap blocks. */
struct pseq {
	int32_t n_tokens;
	int32_t *tokens;          /* [cap * block_size] */
	uint64_t *keys;           /* [cap] key of full block i, i < n_keyed */
	int32_t n_keyed;
	bool shifted;             /* a kv_shift moved rows to clean and past: */
	int32_t clean;            /* blocks past row clean are never keyed */
	int32_t swa_lo;           /* group 1 rows before it are not valid, even in
				   * a held block (the first block a shift wrote) */
	int32_t cap;
	struct {
		int32_t *blocks;  /* [cap] */
		int32_t n_blocks;
	} t[KV_GROUPS];
};

struct paged_backing {
	struct kv_backing base;
	struct kv_paged set;
	struct pseq *seq;                /* [n_seq] */
	int32_t promised[KV_GROUPS];     /* blocks this batch's admits promised */
};

#define PB(b) ((struct paged_backing *)(b))

/* Rows a sliding group keeps beyond its window, so that rolling a
 * sequence back by up to this many tokens (a rejected draft) finds the
 * rows the window then needs. */
enum { KEEP_BACK = 32 };

static int32_t bsize(const struct paged_backing *pb)
{
	return pb->set.pool[0].n_layer ? pb->set.pool[0].block_size : pb->set.pool[1].block_size;
}

/* Group g's window (0: full attention). */
static int32_t win(const struct paged_backing *pb, int g)
{
	return g ? pb->set.window : 0;
}

/* Room for cap blocks (and their tokens) in every table of q. */
static int pseq_grow(struct pseq *q, int32_t cap, int32_t bs)
{
	if (cap <= q->cap)
		return FX_OK;
	int32_t c = q->cap ? q->cap : 8;
	while (c < cap)
		c *= 2;
	int32_t *t = fx_realloc_array(q->tokens, (size_t)c * (size_t)bs, sizeof(*t));
	if (t)
		q->tokens = t;
	uint64_t *k = t ? fx_realloc_array(q->keys, (size_t)c, sizeof(*k)) : NULL;
	if (k)
		q->keys = k;
	for (int g = 0; k && g < KV_GROUPS; g++) {
		int32_t *b = fx_realloc_array(q->t[g].blocks, (size_t)c, sizeof(*b));
		if (!b)
			return FX_E_NOMEM;
		q->t[g].blocks = b;
	}
	if (!k)
		return FX_E_NOMEM;
	q->cap = c;
	return FX_OK;
}

/* Whether writing at position pos of group g copies its block first: it
 * is shared (a fork or a reused prefix). */
static bool needs_copy(const struct paged_backing *pb, const struct pseq *q, int g, int32_t pos)
{
	int32_t i = pos / bsize(pb);
	const struct kv_pool *p = &pb->set.pool[g];
	return i < q->t[g].n_blocks && q->t[g].blocks[i] >= 0 && p->ref[q->t[g].blocks[i]] > 1;
}

/* Blocks group g takes from its pool to hold q's next n rows now. */
static int32_t need_now(const struct paged_backing *pb, const struct pseq *q, int g, int32_t n)
{
	int32_t last = (q->n_tokens + n - 1) / bsize(pb);
	int32_t fresh = last + 1 > q->t[g].n_blocks ? last + 1 - q->t[g].n_blocks : 0;
	return fresh + needs_copy(pb, q, g, q->n_tokens);
}

/* Most blocks group g draws from its pool at any moment while q takes n
 * rows in ubatches of at most u: all new ones for full attention; for a
 * window w, blocks are released after each ubatch, so q holds at most the
 * blocks spanning w - 1 + KEEP_BACK + u rows (plus one for misalignment). */
static int32_t need_peak(const struct paged_backing *pb, const struct pseq *q, int g, int32_t n,
			 int32_t u)
{
	int32_t all = need_now(pb, q, g, n), w = win(pb, g), bs = bsize(pb);
	if (!w)
		return all;
	int32_t held = 0;
	for (int32_t i = 0; i < q->t[g].n_blocks; i++)
		held += q->t[g].blocks[i] >= 0;
	int32_t span = (w - 1 + KEEP_BACK + (u < n ? u : n) + bs - 1) / bs + 1;
	int32_t draw = (span > held ? span - held : 0) + needs_copy(pb, q, g, q->n_tokens);
	return draw < all ? draw : all;
}

static void pb_begin(struct kv_backing *b)
{
	memset(PB(b)->promised, 0, sizeof(PB(b)->promised));
}

static int pb_admit(struct kv_backing *b, int32_t seq, int32_t n, int32_t n_ubatch)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	int32_t need[KV_GROUPS] = { 0 };
	for (int g = 0; g < KV_GROUPS; g++) {
		const struct kv_pool *p = &pb->set.pool[g];
		if (!p->n_layer)
			continue;
		need[g] = need_peak(pb, q, g, n, n_ubatch);
		if (pb->promised[g] + need[g] > pool_available(p))
			return FX_E_KV_FULL;
	}
	/* Table room now, so the reserves and the commit cannot fail. */
	if (pseq_grow(q, (q->n_tokens + n + bsize(pb) - 1) / bsize(pb), bsize(pb)))
		return FX_E_NOMEM;
	for (int g = 0; g < KV_GROUPS; g++)
		pb->promised[g] += need[g];
	return FX_OK;
}

static int pb_reserve(struct kv_backing *b, int32_t seq, int32_t n)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	int32_t bs = bsize(pb), first = q->n_tokens / bs, last = (q->n_tokens + n - 1) / bs;
	if (n <= 0)
		return FX_OK;
	for (int g = 0; g < KV_GROUPS; g++)
		if (pb->set.pool[g].n_layer && need_now(pb, q, g, n) > pool_available(&pb->set.pool[g]))
			return FX_E_KV_FULL;
	if (pseq_grow(q, last + 1, bs))
		return FX_E_NOMEM;
	for (int g = 0; g < KV_GROUPS; g++) {
		struct kv_pool *p = &pb->set.pool[g];
		if (!p->n_layer)
			continue;
		if (needs_copy(pb, q, g, q->n_tokens)) {
			int32_t nb = take_block(p);
			copy_block(p, nb, q->t[g].blocks[first]);
			unref(p, q->t[g].blocks[first]);
			q->t[g].blocks[first] = nb;
		} else if (q->n_tokens % bs && first < q->t[g].n_blocks && q->t[g].blocks[first] >= 0) {
			/* A private cached block written in place (after a roll-
			 * back into it) is no longer what its key says. Checked
			 * here, not at the roll-back: the block may have been
			 * shared then and private now. */
			forget_key(p, q->t[g].blocks[first]);
		}
		while (q->t[g].n_blocks <= last)
			q->t[g].blocks[q->t[g].n_blocks++] = take_block(p);
	}
	return FX_OK;
}

/* Release q's group-g blocks wholly before position pos. */
static void release_before(struct paged_backing *pb, struct pseq *q, int g, int32_t pos)
{
	struct kv_pool *p = &pb->set.pool[g];
	for (int32_t i = 0; i < q->t[g].n_blocks && (i + 1) * p->block_size <= pos; i++)
		if (q->t[g].blocks[i] >= 0) {
			unref(p, q->t[g].blocks[i]);
			q->t[g].blocks[i] = -1;
		}
}

/* Key every block of q that is full and not keyed yet, in every group
 * that still holds it; a twin computed concurrently keeps its key and this
 * copy stays private. */
static void key_full_blocks(struct paged_backing *pb, struct pseq *q)
{
	int32_t bs = bsize(pb);
	while ((q->n_keyed + 1) * bs <= q->n_tokens &&
	       (!q->shifted || (q->n_keyed + 1) * bs <= q->clean)) {
		int32_t k = q->n_keyed;
		uint64_t parent = k ? q->keys[k - 1] : 0;
		uint64_t key = block_key(parent, q->tokens + (size_t)k * bs, bs);
		q->keys[k] = key;
		for (int g = 0; g < KV_GROUPS; g++) {
			struct kv_pool *p = &pb->set.pool[g];
			int32_t blk = k < q->t[g].n_blocks ? q->t[g].blocks[k] : -1;
			if (p->n_layer && blk >= 0 && !p->key[blk] && find_key(p, key) < 0) {
				p->key[blk] = key;
				ev_record(p->log, FX_KV_EVENT_STORED, key, parent,
					  q->tokens + (size_t)k * bs, bs);
			}
		}
		q->n_keyed++;
	}
}

static void pb_commit(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	memcpy(q->tokens + q->n_tokens, tok, (size_t)n * sizeof(*tok));
	q->n_tokens += n;
	key_full_blocks(pb, q);
	/* The next query, at n_tokens, sees keys from n_tokens - w + 1 on;
	 * KEEP_BACK more rows stay for a roll-back. */
	for (int g = 0; g < KV_GROUPS; g++)
		if (pb->set.pool[g].n_layer && win(pb, g))
			release_before(pb, q, g, q->n_tokens - win(pb, g) + 1 - KEEP_BACK);
}

static int pb_rm(struct kv_backing *b, int32_t seq, int32_t pos)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	int32_t bs = bsize(pb);
	if (pos < 0)
		pos = 0;
	if (pos >= q->n_tokens)
		return FX_OK;
	/* A window's rows before pos must still be there. (Unclamped, the
	 * window's start was below 0 for any pos within the first window,
	 * and every roll-back there was refused.) */
	int32_t w1 = win(pb, 1), lo1 = pos - w1 + 1 > 0 ? pos - w1 + 1 : 0;
	if (w1 && pos && lo1 < q->swa_lo)
		return FX_E_INVALID;
	for (int g = 0; g < KV_GROUPS; g++) {
		int32_t w = win(pb, g), lo = pos - w + 1 > 0 ? (pos - w + 1) / bs : 0;
		for (int32_t i = lo; w && pb->set.pool[g].n_layer && pos && i <= (pos - 1) / bs; i++)
			if (q->t[g].blocks[i] < 0)
				return FX_E_INVALID;
	}
	int32_t keep = (pos + bs - 1) / bs;
	for (int g = 0; g < KV_GROUPS; g++) {
		struct kv_pool *p = &pb->set.pool[g];
		for (int32_t i = q->t[g].n_blocks - 1; i >= keep; i--)
			if (q->t[g].blocks[i] >= 0)
				unref(p, q->t[g].blocks[i]);
		if (q->t[g].n_blocks > keep)
			q->t[g].n_blocks = keep;
	}
	q->n_tokens = pos;
	if (q->n_keyed > pos / bs)
		q->n_keyed = pos / bs;
	if (q->shifted && pos <= q->clean)
		q->shifted = false; /* what is left was never moved */
	return FX_OK;
}

/* The first row group g must hold of a sequence of n rows: 0 for full
 * attention; for a window, the first row a query at n or a roll-back of
 * KEEP_BACK can see (what pb_commit keeps, to the row). */
static int32_t held_from(const struct paged_backing *pb, int g, int32_t n)
{
	int32_t w = win(pb, g), lo = w ? n - w + 1 - KEEP_BACK : 0;
	return lo > 0 ? lo : 0;
}

/* Whether every row group g must hold after pb_shift's move comes from a
 * row it holds now. */
static bool shift_rows_held(const struct paged_backing *pb, const struct pseq *q, int g,
			    int32_t p0, int32_t delta)
{
	int32_t bs = bsize(pb), d0 = p0 + delta, n1 = q->n_tokens + delta;
	for (int32_t r = held_from(pb, g, n1); r < n1; r++) {
		int32_t o = r < d0 ? r : r - delta;
		if (q->t[g].blocks[o / bs] < 0 || (g && o < q->swa_lo))
			return false;
	}
	return true;
}

/* Drop q's group-g block i (dry: count what it gives back in *avail). */
static void shift_drop(struct kv_pool *p, int32_t *bl, int32_t i, bool dry, int32_t *avail)
{
	if (bl[i] < 0)
		return;
	if (dry) {
		*avail += p->ref[bl[i]] == 1;
		return;
	}
	unref(p, bl[i]);
	bl[i] = -1;
}

/* Write destination block i of group g (rows [ra, rb)): the old block in
 * place when private (its key forgotten), else a fresh one (with the old
 * one's kept rows copied); then every layer of the group gets its moved
 * rows from their sources, re-rotated. */
static void shift_block(struct paged_backing *pb, struct pseq *q, int g, int32_t i, int32_t ra,
			int32_t rb, int32_t d0, int32_t delta, const struct kv_rerot *rr)
{
	struct kv_pool *p = &pb->set.pool[g];
	int32_t *bl = q->t[g].blocks, old = bl[i], bs = bsize(pb);
	bool in_place = old >= 0 && p->ref[old] == 1;
	if (in_place) {
		forget_key(p, old); /* rewritten: no longer what its key says */
	} else {
		bl[i] = take_block(p);
		if (old >= 0 && i * bs < d0)
			copy_block(p, bl[i], old); /* its kept rows */
	}
	int n_layer = pb->set.pool[0].n_layer + pb->set.pool[1].n_layer;
	for (int il = 0; il < n_layer; il++) {
		int32_t sl = pb->set.slot[il];
		for (int32_t r = ra; pb->set.group[il] == g && r < rb; r++) {
			int32_t o = r - delta, sb = o / bs == i ? old : bl[o / bs];
			uint8_t *k = kv_pool_row(p, true, sl, bl[i], r % bs);
			memcpy(k, kv_pool_row(p, true, sl, sb, o % bs), p->k_row);
			memcpy(kv_pool_row(p, false, sl, bl[i], r % bs),
			       kv_pool_row(p, false, sl, sb, o % bs), p->v_row);
			rr->fn(rr->ctx, il, k);
		}
	}
	if (!in_place && old >= 0)
		unref(p, old);
}

/* pb_shift for group g, block by block in ascending destination order
 * (rows go down, so a source is read before its row is overwritten); dry:
 * only count the blocks drawn against *avail (FX_E_KV_FULL when they run
 * out), changing nothing. A source block read for good and not in the new
 * table goes at once, so a sliding group, whose new rows mostly land in
 * released blocks, draws about one block beyond what it holds. */
static int shift_walk(struct paged_backing *pb, struct pseq *q, int g, int32_t p0, int32_t delta,
		      const struct kv_rerot *rr, bool dry, int32_t *avail)
{
	struct kv_pool *p = &pb->set.pool[g];
	int32_t *bl = q->t[g].blocks, nb = q->t[g].n_blocks, bs = bsize(pb);
	int32_t d0 = p0 + delta, n1 = q->n_tokens + delta, nb1 = (n1 + bs - 1) / bs;
	int32_t lo = held_from(pb, g, n1), r0 = d0 > lo ? d0 : lo, gone = (r0 - delta) / bs;
	for (int32_t i = r0 / bs; i < nb1; i++) {
		int32_t ra = i * bs > r0 ? i * bs : r0, rb = (i + 1) * bs < n1 ? (i + 1) * bs : n1;
		bool in_place = bl[i] >= 0 && p->ref[bl[i]] == 1;
		if (dry && !in_place && --*avail < 0)
			return FX_E_KV_FULL;
		if (!dry)
			shift_block(pb, q, g, i, ra, rb, d0, delta, rr);
		for (; gone < nb && gone < (rb - delta) / bs; gone++)
			if (gone >= nb1 || gone < lo / bs)
				shift_drop(p, bl, gone, dry, avail);
	}
	if (dry)
		return FX_OK;
	for (int32_t i = 0; i < nb; i++)
		if (i >= nb1 || i < lo / bs)
			shift_drop(p, bl, i, false, avail);
	q->t[g].n_blocks = nb1 < nb ? nb1 : nb;
	if (g)
		q->swa_lo = lo; /* rows of block lo / bs before lo may be garbage */
	return FX_OK;
}

static int pb_shift(struct kv_backing *b, int32_t seq, int32_t p0, int32_t delta,
		    const struct kv_rerot *rr)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	int32_t d0 = p0 + delta, bs = bsize(pb);
	for (int g = 0; g < KV_GROUPS; g++) {
		int32_t avail = pool_available(&pb->set.pool[g]);
		if (!pb->set.pool[g].n_layer)
			continue;
		if (!shift_rows_held(pb, q, g, p0, delta))
			return FX_E_UNSUPPORTED;
		int rc = shift_walk(pb, q, g, p0, delta, rr, true, &avail);
		if (rc)
			return rc;
	}
	for (int g = 0; g < KV_GROUPS; g++)
		if (pb->set.pool[g].n_layer)
			shift_walk(pb, q, g, p0, delta, rr, false, NULL);
	memmove(q->tokens + d0, q->tokens + p0, (size_t)(q->n_tokens - p0) * sizeof(*q->tokens));
	q->n_tokens += delta;
	if (q->n_keyed > d0 / bs)
		q->n_keyed = d0 / bs;
	q->clean = q->shifted && q->clean < d0 ? q->clean : d0;
	q->shifted = true;
	return FX_OK;
}

static void pb_clear(struct kv_backing *b, int32_t seq)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	/* Newest blocks first, so LRU evicts a chain's tail before its head
	 * (a head is worth more: every longer prefix needs it). */
	for (int g = 0; g < KV_GROUPS; g++) {
		for (int32_t i = q->t[g].n_blocks - 1; i >= 0; i--)
			if (q->t[g].blocks[i] >= 0)
				unref(&pb->set.pool[g], q->t[g].blocks[i]);
		q->t[g].n_blocks = 0;
	}
	q->n_tokens = 0;
	q->n_keyed = 0;
	q->shifted = false;
	q->swa_lo = 0;
}

static int pb_fork(struct kv_backing *b, int32_t src, int32_t dst)
{
	struct paged_backing *pb = PB(b);
	struct pseq *a = &pb->seq[src], *d = &pb->seq[dst];
	if (d->n_tokens || d->t[0].n_blocks || d->t[1].n_blocks)
		return FX_E_INVALID;
	int32_t nb = a->t[0].n_blocks > a->t[1].n_blocks ? a->t[0].n_blocks : a->t[1].n_blocks;
	if (pseq_grow(d, nb, bsize(pb)))
		return FX_E_NOMEM;
	for (int g = 0; g < KV_GROUPS; g++) {
		for (int32_t i = 0; i < a->t[g].n_blocks; i++) {
			d->t[g].blocks[i] = a->t[g].blocks[i];
			if (a->t[g].blocks[i] >= 0)
				pb->set.pool[g].ref[a->t[g].blocks[i]]++;
		}
		d->t[g].n_blocks = a->t[g].n_blocks;
	}
	memcpy(d->tokens, a->tokens, (size_t)a->n_tokens * sizeof(*a->tokens));
	memcpy(d->keys, a->keys, (size_t)a->n_keyed * sizeof(*a->keys));
	d->n_tokens = a->n_tokens;
	d->n_keyed = a->n_keyed;
	d->shifted = a->shifted;
	d->clean = a->clean;
	d->swa_lo = a->swa_lo;
	return FX_OK;
}

static int32_t pb_pos(const struct kv_backing *b, int32_t seq)
{
	return ((const struct paged_backing *)b)->seq[seq].n_tokens;
}

static struct kv_view pb_view(struct kv_backing *b, int32_t seq)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	return (struct kv_view){ .kind = KV_PAGED,
				 .paged = { .set = &pb->set,
					    .blocks = { q->t[0].blocks, q->t[1].blocks } } };
}

/* Whether group g's pool caches the blocks a query at position n_full *
 * bs needs of a prefix of n_full blocks (keys[0..n_full)): all of them for
 * full attention, those of the last window otherwise. */
static bool group_has_prefix(const struct paged_backing *pb, int g, const uint64_t *keys,
			     int32_t n_full)
{
	const struct kv_pool *p = &pb->set.pool[g];
	int32_t bs = bsize(pb), w = win(pb, g), end = n_full * bs;
	int32_t lo = w && end - w + 1 > 0 ? (end - w + 1) / bs : 0;
	for (int32_t i = lo; p->n_layer && i < n_full; i++)
		if (find_key(p, keys[i]) < 0)
			return false;
	return true;
}

static int32_t pb_reuse(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			int32_t max_rows)
{
	struct paged_backing *pb = PB(b);
	struct pseq *q = &pb->seq[seq];
	int32_t bs = bsize(pb), kmax = (max_rows < n ? max_rows : n) / bs, k = kmax;
	if (q->n_tokens || kmax <= 0 || pseq_grow(q, kmax, bs))
		return 0;
	for (int32_t i = 0; i < kmax; i++)
		q->keys[i] = block_key(i ? q->keys[i - 1] : 0, tok + (size_t)i * bs, bs);
	/* The longest chain the full-attention layers have cached, shortened
	 * until the sliding layers have its last window too. */
	if (pb->set.pool[0].n_layer)
		for (k = 0; k < kmax && find_key(&pb->set.pool[0], q->keys[k]) >= 0; k++)
			;
	while (k > 0 && !group_has_prefix(pb, 1, q->keys, k))
		k--;
	if (!k)
		return 0;
	for (int g = 0; g < KV_GROUPS; g++) {
		struct kv_pool *p = &pb->set.pool[g];
		int32_t w = win(pb, g), end = k * bs;
		int32_t lo = w && end - w + 1 > 0 ? (end - w + 1) / bs : 0;
		for (int32_t i = 0; p->n_layer && i < k; i++) {
			int32_t blk = i < lo ? -1 : find_key(p, q->keys[i]);
			if (blk >= 0 && !p->ref[blk]++)
				p->n_cached_idle--;
			q->t[g].blocks[i] = blk;
		}
		q->t[g].n_blocks = p->n_layer ? k : 0;
	}
	memcpy(q->tokens, tok, (size_t)(k * bs) * sizeof(*tok));
	q->n_tokens = k * bs;
	q->n_keyed = k;
	pb->set.pool[pb->set.pool[0].n_layer ? 0 : 1].n_hit_blocks += k;
	return q->n_tokens;
}

static void pb_stats(const struct kv_backing *b, struct kv_stats *st)
{
	const struct paged_backing *pb = (const struct paged_backing *)b;
	*st = (struct kv_stats){ 0 };
	for (int g = 0; g < KV_GROUPS; g++) {
		const struct kv_pool *p = &pb->set.pool[g];
		if (!p->n_layer)
			continue;
		st->blocks_used += pool_used(p);
		st->blocks_total += p->n_blocks;
		st->bytes += p->bytes;
		st->prefix_hit_tokens += p->n_hit_blocks * p->block_size;
	}
}

static void pb_destroy(struct kv_backing *b)
{
	struct paged_backing *pb = PB(b);
	for (int32_t i = 0; pb->seq && i < b->n_seq; i++) {
		struct pseq *q = &pb->seq[i];
		pb_clear(b, i);
		for (int g = 0; g < KV_GROUPS; g++)
			fx_free(q->t[g].blocks);
		fx_free(q->tokens);
		fx_free(q->keys);
	}
	fx_free(pb->seq);
	for (int g = 0; g < KV_GROUPS; g++) {
		ev_log_free(pb->set.pool[g].log);
		kv_pool_fini(&pb->set.pool[g]);
	}
	fx_free(pb->set.group);
	fx_free(pb->set.slot);
	fx_free(pb);
}

static int64_t pb_events(struct kv_backing *b, fx_kv_event_fn fn, void *arg)
{
	struct paged_backing *pb = PB(b);
	struct kv_ev_log *L = pb->set.pool[0].log ? pb->set.pool[0].log : pb->set.pool[1].log;
	int64_t n = 0;
	if (!L)
		return 0;
	if (L->lost) {
		fn(arg, &(struct fx_kv_event){ .kind = FX_KV_EVENT_CLEARED });
		n++;
	}
	for (int64_t i = 0; i < L->n; i++) {
		struct fx_kv_event e = L->ev[i];
		e.tokens = e.n_tokens ? L->tok + L->tok_off[i] : NULL;
		fn(arg, &e);
	}
	n += L->n;
	L->n = L->n_tok = 0;
	L->lost = false;
	return n;
}

static int64_t pb_held(const struct kv_backing *b, uint64_t *out, int64_t cap)
{
	const struct paged_backing *pb = (const struct paged_backing *)b;
	const struct kv_pool *p = &pb->set.pool[pb->set.pool[0].n_layer ? 0 : 1];
	int64_t n = 0;
	for (int32_t i = 0; p->log && i < p->n_blocks; i++)
		if (p->key[i]) {
			if (n < cap)
				out[n] = p->key[i];
			n++;
		}
	return n;
}

static int32_t pb_reach(const struct kv_backing *b)
{
	return win(PB(b), 1) ? KEEP_BACK : b->n_ctx;
}

static int32_t pb_held_from(const struct kv_backing *b, int32_t seq)
{
	const struct paged_backing *pb = PB(b);
	const struct pseq *q = &pb->seq[seq];
	int32_t from = 0;
	for (int g = 0; g < KV_GROUPS; g++) {
		int32_t bs = pb->set.pool[g].block_size, i = 0;
		if (!pb->set.pool[g].n_layer)
			continue;
		while (i < q->t[g].n_blocks && q->t[g].blocks[i] < 0)
			i++;
		from = i * bs > from ? i * bs : from;
		if (g == 1 && q->swa_lo > from)
			from = q->swa_lo;
	}
	return from < q->n_tokens ? from : q->n_tokens;
}

static const struct kv_ops paged_ops = {
	.begin = pb_begin, .admit = pb_admit, .reserve = pb_reserve, .commit = pb_commit,
	.rm = pb_rm, .shift = pb_shift, .fork = pb_fork, .clear = pb_clear, .pos = pb_pos, .view = pb_view,
	.reuse = pb_reuse, .stats = pb_stats, .destroy = pb_destroy, .reach = pb_reach,
	.events = pb_events, .held = pb_held, .held_from = pb_held_from,
};

/* Pools: full-attention layers in group 0 (n_ctx tokens), sliding-window
 * layers in group 1, sized for what the windows can still see: per
 * sequence window + KEEP_BACK + one ubatch + two partial blocks. */
static int paged_pools(struct paged_backing *pb, const struct kv_geom *g, int32_t n_seq,
		       int32_t n_ctx, int32_t bs, int32_t n_ub)
{
	struct kv_paged *k = &pb->set;
	int32_t n[KV_GROUPS] = { 0 };
	k->group = fx_calloc((size_t)g->n_layer, sizeof(*k->group));
	k->slot = fx_calloc((size_t)g->n_layer, sizeof(*k->slot));
	if (!k->group || !k->slot)
		return FX_E_NOMEM;
	for (int il = 0; il < g->n_layer; il++) {
		k->group[il] = g->window[il] > 0;
		k->slot[il] = n[k->group[il]]++;
		/* One window per group: the widest keeps every layer's rows. */
		if (g->window[il] > k->window)
			k->window = g->window[il];
	}
	/* Each group's rows: the widest of its layers (all of k_width /
	 * v_width without per-layer widths). */
	int64_t kw[KV_GROUPS] = { 0 }, vw[KV_GROUPS] = { 0 };
	for (int il = 0; il < g->n_layer; il++) {
		int64_t a = g->layer_k_width ? g->layer_k_width[il] : g->k_width;
		int64_t b = g->layer_v_width ? g->layer_v_width[il] : g->v_width;
		if (a <= 0 || a > g->k_width || b <= 0 || b > g->v_width)
			return FX_E_INVALID;
		kw[k->group[il]] = a > kw[k->group[il]] ? a : kw[k->group[il]];
		vw[k->group[il]] = b > vw[k->group[il]] ? b : vw[k->group[il]];
	}
	k->k_type = g->k_type;
	k->v_type = g->v_type;
	int64_t full = n_ctx / bs;
	int64_t swa = (int64_t)n_seq * (((int64_t)k->window + KEEP_BACK + n_ub) / bs + 2);
	int64_t blocks[KV_GROUPS] = { full, swa < full ? swa : full };
	for (int i = 0; i < KV_GROUPS; i++) {
		int rc = n[i] ? kv_pool_init(&k->pool[i], n[i], (int32_t)blocks[i], bs, kw[i], vw[i],
					     g->k_type, g->v_type)
			      : FX_OK;
		if (rc)
			return rc;
	}
	return FX_OK;
}

int kv_paged_create(const struct kv_geom *g, int32_t n_seq, int32_t n_ctx, int32_t block_size,
		    int32_t n_ubatch, bool events, struct kv_backing **out)
{
	*out = NULL;
	if (n_seq <= 0 || n_ctx <= 0 || block_size <= 0 || block_size > n_ctx || n_ubatch <= 0)
		return FX_E_INVALID;
	struct paged_backing *pb = fx_calloc(1, sizeof(*pb));
	if (!pb)
		return FX_E_NOMEM;
	pb->base = (struct kv_backing){ .ops = &paged_ops, .n_seq = n_seq, .n_ctx = n_ctx };
	pb->seq = fx_calloc((size_t)n_seq, sizeof(*pb->seq));
	int rc = pb->seq ? paged_pools(pb, g, n_seq, n_ctx, block_size, n_ubatch) : FX_E_NOMEM;
	/* The announced pool: the one whose blocks decide a prefix's reuse. */
	struct kv_pool *ap = &pb->set.pool[pb->set.pool[0].n_layer ? 0 : 1];
	if (!rc && events && !(ap->log = fx_calloc(1, sizeof(*ap->log))))
		rc = FX_E_NOMEM;
	if (rc) {
		pb_destroy(&pb->base);
		return rc;
	}
	*out = &pb->base;
	return FX_OK;
}
