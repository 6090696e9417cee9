/* The AVX-512 set's GLU, attention softmax and activation quantizers:
 * kernels/x86/vmath.h at 512 bits, sixteen elements per step, each element
 * the same operations as act_avx2.c's eight-lane form (so the same bits;
 * test_kernels compares the sets), and the quantizers' bytes those of the
 * type table's reference ones, as act_avx2.c's. Built with the AVX-512
 * flags (CMakeLists.txt), AVX-512F/BW/VL only (no DQ). */
#if defined(__x86_64__) && defined(__AVX512F__)

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/x86/simd_x86.h"
#include "kernels/x86/x86.h"
#include "quant/blocks.h"
#define VM_BITS 512
#include "kernels/x86/vmath.h"

VM_GLU_ROW(kern_glu_avx512_silu, silu_glu16)
VM_GLU_ROW(kern_glu_avx512_gelu, gelu_glu16)

void kern_softmax_avx512(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	softmax16(s, ss, nh, n, scale, m, l, r);
}

/* roundf (half away from zero) of |v| < 2^23: truncate, then one step
 * away from zero where the (exact) fraction is at least a half. */
static inline __m512 round_away16(__m512 v)
{
	__m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
	__mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
	__m512i step = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
				       _mm512_castps_si512(_mm512_set1_ps(1.0f))); /* +-1 */
	return _mm512_mask_add_ps(t, up, t, _mm512_castsi512_ps(step));
}

/* The sum of v's 16 lanes, wrapping as AVX2's vector adds do (GCC's
 * _mm512_reduce_add_epi32 ends in signed scalar adds, which a NaN's
 * INT32_MIN quants would overflow). */
static inline int32_t hsum16_wrap(__m512i v)
{
	__m256i s = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
	__m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
	t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
	return _mm_cvtsi128_si32(t);
}

/* Up to 16 blocks of a q8_0 / q8_1 row at a time (act_avx2.c's
 * q8_block's operations): first every block's largest magnitude, then
 * their d = amax / 127 and id = 1 / d (0 for a zero block) as one vector
 * division each (IEEE division rounds as the scalar one does), the
 * quants, and the fp16 fields sixteen at once. Block by block, each block
 * was one long chain of dependent steps (two divisions, two horizontal
 * reductions, fp16 rounding): ~40 TSC ticks a block, 4% of SmolLM2's
 * prefill. */
ALWAYS_INLINE void q8_rows16(const float *x, void *row, int64_t n, const int Q81)
{
	const int64_t nb = n / 32;
	const size_t bs = Q81 ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
	const size_t qoff = Q81 ? offsetof(struct block_q8_1, qs) : offsetof(struct block_q8_0, qs);
	uint8_t *blk = row;
	float *da = (float *)(blk + kern_act_d_off((size_t)nb * bs));
	void *sa = blk + kern_act_s_off((size_t)nb * bs, nb);
	for (int64_t i0 = 0; i0 < nb; i0 += 16) {
		const int m = nb - i0 < 16 ? (int)(nb - i0) : 16;
		const __mmask16 live = (__mmask16)((1u << m) - 1);
		_Alignas(64) float am[16], id[16];
		_Alignas(64) int32_t sum[16];
		_Alignas(32) fx_half h[16];
		for (int b = 0; b < m; b++) {
			const float *xb = x + 32 * (i0 + b);
			/* max(new, old): a NaN lane keeps the old value, as the
			 * reference's amax < |x| skips NaN, in any order */
			__m512 m0 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb)), _mm512_setzero_ps());
			am[b] = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + 16)), m0));
		}
		__m512 d = _mm512_div_ps(_mm512_maskz_load_ps(live, am), _mm512_set1_ps(127.0f));
		__mmask16 nz = _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ);
		_mm512_store_ps(id, _mm512_maskz_div_ps(nz, _mm512_set1_ps(1.0f), d));
		for (int b = 0; b < m; b++) {
			const float *xb = x + 32 * (i0 + b);
			int8_t *qs = (int8_t *)(blk + (size_t)(i0 + b) * bs + qoff);
			__m512 s = _mm512_set1_ps(id[b]);
			__m512i q0 = _mm512_cvtps_epi32(round_away16(_mm512_mul_ps(_mm512_loadu_ps(xb), s)));
			__m512i q1 = _mm512_cvtps_epi32(round_away16(_mm512_mul_ps(_mm512_loadu_ps(xb + 16), s)));
			/* saturating, as act_avx2.c's packs: |q| <= 127, but a
			 * NaN, an infinity or a block so small that 1 / d
			 * overflows leaves INT32_MIN, stored as -128 by both */
			_mm_storeu_si128((__m128i *)qs, _mm512_cvtsepi32_epi8(q0));
			_mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtsepi32_epi8(q1));
			sum[b] = hsum16_wrap(_mm512_add_epi32(q0, q1));
		}
		__m256i dh = _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT);
		_mm256_store_si256((__m256i *)h, dh);
		_mm512_mask_storeu_ps(da + i0, live, _mm512_cvtph_ps(dh));
		for (int b = 0; b < m; b++)
			memcpy(blk + (size_t)(i0 + b) * bs, &h[b], sizeof(fx_half)); /* the block's d */
		__m512i sv = _mm512_maskz_load_epi32(live, sum);
		if (!Q81) {
			_mm512_mask_storeu_epi32((int32_t *)sa + i0, live, _mm512_mullo_epi32(sv, _mm512_set1_epi32(-128)));
			continue;
		}
		__m256i shh = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_cvtepi32_ps(sv), d), _MM_FROUND_TO_NEAREST_INT);
		_mm256_store_si256((__m256i *)h, shh);
		_mm512_mask_storeu_ps((float *)sa + i0, live, _mm512_cvtph_ps(shh));
		for (int b = 0; b < m; b++)
			memcpy(blk + (size_t)(i0 + b) * bs + offsetof(struct block_q8_1, s), &h[b], sizeof(fx_half));
	}
}

void kern_quant_avx512_q8_0(const float *x, void *row, int64_t n)
{
	q8_rows16(x, row, n, 0);
}

void kern_quant_avx512_q8_1(const float *x, void *row, int64_t n)
{
	q8_rows16(x, row, n, 1);
}

/* quantize_row_q8_K_ref (quant/q_k.c) sixteen elements a step: the
 * first element of largest magnitude found by a compare mask, q =
 * min(127, round-to-even(-127 / max * x)), a 16-element group's bsum one
 * register's sum. */
void kern_quant_avx512_q8_K(const float *x, void *vy, int64_t n)
{
	struct block_q8_K *y = vy;
	for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
		__m512 am = _mm512_setzero_ps();
		for (int k = 0; k < QK_K / 16; k++)
			am = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), am); /* NaN: keeps am */
		const float amax = _mm512_reduce_max_ps(am);
		if (amax == 0.0f) {
			memset(&y[i], 0, sizeof(y[i]));
			continue;
		}
		float max = 0;
		for (int k = 0; k < QK_K / 16; k++) {
			__mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(amax),
							 _CMP_EQ_OQ);
			if (m) {
				max = x[16 * k + __builtin_ctz(m)];
				break;
			}
		}
		const float iscale = -127.0f / max;
		for (int k = 0; k < QK_K / 16; k++) {
			__m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), _mm512_set1_ps(iscale));
			__m512i q = _mm512_min_epi32(
				_mm512_cvtps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
				_mm512_set1_epi32(127));
			_mm_storeu_si128((__m128i *)(y[i].qs + 16 * k), _mm512_cvtsepi32_epi8(q)); /* saturating, as AVX2's packs */
			y[i].bsums[k] = (int16_t)hsum16_wrap(q);
		}
		y[i].d = 1 / iscale;
	}
}

#endif /* __x86_64__ && __AVX512F__ */
