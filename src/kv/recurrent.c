/* The recurrent backing: a K/V backing for a hybrid model's attention
 * layers (inner, contiguous or paged, which keeps every sequence's
 * position) plus one state slot per sequence for its recurrent layers.
 * The slot is what llama.cpp's llama_memory_recurrent keeps per sequence
 * (conv windows and SSM states): the forward pass updates it in place, one
 * token after another (model/recur.c), so after kv_commit it is the state
 * at the sequence's position. See backing.h for the contract. */
#include <string.h>

#include "core/alloc.h"
#include "ferrox.h"
#include "kv/backing.h"

/* A kept state: the sequence's state after its first pos tokens, whose
 * rolling hash is key (0: the slot is free). */
struct rec_snap {
	uint64_t key, last_use;
	int32_t pos;
	float *state;    /* [floats] */
};

struct rec_backing {
	struct kv_backing base;
	struct kv_backing *inner;
	int64_t floats;  /* per sequence */
	float *state;    /* [n_seq][floats] */
	uint64_t *hash;  /* [n_seq] rolling hash of each sequence's tokens */
	int32_t every;   /* snapshot positions (multiples of it), 0: none */
	bool kv_rows;    /* inner keeps K/V rows (else positions only) */
	struct rec_snap *snap;
	int32_t n_snap;
	uint64_t clock;
	int64_t hit_tokens; /* prompt tokens served from snapshots (kv_stats) */
	/* Roll-back (ring > 0): per sequence the states after its last ring
	 * positions, slot (p % ring) for the state after p tokens, and their
	 * hashes; valid for positions after ring_lo[seq]. */
	int32_t ring;
	float *ring_state;   /* [n_seq][ring][floats] */
	uint64_t *ring_hash; /* [n_seq][ring] */
	int32_t *ring_lo;    /* [n_seq] */
};

/* The hash of a sequence's tokens, one token at a time (FNV-1a over the
 * id's bytes, then a final mix): the same prefix gives the same value in
 * kv_commit and kv_reuse. */
enum { REC_SEED = 0x6a09e667u };

static uint64_t rec_mix(uint64_t h, int32_t tok)
{
	uint32_t t = (uint32_t)tok;
	for (int i = 0; i < 4; i++) {
		h ^= (t >> (8 * i)) & 0xffu;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t rec_key(uint64_t h, int32_t pos)
{
	h ^= (uint64_t)pos * 0x9e3779b97f4a7c15ull;
	h ^= h >> 31;
	return h ? h : 1;
}

#define RB(b) ((struct rec_backing *)(b))

static float *slot(const struct rec_backing *r, int32_t seq)
{
	return r->state + (size_t)seq * (size_t)r->floats;
}

static void rb_begin(struct kv_backing *b)
{
	kv_begin(RB(b)->inner);
}

static int rb_admit(struct kv_backing *b, int32_t seq, int32_t n, int32_t n_ubatch)
{
	return kv_admit(RB(b)->inner, seq, n, n_ubatch);
}

static int rb_reserve(struct kv_backing *b, int32_t seq, int32_t n)
{
	return kv_reserve(RB(b)->inner, seq, n);
}

/* Keep the state of seq (at pos) in the least recently used slot, unless
 * that prefix is kept already. */
static void snap_store(struct rec_backing *r, int32_t seq, int32_t pos)
{
	uint64_t key = rec_key(r->hash[seq], pos);
	struct rec_snap *victim = &r->snap[0];
	for (int32_t i = 0; i < r->n_snap; i++) {
		struct rec_snap *sp = &r->snap[i];
		if (sp->key == key && sp->pos == pos) {
			sp->last_use = ++r->clock;
			return;
		}
		if (sp->last_use < victim->last_use)
			victim = sp;
	}
	memcpy(victim->state, slot(r, seq), (size_t)r->floats * sizeof(float));
	victim->key = key;
	victim->pos = pos;
	victim->last_use = ++r->clock;
}

/* The forward pass already moved the state to pos + n; the tokens join
 * the sequence's hash, and at a snapshot position its state is kept. */
static void rb_commit(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	struct rec_backing *r = RB(b);
	int32_t pos = kv_pos(r->inner, seq) + n;
	kv_commit(r->inner, seq, tok, n);
	for (int32_t i = 0; i < n; i++) {
		r->hash[seq] = rec_mix(r->hash[seq], tok[i]);
		if (r->ring) /* the forward pass kept the state; its hash joins it */
			r->ring_hash[(size_t)seq * r->ring + (size_t)((pos - n + i + 1) % r->ring)] = r->hash[seq];
	}
	if (r->every > 0 && pos % r->every == 0)
		snap_store(r, seq, pos);
}

/* The sequence's roll-back ring starts at its current position. */
static void ring_restart(struct rec_backing *r, int32_t seq)
{
	if (r->ring)
		r->ring_lo[seq] = kv_pos(r->inner, seq);
}

/* Back to 0 (an empty sequence: a zero state), to a position the ring
 * still holds, or nowhere; anything else needs a state no longer kept. */
static int rb_rm(struct kv_backing *b, int32_t seq, int32_t pos)
{
	struct rec_backing *r = RB(b);
	int32_t cur = kv_pos(r->inner, seq);
	if (pos >= cur)
		return FX_OK;
	if (pos > 0 && r->ring && pos > r->ring_lo[seq] && cur - pos < r->ring) {
		int rc = kv_rm(r->inner, seq, pos);
		if (!rc) {
			size_t k = (size_t)seq * r->ring + (size_t)(pos % r->ring);
			memcpy(slot(r, seq), r->ring_state + k * (size_t)r->floats, (size_t)r->floats * sizeof(float));
			r->hash[seq] = r->ring_hash[k];
		}
		return rc;
	}
	if (pos > 0)
		return FX_E_UNSUPPORTED;
	int rc = kv_rm(r->inner, seq, 0);
	if (!rc) {
		memset(slot(r, seq), 0, (size_t)r->floats * sizeof(float));
		r->hash[seq] = REC_SEED;
		ring_restart(r, seq);
	}
	return rc;
}

static int rb_shift(struct kv_backing *b, int32_t seq, int32_t p0, int32_t delta,
		    const struct kv_rerot *rr)
{
	(void)b, (void)seq, (void)p0, (void)delta, (void)rr;
	return FX_E_UNSUPPORTED; /* a state cannot forget tokens it has seen */
}

static int rb_fork(struct kv_backing *b, int32_t src, int32_t dst)
{
	struct rec_backing *r = RB(b);
	int rc = kv_fork(r->inner, src, dst);
	if (!rc) {
		memcpy(slot(r, dst), slot(r, src), (size_t)r->floats * sizeof(float));
		r->hash[dst] = r->hash[src];
		ring_restart(r, dst);
	}
	return rc;
}

static void rb_clear(struct kv_backing *b, int32_t seq)
{
	struct rec_backing *r = RB(b);
	kv_clear(r->inner, seq);
	memset(slot(r, seq), 0, (size_t)r->floats * sizeof(float));
	r->hash[seq] = REC_SEED;
	ring_restart(r, seq);
}

static int32_t rb_pos(const struct kv_backing *b, int32_t seq)
{
	return kv_pos(RB(b)->inner, seq);
}

static struct kv_view rb_view(struct kv_backing *b, int32_t seq)
{
	struct rec_backing *r = RB(b);
	struct kv_view v = kv_seq_view(r->inner, seq);
	v.rs = slot(r, seq);
	if (r->ring) {
		v.rs_ring = r->ring_state + (size_t)seq * r->ring * (size_t)r->floats;
		v.rs_ring_n = r->ring;
		v.rs_floats = r->floats;
	}
	return v;
}

/* The kept snapshot of tok's first pos tokens (hash h of them), or NULL. */
static struct rec_snap *snap_find(struct rec_backing *r, uint64_t h, int32_t pos)
{
	uint64_t key = rec_key(h, pos);
	for (int32_t i = 0; i < r->n_snap; i++)
		if (r->snap[i].key == key && r->snap[i].pos == pos)
			return &r->snap[i];
	return NULL;
}

/* The longest prefix of tok (at most max_rows) that has a snapshot and,
 * when inner keeps K/V, whose rows the inner prefix cache also holds:
 * the state is copied in and the inner backing takes the rows. */
static int32_t rb_reuse(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			int32_t max_rows)
{
	struct rec_backing *r = RB(b);
	if (r->every <= 0 || kv_pos(r->inner, seq) || max_rows > n)
		return 0;
	/* the hash at each multiple of every, shortest first; only the longest
	 * MAX_TRY are tried */
	enum { MAX_TRY = 64 };
	uint64_t hs[MAX_TRY];
	int32_t ps[MAX_TRY], k = 0, count = max_rows / r->every;
	int32_t first = count > MAX_TRY ? count - MAX_TRY + 1 : 1;
	uint64_t h = REC_SEED;
	for (int32_t i = 0; i < max_rows; i++) {
		h = rec_mix(h, tok[i]);
		int32_t j = (i + 1) / r->every;
		if ((i + 1) % r->every == 0 && j >= first) {
			hs[k] = h;
			ps[k++] = i + 1;
		}
	}
	while (k-- > 0) {
		struct rec_snap *sp = snap_find(r, hs[k], ps[k]);
		if (!sp)
			continue;
		int32_t p = ps[k];
		if (r->kv_rows) {
			int32_t got = kv_reuse(r->inner, seq, tok, n, p);
			if (got != p) { /* its blocks were evicted: give back what came */
				if (got > 0)
					kv_clear(r->inner, seq);
				continue;
			}
		} else if (kv_reserve(r->inner, seq, p)) {
			continue;
		} else {
			kv_commit(r->inner, seq, tok, p);
		}
		memcpy(slot(r, seq), sp->state, (size_t)r->floats * sizeof(float));
		r->hash[seq] = hs[k];
		sp->last_use = ++r->clock;
		r->hit_tokens += p;
		ring_restart(r, seq);
		return p;
	}
	return 0;
}

static int32_t rb_snap_every(const struct kv_backing *b)
{
	return RB(b)->every;
}

static void rb_stats(const struct kv_backing *b, struct kv_stats *st)
{
	const struct rec_backing *r = RB(b);
	kv_get_stats(r->inner, st);
	st->prefix_hit_tokens = r->hit_tokens; /* the inner cache's include abandoned tries */
	st->bytes += ((uint64_t)r->base.n_seq * (1 + (uint64_t)r->ring) + (uint64_t)r->n_snap) *
		     (uint64_t)r->floats * sizeof(float);
}

static void rb_destroy(struct kv_backing *b)
{
	struct rec_backing *r = RB(b);
	kv_destroy(r->inner);
	fx_free(r->state);
	fx_free(r->hash);
	fx_free(r->ring_state);
	fx_free(r->ring_hash);
	fx_free(r->ring_lo);
	for (int32_t i = 0; r->snap && i < r->n_snap; i++)
		fx_free(r->snap[i].state);
	fx_free(r->snap);
	fx_free(r);
}

/* The ring's reach, and never past what the inner backing keeps. */
static int32_t rb_reach(const struct kv_backing *b)
{
	const struct rec_backing *r = RB(b);
	int32_t in = kv_reach(r->inner), own = r->ring > 0 ? r->ring - 1 : 0;
	return own < in ? own : in;
}

static int32_t rb_held_from(const struct kv_backing *b, int32_t seq)
{
	return kv_held_from(RB(b)->inner, seq);
}

static void rb_rebase(struct kv_backing *b, int32_t seq)
{
	ring_restart(RB(b), seq);
}

static const struct kv_ops rec_ops = {
	.begin = rb_begin, .admit = rb_admit, .reserve = rb_reserve, .commit = rb_commit,
	.rm = rb_rm, .shift = rb_shift, .fork = rb_fork, .clear = rb_clear, .pos = rb_pos,
	.view = rb_view, .reuse = rb_reuse, .stats = rb_stats, .destroy = rb_destroy,
	.snap_every = rb_snap_every, .reach = rb_reach, .held_from = rb_held_from,
	.rebase = rb_rebase,
};

int kv_recurrent_wrap(struct kv_backing *inner, int32_t n_seq, int64_t rs_floats, int32_t every,
		      int32_t n_snap, bool kv_rows, int32_t rollback, struct kv_backing **out)
{
	*out = NULL;
	struct rec_backing *r = fx_calloc(1, sizeof(*r));
	if (!r) {
		kv_destroy(inner);
		return FX_E_NOMEM;
	}
	*r = (struct rec_backing){ .base = { .ops = &rec_ops, .n_seq = inner->n_seq,
					     .n_ctx = inner->n_ctx },
				   .inner = inner, .floats = rs_floats, .every = every,
				   .kv_rows = kv_rows, .n_snap = every > 0 ? n_snap : 0 };
	r->state = n_seq > 0 && rs_floats > 0
			   ? fx_calloc((size_t)n_seq * (size_t)rs_floats, sizeof(float)) : NULL;
	r->hash = fx_calloc((size_t)(n_seq > 0 ? n_seq : 1), sizeof(*r->hash));
	r->snap = fx_calloc((size_t)(r->n_snap > 0 ? r->n_snap : 1), sizeof(*r->snap));
	bool ok = r->state && r->hash && r->snap;
	if (ok && rollback > 0 && n_seq > 0 && rs_floats > 0) {
		/* the states after the last rollback tokens, and the one before */
		r->ring = rollback + 1;
		r->ring_state = fx_calloc((size_t)n_seq * (size_t)r->ring * (size_t)rs_floats, sizeof(float));
		r->ring_hash = fx_calloc((size_t)n_seq * (size_t)r->ring, sizeof(*r->ring_hash));
		r->ring_lo = fx_calloc((size_t)n_seq, sizeof(*r->ring_lo));
		ok = r->ring_state && r->ring_hash && r->ring_lo;
	}
	for (int32_t i = 0; ok && i < r->n_snap; i++)
		ok = (r->snap[i].state = fx_malloc_array((size_t)rs_floats, sizeof(float))) != NULL;
	if (!ok) {
		rb_destroy(&r->base);
		return FX_E_NOMEM;
	}
	for (int32_t i = 0; i < n_seq; i++)
		r->hash[i] = REC_SEED;
	*out = &r->base;
	return FX_OK;
}
