/* The x86 sets' activation math written once for two register widths:
 * the GLU (kern_glu_fn) and the attention softmax (kern_softmax_fn),
 * included by act_avx2.c with VM_BITS 256 (every x86 set) and by
 * act_avx512.c with VM_BITS 512 (the AVX-512 set). Every operation is per
 * lane, so both widths give the same bits for every element: the GLU's
 * e^x is Cephes' expf (relative error ~2e-7), the softmax's is
 * kernels/softmax.h's, and the softmax's sum adds each 8-key group in
 * turn into eight lanes, as softmax.h defines it, at either width. Each
 * includer gets VM_FN(name) = name8 or name16 and VM_GLU_ROW; no
 * include guard: the two files include it once each. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/softmax.h"

#if VM_BITS == 256
typedef __m256 vm_f;
typedef __m256i vm_i;
typedef __m256i vm_mask;
enum { VM_LANES = 8 };
#define VM(op) _mm256_##op
#define VM_FN(name) name##8
#define vm_castf_i(x) _mm256_castps_si256(x)
#define vm_casti_f(x) _mm256_castsi256_ps(x)
#define vm_round(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* e where x >= c or x is NaN, else 0 */
#define vm_zero_below(x, c, e) _mm256_andnot_ps(_mm256_cmp_ps((x), _mm256_set1_ps(c), _CMP_LT_OQ), (e))
#define vm_tail(k) _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define vm_loadm(p, m) _mm256_maskload_ps((p), (m))
#define vm_storem(p, m, x) _mm256_maskstore_ps((p), (m), (x))
#define vm_andm(x, m) _mm256_and_ps((x), _mm256_castsi256_ps(m))
#define vm_first8(x) (x)
#define vm_hmax(x) vm_hmax8(x)
#elif VM_BITS == 512
typedef __m512 vm_f;
typedef __m512i vm_i;
typedef __mmask16 vm_mask;
enum { VM_LANES = 16 };
#define VM(op) _mm512_##op
#define VM_FN(name) name##16
#define vm_castf_i(x) _mm512_castps_si512(x)
#define vm_casti_f(x) _mm512_castsi512_ps(x)
#define vm_round(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vm_zero_below(x, c, e) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((x), _mm512_set1_ps(c), _CMP_NLT_UQ), (e))
#define vm_tail(k) ((__mmask16)((1u << (k)) - 1))
#define vm_loadm(p, m) _mm512_maskz_loadu_ps((m), (p))
#define vm_storem(p, m, x) _mm512_mask_storeu_ps((p), (m), (x))
#define vm_andm(x, m) _mm512_maskz_mov_ps((m), (x))
#define vm_first8(x) _mm512_castps512_ps256(x)
#define vm_hmax(x) _mm512_reduce_max_ps(x)
#else
#error "vmath.h: define VM_BITS 256 or 512"
#endif

/* unused: an includer may not call every helper (clang warns) */
#define VM_INLINE static inline __attribute__((unused))

/* The max of eight lanes (exact in any order). */
VM_INLINE float vm_hmax8(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_movehdup_ps(m));
	return _mm_cvtss_f32(m);
}

/* e^x, relative error about 2e-7 (Cephes expf: x = n ln2 + r with
 * |r| <= ln2 / 2, a degree-6 polynomial for e^r, 2^n through the exponent
 * bits). x is clamped to [-87.3, 88.7] (no inf, no denormals). */
VM_INLINE vm_f VM_FN(exp)(vm_f x)
{
	x = VM(min_ps)(VM(max_ps)(x, VM(set1_ps)(-87.3f)), VM(set1_ps)(88.7f));
	vm_f n = vm_round(VM(mul_ps)(x, VM(set1_ps)(1.44269504088896341f)));
	vm_f r = VM(fnmadd_ps)(n, VM(set1_ps)(0.693359375f), x);
	r = VM(fnmadd_ps)(n, VM(set1_ps)(-2.12194440e-4f), r);
	vm_f p = VM(set1_ps)(1.9875691500e-4f);
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(1.3981999507e-3f));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(8.3334519073e-3f));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(4.1665795894e-2f));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(1.6666665459e-1f));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(5.0000001201e-1f));
	p = VM(fmadd_ps)(p, VM(mul_ps)(r, r), VM(add_ps)(r, VM(set1_ps)(1.0f)));
	/* n in [-126, 128]: 2^n may need two factors to stay finite */
	vm_i ni = VM(cvtps_epi32)(n), h = VM(srai_epi32)(ni, 1);
	vm_f s1 = vm_casti_f(VM(slli_epi32)(VM(add_epi32)(h, VM(set1_epi32)(127)), 23));
	vm_f s2 = vm_casti_f(VM(slli_epi32)(VM(add_epi32)(VM(sub_epi32)(ni, h), VM(set1_epi32)(127)), 23));
	return VM(mul_ps)(VM(mul_ps)(p, s1), s2);
}

/* silu(g) * u = g / (1 + e^-g) * u */
VM_INLINE vm_f VM_FN(silu_glu)(vm_f g, vm_f u)
{
	vm_f e = VM_FN(exp)(VM(sub_ps)(VM(setzero_ps)(), g));
	return VM(mul_ps)(VM(div_ps)(g, VM(add_ps)(VM(set1_ps)(1.0f), e)), u);
}

/* gelu_tanh(g) * u: 0.5 g (1 + tanh z) = g / (1 + e^-2z), the form
 * without cancellation where tanh z is near -1. */
VM_INLINE vm_f VM_FN(gelu_glu)(vm_f g, vm_f u)
{
	vm_f g3 = VM(mul_ps)(VM(mul_ps)(g, g), g);
	vm_f z = VM(mul_ps)(VM(set1_ps)(0.7978845608028654f), VM(fmadd_ps)(VM(set1_ps)(0.044715f), g3, g));
	vm_f e = VM_FN(exp)(VM(mul_ps)(VM(set1_ps)(-2.0f), z));
	return VM(mul_ps)(VM(div_ps)(g, VM(add_ps)(VM(set1_ps)(1.0f), e)), u);
}

/* A kern_glu_fn `name` from the step f: every element goes through f, a
 * partial last step too (padded through a small buffer), so a value never
 * depends on where a thread's slice starts or ends. */
#define VM_GLU_ROW(name, f)                                                          \
	void name(float *g, const float *u, long n)                                  \
	{                                                                            \
		long i = 0;                                                          \
		for (; i + VM_LANES <= n; i += VM_LANES)                             \
			VM(storeu_ps)(g + i, f(VM(loadu_ps)(g + i), VM(loadu_ps)(u + i))); \
		if (i < n) {                                                         \
			float tg[VM_LANES] = { 0 }, tu[VM_LANES] = { 0 };            \
			memcpy(tg, g + i, (size_t)(n - i) * sizeof(float));          \
			memcpy(tu, u + i, (size_t)(n - i) * sizeof(float));          \
			VM(storeu_ps)(tg, f(VM(loadu_ps)(tg), VM(loadu_ps)(tu)));     \
			memcpy(g + i, tg, (size_t)(n - i) * sizeof(float));          \
		}                                                                    \
	}

/* softmax.h's e^x for x <= 0, lane by lane: each step the scalar form's
 * operation (fused where it fuses), so the bits are the portable set's. */
VM_INLINE vm_f VM_FN(exp_neg)(vm_f x)
{
	const vm_f shift = VM(set1_ps)(KERN_EXP_SHIFT);
	vm_f z = VM(fmadd_ps)(x, VM(set1_ps)(KERN_EXP_LOG2E), shift);
	vm_f n = VM(sub_ps)(z, shift);
	vm_f r = VM(fmadd_ps)(n, VM(set1_ps)(-KERN_EXP_LN2_HI), x);
	r = VM(fmadd_ps)(n, VM(set1_ps)(-KERN_EXP_LN2_LO), r);
	vm_f p = VM(fmadd_ps)(VM(set1_ps)(KERN_EXP_P0), r, VM(set1_ps)(KERN_EXP_P1));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(KERN_EXP_P2));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(KERN_EXP_P3));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(KERN_EXP_P4));
	p = VM(fmadd_ps)(p, r, VM(set1_ps)(KERN_EXP_P5));
	vm_f y = VM(add_ps)(VM(fmadd_ps)(p, VM(mul_ps)(r, r), r), VM(set1_ps)(1.0f));
	vm_f sc = vm_casti_f(VM(add_epi32)(VM(slli_epi32)(vm_castf_i(z), 23), VM(set1_epi32)(127 << 23)));
	/* below the cut (-inf too) 0; NaN stays NaN */
	return vm_zero_below(x, KERN_EXP_CUT, VM(mul_ps)(y, sc));
}

/* The eight-lane sum of e's 8-key groups in turn (softmax.h's order). */
VM_INLINE __m256 VM_FN(add_groups)(__m256 acc, vm_f e)
{
#if VM_BITS == 512
	acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
	return _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
#else
	return _mm256_add_ps(acc, e);
#endif
}

/* A head's scores times scale (in place) and their maximum, NaNs skipped
 * (max_ps returns its second operand when either is NaN); in any order,
 * the maximum is exact. */
VM_INLINE float VM_FN(scale_max)(float *s, int n, float scale)
{
	const vm_f sv = VM(set1_ps)(scale);
	vm_f mv = VM(set1_ps)(-INFINITY);
	int i = 0;
	for (; i + VM_LANES <= n; i += VM_LANES) {
		vm_f x = VM(mul_ps)(VM(loadu_ps)(s + i), sv);
		VM(storeu_ps)(s + i, x);
		mv = VM(max_ps)(x, mv);
	}
	float m = vm_hmax(mv);
	for (; i < n; i++) {
		s[i] *= scale;
		m = s[i] > m ? s[i] : m;
	}
	return m;
}

/* kern_softmax_fn (kern.h) at this width. */
VM_INLINE void VM_FN(softmax)(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	for (int h = 0; h < nh; h++) {
		float *sh = s + (size_t)h * ss, cm = VM_FN(scale_max)(sh, n, scale);
		r[h] = 1.0f;
		if (cm > m[h]) { /* e^(m_old - m_new) as the weights' e^x */
			r[h] = _mm256_cvtss_f32(vm_first8(VM_FN(exp_neg)(VM(set1_ps)(m[h] - cm))));
			l[h] *= r[h];
			m[h] = cm;
		}
		const vm_f mv = VM(set1_ps)(m[h]);
		__m256 acc = _mm256_setzero_ps();
		int i = 0;
		for (; i + VM_LANES <= n; i += VM_LANES) {
			vm_f e = VM_FN(exp_neg)(VM(sub_ps)(VM(loadu_ps)(sh + i), mv));
			VM(storeu_ps)(sh + i, e);
			acc = VM_FN(add_groups)(acc, e);
		}
		if (i < n) { /* the last lanes; the others add 0 */
			vm_mask k = vm_tail(n - i);
			vm_f e = vm_andm(VM_FN(exp_neg)(VM(sub_ps)(vm_loadm(sh + i, k), mv)), k);
			vm_storem(sh + i, k, e);
			acc = VM_FN(add_groups)(acc, e);
		}
		__m128 a = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
		a = _mm_add_ps(a, _mm_movehl_ps(a, a));
		l[h] += _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
	}
}
