/* One sequence's K/V to a file and back (fx_seq_state_save / _load; what
 * llama.cpp's llama_state_seq_save_file / _load_file do for
 * llama-server's slot save and restore), written against the KV backing's
 * operations only, so the contiguous and paged layouts share it: a save
 * reads rows through kv_seq_view; a load replays the engine's own
 * lifecycle (kv_begin, kv_admit, then per ubatch kv_reserve, the rows
 * written through the view, kv_commit with their tokens), so the paged
 * layout keys the restored full blocks in its prefix cache exactly as if
 * it had computed them.
 *
 * File (host byte order, checked by a marker):
 *   char magic[8] "FXSEQKV1"; u32 version (1); u32 0x01020304;
 *   u64 model id; u32 n_layer; i32 k_type; i32 v_type; u32 n_tok;
 *   u64 rs_floats (the recurrent state's floats, 0: none);
 *   n_layer x { u64 K row bytes; u64 V row bytes }   (each layer's own width)
 *   i32 tokens[n_tok]
 *   per layer: K rows [n_tok], then V rows [n_tok]
 *   f32 state[rs_floats]   (the recurrent layers' state after the tokens)
 *   u64 FNV-1a 64 of every byte before it.
 * The model id hashes the architecture's name, the sizes that shape the
 * K/V and the final norm's weights (a fine-tune of the same shape differs
 * there): a file from another model is refused before a row is read.
 *
 * Recurrent layers (hybrid models): the state after the tokens is stored
 * too. A load then commits all the tokens at once, the state written
 * first, so the one snapshot the recurrent backing may key (at the end,
 * when it falls on its snapshot spacing) is the right one, and the
 * sequence is rebased (kv_rebase): it cannot roll back before the loaded
 * position. Not covered: rows moved by a context shift (not what the
 * tokens compute: keyed in a prefix cache they would be served to prompts
 * they do not belong to) and paged sliding-window rows already released:
 * FX_E_UNSUPPORTED. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/status.h"
#include "engine/context.h"
#include "kv/backing.h"
#include "model/arch.h"
#include "model/model.h"
#include "quant/quant.h"

static const char ST_MAGIC[8] = { 'F', 'X', 'S', 'E', 'Q', 'K', 'V', '1' };
enum { ST_VERSION = 1, ST_ORDER = 0x01020304, ST_FIXED = 48 /* bytes before the row sizes */ };

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define FNV0 0xcbf29ce484222325ull

static uint64_t model_id(const struct fx_model *m)
{
	const struct hparams *hp = &m->hp;
	int64_t v[] = { hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_layer_kv, hp->kv_k_width,
			hp->kv_v_width, hp->n_swa, hp->rs_floats };
	uint64_t h = fnv(FNV0, m->arch->name, strlen(m->arch->name));
	h = fnv(h, v, sizeof(v));
	if (m->output_norm)
		h = fnv(h, m->output_norm, (size_t)hp->n_embd * sizeof(float));
	return h;
}

/* What a sequence's rows look like: per backing layer (kv_il), the bytes
 * of its own K and V rows (a layer may use fewer than the backing's row:
 * Gemma 4), as the file stores them. */
struct st_geom {
	int32_t n_layer;
	int k_type, v_type;
	uint64_t *kb, *vb; /* [n_layer] */
	uint64_t rs_floats; /* recurrent state per sequence, floats */
};

static int geom_of(struct fx_context *c, fx_seq seq, struct st_geom *g)
{
	const struct fx_model *m = context_model(c);
	const struct hparams *hp = &m->hp;
	struct kv_view v = kv_seq_view(context_kv(c), seq);
	g->n_layer = hp->n_layer_kv;
	g->rs_floats = (uint64_t)hp->rs_floats;
	g->k_type = kv_k_type(&v);
	g->v_type = kv_v_type(&v);
	size_t n = (size_t)(g->n_layer > 0 ? g->n_layer : 1);
	g->kb = fx_calloc(n, sizeof(*g->kb));
	g->vb = fx_calloc(n, sizeof(*g->vb));
	if (!g->kb || !g->vb)
		return fx_fail(context_err(c), FX_E_NOMEM, "no memory for a state file's layout");
	for (int il = 0; il < hp->n_layer; il++) {
		const struct layer *L = &m->layers[il];
		if (L->kv_il < 0 || L->kv_shared || L->kv_il >= g->n_layer)
			continue;
		g->kb[L->kv_il] = fx_row_size(g->k_type, (int64_t)L->n_head_kv * L->head_dim);
		g->vb[L->kv_il] = fx_row_size(g->v_type, (int64_t)L->n_head_kv * L->head_dim_v);
	}
	for (int32_t i = 0; i < g->n_layer; i++)
		if (!g->kb[i] || !g->vb[i])
			return fx_fail(context_err(c), FX_E_UNSUPPORTED, "K/V layer %d has no row size "
				       "this file format can store", i);
	return FX_OK;
}

static void geom_fini(struct st_geom *g)
{
	fx_free(g->kb);
	fx_free(g->vb);
}

/* Checks shared by save and load. */
static int seq_check(struct fx_context *c, fx_seq seq, const char *what)
{
	struct fx_err *err = context_err(c);
	if (!context_seq_ok(c, seq))
		return fx_fail(err, FX_E_INVALID, "%s: sequence %d does not exist", what, seq);
	if (context_is_mtp(c))
		return fx_fail(err, FX_E_INVALID, "%s: an MTP draft context's rows depend on hidden "
			       "states the file does not hold", what);
	return FX_OK;
}

/* ---- writing and reading, hashed ---- */

struct st_io {
	FILE *f;
	uint64_t h;
	bool ok;
};

static void put(struct st_io *w, const void *p, size_t n)
{
	if (!w->ok)
		return;
	w->h = fnv(w->h, p, n);
	w->ok = fwrite(p, 1, n, w->f) == n;
}

static bool get(struct st_io *r, void *p, size_t n)
{
	if (fread(p, 1, n, r->f) != n)
		return false;
	r->h = fnv(r->h, p, n);
	return true;
}

int fx_seq_state_save(struct fx_context *c, fx_seq seq, const char *path, const fx_token *tok,
		      uint32_t n_tok, uint64_t *n_bytes)
{
	struct fx_err *err = context_err(c);
	if (n_bytes)
		*n_bytes = 0;
	int rc = seq_check(c, seq, "seq_state_save");
	if (rc)
		return rc;
	struct kv_backing *kv = context_kv(c);
	int32_t n = kv_pos(kv, seq);
	if (!path || (int64_t)n_tok != n || (n && !tok))
		return fx_fail(err, FX_E_INVALID, "seq_state_save: sequence %d holds %d tokens; "
			       "%u were given%s", seq, n, n_tok, path ? "" : " (and no path)");
	if (context_seq_shifted(c, seq))
		return fx_fail(err, FX_E_UNSUPPORTED, "seq_state_save: sequence %d's rows were moved "
			       "by a context shift: they are not what its tokens compute", seq);
	if (kv_held_from(kv, seq) > 0)
		return fx_fail(err, FX_E_UNSUPPORTED, "seq_state_save: sequence %d's sliding-window "
			       "layers already released the rows before position %d (save before it "
			       "outgrows the window, or use the contiguous layout)", seq,
			       kv_held_from(kv, seq));
	struct st_geom g = { 0 };
	if ((rc = geom_of(c, seq, &g))) {
		geom_fini(&g);
		return rc;
	}
	struct st_io w = { .f = fopen(path, "wb"), .h = FNV0, .ok = true };
	if (!w.f) {
		geom_fini(&g);
		return fx_fail(err, FX_E_IO, "seq_state_save: cannot create %s: %s", path,
			       strerror(errno));
	}
	uint32_t u[2] = { ST_VERSION, ST_ORDER };
	uint64_t id = model_id(context_model(c));
	int32_t hdr[4] = { g.n_layer, g.k_type, g.v_type, (int32_t)n_tok };
	put(&w, ST_MAGIC, sizeof(ST_MAGIC));
	put(&w, u, sizeof(u));
	put(&w, &id, sizeof(id));
	put(&w, hdr, sizeof(hdr));
	put(&w, &g.rs_floats, sizeof(g.rs_floats));
	for (int32_t il = 0; il < g.n_layer; il++) {
		put(&w, &g.kb[il], sizeof(uint64_t));
		put(&w, &g.vb[il], sizeof(uint64_t));
	}
	if (n)
		put(&w, tok, (size_t)n * sizeof(*tok));
	struct kv_view v = kv_seq_view(kv, seq);
	for (int32_t il = 0; il < g.n_layer; il++) {
		for (int32_t p = 0; p < n; p++)
			put(&w, kv_k_row(&v, il, p), g.kb[il]);
		for (int32_t p = 0; p < n; p++)
			put(&w, kv_v_row(&v, il, p), g.vb[il]);
	}
	if (g.rs_floats)
		put(&w, v.rs, g.rs_floats * sizeof(float));
	uint64_t sum = w.h;
	w.ok = w.ok && fwrite(&sum, sizeof(sum), 1, w.f) == 1;
	long size = w.ok ? ftell(w.f) : -1;
	bool closed = fclose(w.f) == 0;
	geom_fini(&g);
	if (!w.ok || !closed || size < 0) {
		int e = errno;
		remove(path);
		return fx_fail(err, FX_E_IO, "seq_state_save: writing %s failed: %s", path, strerror(e));
	}
	if (n_bytes)
		*n_bytes = (uint64_t)size;
	return FX_OK;
}

/* Read and check the header of r (at its start) against c's model and
 * K/V: on success *n the file's token count and *rows where its rows
 * begin; the file's size must be exactly what the header implies. */
static int read_header(struct fx_context *c, struct st_io *r, const struct st_geom *g,
		       int64_t fsize, const char *path, uint32_t *n, long *rows)
{
	struct fx_err *err = context_err(c);
	char magic[8];
	uint32_t u[2];
	uint64_t id;
	int32_t hdr[4];
	uint64_t rs;
	if (!get(r, magic, sizeof(magic)) || memcmp(magic, ST_MAGIC, sizeof(magic)))
		return fx_fail(err, FX_E_FORMAT, "%s is not a ferrox sequence-state file", path);
	if (!get(r, u, sizeof(u)) || !get(r, &id, sizeof(id)) || !get(r, hdr, sizeof(hdr)) ||
	    !get(r, &rs, sizeof(rs)))
		return fx_fail(err, FX_E_FORMAT, "%s is truncated: its header is incomplete", path);
	if (u[1] != ST_ORDER)
		return fx_fail(err, FX_E_FORMAT, "%s was saved on a machine of the other byte order", path);
	if (u[0] != ST_VERSION)
		return fx_fail(err, FX_E_UNSUPPORTED, "%s is a version %u sequence-state file; this "
			       "build reads version %d", path, u[0], ST_VERSION);
	uint64_t mine = model_id(context_model(c));
	if (id != mine)
		return fx_fail(err, FX_E_INVALID, "%s was saved from another model (id %016llx; this "
			       "model's is %016llx)", path, (unsigned long long)id,
			       (unsigned long long)mine);
	if (hdr[0] != g->n_layer || hdr[1] != g->k_type || hdr[2] != g->v_type || hdr[3] < 0)
		return fx_fail(err, FX_E_INVALID, "%s holds %d K/V layers of types %d/%d; this context "
			       "has %d of types %d/%d (the KV cache types must match)", path, hdr[0],
			       hdr[1], hdr[2], g->n_layer, g->k_type, g->v_type);
	if (rs != g->rs_floats)
		return fx_fail(err, FX_E_INVALID, "%s holds a recurrent state of %llu floats; this "
			       "model's is %llu", path, (unsigned long long)rs,
			       (unsigned long long)g->rs_floats);
	uint64_t per_tok = sizeof(fx_token);
	for (int32_t il = 0; il < g->n_layer; il++) {
		uint64_t b[2];
		if (!get(r, b, sizeof(b)))
			return fx_fail(err, FX_E_FORMAT, "%s is truncated: its header is incomplete", path);
		if (b[0] != g->kb[il] || b[1] != g->vb[il])
			return fx_fail(err, FX_E_INVALID, "%s: layer %d's rows are %llu/%llu bytes; "
				       "this context's are %llu/%llu", path, il, (unsigned long long)b[0],
				       (unsigned long long)b[1], (unsigned long long)g->kb[il],
				       (unsigned long long)g->vb[il]);
		per_tok += b[0] + b[1];
	}
	*n = (uint32_t)hdr[3];
	*rows = (long)(ST_FIXED + 16 * (int64_t)g->n_layer);
	uint64_t want = (uint64_t)*rows + (uint64_t)*n * per_tok + rs * sizeof(float) +
			sizeof(uint64_t);
	if ((uint64_t)fsize != want)
		return fx_fail(err, FX_E_FORMAT, "%s is %s: %lld bytes, its header says %llu", path,
			       (uint64_t)fsize < want ? "truncated" : "longer than its header says",
			       (long long)fsize, (unsigned long long)want);
	return FX_OK;
}

/* The rest of r after its tokens, hashed, against the stored checksum. */
static int check_sum(struct fx_context *c, struct st_io *r, const char *path)
{
	unsigned char buf[1 << 16];
	long here = ftell(r->f);
	if (here < 0 || fseek(r->f, -(long)sizeof(uint64_t), SEEK_END))
		return fx_fail(context_err(c), FX_E_IO, "%s: cannot seek", path);
	long end = ftell(r->f);
	if (end < here || fseek(r->f, here, SEEK_SET))
		return fx_fail(context_err(c), FX_E_IO, "%s: cannot seek", path);
	for (long left = end - here; left > 0;) {
		size_t k = left < (long)sizeof(buf) ? (size_t)left : sizeof(buf);
		if (!get(r, buf, k))
			return fx_fail(context_err(c), FX_E_IO, "%s: read failed", path);
		left -= (long)k;
	}
	uint64_t sum;
	if (fread(&sum, sizeof(sum), 1, r->f) != 1)
		return fx_fail(context_err(c), FX_E_IO, "%s: read failed", path);
	if (sum != r->h)
		return fx_fail(context_err(c), FX_E_FORMAT, "%s is corrupt: its checksum does not match "
			       "its contents", path);
	return FX_OK;
}

/* Rows [p, p + k) of every layer from r (rows section at `rows`) into
 * seq's reserved rows, through the view. */
static int read_rows(struct fx_context *c, FILE *f, long rows, const struct st_geom *g, uint32_t n,
		     fx_seq seq, int32_t p, int32_t k, const char *path)
{
	struct kv_view v = kv_seq_view(context_kv(c), seq);
	long at = rows + (long)n * (long)sizeof(fx_token);
	for (int32_t il = 0; il < g->n_layer; il++) {
		for (int kind = 0; kind < 2; kind++) {
			uint64_t b = kind ? g->vb[il] : g->kb[il];
			if (fseek(f, at + (long)((uint64_t)p * b), SEEK_SET))
				return fx_fail(context_err(c), FX_E_IO, "%s: cannot seek", path);
			for (int32_t r = 0; r < k; r++) {
				void *row = kind ? kv_v_row(&v, il, p + r) : kv_k_row(&v, il, p + r);
				if (fread(row, 1, b, f) != b)
					return fx_fail(context_err(c), FX_E_IO, "%s: read failed", path);
			}
			at += (long)((uint64_t)n * b);
		}
	}
	if (g->rs_floats && p + k == (int32_t)n) {
		/* the state after the tokens, before their commit (which may key it
		 * as a snapshot) */
		size_t nb = g->rs_floats * sizeof(float);
		if (fseek(f, at, SEEK_SET) || fread(v.rs, 1, nb, f) != nb)
			return fx_fail(context_err(c), FX_E_IO, "%s: read failed", path);
	}
	return FX_OK;
}

int fx_seq_state_load(struct fx_context *c, fx_seq seq, const char *path, fx_token *tok_out,
		      uint32_t cap, uint32_t *n_tok, uint64_t *n_bytes)
{
	struct fx_err *err = context_err(c);
	*n_tok = 0;
	if (n_bytes)
		*n_bytes = 0;
	int rc = seq_check(c, seq, "seq_state_load");
	if (rc)
		return rc;
	struct kv_backing *kv = context_kv(c);
	if (!path)
		return fx_fail(err, FX_E_INVALID, "seq_state_load: no path");
	if (kv_pos(kv, seq))
		return fx_fail(err, FX_E_INVALID, "seq_state_load: sequence %d is not empty (%d "
			       "tokens): free it first", seq, kv_pos(kv, seq));
	struct st_geom g = { 0 };
	struct st_io r = { .f = NULL, .h = FNV0 };
	struct stat st;
	uint32_t n = 0;
	long rows = 0;
	if ((rc = geom_of(c, seq, &g)))
		goto out;
	if (!(r.f = fopen(path, "rb")) || fstat(fileno(r.f), &st)) {
		rc = fx_fail(err, FX_E_IO, "seq_state_load: cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	if ((rc = read_header(c, &r, &g, (int64_t)st.st_size, path, &n, &rows)))
		goto out;
	if (n > fx_context_n_ctx(c)) {
		rc = fx_fail(err, FX_E_CTX_FULL, "%s holds %u tokens; this context's sequences hold "
			     "%u", path, n, fx_context_n_ctx(c));
		goto out;
	}
	if (cap < n || (n && !tok_out)) {
		*n_tok = n;
		rc = fx_fail(err, FX_E_INVALID, "%s holds %u tokens; room was given for %u", path, n, cap);
		goto out;
	}
	int32_t nv = context_model(c)->hp.n_vocab;
	if (n && !get(&r, tok_out, (size_t)n * sizeof(*tok_out))) {
		rc = fx_fail(err, FX_E_IO, "%s: read failed", path);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++)
		if (tok_out[i] < 0 || tok_out[i] >= nv) {
			rc = fx_fail(err, FX_E_INVALID, "%s: token %u is %d, outside this model's "
				     "vocabulary of %d", path, i, tok_out[i], nv);
			goto out;
		}
	/* the whole file is checked before a row enters the cache: a restored
	 * block is keyed for every later prompt that shares it */
	if ((rc = check_sum(c, &r, path)))
		goto out;
	/* recurrent: one commit of every token (its state is only the last one's) */
	int32_t n_ub = g.rs_floats ? (n ? (int32_t)n : 1) : (int32_t)context_n_ubatch(c);
	kv_begin(kv);
	if (n && (rc = kv_admit(kv, seq, (int32_t)n, n_ub))) {
		rc = fx_fail(err, rc, "%s: %s", path, rc == FX_E_KV_FULL
			     ? "no free KV blocks for its tokens (finish or free other sequences)"
			     : "no memory for its block table");
		goto out;
	}
	for (int32_t p = 0; p < (int32_t)n; p += n_ub) {
		int32_t k = (int32_t)n - p < n_ub ? (int32_t)n - p : n_ub;
		if ((rc = kv_reserve(kv, seq, k))) {
			rc = fx_fail(err, rc, "%s: no room for its rows", path);
			break;
		}
		if ((rc = read_rows(c, r.f, rows, &g, n, seq, p, k, path)))
			break;
		kv_commit(kv, seq, tok_out + p, k);
	}
	if (rc) {
		kv_clear(kv, seq);
		goto out;
	}
	kv_rebase(kv, seq);
	*n_tok = n;
	if (n_bytes)
		*n_bytes = (uint64_t)st.st_size;
out:
	if (r.f)
		fclose(r.f);
	geom_fini(&g);
	return rc;
}
