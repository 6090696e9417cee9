/* AVX2/FMA gated activations (see kernels/dot.h, kern_glu_get): the GLU's
 * act(gate) * up over a row, eight elements per step with a vector exp.
 * Built with -mavx2 -mfma like dot_avx2.c and handed out only when the CPU
 * has them. Every element goes through the same vector code, a partial
 * last step included (it is padded through a small buffer), so a value
 * never depends on where a thread's slice starts or ends. */
#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

#include "kernels/dot.h"

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

#endif /* __x86_64__ */
