/* Portable C operators of the forward pass (the oracle for later ISA
 * kernels). Every output element is computed by one fixed sequence of
 * operations, whatever the thread count or the number of tokens in the
 * call, so results are bit-identical across batch composition. */
#ifndef FX_KERNELS_OPS_H
#define FX_KERNELS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/threadpool.h"

/* A weight matrix in any supported type: n_out rows of n_in elements,
 * row-major (GGUF ne[0] = n_in, ne[1] = n_out). Borrows the data. */
struct wmat {
	const void *data;
	int type;          /* enum fx_type */
	int64_t n_in, n_out;
	size_t row_bytes;
	bool x8;           /* rows in x8 groups (kernels/repack.h), n_out % 8 == 0 */
};

/* Bytes of scratch op_matmul needs for n_tok rows of n_in activations
 * converted to w's vec_dot_type. */
size_t op_matmul_scratch(const struct wmat *w, int64_t n_tok);

/* y[t, o] = sum_i W[o, i] * x[t, i] for t < n_tok, o < n_out.
 * x: [n_tok, n_in] f32 row-major; y: [n_tok, n_out] f32 row-major.
 * Activations are first converted to the weight type's vec_dot_type
 * (Q8_0/Q8_1/Q8_K blocks, or f16), as llama.cpp does, into scratch
 * (op_matmul_scratch bytes). Output rows are split across the pool, whose
 * kernel set (kernels/kern.h, set before any call) computes them. An x8
 * matrix needs that set to have an x8 kernel for its type (gemm_x8; the
 * context checks this when it is created). */
void op_matmul(struct fx_pool *pool, const struct wmat *w, const float *x, int64_t n_tok,
	       float *y, void *scratch);

/* op_matmul for n_w matrices on the same x: y[i] = x W[i]^T, in one
 * parallel region when they share n_in and activation format (Q/K/V,
 * gate/up), else one after another. Results are bit-identical to separate
 * op_matmul calls. scratch: the largest op_matmul_scratch of them. */
void op_matmul_n(struct fx_pool *pool, int n_w, const struct wmat *const *w, const float *x,
		 int64_t n_tok, float *const *y, void *scratch);

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i] over n (RMSNorm, Zhang &
 * Sennrich 2019); w may be NULL (no scale). out may alias x. */
void op_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out);

/* In place: x = softmax(x) over n (max-subtracted, float accumulation). */
void op_softmax(float *x, int64_t n);

/* RoPE (Su et al. 2021) in two steps so a token's angles are computed once
 * for all its heads. op_rope_table: cs[2i], cs[2i+1] = cos, sin of
 * pos * inv_freq[i] for i < n_rot/2, times mscale (YaRN's attention
 * factor; 1: none); inv_freq already divided by any linear scaling.
 * op_rope_apply rotates one head x[head_dim] over its first n_rot dims.
 * neox: pairs (i, i+n_rot/2) (GPT-NeoX / HF rotate_half); otherwise
 * adjacent pairs (2i, 2i+1), the layout llama.cpp's GGUF converter permutes
 * Llama Q/K weights into. */
void op_rope_table(float *cs, int n_rot, float pos, const float *inv_freq, float mscale);
void op_rope_apply(float *x, int n_rot, const float *cs, int neox);

#endif
