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

/* Whether weight type t has an x8 layout (a kernel set's gemm_x8 entry
 * for t says whether it has a kernel that reads one). */
bool kern_x8_layout(int t);

/* Rewrite eight plain rows of n elements of type t (contiguous, row size
 * fx_row_size(t, n)) in place into one x8 group. tmp: 8 rows of scratch.
 * t must have an x8 layout; n a multiple of its block. */
void kern_x8_pack(int t, int64_t n, void *rows, void *tmp);

/* Row r (0..7) of an x8 group of n elements of type t, as a plain row
 * (fx_row_size(t, n) bytes) into out. */
void kern_x8_unpack_row(int t, int64_t n, const void *group, int r, void *out);

#endif
