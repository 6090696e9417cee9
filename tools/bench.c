/* `ferrox bench`: prompt processing (pp) and text generation (tg) speed,
 * as llama-bench measures them (tools/llama-bench/llama-bench.cpp):
 * - ppN: N random token ids (BOS first when the model adds one) decoded
 *   from an empty cache in n_batch chunks; tokens/s = N / time;
 * - tgN: from an empty cache, N single-token decode steps, each fed a
 *   random id; tokens/s = N / time;
 * - one warm-up run of each test first, then -r timed repetitions,
 *   reported as mean +- sample standard deviation of tokens/s.
 * Also reported: peak RSS (getrusage) against weights + KV + scratch, and
 * the decode roofline: the bytes one decode step reads
 * (fx_model_weight_bytes) over a read bandwidth this tool measures by
 * streaming a 1 GiB buffer with the same threads before each tg
 * repetition; and the compute roofline: pp's weight multiply-adds per
 * second (fx_model_macs) over the kernel set's measured integer
 * dot-product peak (fx_kernels_peak).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"

/* xorshift64*: the random ids; a fixed seed so runs are repeatable. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

struct probe {
	const uint64_t *buf;
	size_t n;
	uint64_t sum;
};

/* Eight interleaved streams, each in its own eighth of buf[n]: one stream
 * a thread reads about a quarter less than DRAM gives (19 against 26
 * GB/s on the Xeon VM, 2 threads), too few misses in flight; four to
 * eight streams of 256-bit loads reach it (25-26 GB/s), what the decode
 * kernels' prefetching reaches too. */
enum { PROBE_STREAMS = 8 };
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t probe_streams_avx2(const uint64_t *buf, size_t n)
{
	size_t q = n / PROBE_STREAMS / 8 * 8;
	__m256i acc[PROBE_STREAMS];
	for (int k = 0; k < PROBE_STREAMS; k++)
		acc[k] = _mm256_setzero_si256();
	for (size_t i = 0; i < q; i += 8)
		for (int k = 0; k < PROBE_STREAMS; k++) {
			const __m256i *b = (const __m256i *)(buf + (size_t)k * q + i);
			acc[k] = _mm256_add_epi64(acc[k], _mm256_add_epi64(_mm256_loadu_si256(b),
									  _mm256_loadu_si256(b + 1)));
		}
	__m256i x = acc[0];
	for (int k = 1; k < PROBE_STREAMS; k++)
		x = _mm256_xor_si256(x, acc[k]);
	return (uint64_t)_mm256_extract_epi64(x, 0);
}
#endif

static uint64_t probe_streams(const uint64_t *buf, size_t n)
{
	size_t q = n / PROBE_STREAMS / 8 * 8;
	uint64_t s[PROBE_STREAMS] = { 0 }, x = 0;
	for (size_t i = 0; i < q; i += 8)
		for (int k = 0; k < PROBE_STREAMS; k++) {
			const uint64_t *b = buf + (size_t)k * q + i;
			s[k] += b[0] + b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + b[7];
		}
	for (int k = 0; k < PROBE_STREAMS; k++)
		x ^= s[k];
	return x;
}

static void *probe_read(void *arg)
{
	struct probe *p = arg;
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2")) {
		p->sum = probe_streams_avx2(p->buf, p->n);
		return NULL;
	}
#endif
	p->sum = probe_streams(p->buf, p->n);
	return NULL;
}

/* Read bandwidth in bytes/s: best of 3 passes over buf[n] (1 GiB, more
 * than any cache: the Xeon VM's L3 is 480 MiB) split across n_threads
 * threads (probe_read; 1 GiB divides into whole streams). The machines
 * are shared and their bandwidth drifts by 10-20% within seconds, so the
 * tool probes between the tg repetitions and compares tg with the mean
 * of those probes, not with one taken later. */
static double bandwidth_probe(const uint64_t *buf, size_t n, int n_threads)
{
	if (n_threads < 1)
		n_threads = 1;
	if (n_threads > 64)
		n_threads = 64;
	double best = 0;
	uint64_t sink = 0;
	for (int rep = 0; rep < 3; rep++) {
		pthread_t th[64];
		struct probe pr[64];
		size_t per = n / (size_t)n_threads;
		double t0 = cli_now();
		for (int i = 0; i < n_threads; i++) {
			pr[i] = (struct probe){ .buf = buf + (size_t)i * per, .n = per };
			if (i > 0 && pthread_create(&th[i], NULL, probe_read, &pr[i]))
				probe_read(&pr[i]), th[i] = 0;
		}
		probe_read(&pr[0]);
		for (int i = 1; i < n_threads; i++)
			if (th[i])
				pthread_join(th[i], NULL);
		double dt = cli_now() - t0;
		for (int i = 0; i < n_threads; i++)
			sink ^= pr[i].sum;
		if (dt > 0 && (double)(per * (size_t)n_threads * sizeof(uint64_t)) / dt > best)
			best = (double)(per * (size_t)n_threads * sizeof(uint64_t)) / dt;
	}
	return sink == 42 ? best + 1e-9 : best; /* keep the sums alive */
}

/* The probe's buffer, written once (so its pages exist), or NULL. */
static uint64_t *probe_buffer(size_t n)
{
	uint64_t *buf = malloc(n * sizeof(uint64_t));
	for (size_t i = 0; buf && i < n; i++)
		buf[i] = i;
	return buf;
}

struct stats {
	double mean, sd;
};

static struct stats stats_of(const double *v, int n)
{
	struct stats s = { 0, 0 };
	for (int i = 0; i < n; i++)
		s.mean += v[i];
	s.mean /= n;
	for (int i = 0; i < n && n > 1; i++)
		s.sd += (v[i] - s.mean) * (v[i] - s.mean);
	s.sd = n > 1 ? sqrt(s.sd / (n - 1)) : 0;
	return s;
}

/* One pp run: n_prompt ids from an empty cache in n_batch chunks. */
static int run_pp(struct fx_context *ctx, const struct fx_model *m, int n_prompt, int n_batch,
		  uint64_t *seed, fx_token *ids, double *secs)
{
	int32_t nv = fx_model_n_vocab(m);
	for (int i = 0; i < n_prompt; i++)
		ids[i] = (fx_token)(rnd(seed) % (uint64_t)nv);
	if (fx_add_bos(m))
		ids[0] = fx_token_bos(m);
	fx_context_reset(ctx);
	double t0 = cli_now();
	for (int i = 0; i < n_prompt; i += n_batch) {
		int n = n_prompt - i < n_batch ? n_prompt - i : n_batch;
		int rc = fx_decode(ctx, ids + i, n, false);
		if (rc)
			return rc;
	}
	*secs = cli_now() - t0;
	return FX_OK;
}

/* One tg run: n_gen single-token steps from an empty cache. */
static int run_tg(struct fx_context *ctx, const struct fx_model *m, int n_gen, uint64_t *seed,
		  double *secs)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token t = fx_add_bos(m) ? fx_token_bos(m) : (fx_token)(rnd(seed) % (uint64_t)nv);
	fx_context_reset(ctx);
	double t0 = cli_now();
	for (int i = 0; i < n_gen; i++) {
		int rc = fx_decode(ctx, &t, 1, false);
		if (rc)
			return rc;
		t = (fx_token)(rnd(seed) % (uint64_t)nv);
	}
	*secs = cli_now() - t0;
	return FX_OK;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s && s[1] ? s + 1 : p;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const bench_flag_names[] = {
	"-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-r", "--repetitions", "-t", "--threads", "-b", "-ub", "--batch-size", "-o", "--output", "--portable", "--kernels", "-h", "--help", NULL,
};
static const char *const *const bench_flags[] = { bench_flag_names, NULL };

int cmd_bench(int argc, char **argv)
{
	const char *path = NULL, *fmt = "md";
	long long n_prompt = 512, n_gen = 128, reps = 5, threads = 0, n_batch = 512;
	bool portable = false;
	int32_t kernels = FX_KERNELS_AUTO;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); path = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) {
			VAL(); if (!cli_int(a, v, 0, 1 << 20, &n_prompt)) return 2;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) {
			VAL(); if (!cli_int(a, v, 0, 1 << 20, &n_gen)) return 2;
		} else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) {
			VAL(); if (!cli_int(a, v, 1, 1000, &reps)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &threads)) return 2;
		} else if (!strcmp(a, "-b") || !strcmp(a, "-ub") || !strcmp(a, "--batch-size")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 16, &n_batch)) return 2;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			VAL(); fmt = v;
			if (strcmp(fmt, "md") && strcmp(fmt, "json")) {
				fprintf(stderr, "error: -o wants md or json, got '%s'\n", fmt);
				return 2;
			}
		} else if (!strcmp(a, "--portable")) {
			portable = true;
		} else if (!strcmp(a, "--kernels")) {
			VAL();
			if (fx_kernels_from_name(v, &kernels)) {
				fprintf(stderr, "error: --kernels wants one of %s, got '%s'\n",
					fx_kernels_built(), v);
				return 2;
			}
			portable = portable || kernels == FX_KERNELS_PORTABLE;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox bench -m MODEL [-p 512] [-n 128] [-r 5] [-t N] [-b 512] [-o md|json]\n"
			       "                    [--kernels SET | --portable]\n"
			       "pp: -p random ids from an empty cache in -b chunks; tg: -n single-token\n"
			       "steps from an empty cache; mean +- sd of tokens/s over -r runs after one\n"
			       "warm-up (llama-bench's method). Also peak RSS, the decode (bandwidth)\n"
			       "roofline and the compute roofline: pp's weight multiply-adds per second\n"
			       "against this CPU's measured peak for the kernel set's dot instruction.\n"
			       "  -t N         threads (0, the default: one per core)\n"
			       "  -b N         prompt tokens per forward step (512)\n"
			       "  --portable   the portable C kernels instead of the SIMD ones\n"
			       "  --kernels S  one kernel set by name (%s; default: the best)\n",
			       fx_kernels_built());
			return 0;
		} else {
			cli_flag_unknown("bench", bench_flags, a);
			return 2;
		}
#undef VAL
	}
	if (portable && kernels != FX_KERNELS_AUTO && kernels != FX_KERNELS_PORTABLE) {
		fprintf(stderr, "error: --portable and --kernels name two kernel sets: give one\n");
		return 2;
	}
	if (!path) {
		fprintf(stderr, "error: -m MODEL is required (see --help)\n");
		return 2;
	}
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	struct fx_context *ctx = NULL;
	struct fx_model_params mp = fx_model_default_params();
	mp.repack = !portable; /* the portable kernels read plain rows */
	struct cli_progress prog = { 0 }; /* stderr, when a terminal: the table goes to stdout at the end */
	mp.progress = cli_load_progress;
	mp.progress_arg = &prog;
	if (fx_model_load(path, &mp, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = (uint32_t)(n_prompt > n_gen ? n_prompt : n_gen) + 1;
	cp.n_ubatch = (uint32_t)n_batch;
	cp.n_threads = (int32_t)threads;
	cp.kernels = portable ? FX_KERNELS_PORTABLE : kernels;
	if (fx_context_create(m, &cp, &ctx, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		fx_model_free(m);
		return 1;
	}
	int nth = (int)threads;
	if (nth <= 0)
		nth = (int)sysconf(_SC_NPROCESSORS_ONLN);
	fx_token *ids = malloc(sizeof(fx_token) * (size_t)(n_prompt > 0 ? n_prompt : 1));
	double *pp = calloc((size_t)reps, sizeof(double)), *tg = calloc((size_t)reps, sizeof(double));
	uint64_t seed = 0x5DEECE66DULL;
	int rc = (!ids || !pp || !tg) ? FX_E_NOMEM : FX_OK;
	double secs;
	/* progress in tokens: each pp run n_prompt, each tg run n_gen */
	double work = (double)(reps + 1) * (double)n_prompt + (double)reps * (double)n_gen +
		      (double)(n_gen < 16 ? n_gen : 16), done = 0;
	if (!rc && n_prompt > 0) {
		rc = run_pp(ctx, m, (int)n_prompt, (int)n_batch, &seed, ids, &secs); /* warm-up */
		cli_progress(&prog, "bench", done += (double)n_prompt, work);
		for (int r = 0; !rc && r < reps; r++) {
			if (!(rc = run_pp(ctx, m, (int)n_prompt, (int)n_batch, &seed, ids, &secs)))
				pp[r] = (double)n_prompt / secs;
			cli_progress(&prog, "bench", done += (double)n_prompt, work);
		}
	}
	const size_t probe_n = ((size_t)1 << 30) / sizeof(uint64_t);
	uint64_t *probe = NULL;
	double bw = 0;
	int n_bw = 0;
	struct rusage ru; /* peak RSS: read before the probe's buffer exists */
	if (!rc && n_gen > 0) {
		rc = run_tg(ctx, m, (int)(n_gen < 16 ? n_gen : 16), &seed, &secs); /* warm-up */
		cli_progress(&prog, "bench", done += (double)(n_gen < 16 ? n_gen : 16), work);
	}
	getrusage(RUSAGE_SELF, &ru);
	probe = rc ? NULL : probe_buffer(probe_n);
	if (!rc && n_gen > 0) {
		for (int r = 0; !rc && r < reps; r++) {
			if (probe)
				bw += bandwidth_probe(probe, probe_n, nth), n_bw++;
			if (!(rc = run_tg(ctx, m, (int)n_gen, &seed, &secs)))
				tg[r] = (double)n_gen / secs;
			cli_progress(&prog, "bench", done += (double)n_gen, work);
		}
	}
	cli_progress(&prog, "bench", work, work); /* ends a line shown */
	if (rc) {
		fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
	} else {
		uint64_t wbytes, step, nparams, kvb, scr;
		fx_model_weight_bytes(m, &wbytes, &step, &nparams);
		fx_context_memory(ctx, &kvb, &scr);
		double rss = (double)ru.ru_maxrss * 1024.0;
		double expect = (double)(wbytes + kvb + scr);
		if (probe && !n_bw)
			bw = bandwidth_probe(probe, probe_n, nth), n_bw = 1;
		bw = n_bw ? bw / n_bw : 0;
		struct stats sp = stats_of(pp, (int)reps), st = stats_of(tg, (int)reps);
		double roof = bw > 0 ? bw / (double)step : 0;
		/* the compute roofline: pp's weight MACs (each chunk's last row
		 * through the LM head) over the set's measured peak */
		uint64_t lay, head;
		fx_model_macs(m, &lay, &head);
		double peak = 0, pp_macs = 0;
		const char *instr = "";
		if (fx_kernels_peak(cp.kernels, nth, &peak, &instr, &err))
			fprintf(stderr, "warning: no compute peak: %s\n", err.msg);
		if (n_prompt > 0)
			pp_macs = sp.mean * ((double)lay + (double)head *
					     (double)((n_prompt + n_batch - 1) / n_batch) / (double)n_prompt);
		const char *name = base_name(path);
		const char *kernels_name = fx_context_kernels(ctx);
		if (!strcmp(fmt, "json")) {
			printf("{\"model\": \"%s\", \"arch\": \"%s\", \"params\": %llu, \"weight_bytes\": %llu,"
			       " \"threads\": %d, \"n_prompt\": %lld, \"n_gen\": %lld, \"reps\": %lld,"
			       " \"pp_tps\": %.3f, \"pp_sd\": %.3f, \"tg_tps\": %.3f, \"tg_sd\": %.3f,"
			       " \"peak_rss_bytes\": %.0f, \"kv_bytes\": %llu, \"scratch_bytes\": %llu,"
			       " \"rss_ratio\": %.4f, \"decode_bytes_per_token\": %llu,"
			       " \"bandwidth_bytes_per_s\": %.0f, \"tg_roofline_tps\": %.3f,"
			       " \"tg_roofline_share\": %.4f, \"kernels\": \"%s\","
			       " \"peak_macs_per_s\": %.0f, \"peak_instr\": \"%s\","
			       " \"pp_macs_per_s\": %.0f, \"pp_compute_share\": %.4f}\n",
			       name, fx_model_arch_name(m), (unsigned long long)nparams,
			       (unsigned long long)wbytes, nth, n_prompt, n_gen, reps, sp.mean, sp.sd,
			       st.mean, st.sd, rss, (unsigned long long)kvb, (unsigned long long)scr,
			       rss / expect, (unsigned long long)step, bw, roof,
			       roof > 0 && n_gen > 0 ? st.mean / roof : 0, kernels_name, peak, instr,
			       pp_macs, peak > 0 ? pp_macs / peak : 0);
		} else {
			if (portable)
				printf("(portable C kernels, plain weight rows)\n\n");
			printf("| model | size | params | threads | test | t/s |\n");
			printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
			if (n_prompt > 0)
				printf("| %s | %.2f MiB | %.2f M | %d | pp%lld | %.2f ± %.2f |\n", name,
				       (double)wbytes / 1048576.0, (double)nparams / 1e6, nth, n_prompt,
				       sp.mean, sp.sd);
			if (n_gen > 0)
				printf("| %s | %.2f MiB | %.2f M | %d | tg%lld | %.2f ± %.2f |\n", name,
				       (double)wbytes / 1048576.0, (double)nparams / 1e6, nth, n_gen,
				       st.mean, st.sd);
			printf("\npeak RSS %.1f MiB = %.3f x (weights %.1f + KV %.1f + scratch %.1f MiB)\n",
			       rss / 1048576.0, rss / expect, (double)wbytes / 1048576.0,
			       (double)kvb / 1048576.0, (double)scr / 1048576.0);
			printf("decode roofline: %.1f MiB read per token / %.2f GB/s measured = %.1f t/s",
			       (double)step / 1048576.0, bw / 1e9, roof);
			if (n_gen > 0)
				printf("; tg is %.0f%% of it", roof > 0 ? 100.0 * st.mean / roof : 0);
			printf("\n");
			if (peak > 0) {
				printf("compute roofline: %s on %d threads, %.1f GMAC/s measured", instr,
				       nth, peak / 1e9);
				if (n_prompt > 0)
					printf("; pp%lld runs %.1f GMAC/s of weight products, %.0f%% of it",
					       n_prompt, pp_macs / 1e9, 100.0 * pp_macs / peak);
				printf("\n");
			}
		}
	}
	free(probe);
	free(ids);
	free(pp);
	free(tg);
	fx_context_free(ctx);
	fx_model_free(m);
	return rc ? 1 : 0;
}
