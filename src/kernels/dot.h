/* Dot-product kernels of weight rows with several activation rows,
 * chosen at run time by CPU features.
 *
 * The portable C dot products of the type table (quant/quant.h) are the
 * oracle. The 32-element block types' ISA kernels (rows in SIMD lanes,
 * kern_gemm_fn) repeat the portable float steps exactly, so they equal it
 * bit for bit; the others compute the same sums in their own fixed order,
 * the one llama.cpp's kernels for that ISA use (ggml-cpu/arch/x86/
 * quants.c), so results track llama.cpp's. Either way a kernel performs,
 * for every (weight row, activation row) pair, the same operations
 * whatever the number of rows per call: the weights are unpacked once and
 * reused, but each sum is bit-identical whatever the row counts, the
 * thread count or the batch composition.
 */
#ifndef FX_KERNELS_DOT_H
#define FX_KERNELS_DOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kernel sets, in order of preference. Every x86 set needs AVX2, FMA and
 * F16C and shares the AVX2 activation layout; AVX-VNNI and AVX-512 are
 * independent of each other (Zen 4 has AVX-512 only, Alder Lake AVX-VNNI
 * only). */
enum kern_isa {
	KERN_PORTABLE = 0, /* the type table's scalar C */
	KERN_AVX2 = 1,     /* x86-64 AVX2 + FMA + F16C */
	/* The AVX2 set whose integer kernels (32-element block types, q4_K,
	 * q6_K x8) sum with AVX-VNNI's vpdpbusd (dot_avx2.c): the same
	 * activation layout and the same results bit for bit, fewer
	 * instructions. Built when the compiler knows -mavxvnni. */
	KERN_AVXVNNI = 2,
	/* AVX-512 F/BW/VL with AVX512-VNNI (Intel Ice Lake, Tiger Lake and
	 * Xeons since, not Alder/Raptor Lake; AMD Zen 4 and later): the x8
	 * kernels take two groups (16 rows) per 512-bit register for calls
	 * of many activation rows (dot_avx512.c, kern_gemm_x8_for); the
	 * other kernels are dot_avx2.c built once more with the EVEX form
	 * of vpdpbusd. The same integer sums and float steps: results the
	 * AVX2 set's bit for bit. */
	KERN_AVX512 = 3,
};

/* Most activation rows one kernel call takes. */
#define KERN_NT_MAX 8

/* out[t * out_stride] = dot(w, act + t * act_stride) for t < nt
 * (1 <= nt <= KERN_NT_MAX). w: one row of n elements of the weight type;
 * act: rows of the type's vec_dot_type (q8_0/q8_1/q8_K blocks or
 * f32/f16/bf16) in the kernel set's activation layout (kern_act_quantize),
 * act_stride bytes apart. n is a multiple of the block size. */
typedef void (*kern_dot_fn)(int64_t n, const void *w, const void *act, size_t act_stride,
			    int nt, float *out, size_t out_stride);

/* Activation rows as a set's kernels read them: bytes of one row of n
 * elements of activation type vdt (a weight type's vec_dot_type), and its
 * conversion from f32 x[n] (the type table's quantizer, or an ISA form of it
 * that gives the same bytes, then any extras).
 * Portable rows are the type's own blocks. AVX2 rows of q8_0 / q8_1 are
 * those blocks followed, each at the next 32-byte boundary, by two arrays
 * of one entry per block: d as f32, then s as f32 (q8_1) or sum(qs) as
 * int32 (q8_0). Kernels read them with one load instead of converting
 * halves or summing bytes per block; they are the blocks' own values, so
 * no result changes, and the portable vec_dot reads such a row as a plain
 * one. */
size_t kern_act_row_bytes(int vdt, enum kern_isa isa, int64_t n);

/* Byte offsets in an AVX2 q8_0/q8_1 activation row whose nb blocks take
 * blocks_bytes: of the d array, and of the second array (s or sums). */
static inline size_t kern_act_d_off(size_t blocks_bytes)
{
	return (blocks_bytes + 31) & ~(size_t)31;
}
static inline size_t kern_act_s_off(size_t blocks_bytes, int64_t nb)
{
	return kern_act_d_off(blocks_bytes) + (((size_t)nb * sizeof(float) + 31) & ~(size_t)31);
}
void kern_act_quantize(int vdt, enum kern_isa isa, const float *x, void *row, int64_t n);

/* out[t * out_stride + r] = dot(row r, act + t * act_stride) for r < nr
 * (any number of weight rows) and t < nt (any number of activation rows,
 * laid out as for kern_dot_fn). Plain rows: row r at w + r * w_stride.
 * x8 groups (kern_gemm_x8_get): nr a multiple of 8, group g (rows 8g..
 * 8g+7) at w + 8 * g * w_stride, where its eight plain rows were. A
 * kernel of this form computes eight (AVX-512: sixteen) rows in SIMD
 * lanes; each (row, activation row) result is the same whatever nr, nt
 * or the rows' grouping. */
typedef void (*kern_gemm_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *act,
			     size_t act_stride, int nt, float *out, size_t out_stride);

/* The best kernel set this CPU runs and this build has: KERN_AVX512, then
 * KERN_AVXVNNI, then KERN_AVX2 (each needing its features, see above);
 * KERN_PORTABLE otherwise or on other architectures. */
enum kern_isa kern_isa_best(void);

/* Whether this CPU runs set isa (and the build has it). */
bool kern_isa_runs(enum kern_isa isa);

/* Whether isa is one of the x86 sets (KERN_AVX2 and later) and this CPU
 * runs it: the sets that share the AVX2 activation layout and
 * non-integer kernels. */
bool kern_isa_avx2(enum kern_isa isa);

/* The kernel of set isa for weight type t, or NULL when that set has none
 * for t (callers then use the type table's vec_dot) or the CPU cannot run
 * it. */
kern_dot_fn kern_dot_get(int t, enum kern_isa isa);

/* The rows-in-lanes kernel of set isa for weight type t, or NULL (then
 * use kern_dot_get's). */
kern_gemm_fn kern_gemm_get(int t, enum kern_isa isa);

/* out[h * out_stride + e] += sum over r < nk of w[h * w_stride + r] * v[r][e]
 * for h < nh, e < n: attention's weighted sum of a chunk of V rows for the
 * query heads sharing one KV head. v[r] is a row of KV cache type t (f32 or
 * f16 natively; q8_0 is converted through tmp[n] first). Per element the
 * rows are added in order r = 0, 1, ..., one update each, so every out row
 * receives the same operations whatever nh or the chunking of the keys. The
 * AVX2 set keeps the heads' sums in registers across the chunk. Resolve it
 * once with kern_pv_get. */
typedef void (*kern_pv_fn)(int64_t n, int nh, int nk, const float *w, size_t w_stride,
			   const void *const *v, float *out, size_t out_stride, float *tmp);
kern_pv_fn kern_pv_get(int t, enum kern_isa isa);

/* out[h * out_stride + r] = dot(q + h * q_stride, k[r]) over n elements
 * for h < nh, r < nk (q_stride in floats): attention scores of the query
 * heads sharing one KV head against a chunk of K rows of cache type t (f32,
 * or f16 converted once for all heads). For an f16 cache the caller passes
 * Q already rounded to f16 values (kern_round_f16), as llama.cpp rounds Q
 * for its f16 K dot product: once per token, not once per chunk. Each
 * score's summation order depends only on n, not on nh, nk or the key's
 * place in the chunk. Only the AVX2 set has one, for n a multiple of 8 up
 * to KERN_QK_MAX_DIM: otherwise NULL (use kern_dot_get's kernels). */
enum { KERN_QK_MAX_DIM = 512 };
typedef void (*kern_qk_fn)(int64_t n, int nh, const float *q, size_t q_stride, int nk,
			   const void *const *k, float *out, size_t out_stride);
kern_qk_fn kern_qk_get(int t, enum kern_isa isa, int64_t n);

/* y[i] = x[i] rounded to the nearest binary16 value (ties to even, as
 * F16C's vcvtps2ph), back in binary32, for i < n; x == y allowed. The
 * AVX2 set converts with F16C, the portable one in integer steps
 * (quant/blocks.h): the same bits. */
void kern_round_f16(enum kern_isa isa, const float *x, float *y, int64_t n);

/* g[i] = act(g[i]) * u[i] for i < n: the GLU of a feed-forward block.
 * KERN_GLU_SILU: silu (x * sigmoid x); KERN_GLU_GELU: GELU's tanh form,
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). The portable forms call
 * libm (op_silu, op_gelu_tanh in kernels/ops.h); ISA forms use a vector exp
 * good to about 2e-7 relative, the same for every element whatever n or
 * the slice boundaries. */
enum kern_glu { KERN_GLU_SILU, KERN_GLU_GELU };
typedef void (*kern_glu_fn)(float *g, const float *u, long n);
kern_glu_fn kern_glu_get(enum kern_glu act, enum kern_isa isa);

/* s[i] = e^(s[i] - m) for i < n (every s[i] <= m): a chunk of attention's
 * softmax weights. Returns l plus their sum, added one by one in order.
 * The portable form calls expf; the AVX2 form evaluates four weights at a
 * time the way glibc's expf (2.27 and later, its FMA variant, which glibc
 * picks on any CPU the AVX2 set runs on) does, so on glibc both forms give
 * the same weights bit for bit; with another libm they may differ by an
 * ulp (the AVX2 form stays within an ulp of e^x). */
typedef float (*kern_expsum_fn)(float *s, int n, float m, float l);
kern_expsum_fn kern_expsum_get(enum kern_isa isa);

#if defined(__x86_64__)
/* AVX2 rows of q8_0 / q8_1 (blocks and both arrays, see above). */
void kern_quant_avx2_q8_0(const float *x, void *row, int64_t n);
void kern_quant_avx2_q8_1(const float *x, void *row, int64_t n);
void kern_quant_avx2_q8_K(const float *x, void *y, int64_t n);
void kern_glu_avx2_silu(float *g, const float *u, long n);
void kern_glu_avx2_gelu(float *g, const float *u, long n);
float kern_expsum_avx2(float *s, int n, float m, float l);
void kern_round_f16_avx2(const float *x, float *y, int64_t n);
kern_dot_fn kern_dot_get_avx2(int t);
kern_gemm_fn kern_gemm_get_avx2(int t);
/* The AVX-VNNI build of dot_avx2.c (when FX_HAVE_AVXVNNI) and its EVEX
 * build for the AVX-512 set (when FX_HAVE_AVX512). */
kern_dot_fn kern_dot_get_avx2_vnni(int t);
kern_gemm_fn kern_gemm_get_avx2_vnni(int t);
kern_dot_fn kern_dot_get_avx2_avx512(int t);
kern_gemm_fn kern_gemm_get_avx2_avx512(int t);
/* AVX2_SET_GET(getter, isa, t): for one of the x86 sets, getter's build
 * for that set (KERN_AVXVNNI: _vnni, KERN_AVX512: _avx512), else (or in a
 * build without it, where kern_isa_best never names that set) the AVX2
 * one. */
#if defined(FX_HAVE_AVXVNNI)
#define SET_GET_VNNI_(getter, isa, t) (isa) == KERN_AVXVNNI ? getter##_vnni(t) :
#else
#define SET_GET_VNNI_(getter, isa, t)
#endif
#if defined(FX_HAVE_AVX512)
#define SET_GET_512_(getter, isa, t) (isa) == KERN_AVX512 ? getter##_avx512(t) :
#else
#define SET_GET_512_(getter, isa, t)
#endif
#define AVX2_SET_GET(getter, isa, t) (SET_GET_512_(getter, isa, t) SET_GET_VNNI_(getter, isa, t) getter(t))
void kern_qk_avx2_f32(int64_t n, int nh, const float *q, size_t q_stride, int nk,
		      const void *const *k, float *out, size_t out_stride);
void kern_qk_avx2_f16(int64_t n, int nh, const float *q, size_t q_stride, int nk,
		      const void *const *k, float *out, size_t out_stride);
void kern_pv_avx2_f32(int64_t n, int nh, int nk, const float *w, size_t w_stride,
		      const void *const *v, float *out, size_t out_stride, float *tmp);
void kern_pv_avx2_f16(int64_t n, int nh, int nk, const float *w, size_t w_stride,
		      const void *const *v, float *out, size_t out_stride, float *tmp);
#endif

#endif
