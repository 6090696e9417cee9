/* ferrox batched-bench: prompt and generation throughput for npl parallel
 * sequences, in the shape of llama.cpp's llama-batched-bench: for each npl,
 * npl prompts of npp tokens are prefilled (one batch, split into ubatches),
 * then ntg steps each decode one token for every sequence. Sequences live
 * in one paged KV pool. Token ids are fixed pseudo-random values: timing
 * does not depend on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"

static int parse_list(const char *s, long long *out, int cap)
{
	int n = 0;
	while (*s && n < cap) {
		char *end;
		long long v = strtoll(s, &end, 10);
		if (end == s || v <= 0 || v > 4096)
			return -1;
		out[n++] = v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -1;
	}
	return n;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const batched_bench_flag_names[] = {
	"-m", "--model", "-npp", "-ntg", "-npl", "-t", "--threads", "-ub", "--ubatch", "--kernels", "-h", "--help", NULL,
};
static const char *const *const batched_bench_flags[] = { batched_bench_flag_names, NULL };

int cmd_batched_bench(int argc, char **argv)
{
	const char *path = NULL;
	long long npp = 128, ntg = 128, threads = 0, ubatch = 512, npl[32] = { 1, 2, 4, 8, 16 };
	int n_npl = 5;
	int32_t kernels = FX_KERNELS_AUTO;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); path = v;
		} else if (!strcmp(a, "-npp")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 16, &npp)) return 2;
		} else if (!strcmp(a, "-ntg")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 16, &ntg)) return 2;
		} else if (!strcmp(a, "-npl")) {
			VAL();
			if ((n_npl = parse_list(v, npl, 32)) <= 0) {
				fprintf(stderr, "error: -npl wants a list like 1,2,4,8, got '%s'\n", v);
				return 2;
			}
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &threads)) return 2;
		} else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 16, &ubatch)) return 2;
		} else if (!strcmp(a, "--kernels")) {
			VAL();
			if (fx_kernels_from_name(v, &kernels) || kernels == FX_KERNELS_PORTABLE) {
				fprintf(stderr, "error: --kernels wants one of %s but portable, got '%s'\n",
					fx_kernels_built(), v);
				return 2;
			}
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox batched-bench -m MODEL [-npp 128] [-ntg 128] "
			       "[-npl 1,2,4,8,16] [-t N] [-ub 512] [--kernels SET]\n"
			       "llama-batched-bench's table, then each row's weight multiply-adds per\n"
			       "second against the kernel set's measured peak (ferrox bench --help).\n");
			return 0;
		} else {
			cli_flag_unknown("batched-bench", batched_bench_flags, a);
			return 2;
		}
#undef VAL
	}
	if (!path) {
		fprintf(stderr, "error: -m MODEL is required\n");
		return 2;
	}
	struct fx_err err = { 0 };
	struct fx_model *m;
	if (fx_model_load(path, NULL, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	int32_t nv = fx_model_n_vocab(m);
	long long max_npl = 0;
	for (int k = 0; k < n_npl; k++)
		max_npl = npl[k] > max_npl ? npl[k] : max_npl;
	size_t rows = (size_t)(max_npl * (npp > 1 ? npp : 1));
	fx_seq *bs = malloc(rows * sizeof(*bs));
	fx_token *bt = malloc(rows * sizeof(*bt));
	fx_seq *ids = malloc((size_t)max_npl * sizeof(*ids));
	int status = 1;
	/* per row: S_PP and S_TG in weight GMAC/s, after the table */
	double *gmac = calloc((size_t)n_npl * 2, sizeof(double));
	int nth = threads > 0 ? (int)threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	const char *kname = "";
	uint64_t lay, head; /* weight multiply-adds a token: layers, LM head */
	fx_model_macs(m, &lay, &head);
	if (!bs || !bt || !ids || !gmac) {
		fprintf(stderr, "error: no memory\n");
		goto out;
	}
	printf("| %5s | %6s | %4s | %6s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "PP", "TG", "B",
	       "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s");
	printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
	for (int k = 0; k < n_npl; k++) {
		long long B = npl[k];
		struct fx_context *ctx = NULL;
		struct fx_context_params cp = fx_context_default_params();
		cp.kv_layout = FX_KV_PAGED;
		cp.block_size = 16;
		cp.n_seq_max = (uint32_t)B;
		cp.n_ctx = (uint32_t)((B * (npp + ntg) + 15) / 16 * 16 + 16 * B);
		cp.n_ubatch = (uint32_t)ubatch;
		cp.n_threads = (int32_t)threads;
		cp.kernels = kernels;
		if (fx_context_create(m, &cp, &ctx, &err)) {
			fprintf(stderr, "error: %s\n", err.msg);
			goto out;
		}
		ids[0] = 0;
		for (long long s = 1; s < B; s++)
			fx_seq_add(ctx, &ids[s]);
		int32_t n = 0;
		for (long long s = 0; s < B; s++)
			for (long long i = 0; i < npp; i++, n++) {
				bs[n] = ids[s];
				bt[n] = (fx_token)((s * 7919 + i * 104729 + 11) % nv);
			}
		struct fx_batch b = { .n = n, .seq = bs, .token = bt };
		double t0 = cli_now();
		int rc = fx_batch_decode(ctx, &b, NULL);
		double t_pp = cli_now() - t0;
		t0 = cli_now();
		for (long long step = 0; step < ntg && !rc; step++) {
			for (long long s = 0; s < B; s++) {
				bs[s] = ids[s];
				bt[s] = (fx_token)((s * 31 + step * 7 + 5) % nv);
			}
			struct fx_batch d = { .n = (int32_t)B, .seq = bs, .token = bt };
			rc = fx_batch_decode(ctx, &d, NULL);
		}
		double t_tg = cli_now() - t0;
		if (rc) {
			fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
			fx_context_free(ctx);
			goto out;
		}
		double npp_all = (double)(B * npp), ntg_all = (double)(B * ntg);
		printf("| %5lld | %6lld | %4lld | %6lld | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n",
		       npp, ntg, B, B * (npp + ntg), t_pp, npp_all / t_pp, t_tg, ntg_all / t_tg,
		       t_pp + t_tg, (npp_all + ntg_all) / (t_pp + t_tg));
		fflush(stdout);
		gmac[2 * k] = ((double)lay * npp_all + (double)head * (double)B) / t_pp / 1e9;
		gmac[2 * k + 1] = ((double)lay + (double)head) * ntg_all / t_tg / 1e9;
		kname = fx_context_kernels(ctx);
		fx_context_free(ctx);
	}
	double peak = 0;
	const char *instr = "";
	if (fx_kernels_peak(kernels, nth, &peak, &instr, &err)) {
		fprintf(stderr, "warning: no compute peak: %s\n", err.msg);
	} else {
		printf("\ncompute roofline (%s set): %s on %d threads, %.1f GMAC/s measured\n", kname,
		       instr, nth, peak / 1e9);
		/* the AMX set's decode steps (at most KERN_NT_MAX rows a call)
		 * run the AVX-512 set's kernels: their share is of that peak */
		double peak_tg = peak;
		const char *instr_tg = NULL;
		if (!strcmp(kname, "amx") && !fx_kernels_peak(FX_KERNELS_AVX512, nth, &peak_tg, &instr_tg, &err))
			printf("generation (the avx512 set's kernels): %s, %.1f GMAC/s measured\n", instr_tg,
			       peak_tg / 1e9);
		else
			peak_tg = peak;
		for (int k = 0; k < n_npl; k++)
			printf("B=%lld: prefill %.1f GMAC/s (%.0f%%), generation %.1f GMAC/s (%.0f%%)\n",
			       npl[k], gmac[2 * k], 100.0 * gmac[2 * k] * 1e9 / peak, gmac[2 * k + 1],
			       100.0 * gmac[2 * k + 1] * 1e9 / peak_tg);
	}
	status = 0;
out:
	free(gmac);
	free(bs);
	free(bt);
	free(ids);
	fx_model_free(m);
	return status;
}
