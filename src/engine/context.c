/* A context: the sequences' KV backing (named by the caller at creation,
 * then reached only through src/kv/backing.h's operations), the thread
 * pool and the scratch of the forward pass, all sized at creation (nothing
 * is allocated per token except when a batch wants more logits rows than
 * ever before), and the logits of the last decode. Batches are split into
 * ubatches of at most n_ubatch rows; each row names its own KV view, so
 * rows of different sequences share one forward step and every weight is
 * read once per step. Every ubatch is reserve -> forward -> commit. */
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/threadpool.h"
#include "engine/context.h"
#include "kernels/kern.h"
#include "kv/backing.h"
#include "model/forward.h"
#include "model/model.h"
#include "quant/quant.h"

struct fx_context {
	const struct fx_model *m; /* borrowed */
	uint32_t n_ctx, n_ubatch, n_seq_max;
	int k_type, v_type;
	struct fx_pool *pool;
	struct kern_set kernels;  /* the pool's kernel set (kernels/kern.h) */
	struct kv_backing *kv;    /* every sequence's K/V and position */
	bool *used;               /* [n_seq_max] live sequences */
	bool *shifted;            /* [n_seq_max] rows moved by fx_seq_shift since the
				   * sequence was last emptied: not what a fresh decode
				   * of its tokens computes (fx_seq_state_save refuses) */
	struct fwd_scratch s;
	/* per-ubatch staging, [n_ubatch] each */
	int32_t *pos;
	fx_token *tok;
	fx_seq *ub_seq;           /* each row's sequence */
	int32_t *ub_row;          /* each row's batch row */
	struct kv_view *views;
	bool *want;
	/* per-batch bookkeeping, grown with the largest batch */
	int32_t *row_out;         /* batch row -> logits row, or -1 */
	fx_seq *b_seq;            /* fx_decode's batch view */
	bool *b_keep;             /* rows whose logits are kept */
	bool *b_skip;             /* rows served from the prefix cache */
	fx_token *b_tok;          /* one sequence's tokens, gathered */
	int32_t row_cap;
	int32_t *s_cnt;           /* [n_seq_max] rows per sequence (batch, then ubatch) */
	int32_t *s_start;         /* [n_seq_max] position when the batch began */
	int32_t *s_ub;            /* [n_seq_max] rows per sequence in the ubatch being formed */
	int *s_status;            /* [n_seq_max] per-sequence result */
	float *logits;            /* [logits_rows, n_vocab] */
	int32_t logits_rows, n_logits;
	/* A draft context running the model's multi-token-prediction block
	 * (fx_context_params.mtp), and final hidden rows kept for the caller
	 * (fx_context_params.hidden; an MTP context's own, for chained drafts): */
	bool mtp, keep_hidden;
	uint32_t n_rollback;      /* recurrent states kept per sequence for fx_seq_rm */
	float *ub_hin;            /* [n_ubatch, n_embd] MTP: the ubatch's target hidden rows */
	float *ub_hid;            /* [n_ubatch, n_embd] the ubatch's final hidden rows */
	float *hid;               /* [hid_rows, n_embd] by batch row, of the last batch */
	bool *hid_ok;             /* [hid_rows] the row was computed in the last batch */
	int32_t hid_rows;
	bool no_reuse;            /* this batch computes every row (context_batch_all) */
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

/* The per-layer facts a backing needs: for each layer with K/V (an
 * attention mixer: struct layer's kv_il), its row widths and types and its
 * attention window (sliding layers' rows before it may go); and the
 * recurrent state a sequence carries for the other layers. */
static int kv_for(struct fx_context *c, const struct fx_context_params *p, struct fx_err *err)
{
	const struct hparams *hp = &c->m->hp;
	/* an MTP context holds the blocks' K/V only (their kv_il count them) */
	int il0 = c->mtp ? hp->n_layer : 0, il1 = c->mtp ? hp->n_layer + hp->n_nextn : hp->n_layer;
	int32_t n_kv = c->mtp ? hp->n_nextn : hp->n_layer_kv;
	size_t nkv = (size_t)(n_kv > 0 ? n_kv : 1);
	int32_t *window = fx_calloc(nkv, sizeof(*window));
	int64_t *kw = fx_calloc(nkv, sizeof(*kw)), *vw = fx_calloc(nkv, sizeof(*vw));
	if (!window || !kw || !vw) {
		fx_free(window);
		fx_free(kw);
		fx_free(vw);
		return fx_fail(err, FX_E_NOMEM, "no memory for a KV cache");
	}
	/* each K/V layer's window and row widths, from the layer that owns it */
	for (int il = il0; il < il1; il++) {
		const struct layer *L = &c->m->layers[il];
		if (L->kv_il < 0 || L->kv_shared)
			continue;
		window[L->kv_il] = L->swa && hp->n_swa > 0 ? hp->n_swa : 0;
		kw[L->kv_il] = (int64_t)L->n_head_kv * L->head_dim;
		vw[L->kv_il] = (int64_t)L->n_head_kv * L->head_dim_v;
	}
	struct kv_geom g = { .n_layer = n_kv,
			     .k_width = hp->kv_k_width, .v_width = hp->kv_v_width,
			     .layer_k_width = kw, .layer_v_width = vw,
			     .k_type = c->k_type, .v_type = c->v_type, .window = window,
			     .rs_floats = c->mtp ? 0 : hp->rs_floats,
			     .rs_rollback = (int32_t)c->n_rollback };
	struct kv_shape sh = { .n_seq = (int32_t)c->n_seq_max, .n_ctx = (int32_t)c->n_ctx,
			       .n_ubatch = (int32_t)c->n_ubatch, .block_size = (int32_t)p->block_size,
			       .events = p->kv_events };
	int rc = kv_backing_create(p->kv_layout, &g, &sh, &c->kv, err);
	fx_free(window);
	fx_free(kw);
	fx_free(vw);
	return rc;
}

const char *fx_context_kernels(const struct fx_context *ctx)
{
	return kern_isa_name(ctx->kernels.isa);
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
	 * rows, and fx_batch_decode never advanced. */
	uint64_t n_tokens = (uint64_t)n_ctx * n_seq;
	int kt = p->type_k == FX_KV_DEFAULT ? hp->kv_type : p->type_k;
	int vt = p->type_v == FX_KV_DEFAULT ? hp->kv_type : p->type_v;
	if (!kv_type_ok(kt, hp->head_dim) || !kv_type_ok(vt, hp->head_dim_v) ||
	    !kv_type_ok(kt, hp->head_dim_swa) || !kv_type_ok(vt, hp->head_dim_v_swa))
		return fx_fail(err, FX_E_INVALID,
			       "KV cache types %d/%d: f32 (%d), f16 (%d) and q8_0 (%d, head sizes "
			       "multiple of 32) are supported; this model's heads are %d/%d wide",
			       kt, vt, FX_KV_F32, FX_KV_F16, FX_KV_Q8_0, hp->head_dim, hp->head_dim_v);
	uint32_t n_ub = p->n_ubatch ? p->n_ubatch : n_ctx;
	if (n_ub > n_tokens)
		n_ub = (uint32_t)n_tokens;
	if (p->mtp && hp->n_nextn <= 0)
		return fx_fail(err, FX_E_INVALID, "an MTP context needs a model with multi-token-"
			       "prediction blocks; this %s file has none", m->arch->name);
	/* The prefix cache keys rows by their tokens alone; an MTP row also
	 * depends on the hidden row it was given (a draft's own, or the
	 * target's), so an MTP context keeps its rows per sequence. */
	if (p->mtp && p->kv_layout != FX_KV_CONTIGUOUS)
		return fx_fail(err, FX_E_UNSUPPORTED, "an MTP context uses the contiguous KV layout");
	enum kern_isa isa;
	if ((rc = kern_isa_of(p->kernels, &isa, err)))
		return rc;
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
	c->k_type = kt;
	c->v_type = vt;
	c->mtp = p->mtp;
	c->keep_hidden = p->hidden;
	c->n_rollback = p->n_rollback > 4096 ? 4096 : p->n_rollback;
	if ((rc = fx_pool_create(p->n_threads, &c->pool))) {
		rc = fx_fail(err, rc, "cannot start %d threads", p->n_threads);
		goto fail;
	}
	/* the kernel set, chosen once: every operator reads this table */
	kern_set_init(&c->kernels, isa);
	fx_pool_set_kernels(c->pool, &c->kernels);
	if ((rc = kv_for(c, p, err)))
		goto fail;
	c->used = fx_calloc(n_seq, sizeof(*c->used));
	c->shifted = fx_calloc(n_seq, sizeof(*c->shifted));
	c->s_cnt = fx_calloc(n_seq, sizeof(*c->s_cnt));
	c->s_start = fx_calloc(n_seq, sizeof(*c->s_start));
	c->s_ub = fx_calloc(n_seq, sizeof(*c->s_ub));
	c->s_status = fx_calloc(n_seq, sizeof(*c->s_status));
	if (!c->used || !c->shifted || !c->s_cnt || !c->s_start || !c->s_ub || !c->s_status) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory for %u sequences", n_seq);
		goto fail;
	}
	c->used[0] = true;
	if ((rc = fwd_scratch_init(&c->s, m, (int32_t)n_ub, (int32_t)n_ctx,
				   fx_pool_n_threads(c->pool), c->mtp))) {
		rc = fx_fail(err, rc, "no memory for %u-token batches (try a smaller ubatch)", n_ub);
		goto fail;
	}
	c->pos = fx_calloc(n_ub, sizeof(*c->pos));
	c->tok = fx_calloc(n_ub, sizeof(*c->tok));
	c->ub_seq = fx_calloc(n_ub, sizeof(*c->ub_seq));
	c->ub_row = fx_calloc(n_ub, sizeof(*c->ub_row));
	c->views = fx_calloc(n_ub, sizeof(*c->views));
	c->want = fx_calloc(n_ub, sizeof(*c->want));
	c->logits_rows = 1;
	c->logits = fx_malloc_array((size_t)hp->n_vocab, sizeof(float));
	size_t hd = (size_t)n_ub * (size_t)hp->n_embd;
	if ((c->mtp && !(c->ub_hin = fx_malloc_array(hd, sizeof(float)))) ||
	    ((c->mtp || c->keep_hidden) && !(c->ub_hid = fx_malloc_array(hd, sizeof(float))))) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory for hidden rows");
		goto fail;
	}
	if (!c->pos || !c->tok || !c->ub_seq || !c->ub_row || !c->views || !c->want || !c->logits) {
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
	kv_destroy(c->kv);
	fx_free(c->used);
	fx_free(c->shifted);
	fx_free(c->pos);
	fx_free(c->tok);
	fx_free(c->ub_seq);
	fx_free(c->ub_row);
	fx_free(c->views);
	fx_free(c->want);
	fx_free(c->row_out);
	fx_free(c->b_seq);
	fx_free(c->b_keep);
	fx_free(c->b_skip);
	fx_free(c->b_tok);
	fx_free(c->s_cnt);
	fx_free(c->s_start);
	fx_free(c->s_ub);
	fx_free(c->s_status);
	fx_free(c->logits);
	fx_free(c->ub_hin);
	fx_free(c->ub_hid);
	fx_free(c->hid);
	fx_free(c->hid_ok);
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
	return s >= 0 && (uint32_t)s < c->n_seq_max && c->used[s];
}

int fx_seq_add(struct fx_context *c, fx_seq *out)
{
	for (uint32_t i = 0; i < c->n_seq_max; i++) {
		if (!c->used[i]) {
			c->used[i] = true;
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
	if ((rc = kv_fork(c->kv, src, *out))) {
		c->used[*out] = false;
		return fx_fail(&c->err, rc, "fork: no memory for a block table");
	}
	c->shifted[*out] = c->shifted[src];
	return FX_OK;
}

int fx_seq_rm(struct fx_context *c, fx_seq s, uint32_t pos)
{
	if (!seq_ok(c, s))
		return fx_fail(&c->err, FX_E_INVALID, "seq_rm: sequence %d does not exist", s);
	int32_t p = pos > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)pos;
	int rc = kv_rm(c->kv, s, p);
	if (rc && c->m->hp.rs_floats > 0)
		return fx_fail(&c->err, rc, "seq_rm: sequence %d cannot go back to position %u: its "
			       "recurrent layers keep only the state after its last token (remove "
			       "everything, from position 0, instead)", s, pos);
	if (rc)
		return fx_fail(&c->err, rc, "seq_rm: sequence %d cannot go back to position %u: its "
			       "sliding-window layers already released the rows before it", s, pos);
	return FX_OK;
}

/* kv_shift's re-rotation: every layer's table made once (the backings
 * walk rows by layer, or by block and then layer), rows through f32 in
 * the forward's scratch. */
struct shift_rot {
	const struct fx_model *m;
	bool *rope;      /* [n_layer] the layer has RoPE */
	float *cs;       /* [n_layer][rot] its table for the shift's delta */
	int *model_il;   /* [n_layer] the model layer that owns each K/V layer */
	int rot;         /* cs's stride: the widest n_rot */
	float *row;      /* [k_width] */
	int k_type;
};

static void shift_rot_row(void *ctx, int il, void *k_row)
{
	struct shift_rot *r = ctx;
	if (!r->rope[il])
		return;
	const struct fx_type_traits *t = fx_type_get(r->k_type);
	const struct layer *L = &r->m->layers[r->model_il[il]];
	int64_t kw = (int64_t)L->n_head_kv * L->head_dim;
	t->to_float(k_row, r->row, kw);
	attn_k_shift_row(r->m, r->model_il[il], r->cs + (size_t)il * (size_t)r->rot, r->row);
	t->from_float(r->row, k_row, kw);
}

/* The backing's move with the model's rotation: kv_shift's errors. */
static int shift_kv(struct fx_context *c, fx_seq s, int32_t p0, int32_t delta)
{
	const struct hparams *hp = &c->m->hp;
	struct shift_rot r = { .m = c->m, .row = c->s.k, .k_type = c->k_type };
	r.rot = hp->n_rot > hp->n_rot_swa ? hp->n_rot : hp->n_rot_swa;
	r.rot = r.rot > 0 ? r.rot : 1;
	r.rope = fx_calloc((size_t)hp->n_layer, sizeof(*r.rope));
	r.model_il = fx_calloc((size_t)hp->n_layer, sizeof(*r.model_il));
	r.cs = fx_malloc_array((size_t)hp->n_layer * (size_t)r.rot, sizeof(*r.cs));
	int rc = r.rope && r.cs && r.model_il ? FX_OK : FX_E_NOMEM;
	/* The backing's layers are the K/V layers (struct layer's kv_il); a
	 * KV-shared layer's are its source's. */
	for (int il = 0; !rc && il < hp->n_layer; il++) {
		int32_t kl = c->m->layers[il].kv_il;
		if (kl >= 0 && !c->m->layers[il].kv_shared) {
			r.model_il[kl] = il;
			r.rope[kl] = attn_k_shift_table(c->m, il, delta, r.cs + (size_t)kl * (size_t)r.rot);
		}
	}
	struct kv_rerot rr = { .fn = shift_rot_row, .ctx = &r };
	if (!rc)
		rc = kv_shift(c->kv, s, p0, delta, &rr);
	fx_free(r.rope);
	fx_free(r.model_il);
	fx_free(r.cs);
	return rc;
}

int fx_seq_shift(struct fx_context *c, fx_seq s, int32_t p0, int32_t p1, int32_t delta)
{
	if (!seq_ok(c, s))
		return fx_fail(&c->err, FX_E_INVALID, "seq_shift: sequence %d does not exist", s);
	int32_t n = kv_pos(c->kv, s);
	if (p0 < 0 || p0 > n || (int64_t)p0 + delta < 0 || (p1 >= 0 && p1 < p0))
		return fx_fail(&c->err, FX_E_INVALID, "seq_shift: sequence %d holds %d tokens: p0 %d "
			       "must be in [0, %d], p0 + delta (%d) at least 0 and p1 (%d) < 0 or at least p0", s, n,
			       p0, n, p0 + delta, p1);
	if (delta > 0 || (p1 >= 0 && p1 < n))
		return fx_fail(&c->err, FX_E_UNSUPPORTED, "seq_shift: positions stay dense, so only "
			       "a shift down (delta %d < 0) of the tail (p1 %d < 0 or >= %d) can be "
			       "made", delta, p1, n);
	if (!delta)
		return FX_OK;
	if (p0 == n)
		return fx_seq_rm(c, s, (uint32_t)(n + delta));
	int rc = shift_kv(c, s, p0, delta);
	if (!rc)
		c->shifted[s] = true;
	if (rc == FX_E_UNSUPPORTED && c->m->hp.rs_floats > 0)
		return fx_fail(&c->err, rc, "seq_shift: sequence %d has recurrent layers, whose state "
			       "cannot forget tokens: no context shift for this model", s);
	if (rc == FX_E_UNSUPPORTED)
		return fx_fail(&c->err, rc, "seq_shift: sequence %d's sliding-window layers already "
			       "released rows they would need with %d tokens left (paged layout: shift by "
			       "more, keep fewer tokens, or use the contiguous layout)", s, n + delta);
	if (rc)
		return fx_fail(&c->err, rc, "seq_shift: %s", rc == FX_E_KV_FULL
			       ? "no free KV block for the moved rows (free or finish another sequence)"
			       : "no memory");
	return FX_OK;
}

void fx_seq_free(struct fx_context *c, fx_seq s)
{
	if (!seq_ok(c, s))
		return;
	kv_clear(c->kv, s);
	c->used[s] = s == 0;
	c->shifted[s] = false;
}

int fx_seq_reuse_prefix(struct fx_context *c, fx_seq s, const int32_t *tok, uint32_t n,
			uint32_t *n_reused)
{
	*n_reused = 0;
	if (!seq_ok(c, s))
		return fx_fail(&c->err, FX_E_INVALID, "seq_reuse_prefix: sequence %d does not exist", s);
	if (kv_pos(c->kv, s) || n < 2 || !tok)
		return FX_OK;
	/* The last token is always computed: its logits are what the caller wants. */
	int32_t rows = n > (uint32_t)INT32_MAX ? INT32_MAX : (int32_t)n;
	int32_t got = kv_reuse(c->kv, s, tok, rows, rows - 1);
	*n_reused = got > 0 ? (uint32_t)got : 0;
	return FX_OK;
}

uint32_t fx_seq_n_past(const struct fx_context *c, fx_seq s)
{
	return seq_ok(c, s) ? (uint32_t)kv_pos(c->kv, s) : 0;
}

int32_t fx_context_kv_blocks_used(const struct fx_context *c)
{
	struct kv_stats st;
	kv_get_stats(c->kv, &st);
	return st.blocks_used;
}

int32_t fx_context_kv_blocks_total(const struct fx_context *c)
{
	struct kv_stats st;
	kv_get_stats(c->kv, &st);
	return st.blocks_total;
}

int64_t fx_context_prefix_hits(const struct fx_context *c)
{
	struct kv_stats st;
	kv_get_stats(c->kv, &st);
	return st.prefix_hit_tokens;
}

int64_t fx_context_kv_events(struct fx_context *c, fx_kv_event_fn fn, void *arg)
{
	return c && fn ? kv_events(c->kv, fn, arg) : 0;
}

int64_t fx_context_kv_held(const struct fx_context *c, uint64_t *out, int64_t cap)
{
	return c && (out || cap <= 0) ? kv_held(c->kv, out, cap < 0 ? 0 : cap) : 0;
}

uint32_t fx_context_n_past(const struct fx_context *c)
{
	return (uint32_t)kv_pos(c->kv, 0);
}

void fx_context_reset(struct fx_context *c)
{
	for (uint32_t i = 0; i < c->n_seq_max; i++)
		fx_seq_free(c, (fx_seq)i);
	c->n_logits = 0;
}

/* ---- batches ----------------------------------------------------------- */

/* A new sequence whose first rows repeat cached blocks takes those blocks
 * instead of recomputing them; the rows they cover are skipped. Only rows
 * whose logits are not wanted are skipped, and at least one row is always
 * computed. Returns the rows skipped. */
static int32_t reuse_prefix(struct fx_context *c, const struct fx_batch *b, fx_seq s, int32_t cnt)
{
	int32_t n = 0, first_keep = cnt - 1;
	if (kv_pos(c->kv, s) || cnt < 2 || c->no_reuse)
		return 0;
	for (int32_t i = 0; i < b->n && n < cnt; i++) {
		if (b->seq[i] != s)
			continue;
		if (c->b_keep[i] && n < first_keep)
			first_keep = n;
		c->b_tok[n++] = b->token[i];
	}
	int32_t got = kv_reuse(c->kv, s, c->b_tok, n, first_keep);
	for (int32_t i = 0, k = 0; i < b->n && k < got; i++)
		if (b->seq[i] == s)
			c->b_skip[i] = true, k++;
	return got;
}

/* Check every sequence's cnt[s] rows and have the backing promise room for
 * them; a sequence that does not fit or has a bad token gets its status
 * set and its rows are skipped. Returns the first failure (FX_OK if none). */
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
	kv_begin(c->kv);
	for (uint32_t s = 0; s < c->n_seq_max; s++) {
		if (!cnt[s] || st[s])
			continue;
		int32_t reused = reuse_prefix(c, b, (fx_seq)s, cnt[s]);
		int32_t past = kv_pos(c->kv, (int32_t)s);
		cnt[s] -= reused;
		if ((uint64_t)past + (uint64_t)cnt[s] > c->n_ctx) {
			st[s] = FX_E_CTX_FULL;
			if (!first)
				snprintf(msg, sizeof(msg), "sequence %u: %d tokens + %d new exceed the "
					 "context of %u tokens (raise -c)", s, past, cnt[s], c->n_ctx);
		} else if ((st[s] = kv_admit(c->kv, (int32_t)s, cnt[s], (int32_t)c->n_ubatch)) && !first) {
			snprintf(msg, sizeof(msg), st[s] == FX_E_KV_FULL
				 ? "sequence %u: the KV cache has too few free blocks for %d more "
				   "tokens (queue or preempt it)"
				 : "sequence %u: no memory for its block table (%d more tokens)", s, cnt[s]);
		}
		if (st[s] && reused)
			kv_clear(c->kv, (int32_t)s); /* left as it was: give the cached blocks back */
		c->s_start[s] = kv_pos(c->kv, (int32_t)s) - reused * !st[s];
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

/* Room for the final hidden row of each of rows batch rows. */
static int grow_hidden(struct fx_context *c, int32_t rows)
{
	if (rows <= c->hid_rows)
		return FX_OK;
	float *h = fx_realloc_array(c->hid, (size_t)rows * (size_t)c->m->hp.n_embd, sizeof(float));
	if (h)
		c->hid = h;
	bool *ok = h ? fx_realloc_array(c->hid_ok, (size_t)rows, sizeof(*ok)) : NULL;
	if (!ok)
		return FX_E_NOMEM;
	c->hid_ok = ok;
	c->hid_rows = rows;
	return FX_OK;
}

/* Reserve each sequence's rows of the ubatch staged in c (nb rows). A
 * sequence the backing cannot serve (impossible after kv_admit; kept for
 * safety) is rolled back to where the batch found it, gets status rc, and
 * its rows leave the ubatch. Returns the rows left. */
static int32_t reserve_ubatch(struct fx_context *c, int32_t nb, int *st)
{
	for (int32_t r = 0; r < nb; r++)
		c->s_cnt[c->ub_seq[r]] = 0;
	for (int32_t r = 0; r < nb; r++)
		c->s_cnt[c->ub_seq[r]]++;
	for (int32_t r = 0; r < nb; r++) {
		fx_seq s = c->ub_seq[r];
		if (c->s_cnt[s] <= 0)
			continue; /* reserved */
		int rc = kv_reserve(c->kv, s, c->s_cnt[s]);
		c->s_cnt[s] = 0;
		if (rc) {
			st[s] = rc;
			if (kv_rm(c->kv, s, c->s_start[s]))
				kv_clear(c->kv, s);
		}
	}
	int32_t n = 0;
	for (int32_t r = 0; r < nb; r++) {
		if (st[c->ub_seq[r]])
			continue;
		c->tok[n] = c->tok[r];
		c->ub_seq[n] = c->ub_seq[r];
		c->ub_row[n] = c->ub_row[r];
		c->want[n] = c->want[r];
		n++;
	}
	/* Positions and views once every table has its final size. */
	for (int32_t r = 0; r < n; r++) {
		fx_seq s = c->ub_seq[r];
		c->pos[r] = kv_pos(c->kv, s) + c->s_cnt[s]++;
		c->views[r] = kv_seq_view(c->kv, s);
	}
	return n;
}

/* The forward pass over the nb rows staged in c: the model's layers, or
 * (MTP context) its first multi-token-prediction block on the rows'
 * target hidden states; the final hidden rows to c->hid when kept. */
static void forward_ubatch(struct fx_context *c, const struct fx_batch *b, int32_t nb, float *logits)
{
	const struct fx_model *m = c->m;
	size_t d = (size_t)m->hp.n_embd;
	float *hid = c->keep_hidden ? c->ub_hid : NULL;
	if (c->mtp) {
		for (int32_t r = 0; r < nb; r++)
			memcpy(c->ub_hin + (size_t)r * d, b->hidden + (size_t)c->ub_row[r] * d,
			       d * sizeof(float));
		model_forward_mtp(m, 0, c->pool, &c->s, c->views, c->tok, c->ub_hin, c->pos, nb,
				  c->want, logits, hid);
	} else {
		model_forward(m, c->pool, &c->s, c->views, c->tok, c->pos, nb, c->want, logits, hid);
	}
	for (int32_t r = 0; hid && r < nb; r++) {
		memcpy(c->hid + (size_t)c->ub_row[r] * d, hid + (size_t)r * d, d * sizeof(float));
		c->hid_ok[c->ub_row[r]] = true;
	}
}

int fx_batch_decode(struct fx_context *c, const struct fx_batch *b, int *seq_status)
{
	const struct fx_model *m = c->m;
	int32_t nv = m->hp.n_vocab;
	if (!b || b->n <= 0 || !b->seq || !b->token)
		return fx_fail(&c->err, FX_E_INVALID, "fx_batch_decode: an empty batch");
	if (c->mtp && !b->hidden)
		return fx_fail(&c->err, FX_E_INVALID, "an MTP context needs each row's target hidden "
			       "state (fx_batch.hidden)");
	for (int32_t i = 0; i < b->n; i++)
		if (!seq_ok(c, b->seq[i]))
			return fx_fail(&c->err, FX_E_INVALID, "batch row %d: sequence %d does not exist",
				       i, b->seq[i]);
	if (grow_rows(c, b->n)) {
		/* every sequence of the batch is refused, and seq_status says so
		 * (it once kept the previous batch's values) */
		if (seq_status) {
			memset(seq_status, 0, c->n_seq_max * sizeof(*seq_status));
			for (int32_t i = 0; i < b->n; i++)
				seq_status[b->seq[i]] = FX_E_NOMEM;
		}
		return fx_fail(&c->err, FX_E_NOMEM, "no memory for a batch of %d rows", b->n);
	}
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
	if (grow_logits(c, n_keep) || (c->keep_hidden && grow_hidden(c, b->n))) {
		for (int32_t i = 0; i < b->n; i++)
			st[b->seq[i]] = FX_E_NOMEM;
		if (seq_status)
			memcpy(seq_status, st, c->n_seq_max * sizeof(*st));
		return fx_fail(&c->err, FX_E_NOMEM, "no memory for %d rows of logits", n_keep);
	}
	int rc = admit(c, b, st, cnt);
	/* The admitted rows in ubatches, in batch order, each reserve ->
	 * forward -> commit (a sequence that failed admission, even for
	 * memory, does not stop the others). Kept rows get logits rows in
	 * batch order as they are computed. */
	int32_t done = 0;
	for (int32_t i = 0; i < b->n; i++)
		c->row_out[i] = -1;
	if (c->keep_hidden)
		memset(c->hid_ok, 0, (size_t)b->n * sizeof(*c->hid_ok));
	/* Where the backing keeps state snapshots (hybrid models), a ubatch
	 * ends at them, so the state there exists (kv_snap_every). */
	int32_t every = kv_snap_every(c->kv);
	for (int32_t i = 0; i < b->n;) {
		int32_t nb = 0;
		if (every)
			memset(c->s_ub, 0, c->n_seq_max * sizeof(*c->s_ub));
		for (; i < b->n && nb < (int32_t)c->n_ubatch; i++) {
			if (st[b->seq[i]] || c->b_skip[i])
				continue;
			if (every) {
				fx_seq s = b->seq[i];
				if (c->s_ub[s] && (kv_pos(c->kv, s) + c->s_ub[s]) % every == 0)
					break; /* this row starts the next ubatch */
				c->s_ub[s]++;
			}
			c->tok[nb] = b->token[i];
			c->ub_seq[nb] = b->seq[i];
			c->ub_row[nb] = i;
			c->want[nb++] = c->b_keep[i];
		}
		if (!nb || !(nb = reserve_ubatch(c, nb, st)))
			continue;
		forward_ubatch(c, b, nb, c->logits + (size_t)done * nv);
		for (int32_t r = 0; r < nb; r++) {
			kv_commit(c->kv, c->ub_seq[r], &c->tok[r], 1);
			if (c->want[r])
				c->row_out[c->ub_row[r]] = done++;
		}
	}
	/* A sequence that failed after admission (never expected: kv_admit
	 * promised its room) loses its rows' logits. */
	for (int32_t i = 0; i < b->n; i++)
		if (c->row_out[i] >= 0 && st[b->seq[i]]) {
			c->row_out[i] = -1;
			if (!rc)
				rc = fx_fail(&c->err, st[b->seq[i]], "sequence %d: the KV cache could not "
					     "take its rows; it is back where the batch found it",
					     b->seq[i]);
		}
	c->n_logits = done;
	if (seq_status)
		memcpy(seq_status, st, c->n_seq_max * sizeof(*st));
	return rc;
}

int context_batch_all(struct fx_context *c, const struct fx_batch *b, int *seq_status)
{
	c->no_reuse = true;
	int rc = fx_batch_decode(c, b, seq_status);
	c->no_reuse = false;
	return rc;
}

bool context_keeps_hidden(const struct fx_context *c)
{
	return c->keep_hidden && !c->mtp;
}

void context_seq_empty(struct fx_context *c, fx_seq s)
{
	if (seq_ok(c, s))
		kv_clear(c->kv, s);
}

const float *fx_batch_logits(const struct fx_context *c, int32_t i)
{
	if (i < 0 || i >= c->row_cap || c->row_out[i] < 0 || c->row_out[i] >= c->n_logits)
		return NULL;
	return c->logits + (size_t)c->row_out[i] * (size_t)c->m->hp.n_vocab;
}

const float *fx_batch_hidden(const struct fx_context *c, int32_t i)
{
	if (!c->keep_hidden || i < 0 || i >= c->hid_rows || !c->hid_ok[i])
		return NULL;
	return c->hid + (size_t)i * (size_t)c->m->hp.n_embd;
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
	if (c->mtp)
		return fx_fail(&c->err, FX_E_INVALID, "fx_decode: an MTP context takes fx_batch_decode "
			       "with the target's hidden rows");
	struct fx_batch b = { .n = n, .seq = c->b_seq, .token = tokens, .logits = c->b_keep };
	return fx_batch_decode(c, &b, NULL);
}

const float *fx_get_logits(const struct fx_context *c, int32_t *n_rows)
{
	if (n_rows)
		*n_rows = c->n_logits;
	return c->n_logits ? c->logits : NULL;
}

bool context_seq_ok(const struct fx_context *c, fx_seq s)
{
	return seq_ok(c, s);
}

struct kv_backing *context_kv(struct fx_context *c)
{
	return c->kv;
}

struct fx_err *context_err(struct fx_context *c)
{
	return &c->err;
}

uint32_t context_n_ubatch(const struct fx_context *c)
{
	return c->n_ubatch;
}

bool context_seq_shifted(const struct fx_context *c, fx_seq s)
{
	return seq_ok(c, s) && c->shifted[s];
}

bool context_is_mtp(const struct fx_context *c)
{
	return c->mtp;
}

const struct fx_model *context_model(const struct fx_context *c)
{
	return c->m;
}

int32_t fx_context_roll_back_max(const struct fx_context *c)
{
	return kv_reach(c->kv);
}

bool fx_context_can_roll_back(const struct fx_context *c)
{
	return fx_context_roll_back_max(c) > 0;
}

void context_set_capture(struct fx_context *c, float *buf)
{
	c->s.capture = buf;
}

void fx_context_memory(const struct fx_context *c, uint64_t *kv_bytes, uint64_t *scratch_bytes)
{
	struct kv_stats st;
	kv_get_stats(c->kv, &st);
	*kv_bytes = st.bytes;
	*scratch_bytes = c->s.bytes + (uint64_t)c->logits_rows * (uint64_t)c->m->hp.n_vocab * sizeof(float);
}
