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

/* Bytes and alignment fx_malloc_lines uses for b bytes. */
static size_t lines_alloc(size_t b, size_t *align)
{
	*align = 64;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	if (b >= HUGE_MIN)
		*align = HUGE_ALIGN;
#endif
	return (b + *align - 1) & ~(*align - 1);
}

size_t fx_lines_bytes(size_t n, size_t size)
{
	size_t align;
	return lines_alloc((n && size) ? n * size : 1, &align);
}

void *fx_malloc_lines(size_t n, size_t size)
{
	if (size && n > (SIZE_MAX - HUGE_ALIGN) / size)
		return NULL;
	size_t align, r = lines_alloc((n && size) ? n * size : 1, &align);
	void *p = aligned_alloc(align, r);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
	size_t whole = ((n && size) ? n * size : 1) & ~(HUGE_ALIGN - 1);
	if (p && align == HUGE_ALIGN)
		(void)madvise(p, whole, MADV_HUGEPAGE); /* advice only: refused is fine */
#endif
	return p;
}

void *fx_calloc_lines(size_t n, size_t size)
{
	void *p = fx_malloc_lines(n, size);
	if (p)
		memset(p, 0, (n && size) ? n * size : 1);
	return p;
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
