/* A context: the sequences' KV backings (contiguous per sequence, or a
 * paged pool shared by all), the thread pool and the scratch of the forward
 * pass, all sized at creation (nothing is allocated per token except when a
 * batch wants more logits rows than ever before), and the logits of the
 * last decode. Batches are split into ubatches of at most n_ubatch rows;
 * each row names its own KV backing, so rows of different sequences share
 * one forward step and every weight is read once per step. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/context.h"
#include "kernels/dot.h"
#include "kv/kv.h"
#include "model/forward.h"
#include "model/model.h"
#include "quant/quant.h"

struct seq {
	bool used;
	uint32_t n_past;
	struct kv_contig kv;   /* contiguous layout */
	struct kv_seq table[KV_GROUPS]; /* paged layout: one block table per layer group */
};

struct fx_context {
	const struct fx_model *m; /* borrowed */
	uint32_t n_ctx, n_ubatch, n_seq_max;
	int layout;               /* enum fx_kv_layout */
	int k_type, v_type;
	struct fx_pool *pool;
	struct kv_paged kvp;      /* paged layout: pools per layer group */
	bool prefix_cache;        /* paged, no sliding-window group */
	struct seq *seqs;         /* [n_seq_max] */
	struct fwd_scratch s;
	/* per-ubatch staging, [n_ubatch] each */
	int32_t *pos;
	fx_token *tok;
	struct kv_view *views;
	bool *want;
	/* per-batch bookkeeping, grown with the largest batch */
	int32_t *row_out;         /* batch row -> logits row, or -1 */
	fx_seq *b_seq;            /* fx_decode's batch view */
	bool *b_keep;             /* rows whose logits are kept */
	bool *b_skip;             /* rows served from the prefix cache */
	fx_token *b_tok;          /* one sequence's tokens, gathered */
	int32_t row_cap;
	int32_t *s_cnt;           /* [n_seq_max] rows per sequence */
	int *s_status;            /* [n_seq_max] per-sequence result */
	float *logits;            /* [logits_rows, n_vocab] */
	int32_t logits_rows, n_logits;
	struct fx_err err;
};

struct fx_context_params fx_context_default_params(void)
{
	return (struct fx_context_params){ .size = sizeof(struct fx_context_params),
					   .n_ctx = 4096, .n_ubatch = 512,
					   .type_k = FX_KV_DEFAULT, .type_v = FX_KV_DEFAULT,
					   .n_seq_max = 1, .kv_layout = FX_KV_CONTIGUOUS,
					   .block_size = 16 };
}

static int seq_init_storage(struct fx_context *c, struct seq *q)
{
	const struct hparams *hp = &c->m->hp;
	if (c->layout == FX_KV_PAGED)
		return FX_OK;
	return kv_contig_init(&q->kv, hp->n_layer, (int32_t)c->n_ctx,
			      (int64_t)hp->n_head_kv * hp->head_dim,
			      (int64_t)hp->n_head_kv * hp->head_dim_v, c->k_type, c->v_type);
}

static void seq_release(struct fx_context *c, struct seq *q)
{
	for (int g = 0; c->layout == FX_KV_PAGED && g < KV_GROUPS; g++)
		kv_seq_clear(&c->kvp.pool[g], &q->table[g]);
	q->n_past = 0;
}

/* Paged pools: full-attention layers in group 0 (n_ctx tokens), sliding-
 * window layers in group 1, sized for what the windows can still see:
 * per sequence window + one ubatch + two partial blocks. */
static int paged_init(struct fx_context *c, uint32_t bs)
{
	const struct hparams *hp = &c->m->hp;
	struct kv_paged *k = &c->kvp;
	int32_t n[KV_GROUPS] = { 0 };
	k->group = fx_calloc((size_t)hp->n_layer, sizeof(*k->group));
	k->slot = fx_calloc((size_t)hp->n_layer, sizeof(*k->slot));
	if (!k->group || !k->slot)
		return FX_E_NOMEM;
	for (int il = 0; il < hp->n_layer; il++) {
		k->group[il] = c->m->layers[il].swa && hp->n_swa > 0;
		k->slot[il] = n[k->group[il]]++;
	}
	k->window = hp->n_swa;
	k->k_type = c->k_type;
	k->v_type = c->v_type;
	int64_t full = c->n_ctx / bs;
	int64_t swa = (int64_t)c->n_seq_max * (((int64_t)hp->n_swa + c->n_ubatch) / bs + 2);
	int64_t blocks[KV_GROUPS] = { full, swa < full ? swa : full };
	for (int g = 0; g < KV_GROUPS; g++) {
		if (!n[g])
			continue;
		int rc = kv_pool_init(&k->pool[g], n[g], (int32_t)blocks[g], (int32_t)bs,
				      (int64_t)hp->n_head_kv * hp->head_dim,
				      (int64_t)hp->n_head_kv * hp->head_dim_v, c->k_type, c->v_type);
		if (rc)
			return rc;
	}
	/* A reused prefix would need its sliding layers' blocks too, which are
	 * released as the window moves: cache prefixes only without them. */
	k->pool[1].no_cache = true;
	c->prefix_cache = n[1] == 0;
	return FX_OK;
}

static void paged_fini(struct kv_paged *k)
{
	for (int g = 0; g < KV_GROUPS; g++)
		kv_pool_fini(&k->pool[g]);
	fx_free(k->group);
	fx_free(k->slot);
}

int fx_context_create(const struct fx_model *m, const struct fx_context_params *p,
		      struct fx_context **out, struct fx_err *err)
{
	struct fx_context_params dp = fx_context_default_params();
	int rc;
	if (!m || !out)
		return fx_fail(err, FX_E_INVALID, "fx_context_create: model and out are required");
	*out = NULL;
	if (m->vocab_only)
		return fx_fail(err, FX_E_INVALID, "the model was loaded vocab_only: no weights to run");
	if (!p)
		p = &dp;
	const struct hparams *hp = &m->hp;
	uint32_t n_ctx = p->n_ctx ? p->n_ctx : (uint32_t)hp->n_ctx_train;
	uint32_t n_seq = p->n_seq_max ? p->n_seq_max : 1;
	if (n_ctx > (1u << 24) || n_seq > 4096)
		return fx_fail(err, FX_E_INVALID, "n_ctx %u or n_seq_max %u is too large", n_ctx, n_seq);
	/* A zero-row ubatch would never advance fx_batch_decode. */
	if (n_ctx == 0)
		return fx_fail(err, FX_E_INVALID, "n_ctx is 0 and the model's context_length is 0: "
			       "give n_ctx (-c)");
	/* In 64 bits: 2^24 x 256 wrapped to 0 in 32, capping the ubatch at 0
	 * rows, and fx_batch_decode never advanced. Contiguous caches hold
	 * every sequence's n_ctx rows, which must have 32-bit row indices;
	 * a paged pool holds n_ctx rows whatever n_seq_max is. */
	uint64_t n_tokens = (uint64_t)n_ctx * n_seq;
	if (p->kv_layout == FX_KV_CONTIGUOUS && n_tokens > INT32_MAX)
		return fx_fail(err, FX_E_INVALID, "n_ctx %u x n_seq_max %u = %llu KV rows is more than "
			       "%d: use a smaller n_ctx or n_seq_max, or the paged layout", n_ctx, n_seq,
			       (unsigned long long)n_tokens, INT32_MAX);
	if (p->kv_layout != FX_KV_CONTIGUOUS && p->kv_layout != FX_KV_PAGED)
		return fx_fail(err, FX_E_INVALID, "kv_layout %d: use FX_KV_CONTIGUOUS or FX_KV_PAGED",
			       p->kv_layout);
	if (p->kv_layout == FX_KV_PAGED && (p->block_size == 0 || p->block_size > n_ctx))
		return fx_fail(err, FX_E_INVALID, "block size %u must be in [1, n_ctx %u]",
			       p->block_size, n_ctx);
	int kt = p->type_k == FX_KV_DEFAULT ? hp->kv_type : p->type_k;
	int vt = p->type_v == FX_KV_DEFAULT ? hp->kv_type : p->type_v;
	if (!kv_type_ok(kt, hp->head_dim) || !kv_type_ok(vt, hp->head_dim_v))
		return fx_fail(err, FX_E_INVALID,
			       "KV cache types %d/%d: f32 (%d), f16 (%d) and q8_0 (%d, head sizes "
			       "multiple of 32) are supported; this model's heads are %d/%d wide",
			       kt, vt, FX_KV_F32, FX_KV_F16, FX_KV_Q8_0, hp->head_dim, hp->head_dim_v);
	uint32_t n_ub = p->n_ubatch ? p->n_ubatch : n_ctx;
	if (n_ub > n_tokens)
		n_ub = (uint32_t)n_tokens;
	if (p->kernels == FX_KERNELS_PORTABLE && m->repacked)
		return fx_fail(err, FX_E_INVALID, "the portable kernels cannot read weights repacked "
			       "for the SIMD kernels: load the model with fx_model_params.repack = false "
			       "(the tools' --portable does)");
	struct fx_context *c = fx_calloc(1, sizeof(*c));
	if (!c)
		return fx_fail(err, FX_E_NOMEM, "no memory for a context");
	c->m = m;
	c->n_ctx = n_ctx;
	c->n_ubatch = n_ub;
	c->n_seq_max = n_seq;
	c->layout = p->kv_layout;
	c->k_type = kt;
	c->v_type = vt;
	if ((rc = fx_pool_create(p->n_threads, &c->pool))) {
		rc = fx_fail(err, rc, "cannot start %d threads", p->n_threads);
		goto fail;
	}
	fx_pool_set_kernels(c->pool, p->kernels == FX_KERNELS_PORTABLE ? KERN_PORTABLE : kern_isa_best());
	if (c->layout == FX_KV_PAGED && (rc = paged_init(c, p->block_size))) {
		rc = fx_fail(err, rc, "no memory for a KV pool of %u tokens (try a smaller -c)", n_ctx);
		goto fail;
	}
	c->seqs = fx_calloc(n_seq, sizeof(*c->seqs));
	c->s_cnt = fx_calloc(n_seq, sizeof(*c->s_cnt));
	c->s_status = fx_calloc(n_seq, sizeof(*c->s_status));
	if (!c->seqs || !c->s_cnt || !c->s_status) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory for %u sequences", n_seq);
		goto fail;
	}
	/* Contiguous caches are allocated up front so a batch never fails on memory. */
	for (uint32_t i = 0; i < n_seq; i++)
		if ((rc = seq_init_storage(c, &c->seqs[i]))) {
			rc = fx_fail(err, rc, "no memory for %u KV caches of %u tokens (try a smaller -c "
				     "or the paged layout)", n_seq, n_ctx);
			goto fail;
		}
	c->seqs[0].used = true;
	if ((rc = fwd_scratch_init(&c->s, m, (int32_t)n_ub, (int32_t)n_ctx,
				   fx_pool_n_threads(c->pool)))) {
		rc = fx_fail(err, rc, "no memory for %u-token batches (try a smaller ubatch)", n_ub);
		goto fail;
	}
	c->pos = fx_calloc(n_ub, sizeof(*c->pos));
	c->tok = fx_calloc(n_ub, sizeof(*c->tok));
	c->views = fx_calloc(n_ub, sizeof(*c->views));
	c->want = fx_calloc(n_ub, sizeof(*c->want));
	c->logits_rows = 1;
	c->logits = fx_malloc_array((size_t)hp->n_vocab, sizeof(float));
	if (!c->pos || !c->tok || !c->views || !c->want || !c->logits) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory for batch staging");
		goto fail;
	}
	*out = c;
	return FX_OK;
fail:
	fx_context_free(c);
	return rc;
}

void fx_context_free(struct fx_context *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; c->seqs && i < c->n_seq_max; i++) {
		if (c->layout == FX_KV_PAGED)
			for (int g = 0; g < KV_GROUPS; g++)
				kv_seq_fini(&c->kvp.pool[g], &c->seqs[i].table[g]);
		else
			kv_contig_fini(&c->seqs[i].kv);
	}
	fx_free(c->seqs);
	paged_fini(&c->kvp);
	fx_free(c->pos);
	fx_free(c->tok);
	fx_free(c->views);
	fx_free(c->want);
	fx_free(c->row_out);
	fx_free(c->b_seq);
	fx_free(c->b_keep);
	fx_free(c->b_skip);
	fx_free(c->b_tok);
	fx_free(c->s_cnt);
	fx_free(c->s_status);
	fx_free(c->logits);
	fwd_scratch_fini(&c->s);
	fx_pool_free(c->pool);
	fx_free(c);
}

uint32_t fx_context_n_ctx(const struct fx_context *c)
{
	return c->n_ctx;
}

const char *fx_context_errmsg(const struct fx_context *c)
{
	return c->err.msg;
}

/* ---- sequences --------------------------------------------------------- */

static bool seq_ok(const struct fx_context *c, fx_seq s)
{
	return s >= 0 && (uint32_t)s < c->n_seq_max && c->seqs[s].used;
}

int fx_seq_add(struct fx_context *c, fx_seq *out)
{
	for (uint32_t i = 0; i < c->n_seq_max; i++) {
		if (!c->seqs[i].used) {
			c->seqs[i].used = true;
			c->seqs[i].n_past = 0;
			*out = (fx_seq)i;
			return FX_OK;
		}
	}
	return fx_fail(&c->err, FX_E_INVALID, "all %u sequences are in use (raise n_seq_max)",
		       c->n_seq_max);
}

int fx_seq_fork(struct fx_context *c, fx_seq src, fx_seq *out)
{
	if (!seq_ok(c, src))
		return fx_fail(&c->err, FX_E_INVALID, "fork: sequence %d does not exist", src);
	int rc = fx_seq_add(c, out);
	if (rc)
		return rc;
	struct seq *a = &c->seqs[src], *b = &c->seqs[*out];
	if (c->layout == FX_KV_PAGED) {
		for (int g = 0; g < KV_GROUPS; g++) {
			if ((rc = kv_seq_fork(&c->kvp.pool[g], &a->table[g], &b->table[g]))) {
				seq_release(c, b);
				b->used = false;
				return fx_fail(&c->err, rc, "fork: no memory for a block table");
			}
		}
	} else {
		const struct kv_contig *k = &a->kv;
		for (int il = 0; il < k->n_layer; il++) {
			size_t o = (size_t)il * (size_t)k->n_ctx;
			memcpy(b->kv.k + o * k->k_row, k->k + o * k->k_row, a->n_past * k->k_row);
			memcpy(b->kv.v + o * k->v_row, k->v + o * k->v_row, a->n_past * k->v_row);
		}
	}
	b->n_past = a->n_past;
	return FX_OK;
}

void fx_seq_free(struct fx_context *c, fx_seq s)
{
	if (!seq_ok(c, s))
		return;
	seq_release(c, &c->seqs[s]);
	c->seqs[s].used = s == 0;
}

uint32_t fx_seq_n_past(const struct fx_context *c, fx_seq s)
{
	return seq_ok(c, s) ? c->seqs[s].n_past : 0;
}

int32_t fx_context_kv_blocks_used(const struct fx_context *c)
{
	if (c->layout != FX_KV_PAGED)
		return 0;
	int32_t n = 0;
	for (int g = 0; g < KV_GROUPS; g++)
		n += c->kvp.pool[g].n_layer ? kv_pool_n_used(&c->kvp.pool[g]) : 0;
	return n;
}

int32_t fx_context_kv_blocks_total(const struct fx_context *c)
{
	if (c->layout != FX_KV_PAGED)
		return 0;
	int32_t n = 0;
	for (int g = 0; g < KV_GROUPS; g++)
		n += c->kvp.pool[g].n_layer ? c->kvp.pool[g].n_blocks : 0;
	return n;
}

int64_t fx_context_prefix_hits(const struct fx_context *c)
{
	return c->layout == FX_KV_PAGED ? c->kvp.pool[0].n_hit_blocks * c->kvp.pool[0].block_size : 0;
}

uint32_t fx_context_n_past(const struct fx_context *c)
{
	return c->seqs[0].n_past;
}

void fx_context_reset(struct fx_context *c)
{
	for (uint32_t i = 0; i < c->n_seq_max; i++)
		fx_seq_free(c, (fx_seq)i);
	c->n_logits = 0;
}

/* ---- batches ----------------------------------------------------------- */

static struct kv_view seq_view(struct fx_context *c, struct seq *q)
{
	if (c->layout == FX_KV_PAGED)
		return (struct kv_view){ .kind = KV_PAGED,
					 .paged = { .set = &c->kvp,
						    .blocks = { q->table[0].blocks, q->table[1].blocks } } };
	/* One sequence alone decodes on its own cache; several share a step. */
	if (c->n_seq_max == 1)
		return (struct kv_view){ .kind = KV_DECODE, .decode = &q->kv };
	return (struct kv_view){ .kind = KV_BATCHED, .batched = &q->kv };
}

/* Check and reserve room for every sequence's cnt[s] rows; a sequence that
 * does not fit or has a bad token gets its status set and its rows are
 * skipped. Returns the first failure (FX_OK if none). */
/* Reserve n rows in every group, all or nothing. */
static int paged_reserve(struct fx_context *c, struct seq *q, int32_t n)
{
	for (int g = 0; g < KV_GROUPS; g++) {
		struct kv_pool *p = &c->kvp.pool[g];
		if (p->n_layer && kv_seq_need(p, &q->table[g], n) > kv_pool_n_available(p))
			return FX_E_KV_FULL;
	}
	for (int g = 0; g < KV_GROUPS; g++) {
		struct kv_pool *p = &c->kvp.pool[g];
		int rc = p->n_layer ? kv_seq_reserve(p, &q->table[g], n) : FX_OK;
		if (rc)
			return rc; /* only FX_E_NOMEM can get here */
	}
	return FX_OK;
}

/* Paged: a new sequence whose first rows repeat cached full blocks takes
 * those blocks instead of recomputing them; the rows they cover are
 * skipped. Only rows whose logits are not wanted are skipped, and at least
 * one row is always computed. Returns the rows skipped. */
static int32_t reuse_prefix(struct fx_context *c, const struct fx_batch *b, fx_seq s, int32_t cnt)
{
	struct seq *q = &c->seqs[s];
	int32_t n = 0, first_keep = cnt - 1;
	if (c->layout != FX_KV_PAGED || !c->prefix_cache || q->n_past ||
	    cnt < c->kvp.pool[0].block_size + 1)
		return 0;
	for (int32_t i = 0; i < b->n && n < cnt; i++) {
		if (b->seq[i] != s)
			continue;
		if (c->b_keep[i] && n < first_keep)
			first_keep = n;
		c->b_tok[n++] = b->token[i];
	}
	int32_t got = kv_seq_reuse_prefix(&c->kvp.pool[0], &q->table[0], c->b_tok, n,
					  first_keep / c->kvp.pool[0].block_size);
	q->n_past = (uint32_t)got;
	for (int32_t i = 0, k = 0; i < b->n && k < got; i++)
		if (b->seq[i] == s)
			c->b_skip[i] = true, k++;
	return got;
}

static int admit(struct fx_context *c, const struct fx_batch *b, int *st, int32_t *cnt)
{
	int32_t nv = c->m->hp.n_vocab;
	int first = FX_OK;
	char msg[sizeof(c->err.msg)] = "";
	for (int32_t i = 0; i < b->n; i++) {
		fx_seq s = b->seq[i];
		if ((b->token[i] < 0 || b->token[i] >= nv) && !st[s]) {
			st[s] = FX_E_INVALID;
			if (!first)
				snprintf(msg, sizeof(msg), "sequence %d: token id %d is outside [0, %d)",
					 s, b->token[i], nv);
			first = first ? first : st[s];
		}
	}
	for (uint32_t s = 0; s < c->n_seq_max; s++) {
		struct seq *q = &c->seqs[s];
		if (!cnt[s] || st[s])
			continue;
		int32_t reused = reuse_prefix(c, b, (fx_seq)s, cnt[s]);
		cnt[s] -= reused;
		if ((uint64_t)q->n_past + (uint64_t)cnt[s] > c->n_ctx) {
			st[s] = FX_E_CTX_FULL;
			if (!first)
				snprintf(msg, sizeof(msg), "sequence %u: %u tokens + %d new exceed the "
					 "context of %u tokens (raise -c)", s, q->n_past, cnt[s], c->n_ctx);
		} else if (c->layout == FX_KV_PAGED) {
			st[s] = paged_reserve(c, q, cnt[s]);
			if (st[s] && !first)
				snprintf(msg, sizeof(msg), st[s] == FX_E_KV_FULL
					 ? "sequence %u: the KV pool has too few free blocks of %d tokens "
					   "for %d more tokens (queue or preempt it)"
					 : "sequence %u: no memory for its block table (%d, %d)",
					 s, c->kvp.pool[0].block_size ? c->kvp.pool[0].block_size
					 : c->kvp.pool[1].block_size, cnt[s]);
		}
		if (st[s] && reused)
			seq_release(c, q); /* left as it was: give the cached blocks back */
		first = first ? first : st[s];
	}
	if (first)
		fx_fail(&c->err, first, "%s", msg);
	return first;
}

/* Room for the per-row map of a batch of `rows` and for n_logits rows. */
static int grow_rows(struct fx_context *c, int32_t rows)
{
	if (rows <= c->row_cap)
		return FX_OK;
	int32_t *r = fx_realloc_array(c->row_out, (size_t)rows, sizeof(*r));
	if (r)
		c->row_out = r;
	fx_seq *q = r ? fx_realloc_array(c->b_seq, (size_t)rows, sizeof(*q)) : NULL;
	if (q)
		c->b_seq = q;
	bool *k = q ? fx_realloc_array(c->b_keep, (size_t)rows, sizeof(*k)) : NULL;
	if (k)
		c->b_keep = k;
	bool *sk = k ? fx_realloc_array(c->b_skip, (size_t)rows, sizeof(*sk)) : NULL;
	if (sk)
		c->b_skip = sk;
	fx_token *t = sk ? fx_realloc_array(c->b_tok, (size_t)rows, sizeof(*t)) : NULL;
	if (t)
		c->b_tok = t;
	if (!t)
		return FX_E_NOMEM;
	c->row_cap = rows;
	return FX_OK;
}

static int grow_logits(struct fx_context *c, int32_t n_logits)
{
	if (n_logits <= c->logits_rows)
		return FX_OK;
	float *l = fx_realloc_array(c->logits, (size_t)n_logits * (size_t)c->m->hp.n_vocab,
				    sizeof(float));
	if (!l)
		return FX_E_NOMEM;
	c->logits = l;
	c->logits_rows = n_logits;
	return FX_OK;
}

/* Paged: kv_seq_commit every computed row. admit's kv_seq_reserve made
 * room for them, so a commit cannot fail; were one to, the sequence is
 * emptied (its table would lag n_past, and nothing may be cached of rows
 * not recorded) and its rows lose their logits, with status FX_E_NOMEM.
 * Returns whether any sequence was. */
static bool commit_rows(struct fx_context *c, const struct fx_batch *b, int *st)
{
	bool failed = false;
	for (int32_t i = 0; i < b->n; i++) {
		fx_seq s = b->seq[i];
		for (int g = 0; g < KV_GROUPS && !st[s] && !c->b_skip[i]; g++)
			if (c->kvp.pool[g].n_layer &&
			    kv_seq_commit(&c->kvp.pool[g], &c->seqs[s].table[g], &b->token[i], 1)) {
				st[s] = FX_E_NOMEM;
				seq_release(c, &c->seqs[s]);
				failed = true;
			}
	}
	for (int32_t i = 0; failed && i < b->n; i++)
		if (st[b->seq[i]] == FX_E_NOMEM)
			c->row_out[i] = -1;
	return failed;
}

int fx_batch_decode(struct fx_context *c, const struct fx_batch *b, int *seq_status)
{
	const struct fx_model *m = c->m;
	int32_t nv = m->hp.n_vocab;
	if (!b || b->n <= 0 || !b->seq || !b->token)
		return fx_fail(&c->err, FX_E_INVALID, "fx_batch_decode: an empty batch");
	for (int32_t i = 0; i < b->n; i++)
		if (!seq_ok(c, b->seq[i]))
			return fx_fail(&c->err, FX_E_INVALID, "batch row %d: sequence %d does not exist",
				       i, b->seq[i]);
	if (grow_rows(c, b->n))
		return fx_fail(&c->err, FX_E_NOMEM, "no memory for a batch of %d rows", b->n);
	int32_t *cnt = c->s_cnt;
	int *st = c->s_status;
	memset(cnt, 0, c->n_seq_max * sizeof(*cnt));
	memset(st, 0, c->n_seq_max * sizeof(*st));
	for (int32_t i = 0; i < b->n; i++)
		cnt[b->seq[i]]++;
	/* Which rows keep logits: as asked, or each sequence's last. */
	for (int32_t i = 0; i < b->n; i++) {
		c->b_skip[i] = false;
		c->row_out[i] = cnt[b->seq[i]]; /* rows left in this sequence, this one included */
		cnt[b->seq[i]]--;
	}
	int32_t n_keep = 0;
	for (int32_t i = 0; i < b->n; i++) {
		bool keep = b->logits ? b->logits[i] : c->row_out[i] == 1;
		c->b_keep[i] = keep;
		n_keep += keep;
		cnt[b->seq[i]]++;
	}
	/* Room for every kept row's logits before any sequence changes: a
	 * failure here leaves every sequence as it was. (Once, the rows were
	 * committed uncomputed: their blocks entered the prefix cache, and a
	 * later identical prompt reused K/V never written.) */
	c->n_logits = 0;
	if (grow_logits(c, n_keep)) {
		for (int32_t i = 0; i < b->n; i++)
			st[b->seq[i]] = FX_E_NOMEM;
		if (seq_status)
			memcpy(seq_status, st, c->n_seq_max * sizeof(*st));
		return fx_fail(&c->err, FX_E_NOMEM, "no memory for %d rows of logits", n_keep);
	}
	int rc = admit(c, b, st, cnt);
	int32_t n_out = 0;
	for (int32_t i = 0; i < b->n; i++)
		c->row_out[i] = c->b_keep[i] && !st[b->seq[i]] ? n_out++ : -1;
	/* Run the admitted rows in ubatches, in batch order (a sequence that
	 * failed admission, even for memory, does not stop the others). */
	int32_t done = 0;
	for (int32_t i = 0; i < b->n;) {
		int32_t nb = 0, wanted = 0;
		for (; i < b->n && nb < (int32_t)c->n_ubatch; i++) {
			struct seq *q = &c->seqs[b->seq[i]];
			if (st[b->seq[i]] || c->b_skip[i])
				continue;
			c->tok[nb] = b->token[i];
			c->pos[nb] = (int32_t)q->n_past++;
			c->views[nb] = seq_view(c, q);
			c->want[nb] = c->row_out[i] >= 0;
			wanted += c->want[nb];
			nb++;
		}
		if (!nb)
			continue;
		model_forward(m, c->pool, &c->s, c->views, c->tok, c->pos, nb, c->want,
			      c->logits + (size_t)done * nv);
		done += wanted;
	}
	/* Paged: record the new tokens (caching every block that filled up),
	 * then release sliding-window blocks no later query can see. */
	if (c->layout == FX_KV_PAGED && commit_rows(c, b, st) && !rc)
		rc = fx_fail(&c->err, FX_E_NOMEM, "no memory to record a sequence's tokens: "
			     "the sequence was emptied");
	for (uint32_t s = 0; c->layout == FX_KV_PAGED && c->kvp.pool[1].n_layer &&
			     s < c->n_seq_max; s++)
		if (c->seqs[s].used)
			kv_seq_release_before(&c->kvp.pool[1], &c->seqs[s].table[1],
					      (int32_t)c->seqs[s].n_past - c->kvp.window + 1);
	c->n_logits = n_out;
	if (seq_status)
		memcpy(seq_status, st, c->n_seq_max * sizeof(*st));
	return rc;
}

const float *fx_batch_logits(const struct fx_context *c, int32_t i)
{
	if (i < 0 || i >= c->row_cap || c->row_out[i] < 0 || c->row_out[i] >= c->n_logits)
		return NULL;
	return c->logits + (size_t)c->row_out[i] * (size_t)c->m->hp.n_vocab;
}

/* ---- single sequence --------------------------------------------------- */

int fx_decode(struct fx_context *c, const fx_token *tokens, int32_t n, bool all_logits)
{
	if (n <= 0 || !tokens)
		return fx_fail(&c->err, FX_E_INVALID, "fx_decode: no tokens");
	if (grow_rows(c, n))
		return fx_fail(&c->err, FX_E_NOMEM, "no memory for %d rows", n);
	for (int32_t i = 0; i < n; i++) {
		c->b_seq[i] = 0;
		c->b_keep[i] = all_logits || i == n - 1;
	}
	struct fx_batch b = { .n = n, .seq = c->b_seq, .token = tokens, .logits = c->b_keep };
	return fx_batch_decode(c, &b, NULL);
}

const float *fx_get_logits(const struct fx_context *c, int32_t *n_rows)
{
	if (n_rows)
		*n_rows = c->n_logits;
	return c->n_logits ? c->logits : NULL;
}

void context_set_capture(struct fx_context *c, float *buf)
{
	c->s.capture = buf;
}

void fx_context_memory(const struct fx_context *c, uint64_t *kv_bytes, uint64_t *scratch_bytes)
{
	uint64_t kv = 0;
	if (c->layout == FX_KV_PAGED) {
		for (int g = 0; g < KV_GROUPS; g++) {
			if (c->kvp.pool[g].k)
				kv += c->kvp.pool[g].bytes;
		}
	} else {
		for (uint32_t i = 0; i < c->n_seq_max; i++) {
			if (c->seqs[i].kv.k)
				kv += c->seqs[i].kv.bytes;
		}
	}
	*kv_bytes = kv;
	*scratch_bytes = c->s.bytes + (uint64_t)c->logits_rows * (uint64_t)c->m->hp.n_vocab * sizeof(float);
}
