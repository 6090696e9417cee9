/* AVX2/FMA/F16C activation kernels (see kernels/kern.h): the GLU's act(gate) *
 * up over a row (a kernel set's glu) and the attention softmax, eight
 * elements per step with a vector exp (kernels/x86/vmath.h), and the
 * quantizers of matmul inputs (act_quant).
 * Built with -mavx2 -mfma -mf16c like dot_avx2.c and handed out only when
 * the CPU has them. Every element goes through the same vector code, a partial
 * last step included (it is padded through a small buffer), so a value
 * never depends on where a thread's slice starts or ends. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/x86/x86.h"
#define VM_BITS 256
#include "kernels/x86/vmath.h"
#include "quant/blocks.h"
#include "quant/quant.h"

/* The GLU and the softmax at 256 bits (kernels/x86/vmath.h; act_avx512.c
 * has the same code at 512 bits for the AVX-512 set). */
VM_GLU_ROW(kern_glu_avx2_silu, silu_glu8)
VM_GLU_ROW(kern_glu_avx2_gelu, gelu_glu8)

void kern_softmax_avx2(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	softmax8(s, ss, nh, n, scale, m, l, r);
}

/* ---- activation quantizers, bit-identical to the type table's ----------
 * (quant/q_legacy.c, quant/q_k.c: ggml's reference quantizers). Maxima are
 * exact whatever the order; the scale is computed by the same scalar
 * expression; each product x * id is the same float; roundf (half away
 * from zero) and nearest_int (half to even) are reproduced exactly. */

/* 32 int32 lanes (four vectors) to 32 int8 in order. */
static inline __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
	__m256i v = _mm256_packs_epi16(ab, cd);
	return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* roundf: round half away from zero (|v| < 2^23). */
static inline __m256 round_away(__m256 v)
{
	__m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	__m256 frac = _mm256_sub_ps(v, t); /* exact */
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 absf = _mm256_andnot_ps(sign, frac);
	__m256 step = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)); /* +-1 */
	__m256 up = _mm256_cmp_ps(absf, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
	return _mm256_add_ps(t, _mm256_and_ps(up, step));
}

/* One 32-element block: its qs by roundf(x * id), and sum(qs). */
static inline int q8_block(const float *x, int8_t *qs, float *d_out)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4], am = _mm256_setzero_ps();
	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		am = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), am); /* NaN: keeps am, as the reference */
	}
	const float d = vm_hmax8(am) / 127;
	const float id = d != 0.0f ? 1.0f / d : 0.0f;
	__m256i q[4];
	for (int k = 0; k < 4; k++)
		q[k] = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v[k], _mm256_set1_ps(id))));
	__m256i b = pack32(q[0], q[1], q[2], q[3]);
	_mm256_storeu_si256((__m256i *)qs, b);
	__m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
	*d_out = d;
	return _mm_cvtsi128_si32(s4);
}

/* binary32 -> binary16 by F16C's vcvtps2ph, round to nearest even: the
 * same bits as quant_fp32_to_fp16 (quant/blocks.h), one instruction
 * instead of a call per block. */
static inline fx_half f16_of(float f)
{
	return (fx_half)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

/* The blocks, then (kern.h's AVX2 layout) each block's d as stored (the
 * fp16 value, as f32) and -128 times its sum of quants (q8_0; |sum| <=
 * 32 * 127, so no overflow) or s (q8_1). */
void kern_quant_avx2_q8_0(const float *x, void *row, int64_t n)
{
	struct block_q8_0 *y = row;
	const int64_t nb = n / 32;
	size_t bytes = (size_t)nb * sizeof(*y);
	float *da = (float *)((uint8_t *)row + kern_act_d_off(bytes));
	int32_t *sum = (int32_t *)((uint8_t *)row + kern_act_s_off(bytes, nb));
	for (int64_t i = 0; i < nb; i++) {
		float d;
		/* wrapping (a NaN's INT32_MIN quant would overflow a signed product) */
		sum[i] = (int32_t)(0u - 128u * (uint32_t)q8_block(x + 32 * i, y[i].qs, &d));
		y[i].d = f16_of(d);
		da[i] = _cvtsh_ss(y[i].d);
	}
}

void kern_quant_avx2_q8_1(const float *x, void *row, int64_t n)
{
	struct block_q8_1 *y = row;
	const int64_t nb = n / 32;
	size_t bytes = (size_t)nb * sizeof(*y);
	float *da = (float *)((uint8_t *)row + kern_act_d_off(bytes));
	float *sa = (float *)((uint8_t *)row + kern_act_s_off(bytes, nb));
	for (int64_t i = 0; i < nb; i++) {
		float d;
		int sum = q8_block(x + 32 * i, y[i].qs, &d);
		y[i].d = f16_of(d);
		y[i].s = f16_of((float)sum * d);
		da[i] = _cvtsh_ss(y[i].d);
		sa[i] = _cvtsh_ss(y[i].s);
	}
}

void kern_quant_avx2_q8_K(const float *x, void *vy, int64_t n)
{
	struct block_q8_K *y = vy;
	const __m256 sign = _mm256_set1_ps(-0.0f);
	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		__m256 am = _mm256_setzero_ps();
		for (int k = 0; k < QK_K / 8; k++)
			am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)), am);
		const float amax = vm_hmax8(am);
		if (amax == 0.0f) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		float max = 0; /* the first element of largest magnitude, as the reference */
		for (int j = 0; j < QK_K; j++) {
			if (fabsf(x[j]) == amax) {
				max = x[j];
				break;
			}
		}
		const float iscale = -127.0f / max;
		for (int k = 0; k < QK_K / 32; k++) {
			__m256i q[4];
			for (int j = 0; j < 4; j++) {
				__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * k + 8 * j), _mm256_set1_ps(iscale));
				q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_round_ps(
							       v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
						       _mm256_set1_epi32(127));
			}
			_mm256_storeu_si256((__m256i *)(y[i].qs + 32 * k), pack32(q[0], q[1], q[2], q[3]));
			/* bsums of the two 16-element groups */
			__m256i s0 = _mm256_add_epi32(q[0], q[1]), s1 = _mm256_add_epi32(q[2], q[3]);
			__m256i h = _mm256_hadd_epi32(s0, s1);
			h = _mm256_hadd_epi32(h, h);
			/* lanes: 0 = s0 low half, 1 = s1 low half, 4, 5 = the high halves */
			int32_t t[8];
			_mm256_storeu_si256((__m256i *)t, h);
			y[i].bsums[2 * k] = (int16_t)((uint32_t)t[0] + (uint32_t)t[4]); /* wrapping, as the */
			y[i].bsums[2 * k + 1] = (int16_t)((uint32_t)t[1] + (uint32_t)t[5]); /* vector sums */
		}
		y[i].d = 1 / iscale;
	}
}

#endif /* __x86_64__ */
