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

struct rec_backing {
	struct kv_backing base;
	struct kv_backing *inner;
	int64_t floats;  /* per sequence */
	float *state;    /* [n_seq][floats] */
};

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

/* The forward pass already moved the state to pos + n. */
static void rb_commit(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n)
{
	kv_commit(RB(b)->inner, seq, tok, n);
}

/* Back to 0 (an empty sequence: a zero state) or nowhere; anything else
 * needs a state the slot no longer has. */
static int rb_rm(struct kv_backing *b, int32_t seq, int32_t pos)
{
	struct rec_backing *r = RB(b);
	int32_t cur = kv_pos(r->inner, seq);
	if (pos >= cur)
		return FX_OK;
	if (pos > 0)
		return FX_E_UNSUPPORTED;
	int rc = kv_rm(r->inner, seq, 0);
	if (!rc)
		memset(slot(r, seq), 0, (size_t)r->floats * sizeof(float));
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
	if (!rc)
		memcpy(slot(r, dst), slot(r, src), (size_t)r->floats * sizeof(float));
	return rc;
}

static void rb_clear(struct kv_backing *b, int32_t seq)
{
	struct rec_backing *r = RB(b);
	kv_clear(r->inner, seq);
	memset(slot(r, seq), 0, (size_t)r->floats * sizeof(float));
}

static int32_t rb_pos(const struct kv_backing *b, int32_t seq)
{
	return kv_pos(RB(b)->inner, seq);
}

static struct kv_view rb_view(struct kv_backing *b, int32_t seq)
{
	struct kv_view v = kv_seq_view(RB(b)->inner, seq);
	v.rs = slot(RB(b), seq);
	return v;
}

/* The inner cache's blocks hold the attention layers' K/V of a prefix, but
 * not the recurrent state after it: nothing is reused. */
static int32_t rb_reuse(struct kv_backing *b, int32_t seq, const int32_t *tok, int32_t n,
			int32_t max_rows)
{
	(void)b, (void)seq, (void)tok, (void)n, (void)max_rows;
	return 0;
}

static void rb_stats(const struct kv_backing *b, struct kv_stats *st)
{
	const struct rec_backing *r = RB(b);
	kv_get_stats(r->inner, st);
	st->bytes += (uint64_t)r->base.n_seq * (uint64_t)r->floats * sizeof(float);
}

static void rb_destroy(struct kv_backing *b)
{
	struct rec_backing *r = RB(b);
	kv_destroy(r->inner);
	fx_free(r->state);
	fx_free(r);
}

static const struct kv_ops rec_ops = {
	.begin = rb_begin, .admit = rb_admit, .reserve = rb_reserve, .commit = rb_commit,
	.rm = rb_rm, .shift = rb_shift, .fork = rb_fork, .clear = rb_clear, .pos = rb_pos,
	.view = rb_view, .reuse = rb_reuse, .stats = rb_stats, .destroy = rb_destroy,
};

int kv_recurrent_wrap(struct kv_backing *inner, int32_t n_seq, int64_t rs_floats,
		      struct kv_backing **out)
{
	*out = NULL;
	struct rec_backing *r = fx_calloc(1, sizeof(*r));
	float *st = n_seq > 0 && rs_floats > 0
			    ? fx_calloc((size_t)n_seq * (size_t)rs_floats, sizeof(float)) : NULL;
	if (!r || !st) {
		fx_free(r);
		fx_free(st);
		kv_destroy(inner);
		return FX_E_NOMEM;
	}
	*r = (struct rec_backing){ .base = { .ops = &rec_ops, .n_seq = inner->n_seq,
					     .n_ctx = inner->n_ctx },
				   .inner = inner, .floats = rs_floats, .state = st };
	*out = &r->base;
	return FX_OK;
}
