/* GGUF reader: metadata, tensor infos and mmap'd tensor data.
 *
 * Follows the GGUF spec (ggml/docs/gguf.md, versions 2 and 3). Every
 * length, count and offset is checked against the file size before it is
 * used, so a malformed file gives an error naming the problem and never an
 * over-read. Strings and arrays point into the mapping and live as long as
 * the gguf_file; string arrays are indexed once at open time.
 */
#ifndef FX_IO_GGUF_H
#define FX_IO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

enum gguf_vtype {
	GGUF_T_U8 = 0, GGUF_T_I8 = 1, GGUF_T_U16 = 2, GGUF_T_I16 = 3,
	GGUF_T_U32 = 4, GGUF_T_I32 = 5, GGUF_T_F32 = 6, GGUF_T_BOOL = 7,
	GGUF_T_STRING = 8, GGUF_T_ARRAY = 9, GGUF_T_U64 = 10, GGUF_T_I64 = 11,
	GGUF_T_F64 = 12, GGUF_T_COUNT
};

/* A string inside the mapping: NOT NUL-terminated. */
struct gguf_str {
	const char *p;
	uint64_t n; /* bytes */
};

struct gguf_kv {
	struct gguf_str key;
	enum gguf_vtype type;     /* GGUF_T_ARRAY for arrays */
	enum gguf_vtype arr_type; /* element type when type == GGUF_T_ARRAY */
	uint64_t n;               /* array length (1 for scalars) */
	/* Scalars: points at the little-endian value in the mapping (unaligned:
	 * read with memcpy); for a string, at its u64 length, the bytes
	 * following (read it with gguf_get_str). Arrays of numbers:
	 * the packed little-endian elements in the mapping. Arrays of strings:
	 * a struct gguf_str[n] built at open time. Arrays of arrays are
	 * accepted (skipped) and have data == NULL. */
	const void *data;
};

struct gguf_tensor {
	struct gguf_str name;
	uint32_t n_dims;
	int64_t ne[4];       /* ne[0] is the contiguous (row) length; unused dims are 1 */
	int type;            /* enum fx_type / ggml_type id */
	uint64_t offset;     /* from the start of the data section */
	size_t nbytes;
	const void *data;    /* in the mapping, aligned to general.alignment */
};

struct gguf_file {
	uint32_t version;
	uint64_t n_kv, n_tensors;
	struct gguf_kv *kv;           /* [n_kv] */
	struct gguf_tensor *tensors;  /* [n_tensors] */
	uint32_t alignment;
	const uint8_t *map;           /* whole file, read-only mapping */
	size_t map_size;
	size_t data_offset;           /* start of the tensor data section */
	bool owns_map;                /* gguf_open mapped it; gguf_close unmaps */
	bool read_in;                 /* gguf_open_read: anonymous memory, never to be
				       * given to io_map_release */
	void **owned;                 /* built views: allocations freed by gguf_close */
	size_t n_owned;
	void (*release)(void *);      /* built views: frees what tensors point into */
	void *release_arg;
};

/* Open and validate path. On success *out owns the mapping; free it with
 * gguf_close. Errors: FX_E_IO (missing/unreadable), FX_E_FORMAT (bad magic,
 * truncated, out-of-range or overlapping tensors, huge counts),
 * FX_E_UNSUPPORTED (version, tensor type unknown to ferrox). */
int gguf_open(const char *path, struct gguf_file **out, struct fx_err *err);
/* gguf_open with the file read into memory instead of mapped (io_read;
 * llama.cpp's --no-mmap); progress as io_read's. */
int gguf_open_read(const char *path, bool (*progress)(double, void *), void *arg, struct gguf_file **out,
		   struct fx_err *err);
/* Same checks on a caller-owned buffer (borrowed; must outlive the file). */
int gguf_open_memory(const void *buf, size_t size, struct gguf_file **out, struct fx_err *err);
void gguf_close(struct gguf_file *g);
/* For a reader that has copied what it needs from the metadata (the
 * vocabulary) and looked up its tensors: frees the string-array tables
 * (those keys then read as absent: data NULL) and gives the mapping's
 * metadata pages back to the kernel (io_map_release), so they do not count
 * in the process's RSS beside the weights. Scalar keys and tensor infos
 * stay valid (read back from the file if touched). */
void gguf_release_meta(struct gguf_file *g);

/* Metadata lookup by key; NULL when absent. */
const struct gguf_kv *gguf_find(const struct gguf_file *g, const char *key);
/* Typed getters: false when absent or of an incompatible type. Integer
 * getters accept any integer type whose value fits; get_f32 accepts F32/F64. */
bool gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out);
bool gguf_get_i64(const struct gguf_file *g, const char *key, int64_t *out);
bool gguf_get_f32(const struct gguf_file *g, const char *key, float *out);
bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out);
bool gguf_get_str(const struct gguf_file *g, const char *key, struct gguf_str *out);
/* Array of elem type `type` (strings: *data is const struct gguf_str *). */
bool gguf_get_arr(const struct gguf_file *g, const char *key, enum gguf_vtype type,
		  const void **data, uint64_t *n);
/* Element i of an integer/float/bool array as double (any numeric type). */
double gguf_arr_num(const struct gguf_kv *kv, uint64_t i);

/* The error for key when a typed getter refused it (a reader that needs
 * it, or found it present, calls this): FX_E_FORMAT with "GGUF: wrong
 * type: KEY is a string, want uint32" (want: the type the reader takes,
 * in the spec's names), "GGUF: KEY is -1 (int32), out of range for
 * uint32" for an integer that does not fit, or "GGUF: required key KEY
 * is missing" when absent. Returns FX_E_FORMAT. */
int gguf_type_error(const struct gguf_file *g, const char *key, const char *want,
		    struct fx_err *err);

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *g, const char *name);

/* ---- building a GGUF-shaped view in memory --------------------------
 * Other formats (Hugging Face checkpoints) are mapped onto a gguf_file with
 * llama.cpp's key and tensor names, so the model loader reads one shape.
 * Every call returns FX_OK or FX_E_NOMEM. Keys and values are copied;
 * tensor data is borrowed (must outlive g) unless it came from
 * gguf_build_alloc. Free the view with gguf_close. */
int gguf_build_new(struct gguf_file **out);
int gguf_build_u32(struct gguf_file *g, const char *key, uint32_t v);
int gguf_build_i32(struct gguf_file *g, const char *key, int32_t v);
int gguf_build_f32(struct gguf_file *g, const char *key, float v);
int gguf_build_bool(struct gguf_file *g, const char *key, bool v);
int gguf_build_str(struct gguf_file *g, const char *key, const char *v);
/* A numeric array (elements of type et, n of them, copied). */
int gguf_build_arr(struct gguf_file *g, const char *key, enum gguf_vtype et, const void *data,
		   uint64_t n);
/* An array of n strings (s[i].p need not be NUL-terminated; all copied). */
int gguf_build_str_arr(struct gguf_file *g, const char *key, const struct gguf_str *s, uint64_t n);
int gguf_build_tensor(struct gguf_file *g, const char *name, int type, uint32_t n_dims,
		      const int64_t ne[4], const void *data);
/* size bytes owned by g (zeroed), e.g. for converted tensor data. */
void *gguf_build_alloc(struct gguf_file *g, size_t size);

/* Bytes of one value of a fixed-size type; 0 for strings and arrays. */
extern const size_t gguf_vtype_size[GGUF_T_COUNT];

/* Name of a value type ("u32", "string", ...) for messages. */
const char *gguf_vtype_name(enum gguf_vtype t);

#endif
