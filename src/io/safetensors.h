/* safetensors reader (https://github.com/huggingface/safetensors, format
 * spec in its README): u64 little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
 * then the data. Files are mmap'd; tensors point into the mapping. Every
 * length and offset is checked before use. A checkpoint directory is either
 * model.safetensors or model.safetensors.index.json plus its shards.
 */
#ifndef FX_IO_SAFETENSORS_H
#define FX_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct st_tensor {
	char *name;        /* owned, NUL-terminated */
	int type;          /* FX_TYPE_F32, FX_TYPE_F16 or FX_TYPE_BF16 */
	int n_dims;        /* 1..4 (a tensor of 5..8 dims has its outer ones folded into ne[3]) */
	int64_t ne[4];     /* GGUF order: ne[0] is the LAST (contiguous) dim of the
			    * file's shape; unused dims are 1 */
	const void *data;  /* in the mapping; NOT aligned in general (the header
			    * length is arbitrary): read with memcpy */
	size_t nbytes;
};

struct st_file {
	struct st_tensor *tensors; /* [n_tensors], owned, sorted by name (not
				    * file order) so st_find is a binary search */
	size_t n_tensors;
	const uint8_t *map;
	size_t map_size;
	bool owns_map;
};

/* Open one .safetensors file. Errors: FX_E_IO, FX_E_FORMAT (bad header
 * length, bad JSON, offsets past the end or overlapping, shape/size
 * mismatch), FX_E_UNSUPPORTED (a dtype other than F32/F16/BF16, named). */
int st_open(const char *path, struct st_file **out, struct fx_err *err);
/* Same on a caller-owned buffer (borrowed; must outlive the file). */
int st_open_memory(const void *buf, size_t size, struct st_file **out, struct fx_err *err);
void st_close(struct st_file *f);
const struct st_tensor *st_find(const struct st_file *f, const char *name);

/* All shards of a checkpoint directory. */
struct st_set {
	struct st_file **files; /* [n_files], owned */
	size_t n_files;
};

/* dir/model.safetensors, or dir/model.safetensors.index.json ("weight_map":
 * name -> shard file) and every shard it names; a tensor listed in the
 * index must be in its shard. Errors as st_open, plus FX_E_IO when neither
 * file exists. */
int st_set_open_dir(const char *dir, struct st_set **out, struct fx_err *err);
void st_set_close(struct st_set *s);
/* Tensor by name across shards, or NULL. */
const struct st_tensor *st_set_find(const struct st_set *s, const char *name);

#endif
