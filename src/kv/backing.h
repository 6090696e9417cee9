/* A KV backing: where every sequence of a context keeps its per-layer K/V,
 * behind one set of operations the engine calls without knowing which
 * backing it has (contiguous caches per sequence, or a paged pool shared by
 * all). A third kind of per-layer state (a recurrent state per sequence)
 * is one more implementation of the same operations.
 *
 * The lifecycle of every ubatch (the engine's one route through here):
 *   kv_begin           once per batch: forget the last batch's promises
 *   kv_admit           per sequence: will n rows fit? (promised, nothing
 *                      changes; a refusal is the batch's answer for it)
 *   kv_reserve         per sequence in the ubatch: rows writable, all or
 *                      nothing; after kv_admit it cannot fail
 *   model_forward      writes the rows through kv_view
 *   kv_commit          per sequence: the rows are the sequence's next
 *                      tokens (advances its one position counter, keys
 *                      full blocks for the prefix cache, releases what the
 *                      sliding window no longer sees); cannot fail
 * A reserve that is not committed is undone by kv_rm (or left: the next
 * reserve reuses it). The backing owns each sequence's position. */
#ifndef FX_KV_BACKING_H
#define FX_KV_BACKING_H

#include <stdbool.h>
#include <stdint.h>

#include "ferrox.h"
#include "kv/kv.h"

/* What a backing stores per layer: K rows of k_width and V rows of v_width
 * elements of k_type / v_type (kv_type_ok), and for each layer its
 * attention window (window[il] > 0: the layer sees the last window[il]
 * positions, so older rows may be released; 0: every position). A layer
 * may use fewer elements of its rows (layer_k_width / layer_v_width, when
 * given: Gemma 4's sliding and global layers have their own head sizes):
 * the paged backing then sizes each group's rows for the widest of its
 * layers; the contiguous ones keep k_width / v_width, the widest of all. */
struct kv_geom {
	int32_t n_layer;
	int64_t k_width, v_width;
	const int64_t *layer_k_width, *layer_v_width; /* [n_layer] or NULL, borrowed
						       * during creation */
	int k_type, v_type;
	const int32_t *window; /* [n_layer], borrowed during creation */
	int64_t rs_floats;     /* recurrent state per sequence (floats, all recurrent
				* layers together); > 0 wraps the K/V backing in the
				* recurrent one (kv_recurrent_wrap) */
	int32_t rs_rollback;   /* recurrent: latest tokens a sequence can remove (0) */
};

/* Counters for reports (fx_context_kv_blocks_used etc.). */
struct kv_stats {
	int32_t blocks_used, blocks_total; /* paged; 0 for contiguous */
	int64_t prefix_hit_tokens;         /* prompt tokens served from the cache */
	uint64_t bytes;                    /* K and V as allocated */
};

struct kv_backing;

/* What kv_shift calls on every K row it moves, after the move: fn
 * re-rotates the row (k_type elements, k_width wide) of layer il in place
 * by the shift's delta. The backing knows rows, not RoPE: the engine passes
 * the model's rotation (attn_k_shift). */
struct kv_rerot {
	void (*fn)(void *ctx, int il, void *k_row);
	void *ctx;
};

struct kv_ops {
	void (*begin)(struct kv_backing *b);
	int (*admit)(struct kv_backing *b, int32_t seq, int32_t n, int32_t n_ubatch);
	int (*reserve)(struct kv_backing *b, int32_t seq, int32_t n);
	void (*commit)(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n);
	int (*rm)(struct kv_backing *b, int32_t seq, int32_t pos);
	int (*shift)(struct kv_backing *b, int32_t seq, int32_t p0, int32_t delta,
		     const struct kv_rerot *rr);
	int (*fork)(struct kv_backing *b, int32_t src, int32_t dst);
	void (*clear)(struct kv_backing *b, int32_t seq);
	int32_t (*pos)(const struct kv_backing *b, int32_t seq);
	struct kv_view (*view)(struct kv_backing *b, int32_t seq);
	int32_t (*reuse)(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			 int32_t max_rows);
	void (*stats)(const struct kv_backing *b, struct kv_stats *st);
	void (*destroy)(struct kv_backing *b);
	int32_t (*snap_every)(const struct kv_backing *b); /* NULL: 0 */
	int32_t (*reach)(const struct kv_backing *b); /* kv_reach; NULL: n_ctx */
	int64_t (*events)(struct kv_backing *b, fx_kv_event_fn fn, void *arg); /* NULL: none */
	int64_t (*held)(const struct kv_backing *b, uint64_t *out, int64_t cap); /* NULL: none */
	int32_t (*held_from)(const struct kv_backing *b, int32_t seq); /* kv_held_from; NULL: 0 */
	void (*rebase)(struct kv_backing *b, int32_t seq); /* kv_rebase; NULL: nothing */
};

struct kv_backing {
	const struct kv_ops *ops;
	int32_t n_seq, n_ctx;
};

/* How many sequences, of how many positions, in ubatches of how many rows;
 * block_size for backings in blocks. */
struct kv_shape {
	int32_t n_seq, n_ctx, n_ubatch, block_size;
	bool events; /* record prefix-cache events (kv_events) */
};

struct fx_err;

/* The backing a context's caller named (enum fx_kv_layout; the one place
 * a layout is named), for geometry g and shape s. Errors, with a message
 * in *err: FX_E_INVALID (an unknown layout, sizes it cannot hold),
 * FX_E_NOMEM. Caller owns *out (kv_destroy). */
int kv_backing_create(int32_t layout, const struct kv_geom *g, const struct kv_shape *s,
		      struct kv_backing **out, struct fx_err *err);

/* Contiguous: each of n_seq sequences owns n_ctx rows per layer, allocated
 * here, so no batch ever fails on memory. One sequence alone decodes on
 * its own cache (KV_DECODE); several share a step (KV_BATCHED). No prefix
 * cache. Errors: FX_E_NOMEM, FX_E_INVALID (sizes or types). Caller owns
 * *out (kv_destroy). */
int kv_contig_create(const struct kv_geom *g, int32_t n_seq, int32_t n_ctx,
		     struct kv_backing **out);

/* Paged (src/kv/paged.c): n_ctx rows of full-attention layers in blocks of
 * block_size shared by all sequences, and for sliding-window layers a pool
 * sized for what the windows can see (window + 32 rows kept for roll-back +
 * n_ubatch + two partial blocks per sequence). Full blocks of both groups are kept in a prefix
 * cache keyed by their tokens. Errors as kv_contig_create. */
int kv_paged_create(const struct kv_geom *g, int32_t n_seq, int32_t n_ctx, int32_t block_size,
		    int32_t n_ubatch, bool events, struct kv_backing **out);

/* Recurrent (src/kv/recurrent.c): inner keeps the attention layers' K/V
 * and every sequence's position; each of n_seq sequences also owns a slot
 * of rs_floats floats (the conv windows and SSM / delta-rule states of the
 * recurrent layers of hybrid models: LFM2, Mamba-2, Gated DeltaNet),
 * zeroed when the sequence is empty, copied on fork, handed to the forward
 * pass in kv_view.rs. A state holds no history, so it cannot go back:
 * kv_rm to a position other than 0 or the current one, and kv_shift, are
 * FX_E_UNSUPPORTED, unless rollback > 0: then each sequence also keeps
 * the states after its last rollback tokens (a ring the forward pass
 * fills, kv_view.rs_ring), and kv_rm may go back that far (not before the
 * position the sequence was emptied, forked or reused at): what
 * speculative decoding's rejected drafts need (llama.cpp keeps extra
 * recurrent sequences for its drafts instead).
 * Prefix caching (every > 0, and an inner backing with a prefix cache or
 * no K/V layers: kv_rows false): when a commit leaves a sequence at a
 * multiple of `every`, its state is kept as a snapshot keyed by a hash of
 * all its tokens (n_snap slots, least recently used replaced); kv_reuse
 * takes the longest snapshot prefix the inner cache also holds (vLLM and
 * SGLang keep hybrid states at block boundaries the same way). The engine
 * ends ubatches at those multiples (kv_snap_every). Takes inner
 * (destroyed with the result, or here on failure). Errors: FX_E_NOMEM. */
int kv_recurrent_wrap(struct kv_backing *inner, int32_t n_seq, int64_t rs_floats, int32_t every,
		      int32_t n_snap, bool kv_rows, int32_t rollback, struct kv_backing **out);

/* ---- the operations (thin wrappers, one per kv_ops entry) ------------- */

/* A new batch: promises of earlier kv_admit calls are forgotten. */
static inline void kv_begin(struct kv_backing *b)
{
	b->ops->begin(b);
}

/* Whether seq can take n more rows during this batch in ubatches of at
 * most n_ubatch rows, given what this batch's earlier kv_admit calls
 * promised; if so, promises them and makes any table room they need
 * (so the reserves that follow cannot fail). Changes no sequence.
 * Errors: FX_E_KV_FULL (no room: queue or preempt), FX_E_NOMEM. */
static inline int kv_admit(struct kv_backing *b, int32_t seq, int32_t n, int32_t n_ubatch)
{
	return b->ops->admit(b, seq, n, n_ubatch);
}

/* Make rows [pos, pos + n) of seq writable (allocate blocks, copy a shared
 * block about to be written). All or nothing; FX_E_KV_FULL / FX_E_NOMEM
 * only without a covering kv_admit. Does not advance the position. */
static inline int kv_reserve(struct kv_backing *b, int32_t seq, int32_t n)
{
	return b->ops->reserve(b, seq, n);
}

/* tok[0..n) were written at rows [pos, pos + n) (reserved): they are now
 * seq's, and its position is pos + n. */
static inline void kv_commit(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	b->ops->commit(b, seq, tok, n);
}

/* Remove seq's tokens from position pos on (llama.cpp's
 * llama_memory_seq_rm; speculative decoding's roll-back). pos >= the
 * position changes nothing. Errors: FX_E_INVALID when the rows a window
 * needs before pos were already released (the sequence is unchanged; the
 * paged backing keeps 32 rows beyond each window, so a roll-back of up to
 * 32 tokens always succeeds). */
static inline int kv_rm(struct kv_backing *b, int32_t seq, int32_t pos)
{
	return b->ops->rm(b, seq, pos);
}

/* Context shift (llama.cpp's llama_memory_seq_rm + llama_memory_seq_add
 * with a K-shift): seq's rows [p0, pos) move to [p0 + delta, pos + delta),
 * each moved K row re-rotated through rr, and the tokens in [p0 + delta,
 * p0) are gone (positions stay dense: a sequence's tokens are always at
 * [0, pos), so the removal is part of the move). Preconditions (the engine
 * checks): delta < 0, p0 + delta >= 0, p0 < pos. Blocks that were written
 * leave the prefix cache, and rows from p0 + delta on are never keyed
 * again until a kv_rm to p0 + delta or before (their K/V saw the removed
 * tokens: a fresh prompt of the same tokens computes other values).
 * All or nothing. Errors: FX_E_UNSUPPORTED (paged: the rows a sliding
 * window needs after the move, and the 32 kept for roll-back, were already
 * released), FX_E_KV_FULL (paged: no free block for a shared block
 * written or a released one refilled),
 * FX_E_NOMEM (paged: scratch for the old block table). */
static inline int kv_shift(struct kv_backing *b, int32_t seq, int32_t p0, int32_t delta,
			   const struct kv_rerot *rr)
{
	return b->ops->shift(b, seq, p0, delta, rr);
}

/* dst (empty) gets src's tokens: shared blocks (paged) or copied rows.
 * Errors: FX_E_NOMEM, FX_E_INVALID (dst not empty); dst stays empty. */
static inline int kv_fork(struct kv_backing *b, int32_t src, int32_t dst)
{
	return b->ops->fork(b, src, dst);
}

/* Empty seq, releasing what it holds (cached blocks stay cached). */
static inline void kv_clear(struct kv_backing *b, int32_t seq)
{
	b->ops->clear(b, seq);
}

/* seq's position: the number of tokens it holds. */
static inline int32_t kv_pos(const struct kv_backing *b, int32_t seq)
{
	return b->ops->pos(b, seq);
}

/* How the forward pass reaches seq's rows (valid until the next
 * kv_reserve, kv_rm or kv_clear of seq). */
static inline struct kv_view kv_seq_view(struct kv_backing *b, int32_t seq)
{
	return b->ops->view(b, seq);
}

/* For an empty seq whose first tokens will be tok[0..n): take the longest
 * cached prefix of at most max_rows rows that every layer can use, as if
 * it had been computed and committed. Returns its length (0: none, or a
 * backing without a prefix cache). */
static inline int32_t kv_reuse(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			       int32_t max_rows)
{
	return b->ops->reuse(b, seq, tok, n, max_rows);
}

/* How many of its latest positions any sequence can always go back
 * (kv_rm): n_ctx unless rows or states are released (the paged layout's
 * sliding-window layers keep 32 rows past the window; a recurrent state
 * keeps its roll-back ring, or nothing). */
static inline int32_t kv_reach(const struct kv_backing *b)
{
	return b->ops->reach ? b->ops->reach(b) : b->n_ctx;
}

/* Positions at which the backing keeps state snapshots (the engine ends a
 * ubatch there, so the state exists), or 0. */
static inline int32_t kv_snap_every(const struct kv_backing *b)
{
	return b->ops->snap_every ? b->ops->snap_every(b) : 0;
}

/* Hand the prefix-cache events recorded since the last call to fn, oldest
 * first (fx_context_kv_events); returns how many. Backings without a
 * prefix cache, or created without events, have none. */
static inline int64_t kv_events(struct kv_backing *b, fx_kv_event_fn fn, void *arg)
{
	return b->ops->events ? b->ops->events(b, fn, arg) : 0;
}

/* The hashes the events announce as held now: up to cap into out; returns
 * how many there are (fx_context_kv_held). */
static inline int64_t kv_held(const struct kv_backing *b, uint64_t *out, int64_t cap)
{
	return b->ops->held ? b->ops->held(b, out, cap) : 0;
}

/* The first position from which seq still holds every layer's rows: 0
 * unless a sliding window released older ones (paged layout), whose
 * kv_k_row / kv_v_row must then not be read (fx_seq_state_save). */
static inline int32_t kv_held_from(const struct kv_backing *b, int32_t seq)
{
	return b->ops->held_from ? b->ops->held_from(b, seq) : 0;
}

/* seq's rows (and recurrent state) were written from outside the forward
 * pass (fx_seq_state_load): no roll-back history exists before its
 * current position, so kv_rm may not go back there (the recurrent
 * backing restarts its ring; the others keep rows, not history). */
static inline void kv_rebase(struct kv_backing *b, int32_t seq)
{
	if (b->ops->rebase)
		b->ops->rebase(b, seq);
}

static inline void kv_get_stats(const struct kv_backing *b, struct kv_stats *st)
{
	b->ops->stats(b, st);
}

static inline void kv_destroy(struct kv_backing *b)
{
	if (b)
		b->ops->destroy(b);
}

#endif
