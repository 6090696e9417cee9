/* AVX-512 rows-in-lanes kernels for x8 weight groups (kernels/repack.h),
 * the AVX-512 set's (kernels/kern.h, KERN_AVX512). Built with AVX-512 F,
 * BW, VL and VNNI flags whatever the build's -march (CMakeLists.txt);
 * kern_set_init enters them only when the CPU has those features.
 *
 * Two consecutive x8 groups fill one 512-bit register: a superblock's
 * 32-byte column from the first group in lanes 0..7 and the same column
 * from the second (8 plain rows later) in lanes 8..15. Everything else is
 * dot_avx2.c's x8 kernels at twice the width: the same unsigned codes,
 * vpdpbusd against each activation row's 4-byte groups broadcast by a
 * load (vpbroadcastd from memory: no shuffle per product), the same
 * exact int32 sums, and the same float steps in the same order, so every
 * row's result is the AVX2 set's bit for bit (test_kernels compares the
 * sets). A 512-bit vpdpbusd does twice a 256-bit one's products; on the
 * Xeon where this was written it issued about 1.65x as fast.
 *
 * The k-quants' per-block min/offset terms use vpdpwssd on the q8_K
 * activation's 16-element sums, read as int16 pairs: the same integer
 * as the AVX2 form's pairwise sums, without its permutes.
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

/* Four bytes at p (any alignment) in every 32-bit lane: one broadcast
 * load (GCC 12 issues vpbroadcastd from memory; clang folds it into the
 * vpdpbusd as {1to16}). A scalar load and set1 went through a general
 * register instead: two instructions. */
ALWAYS_INLINE __m512i bcast4(const void *p)
{
	return _mm512_broadcastd_epi32(_mm_loadu_si32(p));
}

/* acc + u . (the four bytes at p in every lane): vpdpbusd with the
 * broadcast in its memory operand ({1to16}). GCC 12 does not fold
 * bcast4 into the instruction: it loads every broadcast of a block into a
 * register ahead of the chain and, short of registers, spills them. */
ALWAYS_INLINE __m512i dpb(__m512i acc, __m512i u, const int8_t *p)
{
#if defined(__GNUC__) && !defined(__clang__)
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)p));
	return acc;
#else
	return _mm512_dpbusd_epi32(acc, u, bcast4(p));
#endif
}

/* acc + u[k] . (bytes 4k..4k+3 of y in every lane) over k < nk. */
ALWAYS_INLINE __m512i dp4(__m512i acc, const __m512i *u, const int8_t *y, int nk)
{
	for (int k = 0; k < nk; k++)
		acc = dpb(acc, u[k], y + 4 * k);
	return acc;
}

/* out[t * os + r] = lane r of acc[t], r < 16, t < NT. */
ALWAYS_INLINE void store16(const __m512 *acc, float *out, size_t os, const int NT)
{
	for (int t = 0; t < NT; t++)
		_mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

/* ---- 32-element block types (dot_avx2.c's body_rows8, x8 only) ------- */

ALWAYS_INLINE void body_leg16(int64_t n, const uint8_t *w, size_t gs, const void *act, size_t act_stride,
			      float *out, size_t os, const int NT, const int KIND)
{
	const bool q41 = KIND == LEG_Q4_1;
	const int64_t nb = n / 32;
	const struct leg_act la = leg_act_of(n, KIND);
	const size_t ws = leg_wsize(KIND);
	__m512 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t ib = 0; ib < nb; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * ws;
		prefetch2(sb, gs, 8 * ws);
		__m512i W[8];
		leg_codes16(sb, gs, W, KIND);
		if (KIND == LEG_Q8_0) /* w + 128 as u8; 128 * sum(y) comes off below */
			for (int k = 0; k < 8; k++)
				W[k] = _mm512_xor_si512(W[k], _mm512_set1_epi8((char)0x80));
		__m512 dx = ld2_half(sb, gs, 0), mx = q41 ? ld2_half(sb, gs, 16) : dx;
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++) {
			const uint8_t *y = ACT(t, uint8_t);
			/* the chain starts at -off * sum(y) (dot_avx2.c's leg_start) */
			__m512i start = _mm512_setzero_si512();
			if (!q41) {
				start = bcast4(y + la.s_off + 4 * (size_t)ib);
				if (leg_start_shift(KIND))
					start = _mm512_srai_epi32(start, leg_start_shift(KIND));
			}
			__m512i si = dp4(start, W, (const int8_t *)(y + (size_t)ib * la.ys + la.yq), 8);
			acc[t] = leg_float16(acc[t], si, dx, mx, y, &la, ib, KIND);
		}
	}
	store16(acc, out, os, NT);
}

/* ---- q4_K (dot_avx2.c's body_k4_rows8, x8 only) ---------------------- */

ALWAYS_INLINE void body_q4_K16(int64_t n, const uint8_t *w, size_t gs, const void *act, size_t act_stride,
			       float *out, size_t os, const int NT, const int KIND)
{
	(void)KIND;
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	__m512 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * sizeof(struct block_q4_K);
		prefetch2(sb, gs, 8 * sizeof(struct block_q4_K));
		__m512i SC[2], MN[2];
		k4_scales16(sb, gs, SC, MN);
		__m512 dx = ld2_half(sb, gs, 0), dmx = ld2_half(sb, gs, 16);
		__m512i isum[8];
		for (int t = 0; t < NT; t++)
			isum[t] = _mm512_setzero_si512();
		for (int j = 0; j < QK_K / 64; j++) {
			for (int h = 0; h < 2; h++) {
				__m512i W[8];
				for (int k = 0; k < 8; k++) {
					__m512i T = ld2(sb, gs, Q4KX_QS + 32 * (8 * (size_t)j + k));
					W[k] = _mm512_and_si512(h ? _mm512_srli_epi16(T, 4) : T, m4);
				}
				/* lane r: row r's scale of sub-block 2j + h */
				__m512i scv = ubyte32(SC[j / 2], 2 * (j % 2) + h);
#pragma GCC unroll 8
				for (int t = 0; t < NT; t++) {
					const int8_t *y = (ACT(t, struct block_q8_K) + ib)->qs + 64 * j + 32 * h;
					/* two chains of four: shorter latency before the
					 * 10-cycle vpmulld (~4% at eight activation rows) */
					__m512i z = _mm512_setzero_si512();
					__m512i d = _mm512_add_epi32(dp4(z, W, y, 4), dp4(z, W + 4, y + 16, 4));
					isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(d, scv));
				}
			}
		}
		__m512i MP[8];
		k4_mins16(MN, MP);
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++)
			acc[t] = k4_float16(acc[t], isum[t], ACT(t, struct block_q8_K) + ib, MP, dx, dmx);
	}
	store16(acc, out, os, NT);
}

/* ---- q6_K (dot_avx2.c's body_q6_K_x8) ------------------------------- */

ALWAYS_INLINE void body_q6_K16(int64_t n, const uint8_t *w, size_t gs, const void *act, size_t act_stride,
			       float *out, size_t os, const int NT, const int KIND)
{
	(void)KIND;
	__m512 acc[8];
	for (int t = 0; t < NT; t++)
		acc[t] = _mm512_setzero_ps();
	for (int64_t ib = 0; ib < n / QK_K; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * sizeof(struct block_q6_K);
		prefetch2(sb, gs, 8 * sizeof(struct block_q6_K));
		__m512 dx = ld2_half(sb, gs, 0);
		__m512i S[4];
		for (int c = 0; c < 4; c++)
			S[c] = ld2(sb, gs, Q6X_SC + 32 * (size_t)c);
		__m512i isum[8];
		for (int t = 0; t < NT; t++)
			isum[t] = _mm512_setzero_si512();
		for (int j = 0; j < 2; j++) {
			for (int m = 0; m < 4; m++) {
				/* sub-block 4j + m: elements 128j + 32m + (0..31) */
				__m512i W[8];
				for (int k = 0; k < 8; k++)
					W[k] = k6_codes16(sb, gs, j, m, k);
				int g = 8 * j + 2 * m; /* the sub-block's two scale groups */
				__m512i sc0 = sbyte32(S[g / 4], g % 4), sc1 = sbyte32(S[(g + 1) / 4], (g + 1) % 4);
#pragma GCC unroll 8
				for (int t = 0; t < NT; t++) {
					const int8_t *y = (ACT(t, struct block_q8_K) + ib)->qs + 128 * j + 32 * m;
					__m512i z = _mm512_setzero_si512();
					__m512i s0 = _mm512_mullo_epi32(dp4(z, W, y, 4), sc0);
					__m512i s1 = _mm512_mullo_epi32(dp4(z, W + 4, y + 16, 4), sc1);
					isum[t] = _mm512_add_epi32(isum[t], _mm512_add_epi32(s0, s1));
				}
			}
		}
		__m512i SP[8];
		k6_scale_pairs16(S, SP);
#pragma GCC unroll 8
		for (int t = 0; t < NT; t++)
			acc[t] = k6_float16(acc[t], isum[t], ACT(t, struct block_q8_K) + ib, SP, dx);
	}
	store16(acc, out, os, NT);
}

/* A kern_gemm_fn over x8 groups: pairs of groups through body for NT =
 * 8, 4, 2, 1 activation rows at a time; a last single group through the
 * set's 256-bit kernel (dot_avx2.c's EVEX build: the same results). */
#define GEMM16(name, body, KIND, TYPE)                                                            \
	static void name##_g1(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as,  \
			      float *o, size_t os) { body(n, w, gs, a, as, o, os, 1, KIND); }      \
	static void name##_g2(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as,  \
			      float *o, size_t os) { body(n, w, gs, a, as, o, os, 2, KIND); }      \
	static void name##_g4(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as,  \
			      float *o, size_t os) { body(n, w, gs, a, as, o, os, 4, KIND); }      \
	static void name##_g8(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as,  \
			      float *o, size_t os) { body(n, w, gs, a, as, o, os, 8, KIND); }      \
	static void name(int64_t n, const void *w, size_t ws, int nr, const void *act, size_t as,   \
			 int nt, float *out, size_t os)                                          \
	{                                                                                     \
		const uint8_t *p = w;                                                         \
		int r = 0;                                                                    \
		for (; r + 16 <= nr; r += 16) {                                               \
			const uint8_t *a = act, *g = p + (size_t)r * ws;                       \
			float *o = out + r;                                                   \
			int m = nt;                                                           \
			for (; m >= 8; m -= 8, a += 8 * as, o += 8 * os)                      \
				name##_g8(n, g, 8 * ws, a, as, o, os);                        \
			for (; m >= 4; m -= 4, a += 4 * as, o += 4 * os)                      \
				name##_g4(n, g, 8 * ws, a, as, o, os);                        \
			for (; m >= 2; m -= 2, a += 2 * as, o += 2 * os)                      \
				name##_g2(n, g, 8 * ws, a, as, o, os);                        \
			if (m)                                                                \
				name##_g1(n, g, 8 * ws, a, as, o, os);                        \
		}                                                                             \
		if (r < nr)                                                                   \
			kern_gemm_x8_get_avx2_avx512(TYPE)(n, p + (size_t)r * ws, ws, nr - r, act, as, \
							   nt, out + r, os);                  \
	}

GEMM16(x16_q8_0, body_leg16, LEG_Q8_0, FX_TYPE_Q8_0)
GEMM16(x16_q4_0, body_leg16, LEG_Q4_0, FX_TYPE_Q4_0)
GEMM16(x16_q5_0, body_leg16, LEG_Q5_0, FX_TYPE_Q5_0)
GEMM16(x16_q4_1, body_leg16, LEG_Q4_1, FX_TYPE_Q4_1)
GEMM16(x16_q4_K, body_q4_K16, 0, FX_TYPE_Q4_K)
GEMM16(x16_q6_K, body_q6_K16, 0, FX_TYPE_Q6_K)

kern_gemm_fn kern_gemm_x8_get_avx512(int t)
{
	switch (t) {
	case FX_TYPE_Q4_0: return x16_q4_0;
	case FX_TYPE_Q4_1: return x16_q4_1;
	case FX_TYPE_Q5_0: return x16_q5_0;
	case FX_TYPE_Q8_0: return x16_q8_0;
	case FX_TYPE_Q4_K: return x16_q4_K;
	case FX_TYPE_Q6_K: return x16_q6_K;
	default: return NULL;
	}
}

#endif /* __x86_64__ */
