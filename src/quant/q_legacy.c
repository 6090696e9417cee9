/* The 32-element block formats: q4_0, q4_1, q5_0, q5_1, q8_0, q8_1, mxfp4.
 *
 * Dequantizers and quantizers follow ggml-quants.c (dequantize_row_* and
 * quantize_row_*_ref) operation for operation, so the bytes and floats
 * are the ones ggml and gguf-py produce; dot products follow ggml-cpu's
 * ggml_vec_dot_*_q8_*_generic: an exact integer sum per block, then the
 * block's term added in block order, with one difference: the term joins
 * the sum in fused multiply-adds (fmaf), as ggml's own x86 kernels
 * contract it, where the generic C multiplies and then adds. Every kernel
 * set takes the same steps (kernels/x86: one vector FMA instead of a
 * multiply and an add per 16 results of a block, what their float steps
 * are bound by), so all stay bit-identical to this code.
 *
 * Every f32 expression keeps ggml's operand order. The dequantized values
 * do not depend on FMA contraction (q * d is exact: q has at most 6 bits,
 * d 11); nothing is contracted that the source does not write
 * (-ffp-contract=off, CMakeLists.txt).
 */
#include "quant/blocks.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* The doubled E2M1 values (kvalues_mxfp4 in ggml-common.h). */
static const int8_t kvalues_mxfp4[16] = {
	0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

/* Fifth bits of q5_0/q5_1: bit j of the little-endian word qh is element j. */
static inline uint32_t load_qh(const uint8_t qh[4])
{
	return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 |
	       (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void store_qh(uint8_t qh[4], uint32_t v)
{
	for (int k = 0; k < 4; k++)
		qh[k] = (uint8_t)(v >> (8 * k));
}

/* Value of largest magnitude, first one on ties (as ggml's amax scan). */
static float signed_absmax(const float *x, int n)
{
	float amax = 0.0f, max = 0.0f;

	for (int j = 0; j < n; j++) {
		if (amax < fabsf(x[j])) {
			amax = fabsf(x[j]);
			max = x[j];
		}
	}
	return max;
}

/* ---- Q4_0: x = d * (q - 8), q in 0..15 ------------------------------------ */

void quant_to_float_q4_0(const void *vx, float *y, int64_t n)
{
	const struct block_q4_0 *x = vx;

	for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
		const float d = quant_fp16_to_fp32(x[i].d);

		for (int j = 0; j < QK4_0 / 2; j++) {
			y[j] = (float)((x[i].qs[j] & 0x0f) - 8) * d;
			y[j + 16] = (float)((x[i].qs[j] >> 4) - 8) * d;
		}
	}
}

/* quantize_row_q4_0_ref: d = -max/8 so the signed extreme maps to q = 0. */
void quant_from_float_q4_0(const float *x, void *vy, int64_t n)
{
	struct block_q4_0 *y = vy;

	for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
		const float d = signed_absmax(x, QK4_0) / -8;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK4_0 / 2; j++) {
			/* truncation of a value >= 0.5: +8.5 rounds */
			int q0 = (int8_t)(x[j] * id + 8.5f);
			int q1 = (int8_t)(x[j + 16] * id + 8.5f);

			q0 = q0 < 15 ? q0 : 15;
			q1 = q1 < 15 ? q1 : 15;
			y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
		}
	}
}

/* ---- Q4_1: x = d * q + m, q in 0..15 -------------------------------------- */

void quant_to_float_q4_1(const void *vx, float *y, int64_t n)
{
	const struct block_q4_1 *x = vx;

	for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const float m = quant_fp16_to_fp32(x[i].m);

		for (int j = 0; j < QK4_1 / 2; j++) {
			y[j] = (float)(x[i].qs[j] & 0x0f) * d + m;
			y[j + 16] = (float)(x[i].qs[j] >> 4) * d + m;
		}
	}
}

static void minmax(const float *x, int n, float *min, float *max)
{
	float lo = FLT_MAX, hi = -FLT_MAX;

	for (int j = 0; j < n; j++) {
		if (x[j] < lo)
			lo = x[j];
		if (x[j] > hi)
			hi = x[j];
	}
	*min = lo;
	*max = hi;
}

/* quantize_row_q4_1_ref */
void quant_from_float_q4_1(const float *x, void *vy, int64_t n)
{
	struct block_q4_1 *y = vy;

	for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
		float min, max;

		minmax(x, QK4_1, &min, &max);
		const float d = (max - min) / 15;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		y[i].m = quant_fp32_to_fp16(min);
		for (int j = 0; j < QK4_1 / 2; j++) {
			int q0 = (int8_t)((x[j] - min) * id + 0.5f);
			int q1 = (int8_t)((x[j + 16] - min) * id + 0.5f);

			q0 = q0 < 15 ? q0 : 15;
			q1 = q1 < 15 ? q1 : 15;
			y[i].qs[j] = (uint8_t)(q0 | q1 << 4);
		}
	}
}

/* ---- Q5_0: x = d * (q - 16), q in 0..31 ----------------------------------- */

void quant_to_float_q5_0(const void *vx, float *y, int64_t n)
{
	const struct block_q5_0 *x = vx;

	for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const uint32_t qh = load_qh(x[i].qh);

		for (int j = 0; j < QK5_0 / 2; j++) {
			const int h0 = ((qh >> j) << 4) & 0x10;
			const int h1 = (qh >> (j + 12)) & 0x10;

			y[j] = (float)(((x[i].qs[j] & 0x0f) | h0) - 16) * d;
			y[j + 16] = (float)(((x[i].qs[j] >> 4) | h1) - 16) * d;
		}
	}
}

/* quantize_row_q5_0_ref */
void quant_from_float_q5_0(const float *x, void *vy, int64_t n)
{
	struct block_q5_0 *y = vy;

	for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
		const float d = signed_absmax(x, QK5_0) / -16;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		uint32_t qh = 0;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK5_0 / 2; j++) {
			int q0 = (int8_t)(x[j] * id + 16.5f);
			int q1 = (int8_t)(x[j + 16] * id + 16.5f);

			q0 = q0 < 31 ? q0 : 31;
			q1 = q1 < 31 ? q1 : 31;
			y[i].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
			qh |= (uint32_t)(q0 >> 4 & 1) << j;
			qh |= (uint32_t)(q1 >> 4 & 1) << (j + 16);
		}
		store_qh(y[i].qh, qh);
	}
}

/* ---- Q5_1: x = d * q + m, q in 0..31 -------------------------------------- */

void quant_to_float_q5_1(const void *vx, float *y, int64_t n)
{
	const struct block_q5_1 *x = vx;

	for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const float m = quant_fp16_to_fp32(x[i].m);
		const uint32_t qh = load_qh(x[i].qh);

		for (int j = 0; j < QK5_1 / 2; j++) {
			const int h0 = ((qh >> j) << 4) & 0x10;
			const int h1 = (qh >> (j + 12)) & 0x10;

			y[j] = (float)((x[i].qs[j] & 0x0f) | h0) * d + m;
			y[j + 16] = (float)((x[i].qs[j] >> 4) | h1) * d + m;
		}
	}
}

/* quantize_row_q5_1_ref (which, unlike q4_1, does not clamp: the largest
 * value gives (max - min) / d + 0.5 < 32). */
void quant_from_float_q5_1(const float *x, void *vy, int64_t n)
{
	struct block_q5_1 *y = vy;

	for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
		float min, max;
		uint32_t qh = 0;

		minmax(x, QK5_1, &min, &max);
		const float d = (max - min) / 31;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		y[i].m = quant_fp32_to_fp16(min);
		for (int j = 0; j < QK5_1 / 2; j++) {
			const uint8_t q0 = (uint8_t)((x[j] - min) * id + 0.5f);
			const uint8_t q1 = (uint8_t)((x[j + 16] - min) * id + 0.5f);

			y[i].qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
			qh |= (uint32_t)(q0 >> 4 & 1) << j;
			qh |= (uint32_t)(q1 >> 4 & 1) << (j + 16);
		}
		store_qh(y[i].qh, qh);
	}
}

/* ---- Q8_0: x = d * q, q in -127..127 -------------------------------------- */

void quant_to_float_q8_0(const void *vx, float *y, int64_t n)
{
	const struct block_q8_0 *x = vx;

	for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
		const float d = quant_fp16_to_fp32(x[i].d);

		for (int j = 0; j < QK8_0; j++)
			y[j] = (float)x[i].qs[j] * d;
	}
}

static float absmax(const float *x, int n)
{
	float amax = 0.0f;

	for (int j = 0; j < n; j++)
		amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
	return amax;
}

/* quantize_row_q8_0_ref: roundf, i.e. half away from zero. */
void quant_from_float_q8_0(const float *x, void *vy, int64_t n)
{
	struct block_q8_0 *y = vy;

	for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
		const float d = absmax(x, QK8_0) / 127;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK8_0; j++)
			y[i].qs[j] = (int8_t)roundf(x[j] * id);
	}
}

/* ---- Q8_1: q8_0 plus s = d * sum(q), used by the q4_1/q5_1 dots ---------- */

/* ggml has no dequantize_row_q8_1; this is the layout's plain meaning. */
void quant_to_float_q8_1(const void *vx, float *y, int64_t n)
{
	const struct block_q8_1 *x = vx;

	for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
		const float d = quant_fp16_to_fp32(x[i].d);

		for (int j = 0; j < QK8_1; j++)
			y[j] = (float)x[i].qs[j] * d;
	}
}

/* quantize_row_q8_1_ref */
void quant_from_float_q8_1(const float *x, void *vy, int64_t n)
{
	struct block_q8_1 *y = vy;

	for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
		const float d = absmax(x, QK8_1) / 127;
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		int sum = 0;

		y[i].d = quant_fp32_to_fp16(d);
		for (int j = 0; j < QK8_1; j++) {
			y[i].qs[j] = (int8_t)roundf(x[j] * id);
			sum += y[i].qs[j];
		}
		y[i].s = quant_fp32_to_fp16((float)sum * d);
	}
}

/* ---- MXFP4: x = 2^(e-128) * kvalues[q] ------------------------------------ */

void quant_to_float_mxfp4(const void *vx, float *y, int64_t n)
{
	const struct block_mxfp4 *x = vx;

	for (int64_t i = 0; i < n / QK_MXFP4; i++, y += QK_MXFP4) {
		const float d = quant_e8m0_to_fp32_half(x[i].e);

		for (int j = 0; j < QK_MXFP4 / 2; j++) {
			y[j] = (float)kvalues_mxfp4[x[i].qs[j] & 0x0f] * d;
			y[j + 16] = (float)kvalues_mxfp4[x[i].qs[j] >> 4] * d;
		}
	}
}

/* Nearest code, first one on ties (best_index_mxfp4). */
static uint8_t best_index_mxfp4(float x, float e)
{
	int best = 0;
	float best_err = fabsf((float)kvalues_mxfp4[0] * e - x);

	for (int k = 1; k < 16; k++) {
		const float err = fabsf((float)kvalues_mxfp4[k] * e - x);

		if (err < best_err) {
			best = k;
			best_err = err;
		}
	}
	return (uint8_t)best;
}

/* quantize_row_mxfp4_ref */
void quant_from_float_mxfp4(const float *x, void *vy, int64_t n)
{
	struct block_mxfp4 *y = vy;

	for (int64_t i = 0; i < n / QK_MXFP4; i++, x += QK_MXFP4) {
		const float amax = absmax(x, QK_MXFP4);
		/* via int: a tiny amax gives a negative exponent, and a
		 * negative float -> uint8_t conversion is undefined */
		const uint8_t e = amax > 0.0f ?
			(uint8_t)(int)(floorf(log2f(amax)) - 2 + 127) : 0;
		const float d = quant_e8m0_to_fp32_half(e);

		y[i].e = e;
		for (int j = 0; j < QK_MXFP4 / 2; j++)
			y[i].qs[j] = (uint8_t)(best_index_mxfp4(x[j], d) |
					       best_index_mxfp4(x[j + 16], d) << 4);
	}
}

/* ---- dot products against q8_0 / q8_1 activations ------------------------ */

/* The integer block dots. Integer sums are exact, so their order is free
 * and they are arranged for the vectoriser: unsigned codes times y, with
 * the codes' offset taken out once as off * sum(y). The one float update
 * per block is ggml's, in block order. */
static inline int dot_i8_32(const int8_t *a, const int8_t *b)
{
	int sumi = 0;

	for (int j = 0; j < 32; j++)
		sumi += a[j] * b[j];
	return sumi;
}

static inline int sum_i8_32(const int8_t *b)
{
	int sum = 0;

	for (int j = 0; j < 32; j++)
		sum += b[j];
	return sum;
}

/* sum_j q[j] * y[j], q the nibbles of qs (low ones are elements 0..15). */
static inline int dot_q4(const uint8_t *qs, const int8_t *y)
{
	int sumi = 0;

	/* Kept rolled: gcc otherwise peels all 16 iterations into scalar
	 * code before its loop vectoriser sees them (2x slower). */
#pragma GCC unroll 1
	for (int j = 0; j < 16; j++)
		sumi += (qs[j] & 0x0f) * y[j] + (qs[j] >> 4) * y[j + 16];
	return sumi;
}

/* As dot_q4 with the fifth bits from qh (bit j is element j). */
static inline int dot_q5(const uint8_t *qs, const uint8_t *qh4,
			 const int8_t *y)
{
	const uint32_t qh = load_qh(qh4);
	int sumi = 0;

	for (int j = 0; j < 16; j++) {
		const int h0 = (int)((qh >> j) << 4 & 0x10);
		const int h1 = (int)(qh >> (j + 12) & 0x10);

		sumi += ((qs[j] & 0x0f) | h0) * y[j] +
			((qs[j] >> 4) | h1) * y[j + 16];
	}
	return sumi;
}

/* *s = x . y; x [n] q4_0, y [n] q8_0 (ggml_vec_dot_q4_0_q8_0_generic). */
void quant_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q4_0 *x = vx;
	const struct block_q8_0 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK8_0; i++) {
		const int sumi = dot_q4(x[i].qs, y[i].qs) -
				 8 * sum_i8_32(y[i].qs);

		sumf = fmaf((float)sumi * quant_fp16_to_fp32(x[i].d),
			    quant_fp16_to_fp32(y[i].d), sumf);
	}
	*s = sumf;
}

/* *s = x . y; x [n] q4_1, y [n] q8_1 (ggml_vec_dot_q4_1_q8_1_generic).
 * The min term uses y's stored s = fp16(d * sum q), as ggml does; it
 * joins the sum first, then the scaled block sum, each in one fma. */
void quant_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q4_1 *x = vx;
	const struct block_q8_1 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK8_1; i++) {
		const int sumi = dot_q4(x[i].qs, y[i].qs);

		sumf = fmaf(quant_fp16_to_fp32(x[i].m), quant_fp16_to_fp32(y[i].s), sumf);
		sumf = fmaf(quant_fp16_to_fp32(x[i].d) * quant_fp16_to_fp32(y[i].d),
			    (float)sumi, sumf);
	}
	*s = sumf;
}

/* *s = x . y; x [n] q5_0, y [n] q8_0 (ggml_vec_dot_q5_0_q8_0_generic). */
void quant_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q5_0 *x = vx;
	const struct block_q8_0 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK8_0; i++) {
		const int sumi = dot_q5(x[i].qs, x[i].qh, y[i].qs) -
				 16 * sum_i8_32(y[i].qs);

		sumf = fmaf(quant_fp16_to_fp32(x[i].d) * quant_fp16_to_fp32(y[i].d),
			    (float)sumi, sumf);
	}
	*s = sumf;
}

/* *s = x . y; x [n] q5_1, y [n] q8_1 (ggml_vec_dot_q5_1_q8_1_generic;
 * its terms in fmas as q4_1's). */
void quant_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q5_1 *x = vx;
	const struct block_q8_1 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK8_1; i++) {
		const int sumi = dot_q5(x[i].qs, x[i].qh, y[i].qs);

		sumf = fmaf(quant_fp16_to_fp32(x[i].m), quant_fp16_to_fp32(y[i].s), sumf);
		sumf = fmaf(quant_fp16_to_fp32(x[i].d) * quant_fp16_to_fp32(y[i].d),
			    (float)sumi, sumf);
	}
	*s = sumf;
}

/* *s = x . y; x [n] q8_0, y [n] q8_0 (ggml_vec_dot_q8_0_q8_0_generic). */
void quant_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q8_0 *x = vx;
	const struct block_q8_0 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK8_0; i++) {
		const int sumi = dot_i8_32(x[i].qs, y[i].qs);

		sumf = fmaf(quant_fp16_to_fp32(x[i].d) * quant_fp16_to_fp32(y[i].d),
			    (float)sumi, sumf);
	}
	*s = sumf;
}

/* *s = x . y; x [n] mxfp4, y [n] q8_0 (ggml_vec_dot_mxfp4_q8_0_generic). */
void quant_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *vx,
			      const void *vy)
{
	const struct block_mxfp4 *x = vx;
	const struct block_q8_0 *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_MXFP4; i++) {
		const float d = quant_fp16_to_fp32(y[i].d) *
				quant_e8m0_to_fp32_half(x[i].e);
		int8_t v[32];

		for (int j = 0; j < QK_MXFP4 / 2; j++) {
			v[j] = kvalues_mxfp4[x[i].qs[j] & 0x0f];
			v[j + 16] = kvalues_mxfp4[x[i].qs[j] >> 4];
		}
		sumf += d * (float)dot_i8_32(v, y[i].qs);
	}
	*s = sumf;
}
