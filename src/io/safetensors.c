/* safetensors reader. Layout per the safetensors README:
 *   u64 little-endian header length N, N bytes of UTF-8 JSON (an object,
 *   possibly padded with trailing spaces), then the data section.
 * Each JSON entry is {"dtype", "shape", "data_offsets": [begin, end]} with
 * offsets relative to the data section; "__metadata__" is skipped. The
 * reference implementation also requires the tensors to tile the data
 * section with no gaps; we only require that they lie inside it and do
 * not overlap (as the GGUF reader does).
 *
 * After parsing, the tensors are sorted by name so st_find is a binary
 * search. JSON numbers arrive as doubles: offsets and dims above 2^53 are
 * rejected rather than rounded.
 */
#include "io/safetensors.h"

#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/json.h"
#include "io/mapfile.h"
#include "quant/quant.h"

/* Largest header (and index file) accepted, as in the reference reader. */
#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* Largest integer a JSON number (a double) holds exactly. */
#define ST_MAX_INT ((uint64_t)1 << 53)

static const struct {
	const char *name;
	int type;
	uint64_t size;
} st_dtypes[] = {
	{ "F32", FX_TYPE_F32, 4 },
	{ "F16", FX_TYPE_F16, 2 },
	{ "BF16", FX_TYPE_BF16, 2 },
};

/* Valid safetensors dtypes ferrox does not load. */
static const char *const st_other_dtypes[] = {
	"BOOL", "U8", "I8", "U16", "I16", "U32", "I32", "U64", "I64", "F64",
	"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
};

static char *st_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = fx_malloc_array(n, 1);
	if (d)
		memcpy(d, s, n);
	return d;
}

/* dir + "/" + name, heap-allocated; NULL when out of memory. */
static char *path_join(const char *dir, const char *name)
{
	size_t nd = strlen(dir), nn = strlen(name);
	char *p = fx_malloc_array(nd + nn + 2, 1);
	if (!p)
		return NULL;
	memcpy(p, dir, nd);
	p[nd] = '/';
	memcpy(p + nd + 1, name, nn + 1);
	return p;
}

/* A JSON number that is a non-negative integer a double holds exactly. */
static bool json_u64(const cJSON *j, uint64_t *v)
{
	if (!cJSON_IsNumber(j))
		return false;
	double d = j->valuedouble;
	if (!(d >= 0.0 && d <= (double)ST_MAX_INT))
		return false;
	uint64_t u = (uint64_t)d;
	if ((double)u != d)
		return false;
	*v = u;
	return true;
}

static int parse_dtype(const char *name, const cJSON *j, struct st_tensor *t,
		       uint64_t *esize, struct fx_err *err)
{
	if (!cJSON_IsString(j))
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' has no \"dtype\" string", name);
	const char *s = j->valuestring;
	for (size_t i = 0; i < sizeof(st_dtypes) / sizeof(st_dtypes[0]); i++)
		if (!strcmp(s, st_dtypes[i].name)) {
			t->type = st_dtypes[i].type;
			*esize = st_dtypes[i].size;
			return FX_OK;
		}
	for (size_t i = 0; i < sizeof(st_other_dtypes) / sizeof(st_other_dtypes[0]); i++)
		if (!strcmp(s, st_other_dtypes[i]))
			return fx_fail(err, FX_E_UNSUPPORTED,
				       "safetensors: tensor '%.128s' has dtype %s, which ferrox does not support (F32, F16, BF16 only)",
				       name, s);
	return fx_fail(err, FX_E_FORMAT, "safetensors: tensor '%.128s' has unknown dtype '%.32s'",
		       name, s);
}

/* Shape [d0, ..., dk-1] -> ne[] in GGUF order (ne[0] = dk-1); a scalar
 * (shape []) is one element. *n_elem gets the product, overflow-checked. */
static int parse_shape(const char *name, const cJSON *j, struct st_tensor *t,
		       uint64_t *n_elem, struct fx_err *err)
{
	if (!cJSON_IsArray(j))
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' has no \"shape\" array", name);
	int nd = cJSON_GetArraySize(j);
	if (nd > 8)
		return fx_fail(err, FX_E_UNSUPPORTED,
			       "safetensors: tensor '%.128s' has %d dims (at most 8 supported)", name,
			       nd);
	uint64_t dims[8];
	bool zero = false;
	int i = 0;
	const cJSON *d;
	cJSON_ArrayForEach(d, j) {
		if (!json_u64(d, &dims[i]))
			return fx_fail(err, FX_E_FORMAT,
				       "safetensors: tensor '%.128s' shape dim %d is not a non-negative integer",
				       name, i);
		zero |= dims[i] == 0;
		i++;
	}
	for (int k = 0; k < 4; k++)
		t->ne[k] = 1;
	/* More than 4 dims (a vision tower's conv3d, which a text model skips):
	 * the outer ones fold into ne[3]. */
	t->n_dims = nd ? (nd < 4 ? nd : 4) : 1;
	uint64_t n = 1;
	for (int k = 0; k < nd; k++) {
		if (!zero && n > UINT64_MAX / dims[k])
			return fx_fail(err, FX_E_FORMAT,
				       "safetensors: tensor '%.128s' shape is impossibly large", name);
		n = zero ? 0 : n * dims[k];
	}
	if (n > (uint64_t)INT64_MAX)
		return fx_fail(err, FX_E_FORMAT, "safetensors: tensor '%.128s' shape is impossibly large",
			       name);
	for (int k = 0; k < nd; k++) {
		if (k < 4)
			t->ne[k] = (int64_t)dims[nd - 1 - k];
		else
			t->ne[3] = zero ? 0 : t->ne[3] * (int64_t)dims[nd - 1 - k]; /* <= n */
	}
	*n_elem = n;
	return FX_OK;
}

static int parse_offsets(const char *name, const cJSON *j, uint64_t *begin, uint64_t *end,
			 struct fx_err *err)
{
	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2 ||
	    !json_u64(cJSON_GetArrayItem(j, 0), begin) || !json_u64(cJSON_GetArrayItem(j, 1), end))
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' \"data_offsets\" is not [begin, end] of non-negative integers",
			       name);
	return FX_OK;
}

static int parse_entry(const cJSON *e, struct st_tensor *t, const uint8_t *data,
		       uint64_t data_size, struct fx_err *err)
{
	int rc;
	if (!e->string)
		return fx_fail(err, FX_E_FORMAT, "safetensors: header entry without a name");
	if (!(t->name = st_strdup(e->string)))
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory for tensor names");
	const char *name = t->name;
	if (!cJSON_IsObject(e))
		return fx_fail(err, FX_E_FORMAT, "safetensors: tensor '%.128s' entry is not an object",
			       name);
	uint64_t esize = 0, n_elem = 0, begin = 0, end = 0;
	if ((rc = parse_dtype(name, cJSON_GetObjectItemCaseSensitive(e, "dtype"), t, &esize, err)) ||
	    (rc = parse_shape(name, cJSON_GetObjectItemCaseSensitive(e, "shape"), t, &n_elem, err)) ||
	    (rc = parse_offsets(name, cJSON_GetObjectItemCaseSensitive(e, "data_offsets"), &begin,
				&end, err)))
		return rc;
	if (begin > end)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' data_offsets [%llu, %llu] has begin > end",
			       name, (unsigned long long)begin, (unsigned long long)end);
	if (end > data_size)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' data_offsets [%llu, %llu] run past the end of the %llu-byte data section (truncated?)",
			       name, (unsigned long long)begin, (unsigned long long)end,
			       (unsigned long long)data_size);
	if (n_elem > data_size / esize || n_elem * esize != end - begin)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: tensor '%.128s' size mismatch: shape has %llu elements of %llu bytes, data_offsets span %llu bytes",
			       name, (unsigned long long)n_elem, (unsigned long long)esize,
			       (unsigned long long)(end - begin));
	t->data = data + begin;
	t->nbytes = (size_t)(end - begin);
	return FX_OK;
}

static int cmp_by_name(const void *a, const void *b)
{
	return strcmp(((const struct st_tensor *)a)->name, ((const struct st_tensor *)b)->name);
}

static int cmp_by_data(const void *a, const void *b)
{
	const uint8_t *x = (*(const struct st_tensor *const *)a)->data;
	const uint8_t *y = (*(const struct st_tensor *const *)b)->data;
	return x < y ? -1 : x > y;
}

/* Names are unique (JSON objects may repeat keys) and no two non-empty
 * tensors share a byte; sorts f->tensors by name. */
static int check_tensors(struct st_file *f, struct fx_err *err)
{
	qsort(f->tensors, f->n_tensors, sizeof(*f->tensors), cmp_by_name);
	for (size_t i = 1; i < f->n_tensors; i++)
		if (!strcmp(f->tensors[i - 1].name, f->tensors[i].name))
			return fx_fail(err, FX_E_FORMAT, "safetensors: tensor '%.128s' appears twice",
				       f->tensors[i].name);
	const struct st_tensor **s = fx_malloc_array(f->n_tensors, sizeof(*s));
	if (!s)
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory to sort tensors");
	size_t n = 0;
	for (size_t i = 0; i < f->n_tensors; i++)
		if (f->tensors[i].nbytes)
			s[n++] = &f->tensors[i];
	qsort(s, n, sizeof(*s), cmp_by_data);
	int rc = FX_OK;
	for (size_t i = 1; i < n; i++) {
		if ((const uint8_t *)s[i - 1]->data + s[i - 1]->nbytes > (const uint8_t *)s[i]->data) {
			rc = fx_fail(err, FX_E_FORMAT, "safetensors: tensors '%.128s' and '%.128s' overlap",
				     s[i - 1]->name, s[i]->name);
			break;
		}
	}
	fx_free(s);
	return rc;
}

/* json (the header or the index, as `what` says) is NUL-terminated, n
 * bytes long, and holds one JSON object followed only by whitespace. */
static int parse_json(const char *json, size_t n, const char *what, cJSON **out,
		      struct fx_err *err)
{
	cJSON *root = NULL;
	size_t pos = 0;
	int rc = fx_json_parse(json, n, &root, &pos);
	if (rc == FX_E_NOMEM)
		return fx_fail(err, rc, "safetensors: out of memory parsing the %s", what);
	if (!root)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: %s is not valid JSON (error near byte %zu of %zu)",
			       what, pos, n);
	for (; pos < n; pos++)
		if (!strchr(" \t\r\n", json[pos]) || !json[pos]) {
			cJSON_Delete(root);
			return fx_fail(err, FX_E_FORMAT,
				       "safetensors: %s JSON has trailing bytes at %zu of %zu",
				       what, pos, n);
		}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return fx_fail(err, FX_E_FORMAT, "safetensors: %s JSON is not an object", what);
	}
	*out = root;
	return FX_OK;
}

static int parse(struct st_file *f, struct fx_err *err)
{
	const uint8_t *m = f->map;
	int rc;
	if (f->map_size < 8)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: %zu-byte file is too short for the 8-byte header length",
			       f->map_size);
	uint64_t hn = 0;
	for (int i = 7; i >= 0; i--)
		hn = hn << 8 | m[i];
	if (hn == 0)
		return fx_fail(err, FX_E_FORMAT, "safetensors: header length is 0");
	if (hn > ST_MAX_HEADER)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: header length %llu exceeds the 100 MB limit",
			       (unsigned long long)hn);
	if (hn > f->map_size - 8)
		return fx_fail(err, FX_E_FORMAT,
			       "safetensors: header length %llu runs past the end of the %zu-byte file (truncated?)",
			       (unsigned long long)hn, f->map_size);
	/* A NUL-terminated copy: cJSON then never reads past our buffer. */
	char *json = fx_malloc_array(hn + 1, 1);
	if (!json)
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory for a %llu-byte header",
			       (unsigned long long)hn);
	memcpy(json, m + 8, hn);
	json[hn] = 0;
	cJSON *root = NULL;
	if ((rc = parse_json(json, hn, "header", &root, err)))
		goto out_free_json;
	const cJSON *e;
	size_t n = 0;
	cJSON_ArrayForEach(e, root)
		n += !e->string || strcmp(e->string, "__metadata__");
	if (!(f->tensors = fx_calloc(n, sizeof(*f->tensors)))) {
		rc = fx_fail(err, FX_E_NOMEM, "safetensors: no memory for %zu tensors", n);
		goto out_delete_root;
	}
	f->n_tensors = n; /* names start NULL: st_close frees what was set */
	const uint8_t *data = m + 8 + hn;
	uint64_t data_size = f->map_size - 8 - hn;
	size_t i = 0;
	cJSON_ArrayForEach(e, root) {
		if (e->string && !strcmp(e->string, "__metadata__"))
			continue;
		if ((rc = parse_entry(e, &f->tensors[i++], data, data_size, err)))
			goto out_delete_root;
	}
	rc = check_tensors(f, err);
out_delete_root:
	cJSON_Delete(root);
out_free_json:
	fx_free(json);
	return rc;
}

static int finish_open(struct st_file *f, struct st_file **out, struct fx_err *err)
{
	int rc = parse(f, err);
	if (rc) {
		st_close(f);
		return rc;
	}
	*out = f;
	return FX_OK;
}

int st_open_memory(const void *buf, size_t size, struct st_file **out, struct fx_err *err)
{
	*out = NULL;
	struct st_file *f = fx_calloc(1, sizeof(*f));
	if (!f)
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory");
	f->map = buf;
	f->map_size = size;
	return finish_open(f, out, err);
}

int st_open(const char *path, struct st_file **out, struct fx_err *err)
{
	const void *m;
	size_t size;
	*out = NULL;
	int rc = io_map(path, 8, "safetensors", &m, &size, err);
	if (rc)
		return rc;
	struct st_file *f = fx_calloc(1, sizeof(*f));
	if (!f) {
		io_unmap(m, size);
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory");
	}
	f->map = m;
	f->map_size = size;
	f->owns_map = true;
	rc = finish_open(f, out, err);
	if (rc)
		fx_err_prefix(err, path); /* so the user knows which file */
	return rc;
}

void st_close(struct st_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; f->tensors && i < f->n_tensors; i++)
		fx_free(f->tensors[i].name);
	fx_free(f->tensors);
	if (f->owns_map)
		io_unmap(f->map, f->map_size);
	fx_free(f);
}

static int cmp_key_name(const void *key, const void *elem)
{
	return strcmp(key, ((const struct st_tensor *)elem)->name);
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	if (!f || !f->n_tensors)
		return NULL;
	return bsearch(name, f->tensors, f->n_tensors, sizeof(*f->tensors), cmp_key_name);
}

/* ---- checkpoint directories ---- */

/* Whole small file into a NUL-terminated heap buffer. */
static int read_file(const char *path, char **out, size_t *n_out, struct fx_err *err)
{
	int rc = FX_OK;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fx_fail(err, FX_E_IO, "%s: cannot open (%m)", path);
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = fx_fail(err, FX_E_IO, "%s: not a regular file", path);
		goto out_close;
	}
	if ((uint64_t)st.st_size > ST_MAX_HEADER) {
		rc = fx_fail(err, FX_E_FORMAT, "%s: %lld bytes exceeds the 100 MB limit", path,
			     (long long)st.st_size);
		goto out_close;
	}
	size_t n = (size_t)st.st_size, got = 0;
	char *buf = fx_malloc_array(n + 1, 1);
	if (!buf) {
		rc = fx_fail(err, FX_E_NOMEM, "%s: no memory to read it", path);
		goto out_close;
	}
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				rc = fx_fail(err, FX_E_IO, "%s: read failed (%m)", path);
			else
				rc = fx_fail(err, FX_E_IO, "%s: file shrank while read", path);
			fx_free(buf);
			goto out_close;
		}
		got += (size_t)r;
	}
	buf[n] = 0;
	*out = buf;
	*n_out = n;
out_close:
	close(fd);
	return rc;
}

/* One weight_map entry: tensor name -> shard file, both borrowed from the
 * parsed index; shard is the index into the distinct shard list. */
struct wm_ent {
	const char *name;
	const char *file;
	size_t shard;
};

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The weight_map entries, each shard file name checked to stay inside the
 * directory; *files gets the distinct file names, sorted. */
static int read_weight_map(const cJSON *root, const char *path, struct wm_ent **ents_out,
			   size_t *n_out, const char ***files_out, size_t *n_files_out,
			   struct fx_err *err)
{
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(wm) || !wm->child)
		return fx_fail(err, FX_E_FORMAT, "%s: no \"weight_map\" object, or it is empty", path);
	size_t n = (size_t)cJSON_GetArraySize(wm), i = 0, nf = 0;
	struct wm_ent *ents = fx_calloc(n, sizeof(*ents));
	const char **files = fx_calloc(n, sizeof(*files));
	if (!ents || !files) {
		fx_free(ents);
		fx_free(files);
		return fx_fail(err, FX_E_NOMEM, "%s: no memory for %zu entries", path, n);
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, wm) {
		const char *file = cJSON_GetStringValue(e);
		if (!e->string || !file || !file[0]) {
			fx_free(ents);
			fx_free(files);
			return fx_fail(err, FX_E_FORMAT,
				       "%s: weight_map entry '%.128s' is not a shard file name", path,
				       e->string ? e->string : "");
		}
		if (strchr(file, '/') || strstr(file, "..")) {
			fx_free(ents);
			fx_free(files);
			return fx_fail(err, FX_E_FORMAT,
				       "%s: weight_map names shard '%.128s' for '%.128s': a name with '/' or '..' could lie outside the directory",
				       path, file, e->string);
		}
		ents[i++] = (struct wm_ent){ .name = e->string, .file = file };
		files[nf++] = file;
	}
	qsort(files, nf, sizeof(*files), cmp_str_ptr);
	size_t u = 0;
	for (i = 0; i < nf; i++)
		if (!u || strcmp(files[u - 1], files[i]))
			files[u++] = files[i];
	for (i = 0; i < n; i++) {
		const char **hit = bsearch(&ents[i].file, files, u, sizeof(*files), cmp_str_ptr);
		ents[i].shard = (size_t)(hit - files);
	}
	*ents_out = ents;
	*n_out = n;
	*files_out = files;
	*n_files_out = u;
	return FX_OK;
}

static int cmp_tensor_ptr_name(const void *a, const void *b)
{
	return strcmp((*(const struct st_tensor *const *)a)->name,
		      (*(const struct st_tensor *const *)b)->name);
}

/* A name in two shards would make st_set_find ambiguous. */
static int check_unique_across(const struct st_set *s, const char *path, struct fx_err *err)
{
	size_t n = 0, k = 0;
	for (size_t i = 0; i < s->n_files; i++)
		n += s->files[i]->n_tensors;
	const struct st_tensor **all = fx_malloc_array(n, sizeof(*all));
	if (!all)
		return fx_fail(err, FX_E_NOMEM, "%s: no memory to index %zu tensors", path, n);
	for (size_t i = 0; i < s->n_files; i++)
		for (size_t j = 0; j < s->files[i]->n_tensors; j++)
			all[k++] = &s->files[i]->tensors[j];
	qsort(all, n, sizeof(*all), cmp_tensor_ptr_name);
	int rc = FX_OK;
	for (size_t i = 1; i < n; i++)
		if (!strcmp(all[i - 1]->name, all[i]->name)) {
			rc = fx_fail(err, FX_E_FORMAT, "%s: tensor '%.128s' appears in two shards",
				     path, all[i]->name);
			break;
		}
	fx_free(all);
	return rc;
}

/* Open every shard the index names, once each, and check the index
 * against them. */
static int open_shards(struct st_set *s, const char *dir, const char *path, const cJSON *root,
		       struct fx_err *err)
{
	struct wm_ent *ents = NULL;
	const char **files = NULL;
	size_t n = 0, nf = 0;
	int rc = read_weight_map(root, path, &ents, &n, &files, &nf, err);
	if (rc)
		return rc;
	if (!(s->files = fx_calloc(nf, sizeof(*s->files)))) {
		rc = fx_fail(err, FX_E_NOMEM, "%s: no memory for %zu shards", path, nf);
		goto out_free;
	}
	for (size_t i = 0; i < nf; i++) {
		char *p = path_join(dir, files[i]);
		if (!p) {
			rc = fx_fail(err, FX_E_NOMEM, "%s: no memory", path);
			goto out_free;
		}
		rc = st_open(p, &s->files[i], err);
		fx_free(p);
		if (rc)
			goto out_free;
		s->n_files = i + 1;
	}
	for (size_t i = 0; i < n; i++)
		if (!st_find(s->files[ents[i].shard], ents[i].name)) {
			rc = fx_fail(err, FX_E_FORMAT,
				     "%s: index puts tensor '%.128s' in shard '%.128s', which does not contain it",
				     path, ents[i].name, ents[i].file);
			goto out_free;
		}
	rc = check_unique_across(s, path, err);
out_free:
	fx_free(files);
	fx_free(ents);
	return rc;
}

static int open_index(struct st_set *s, const char *dir, const char *path, struct fx_err *err)
{
	char *text = NULL;
	size_t n = 0;
	int rc = read_file(path, &text, &n, err);
	if (rc)
		return rc;
	cJSON *root = NULL;
	if ((rc = parse_json(text, n, "index", &root, err))) {
		fx_err_prefix(err, path);
		goto out_free_text;
	}
	rc = open_shards(s, dir, path, root, err);
	cJSON_Delete(root);
out_free_text:
	fx_free(text);
	return rc;
}

static int open_single(struct st_set *s, const char *path, struct fx_err *err)
{
	if (!(s->files = fx_calloc(1, sizeof(*s->files))))
		return fx_fail(err, FX_E_NOMEM, "safetensors: no memory");
	int rc = st_open(path, &s->files[0], err);
	if (!rc)
		s->n_files = 1;
	return rc;
}

/* Whether path exists; errors other than "not there" are reported. */
static int probe(const char *path, bool *exists, struct fx_err *err)
{
	struct stat st;
	*exists = stat(path, &st) == 0;
	if (!*exists && errno != ENOENT && errno != ENOTDIR)
		return fx_fail(err, FX_E_IO, "%s: cannot stat (%m)", path);
	return FX_OK;
}

int st_set_open_dir(const char *dir, struct st_set **out, struct fx_err *err)
{
	int rc;
	bool have;
	*out = NULL;
	struct st_set *s = fx_calloc(1, sizeof(*s));
	char *single = path_join(dir, "model.safetensors");
	char *index = path_join(dir, "model.safetensors.index.json");
	if (!s || !single || !index) {
		rc = fx_fail(err, FX_E_NOMEM, "safetensors: no memory");
		goto out_free;
	}
	if ((rc = probe(single, &have, err)))
		goto out_free;
	if (have) {
		rc = open_single(s, single, err);
		goto out_free;
	}
	if ((rc = probe(index, &have, err)))
		goto out_free;
	if (have)
		rc = open_index(s, dir, index, err);
	else
		rc = fx_fail(err, FX_E_IO,
			     "%s: no safetensors checkpoint (looked for model.safetensors and model.safetensors.index.json)",
			     dir);
out_free:
	fx_free(index);
	fx_free(single);
	if (rc)
		st_set_close(s);
	else
		*out = s;
	return rc;
}

void st_set_close(struct st_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->files && i < s->n_files; i++)
		st_close(s->files[i]);
	fx_free(s->files);
	fx_free(s);
}

const struct st_tensor *st_set_find(const struct st_set *s, const char *name)
{
	for (size_t i = 0; s && i < s->n_files; i++) {
		const struct st_tensor *t = st_find(s->files[i], name);
		if (t)
			return t;
	}
	return NULL;
}
