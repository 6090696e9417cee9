/* Kernel sets by name and the compute roofline's two halves:
 * - fx_kernels_from_name knows fx_kernels_built's names and refuses others;
 * - fx_kernels_peak: every set this CPU runs gives a rate in a physical
 *   range (a broken probe, e.g. a chain the compiler folded, gives 0 or
 *   an impossible rate), bad arguments are errors;
 * - on SmolLM2-135M (repacked at load), a context asking for each x86 set
 *   this CPU runs gives the AUTO context's logits bit for bit, a prefill
 *   and a decode step (the sets compute the same sums: kernels/kern.h),
 *   and fx_context_kernels names the set;
 * - fx_model_macs: SmolLM2's multiply-adds per token, counted by hand.
 * The model part is skipped (77) without the model unless
 * FX_REQUIRE_MODELS=1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

/* Logits of a 41-token prefill's last row then of one decode step,
 * [2 * n_vocab], malloc'ed, or NULL (kernels not run here: *rc says). 41
 * rows: the AMX set's tile kernels take blocks of 16 and 8 of them, the
 * AVX-512 kernels the last one. */
static float *run_with(struct fx_model *m, int32_t kernels, int *rc, const char **name)
{
	enum { N_PROMPT = 41 };
	fx_token toks[N_PROMPT];
	const fx_token next = 1012;
	toks[0] = 1;
	for (int i = 1; i < N_PROMPT; i++)
		toks[i] = (fx_token)(200 + (i * 7919) % 40000);
	struct fx_context_params cp = fx_context_default_params();
	struct fx_context *ctx = NULL;
	struct fx_err err = { 0 };
	size_t n = (size_t)fx_model_n_vocab(m);
	float *out = NULL;
	cp.n_ctx = 64;
	cp.n_threads = 2;
	cp.kernels = kernels;
	if ((*rc = fx_context_create(m, &cp, &ctx, &err)))
		return NULL;
	*name = fx_context_kernels(ctx);
	if (fx_decode(ctx, toks, N_PROMPT, false) == FX_OK && (out = malloc(2 * n * sizeof(float)))) {
		memcpy(out, fx_get_logits(ctx, NULL), n * sizeof(float));
		if (fx_decode(ctx, &next, 1, false) == FX_OK) {
			memcpy(out + n, fx_get_logits(ctx, NULL), n * sizeof(float));
		} else {
			free(out);
			out = NULL;
		}
	}
	fx_context_free(ctx);
	return out;
}

int main(void)
{
	enum { N_SETS = 4 };
	static const char *const sets[N_SETS] = { "avx2", "avxvnni", "avx512", "amx" };
	static const int32_t values[N_SETS] = { FX_KERNELS_AVX2, FX_KERNELS_AVXVNNI, FX_KERNELS_AVX512,
						FX_KERNELS_AMX };
	char built[256];
	snprintf(built, sizeof(built), " %s ", fx_kernels_built());
	int32_t k = -1;
	CHECK(fx_kernels_from_name("auto", &k) == FX_OK && k == FX_KERNELS_AUTO);
	CHECK(fx_kernels_from_name("portable", &k) == FX_OK && k == FX_KERNELS_PORTABLE);
	for (int i = 0; i < N_SETS; i++)
		CHECKF(fx_kernels_from_name(sets[i], &k) == FX_OK && k == values[i], "%s", sets[i]);
	k = 42;
	CHECK(fx_kernels_from_name("avx1024", &k) == FX_E_INVALID && k == 42);
	CHECK(fx_kernels_from_name(NULL, &k) == FX_E_INVALID);

	/* The peak: 1e9 MAC/s a thread is far below any SIMD core since 2013
	 * (>= 32 a cycle at >= 1 GHz), 1e12 far above any vector unit
	 * (vpdpbusd zmm at two a cycle and 6 GHz is 7.7e11); AMX's tiles do
	 * 1024 a cycle (16 x 16 x 64 in 16 cycles): below 7e12 at 6 GHz. */
	struct fx_err err = { 0 };
	double r = 0;
	const char *instr = NULL;
	CHECKF(fx_kernels_peak(FX_KERNELS_AUTO, 2, &r, &instr, &err) == FX_OK && instr && r > 2e9 && r < 1.4e13,
	       "auto: %g MAC/s (%s) %s", r, instr ? instr : "-", err.msg);
	for (int i = 0; i < N_SETS; i++) {
		char want[32];
		snprintf(want, sizeof(want), " %s ", sets[i]);
		int rc = fx_kernels_peak(values[i], 1, &r, &instr, &err);
		if (rc == FX_E_UNSUPPORTED) {
			CHECKF(strstr(err.msg, sets[i]) != NULL, "%s: %s", sets[i], err.msg);
			continue;
		}
		CHECKF(rc == FX_OK && strstr(built, want) && r > 1e9 && r < (values[i] == FX_KERNELS_AMX ? 7e12 : 1e12),
		       "%s: rc %d, %g MAC/s (%s)",
		       sets[i], rc, r, instr);
		printf("peak %-8s %-20s %.1f GMAC/s on 1 thread\n", sets[i], instr, r / 1e9);
	}
	CHECK(fx_kernels_peak(FX_KERNELS_AUTO, 0, &r, NULL, &err) == FX_E_INVALID && r == 0);
	CHECK(fx_kernels_peak(FX_KERNELS_AUTO, 257, &r, NULL, &err) == FX_E_INVALID);
	CHECK(fx_kernels_peak(99, 1, &r, NULL, &err) == FX_E_INVALID);
	CHECK(fx_kernels_peak(-1, 1, &r, NULL, &err) == FX_E_INVALID);
	CHECK(fx_kernels_peak(FX_KERNELS_AUTO, 1, NULL, NULL, &err) == FX_E_INVALID);

	char buf[4096];
	const char *path = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));
	if (!path)
		return check_failures ? check_exit() : 77;
	struct fx_model *m = NULL;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(0, "load: %s", err.msg);
		return check_exit();
	}
	/* 30 layers of q, o (576 x 576), k, v (576 x 192), gate, up, down
	 * (576 x 1536); the tied head 49152 x 576 */
	uint64_t lay = 0, head = 0;
	fx_model_macs(m, &lay, &head);
	CHECKF(lay == 30ull * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) && head == 49152ull * 576,
	       "macs: layers %llu, head %llu", (unsigned long long)lay, (unsigned long long)head);

	int rc;
	const char *auto_name = NULL, *name = NULL;
	float *ref = run_with(m, FX_KERNELS_AUTO, &rc, &auto_name);
	CHECKF(ref && auto_name && !strcmp(auto_name, fx_kernels_auto()), "auto: rc %d, %s", rc,
	       auto_name ? auto_name : "-");
	size_t n = 2 * (size_t)fx_model_n_vocab(m);
	int ran = 0;
	for (int i = 0; ref && i < N_SETS; i++) {
		float *l = run_with(m, values[i], &rc, &name);
		if (rc == FX_E_UNSUPPORTED)
			continue;
		ran++;
		CHECKF(l && !strcmp(name, sets[i]), "%s: rc %d, named %s", sets[i], rc, name);
		size_t diff = 0;
		for (size_t j = 0; l && j < n; j++)
			diff += memcmp(&l[j], &ref[j], sizeof(float)) != 0;
		CHECKF(l && diff == 0, "%s: %zu of %zu logits differ from the %s set's", sets[i], diff, n,
		       auto_name);
		free(l);
	}
	printf("%d x86 sets ran, each bit-identical to %s\n", ran, auto_name ? auto_name : "-");
	free(ref);
	/* the portable kernels cannot read weights repacked for a SIMD set */
	if (strcmp(fx_kernels_auto(), "portable")) {
		float *p = run_with(m, FX_KERNELS_PORTABLE, &rc, &name);
		CHECK(!p && rc == FX_E_INVALID);
		free(p);
	}
	fx_model_free(m);
	return check_exit();
}
