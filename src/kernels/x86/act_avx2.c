/* AVX2/FMA/F16C activation kernels (see kernels/kern.h): the GLU's act(gate) *
 * up over a row (a kernel set's glu), eight elements per step with a vector exp,
 * and the quantizers of matmul inputs (act_quant).
 * Built with -mavx2 -mfma -mf16c like dot_avx2.c and handed out only when
 * the CPU has them. Every element goes through the same vector code, a partial
 * last step included (it is padded through a small buffer), so a value
 * never depends on where a thread's slice starts or ends. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/softmax.h"
#include "kernels/x86/x86.h"
#include "quant/blocks.h"
#include "quant/quant.h"

/* e^x, relative error about 2e-7 (Cephes expf: x = n ln2 + r with
 * |r| <= ln2 / 2, a degree-6 polynomial for e^r, 2^n through the exponent
 * bits). x is clamped to [-87.3, 88.7] (no inf, no denormals). */
static inline __m256 exp8(__m256 x)
{
	x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	/* n in [-126, 128]: 2^n may need two factors to stay finite */
	__m256i ni = _mm256_cvtps_epi32(n);
	__m256i h = _mm256_srai_epi32(ni, 1);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(127)), 23));
	__m256 s2 = _mm256_castsi256_ps(
		_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, h), _mm256_set1_epi32(127)), 23));
	return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* silu(g) * u = g / (1 + e^-g) * u */
static inline __m256 silu_glu8(__m256 g, __m256 u)
{
	__m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

/* gelu_tanh(g) * u: 0.5 g (1 + tanh z) = g / (1 + e^-2z), the form
 * without cancellation where tanh z is near -1. */
static inline __m256 gelu_glu8(__m256 g, __m256 u)
{
	__m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
	__m256 z = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
				 _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
	__m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), z));
	return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

#define GLU_ROW(name, f8)                                                            \
	void name(float *g, const float *u, long n)                                  \
	{                                                                            \
		long i = 0;                                                          \
		for (; i + 8 <= n; i += 8)                                           \
			_mm256_storeu_ps(g + i, f8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i))); \
		if (i < n) {                                                         \
			float tg[8] = { 0 }, tu[8] = { 0 };                          \
			memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));          \
			memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));          \
			_mm256_storeu_ps(tg, f8(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu))); \
			memcpy(g + i, tg, (size_t)(n - i) * sizeof(float));          \
		}                                                                    \
	}

GLU_ROW(kern_glu_avx2_silu, silu_glu8)
GLU_ROW(kern_glu_avx2_gelu, gelu_glu8)

/* Attention weights (softmax): kernels/softmax.h's e^x, eight lanes, each
 * step the scalar form's operation (fused where it fuses), so the bits are
 * the portable set's. */
static inline __m256 exp8_neg(__m256 x)
{
	const __m256 shift = _mm256_set1_ps(KERN_EXP_SHIFT);
	__m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(KERN_EXP_LOG2E), shift);
	__m256 n = _mm256_sub_ps(z, shift);
	__m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN_EXP_LN2_HI), x);
	r = _mm256_fmadd_ps(n, _mm256_set1_ps(-KERN_EXP_LN2_LO), r);
	__m256 p = _mm256_fmadd_ps(_mm256_set1_ps(KERN_EXP_P0), r, _mm256_set1_ps(KERN_EXP_P1));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN_EXP_P2));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN_EXP_P3));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN_EXP_P4));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KERN_EXP_P5));
	__m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
	__m256i sb = _mm256_add_epi32(_mm256_slli_epi32(_mm256_castps_si256(z), 23),
				      _mm256_set1_epi32(127 << 23));
	__m256 e = _mm256_mul_ps(y, _mm256_castsi256_ps(sb));
	/* below the cut (-inf too) 0; NaN compares false and stays NaN */
	return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(KERN_EXP_CUT), _CMP_LT_OQ), e);
}

/* A head's scores times scale (in place) and their maximum, NaNs skipped
 * (max_ps returns its second operand when either is NaN); in any order,
 * the maximum is exact. */
static inline float scale_max(float *s, int n, float scale)
{
	const __m256 sv = _mm256_set1_ps(scale);
	__m256 mv = _mm256_set1_ps(-INFINITY);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), sv);
		_mm256_storeu_ps(s + i, x);
		mv = _mm256_max_ps(x, mv);
	}
	__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
	m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
	m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
	float m = _mm_cvtss_f32(m4);
	for (; i < n; i++) {
		s[i] *= scale;
		m = s[i] > m ? s[i] : m;
	}
	return m;
}

void kern_softmax_avx2(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	for (int h = 0; h < nh; h++) {
		float *sh = s + (size_t)h * ss, cm = scale_max(sh, n, scale);
		r[h] = 1.0f;
		if (cm > m[h]) {
			r[h] = _mm256_cvtss_f32(exp8_neg(_mm256_set1_ps(m[h] - cm)));
			l[h] *= r[h];
			m[h] = cm;
		}
		const __m256 mv = _mm256_set1_ps(m[h]);
		__m256 acc = _mm256_setzero_ps();
		int i = 0;
		for (; i + 8 <= n; i += 8) {
			__m256 e = exp8_neg(_mm256_sub_ps(_mm256_loadu_ps(sh + i), mv));
			_mm256_storeu_ps(sh + i, e);
			acc = _mm256_add_ps(acc, e);
		}
		if (i < n) { /* the last lanes; the others add 0 */
			__m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
			__m256 e = exp8_neg(_mm256_sub_ps(_mm256_maskload_ps(sh + i, k), mv));
			e = _mm256_and_ps(e, _mm256_castsi256_ps(k));
			_mm256_maskstore_ps(sh + i, k, e);
			acc = _mm256_add_ps(acc, e);
		}
		__m128 a = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
		a = _mm_add_ps(a, _mm_movehl_ps(a, a));
		l[h] += _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
	}
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

static inline float hmax8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* One 32-element block: its qs by roundf(x * id), and sum(qs). */
static inline int q8_block(const float *x, int8_t *qs, float *d_out)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 v[4], am = _mm256_setzero_ps();
	for (int k = 0; k < 4; k++) {
		v[k] = _mm256_loadu_ps(x + 8 * k);
		am = _mm256_max_ps(am, _mm256_andnot_ps(sign, v[k]));
	}
	const float d = hmax8(am) / 127;
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

/* The blocks, then (dot.h's AVX2 layout) each block's d as stored (the
 * fp16 value, as f32) and its sum of quants (q8_0) or s (q8_1). */
void kern_quant_avx2_q8_0(const float *x, void *row, int64_t n)
{
	struct block_q8_0 *y = row;
	const int64_t nb = n / 32;
	size_t bytes = (size_t)nb * sizeof(*y);
	float *da = (float *)((uint8_t *)row + kern_act_d_off(bytes));
	int32_t *sum = (int32_t *)((uint8_t *)row + kern_act_s_off(bytes, nb));
	for (int64_t i = 0; i < nb; i++) {
		float d;
		sum[i] = q8_block(x + 32 * i, y[i].qs, &d);
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
			am = _mm256_max_ps(am, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
		const float amax = hmax8(am);
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
			y[i].bsums[2 * k] = (int16_t)(t[0] + t[4]);
			y[i].bsums[2 * k + 1] = (int16_t)(t[1] + t[5]);
		}
		y[i].d = 1 / iscale;
	}
}

#endif /* __x86_64__ */
