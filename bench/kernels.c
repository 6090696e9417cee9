/* Matrix-multiply throughput of ferrox's kernels on random data: for each
 * weight type, an n_out x n_in matrix against n_tok activation rows
 * through op_matmul (the forward pass's path), reported as GMAC/s (best of
 * -r runs). Used to tune the kernels; compare.sh measures whole models.
 *
 *   build/bin/bench_kernels [-t threads] [-k n_in] [-m n_out] [-n n_tok]
 *                           [-r runs] [--portable | --set NAME] [--no-repack] [type ...]
 *
 * Weights are repacked into x8 groups as the model loader does, unless
 * --no-repack (or --portable) keeps plain rows. --set avx2|vnni|avx512: that
 * kernel set instead of the best one the CPU runs (to compare them).
 *
 * Defaults: TinyLlama's ffn_up shape (2048 -> 5632), 512 tokens, 2 threads,
 * 3 runs, every type with a quantizer.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/threadpool.h"
#include "kernels/kern.h"
#include "kernels/ops.h"
#include "kernels/repack.h"
#include "quant/quant.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float frand(unsigned *s)
{
	*s = *s * 1664525u + 1013904223u;
	return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

/* --set's names and the kernel column's, by enum kern_isa. */
static const char *const set_names[] = { "portable", "avx2", "vnni", "avx512", "amx" };

static int bench_type(struct fx_pool *pool, int type, int64_t k, int64_t m, int64_t n, int runs,
		      int repack)
{
	const struct fx_type_traits *tt = fx_type_get(type);
	size_t row = fx_row_size(type, k);
	float *wf = malloc((size_t)k * sizeof(float));
	uint8_t *w = malloc(row * (size_t)m);
	float *x = malloc((size_t)(k * n) * sizeof(float));
	float *y = malloc((size_t)(m * n) * sizeof(float));
	struct wmat wm = { .data = w, .type = type, .n_in = k, .n_out = m, .row_bytes = row };
	void *scratch = malloc(op_matmul_scratch(&wm, n) + 64);
	if (!wf || !w || !x || !y || !scratch) {
		fprintf(stderr, "bench_kernels: out of memory\n");
		return 1;
	}
	unsigned s = 1;
	for (int64_t r = 0; r < m; r++) {
		for (int64_t i = 0; i < k; i++)
			wf[i] = frand(&s);
		tt->from_float(wf, w + (size_t)r * row, k);
	}
	for (int64_t i = 0; i < k * n; i++)
		x[i] = frand(&s);
	/* As the model loader does: x8 groups where the set has a kernel. */
	const struct kern_set *ks = fx_pool_kernels(pool);
	enum kern_isa isa = ks->isa;
	if (repack && m % 8 == 0 && ks->gemm_x8[type]) {
		void *tmp = malloc(8 * row);
		for (int64_t r = 0; r < m; r += 8)
			kern_x8_pack(type, k, w + (size_t)r * row, tmp);
		free(tmp);
		wm.x8 = true;
	}
	double best = 1e30;
	for (int r = 0; r <= runs; r++) { /* run 0 warms up */
		double t0 = now_s();
		op_matmul(pool, &wm, x, n, y, scratch);
		double dt = now_s() - t0;
		if (r > 0 && dt < best)
			best = dt;
	}
	double mac = (double)k * (double)m * (double)n;
	const char *set = set_names[isa];
	/* op_matmul's choice (kern_gemm_x8_for): the AVX-512 and AMX sets'
	 * x8 kernels are 256-bit ones for few activation rows */
	bool narrow = wm.x8 && kern_gemm_x8_for(ks, type, n) != ks->gemm_x8[type];
	char kind[16];
	snprintf(kind, sizeof(kind), "%s%s%s", wm.x8 ? "x8-" : "",
		 ks->dot[type] || ks->gemm[type] || wm.x8 ? set : "portable", narrow ? "/256" : "");
	if (isa == KERN_PORTABLE)
		snprintf(kind, sizeof(kind), "portable");
	printf("%-6s %-13s %6lld x %5lld x %5lld  %8.2f ms  %7.2f  %6.2f\n", tt->name, kind, (long long)m, (long long)k, (long long)n, best * 1e3, mac / best * 1e-9,
	       (double)(row * (size_t)m) / best * 1e-9);
	free(wf);
	free(w);
	free(x);
	free(y);
	free(scratch);
	return 0;
}

static const char usage[] =
	"usage: bench_kernels [-t N] [-k n_in] [-m n_out] [-n n_tok] [-r runs]\n"
	"                     [--portable | --set avx2|vnni|avx512|amx] [--no-repack] [type ...]\n"
	"GMAC/s of an n_out x n_in matrix times n_tok activation rows (op_matmul),\n"
	"best of -r runs, for every named type (default: all with a quantizer).\n"
	"Kernel column: the set (avx2; vnni: AVX2 with AVX-VNNI's dot products;\n"
	"avx512: x8 groups two at a time in 512-bit registers, or /256 where\n"
	"op_matmul takes its 256-bit kernels, for -n 8 or fewer; amx: avx512 with\n"
	"q4_0, q4_1, q5_0, q8_0, q4_K and q6_K on the AMX tiles above -n 8; --set picks a set\n"
	"the CPU and this build run), x8- when repacked (rows in lanes), or portable\n"
	"(no ISA kernel for the type: the scalar C).\n";

/* A positive integer option value, whole string, or -1. */
static long positive(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	return *s && !*end && v > 0 ? v : -1;
}

int main(int argc, char **argv)
{
	int threads = 2, runs = 3, portable = 0, repack = 1, force_set = -1;
	int64_t k = 2048, m = 5632, n = 512;
	const char *names[32];
	int n_names = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		} else if (!strcmp(a, "--portable")) {
			portable = 1;
		} else if (!strcmp(a, "--set") && i + 1 < argc) {
			i++;
			for (int j = KERN_AVX2; j <= KERN_AMX; j++)
				if (!strcmp(argv[i], set_names[j]))
					force_set = j;
			if (force_set < 0) {
				fprintf(stderr, "bench_kernels: --set %s: the sets are avx2, vnni, avx512 and amx (--portable: the C kernels)\n",
					argv[i]);
				return 2;
			}
			if (!kern_isa_runs((enum kern_isa)force_set)) {
				fprintf(stderr, "bench_kernels: --set %s: this CPU, or this build, does not run that set\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(a, "--no-repack")) {
			repack = 0;
		} else if (a[0] == '-' && strlen(a) == 2 && strchr("tkmnr", a[1]) && i + 1 < argc) {
			long v = positive(argv[++i]);
			if (v <= 0) {
				fprintf(stderr, "bench_kernels: %s wants a positive integer, got '%s'\n", a, argv[i]);
				return 2;
			}
			switch (a[1]) {
			case 't': threads = (int)v; break;
			case 'k': k = v; break;
			case 'm': m = v; break;
			case 'n': n = v; break;
			default: runs = (int)v; break;
			}
		} else if (a[0] != '-' && n_names < 32) {
			bool known = false;
			for (int t = 0; t < FX_TYPE_COUNT; t++)
				known |= fx_type_get(t) && !strcmp(fx_type_get(t)->name, a);
			if (!known) {
				fprintf(stderr, "bench_kernels: unknown type '%s' (GGML's names: q4_K, q8_0, f16, ...)\n", a);
				return 2;
			}
			names[n_names++] = a;
		} else {
			fprintf(stderr, "bench_kernels: bad argument '%s'\n%s", a, usage);
			return 2;
		}
	}
	struct fx_pool *pool;
	if (fx_pool_create(threads, &pool)) {
		fprintf(stderr, "bench_kernels: cannot start %d threads\n", threads);
		return 1;
	}
	if (portable && force_set >= 0) {
		fprintf(stderr, "bench_kernels: --portable and --set name different kernels; give one\n");
		return 2;
	}
	enum kern_isa isa = portable ? KERN_PORTABLE : kern_isa_best();
	if (force_set >= 0 && !portable)
		isa = (enum kern_isa)force_set;
	struct kern_set ks;
	kern_set_init(&ks, isa);
	fx_pool_set_kernels(pool, &ks);
	printf("type   kernel        n_out x  n_in x n_tok   time       GMAC/s    weight GB/s\n");
	int rc = 0, shown = 0;
	for (int t = 0; t < FX_TYPE_COUNT && !rc; t++) {
		const struct fx_type_traits *tt = fx_type_get(t);
		if (!tt || !tt->from_float || !tt->vec_dot || t == FX_TYPE_Q8_1 || t == FX_TYPE_Q8_K)
			continue;
		int want = n_names == 0;
		for (int j = 0; j < n_names; j++)
			want |= !strcmp(names[j], tt->name);
		if (!want)
			continue;
		if (fx_row_size(t, k) == 0) {
			fprintf(stderr, "bench_kernels: %s skipped: -k %lld is not a multiple of its %lld-element block\n",
				tt->name, (long long)k, (long long)tt->blck_size);
			continue;
		}
		rc = bench_type(pool, t, k, m, n, runs, repack && !portable);
		shown++;
	}
	fx_pool_free(pool);
	if (!rc && !shown)
		fprintf(stderr, "bench_kernels: no type to measure\n");
	return rc ? rc : shown ? 0 : 1;
}
