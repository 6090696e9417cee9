/* What the x86 kernel files share (dot_avx2.c, dot_avx512.c): the block
 * layouts their rows-in-lanes kernels read, the activation rows' address,
 * and the weight prefetch. Include only from files built with x86 ISA
 * flags. */
#ifndef FX_KERNELS_SIMD_X86_H
#define FX_KERNELS_SIMD_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/blocks.h"

/* unused: a build may leave some helpers without a caller (clang warns
 * about those even when inline). */
#define ALWAYS_INLINE static inline __attribute__((always_inline, unused))

/* Activation row t of a kernel call (act, act_stride in scope) as T *. */
#define ACT(t, T) ((const T *)((const uint8_t *)act + (size_t)(t) * act_stride))

/* The 32-element block types the rows-in-lanes kernels share. */
enum { LEG_Q8_0, LEG_Q4_0, LEG_Q5_0, LEG_Q4_1 };

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
enum { PREFETCH_AHEAD = 3072 };

/* Part i of parts of the n bytes' lines, PREFETCH_AHEAD past p: a block's
 * lines asked for across its loop steps, not in one burst. */
ALWAYS_INLINE void prefetch_part(const uint8_t *p, size_t n, int i, int parts)
{
	size_t lines = (n + 63) / 64, l1 = lines * (size_t)(i + 1) / (size_t)parts;
	for (size_t l = lines * (size_t)i / (size_t)parts; l < l1; l++)
		_mm_prefetch((const char *)(p + PREFETCH_AHEAD + 64 * l), _MM_HINT_T1);
}

/* All of them at once. */
ALWAYS_INLINE void prefetch_span(const uint8_t *p, size_t n)
{
	prefetch_part(p, n, 0, 1);
}

#endif
