/* src/quant/ against gguf-py and against its own definitions.
 *
 * - the type table: ggml's names, block and type sizes; unknown ids fail;
 * - fp16 <-> fp32 on all 65536 halves, every tie, and numpy's roundings;
 *   bf16 likewise;
 * - every dequantizer equals gguf.quants.dequantize bit for bit, and every
 *   quantizer gguf has equals gguf.quants.quantize byte for byte
 *   (tests/data/quant/, written by scripts/make-quant-refs.py);
 * - every vec_dot equals the f32 dot of the dequantized rows, to 1e-5 of
 *   the sum of |terms|, on random activations and several block counts.
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

#define DATA_DIR "tests/data/quant/"

/* ---- helpers -------------------------------------------------------------- */

/* Whole file, or NULL (counted as a failure: the data is committed). */
static void *load(const char *name, const char *ext, size_t *size)
{
	char path[256];
	snprintf(path, sizeof(path), DATA_DIR "%s.%s", name, ext);
	return check_read_file(path, size);
}

static uint32_t f2u(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float u2f(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* xorshift64*: deterministic test data without global state. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

/* Roughly normal, in [-6, 6): sum of 12 uniforms, centred. */
static float rng_normal(uint64_t *s)
{
	double acc = 0;

	for (int k = 0; k < 12; k++)
		acc += (double)(rng_next(s) >> 11) * 0x1p-53;
	return (float)(acc - 6.0);
}

/* ---- the type table ------------------------------------------------------- */

static void test_table(void)
{
	static const struct {
		int t;
		const char *name;
		int64_t blck;
		size_t size;
	} want[] = {
		{ FX_TYPE_F32, "f32", 1, 4 },     { FX_TYPE_F16, "f16", 1, 2 },
		{ FX_TYPE_Q4_0, "q4_0", 32, 18 }, { FX_TYPE_Q4_1, "q4_1", 32, 20 },
		{ FX_TYPE_Q5_0, "q5_0", 32, 22 }, { FX_TYPE_Q5_1, "q5_1", 32, 24 },
		{ FX_TYPE_Q8_0, "q8_0", 32, 34 }, { FX_TYPE_Q8_1, "q8_1", 32, 36 },
		{ FX_TYPE_Q2_K, "q2_K", 256, 84 }, { FX_TYPE_Q3_K, "q3_K", 256, 110 },
		{ FX_TYPE_Q4_K, "q4_K", 256, 144 }, { FX_TYPE_Q5_K, "q5_K", 256, 176 },
		{ FX_TYPE_Q6_K, "q6_K", 256, 210 }, { FX_TYPE_Q8_K, "q8_K", 256, 292 },
		{ FX_TYPE_BF16, "bf16", 1, 2 },   { FX_TYPE_MXFP4, "mxfp4", 32, 17 },
	};
	int known = 0;

	for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
		const struct fx_type_traits *tt = fx_type_get(want[k].t);

		CHECKF(tt != NULL, "type %d missing", want[k].t);
		if (!tt)
			continue;
		CHECKF(strcmp(tt->name, want[k].name) == 0, "%s", tt->name);
		CHECK(tt->blck_size == want[k].blck);
		CHECK(tt->type_size == want[k].size);
		CHECK(tt->is_quantized == (want[k].blck > 1));
		CHECK(tt->to_float != NULL);
		if (tt->vec_dot) {
			const struct fx_type_traits *vt = fx_type_get(tt->vec_dot_type);

			CHECK(vt && vt->from_float);
			CHECK(vt && tt->blck_size <= vt->blck_size);
		}
	}
	for (int t = -2; t < FX_TYPE_COUNT + 3; t++)
		known += fx_type_get(t) != NULL;
	CHECK(known == (int)(sizeof(want) / sizeof(want[0])));
	CHECK(fx_type_get(4) == NULL); /* removed q4_2 */
	CHECK(fx_type_get(16) == NULL); /* iq2_xxs: not supported */
	CHECK(fx_type_get(FX_TYPE_COUNT) == NULL);

	CHECK(fx_type_get(FX_TYPE_Q4_0)->vec_dot_type == FX_TYPE_Q8_0);
	CHECK(fx_type_get(FX_TYPE_Q4_1)->vec_dot_type == FX_TYPE_Q8_1);
	CHECK(fx_type_get(FX_TYPE_Q5_0)->vec_dot_type == FX_TYPE_Q8_0);
	CHECK(fx_type_get(FX_TYPE_Q5_1)->vec_dot_type == FX_TYPE_Q8_1);
	CHECK(fx_type_get(FX_TYPE_Q6_K)->vec_dot_type == FX_TYPE_Q8_K);
	CHECK(fx_type_get(FX_TYPE_F16)->vec_dot_type == FX_TYPE_F16);

	CHECK(fx_row_size(FX_TYPE_F32, 640) == 2560);
	CHECK(fx_row_size(FX_TYPE_Q5_0, 640) == 20 * 22);
	CHECK(fx_row_size(FX_TYPE_Q4_K, 2048) == 8 * 144);
	CHECK(fx_row_size(FX_TYPE_Q4_K, 640) == 0);
	CHECK(fx_row_size(FX_TYPE_Q8_0, 33) == 0);
	CHECK(fx_row_size(FX_TYPE_Q8_0, 0) == 0);
	CHECK(fx_row_size(FX_TYPE_Q8_0, -32) == 0);
	CHECK(fx_row_size(17, 256) == 0);
}

/* ---- fp16 / bf16 ------------------------------------------------------------ */

/* The value of half h from its fields, by a different route than the code. */
static float half_value(uint16_t h)
{
	const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	const double sign = (h & 0x8000) ? -1.0 : 1.0;

	if (e == 0)
		return (float)(sign * ldexp(m, -24));
	if (e == 31)
		return (float)(sign * INFINITY);
	return (float)(sign * ldexp(1024 + m, e - 25));
}

static void test_fp16(void)
{
	int bad_exact = 0, bad_trip = 0, bad_nan = 0, bad_tie = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		const float f = fx_fp16_to_fp32((uint16_t)h);
		const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);

		if (nan) {
			/* payload kept exactly, as numpy does */
			bad_nan += f2u(f) != (((h & 0x8000u) << 16) | 0x7f800000u |
					      ((h & 0x3ffu) << 13));
			/* and back: still NaN, same sign, now quiet */
			bad_nan += (fx_fp32_to_fp16(f) & 0xfe00u) !=
				   ((h & 0x8000u) | 0x7e00u);
			continue;
		}
		bad_exact += f2u(f) != f2u(half_value((uint16_t)h));
		bad_trip += fx_fp32_to_fp16(f) != h;
	}
	CHECKF(bad_exact == 0, "%d halves convert wrongly", bad_exact);
	CHECKF(bad_trip == 0, "%d halves do not round-trip", bad_trip);
	CHECKF(bad_nan == 0, "%d NaN conversions wrong", bad_nan);

	/* Every tie between neighbouring finite halves rounds to the even
	 * one, and one f32 ulp either side rounds to the nearer. */
	for (uint32_t h = 0; h < 0x7bff; h++) {
		const double lo = half_value((uint16_t)h);
		const double hi = half_value((uint16_t)(h + 1));
		const float mid = (float)((lo + hi) / 2);
		const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;

		bad_tie += fx_fp32_to_fp16(mid) != even;
		bad_tie += fx_fp32_to_fp16(-mid) != (even | 0x8000);
		bad_tie += fx_fp32_to_fp16(nextafterf(mid, 0)) != h;
		bad_tie += fx_fp32_to_fp16(nextafterf(mid, INFINITY)) != h + 1;
	}
	CHECKF(bad_tie == 0, "%d ties rounded wrongly", bad_tie);
	CHECK(fx_fp32_to_fp16(65519.99f) == 0x7bff);
	CHECK(fx_fp32_to_fp16(65520.0f) == 0x7c00);
	CHECK(fx_fp32_to_fp16(-1e30f) == 0xfc00);
	CHECK(fx_fp32_to_fp16(0x1p-25f) == 0x0000);
	CHECK(fx_fp32_to_fp16(nextafterf(0x1p-25f, 1)) == 0x0001);
	CHECK(fx_fp32_to_fp16(-0.0f) == 0x8000);

	/* bf16: exact upward, RNE downward, quiet NaN */
	int bad_bf = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		const float f = fx_bf16_to_fp32((uint16_t)h);

		bad_bf += f2u(f) != h << 16;
		if ((h & 0x7fff) <= 0x7f80)
			bad_bf += fx_fp32_to_bf16(f) != h;
		else
			bad_bf += (fx_fp32_to_bf16(f) & 0x7fc0u) != 0x7fc0u;
	}
	CHECKF(bad_bf == 0, "%d bf16 conversions wrong", bad_bf);
	CHECK(fx_fp32_to_bf16(u2f(0x3f808000u)) == 0x3f80); /* tie to even */
	CHECK(fx_fp32_to_bf16(u2f(0x3f818000u)) == 0x3f82);
	CHECK(fx_fp32_to_bf16(u2f(0x3f808001u)) == 0x3f81);
}

/* ---- against gguf-py ------------------------------------------------------ */

static const char *const deq_names[] = {
	"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4",
	"q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
};
static const char *const quant_names[] = {
	"f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4",
	"q8_1", "q8_K",
};

/* Type id of a ggml type name, or -1. */
static int type_id(const char *name)
{
	for (int t = 0; t < FX_TYPE_COUNT; t++) {
		const struct fx_type_traits *tt = fx_type_get(t);

		if (tt && strcmp(tt->name, name) == 0)
			return t;
	}
	return -1;
}

static void test_dequant_refs(void)
{
	for (size_t k = 0; k < sizeof(deq_names) / sizeof(deq_names[0]); k++) {
		const char *name = deq_names[k];
		const struct fx_type_traits *tt = fx_type_get(type_id(name));
		size_t nraw = 0, ndeq = 0;
		void *raw = load(name, "blocks", &nraw);
		float *want = load(name, "deq", &ndeq);

		CHECKF(tt != NULL, "%s", name);
		if (!tt || !raw || !want)
			goto next;
		const int64_t nblk = (int64_t)(nraw / tt->type_size);
		const int64_t n = nblk * tt->blck_size;
		CHECKF(nraw % tt->type_size == 0 && ndeq == (size_t)n * 4,
		       "%s: data sizes %zu, %zu", name, nraw, ndeq);
		if (ndeq != (size_t)n * 4)
			goto next;
		float *got = malloc((size_t)n * sizeof(float));
		int bad = 0;

		tt->to_float(raw, got, n);
		for (int64_t i = 0; i < n; i++) {
			if (f2u(got[i]) != f2u(want[i]) && bad++ < 3)
				fprintf(stderr, "%s[%lld]: %.9g, gguf %.9g\n", name,
					(long long)i, got[i], want[i]);
		}
		CHECKF(bad == 0, "%s: %d of %lld values differ from gguf", name,
		       bad, (long long)n);
		free(got);
next:
		free(raw);
		free(want);
	}
}

static void test_quant_refs(void)
{
	for (size_t k = 0; k < sizeof(quant_names) / sizeof(quant_names[0]); k++) {
		const char *name = quant_names[k];
		const int t = type_id(name);
		const struct fx_type_traits *tt = fx_type_get(t);
		size_t nin = 0, nout = 0;
		float *in = load(name, "qin", &nin);
		uint8_t *want = load(name, "qout", &nout);

		CHECKF(tt && tt->from_float, "%s has no quantizer", name);
		if (!tt || !tt->from_float || !in || !want)
			goto next;
		const int64_t n = (int64_t)(nin / sizeof(float));
		const size_t size = fx_row_size(t, n);

		CHECKF(size == nout, "%s: %zu bytes, reference %zu", name, size, nout);
		if (size != nout)
			goto next;
		uint8_t *got = malloc(size);
		size_t bad = 0, first = 0;

		memset(got, 0xa5, size);
		tt->from_float(in, got, n);
		for (size_t i = size; i-- > 0;) {
			if (got[i] != want[i]) {
				bad++;
				first = i;
			}
		}
		CHECKF(bad == 0, "%s: %zu bytes differ from the reference, first at "
		       "byte %zu (block %zu)", name, bad, first, first / tt->type_size);
		free(got);
next:
		free(in);
		free(want);
	}
}

/* The activation formats (not in gguf): dequantize is d * q, and the sums
 * the dot products rely on agree with qs. */
static void test_activation_formats(void)
{
	uint64_t seed = 0x5eed0001;
	enum { N = 4 * QK_K };
	float x[N], y[N];
	struct block_q8_1 q1[N / QK8_1];
	struct block_q8_K qk[N / QK_K];
	int bad = 0;

	for (int i = 0; i < N; i++)
		x[i] = rng_normal(&seed) * (i < N / 2 ? 0.01f : 30.0f);

	fx_type_get(FX_TYPE_Q8_1)->from_float(x, q1, N);
	fx_type_get(FX_TYPE_Q8_1)->to_float(q1, y, N);
	for (int b = 0; b < N / QK8_1; b++) {
		const float d = fx_fp16_to_fp32(q1[b].d);
		float amax = 0;
		int sum = 0;

		for (int j = 0; j < QK8_1; j++) {
			const int i = b * QK8_1 + j;

			sum += q1[b].qs[j];
			amax = fmaxf(amax, fabsf(x[i]));
			bad += f2u(y[i]) != f2u(d * (float)q1[b].qs[j]);
			/* 0.5 d, plus up to 127 d 2^-11 from storing d as fp16 */
			bad += fabsf(y[i] - x[i]) > 0.57f * d;
		}
		/* s is made from the f32 d = amax / 127, before fp16 rounding */
		bad += q1[b].s != fx_fp32_to_fp16((float)sum * (amax / 127));
	}
	CHECKF(bad == 0, "q8_1: %d bad values", bad);

	bad = 0;
	fx_type_get(FX_TYPE_Q8_K)->from_float(x, qk, N);
	fx_type_get(FX_TYPE_Q8_K)->to_float(qk, y, N);
	for (int b = 0; b < N / QK_K; b++) {
		for (int g = 0; g < QK_K / 16; g++) {
			int sum = 0;

			for (int l = 0; l < 16; l++)
				sum += qk[b].qs[16 * g + l];
			bad += qk[b].bsums[g] != sum;
		}
		for (int j = 0; j < QK_K; j++) {
			const int i = b * QK_K + j;

			bad += f2u(y[i]) != f2u(qk[b].d * (float)qk[b].qs[j]);
			bad += fabsf(y[i] - x[i]) > 0.5001f * fabsf(qk[b].d);
		}
	}
	CHECKF(bad == 0, "q8_K: %d bad values", bad);
}

/* ---- dot products --------------------------------------------------------- */

/* Extra term a q8_1 dot carries: it uses the stored s = fp16(d * sum q)
 * where the dequantized dot has d * sum q exactly; sum over blocks of
 * m_x * (s - d * sum q). Zero for other activation types. */
static double q8_1_min_correction(int type, const void *wx, const void *wy,
				  int64_t n)
{
	const struct block_q8_1 *y = wy;
	double c = 0;

	if (type != FX_TYPE_Q4_1 && type != FX_TYPE_Q5_1)
		return 0;
	for (int64_t b = 0; b < n / QK8_1; b++) {
		const uint16_t mh = type == FX_TYPE_Q4_1 ?
			((const struct block_q4_1 *)wx)[b].m :
			((const struct block_q5_1 *)wx)[b].m;
		int sum = 0;

		for (int j = 0; j < QK8_1; j++)
			sum += y[b].qs[j];
		c += (double)fx_fp16_to_fp32(mh) *
		     ((double)fx_fp16_to_fp32(y[b].s) -
		      (double)fx_fp16_to_fp32(y[b].d) * sum);
	}
	return c;
}

/* One vec_dot check: x a row of type t (n elements), y f32 activations
 * quantized to t's vec_dot_type. */
static void check_dot(int t, const void *x, int64_t n, uint64_t *seed,
		      float act_scale)
{
	const struct fx_type_traits *tt = fx_type_get(t);
	const struct fx_type_traits *vt = fx_type_get(tt->vec_dot_type);
	float *yf = malloc((size_t)n * sizeof(float));
	float *xd = malloc((size_t)n * sizeof(float));
	float *yd = malloc((size_t)n * sizeof(float));
	void *yq = malloc(fx_row_size(tt->vec_dot_type, n));
	double ref = 0, mag = 0;
	float s = NAN, s2 = NAN;

	for (int64_t i = 0; i < n; i++)
		yf[i] = rng_normal(seed) * act_scale;
	vt->from_float(yf, yq, n);
	vt->to_float(yq, yd, n);
	tt->to_float(x, xd, n);
	for (int64_t i = 0; i < n; i++) {
		ref += (double)xd[i] * yd[i];
		mag += fabs((double)xd[i] * yd[i]);
	}
	ref += q8_1_min_correction(t, x, yq, n);

	tt->vec_dot(n, &s, x, yq);
	tt->vec_dot(n, &s2, x, yq);
	CHECKF(mag > 0, "%s n=%lld: degenerate test data", tt->name, (long long)n);
	CHECKF(fabs((double)s - ref) <= 1e-5 * mag + 1e-30,
	       "%s n=%lld: vec_dot %.9g, f32 dot %.9g (sum|terms| %.3g)",
	       tt->name, (long long)n, s, ref, mag);
	CHECKF(f2u(s) == f2u(s2), "%s: vec_dot not deterministic", tt->name);
	free(yf);
	free(xd);
	free(yd);
	free(yq);
}

static void test_vec_dot(void)
{
	static const char *const qnames[] = {
		"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4",
		"q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
	};
	uint64_t seed = 0x5eed0002;

	/* quantized weights: gguf's random reference blocks, 1..all of them */
	for (size_t k = 0; k < sizeof(qnames) / sizeof(qnames[0]); k++) {
		const int t = type_id(qnames[k]);
		const struct fx_type_traits *tt = fx_type_get(t);
		size_t nraw = 0;
		uint8_t *raw = load(qnames[k], "blocks", &nraw);
		const int64_t nblk = (int64_t)(nraw / tt->type_size);
		const int64_t counts[] = { 1, 3, nblk / 2, nblk };

		CHECKF(tt->vec_dot != NULL, "%s has no vec_dot", tt->name);
		if (!raw || !tt->vec_dot) {
			free(raw);
			continue;
		}
		for (size_t c = 0; c < 4; c++) {
			const int64_t n = counts[c] * tt->blck_size;

			check_dot(t, raw, n, &seed, 1.0f);
			/* later blocks only, with a large activation scale */
			check_dot(t, raw + tt->type_size * (size_t)(nblk - counts[c]),
				  n, &seed, 300.0f);
		}
		free(raw);
	}

	/* float weights, lengths that leave every size of tail */
	static const int64_t lens[] = { 1, 7, 31, 32, 33, 100, 640, 1000, 2048 };
	static const int ftypes[] = { FX_TYPE_F32, FX_TYPE_F16, FX_TYPE_BF16 };

	for (size_t k = 0; k < sizeof(ftypes) / sizeof(ftypes[0]); k++) {
		const struct fx_type_traits *tt = fx_type_get(ftypes[k]);

		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			const int64_t n = lens[l];
			float *xf = malloc((size_t)n * sizeof(float));
			void *x = malloc(fx_row_size(ftypes[k], n));

			for (int64_t i = 0; i < n; i++)
				xf[i] = rng_normal(&seed);
			tt->from_float(xf, x, n);
			check_dot(ftypes[k], x, n, &seed, 2.0f);
			free(xf);
			free(x);
		}
	}
}

/* A q8_0 dot is a weighted sum of integer block dots: check one by hand so
 * a wrong d*d or sign convention cannot hide behind the f32 comparison. */
static void test_dot_by_hand(void)
{
	struct block_q8_0 x[2], y[2];
	float s = 0;

	for (int b = 0; b < 2; b++) {
		x[b].d = fx_fp32_to_fp16(b ? 0.25f : 2.0f);
		y[b].d = fx_fp32_to_fp16(b ? -1.5f : 0.5f);
		for (int j = 0; j < 32; j++) {
			x[b].qs[j] = (int8_t)(j - 16);
			y[b].qs[j] = (int8_t)(b ? 3 : (j & 1 ? 1 : -1));
		}
	}
	/* block 0: sum (j-16) * (+-1) = 16; block 1: 3 * sum (j-16) = -48 */
	fx_type_get(FX_TYPE_Q8_0)->vec_dot(64, &s, x, y);
	CHECKF(s == 16 * 2.0f * 0.5f + -48 * 0.25f * -1.5f, "q8_0 dot %g", s);

	/* q4_0 nibble order: low nibbles are elements 0..15 */
	struct block_q4_0 w;
	float v[32];

	w.d = fx_fp32_to_fp16(1.0f);
	for (int j = 0; j < 16; j++)
		w.qs[j] = (uint8_t)(j | (15 - j) << 4);
	fx_type_get(FX_TYPE_Q4_0)->to_float(&w, v, 32);
	CHECK(v[0] == -8 && v[15] == 7 && v[16] == 7 && v[31] == -8);
}

int main(void)
{
	test_table();
	test_fp16();
	test_dequant_refs();
	test_quant_refs();
	test_activation_formats();
	test_vec_dot();
	test_dot_by_hand();
	return check_exit();
}
