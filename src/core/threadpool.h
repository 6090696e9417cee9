/* A fixed pool of worker threads running one parallel region at a time.
 *
 * fx_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once for every
 * ith in [0, nth) — the calling thread takes ith 0 — and returns when all
 * have finished (fork-join, like an OpenMP parallel region). Work is split
 * by the callee from (ith, nth) in a fixed way, so results never depend on
 * scheduling. One caller at a time.
 */
#ifndef FX_CORE_THREADPOOL_H
#define FX_CORE_THREADPOOL_H

struct fx_pool;

typedef void (*fx_pool_fn)(void *arg, int ith, int nth);

/* n_threads <= 0: one per online core. Errors: FX_E_NOMEM, FX_E_INVALID. */
int fx_pool_create(int n_threads, struct fx_pool **out);
void fx_pool_free(struct fx_pool *p);
int fx_pool_n_threads(const struct fx_pool *p);
/* The kernel set (struct kern_set of kernels/kern.h, borrowed: it must
 * outlive the pool's use) that operators running on this pool use; NULL
 * until set. Carried by the pool because every operator already receives
 * it; core knows only the name. */
struct kern_set;
void fx_pool_set_kernels(struct fx_pool *p, const struct kern_set *kernels);
const struct kern_set *fx_pool_kernels(const struct fx_pool *p);
void fx_pool_run(struct fx_pool *p, fx_pool_fn fn, void *arg);

/* Rows [*r0, *r1) of n that thread ith of nth takes (contiguous, balanced). */
static inline void fx_split(long n, int ith, int nth, long *r0, long *r1)
{
	long q = n / nth, r = n % nth;
	*r0 = ith * q + (ith < r ? ith : r);
	*r1 = *r0 + q + (ith < r);
}

#endif
