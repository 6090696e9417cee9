/* A GGUF-shaped view built in memory: what io/hf.c maps a Hugging Face
 * checkpoint onto, and what `ferrox convert` will write out. */
#include <string.h>

#include "core/alloc.h"
#include "io/gguf.h"
#include "quant/quant.h"

void *gguf_build_alloc(struct gguf_file *g, size_t size)
{
	void **o = fx_realloc_array(g->owned, g->n_owned + 1, sizeof(*o));
	if (!o)
		return NULL;
	g->owned = o;
	void *p = fx_calloc(1, size ? size : 1);
	if (p)
		g->owned[g->n_owned++] = p;
	return p;
}

int gguf_build_new(struct gguf_file **out)
{
	struct gguf_file *g = fx_calloc(1, sizeof(*g));
	if (!g)
		return FX_E_NOMEM;
	g->version = 3;
	g->alignment = 32;
	*out = g;
	return FX_OK;
}

/* Append a key whose value is `size` bytes at val (copied). */
static int add_kv(struct gguf_file *g, const char *key, enum gguf_vtype type,
		  enum gguf_vtype arr_type, uint64_t n, const void *val, size_t size)
{
	struct gguf_kv *kv = fx_realloc_array(g->kv, g->n_kv + 1, sizeof(*kv));
	if (!kv)
		return FX_E_NOMEM;
	g->kv = kv;
	size_t kn = strlen(key);
	char *k = gguf_build_alloc(g, kn + 1);
	void *d = gguf_build_alloc(g, size);
	if (!k || !d)
		return FX_E_NOMEM;
	memcpy(k, key, kn);
	memcpy(d, val, size);
	g->kv[g->n_kv++] = (struct gguf_kv){ .key = { k, kn }, .type = type, .arr_type = arr_type,
					     .n = n, .data = d };
	return FX_OK;
}

int gguf_build_u32(struct gguf_file *g, const char *key, uint32_t v)
{
	return add_kv(g, key, GGUF_T_U32, 0, 1, &v, sizeof(v));
}

int gguf_build_i32(struct gguf_file *g, const char *key, int32_t v)
{
	return add_kv(g, key, GGUF_T_I32, 0, 1, &v, sizeof(v));
}

int gguf_build_f32(struct gguf_file *g, const char *key, float v)
{
	return add_kv(g, key, GGUF_T_F32, 0, 1, &v, sizeof(v));
}

int gguf_build_bool(struct gguf_file *g, const char *key, bool v)
{
	uint8_t b = v;
	return add_kv(g, key, GGUF_T_BOOL, 0, 1, &b, 1);
}

int gguf_build_str(struct gguf_file *g, const char *key, const char *v)
{
	/* Stored as in a file: u64 length, then the bytes (gguf_get_str). */
	uint64_t n = strlen(v);
	uint8_t *buf = fx_malloc_array(8 + n, 1);
	if (!buf)
		return FX_E_NOMEM;
	memcpy(buf, &n, 8);
	memcpy(buf + 8, v, n);
	int rc = add_kv(g, key, GGUF_T_STRING, 0, 1, buf, 8 + n);
	fx_free(buf);
	return rc;
}

int gguf_build_arr(struct gguf_file *g, const char *key, enum gguf_vtype et, const void *data,
		   uint64_t n)
{
	return add_kv(g, key, GGUF_T_ARRAY, et, n, data, (size_t)n * gguf_vtype_size[et]);
}

int gguf_build_tensor(struct gguf_file *g, const char *name, int type, uint32_t n_dims,
		      const int64_t ne[4], const void *data)
{
	struct gguf_tensor *t = fx_realloc_array(g->tensors, g->n_tensors + 1, sizeof(*t));
	if (!t)
		return FX_E_NOMEM;
	g->tensors = t;
	size_t nn = strlen(name);
	char *k = gguf_build_alloc(g, nn + 1);
	if (!k)
		return FX_E_NOMEM;
	memcpy(k, name, nn);
	struct gguf_tensor *x = &g->tensors[g->n_tensors++];
	*x = (struct gguf_tensor){ .name = { k, nn }, .n_dims = n_dims, .type = type, .data = data };
	for (int i = 0; i < 4; i++)
		x->ne[i] = i < (int)n_dims ? ne[i] : 1;
	x->nbytes = fx_row_size(type, x->ne[0]) * (size_t)(x->ne[1] * x->ne[2] * x->ne[3]);
	return FX_OK;
}

int gguf_build_str_arr(struct gguf_file *g, const char *key, const struct gguf_str *s, uint64_t n)
{
	size_t bytes = 0, kn = strlen(key);
	for (uint64_t i = 0; i < n; i++)
		bytes += s[i].n;
	/* the gguf_str array is freed by gguf_close with every string array */
	struct gguf_str *arr = fx_malloc_array(n ? (size_t)n : 1, sizeof(*arr));
	struct gguf_kv *kv = arr ? fx_realloc_array(g->kv, g->n_kv + 1, sizeof(*kv)) : NULL;
	if (kv)
		g->kv = kv;
	char *text = kv ? gguf_build_alloc(g, bytes) : NULL;
	char *k = text ? gguf_build_alloc(g, kn + 1) : NULL;
	if (!k) {
		fx_free(arr);
		return FX_E_NOMEM;
	}
	for (uint64_t i = 0; i < n; i++) {
		memcpy(text, s[i].p, s[i].n);
		arr[i] = (struct gguf_str){ text, s[i].n };
		text += s[i].n;
	}
	memcpy(k, key, kn);
	g->kv[g->n_kv++] = (struct gguf_kv){ .key = { k, kn }, .type = GGUF_T_ARRAY,
					     .arr_type = GGUF_T_STRING, .n = n, .data = arr };
	return FX_OK;
}
