#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "core/alloc.h"
#include "ferrox.h"

/* Workers wait for a new generation number; the caller bumps it, runs its
 * own share, then waits for the pending count to reach zero. Both sides
 * spin briefly before sleeping: decode issues a few hundred short regions
 * per token. The hand-off itself takes no lock and makes no system call
 * unless the other side has gone to sleep: a sleeper announces itself
 * (sleepers / caller_waits, sequentially consistent) before it checks the
 * condition once more under the mutex, and the other side checks the
 * announcement after publishing (gen / pending), so at least one of the
 * two sees the other (the store-then-load pattern of Dekker's algorithm).
 * Before, every region took the mutex on both sides and the worker,
 * woken from its spin while the caller still held it, slept in futex:
 * ~800 futex calls a token on TinyLlama-shape decode, 3 now (strace -c
 * of 8 against 64 generated tokens, 2 threads). */
struct fx_pool {
	int n;
	pthread_t *threads;
	pthread_mutex_t mu;
	pthread_cond_t cv_start, cv_done;
	atomic_uint gen;
	atomic_int pending;
	atomic_int sleepers;    /* workers in (or about to enter) cv_start */
	atomic_int caller_waits; /* the caller in (or about to enter) cv_done */
	atomic_bool stop;
	fx_pool_fn fn;
	void *arg;
	const struct kern_set *kernels; /* the set the pool's callers use (kernels/kern.h) */
};

struct worker_arg {
	struct fx_pool *p;
	int ith;
};

enum { SPIN_ITERS = 200000 };

/* Spin until *gen differs from seen (spin_gen) or *pending reaches zero
 * (spin_done): true when it did within SPIN_ITERS loads. */
static bool spin_gen(const atomic_uint *gen, unsigned seen)
{
	for (int i = 0; i < SPIN_ITERS; i++)
		if (atomic_load_explicit(gen, memory_order_acquire) != seen)
			return true;
	return false;
}

static bool spin_done(const atomic_int *pending)
{
	for (int i = 0; i < SPIN_ITERS; i++)
		if (atomic_load_explicit(pending, memory_order_acquire) == 0)
			return true;
	return false;
}

static void *worker(void *a)
{
	struct fx_pool *p = ((struct worker_arg *)a)->p;
	int ith = ((struct worker_arg *)a)->ith;
	unsigned seen = 0;
	fx_free(a);
	for (;;) {
		if (!spin_gen(&p->gen, seen)) {
			pthread_mutex_lock(&p->mu);
			atomic_fetch_add(&p->sleepers, 1);
			while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
				pthread_cond_wait(&p->cv_start, &p->mu);
			atomic_fetch_sub(&p->sleepers, 1);
			pthread_mutex_unlock(&p->mu);
		}
		if (atomic_load(&p->stop))
			return NULL;
		seen = atomic_load(&p->gen);
		p->fn(p->arg, ith, p->n);
		if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_waits)) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->cv_done);
			pthread_mutex_unlock(&p->mu);
		}
	}
}

int fx_pool_create(int n_threads, struct fx_pool **out)
{
	if (n_threads <= 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = c > 0 ? (int)c : 1;
	}
	if (n_threads > 256)
		return FX_E_INVALID;
	struct fx_pool *p = fx_calloc(1, sizeof(*p));
	if (!p)
		return FX_E_NOMEM;
	p->n = n_threads;
	p->threads = fx_calloc((size_t)n_threads, sizeof(*p->threads));
	if (!p->threads) {
		fx_free(p);
		return FX_E_NOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_start, NULL);
	pthread_cond_init(&p->cv_done, NULL);
	for (int i = 1; i < n_threads; i++) {
		struct worker_arg *wa = fx_calloc(1, sizeof(*wa));
		if (!wa || (wa->p = p, wa->ith = i, pthread_create(&p->threads[i], NULL, worker, wa))) {
			fx_free(wa);
			p->n = i; /* only join what started */
			fx_pool_free(p);
			return FX_E_NOMEM;
		}
	}
	*out = p;
	return FX_OK;
}

void fx_pool_free(struct fx_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->threads[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_start);
	pthread_cond_destroy(&p->cv_done);
	fx_free(p->threads);
	fx_free(p);
}

int fx_pool_n_threads(const struct fx_pool *p)
{
	return p->n;
}

void fx_pool_set_kernels(struct fx_pool *p, const struct kern_set *kernels)
{
	p->kernels = kernels;
}

const struct kern_set *fx_pool_kernels(const struct fx_pool *p)
{
	return p->kernels;
}

void fx_pool_run(struct fx_pool *p, fx_pool_fn fn, void *arg)
{
	if (p->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	atomic_store(&p->pending, p->n - 1);
	atomic_fetch_add(&p->gen, 1); /* publishes fn, arg, pending */
	if (atomic_load(&p->sleepers)) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv_start);
		pthread_mutex_unlock(&p->mu);
	}
	fn(arg, 0, p->n);
	if (!spin_done(&p->pending)) {
		pthread_mutex_lock(&p->mu);
		atomic_store(&p->caller_waits, 1);
		while (atomic_load(&p->pending) > 0)
			pthread_cond_wait(&p->cv_done, &p->mu);
		atomic_store(&p->caller_waits, 0);
		pthread_mutex_unlock(&p->mu);
	}
}
