/* The k-quant quantizers (from_float of q2_K .. q6_K) against llama.cpp.
 *
 * tests/data/quant_k/ (scripts/make-kquant-refs.py) holds f32 tensors and
 * the blocks llama.cpp's llama_model_quantize made of them without an
 * importance matrix. For each type and tensor:
 * - the round-trip RMSE of our blocks (dequantized by our to_float, which
 *   is bit-exact with gguf-py, tests/test_quant.c) is no worse than that
 *   of llama.cpp's blocks: the acceptance test of the quantizers;
 * - our blocks equal llama.cpp's byte for byte (the quantizers follow
 *   quantize_row_q*_K_ref operation for operation; a compiler that
 *   contracts a*b+c into an FMA may still differ in a few blocks, so the
 *   count is printed as well as checked);
 * and on its own data: all-zero blocks give all-zero values, and
 * quantizing one row equals quantizing its blocks one at a time.
 *
 * Run from the repository root (ctest does), so tests/data/ is found.
 */
#include "check.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DATA_DIR "tests/data/quant_k/"
#define MAX_TENSORS 32

static const struct {
	const char *name;
	int type;
} k_types[] = {
	{ "q2_K", FX_TYPE_Q2_K }, { "q3_K", FX_TYPE_Q3_K },
	{ "q4_K", FX_TYPE_Q4_K }, { "q5_K", FX_TYPE_Q5_K },
	{ "q6_K", FX_TYPE_Q6_K },
};
#define N_K_TYPES (sizeof(k_types) / sizeof(k_types[0]))

/* The tensors of tensors.txt: name and value count, in file order. */
struct ref_tensor {
	char name[64];
	int64_t n;
};

/* Whole file, or NULL (counted as a failure: the data is committed). */
static void *load(const char *file, size_t *size)
{
	char path[256];
	snprintf(path, sizeof(path), DATA_DIR "%s", file);
	return check_read_file(path, size);
}

/* Parse tensors.txt ("name count description" lines) into t [MAX_TENSORS];
 * returns the count, 0 on a malformed file. */
static int load_index(struct ref_tensor *t, int64_t *total)
{
	char line[512];
	int nt = 0;
	FILE *f = fopen(DATA_DIR "tensors.txt", "r");

	CHECKF(f != NULL, "cannot open " DATA_DIR "tensors.txt");
	if (!f)
		return 0;
	*total = 0;
	while (nt < MAX_TENSORS && fgets(line, sizeof(line), f)) {
		long long n;

		if (sscanf(line, "%63s %lld", t[nt].name, &n) != 2 ||
		    n <= 0 || n % QK_K) {
			CHECKF(0, "tensors.txt: bad line: %s", line);
			nt = 0;
			break;
		}
		t[nt].n = n;
		*total += n;
		nt++;
	}
	fclose(f);
	return nt;
}

/* sqrt(mean (x - y)^2) over n values, in double. */
static double rmse(const float *x, const float *y, int64_t n)
{
	double s = 0;

	for (int64_t i = 0; i < n; i++) {
		const double d = (double)x[i] - (double)y[i];

		s += d * d;
	}
	return sqrt(s / (double)n);
}

/* One type over all tensors: RMSE and bytes against llama.cpp's. */
static void check_type(size_t k, const struct ref_tensor *t, int nt,
		       const float *in, int64_t total)
{
	const struct fx_type_traits *tt = fx_type_get(k_types[k].type);
	char file[64];
	size_t ref_size = 0;
	uint8_t *ref, *ours;
	const uint8_t *r;
	float *deq;
	int64_t same = 0, blocks = 0;

	CHECKF(tt && tt->from_float && tt->to_float, "%s: no quantizer",
	       k_types[k].name);
	if (!tt || !tt->from_float || !tt->to_float)
		return;
	snprintf(file, sizeof(file), "%s.ref", k_types[k].name);
	ref = load(file, &ref_size);
	if (!ref)
		return;
	CHECKF(ref_size == fx_row_size(k_types[k].type, total),
	       "%s: %zu bytes, want %zu", file, ref_size,
	       fx_row_size(k_types[k].type, total));
	ours = malloc(ref_size);
	deq = malloc(2 * (size_t)total * sizeof(float));
	if (!ours || !deq || ref_size != fx_row_size(k_types[k].type, total))
		goto out_free;

	r = ref;
	for (int i = 0; i < nt; i++) {
		const size_t rs = fx_row_size(k_types[k].type, t[i].n);
		const int64_t nb = t[i].n / QK_K;
		float *dq_ours = deq, *dq_ref = deq + t[i].n;
		int64_t same_t = 0;

		tt->from_float(in, ours, t[i].n);
		tt->to_float(ours, dq_ours, t[i].n);
		tt->to_float(r, dq_ref, t[i].n);
		for (int64_t b = 0; b < nb; b++)
			same_t += !memcmp(ours + b * tt->type_size,
					  r + b * tt->type_size, tt->type_size);

		const double e_ours = rmse(in, dq_ours, t[i].n);
		const double e_ref = rmse(in, dq_ref, t[i].n);

		printf("%s %-26s rmse ours %.9g llama.cpp %.9g  identical %lld/%lld\n",
		       k_types[k].name, t[i].name, e_ours, e_ref,
		       (long long)same_t, (long long)nb);
		CHECKF(e_ours <= e_ref * (1 + 1e-6),
		       "%s %s: rmse %.9g > llama.cpp's %.9g", k_types[k].name,
		       t[i].name, e_ours, e_ref);
		same += same_t;
		blocks += nb;
		in += t[i].n;
		r += rs;
	}
	printf("%s: %lld/%lld blocks byte-identical to llama.cpp\n",
	       k_types[k].name, (long long)same, (long long)blocks);
	CHECKF(same == blocks, "%s: %lld of %lld blocks differ from llama.cpp",
	       k_types[k].name, (long long)(blocks - same), (long long)blocks);
out_free:
	free(deq);
	free(ours);
	free(ref);
}

static void test_against_llama_cpp(void)
{
	struct ref_tensor t[MAX_TENSORS];
	int64_t total = 0;
	size_t in_size = 0;
	const int nt = load_index(t, &total);
	float *in = load("input.f32", &in_size);

	CHECK(nt > 0);
	CHECKF(in_size == (size_t)total * sizeof(float),
	       "input.f32: %zu bytes, tensors.txt says %lld values", in_size,
	       (long long)total);
	if (nt > 0 && in && in_size == (size_t)total * sizeof(float))
		for (size_t k = 0; k < N_K_TYPES; k++)
			check_type(k, t, nt, in, total);
	free(in);
}

/* xorshift64*: deterministic test data without global state. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [-1, 1). */
static float rng_unit(uint64_t *s)
{
	return (float)(rng_next(s) >> 40) * 0x1p-23f - 1.0f;
}

/* Zeros round-trip to zeros; a row is its blocks quantized one by one;
 * the round trip of random data stays within a loose per-type bound
 * (a check that the layout is right, not of quality). */
static void test_self(void)
{
	/* rms error over rms value, well above what each type reaches */
	static const double bound[N_K_TYPES] = { 0.6, 0.3, 0.15, 0.08, 0.04 };
	enum { NB = 8, N = NB * QK_K };
	static float x[N], y[N];
	static uint8_t row[N * 2], blk[N * 2];
	uint64_t seed = 0x6b71756e74ULL;

	for (int i = 0; i < N; i++)
		x[i] = rng_unit(&seed) * (float)(1 + i / QK_K);
	for (size_t k = 0; k < N_K_TYPES; k++) {
		const struct fx_type_traits *tt = fx_type_get(k_types[k].type);
		double s = 0;

		if (!tt || !tt->from_float)
			continue;
		memset(row, 0xa5, sizeof(row));
		for (int i = 0; i < N; i++)
			y[i] = 0.0f;
		tt->from_float(y, row, QK_K);
		tt->to_float(row, y, QK_K);
		for (int i = 0; i < QK_K; i++)
			CHECKF(y[i] == 0.0f, "%s: zero block gives %g at %d",
			       k_types[k].name, y[i], i);

		tt->from_float(x, row, N);
		for (int b = 0; b < NB; b++)
			tt->from_float(x + b * QK_K, blk + b * tt->type_size, QK_K);
		CHECKF(!memcmp(row, blk, NB * tt->type_size),
		       "%s: row != its blocks", k_types[k].name);

		tt->to_float(row, y, N);
		for (int i = 0; i < N; i++)
			s += (double)x[i] * x[i];
		const double rel = rmse(x, y, N) / sqrt(s / N);

		CHECKF(rel < bound[k], "%s: relative rms error %g", k_types[k].name,
		       rel);
	}
}

int main(void)
{
	test_self();
	test_against_llama_cpp();
	return check_exit();
}
