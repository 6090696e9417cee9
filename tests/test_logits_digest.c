/* The logits of every fixture and real model, on every path, as a digest
 * kept in tests/data/logits.digest: a refactor of the engine or the KV
 * backings must leave them bit for bit where they were (issue 20).
 *
 * Per model and kernel set, five paths, each an FNV-1a 64 hash of every
 * logits row it produced (f32 bytes, in order):
 *   single   contiguous, one sequence: prefill in one call, then 4 decodes
 *   chunks   the same with a ubatch of 5 rows
 *   paged    the same on the paged layout (block size 4, ubatch 5)
 *   batch    three sequences interleaved in one fx_batch_decode, then 3
 *            steps of one row each, contiguous caches
 *   pbatch   the same batches on the paged layout
 * Kernel sets: the portable C (weights not repacked) and the best set this
 * CPU runs; a line for a set the reference does not hold (another CPU) is
 * reported and skipped. Sanitizer builds compile at another -O level, whose
 * float code differs in the last bits: they skip (77).
 *
 * FX_DIGEST_WRITE=FILE writes the digests instead (how the reference was
 * made: FX_DIGEST_WRITE=tests/data/logits.digest build/bin/test_logits_digest
 * on each CPU kind, appending a kernel set's lines only once). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"
#include "kernels/kern.h"

#define FIX "tests/fixtures/hf-tiny"
#define REF "tests/data/logits.digest"
#define N_TOK 40

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_UNDEFINED__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct fx_context *ctx(const struct fx_model *m, bool portable, int layout, uint32_t ub,
			      uint32_t n_seq)
{
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 256;
	cp.n_ubatch = ub;
	cp.n_threads = 2;
	cp.n_seq_max = n_seq;
	cp.kv_layout = layout;
	cp.block_size = 4;
	cp.kernels = portable ? FX_KERNELS_PORTABLE : FX_KERNELS_AUTO;
	struct fx_context *c = NULL;
	struct fx_err err;
	if (fx_context_create(m, &cp, &c, &err))
		fprintf(stderr, "context: %s\n", err.msg);
	return c;
}

/* Prefill tok[0..n - 4) in one call (all rows' logits), then the last 4
 * tokens one at a time. */
static uint64_t run_single(const struct fx_model *m, bool portable, int layout, uint32_t ub,
			   const fx_token *tok, int n)
{
	struct fx_context *c = ctx(m, portable, layout, ub, 1);
	uint64_t h = 1469598103934665603ull;
	int32_t nv = fx_model_n_vocab(m), rows;
	if (!c)
		return 0;
	bool ok = fx_decode(c, tok, n - 4, true) == FX_OK;
	const float *l = fx_get_logits(c, &rows);
	if (ok)
		h = fnv(h, l, (size_t)rows * (size_t)nv * sizeof(float));
	for (int i = n - 4; ok && i < n; i++) {
		ok = fx_decode(c, &tok[i], 1, false) == FX_OK;
		if (ok)
			h = fnv(h, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	}
	CHECKF(ok, "decode failed: %s", fx_context_errmsg(c));
	fx_context_free(c);
	return ok ? h : 0;
}

/* Three sequences (tok's first 24, first 13, and 17 from its end,
 * reversed) interleaved row by row in one batch with every row's logits
 * kept; then three steps of one row per sequence. */
static uint64_t run_batch(const struct fx_model *m, bool portable, int layout, const fx_token *tok,
			  int n)
{
	struct fx_context *c = ctx(m, portable, layout, 16, 3);
	uint64_t h = 1469598103934665603ull;
	int32_t nv = fx_model_n_vocab(m);
	fx_seq seq[64], ids[3] = { 0 };
	fx_token bt[64];
	bool keep[64];
	const int len[3] = { 24, 13, 17 };
	if (!c)
		return 0;
	bool ok = fx_seq_add(c, &ids[1]) == FX_OK && fx_seq_add(c, &ids[2]) == FX_OK;
	int nb = 0;
	for (int r = 0; r < 24; r++)
		for (int s = 0; s < 3; s++)
			if (r < len[s]) {
				seq[nb] = ids[s];
				bt[nb] = s == 2 ? tok[n - 1 - r] : tok[r];
				keep[nb++] = true;
			}
	struct fx_batch b = { .n = nb, .seq = seq, .token = bt, .logits = keep };
	ok = ok && fx_batch_decode(c, &b, NULL) == FX_OK;
	for (int i = 0; ok && i < nb; i++)
		h = fnv(h, fx_batch_logits(c, i), (size_t)nv * sizeof(float));
	for (int step = 0; ok && step < 3; step++) {
		for (int s = 0; s < 3; s++) {
			seq[s] = ids[s];
			bt[s] = tok[30 + 3 * step + s];
			keep[s] = true;
		}
		b.n = 3;
		ok = fx_batch_decode(c, &b, NULL) == FX_OK;
		for (int s = 0; ok && s < 3; s++)
			h = fnv(h, fx_batch_logits(c, s), (size_t)nv * sizeof(float));
	}
	CHECKF(ok, "batch failed: %s", fx_context_errmsg(c));
	fx_context_free(c);
	return ok ? h : 0;
}

struct lines {
	char (*l)[128];
	int n, cap;
};

static void add_line(struct lines *ls, const char *s)
{
	/* lines are "model set path hash": short */
	if (ls->n == ls->cap) {
		ls->cap = ls->cap ? 2 * ls->cap : 256;
		ls->l = realloc(ls->l, (size_t)ls->cap * sizeof(*ls->l));
	}
	snprintf(ls->l[ls->n++], sizeof(ls->l[0]), "%.127s", s);
}

/* The reference's hash for key ("model set path"), or NULL. */
static const char *lookup(const struct lines *ref, const char *key)
{
	size_t k = strlen(key);
	for (int i = 0; i < ref->n; i++)
		if (!strncmp(ref->l[i], key, k) && ref->l[i][k] == ' ')
			return ref->l[i] + k + 1;
	return NULL;
}

static const char *set_name(enum kern_isa k)
{
	switch (k) {
	case KERN_PORTABLE: return "portable";
	case KERN_AVX2: return "avx2";
	case KERN_AVXVNNI: return "avxvnni";
	default: return "avx512"; /* and the AMX set: the same bits */
	}
}

static int n_missing, n_checked;

static void one_model(const char *name, const char *path, const struct lines *ref,
		      struct lines *out)
{
	for (int pass = 0; pass < 2; pass++) {
		bool portable = pass == 0;
		struct fx_model_params mp = fx_model_default_params();
		mp.repack = !portable;
		struct fx_model *m = NULL;
		struct fx_err err;
		if (fx_model_load(path, &mp, &m, &err)) {
			CHECKF(0, "%s: %s", name, err.msg);
			return;
		}
		fx_token tok[N_TOK];
		int32_t nv = fx_model_n_vocab(m);
		for (int i = 0; i < N_TOK; i++)
			tok[i] = (fx_token)((1 + (uint32_t)i * 7919u) % (uint32_t)nv);
		const char *set = set_name(portable ? KERN_PORTABLE : kern_isa_best());
		struct { const char *p; uint64_t h; } r[5] = {
			{ "single", run_single(m, portable, FX_KV_CONTIGUOUS, 0, tok, 30) },
			{ "chunks", run_single(m, portable, FX_KV_CONTIGUOUS, 5, tok, 30) },
			{ "paged", run_single(m, portable, FX_KV_PAGED, 5, tok, 30) },
			{ "batch", run_batch(m, portable, FX_KV_CONTIGUOUS, tok, N_TOK) },
			{ "pbatch", run_batch(m, portable, FX_KV_PAGED, tok, N_TOK) },
		};
		/* Layouts and batching change no bit. */
		CHECKF(r[2].h == r[1].h, "%s %s: paged logits differ from contiguous", name, set);
		CHECKF(r[4].h == r[3].h, "%s %s: paged batch differs from contiguous", name, set);
		for (int i = 0; i < 5; i++) {
			char key[96], line[128];
			if (!r[i].h)
				continue; /* failed, reported */
			snprintf(key, sizeof(key), "%s %s %s", name, set, r[i].p);
			snprintf(line, sizeof(line), "%s %016llx", key, (unsigned long long)r[i].h);
			add_line(out, line);
			const char *want = ref ? lookup(ref, key) : NULL;
			if (ref && !want) {
				n_missing++;
				continue;
			}
			if (ref) {
				n_checked++;
				CHECKF(!strcmp(want, line + strlen(key) + 1), "%s: %s, reference %s", key,
				       line + strlen(key) + 1, want);
			}
		}
		fx_model_free(m);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(void)
{
	if (SANITIZED) {
		printf("SKIP: sanitizer builds compile float code at another -O level\n");
		return 77;
	}
	const char *write = getenv("FX_DIGEST_WRITE");
	struct lines ref = { 0 }, out = { 0 };
	if (!write) {
		FILE *f = fopen(REF, "r");
		char buf[256];
		CHECKF(f != NULL, "%s is missing", REF);
		while (f && fgets(buf, sizeof(buf), f)) {
			buf[strcspn(buf, "\n")] = 0;
			if (buf[0] && buf[0] != '#')
				add_line(&ref, buf);
		}
		if (f)
			fclose(f);
	}
	DIR *d = opendir(FIX);
	char *names[64];
	int nn = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && nn < 64)
		if (e->d_name[0] != '.')
			names[nn++] = strdup(e->d_name);
	if (d)
		closedir(d);
	qsort(names, (size_t)nn, sizeof(*names), cmp_str);
	CHECKF(nn >= 20, "%d fixtures in %s, want 20", nn, FIX);
	for (int i = 0; i < nn; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", FIX, names[i]);
		one_model(names[i], path, write ? NULL : &ref, &out);
		free(names[i]);
	}
	/* The default models: quantized kernels, Gemma 3's sliding window. */
	const char *gguf[2][2] = { { "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf" },
				   { "gemma3-270m", "gemma-3-270m-q4_k_m.gguf" } };
	for (int i = 0; i < 2; i++) {
		char buf[512];
		const char *path = check_model_path(gguf[i][1], buf, sizeof(buf));
		if (path)
			one_model(gguf[i][0], path, write ? NULL : &ref, &out);
	}
	if (write) {
		FILE *f = fopen(write, "a");
		CHECKF(f != NULL, "cannot write %s", write);
		for (int i = 0; f && i < out.n; i++)
			fprintf(f, "%s\n", out.l[i]);
		if (f)
			fclose(f);
		printf("wrote %d digests to %s\n", out.n, write);
	} else {
		printf("%d digests checked, %d without a reference on this CPU's kernel set\n",
		       n_checked, n_missing);
	}
	free(ref.l);
	free(out.l);
	return check_exit();
}
