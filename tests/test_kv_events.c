/* Prefix-cache events (kv_events, fx_context_kv_events): a subscriber that
 * sees only the events rebuilds exactly the set of blocks the announced
 * pool holds under a key, after every operation of a random workload on a
 * small paged backing (shared prompts reused, decodes, roll-backs, forks,
 * context shifts, clears, and evictions from a pool too small for it all),
 * with full-attention and sliding-window layers. Every STORED hash is
 * FNV-1a 64 of its parent's hash and its tokens (what ferrox.h promises),
 * its parent was announced before it, and a backing created without events
 * records none. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"
#include "kv/backing.h"
#include "kv/kv.h"
#include "quant/quant.h"

enum { BS = 4, N_SEQ = 3, N_CTX = 96, MAX_TOK = 40, MAX_MIRROR = 4096, ROUNDS = 4000 };

/* What a subscriber keeps: the hashes announced and not retracted. */
struct mirror {
	uint64_t held[MAX_MIRROR];
	int n;
	uint64_t ever[MAX_MIRROR * 4]; /* every hash ever announced */
	int n_ever;
	long bad_hash, bad_parent, bad_removed, stored, removed;
};

static uint64_t fnv_block(uint64_t parent, const int32_t *tok, int32_t n)
{
	uint64_t h = 1469598103934665603ull ^ parent;
	for (int32_t i = 0; i < n; i++)
		for (int k = 0; k < 4; k++) {
			h ^= ((uint32_t)tok[i] >> (8 * k)) & 0xff;
			h *= 1099511628211ull;
		}
	return h ? h : 1;
}

static int find(const uint64_t *a, int n, uint64_t h)
{
	for (int i = 0; i < n; i++)
		if (a[i] == h)
			return i;
	return -1;
}

static void on_event(void *arg, const struct fx_kv_event *e)
{
	struct mirror *m = arg;
	switch (e->kind) {
	case FX_KV_EVENT_STORED:
		m->stored++;
		m->bad_hash += e->n_tokens != BS || fnv_block(e->parent, e->tokens, e->n_tokens) != e->hash;
		m->bad_parent += e->parent && find(m->ever, m->n_ever, e->parent) < 0;
		if (m->n < MAX_MIRROR && find(m->held, m->n, e->hash) < 0)
			m->held[m->n++] = e->hash;
		if (m->n_ever < MAX_MIRROR * 4 && find(m->ever, m->n_ever, e->hash) < 0)
			m->ever[m->n_ever++] = e->hash;
		break;
	case FX_KV_EVENT_REMOVED: {
		m->removed++;
		int i = find(m->held, m->n, e->hash);
		if (i < 0)
			m->bad_removed++;
		else
			m->held[i] = m->held[--m->n];
		break;
	}
	case FX_KV_EVENT_CLEARED:
		m->n = 0;
		break;
	}
}

/* The mirror equals the backing's own view (kv_held: the announced pool's
 * keyed blocks). */
static bool same_set(const struct kv_backing *b, const struct mirror *m)
{
	static uint64_t own[MAX_MIRROR];
	int64_t n = kv_held(b, own, MAX_MIRROR);
	if (n != m->n || n > MAX_MIRROR)
		return false;
	for (int64_t i = 0; i < n; i++)
		if (find(m->held, m->n, own[i]) < 0)
			return false;
	return true;
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void no_rerot(void *ctx, int il, void *k_row)
{
	(void)ctx, (void)il, (void)k_row;
}

/* Append n tokens to seq in ubatches of at most 6 rows; false (seq left
 * where it was) when the pool is full. */
static bool append(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	kv_begin(b);
	if (kv_admit(b, seq, n, 6))
		return false;
	for (int32_t i = 0; i < n; i += 6) {
		int32_t k = n - i < 6 ? n - i : 6;
		CHECK(kv_reserve(b, seq, k) == 0);
		kv_commit(b, seq, tok + i, k);
	}
	return true;
}

static void run(const int32_t *window, int n_layer, uint64_t seed)
{
	struct kv_geom g = { .n_layer = n_layer, .k_width = 32, .v_width = 32, .k_type = FX_TYPE_F16,
			     .v_type = FX_TYPE_F16, .window = window };
	struct kv_backing *b = NULL;
	CHECK(kv_paged_create(&g, N_SEQ, N_CTX, BS, 6, true, &b) == 0);
	if (!b)
		return;
	static struct mirror m;
	memset(&m, 0, sizeof(m));
	static const int32_t shared[3][12] = { { 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3 },
					       { 7, 7, 7, 7, 1, 1, 1, 1, 2, 2, 2, 2 },
					       { 1, 2, 3, 4, 9, 9, 9, 9, 8, 8, 8, 8 } };
	int32_t tok[MAX_TOK];
	long mismatches = 0, ops = 0;
	for (int r = 0; r < ROUNDS; r++) {
		int32_t s = (int32_t)(rng_next(&seed) % N_SEQ), pos = kv_pos(b, s);
		unsigned op = (unsigned)(rng_next(&seed) % 8);
		if (pos == 0) {
			/* a prompt: a shared head, then a tail from a small alphabet */
			int32_t n = 4 + (int32_t)(rng_next(&seed) % 9), tail = (int32_t)(rng_next(&seed) % 12);
			memcpy(tok, shared[rng_next(&seed) % 3], (size_t)n * sizeof(*tok));
			for (int32_t i = 0; i < tail; i++)
				tok[n + i] = 1 + (int32_t)(rng_next(&seed) % 3);
			n += tail;
			int32_t got = kv_reuse(b, s, tok, n, n - 1);
			if (!append(b, s, tok + got, n - got))
				kv_clear(b, s);
		} else if (op < 3) { /* decode a few tokens */
			int32_t n = 1 + (int32_t)(rng_next(&seed) % 5);
			for (int32_t i = 0; i < n; i++)
				tok[i] = 1 + (int32_t)(rng_next(&seed) % 4);
			if (pos + n > N_CTX / 2 || !append(b, s, tok, n))
				kv_clear(b, s);
		} else if (op < 5) { /* roll back up to 6 tokens */
			kv_rm(b, s, pos - 1 - (int32_t)(rng_next(&seed) % 6));
		} else if (op == 5) {
			int32_t d = (s + 1) % N_SEQ;
			if (!kv_pos(b, d))
				kv_fork(b, s, d);
		} else if (op == 6 && pos > 8) { /* context shift: drop 4 tokens after the first 2 */
			struct kv_rerot rr = { .fn = no_rerot };
			kv_shift(b, s, 6, -4, &rr);
		} else {
			kv_clear(b, s);
		}
		kv_events(b, on_event, &m);
		ops++;
		mismatches += !same_set(b, &m);
	}
	printf("layers %d (window %d): %ld ops, %ld stored, %ld removed, %d held at the end, "
	       "%ld set mismatches\n", n_layer, (int)window[n_layer - 1], ops, m.stored, m.removed,
	       m.n, mismatches);
	CHECKF(mismatches == 0, "the events' set differed from the pool's after %ld of %ld ops",
	       mismatches, ops);
	CHECKF(m.bad_hash == 0, "%ld STORED hashes are not FNV-1a of parent and tokens", m.bad_hash);
	CHECKF(m.bad_parent == 0, "%ld STORED parents were never announced", m.bad_parent);
	CHECKF(m.bad_removed == 0, "%ld REMOVED hashes were not held", m.bad_removed);
	CHECKF(m.stored > 100 && m.removed > 50, "the workload stored %ld and removed %ld: too "
	       "little to test", m.stored, m.removed);
	kv_destroy(b);
}

/* A paged backing of one full-attention layer (NULL on failure, counted). */
static struct kv_backing *one_layer(int32_t n_seq, int32_t n_ctx, bool events)
{
	static const int32_t window[1] = { 0 };
	struct kv_geom g = { .n_layer = 1, .k_width = 32, .v_width = 32, .k_type = FX_TYPE_F16,
			     .v_type = FX_TYPE_F16, .window = window };
	struct kv_backing *b = NULL;
	CHECK(kv_paged_create(&g, n_seq, n_ctx, BS, 8, events, &b) == 0);
	return b;
}

/* A block shared when a sequence rolls back into it, and private by the
 * time the sequence writes there, is rewritten in place: its key must go
 * then (it went only at the roll-back, when the block was private there,
 * and a later prompt reused the rewritten rows under the old tokens). */
static void check_rewrite(void)
{
	struct kv_backing *b = one_layer(3, 64, true);
	if (!b)
		return;
	int32_t a[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 }, other[2] = { 50, 51 };
	CHECK(append(b, 0, a, 8));       /* two full blocks, keyed */
	CHECK(kv_fork(b, 0, 1) == 0);    /* shared by 0 and 1 */
	CHECK(kv_rm(b, 1, 6) == 0);      /* 1 rolls back into block 1, still shared */
	kv_clear(b, 0);                  /* now 1 holds block 1 alone */
	CHECK(append(b, 1, other, 2));   /* rows 6, 7 rewritten in place */
	int32_t got = kv_reuse(b, 2, a, 9, 8);
	CHECKF(got == 4, "a prompt of the old tokens reused %d rows; block 1 was rewritten, so 4",
	       (int)got);
	struct mirror *m = &(struct mirror){ 0 };
	kv_events(b, on_event, m);
	CHECKF(m->removed == 1 && m->stored == 3, "events: %ld stored (want 3: two blocks, then "
	       "the rewritten one), %ld removed (want 1)", m->stored, m->removed);
	kv_destroy(b);
}

/* Without events nothing is recorded, whatever happens. */
static void check_off(void)
{
	struct kv_backing *b = one_layer(1, 32, false);
	if (!b)
		return;
	int32_t tok[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	CHECK(append(b, 0, tok, 8));
	struct mirror *m = &(struct mirror){ 0 };
	CHECK(kv_events(b, on_event, m) == 0 && m->stored == 0);
	kv_destroy(b);
}

int main(void)
{
	static const int32_t full[2] = { 0, 0 }, mixed[3] = { 0, 10, 10 }, swa[2] = { 10, 10 };
	run(full, 2, 0x9e3779b97f4a7c15ull);
	run(mixed, 3, 0x2545f4914f6cdd1dull);
	run(swa, 2, 0x1234567887654321ull);
	check_rewrite();
	check_off();
	return check_exit();
}
