/* File mappings shared by the format readers (GGUF, safetensors): weights
 * are mmap'd, not read into buffers (the model may later move the ones it
 * streams every step: model.c's place_weights). Private and writable so
 * that weights can be rearranged in place; the file itself never changes. */
#ifndef FX_IO_MAPFILE_H
#define FX_IO_MAPFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* Map path read-only; files shorter than min_size are refused with
 * FX_E_FORMAT (`what` names the expected format in the message). Errors:
 * FX_E_IO (missing, not a regular file, mmap failed), FX_E_FORMAT.
 * Release with io_unmap. */
int io_map(const char *path, size_t min_size, const char *what, const void **map, size_t *size,
	   struct fx_err *err);
void io_unmap(const void *map, size_t size);
/* io_map's contract, but the file is read (read(2), in 8 MiB pieces) into
 * private anonymous memory, released with io_unmap too: llama.cpp's
 * --no-mmap, for file systems where mapping is slow or unsupported. Huge
 * pages are asked for (advice only). progress (may be NULL) is called with
 * the fraction read after each piece; false from it stops with FX_E_IO
 * ("cancelled"). Such memory must not be given to io_map_release: its
 * released pages would read back as zeros, not from the file. */
int io_read(const char *path, size_t min_size, const char *what, bool (*progress)(double, void *),
	    void *arg, const void **map, size_t *size, struct fx_err *err);
/* Give back the resident pages of map[off, off + len) that lie wholly
 * inside it (madvise MADV_DONTNEED): for memory read once at load, such as
 * GGUF metadata. Only for pages never written: touched again, they are
 * read back from the file. */
void io_map_release(const void *map, size_t off, size_t len);

#endif
