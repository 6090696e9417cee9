/* The x86 sets' entries in a kernel set's table (x86.h). */
#include "kernels/x86/x86.h"

#include "kernels/repack.h"
#include "quant/quant.h"

#if defined(__x86_64__)

/* The by-type getters of dot_avx2.c's build for set isa (its AVX-VNNI or
 * EVEX build where this one has them, else the AVX2 one). */
struct x86_build {
	kern_dot_fn (*dot)(int t);
	kern_gemm_fn (*gemm)(int t);
	kern_gemm_fn (*x8)(int t);
};

static struct x86_build build_of(enum kern_isa isa)
{
#if defined(FX_HAVE_AVX512)
	if (isa == KERN_AVX512 || isa == KERN_AMX)
		return (struct x86_build){ kern_dot_get_avx2_avx512, kern_gemm_get_avx2_avx512,
					   kern_gemm_x8_get_avx2_avx512 };
#endif
#if defined(FX_HAVE_AVXVNNI)
	if (isa == KERN_AVXVNNI)
		return (struct x86_build){ kern_dot_get_avx2_vnni, kern_gemm_get_avx2_vnni,
					   kern_gemm_x8_get_avx2_vnni };
#endif
	(void)isa;
	return (struct x86_build){ kern_dot_get_avx2, kern_gemm_get_avx2, kern_gemm_x8_get_avx2 };
}

void kern_x86_fill(struct kern_set *ks)
{
	struct x86_build b = build_of(ks->isa);
	const bool is512 = ks->isa == KERN_AVX512 || ks->isa == KERN_AMX;
	(void)is512;
	ks->act_arrays = true;
	ks->act_quant[FX_TYPE_Q8_0] = kern_quant_avx2_q8_0;
	ks->act_quant[FX_TYPE_Q8_1] = kern_quant_avx2_q8_1;
	ks->act_quant[FX_TYPE_Q8_K] = kern_quant_avx2_q8_K;
	for (int t = 0; t < FX_TYPE_COUNT; t++) {
		if (!fx_type_get(t))
			continue;
		ks->dot[t] = b.dot(t);
		ks->gemm[t] = b.gemm(t);
		if (!kern_x8_layout(t))
			continue;
		ks->gemm_x8[t] = ks->gemm_x8_few[t] = b.x8(t);
#if defined(FX_HAVE_AVX512)
		/* the 512-bit kernels for many rows only (kern_gemm_x8_for) */
		if (is512)
			ks->gemm_x8[t] = kern_gemm_x8_get_avx512(t);
#endif
#if defined(FX_HAVE_AMX)
		/* the tile kernels for many rows only: at a decode step's
		 * eight (bench_kernels -n 8) they were 1.4x the 256-bit ones
		 * in L2 but 0.93x streaming a 30 MB matrix, and SmolLM2's
		 * eight-sequence step took 1.04x longer */
		if (ks->isa == KERN_AMX && kern_gemm_x8_get_amx(t))
			ks->gemm_x8[t] = kern_gemm_x8_get_amx(t);
#endif
	}
	if (ks->isa == KERN_AMX) {
		ks->tok_block = 64;
		ks->chunk_bytes = 512 * 1024;
	}
	ks->qk[FX_TYPE_F32] = kern_qk_avx2_f32;
	ks->qk[FX_TYPE_F16] = kern_qk_avx2_f16;
	ks->pv[FX_TYPE_F32] = kern_pv_avx2_f32;
	ks->pv[FX_TYPE_F16] = kern_pv_avx2_f16;
	ks->glu[KERN_GLU_SILU] = kern_glu_avx2_silu;
	ks->glu[KERN_GLU_GELU] = kern_glu_avx2_gelu;
	ks->softmax = kern_softmax_avx2;
	ks->round_f16 = kern_round_f16_avx2;
#if defined(FX_HAVE_AVX512)
	if (is512) { /* the same bits, 512-bit registers */
		ks->qk[FX_TYPE_F32] = kern_qk_avx512_f32;
		ks->qk[FX_TYPE_F16] = kern_qk_avx512_f16;
		ks->pv[FX_TYPE_F32] = kern_pv_avx512_f32;
		ks->pv[FX_TYPE_F16] = kern_pv_avx512_f16;
		ks->glu[KERN_GLU_SILU] = kern_glu_avx512_silu;
		ks->glu[KERN_GLU_GELU] = kern_glu_avx512_gelu;
		ks->softmax = kern_softmax_avx512;
		ks->act_quant[FX_TYPE_Q8_0] = kern_quant_avx512_q8_0;
		ks->act_quant[FX_TYPE_Q8_1] = kern_quant_avx512_q8_1;
		ks->act_quant[FX_TYPE_Q8_K] = kern_quant_avx512_q8_K;
	}
#endif
}
#endif
