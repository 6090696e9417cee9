/* ISA kernels (src/kernels/x86) against the portable oracle
 * (src/kernels/generic and the type table), through the kernel-set tables
 * kern_set_init fills (kernels/kern.h).
 *
 * For every weight type with a SIMD kernel, on random rows of several
 * block counts:
 * - the kernel's sum equals the type table's portable vec_dot to 2e-6 of
 *   the sum of |terms| (they differ only in the order of float additions);
 * - with nt = 1..KERN_NT_MAX activation rows at once, every row's result is
 *   bit-identical to the same row alone (batch invariance);
 * - attention's axpy matches the scalar form.
 * On an x86-64 CPU with AVX2/FMA/F16C the AVX2 set must be selected and
 * present for every listed type: the test fails, never skips, there.
 */
#include "check.h"
#include "ferrox.h"
#include "core/alloc.h"
#include "kernels/kern.h"
#include "kernels/ops.h"
#include "kernels/repack.h"
#include "quant/blocks.h"
#include "quant/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static float rng_f(uint64_t *s)
{
	return (float)((double)(rng_next(s) >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static const int types[] = {
	FX_TYPE_F32, FX_TYPE_F16, FX_TYPE_BF16, FX_TYPE_Q4_0, FX_TYPE_Q4_1, FX_TYPE_Q5_0,
	FX_TYPE_Q8_0, FX_TYPE_Q4_K, FX_TYPE_Q5_K, FX_TYPE_Q6_K,
};

/* Every set's table, filled once by main (check_tables) before any check
 * reads it: a set the CPU cannot run holds the portable kernels. */
static struct kern_set sets[KERN_AMX + 1];

static const struct kern_set *set_of(enum kern_isa isa)
{
	return &sets[isa];
}

/* One type at n elements: weights and KERN_NT_MAX activation rows. */
static void check_type(enum kern_isa isa, int type, int64_t n, uint64_t *rng)
{
	const struct fx_type_traits *tt = fx_type_get(type);
	const struct fx_type_traits *vt = fx_type_get(tt->vec_dot_type);
	kern_dot_fn k = set_of(isa)->dot[type];
	CHECKF(k != NULL, "%s: no kernel", tt->name);
	if (!k)
		return;
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(set_of(isa), tt->vec_dot_type, n);
	float *wf = malloc((size_t)n * sizeof(float)), *af = malloc((size_t)n * sizeof(float));
	float *wd = malloc((size_t)n * sizeof(float)), *ad = malloc((size_t)n * sizeof(float));
	uint8_t *w = malloc(wb), *a = malloc(ab * KERN_NT_MAX);
	for (int64_t i = 0; i < n; i++)
		wf[i] = rng_f(rng) * (i % 7 == 0 ? 4.0f : 1.0f); /* uneven blocks */
	tt->from_float(wf, w, n);
	tt->to_float(w, wd, n);
	float alone[KERN_NT_MAX];
	for (int t = 0; t < KERN_NT_MAX; t++) {
		for (int64_t i = 0; i < n; i++)
			af[i] = rng_f(rng) * (t + 1);
		set_of(isa)->act_quant[tt->vec_dot_type](af, a + (size_t)t * ab, n);
		vt->to_float(a + (size_t)t * ab, ad, n);
		double mag = 0;
		for (int64_t i = 0; i < n; i++)
			mag += fabs((double)wd[i] * ad[i]);
		float ref;
		tt->vec_dot(n, &ref, w, a + (size_t)t * ab);
		k(n, w, a + (size_t)t * ab, ab, 1, &alone[t], 1);
		CHECKF(fabs((double)alone[t] - ref) <= 2e-6 * mag + 1e-30,
		       "%s n=%lld row %d: kernel %.9g vs portable %.9g (|terms| %.3g)", tt->name,
		       (long long)n, t, alone[t], ref, mag);
	}
	for (int nt = 1; nt <= KERN_NT_MAX; nt++) {
		for (int t0 = 0; t0 + nt <= KERN_NT_MAX; t0++) {
			float out[2 * KERN_NT_MAX];
			k(n, w, a + (size_t)t0 * ab, ab, nt, out, 2);
			for (int t = 0; t < nt; t++)
				CHECKF(memcmp(&out[2 * t], &alone[t0 + t], sizeof(float)) == 0,
				       "%s n=%lld nt=%d row %d: %.9g vs alone %.9g", tt->name,
				       (long long)n, nt, t0 + t, out[2 * t], alone[t0 + t]);
		}
	}
	free(wf);
	free(af);
	free(wd);
	free(ad);
	free(w);
	free(a);
}

/* nw random weight rows of type t (rows of uneven magnitude) into w and
 * na activation rows in the set's layout into a, n elements each. */
static void random_rows(enum kern_isa isa, int t, int64_t n, uint8_t *w, int nw, uint8_t *a, int na,
			uint64_t *rng)
{
	const struct fx_type_traits *tt = fx_type_get(t);
	size_t wb = fx_row_size(t, n), ab = kern_act_row_bytes(set_of(isa), tt->vec_dot_type, n);
	float *f = malloc((size_t)n * sizeof(float));
	for (int r = 0; r < nw; r++) {
		for (int64_t i = 0; i < n; i++)
			f[i] = rng_f(rng) * (i % 5 == 0 ? 3.0f : 1.0f) * (float)(r + 1);
		tt->from_float(f, w + (size_t)r * wb, n);
	}
	for (int r = 0; r < na; r++) {
		for (int64_t i = 0; i < n; i++)
			f[i] = rng_f(rng) * (float)(r + 1);
		set_of(isa)->act_quant[tt->vec_dot_type](f, a + (size_t)r * ab, n);
	}
	free(f);
}

/* sum |w_i * a_i| over a weight row and an activation row (the scale
 * of a dot product's rounding error). */
static double sum_abs_terms(int type, int64_t n, const void *w, const void *a)
{
	const struct fx_type_traits *tt = fx_type_get(type);
	float *wd = malloc((size_t)n * sizeof(float)), *ad = malloc((size_t)n * sizeof(float));
	tt->to_float(w, wd, n);
	fx_type_get(tt->vec_dot_type)->to_float(a, ad, n);
	double mag = 0;
	for (int64_t i = 0; i < n; i++)
		mag += fabs((double)wd[i] * ad[i]);
	free(wd);
	free(ad);
	return mag;
}

/* Rows-in-lanes kernels (a set's gemm): for any row count 1..11, any
 * activation row count and start, every (row, activation row) result
 * equals the same kernel's one-row result (its dot) bit for bit, and
 * the portable vec_dot: bit for bit when exact, else within 2e-6 of the
 * sum of |terms| as check_type. */
static void check_gemm(enum kern_isa isa, int type, int64_t n, bool exact, uint64_t *rng)
{
	enum { R = 11, T = 11 };
	const struct fx_type_traits *tt = fx_type_get(type);
	kern_gemm_fn g = set_of(isa)->gemm[type];
	CHECKF(g != NULL, "%s: no rows-in-lanes kernel", tt->name);
	if (!g)
		return;
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(set_of(isa), tt->vec_dot_type, n);
	uint8_t *w = malloc(wb * R), *a = malloc(ab * T);
	random_rows(isa, type, n, w, R, a, T, rng);
	float ref[T][R];
	kern_dot_fn one = set_of(isa)->dot[type];
	for (int t = 0; t < T; t++) {
		for (int r = 0; r < R; r++) {
			float port;
			tt->vec_dot(n, &port, w + (size_t)r * wb, a + (size_t)t * ab);
			one(n, w + (size_t)r * wb, a + (size_t)t * ab, ab, 1, &ref[t][r], 1);
			if (exact)
				CHECKF(memcmp(&port, &ref[t][r], sizeof(float)) == 0,
				       "%s n=%lld row %d act %d: %.9g vs portable %.9g", tt->name,
				       (long long)n, r, t, ref[t][r], port);
			else
				CHECKF(fabs((double)port - ref[t][r]) <= 2e-6 * sum_abs_terms(type, n, w + (size_t)r * wb, a + (size_t)t * ab) + 1e-30,
				       "%s n=%lld row %d act %d: %.9g vs portable %.9g", tt->name,
				       (long long)n, r, t, ref[t][r], port);
		}
	}
	for (int nr = 1; nr <= R; nr++) { /* past 8: the rows in two calls' worth */
		for (int r0 = 0; r0 + nr <= R; r0 += 3) {
			for (int nt = 1; nt <= T; nt += 3) {
				float out[T][R];
				memset(out, 0xff, sizeof(out));
				g(n, w + (size_t)r0 * wb, wb, nr, a, ab, nt, &out[0][0], R);
				for (int t = 0; t < nt; t++)
					for (int r = 0; r < nr; r++)
						CHECKF(memcmp(&out[t][r], &ref[t][r0 + r], sizeof(float)) == 0,
						       "%s n=%lld nr=%d row %d act %d: %.9g vs one row %.9g",
						       tt->name, (long long)n, nr, r0 + r, t, out[t][r],
						       ref[t][r0 + r]);
			}
		}
	}
	/* The x8 layout: rows 0..7 repacked give the same results through the
	 * x8 kernel, and unpack back to the plain rows. */
	if (set_of(isa)->gemm_x8[type]) {
		uint8_t *g = malloc(8 * wb), *tmp = malloc(8 * wb), *row = malloc(wb);
		memcpy(g, w, 8 * wb);
		kern_x8_pack(type, n, g, tmp);
		for (int r = 0; r < 8; r++) {
			kern_x8_unpack_row(type, n, g, r, row);
			CHECKF(memcmp(row, w + (size_t)r * wb, wb) == 0, "%s n=%lld: x8 row %d does not unpack",
			       tt->name, (long long)n, r);
		}
		kern_gemm_fn gx = set_of(isa)->gemm_x8[type];
		for (int nt = 1; nt <= T; nt += 2) {
			float out[T][8];
			gx(n, g, wb, 8, a, ab, nt, &out[0][0], 8);
			for (int t = 0; t < nt; t++)
				for (int r = 0; r < 8; r++)
					CHECKF(memcmp(&out[t][r], &ref[t][r], sizeof(float)) == 0,
					       "%s n=%lld x8 nt=%d row %d act %d: %.9g vs plain %.9g", tt->name,
					       (long long)n, nt, r, t, out[t][r], ref[t][r]);
		}
		free(g);
		free(tmp);
		free(row);
	} else {
		CHECKF(false, "%s: no x8 layout", tt->name);
	}
	free(w);
	free(a);
}

/* x8 kernels without a plain-row counterpart (q6_K): repacked rows give
 * the portable vec_dot's value within 2e-6 of the sum of |terms|, and the
 * same bits whatever the number of activation rows per call. */
static void check_x8_only(enum kern_isa isa, int type, int64_t n, uint64_t *rng)
{
	enum { T = 11 };
	const struct fx_type_traits *tt = fx_type_get(type);
	kern_gemm_fn gx = set_of(isa)->gemm_x8[type];
	CHECKF(gx != NULL, "%s: no x8 kernel", tt->name);
	if (!gx)
		return;
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(set_of(isa), tt->vec_dot_type, n);
	uint8_t *w = malloc(wb * 8), *g = malloc(wb * 8), *tmp = malloc(wb * 8), *a = malloc(ab * T);
	random_rows(isa, type, n, w, 8, a, T, rng);
	memcpy(g, w, 8 * wb);
	kern_x8_pack(type, n, g, tmp);
	float all[T][8];
	gx(n, g, wb, 8, a, ab, T, &all[0][0], 8);
	for (int t = 0; t < T; t++) {
		float one[8];
		gx(n, g, wb, 8, a + (size_t)t * ab, ab, 1, one, 8);
		for (int r = 0; r < 8; r++) {
			float port;
			tt->vec_dot(n, &port, w + (size_t)r * wb, a + (size_t)t * ab);
			CHECKF(fabs((double)port - all[t][r]) <=
				       2e-6 * sum_abs_terms(type, n, w + (size_t)r * wb, a + (size_t)t * ab) + 1e-30,
			       "%s n=%lld x8 row %d act %d: %.9g vs portable %.9g", tt->name, (long long)n, r,
			       t, all[t][r], port);
			CHECKF(memcmp(&one[r], &all[t][r], sizeof(float)) == 0,
			       "%s n=%lld x8 row %d act %d: %.9g alone vs %.9g in a batch", tt->name,
			       (long long)n, r, t, one[r], all[t][r]);
		}
	}
	free(w);
	free(g);
	free(tmp);
	free(a);
}

/* Sets a and b (both run by this CPU) give the same bits for weight type
 * t's rows-in-lanes kernels, plain (where the type has one) and x8, for
 * every activation row count, over 24 rows: three x8 groups, which the
 * AVX-512 set takes as a pair in one register and a last one alone. The
 * later sets' promise; for q4_K and q6_K, whose kernels do not equal the
 * portable vec_dot bit for bit, the only bit-for-bit check. */
static void check_sets_agree(enum kern_isa a, enum kern_isa b, int type, int64_t n, uint64_t *rng)
{
	enum { T = 11, R = 24 };
	const struct fx_type_traits *tt = fx_type_get(type);
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(set_of(a), tt->vec_dot_type, n);
	CHECK(ab == kern_act_row_bytes(set_of(b), tt->vec_dot_type, n));
	uint8_t *w = malloc(wb * R), *tmp = malloc(wb * 8), *act = malloc(ab * T);
	random_rows(a, type, n, w, R, act, T, rng);
	for (int x8 = 0; x8 < 2; x8++) {
		if (x8)
			for (int r = 0; r < R; r += 8)
				kern_x8_pack(type, n, w + (size_t)r * wb, tmp);
		kern_gemm_fn ga = x8 ? set_of(a)->gemm_x8[type] : set_of(a)->gemm[type];
		kern_gemm_fn gb = x8 ? set_of(b)->gemm_x8[type] : set_of(b)->gemm[type];
		CHECKF(!ga == !gb && (ga == NULL || ga != gb), "%s x8=%d: sets %d and %d", tt->name, x8,
		       (int)a, (int)b);
		if (!ga || !gb)
			continue;
		/* and b's kernel for calls of few activation rows (the
		 * AVX-512 set's 256-bit ones) */
		kern_gemm_fn gn = x8 ? kern_gemm_x8_for(set_of(b), type, 1) : gb;
		CHECKF(gn != NULL && (b < KERN_AVX512 || !x8 || gn != gb), "%s: set %d's x8 kernel for one row",
		       tt->name, (int)b);
		/* prefill-sized calls get the set's own x8 kernel (AVX-512: the
		 * 512-bit one) */
		CHECKF(!x8 || kern_gemm_x8_for(set_of(b), type, KERN_NT_MAX + 1) == gb, "%s: set %d's x8 kernel for %d rows",
		       tt->name, (int)b, KERN_NT_MAX + 1);
		for (int nt = 1; nt <= T && gn; nt++) {
			for (int nr = 8; nr <= R; nr += 8) {
				float oa[T][R], ob[T][R], on[T][R];
				memset(oa, 0xff, sizeof(oa));
				memset(ob, 0xff, sizeof(ob));
				memset(on, 0xff, sizeof(on));
				ga(n, w, wb, nr, act, ab, nt, &oa[0][0], R);
				gb(n, w, wb, nr, act, ab, nt, &ob[0][0], R);
				gn(n, w, wb, nr, act, ab, nt, &on[0][0], R);
				CHECKF(memcmp(oa, ob, (size_t)nt * sizeof(oa[0])) == 0 &&
					       memcmp(oa, on, (size_t)nt * sizeof(oa[0])) == 0,
				       "%s n=%lld x8=%d nt=%d nr=%d: sets %d and %d differ", tt->name, (long long)n, x8,
				       nt, nr, (int)a, (int)b);
			}
		}
	}
	free(w);
	free(tmp);
	free(act);
}

/* The AMX set's tile kernels against the AVX-512 set's x8 kernels, bit
 * for bit: activation rows around the tile kernels' blocks of 16 and 8
 * and the AVX-512 tails after them (9, 15..17, 23..25, 31..33, 40), pairs
 * of groups and a last single group (8..40 weight rows), one block, odd
 * block counts and more than one AMX_SLICE of blocks (n = 32, 96, 640,
 * 2048: 1, 3, 20, 64 blocks). With extremes, every code at its bound (q8_0
 * +-127, 4-bit 0 and 15) against activation rows of +-127, where a wrong
 * signedness of either tile operand or a lost offset shows. Calls of at most KERN_NT_MAX rows take the
 * AVX-512 set's own kernel. */
static void check_amx(int type, int64_t n, bool extremes, uint64_t *rng)
{
	enum { T = 40, R = 40 };
	static const int nts[] = { 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40 };
	const struct fx_type_traits *tt = fx_type_get(type);
	const struct kern_set *a = set_of(KERN_AVX512), *b = set_of(KERN_AMX);
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(a, tt->vec_dot_type, n);
	uint8_t *w = malloc(wb * R), *tmp = malloc(wb * 8), *act = malloc(ab * T);
	float(*oa)[R] = malloc(sizeof(float[T][R])), (*ob)[R] = malloc(sizeof(float[T][R]));
	random_rows(KERN_AVX512, type, n, w, R, act, T, rng);
	if (extremes) {
		float *f = malloc((size_t)n * sizeof(float));
		for (int r = 0; r < R; r++) {
			/* +-1 alternating: codes +-127 (q8_0), 0 and 15 (q4_0,
			 * q4_1), each product of the sign the rows' parities give */
			for (int64_t i = 0; i < n; i++)
				f[i] = (r + i) % 2 ? 1.0f : -1.0f;
			tt->from_float(f, w + (size_t)r * wb, n);
		}
		for (int t = 0; t < T; t++) {
			for (int64_t i = 0; i < n; i++)
				f[i] = (t + i) % 2 ? 1.0f : -1.0f;
			a->act_quant[tt->vec_dot_type](f, act + (size_t)t * ab, n);
		}
		free(f);
	}
	for (int r = 0; r < R; r += 8)
		kern_x8_pack(type, n, w + (size_t)r * wb, tmp);
	CHECKF(b->gemm_x8[type] != a->gemm_x8[type] && b->gemm_x8_few[type] == a->gemm_x8_few[type] &&
	       kern_gemm_x8_for(b, type, KERN_NT_MAX + 1) == b->gemm_x8[type],
	       "%s: the AMX set's x8 kernels", tt->name);
	for (size_t i = 0; i < sizeof(nts) / sizeof(nts[0]); i++) {
		int nt = nts[i];
		for (int nr = 8; nr <= R; nr += 8) {
			memset(oa, 0xff, sizeof(float[T][R]));
			memset(ob, 0xff, sizeof(float[T][R]));
			a->gemm_x8[type](n, w, wb, nr, act, ab, nt, &oa[0][0], R);
			b->gemm_x8[type](n, w, wb, nr, act, ab, nt, &ob[0][0], R);
			bool same = true;
			for (int t = 0; t < nt; t++)
				same &= memcmp(oa[t], ob[t], (size_t)nr * sizeof(float)) == 0;
			CHECKF(same, "%s n=%lld nt=%d nr=%d%s: the AMX set differs from the AVX-512 set", tt->name,
			       (long long)n, nt, nr, extremes ? " (extremes)" : "");
		}
	}
	free(w);
	free(tmp);
	free(act);
	free(oa);
	free(ob);
}

/* The integer sums at their bounds, where maddubs would saturate if the
 * kernels' no-overflow arguments were wrong and where the AVX2 and
 * AVX-VNNI sets could part: every code at its extreme (q8_0 -128, 4-bit
 * 15, q5_0 31, q4_K's 6-bit scales and mins 63, q6_K's codes 63 and
 * scales -128) against activation rows of +-127 whose signs make every
 * product's pair sum as large as it gets; the f16 fields are 1.0. The
 * 32-element types equal the portable vec_dot bit for bit; q4_K and q6_K
 * agree across sets (check_sets_agree's promise) and with the portable
 * sum within 2e-6 of the sum of |terms|. */
static void check_extremes(enum kern_isa isa, int type, int64_t n)
{
	enum { T = 9, R = 16 }; /* two x8 groups: one AVX-512 register */
	const struct fx_type_traits *tt = fx_type_get(type);
	size_t wb = fx_row_size(type, n), ab = kern_act_row_bytes(set_of(isa), tt->vec_dot_type, n);
	size_t bs = tt->type_size;
	uint8_t *w = malloc(R * wb), *g8 = malloc(R * wb), *tmp = malloc(8 * wb), *act = malloc(ab * T);
	float *x = malloc((size_t)n * sizeof(float));
	/* Offsets of the f16 fields set to 1.0 in each block. */
	size_t f16[2] = { 0, SIZE_MAX };
	int fill = 0xFF;
	if (type == FX_TYPE_Q8_0)
		fill = 0x80;
	if (type == FX_TYPE_Q4_1 || type == FX_TYPE_Q4_K)
		f16[1] = 2;
	if (type == FX_TYPE_Q6_K)
		f16[0] = offsetof(struct block_q6_K, d);
	memset(w, fill, R * wb);
	if (type == FX_TYPE_Q6_K) /* scales -128: the largest |scale| */
		for (int64_t b = 0; b < R * n / QK_K; b++)
			memset(w + (size_t)b * bs + offsetof(struct block_q6_K, scales), 0x80, QK_K / 16);
	for (int64_t b = 0; b < R * n / tt->blck_size; b++)
		for (int f = 0; f < 2; f++)
			if (f16[f] != SIZE_MAX)
				memcpy(w + (size_t)b * bs + f16[f], &(fx_half){ 0x3C00 }, sizeof(fx_half));
	/* Activation rows: all +1 (q8 codes 127), all -1, and alternating
	 * runs, so every sign meets every extreme weight. */
	for (int t = 0; t < T; t++) {
		for (int64_t i = 0; i < n; i++)
			x[i] = t == 0 ? 1.0f : t == 1 ? -1.0f : ((i >> (t - 2)) & 1) ? -1.0f : 1.0f;
		set_of(isa)->act_quant[tt->vec_dot_type](x, act + (size_t)t * ab, n);
	}
	float port[T][R];
	for (int t = 0; t < T; t++)
		for (int r = 0; r < R; r++)
			tt->vec_dot(n, &port[t][r], w + (size_t)r * wb, act + (size_t)t * ab);
	memcpy(g8, w, R * wb);
	for (int r = 0; r < R; r += 8)
		kern_x8_pack(type, n, g8 + (size_t)r * wb, tmp);
	for (int x8 = 0; x8 < 2; x8++) {
		kern_gemm_fn k = x8 ? set_of(isa)->gemm_x8[type] : set_of(isa)->gemm[type];
		if (!k)
			continue;
		float out[T][R];
		k(n, x8 ? g8 : w, wb, R, act, ab, T, &out[0][0], R);
		if (isa > KERN_AVX2) { /* the same bits as the AVX2 set's */
			kern_gemm_fn k2 = x8 ? set_of(KERN_AVX2)->gemm_x8[type] : set_of(KERN_AVX2)->gemm[type];
			float out2[T][R];
			k2(n, x8 ? g8 : w, wb, R, act, ab, T, &out2[0][0], R);
			CHECKF(memcmp(out, out2, sizeof(out)) == 0, "%s n=%lld extremes x8=%d: sets %d and %d differ",
			       tt->name, (long long)n, x8, (int)isa, (int)KERN_AVX2);
		}
		for (int t = 0; t < T; t++)
			for (int r = 0; r < R; r++) {
				bool exact = tt->blck_size == 32;
				double tol = exact ? 0 : 2e-6 * sum_abs_terms(type, n, w + (size_t)r * wb, act + (size_t)t * ab);
				CHECKF(exact ? memcmp(&out[t][r], &port[t][r], sizeof(float)) == 0
					     : fabs((double)out[t][r] - port[t][r]) <= tol,
				       "%s n=%lld extremes set %d x8=%d act %d row %d: %.9g vs portable %.9g", tt->name,
				       (long long)n, (int)isa, x8, t, r, out[t][r], port[t][r]);
			}
	}
	free(w);
	free(g8);
	free(tmp);
	free(act);
	free(x);
}

/* GLU rows: the set's silu / GELU match the portable (libm) forms within
 * 1e-6 relative (plus the portable GELU's own cancellation error) over
 * ordinary and extreme inputs,
 * and an element's value is the same whether it is computed in a long row
 * or alone (slices never change results). */
static void check_glu(enum kern_isa isa, uint64_t *rng)
{
	enum { N = 77 };
	for (int act = KERN_GLU_SILU; act <= KERN_GLU_GELU; act++) {
		kern_glu_fn f = set_of(isa)->glu[(enum kern_glu)act];
		kern_glu_fn ref = set_of(KERN_PORTABLE)->glu[(enum kern_glu)act];
		float g[N], u[N], a[N], b[N];
		for (int i = 0; i < N; i++) {
			g[i] = rng_f(rng) * (i < 20 ? 4.0f : i < 40 ? 20.0f : 1.0f);
			u[i] = rng_f(rng);
		}
		g[0] = 0.0f;
		g[1] = -100.0f;
		g[2] = 100.0f;
		g[3] = 1e-6f;
		g[4] = -88.5f;
		memcpy(a, g, sizeof(g));
		memcpy(b, g, sizeof(g));
		f(a, u, N);
		ref(b, u, N);
		for (int i = 0; i < N; i++) {
			/* libm's 1 + tanh(z) loses digits where tanh z is near -1:
			 * allow its rounding there (2e-7 of |g u|). */
			CHECKF(fabsf(a[i] - b[i]) <= 1e-6f * fabsf(b[i]) + 2e-7f * fabsf(g[i] * u[i]) + 1e-30f,
			       "glu %d x=%g: %.9g vs portable %.9g", act, g[i], a[i], b[i]);
			float one = g[i];
			f(&one, &u[i], 1);
			CHECKF(memcmp(&one, &a[i], sizeof(float)) == 0, "glu %d x=%g: %.9g alone vs %.9g in a row",
			       act, g[i], one, a[i]);
		}
	}
}

/* Activation quantizers of the set (act_quant): the same bytes as
 * the type table's reference quantizer, on random rows and on rows with
 * exact halves (roundf ties away from zero for q8_0/q8_1, nearest_int to
 * even for q8_K), zeros, and a largest magnitude that occurs twice; and
 * the whole row (its d and sum arrays too) as the AVX2 set's, also for
 * rows the reference has no defined result for (infinities, NaNs, a block
 * so small that 1 / d overflows). Rows of 2, 39 and 32 blocks (q8_K: 1,
 * 5 and 4 superblocks): the AVX-512 quantizers take 16 blocks at a time. */
static void check_act_quant(enum kern_isa isa, uint64_t *rng)
{
	static const int vdts[] = { FX_TYPE_Q8_0, FX_TYPE_Q8_1, FX_TYPE_Q8_K };
	static const int64_t n32[] = { 64, 1248, 1024 }, n256[] = { 256, 1280, 1024 };
	enum { NMAX = 1280 };
	float x[NMAX];
	for (size_t v = 0; v < sizeof(vdts) / sizeof(vdts[0]); v++)
		for (int si = 0; si < 3; si++) {
			int vdt = vdts[v];
			const int64_t N = vdt == FX_TYPE_Q8_K ? n256[si] : n32[si];
			size_t rb = fx_row_size(vdt, N), kb = kern_act_row_bytes(set_of(isa), vdt, N);
			CHECK(kb == kern_act_row_bytes(set_of(KERN_AVX2), vdt, N));
			uint8_t *a = calloc(1, kb), *b = malloc(rb), *c = calloc(1, kb);
			for (int pass = 0; pass < 8; pass++) {
				for (int i = 0; i < N; i++)
					x[i] = rng_f(rng) * (float)(1 + pass * 3);
				if (pass == 1) /* ties: the block max 127 makes id 1 (q8_0) */
					for (int i = 0; i < N; i++)
						x[i] = i % 32 == 0 ? 127.0f : (float)(i % 11) - 5.5f;
				if (pass == 2) { /* a zero block; then -9 and 9 the largest of theirs */
					for (int i = 0; i < 256 && i < N; i++)
						x[i] = i < 32 || N > 256 ? 0.0f : x[i];
					x[N - 20] = -9.0f;
					x[N - 19] = 9.0f;
				}
				if (pass == 4) /* the largest magnitude last in its block, then first */
					for (int i = 0; i < N; i += 256) {
						x[i + 255 < N ? i + 255 : N - 1] = 50.0f;
						x[i + 256 < N ? i + 256 : 0] = -50.0f;
					}
				if (pass == 5) { /* infinities */
					x[3] = INFINITY;
					x[N - 1] = -INFINITY;
				}
				if (pass == 6) /* NaNs: a block's first element, its last (the
						* last vector of a max, where NaN order shows) */
					x[0] = x[N / 2 + 5] = x[255] = x[N - 3] = NAN;
				if (pass == 7) /* a block below 1 / FLT_MAX, one denormal */
					for (int i = 0; i < 32; i++)
						x[i] = i == 7 ? 1e-42f : x[i] * 1e-38f;
				set_of(isa)->act_quant[vdt](x, a, N);
				if (pass < 5) {
					fx_type_get(vdt)->from_float(x, b, N);
					CHECKF(memcmp(a, b, rb) == 0,
					       "set %d, %s n %d pass %d: quantized bytes differ from the reference", (int)isa,
					       fx_type_get(vdt)->name, (int)N, pass);
				}
				set_of(KERN_AVX2)->act_quant[vdt](x, c, N);
				CHECKF(memcmp(a, c, kb) == 0, "set %d, %s n %d pass %d: the row differs from the AVX2 set's",
				       (int)isa, fx_type_get(vdt)->name, (int)N, pass);
			}
			free(a);
			free(b);
			free(c);
		}
}

/* Attention's V accumulation, a chunk of K rows for nh heads at once
 * (nh = 3, 4, 10: every register tiling; 10 spans two groups of 8;
 * n = 72 and 75: multi-slice steps, single slices and a scalar tail):
 * each head's row gets out + sum w * v within 1e-6, and bit for bit what
 * it gets alone, or row by row. */
static void check_pv(enum kern_isa isa, uint64_t *rng)
{
	enum { N = 75, H = 10, K = 5 };
	static float v32[K][N], tmp[N], out[H][N], ref[H][N], one[N];
	static uint16_t v16[K][N];
	float w[H][K];
	for (int r = 0; r < K; r++)
		for (int i = 0; i < N; i++) {
			v32[r][i] = rng_f(rng);
			v16[r][i] = fx_fp32_to_fp16(v32[r][i]);
		}
	for (int h = 0; h < H; h++) {
		for (int i = 0; i < N; i++)
			ref[h][i] = rng_f(rng);
		for (int r = 0; r < K; r++)
			w[h][r] = 2 * rng_f(rng);
	}
	static const int nhs[] = { 3, 4, H }, ns[] = { 72, N };
	for (int f16 = 0; f16 < 2; f16++)
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 2; b++) {
				int nh = nhs[a], n = ns[b];
				const void *v[K];
				for (int r = 0; r < K; r++)
					v[r] = f16 ? (const void *)v16[r] : (const void *)v32[r];
				kern_pv_fn pv = set_of(isa)->pv[f16 ? FX_TYPE_F16 : FX_TYPE_F32];
				memcpy(out, ref, sizeof(out));
				pv(n, nh, K, &w[0][0], K, v, &out[0][0], N, tmp);
				for (int h = 0; h < nh; h++) {
					memcpy(one, ref[h], sizeof(one));
					for (int r = 0; r < K; r++) /* one head, one row per call */
						pv(n, 1, 1, &w[h][r], 1, &v[r], one, N, tmp);
					for (int i = 0; i < n; i++) {
						double e = ref[h][i], mag = fabsf(ref[h][i]);
						for (int r = 0; r < K; r++) {
							float x = f16 ? fx_fp16_to_fp32(v16[r][i]) : v32[r][i];
							e += (double)w[h][r] * x;
							mag += fabsf(w[h][r] * x);
						}
						CHECK(fabs(out[h][i] - e) <= 1e-6 * (1 + mag));
						CHECK(memcmp(&one[i], &out[h][i], sizeof(float)) == 0);
					}
				}
			}
}

/* Attention scores for nh heads against a chunk of K rows (f32, f16 with
 * Q rounded to f16), nh = 1..9 (every split into head tiles) and n = 64
 * and 136: within 1e-6 of a double sum, and each score bit for bit the
 * same whatever nh, nk or the key's place in the chunk. */
static void check_qk(enum kern_isa isa, uint64_t *rng)
{
	enum { N = 136, H = 9, K = 11 };
	static float k32[K][N], q[H][N], out[H][K], one;
	static uint16_t k16[K][N];
	for (int r = 0; r < K; r++)
		for (int i = 0; i < N; i++) {
			k32[r][i] = rng_f(rng);
			k16[r][i] = fx_fp32_to_fp16(k32[r][i]);
		}
	static float qr[H][N]; /* Q rounded to f16 values, as callers pass it */
	for (int h = 0; h < H; h++) {
		for (int i = 0; i < N; i++)
			q[h][i] = rng_f(rng);
		set_of(isa)->round_f16(q[h], qr[h], N - h); /* N - h: the tails too */
		for (int i = N - h; i < N; i++)
			qr[h][i] = fx_fp16_to_fp32(fx_fp32_to_fp16(q[h][i]));
		for (int i = 0; i < N; i++) {
			float want = fx_fp16_to_fp32(fx_fp32_to_fp16(q[h][i]));
			CHECK(memcmp(&qr[h][i], &want, sizeof(want)) == 0);
		}
	}
	/* Rounding edge cases in both sets: ties, the largest half, overflow
	 * to inf, subnormal halves, zeros, inf and NaN. */
	static const float edge[] = { 1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 65504.0f, 65520.0f, 65519.99f,
				      0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1.8p-14f, -0.0f, 0.0f, -7e-8f,
				      INFINITY, -INFINITY, NAN, 3.14159f, -2.71828f };
	enum { NE = sizeof(edge) / sizeof(edge[0]) };
	for (int set = 0; set < 2; set++) {
		float er[NE];
		set_of(set ? isa : KERN_PORTABLE)->round_f16(edge, er, NE);
		for (int i = 0; i < NE; i++) {
			float want = fx_fp16_to_fp32(fx_fp32_to_fp16(edge[i]));
			CHECKF(memcmp(&er[i], &want, sizeof(want)) == 0, "kern_round_f16 set %d: %a -> %a, want %a",
			       set, (double)edge[i], (double)er[i], (double)want);
		}
	}
	CHECK(kern_qk_for(set_of(isa), FX_TYPE_F16, 60) == NULL); /* not a multiple of 8 */
	CHECK(kern_qk_for(set_of(isa), FX_TYPE_Q8_0, N) == NULL);
	for (int f16 = 0; f16 < 2; f16++) {
		kern_qk_fn qk = kern_qk_for(set_of(isa), f16 ? FX_TYPE_F16 : FX_TYPE_F32, N);
		if (set_of(isa)->isa < KERN_AVX2) {
			CHECK(qk == NULL);
			continue;
		}
		CHECK(qk != NULL);
		const void *k[K];
		for (int r = 0; r < K; r++)
			k[r] = f16 ? (const void *)k16[r] : (const void *)k32[r];
		for (int n = 64; n <= N; n += N - 64)
			for (int nh = 1; nh <= H; nh++) {
				const float *qq = f16 ? &qr[0][0] : &q[0][0];
				qk(n, nh, qq, N, K, k, &out[0][0], K);
				for (int h = 0; h < nh; h++)
					for (int r = 0; r < K; r++) {
						double e = 0, mag = 0;
						for (int i = 0; i < n; i++) {
							float qi = f16 ? fx_fp16_to_fp32(fx_fp32_to_fp16(q[h][i])) : q[h][i];
							float ki = f16 ? fx_fp16_to_fp32(k16[r][i]) : k32[r][i];
							e += (double)qi * ki;
							mag += fabs((double)qi * ki);
						}
						CHECK(fabs(out[h][r] - e) <= 1e-6 * (1 + mag));
						/* alone, first of its chunk */
						qk(n, 1, qq + (size_t)h * N, N, 1, &k[r], &one, 1);
						CHECK(memcmp(&one, &out[h][r], sizeof(one)) == 0);
					}
				/* eight keys from key 3, as attention's steps call it */
				static float out8[H][8];
				qk(n, nh, qq, N, 8, k + 3, &out8[0][0], 8);
				for (int h = 0; h < nh; h++)
					CHECK(memcmp(out8[h], &out[h][3], sizeof(out8[h])) == 0);
			}
	}
}

/* Set b's attention and GLU kernels give set a's bits (kernels/kern.h:
 * every x86 set sums the same): pv for 1..10 heads, 1..12 keys, rows of
 * 8..272 elements (16-, 8-multiples and scalar tails), f32 and f16 rows;
 * qk for 1..10 heads, 1..12 keys, head dimensions 8..264; both GLUs.
 * (The softmax is checked against the portable set, check_softmax.) */
static void check_attn_sets_agree(enum kern_isa a, enum kern_isa b, uint64_t *rng)
{
	enum { N = 272, H = 10, K = 12 };
	static float v32[K][N], q[H][N], w[H][K], init[H][N], oa[H][N], ob[H][N], tmp[N];
	static uint16_t v16[K][N];
	for (int r = 0; r < K; r++)
		for (int i = 0; i < N; i++) {
			v32[r][i] = rng_f(rng);
			v16[r][i] = fx_fp32_to_fp16(v32[r][i]);
		}
	for (int h = 0; h < H; h++) {
		for (int i = 0; i < N; i++) {
			q[h][i] = fx_fp16_to_fp32(fx_fp32_to_fp16(rng_f(rng)));
			init[h][i] = rng_f(rng);
		}
		for (int r = 0; r < K; r++)
			w[h][r] = rng_f(rng) + 1.0f;
	}
	static const int ns[] = { 8, 64, 75, 128, 136, 200, 256, 264, 272 };
	long bad = 0;
	for (int f16 = 0; f16 < 2; f16++) {
		int t = f16 ? FX_TYPE_F16 : FX_TYPE_F32;
		const void *v[K];
		for (int r = 0; r < K; r++)
			v[r] = f16 ? (const void *)v16[r] : (const void *)v32[r];
		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (int nh = 1; nh <= H; nh++)
				for (int nk = 1; nk <= K; nk++) {
					int n = ns[j];
					memcpy(oa, init, sizeof(oa));
					memcpy(ob, init, sizeof(ob));
					set_of(a)->pv[t](n, nh, nk, &w[0][0], K, v, &oa[0][0], N, tmp);
					set_of(b)->pv[t](n, nh, nk, &w[0][0], K, v, &ob[0][0], N, tmp);
					bad += memcmp(oa, ob, sizeof(oa)) != 0;
					kern_qk_fn qa = kern_qk_for(set_of(a), t, n), qb = kern_qk_for(set_of(b), t, n);
					if (!qa || !qb) {
						CHECK(!qa && !qb);
						continue;
					}
					memset(oa, 0, sizeof(oa));
					memset(ob, 0, sizeof(ob));
					qa(n, nh, &q[0][0], N, nk, v, &oa[0][0], N);
					qb(n, nh, &q[0][0], N, nk, v, &ob[0][0], N);
					bad += memcmp(oa, ob, sizeof(oa)) != 0;
				}
	}
	/* the GLUs, rows 1..40 and longer (vector steps and padded tails),
	 * gates over [-24, 24] (both clamps of the exp) */
	static float g[1100], ga[1100], gb[1100], u[1100];
	for (int i = 0; i < 1100; i++) {
		g[i] = 48.0f * rng_f(rng) - 24.0f;
		u[i] = rng_f(rng);
	}
	for (int act = 0; act < KERN_GLU_COUNT; act++)
		for (long n = 1; n <= 1100; n = n < 40 ? n + 1 : n + 353) {
			memcpy(ga, g, sizeof(ga));
			memcpy(gb, g, sizeof(gb));
			set_of(a)->glu[act](ga, u, n);
			set_of(b)->glu[act](gb, u, n);
			bad += memcmp(ga, gb, sizeof(ga)) != 0;
		}
	CHECKF(bad == 0, "attention / GLU kernels: set %d differs from set %d in %ld cases", b, a, bad);
}

/* Ulps between two non-negative floats (their bit patterns' distance,
 * subnormals included). */
static uint32_t ulps(float a, float b)
{
	uint32_t x, y;
	memcpy(&x, &a, 4);
	memcpy(&y, &b, 4);
	return x > y ? x - y : y - x;
}

/* A chunk of online softmax for 1..5 heads, against the definition
 * (kern.h, kernels/softmax.h) written out here: each head's scaled scores,
 * running max, rescale factor r = e^(m_old - m_new), weights e^(s - m)
 * within 2 ulp of expf (0 below e^-87), and l * r + the weights summed in
 * eight lanes then the fixed tree, for every length 1..40 (vector steps
 * and masked tails), from a first chunk (m = -inf), a max that stays and
 * one that rises. The set's bits must be the portable set's (memcmp).
 * Then a sweep of x over [-110, 0] (every 97th float): within 2 ulp of
 * expf above -87, 0 below, and the same bits in both sets. */
/* op_rmsnorm (every set's): x / sqrt(mean(x^2) + eps) * w against the sum
 * of squares taken in order in double, within 2 ulp of the scale, for
 * widths with and without a tail past its eight lanes. */
static void check_rmsnorm(uint64_t *rng)
{
	static const int64_t ns[] = { 5, 13, 64, 579 };
	float x[579], w[579], out[579];
	for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
		int64_t n = ns[k];
		double ss = 0;
		for (int64_t i = 0; i < n; i++) {
			x[i] = rng_f(rng) * 3.0f;
			w[i] = 1.0f + rng_f(rng);
			ss += (double)x[i] * x[i];
		}
		const float scale = 1.0f / sqrtf((float)(ss / (double)n) + 1e-6f);
		op_rmsnorm(x, w, n, 1e-6f, out);
		for (int64_t i = 0; i < n; i++)
			CHECKF(fabsf(out[i] - x[i] * scale * w[i]) <= 4e-7f * fabsf(x[i] * scale * w[i]) + 1e-30f,
			       "rmsnorm n %d element %d: %g against %g", (int)n, (int)i, out[i], x[i] * scale * w[i]);
	}
}

static void check_softmax(enum kern_isa isa, uint64_t *rng)
{
	enum { N = 40, H = 5 };
	float src[H][N], s[H][N], s0[H][N];
	kern_softmax_fn sm = set_of(isa)->softmax, sm0 = set_of(KERN_PORTABLE)->softmax;
	for (int h = 0; h < H; h++)
		for (int i = 0; i < N; i++)
			src[h][i] = i == 5 ? -120.0f : i == 9 ? -95.0f : i == 13 + h ? -INFINITY
								      : -12.0f * (rng_f(rng) + 1.0f) / 2.0f + (float)h;
	const float m0s[3] = { -INFINITY, 8.0f, -3.0f }, scale = 0.75f;
	for (int nh = 1; nh <= H; nh++)
		for (int c = 0; c < 3; c++)
			for (int n = 1; n <= N; n++) {
				memcpy(s, src, sizeof(s));
				memcpy(s0, src, sizeof(s0));
				float m[H], l[H], r[H], pm[H], pl[H], pr[H];
				for (int h = 0; h < nh; h++)
					m[h] = pm[h] = m0s[c], l[h] = pl[h] = 0.25f;
				sm(&s[0][0], N, nh, n, scale, m, l, r);
				sm0(&s0[0][0], N, nh, n, scale, pm, pl, pr);
				CHECKF(memcmp(s, s0, sizeof(s)) == 0 && memcmp(m, pm, (size_t)nh * 4) == 0 &&
					       memcmp(l, pl, (size_t)nh * 4) == 0 && memcmp(r, pr, (size_t)nh * 4) == 0,
				       "softmax set %d: %d heads, n %d: not the portable bits", isa, nh, n);
				for (int h = 0; h < nh; h++) {
					float cm = -INFINITY, wm = m0s[c], wr = 1.0f, wl = 0.25f, lane[8] = { 0 };
					for (int i = 0; i < n; i++)
						cm = src[h][i] * scale > cm ? src[h][i] * scale : cm;
					if (cm > wm) {
						wr = wm < -87.0f ? 0.0f : expf(wm - cm);
						wl *= r[h];
						wm = cm;
					}
					CHECK(memcmp(&m[h], &wm, sizeof(float)) == 0 && ulps(r[h], wr) <= 2);
					for (int i = 0; i < n; i++) {
						float x = src[h][i] * scale - wm, w = x < -87.0f ? 0.0f : expf(x);
						CHECKF(ulps(s[h][i], w) <= 2, "softmax set %d: e^%a = %a, want %a", isa,
						       x, s[h][i], w);
						lane[i % 8] += s[h][i];
					}
					wl += ((lane[0] + lane[4]) + (lane[2] + lane[6])) +
					      ((lane[1] + lane[5]) + (lane[3] + lane[7]));
					CHECKF(memcmp(&l[h], &wl, sizeof(float)) == 0,
					       "softmax set %d: %d heads, n %d: l %a, want %a", isa, nh, n, l[h], wl);
					for (int i = n; i < N; i++) /* untouched past n */
						CHECK(memcmp(&s[h][i], &src[h][i], sizeof(float)) == 0);
				}
			}
	uint32_t lo, hi;
	float a = -110.0f, b = -0.0f;
	memcpy(&lo, &b, 4);
	memcpy(&hi, &a, 4);
	long bad = 0, diff = 0, n = 0;
	uint32_t worst = 0;
	for (uint32_t u = lo; u <= hi; u += 97) {
		float x[8], w[8], w0[8];
		for (int j = 0; j < 8; j++) {
			uint32_t v = u + (uint32_t)j * 11 < hi ? u + (uint32_t)j * 11 : hi;
			memcpy(&x[j], &v, 4);
			w[j] = w0[j] = x[j];
		}
		float m0 = 0.0f, l0 = 0.0f, r0, pm0 = 0.0f, pl0 = 0.0f, pr0;
		sm(w, 8, 1, 8, 1.0f, &m0, &l0, &r0);
		sm0(w0, 8, 1, 8, 1.0f, &pm0, &pl0, &pr0);
		for (int j = 0; j < 8; j++, n++) {
			uint32_t e = ulps(w[j], x[j] < -87.0f ? 0.0f : expf(x[j]));
			worst = e > worst ? e : worst;
			bad += e > 2;
			diff += memcmp(&w[j], &w0[j], 4) != 0;
		}
	}
	CHECKF(bad == 0 && diff == 0, "%ld of %ld weights over 2 ulp from expf (worst %u), %ld not the portable bits",
	       bad, n, worst, diff);
}

/* fx_malloc_lines: every array on a 64-byte line; on Linux one of 4 MiB or
 * more on a 2 MiB boundary (huge pages for the KV pools); fx_lines_bytes
 * covers the request, keeps the alignment, and all of it is writable. */
static void check_lines(void)
{
	static const size_t sizes[] = { 1, 100, 4096, (size_t)4 << 20, ((size_t)5 << 20) + 384 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], align = 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
		if (n >= ((size_t)4 << 20))
			align = (size_t)2 << 20;
#endif
		uint8_t *p = fx_malloc_lines(n, 1);
		size_t b = fx_lines_bytes(n, 1);
		CHECKF(p && (uintptr_t)p % align == 0, "fx_malloc_lines(%zu): %p not on %zu bytes", n, (void *)p, align);
		CHECKF(b >= n && b % align == 0, "fx_lines_bytes(%zu) = %zu", n, b);
		if (p)
			memset(p, 0xA5, b);
		fx_free(p);
	}
	CHECK(fx_malloc_lines(SIZE_MAX / 2, 4) == NULL);
}

/* Fill every set's table and check what each holds: a set the CPU cannot
 * run is refused (FX_E_UNSUPPORTED) and holds only the portable kernels;
 * every set has a quantizer for every activation type, the attention value
 * kernels of the three cache types, both GLUs, softmax and f16 rounding;
 * an x86 set has a dot kernel for every listed weight type, x8 kernels
 * exactly for the types with an x8 layout (few-row ones the same as the
 * many-row ones except in the AVX-512 set), and score kernels for f32 and
 * f16 caches; the portable set has no kernel of those forms. */
static void check_tables(void)
{
	for (int set = 0; set <= KERN_AMX; set++) {
		struct kern_set *ks = &sets[set];
		bool runs = kern_isa_runs((enum kern_isa)set);
		int rc = kern_set_init(ks, (enum kern_isa)set);
		CHECKF(runs ? rc == 0 : rc == FX_E_UNSUPPORTED, "set %d: kern_set_init %d (runs %d)", set, rc, runs);
		CHECKF(ks->isa == (runs ? (enum kern_isa)set : KERN_PORTABLE), "set %d: table of set %d", set, ks->isa);
		bool x86 = ks->isa >= KERN_AVX2;
		CHECK(ks->act_arrays == x86);
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			int t = types[i], vdt = fx_type_get(t)->vec_dot_type;
			CHECKF(ks->act_quant[vdt] != NULL, "set %d: no quantizer for %s", set, fx_type_get(vdt)->name);
			CHECKF(!ks->dot[t] == !x86, "set %d: dot kernel of %s", set, fx_type_get(t)->name);
			CHECKF(!ks->gemm_x8[t] == !(x86 && kern_x8_layout(t)) && !ks->gemm_x8_few[t] == !ks->gemm_x8[t] &&
			       (ks->isa >= KERN_AVX512 || ks->gemm_x8_few[t] == ks->gemm_x8[t]),
			       "set %d: x8 kernels of %s", set, fx_type_get(t)->name);
			CHECK(x86 || !ks->gemm[t]);
		}
		CHECK(ks->pv[FX_TYPE_F32] && ks->pv[FX_TYPE_F16] && ks->pv[FX_TYPE_Q8_0]);
		CHECK(ks->glu[KERN_GLU_SILU] && ks->glu[KERN_GLU_GELU] && ks->softmax && ks->round_f16);
		CHECK(!ks->qk[FX_TYPE_F32] == !x86 && !ks->qk[FX_TYPE_F16] == !x86 && !ks->qk[FX_TYPE_Q8_0]);
	}
}

int main(void)
{
	check_lines();
	uint64_t rng = 0x9E3779B97F4A7C15ULL;
	enum kern_isa best = kern_isa_best();
	/* libgcc's feature names as a second opinion on kern_isa_best's CPUID
	 * reading (clang 14's builtin lacks "f16c" and "avxvnni"). */
#if defined(__x86_64__) && !defined(__clang__)
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	    __builtin_cpu_supports("f16c"))
		CHECKF(best >= KERN_AVX2, "this CPU has AVX2/FMA/F16C but the AVX2 set is not chosen");
#if defined(FX_HAVE_AVXVNNI)
	if (best >= KERN_AVX2)
		CHECKF(kern_isa_runs(KERN_AVXVNNI) == (__builtin_cpu_supports("avxvnni") != 0),
		       "AVX-VNNI: the CPU %s it but the set is%s run", __builtin_cpu_supports("avxvnni") ? "has" : "lacks",
		       kern_isa_runs(KERN_AVXVNNI) ? "" : " not");
#endif
#endif
#if defined(__x86_64__) && defined(FX_HAVE_AVX512) /* clang 14 knows these names */
	bool has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
	if (best >= KERN_AVX2)
		CHECKF(kern_isa_runs(KERN_AVX512) == has512 && (best >= KERN_AVX512) == has512,
		       "AVX-512: the CPU %s it but the set is%s run (best %d)", has512 ? "has" : "lacks",
		       kern_isa_runs(KERN_AVX512) ? "" : " not", (int)best);
#endif
	check_tables();
	if (best == KERN_PORTABLE) {
		fprintf(stderr, "note: no ISA kernel set on this CPU; only the portable path runs\n");
		CHECK(set_of(KERN_PORTABLE)->dot[FX_TYPE_Q8_0] == NULL);
		return check_exit();
	}
	/* Block counts with and without partial groups of 8 (32-element
	 * types), odd tails, and float rows with a tail past the SIMD steps. */
	static const int64_t sizes32[] = { 32, 96, 256, 576, 640, 2048 };
	static const int64_t sizes256[] = { 256, 512, 2560 };
	static const int64_t sizes1[] = { 7, 64, 256, 2053 };
	/* The dot-product kernels of every ISA set the CPU runs: AVX2, and
	 * where the CPU has them AVX-VNNI's and AVX-512's, which must also
	 * equal AVX2's. */
	for (int set = KERN_AVX2; set <= (int)best; set++) {
		enum kern_isa isa = (enum kern_isa)set;
		if (!kern_isa_runs(isa))
			continue;
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			int64_t bs = fx_type_get(types[i])->blck_size;
			const int64_t *sz = bs == 1 ? sizes1 : bs == 32 ? sizes32 : sizes256;
			size_t nsz = bs == 1 ? 4 : bs == 32 ? 6 : 3;
			for (size_t j = 0; j < nsz; j++)
				check_type(isa, types[i], sz[j], &rng);
		}
		static const int gemm32[] = { FX_TYPE_Q4_0, FX_TYPE_Q4_1, FX_TYPE_Q5_0, FX_TYPE_Q8_0 };
		for (size_t i = 0; i < sizeof(gemm32) / sizeof(gemm32[0]); i++)
			for (size_t j = 0; j < 6; j++)
				check_gemm(isa, gemm32[i], sizes32[j], true, &rng);
		for (size_t i = 0; i < sizeof(gemm32) / sizeof(gemm32[0]); i++) {
			check_extremes(isa, gemm32[i], 256);
			if (set > KERN_AVX2)
				check_sets_agree(KERN_AVX2, isa, gemm32[i], 640, &rng);
		}
		check_extremes(isa, FX_TYPE_Q4_K, 512);
		check_extremes(isa, FX_TYPE_Q6_K, 512);
		for (size_t j = 0; j < 3; j++) {
			check_gemm(isa, FX_TYPE_Q4_K, sizes256[j], false, &rng);
			check_x8_only(isa, FX_TYPE_Q6_K, sizes256[j], &rng);
			if (set > KERN_AVX2 && j == 0)
				check_attn_sets_agree(KERN_AVX2, isa, &rng);
			if (set > KERN_AVX2) {
				check_sets_agree(KERN_AVX2, isa, FX_TYPE_Q4_K, sizes256[j], &rng);
				check_sets_agree(KERN_AVX2, isa, FX_TYPE_Q6_K, sizes256[j], &rng);
			}
		}
	}
	if (kern_isa_runs(KERN_AMX)) {
		static const int amx_types[] = { FX_TYPE_Q4_0, FX_TYPE_Q4_1, FX_TYPE_Q5_0, FX_TYPE_Q8_0 };
		/* one block, a few, and (4160: 130 blocks) more than a 128-block slice */
		static const int64_t amx_n[] = { 32, 96, 640, 2048, 4160 };
		for (size_t i = 0; i < sizeof(amx_types) / sizeof(amx_types[0]); i++) {
			for (size_t j = 0; j < sizeof(amx_n) / sizeof(amx_n[0]); j++)
				check_amx(amx_types[i], amx_n[j], false, &rng);
			check_amx(amx_types[i], 640, true, &rng);
		}
		/* q4_K, q6_K: one superblock, three, and more than a slice (2
		 * and 1 of them) */
		static const int64_t amx_nk[] = { 256, 768, 2560 };
		for (size_t j = 0; j < sizeof(amx_nk) / sizeof(amx_nk[0]); j++) {
			check_amx(FX_TYPE_Q4_K, amx_nk[j], false, &rng);
			check_amx(FX_TYPE_Q6_K, amx_nk[j], false, &rng);
		}
		check_amx(FX_TYPE_Q4_K, 768, true, &rng);
		check_amx(FX_TYPE_Q6_K, 768, true, &rng);
	} else {
		fprintf(stderr, "note: this CPU (or build) has no AMX set: its tile kernels were not checked\n");
	}
	check_glu(best, &rng);
	for (int set = KERN_AVX2; set <= (int)best; set++)
		if (kern_isa_runs((enum kern_isa)set))
			check_act_quant((enum kern_isa)set, &rng);
	check_pv(best, &rng);
	check_qk(best, &rng);
	check_softmax(best, &rng);
	check_softmax(KERN_PORTABLE, &rng);
	check_rmsnorm(&rng);
	printf("kernels: %d checks on kernel set %d\n", check_count, (int)best);
	return check_exit();
}
