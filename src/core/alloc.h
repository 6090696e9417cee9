/* Checked allocation. fx_calloc fails (returns NULL) on n * size overflow
 * instead of wrapping; fx_free(NULL) is a no-op. */
#ifndef FX_CORE_ALLOC_H
#define FX_CORE_ALLOC_H

#include <stddef.h>

void *fx_calloc(size_t n, size_t size);
void *fx_malloc_array(size_t n, size_t size); /* uninitialised, overflow-checked */
void *fx_realloc_array(void *p, size_t n, size_t size);
void fx_free(void *p);
/* s[0..n) as a new NUL-terminated string (n + 1 bytes, freed with
 * fx_free), or NULL when out of memory. */
char *fx_strndup(const char *s, size_t n);

#endif
