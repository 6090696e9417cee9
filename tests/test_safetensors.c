/* safetensors reader: a valid hand-made file reads back (names, dtypes,
 * shapes in GGUF order, data); malformed ones (header length, JSON,
 * offsets, overlaps, dtypes, shapes, every truncation) fail with the right
 * code and a message naming the problem, never reading outside the buffer
 * (run under ASan in CI); sharded checkpoint directories read back and a
 * bad index (missing tensor, shard outside the directory) fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"
#include "io/safetensors.h"
#include "quant/quant.h"

/* A tiny safetensors writer: u64 LE header length, header, data, in an
 * exact-size malloc'd block. hlen_override replaces the real length. */
static uint8_t *build(const char *json, const void *data, size_t data_n, uint64_t hlen_override,
		      size_t *size)
{
	size_t hn = strlen(json);
	uint64_t len = hlen_override ? hlen_override : hn;
	*size = 8 + hn + data_n;
	uint8_t *p = malloc(*size);
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(len >> (8 * i));
	memcpy(p + 8, json, hn);
	if (data_n)
		memcpy(p + 8 + hn, data, data_n);
	return p;
}

static void write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	CHECKF(f != NULL, "cannot create %s", path);
	if (!f)
		return;
	CHECK(fwrite(p, 1, n, f) == n);
	fclose(f);
}

static void write_st(const char *path, const char *json, const void *data, size_t data_n)
{
	size_t n;
	uint8_t *p = build(json, data, data_n, 0, &n);
	write_file(path, p, n);
	free(p);
}

/* The valid file: 50 data bytes, the last tensor ends exactly there. */
static const char valid_json[] =
	"{\"__metadata__\":{\"format\":\"pt\"},"
	"\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
	"\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},"
	"\"c\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[32,34]},"
	"\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[50,50]},"
	"\"d\":{\"dtype\":\"F32\",\"shape\":[1,2,1,2],\"data_offsets\":[34,50]}}   ";

static void valid_data(uint8_t d[50])
{
	for (int i = 0; i < 6; i++) {
		float f = (float)i + 0.5f;
		memcpy(d + 4 * i, &f, 4);
	}
	const uint16_t h[4] = { 0x3c00, 0x4000, 0x4200, 0x4400 }; /* 1, 2, 3, 4 */
	memcpy(d + 24, h, 8);
	const uint16_t bf = 0x3fc0; /* 1.5 */
	memcpy(d + 32, &bf, 2);
	for (int i = 0; i < 4; i++) {
		float f = -(float)i;
		memcpy(d + 34 + 4 * i, &f, 4);
	}
}

static uint8_t *build_valid(size_t *size)
{
	uint8_t d[50];
	valid_data(d);
	return build(valid_json, d, sizeof(d), 0, size);
}

static bool ne_is(const struct st_tensor *t, int nd, int64_t a, int64_t b, int64_t c, int64_t d)
{
	return t->n_dims == nd && t->ne[0] == a && t->ne[1] == b && t->ne[2] == c && t->ne[3] == d;
}

static float f32_at(const struct st_tensor *t, int i)
{
	float f;
	memcpy(&f, (const uint8_t *)t->data + 4 * i, 4);
	return f;
}

static void test_valid(void)
{
	size_t n;
	uint8_t *p = build_valid(&n);
	struct st_file *f = NULL;
	struct fx_err e = { 0 };
	int rc = st_open_memory(p, n, &f, &e);
	CHECKF(rc == FX_OK, "rc %d: %s", rc, e.msg);
	if (rc) {
		free(p);
		return;
	}
	CHECK(f->n_tensors == 5);
	const struct st_tensor *a = st_find(f, "a.weight");
	CHECK(a && !strcmp(a->name, "a.weight") && a->type == FX_TYPE_F32 && a->nbytes == 24);
	CHECK(a && ne_is(a, 2, 3, 2, 1, 1));
	CHECK(a && f32_at(a, 0) == 0.5f && f32_at(a, 5) == 5.5f);
	const struct st_tensor *b = st_find(f, "b");
	uint16_t h;
	CHECK(b && b->type == FX_TYPE_F16 && ne_is(b, 1, 4, 1, 1, 1) && b->nbytes == 8);
	CHECK(b && (memcpy(&h, (const uint8_t *)b->data + 6, 2), h == 0x4400));
	const struct st_tensor *c = st_find(f, "c");
	CHECK(c && c->type == FX_TYPE_BF16 && ne_is(c, 1, 1, 1, 1, 1) && c->nbytes == 2);
	CHECK(c && (memcpy(&h, c->data, 2), h == 0x3fc0));
	const struct st_tensor *d = st_find(f, "d");
	CHECK(d && d->type == FX_TYPE_F32 && ne_is(d, 4, 2, 1, 2, 1) && d->nbytes == 16);
	CHECK(d && f32_at(d, 3) == -3.0f && (const uint8_t *)d->data == p + n - 16);
	const struct st_tensor *z = st_find(f, "e");
	CHECK(z && ne_is(z, 2, 3, 0, 1, 1) && z->nbytes == 0);
	CHECK(st_find(f, "__metadata__") == NULL);
	CHECK(st_find(f, "missing") == NULL && st_find(f, "") == NULL && st_find(f, "zzz") == NULL);
	st_close(f);
	st_close(NULL);
	free(p);
}

/* Open an exact-size heap copy of the first n bytes (ASan sees over-reads). */
static int open_copy(const uint8_t *p, size_t n, struct fx_err *e)
{
	uint8_t *c = malloc(n ? n : 1);
	memcpy(c, p, n);
	struct st_file *f = (struct st_file *)1;
	int rc = st_open_memory(c, n, &f, e);
	if (rc == FX_OK)
		st_close(f);
	else
		CHECK(f == NULL);
	free(c);
	return rc;
}

static void expect_bytes(const uint8_t *p, size_t n, int code, const char *needle,
			 const char *what)
{
	struct fx_err e = { 0 };
	int rc = open_copy(p, n, &e);
	CHECKF(rc == code, "%s: want %d, got %d (%s)", what, code, rc, e.msg);
	CHECKF(strstr(e.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, needle);
}

/* json over a 64-byte data section of zeros. */
static void expect_json(const char *json, int code, const char *needle)
{
	uint8_t d[64] = { 0 };
	size_t n;
	uint8_t *p = build(json, d, sizeof(d), 0, &n);
	expect_bytes(p, n, code, needle, json);
	free(p);
}

#define T(name, dtype, shape, b, e) \
	"\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e "]}"

static void test_malformed(void)
{
	size_t n;
	uint8_t *p;
	uint8_t d[64] = { 0 };
	const char *ok = "{" T("x", "F32", "[4]", 0, 16) "}";

	p = build(ok, d, sizeof(d), (uint64_t)200 * 1000 * 1000, &n);
	expect_bytes(p, n, FX_E_FORMAT, "100 MB limit", "header too big");
	free(p);
	p = build(ok, d, sizeof(d), UINT64_MAX, &n);
	expect_bytes(p, n, FX_E_FORMAT, "limit", "header length 2^64-1");
	free(p);
	p = build(ok, d, sizeof(d), 0, &n);
	memset(p, 0, 8);
	expect_bytes(p, n, FX_E_FORMAT, "header length is 0", "header zero");
	free(p);
	p = build(ok, d, sizeof(d), strlen(ok) + sizeof(d) + 1, &n);
	expect_bytes(p, n, FX_E_FORMAT, "past the end", "header past end");
	free(p);
	p = build(ok, d, 0, 0, &n);
	expect_bytes(p, 5, FX_E_FORMAT, "too short", "5-byte file");
	free(p);

	p = build(ok, d, sizeof(d), 0, &n);
	expect_bytes(p, n, FX_OK, "", "the base case is valid");
	free(p);

	expect_json("{\"x\":{\"dtype\":\"F32\",", FX_E_FORMAT, "not valid JSON");
	expect_json("not json at all", FX_E_FORMAT, "not valid JSON");
	expect_json("[1, 2]", FX_E_FORMAT, "not an object");
	expect_json("{} {}", FX_E_FORMAT, "trailing");
	expect_json("{" T("x", "F32", "[4]", 0, 16) ",\"y\":3}", FX_E_FORMAT, "'y' entry is not an object");
	expect_json("{\"x\":{\"shape\":[4],\"data_offsets\":[0,16]}}", FX_E_FORMAT, "dtype");
	expect_json("{\"x\":{\"dtype\":\"F32\",\"data_offsets\":[0,16]}}", FX_E_FORMAT, "shape");
	expect_json("{\"x\":{\"dtype\":\"F32\",\"shape\":[4]}}", FX_E_FORMAT, "data_offsets");
	expect_json("{" T("x", "F32", "[4]", 0, 16.5) "}", FX_E_FORMAT, "data_offsets");
	expect_json("{" T("x", "F32", "[4]", -4, 12) "}", FX_E_FORMAT, "data_offsets");
	expect_json("{" T("x", "F32", "[4]", 0, 1e300) "}", FX_E_FORMAT, "data_offsets");

	expect_json("{" T("x", "F32", "[4]", 56, 72) "}", FX_E_FORMAT, "past the end of the 64-byte data section");
	expect_json("{" T("x", "F32", "[4]", 0, 65) "}", FX_E_FORMAT, "past the end");
	expect_json("{" T("x", "F32", "[0]", 16, 0) "}", FX_E_FORMAT, "begin > end");
	expect_json("{" T("x", "F32", "[4]", 0, 16) "," T("y", "F32", "[4]", 12, 28) "}",
		    FX_E_FORMAT, "overlap");
	expect_json("{" T("x", "F32", "[4]", 16, 32) "," T("y", "F16", "[16]", 0, 32) "}",
		    FX_E_FORMAT, "overlap");
	expect_json("{" T("x", "F32", "[4]", 0, 16) "," T("x", "F32", "[4]", 16, 32) "}",
		    FX_E_FORMAT, "appears twice");
	expect_json("{" T("tok_embd", "I64", "[2]", 0, 16) "}", FX_E_UNSUPPORTED, "dtype I64");
	expect_json("{" T("tok_embd", "I64", "[2]", 0, 16) "}", FX_E_UNSUPPORTED, "tok_embd");
	expect_json("{" T("x", "F8_E4M3", "[2]", 0, 2) "}", FX_E_UNSUPPORTED, "F8_E4M3");
	expect_json("{" T("x", "BOOL", "[2]", 0, 2) "}", FX_E_UNSUPPORTED, "BOOL");
	expect_json("{" T("x", "F64", "[2]", 0, 16) "}", FX_E_UNSUPPORTED, "F64");
	expect_json("{" T("x", "Q99", "[2]", 0, 16) "}", FX_E_FORMAT, "unknown dtype 'Q99'");
	expect_json("{" T("x", "F32", "[2,3]", 0, 20) "}", FX_E_FORMAT, "size mismatch");
	expect_json("{" T("x", "F16", "[4]", 0, 16) "}", FX_E_FORMAT, "size mismatch");
	expect_json("{" T("x", "F32", "[]", 0, 0) "}", FX_E_FORMAT, "size mismatch");
	expect_json("{" T("x", "F32", "[4294967296,4294967296,4294967296]", 0, 16) "}",
		    FX_E_FORMAT, "impossibly large");
	expect_json("{" T("x", "F32", "[9007199254740992,4]", 0, 16) "}", FX_E_FORMAT,
		    "size mismatch");
	/* 5..8 dims (a vision tower's conv3d) are read, folded into 4; 9 are not */
	expect_json("{" T("x", "F32", "[1,1,1,1,4]", 0, 16) "}", FX_OK, "");
	expect_json("{" T("x", "F32", "[1,1,1,1,1,1,1,1,4]", 0, 16) "}", FX_E_UNSUPPORTED, "9 dims");
	expect_json("{" T("x", "F32", "[0,4294967296,4294967296,4294967296,4294967296,4294967296]", 0, 0) "}",
		    FX_OK, "");
	expect_json("{" T("x", "F32", "[2,-2]", 0, 16) "}", FX_E_FORMAT, "dim 1");
	expect_json("{" T("x", "F32", "[2,\"2\"]", 0, 16) "}", FX_E_FORMAT, "dim 1");
	expect_json("{" T("x", "F32", "[2,1.5]", 0, 16) "}", FX_E_FORMAT, "dim 1");
}

static void test_accepts(void)
{
	uint8_t d[64] = { 0 };
	const char *ok[] = {
		"{}",
		"{\"__metadata__\":{\"k\":\"v\"}}",
		/* gaps are allowed; an empty tensor overlaps nothing */
		"{" T("x", "F32", "[2]", 8, 16) "," T("y", "F32", "[0]", 12, 12) "," T("z", "F32", "[2,0,7]", 64, 64) "}",
		/* trailing spaces and newline padding, as writers pad to 8 */
		"{" T("x", "BF16", "[1,1,1,1]", 0, 2) "}  \n ",
		/* extra fields in an entry are ignored; 1e1 is an integer */
		"{\"x\":{\"dtype\":\"F32\",\"shape\":[1e1],\"data_offsets\":[0,40],\"extra\":[1]}}",
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		size_t n;
		uint8_t *p = build(ok[i], d, sizeof(d), 0, &n);
		struct fx_err e = { 0 };
		int rc = open_copy(p, n, &e);
		CHECKF(rc == FX_OK, "%s: rc %d (%s)", ok[i], rc, e.msg);
		free(p);
	}
}

static void test_truncations(void)
{
	size_t n;
	uint8_t *p = build_valid(&n);
	int bad = 0;
	for (size_t k = 0; k < n; k++) {
		struct fx_err e = { 0 };
		int rc = open_copy(p, k, &e);
		if (rc != FX_E_FORMAT || !e.msg[0]) {
			bad++;
			fprintf(stderr, "prefix %zu: rc %d (%s)\n", k, rc, e.msg);
		}
	}
	CHECKF(bad == 0, "%d truncated prefixes were accepted or gave no message", bad);
	free(p);
}

static const char shard1[] = "model-00001-of-00002.safetensors";
static const char shard2[] = "model-00002-of-00002.safetensors";

static void write_index(const char *dir, const char *weight_map)
{
	char path[512], json[1024];
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	snprintf(json, sizeof(json), "{\"metadata\":{\"total_size\":40},\"weight_map\":{%s}}",
		 weight_map);
	write_file(path, json, strlen(json));
}

static void expect_dir(const char *dir, int code, const char *needle, const char *what)
{
	struct st_set *s = (struct st_set *)1;
	struct fx_err e = { 0 };
	int rc = st_set_open_dir(dir, &s, &e);
	CHECKF(rc == code, "%s: want %d, got %d (%s)", what, code, rc, e.msg);
	CHECKF(strstr(e.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what, e.msg, needle);
	CHECK(s == NULL);
}

static void test_dirs(void)
{
	char dir[] = "/tmp/fx_test_st_XXXXXX";
	if (!mkdtemp(dir)) {
		CHECKF(0, "mkdtemp failed");
		return;
	}
	char p1[512], p2[512], pi[512], ps[512];
	snprintf(p1, sizeof(p1), "%s/%s", dir, shard1);
	snprintf(p2, sizeof(p2), "%s/%s", dir, shard2);
	snprintf(pi, sizeof(pi), "%s/model.safetensors.index.json", dir);
	snprintf(ps, sizeof(ps), "%s/model.safetensors", dir);

	expect_dir(dir, FX_E_IO, "model.safetensors.index.json", "empty dir");
	expect_dir("/nonexistent/fx", FX_E_IO, "looked for model.safetensors", "missing dir");

	float v[10];
	for (int i = 0; i < 10; i++)
		v[i] = (float)(i * 10);
	write_st(p1, "{" T("x", "F32", "[2]", 0, 8) "," T("y", "F32", "[2,2]", 8, 24) "}", v, 24);
	write_st(p2, "{" T("z", "F32", "[4]", 0, 16) "}", v + 6, 16);
	char wm[512];
	snprintf(wm, sizeof(wm), "\"x\":\"%s\",\"y\":\"%s\",\"z\":\"%s\"", shard1, shard1, shard2);
	write_index(dir, wm);

	struct st_set *s = NULL;
	struct fx_err e = { 0 };
	int rc = st_set_open_dir(dir, &s, &e);
	CHECKF(rc == FX_OK, "sharded: rc %d (%s)", rc, e.msg);
	if (rc == FX_OK) {
		CHECK(s->n_files == 2);
		const struct st_tensor *x = st_set_find(s, "x");
		const struct st_tensor *y = st_set_find(s, "y");
		const struct st_tensor *z = st_set_find(s, "z");
		CHECK(x && ne_is(x, 1, 2, 1, 1, 1) && f32_at(x, 1) == 10.0f);
		CHECK(y && ne_is(y, 2, 2, 2, 1, 1) && f32_at(y, 3) == 50.0f);
		CHECK(z && ne_is(z, 1, 4, 1, 1, 1) && f32_at(z, 0) == 60.0f && f32_at(z, 3) == 90.0f);
		CHECK(st_set_find(s, "w") == NULL);
		st_set_close(s);
	}
	st_set_close(NULL);

	snprintf(wm, sizeof(wm), "\"x\":\"%s\",\"w\":\"%s\"", shard1, shard1);
	write_index(dir, wm);
	expect_dir(dir, FX_E_FORMAT, "'w' in shard", "index names a missing tensor");
	write_index(dir, "\"x\":\"../evil.safetensors\"");
	expect_dir(dir, FX_E_FORMAT, "outside the directory", "index with ../");
	write_index(dir, "\"x\":\"/etc/passwd\"");
	expect_dir(dir, FX_E_FORMAT, "outside the directory", "index with /");
	write_index(dir, "\"x\":\"model-00003-of-00002.safetensors\"");
	expect_dir(dir, FX_E_IO, "model-00003-of-00002.safetensors", "missing shard");
	write_index(dir, "\"x\":3");
	expect_dir(dir, FX_E_FORMAT, "not a shard file name", "non-string shard");
	write_index(dir, "");
	expect_dir(dir, FX_E_FORMAT, "weight_map", "empty weight_map");
	write_file(pi, "{\"weight_map\":", 14);
	expect_dir(dir, FX_E_FORMAT, "not valid JSON", "bad index JSON");
	/* x in both shards: a lookup would be ambiguous */
	write_st(p2, "{" T("x", "F32", "[4]", 0, 16) "," T("z", "F32", "[4]", 16, 32) "}", v, 32);
	snprintf(wm, sizeof(wm), "\"x\":\"%s\",\"y\":\"%s\",\"z\":\"%s\"", shard1, shard1,
		 shard2);
	write_index(dir, wm);
	expect_dir(dir, FX_E_FORMAT, "two shards", "tensor in two shards");
	/* a bad shard's error names its file */
	write_st(p2, "{" T("x", "I64", "[4]", 0, 32) "}", v, 32);
	expect_dir(dir, FX_E_UNSUPPORTED, shard2, "bad shard");

	/* model.safetensors wins over the index; st_open maps it */
	write_st(ps, "{" T("only", "F16", "[3,1]", 2, 8) "}", v, 8);
	rc = st_set_open_dir(dir, &s, &e);
	CHECKF(rc == FX_OK, "single: rc %d (%s)", rc, e.msg);
	if (rc == FX_OK) {
		CHECK(s->n_files == 1 && st_set_find(s, "x") == NULL);
		const struct st_tensor *t = st_set_find(s, "only");
		CHECK(t && t->type == FX_TYPE_F16 && ne_is(t, 2, 1, 3, 1, 1) && t->nbytes == 6);
		st_set_close(s);
	}
	write_file(ps, "\x07\0\0\0\0\0\0\0{\"a\":1}", 15);
	expect_dir(dir, FX_E_FORMAT, "model.safetensors: safetensors: tensor 'a' entry", "bad single file");
	write_file(ps, "abc", 3);
	expect_dir(dir, FX_E_FORMAT, "too short", "3-byte file");

	struct st_file *f = (struct st_file *)1;
	CHECK(st_open(dir, &f, &e) == FX_E_IO && f == NULL);
	CHECK(st_open("/nonexistent/x.safetensors", &f, &e) == FX_E_IO &&
	      strstr(e.msg, "/nonexistent/x.safetensors"));

	unlink(p1);
	unlink(p2);
	unlink(pi);
	unlink(ps);
	CHECKF(rmdir(dir) == 0, "%s left behind", dir);
}

int main(void)
{
	test_valid();
	test_malformed();
	test_accepts();
	test_truncations();
	test_dirs();
	return check_exit();
}
