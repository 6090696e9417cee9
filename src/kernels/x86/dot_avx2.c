/* AVX2/FMA/F16C dot-product kernels (see kernels/kern.h). Built with
 * -mavx2 -mfma -mf16c whatever the build's -march; kern_dot_get() and
 * kern_gemm_get() hand them out only when the CPU has those features.
 *
 * 32-element block types: eight weight rows in the lanes, the portable
 * kernels' float steps (see the section below). k-quants and float types:
 * one weight row against NT activation rows, each block's float work per
 * pair following llama.cpp's AVX2 vec_dot for the type (ggml-cpu/arch/
 * x86/quants.c): integer sums with maddubs/madd, one FMA into an 8-lane
 * f32 accumulator per block, the same horizontal sum at the end. Bodies
 * are instantiated with NT a compile-time constant and keep per-row
 * accumulators, so every row's result is the same for any NT.
 *
 * The file is built three times (CMakeLists.txt): as the AVX2 set; with
 * KERN_VNNI=1 and -mavxvnni as the integer kernels of the AVX-VNNI set;
 * with KERN_VNNI=2 and AVX-512 flags (EVEX vpdpbusd, which AVX512-VNNI
 * CPUs without AVX-VNNI also run) for the AVX-512 set.
 * There vpdpbusd adds four u8 x s8 products straight into each int32 lane
 * where AVX2 needs maddubs's 16-bit pair sums, 16-bit adds and a widening
 * madd: about a third fewer vector instructions per block. The maddubs
 * forms never saturate (each kernel says why), so both compute the same
 * exact integer sums and then the same float steps: the two sets' results
 * are the same bits (test_kernels compares them).
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "kernels/x86/x86.h"
#include "kernels/repack.h"
#include "kernels/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#ifndef KERN_VNNI
#define KERN_VNNI 0
#endif
/* The exported getters' names: kern_*_avx2, kern_*_avx2_vnni or
 * kern_*_avx2_avx512. */
#if KERN_VNNI == 2
#define SET_FN(name) name##_avx512
#elif KERN_VNNI
#define SET_FN(name) name##_vnni
#else
#define SET_FN(name) name
#endif


ALWAYS_INLINE float h2f(fx_half h)
{
	return _cvtsh_ss(h);
}

/* Sum of 8 lanes in llama.cpp's order (hsum_float_8). */
ALWAYS_INLINE float hsum8(__m256 x)
{
	__m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
	r = _mm_add_ps(r, _mm_movehl_ps(r, r));
	r = _mm_add_ss(r, _mm_movehdup_ps(r));
	return _mm_cvtss_f32(r);
}

/* Four bytes at p (any alignment) in every 32-bit lane. */
ALWAYS_INLINE __m256i bcast4(const int8_t *p)
{
	int32_t v;
	memcpy(&v, p, sizeof(v));
	return _mm256_set1_epi32(v);
}

/* acc + u[k] . (bytes 4k..4k+3 of y in every lane) over k < nk, per
 * 32-bit lane (four u8 x s8 products each): the AVX-VNNI build's one
 * instruction per register of rows-in-lanes codes. */
#if KERN_VNNI
ALWAYS_INLINE __m256i dp4(__m256i acc, const __m256i *u, const int8_t *y, int nk)
{
	/* All broadcasts first: the compiler then schedules them as loads
	 * ahead of the chain (q8_0 ~10% faster than broadcasting in it). */
	__m256i Y[8];
	for (int k = 0; k < nk; k++)
		Y[k] = bcast4(y + 4 * k);
	for (int k = 0; k < nk; k++)
#if KERN_VNNI == 2
		acc = _mm256_dpbusd_epi32(acc, u[k], Y[k]);
#else
		acc = _mm256_dpbusd_avx_epi32(acc, u[k], Y[k]);
#endif
	return acc;
}

/* dp4 for the K-quant kernels, whose one-row loops issue more
 * instructions than the core retires: with EVEX (the AVX-512 set) each
 * broadcast rides in its vpdpbusd as an embedded {1to8} operand, one
 * instruction instead of two (GCC does not fold it; the q4_K x8 one-row
 * kernel in L1: 40 -> 42.5 GB/s). The legacy types keep dp4 (TinyLlama-
 * shape Q8_0 step 1.004-1.009x with this form). */
ALWAYS_INLINE __m256i dp4m(__m256i acc, const __m256i *u, const int8_t *y, int nk)
{
#if KERN_VNNI == 2
	for (int k = 0; k < nk; k++)
		__asm__("vpdpbusd %[m]%{1to8%}, %[u], %[a]"
			: [a] "+v"(acc)
			: [u] "v"(u[k]), [m] "m"(*(const char(*)[4])(y + 4 * k)));
	return acc;
#else
	return dp4(acc, u, y, nk);
#endif
}
#endif

/* Instantiate body(..., NT, KIND) for NT = 1..8 behind one dispatcher;
 * KIND picks the block type where one body serves several. Every row's sum
 * is the same whatever NT (per-row accumulators), so any grouping of the
 * rows gives the same results. */
#define KERNEL(name, body, KIND)                                                              \
	static void name##_1(int64_t n, const void *w, const void *act, size_t as,          \
			     float *out, size_t os) { body(n, w, act, as, out, os, 1, KIND); }         \
	static void name##_2(int64_t n, const void *w, const void *act, size_t as,          \
			     float *out, size_t os) { body(n, w, act, as, out, os, 2, KIND); }         \
	static void name##_4(int64_t n, const void *w, const void *act, size_t as,          \
			     float *out, size_t os) { body(n, w, act, as, out, os, 4, KIND); }         \
	static void name##_8(int64_t n, const void *w, const void *act, size_t as,          \
			     float *out, size_t os) { body(n, w, act, as, out, os, 8, KIND); }         \
	static void name(int64_t n, const void *w, const void *act, size_t as, int nt,      \
			 float *out, size_t os)                                               \
	{                                                                                   \
		const uint8_t *a = act;                                                     \
		for (; nt >= 8 && BODY_NT_MAX >= 8; nt -= 8, a += 8 * as, out += 8 * os)    \
			name##_8(n, w, a, as, out, os);                                     \
		for (; nt >= 4; nt -= 4, a += 4 * as, out += 4 * os)                        \
			name##_4(n, w, a, as, out, os);                                     \
		for (; nt >= 2; nt -= 2, a += 2 * as, out += 2 * os)                        \
			name##_2(n, w, a, as, out, os);                                     \
		if (nt)                                                                     \
			name##_1(n, w, a, as, out, os);                                     \
	}

/* Integer kernels take up to 8 activation rows per call: their state per
 * activation row is one accumulator (or two) and the weights unpack once
 * for all of them. */
#define BODY_NT_MAX 8

ALWAYS_INLINE void store_hsum(const __m256 *acc, float *out, size_t os, const int NT)
{
	for (int t = 0; t < NT; t++)
		out[(size_t)t * os] = hsum8(acc[t]);
}

/* ---- 32-element block types (q4_0, q4_1, q5_0, q8_0): eight rows at once
 *
 * Lanes are weight rows: for each block the eight rows' quants are
 * transposed into eight registers W[k] whose lane r holds row r's
 * elements 4k..4k+3, and one activation row's matching four bytes are
 * broadcast against them. The 4- and 5-bit codes stay unsigned (0..15 or
 * 0..31), so maddubs's 16-bit pair sums can be added across the block
 * without overflow (16 * 31 * 128 < 2^15 for eight registers of 4-bit
 * codes, four of 5-bit ones) before one madd widens them; the codes'
 * offset comes off as off * sum(y) from the activation row's sum array.
 * q8_0 keeps the sign trick and widens every register (|w| <= 128, |y| <=
 * 127: pair sums within 2 * 128 * 127 < 2^15); the VNNI build instead
 * offsets its codes by 128 (unsigned 0..255, int32 sums) and takes
 * 128 * sum(y) off as above. Each row's block
 * sum is then one exact integer and its float update is the portable
 * vec_dot's, operation for operation (quant/q_legacy.c): so results equal
 * the portable kernels bit for bit, whatever the rows or tokens per call.
 */

ALWAYS_INLINE size_t leg_qs_off(const int KIND)
{
	return KIND == LEG_Q8_0 ? offsetof(struct block_q8_0, qs) : KIND == LEG_Q4_0 ? offsetof(struct block_q4_0, qs)
	       : KIND == LEG_Q5_0 ? offsetof(struct block_q5_0, qs) : offsetof(struct block_q4_1, qs);
}

/* Eight fp16 values, one at p[r] + off for each row r, as 8 f32. */
ALWAYS_INLINE __m256 halves_rows(const uint8_t *const *p, size_t off)
{
	__m128i v = _mm_setzero_si128();
	uint16_t h;
#define LANE(k) { memcpy(&h, p[k] + off, 2); v = _mm_insert_epi16(v, h, k); }
	LANE(0) LANE(1) LANE(2) LANE(3) LANE(4) LANE(5) LANE(6) LANE(7)
#undef LANE
	return _mm256_cvtph_ps(v);
}

/* T[k] lane r = 32-bit word k of the 16 bytes at p[r] + off (k < 4). */
ALWAYS_INLINE void transpose_8x4(const uint8_t *const *p, size_t off, __m256i *T)
{
#define LD2(a, b) _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(p[a] + off))), \
					  _mm_loadu_si128((const __m128i *)(p[b] + off)), 1)
	__m256i r0 = LD2(0, 4), r1 = LD2(1, 5), r2 = LD2(2, 6), r3 = LD2(3, 7);
#undef LD2
	__m256i a = _mm256_unpacklo_epi32(r0, r1), b = _mm256_unpackhi_epi32(r0, r1);
	__m256i c = _mm256_unpacklo_epi32(r2, r3), d = _mm256_unpackhi_epi32(r2, r3);
	T[0] = _mm256_unpacklo_epi64(a, c);
	T[1] = _mm256_unpackhi_epi64(a, c);
	T[2] = _mm256_unpacklo_epi64(b, d);
	T[3] = _mm256_unpackhi_epi64(b, d);
}

/* q5_0's fifth bits for W[k]: 0x10 in byte i of lane r when bit 4k + i of
 * row r's qh (in QH lane r) is set. */
ALWAYS_INLINE __m256i q5_high(__m256i QH, int k)
{
	const char b = (char)(k / 2);
	const __m256i sel = _mm256_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b,
					     12 + b, 12 + b, 12 + b, 12 + b, b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b,
					     8 + b, 8 + b, 8 + b, 8 + b, 12 + b, 12 + b, 12 + b, 12 + b);
	const int sh = 4 * (k % 2);
	const __m256i bit = _mm256_set1_epi32((int)((1u << sh) | (2u << sh) << 8 | (4u << sh) << 16 |
						    (8u << sh) << 24));
	__m256i v = _mm256_and_si256(_mm256_shuffle_epi8(QH, sel), bit);
	return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}

/* Codes as W[8] (lanes = rows, see above) from the transposed quants:
 * T[0..7] (q8_0: bytes 4k..4k+3; with |W| in A) or T[0..3] (4/5-bit: the
 * packed bytes 4k..4k+3, low nibbles W[k], high W[k + 4]); q5_0 adds the
 * fifth bits from QH (lane r = row r's qh). */
ALWAYS_INLINE void leg_codes(const __m256i *T, __m256i QH, __m256i *W, __m256i *A, const int KIND)
{
	if (KIND == LEG_Q8_0) {
		for (int k = 0; k < 8; k++) {
#if KERN_VNNI
			/* w + 128 as u8; the 128 * sum(y) comes off later */
			W[k] = _mm256_xor_si256(T[k], _mm256_set1_epi8((char)0x80));
			(void)A;
#else
			W[k] = T[k];
			A[k] = _mm256_sign_epi8(W[k], W[k]);
#endif
		}
		return;
	}
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	for (int k = 0; k < 4; k++) {
		W[k] = _mm256_and_si256(T[k], m4);
		W[4 + k] = _mm256_and_si256(_mm256_srli_epi16(T[k], 4), m4);
	}
	if (KIND == LEG_Q5_0)
		for (int k = 0; k < 8; k++)
			W[k] = _mm256_or_si256(W[k], q5_high(QH, k));
}

/* Block ib of the eight plain rows p[]: transposed here. */
ALWAYS_INLINE void leg_rows8(const uint8_t *const *p, int64_t ib, __m256i *W, __m256i *A,
			     const int KIND)
{
	const size_t base = (size_t)ib * leg_wsize(KIND), qs = base + leg_qs_off(KIND);
	__m256i T[8], QH = _mm256_setzero_si256();
	transpose_8x4(p, qs, T);
	if (KIND == LEG_Q8_0)
		transpose_8x4(p, qs + 16, T + 4);
	if (KIND == LEG_Q5_0) {
		uint32_t h[8];
		for (int r = 0; r < 8; r++)
			memcpy(&h[r], p[r] + base + offsetof(struct block_q5_0, qh), 4);
		QH = _mm256_loadu_si256((const __m256i *)h);
	}
	leg_codes(T, QH, W, A, KIND);
}

ALWAYS_INLINE void leg_x8(const uint8_t *sb, __m256i *W, __m256i *A, const int KIND)
{
	__m256i T[8];
	for (int k = 0; k < (KIND == LEG_Q8_0 ? 8 : 4); k++)
		T[k] = _mm256_loadu_si256((const __m256i *)(sb + leg_x8_qs(KIND) + 32 * (size_t)k));
	__m256i QH = KIND == LEG_Q5_0 ? _mm256_loadu_si256((const __m256i *)(sb + 16)) : _mm256_setzero_si256();
	leg_codes(T, QH, W, A, KIND);
}

/* Where block ib's integer sum against activation row y starts, lanes =
 * rows: -off * sum(y) for codes stored off above their value (q4_0,
 * q5_0, and q8_0 under VNNI; simd_x86.h's leg_start_shift), zero for
 * signed codes. */
ALWAYS_INLINE __m256i leg_start(const uint8_t *y, size_t s_off, int64_t ib, const int KIND)
{
	const bool off = KIND == LEG_Q4_0 || KIND == LEG_Q5_0 || (KERN_VNNI && KIND == LEG_Q8_0);
	if (!off)
		return _mm256_setzero_si256();
	__m256i s = _mm256_broadcastd_epi32(_mm_loadu_si32(y + s_off + 4 * (size_t)ib));
	return leg_start_shift(KIND) ? _mm256_srai_epi32(s, leg_start_shift(KIND)) : s;
}

/* One activation row's block (32 bytes of q8 quants at y) against W:
 * start + every row's exact integer block sum, lanes = rows. */
ALWAYS_INLINE __m256i leg_sum8(const __m256i *W, const __m256i *A, const int8_t *y, __m256i start,
			       const int KIND)
{
#define YB(k) bcast4(y + 4 * (k))
#if KERN_VNNI
	/* Every kind's codes are unsigned here (q8_0's offset by 128). */
	(void)A;
	(void)KIND;
	return dp4(start, W, y, 8);
#else
	const __m256i one = _mm256_set1_epi16(1);
	if (KIND == LEG_Q8_0) {
		__m256i s = _mm256_setzero_si256();
		for (int k = 0; k < 8; k++)
			s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(A[k], _mm256_sign_epi8(YB(k), W[k])), one));
		(void)start; /* signed codes: zero */
		return s;
	}
	if (KIND == LEG_Q5_0) {
		__m256i s0 = _mm256_maddubs_epi16(W[0], YB(0)), s1 = _mm256_maddubs_epi16(W[4], YB(4));
		for (int k = 1; k < 4; k++) {
			s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(W[k], YB(k)));
			s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(W[4 + k], YB(4 + k)));
		}
		return _mm256_add_epi32(start, _mm256_add_epi32(_mm256_madd_epi16(s0, one), _mm256_madd_epi16(s1, one)));
	}
	__m256i s = _mm256_maddubs_epi16(W[0], YB(0));
	for (int k = 1; k < 8; k++)
		s = _mm256_add_epi16(s, _mm256_maddubs_epi16(W[k], YB(k)));
	return _mm256_add_epi32(start, _mm256_madd_epi16(s, one));
#endif
#undef YB
}

/* out[t * os + r] = row r . activation row t for r < nr, t < NT. Rows
 * past nr repeat the last one (their lanes are computed, not stored). */
/* KIND | X8: the weights are x8 groups (kernels/repack.h), w one group. */
enum { X8 = 16 };

/* out[t * os + r] = lane r of acc[t] for r < nr (1..8), t < NT. */
ALWAYS_INLINE void store_rows(const __m256 *acc, float *out, size_t os, const int NT, int nr)
{
	for (int t = 0; t < NT; t++) {
		if (nr == 8) {
			_mm256_storeu_ps(out + (size_t)t * os, acc[t]);
		} else {
			float tmp[8];
			_mm256_storeu_ps(tmp, acc[t]);
			memcpy(out + (size_t)t * os, tmp, (size_t)nr * sizeof(float));
		}
	}
}

ALWAYS_INLINE void body_rows8(int64_t n, const void *vw, size_t w_stride, int nr, const void *act,
			      size_t act_stride, float *out, size_t os, const int NT, const int KIND_X8)
{
	const int KIND = KIND_X8 & ~X8;
	const bool x8 = KIND_X8 & X8;
	const uint8_t *p[8];
	for (int r = 0; r < 8; r++)
		p[r] = (const uint8_t *)vw + (size_t)(r < nr ? r : nr - 1) * w_stride;
	const bool q41 = KIND == LEG_Q4_1;
	const int64_t nb = n / 32;
	const struct leg_act la = leg_act_of(n, KIND);
	const size_t ys = la.ys, yq = la.yq, d_off = la.d_off, s_off = la.s_off;
	const size_t ws = leg_wsize(KIND);
	__m256 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm256_setzero_ps();
	for (int64_t ib = 0; ib < nb; ib++) {
		__m256i W[8], A[8];
		__m256 dx, mx;
		if (x8) {
			const uint8_t *sb = (const uint8_t *)vw + (size_t)ib * 8 * ws;
			prefetch_span(sb, 8 * ws);
			leg_x8(sb, W, A, KIND);
			dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
			mx = q41 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16))) : dx;
		} else {
			/* One prefetch per row and cache line: exactly one
			 * block of each line starts in its first ws bytes. */
			if ((((size_t)ib * ws) & 63) < ws)
				for (int r = 0; r < nr; r++)
					_mm_prefetch((const char *)(p[r] + (size_t)ib * ws + PREFETCH_AHEAD),
						     _MM_HINT_T0);
			leg_rows8(p, ib, W, A, KIND);
			dx = halves_rows(p, (size_t)ib * ws); /* d is each block's first field */
			mx = q41 ? halves_rows(p, (size_t)ib * ws + offsetof(struct block_q4_1, m)) : dx;
		}
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			const uint8_t *y = ACT(t, uint8_t);
			__m256i si = leg_sum8(W, A, (const int8_t *)(y + (size_t)ib * ys + yq),
					      leg_start(y, s_off, ib, KIND), KIND);
			__m256 dy = _mm256_broadcast_ss((const float *)(y + d_off) + ib);
			__m256 f = _mm256_cvtepi32_ps(si);
			if (KIND == LEG_Q4_0) /* fma(sumi * dx, dy, acc) */
				acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(f, dx), dy, acc[t]);
			else if (KIND == LEG_Q4_1) /* fma(dx * dy, sumi, fma(mx, sy, acc)) */
				acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), f,
							 _mm256_fmadd_ps(mx, _mm256_broadcast_ss((const float *)(y + s_off) + ib),
									 acc[t]));
			else /* fma(dx * dy, sumi, acc) */
				acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dy), f, acc[t]);
		}
	}
	store_rows(acc, out, os, NT, x8 ? 8 : nr);
}

/* Instantiate a rows-in-lanes body for NT = 1, 2, 4, 8 behind one
 * kern_gemm_fn, which takes the rows eight at a time (eight plain rows,
 * or one x8 group, span 8 * ws bytes). */
#define GEMM8(name, body, KIND)                                                                           \
	static void name##_g1(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
			      float *o, size_t os) { body(n, w, ws, nr, a, as, o, os, 1, KIND); }  \
	static void name##_g2(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
			      float *o, size_t os) { body(n, w, ws, nr, a, as, o, os, 2, KIND); }  \
	static void name##_g4(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
			      float *o, size_t os) { body(n, w, ws, nr, a, as, o, os, 4, KIND); }  \
	static void name##_g8(int64_t n, const void *w, size_t ws, int nr, const void *a, size_t as, \
			      float *o, size_t os) { body(n, w, ws, nr, a, as, o, os, 8, KIND); }  \
	static void name##_rows(int64_t n, const void *w, size_t ws, int nr, const void *act,         \
				size_t as, int nt, float *out, size_t os)                             \
	{                                                                                          \
		const uint8_t *a = act;                                                            \
		for (; nt >= 8; nt -= 8, a += 8 * as, out += 8 * os)                               \
			name##_g8(n, w, ws, nr, a, as, out, os);                                   \
		for (; nt >= 4; nt -= 4, a += 4 * as, out += 4 * os)                               \
			name##_g4(n, w, ws, nr, a, as, out, os);                                   \
		for (; nt >= 2; nt -= 2, a += 2 * as, out += 2 * os)                               \
			name##_g2(n, w, ws, nr, a, as, out, os);                                   \
		if (nt)                                                                            \
			name##_g1(n, w, ws, nr, a, as, out, os);                                   \
	}                                                                                          \
	static void name##_gemm(int64_t n, const void *w, size_t ws, int nr, const void *act,         \
				size_t as, int nt, float *out, size_t os)                             \
	{                                                                                          \
		for (int r = 0; r < nr; r += 8)                                                    \
			name##_rows(n, (const uint8_t *)w + (size_t)r * ws, ws, nr - r < 8 ? nr - r : 8, \
				    act, as, nt, out + r, os);                                     \
	}

/* The kern_dot_fn of a plain-row GEMM8: the same kernel for one row. */
#define DOT_OF_GEMM8(name)                                                                         \
	static void name(int64_t n, const void *w, const void *act, size_t as, int nt, float *out,    \
			 size_t os)                                                                   \
	{                                                                                          \
		name##_gemm(n, w, 0, 1, act, as, nt, out, os);                                     \
	}

GEMM8(dot_q8_0, body_rows8, LEG_Q8_0)
DOT_OF_GEMM8(dot_q8_0)
GEMM8(dot_q4_0, body_rows8, LEG_Q4_0)
DOT_OF_GEMM8(dot_q4_0)
GEMM8(dot_q5_0, body_rows8, LEG_Q5_0)
DOT_OF_GEMM8(dot_q5_0)
GEMM8(dot_q4_1, body_rows8, LEG_Q4_1)
DOT_OF_GEMM8(dot_q4_1)
GEMM8(x8_q8_0, body_rows8, LEG_Q8_0 | X8)
GEMM8(x8_q4_0, body_rows8, LEG_Q4_0 | X8)
GEMM8(x8_q5_0, body_rows8, LEG_Q5_0 | X8)
GEMM8(x8_q4_1, body_rows8, LEG_Q4_1 | X8)

/* ---- k-quants x q8_K ------------------------------------------------------ */

/* The 8 6-bit scales and 8 6-bit mins of a q4_K/q5_K block as 16 int16:
 * lanes 0..7 scales, 8..15 mins (get_scale_min_k4 unpacked at once). */
ALWAYS_INLINE __m256i k4_scales_mins(const uint8_t *scales)
{
	uint32_t u[4];
	memcpy(u, scales, 12);
	u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
	uint32_t aux = u[1] & 0x3f3f3f3f;
	u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
	u[2] = aux;
	u[0] &= 0x3f3f3f3f;
	return _mm256_cvtepu8_epi16(_mm_set_epi32((int)u[3], (int)u[2], (int)u[1], (int)u[0]));
}

/* Broadcast int16 lane i of each 128-bit half to the whole half. */
ALWAYS_INLINE __m256i bcast16(__m256i v, int i)
{
	return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(((2 * i + 1) << 8) | (2 * i))));
}

/* One q4_K/q5_K block's contribution for one q8_K row, added to acc:
 * d_y * d * sumi (8 lanes of scaled integer sums) and, in lanes 0..3,
 * -d_y * dmin * sum_sub min[sub] * sum(y over sub). Both terms go into the
 * one accumulator so four rows at once fit the 16 AVX2 registers. */
ALWAYS_INLINE __m256 k4_block(__m256 acc, __m256i sumi, __m256i ms, const struct block_q8_K *y,
			      float d, float dmin)
{
	__m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
	__m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
	__m128i prod = _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), q8s);
	__m256 m = _mm256_castps128_ps256(_mm_cvtepi32_ps(prod));
	m = _mm256_insertf128_ps(m, _mm_setzero_ps(), 1);
	acc = _mm256_fmadd_ps(_mm256_set1_ps(-y->d * dmin), m, acc);
	return _mm256_fmadd_ps(_mm256_set1_ps(y->d * d), _mm256_cvtepi32_ps(sumi), acc);
}

/* q4_K and q5_K share everything but the weights' 5th bit: q5_K adds bit
 * 2j (low half) / 2j+1 (high half) of qh[l] as 16 to element 64j + l /
 * 64j + 32 + l. d, dmin and scales sit at the same offsets in both
 * blocks; qs follows qh in q5_K. */
_Static_assert(offsetof(struct block_q4_K, scales) == offsetof(struct block_q5_K, scales) &&
	       offsetof(struct block_q4_K, dmin) == offsetof(struct block_q5_K, dmin),
	       "q4_K and q5_K share their header layout");

#if !KERN_VNNI /* llama.cpp's order, maddubs: the VNNI set uses the AVX2 one */
ALWAYS_INLINE void body_k4(int64_t n, const void *vw, const void *act, size_t act_stride,
			   float *out, size_t os, const int NT, const bool q5)
{
	const size_t bsz = q5 ? sizeof(struct block_q5_K) : sizeof(struct block_q4_K);
	const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
	__m256 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm256_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		const uint8_t *blk = (const uint8_t *)vw + (size_t)ib * bsz;
		const struct block_q5_K *x5 = (const struct block_q5_K *)blk;
		const uint8_t *qs = q5 ? x5->qs : ((const struct block_q4_K *)blk)->qs;
		prefetch_span(blk, bsz);
		float d = h2f(x5->d), dmin = h2f(x5->dmin);
		__m256i ms = k4_scales_mins(x5->scales);
		__m128i sc128 = _mm256_castsi256_si128(ms);
		__m256i scales = _mm256_set_m128i(sc128, sc128);
		__m256i sumi[8];
		for (int t = 0; t < NT; t++)
			sumi[t] = _mm256_setzero_si256();
		__m256i hbits = q5 ? _mm256_loadu_si256((const __m256i *)x5->qh) : _mm256_setzero_si256();
		for (int j = 0; j < QK_K / 64; j++) {
			__m256i scale_l = bcast16(scales, 2 * j), scale_h = bcast16(scales, 2 * j + 1);
			__m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
			__m256i ql = _mm256_and_si256(bits, m4);
			__m256i qh = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
			if (q5) {
				__m256i hl = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one);
				__m256i hh = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one);
				ql = _mm256_add_epi8(ql, _mm256_slli_epi16(hl, 4));
				qh = _mm256_add_epi8(qh, _mm256_slli_epi16(hh, 4));
			}
			for (int t = 0; t < NT; t++) {
				const int8_t *q8 = (ACT(t, struct block_q8_K) + ib)->qs + 64 * j;
				__m256i pl = _mm256_maddubs_epi16(ql, _mm256_loadu_si256((const __m256i *)q8));
				__m256i ph = _mm256_maddubs_epi16(qh, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
				pl = _mm256_madd_epi16(scale_l, pl);
				ph = _mm256_madd_epi16(scale_h, ph);
				sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(pl, ph));
			}
		}
		for (int t = 0; t < NT; t++)
			acc[t] = k4_block(acc[t], sumi[t], ms, ACT(t, struct block_q8_K) + ib, d, dmin);
	}
	store_hsum(acc, out, os, NT);
}

KERNEL(dot_q5_K, body_k4, true)
#endif

/* q4_K, eight rows in lanes as the 32-element types above: per 32-element
 * sub-block the rows' codes (0..15) meet the broadcast activation bytes in
 * maddubs, eight 16-bit pair sums add without overflow (8 * 2 * 15 * 127 <
 * 2^15), and one madd applies each row's 6-bit sub-block scale; a block's
 * eight sub-blocks add exactly in int32, and so do the mins against the
 * activation's 32-element sums (its bsums, paired). Per block and row the
 * float step is acc + ((d * dy) * sumi - (dmin * dy) * summins). The
 * result differs from the portable vec_dot only by that float order. */

/* get_scale_min_k4 for eight rows at once from the 12 packed bytes in
 * columns (T[c] lane r = row r's bytes 4c..4c+3): out[0] / out[1] lane r
 * = row r's scales 0..3 / 4..7 as bytes, out[2] / out[3] its mins.
 * k4_scales_rows8 transposes plain rows p[r] + off first. */
ALWAYS_INLINE void k4_scales_from(const __m256i *T, __m256i *out)
{
	const __m256i m6 = _mm256_set1_epi8(63), m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
	out[0] = _mm256_and_si256(T[0], m6);
	out[2] = _mm256_and_si256(T[1], m6);
	out[1] = _mm256_or_si256(_mm256_and_si256(T[2], m4), _mm256_and_si256(_mm256_srli_epi16(T[0], 2), m30));
	out[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(T[2], 4), m4),
				 _mm256_and_si256(_mm256_srli_epi16(T[1], 2), m30));
}

ALWAYS_INLINE void k4_scales_rows8(const uint8_t *const *p, size_t off, __m256i *out)
{
	__m256i T[4];
	transpose_8x4(p, off, T); /* T[0..2]: packed bytes 0..3, 4..7, 8..11 */
	k4_scales_from(T, out);
}

/* Bytes a, b of every 32-bit lane as the lane's two int16 (b < 0: a twice). */
ALWAYS_INLINE __m256i bytes_to_i16(__m256i v, int a, int b)
{
	const char z = (char)0x80;
	const char A = (char)a, B = (char)(b < 0 ? a : b);
	const __m256i sel = _mm256_setr_epi8(A, z, B, z, 4 + A, z, 4 + B, z, 8 + A, z, 8 + B, z, 12 + A, z, 12 + B, z,
					     A, z, B, z, 4 + A, z, 4 + B, z, 8 + A, z, 8 + B, z, 12 + A, z, 12 + B, z);
	return _mm256_shuffle_epi8(v, sel);
}

/* Lane r's byte b (0..3) of v as the sub-block scale its sums take:
 * int32 for vpdpbusd's sums (VNNI), twice as int16 for madd (AVX2). The
 * vpshufb control is a table row: at one activation row GCC keeps the
 * sub-block loop rolled, and a control built from its counter took ~30
 * scalar and insert instructions per sub-block (bench_kernels, in-cache
 * decode: q4_K 49 -> 60, q6_K 37 -> 45 GB/s). */
#define SEL_Z ((char)0x80)
#if KERN_VNNI
#define K4_SEL(b) b, SEL_Z, SEL_Z, SEL_Z, 4 + b, SEL_Z, SEL_Z, SEL_Z, 8 + b, SEL_Z, SEL_Z, SEL_Z, 12 + b, SEL_Z, SEL_Z, SEL_Z
#else
#define K4_SEL(b) b, SEL_Z, b, SEL_Z, 4 + b, SEL_Z, 4 + b, SEL_Z, 8 + b, SEL_Z, 8 + b, SEL_Z, 12 + b, SEL_Z, 12 + b, SEL_Z
#endif
ALWAYS_INLINE __m256i k4_scale_lanes(__m256i v, int b)
{
	static const char sel[4][32] = { { K4_SEL(0), K4_SEL(0) }, { K4_SEL(1), K4_SEL(1) },
					 { K4_SEL(2), K4_SEL(2) }, { K4_SEL(3), K4_SEL(3) } };
	return _mm256_shuffle_epi8(v, _mm256_loadu_si256((const __m256i *)sel[b]));
}
#undef K4_SEL

/* KIND: 0 for plain rows, X8 for x8 groups: d[8], dmin[8], the scales'
 * three 4-byte columns, then the quants' 32 columns. */
ALWAYS_INLINE void body_k4_rows8(int64_t n, const void *vw, size_t w_stride, int nr, const void *act,
				 size_t act_stride, float *out, size_t os, const int NT, const int KIND)
{
	const bool x8 = KIND & X8;
	const uint8_t *p[8];
	for (int r = 0; r < 8; r++)
		p[r] = (const uint8_t *)vw + (size_t)(r < nr ? r : nr - 1) * w_stride;
	const __m256i m4 = _mm256_set1_epi8(0x0F);
	__m256 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm256_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		const size_t base = (size_t)ib * sizeof(struct block_q4_K);
		const uint8_t *sb = (const uint8_t *)vw + 8 * base;
		__m256i SM[4];
		__m256 dx, dmx;
		if (x8) {
			__m256i T[3];
			for (int k = 0; k < 3; k++)
				T[k] = _mm256_loadu_si256((const __m256i *)(sb + Q4KX_SC + 32 * k));
			k4_scales_from(T, SM);
			dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
			dmx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sb + 16)));
		} else {
			for (int r = 0; r < nr; r++)
				prefetch_span(p[r] + base, sizeof(struct block_q4_K));
			k4_scales_rows8(p, base + offsetof(struct block_q4_K, scales), SM);
			dx = halves_rows(p, base);
			dmx = halves_rows(p, base + offsetof(struct block_q4_K, dmin));
		}
		__m256i isum[8];
		for (int t = 0; t < NT; t++)
			isum[t] = _mm256_setzero_si256();
		/* row r's scale for each sub-block, selected once a block: in the
		 * rolled loop below a select from the counter took ~15 scalar
		 * instructions a step */
		__m256i scv8[8];
		for (int q = 0; q < 8; q++)
			scv8[q] = k4_scale_lanes(SM[q / 4], q % 4);
		for (int j = 0; j < QK_K / 64; j++) {
			__m256i T[8];
			if (x8) {
				prefetch_part_k(sb, 8 * sizeof(struct block_q4_K), j, QK_K / 64, NT);
				for (int k = 0; k < 8; k++)
					T[k] = _mm256_loadu_si256((const __m256i *)(sb + Q4KX_QS + 32 * (8 * (size_t)j + k)));
			} else {
				transpose_8x4(p, base + offsetof(struct block_q4_K, qs) + 32 * (size_t)j, T);
				transpose_8x4(p, base + offsetof(struct block_q4_K, qs) + 32 * (size_t)j + 16, T + 4);
			}
			for (int h = 0; h < 2; h++) {
				__m256i W[8];
				/* VNNI, one activation row: the high nibbles in place,
				 * their int32 sums 16 times the codes' and shifted back
				 * exactly below (one shift for eight; bench/ab.sh
				 * TinyLlama-shape Q4_K_M step time 0.989x twice; at eight
				 * rows the per-row shifts cost more: 1.007x) */
				const bool hi16 = KERN_VNNI && NT == 1 && h;
				for (int k = 0; k < 8; k++)
					W[k] = hi16 ? _mm256_and_si256(T[k], _mm256_set1_epi8((char)0xF0))
						    : _mm256_and_si256(h ? _mm256_srli_epi16(T[k], 4) : T[k], m4);
				const __m256i scv = scv8[2 * j + h];
#pragma GCC unroll 8
				for (int t = 0; t < NT; t++) {
					const int8_t *y = (ACT(t, struct block_q8_K) + ib)->qs + 64 * j + 32 * h;
#define YB(k) bcast4(y + 4 * (k))
#if KERN_VNNI
					__m256i d = dp4m(_mm256_setzero_si256(), W, y, 8);
					__m256i s = _mm256_mullo_epi32(hi16 ? _mm256_srai_epi32(d, 4) : d, scv);
#else
					__m256i s16 = _mm256_maddubs_epi16(W[0], YB(0));
					for (int k = 1; k < 8; k++)
						s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(W[k], YB(k)));
					__m256i s = _mm256_madd_epi16(s16, scv);
#endif
#undef YB
					isum[t] = _mm256_add_epi32(isum[t], s);
				}
			}
		}
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			const struct block_q8_K *y = ACT(t, struct block_q8_K) + ib;
			__m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
			bs = _mm256_hadd_epi16(bs, bs); /* 32-element sums: 0..3 low half, 4..7 high */
			__m256i ms = _mm256_setzero_si256();
			for (int q = 0; q < 4; q++) {
				__m256i pair = _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32(q < 2 ? q : q + 2));
				__m256i mn = bytes_to_i16(SM[2 + q / 2], 2 * (q % 2), 2 * (q % 2) + 1);
				ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mn, pair));
			}
			__m256 dy = _mm256_set1_ps(y->d);
			__m256 term = _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(dx, dy), _mm256_cvtepi32_ps(isum[t])),
						    _mm256_mul_ps(_mm256_mul_ps(dmx, dy), _mm256_cvtepi32_ps(ms)));
			acc[t] = _mm256_add_ps(acc[t], term);
		}
	}
	store_rows(acc, out, os, NT, x8 ? 8 : nr);
}
GEMM8(dot_q4_K, body_k4_rows8, 0)
DOT_OF_GEMM8(dot_q4_K)
GEMM8(x8_q4_K, body_k4_rows8, X8)

#if !KERN_VNNI /* plain-row q6_K, llama.cpp's order: the VNNI set uses the AVX2 one */
/* Broadcast int8 scales 2i and 2i+1 to 8 int16 lanes each. */
ALWAYS_INLINE __m256i q6_scale(__m128i scales, int i)
{
	__m128i sh = _mm_set_epi64x(0x0101010101010101LL * (2 * i + 1), 0x0101010101010101LL * (2 * i));
	return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales, sh));
}

ALWAYS_INLINE void body_q6_K(int64_t n, const void *vw, const void *act, size_t act_stride,
			     float *out, size_t os, const int NT, const int KIND)
{
	(void)KIND;
	const struct block_q6_K *x = vw;
	const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
	const __m256i m32s = _mm256_set1_epi8(32);
	__m256 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm256_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		prefetch_span((const uint8_t *)(x + ib), sizeof(struct block_q6_K));
		float d = h2f(x[ib].d);
		__m128i scales = _mm_loadu_si128((const __m128i *)x[ib].scales);
		__m256i sumi[8];
		for (int t = 0; t < NT; t++)
			sumi[t] = _mm256_setzero_si256();
		for (int j = 0; j < QK_K / 128; j++) {
			__m256i sc[4];
			for (int k = 0; k < 4; k++)
				sc[k] = q6_scale(scales, 4 * j + k);
			__m256i b1 = _mm256_loadu_si256((const __m256i *)(x[ib].ql + 64 * j));
			__m256i b2 = _mm256_loadu_si256((const __m256i *)(x[ib].ql + 64 * j + 32));
			__m256i bh = _mm256_loadu_si256((const __m256i *)(x[ib].qh + 32 * j));
			__m256i q[4];
			q[0] = _mm256_or_si256(_mm256_and_si256(b1, m4),
					       _mm256_slli_epi16(_mm256_and_si256(bh, m2), 4));
			q[1] = _mm256_or_si256(_mm256_and_si256(b2, m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m2), 4));
			q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m2), 4));
			q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4),
					       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m2), 4));
			for (int t = 0; t < NT; t++) {
				const int8_t *q8 = (ACT(t, struct block_q8_K) + ib)->qs + 128 * j;
				__m256i p[4];
				for (int k = 0; k < 4; k++) {
					__m256i y = _mm256_loadu_si256((const __m256i *)(q8 + 32 * k));
					/* (q - 32) * y as q * y - 32 * y: maddubs needs u8 x s8. */
					p[k] = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], y),
								_mm256_maddubs_epi16(m32s, y));
					p[k] = _mm256_madd_epi16(sc[k], p[k]);
				}
				sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p[0], p[1]));
				sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(p[2], p[3]));
			}
		}
		for (int t = 0; t < NT; t++) {
			__m256 vd = _mm256_set1_ps((ACT(t, struct block_q8_K) + ib)->d * d);
			acc[t] = _mm256_fmadd_ps(vd, _mm256_cvtepi32_ps(sumi[t]), acc[t]);
		}
	}
	store_hsum(acc, out, os, NT);
}
KERNEL(dot_q6_K, body_q6_K, 0)
#endif

/* q6_K in x8 groups (kernels/repack.h): superblock d[8], the 16 int8
 * scales in 4 columns, ql in 32 columns, qh in 16. Rows in lanes as
 * q4_K: codes 0..63 unsigned, two maddubs pair sums add in 16 bits
 * (2 * 2 * 63 * 127 < 2^15), one madd per 16-element group applies the
 * row's scale, and the codes' offset 32 comes off as 32 * sum over groups
 * of scale * bsum. Per block and row: acc + (d * dy) * sumi. */

/* Signed bytes a and b of every 32-bit lane as its two int16. */
ALWAYS_INLINE __m256i sbytes_to_i16(__m256i v, int a, int b)
{
	const char z = (char)0x80, A = (char)a, B = (char)b;
	const __m256i sel = _mm256_setr_epi8(z, A, z, B, z, 4 + A, z, 4 + B, z, 8 + A, z, 8 + B, z, 12 + A, z, 12 + B,
					     z, A, z, B, z, 4 + A, z, 4 + B, z, 8 + A, z, 8 + B, z, 12 + A, z, 12 + B);
	return _mm256_srai_epi16(_mm256_shuffle_epi8(v, sel), 8);
}

/* Lane r's signed byte b (0..3) of v as its group scale: int32 (VNNI),
 * twice as int16 (AVX2). A table row, as k4_scale_lanes. */
#if KERN_VNNI
#define Q6_SEL(b) SEL_Z, SEL_Z, SEL_Z, b, SEL_Z, SEL_Z, SEL_Z, 4 + b, SEL_Z, SEL_Z, SEL_Z, 8 + b, SEL_Z, SEL_Z, SEL_Z, 12 + b
#else
#define Q6_SEL(b) SEL_Z, b, SEL_Z, b, SEL_Z, 4 + b, SEL_Z, 4 + b, SEL_Z, 8 + b, SEL_Z, 8 + b, SEL_Z, 12 + b, SEL_Z, 12 + b
#endif
ALWAYS_INLINE __m256i q6_scale_lanes(__m256i v, int b)
{
	static const char sel[4][32] = { { Q6_SEL(0), Q6_SEL(0) }, { Q6_SEL(1), Q6_SEL(1) },
					 { Q6_SEL(2), Q6_SEL(2) }, { Q6_SEL(3), Q6_SEL(3) } };
	__m256i x = _mm256_shuffle_epi8(v, _mm256_loadu_si256((const __m256i *)sel[b]));
	return KERN_VNNI ? _mm256_srai_epi32(x, 24) : _mm256_srai_epi16(x, 8);
}
#undef Q6_SEL

/* Sub-block 4j + m of a q6_K x8 superblock at sb (elements 128j + 32m +
 * 0..31) against NT activation rows' block ib, added to isum[t]. */
ALWAYS_INLINE void q6_sub(const uint8_t *sb, const __m256i *S, int j, int m, const void *act, size_t act_stride,
			  int64_t ib, __m256i *isum, const int NT)
{
	const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
	__m256i W[8];
	for (int k = 0; k < 8; k++) {
		__m256i ql = _mm256_loadu_si256((const __m256i *)(sb + Q6X_QL +
			32 * (16 * (size_t)j + 8 * (size_t)(m & 1) + (size_t)k)));
		__m256i qh = _mm256_loadu_si256((const __m256i *)(sb + Q6X_QH +
			32 * (8 * (size_t)j + (size_t)k)));
		__m256i lo = _mm256_and_si256(m < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
		__m256i hi = m == 3 ? _mm256_srli_epi16(qh, 2) : _mm256_slli_epi16(qh, 4 - 2 * m);
		W[k] = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
	}
	int g = 8 * j + 2 * m; /* the sub-block's two scale groups */
	__m256i sc0 = q6_scale_lanes(S[g / 4], g % 4);
	__m256i sc1 = q6_scale_lanes(S[(g + 1) / 4], (g + 1) % 4);
#pragma GCC unroll 8
	for (int t = 0; t < NT; t++) {
		const int8_t *y = (ACT(t, struct block_q8_K) + ib)->qs + 128 * j + 32 * m;
#define YB(k) bcast4(y + 4 * (k))
#if KERN_VNNI
		/* each group's sum times its scale, as int32 */
		__m256i z = _mm256_setzero_si256();
		__m256i s0 = _mm256_mullo_epi32(dp4m(z, W, y, 4), sc0);
		__m256i s1 = _mm256_mullo_epi32(dp4m(z, W + 4, y + 16, 4), sc1);
#else
		__m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(W[0], YB(0)), _mm256_maddubs_epi16(W[1], YB(1)));
		__m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(W[2], YB(2)), _mm256_maddubs_epi16(W[3], YB(3)));
		__m256i c = _mm256_add_epi16(_mm256_maddubs_epi16(W[4], YB(4)), _mm256_maddubs_epi16(W[5], YB(5)));
		__m256i d = _mm256_add_epi16(_mm256_maddubs_epi16(W[6], YB(6)), _mm256_maddubs_epi16(W[7], YB(7)));
		__m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(a, sc0), _mm256_madd_epi16(b, sc0));
		__m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(c, sc1), _mm256_madd_epi16(d, sc1));
#endif
#undef YB
		isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(s0, s1));
	}
}

ALWAYS_INLINE void body_q6_K_x8(int64_t n, const void *vw, size_t w_stride, int nr, const void *act,
				size_t act_stride, float *out, size_t os, const int NT, const int KIND)
{
	(void)w_stride;
	(void)nr;
	(void)KIND;
	__m256 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm256_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		const uint8_t *sb = (const uint8_t *)vw + (size_t)ib * 8 * sizeof(struct block_q6_K);
		__m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)sb));
		__m256i S[4];
		for (int c = 0; c < 4; c++)
			S[c] = _mm256_loadu_si256((const __m256i *)(sb + Q6X_SC + 32 * c));
		__m256i isum[8];
		for (int t = 0; t < NT; t++)
			isum[t] = _mm256_setzero_si256();
		for (int j = 0; j < 2; j++) {
			/* unrolled at one activation row (no branches on m, constant
			 * shifts: in-cache decode 45 -> 50 GB/s); rolled for more,
			 * where the unrolled body spilled (eight rows 16 -> 11) */
			if (NT == 1) {
#pragma GCC unroll 4
				for (int m = 0; m < 4; m++) {
					prefetch_part_k(sb, 8 * sizeof(struct block_q6_K), 4 * j + m, 8, NT);
					q6_sub(sb, S, j, m, act, act_stride, ib, isum, NT);
				}
			} else {
				for (int m = 0; m < 4; m++) {
					prefetch_part_k(sb, 8 * sizeof(struct block_q6_K), 4 * j + m, 8, NT);
					q6_sub(sb, S, j, m, act, act_stride, ib, isum, NT);
				}
			}
		}
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			const struct block_q8_K *y = ACT(t, struct block_q8_K) + ib;
			__m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
			__m256i corr = _mm256_setzero_si256();
			for (int q = 0; q < 8; q++) {
				/* groups 2q, 2q+1: bsums as one int32 pair, scales as int16 pairs */
				__m256i pair = _mm256_permutevar8x32_epi32(bs, _mm256_set1_epi32(q));
				__m256i sc = sbytes_to_i16(S[q / 2], 2 * (q % 2), 2 * (q % 2) + 1);
				corr = _mm256_add_epi32(corr, _mm256_madd_epi16(sc, pair));
			}
			__m256i si = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(corr, 5));
			__m256 dy = _mm256_set1_ps(y->d);
			acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_mul_ps(dx, dy), _mm256_cvtepi32_ps(si)));
		}
	}
	for (int t = 0; t < NT; t++)
		_mm256_storeu_ps(out + (size_t)t * os, acc[t]);
}
GEMM8(x8_q6_K, body_q6_K_x8, 0)

#if !KERN_VNNI /* no integer sums: the VNNI set uses the AVX2 float kernels */
/* Float kernels keep four accumulators per row: four rows fill the
 * registers. */
#undef BODY_NT_MAX
#define BODY_NT_MAX 4

/* ---- f32 / f16 / bf16 ------------------------------------------------------
 * Four 8-lane FMA accumulators over steps of 32 elements, reduced as
 * ggml's GGML_F32x8_REDUCE ((0+2) + (1+3), then across lanes); the tail
 * (n % 32) is summed in double as ggml's leftovers. */

/* ld_f32 / ld_f16: simd_x86.h */
ALWAYS_INLINE __m256 ld_bf16(const void *p, int64_t i)
{
	__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
	return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

ALWAYS_INLINE float reduce4(__m256 *s)
{
	s[0] = _mm256_add_ps(s[0], s[2]);
	s[1] = _mm256_add_ps(s[1], s[3]);
	s[0] = _mm256_add_ps(s[0], s[1]);
	__m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s[0]), _mm256_extractf128_ps(s[0], 1));
	__m128 t1 = _mm_hadd_ps(t0, t0);
	return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

#define FLOAT_BODY(name, LD, ELEM, CVT)                                                          \
	ALWAYS_INLINE void name(int64_t n, const void *w, const void *act, size_t act_stride,   \
				float *out, size_t os, const int NT, const int KIND)              \
	{                                                                                       \
		(void)KIND;                                                                     \
		__m256 s[8][4];                                                       \
		for (int t = 0; t < NT; t++)                                                    \
			for (int k = 0; k < 4; k++)                                             \
				s[t][k] = _mm256_setzero_ps();                                  \
		int64_t np = n & ~(int64_t)31;                                                  \
		for (int64_t i = 0; i < np; i += 32) {                                          \
			__m256 wx[4];                                                           \
			for (int k = 0; k < 4; k++)                                             \
				wx[k] = LD(w, i + 8 * k);                                       \
			for (int t = 0; t < NT; t++) {                                          \
				const void *y = ACT(t, uint8_t);                                \
				for (int k = 0; k < 4; k++)                                     \
					s[t][k] = _mm256_fmadd_ps(wx[k], LD(y, i + 8 * k), s[t][k]); \
			}                                                                       \
		}                                                                               \
		for (int t = 0; t < NT; t++) {                                                  \
			const ELEM *y = ACT(t, ELEM);                                           \
			double tail = 0;                                                        \
			for (int64_t i = np; i < n; i++)                                        \
				tail += (double)(CVT(((const ELEM *)w)[i]) * CVT(y[i]));        \
			out[(size_t)t * os] = (float)((double)reduce4(s[t]) + tail);           \
		}                                                                               \
	}

ALWAYS_INLINE float id_f32(float x)
{
	return x;
}
ALWAYS_INLINE float cvt_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

FLOAT_BODY(body_f32, ld_f32, float, id_f32)
FLOAT_BODY(body_f16, ld_f16, uint16_t, h2f)
FLOAT_BODY(body_bf16, ld_bf16, uint16_t, cvt_bf16)
KERNEL(dot_f32, body_f32, 0)
KERNEL(dot_f16, body_f16, 0)
KERNEL(dot_bf16, body_bf16, 0)
#endif

kern_gemm_fn SET_FN(kern_gemm_get_avx2)(int t)
{
	switch (t) {
	case FX_TYPE_Q4_0: return dot_q4_0_gemm;
	case FX_TYPE_Q4_1: return dot_q4_1_gemm;
	case FX_TYPE_Q5_0: return dot_q5_0_gemm;
	case FX_TYPE_Q8_0: return dot_q8_0_gemm;
	case FX_TYPE_Q4_K: return dot_q4_K_gemm;
	default: return NULL;
	}
}

kern_gemm_fn SET_FN(kern_gemm_x8_get_avx2)(int t)
{
	switch (t) {
	case FX_TYPE_Q4_0: return x8_q4_0_gemm;
	case FX_TYPE_Q4_1: return x8_q4_1_gemm;
	case FX_TYPE_Q5_0: return x8_q5_0_gemm;
	case FX_TYPE_Q8_0: return x8_q8_0_gemm;
	case FX_TYPE_Q4_K: return x8_q4_K_gemm;
	case FX_TYPE_Q6_K: return x8_q6_K_gemm;
	default: return NULL;
	}
}

kern_dot_fn SET_FN(kern_dot_get_avx2)(int t)
{
	switch (t) {
	case FX_TYPE_Q4_0: return dot_q4_0;
	case FX_TYPE_Q4_1: return dot_q4_1;
	case FX_TYPE_Q5_0: return dot_q5_0;
	case FX_TYPE_Q8_0: return dot_q8_0;
	case FX_TYPE_Q4_K: return dot_q4_K;
#if KERN_VNNI
	default: return kern_dot_get_avx2(t);
#else
	case FX_TYPE_F32: return dot_f32;
	case FX_TYPE_F16: return dot_f16;
	case FX_TYPE_BF16: return dot_bf16;
	case FX_TYPE_Q5_K: return dot_q5_K;
	case FX_TYPE_Q6_K: return dot_q6_K;
	default: return NULL;
#endif
	}
}

#endif /* __x86_64__ */
