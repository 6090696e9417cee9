/* Block layouts of the quantized types, inline fp16/bf16 conversions, and
 * the per-type row functions the type table (quant.c) points at.
 *
 * The structs are byte-for-byte ggml-common.h (block_q4_0 ... block_q8_K),
 * so a GGUF tensor's bytes can be read through them in place. A row of
 * blocks must be aligned for its widest field: 2 bytes for the fp16 scales,
 * 4 for block_q8_K's float d (GGUF aligns tensor data to 32).
 *
 * Shared by src/quant/ and by kernels that want the layouts; the row
 * functions are the portable reference (ggml-quants.c and the *_generic
 * dot products of ggml-cpu/quants.c).
 */
#ifndef FX_QUANT_BLOCKS_H
#define FX_QUANT_BLOCKS_H

#include <stdint.h>
#include <string.h>

typedef uint16_t fx_half; /* IEEE binary16 bits */

#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK_MXFP4 32
#define QK_K 256
#define K_SCALE_SIZE 12

struct block_q4_0 {
	fx_half d;               /* scale */
	uint8_t qs[QK4_0 / 2];   /* x[j] in low nibble of qs[j], x[j+16] high */
};
_Static_assert(sizeof(struct block_q4_0) == 18, "block_q4_0 size");

struct block_q4_1 {
	fx_half d;               /* scale */
	fx_half m;               /* min (offset) */
	uint8_t qs[QK4_1 / 2];
};
_Static_assert(sizeof(struct block_q4_1) == 20, "block_q4_1 size");

struct block_q5_0 {
	fx_half d;
	uint8_t qh[4];           /* bit j: 5th bit of x[j] (little-endian u32) */
	uint8_t qs[QK5_0 / 2];
};
_Static_assert(sizeof(struct block_q5_0) == 22, "block_q5_0 size");

struct block_q5_1 {
	fx_half d;
	fx_half m;
	uint8_t qh[4];
	uint8_t qs[QK5_1 / 2];
};
_Static_assert(sizeof(struct block_q5_1) == 24, "block_q5_1 size");

struct block_q8_0 {
	fx_half d;
	int8_t qs[QK8_0];
};
_Static_assert(sizeof(struct block_q8_0) == 34, "block_q8_0 size");

struct block_q8_1 {
	fx_half d;
	fx_half s;               /* fp16(d * sum(qs)) */
	int8_t qs[QK8_1];
};
_Static_assert(sizeof(struct block_q8_1) == 36, "block_q8_1 size");

struct block_mxfp4 {
	uint8_t e;               /* E8M0 shared exponent */
	uint8_t qs[QK_MXFP4 / 2]; /* E2M1 codes, nibble order as q4_0 */
};
_Static_assert(sizeof(struct block_mxfp4) == 17, "block_mxfp4 size");

/* 16 sub-blocks of 16: x = d * (scales & 0xF) * q - dmin * (scales >> 4) */
struct block_q2_K {
	uint8_t scales[QK_K / 16];
	uint8_t qs[QK_K / 4];
	fx_half d;
	fx_half dmin;
};
_Static_assert(sizeof(struct block_q2_K) == 84, "block_q2_K size");

/* 16 sub-blocks of 16: x = d * (scale6 - 32) * (q2 - (hbit ? 0 : 4)) */
struct block_q3_K {
	uint8_t hmask[QK_K / 8];
	uint8_t qs[QK_K / 4];
	uint8_t scales[12];      /* 16 6-bit scales, packed */
	fx_half d;
};
_Static_assert(sizeof(struct block_q3_K) == 110, "block_q3_K size");

/* 8 sub-blocks of 32: x = d * sc6 * q4 - dmin * m6 */
struct block_q4_K {
	fx_half d;
	fx_half dmin;
	uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales + 8 6-bit mins */
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_q4_K) == 144, "block_q4_K size");

struct block_q5_K {
	fx_half d;
	fx_half dmin;
	uint8_t scales[K_SCALE_SIZE];
	uint8_t qh[QK_K / 8];
	uint8_t qs[QK_K / 2];
};
_Static_assert(sizeof(struct block_q5_K) == 176, "block_q5_K size");

/* 16 sub-blocks of 16: x = d * scales[i] * (q6 - 32) */
struct block_q6_K {
	uint8_t ql[QK_K / 2];
	uint8_t qh[QK_K / 4];
	int8_t scales[QK_K / 16];
	fx_half d;
};
_Static_assert(sizeof(struct block_q6_K) == 210, "block_q6_K size");

/* Activations for the k-quant dot products only. */
struct block_q8_K {
	float d;
	int8_t qs[QK_K];
	int16_t bsums[QK_K / 16]; /* sum of qs in each group of 16 */
};
_Static_assert(sizeof(struct block_q8_K) == 292, "block_q8_K size");

static inline uint32_t quant_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float quant_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Select a where mask is all ones, b where it is zero. */
static inline uint32_t quant_sel(uint32_t mask, uint32_t a, uint32_t b)
{
	return (a & mask) | (b & ~mask);
}

/* Exact binary16 -> binary32, NaN payloads kept bit for bit (as numpy).
 * All cases are computed and masked together, with no branch, so that
 * row loops vectorise. */
static inline float quant_fp16_to_fp32(fx_half h)
{
	const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	const uint32_t em = h & 0x7fffu;
	/* normal: rebias the exponent (15 -> 127) */
	const uint32_t norm = (em << 13) + (112u << 23);
	/* inf/NaN: all-ones exponent, mantissa shifted up */
	const uint32_t special = 0x7f800000u | ((em & 0x3ffu) << 13);
	/* zero/subnormal: em * 2^-24 is exact in binary32 */
	const uint32_t sub = quant_f32_bits((float)em * 0x1p-24f);
	const uint32_t is_special = 0u - (uint32_t)(em >= 0x7c00u);
	const uint32_t is_norm = 0u - (uint32_t)(em >= 0x0400u);

	return quant_bits_f32(sign | quant_sel(is_special, special,
					       quant_sel(is_norm, norm, sub)));
}

/* binary32 -> binary16, round to nearest even (as F16C's vcvtps2ph, which
 * ggml's GGML_FP32_TO_FP16 uses on x86, and numpy's astype(float16)).
 * Overflow gives inf; NaN stays NaN (quieted, sign and top payload kept).
 * Branch-free, like quant_fp16_to_fp32. */
static inline fx_half quant_fp32_to_fp16(float f)
{
	const uint32_t x = quant_f32_bits(f);
	const uint32_t sign = (x >> 16) & 0x8000u;
	const uint32_t a = x & 0x7fffffffu;
	/* >= 2^-14, a normal half: drop 13 bits, ties to even; a carry out of
	 * the mantissa correctly bumps the exponent */
	const uint32_t norm = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
	/* < 2^-14: adding 0.5f lines the half's units (2^-24) up with the
	 * f32 mantissa's last bit, and the FPU's own rounding (nearest even,
	 * the C default) rounds; the result may be 0x400, the smallest normal */
	const uint32_t sub = quant_f32_bits(quant_bits_f32(a) + 0.5f) - 0x3f000000u;
	const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
	/* >= 65520 rounds to inf (65504 has an odd mantissa) */
	const uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u);
	const uint32_t is_inf = 0u - (uint32_t)(a >= 0x477ff000u);
	const uint32_t is_norm = 0u - (uint32_t)(a >= 0x38800000u);
	const uint32_t h = quant_sel(is_nan, nan,
				     quant_sel(is_inf, 0x7c00u,
					       quant_sel(is_norm, norm, sub)));

	return (fx_half)(sign | h);
}

static inline float quant_bf16_to_fp32(uint16_t h)
{
	return quant_bits_f32((uint32_t)h << 16);
}

/* As ggml_compute_fp32_to_bf16: NaN forced quiet, else round to nearest
 * even on the dropped 16 bits (overflow rounds to inf naturally). */
static inline uint16_t quant_fp32_to_bf16(float f)
{
	uint32_t u = quant_f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 64u);
	return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/* E8M0 exponent e -> 2^(e-128), i.e. half the block scale, because the
 * mxfp4 code table holds doubled E2M1 values (ggml_e8m0_to_fp32_half). */
static inline float quant_e8m0_to_fp32_half(uint8_t e)
{
	uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;

	return quant_bits_f32(bits);
}

/* Row functions (n elements, n a multiple of the block size), as
 * fx_to_float_fn / fx_from_float_fn / fx_vec_dot_fn in quant.h. */
#define QUANT_ROW_FNS(t) \
	void quant_to_float_##t(const void *x, float *y, int64_t n); \
	void quant_from_float_##t(const float *x, void *y, int64_t n)

QUANT_ROW_FNS(f32);
QUANT_ROW_FNS(f16);
QUANT_ROW_FNS(bf16);
QUANT_ROW_FNS(q4_0);
QUANT_ROW_FNS(q4_1);
QUANT_ROW_FNS(q5_0);
QUANT_ROW_FNS(q5_1);
QUANT_ROW_FNS(q8_0);
QUANT_ROW_FNS(q8_1);
QUANT_ROW_FNS(mxfp4);
QUANT_ROW_FNS(q8_K);
QUANT_ROW_FNS(q2_K);
QUANT_ROW_FNS(q3_K);
QUANT_ROW_FNS(q4_K);
QUANT_ROW_FNS(q5_K);
QUANT_ROW_FNS(q6_K);

#undef QUANT_ROW_FNS

void quant_vec_dot_f32(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_f16(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_bf16(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q4_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q4_1_q8_1(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q5_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q5_1_q8_1(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q8_0_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_mxfp4_q8_0(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q2_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q3_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q4_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q5_K_q8_K(int64_t n, float *s, const void *x, const void *y);
void quant_vec_dot_q6_K_q8_K(int64_t n, float *s, const void *x, const void *y);

#endif
