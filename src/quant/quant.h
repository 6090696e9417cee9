/* Tensor element types and the per-type table of block formats.
 *
 * Type ids are GGML's (ggml.h enum ggml_type) so a GGUF tensor's type field
 * indexes this table directly. Block layouts follow ggml-common.h; the
 * scalar dequantizers, quantizers and dot products follow ggml-quants.c
 * (the reference implementation) and are checked against the PyPI `gguf`
 * package (gguf.quants) in tests/test_quant.c.
 */
#ifndef FX_QUANT_QUANT_H
#define FX_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fx_type {
	FX_TYPE_F32 = 0,
	FX_TYPE_F16 = 1,
	FX_TYPE_Q4_0 = 2,
	FX_TYPE_Q4_1 = 3,
	FX_TYPE_Q5_0 = 6,
	FX_TYPE_Q5_1 = 7,
	FX_TYPE_Q8_0 = 8,
	FX_TYPE_Q8_1 = 9,
	FX_TYPE_Q2_K = 10,
	FX_TYPE_Q3_K = 11,
	FX_TYPE_Q4_K = 12,
	FX_TYPE_Q5_K = 13,
	FX_TYPE_Q6_K = 14,
	FX_TYPE_Q8_K = 15,
	FX_TYPE_BF16 = 30,
	FX_TYPE_MXFP4 = 39,
	FX_TYPE_COUNT = 40 /* one past the largest id the table may hold */
};

/* Dequantize n values (n a multiple of blck_size) from x into y [n] f32. */
typedef void (*fx_to_float_fn)(const void *x, float *y, int64_t n);
/* Quantize n f32 values (n a multiple of blck_size) into y (row of this type).
 * The reference (scalar, round-to-nearest) quantizer of ggml-quants.c. */
typedef void (*fx_from_float_fn)(const float *x, void *y, int64_t n);
/* *s = dot(x, y) over n elements; x is a row of this type, y a row of the
 * type's vec_dot_type (n a multiple of both block sizes). The sum is
 * accumulated in a fixed order that does not depend on threads or batch. */
typedef void (*fx_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);

struct fx_type_traits {
	const char *name;        /* GGML's name: "q4_K", "f32", ... */
	int64_t blck_size;       /* elements per block (1 for f32/f16/bf16) */
	size_t type_size;        /* bytes per block */
	bool is_quantized;
	fx_to_float_fn to_float;     /* NULL: cannot be read */
	fx_from_float_fn from_float; /* NULL: no quantizer */
	fx_vec_dot_fn vec_dot;       /* NULL: no dot product */
	enum fx_type vec_dot_type;   /* what the activations are quantized to */
};

/* Traits of type t, or NULL when t is unknown to ferrox (then a GGUF that
 * uses it is rejected with an error naming the type id). Borrowed, static. */
const struct fx_type_traits *fx_type_get(int t);

/* Bytes of a row of n elements of type t; 0 if n is not a multiple of the
 * block size or t is unknown. */
size_t fx_row_size(int t, int64_t n);

/* The type llama.cpp writes instead of t when a row does not fill whole
 * blocks of t (llama_tensor_get_type's "convert_incompatible_tensor"):
 * q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0; llama.cpp picks iq4_nl for
 * q2_K/q3_K, which ferrox lacks, so those take q4_0; anything else f16. */
int fx_type_fallback(int t);

/* IEEE half / bfloat16 conversion (round to nearest even, as ggml). */
float fx_fp16_to_fp32(uint16_t h);
uint16_t fx_fp32_to_fp16(float f);
float fx_bf16_to_fp32(uint16_t h);
uint16_t fx_fp32_to_bf16(float f);

#endif
