/* AVX2/FMA/F16C attention kernels (qk, pv entries of
 * kernels/kern.h): the scores of a chunk of K rows against the query heads
 * of one KV head, and the weighted sum of a chunk of V rows. Their own file
 * because they want other code generation than dot_avx2.c's matmul
 * bodies: built without GCC's pre-allocation scheduling
 * (-fschedule-insns), which keeps these loops' short FMA chains in a worse
 * order (see CMakeLists.txt). Both sum in a fixed order that depends only
 * on the head dimension, never on the chunk or the heads per call.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/x86/simd_x86.h"
#include "kernels/x86/x86.h"

/* Heads [0, NH) of a group, elements [0, n): S-slice steps, then single
 * slices, then a scalar tail. */
ALWAYS_INLINE void pv_heads(const int NH, int64_t n, int nk, const float *w, size_t ws,
			    const void *const *v, float *out, size_t os, const int F16)
{
	const int S = NH == 1 ? 8 : NH <= 3 ? 4 : NH == 4 ? 2 : 1;
	int64_t i = 0;
	for (; i + 8 * S <= n; i += 8 * S)
		pv_slice(NH, S, nk, w, ws, v, i, out, os, F16);
	for (; i + 8 <= n; i += 8)
		pv_slice(NH, 1, nk, w, ws, v, i, out, os, F16);
	pv_tail(NH, i, n, nk, w, ws, v, out, os, F16);
}

PV_BY_HEADS(kern_pv_avx2_f32, pv_heads, 0)
PV_BY_HEADS(kern_pv_avx2_f16, pv_heads, 1)

/* Attention scores: query heads (f32) against K rows, a tile of HB heads
 * by KB keys at a time: each K vector is loaded (and converted, for f16)
 * once for the tile's heads, and the HB * KB 8-lane FMA accumulators run
 * side by side over the head dimension. A score's lanes are reduced
 * ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), the same order for
 * every score, so a score depends on neither its key's place in the chunk
 * nor its head's place in the tile. */

/* The four scores of a[0..3], each reduced in the order above. */
ALWAYS_INLINE __m128 reduce4x8(const __m256 *a)
{
	__m256 u = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
	return _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1));
}

/* Zero rows stand in for the missing keys of a short tile. */
static const float qk_zero[KERN_QK_MAX_DIM];

ALWAYS_INLINE void qk_tile(const int HB, const int KB, int64_t n, const float *q, size_t qs, int nk,
			   const void *const *kr, float *out, size_t os, const int F16)
{
	__m256 acc[12];
	for (int f = 0; f < HB * KB; f++)
		acc[f] = _mm256_setzero_ps();
	for (int64_t d = 0; d < n; d += 8)
		for (int r = 0; r < KB; r++) {
			__m256 k = F16 ? ld_f16(kr[r], d) : ld_f32(kr[r], d);
			for (int h = 0; h < HB; h++)
				acc[h * KB + r] = _mm256_fmadd_ps(k, _mm256_loadu_ps(q + (size_t)h * qs + d),
								  acc[h * KB + r]);
		}
	/* KB = 4 (HB > 1): a reduction is one head's four keys, stored
	 * whole when the tile is full; KB = 8: two of them per head. */
	for (int f = 0; f < HB * KB; f += 4) {
		if (nk <= f % KB)
			continue; /* no key left in this group: form no pointer past out */
		__m128 sc = reduce4x8(acc + f);
		float *o = out + (size_t)(f / KB) * os + f % KB;
		if (nk >= f % KB + 4) {
			_mm_storeu_ps(o, sc);
		} else {
			float t[4];
			_mm_storeu_ps(t, sc);
			for (int e = 0; e < nk - f % KB; e++)
				o[e] = t[e];
		}
	}
}

/* HB heads (qs floats apart) against all nk keys, KB at a time (a short
 * last tile reads zero rows). */
ALWAYS_INLINE void qk_heads(const int HB, int64_t n, const float *q, size_t qs, int nk,
			    const void *const *k, float *out, size_t os, const int F16)
{
	const int KB = HB == 1 ? 8 : 4;
	for (int r0 = 0; r0 < nk; r0 += KB) {
		const void *kr[8];
		for (int r = 0; r < KB; r++)
			kr[r] = r0 + r < nk ? k[r0 + r] : (const void *)qk_zero; /* f16 zeros too */
		qk_tile(HB, KB, n, q, qs, nk - r0, kr, out + r0, os, F16);
	}
}

/* Tiles of up to three heads (4 = 2 + 2: two 8-accumulator tiles). */
#define QK_CHUNK(name, F16)                                                                   \
	void name(int64_t n, int nh, const float *q, size_t qs, int nk, const void *const *k,  \
		  float *out, size_t os)                                                       \
	{                                                                                      \
		for (int h0 = 0, hb; h0 < nh; h0 += hb) {                                      \
			hb = nh - h0 == 4 ? 2 : nh - h0 < 3 ? nh - h0 : 3;                     \
			const float *qh = q + (size_t)h0 * qs;                                 \
			float *o = out + (size_t)h0 * os;                                      \
			switch (hb) {                                                          \
			case 1: qk_heads(1, n, qh, qs, nk, k, o, os, F16); break;              \
			case 2: qk_heads(2, n, qh, qs, nk, k, o, os, F16); break;              \
			default: qk_heads(3, n, qh, qs, nk, k, o, os, F16); break;             \
			}                                                                      \
		}                                                                              \
	}
QK_CHUNK(kern_qk_avx2_f32, 0)
QK_CHUNK(kern_qk_avx2_f16, 1)

void kern_round_f16_avx2(const float *x, float *y, int64_t n)
{
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
	for (; i < n; i++)
		y[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

#endif /* __x86_64__ */
