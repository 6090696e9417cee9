/* GGUF reader. Layout per ggml/docs/gguf.md:
 *   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x (string key, u32 type, value),
 *   n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset),
 *   padding to general.alignment, tensor data.
 * Version 1 (u32 counts) is long obsolete and rejected.
 */
#include "io/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "io/mapfile.h"
#include "quant/quant.h"

/* A cursor over the mapping; every read checks the bytes remain. */
struct rd {
	const uint8_t *p;
	size_t size, pos;
	struct fx_err *err;
};

static int need(struct rd *r, uint64_t n, const char *what)
{
	if (n > r->size - r->pos)
		return fx_fail(r->err, FX_E_FORMAT,
			       "GGUF truncated: %s needs %llu bytes at offset %zu, file has %zu",
			       what, (unsigned long long)n, r->pos, r->size);
	return FX_OK;
}

/* Copy n little-endian bytes at the cursor (files are read on
 * little-endian hosts only, as llama.cpp does). */
static int rd_raw(struct rd *r, void *v, size_t n, const char *what)
{
	int rc = need(r, n, what);
	if (rc)
		return rc;
	memcpy(v, r->p + r->pos, n);
	r->pos += n;
	return FX_OK;
}

static int rd_u32(struct rd *r, uint32_t *v, const char *what)
{
	return rd_raw(r, v, sizeof(*v), what);
}

static int rd_u64(struct rd *r, uint64_t *v, const char *what)
{
	return rd_raw(r, v, sizeof(*v), what);
}

static int rd_str(struct rd *r, struct gguf_str *s, const char *what)
{
	uint64_t n;
	int rc = rd_u64(r, &n, what);
	if (rc)
		return rc;
	if ((rc = need(r, n, what)))
		return rc;
	s->p = (const char *)r->p + r->pos;
	s->n = n;
	r->pos += n;
	return FX_OK;
}

const size_t gguf_vtype_size[GGUF_T_COUNT] = {
	[GGUF_T_U8] = 1, [GGUF_T_I8] = 1, [GGUF_T_U16] = 2, [GGUF_T_I16] = 2,
	[GGUF_T_U32] = 4, [GGUF_T_I32] = 4, [GGUF_T_F32] = 4, [GGUF_T_BOOL] = 1,
	[GGUF_T_U64] = 8, [GGUF_T_I64] = 8, [GGUF_T_F64] = 8,
};

const char *gguf_vtype_name(enum gguf_vtype t)
{
	static const char *const names[GGUF_T_COUNT] = {
		"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
		"string", "array", "u64", "i64", "f64",
	};
	return (unsigned)t < GGUF_T_COUNT ? names[t] : "unknown";
}

/* Key as a printable C string for messages (truncated). */
static const char *kname(const struct gguf_str *k, char *buf, size_t n)
{
	size_t m = k->n < n - 1 ? k->n : n - 1;
	memcpy(buf, k->p, m);
	buf[m] = 0;
	return buf;
}

/* Skip (and bounds-check) one value of type t; nested arrays recurse with a
 * depth limit so a hostile file cannot exhaust the stack. */
static int skip_value(struct rd *r, uint32_t t, int depth)
{
	int rc;
	if (t >= GGUF_T_COUNT)
		return fx_fail(r->err, FX_E_FORMAT, "GGUF: unknown metadata value type %u", t);
	if (t == GGUF_T_STRING) {
		struct gguf_str s;
		return rd_str(r, &s, "string value");
	}
	if (t == GGUF_T_ARRAY) {
		uint32_t et;
		uint64_t n;
		if (depth > 4)
			return fx_fail(r->err, FX_E_FORMAT, "GGUF: arrays nested too deeply");
		if ((rc = rd_u32(r, &et, "array type")) || (rc = rd_u64(r, &n, "array length")))
			return rc;
		if (et >= GGUF_T_COUNT)
			return fx_fail(r->err, FX_E_FORMAT, "GGUF: unknown array element type %u", et);
		if (et != GGUF_T_STRING && et != GGUF_T_ARRAY) {
			if (n > (r->size - r->pos) / gguf_vtype_size[et])
				return fx_fail(r->err, FX_E_FORMAT,
					       "GGUF truncated: array of %llu %s at offset %zu exceeds the file",
					       (unsigned long long)n, gguf_vtype_name(et), r->pos);
			r->pos += n * gguf_vtype_size[et];
			return FX_OK;
		}
		/* Each element takes at least 8 bytes: cheap bound before looping. */
		if (n > (r->size - r->pos) / 8)
			return fx_fail(r->err, FX_E_FORMAT,
				       "GGUF truncated: array of %llu elements at offset %zu exceeds the file",
				       (unsigned long long)n, r->pos);
		for (uint64_t i = 0; i < n; i++)
			if ((rc = skip_value(r, et, depth + 1)))
				return rc;
		return FX_OK;
	}
	if ((rc = need(r, gguf_vtype_size[t], "metadata value")))
		return rc;
	r->pos += gguf_vtype_size[t];
	return FX_OK;
}

static int read_kv(struct rd *r, struct gguf_kv *kv)
{
	uint32_t t;
	int rc;
	if ((rc = rd_str(r, &kv->key, "metadata key")) || (rc = rd_u32(r, &t, "metadata type")))
		return rc;
	if (kv->key.n == 0)
		return fx_fail(r->err, FX_E_FORMAT, "GGUF: a metadata key at offset %zu is empty",
			       r->pos - 12);
	if (t >= GGUF_T_COUNT) {
		char b[96];
		return fx_fail(r->err, FX_E_FORMAT, "GGUF: key '%s' has unknown value type %u",
			       kname(&kv->key, b, sizeof(b)), t);
	}
	kv->type = t;
	kv->n = 1;
	if (t != GGUF_T_ARRAY) {
		size_t start = r->pos;
		if ((rc = skip_value(r, t, 0)))
			return rc;
		kv->data = r->p + start;
		return FX_OK;
	}
	uint32_t et;
	uint64_t n;
	if ((rc = rd_u32(r, &et, "array type")) || (rc = rd_u64(r, &n, "array length")))
		return rc;
	if (et >= GGUF_T_COUNT) {
		char b[96];
		return fx_fail(r->err, FX_E_FORMAT, "GGUF: key '%s' has unknown array type %u",
			       kname(&kv->key, b, sizeof(b)), et);
	}
	kv->arr_type = et;
	kv->n = n;
	if (et == GGUF_T_STRING) {
		if (n > (r->size - r->pos) / 8)
			return fx_fail(r->err, FX_E_FORMAT,
				       "GGUF truncated: string array of %llu at offset %zu exceeds the file",
				       (unsigned long long)n, r->pos);
		struct gguf_str *s = fx_malloc_array(n ? n : 1, sizeof(*s));
		if (!s)
			return fx_fail(r->err, FX_E_NOMEM, "GGUF: no memory for %llu strings",
				       (unsigned long long)n);
		kv->data = s;
		for (uint64_t i = 0; i < n; i++)
			if ((rc = rd_str(r, &s[i], "string array element")))
				return rc;
		return FX_OK;
	}
	if (et == GGUF_T_ARRAY) {
		/* Arrays of arrays carry nothing ferrox reads: validate and skip. */
		if (n > (r->size - r->pos) / 12)
			return fx_fail(r->err, FX_E_FORMAT, "GGUF truncated: nested array exceeds the file");
		for (uint64_t i = 0; i < n; i++)
			if ((rc = skip_value(r, GGUF_T_ARRAY, 1)))
				return rc;
		kv->data = NULL;
		return FX_OK;
	}
	if (n > (r->size - r->pos) / gguf_vtype_size[et])
		return fx_fail(r->err, FX_E_FORMAT,
			       "GGUF truncated: array of %llu %s at offset %zu exceeds the file",
			       (unsigned long long)n, gguf_vtype_name(et), r->pos);
	kv->data = r->p + r->pos;
	r->pos += n * gguf_vtype_size[et];
	return FX_OK;
}

static int read_tensor_info(struct rd *r, struct gguf_tensor *t)
{
	uint32_t nd, type;
	int rc;
	char b[96];
	if ((rc = rd_str(r, &t->name, "tensor name")) || (rc = rd_u32(r, &nd, "tensor n_dims")))
		return rc;
	if (nd == 0 || nd > 4)
		return fx_fail(r->err, FX_E_FORMAT, "GGUF: tensor '%s' has %u dims (1..4 allowed)",
			       kname(&t->name, b, sizeof(b)), nd);
	t->n_dims = nd;
	for (int i = 0; i < 4; i++)
		t->ne[i] = 1;
	for (uint32_t i = 0; i < nd; i++) {
		uint64_t ne;
		if ((rc = rd_u64(r, &ne, "tensor dim")))
			return rc;
		if (ne == 0 || ne > ((uint64_t)1 << 40))
			return fx_fail(r->err, FX_E_FORMAT, "GGUF: tensor '%s' dim %u is %llu",
				       kname(&t->name, b, sizeof(b)), i, (unsigned long long)ne);
		t->ne[i] = (int64_t)ne;
	}
	if ((rc = rd_u32(r, &type, "tensor type")) || (rc = rd_u64(r, &t->offset, "tensor offset")))
		return rc;
	t->type = (int)type;
	const struct fx_type_traits *tt = fx_type_get((int)type);
	if (!tt)
		return fx_fail(r->err, FX_E_UNSUPPORTED,
			       "GGUF: tensor '%s' has type id %u, which ferrox does not support",
			       kname(&t->name, b, sizeof(b)), type);
	if (t->ne[0] % tt->blck_size)
		return fx_fail(r->err, FX_E_FORMAT,
			       "GGUF: tensor '%s' row of %lld is not a multiple of %s's block of %lld",
			       kname(&t->name, b, sizeof(b)), (long long)t->ne[0], tt->name,
			       (long long)tt->blck_size);
	/* Rows and total size, with overflow checks (dims are <= 2^40 each). */
	uint64_t nrows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2];
	if (t->ne[3] > 1 && nrows > UINT64_MAX / (uint64_t)t->ne[3])
		goto too_big;
	nrows *= (uint64_t)t->ne[3];
	uint64_t row = fx_row_size(t->type, t->ne[0]);
	if (row && nrows > (uint64_t)SIZE_MAX / row)
		goto too_big;
	t->nbytes = (size_t)(row * nrows);
	return FX_OK;
too_big:
	return fx_fail(r->err, FX_E_FORMAT, "GGUF: tensor '%s' is impossibly large",
		       kname(&t->name, b, sizeof(b)));
}

static int cmp_by_offset(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The tensors' addresses sorted by cmp (owned by the caller), or NULL. */
static const struct gguf_tensor **sorted(const struct gguf_file *g,
					 int (*cmp)(const void *, const void *))
{
	const struct gguf_tensor **s = fx_malloc_array(g->n_tensors, sizeof(*s));
	if (!s)
		return NULL;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		s[i] = &g->tensors[i];
	qsort(s, g->n_tensors, sizeof(*s), cmp);
	return s;
}

/* Data section: every tensor aligned, inside the file, none overlapping. */
static int check_tensors(struct gguf_file *g, struct fx_err *err)
{
	char b[96];
	size_t avail = g->map_size - g->data_offset;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];
		if (t->offset % g->alignment)
			return fx_fail(err, FX_E_FORMAT, "GGUF: tensor '%s' offset %llu is not %u-aligned",
				       kname(&t->name, b, sizeof(b)), (unsigned long long)t->offset,
				       g->alignment);
		if (t->offset > avail || t->nbytes > avail - t->offset)
			return fx_fail(err, FX_E_FORMAT,
				       "GGUF: tensor '%s' [%llu, +%zu) lies outside the data section (%zu bytes): file truncated?",
				       kname(&t->name, b, sizeof(b)), (unsigned long long)t->offset,
				       t->nbytes, avail);
		t->data = g->map + g->data_offset + t->offset;
	}
	if (g->n_tensors < 2)
		return FX_OK;
	const struct gguf_tensor **s = sorted(g, cmp_by_offset);
	if (!s)
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory to sort tensors");
	int rc = FX_OK;
	for (uint64_t i = 1; i < g->n_tensors; i++) {
		if (s[i - 1]->offset + s[i - 1]->nbytes > s[i]->offset) {
			char b2[96];
			rc = fx_fail(err, FX_E_FORMAT, "GGUF: tensors '%s' and '%s' overlap",
				     kname(&s[i - 1]->name, b, sizeof(b)),
				     kname(&s[i]->name, b2, sizeof(b2)));
			break;
		}
	}
	fx_free(s);
	return rc;
}

static int cmp_by_name(const void *a, const void *b)
{
	const struct gguf_tensor *x = *(const struct gguf_tensor *const *)a;
	const struct gguf_tensor *y = *(const struct gguf_tensor *const *)b;
	int c = memcmp(x->name.p, y->name.p, x->name.n < y->name.n ? x->name.n : y->name.n);
	return c ? c : (x->name.n > y->name.n) - (x->name.n < y->name.n);
}

static int check_unique_names(const struct gguf_file *g, struct fx_err *err)
{
	if (g->n_tensors < 2)
		return FX_OK;
	const struct gguf_tensor **s = sorted(g, cmp_by_name);
	if (!s)
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory to sort tensors");
	int rc = FX_OK;
	for (uint64_t i = 1; i < g->n_tensors && !rc; i++)
		if (!cmp_by_name(&s[i - 1], &s[i])) {
			char b[96];
			rc = fx_fail(err, FX_E_FORMAT, "GGUF: tensor '%s' appears twice",
				     kname(&s[i]->name, b, sizeof(b)));
		}
	fx_free(s);
	return rc;
}

static int cmp_kv_by_key(const void *a, const void *b)
{
	const struct gguf_str *x = &(*(const struct gguf_kv *const *)a)->key;
	const struct gguf_str *y = &(*(const struct gguf_kv *const *)b)->key;
	int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
	return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Every key once: a reader would see only the first of two, and which one
 * a tool sees is its own choice (llama.cpp's gguf_init refuses duplicates
 * too). Sorted, so a file of many keys costs n log n. */
static int check_unique_keys(const struct gguf_file *g, struct fx_err *err)
{
	if (g->n_kv < 2)
		return FX_OK;
	const struct gguf_kv **s = fx_malloc_array(g->n_kv, sizeof(*s));
	if (!s)
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory to sort the metadata keys");
	for (uint64_t i = 0; i < g->n_kv; i++)
		s[i] = &g->kv[i];
	qsort(s, g->n_kv, sizeof(*s), cmp_kv_by_key);
	int rc = FX_OK;
	for (uint64_t i = 1; i < g->n_kv && !rc; i++)
		if (!cmp_kv_by_key(&s[i - 1], &s[i])) {
			char b[96];
			ptrdiff_t x = s[i - 1] - g->kv, y = s[i] - g->kv;
			rc = fx_fail(err, FX_E_FORMAT,
				     "GGUF: duplicate metadata key '%s' (keys #%td and #%td of %llu)",
				     kname(&s[i]->key, b, sizeof(b)), x < y ? x : y, x < y ? y : x,
				     (unsigned long long)g->n_kv);
		}
	fx_free(s);
	return rc;
}

static bool str_eq(const struct gguf_str *s, const char *c)
{
	size_t n = strlen(c);
	return s->n == n && memcmp(s->p, c, n) == 0;
}

static int parse(struct gguf_file *g, struct fx_err *err)
{
	struct rd r = { .p = g->map, .size = g->map_size, .err = err };
	int rc;
	if (g->map_size < 4 || memcmp(g->map, "GGUF", 4) != 0)
		return fx_fail(err, FX_E_FORMAT, "not a GGUF file (bad magic)");
	r.pos = 4;
	if ((rc = rd_u32(&r, &g->version, "version")))
		return rc;
	if (g->version != 2 && g->version != 3)
		return fx_fail(err, FX_E_UNSUPPORTED, "GGUF version %u not supported (2 and 3 are)",
			       g->version);
	if ((rc = rd_u64(&r, &g->n_tensors, "tensor count")) || (rc = rd_u64(&r, &g->n_kv, "kv count")))
		return rc;
	/* A key takes >= 12 bytes and a tensor info >= 24: reject counts the
	 * file cannot hold before allocating for them. */
	if (g->n_kv > (r.size - r.pos) / 12 || g->n_tensors > (r.size - r.pos) / 24)
		return fx_fail(err, FX_E_FORMAT,
			       "GGUF: %llu keys / %llu tensors cannot fit in a %zu-byte file",
			       (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, r.size);
	g->kv = fx_calloc(g->n_kv, sizeof(*g->kv));
	g->tensors = fx_calloc(g->n_tensors, sizeof(*g->tensors));
	if (!g->kv || !g->tensors)
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory for the header");
	for (uint64_t i = 0; i < g->n_kv; i++)
		if ((rc = read_kv(&r, &g->kv[i])))
			return rc;
	if ((rc = check_unique_keys(g, err)))
		return rc;
	g->alignment = 32;
	const struct gguf_kv *al = gguf_find(g, "general.alignment");
	if (al) {
		if (al->type != GGUF_T_U32)
			return fx_fail(err, FX_E_FORMAT, "GGUF: general.alignment is %s, want u32",
				       gguf_vtype_name(al->type));
		memcpy(&g->alignment, al->data, 4);
		if (g->alignment == 0 || (g->alignment & (g->alignment - 1)))
			return fx_fail(err, FX_E_FORMAT,
				       "GGUF: general.alignment %u is not a power of two", g->alignment);
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if ((rc = read_tensor_info(&r, &g->tensors[i])))
			return rc;
	if ((rc = check_unique_names(g, err)))
		return rc;
	size_t off = (r.pos + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors && off > r.size)
		return fx_fail(err, FX_E_FORMAT, "GGUF truncated: no tensor data section");
	g->data_offset = off > r.size ? r.size : off;
	return check_tensors(g, err);
}

static int finish_open(struct gguf_file *g, struct gguf_file **out, struct fx_err *err)
{
	int rc = parse(g, err);
	if (rc) {
		gguf_close(g);
		return rc;
	}
	*out = g;
	return FX_OK;
}

int gguf_open_memory(const void *buf, size_t size, struct gguf_file **out, struct fx_err *err)
{
	struct gguf_file *g = fx_calloc(1, sizeof(*g));
	if (!g)
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory");
	g->map = buf;
	g->map_size = size;
	*out = NULL;
	return finish_open(g, out, err);
}

/* gguf_open's and gguf_open_read's common part: progress NULL maps. */
static int open_file(const char *path, bool read_in, bool (*progress)(double, void *), void *arg,
		     struct gguf_file **out, struct fx_err *err)
{
	const void *m;
	size_t size;
	*out = NULL;
	int rc = read_in ? io_read(path, 4, "GGUF", progress, arg, &m, &size, err)
			 : io_map(path, 4, "GGUF", &m, &size, err);
	if (rc)
		return rc;
	struct gguf_file *g = fx_calloc(1, sizeof(*g));
	if (!g) {
		io_unmap(m, size);
		return fx_fail(err, FX_E_NOMEM, "GGUF: no memory");
	}
	g->map = m;
	g->map_size = size;
	g->owns_map = true;
	g->read_in = read_in;
	rc = finish_open(g, out, err);
	if (rc)
		fx_err_prefix(err, path); /* so the user knows which file */
	return rc;
}

int gguf_open(const char *path, struct gguf_file **out, struct fx_err *err)
{
	return open_file(path, false, NULL, NULL, out, err);
}

int gguf_open_read(const char *path, bool (*progress)(double, void *), void *arg, struct gguf_file **out,
		   struct fx_err *err)
{
	return open_file(path, true, progress, arg, out, err);
}

/* Free the struct gguf_str tables built for string arrays. */
static void free_string_arrays(struct gguf_file *g)
{
	for (uint64_t i = 0; g->kv && i < g->n_kv; i++)
		if (g->kv[i].type == GGUF_T_ARRAY && g->kv[i].arr_type == GGUF_T_STRING) {
			fx_free((void *)g->kv[i].data);
			g->kv[i].data = NULL;
		}
}

void gguf_release_meta(struct gguf_file *g)
{
	if (!g)
		return;
	free_string_arrays(g);
	if (g->owns_map && !g->read_in)
		io_map_release(g->map, 0, g->data_offset);
}

void gguf_close(struct gguf_file *g)
{
	if (!g)
		return;
	free_string_arrays(g);
	fx_free(g->kv);
	fx_free(g->tensors);
	for (size_t i = 0; i < g->n_owned; i++)
		fx_free(g->owned[i]);
	fx_free(g->owned);
	if (g->release)
		g->release(g->release_arg);
	if (g->owns_map)
		io_unmap(g->map, g->map_size);
	fx_free(g);
}

const struct gguf_kv *gguf_find(const struct gguf_file *g, const char *key)
{
	for (uint64_t i = 0; i < g->n_kv; i++)
		if (str_eq(&g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

/* Numeric scalar of any integer/float/bool type at p as double/int64. */
static bool scalar_i64(enum gguf_vtype t, const void *p, int64_t *v)
{
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32;
		int32_t i32; uint64_t u64; int64_t i64; } u;
	if (t >= GGUF_T_COUNT || !gguf_vtype_size[t] || t == GGUF_T_F32 || t == GGUF_T_F64)
		return false;
	memcpy(&u, p, gguf_vtype_size[t]);
	switch (t) {
	case GGUF_T_U8: case GGUF_T_BOOL: *v = u.u8; break;
	case GGUF_T_I8: *v = u.i8; break;
	case GGUF_T_U16: *v = u.u16; break;
	case GGUF_T_I16: *v = u.i16; break;
	case GGUF_T_U32: *v = u.u32; break;
	case GGUF_T_I32: *v = u.i32; break;
	case GGUF_T_U64:
		if (u.u64 > INT64_MAX)
			return false;
		*v = (int64_t)u.u64;
		break;
	case GGUF_T_I64: *v = u.i64; break;
	default: return false;
	}
	return true;
}

bool gguf_get_i64(const struct gguf_file *g, const char *key, int64_t *out)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	return kv && kv->type != GGUF_T_ARRAY && kv->type != GGUF_T_BOOL &&
	       scalar_i64(kv->type, kv->data, out);
}

bool gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out)
{
	int64_t v;
	if (!gguf_get_i64(g, key, &v) || v < 0 || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

bool gguf_get_f32(const struct gguf_file *g, const char *key, float *out)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	if (!kv)
		return false;
	if (kv->type == GGUF_T_F32) {
		memcpy(out, kv->data, 4);
		return true;
	}
	if (kv->type == GGUF_T_F64) {
		double d;
		memcpy(&d, kv->data, 8);
		*out = (float)d;
		return true;
	}
	return false;
}

bool gguf_get_bool(const struct gguf_file *g, const char *key, bool *out)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	if (!kv || kv->type != GGUF_T_BOOL)
		return false;
	*out = *(const uint8_t *)kv->data != 0;
	return true;
}

bool gguf_get_str(const struct gguf_file *g, const char *key, struct gguf_str *out)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	if (!kv || kv->type != GGUF_T_STRING)
		return false;
	/* Scalar strings: data points at the u64 length in the mapping. */
	uint64_t n;
	memcpy(&n, kv->data, 8);
	out->n = n;
	out->p = (const char *)kv->data + 8;
	return true;
}

bool gguf_get_arr(const struct gguf_file *g, const char *key, enum gguf_vtype type,
		  const void **data, uint64_t *n)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	if (!kv || kv->type != GGUF_T_ARRAY || kv->arr_type != type || !kv->data)
		return false;
	*data = kv->data;
	*n = kv->n;
	return true;
}

double gguf_arr_num(const struct gguf_kv *kv, uint64_t i)
{
	const uint8_t *p = (const uint8_t *)kv->data + i * gguf_vtype_size[kv->arr_type];
	if (kv->arr_type == GGUF_T_F32) {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	if (kv->arr_type == GGUF_T_F64) {
		double d;
		memcpy(&d, p, 8);
		return d;
	}
	int64_t v = 0;
	scalar_i64(kv->arr_type, p, &v);
	return (double)v;
}

/* The spec's type names (GGUF_METADATA_VALUE_TYPE_*), for messages a user
 * compares with a dump of the file. */
static const char *spec_type_name(enum gguf_vtype t)
{
	static const char *const names[GGUF_T_COUNT] = {
		"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
		"string", "array", "uint64", "int64", "float64",
	};
	return (unsigned)t < GGUF_T_COUNT ? names[t] : "unknown";
}

int gguf_type_error(const struct gguf_file *g, const char *key, const char *want,
		    struct fx_err *err)
{
	const struct gguf_kv *kv = gguf_find(g, key);
	int64_t v;
	if (!kv)
		return fx_fail(err, FX_E_FORMAT, "GGUF: required key %s is missing", key);
	if (kv->type == GGUF_T_ARRAY)
		return fx_fail(err, FX_E_FORMAT, "GGUF: wrong type: %s is an array of %llu %s, want %s",
			       key, (unsigned long long)kv->n, spec_type_name(kv->arr_type), want);
	bool want_int = !strncmp(want, "uint", 4) || !strncmp(want, "int", 3);
	if (want_int && kv->type == GGUF_T_U64 && !scalar_i64(kv->type, kv->data, &v))
		return fx_fail(err, FX_E_FORMAT, "GGUF: %s is over 2^63 (uint64), out of range for %s",
			       key, want);
	if (want_int && kv->type != GGUF_T_BOOL && scalar_i64(kv->type, kv->data, &v))
		return fx_fail(err, FX_E_FORMAT, "GGUF: %s is %lld (%s), out of range for %s", key,
			       (long long)v, spec_type_name(kv->type), want);
	return fx_fail(err, FX_E_FORMAT, "GGUF: wrong type: %s is a%s %s, want %s", key,
		       spec_type_name(kv->type)[0] == 'i' ? "n" : "",
		       spec_type_name(kv->type), want);
}

const struct gguf_tensor *gguf_find_tensor(const struct gguf_file *g, const char *name)
{
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (str_eq(&g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}
