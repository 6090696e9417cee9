/* The 256-element k-quant super-blocks (q2_K .. q6_K) and their q8_K
 * activation format.
 *
 * Dequantizers follow ggml-quants.c (dequantize_row_q*_K) with the same
 * f32 operation order, so the floats equal ggml's and gguf-py's bit for
 * bit. Quantizers follow quantize_row_q*_K_ref (the no-imatrix path of
 * llama-quantize), checked against llama.cpp's own output in
 * tests/test_quant_k.c. Dot products follow ggml-cpu's
 * ggml_vec_dot_q*_K_q8_K_generic, including their 8-lane float partial
 * sums, so the result is the one a generic ggml build gives.
 */
#include "quant/blocks.h"

#include <math.h>
#include <stdbool.h>
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

/* ---- k-quant quantizers -------------------------------------------------- */

/* The reference quantizers of ggml-quants.c without an importance matrix
 * (quantize_row_q{2,3,4,5,6}_K_ref, which llama.cpp's quantize_q*_K, and
 * so llama-quantize, call when it is given none). Each f32 expression
 * keeps ggml's operand order and each int -> f32 conversion its place, and
 * nothing may be contracted into an FMA (ggml's x86 builds do not; with
 * clang's default contraction up to a fifth of the blocks came out
 * different, and the round-trip error up to 4% larger): so the bytes are
 * ggml's. The fitting helpers below are make_qkx2_quants, make_qx_quants
 * (rmse_type 1, no weights) and make_q3_quants (do_rmse) of that file.
 *
 * The standard pragma is for clang (gcc ignores it); the optimize one for
 * gcc in GNU C mode (in ISO C mode, as CMake builds, gcc does not contract
 * anyway; clang ignores it). Each compiler's warning about the other's
 * pragma is silenced. Undone at the end of the section. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma STDC FP_CONTRACT OFF
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#pragma GCC diagnostic pop

#define GROUP_MAX_EPS 1e-15f

static inline int clamp_int(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* The value of largest magnitude in x [n] (first one on ties; 0 if all
 * are zero); *amax_out gets its magnitude. */
static inline float signed_amax(const float *x, int n, float *amax_out)
{
	float max = 0, amax = 0;

	for (int i = 0; i < n; i++) {
		const float ax = fabsf(x[i]);

		if (ax > amax) {
			amax = ax;
			max = x[i];
		}
	}
	*amax_out = amax;
	return max;
}

/* Weighted error of x [n] against scale * L + min: sum w * |diff| (mad)
 * or sum w * diff^2. */
static float fit_error(const float *x, const float *w, const uint8_t *L,
		       int n, float scale, float min, bool mad)
{
	float err = 0;

	for (int i = 0; i < n; i++) {
		float diff = scale * (float)L[i] + min - x[i];

		diff = mad ? fabsf(diff) : diff * diff;
		err += w[i] * diff;
	}
	return err;
}

/* make_qkx2_quants for nstep >= 1: x [n] (n <= 32) ~ scale * L - *the_min,
 * L [n] in 0..nmax, *the_min >= 0 (the offset never goes above zero).
 * Starts from the min/max grid, then tries nstep+1 grids of (nmax + rmin +
 * rdelta * is) steps, each followed by the weighted least-squares scale
 * and offset for its levels, and keeps the one of least weighted error
 * (w [n]: weights; mad: absolute instead of squared error). */
static float fit_scale_min(const float *x, const float *w, int n, int nmax,
			   uint8_t *L, float *the_min, float rmin, float rdelta,
			   int nstep, bool mad)
{
	float min = x[0], max = x[0];
	float sum_w = w[0], sum_x = sum_w * x[0];
	uint8_t aux[32];

	for (int i = 1; i < n; i++) {
		if (x[i] < min)
			min = x[i];
		if (x[i] > max)
			max = x[i];
		sum_w += w[i];
		sum_x += w[i] * x[i];
	}
	if (min > 0)
		min = 0;
	if (max == min) {
		memset(L, 0, (size_t)n);
		*the_min = -min;
		return 0.0f;
	}
	float iscale = (float)nmax / (max - min);
	float scale = 1 / iscale;

	for (int i = 0; i < n; i++)
		L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
	float best = fit_error(x, w, L, n, scale, min, mad);

	for (int is = 0; is <= nstep; is++) {
		float sum_l = 0, sum_l2 = 0, sum_xl = 0;

		iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
		for (int i = 0; i < n; i++) {
			const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
			const float fl = (float)l;

			aux[i] = (uint8_t)l;
			sum_l += w[i] * fl;
			sum_l2 += w[i] * fl * fl;
			sum_xl += w[i] * fl * x[i];
		}
		const float D = sum_w * sum_l2 - sum_l * sum_l;

		if (!(D > 0))
			continue;
		float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
		float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;

		if (this_min > 0) {
			this_min = 0;
			this_scale = sum_xl / sum_l2;
		}
		const float err = fit_error(x, w, aux, n, this_scale, this_min, mad);

		if (err < best) {
			memcpy(L, aux, (size_t)n);
			best = err;
			scale = this_scale;
			min = this_min;
		}
	}
	*the_min = -min;
	return scale;
}

/* sum w x l and sum w l^2 over x [n] on the grid of step 1/iscale, with
 * w = x^2 and l = round(iscale * x) in -nmax..nmax-1; L [n] (if not NULL)
 * gets l + nmax. */
static void sym_grid(const float *x, int n, int nmax, float iscale,
		     int8_t *L, float *sumlx, float *suml2)
{
	float slx = 0, sl2 = 0;

	for (int i = 0; i < n; i++) {
		const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
		const float w = x[i] * x[i];

		if (L)
			L[i] = (int8_t)(l + nmax);
		slx += w * x[i] * (float)l;
		sl2 += w * (float)l * (float)l;
	}
	*sumlx = slx;
	*suml2 = sl2;
}

/* make_qx_quants with rmse_type 1 and no importance: x [n] ~ scale *
 * (L - nmax), L in 0..2*nmax-1, weighted by x^2. Tries the grids of
 * -(nmax + 0.1 is) / max steps, is = -9..9, keeping the least-squares
 * scale of the best. An all-zero group gives L = 0 and scale 0. */
static float fit_scale_sym(const float *x, int n, int nmax, int8_t *L)
{
	float amax, sumlx, suml2;
	const float max = signed_amax(x, n, &amax);

	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	sym_grid(x, n, nmax, (float)-nmax / max, L, &sumlx, &suml2);
	float scale = suml2 ? sumlx / suml2 : 0.0f;
	float best = scale * sumlx;

	for (int is = -9; is <= 9; is++) {
		if (is == 0)
			continue;
		const float iscale = -((float)nmax + 0.1f * (float)is) / max;

		sym_grid(x, n, nmax, iscale, NULL, &sumlx, &suml2);
		if (suml2 > 0 && sumlx * sumlx > best * suml2) {
			sym_grid(x, n, nmax, iscale, L, &sumlx, &suml2);
			scale = sumlx / suml2;
			best = scale * sumlx;
		}
	}
	return scale;
}

/* make_q3_quants with do_rmse: x [n] ~ scale * (L - nmax), L in
 * 0..2*nmax-1, weighted by x^2. From the -nmax / max grid, up to 5 passes
 * move single levels to where they lower the weighted error. */
static float fit_scale_q3(const float *x, int n, int nmax, int8_t *L)
{
	float amax, sumlx, suml2;
	const float max = signed_amax(x, n, &amax);

	if (amax < GROUP_MAX_EPS) {
		memset(L, 0, (size_t)n);
		return 0.0f;
	}
	sym_grid(x, n, nmax, (float)-nmax / max, L, &sumlx, &suml2);
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] - nmax);
	for (int itry = 0; itry < 5; itry++) {
		int changed = 0;

		for (int i = 0; i < n; i++) {
			const float w = x[i] * x[i];
			float slx = sumlx - w * x[i] * (float)L[i];

			if (!(slx > 0))
				continue;
			float sl2 = suml2 - w * (float)L[i] * (float)L[i];
			const int l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);

			if (l == L[i])
				continue;
			slx += w * x[i] * (float)l;
			sl2 += w * (float)l * (float)l;
			if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
				L[i] = (int8_t)l;
				sumlx = slx;
				suml2 = sl2;
				changed++;
			}
		}
		if (!changed)
			break;
	}
	for (int i = 0; i < n; i++)
		L[i] = (int8_t)(L[i] + nmax);
	return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Pack four 2-bit levels per byte, q2_K/q3_K order: in each 128-half,
 * byte l holds elements l, l+32, l+64, l+96 from the low bits up. */
static void pack_2bit(const uint8_t L[QK_K], uint8_t qs[QK_K / 4])
{
	for (int j = 0; j < QK_K; j += 128)
		for (int l = 0; l < 32; l++)
			qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 |
						  L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Inverse of scale_min_k4: 8 6-bit scales ls and mins lm into 12 bytes. */
static void pack_scale_min_k4(const uint8_t ls[8], const uint8_t lm[8],
			      uint8_t q[K_SCALE_SIZE])
{
	for (int j = 0; j < 4; j++) {
		q[j] = ls[j];
		q[j + 4] = lm[j];
	}
	for (int j = 4; j < 8; j++) {
		q[j + 4] = (uint8_t)((ls[j] & 0x0f) | (lm[j] & 0x0f) << 4);
		q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
		q[j] |= (uint8_t)((lm[j] >> 4) << 6);
	}
}

/* The common part of q4_K and q5_K: 8 sub-blocks of 32 of x [QK_K], each
 * fitted as sc * L - m (weights sqrt(mean x^2) + |x|), then sc and m
 * quantized to 6 bits against d = max sc / 63, dmin = max m / 63, and
 * L [QK_K] (0..nmax) redone against the rounded sub-block scales. */
static void quantize_k4_block(const float *x, int nmax, float rmin, int nstep,
			      fx_half *d, fx_half *dmin,
			      uint8_t scales[K_SCALE_SIZE], uint8_t L[QK_K])
{
	float sc[QK_K / 32], mins[QK_K / 32], w[32];
	float max_scale = 0, max_min = 0;
	uint8_t ls[QK_K / 32], lm[QK_K / 32];

	for (int j = 0; j < QK_K / 32; j++) {
		const float *xj = x + 32 * j;
		float sum_x2 = 0;

		for (int l = 0; l < 32; l++)
			sum_x2 += xj[l] * xj[l];
		const float av_x = sqrtf(sum_x2 / 32);

		for (int l = 0; l < 32; l++)
			w[l] = av_x + fabsf(xj[l]);
		sc[j] = fit_scale_min(xj, w, 32, nmax, L + 32 * j, &mins[j],
				      rmin, 0.1f, nstep, false);
		if (sc[j] > max_scale)
			max_scale = sc[j];
		if (mins[j] > max_min)
			max_min = mins[j];
	}
	const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
	const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;

	for (int j = 0; j < QK_K / 32; j++) {
		/* ggml stores the int into a uint8_t first, then clamps */
		const uint8_t s = (uint8_t)nearest_int(inv_scale * sc[j]);
		const uint8_t m = (uint8_t)nearest_int(inv_min * mins[j]);

		ls[j] = s < 63 ? s : 63;
		lm[j] = m < 63 ? m : 63;
	}
	pack_scale_min_k4(ls, lm, scales);
	*d = quant_fp32_to_fp16(max_scale / 63.f);
	*dmin = quant_fp32_to_fp16(max_min / 63.f);

	for (int j = 0; j < QK_K / 32; j++) {
		uint8_t s, m;

		scale_min_k4(j, scales, &s, &m);
		const float dl = quant_fp16_to_fp32(*d) * (float)s;

		if (!dl)
			continue;
		const float dm = quant_fp16_to_fp32(*dmin) * (float)m;

		for (int l = 0; l < 32; l++)
			L[32 * j + l] = (uint8_t)clamp_int(
				nearest_int((x[32 * j + l] + dm) / dl), 0, nmax);
	}
}

/* quantize_row_q2_K_ref: 16 sub-blocks of 16 fitted as sc * L - m, L in
 * 0..3 (weights |x|, least absolute error); sc and m to 4 bits against
 * d = max sc / 15 and dmin = max m / 15; then L redone. */
void quant_from_float_q2_K(const float *x, void *vy, int64_t n)
{
	struct block_q2_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		float sc[QK_K / 16], mins[QK_K / 16], w[16];
		float max_scale = 0, max_min = 0;
		uint8_t L[QK_K];

		for (int j = 0; j < QK_K / 16; j++) {
			for (int l = 0; l < 16; l++)
				w[l] = fabsf(x[16 * j + l]);
			sc[j] = fit_scale_min(x + 16 * j, w, 16, 3, L + 16 * j,
					      &mins[j], -0.5f, 0.1f, 15, true);
			if (sc[j] > max_scale)
				max_scale = sc[j];
			if (mins[j] > max_min)
				max_min = mins[j];
		}
		memset(y[i].scales, 0, sizeof(y[i].scales));
		y[i].d = quant_fp32_to_fp16(0.0f);
		y[i].dmin = quant_fp32_to_fp16(0.0f);
		if (max_scale > 0) {
			const float iscale = 15.f / max_scale;

			for (int j = 0; j < QK_K / 16; j++)
				y[i].scales[j] = (uint8_t)nearest_int(iscale * sc[j]);
			y[i].d = quant_fp32_to_fp16(max_scale / 15.f);
		}
		if (max_min > 0) {
			const float iscale = 15.f / max_min;

			for (int j = 0; j < QK_K / 16; j++)
				y[i].scales[j] |= (uint8_t)((unsigned)nearest_int(iscale * mins[j]) << 4);
			y[i].dmin = quant_fp32_to_fp16(max_min / 15.f);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			const float d = quant_fp16_to_fp32(y[i].d) *
					(float)(y[i].scales[j] & 0x0f);

			if (!d)
				continue;
			const float dm = quant_fp16_to_fp32(y[i].dmin) *
					 (float)(y[i].scales[j] >> 4);

			for (int l = 0; l < 16; l++)
				L[16 * j + l] = (uint8_t)clamp_int(
					nearest_int((x[16 * j + l] + dm) / d), 0, 3);
		}
		pack_2bit(L, y[i].qs);
	}
}

/* Pack the 16 q3_K scales l (0..63, bias 32 included) into 12 bytes: the
 * inverse of scales_q3_K. */
static void pack_scales_q3_K(const int l[16], uint8_t sc[12])
{
	memset(sc, 0, 12);
	for (int j = 0; j < 16; j++) {
		if (j < 8)
			sc[j] = (uint8_t)(l[j] & 0x0f);
		else
			sc[j - 8] |= (uint8_t)((l[j] & 0x0f) << 4);
		sc[8 + j % 4] |= (uint8_t)((l[j] >> 4) << (2 * (j / 4)));
	}
}

/* quantize_row_q3_K_ref: 16 sub-blocks of 16 fitted as sc * (L - 4), L in
 * 0..7 (make_q3_quants); sc to 6 signed bits against d = -max sc / 32
 * (max: largest magnitude); then L redone; bit 2 of L goes to hmask
 * (element j: byte j % 32, bit j / 32), bits 0..1 to qs. */
void quant_from_float_q3_K(const float *x, void *vy, int64_t n)
{
	struct block_q3_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		float sc[QK_K / 16];
		float max_scale = 0, amax = 0;
		int8_t L[QK_K];
		int ls[QK_K / 16], scales[QK_K / 16];
		uint8_t U[QK_K];

		for (int j = 0; j < QK_K / 16; j++) {
			sc[j] = fit_scale_q3(x + 16 * j, 16, 4, L + 16 * j);
			if (fabsf(sc[j]) > amax) {
				amax = fabsf(sc[j]);
				max_scale = sc[j];
			}
		}
		memset(y[i].scales, 0, sizeof(y[i].scales));
		y[i].d = quant_fp32_to_fp16(0.0f);
		if (max_scale) {
			const float iscale = -32.f / max_scale;

			for (int j = 0; j < QK_K / 16; j++) {
				/* ggml stores the int into an int8_t first */
				const int8_t l = (int8_t)nearest_int(iscale * sc[j]);

				ls[j] = clamp_int(l, -32, 31) + 32;
			}
			pack_scales_q3_K(ls, y[i].scales);
			y[i].d = quant_fp32_to_fp16(1 / iscale);
		}
		scales_q3_K(y[i].scales, scales);
		for (int j = 0; j < QK_K / 16; j++) {
			const float d = quant_fp16_to_fp32(y[i].d) * (float)scales[j];

			if (!d)
				continue;
			for (int l = 0; l < 16; l++)
				L[16 * j + l] = (int8_t)(clamp_int(
					nearest_int(x[16 * j + l] / d), -4, 3) + 4);
		}
		memset(y[i].hmask, 0, sizeof(y[i].hmask));
		for (int j = 0; j < QK_K; j++) {
			U[j] = (uint8_t)L[j];
			if (U[j] > 3) {
				y[i].hmask[j % 32] |= (uint8_t)(1u << (j / 32));
				U[j] -= 4;
			}
		}
		pack_2bit(U, y[i].qs);
	}
}

/* quantize_row_q4_K_ref: quantize_k4_block with L in 0..15 and 21 grids
 * (rmin -1); qs byte l of each 64-chunk: element l low, l + 32 high. */
void quant_from_float_q4_K(const float *x, void *vy, int64_t n)
{
	struct block_q4_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		uint8_t L[QK_K];
		uint8_t *q = y[i].qs;

		quantize_k4_block(x, 15, -1.0f, 20, &y[i].d, &y[i].dmin,
				  y[i].scales, L);
		for (int j = 0; j < QK_K; j += 64, q += 32)
			for (int l = 0; l < 32; l++)
				q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
	}
}

/* quantize_row_q5_K_ref: quantize_k4_block with L in 0..31 and 16 grids
 * (rmin -0.5); low nibbles as q4_K, the fifth bit of element l + 64c
 * (+32) in bit 2c (2c + 1) of qh[l]. */
void quant_from_float_q5_K(const float *x, void *vy, int64_t n)
{
	struct block_q5_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		uint8_t L[QK_K];
		uint8_t *ql = y[i].qs;

		quantize_k4_block(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin,
				  y[i].scales, L);
		memset(y[i].qh, 0, sizeof(y[i].qh));
		for (int c = 0; c < QK_K / 64; c++, ql += 32) {
			for (int l = 0; l < 32; l++) {
				const int l1 = L[64 * c + l];
				const int l2 = L[64 * c + l + 32];

				y[i].qh[l] |= (uint8_t)((l1 >> 4) << (2 * c) |
							(l2 >> 4) << (2 * c + 1));
				ql[l] = (uint8_t)((l1 & 0x0f) | (l2 & 0x0f) << 4);
			}
		}
	}
}

/* Inverse of unpack_q6_K: L [QK_K] levels 0..63 (bias 32 included). */
static void pack_q6_K(const int8_t L[QK_K], struct block_q6_K *b)
{
	for (int half = 0; half < QK_K / 128; half++) {
		const int8_t *lh = L + 128 * half;
		uint8_t *ql = b->ql + 64 * half;
		uint8_t *qh = b->qh + 32 * half;

		for (int l = 0; l < 32; l++) {
			ql[l] = (uint8_t)((lh[l] & 0x0f) | (lh[l + 64] & 0x0f) << 4);
			ql[l + 32] = (uint8_t)((lh[l + 32] & 0x0f) |
					       (lh[l + 96] & 0x0f) << 4);
			qh[l] = (uint8_t)(lh[l] >> 4 | (lh[l + 32] >> 4) << 2 |
					  (lh[l + 64] >> 4) << 4 | (lh[l + 96] >> 4) << 6);
		}
	}
}

/* quantize_row_q6_K_ref: 16 sub-blocks of 16 fitted as sc * (L - 32), L in
 * 0..63 (make_qx_quants, weights x^2); sc to int8 against d = -max sc /
 * 128 (max: largest magnitude); then L redone. Packing: the inverse of
 * unpack_q6_K. An all-zero block is all zero bytes. */
void quant_from_float_q6_K(const float *x, void *vy, int64_t n)
{
	struct block_q6_K *y = vy;

	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		float sc[QK_K / 16];
		float max_scale = 0, max_abs = 0;
		int8_t L[QK_K];

		for (int j = 0; j < QK_K / 16; j++) {
			sc[j] = fit_scale_sym(x + 16 * j, 16, 32, L + 16 * j);
			if (fabsf(sc[j]) > max_abs) {
				max_abs = fabsf(sc[j]);
				max_scale = sc[j];
			}
		}
		memset(&y[i], 0, sizeof(y[i]));
		if (max_abs < GROUP_MAX_EPS)
			continue;
		const float iscale = -128.f / max_scale;

		y[i].d = quant_fp32_to_fp16(1 / iscale);
		for (int j = 0; j < QK_K / 16; j++) {
			const int v = nearest_int(iscale * sc[j]);

			y[i].scales[j] = (int8_t)(v < 127 ? v : 127);
		}
		for (int j = 0; j < QK_K / 16; j++) {
			const float d = quant_fp16_to_fp32(y[i].d) * (float)y[i].scales[j];

			if (!d)
				continue;
			for (int l = 0; l < 16; l++)
				L[16 * j + l] = (int8_t)(clamp_int(
					nearest_int(x[16 * j + l] / d), -32, 31) + 32);
		}
		pack_q6_K(L, &y[i]);
	}
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#pragma GCC pop_options
#pragma STDC FP_CONTRACT DEFAULT
#pragma GCC diagnostic pop

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
