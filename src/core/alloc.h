/* Checked allocation. fx_calloc fails (returns NULL) on n * size overflow
 * instead of wrapping; fx_free(NULL) is a no-op. */
#ifndef FX_CORE_ALLOC_H
#define FX_CORE_ALLOC_H

#include <stddef.h>

void *fx_calloc(size_t n, size_t size);
void *fx_malloc_array(size_t n, size_t size); /* uninitialised, overflow-checked */
/* As fx_malloc_array, starting on a 64-byte cache line (C11 aligned_alloc;
 * fx_free releases it). For arrays of rows that SIMD loads and prefetches
 * walk, so that a row of a multiple of 64 bytes never straddles a line.
 * On Linux (where <sys/mman.h> has MADV_HUGEPAGE) an array of 4 MiB or
 * more (the KV pools and the weights, read whole every decode step) starts
 * on a 2 MiB boundary, its size rounded up to one, and its whole 2 MiB
 * spans are advised for transparent huge pages (madvise MADV_HUGEPAGE; the
 * system's THP setting decides): one TLB entry then maps 2 MiB, not 4 KiB
 * (measured: an 8-sequence SmolLM2 decode step ~2-3% faster). The partial
 * last span is not advised, so under THP's "madvise" setting nothing past
 * the array becomes resident ("always" decides for itself). */
void *fx_malloc_lines(size_t n, size_t size);
/* fx_malloc_lines, then every byte written with zero, so the array is
 * resident when this returns: for the KV caches, as llama.cpp clears its
 * cache buffer at creation, since a page's first write otherwise faults
 * it in (zeroing 2 MiB at a time on huge pages) inside a prefill or
 * decode step (SmolLM2's eight-sequence batched-bench: 3.4% of its
 * samples there). NULL when out of memory. */
void *fx_calloc_lines(size_t n, size_t size);
/* Bytes fx_malloc_lines(n, size) takes, its rounding up included (what a
 * context reports as its cache memory); for sizes fx_malloc_lines accepts. */
size_t fx_lines_bytes(size_t n, size_t size);
void *fx_realloc_array(void *p, size_t n, size_t size);
void fx_free(void *p);
/* s[0..n) as a new NUL-terminated string (n + 1 bytes, freed with
 * fx_free), or NULL when out of memory. */
char *fx_strndup(const char *s, size_t n);

#endif
