/* Paired A/B of two builds of libferrox: decode steps of the same batch
 * alternate between them in one process, so both see the same moments of
 * a noisy machine (run to run drift here is 10-20%, step to step changes
 * are what a build changes by).
 *
 *   ab A.so B.so MODEL N_SEQ ROUNDS [NTG [THREADS]]
 *
 * Each .so (libferrox built with -fPIC and linked whole, see bench/ab.sh)
 * is dlopen'ed with its own symbols and loads its own copy of the model.
 * Per round each gets a fresh paged context, N_SEQ sequences of a
 * 128-token prompt (the batched-bench prompt), then NTG (default 128)
 * decode steps of N_SEQ tokens, the two builds taking turns step by step
 * (ABBA order), each with a pool of THREADS (default 2) threads. Prints the median and mean step time of each and B/A.
 * The first-loaded build can gain or lose a few percent at one sequence
 * (memory placement): bench/ab.sh runs both orders and combines them.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrox.h"

struct api {
	int (*model_load)(const char *, const struct fx_model_params *, struct fx_model **, struct fx_err *);
	struct fx_context_params (*default_params)(void);
	int (*context_create)(const struct fx_model *, const struct fx_context_params *, struct fx_context **,
			      struct fx_err *);
	int (*seq_add)(struct fx_context *, fx_seq *);
	int (*batch_decode)(struct fx_context *, const struct fx_batch *, int *);
	void (*context_free)(struct fx_context *);
	int32_t (*n_vocab)(const struct fx_model *);
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* dlsym into a function pointer without a data/function pointer cast. */
#define SYM(h, dst, name)                                             \
	do {                                                          \
		void *p_ = dlsym(h, name);                            \
		if (!p_) {                                            \
			fprintf(stderr, "ab: %s: no %s\n", so, name); \
			return -1;                                    \
		}                                                     \
		memcpy(&(dst), &p_, sizeof(p_));                      \
	} while (0)

static int load_api(const char *so, struct api *a)
{
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "ab: %s\n", dlerror());
		return -1;
	}
	SYM(h, a->model_load, "fx_model_load");
	SYM(h, a->default_params, "fx_context_default_params");
	SYM(h, a->context_create, "fx_context_create");
	SYM(h, a->seq_add, "fx_seq_add");
	SYM(h, a->batch_decode, "fx_batch_decode");
	SYM(h, a->context_free, "fx_context_free");
	SYM(h, a->n_vocab, "fx_model_n_vocab");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: ab A.so B.so MODEL N_SEQ ROUNDS [NTG [THREADS]]\n");
		return 2;
	}
	enum { NPP = 128 };
	int n_seq = atoi(argv[4]), rounds = atoi(argv[5]), ntg = argc > 6 ? atoi(argv[6]) : 128;
	int threads = argc > 7 ? atoi(argv[7]) : 2;
	if (n_seq < 1 || n_seq > 64 || rounds < 1 || ntg < 1 || threads < 1) {
		fprintf(stderr, "ab: N_SEQ 1..64, ROUNDS, NTG and THREADS at least 1\n");
		return 2;
	}
	struct api api[2];
	struct fx_model *model[2];
	struct fx_err err = { 0 };
	for (int v = 0; v < 2; v++) {
		if (load_api(argv[1 + v], &api[v]))
			return 1;
		if (api[v].model_load(argv[3], NULL, &model[v], &err)) {
			fprintf(stderr, "ab: %s\n", err.msg);
			return 1;
		}
	}
	int32_t nv = api[0].n_vocab(model[0]);
	size_t n_steps = (size_t)rounds * (size_t)ntg;
	double *t[2] = { calloc(n_steps, sizeof(double)), calloc(n_steps, sizeof(double)) };
	fx_seq *bs = malloc(sizeof(*bs) * (size_t)n_seq * NPP);
	fx_token *bt = malloc(sizeof(*bt) * (size_t)n_seq * NPP);
	if (!t[0] || !t[1] || !bs || !bt) {
		fprintf(stderr, "ab: out of memory\n");
		return 1;
	}
	double sum[2] = { 0, 0 };
	for (int r = 0; r < rounds; r++) {
		struct fx_context *ctx[2];
		fx_seq ids[2][64];
		for (int v = 0; v < 2; v++) {
			struct fx_context_params cp = api[v].default_params();
			cp.kv_layout = FX_KV_PAGED;
			cp.block_size = 16;
			cp.n_seq_max = (uint32_t)n_seq;
			cp.n_ctx = (uint32_t)((n_seq * (NPP + ntg) + 15) / 16 * 16 + 16 * n_seq);
			cp.n_threads = threads;
			if (api[v].context_create(model[v], &cp, &ctx[v], &err)) {
				fprintf(stderr, "ab: %s\n", err.msg);
				return 1;
			}
			ids[v][0] = 0; /* a context starts with sequence 0 */
			for (int s = 1; s < n_seq; s++)
				if (api[v].seq_add(ctx[v], &ids[v][s])) {
					fprintf(stderr, "ab: cannot add sequence %d\n", s);
					return 1;
				}
			int32_t n = 0;
			for (int s = 0; s < n_seq; s++)
				for (int i = 0; i < NPP; i++, n++) {
					bs[n] = ids[v][s];
					bt[n] = (fx_token)((s * 7919 + i * 104729 + 11) % nv);
				}
			struct fx_batch b = { .n = n, .seq = bs, .token = bt };
			if (api[v].batch_decode(ctx[v], &b, NULL)) {
				fprintf(stderr, "ab: prefill failed\n");
				return 1;
			}
		}
		for (int step = 0; step < ntg; step++) {
			for (int k = 0; k < 2; k++) {
				int v = (k + step + r) % 2;
				for (int s = 0; s < n_seq; s++) {
					bs[s] = ids[v][s];
					bt[s] = (fx_token)((s * 31 + step * 7 + 5) % nv);
				}
				struct fx_batch d = { .n = n_seq, .seq = bs, .token = bt };
				double t0 = now();
				if (api[v].batch_decode(ctx[v], &d, NULL)) {
					fprintf(stderr, "ab: decode failed\n");
					return 1;
				}
				double dt = now() - t0;
				t[v][(size_t)r * ntg + step] = dt;
				sum[v] += dt;
			}
		}
		for (int v = 0; v < 2; v++)
			api[v].context_free(ctx[v]);
	}
	double med[2];
	for (int v = 0; v < 2; v++) {
		qsort(t[v], n_steps, sizeof(double), cmp_double);
		med[v] = t[v][n_steps / 2];
	}
	printf("n_seq %d: A median %.3f ms mean %.3f | B median %.3f ms mean %.3f | B/A median %.4f mean %.4f\n",
	       n_seq, med[0] * 1e3, sum[0] / (double)n_steps * 1e3, med[1] * 1e3,
	       sum[1] / (double)n_steps * 1e3, med[1] / med[0], sum[1] / sum[0]);
	return 0;
}
