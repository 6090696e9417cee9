/* What the x86 kernel files share (dot_avx2.c, dot_avx512.c, attn_avx2.c,
 * attn_avx512.c): the block layouts their rows-in-lanes kernels read, the
 * activation rows' address, the weight prefetch, and the attention value
 * kernels' scalar tail and head dispatch. Include only from files built
 * with x86 ISA flags (F16C at least). */
#ifndef FX_KERNELS_SIMD_X86_H
#define FX_KERNELS_SIMD_X86_H

#include <immintrin.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kern.h"
#include "quant/blocks.h"

/* unused: a build may leave some helpers without a caller (clang warns
 * about those even when inline). */
#define ALWAYS_INLINE static inline __attribute__((always_inline, unused))

/* Activation row t of a kernel call (act, act_stride in scope) as T *. */
#define ACT(t, T) ((const T *)((const uint8_t *)act + (size_t)(t) * act_stride))

/* The 32-element block types the rows-in-lanes kernels share. */
enum { LEG_Q8_0, LEG_Q4_0, LEG_Q5_0, LEG_Q4_1 };

/* The arithmetic right shift that turns a q8_0 activation row's -128 *
 * sum(y) (kern.h's AVX2 layout) into -off * sum(y), where a block sum
 * against codes stored off above their value starts: q4_0 (off 8) 4,
 * q5_0 (16) 3, q8_0 (128, its VNNI codes) 0; exact, as -128 * sum(y) is a
 * multiple of 16. */
ALWAYS_INLINE int leg_start_shift(const int KIND)
{
	return KIND == LEG_Q4_0 ? 4 : KIND == LEG_Q5_0 ? 3 : 0;
}

ALWAYS_INLINE size_t leg_wsize(const int KIND)
{
	return KIND == LEG_Q8_0 ? sizeof(struct block_q8_0) : KIND == LEG_Q4_0 ? sizeof(struct block_q4_0)
	       : KIND == LEG_Q5_0 ? sizeof(struct block_q5_0) : sizeof(struct block_q4_1);
}

/* One x8 superblock (kernels/repack.h): d[8] (q4_1: m[8]; q5_0: qh[8])
 * then the quants' 4-byte columns, already the registers wanted. */
ALWAYS_INLINE size_t leg_x8_qs(const int KIND)
{
	return KIND == LEG_Q4_1 ? 32 : KIND == LEG_Q5_0 ? 48 : 16;
}

/* Where a 32-element block type's activation row of n elements (kern.h's
 * AVX2 layout of q8_0 / q8_1 rows) keeps block ib's quants (at ib * ys +
 * yq), its d array (d_off) and its s or -128 * sum array (s_off). */
struct leg_act {
	size_t ys, yq, d_off, s_off;
};
ALWAYS_INLINE struct leg_act leg_act_of(int64_t n, const int KIND)
{
	const bool q41 = KIND == LEG_Q4_1;
	const size_t ys = q41 ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0), nb = (size_t)(n / 32);
	return (struct leg_act){ .ys = ys,
				 .yq = q41 ? offsetof(struct block_q8_1, qs) : offsetof(struct block_q8_0, qs),
				 .d_off = kern_act_d_off(nb * ys),
				 .s_off = kern_act_s_off(nb * ys, (int64_t)nb) };
}

/* A q4_K x8 superblock: d[8], dmin[8], the scales' 3 columns, the quants'
 * 32. A q6_K one: d[8], the 16 int8 scales in 4 columns, ql in 32
 * columns, qh in 16. */
enum { Q4KX_SC = 32, Q4KX_QS = 128 };
enum { Q6X_SC = 16, Q6X_QL = 16 + 4 * 32, Q6X_QH = 16 + 36 * 32 };

/* Weights PREFETCH_AHEAD bytes ahead of the block being read are asked
 * for now, into L2 (T1): decode streams each row once from DRAM, and T1
 * leaves L1's few miss buffers to the loads (0.978x, 0.994x, 0.985x step
 * time in three paired runs against T0). 3 KiB since the K-quant kernels
 * spread their prefetches (prefetch_part), bench/ab.sh against 2 KiB on the
 * Xeon VM: TinyLlama-shape Q4_K_M one sequence 0.971x, eight 0.978x; its
 * Q8_0 0.985x (2 KiB had measured best while the K-quant kernels asked for
 * a whole superblock in one burst; 4 KiB slower then). A prefetch past the
 * matrix is harmless: it never faults. */
enum { PREFETCH_AHEAD = 3072, PREFETCH_NEAR = 1024 };

/* The line at q into L1 (T0) or L2 (T1). */
ALWAYS_INLINE void prefetch_line(const char *q, const bool L1)
{
	if (L1)
		_mm_prefetch(q, _MM_HINT_T0);
	else
		_mm_prefetch(q, _MM_HINT_T1);
}

/* Part i of parts of the n bytes' lines, ahead bytes past p, into L2 (T1)
 * or L1: a block's lines asked for across its loop steps, not in one
 * burst. */
ALWAYS_INLINE void prefetch_part_at(const uint8_t *p, size_t ahead, size_t n, int i, int parts, const bool L1)
{
	/* A part has lines / parts lines or one more: the fixed ones
	 * unrolled, the one more behind a branch, so that a rolled loop over
	 * the parts spends ~10 instructions here, not ~30 (with its scale
	 * selects hoisted and its broadcasts embedded, the q4_K x8 one-row
	 * kernel in L1: 40 -> 43-44 GB/s). Five fixed lines a step instead
	 * (20 for an 18-line block: 48 GB/s in L1) made the TinyLlama-shape
	 * Q4_K_M step 1.016x slower from DRAM: ask for each line once. */
	const size_t lines = (n + 63) / 64, per = lines / (size_t)parts;
	const size_t l0 = lines * (size_t)i / (size_t)parts, l1 = lines * (size_t)(i + 1) / (size_t)parts;
	const char *q = (const char *)(p + ahead + 64 * l0);
	for (size_t l = 0; l < per; l++)
		prefetch_line(q + 64 * l, L1);
	if (l1 - l0 > per)
		prefetch_line(q + 64 * per, L1);
}

ALWAYS_INLINE void prefetch_part(const uint8_t *p, size_t n, int i, int parts)
{
	prefetch_part_at(p, PREFETCH_AHEAD, n, i, parts, false);
}

/* The K-quant x8 kernels' parts at one activation row: into L2
 * PREFETCH_AHEAD ahead as prefetch_part, and again into L1 PREFETCH_NEAR
 * ahead, from L2 by then. Their loads alone stream at the plain read's
 * rate but their loops (~0.3-0.4 instructions a weight byte) overlap it
 * only in part (docs/BENCHMARKS.md); the likely reason, not measurable
 * without the VM's counters: the reorder window then reaches only ~1.5
 * KiB past a stalled load. bench/ab.sh TinyLlama-shape Q4_K_M one
 * sequence: 0.981x (512 B), 0.975x (768), 0.971x (1024), 0.973x (1280),
 * 0.980x (1792); at eight sequences 1.018x, hence NT > 1 keeps T1 only;
 * the legacy x8 kernels with it 1.007x (Q8_0). */
ALWAYS_INLINE void prefetch_part_k(const uint8_t *p, size_t n, int i, int parts, const int NT)
{
	prefetch_part(p, n, i, parts);
	if (NT == 1)
		prefetch_part_at(p, PREFETCH_NEAR, n, i, parts, true);
}

/* All of them at once. */
ALWAYS_INLINE void prefetch_span(const uint8_t *p, size_t n)
{
	prefetch_part(p, n, 0, 1);
}

#if defined(__AVX512F__)
/* Two x8 groups in one 512-bit register (dot_avx512.c, dot_amx.c): the
 * group at a in lanes 0..7, the one gs bytes after it in lanes 8..15. */
/* The two groups' eight fp16 values at off (d, dmin, m) as 16 f32. */
ALWAYS_INLINE __m512 ld2_half(const uint8_t *a, size_t gs, size_t off)
{
	__m128i lo = _mm_loadu_si128((const __m128i *)(a + off));
	__m128i hi = _mm_loadu_si128((const __m128i *)(a + gs + off));
	return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* Bytes off..off+31 of the group at a (lanes 0..7) and of the group gs
 * bytes after it (lanes 8..15). */
ALWAYS_INLINE __m512i ld2(const uint8_t *a, size_t gs, size_t off)
{
	__m256i lo = _mm256_loadu_si256((const __m256i *)(a + off));
	__m256i hi = _mm256_loadu_si256((const __m256i *)(a + gs + off));
	return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* Byte b of every 32-bit lane, zero- or sign-extended to int32. */
ALWAYS_INLINE __m512i ubyte32(__m512i v, int b)
{
	return _mm512_and_si512(_mm512_srli_epi32(v, 8 * b), _mm512_set1_epi32(0xFF));
}
/* One 32-element block's float step for activation row y (layout la) and
 * 16 weight rows from their exact block sums si: the portable vec_dot's
 * step, operation for operation (quant/q_legacy.c): q4_0 fma(si * dx, dy,
 * acc), q4_1 fma(dx * dy, si, fma(mx, sy, acc)), q5_0 and q8_0 fma(dx *
 * dy, si, acc). */
ALWAYS_INLINE __m512 leg_float16(__m512 acc, __m512i si, __m512 dx, __m512 mx, const uint8_t *y,
				 const struct leg_act *la, int64_t ib, const int KIND)
{
	__m512 dy = _mm512_set1_ps(((const float *)(y + la->d_off))[ib]);
	__m512 f = _mm512_cvtepi32_ps(si);
	if (KIND == LEG_Q4_0)
		return _mm512_fmadd_ps(_mm512_mul_ps(f, dx), dy, acc);
	if (KIND == LEG_Q4_1)
		acc = _mm512_fmadd_ps(mx, _mm512_set1_ps(((const float *)(y + la->s_off))[ib]), acc);
	return _mm512_fmadd_ps(_mm512_mul_ps(dx, dy), f, acc);
}

/* The same byte shuffle in each 128-bit lane (four rows). */
ALWAYS_INLINE __m512i shuf4(__m512i v, __m128i sel)
{
	return _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(sel));
}

/* Byte b of every 32-bit lane, sign-extended to int32. */
ALWAYS_INLINE __m512i sbyte32(__m512i v, int b)
{
	return _mm512_srai_epi32(_mm512_slli_epi32(v, 24 - 8 * b), 24);
}

/* Bytes a and b of every 32-bit lane as its two int16 (sign-extended). */
ALWAYS_INLINE __m512i sbytes_i16(__m512i v, int a, int b)
{
	const char z = (char)0x80, A = (char)a, B = (char)b;
	const __m128i sel = _mm_setr_epi8(z, A, z, B, z, 4 + A, z, 4 + B, z, 8 + A, z, 8 + B, z, 12 + A, z, 12 + B);
	return _mm512_srai_epi16(shuf4(v, sel), 8);
}

/* The 6-bit codes (0..63) of column k of sub-block 4j + m (elements 128j
 * + 32m + 4k..4k+3) of two q6_K x8 superblocks (sb, and gs bytes on), lane
 * r = row r: ql's nibble and qh's two bits, as dequantize_row_q6_K. */
ALWAYS_INLINE __m512i k6_codes16(const uint8_t *sb, size_t gs, int j, int m, int k)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
	__m512i ql = ld2(sb, gs, Q6X_QL + 32 * (16 * (size_t)j + 8 * (size_t)(m & 1) + (size_t)k));
	__m512i qh = ld2(sb, gs, Q6X_QH + 32 * (8 * (size_t)j + (size_t)k));
	__m512i lo = _mm512_and_si512(m < 2 ? ql : _mm512_srli_epi16(ql, 4), m4);
	__m512i hi = m == 3 ? _mm512_srli_epi16(qh, 2) : _mm512_slli_epi16(qh, 4 - 2 * m);
	return _mm512_or_si512(lo, _mm512_and_si512(hi, m30));
}

/* q6_K's 16 scales of 16 rows (S[c]: ld2 of scale column c) as int16
 * pairs: SP[q] lane r = row r's scales 2q, 2q + 1. */
ALWAYS_INLINE void k6_scale_pairs16(const __m512i *S, __m512i *SP)
{
	for (int q = 0; q < 8; q++)
		SP[q] = sbytes_i16(S[q / 2], 2 * (q % 2), 2 * (q % 2) + 1);
}

/* acc + (d * dy) * si for one q6_K superblock's exact offset-corrected
 * sums si of 16 rows against activation row y. */
ALWAYS_INLINE __m512 k6_float16_si(__m512 acc, __m512i si, const struct block_q8_K *y, __m512 dx)
{
	return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_mul_ps(dx, _mm512_set1_ps(y->d)), _mm512_cvtepi32_ps(si)));
}

/* One q6_K superblock's float step for one activation row y and 16 rows
 * from their exact sums of scale x code x y (isum, codes 0..63): the
 * codes' offset 32 comes off as 32 * sum over groups of scale * bsum,
 * then acc + (d * dy) * sumi (llama.cpp's ggml_vec_dot_q6_K order). */
ALWAYS_INLINE __m512 k6_float16(__m512 acc, __m512i isum, const struct block_q8_K *y, const __m512i *SP, __m512 dx)
{
	__m512i corr = _mm512_setzero_si512();
	for (int q = 0; q < 8; q++)
		corr = _mm512_dpwssd_epi32(corr, SP[q], _mm512_broadcastd_epi32(_mm_loadu_si32(y->bsums + 2 * q)));
	return k6_float16_si(acc, _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 5)), y, dx);
}

/* q5_0's fifth bits for column k of two x8 groups: 0x10 in byte i of lane
 * r when bit 4k + i of row r's qh (QH lane r) is set. */
ALWAYS_INLINE __m512i q5_high16(__m512i QH, int k)
{
	const char b = (char)(k / 2);
	const __m128i sel = _mm_setr_epi8(b, b, b, b, 4 + b, 4 + b, 4 + b, 4 + b, 8 + b, 8 + b, 8 + b, 8 + b,
					  12 + b, 12 + b, 12 + b, 12 + b);
	const int sh = 4 * (k % 2);
	const __m512i bit = _mm512_set1_epi32((int)((1u << sh) | (2u << sh) << 8 | (4u << sh) << 16 |
						    (8u << sh) << 24));
	__m512i v = shuf4(QH, sel);
	return _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(v, bit), _mm512_set1_epi8(0x10));
}

/* The codes of one block of two x8 groups (superblock sb, the second gs
 * bytes on) as W[k] = column k, lanes = 16 rows: q8_0's stored bytes;
 * the 4-bit kinds' nibbles (0..15: columns 0..3 low, 4..7 high), q5_0's
 * with their fifth bits (0..31), unsigned, offsets not taken off. */
ALWAYS_INLINE void leg_codes16(const uint8_t *sb, size_t gs, __m512i *W, const int KIND)
{
	const size_t qs = leg_x8_qs(KIND);
	if (KIND == LEG_Q8_0) {
		for (int k = 0; k < 8; k++)
			W[k] = ld2(sb, gs, qs + 32 * (size_t)k);
		return;
	}
	const __m512i m4 = _mm512_set1_epi8(0x0F);
	for (int c = 0; c < 4; c++) {
		__m512i T = ld2(sb, gs, qs + 32 * (size_t)c);
		W[c] = _mm512_and_si512(T, m4);
		W[4 + c] = _mm512_and_si512(_mm512_srli_epi16(T, 4), m4);
	}
	if (KIND == LEG_Q5_0) {
		__m512i QH = ld2(sb, gs, 16);
		for (int k = 0; k < 8; k++)
			W[k] = _mm512_or_si512(W[k], q5_high16(QH, k));
	}
}

/* get_scale_min_k4 for the 16 rows of two q4_K x8 superblocks (sb, and
 * gs bytes on): SC[0] / SC[1] lane r = row r's scales 0..3 / 4..7 as
 * bytes, MN[0] / MN[1] its mins. */
ALWAYS_INLINE void k4_scales16(const uint8_t *sb, size_t gs, __m512i *SC, __m512i *MN)
{
	const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(63), m30 = _mm512_set1_epi8(0x30);
	__m512i T0 = ld2(sb, gs, Q4KX_SC), T1 = ld2(sb, gs, Q4KX_SC + 32), T2 = ld2(sb, gs, Q4KX_SC + 64);
	SC[0] = _mm512_and_si512(T0, m6);
	MN[0] = _mm512_and_si512(T1, m6);
	SC[1] = _mm512_or_si512(_mm512_and_si512(T2, m4), _mm512_and_si512(_mm512_srli_epi16(T0, 2), m30));
	MN[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(T2, 4), m4),
				_mm512_and_si512(_mm512_srli_epi16(T1, 2), m30));
}

/* MP[s] lane r: row r's min of sub-block s twice as int16, for vpdpwssd
 * against the activation's 16-element sums 2s, 2s + 1. */
ALWAYS_INLINE void k4_mins16(const __m512i *MN, __m512i *MP)
{
	for (int s = 0; s < 8; s++) {
		__m512i m = ubyte32(MN[s / 4], s % 4);
		MP[s] = _mm512_or_si512(m, _mm512_slli_epi32(m, 16));
	}
}

/* One q4_K superblock's float step for one activation row y and 16 weight
 * rows (lanes) from their exact scaled sums isum: acc + (dx * dy) * isum -
 * (dmx * dy) * sum_s min_s * bsum_s, llama.cpp's ggml_vec_dot_q4_K order. */
ALWAYS_INLINE __m512 k4_float16(__m512 acc, __m512i isum, const struct block_q8_K *y, const __m512i *MP,
				__m512 dx, __m512 dmx)
{
	__m512i ms = _mm512_setzero_si512();
	for (int s = 0; s < 8; s++)
		ms = _mm512_dpwssd_epi32(ms, MP[s], _mm512_broadcastd_epi32(_mm_loadu_si32(y->bsums + 2 * s)));
	__m512 dy = _mm512_set1_ps(y->d);
	__m512 term = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(dx, dy), _mm512_cvtepi32_ps(isum)),
				    _mm512_mul_ps(_mm512_mul_ps(dmx, dy), _mm512_cvtepi32_ps(ms)));
	return _mm512_add_ps(acc, term);
}

/* Both groups' next bytes of superblocks (prefetch_span for each). */
ALWAYS_INLINE void prefetch2(const uint8_t *sb, size_t gs, size_t n)
{
	prefetch_span(sb, n);
	prefetch_span(sb + gs, n);
}

#endif

ALWAYS_INLINE __m256 ld_f32(const void *p, int64_t i)
{
	return _mm256_loadu_ps((const float *)p + i);
}

ALWAYS_INLINE __m256 ld_f16(const void *p, int64_t i)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}

/* S slices of 8 elements from i (out + i, v rows + i) for NH heads (the
 * heads' sums in registers across the keys; each row of v read and
 * converted once per slice); per element the keys are added in order
 * r = 0, 1, ... with one FMA each, as nk single-row updates would. NH * S
 * sums in flight keep both FMA pipes busy through FMA's latency. The AVX2
 * pv's body (attn_avx2.c), and the AVX-512 one's 8-element step. */
ALWAYS_INLINE void pv_slice(const int NH, const int S, int nk, const float *w, size_t ws,
			    const void *const *v, int64_t i, float *out, size_t os, const int F16)
{
	__m256 acc[8][8];
	for (int h = 0; h < NH; h++)
		for (int c = 0; c < S; c++)
			acc[h][c] = _mm256_loadu_ps(out + (size_t)h * os + i + 8 * c);
	for (int r = 0; r < nk; r++) {
		__m256 wh[8];
		for (int h = 0; h < NH; h++)
			wh[h] = _mm256_broadcast_ss(w + (size_t)h * ws + r);
		for (int c = 0; c < S; c++) {
			__m256 x = F16 ? ld_f16(v[r], i + 8 * c) : ld_f32(v[r], i + 8 * c);
			for (int h = 0; h < NH; h++)
				acc[h][c] = _mm256_fmadd_ps(wh[h], x, acc[h][c]);
		}
	}
	for (int h = 0; h < NH; h++)
		for (int c = 0; c < S; c++)
			_mm256_storeu_ps(out + (size_t)h * os + i + 8 * c, acc[h][c]);
}

/* Elements [i, n) of a kern_pv_fn's rows for NH heads, past the vector
 * steps: a multiply, then an add, per key in order. Every x86 set ends a
 * row this way, so a row's tail has the same bits in all of them. */
ALWAYS_INLINE void pv_tail(const int NH, int64_t i, int64_t n, int nk, const float *w, size_t ws,
			   const void *const *v, float *out, size_t os, const int F16)
{
	for (; i < n; i++)
		for (int r = 0; r < nk; r++)
			for (int h = 0; h < NH; h++)
				out[(size_t)h * os + i] += w[(size_t)h * ws + r] *
							   (F16 ? _cvtsh_ss(((const uint16_t *)v[r])[i])
								: ((const float *)v[r])[i]);
}

/* A kern_pv_fn `name` over any number of heads, eight at a time, from
 * heads(NH, n, nk, w, ws, v, out, os, F16) for NH = 1..8 (a constant: the
 * heads' sums stay in registers). */
#define PV_BY_HEADS(name, heads, F16)                                                           \
	void name(int64_t n, int nh, int nk, const float *w, size_t ws, const void *const *v,    \
		  float *out, size_t os, float *tmp)                                             \
	{                                                                                        \
		(void)tmp;                                                                       \
		for (int h0 = 0; h0 < nh; h0 += 8) {                                             \
			const float *wg = w + (size_t)h0 * ws;                                   \
			float *og = out + (size_t)h0 * os;                                       \
			switch (nh - h0 < 8 ? nh - h0 : 8) {                                     \
			case 1: heads(1, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 2: heads(2, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 3: heads(3, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 4: heads(4, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 5: heads(5, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 6: heads(6, n, nk, wg, ws, v, og, os, F16); break;                  \
			case 7: heads(7, n, nk, wg, ws, v, og, os, F16); break;                  \
			default: heads(8, n, nk, wg, ws, v, og, os, F16); break;                 \
			}                                                                        \
		}                                                                                \
	}

#endif
