/* The AVX-512 set's attention kernels (pv, qk entries of kernels/kern.h):
 * attn_avx2.c's sums on 512-bit registers, bit for bit the AVX2 set's.
 * On cores with two 512-bit FMA ports (this Xeon: 2.1 zmm FMAs a cycle,
 * 2.2 ymm ones) a zmm FMA does twice the work of a ymm one, and
 * 32 registers hold larger tiles.
 * - pv: an element's sum is one FMA per key, in key order, whatever
 *   register holds it; elements past the last 8-multiple take the AVX2
 *   form's scalar multiply and add.
 * - qk: a score is eight lanes of FMAs over the head dimension, reduced
 *   ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), as attn_avx2.c's;
 *   a zmm holds two keys' eight lanes (keys r and r + 4 of a tile of
 *   eight), and the reduction pairs the same lanes.
 * Built with the AVX-512 flags, without GCC's pre-allocation scheduling
 * (see CMakeLists.txt). */
#if defined(__x86_64__) && defined(__AVX512F__)

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/x86/simd_x86.h"
#include "kernels/x86/x86.h"

ALWAYS_INLINE __m512 ld16(const void *p, int64_t i, const int F16)
{
	if (F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
	return _mm512_loadu_ps((const float *)p + i);
}

/* S slices of 16 elements from i for NH heads, the heads' sums in
 * registers across the keys (attn_avx2.c's pv_slice, 16 lanes). */
ALWAYS_INLINE void pv_slice16(const int NH, const int S, int nk, const float *w, size_t ws,
			      const void *const *v, int64_t i, float *out, size_t os, const int F16)
{
	__m512 acc[8][8];
	for (int h = 0; h < NH; h++)
		for (int c = 0; c < S; c++)
			acc[h][c] = _mm512_loadu_ps(out + (size_t)h * os + i + 16 * c);
	for (int r = 0; r < nk; r++) {
		__m512 wh[8];
		for (int h = 0; h < NH; h++)
			wh[h] = _mm512_set1_ps(w[(size_t)h * ws + r]);
		for (int c = 0; c < S; c++) {
			__m512 x = ld16(v[r], i + 16 * c, F16);
			for (int h = 0; h < NH; h++)
				acc[h][c] = _mm512_fmadd_ps(wh[h], x, acc[h][c]);
		}
	}
	for (int h = 0; h < NH; h++)
		for (int c = 0; c < S; c++)
			_mm512_storeu_ps(out + (size_t)h * os + i + 16 * c, acc[h][c]);
}

/* Heads [0, NH) of a group: as many elements per pass as the registers
 * hold (NH * S sums, S loads, NH weights of 32), then 16, 8, a scalar
 * tail. */
ALWAYS_INLINE void pv_heads16(const int NH, int64_t n, int nk, const float *w, size_t ws,
			      const void *const *v, float *out, size_t os, const int F16)
{
	const int S = NH <= 2 ? 8 : NH <= 4 ? 4 : 2;
	int64_t i = 0;
	for (; i + 16 * S <= n; i += 16 * S)
		pv_slice16(NH, S, nk, w, ws, v, i, out, os, F16);
	if (S > 4 && i + 64 <= n) {
		pv_slice16(NH, 4, nk, w, ws, v, i, out, os, F16);
		i += 64;
	}
	if (S > 2 && i + 32 <= n) {
		pv_slice16(NH, 2, nk, w, ws, v, i, out, os, F16);
		i += 32;
	}
	for (; i + 16 <= n; i += 16)
		pv_slice16(NH, 1, nk, w, ws, v, i, out, os, F16);
	if (i + 8 <= n) {
		pv_slice(NH, 1, nk, w, ws, v, i, out, os, F16); /* the AVX2 form's step */
		i += 8;
	}
	pv_tail(NH, i, n, nk, w, ws, v, out, os, F16);
}

PV_BY_HEADS(kern_pv_avx512_f32, pv_heads16, 0)
PV_BY_HEADS(kern_pv_avx512_f16, pv_heads16, 1)

/* Attention scores, a tile of HB heads by 8 keys: acc[h][j] holds key
 * r0 + j's eight lanes in its low half and key r0 + j + 4's in its high
 * half, each lane the FMA chain over d of attn_avx2.c's qk_tile. */

/* _mm256_hadd_ps on each 256-bit half: per 128-bit lane [a0 + a1,
 * a2 + a3, b0 + b1, b2 + b3]. */
ALWAYS_INLINE __m512 hadd16(__m512 a, __m512 b)
{
	return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
			     _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Zero rows stand in for the missing keys of a short tile. */
static const float qk_zero16[KERN_QK_MAX_DIM];

/* lo in the low half, hi in the high: AVX-512F's 64-bit-lane insert (the
 * 32-bit one, vinsertf32x8, is AVX-512DQ, which the set does not ask for). */
ALWAYS_INLINE __m512 f32x8_pair(__m256 lo, __m256 hi)
{
	return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)),
						   _mm256_castps_pd(hi), 1));
}

/* x in both halves (vbroadcastf64x4 from memory: a load, no shuffle). */
ALWAYS_INLINE __m512 f32x8_twice(__m256 x)
{
	return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(x)));
}

ALWAYS_INLINE void qk_tile16(const int HB, int64_t n, const float *q, int nk, const void *const *kr,
			     float *out, size_t os, const int F16)
{
	__m512 acc[6][4];
#pragma GCC unroll 6
	for (int h = 0; h < HB; h++)
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++)
			acc[h][j] = _mm512_setzero_ps();
	for (int64_t d = 0; d < n; d += 8) {
		__m512 kv[4];
#pragma GCC unroll 4
		for (int j = 0; j < 4; j++) {
			if (F16) {
				__m128i lo = _mm_loadu_si128((const __m128i *)((const uint16_t *)kr[j] + d));
				__m128i hi = _mm_loadu_si128((const __m128i *)((const uint16_t *)kr[j + 4] + d));
				kv[j] = _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
			} else {
				__m256 lo = _mm256_loadu_ps((const float *)kr[j] + d);
				__m256 hi = _mm256_loadu_ps((const float *)kr[j + 4] + d);
				kv[j] = f32x8_pair(lo, hi);
			}
		}
#pragma GCC unroll 6
		for (int h = 0; h < HB; h++) {
			__m512 qv = f32x8_twice(_mm256_load_ps(q + (size_t)d * HB + 8 * h));
#pragma GCC unroll 4
			for (int j = 0; j < 4; j++)
				acc[h][j] = _mm512_fmadd_ps(kv[j], qv, acc[h][j]);
		}
	}
	/* the stores of a short tile: its first nk scores */
	const __mmask8 keep = nk >= 8 ? 0xFF : (__mmask8)((1u << nk) - 1);
#pragma GCC unroll 6
	for (int h = 0; h < HB; h++) {
		/* lanes (0..3 | 4..7) of keys j then j + 4, to quad sums, to
		 * (keys 0..3 low quads | high quads | keys 4..7 low | high) */
		__m512 u = hadd16(hadd16(acc[h][0], acc[h][1]), hadd16(acc[h][2], acc[h][3]));
		u = _mm512_add_ps(u, _mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
		__m256 sc = _mm512_castps512_ps256(_mm512_shuffle_f32x4(u, u, _MM_SHUFFLE(0, 0, 2, 0)));
		_mm256_mask_storeu_ps(out + (size_t)h * os, keep, sc);
	}
}

/* HB heads against all nk keys, 8 at a time (a short last tile reads
 * zero rows). The heads' queries are first interleaved by 8 elements
 * ([n / 8][HB][8]): the tile then reads them through one pointer, which
 * leaves general registers for its eight key rows (with a pointer per
 * head GCC kept key pointers in mask registers, a kmovq per load). */
ALWAYS_INLINE void qk_heads16(const int HB, int64_t n, const float *q, size_t qs, int nk,
			      const void *const *k, float *out, size_t os, const int F16)
{
	_Alignas(32) float qi[KERN_QK_MAX_DIM * 6];
	for (int64_t d = 0; d < n; d += 8)
		for (int h = 0; h < HB; h++)
			_mm256_store_ps(qi + d * HB + 8 * h, _mm256_loadu_ps(q + (size_t)h * qs + d));
	int r0 = 0;
	for (; r0 + 8 <= nk; r0 += 8)
		qk_tile16(HB, n, qi, 8, k + r0, out + r0, os, F16);
	if (r0 < nk) {
		const void *kr[8];
		for (int r = 0; r < 8; r++)
			kr[r] = r0 + r < nk ? k[r0 + r] : (const void *)qk_zero16; /* f16 zeros too */
		qk_tile16(HB, n, qi, nk - r0, kr, out + r0, os, F16);
	}
}

/* Tiles of up to six heads (7 = 4 + 3, 8 = 4 + 4, then sixes). */
#define QK_CHUNK16(name, F16)                                                                  \
	void name(int64_t n, int nh, const float *q, size_t qs, int nk, const void *const *k,   \
		  float *out, size_t os)                                                        \
	{                                                                                       \
		for (int h0 = 0, hb; h0 < nh; h0 += hb) {                                       \
			int left = nh - h0;                                                     \
			hb = left <= 6 ? left : left <= 8 ? 4 : 6;                              \
			const float *qh = q + (size_t)h0 * qs;                                  \
			float *o = out + (size_t)h0 * os;                                       \
			switch (hb) {                                                           \
			case 1: qk_heads16(1, n, qh, qs, nk, k, o, os, F16); break;             \
			case 2: qk_heads16(2, n, qh, qs, nk, k, o, os, F16); break;             \
			case 3: qk_heads16(3, n, qh, qs, nk, k, o, os, F16); break;             \
			case 4: qk_heads16(4, n, qh, qs, nk, k, o, os, F16); break;             \
			case 5: qk_heads16(5, n, qh, qs, nk, k, o, os, F16); break;             \
			default: qk_heads16(6, n, qh, qs, nk, k, o, os, F16); break;            \
			}                                                                       \
		}                                                                               \
	}
QK_CHUNK16(kern_qk_avx512_f32, 0)
QK_CHUNK16(kern_qk_avx512_f16, 1)

#endif /* __x86_64__ && __AVX512F__ */
