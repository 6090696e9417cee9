/* How far a streaming read overlaps with the work done on what it reads:
 * the question behind a decode kernel's share of the bandwidth roofline.
 *
 *   build/bin/bench_overlap [-t threads] [-s MiB] [-r runs]
 *
 * Each thread reads its share of an -s MiB buffer (default 1024: past any
 * L3 a VM reports) once, in order, 64 bytes at a time, and does W
 * vpmaddubsw + vpaddw pairs on every 32 bytes it reads (W = 0, 1, 2, 4, 8:
 * a decode kernel does about 1-3 per 32 weight bytes), with and without a
 * software prefetch 3 KiB ahead into L2 (the kernels' PREFETCH_AHEAD).
 * Per W it prints the rate of the work alone (on a buffer that stays in
 * L2) as a multiple of the plain read rate (W = 0, prefetched), and the
 * read rate from DRAM with that work, as a share of the plain one: with
 * full overlap it would stay at 100% while the work is slower than the
 * read. A decode kernel's in-cache rate (bench_kernels) over the read
 * rate says which row it is on.
 * Median of -r runs (default 5), the configurations interleaved so that
 * each sees the same machine. x86-64 with AVX2 only.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PREFETCH = 3072, SMALL = 256 * 1024, MAX_T = 64, MAX_R = 31 };
static const int work_levels[] = { 0, 1, 2, 4, 8 };
#define N_LEVELS ((int)(sizeof(work_levels) / sizeof(work_levels[0])))

struct job {
	const uint8_t *buf;  /* this thread's bytes */
	size_t bytes;        /* per pass */
	int passes, work, prefetch;
	int64_t sink;        /* keeps the work alive */
};

/* W pairs on v: an unsigned x signed byte multiply-add into int16 and an
 * add, on four accumulators so that latency does not bound it. */
static inline __attribute__((always_inline)) void work_on(__m256i v, const int w, __m256i *acc)
{
#pragma GCC unroll 8 /* constant accumulator indices at any -O */
	for (int k = 0; k < w; k++) /* a multiplier of its own each: no common subexpression */
		acc[k & 3] = _mm256_add_epi16(acc[k & 3], _mm256_maddubs_epi16(v, _mm256_set1_epi8((char)(k + 1))));
}

/* One thread's passes with W a constant (the accumulators then stay in
 * registers; indexed by a variable they went through the stack). */
static inline __attribute__((always_inline)) int64_t stream(const struct job *j, const int w)
{
	__m256i acc[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
			   _mm256_setzero_si256() };
	for (int p = 0; p < j->passes; p++) {
		for (size_t o = 0; o < j->bytes; o += 64) {
			const uint8_t *q = j->buf + o;
			if (j->prefetch)
				_mm_prefetch((const char *)q + PREFETCH, _MM_HINT_T1);
			__m256i a = _mm256_load_si256((const __m256i *)q);
			__m256i b = _mm256_load_si256((const __m256i *)(q + 32));
			work_on(a, w, acc);
			work_on(b, w, acc);
			acc[0] = _mm256_add_epi16(acc[0], _mm256_xor_si256(a, b));
		}
	}
	__m256i s = _mm256_add_epi16(_mm256_add_epi16(acc[0], acc[1]), _mm256_add_epi16(acc[2], acc[3]));
	return _mm256_extract_epi64(s, 0);
}

static void *run_job(void *arg)
{
	struct job *j = arg;
	switch (j->work) {
	case 0: j->sink = stream(j, 0); break;
	case 1: j->sink = stream(j, 1); break;
	case 2: j->sink = stream(j, 2); break;
	case 4: j->sink = stream(j, 4); break;
	default: j->sink = stream(j, 8); break;
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GB/s of n_t threads, each over bytes at buf + i * stride, passes times. */
static double rate(const uint8_t *buf, size_t stride, size_t bytes, int passes, int n_t, int work,
		   int prefetch)
{
	pthread_t th[MAX_T];
	struct job jobs[MAX_T];
	double t0 = now();
	for (int i = 0; i < n_t; i++) {
		jobs[i] = (struct job){ buf + (size_t)i * stride, bytes, passes, work, prefetch, 0 };
		if (pthread_create(&th[i], NULL, run_job, &jobs[i])) {
			fprintf(stderr, "bench_overlap: cannot start thread %d\n", i);
			exit(1);
		}
	}
	for (int i = 0; i < n_t; i++)
		pthread_join(th[i], NULL);
	return (double)bytes * passes * n_t / (now() - t0) / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static long arg_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		fprintf(stderr, "bench_overlap: %s wants an integer in %ld..%ld, got '%s'\n", what, lo, hi, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	int n_t = 2, runs = 5;
	long mib = 1024;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t") && i + 1 < argc)
			n_t = (int)arg_long(argv[++i], 1, MAX_T, "-t");
		else if (!strcmp(argv[i], "-s") && i + 1 < argc)
			mib = arg_long(argv[++i], 16, 1L << 20, "-s");
		else if (!strcmp(argv[i], "-r") && i + 1 < argc)
			runs = (int)arg_long(argv[++i], 1, MAX_R, "-r");
		else {
			fprintf(stderr, "usage: bench_overlap [-t threads] [-s MiB] [-r runs]\n");
			return 2;
		}
	}
	size_t total = (size_t)mib << 20, per = total / (size_t)n_t / 64 * 64;
	uint8_t *big = aligned_alloc(4096, total), *small = aligned_alloc(4096, (size_t)SMALL * n_t);
	if (!big || !small) {
		fprintf(stderr, "bench_overlap: cannot allocate %ld MiB\n", mib);
		return 1;
	}
	memset(big, 1, total); /* touched: no page faults while timed */
	memset(small, 1, (size_t)SMALL * n_t);
	int small_passes = (int)(per / SMALL) > 0 ? (int)(per / SMALL) : 1;
	double r[N_LEVELS][3][MAX_R];
	for (int k = 0; k < runs; k++) {
		for (int w = 0; w < N_LEVELS; w++) {
			r[w][0][k] = rate(big, per, per, 1, n_t, work_levels[w], 0);
			r[w][1][k] = rate(big, per, per, 1, n_t, work_levels[w], 1);
			r[w][2][k] = rate(small, SMALL, SMALL, small_passes, n_t, work_levels[w], 0);
		}
	}
	printf("%d threads, %ld MiB read once per run, median of %d runs (GB/s of bytes read)\n\n", n_t, mib,
	       runs);
	printf("| work per 32 B | compute alone (L2) | compute / plain read | DRAM, no prefetch | DRAM, prefetch 3 KiB | prefetched / plain read |\n");
	printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
	double plain = 0;
	for (int w = 0; w < N_LEVELS; w++) {
		double med[3];
		for (int c = 0; c < 3; c++) {
			qsort(r[w][c], (size_t)runs, sizeof(double), by_value);
			med[c] = r[w][c][runs / 2];
		}
		if (w == 0)
			plain = med[1]; /* no work, prefetched: the read rate itself */
		printf("| %d | %.1f | %.2f | %.1f | %.1f | %.0f%% |\n", work_levels[w], med[2], med[2] / plain,
		       med[0], med[1], 100.0 * med[1] / plain);
	}
	free(big);
	free(small);
	return 0;
}
