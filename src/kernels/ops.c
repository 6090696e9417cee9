#include "kernels/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/repack.h"
#include "quant/quant.h"

size_t op_matmul_scratch(const struct wmat *w, int64_t n_tok)
{
	const struct fx_type_traits *tt = fx_type_get(w->type);
	if (tt->vec_dot_type == FX_TYPE_F32)
		return 0;
	/* The largest layout any kernel set uses (AVX2 rows add scales). */
	return kern_act_row_bytes_max(tt->vec_dot_type, w->n_in) * (size_t)n_tok;
}

/* Up to MM_MAX matrices sharing one input: their rows are concatenated and
 * split across threads as one range, so Q/K/V or gate/up cost one
 * parallel region and one activation conversion. */
enum { MM_MAX = 4 };

struct matmul_args {
	const struct wmat *w[MM_MAX];
	float *y[MM_MAX];
	int n_w;
	long n_rows;      /* sum of the matrices' n_out */
	const void *xq;   /* [n_tok] rows of act_bytes */
	size_t act_bytes;
	int64_t n_tok;
	fx_vec_dot_fn dot[MM_MAX]; /* portable: one row pair per call */
	kern_dot_fn kern[MM_MAX];  /* ISA kernel (one weight row, up to KERN_NT_MAX tokens), or NULL */
	kern_gemm_fn gemm[MM_MAX]; /* ISA kernel (weight rows in lanes), preferred, or NULL */
	long chunk;                /* most rows per work item */
	int tok_block;             /* most tokens per kernel call */
	atomic_long next;          /* first row not yet taken */
};

/* A thread takes a chunk of weight rows (sized to stay in L2: struct
 * kern_set's chunk_bytes) and runs it against the tokens a token block
 * (its tok_block) at a time: a block's activations (a few KiB a row) stay
 * near while the chunk's rows pass, and an ISA kernel unpacks each weight
 * block once for all of them. */

/* Rows [r0, r1) of matrix i for tokens [t0, t1). */
static void matmul_rows(const struct matmul_args *a, int i, long r0, long r1, int64_t t0,
			int64_t t1)
{
	const struct wmat *w = a->w[i];
	float *y = a->y[i];
	if (a->gemm[i]) {
		a->gemm[i](w->n_in, (const uint8_t *)w->data + (size_t)r0 * w->row_bytes, w->row_bytes,
			   (int)(r1 - r0), (const uint8_t *)a->xq + (size_t)t0 * a->act_bytes, a->act_bytes,
			   (int)(t1 - t0), &y[t0 * w->n_out + r0], (size_t)w->n_out);
		return;
	}
	for (long r = r0; r < r1; r++) {
		const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
		if (a->kern[i]) {
			for (int64_t t = t0; t < t1; t += KERN_NT_MAX) {
				int nt = t1 - t < KERN_NT_MAX ? (int)(t1 - t) : KERN_NT_MAX;
				a->kern[i](w->n_in, wr, (const uint8_t *)a->xq + (size_t)t * a->act_bytes,
					   a->act_bytes, nt, &y[t * w->n_out + r], (size_t)w->n_out);
			}
			continue;
		}
		for (int64_t t = t0; t < t1; t++)
			a->dot[i](w->n_in, &y[t * w->n_out + r], wr,
				  (const uint8_t *)a->xq + (size_t)t * a->act_bytes);
	}
}

/* Rows the next work item takes when left rows remain: the full chunk
 * until the last quarter or so, then a share of what is left that
 * shrinks to MIN_CHUNK (OpenMP's "guided" schedule), so that the threads
 * finish within a small item of each other instead of half a chunk
 * apart on average. Multiples of 16 rows for every set (one rule, so
 * the schedule does not depend on the CPU): the AVX-512 set's prefill
 * kernels take x8 groups two at a time, and a chunk that starts a pair
 * keeps them paired (a matrix in a shared region may still start half-way
 * through one; its last group then goes alone). */
enum { MIN_CHUNK = 16 };
static long guided_chunk(long left, long chunk, int nth)
{
	long take = left / (2L * nth);
	take = take < chunk ? take : chunk;
	take = take > MIN_CHUNK ? take : MIN_CHUNK;
	return (take + 15) & ~15L;
}

/* Threads take chunks of rows from a shared counter (a thread the
 * machine stalls takes fewer), each chunk for all tokens: which thread
 * computes a row never changes its value. */
static void matmul_worker(void *arg, int ith, int nth)
{
	struct matmul_args *a = arg;
	(void)ith;
	for (;;) {
		long r0 = atomic_load_explicit(&a->next, memory_order_relaxed), r1;
		do {
			if (r0 >= a->n_rows)
				return;
			r1 = r0 + guided_chunk(a->n_rows - r0, a->chunk, nth);
			r1 = r1 < a->n_rows ? r1 : a->n_rows;
		} while (!atomic_compare_exchange_weak_explicit(&a->next, &r0, r1, memory_order_relaxed,
								memory_order_relaxed));
		for (int64_t t0 = 0; t0 < a->n_tok; t0 += a->tok_block) {
			int64_t t1 = t0 + a->tok_block < a->n_tok ? t0 + a->tok_block : a->n_tok;
			long base = 0;
			for (int i = 0; i < a->n_w; i++) {
				long n = (long)a->w[i]->n_out;
				long lo = r0 > base ? r0 - base : 0, hi = r1 - base < n ? r1 - base : n;
				if (lo < hi)
					matmul_rows(a, i, lo, hi, t0, t1);
				base += n;
			}
		}
	}
}

struct quant_args {
	const float *x;
	void *xq;
	int64_t n_in, n_tok;
	size_t act_bytes;
	kern_act_fn quant;
};

static void quant_worker(void *arg, int ith, int nth)
{
	const struct quant_args *a = arg;
	long t0, t1;
	fx_split((long)a->n_tok, ith, nth, &t0, &t1);
	for (long t = t0; t < t1; t++)
		a->quant(a->x + t * a->n_in, (uint8_t *)a->xq + (size_t)t * a->act_bytes, a->n_in);
}

void op_matmul_n(struct fx_pool *pool, int n_w, const struct wmat *const *w, const float *x,
		 int64_t n_tok, float *const *y, void *scratch)
{
	const struct fx_type_traits *tt = fx_type_get(w[0]->type);
	/* One region needs one input format and, since x8 groups are
	 * taken whole, every matrix's rows in multiples of 8. */
	bool shared = n_w <= MM_MAX, any_x8 = w[0]->x8, all8 = w[0]->n_out % 8 == 0;
	for (int i = 1; i < n_w && shared; i++) {
		shared = w[i]->n_in == w[0]->n_in &&
			 fx_type_get(w[i]->type)->vec_dot_type == tt->vec_dot_type;
		any_x8 |= w[i]->x8;
		all8 &= w[i]->n_out % 8 == 0;
	}
	shared &= !any_x8 || all8;
	if (!shared) {
		for (int i = 0; i < n_w; i++)
			op_matmul_n(pool, 1, &w[i], x, n_tok, &y[i], scratch);
		return;
	}
	const struct kern_set *ks = fx_pool_kernels(pool);
	struct matmul_args a = { .n_w = n_w, .n_tok = n_tok, .tok_block = ks->tok_block };
	for (int i = 0; i < n_w; i++) {
		a.w[i] = w[i];
		a.y[i] = y[i];
		a.n_rows += (long)w[i]->n_out;
		a.dot[i] = fx_type_get(w[i]->type)->vec_dot;
		a.kern[i] = ks->dot[w[i]->type];
		a.gemm[i] = w[i]->x8 ? kern_gemm_x8_for(ks, w[i]->type, n_tok) : ks->gemm[w[i]->type];
	}
	if (tt->vec_dot_type == FX_TYPE_F32) {
		a.xq = x;
		a.act_bytes = (size_t)w[0]->n_in * sizeof(float);
	} else {
		struct quant_args q = { .x = x, .xq = scratch, .n_in = w[0]->n_in, .n_tok = n_tok,
					.act_bytes = kern_act_row_bytes(ks, tt->vec_dot_type, w[0]->n_in),
					.quant = ks->act_quant[tt->vec_dot_type] };
		if (n_tok > 1)
			fx_pool_run(pool, quant_worker, &q);
		else
			quant_worker(&q, 0, 1);
		a.xq = scratch;
		a.act_bytes = q.act_bytes;
	}
	/* Chunks of about 1/8 of a thread's rows, at least 16; with several
	 * token blocks, no more rows than fit chunk_bytes so they stay in L2. */
	int nth = fx_pool_n_threads(pool);
	a.chunk = a.n_rows / (8L * nth);
	if (n_tok > ks->tok_block && a.chunk > (long)(ks->chunk_bytes / w[0]->row_bytes))
		a.chunk = (long)(ks->chunk_bytes / w[0]->row_bytes);
	if (a.chunk < 16)
		a.chunk = 16;
	a.chunk = (a.chunk + 15) & ~15L; /* whole pairs of x8 groups */
	atomic_init(&a.next, 0);
	fx_pool_run(pool, matmul_worker, &a);
}

void op_matmul(struct fx_pool *pool, const struct wmat *w, const float *x, int64_t n_tok,
	       float *y, void *scratch)
{
	op_matmul_n(pool, 1, &w, x, n_tok, &y, scratch);
}

void op_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *out)
{
	/* Sum of squares in double, as ggml's rms_norm (ggml_float): each
	 * square exact, in eight lanes (element i in lane i % 8) then a fixed
	 * tree, so the adds run as independent chains the compiler can keep in
	 * vector registers (one chain was latency-bound: 4 cycles an element,
	 * ~8% of Gemma 3's prefill with its six norms a layer); rounding in
	 * double then moves the float scale by at most an ulp, and one order
	 * serves every row, batch and kernel set. */
	double l[8] = { 0 };
	int64_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			l[k] += (double)x[i + k] * x[i + k];
	for (int k = 0; i < n; i++, k++)
		l[k] += (double)x[i] * x[i];
	double ss = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
	float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
	if (w) {
		for (int64_t i = 0; i < n; i++)
			out[i] = x[i] * scale * w[i];
	} else {
		for (int64_t i = 0; i < n; i++)
			out[i] = x[i] * scale;
	}
}

void op_softmax(float *x, int64_t n)
{
	float mx = -INFINITY;
	for (int64_t i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - mx);
		sum += x[i];
	}
	float inv = (float)(1.0 / sum);
	for (int64_t i = 0; i < n; i++)
		x[i] *= inv;
}

void op_rope_table(float *cs, int n_rot, float pos, const float *inv_freq, float mscale)
{
	for (int i = 0; i < n_rot / 2; i++) {
		float th = pos * inv_freq[i];
		cs[2 * i] = cosf(th) * mscale;
		cs[2 * i + 1] = sinf(th) * mscale;
	}
}

void op_rope_apply(float *x, int n_rot, const float *cs, int neox)
{
	int half = n_rot / 2;
	for (int i = 0; i < half; i++) {
		float c = cs[2 * i], s = cs[2 * i + 1];
		int a = neox ? i : 2 * i;
		int b = neox ? i + half : 2 * i + 1;
		float x0 = x[a], x1 = x[b];
		x[a] = x0 * c - x1 * s;
		x[b] = x0 * s + x1 * c;
	}
}
