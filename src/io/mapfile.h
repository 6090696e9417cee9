/* Read-only file mappings shared by the format readers (GGUF,
 * safetensors): weights are mmap'd, never copied. */
#ifndef FX_IO_MAPFILE_H
#define FX_IO_MAPFILE_H

#include <stddef.h>

#include "core/status.h"

/* Map path read-only; files shorter than min_size are refused with
 * FX_E_FORMAT (`what` names the expected format in the message). Errors:
 * FX_E_IO (missing, not a regular file, mmap failed), FX_E_FORMAT.
 * Release with io_unmap. */
int io_map(const char *path, size_t min_size, const char *what, const void **map, size_t *size,
	   struct fx_err *err);
void io_unmap(const void *map, size_t size);

#endif
