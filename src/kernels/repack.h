/* The eight-row interleaved weight layout ("x8"), after llama.cpp's
 * repacked q4_0_8x8 / q4_K_8x8 (ggml-cpu/repack.cpp), in ferrox's own
 * arrangement.
 *
 * A matrix whose rows are grouped by eight keeps each group in the same
 * bytes as its eight plain rows (so repacking happens in place and costs no
 * memory), block by block: a "superblock" per block index holds the block
 * type's fields in the order of repack.c's table (for q6_K: d, scales,
 * ql, qh; for the others the block's own order), each either as the eight
 * rows' copies of a small field side by side (d, dmin, m, q5_0's qh:
 * [8][size]) or as a byte array cut into 4-byte columns ([size/4][8][4]:
 * column c, row r = bytes 4c..4c+3 of row r's array). Loaded as 256-bit
 * vectors, the columns are the rows-in-lanes registers the kernels work
 * on, with no transposes. Only matrices whose row count is a multiple of
 * 8 are repacked (the model loader's rule); others keep plain rows.
 * Types: q4_0, q4_1, q5_0, q8_0, q4_K, q6_K.
 */
#ifndef FX_KERNELS_REPACK_H
#define FX_KERNELS_REPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dot.h"

/* Whether weight type t has an x8 layout and kernel set isa has a kernel
 * that reads it (kern_gemm_x8_get); only then is repacking worth doing. */
bool kern_x8_supported(int t, enum kern_isa isa);

/* Rewrite eight plain rows of n elements of type t (contiguous, row size
 * fx_row_size(t, n)) in place into one x8 group. tmp: 8 rows of scratch.
 * t must satisfy kern_x8_supported for some set; n a multiple of its block. */
void kern_x8_pack(int t, int64_t n, void *rows, void *tmp);

/* Row r (0..7) of an x8 group of n elements of type t, as a plain row
 * (fx_row_size(t, n) bytes) into out. */
void kern_x8_unpack_row(int t, int64_t n, const void *group, int r, void *out);

/* The rows-in-lanes kernel for x8 groups of type t (w: the first group's
 * first byte, w_stride the plain row size, nr a multiple of 8: see
 * kern_gemm_fn), or NULL when set isa has none.
 * Results equal kern_gemm_get(t, isa)'s on the same rows unpacked, bit
 * for bit, where that exists (q6_K has no plain-row counterpart: its x8
 * kernel sums in its own fixed order). */
kern_gemm_fn kern_gemm_x8_get(int t, enum kern_isa isa);

/* The x8 kernel for a call with n_tok activation rows: kern_gemm_x8_get's,
 * except that the AVX-512 set uses its 256-bit kernels (dot_avx2.c's EVEX
 * build, the same results) when n_tok <= KERN_NT_MAX. Such a call, a
 * decode step's, passes over each weight once: measured on a Sapphire
 * Rapids-class Xeon (docs/BENCHMARKS.md, stop 16), the 512-bit kernels
 * made SmolLM2's and Gemma 3's eight-sequence steps 10% and 6% slower
 * there (while faster alone in bench_kernels, and for prefill, where a
 * chunk's weights serve many token blocks from L2). */
kern_gemm_fn kern_gemm_x8_for(int t, enum kern_isa isa, int64_t n_tok);

#if defined(__x86_64__)
kern_gemm_fn kern_gemm_x8_get_avx2(int t);
kern_gemm_fn kern_gemm_x8_get_avx2_vnni(int t);
kern_gemm_fn kern_gemm_x8_get_avx2_avx512(int t);
/* The AVX-512 set's own: two groups per register (dot_avx512.c). */
kern_gemm_fn kern_gemm_x8_get_avx512(int t);
#endif

#endif
