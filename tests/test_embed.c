/* fx_embed and fx_embed_batch against transformers: tiny checkpoints of
 * tests/fixtures/hf-tiny and hf-tiny-next (three hybrid recurrent), whose last_hidden_state scripts/make-embed-refs.py
 * pooled (last, mean, cls) and normalized into tests/data/embed-refs.json.
 * Each vector within 1e-4 x max(1, max |ref|). Also: the contiguous and
 * paged layouts, another ubatch size and fx_embed_batch give the same bits;
 * the prefix cache serves no row of an embedding; the sequence is empty
 * afterwards; and the refusals (no hidden rows, empty input, bad pooling,
 * a bad token, too long, a busy or unknown sequence, a full pool). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "check.h"
#include "ferrox.h"

#define REFS "tests/data/embed-refs.json"
#define ROOT "tests/fixtures/hf-tiny"
#define TOL 1e-4
#define MAX_IN 8
#define MAX_TOK 512

static const char *const POOL_NAME[] = { "last", "mean", "cls" };

struct input {
	int32_t tok[MAX_TOK];
	int32_t n;
};

static double rel_err(const float *a, const cJSON *ref, int32_t d)
{
	double e = 0, mx = 1;
	int32_t i = 0;
	const cJSON *v;
	cJSON_ArrayForEach(v, ref) {
		if (i >= d)
			return INFINITY;
		e = fmax(e, fabs((double)a[i] - v->valuedouble));
		mx = fmax(mx, fabs(v->valuedouble));
		i++;
	}
	return i == d ? e / mx : INFINITY;
}

static struct fx_context *new_ctx(const struct fx_model *m, int32_t layout, uint32_t n_ctx,
				  uint32_t ubatch, uint32_t n_seq, bool hidden)
{
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = n_ctx;
	cp.n_ubatch = ubatch;
	cp.n_seq_max = n_seq;
	cp.kv_layout = layout;
	cp.hidden = hidden;
	cp.n_threads = 2;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &cp, &c, &err)) {
		fprintf(stderr, "context: %s\n", err.msg);
		check_failures++;
	}
	return c;
}

/* One fixture: every input x pooling x normalize against the references,
 * and the same bits through the other paths. */
static void check_fixture(const char *name, const cJSON *fx)
{
	const cJSON *dj = cJSON_GetObjectItem(fx, "dir");
	const char *dir = cJSON_IsString(dj) ? dj->valuestring : "";
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(dir, NULL, &m, &err)) {
		CHECKF(0, "%s: %s", dir, err.msg);
		return;
	}
	int32_t d = fx_model_n_embd(m);
	struct input in[MAX_IN];
	int n_in = 0;
	const cJSON *ids, *t;
	cJSON_ArrayForEach(ids, cJSON_GetObjectItem(fx, "inputs")) {
		if (n_in == MAX_IN)
			break;
		in[n_in].n = 0;
		cJSON_ArrayForEach(t, ids)
			if (in[n_in].n < MAX_TOK)
				in[n_in].tok[in[n_in].n++] = (int32_t)t->valuedouble;
		n_in++;
	}
	CHECK(n_in >= 3);
	struct fx_context *cc = new_ctx(m, FX_KV_CONTIGUOUS, 256, 64, 1, true);
	struct fx_context *cs = new_ctx(m, FX_KV_CONTIGUOUS, 256, 5, 1, true);
	struct fx_context *pc = new_ctx(m, FX_KV_PAGED, 1024, 64, MAX_IN, true);
	for (int i = 1; pc && i < n_in; i++) {
		fx_seq s;
		CHECK(fx_seq_add(pc, &s) == FX_OK && s == i);
	}
	float *a = malloc((size_t)d * sizeof(float)), *b = malloc((size_t)d * sizeof(float));
	float *all = malloc((size_t)MAX_IN * (size_t)d * sizeof(float));
	double worst = 0;
	/* under ASan (10x slower) the normalized vectors only */
	int norm0 = getenv("FX_SANITIZE_RUN") ? 1 : 0;
	for (int p = 0; cc && cs && pc && a && b && all && p < 3; p++) {
		for (int norm = norm0; norm < 2; norm++) {
			const cJSON *refs = cJSON_GetObjectItem(cJSON_GetObjectItem(fx, norm ? "norm" : "raw"),
								POOL_NAME[p]);
			for (int i = 0; i < n_in; i++) {
				const cJSON *ref = cJSON_GetArrayItem(refs, i);
				int rc = fx_embed(cc, 0, in[i].tok, in[i].n, p, norm, a);
				CHECKF(rc == FX_OK, "%s: %s", name, fx_context_errmsg(cc));
				double e = rel_err(a, ref, d);
				worst = fmax(worst, e);
				CHECKF(e < TOL, "%s input %d (%d tokens) %s%s: error %.3g", name, i, in[i].n,
				       POOL_NAME[p], norm ? " normalized" : "", e);
				CHECK(fx_seq_n_past(cc, 0) == 0);
				/* paged, and chunks of 5 rows: the same bits */
				CHECK(fx_embed(pc, 0, in[i].tok, in[i].n, p, norm, b) == FX_OK);
				CHECKF(!memcmp(a, b, (size_t)d * sizeof(float)), "%s input %d: paged differs", name, i);
				CHECK(fx_embed(cs, 0, in[i].tok, in[i].n, p, norm, b) == FX_OK);
				CHECKF(!memcmp(a, b, (size_t)d * sizeof(float)), "%s input %d: ubatch 5 differs",
				       name, i);
			}
			/* every input at once, in sequences 0..n_in-1 of the paged pool */
			fx_seq seq[MAX_IN];
			const int32_t *tok[MAX_IN];
			int32_t n[MAX_IN];
			for (int i = 0; i < n_in; i++) {
				seq[i] = (fx_seq)(n_in - 1 - i); /* any order of sequences */
				tok[i] = in[i].tok;
				n[i] = in[i].n;
			}
			int rc = fx_embed_batch(pc, n_in, seq, tok, n, p, norm, all);
			CHECKF(rc == FX_OK, "%s batch: %s", name, fx_context_errmsg(pc));
			for (int i = 0; i < n_in; i++) {
				CHECK(fx_embed(cc, 0, in[i].tok, in[i].n, p, norm, a) == FX_OK);
				CHECKF(!memcmp(a, all + (size_t)i * (size_t)d, (size_t)d * sizeof(float)),
				       "%s: batched input %d differs from alone", name, i);
				CHECK(fx_seq_n_past(pc, seq[i]) == 0);
			}
		}
	}
	printf("%-12s d=%d inputs=%d worst error %.3g\n", name, d, n_in, worst);
	/* A prompt decoded (and cached) first: the embedding reuses none of
	 * its blocks and gives the same vector. */
	if (pc && a && b) {
		CHECK(fx_embed(pc, 0, in[0].tok, in[0].n, FX_POOLING_MEAN, true, a) == FX_OK);
		CHECK(fx_decode(pc, in[0].tok, in[0].n, false) == FX_OK);
		fx_seq_free(pc, 0);
		int64_t hits = fx_context_prefix_hits(pc);
		CHECK(fx_embed(pc, 0, in[0].tok, in[0].n, FX_POOLING_MEAN, true, b) == FX_OK);
		CHECK(fx_context_prefix_hits(pc) == hits);
		CHECK(!memcmp(a, b, (size_t)d * sizeof(float)));
		/* and a plain decode after it does reuse its blocks (it was cached;
		 * attention-only models: hybrid ones cache states at snapshots
		 * further apart than these prompts, and cannot roll back) */
		CHECK(fx_decode(pc, in[0].tok, in[0].n, false) == FX_OK);
		CHECKF(in[0].n < 17 || !fx_context_can_roll_back(pc) || fx_context_prefix_hits(pc) > hits,
		       "%s: the cache was not used at all: this check proves nothing", name);
		fx_seq_free(pc, 0);
	}
	free(a);
	free(b);
	free(all);
	fx_context_free(cc);
	fx_context_free(cs);
	fx_context_free(pc);
	fx_model_free(m);
}

static void check_errors(void)
{
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(ROOT "/llama", NULL, &m, &err)) {
		CHECKF(0, "llama: %s", err.msg);
		return;
	}
	int32_t d = fx_model_n_embd(m), nv = fx_model_n_vocab(m);
	float *out = calloc((size_t)4 * (size_t)d, sizeof(float));
	int32_t tok[40];
	for (int i = 0; i < 40; i++)
		tok[i] = (i * 7 + 3) % nv;
	struct fx_context *plain = new_ctx(m, FX_KV_CONTIGUOUS, 32, 32, 2, false);
	struct fx_context *c = new_ctx(m, FX_KV_CONTIGUOUS, 32, 32, 2, true);
	struct fx_context *pg = new_ctx(m, FX_KV_PAGED, 48, 32, 4, true);
	if (!plain || !c || !pg || !out)
		goto out;
	CHECK(fx_embed(plain, 0, tok, 4, FX_POOLING_LAST, true, out) == FX_E_INVALID);
	CHECK(strstr(fx_context_errmsg(plain), "hidden") != NULL);
	CHECK(fx_embed(c, 0, tok, 0, FX_POOLING_LAST, true, out) == FX_E_INVALID);
	CHECK(fx_embed(c, 0, NULL, 4, FX_POOLING_LAST, true, out) == FX_E_INVALID);
	CHECK(fx_embed(c, 0, tok, 4, FX_POOLING_LAST, true, NULL) == FX_E_INVALID);
	CHECK(fx_embed(c, 0, tok, 4, 3, true, out) == FX_E_INVALID);
	CHECK(fx_embed(c, 0, tok, 4, -1, true, out) == FX_E_INVALID);
	CHECK(strstr(fx_context_errmsg(c), "pooling") != NULL);
	CHECK(fx_embed(c, 0, tok, 33, FX_POOLING_MEAN, true, out) == FX_E_CTX_FULL);
	CHECK(fx_embed(c, 1, tok, 4, FX_POOLING_MEAN, true, out) == FX_E_INVALID); /* not added */
	CHECK(fx_embed(c, 7, tok, 4, FX_POOLING_MEAN, true, out) == FX_E_INVALID);
	int32_t bad[3] = { 1, nv, 2 };
	CHECK(fx_embed(c, 0, bad, 3, FX_POOLING_MEAN, true, out) == FX_E_INVALID);
	CHECK(fx_seq_n_past(c, 0) == 0);
	/* a sequence that holds tokens is refused and keeps them */
	CHECK(fx_decode(c, tok, 3, false) == FX_OK);
	CHECK(fx_embed(c, 0, tok, 4, FX_POOLING_MEAN, true, out) == FX_E_INVALID);
	CHECK(fx_seq_n_past(c, 0) == 3);
	fx_context_reset(c);
	CHECK(fx_embed(c, 0, tok, 32, FX_POOLING_MEAN, true, out) == FX_OK);
	/* the same sequence twice in one call */
	fx_seq two[2] = { 0, 0 };
	const int32_t *tp[2] = { tok, tok };
	int32_t nn[2] = { 4, 4 };
	CHECK(fx_embed_batch(c, 2, two, tp, nn, FX_POOLING_LAST, true, out) == FX_E_INVALID);
	/* paged pool of 3 blocks of 16: 3 x 20 tokens (6 blocks) do not fit; every
	 * sequence is empty again and the pool is whole afterwards */
	fx_seq s3[3] = { 0, 1, 2 };
	const int32_t *t3[3] = { tok, tok + 5, tok + 10 };
	int32_t n3[3] = { 20, 20, 20 };
	fx_seq x;
	CHECK(fx_seq_add(pg, &x) == FX_OK && fx_seq_add(pg, &x) == FX_OK);
	CHECK(fx_embed_batch(pg, 3, s3, t3, n3, FX_POOLING_MEAN, true, out) == FX_E_KV_FULL);
	for (int i = 0; i < 3; i++)
		CHECK(fx_seq_n_past(pg, s3[i]) == 0);
	n3[0] = n3[1] = 10; /* one block each */
	n3[2] = 5;
	CHECK(fx_embed_batch(pg, 3, s3, t3, n3, FX_POOLING_MEAN, true, out) == FX_OK);
	CHECK(fx_context_kv_blocks_used(pg) == 0);
	/* a zero hidden vector is not a NaN after normalizing: not reachable
	 * from a model, so the pooled vectors are at least finite and unit */
	double ss = 0;
	for (int32_t i = 0; i < d; i++)
		ss += (double)out[i] * out[i];
	CHECKF(fabs(ss - 1) < 1e-5, "norm^2 %.9f", ss);
out:
	free(out);
	fx_context_free(plain);
	fx_context_free(c);
	fx_context_free(pg);
	fx_model_free(m);
}

int main(void)
{
	size_t n = 0;
	char *txt = check_read_file(REFS, &n);
	if (!txt)
		return check_exit();
	cJSON *j = cJSON_ParseWithLength(txt, n);
	free(txt);
	CHECKF(j != NULL, "%s is not JSON", REFS);
	const cJSON *fx;
	int n_fx = 0;
	cJSON_ArrayForEach(fx, cJSON_GetObjectItem(j, "fixtures")) {
		check_fixture(fx->string, fx);
		n_fx++;
	}
	CHECK(n_fx >= 10);
	check_errors();
	cJSON_Delete(j);
	return check_exit();
}
