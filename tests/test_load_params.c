/* fx_model_params' loading options and fx_model_lock, on SmolLM2-135M:
 * - no_mmap (the file read into memory) gives the mapped model's logits
 *   bit for bit, repacked or not;
 * - progress is called with fractions in [0, 1] that never go back and end
 *   at exactly 1, with its argument; false from it cancels the load
 *   (FX_E_IO, "cancelled", no model);
 * - fx_model_lock locks, or says why not (FX_E_IO, the limit named);
 * - fx_kernels_auto is one of fx_kernels_built's names.
 * Skipped (77) without the model unless FX_REQUIRE_MODELS=1. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

struct prog {
	int calls;
	float last;
	bool backwards, out_of_range;
	int stop_after; /* > 0: false on that call */
};

static bool on_progress(float p, void *arg)
{
	struct prog *pr = arg;
	pr->calls++;
	if (p < pr->last)
		pr->backwards = true;
	if (p < 0 || p > 1)
		pr->out_of_range = true;
	pr->last = p;
	return !(pr->stop_after > 0 && pr->calls >= pr->stop_after);
}

/* Logits of the last of a few prompt tokens, malloc'ed, or NULL. */
static float *logits_of(struct fx_model *m)
{
	static const fx_token toks[] = { 1, 504, 3458, 282, 4649, 314 };
	struct fx_context_params cp = fx_context_default_params();
	struct fx_context *ctx = NULL;
	struct fx_err err = { 0 };
	float *out = NULL;
	cp.n_ctx = 64;
	cp.n_threads = 2;
	if (fx_context_create(m, &cp, &ctx, &err) == FX_OK &&
	    fx_decode(ctx, toks, (int32_t)(sizeof(toks) / sizeof(toks[0])), false) == FX_OK) {
		size_t n = (size_t)fx_model_n_vocab(m);
		if ((out = malloc(n * sizeof(float))))
			memcpy(out, fx_get_logits(ctx, NULL), n * sizeof(float));
	}
	fx_context_free(ctx);
	return out;
}

static float *load_and_run(const char *path, bool no_mmap, bool repack, struct prog *pr)
{
	struct fx_model_params mp = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	mp.no_mmap = no_mmap;
	mp.repack = repack;
	mp.progress = pr ? on_progress : NULL;
	mp.progress_arg = pr;
	int rc = fx_model_load(path, &mp, &m, &err);
	CHECKF(rc == FX_OK, "load (no_mmap %d, repack %d): %s", no_mmap, repack, err.msg);
	if (rc)
		return NULL;
	float *l = logits_of(m);
	CHECK(l != NULL);
	fx_model_free(m);
	return l;
}

int main(void)
{
	char buf[4096];
	const char *path = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));

	const char *built = fx_kernels_built(), *best = fx_kernels_auto();
	char padded[256];
	snprintf(padded, sizeof(padded), " %s ", built);
	char want[64];
	snprintf(want, sizeof(want), " %s ", best);
	CHECKF(strstr(padded, " portable ") && strstr(padded, want), "built '%s', auto '%s'", built, best);
	if (!path)
		return check_failures ? check_exit() : 77;

	for (int repack = 0; repack <= 1; repack++) {
		struct prog pm = { 0 }, pr = { 0 };
		float *a = load_and_run(path, false, repack, &pm), *b = load_and_run(path, true, repack, &pr);
		int32_t n = 49152; /* SmolLM2's vocabulary */
		CHECKF(a && b && !memcmp(a, b, (size_t)n * sizeof(float)), "no_mmap: the same logits (repack %d)",
		       repack);
		for (int k = 0; k < 2; k++) {
			const struct prog *p = k ? &pr : &pm;
			/* a mapped file not repacked is not read at load: only the final 1 */
			CHECKF(p->calls >= (k || repack ? 2 : 1) && p->last == 1.0f && !p->backwards && !p->out_of_range,
			       "progress (no_mmap %d, repack %d): %d calls, last %g, backwards %d, out of range %d", k,
			       repack, p->calls, (double)p->last, p->backwards, p->out_of_range);
		}
		free(a);
		free(b);
	}

	/* cancelled at the first report, mapped and read */
	for (int no_mmap = 0; no_mmap <= 1; no_mmap++) {
		struct prog pc = { .stop_after = 1 };
		struct fx_model_params mp = fx_model_default_params();
		struct fx_model *m = NULL;
		struct fx_err err = { 0 };
		mp.no_mmap = no_mmap;
		mp.progress = on_progress;
		mp.progress_arg = &pc;
		int rc = fx_model_load(path, &mp, &m, &err);
		CHECKF(rc == FX_E_IO && !m && strstr(err.msg, "cancelled"), "cancel (no_mmap %d): %d %s", no_mmap, rc,
		       err.msg);
		CHECK(pc.calls == 1);
		fx_model_free(m);
	}

	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	if (fx_model_load(path, NULL, &m, &err) == FX_OK) {
		int rc = fx_model_lock(m, &err);
		CHECKF(rc == FX_OK || (rc == FX_E_IO && strstr(err.msg, "mlock")), "lock: %d %s", rc, err.msg);
		fx_model_free(m);
	}
	return check_exit();
}
