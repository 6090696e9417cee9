/* The kernel set: one table of the forward pass's kernels (dot products,
 * rows-in-lanes GEMMs, activation quantizers, attention score / value,
 * GLU, softmax exponentials, f16 rounding), filled once when a context is
 * created (kern_set_init) from kernels/generic/ (the portable C, the
 * oracle) and, where the CPU runs them, kernels/x86/. Operators read the
 * table they are handed (through the thread pool); nothing looks a kernel
 * up per token, and a future backend fills the same table.
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
#ifndef FX_KERNELS_KERN_H
#define FX_KERNELS_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/quant.h"

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
	/* The AVX-512 set whose x8 matrix products of more than KERN_NT_MAX
	 * activation rows (q4_0, q4_1, q5_0, q8_0, q4_K, q6_K) run on the
	 * AMX tile unit (AMX-TILE + AMX-INT8: Sapphire Rapids and later
	 * Xeons) when Linux grants the process the tile state (dot_amx.c):
	 * the same integer sums and float steps, the AVX-512 set's results
	 * bit for bit. */
	KERN_AMX = 4,
};

/* Most activation rows one kernel call takes. */
#define KERN_NT_MAX 8

/* out[t * out_stride] = dot(w, act + t * act_stride) for t < nt
 * (1 <= nt <= KERN_NT_MAX). w: one row of n elements of the weight type;
 * act: rows of the type's vec_dot_type (q8_0/q8_1/q8_K blocks or
 * f32/f16/bf16) in the kernel set's activation layout (act_quant),
 * act_stride bytes apart. n is a multiple of the block size. */
typedef void (*kern_dot_fn)(int64_t n, const void *w, const void *act, size_t act_stride,
			    int nt, float *out, size_t out_stride);

/* Activation rows as a set's kernels read them: bytes of one row of n
 * elements of activation type vdt (a weight type's vec_dot_type), and its
 * conversion from f32 x[n] (the type table's quantizer, or an ISA form of it
 * that gives the same bytes, then any extras).
 * Portable rows are the type's own blocks. AVX2 rows of q8_0 / q8_1 are
 * those blocks followed, each at the next 32-byte boundary, by two arrays
 * of one entry per block: d as f32, then s as f32 (q8_1) or -128 *
 * sum(qs) as int32 (q8_0). Kernels read them with one load instead of
 * converting halves or summing bytes per block; they are the blocks' own
 * values, so no result changes, and the portable vec_dot reads such a row
 * as a plain one. The q8_0 entry is where an integer block sum against
 * offset codes starts (q8_0's stored w + 128 under VNNI; q4_0's and
 * q5_0's, offset 8 and 16, take it shifted right by 4 and 3): a chain
 * that starts from a broadcast load needs no subtraction per block and
 * activation row (bench_kernels -t 1 -k 2048 -m 2048 -n 512, AVX-512
 * q8_0: 143 -> 157 GMAC/s). */

/* Byte offsets in an AVX2 q8_0/q8_1 activation row whose nb blocks take
 * blocks_bytes: of the d array, and of the second array (s or -128 * sums). */
static inline size_t kern_act_d_off(size_t blocks_bytes)
{
	return (blocks_bytes + 31) & ~(size_t)31;
}
static inline size_t kern_act_s_off(size_t blocks_bytes, int64_t nb)
{
	return kern_act_d_off(blocks_bytes) + (((size_t)nb * sizeof(float) + 31) & ~(size_t)31);
}
/* A set's activation quantizer: x[n] f32 -> one row in its layout. */
typedef void (*kern_act_fn)(const float *x, void *row, int64_t n);

/* out[t * out_stride + r] = dot(row r, act + t * act_stride) for r < nr
 * (any number of weight rows) and t < nt (any number of activation rows,
 * laid out as for kern_dot_fn). Plain rows: row r at w + r * w_stride.
 * x8 groups (struct kern_set's gemm_x8): nr a multiple of 8, group g (rows 8g..
 * 8g+7) at w + 8 * g * w_stride, where its eight plain rows were. A
 * kernel of this form computes eight (AVX-512: sixteen) rows in SIMD
 * lanes; each (row, activation row) result is the same whatever nr, nt
 * or the rows' grouping. */
typedef void (*kern_gemm_fn)(int64_t n, const void *w, size_t w_stride, int nr, const void *act,
			     size_t act_stride, int nt, float *out, size_t out_stride);


/* out[h * out_stride + e] += sum over r < nk of w[h * w_stride + r] * v[r][e]
 * for h < nh, e < n: attention's weighted sum of a chunk of V rows for the
 * query heads sharing one KV head. v[r] is a row of KV cache type t (f32 or
 * f16 natively; q8_0 is converted through tmp[n] first). Per element the
 * rows are added in order r = 0, 1, ..., one update each, so every out row
 * receives the same operations whatever nh or the chunking of the keys. The
 * AVX2 set keeps the heads' sums in registers across the chunk. */
typedef void (*kern_pv_fn)(int64_t n, int nh, int nk, const float *w, size_t w_stride,
			   const void *const *v, float *out, size_t out_stride, float *tmp);

/* out[h * out_stride + r] = dot(q + h * q_stride, k[r]) over n elements
 * for h < nh, r < nk (q_stride in floats): attention scores of the query
 * heads sharing one KV head against a chunk of K rows of cache type t (f32,
 * or f16 converted once for all heads). For an f16 cache the caller passes
 * Q already rounded to f16 values (round_f16), as llama.cpp rounds Q for
 * its f16 K dot product: once per token, not once per chunk. Each score's
 * summation order depends only on n, not on nh, nk or the key's place in
 * the chunk. Only the AVX2 set has them, for n a multiple of 8 up to
 * KERN_QK_MAX_DIM (kern_qk_for); otherwise the dot kernels score keys. */
enum { KERN_QK_MAX_DIM = 512 };
typedef void (*kern_qk_fn)(int64_t n, int nh, const float *q, size_t q_stride, int nk,
			   const void *const *k, float *out, size_t out_stride);

/* y[i] = x[i] rounded to the nearest binary16 value (ties to even, as
 * F16C's vcvtps2ph), back in binary32, for i < n; x == y allowed. The
 * AVX2 set converts with F16C, the portable one in integer steps
 * (quant/blocks.h): the same bits. */
typedef void (*kern_round_fn)(const float *x, float *y, int64_t n);

/* g[i] = act(g[i]) * u[i] for i < n: the GLU of a feed-forward block.
 * KERN_GLU_SILU: silu (x * sigmoid x); KERN_GLU_GELU: GELU's tanh form,
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). The portable forms call
 * libm (kernels/generic); ISA forms use a vector exp good to about 2e-7
 * relative, the same for every element whatever n or the slice
 * boundaries. */
enum kern_glu { KERN_GLU_SILU, KERN_GLU_GELU, KERN_GLU_COUNT };
typedef void (*kern_glu_fn)(float *g, const float *u, long n);

/* One chunk of an online softmax (Milakov & Gimelshein 2018) for nh heads
 * at once. Head h's n scores s[h * ss + i] (i < n) are multiplied by scale
 * in place. Where their maximum (NaNs skipped) exceeds the running max
 * m[h], m[h] becomes it and l[h] is multiplied by r[h] = e^(m_old - m_new)
 * (0 when m_old is -inf); else r[h] = 1. Then each score becomes the
 * weight e^(s - m[h]) and l[h] adds the chunk's sum. The e^x and the
 * sum's order are kernels/softmax.h's for every set (the portable form
 * calls its scalar functions, the AVX2 form repeats them eight lanes at a
 * time), so all sets give the same bits on any libm. */
typedef void (*kern_softmax_fn)(float *s, size_t ss, int nh, int n, float scale, float *m, float *l,
				float *r);

/* One kernel set, by weight / cache / activation type (enum fx_type). A
 * NULL dot / gemm / gemm_x8 / qk entry means the set has none for that
 * type: matmul then uses the next form (gemm, then dot, then the type
 * table's vec_dot, one row pair per call), attention the dot kernels.
 * Every other entry is always set. Plain data: copy it, keep it anywhere
 * (a context keeps its own). */
struct kern_set {
	enum kern_isa isa;
	/* activation rows carry the AVX2 scale arrays (q8_0 / q8_1) */
	bool act_arrays;
	kern_act_fn act_quant[FX_TYPE_COUNT]; /* by vec_dot_type */
	kern_dot_fn dot[FX_TYPE_COUNT];
	kern_gemm_fn gemm[FX_TYPE_COUNT];
	/* x8 groups (kernels/repack.h): for calls of many activation rows,
	 * and for calls of at most KERN_NT_MAX (kern_gemm_x8_for) */
	kern_gemm_fn gemm_x8[FX_TYPE_COUNT], gemm_x8_few[FX_TYPE_COUNT];
	kern_qk_fn qk[FX_TYPE_COUNT];  /* by K cache type */
	kern_pv_fn pv[FX_TYPE_COUNT];  /* by V cache type: f32, f16, q8_0 */
	kern_glu_fn glu[KERN_GLU_COUNT];
	kern_softmax_fn softmax;
	kern_round_fn round_f16;
	/* most activation rows op_matmul hands one kernel call (its token
	 * block): KERN_NT_MAX, the AMX set 64 (its tile kernels form each
	 * block's B tile once a call: bench_kernels q4_1 / q8_0 2048 x 2048
	 * x 512 tokens, one thread, 1.27x / 1.38x the AVX-512 set at 64, no
	 * better at 128; the AVX-512 set was fastest at 8) */
	int tok_block;
	/* most weight bytes op_matmul gives a thread at a time when a call
	 * has several token blocks, so they stay in L2 while the blocks pass:
	 * 96 KiB, the AMX set 512 KiB (its kernels put a call's weights in
	 * tile form once per token block, and the block's activations are
	 * what must stay near: q6_K 2048 x 5632 x 512 tokens, -t 2, ~227 ->
	 * 250-296 GMAC/s; Sapphire Rapids and later have 2 MiB of L2) */
	size_t chunk_bytes;
};

/* Fill *ks with set isa. Errors: FX_E_UNSUPPORTED when this CPU cannot
 * run isa or this build lacks it: *ks is then the portable set (so a
 * caller that goes on computes with the oracle). */
int kern_set_init(struct kern_set *ks, enum kern_isa isa);

/* The best kernel set this CPU runs and this build has: KERN_AMX, KERN_AVX512, then
 * KERN_AVXVNNI, then KERN_AVX2 (each needing its features, see above);
 * KERN_PORTABLE otherwise or on other architectures. Reads CPUID (tens of
 * microseconds under a hypervisor): call it when setting up, not per token. */
enum kern_isa kern_isa_best(void);

/* The set a context's fx_context_params.kernels asks for (enum
 * fx_kernels): AUTO is kern_isa_best(). Errors: FX_E_INVALID (not an enum
 * value), FX_E_UNSUPPORTED (this CPU or build lacks the set; the message
 * names what runs). */
struct fx_err;
int kern_isa_of(int32_t kernels, enum kern_isa *isa, struct fx_err *err);

/* Set isa's name as fx_kernels_built lists it ("avx2", ...). */
const char *kern_isa_name(enum kern_isa isa);

/* Whether this CPU runs set isa (and the build has it). */
bool kern_isa_runs(enum kern_isa isa);

/* Bytes of one activation row of n elements of type vdt in ks's layout;
 * kern_act_row_bytes_max: the largest any set uses (scratch sizing). */
size_t kern_act_row_bytes(const struct kern_set *ks, int vdt, int64_t n);
size_t kern_act_row_bytes_max(int vdt, int64_t n);

/* ks's score kernel for K cache type t and head size n, or NULL. */
static inline kern_qk_fn kern_qk_for(const struct kern_set *ks, int t, int64_t n)
{
	return n % 8 == 0 && n <= KERN_QK_MAX_DIM ? ks->qk[t] : NULL;
}

/* ks's x8 kernel for a call with n_tok activation rows. The AVX-512 set's
 * few-row entry is its 256-bit kernel (dot_avx2.c's EVEX build, the same
 * results): a decode step's call passes over each weight once, and
 * measured on a Sapphire Rapids-class Xeon (docs/BENCHMARKS.md) the 512-bit
 * kernels made SmolLM2's and Gemma 3's eight-sequence steps 10% and 6%
 * slower there (while faster alone in bench_kernels, and for prefill,
 * where a chunk's weights serve many token blocks from L2). */
static inline kern_gemm_fn kern_gemm_x8_for(const struct kern_set *ks, int t, int64_t n_tok)
{
	return n_tok <= KERN_NT_MAX ? ks->gemm_x8_few[t] : ks->gemm_x8[t];
}

#endif
