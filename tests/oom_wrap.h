/* Allocation-failure injection for the *_oom tests: the linker wraps
 * malloc, calloc and realloc (-Wl,--wrap=..., tests.cmake), and the heap
 * call numbered fail_at (counted in calls from 0) returns NULL; fail_at -1
 * fails none. Include once, in the test's only source file (after
 * <cjson/cJSON.h> for oom_hook_cjson). */
#ifndef FX_TESTS_OOM_WRAP_H
#define FX_TESTS_OOM_WRAP_H

#include <stdbool.h>
#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

static long fail_at = -1; /* heap call number that fails; -1: none */
static long calls;

static bool failing(void)
{
	return fail_at >= 0 && calls++ == fail_at;
}

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	return failing() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return failing() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return failing() ? NULL : __real_realloc(p, n);
}

/* cJSON is a shared library: its own malloc calls escape the linker's
 * wrap, so a test that wants them failing too routes them here (cJSON's
 * hooks are process-global: call once, before any cJSON use). With hooks
 * set cJSON uses malloc + copy instead of realloc. */
#ifdef cJSON__h
static inline void oom_hook_cjson(void)
{
	cJSON_InitHooks(&(cJSON_Hooks){ .malloc_fn = __wrap_malloc, .free_fn = free });
}
#endif

#endif
