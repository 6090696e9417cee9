/* fx_matcher: a sequence's position in a byte-level grammar (grammar.h).
 *
 * A parse state is a set of stacks, as in llama.cpp's llama_grammar
 * (llama-grammar.cpp), but stored so that states can be compared in O(1)
 * and their transitions memoized:
 * - a stack is a chain of interned continuation nodes (pos, parent): pos
 *   indexes the grammar's elems, parent is the node to return to when
 *   pos's alternative ends (-1: the start rule). Equal stacks are one node
 *   id, and stacks share their tails.
 * - a state is an interned sorted set of top nodes (each at a terminal)
 *   plus "accepting" (some stack has emptied: the input so far is a
 *   sentence). Equal states are one set id; set 0 is the dead state.
 * - step(set, byte class) is memoized in trans[], so feeding a token is a
 *   table lookup per byte once its states have been seen, and the trie
 *   walk behind a mask is mostly lookups.
 * - masks are cached per set id: a state that recurs (inside a JSON
 *   string at the same depth, between array items) costs one copy.
 * Expansion never pushes a return to the end of an alternative (the tail
 * call), so right-recursive repetitions run in bounded depth. The tables
 * only grow; past MATCHER_MAX_NODES they are rebuilt from the current
 * state (compact).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/status.h"
#include "grammar/grammar.h"

#define MATCHER_MAX_NODES (1 << 22)
#define MATCHER_MAX_SETS (1 << 20)
#define MASK_CACHE 16

struct mask_entry {
	int32_t set;     /* -1: empty slot */
	uint64_t used;   /* clock of the last use (LRU) */
	int32_t n_allowed;
	uint64_t *bits;  /* [n_words] allowed tokens */
};

struct fx_matcher {
	const struct fx_grammar *g; /* borrowed */
	const struct fx_grammar_vocab *v; /* borrowed */
	/* continuation nodes */
	int32_t *node_pos, *node_parent;
	uint32_t *node_mark;        /* expansion visit stamps */
	int32_t n_nodes, cap_nodes;
	int32_t *nh;                /* [nh_cap] open-addressing index of nodes by (pos, parent) */
	uint32_t nh_cap;
	uint32_t stamp;
	/* states */
	int32_t *set_off, *set_len;
	uint8_t *set_acc;
	int32_t n_sets, cap_sets;
	int32_t *pool;              /* set members */
	size_t n_pool, cap_pool;
	int32_t *sh;                /* [sh_cap] index of sets by content */
	uint32_t sh_cap;
	int32_t *trans;             /* [cap_sets * n_cls] next set, -1 unknown */
	int32_t start, cur;
	bool broken;                /* a rebuild ran out of memory: the state is lost,
				     * every call fails until fx_matcher_reset works */
	/* scratch */
	int32_t *work;              /* pairs (pos, parent) */
	int32_t n_work, cap_work;
	int32_t *tops;
	int32_t n_tops, cap_tops;
	int32_t *dfs;               /* [max_depth + 1] trie walk states */
	/* masks */
	int32_t n_words;
	struct mask_entry cache[MASK_CACHE];
	uint64_t clock;
};

static uint32_t hash2(int32_t a, int32_t b)
{
	uint64_t h = (uint64_t)(uint32_t)a * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)b * 0xc2b2ae3d27d4eb4full;
	return (uint32_t)(h ^ (h >> 29));
}

static bool grow_i32(int32_t **p, int32_t *cap, int32_t need)
{
	if (need <= *cap)
		return true;
	int32_t c = *cap ? *cap : 64;
	while (c < need)
		c *= 2;
	int32_t *q = fx_realloc_array(*p, (size_t)c, sizeof(int32_t));
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

/* ---- nodes ---- */

static bool nh_rehash(struct fx_matcher *m, uint32_t cap)
{
	int32_t *nh = fx_malloc_array(cap, sizeof(int32_t));
	if (!nh)
		return false;
	memset(nh, 0xff, (size_t)cap * sizeof(int32_t));
	for (int32_t i = 0; i < m->n_nodes; i++) {
		uint32_t h = hash2(m->node_pos[i], m->node_parent[i]) & (cap - 1);
		while (nh[h] >= 0)
			h = (h + 1) & (cap - 1);
		nh[h] = i;
	}
	fx_free(m->nh);
	m->nh = nh;
	m->nh_cap = cap;
	return true;
}

/* The node (pos, parent), created if new; -1 when out of memory. */
static int32_t node_intern(struct fx_matcher *m, int32_t pos, int32_t parent)
{
	if ((uint32_t)m->n_nodes * 2 >= m->nh_cap && !nh_rehash(m, m->nh_cap ? m->nh_cap * 2 : 1024))
		return -1;
	uint32_t h = hash2(pos, parent) & (m->nh_cap - 1);
	for (; m->nh[h] >= 0; h = (h + 1) & (m->nh_cap - 1)) {
		int32_t i = m->nh[h];
		if (m->node_pos[i] == pos && m->node_parent[i] == parent)
			return i;
	}
	if (m->n_nodes == m->cap_nodes) {
		int32_t cap = m->cap_nodes ? m->cap_nodes * 2 : 1024;
		int32_t *a = fx_realloc_array(m->node_pos, (size_t)cap, sizeof(int32_t));
		if (a)
			m->node_pos = a;
		int32_t *b = fx_realloc_array(m->node_parent, (size_t)cap, sizeof(int32_t));
		if (b)
			m->node_parent = b;
		uint32_t *c = fx_realloc_array(m->node_mark, (size_t)cap, sizeof(uint32_t));
		if (c)
			m->node_mark = c;
		if (!a || !b || !c)
			return -1;
		memset(m->node_mark + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof(uint32_t));
		m->cap_nodes = cap;
	}
	int32_t id = m->n_nodes++;
	m->node_pos[id] = pos;
	m->node_parent[id] = parent;
	m->node_mark[id] = 0;
	m->nh[h] = id;
	return id;
}

/* ---- sets ---- */

static uint32_t set_hash(const int32_t *t, int32_t n, bool acc)
{
	uint32_t h = acc ? 0x85ebca6bu : 0x27d4eb2fu;
	for (int32_t i = 0; i < n; i++)
		h = hash2((int32_t)h, t[i]);
	return h;
}

static bool sh_rehash(struct fx_matcher *m, uint32_t cap)
{
	int32_t *sh = fx_malloc_array(cap, sizeof(int32_t));
	if (!sh)
		return false;
	memset(sh, 0xff, (size_t)cap * sizeof(int32_t));
	for (int32_t i = 0; i < m->n_sets; i++) {
		uint32_t h = set_hash(m->pool + m->set_off[i], m->set_len[i], m->set_acc[i]) & (cap - 1);
		while (sh[h] >= 0)
			h = (h + 1) & (cap - 1);
		sh[h] = i;
	}
	fx_free(m->sh);
	m->sh = sh;
	m->sh_cap = cap;
	return true;
}

static bool sets_grow(struct fx_matcher *m)
{
	int32_t cap = m->cap_sets ? m->cap_sets * 2 : 256;
	int32_t *a = fx_realloc_array(m->set_off, (size_t)cap, sizeof(int32_t));
	if (a)
		m->set_off = a;
	int32_t *b = fx_realloc_array(m->set_len, (size_t)cap, sizeof(int32_t));
	if (b)
		m->set_len = b;
	uint8_t *c = fx_realloc_array(m->set_acc, (size_t)cap, 1);
	if (c)
		m->set_acc = c;
	int32_t *t = fx_realloc_array(m->trans, (size_t)cap * (size_t)m->g->n_cls, sizeof(int32_t));
	if (t)
		m->trans = t;
	if (!a || !b || !c || !t)
		return false;
	memset(m->trans + (size_t)m->cap_sets * (size_t)m->g->n_cls, 0xff,
	       (size_t)(cap - m->cap_sets) * (size_t)m->g->n_cls * sizeof(int32_t));
	m->cap_sets = cap;
	return true;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

/* The set of t[0..n) (sorted here) with acc; -1 when out of memory. */
static int32_t set_intern(struct fx_matcher *m, int32_t *t, int32_t n, bool acc)
{
	if (n > 1)
		qsort(t, (size_t)n, sizeof(*t), cmp_i32);
	if (!n && !acc)
		return 0;
	if ((uint32_t)m->n_sets * 2 >= m->sh_cap && !sh_rehash(m, m->sh_cap ? m->sh_cap * 2 : 1024))
		return -1;
	uint32_t h = set_hash(t, n, acc) & (m->sh_cap - 1);
	for (; m->sh[h] >= 0; h = (h + 1) & (m->sh_cap - 1)) {
		int32_t i = m->sh[h];
		if (m->set_len[i] == n && m->set_acc[i] == acc &&
		    !memcmp(m->pool + m->set_off[i], t, (size_t)n * sizeof(*t)))
			return i;
	}
	if (m->n_sets == m->cap_sets && !sets_grow(m))
		return -1;
	if (m->n_pool + (size_t)n > m->cap_pool) {
		size_t cap = m->cap_pool ? m->cap_pool * 2 : 4096;
		while (cap < m->n_pool + (size_t)n)
			cap *= 2;
		int32_t *p = fx_realloc_array(m->pool, cap, sizeof(int32_t));
		if (!p)
			return -1;
		m->pool = p;
		m->cap_pool = cap;
	}
	int32_t id = m->n_sets++;
	m->set_off[id] = (int32_t)m->n_pool;
	m->set_len[id] = n;
	m->set_acc[id] = acc;
	memcpy(m->pool + m->n_pool, t, (size_t)n * sizeof(*t));
	m->n_pool += (size_t)n;
	m->sh[h] = id;
	return id;
}

/* ---- expansion ---- */

static bool work_push(struct fx_matcher *m, int32_t pos, int32_t parent)
{
	if (!grow_i32(&m->work, &m->cap_work, m->n_work + 2))
		return false;
	m->work[m->n_work++] = pos;
	m->work[m->n_work++] = parent;
	return true;
}

/* Run the work list to terminals: tops get every stack whose top is a
 * terminal, *acc whether some stack emptied. Returns the set id, or -1. */
static int32_t expand(struct fx_matcher *m)
{
	const struct fx_grammar *g = m->g;
	bool acc = false;
	m->n_tops = 0;
	if (++m->stamp == 0) { /* wrapped: clear the stamps */
		memset(m->node_mark, 0, (size_t)m->cap_nodes * sizeof(uint32_t));
		m->stamp = 1;
	}
	while (m->n_work) {
		int32_t parent = m->work[--m->n_work], pos = m->work[--m->n_work];
		int32_t id;
		if (g->elems[pos].kind == GRAM_END) {
			if (parent < 0) {
				acc = true;
				continue;
			}
			id = parent; /* return: the parent continuation itself */
			pos = m->node_pos[id];
			parent = m->node_parent[id];
		} else if ((id = node_intern(m, pos, parent)) < 0) {
			return -1;
		}
		if (m->node_mark[id] == m->stamp)
			continue;
		m->node_mark[id] = m->stamp;
		const struct gram_elem *e = &g->elems[pos];
		if (e->kind == GRAM_TERM) {
			if (!grow_i32(&m->tops, &m->cap_tops, m->n_tops + 1))
				return -1;
			m->tops[m->n_tops++] = id;
			continue;
		}
		if (e->kind == GRAM_END) { /* a parent is never at an END: defensive */
			if (!work_push(m, pos, parent))
				return -1;
			continue;
		}
		int32_t ret = parent;
		if (g->elems[pos + 1].kind != GRAM_END && (ret = node_intern(m, pos + 1, parent)) < 0)
			return -1;
		for (int32_t a = g->rule_alt[e->arg + 1] - 1; a >= g->rule_alt[e->arg]; a--)
			if (!work_push(m, g->alt_start[a], ret))
				return -1;
	}
	return set_intern(m, m->tops, m->n_tops, acc);
}

/* The state after byte class cls from set s; 0 dead, -1 out of memory. */
static int32_t step(struct fx_matcher *m, int32_t s, unsigned cls)
{
	size_t idx = (size_t)s * (size_t)m->g->n_cls + cls;
	if (m->trans[idx] >= 0)
		return m->trans[idx];
	const struct fx_grammar *g = m->g;
	unsigned b = g->cls_rep[cls];
	m->n_work = 0;
	for (int32_t i = 0; i < m->set_len[s]; i++) {
		int32_t n = m->pool[m->set_off[s] + i];
		int32_t pos = m->node_pos[n];
		if (gram_set_has(&g->sets[g->elems[pos].arg], b) &&
		    !work_push(m, pos + 1, m->node_parent[n]))
			return -1;
	}
	int32_t r = expand(m);
	if (r >= 0)
		m->trans[(size_t)s * (size_t)m->g->n_cls + cls] = r; /* trans may have moved */
	return r;
}

static int32_t start_set(struct fx_matcher *m)
{
	const struct fx_grammar *g = m->g;
	m->n_work = 0;
	for (int32_t a = g->rule_alt[g->root + 1] - 1; a >= g->rule_alt[g->root]; a--)
		if (!work_push(m, g->alt_start[a], -1))
			return -1;
	return expand(m);
}

/* Empty every table, then intern the dead set, the start set and, when
 * keep, the current state again (its stacks copied chain by chain). */
static int rebuild(struct fx_matcher *m, bool keep)
{
	int32_t n_old = m->n_nodes, *old_pos = m->node_pos, *old_parent = m->node_parent;
	int32_t *old_tops = NULL, n_keep = 0;
	bool acc = false;
	int rc = FX_E_NOMEM;

	if (keep) {
		n_keep = m->set_len[m->cur];
		acc = m->set_acc[m->cur];
		if (!(old_tops = fx_malloc_array((size_t)n_keep + 1, sizeof(int32_t))))
			return FX_E_NOMEM;
		memcpy(old_tops, m->pool + m->set_off[m->cur], (size_t)n_keep * sizeof(int32_t));
	}
	m->node_pos = m->node_parent = NULL;
	fx_free(m->node_mark);
	m->node_mark = NULL;
	m->n_nodes = m->cap_nodes = 0;
	m->n_sets = 0;
	m->n_pool = 0;
	if (m->nh)
		memset(m->nh, 0xff, (size_t)m->nh_cap * sizeof(int32_t));
	if (m->sh)
		memset(m->sh, 0xff, (size_t)m->sh_cap * sizeof(int32_t));
	if (m->trans)
		memset(m->trans, 0xff, (size_t)m->cap_sets * (size_t)m->g->n_cls * sizeof(int32_t));
	for (int i = 0; i < MASK_CACHE; i++)
		m->cache[i].set = -1;
	/* id 0: the dead state (no stack, not accepting) */
	if (m->cap_sets == 0 && !sets_grow(m))
		goto out;
	m->set_off[0] = 0;
	m->set_len[0] = 0;
	m->set_acc[0] = 0;
	m->n_sets = 1;
	if ((m->start = start_set(m)) < 0)
		goto out;
	m->cur = m->start;
	if (keep) {
		/* copy each kept stack's chain, root first, into the new tables */
		int32_t *map = fx_malloc_array((size_t)n_old + 1, sizeof(int32_t));
		int32_t *chain = fx_malloc_array((size_t)n_old + 1, sizeof(int32_t));
		bool ok = map && chain;
		for (int32_t i = 0; ok && i < n_old; i++)
			map[i] = -1;
		for (int32_t k = 0; ok && k < n_keep; k++) {
			int32_t depth = 0, n = old_tops[k];
			while (n >= 0 && map[n] < 0) {
				chain[depth++] = n;
				n = old_parent[n];
			}
			while (ok && depth > 0) {
				int32_t o = chain[--depth];
				int32_t parent = old_parent[o] < 0 ? -1 : map[old_parent[o]];
				ok = (map[o] = node_intern(m, old_pos[o], parent)) >= 0;
			}
			if (ok)
				old_tops[k] = map[old_tops[k]];
		}
		int32_t s = ok ? set_intern(m, old_tops, n_keep, acc) : -1;
		fx_free(map);
		fx_free(chain);
		if (s < 0)
			goto out;
		m->cur = s;
	}
	rc = FX_OK;
out:
	fx_free(old_tops);
	fx_free(old_pos);
	fx_free(old_parent);
	m->broken = rc != FX_OK;
	if (m->broken)
		m->cur = m->start = 0;
	return rc;
}

/* Keep the tables bounded: rebuilt from the current state when full. */
static int maybe_compact(struct fx_matcher *m)
{
	if (m->n_nodes < MATCHER_MAX_NODES && m->n_sets < MATCHER_MAX_SETS)
		return FX_OK;
	return rebuild(m, true);
}

/* ---- public ---- */

int fx_matcher_create(const struct fx_grammar *g, const struct fx_grammar_vocab *v,
		      struct fx_matcher **out, struct fx_err *err)
{
	struct fx_matcher *m;
	if (!out)
		return fx_fail(err, FX_E_INVALID, "matcher: out is NULL");
	*out = NULL;
	if (!g)
		return fx_fail(err, FX_E_INVALID, "matcher: needs a grammar");
	if (!(m = fx_calloc(1, sizeof(*m))))
		return fx_fail(err, FX_E_NOMEM, "matcher: out of memory");
	m->g = g;
	m->v = v;
	m->n_words = v ? (v->n_vocab + 63) / 64 : 0;
	for (int i = 0; i < MASK_CACHE; i++)
		m->cache[i].set = -1;
	if (!(m->dfs = fx_calloc(v ? (size_t)v->max_depth + 1 : 1, sizeof(int32_t))) || rebuild(m, false)) {
		fx_matcher_free(m);
		return fx_fail(err, FX_E_NOMEM, "matcher: out of memory");
	}
	*out = m;
	return FX_OK;
}

void fx_matcher_free(struct fx_matcher *m)
{
	if (!m)
		return;
	fx_free(m->node_pos);
	fx_free(m->node_parent);
	fx_free(m->node_mark);
	fx_free(m->nh);
	fx_free(m->set_off);
	fx_free(m->set_len);
	fx_free(m->set_acc);
	fx_free(m->pool);
	fx_free(m->sh);
	fx_free(m->trans);
	fx_free(m->work);
	fx_free(m->tops);
	fx_free(m->dfs);
	for (int i = 0; i < MASK_CACHE; i++)
		fx_free(m->cache[i].bits);
	fx_free(m);
}

/* The state after bytes s[0..n) from set `from`; 0 dead, -1 out of memory. */
static int32_t walk(struct fx_matcher *m, int32_t from, const unsigned char *s, size_t n)
{
	int32_t cur = from;
	for (size_t i = 0; i < n && cur > 0; i++)
		cur = step(m, cur, m->g->cls_of[s[i]]);
	return cur;
}

bool fx_matcher_allows(struct fx_matcher *m, fx_token t)
{
	const struct fx_grammar_vocab *v;
	if (!m || !m->v || t < 0 || t >= m->v->n_vocab)
		return false;
	v = m->v;
	if (m->broken)
		return false;
	if (v->eog[t])
		return m->set_acc[m->cur];
	uint32_t off = v->piece_off[t], len = v->piece_off[t + 1] - off;
	if (!len)
		return false;
	return walk(m, m->cur, (const unsigned char *)v->pieces + off, len) > 0;
}

int fx_matcher_accept_bytes(struct fx_matcher *m, const char *s, size_t n)
{
	if (!m || (!s && n))
		return FX_E_INVALID;
	if (m->broken)
		return FX_E_NOMEM;
	int32_t r = walk(m, m->cur, (const unsigned char *)s, n);
	if (r < 0)
		return FX_E_NOMEM;
	if (r == 0)
		return FX_E_INVALID;
	m->cur = r;
	return maybe_compact(m);
}

int fx_matcher_accept(struct fx_matcher *m, fx_token t)
{
	const struct fx_grammar_vocab *v;
	if (!m || !m->v || t < 0 || t >= m->v->n_vocab)
		return FX_E_INVALID;
	v = m->v;
	if (m->broken)
		return FX_E_NOMEM;
	if (v->eog[t])
		return m->set_acc[m->cur] ? FX_OK : FX_E_INVALID;
	uint32_t off = v->piece_off[t], len = v->piece_off[t + 1] - off;
	if (!len)
		return FX_E_INVALID;
	return fx_matcher_accept_bytes(m, v->pieces + off, len);
}

void fx_matcher_next_bytes(struct fx_matcher *m, bool allowed[256])
{
	for (int b = 0; b < 256; b++)
		allowed[b] = m && !m->broken && step(m, m->cur, m->g->cls_of[b]) > 0;
}

bool fx_matcher_can_end(const struct fx_matcher *m)
{
	return m && m->set_acc[m->cur];
}

bool fx_matcher_is_done(const struct fx_matcher *m)
{
	return m && m->set_acc[m->cur] && m->set_len[m->cur] == 0;
}

void fx_matcher_reset(struct fx_matcher *m)
{
	if (m && m->broken)
		rebuild(m, false); /* stays broken when memory is still short */
	if (m)
		m->cur = m->start;
}

/* Allowed tokens of set s into bits: the trie in preorder, a subtree
 * skipped where the state dies. Returns the count, or -1. */
static int32_t trie_walk(struct fx_matcher *m, int32_t s, uint64_t *bits)
{
	const struct fx_grammar_vocab *v = m->v;
	const uint8_t *cls_of = m->g->cls_of;
	int32_t *state = m->dfs, count = 0;
	memset(bits, 0, (size_t)m->n_words * sizeof(uint64_t));
	state[0] = s;
	for (int32_t i = 1; i < v->n_nodes;) {
		int32_t d = v->depth[i];
		int32_t from = state[d - 1];
		size_t idx = (size_t)from * (size_t)m->g->n_cls + cls_of[v->byte[i]];
		int32_t to = m->trans[idx];
		if (to < 0 && (to = step(m, from, cls_of[v->byte[i]])) < 0)
			return -1;
		if (to == 0) {
			i = v->skip[i];
			continue;
		}
		state[d] = to;
		for (int32_t k = v->tok_off[i]; k < v->tok_off[i + 1]; k++) {
			fx_token t = v->tok[k];
			bits[t >> 6] |= (uint64_t)1 << (t & 63);
			count++;
		}
		i++;
	}
	if (m->set_acc[s])
		for (int32_t t = 0; t < v->n_vocab; t++)
			if (v->eog[t]) {
				bits[t >> 6] |= (uint64_t)1 << (t & 63);
				count++;
			}
	return count;
}

/* The cache entry holding set s's mask, computed if needed; NULL on OOM. */
static struct mask_entry *mask_of(struct fx_matcher *m, int32_t s)
{
	struct mask_entry *lru = NULL;
	m->clock++;
	for (int i = 0; i < MASK_CACHE; i++) {
		struct mask_entry *e = &m->cache[i];
		if (e->set == s) {
			e->used = m->clock;
			return e;
		}
		if (!lru || (lru->set >= 0 && (e->set < 0 || e->used < lru->used)))
			lru = e;
	}
	if (!lru->bits && !(lru->bits = fx_malloc_array((size_t)m->n_words, sizeof(uint64_t))))
		return NULL;
	lru->set = -1;
	int32_t n = trie_walk(m, s, lru->bits);
	if (n < 0)
		return NULL;
	lru->set = s;
	lru->used = m->clock;
	lru->n_allowed = n;
	return lru;
}

int32_t fx_matcher_mask(struct fx_matcher *m, float *logits)
{
	if (!m || !m->v || !logits)
		return FX_E_INVALID;
	if (m->broken)
		return FX_E_NOMEM;
	struct mask_entry *e = mask_of(m, m->cur);
	if (!e)
		return FX_E_NOMEM;
	const uint64_t *bits = e->bits;
	for (int32_t w = 0; w < m->n_words; w++) {
		uint64_t x = bits[w];
		if (x == ~(uint64_t)0)
			continue;
		int32_t lo = w * 64, hi = lo + 64 < m->v->n_vocab ? lo + 64 : m->v->n_vocab;
		for (int32_t t = lo; t < hi; t++)
			if (!((x >> (t - lo)) & 1))
				logits[t] = -INFINITY;
	}
	return e->n_allowed;
}
