/* GGUF reader: a valid hand-made file reads back; malformed ones (bad
 * magic, every truncation, huge counts, out-of-range, unaligned or
 * overlapping tensors, unknown types) fail with a message naming the
 * problem and never read outside the buffer (run under ASan in CI). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"
#include "io/gguf.h"

/* A tiny GGUF writer for the tests. */
struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}
static void u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void str(struct buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }

struct spec {
	uint32_t version;
	uint64_t n_kv_override;   /* 0: the real count */
	uint64_t t1_offset;       /* offset of the second tensor */
	uint32_t t1_type;
	uint32_t alignment;       /* 0: no general.alignment key */
	bool dup_name;
};

/* Two keys + optional alignment, two tensors of 8 f32 (32 bytes each). */
static struct buf build(const struct spec *s)
{
	struct buf b = { 0 };
	put(&b, "GGUF", 4);
	u32(&b, s->version);
	u64(&b, 2);                                   /* tensors */
	uint64_t n_kv = 3 + (s->alignment ? 1 : 0);
	u64(&b, s->n_kv_override ? s->n_kv_override : n_kv);
	str(&b, "general.architecture"); u32(&b, GGUF_T_STRING); str(&b, "testarch");
	str(&b, "testarch.block_count"); u32(&b, GGUF_T_U32); u32(&b, 7);
	str(&b, "tokenizer.ggml.tokens"); u32(&b, GGUF_T_ARRAY); u32(&b, GGUF_T_STRING);
	u64(&b, 3); str(&b, "a"); str(&b, "bc"); str(&b, "");
	if (s->alignment) {
		str(&b, "general.alignment"); u32(&b, GGUF_T_U32); u32(&b, s->alignment);
	}
	uint32_t al = s->alignment ? s->alignment : 32;
	str(&b, "t0"); u32(&b, 2); u64(&b, 4); u64(&b, 2); u32(&b, 0); u64(&b, 0);
	str(&b, s->dup_name ? "t0" : "t1"); u32(&b, 1); u64(&b, 8); u32(&b, s->t1_type);
	u64(&b, s->t1_offset);
	while (b.n % al)
		put(&b, "", 1);
	for (int i = 0; i < 32; i++) {
		float f = (float)i;
		put(&b, &f, 4);
	}
	return b;
}

static struct spec good(void)
{
	return (struct spec){ .version = 3, .t1_offset = 32, .t1_type = 0 };
}

/* Open a copy in an exact-size heap block, so ASan sees any over-read. */
static int open_copy(const struct buf *b, size_t n, struct gguf_file **g, struct fx_err *e)
{
	uint8_t *p = malloc(n ? n : 1);
	memcpy(p, b->p, n);
	int rc = gguf_open_memory(p, n, g, e);
	if (rc == FX_OK)
		gguf_close(*g);
	free(p);
	return rc;
}

static void expect_fail(const struct spec *s, int code, const char *needle)
{
	struct buf b = build(s);
	struct gguf_file *g = NULL;
	struct fx_err e = { 0 };
	int rc = open_copy(&b, b.n, &g, &e);
	CHECKF(rc == code, "want %d, got %d (%s)", code, rc, e.msg);
	CHECKF(strstr(e.msg, needle) != NULL, "message '%s' lacks '%s'", e.msg, needle);
	free(b.p);
}

static void test_valid(void)
{
	struct spec s = good();
	struct buf b = build(&s);
	struct gguf_file *g;
	struct fx_err e = { 0 };
	CHECK(gguf_open_memory(b.p, b.n, &g, &e) == FX_OK);
	struct gguf_str a;
	CHECK(gguf_get_str(g, "general.architecture", &a) && a.n == 8 && !memcmp(a.p, "testarch", 8));
	uint32_t v = 0;
	CHECK(gguf_get_u32(g, "testarch.block_count", &v) && v == 7);
	CHECK(!gguf_get_u32(g, "missing.key", &v));
	float f;
	CHECK(!gguf_get_f32(g, "testarch.block_count", &f)); /* wrong type */
	const struct gguf_str *toks;
	uint64_t n;
	CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_T_STRING, (const void **)&toks, &n) && n == 3);
	CHECK(toks[1].n == 2 && !memcmp(toks[1].p, "bc", 2) && toks[2].n == 0);
	const struct gguf_tensor *t1 = gguf_find_tensor(g, "t1");
	CHECK(t1 && t1->ne[0] == 8 && t1->ne[1] == 1 && t1->nbytes == 32);
	CHECK(t1 && ((const float *)t1->data)[3] == 11.0f);
	const struct gguf_tensor *t0 = gguf_find_tensor(g, "t0");
	CHECK(t0 && t0->n_dims == 2 && t0->ne[0] == 4 && t0->ne[1] == 2 &&
	      ((const float *)t0->data)[7] == 7.0f);
	CHECK(g->alignment == 32);
	gguf_close(g);
	free(b.p);

	s.version = 2;
	s.alignment = 64;
	s.t1_offset = 64;
	b = build(&s);
	CHECK(gguf_open_memory(b.p, b.n, &g, &e) == FX_OK);
	if (g) {
		CHECK(g->alignment == 64 && g->data_offset % 64 == 0);
		gguf_close(g);
	}
	free(b.p);
}

static void test_truncations(void)
{
	struct spec s = good();
	struct buf b = build(&s);
	int fails = 0;
	/* The tensors end 64 bytes before the file (32 spare floats). */
	for (size_t n = 0; n < b.n - 64; n++) {
		struct gguf_file *g;
		struct fx_err e = { 0 };
		int rc = open_copy(&b, n, &g, &e);
		if (rc == FX_OK || !e.msg[0])
			fails++;
	}
	CHECKF(fails == 0, "%d truncated prefixes were accepted or gave no message", fails);
	free(b.p);
}

static void test_malformed(void)
{
	struct spec s = good();
	struct buf b = build(&s);
	b.p[0] = 'X';
	struct gguf_file *g;
	struct fx_err e = { 0 };
	CHECK(open_copy(&b, b.n, &g, &e) == FX_E_FORMAT && strstr(e.msg, "magic"));
	free(b.p);

	s = good(); s.version = 1;
	expect_fail(&s, FX_E_UNSUPPORTED, "version 1");
	s = good(); s.n_kv_override = (uint64_t)1 << 60;
	expect_fail(&s, FX_E_FORMAT, "cannot fit");
	s = good(); s.t1_offset = 4096;
	expect_fail(&s, FX_E_FORMAT, "outside the data section");
	s = good(); s.t1_offset = 16;
	expect_fail(&s, FX_E_FORMAT, "aligned");
	s = good(); s.t1_offset = 0;
	expect_fail(&s, FX_E_FORMAT, "overlap");
	s = good(); s.t1_type = 1234;
	expect_fail(&s, FX_E_UNSUPPORTED, "type id 1234");
	s = good(); s.dup_name = true;
	expect_fail(&s, FX_E_FORMAT, "appears twice");
	s = good(); s.alignment = 48;
	expect_fail(&s, FX_E_FORMAT, "power of two");

	/* A string length that runs past the end. */
	s = good();
	b = build(&s);
	uint64_t huge = (uint64_t)1 << 62;
	memcpy(b.p + 24, &huge, 8); /* the first key's length */
	CHECK(open_copy(&b, b.n, &g, &e) == FX_E_FORMAT && strstr(e.msg, "truncated"));
	free(b.p);
}

static void test_files(void)
{
	struct fx_err e = { 0 };
	struct fx_model *m;
	CHECK(fx_model_load("/nonexistent/model.gguf", NULL, &m, &e) == FX_E_IO);
	CHECK(strstr(e.msg, "/nonexistent/model.gguf") != NULL);

	char path[] = "/tmp/fx_test_gguf_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	const char junk[] = "this is not a model file at all";
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk));
	close(fd);
	CHECK(fx_model_load(path, NULL, &m, &e) == FX_E_FORMAT && strstr(e.msg, "not a GGUF"));

	/* A valid GGUF of an architecture ferrox does not know. */
	struct spec s = good();
	struct buf b = build(&s);
	FILE *f = fopen(path, "wb");
	fwrite(b.p, 1, b.n, f);
	fclose(f);
	CHECK(fx_model_load(path, NULL, &m, &e) == FX_E_UNSUPPORTED);
	CHECKF(strstr(e.msg, "'testarch'") != NULL, "%s", e.msg);
	/* ...and a truncated copy of it. */
	CHECK(truncate(path, (off_t)b.n - 70) == 0);
	CHECK(fx_model_load(path, NULL, &m, &e) == FX_E_FORMAT);
	CHECKF(strstr(e.msg, "truncated") != NULL, "%s", e.msg);
	char *rep;
	CHECK(fx_inspect(path, &rep, &e) == FX_E_FORMAT);
	unlink(path);
	free(b.p);
}

int main(void)
{
	test_valid();
	test_truncations();
	test_malformed();
	test_files();
	return check_exit();
}
