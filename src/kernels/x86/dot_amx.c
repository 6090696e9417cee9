/* AMX kernels for x8 weight groups (kernels/repack.h), the AMX set's
 * (kernels/kern.h, KERN_AMX): the AVX-512 set with its x8 matrix
 * products of more than KERN_NT_MAX activation rows (prefill) on the tile
 * unit (Intel AMX-TILE + AMX-INT8, Sapphire Rapids and later Xeons), for
 * q4_0, q4_1, q5_0, q8_0, q4_K and q6_K. Built with AMX flags whatever the
 * build's -march (CMakeLists.txt); kern_set_init enters them only when the
 * CPU has the features and Linux granted this process the tile state
 * (kernels/dispatch.c).
 *
 * Two x8 groups (16 weight rows) against m = 16 or 8 activation rows at
 * a time: A = the m rows' quant bytes of a block or K chunk, loaded from
 * the activation rows in place (their stride apart); B = the weights in
 * tile form, made from the x8 layout into a small buffer once per pair of
 * groups and slice of K, for every token block of the call (amx_btiles*); C = m x 16 exact int32 sums,
 * the same integers the vpdpbusd kernels form, which then take the
 * AVX-512 kernels' float steps (dot_avx512.c, the k4_ / k6_ helpers of
 * simd_x86.h), operation for operation: every result is the AVX-512
 * set's bit for bit (test_kernels).
 * - 32-element blocks: each block has its own f16 scales, so its sums
 *   leave the tile unit per block (a tile store; a token's 16 sums are one
 *   64-byte row). Two C tiles alternate, so a block's tile work overlaps
 *   the previous block's float step. The stores and float steps, one int32
 *   and four float instructions' lanes per 32 products, bound these
 *   kernels far below the tile unit's own peak (docs/BENCHMARKS.md).
 * - q4_K and q6_K: the sub-blocks' integer scales are folded into B (split
 *   into pieces small enough that code x piece is a byte; q6_K's codes less
 *   their offset 32, so its sums need no correction), so a 256-element
 *   superblock's scaled sum accumulates on the tiles over four 64-byte K
 *   chunks and two (q4_K) or three (q6_K) C tiles leave per superblock.
 *
 * The tile configuration is per thread: each call loads it (ldtilecfg)
 * and releases the tiles before it returns (tilerelease), so no thread
 * keeps AMX state between calls and a call may run on any pool thread.
 */
#if defined(__x86_64__)

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/x86/x86.h"
#include "kernels/repack.h"
#include "kernels/x86/simd_x86.h"
#include "quant/blocks.h"
#include "quant/quant.h"

/* The palette-1 tile configuration (Intel SDM vol. 1, 3.2 "LDTILECFG"). */
struct amx_cfg {
	uint8_t palette, start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* ldtilecfg of a whole configuration. GCC 12's _tile_loadconfig names
 * only its first 8 bytes as the asm's input, so stores to the rest may be
 * dropped or moved past it (a SIGILL on the next tile instruction, seen);
 * this one reads all 64. */
ALWAYS_INLINE void amx_loadcfg(const struct amx_cfg *c)
{
	__asm__ volatile("ldtilecfg %0" ::"m"(*c));
}

/* The kinds: dot_avx2.c's LEG_ ones (32-element blocks), q4_K, q6_K. */
enum { AMX_Q4_K = 16, AMX_Q6_K = 17 };

/* Tiles. 32-element blocks: 0 and 1 C (m x 64 bytes: 16 weight rows'
 * int32 sums) of even and odd blocks, 2 and 3 their A (m x 32 bytes), 4
 * and 5 their B (8 x 64). q4_K: 0-3 C (lo and hi of even superblocks,
 * then of odd ones), 4 and 7 A (m x 64 bytes, K chunks alternate), 5 and 6
 * B (16 x 64). q6_K: 0-2 C (its three pieces), 4 and 7 A, 3, 5 and 6 B. */
static void amx_config(int m, int kind)
{
	_Alignas(64) struct amx_cfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 8; i++) {
		c.rows[i] = (uint8_t)m;
		c.colsb[i] = 64;
	}
	if (kind == AMX_Q4_K || kind == AMX_Q6_K) {
		c.rows[5] = c.rows[6] = 16;
		if (kind == AMX_Q6_K)
			c.rows[3] = 16;
	} else {
		c.colsb[2] = c.colsb[3] = 32;
		c.rows[4] = c.rows[5] = 8;
	}
	amx_loadcfg(&c);
}

/* A slice of blocks of a pair of groups at a time is put in tile form
 * and serves every token block of the call: 64 KiB of 32-element blocks
 * (128 of them, a TinyLlama-width row whole; q8_0 5632-wide: 486-526 ->
 * 523-555 GMAC/s against 16 KiB, bench_kernels, three interleaved runs),
 * 16 KiB of q4_K / q6_K (2 or 1 superblocks; larger slices measured
 * slower for q4_K: 516 -> 470-485). */
enum { AMX_SLICE_BYTES = 65536 };
ALWAYS_INLINE size_t amx_slice_bytes(const int KIND)
{
	return KIND == AMX_Q4_K || KIND == AMX_Q6_K ? 16384 : 65536;
}
ALWAYS_INLINE size_t amx_bbytes(const int KIND)
{
	return KIND == AMX_Q6_K ? 12288 : KIND == AMX_Q4_K ? 8192 : 512;
}

/* Blocks ib0..ib1 - 1 of the two groups at w (the second gs bytes on) as
 * B tiles of 16 weight rows, 512 bytes each: row k = column k of both
 * groups (ld2: the vpdpbusd kernels' W[k]), the codes of elements
 * 4k..4k+3. q8_0's columns are its codes; in the 4-bit kinds' 16 packed
 * bytes a row, column c holds elements 4c..4c+3 (low nibbles) and
 * 16+4c..16+4c+3 (high), so row c < 4 is its low nibbles, row 4 + c its
 * high ones; q5_0 adds its fifth bits. q4_0's and q5_0's codes less their
 * offset (8, 16) are signed bytes, so their sums need no correction.
 * One tile of 16 rows instead of two of 8 halves the C rows that leave
 * the tile unit per block, what bounds these kernels (standalone
 * prototypes, q8_0 on one thread: ~205 GMAC/s with two, ~270 with one). */
ALWAYS_INLINE void amx_btiles(const uint8_t *w, size_t gs, int64_t ib0, int64_t ib1, uint8_t *b, const int KIND)
{
	const __m512i off = _mm512_set1_epi8(KIND == LEG_Q4_0 ? 8 : KIND == LEG_Q5_0 ? 16 : 0);
	const size_t ws = leg_wsize(KIND);
	for (int64_t ib = ib0; ib < ib1; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * ws;
		uint8_t *o = b + (size_t)(ib - ib0) * 512;
		prefetch2(sb, gs, 8 * ws);
		__m512i W[8];
		leg_codes16(sb, gs, W, KIND);
		for (int k = 0; k < 8; k++)
			_mm512_store_si512(o + 64 * k, _mm512_sub_epi8(W[k], off));
	}
}

/* q4_K superblocks ib0..ib1 - 1 of the two groups at w (the second gs
 * bytes on) in tile form, 8 KiB each: for each 64-element K chunk j, two
 * 16 x 64-byte B tiles, lo then hi. Row k < 8 of chunk j holds column 8j +
 * k's low nibbles (elements 64j + 4k..4k+3, sub-block 2j), row 8 + k its
 * high ones (sub-block 2j + 1), both groups side by side as amx_btiles'
 * rows; each code times its row's 6-bit sub-block scale split as sc = 8 hi
 * + lo (hi, lo <= 7, so code x piece <= 105 fits a signed byte). Then
 * A x B_lo + 8 (A x B_hi) = sum over sub-blocks of sc x the sub-block's
 * dot product: the exact integer the vpdpbusd kernels form (isum), summed
 * over the whole superblock on the tile unit, so only two C tiles a
 * superblock leave it instead of eight. One vpmullw scales two codes: a
 * 16-bit lane holds two bytes <= 15 and code x piece < 256, so no carry
 * crosses from the low byte to the high. */
ALWAYS_INLINE void amx_btiles_k4(const uint8_t *w, size_t gs, int64_t ib0, int64_t ib1, uint8_t *b)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), seven = _mm512_set1_epi16(7);
	for (int64_t ib = ib0; ib < ib1; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * sizeof(struct block_q4_K);
		uint8_t *o = b + (size_t)(ib - ib0) * 8192;
		prefetch2(sb, gs, 8 * sizeof(struct block_q4_K));
		__m512i SC[2], MN[2];
		k4_scales16(sb, gs, SC, MN);
		for (int j = 0; j < QK_K / 64; j++) {
			__m512i lo[2], hi[2]; /* sub-block 2j + h's pieces, lane r: row r's, in both int16 */
			for (int h = 0; h < 2; h++) {
				__m512i sc = ubyte32(SC[j / 2], 2 * (j % 2) + h);
				sc = _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16));
				lo[h] = _mm512_and_si512(sc, seven);
				hi[h] = _mm512_srli_epi16(sc, 3);
			}
			uint8_t *bl = o + (size_t)j * 2048, *bh = bl + 1024;
			for (int k = 0; k < 8; k++) {
				__m512i T = ld2(sb, gs, Q4KX_QS + 32 * (8 * (size_t)j + k));
				__m512i c0 = _mm512_and_si512(T, m4), c1 = _mm512_and_si512(_mm512_srli_epi16(T, 4), m4);
				_mm512_store_si512(bl + 64 * k, _mm512_mullo_epi16(c0, lo[0]));
				_mm512_store_si512(bl + 64 * (8 + k), _mm512_mullo_epi16(c1, lo[1]));
				_mm512_store_si512(bh + 64 * k, _mm512_mullo_epi16(c0, hi[0]));
				_mm512_store_si512(bh + 64 * (8 + k), _mm512_mullo_epi16(c1, hi[1]));
			}
		}
	}
}

/* q6_K superblocks ib0..ib1 - 1 of the two groups at w (the second gs
 * bytes on) in tile form, 12 KiB each: for each 64-element K chunk c
 * (sub-blocks 2c, 2c + 1), three 16 x 64-byte B tiles, one per digit of
 * the 16-element groups' int8 scales in balanced base 8, sc = p0 + 8 p1 +
 * 64 p2 with every p_i in -3..4 (p2 in -2..2 for sc in -128..127): B_i row
 * k = the signed codes (code - 32, in -32..31) of elements 4k..4k+3 of the
 * chunk, lane r times row r's p_i, at least -128 and at most 124, a signed
 * byte. Then sum_i 8^i (A x B_i) is the superblock's exact sum of scale x
 * (code - 32) x y: the integer the vpdpbusd kernels reach as isum less 32
 * x (scale . bsums) (k6_float16), with the offset already off, in three
 * tiles. A product is formed unsigned (code x |p| <= 252: one vpmullw
 * scales two codes with no carry across bytes), less 32 |p|, negated where
 * p < 0. */
ALWAYS_INLINE void amx_btiles_k6(const uint8_t *w, size_t gs, int64_t ib0, int64_t ib1, uint8_t *b)
{
	const __m512i three = _mm512_set1_epi32(3), seven = _mm512_set1_epi32(7), zero = _mm512_setzero_si512();
	for (int64_t ib = ib0; ib < ib1; ib++) {
		const uint8_t *sb = w + (size_t)ib * 8 * sizeof(struct block_q6_K);
		uint8_t *o = b + (size_t)(ib - ib0) * 12288;
		prefetch2(sb, gs, 8 * sizeof(struct block_q6_K));
		__m512i S[4];
		for (int c = 0; c < 4; c++)
			S[c] = ld2(sb, gs, Q6X_SC + 32 * (size_t)c);
		for (int c = 0; c < QK_K / 64; c++) {
			const int j = c / 2;
			for (int half = 0; half < 2; half++) {
				const int m = 2 * (c % 2) + half;
				for (int q = 0; q < 2; q++) {
					/* group 8j + 2m + q: columns 4q..4q+3 of sub-block 4j + m */
					const int g = 8 * j + 2 * m + q;
					__m512i r = sbyte32(S[g / 4], g % 4);
					__m512i mag[3], off[3];
					__mmask64 neg[3];
					for (int i = 0; i < 3; i++) {
						/* p = ((r + 3) & 7) - 3, then r = (r - p) / 8 (exact) */
						__m512i p = i < 2 ? _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(r, three), seven), three) : r;
						r = _mm512_srai_epi32(_mm512_sub_epi32(r, p), 3);
						neg[i] = _mm512_movepi8_mask(p); /* sign-extended: every byte of the lane */
						__m512i a = _mm512_abs_epi32(p);
						mag[i] = _mm512_or_si512(a, _mm512_slli_epi32(a, 16));
						__m512i a32 = _mm512_slli_epi32(a, 5);
						a32 = _mm512_or_si512(a32, _mm512_slli_epi32(a32, 8));
						off[i] = _mm512_or_si512(a32, _mm512_slli_epi32(a32, 16));
					}
					for (int k = 4 * q; k < 4 * q + 4; k++) {
						__m512i W = k6_codes16(sb, gs, j, m, k);
						const size_t row = 64 * (8 * (size_t)half + (size_t)k);
						for (int i = 0; i < 3; i++) {
							__m512i u = _mm512_sub_epi8(_mm512_mullo_epi16(W, mag[i]), off[i]);
							_mm512_store_si512(o + 3072 * (size_t)c + 1024 * (size_t)i + row,
									   _mm512_mask_sub_epi8(u, neg[i], zero, u));
						}
					}
				}
			}
		}
	}
}

/* GCC's _tile_loadd (amxtileintrin.h) is an asm statement that does not
 * tell the compiler it reads memory, so stores to the B tile buffer could
 * be moved past it (wrong sums seen); this one says so. */
#define AMX_LOADD(dst, base, stride)                                                                \
	__asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #dst "|tileloadd\t%%tmm" #dst ", [%0+%1*1]}"   \
			 :: "r"((const void *)(base)), "r"((long)(stride)) : "memory")

/* Block ib's integer sums into C tile P (A tile PA, B tile PB) and out
 * to c[P] (token t's 16 sums at c[P][t]). Tile numbers are literal
 * immediates (the intrinsics paste them into the instruction), hence a
 * macro. q4_1's codes are unsigned, the others' signed. */
#define AMX_BLOCK(P, PA, PB, ib)                                                                  \
	do {                                                                                      \
		AMX_LOADD(PA, (const uint8_t *)act + (size_t)(ib) * la.ys + la.yq, act_stride); \
		AMX_LOADD(PB, bq + (size_t)((ib) - ib0) * 512, 64);                             \
		_tile_zero(P);                                                                    \
		if (KIND != LEG_Q4_1)                                                             \
			_tile_dpbssd(P, PA, PB);                                                  \
		else                                                                              \
			_tile_dpbsud(P, PA, PB);                                                  \
		_tile_stored(P, c[P][0], 64);                                                     \
	} while (0)

/* Block ib's float step for M tokens from their sums c[t]: body_leg16's. */
ALWAYS_INLINE void amx_float_step(__m512 *acc, const int32_t (*c)[16], const uint8_t *w, size_t gs,
				  size_t ws, const void *act, size_t act_stride, int64_t ib,
				  const struct leg_act *la, const int M, const int KIND)
{
	const uint8_t *sb = w + (size_t)ib * 8 * ws;
	__m512 dx = ld2_half(sb, gs, 0), mx = KIND == LEG_Q4_1 ? ld2_half(sb, gs, 16) : dx;
#pragma GCC unroll 16
	for (int t = 0; t < M; t++)
		acc[t] = leg_float16(acc[t], _mm512_load_si512(c[t]), dx, mx, ACT(t, uint8_t), la, ib, KIND);
}

/* Blocks ib0..ib1 - 1 of the two groups at w (the second gs bytes on)
 * against M activation rows: out[t * os + r], r < 16, t < M, starting from
 * zero (ib0 == 0) or from out (a later slice: a float stored and loaded
 * again is the same float, so the sums' order is unchanged). bq: the
 * slice's B tiles (amx_btiles). The tiles must be configured for M. */
ALWAYS_INLINE void body_amx16(int64_t n, const uint8_t *w, size_t gs, const void *act, size_t act_stride,
			      float *out, size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq,
			      const int M, const int KIND)
{
	const struct leg_act la = leg_act_of(n, KIND);
	const size_t ws = leg_wsize(KIND);
	_Alignas(64) int32_t c[2][16][16]; /* by C tile */
	__m512 acc[16];
	for (int t = 0; t < M; t++)
		acc[t] = ib0 ? _mm512_loadu_ps(out + (size_t)t * os) : _mm512_setzero_ps();
	AMX_BLOCK(0, 2, 4, ib0);
#define AMX_FSTEP(S, ib) amx_float_step(acc, (const int32_t(*)[16])c[S], w, gs, ws, act, act_stride, ib, &la, M, KIND)
	for (int64_t ib = ib0; ib < ib1; ib += 2) {
		if (ib + 1 < ib1)
			AMX_BLOCK(1, 3, 5, ib + 1);
		AMX_FSTEP(0, ib);
		if (ib + 1 < ib1) {
			if (ib + 2 < ib1)
				AMX_BLOCK(0, 2, 4, ib + 2);
			AMX_FSTEP(1, ib + 1);
		}
	}
#undef AMX_FSTEP
	for (int t = 0; t < M; t++)
		_mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

/* q4_K superblock ib's two sums into C tiles PL (lo) and PH (hi), out to
 * c[S][0] and c[S][1]; A alternates tiles 4 and 7 by K chunk. */
#define AMXK_BLOCK(PL, PH, S, ib)                                                                 \
	do {                                                                                      \
		const uint8_t *b_ = bq + (size_t)((ib) - ib0) * 8192;                             \
		const uint8_t *a_ = (const uint8_t *)act + (size_t)(ib) * sizeof(struct block_q8_K) + \
				    offsetof(struct block_q8_K, qs);                              \
		_tile_zero(PL);                                                                   \
		_tile_zero(PH);                                                                   \
		for (int j_ = 0; j_ < QK_K / 64; j_ += 2) {                                       \
			AMX_LOADD(4, a_ + 64 * j_, act_stride);                                   \
			AMX_LOADD(5, b_ + 2048 * j_, 64);                                         \
			AMX_LOADD(6, b_ + 2048 * j_ + 1024, 64);                                  \
			_tile_dpbssd(PL, 4, 5);                                                   \
			_tile_dpbssd(PH, 4, 6);                                                   \
			AMX_LOADD(7, a_ + 64 * (j_ + 1), act_stride);                             \
			AMX_LOADD(5, b_ + 2048 * (j_ + 1), 64);                                   \
			AMX_LOADD(6, b_ + 2048 * (j_ + 1) + 1024, 64);                            \
			_tile_dpbssd(PL, 7, 5);                                                   \
			_tile_dpbssd(PH, 7, 6);                                                   \
		}                                                                                 \
		_tile_stored(PL, c[S][0][0], 64);                                                 \
		_tile_stored(PH, c[S][1][0], 64);                                                 \
	} while (0)

/* Superblock ib's float step for M tokens from c[S] (lo, hi): isum = lo +
 * 8 hi, then body_q4_K16's (k4_float16). */
ALWAYS_INLINE void amxk_float_step(__m512 *acc, int32_t (*c)[16][16], const uint8_t *w, size_t gs,
				   const void *act, size_t act_stride, int64_t ib, const int M)
{
	const uint8_t *sb = w + (size_t)ib * 8 * sizeof(struct block_q4_K);
	__m512i SC[2], MN[2], MP[8];
	k4_scales16(sb, gs, SC, MN);
	k4_mins16(MN, MP);
	__m512 dx = ld2_half(sb, gs, 0), dmx = ld2_half(sb, gs, 16);
#pragma GCC unroll 16
	for (int t = 0; t < M; t++) {
		__m512i isum = _mm512_add_epi32(_mm512_load_si512(c[0][t]), _mm512_slli_epi32(_mm512_load_si512(c[1][t]), 3));
		acc[t] = k4_float16(acc[t], isum, ACT(t, struct block_q8_K) + ib, MP, dx, dmx);
	}
}

/* body_amx16 for q4_K superblocks ib0..ib1 - 1 (bq: amx_btiles_k4's). */
ALWAYS_INLINE void body_amx_k4(const uint8_t *w, size_t gs, const void *act, size_t act_stride, float *out,
			       size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq, const int M)
{
	_Alignas(64) int32_t c[2][2][16][16]; /* [stage][lo, hi][token][row] */
	__m512 acc[16];
	for (int t = 0; t < M; t++)
		acc[t] = ib0 ? _mm512_loadu_ps(out + (size_t)t * os) : _mm512_setzero_ps();
	AMXK_BLOCK(0, 1, 0, ib0);
	for (int64_t ib = ib0; ib < ib1; ib += 2) {
		if (ib + 1 < ib1)
			AMXK_BLOCK(2, 3, 1, ib + 1);
		amxk_float_step(acc, c[0], w, gs, act, act_stride, ib, M);
		if (ib + 1 < ib1) {
			if (ib + 2 < ib1)
				AMXK_BLOCK(0, 1, 0, ib + 2);
			amxk_float_step(acc, c[1], w, gs, act, act_stride, ib + 1, M);
		}
	}
	for (int t = 0; t < M; t++)
		_mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

/* q6_K superblock ib's three digit sums into C tiles 0..2 and out to
 * c[0..2]; A alternates tiles 4 and 7 by K chunk, the digits' B are tiles
 * 5, 6 and 3. All signed. No second set of C tiles is left for a
 * pipeline: a superblock's float step follows its tile work. */
#define AMX6_BLOCK(ib)                                                                            \
	do {                                                                                      \
		const uint8_t *b_ = bq + (size_t)((ib) - ib0) * 12288;                            \
		const uint8_t *a_ = (const uint8_t *)act + (size_t)(ib) * sizeof(struct block_q8_K) + \
				    offsetof(struct block_q8_K, qs);                              \
		_tile_zero(0);                                                                    \
		_tile_zero(1);                                                                    \
		_tile_zero(2);                                                                    \
		for (int c_ = 0; c_ < QK_K / 64; c_ += 2) {                                       \
			AMX_LOADD(4, a_ + 64 * c_, act_stride);                                   \
			AMX_LOADD(5, b_ + 3072 * c_, 64);                                         \
			AMX_LOADD(6, b_ + 3072 * c_ + 1024, 64);                                  \
			AMX_LOADD(3, b_ + 3072 * c_ + 2048, 64);                                  \
			_tile_dpbssd(0, 4, 5);                                                    \
			_tile_dpbssd(1, 4, 6);                                                    \
			_tile_dpbssd(2, 4, 3);                                                    \
			AMX_LOADD(7, a_ + 64 * (c_ + 1), act_stride);                             \
			AMX_LOADD(5, b_ + 3072 * (c_ + 1), 64);                                   \
			AMX_LOADD(6, b_ + 3072 * (c_ + 1) + 1024, 64);                            \
			AMX_LOADD(3, b_ + 3072 * (c_ + 1) + 2048, 64);                            \
			_tile_dpbssd(0, 7, 5);                                                    \
			_tile_dpbssd(1, 7, 6);                                                    \
			_tile_dpbssd(2, 7, 3);                                                    \
		}                                                                                 \
		_tile_stored(0, c[0][0], 64);                                                     \
		_tile_stored(1, c[1][0], 64);                                                     \
		_tile_stored(2, c[2][0], 64);                                                     \
	} while (0)

/* body_amx16 for q6_K superblocks ib0..ib1 - 1 (bq: amx_btiles_k6's):
 * si = c0 + 8 c1 + 64 c2, k6_float16's si (the offset's 32 x scale . bsums
 * is in it already), then k6_float16_si. */
ALWAYS_INLINE void body_amx_k6(const uint8_t *w, size_t gs, const void *act, size_t act_stride, float *out,
			       size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq, const int M)
{
	_Alignas(64) int32_t c[3][16][16]; /* [digit][token][row] */
	__m512 acc[16];
	for (int t = 0; t < M; t++)
		acc[t] = ib0 ? _mm512_loadu_ps(out + (size_t)t * os) : _mm512_setzero_ps();
	for (int64_t ib = ib0; ib < ib1; ib++) {
		AMX6_BLOCK(ib);
		__m512 dx = ld2_half(w + (size_t)ib * 8 * sizeof(struct block_q6_K), gs, 0);
#pragma GCC unroll 16
		for (int t = 0; t < M; t++) {
			__m512i si = _mm512_add_epi32(
				_mm512_load_si512(c[0][t]),
				_mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[1][t]), 3),
						 _mm512_slli_epi32(_mm512_load_si512(c[2][t]), 6)));
			acc[t] = k6_float16_si(acc[t], si, ACT(t, struct block_q8_K) + ib, dx);
		}
	}
	for (int t = 0; t < M; t++)
		_mm512_storeu_ps(out + (size_t)t * os, acc[t]);
}

/* Token rows t0..t1 - 1 (a multiple of M of them) against weight rows
 * 0..rows16 - 1 (the rows that fill pairs of groups, a multiple of 16),
 * through body (body_amx16 for M and KIND), slice by slice; configures the
 * tiles for M. */
ALWAYS_INLINE void amx_pass(int64_t n, const uint8_t *w, size_t ws, int rows16, const uint8_t *act, size_t as,
			    int t0, int t1, float *out, size_t os, const int M, const int KIND,
			    void (*body)(int64_t, const uint8_t *, size_t, const void *, size_t, float *,
					 size_t, int64_t, int64_t, const uint8_t *))
{
	_Alignas(64) uint8_t bq[AMX_SLICE_BYTES];
	const bool k = KIND == AMX_Q4_K || KIND == AMX_Q6_K;
	const int64_t nb = k ? n / QK_K : n / 32, per = (int64_t)(amx_slice_bytes(KIND) / amx_bbytes(KIND));
	amx_config(M, KIND);
	for (int r = 0; r < rows16; r += 16) {
		const uint8_t *g = w + (size_t)r * ws;
		for (int64_t ib0 = 0; ib0 < nb; ib0 += per) {
			int64_t ib1 = ib0 + per < nb ? ib0 + per : nb;
			if (KIND == AMX_Q4_K)
				amx_btiles_k4(g, 8 * ws, ib0, ib1, bq);
			else if (KIND == AMX_Q6_K)
				amx_btiles_k6(g, 8 * ws, ib0, ib1, bq);
			else
				amx_btiles(g, 8 * ws, ib0, ib1, bq, KIND);
			for (int t = t0; t < t1; t += M)
				body(n, g, 8 * ws, act + (size_t)t * as, as, out + (size_t)t * os + r, os, ib0, ib1, bq);
		}
	}
}

/* The body for KIND. */
ALWAYS_INLINE void amx_body(int64_t n, const uint8_t *w, size_t gs, const void *act, size_t as, float *out,
			    size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq, const int M, const int KIND)
{
	if (KIND == AMX_Q4_K)
		body_amx_k4(w, gs, act, as, out, os, ib0, ib1, bq, M);
	else if (KIND == AMX_Q6_K)
		body_amx_k6(w, gs, act, as, out, os, ib0, ib1, bq, M);
	else
		body_amx16(n, w, gs, act, as, out, os, ib0, ib1, bq, M, KIND);
}

/* A kern_gemm_fn over x8 groups: pairs of groups against blocks of 16,
 * then 8, activation rows on the tiles; what is left (fewer than 8 rows,
 * or a last single group) through the AVX-512 set's x8 kernel (dot_avx512.c,
 * the same results). */
#define GEMM_AMX(name, KIND, TYPE)                                                                 \
	static void name##_16(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as, float *o, \
			      size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq)         \
	{                                                                                      \
		amx_body(n, w, gs, a, as, o, os, ib0, ib1, bq, 16, KIND);                      \
	}                                                                                      \
	static void name##_8(int64_t n, const uint8_t *w, size_t gs, const void *a, size_t as, float *o, \
			     size_t os, int64_t ib0, int64_t ib1, const uint8_t *bq)          \
	{                                                                                      \
		amx_body(n, w, gs, a, as, o, os, ib0, ib1, bq, 8, KIND);                       \
	}                                                                                      \
	static void name(int64_t n, const void *w, size_t ws, int nr, const void *act, size_t as,    \
			 int nt, float *out, size_t os)                                           \
	{                                                                                      \
		const int rows16 = nr / 16 * 16, n16 = nt / 16 * 16, n8 = nt % 16 >= 8 ? 8 : 0;  \
		const int done = rows16 ? n16 + n8 : 0;                                         \
		if (rows16 && n16)                                                              \
			amx_pass(n, w, ws, rows16, act, as, 0, n16, out, os, 16, KIND, name##_16);  \
		if (rows16 && n8)                                                               \
			amx_pass(n, w, ws, rows16, act, as, n16, n16 + 8, out, os, 8, KIND, name##_8); \
		if (done)                                                                      \
			_tile_release();                                                       \
		if (rows16 && done < nt)                                                        \
			kern_gemm_x8_get_avx512(TYPE)(n, w, ws, rows16, (const uint8_t *)act + (size_t)done * as, \
						      as, nt - done, out + (size_t)done * os, os); \
		if (rows16 < nr)                                                                \
			kern_gemm_x8_get_avx512(TYPE)(n, (const uint8_t *)w + (size_t)rows16 * ws, ws, \
						      nr - rows16, act, as, nt, out + rows16, os); \
	}

GEMM_AMX(amx_q8_0, LEG_Q8_0, FX_TYPE_Q8_0)
GEMM_AMX(amx_q4_0, LEG_Q4_0, FX_TYPE_Q4_0)
GEMM_AMX(amx_q4_1, LEG_Q4_1, FX_TYPE_Q4_1)
GEMM_AMX(amx_q5_0, LEG_Q5_0, FX_TYPE_Q5_0)
GEMM_AMX(amx_q4_K, AMX_Q4_K, FX_TYPE_Q4_K)
GEMM_AMX(amx_q6_K, AMX_Q6_K, FX_TYPE_Q6_K)

/* The tile unit's peak (fx_kernels_peak): four independent chains of
 * tdpbssd on full 16 x 64-byte tiles (16 x 16 x 64 products each), the
 * shape with the most products an instruction. */
uint64_t kern_amx_peak(uint64_t iters, uint32_t seed)
{
	_Alignas(64) int8_t buf[16][64];
	_Alignas(64) int32_t out[16][16];
	memset(buf, (int)(seed & 0x3F), sizeof(buf));
	_Alignas(64) struct amx_cfg c;
	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (int i = 0; i < 6; i++) {
		c.rows[i] = 16;
		c.colsb[i] = 64;
	}
	amx_loadcfg(&c);
	AMX_LOADD(4, buf, 64);
	AMX_LOADD(5, buf, 64);
	/* the C tiles start at zero (ldtilecfg clears every tile) */
	for (uint64_t i = 0; i < iters; i++) {
		_tile_dpbssd(0, 4, 5);
		_tile_dpbssd(1, 4, 5);
		_tile_dpbssd(2, 4, 5);
		_tile_dpbssd(3, 4, 5);
	}
	_tile_stored(0, out, 64);
	_tile_release();
	return iters * 4 * 16 * 16 * 64 + (out[0][0] == 0x7fffffff);
}

kern_gemm_fn kern_gemm_x8_get_amx(int t)
{
	switch (t) {
	case FX_TYPE_Q4_0: return amx_q4_0;
	case FX_TYPE_Q4_1: return amx_q4_1;
	case FX_TYPE_Q5_0: return amx_q5_0;
	case FX_TYPE_Q8_0: return amx_q8_0;
	case FX_TYPE_Q4_K: return amx_q4_K;
	case FX_TYPE_Q6_K: return amx_q6_K;
	default: return NULL;
	}
}

#endif /* __x86_64__ */
