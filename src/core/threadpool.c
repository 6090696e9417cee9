#include "core/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "core/alloc.h"
#include "ferrox.h"

/* Workers wait for a new generation number; the caller bumps it, runs its
 * own share, then waits for the pending count to reach zero. Workers spin
 * briefly before sleeping: decode issues hundreds of short regions per
 * token and a condvar round trip per region would dominate. */
struct fx_pool {
	int n;
	pthread_t *threads;
	pthread_mutex_t mu;
	pthread_cond_t cv_start, cv_done;
	atomic_uint gen;
	atomic_int pending;
	bool stop;
	fx_pool_fn fn;
	void *arg;
	const struct kern_set *kernels; /* the set the pool's callers use (kernels/kern.h) */
};

struct worker_arg {
	struct fx_pool *p;
	int ith;
};

enum { SPIN_ITERS = 200000 };

static void *worker(void *a)
{
	struct fx_pool *p = ((struct worker_arg *)a)->p;
	int ith = ((struct worker_arg *)a)->ith;
	unsigned seen = 0;
	fx_free(a);
	for (;;) {
		int spins = 0;
		while (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && spins < SPIN_ITERS)
			spins++;
		pthread_mutex_lock(&p->mu);
		while (atomic_load(&p->gen) == seen && !p->stop)
			pthread_cond_wait(&p->cv_start, &p->mu);
		bool stop = p->stop;
		seen = atomic_load(&p->gen);
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
		p->fn(p->arg, ith, p->n);
		if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
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
	p->stop = true;
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
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_cond_broadcast(&p->cv_start);
	pthread_mutex_unlock(&p->mu);
	fn(arg, 0, p->n);
	int spins = 0;
	while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0 && spins < SPIN_ITERS)
		spins++;
	pthread_mutex_lock(&p->mu);
	while (atomic_load(&p->pending) > 0)
		pthread_cond_wait(&p->cv_done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}
