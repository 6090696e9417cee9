/* The pool's fork-join hand-off (src/core/threadpool.c): every thread
 * runs every region exactly once, and what a region writes is visible to
 * the caller when fx_pool_run returns. Regions come back to back (the
 * spinning path), after pauses longer than the workers' spin (they sleep
 * and must be woken), and with a worker slower than the caller's spin (the
 * caller sleeps and must be woken); with more threads than cores the
 * spins run out at random too. A lost wake-up hangs the test (alarm()
 * fails it); a region run twice, skipped or not yet finished shows
 * in the counts. */
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "core/threadpool.h"
#include "ferrox.h"

enum { MAX_T = 6 };

struct region {
	long round;          /* written by the caller before each run */
	long seen[MAX_T];    /* plain stores: fx_pool_run's return orders them */
	atomic_int calls[MAX_T];
	int nth_seen[MAX_T];
	int slow_ith;        /* this thread sleeps slow_us in the region (-1: none) */
	long slow_us;
};

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
	nanosleep(&ts, NULL);
}

static void region_fn(void *arg, int ith, int nth)
{
	struct region *r = arg;
	if (ith == r->slow_ith)
		sleep_us(r->slow_us);
	r->seen[ith] = r->round;
	r->nth_seen[ith] = nth;
	atomic_fetch_add(&r->calls[ith], 1);
}

static void run_case(int n_threads, long rounds, int pause_every, long pause_us, int slow_every,
		     long slow_us)
{
	struct fx_pool *pool = NULL;
	CHECK(fx_pool_create(n_threads, &pool) == FX_OK);
	if (!pool)
		return;
	struct region r;
	memset(&r, 0, sizeof r);
	int bad = 0;
	for (long i = 1; i <= rounds; i++) {
		r.round = i;
		r.slow_ith = slow_every && i % slow_every == 0 ? (int)(i / slow_every % n_threads) : -1;
		r.slow_us = slow_us;
		fx_pool_run(pool, region_fn, &r);
		for (int t = 0; t < n_threads; t++)
			bad += r.seen[t] != i || atomic_load(&r.calls[t]) != i || r.nth_seen[t] != n_threads;
		if (pause_every && i % pause_every == 0)
			sleep_us(pause_us);
	}
	CHECKF(bad == 0, "%d threads, %ld rounds: %d thread-rounds missing, repeated or unfinished",
	       n_threads, rounds, bad);
	fx_pool_free(pool);
}

int main(void)
{
	alarm(600); /* a lost wake-up fails in minutes, not at ctest's timeout */
	for (int n = 1; n <= MAX_T; n++) {
		run_case(n, n <= 2 ? 20000 : 1000, 0, 0, 0, 0); /* back to back */
		run_case(n, 200, 7, 3000, 0, 0);        /* workers fall asleep between regions */
		run_case(n, 200, 0, 0, 3, 3000);        /* the caller falls asleep waiting */
		run_case(n, 300, 5, 2000, 4, 2000);     /* both, interleaved */
	}
	/* A pool created and freed without a region, and one freed while its
	 * workers still spin. */
	struct fx_pool *p = NULL;
	CHECK(fx_pool_create(3, &p) == FX_OK);
	fx_pool_free(p);
	run_case(3, 1, 0, 0, 0, 0);
	return check_exit();
}
