/* The 256-element k-quant super-blocks (q2_K .. q6_K) and their q8_K
 * activation format.
 *
 * Dequantizers follow ggml-quants.c (dequantize_row_q*_K) with the same
 * f32 operation order, so the floats equal ggml's and gguf-py's bit for
 * bit; quantize_row_q8_K_ref is the only quantizer (the engine reads
 * k-quant weights, it does not make them). Dot products follow ggml-cpu's
 * ggml_vec_dot_q*_K_q8_K_generic, including their 8-lane float partial
 * sums, so the result is the one a generic ggml build gives.
 */
#include "quant/blocks.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Scale and min j (0..7) of q4_K/q5_K: 6 bits each, packed in 12 bytes
 * (get_scale_min_k4). */
static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d,
				uint8_t *m)
{
	if (j < 4) {
		*d = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*d = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
		*m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
	}
}

/* The 16 6-bit scales of q3_K, minus their bias of 32: low nibbles are
 * bytes 0..7 (low halves first), the top two bits come from bytes 8..11. */
static inline void scales_q3_K(const uint8_t sc[12], int out[16])
{
	for (int j = 0; j < 16; j++) {
		const int lo = j < 8 ? sc[j] & 0x0f : sc[j - 8] >> 4;
		const int hi = (sc[8 + j % 4] >> (2 * (j / 4))) & 3;

		out[j] = (lo | hi << 4) - 32;
	}
}

/* ---- dequantizers --------------------------------------------------------- */

void quant_to_float_q2_K(const void *vx, float *y, int64_t n)
{
	const struct block_q2_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const float min = quant_fp16_to_fp32(x[i].dmin);
		const uint8_t *q = x[i].qs;
		int is = 0;

		for (int half = 0; half < QK_K / 128; half++, q += 32) {
			for (int shift = 0; shift < 8; shift += 2) {
				for (int k = 0; k < 2; k++) {
					const uint8_t sc = x[i].scales[is++];
					const float dl = d * (float)(sc & 0x0f);
					const float ml = min * (float)(sc >> 4);

					for (int l = 0; l < 16; l++)
						*y++ = dl * (float)((q[l + 16 * k] >> shift) & 3) - ml;
				}
			}
		}
	}
}

void quant_to_float_q3_K(const void *vx, float *y, int64_t n)
{
	const struct block_q3_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const float d_all = quant_fp16_to_fp32(x[i].d);
		const uint8_t *q = x[i].qs;
		const uint8_t *hm = x[i].hmask;
		uint8_t m = 1;
		int scales[16];
		int is = 0;

		scales_q3_K(x[i].scales, scales);
		for (int half = 0; half < QK_K / 128; half++, q += 32) {
			for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
				for (int k = 0; k < 32; k += 16) {
					const float dl = d_all * (float)scales[is++];

					for (int l = k; l < k + 16; l++) {
						const int v = ((q[l] >> shift) & 3) -
							      ((hm[l] & m) ? 0 : 4);
						*y++ = dl * (float)v;
					}
				}
			}
		}
	}
}

void quant_to_float_q4_K(const void *vx, float *y, int64_t n)
{
	const struct block_q4_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const float min = quant_fp16_to_fp32(x[i].dmin);
		const uint8_t *q = x[i].qs;

		for (int is = 0; is < QK_K / 32; is += 2, q += 32) {
			uint8_t sc, m;

			scale_min_k4(is, x[i].scales, &sc, &m);
			const float d1 = d * (float)sc, m1 = min * (float)m;
			scale_min_k4(is + 1, x[i].scales, &sc, &m);
			const float d2 = d * (float)sc, m2 = min * (float)m;

			for (int l = 0; l < 32; l++)
				*y++ = d1 * (float)(q[l] & 0x0f) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (float)(q[l] >> 4) - m2;
		}
	}
}

void quant_to_float_q5_K(const void *vx, float *y, int64_t n)
{
	const struct block_q5_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const float d = quant_fp16_to_fp32(x[i].d);
		const float min = quant_fp16_to_fp32(x[i].dmin);
		const uint8_t *ql = x[i].qs;
		const uint8_t *qh = x[i].qh;
		uint8_t u1 = 1, u2 = 2;

		for (int is = 0; is < QK_K / 32; is += 2, ql += 32) {
			uint8_t sc, m;

			scale_min_k4(is, x[i].scales, &sc, &m);
			const float d1 = d * (float)sc, m1 = min * (float)m;
			scale_min_k4(is + 1, x[i].scales, &sc, &m);
			const float d2 = d * (float)sc, m2 = min * (float)m;

			for (int l = 0; l < 32; l++)
				*y++ = d1 * (float)((ql[l] & 0x0f) + (qh[l] & u1 ? 16 : 0)) - m1;
			for (int l = 0; l < 32; l++)
				*y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
			u1 <<= 2;
			u2 <<= 2;
		}
	}
}

/* The 256 6-bit values of a q6_K block, minus their bias of 32, in
 * element order: in each 128-half, element l + 32*k (k = 0..3) has its
 * nibble from ql[l] (k even) or ql[l + 32] (k odd), low nibble for k < 2,
 * and its top two bits from qh[l] >> 2k. */
static inline void unpack_q6_K(const struct block_q6_K *b, int8_t a[QK_K])
{
	for (int half = 0; half < QK_K / 128; half++) {
		const uint8_t *ql = b->ql + 64 * half;
		const uint8_t *qh = b->qh + 32 * half;
		int8_t *ah = a + 128 * half;

		for (int l = 0; l < 32; l++) {
			ah[l] = (int8_t)(((ql[l] & 0x0f) | (qh[l] & 3) << 4) - 32);
			ah[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) |
					       (qh[l] >> 2 & 3) << 4) - 32);
			ah[l + 64] = (int8_t)(((ql[l] >> 4) |
					       (qh[l] >> 4 & 3) << 4) - 32);
			ah[l + 96] = (int8_t)(((ql[l + 32] >> 4) |
					       (qh[l] >> 6) << 4) - 32);
		}
	}
}

void quant_to_float_q6_K(const void *vx, float *y, int64_t n)
{
	const struct block_q6_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++, y += QK_K) {
		const float d = quant_fp16_to_fp32(x[i].d);
		int8_t a[QK_K];

		unpack_q6_K(&x[i], a);
		/* ggml's d * sc * q is (d * sc) * q: the same floats */
		for (int g = 0; g < QK_K / 16; g++) {
			const float dl = d * (float)x[i].scales[g];

			for (int l = 0; l < 16; l++)
				y[16 * g + l] = dl * (float)a[16 * g + l];
		}
	}
}

/* ---- Q8_K ----------------------------------------------------------------- */

void quant_to_float_q8_K(const void *vx, float *y, int64_t n)
{
	const struct block_q8_K *x = vx;

	for (int64_t i = 0; i < n / QK_K; i++)
		for (int j = 0; j < QK_K; j++)
			*y++ = x[i].d * (float)x[i].qs[j];
}

/* Round to nearest, ties to even, for |f| <= 2^22 (ggml's nearest_int):
 * adding 1.5 * 2^23 leaves the integer in the low mantissa bits. */
static inline int nearest_int(float f)
{
	const uint32_t u = quant_f32_bits(f + 12582912.0f);

	return (int)(u & 0x007fffffu) - 0x00400000;
}

/* quantize_row_q8_K_ref: q = round(-127 / max * x), d = 1 / iscale, so the
 * value of largest magnitude maps to -127 when positive, 127 when
 * negative. An all-zero block also gets zero bsums (ggml leaves them
 * stale; no dot product reads them then, as d = 0). */
void quant_from_float_q8_K(const float *x, void *vy, int64_t n)
{
	struct block_q8_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		float max = 0, amax = 0;

		for (int j = 0; j < QK_K; j++) {
			const float ax = fabsf(x[j]);

			if (ax > amax) {
				amax = ax;
				max = x[j];
			}
		}
		if (amax == 0.0f) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		const float iscale = -127.0f / max;

		for (int j = 0; j < QK_K; j++) {
			const int v = nearest_int(iscale * x[j]);

			y[i].qs[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			int sum = 0;

			for (int l = 0; l < 16; l++)
				sum += y[i].qs[j * 16 + l];
			y[i].bsums[j] = (int16_t)sum;
		}
		y[i].d = 1 / iscale;
	}
}

/* ---- dot products against q8_K ------------------------------------------ */

/* *s = x . y; x [n] q2_K, y [n] q8_K (ggml_vec_dot_q2_K_q8_K_generic).
 * The min term comes from y's bsums: sum_j dmin*m_j * sum(q8 in group j). */
void quant_vec_dot_q2_K_q8_K(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q2_K *x = vx;
	const struct block_q8_K *y = vy;
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const uint8_t *q2 = x[i].qs;
		const int8_t *q8 = y[i].qs;
		const uint8_t *sc = x[i].scales;
		int summs = 0, isum = 0, is = 0;

		for (int j = 0; j < 16; j++)
			summs += y[i].bsums[j] * (sc[j] >> 4);

		const float dall = y[i].d * quant_fp16_to_fp32(x[i].d);
		const float dmin = y[i].d * quant_fp16_to_fp32(x[i].dmin);

		for (int k = 0; k < QK_K / 128; k++, q2 += 32) {
			for (int shift = 0; shift < 8; shift += 2, q8 += 32) {
				for (int h = 0; h < 32; h += 16) {
					int isuml = 0;

					for (int l = h; l < h + 16; l++)
						isuml += q8[l] * ((q2[l] >> shift) & 3);
					isum += (sc[is++] & 0x0f) * isuml;
				}
			}
		}
		sumf += dall * (float)isum - dmin * (float)summs;
	}
	*s = sumf;
}

/* The shared tail of the q3_K..q6_K dots: a[QK_K] are the block's integer
 * weights, scale[QK_K/g] one per group of g (16 or 32). Adds the products
 * with y's qs into 8 interleaved lanes, aux32[l] over elements == l mod 8,
 * which is the integer part of ggml's aux16/aux32 loop. */
static inline void lanes_q8_K(const int8_t *a, const int8_t *q8,
			      const int *scale, int g, int32_t aux32[8])
{
	for (int l = 0; l < 8; l++)
		aux32[l] = 0;
	for (int j = 0; j < QK_K; j += 8) {
		const int sc = scale[j / g];

		for (int l = 0; l < 8; l++)
			aux32[l] += sc * (q8[j + l] * a[j + l]);
	}
}

/* *s = x . y; x [n] q3_K, y [n] q8_K (ggml_vec_dot_q3_K_q8_K_generic). */
void quant_vec_dot_q3_K_q8_K(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q3_K *x = vx;
	const struct block_q8_K *y = vy;
	float sums[8] = { 0 };
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const uint8_t *q3 = x[i].qs;
		const uint8_t *hm = x[i].hmask;
		int8_t a[QK_K];
		int scales[16];
		int32_t aux32[8];

		for (int half = 0; half < QK_K / 128; half++, q3 += 32) {
			for (int k = 0; k < 4; k++) {
				const uint8_t m = (uint8_t)(1u << (4 * half + k));
				int8_t *ak = a + 128 * half + 32 * k;

				for (int l = 0; l < 32; l++)
					ak[l] = (int8_t)(((q3[l] >> (2 * k)) & 3) -
							 ((hm[l] & m) ? 0 : 4));
			}
		}
		scales_q3_K(x[i].scales, scales);
		lanes_q8_K(a, y[i].qs, scales, 16, aux32);

		const float d = quant_fp16_to_fp32(x[i].d) * y[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * (float)aux32[l];
	}
	for (int l = 0; l < 8; l++)
		sumf += sums[l];
	*s = sumf;
}

/* The integer half of the q4_K/q5_K dots: scales and mins of x, and the
 * min term sum_j bsums[j] * m[j/2]. */
static inline int scales_mins_k4(const uint8_t packed[12],
				 const int16_t bsums[16], int scales[8])
{
	int sumi = 0;

	for (int j = 0; j < 8; j++) {
		uint8_t sc, m;

		scale_min_k4(j, packed, &sc, &m);
		scales[j] = sc;
		sumi += (bsums[2 * j] + bsums[2 * j + 1]) * m;
	}
	return sumi;
}

/* The part of the q4_K and q5_K dots after unpacking the quants a[QK_K]
 * (as in ggml's generic code): eight 32-wide sub-blocks with 6-bit scales
 * and mins, lane sums into sums[8], the min term into *sumf. */
static inline void accum_k4(const int8_t *a, const uint8_t packed[12], fx_half xd,
			    fx_half xdmin, const struct block_q8_K *y, float sums[8],
			    float *sumf)
{
	int scales[8];
	int32_t aux32[8];
	const int sumi = scales_mins_k4(packed, y->bsums, scales);

	lanes_q8_K(a, y->qs, scales, 32, aux32);

	const float d = quant_fp16_to_fp32(xd) * y->d;

	for (int l = 0; l < 8; l++)
		sums[l] += d * (float)aux32[l];
	const float dmin = quant_fp16_to_fp32(xdmin) * y->d;

	*sumf -= dmin * (float)sumi;
}

/* *s = x . y; x [n] q4_K, y [n] q8_K (ggml_vec_dot_q4_K_q8_K_generic). */
void quant_vec_dot_q4_K_q8_K(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q4_K *x = vx;
	const struct block_q8_K *y = vy;
	float sums[8] = { 0 };
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const uint8_t *q4 = x[i].qs;
		int8_t a[QK_K];

		for (int j = 0; j < QK_K / 64; j++, q4 += 32) {
			for (int l = 0; l < 32; l++) {
				a[64 * j + l] = (int8_t)(q4[l] & 0x0f);
				a[64 * j + 32 + l] = (int8_t)(q4[l] >> 4);
			}
		}
		accum_k4(a, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
	}
	for (int l = 0; l < 8; l++)
		sumf += sums[l];
	*s = sumf;
}

/* *s = x . y; x [n] q5_K, y [n] q8_K (ggml_vec_dot_q5_K_q8_K_generic). */
void quant_vec_dot_q5_K_q8_K(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q5_K *x = vx;
	const struct block_q8_K *y = vy;
	float sums[8] = { 0 };
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_K; i++) {
		const uint8_t *q4 = x[i].qs;
		const uint8_t *hm = x[i].qh;
		int8_t a[QK_K];

		for (int j = 0; j < QK_K / 64; j++, q4 += 32) {
			for (int l = 0; l < 32; l++) {
				a[64 * j + l] = (int8_t)((q4[l] & 0x0f) |
							 ((hm[l] >> (2 * j)) & 1) << 4);
				a[64 * j + 32 + l] = (int8_t)((q4[l] >> 4) |
							      ((hm[l] >> (2 * j + 1)) & 1) << 4);
			}
		}
		accum_k4(a, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
	}
	for (int l = 0; l < 8; l++)
		sumf += sums[l];
	*s = sumf;
}

/* *s = x . y; x [n] q6_K, y [n] q8_K (ggml_vec_dot_q6_K_q8_K_generic). */
void quant_vec_dot_q6_K_q8_K(int64_t n, float *s, const void *vx,
			     const void *vy)
{
	const struct block_q6_K *x = vx;
	const struct block_q8_K *y = vy;
	float sums[8] = { 0 };
	float sumf = 0;

	for (int64_t i = 0; i < n / QK_K; i++) {
		int8_t a[QK_K];
		int scales[16];
		int32_t aux32[8];

		unpack_q6_K(&x[i], a);
		for (int j = 0; j < 16; j++)
			scales[j] = x[i].scales[j];
		lanes_q8_K(a, y[i].qs, scales, 16, aux32);

		const float d = quant_fp16_to_fp32(x[i].d) * y[i].d;

		for (int l = 0; l < 8; l++)
			sums[l] += d * (float)aux32[l];
	}
	for (int l = 0; l < 8; l++)
		sumf += sums[l];
	*s = sumf;
}
