/* fx_seq_state_save / fx_seq_state_load (llama-server's slot save and
 * restore) on the tiny fixtures, both layouts:
 *   - a sequence decodes N tokens and is saved; a fresh context loads the
 *     file, gets the same tokens back, and the next token's logits equal
 *     (bit for bit) those of the context that decoded them itself; a file
 *     saved from one layout loads into the other with the same result;
 *   - paged: the loaded full blocks are in the prefix cache: after the
 *     loaded sequence is freed, a new one reuses them (fx_seq_reuse_prefix)
 *     and continues with the same logits;
 *   - errors, each leaving the sequence empty: a truncated file, a flipped
 *     byte (checksum), a file that is not one, a file from another model,
 *     other K/V types, too little room for the tokens, a missing file, a
 *     sequence that is not empty, a wrong token count on save, a shifted
 *     sequence, and (paged, sliding window of 8) released rows;
 *   - a hybrid model (LFM2: short-convolution state + attention rows): the
 *     state is saved too and the next logits are bit-identical; a draft
 *     decoded after the load rolls back, the loaded position does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"

enum { N = 50, BS = 4 };

static fx_token tok(int i, int32_t nv)
{
	return (fx_token)((i * 104729 + 17) % (nv < 4096 ? nv : 4096));
}

static struct fx_context *make(const struct fx_model *m, int layout, int32_t type_k)
{
	struct fx_context_params p = fx_context_default_params();
	p.type_k = type_k;
	p.n_ctx = 256;
	p.n_seq_max = 2;
	p.n_ubatch = 16; /* a load spans several ubatches */
	p.kv_layout = layout;
	p.block_size = BS;
	p.n_threads = 2;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(0, "context: %s", err.msg);
	return c;
}

/* make() with n_rollback states kept per sequence (recurrent models). */
static struct fx_context *make_rb(const struct fx_model *m, int layout, uint32_t n_rollback)
{
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 256;
	p.n_seq_max = 2;
	p.n_ubatch = 16;
	p.kv_layout = layout;
	p.block_size = BS;
	p.n_threads = 2;
	p.n_rollback = n_rollback;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(0, "context: %s", err.msg);
	return c;
}

static struct fx_model *load(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "tests/fixtures/hf-tiny/%s", name);
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(path, NULL, &m, &err))
		CHECKF(0, "%s: %s", name, err.msg);
	return m;
}

static void tmp_path(char *buf, size_t n, const char *tag)
{
	const char *dir = getenv("TMPDIR");
	snprintf(buf, n, "%s/fx_state_%d_%s.bin", dir ? dir : "/tmp", (int)getpid(), tag);
}

/* Decode x[0..N) into seq 0 of c, save it to path; then the logits of
 * token y after them into ref[nv]. */
static bool save_ref(struct fx_context *c, const char *path, const fx_token *x, int n, fx_token y,
		     float *ref, int32_t nv)
{
	uint64_t bytes = 0;
	if (fx_decode(c, x, n, false))
		return false;
	int rc = fx_seq_state_save(c, 0, path, x, (uint32_t)n, &bytes);
	CHECKF(rc == FX_OK, "save: %s", fx_context_errmsg(c));
	CHECK(bytes > (uint64_t)n * sizeof(fx_token));
	if (fx_decode(c, &y, 1, false))
		return false;
	memcpy(ref, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	return rc == FX_OK;
}

/* Load path into seq 0 of c (empty), then the logits of y. */
static bool load_next(struct fx_context *c, const char *path, const fx_token *x, int nx, fx_token y,
		      float *out, int32_t nv)
{
	fx_token got[N + 8];
	uint32_t n = 0;
	uint64_t bytes = 0;
	int rc = fx_seq_state_load(c, 0, path, got, N + 8, &n, &bytes);
	CHECKF(rc == FX_OK, "load: %s", fx_context_errmsg(c));
	if (rc)
		return false;
	CHECK(n == (uint32_t)nx && !memcmp(got, x, sizeof(fx_token) * (size_t)nx));
	CHECK(fx_seq_n_past(c, 0) == (uint32_t)nx);
	CHECK(bytes > 0);
	if (fx_decode(c, &y, 1, false))
		return false;
	memcpy(out, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	return true;
}

/* A copy of src at dst: its first len bytes (len < 0: all), byte at flip
 * (>= 0) inverted. */
static void copy_file(const char *src, const char *dst, long len, long flip)
{
	FILE *a = fopen(src, "rb"), *b = fopen(dst, "wb");
	CHECK(a && b);
	if (!a || !b) {
		if (a)
			fclose(a);
		if (b)
			fclose(b);
		return;
	}
	long i = 0;
	int ch;
	while ((len < 0 || i < len) && (ch = fgetc(a)) != EOF) {
		fputc(i == flip ? ch ^ 0xff : ch, b);
		i++;
	}
	fclose(a);
	fclose(b);
}

static long file_size(const char *p)
{
	FILE *f = fopen(p, "rb");
	long n = -1;
	if (f && !fseek(f, 0, SEEK_END))
		n = ftell(f);
	if (f)
		fclose(f);
	return n;
}

/* Load path into a fresh context's seq 0: expect code `want`, the
 * sequence left empty. */
static void expect_load_fails(const struct fx_model *m, int layout, int32_t type_k,
			      const char *path, uint32_t cap, int want, const char *what)
{
	struct fx_context *c = make(m, layout, type_k);
	if (!c)
		return;
	fx_token got[N + 8];
	uint32_t n = 99;
	int rc = fx_seq_state_load(c, 0, path, got, cap, &n, NULL);
	CHECKF(rc == want, "%s: got %d, want %d (%s)", what, rc, want, fx_context_errmsg(c));
	CHECK(fx_seq_n_past(c, 0) == 0);
	printf("  %s: %s\n", what, fx_context_errmsg(c));
	if (cap == 1) /* too little room: the count needed comes back */
		CHECKF(n > cap, "%s: the count needed, got %u", what, n);
	fx_context_free(c);
}

static void check_model(const char *name, const struct fx_model *m, const struct fx_model *other,
			bool swa)
{
	int32_t nv = fx_model_n_vocab(m);
	/* a sliding window of 8 keeps 8 + 32 rows on the paged layout */
	int n = swa ? 36 : N;
	fx_token x[N], y = tok(n, nv);
	for (int i = 0; i < N; i++)
		x[i] = tok(i, nv);
	float *ref = malloc((size_t)nv * sizeof(float)), *out = malloc((size_t)nv * sizeof(float));
	char path[2][256], bad[256];
	tmp_path(path[0], sizeof(path[0]), "contig");
	tmp_path(path[1], sizeof(path[1]), "paged");
	tmp_path(bad, sizeof(bad), "bad");
	const int layouts[2] = { FX_KV_CONTIGUOUS, FX_KV_PAGED };
	for (int li = 0; li < 2; li++) {
		struct fx_context *c = make(m, layouts[li], FX_KV_DEFAULT);
		if (!c || !save_ref(c, path[li], x, n, y, ref, nv))
			CHECKF(0, "%s: reference run", name);
		fx_context_free(c);
		/* both layouts load both files, bit-identical to the reference */
		for (int lj = 0; lj < 2; lj++) {
			struct fx_context *d = make(m, layouts[lj], FX_KV_DEFAULT);
			if (d && load_next(d, path[li], x, n, y, out, nv))
				CHECKF(!memcmp(out, ref, (size_t)nv * sizeof(float)),
				       "%s: saved %s, loaded %s: logits differ", name, li ? "paged" : "contig",
				       lj ? "paged" : "contig");
			fx_context_free(d);
		}
	}
	/* paged: the loaded blocks serve a later prompt from the prefix cache */
	struct fx_context *c = make(m, FX_KV_PAGED, FX_KV_DEFAULT);
	if (c && load_next(c, path[0], x, n, y, out, nv)) {
		fx_seq_free(c, 0);
		fx_seq s1 = -1;
		uint32_t got = 0;
		fx_token xy[N + 1];
		memcpy(xy, x, sizeof(fx_token) * (size_t)n);
		xy[n] = y;
		CHECK(fx_seq_add(c, &s1) == FX_OK);
		CHECK(fx_seq_reuse_prefix(c, s1, xy, (uint32_t)n + 1, &got) == FX_OK);
		CHECKF(got == (uint32_t)(n / BS * BS), "%s: %u tokens reused, want %d", name, got,
		       n / BS * BS);
		int st[2] = { 0 };
		fx_seq seqs[N + 1];
		for (int i = 0; i <= n; i++)
			seqs[i] = s1;
		struct fx_batch b = { .n = n + 1 - (int32_t)got, .seq = seqs, .token = xy + got };
		CHECK(fx_batch_decode(c, &b, st) == FX_OK && st[s1] == 0);
		const float *l = fx_batch_logits(c, b.n - 1);
		CHECKF(l && !memcmp(l, ref, (size_t)nv * sizeof(float)),
		       "%s: logits after the reused prefix differ", name);
		printf("  %s: %u of %d prompt tokens reused from a loaded state\n", name, got, n + 1);
	}
	fx_context_free(c);

	/* errors */
	long size = file_size(path[0]);
	CHECK(size > 100);
	copy_file(path[0], bad, size - 100, -1);
	expect_load_fails(m, FX_KV_PAGED, FX_KV_DEFAULT, bad, N + 8, FX_E_FORMAT, "truncated");
	copy_file(path[0], bad, 20, -1);
	expect_load_fails(m, FX_KV_CONTIGUOUS, FX_KV_DEFAULT, bad, N + 8, FX_E_FORMAT, "header cut");
	copy_file(path[0], bad, -1, size / 2);
	expect_load_fails(m, FX_KV_PAGED, FX_KV_DEFAULT, bad, N + 8, FX_E_FORMAT, "a flipped byte");
	copy_file(path[0], bad, -1, 0);
	expect_load_fails(m, FX_KV_PAGED, FX_KV_DEFAULT, bad, N + 8, FX_E_FORMAT, "not a state file");
	expect_load_fails(m, FX_KV_PAGED, FX_KV_F16, path[0], N + 8, FX_E_INVALID, "other K/V types");
	expect_load_fails(m, FX_KV_CONTIGUOUS, FX_KV_DEFAULT, path[0], 1, FX_E_INVALID, "no room");
	expect_load_fails(other, FX_KV_CONTIGUOUS, FX_KV_DEFAULT, path[0], N + 8, FX_E_INVALID,
			  "another model");
	remove(bad);
	expect_load_fails(m, FX_KV_CONTIGUOUS, FX_KV_DEFAULT, bad, N + 8, FX_E_IO, "missing file");
	c = make(m, FX_KV_PAGED, FX_KV_DEFAULT);
	if (c) {
		fx_token got[N];
		uint32_t n = 0;
		CHECK(fx_decode(c, x, 3, false) == FX_OK);
		CHECK(fx_seq_state_load(c, 0, path[0], got, N, &n, NULL) == FX_E_INVALID);
		CHECK(fx_seq_n_past(c, 0) == 3); /* not empty: left alone */
		CHECK(fx_seq_state_save(c, 0, bad, x, 2, NULL) == FX_E_INVALID);
		CHECK(fx_seq_state_save(c, 1, bad, x, 0, NULL) == FX_E_INVALID); /* no such sequence */
		CHECK(fx_decode(c, x + 3, N - 3, false) == FX_OK);
		int rc = fx_seq_state_save(c, 0, bad, x, N, NULL);
		if (swa) /* window 8 + 32 kept: rows before 50 - 40 were released */
			CHECKF(rc == FX_E_UNSUPPORTED, "%s: released rows saved (%d)", name, rc);
		else
			CHECK(rc == FX_OK);
		printf("  %s: paged save of %d tokens: %s\n", name, N, rc ? fx_context_errmsg(c) : "ok");
		fx_context_free(c);
	}
	c = make(m, FX_KV_CONTIGUOUS, FX_KV_DEFAULT);
	if (c) {
		CHECK(fx_decode(c, x, N, false) == FX_OK);
		CHECK(fx_seq_shift(c, 0, 20, -1, -8) == FX_OK);
		CHECK(fx_seq_state_save(c, 0, bad, x, N - 8, NULL) == FX_E_UNSUPPORTED);
		fx_context_free(c);
	}
	remove(bad);
	remove(path[0]);
	remove(path[1]);
	free(ref);
	free(out);
}

/* A hybrid model (recurrent state + attention rows): saved and loaded,
 * both layouts and across, with a roll-back ring; the next logits are the
 * reference's bit for bit, the loaded sequence rolls back drafts decoded
 * after it but not to before its loaded position. */
static void check_recurrent(const char *name, const struct fx_model *m)
{
	int32_t nv = fx_model_n_vocab(m);
	enum { NR = 40 };
	fx_token x[NR + 2];
	for (int i = 0; i < NR + 2; i++)
		x[i] = tok(i, nv);
	float *ref = malloc((size_t)nv * sizeof(float)), *out = malloc((size_t)nv * sizeof(float));
	char path[2][256];
	tmp_path(path[0], sizeof(path[0]), "rcontig");
	tmp_path(path[1], sizeof(path[1]), "rpaged");
	const int layouts[2] = { FX_KV_CONTIGUOUS, FX_KV_PAGED };
	for (int li = 0; li < 2; li++) {
		struct fx_context *c = make_rb(m, layouts[li], 4);
		if (!c || !save_ref(c, path[li], x, NR, x[NR], ref, nv))
			CHECKF(0, "%s: reference run", name);
		fx_context_free(c);
		for (int lj = 0; lj < 2; lj++) {
			struct fx_context *d = make_rb(m, layouts[lj], 4);
			if (d && load_next(d, path[li], x, NR, x[NR], out, nv)) {
				CHECKF(!memcmp(out, ref, (size_t)nv * sizeof(float)),
				       "%s: saved %s, loaded %s: logits differ", name,
				       li ? "paged" : "contig", lj ? "paged" : "contig");
				/* a draft after the load rolls back; the loaded position does not */
				CHECK(fx_decode(d, &x[NR + 1], 1, false) == FX_OK);
				CHECK(fx_seq_rm(d, 0, NR + 1) == FX_OK);
				CHECK(fx_seq_n_past(d, 0) == NR + 1);
				CHECK(fx_seq_rm(d, 0, NR - 2) != FX_OK);
				CHECK(fx_seq_n_past(d, 0) == NR + 1);
			}
			fx_context_free(d);
		}
	}
	printf("  %s: recurrent state saved and loaded, both layouts\n", name);
	remove(path[0]);
	remove(path[1]);
	free(ref);
	free(out);
}

int main(void)
{
	static const struct { const char *name; bool swa; } fx[] = {
		{ "llama", false }, { "qwen3", false }, { "gemma3", true },
	};
	struct fx_model *m[3];
	for (int i = 0; i < 3; i++)
		m[i] = load(fx[i].name);
	for (int i = 0; i < 3; i++)
		if (m[i] && m[(i + 1) % 3]) {
			printf("%s\n", fx[i].name);
			check_model(fx[i].name, m[i], m[(i + 1) % 3], fx[i].swa);
		}
	for (int i = 0; i < 3; i++)
		fx_model_free(m[i]);
	struct fx_model *h = load("../hf-tiny-next/lfm2");
	if (h) {
		printf("lfm2\n");
		check_recurrent("lfm2", h);
		fx_model_free(h);
	}
	return check_exit();
}
