/* The type table, fp16/bf16 conversion, and the float types' rows.
 *
 * The table mirrors ggml's type_traits (ggml.c) and type_traits_cpu
 * (ggml-cpu.c): the same names, block sizes, and vec_dot_type per type, so
 * a dot product here pairs a weight row with the same activation format as
 * llama.cpp. Reference dequantizers/quantizers: ggml-quants.c; dot
 * products: ggml-cpu/quants.c (*_generic) and ggml-cpu/vec.cpp.
 */
#include "quant/quant.h"
#include "quant/blocks.h"

#include <string.h>

/* Lanes of the float dot products. Fixed lanes (not a plain running sum)
 * let the compiler keep them in vector registers without -ffast-math,
 * while the order of every addition stays the same on every machine. */
#define DOT_LANES 32

static const struct fx_type_traits type_table[FX_TYPE_COUNT] = {
	[FX_TYPE_F32] = {
		.name = "f32", .blck_size = 1, .type_size = sizeof(float),
		.is_quantized = false,
		.to_float = quant_to_float_f32, .from_float = quant_from_float_f32,
		.vec_dot = quant_vec_dot_f32, .vec_dot_type = FX_TYPE_F32,
	},
	[FX_TYPE_F16] = {
		.name = "f16", .blck_size = 1, .type_size = sizeof(fx_half),
		.is_quantized = false,
		.to_float = quant_to_float_f16, .from_float = quant_from_float_f16,
		.vec_dot = quant_vec_dot_f16, .vec_dot_type = FX_TYPE_F16,
	},
	[FX_TYPE_BF16] = {
		.name = "bf16", .blck_size = 1, .type_size = sizeof(uint16_t),
		.is_quantized = false,
		.to_float = quant_to_float_bf16, .from_float = quant_from_float_bf16,
		.vec_dot = quant_vec_dot_bf16, .vec_dot_type = FX_TYPE_BF16,
	},
	[FX_TYPE_Q4_0] = {
		.name = "q4_0", .blck_size = QK4_0,
		.type_size = sizeof(struct block_q4_0), .is_quantized = true,
		.to_float = quant_to_float_q4_0, .from_float = quant_from_float_q4_0,
		.vec_dot = quant_vec_dot_q4_0_q8_0, .vec_dot_type = FX_TYPE_Q8_0,
	},
	[FX_TYPE_Q4_1] = {
		.name = "q4_1", .blck_size = QK4_1,
		.type_size = sizeof(struct block_q4_1), .is_quantized = true,
		.to_float = quant_to_float_q4_1, .from_float = quant_from_float_q4_1,
		.vec_dot = quant_vec_dot_q4_1_q8_1, .vec_dot_type = FX_TYPE_Q8_1,
	},
	[FX_TYPE_Q5_0] = {
		.name = "q5_0", .blck_size = QK5_0,
		.type_size = sizeof(struct block_q5_0), .is_quantized = true,
		.to_float = quant_to_float_q5_0, .from_float = quant_from_float_q5_0,
		.vec_dot = quant_vec_dot_q5_0_q8_0, .vec_dot_type = FX_TYPE_Q8_0,
	},
	[FX_TYPE_Q5_1] = {
		.name = "q5_1", .blck_size = QK5_1,
		.type_size = sizeof(struct block_q5_1), .is_quantized = true,
		.to_float = quant_to_float_q5_1, .from_float = quant_from_float_q5_1,
		.vec_dot = quant_vec_dot_q5_1_q8_1, .vec_dot_type = FX_TYPE_Q8_1,
	},
	[FX_TYPE_Q8_0] = {
		.name = "q8_0", .blck_size = QK8_0,
		.type_size = sizeof(struct block_q8_0), .is_quantized = true,
		.to_float = quant_to_float_q8_0, .from_float = quant_from_float_q8_0,
		.vec_dot = quant_vec_dot_q8_0_q8_0, .vec_dot_type = FX_TYPE_Q8_0,
	},
	/* Activation format only: ggml has no q8_1 x q8_1 dot product. */
	[FX_TYPE_Q8_1] = {
		.name = "q8_1", .blck_size = QK8_1,
		.type_size = sizeof(struct block_q8_1), .is_quantized = true,
		.to_float = quant_to_float_q8_1, .from_float = quant_from_float_q8_1,
		.vec_dot = NULL, .vec_dot_type = FX_TYPE_Q8_1,
	},
	/* The k-quants' from_float is ggml's quantize_row_q*_K_ref (no
	 * importance matrix), as llama-quantize uses without --imatrix. */
	[FX_TYPE_Q2_K] = {
		.name = "q2_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q2_K), .is_quantized = true,
		.to_float = quant_to_float_q2_K,
		.from_float = quant_from_float_q2_K,
		.vec_dot = quant_vec_dot_q2_K_q8_K, .vec_dot_type = FX_TYPE_Q8_K,
	},
	[FX_TYPE_Q3_K] = {
		.name = "q3_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q3_K), .is_quantized = true,
		.to_float = quant_to_float_q3_K,
		.from_float = quant_from_float_q3_K,
		.vec_dot = quant_vec_dot_q3_K_q8_K, .vec_dot_type = FX_TYPE_Q8_K,
	},
	[FX_TYPE_Q4_K] = {
		.name = "q4_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q4_K), .is_quantized = true,
		.to_float = quant_to_float_q4_K,
		.from_float = quant_from_float_q4_K,
		.vec_dot = quant_vec_dot_q4_K_q8_K, .vec_dot_type = FX_TYPE_Q8_K,
	},
	[FX_TYPE_Q5_K] = {
		.name = "q5_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q5_K), .is_quantized = true,
		.to_float = quant_to_float_q5_K,
		.from_float = quant_from_float_q5_K,
		.vec_dot = quant_vec_dot_q5_K_q8_K, .vec_dot_type = FX_TYPE_Q8_K,
	},
	[FX_TYPE_Q6_K] = {
		.name = "q6_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q6_K), .is_quantized = true,
		.to_float = quant_to_float_q6_K,
		.from_float = quant_from_float_q6_K,
		.vec_dot = quant_vec_dot_q6_K_q8_K, .vec_dot_type = FX_TYPE_Q8_K,
	},
	/* Activation format only (no q8_K x q8_K dot product in ggml). */
	[FX_TYPE_Q8_K] = {
		.name = "q8_K", .blck_size = QK_K,
		.type_size = sizeof(struct block_q8_K), .is_quantized = true,
		.to_float = quant_to_float_q8_K, .from_float = quant_from_float_q8_K,
		.vec_dot = NULL, .vec_dot_type = FX_TYPE_Q8_K,
	},
	[FX_TYPE_MXFP4] = {
		.name = "mxfp4", .blck_size = QK_MXFP4,
		.type_size = sizeof(struct block_mxfp4), .is_quantized = true,
		.to_float = quant_to_float_mxfp4, .from_float = quant_from_float_mxfp4,
		.vec_dot = quant_vec_dot_mxfp4_q8_0, .vec_dot_type = FX_TYPE_Q8_0,
	},
};

const struct fx_type_traits *fx_type_get(int t)
{
	if (t < 0 || t >= FX_TYPE_COUNT || !type_table[t].name)
		return NULL;
	return &type_table[t];
}

size_t fx_row_size(int t, int64_t n)
{
	const struct fx_type_traits *tt = fx_type_get(t);

	if (!tt || n < 0 || n % tt->blck_size)
		return 0;
	return (size_t)(n / tt->blck_size) * tt->type_size;
}

float fx_fp16_to_fp32(uint16_t h)
{
	return quant_fp16_to_fp32(h);
}

uint16_t fx_fp32_to_fp16(float f)
{
	return quant_fp32_to_fp16(f);
}

float fx_bf16_to_fp32(uint16_t h)
{
	return quant_bf16_to_fp32(h);
}

uint16_t fx_fp32_to_bf16(float f)
{
	return quant_fp32_to_bf16(f);
}

/* ---- F32 ---------------------------------------------------------------- */

void quant_to_float_f32(const void *x, float *y, int64_t n)
{
	memcpy(y, x, (size_t)n * sizeof(float));
}

void quant_from_float_f32(const float *x, void *y, int64_t n)
{
	memcpy(y, x, (size_t)n * sizeof(float));
}

/* Sum the DOT_LANES partial sums pairwise, then add the tail in double (as
 * ggml's ggml_float leftovers). Same order whatever n or the machine. */
static float dot_finish(float acc[DOT_LANES], double tail)
{
	for (int w = DOT_LANES / 2; w > 0; w /= 2)
		for (int l = 0; l < w; l++)
			acc[l] += acc[l + w];
	return (float)((double)acc[0] + tail);
}

/* *s = sum x[i]*y[i]; x, y [n] f32. Lane l of the main loop takes the
 * elements i = l (mod DOT_LANES). */
void quant_vec_dot_f32(int64_t n, float *s, const void *vx, const void *vy)
{
	const float *x = vx;
	const float *y = vy;
	float acc[DOT_LANES] = { 0 };
	double tail = 0;
	int64_t i = 0;

	for (; i + DOT_LANES <= n; i += DOT_LANES)
		for (int l = 0; l < DOT_LANES; l++)
			acc[l] += x[i + l] * y[i + l];
	for (; i < n; i++)
		tail += (double)(x[i] * y[i]);
	*s = dot_finish(acc, tail);
}

/* ---- F16 ---------------------------------------------------------------- */

void quant_to_float_f16(const void *vx, float *y, int64_t n)
{
	const fx_half *x = vx;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp16_to_fp32(x[i]);
}

void quant_from_float_f16(const float *x, void *vy, int64_t n)
{
	fx_half *y = vy;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_fp16(x[i]);
}

/* sum x[i]*y[i] over 16-bit floats decoded by cvt: DOT_LANES f32 lanes,
 * then a double tail (ggml_vec_dot_f16/bf16's shape). Products of two
 * 16-bit floats are exact in f32. Inlined with a constant cvt. */
static inline void dot_halves(int64_t n, float *s, const uint16_t *x, const uint16_t *y,
			      float (*cvt)(uint16_t))
{
	float acc[DOT_LANES] = { 0 };
	double tail = 0;
	int64_t i = 0;

	for (; i + DOT_LANES <= n; i += DOT_LANES)
		for (int l = 0; l < DOT_LANES; l++)
			acc[l] += cvt(x[i + l]) * cvt(y[i + l]);
	for (; i < n; i++)
		tail += (double)(cvt(x[i]) * cvt(y[i]));
	*s = dot_finish(acc, tail);
}

/* *s = sum x[i]*y[i]; x, y [n] f16 (ggml's vec_dot_type for f16 is f16,
 * ggml_vec_dot_f16). */
void quant_vec_dot_f16(int64_t n, float *s, const void *vx, const void *vy)
{
	dot_halves(n, s, vx, vy, quant_fp16_to_fp32);
}

/* ---- BF16 --------------------------------------------------------------- */

void quant_to_float_bf16(const void *vx, float *y, int64_t n)
{
	const uint16_t *x = vx;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_bf16_to_fp32(x[i]);
}

void quant_from_float_bf16(const float *x, void *vy, int64_t n)
{
	uint16_t *y = vy;

	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp32_to_bf16(x[i]);
}

/* *s = sum x[i]*y[i]; x, y [n] bf16 (ggml's vec_dot_type for bf16 is bf16,
 * ggml_vec_dot_bf16). */
void quant_vec_dot_bf16(int64_t n, float *s, const void *vx, const void *vy)
{
	dot_halves(n, s, vx, vy, quant_bf16_to_fp32);
}

int fx_type_fallback(int t)
{
	switch (t) {
	case FX_TYPE_Q2_K:
	case FX_TYPE_Q3_K: return FX_TYPE_Q4_0;
	case FX_TYPE_Q4_K: return FX_TYPE_Q5_0;
	case FX_TYPE_Q5_K: return FX_TYPE_Q5_1;
	case FX_TYPE_Q6_K: return FX_TYPE_Q8_0;
	default:           return FX_TYPE_F16;
	}
}
