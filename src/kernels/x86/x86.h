/* The x86 kernel sets (AVX2, AVX-VNNI, AVX-512): the kernels each file
 * defines and the fill that enters them in a kernel set's table
 * (kernels/kern.h). Every set needs AVX2, FMA and F16C; the kernels are
 * compiled for their ISA whatever -march says and entered only when the
 * CPU runs them (kern_set_init checks). */
#ifndef FX_KERNELS_X86_X86_H
#define FX_KERNELS_X86_X86_H

#include <stdint.h>

#include "kernels/kern.h"

#if defined(__x86_64__)
/* Enter set ks->isa's x86 kernels over the portable ones already in *ks
 * (ks->isa one of KERN_AVX2..KERN_AMX, run by this CPU). */
void kern_x86_fill(struct kern_set *ks);

/* Declarations of attention kernels (kern_qk_fn / kern_pv_fn's shapes). */
#define KERN_QK_DECL(name)                                                                   \
	void name(int64_t n, int nh, const float *q, size_t q_stride, int nk, const void *const *k, \
		  float *out, size_t out_stride)
#define KERN_PV_DECL(name)                                                                   \
	void name(int64_t n, int nh, int nk, const float *w, size_t w_stride, const void *const *v, \
		  float *out, size_t out_stride, float *tmp)

/* AVX2 rows of q8_0 / q8_1 (blocks and both arrays, kernels/kern.h). */
void kern_quant_avx2_q8_0(const float *x, void *row, int64_t n);
void kern_quant_avx2_q8_1(const float *x, void *row, int64_t n);
void kern_quant_avx2_q8_K(const float *x, void *y, int64_t n);
void kern_glu_avx2_silu(float *g, const float *u, long n);
void kern_glu_avx2_gelu(float *g, const float *u, long n);
void kern_softmax_avx2(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r);
void kern_round_f16_avx2(const float *x, float *y, int64_t n);
KERN_QK_DECL(kern_qk_avx2_f32);
KERN_QK_DECL(kern_qk_avx2_f16);
KERN_PV_DECL(kern_pv_avx2_f32);
KERN_PV_DECL(kern_pv_avx2_f16);

/* attn_avx512.c: the AVX-512 set's qk and pv, the AVX2 forms' bits on
 * 512-bit registers (when FX_HAVE_AVX512). */
KERN_QK_DECL(kern_qk_avx512_f32);
KERN_QK_DECL(kern_qk_avx512_f16);
KERN_PV_DECL(kern_pv_avx512_f32);
KERN_PV_DECL(kern_pv_avx512_f16);
/* act_avx512.c: its GLU and softmax, act_avx2.c's bits at 512 bits, and
 * its quantizers (the AVX2 ones' bytes). */
void kern_quant_avx512_q8_0(const float *x, void *row, int64_t n);
void kern_quant_avx512_q8_1(const float *x, void *row, int64_t n);
void kern_quant_avx512_q8_K(const float *x, void *y, int64_t n);
void kern_glu_avx512_silu(float *g, const float *u, long n);
void kern_glu_avx512_gelu(float *g, const float *u, long n);
void kern_softmax_avx512(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r);

/* dot_avx2.c's kernels by weight type (NULL: none for t): its AVX2 build,
 * its AVX-VNNI build (_vnni, when FX_HAVE_AVXVNNI) and its EVEX build for
 * the AVX-512 set (_avx512, when FX_HAVE_AVX512). Called only by
 * kern_x86_fill. */
kern_dot_fn kern_dot_get_avx2(int t);
kern_gemm_fn kern_gemm_get_avx2(int t);
kern_gemm_fn kern_gemm_x8_get_avx2(int t);
kern_dot_fn kern_dot_get_avx2_vnni(int t);
kern_gemm_fn kern_gemm_get_avx2_vnni(int t);
kern_gemm_fn kern_gemm_x8_get_avx2_vnni(int t);
kern_dot_fn kern_dot_get_avx2_avx512(int t);
kern_gemm_fn kern_gemm_get_avx2_avx512(int t);
kern_gemm_fn kern_gemm_x8_get_avx2_avx512(int t);
/* The AVX-512 set's own x8 kernels: two groups per register
 * (dot_avx512.c). */
kern_gemm_fn kern_gemm_x8_get_avx512(int t);
/* The AMX set's tile kernels (dot_amx.c, when FX_HAVE_AMX; NULL: none
 * for t). */
kern_gemm_fn kern_gemm_x8_get_amx(int t);
/* fx_kernels_peak's probe of the tile unit: iters rounds of four tdpbssd
 * on 16 x 64-byte tiles; returns the products done. */
uint64_t kern_amx_peak(uint64_t iters, uint32_t seed);
#endif

#endif
