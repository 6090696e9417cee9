/* Kernel-set selection (see kernels/dot.h). */
#include "kernels/dot.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "kernels/ops.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#if defined(__x86_64__)
/* Register reg (0 EAX .. 3 EDX) of CPUID leaf, subleaf (0 where the leaf
 * is past the highest one the CPU has). */
static unsigned cpuid_reg(unsigned leaf, unsigned sub, int reg)
{
	unsigned r[4] = { 0, 0, 0, 0 };
	if ((unsigned)__get_cpuid_max(0, NULL) >= leaf)
		__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
	return r[reg];
}
#endif

/* The sets the CPU runs, as bit (1 << set), read once. CPUID is slow
 * under a hypervisor (tens of microseconds: it traps), and every kernel
 * lookup asks, so the answer is kept: a fact about the machine, the same
 * for every caller and thread, so a race only computes it twice. (0: not
 * yet; the portable set always runs.) */
static _Atomic unsigned isa_mask;

static unsigned isa_detect(void)
{
	unsigned m = 1u << KERN_PORTABLE;
#if defined(__x86_64__)
	/* AVX2 through libgcc/compiler-rt, which also checks that the OS
	 * saves YMM state; the rest from CPUID (Intel SDM vol. 2, CPUID),
	 * since clang 14's __builtin_cpu_supports knows neither "f16c" nor
	 * "avxvnni": FMA (leaf 1 ECX bit 12), F16C (leaf 1 ECX bit 29),
	 * AVX-VNNI (leaf 7 subleaf 1 EAX bit 4, present when leaf 7 subleaf 0
	 * EAX >= 1); AVX512F, BW, VL (leaf 7 EBX bits 16, 30, 31) and
	 * AVX512_VNNI (leaf 7 ECX bit 11), with the OS saving the SSE and
	 * AVX state, the opmask and all 512-bit registers (XCR0 bits 1, 2
	 * and 5-7, read by xgetbv once leaf 1 ECX bit 27, OSXSAVE, says it
	 * may be). */
	unsigned ecx1 = cpuid_reg(1, 0, 2);
	if (!__builtin_cpu_supports("avx2") || !(ecx1 >> 12 & 1) || !(ecx1 >> 29 & 1))
		return m;
	m |= 1u << KERN_AVX2;
#if defined(FX_HAVE_AVXVNNI)
	if (cpuid_reg(7, 0, 0) >= 1 && (cpuid_reg(7, 1, 0) >> 4 & 1))
		m |= 1u << KERN_AVXVNNI;
#endif
#if defined(FX_HAVE_AVX512)
	unsigned lo = 0, hi = 0;
	if (ecx1 >> 27 & 1)
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	const unsigned ebx_need = 1u << 16 | 1u << 30 | 1u << 31;
	if ((lo & 0xE6) == 0xE6 && (cpuid_reg(7, 0, 1) & ebx_need) == ebx_need && (cpuid_reg(7, 0, 2) >> 11 & 1))
		m |= 1u << KERN_AVX512;
#endif
#endif
	return m;
}

static unsigned isa_runs(void)
{
	unsigned v = atomic_load_explicit(&isa_mask, memory_order_relaxed);
	if (!v) {
		v = isa_detect();
		atomic_store_explicit(&isa_mask, v, memory_order_relaxed);
	}
	return v;
}

bool kern_isa_runs(enum kern_isa isa)
{
	return (unsigned)isa < 32 && (isa_runs() >> isa & 1);
}

enum kern_isa kern_isa_best(void)
{
	/* the highest bit: the enum lists the sets in order of preference */
	return (enum kern_isa)(31 - __builtin_clz(isa_runs()));
}

bool kern_isa_avx2(enum kern_isa isa)
{
	return isa >= KERN_AVX2 && isa <= KERN_AVX512 && kern_isa_runs(isa);
}

/* AVX2 rows of q8_0/q8_1 carry the scale and sum arrays (dot.h); the
 * layout follows the kernels the CPU actually runs. */
static bool has_scale_arrays(int vdt, enum kern_isa isa)
{
	return kern_isa_avx2(isa) &&
	       (vdt == FX_TYPE_Q8_0 || vdt == FX_TYPE_Q8_1);
}

size_t kern_act_row_bytes(int vdt, enum kern_isa isa, int64_t n)
{
	size_t blocks = fx_row_size(vdt, n);
	if (!has_scale_arrays(vdt, isa))
		return blocks;
	/* blocks, then two arrays of the same padded size */
	return 2 * kern_act_s_off(blocks, n / 32) - kern_act_d_off(blocks);
}

/* The set's quantizer for activation type vdt: the type table's bytes
 * (test_kernels checks), faster; for AVX2 q8_0/q8_1 also the arrays. */
static fx_from_float_fn act_quantizer(int vdt, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa)) {
		if (vdt == FX_TYPE_Q8_0)
			return kern_quant_avx2_q8_0;
		if (vdt == FX_TYPE_Q8_1)
			return kern_quant_avx2_q8_1;
		if (vdt == FX_TYPE_Q8_K)
			return kern_quant_avx2_q8_K;
	}
#else
	(void)isa;
#endif
	return fx_type_get(vdt)->from_float;
}

void kern_act_quantize(int vdt, enum kern_isa isa, const float *x, void *row, int64_t n)
{
	act_quantizer(vdt, isa)(x, row, n);
}

kern_dot_fn kern_dot_get(int t, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa))
		return AVX2_SET_GET(kern_dot_get_avx2, isa, t);
#else
	(void)t;
	(void)isa;
#endif
	return NULL;
}

kern_gemm_fn kern_gemm_get(int t, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa))
		return AVX2_SET_GET(kern_gemm_get_avx2, isa, t);
#else
	(void)t;
	(void)isa;
#endif
	return NULL;
}

static float expsum(float *s, int n, float m, float l)
{
	for (int i = 0; i < n; i++) {
		s[i] = expf(s[i] - m);
		l += s[i];
	}
	return l;
}

kern_expsum_fn kern_expsum_get(enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa))
		return kern_expsum_avx2;
#else
	(void)isa;
#endif
	return expsum;
}

static void glu_silu(float *g, const float *u, long n)
{
	for (long i = 0; i < n; i++)
		g[i] = op_silu(g[i]) * u[i];
}

static void glu_gelu(float *g, const float *u, long n)
{
	for (long i = 0; i < n; i++)
		g[i] = op_gelu_tanh(g[i]) * u[i];
}

kern_glu_fn kern_glu_get(enum kern_glu act, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa))
		return act == KERN_GLU_GELU ? kern_glu_avx2_gelu : kern_glu_avx2_silu;
#else
	(void)isa;
#endif
	return act == KERN_GLU_GELU ? glu_gelu : glu_silu;
}

/* Portable forms: f32 directly, any other type converted to f32 first
 * (the type table's to_float), then out += w * v per head. */
/* Portable: row by row, each converted to f32 first (through tmp unless
 * already f32). */
static void pv_rows(int64_t n, int nh, int nk, const float *w, size_t ws, const void *const *v,
		    float *out, size_t os, float *tmp, int t)
{
	for (int r = 0; r < nk; r++) {
		const float *x = v[r];
		if (t != FX_TYPE_F32) {
			fx_type_get(t)->to_float(v[r], tmp, n);
			x = tmp;
		}
		for (int h = 0; h < nh; h++)
			for (int64_t i = 0; i < n; i++)
				out[(size_t)h * os + i] += w[(size_t)h * ws + r] * x[i];
	}
}

#define PV_PORTABLE(name, type)                                                               \
	static void name(int64_t n, int nh, int nk, const float *w, size_t ws,                \
			 const void *const *v, float *out, size_t os, float *tmp)               \
	{                                                                                      \
		pv_rows(n, nh, nk, w, ws, v, out, os, tmp, type);                              \
	}
PV_PORTABLE(pv_f32, FX_TYPE_F32)
PV_PORTABLE(pv_f16, FX_TYPE_F16)
PV_PORTABLE(pv_q8_0, FX_TYPE_Q8_0)

void kern_round_f16(enum kern_isa isa, const float *x, float *y, int64_t n)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa)) {
		kern_round_f16_avx2(x, y, n);
		return;
	}
#else
	(void)isa;
#endif
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp16_to_fp32(quant_fp32_to_fp16(x[i]));
}

kern_qk_fn kern_qk_get(int t, enum kern_isa isa, int64_t n)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa) && n % 8 == 0 && n <= KERN_QK_MAX_DIM) {
		if (t == FX_TYPE_F32)
			return kern_qk_avx2_f32;
		if (t == FX_TYPE_F16)
			return kern_qk_avx2_f16;
	}
#else
	(void)isa;
	(void)n;
#endif
	(void)t;
	return NULL;
}

kern_pv_fn kern_pv_get(int t, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (kern_isa_avx2(isa)) {
		if (t == FX_TYPE_F32)
			return kern_pv_avx2_f32;
		if (t == FX_TYPE_F16)
			return kern_pv_avx2_f16;
	}
#else
	(void)isa;
#endif
	return t == FX_TYPE_F32 ? pv_f32 : t == FX_TYPE_F16 ? pv_f16 : pv_q8_0;
}
