#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

void *fx_calloc(size_t n, size_t size)
{
	if (n == 0 || size == 0)
		return calloc(1, 1);
	return calloc(n, size); /* calloc checks n * size for overflow */
}

void *fx_malloc_array(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return malloc((n && size) ? n * size : 1);
}

/* Transparent huge pages for big line-aligned arrays (see alloc.h). */
#define HUGE_ALIGN ((size_t)2 << 20)
#define HUGE_MIN ((size_t)4 << 20)

void *fx_malloc_lines(size_t n, size_t size)
{
	if (size && n > (SIZE_MAX - 63) / size)
		return NULL;
	size_t b = (n && size) ? n * size : 1;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	if (b >= HUGE_MIN) {
		size_t r = (b + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
		void *p = aligned_alloc(HUGE_ALIGN, r);
		if (p)
			(void)madvise(p, r, MADV_HUGEPAGE); /* advice only: refused is fine */
		return p;
	}
#endif
	return aligned_alloc(64, (b + 63) & ~(size_t)63);
}

void *fx_realloc_array(void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return realloc(p, (n && size) ? n * size : 1);
}

void fx_free(void *p)
{
	free(p);
}

char *fx_strndup(const char *s, size_t n)
{
	char *p = fx_malloc_array(n + 1, 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}
