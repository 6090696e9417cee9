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
#include "io/gguf_write.h"
#include "io/hf.h"
#include "model/arch.h"

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
	const char *extra_key;    /* a fourth string key, e.g. a duplicate or "" */
	const char *extra_val;
};

/* Two keys + optional alignment, two tensors of 8 f32 (32 bytes each). */
static struct buf build(const struct spec *s)
{
	struct buf b = { 0 };
	put(&b, "GGUF", 4);
	u32(&b, s->version);
	u64(&b, 2);                                   /* tensors */
	uint64_t n_kv = 3 + (s->alignment ? 1 : 0) + (s->extra_key ? 1 : 0);
	u64(&b, s->n_kv_override ? s->n_kv_override : n_kv);
	str(&b, "general.architecture"); u32(&b, GGUF_T_STRING); str(&b, "testarch");
	str(&b, "testarch.block_count"); u32(&b, GGUF_T_U32); u32(&b, 7);
	str(&b, "tokenizer.ggml.tokens"); u32(&b, GGUF_T_ARRAY); u32(&b, GGUF_T_STRING);
	u64(&b, 3); str(&b, "a"); str(&b, "bc"); str(&b, "");
	if (s->alignment) {
		str(&b, "general.alignment"); u32(&b, GGUF_T_U32); u32(&b, s->alignment);
	}
	if (s->extra_key) {
		str(&b, s->extra_key); u32(&b, GGUF_T_STRING); str(&b, s->extra_val);
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
	/* Two architectures: which one a reader sees would be its own choice. */
	s = good(); s.extra_key = "general.architecture"; s.extra_val = "llama";
	expect_fail(&s, FX_E_FORMAT, "duplicate metadata key 'general.architecture'");
	s = good(); s.extra_key = "testarch.block_count"; s.extra_val = "7";
	expect_fail(&s, FX_E_FORMAT, "duplicate metadata key 'testarch.block_count'");
	s = good(); s.extra_key = ""; s.extra_val = "x";
	expect_fail(&s, FX_E_FORMAT, "empty");
	s = good(); s.extra_key = "general.name"; s.extra_val = "fine";
	b = build(&s);
	CHECKF(open_copy(&b, b.n, &g, &e) == FX_OK, "%s", e.msg);
	free(b.p);

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

/* ---- whole models: a fixture with one change ------------------------- */

/* One change remake() makes: set key (replacing it, or appended after the
 * others when append or absent) to a u32 / string / f32, or add a tensor. */
struct edit {
	const char *key;
	enum gguf_vtype type; /* GGUF_T_U32, GGUF_T_STRING, GGUF_T_F32 */
	uint32_t u;
	const char *s;
	float f;
	bool append;          /* keep the original too: a duplicate key */
	const char *tensor;   /* instead of a key: an extra f32 tensor of n floats */
	int64_t n;
	const char *drop;     /* instead: leave this tensor out */
};

static int put_edit(struct gguf_file *v, const struct edit *e)
{
	if (e->type == GGUF_T_U32)
		return gguf_build_u32(v, e->key, e->u);
	if (e->type == GGUF_T_F32)
		return gguf_build_f32(v, e->key, e->f);
	return gguf_build_str(v, e->key, e->s);
}

/* The HF fixture dir (the view io/hf.c maps it to: llama.cpp's names)
 * written to path as a GGUF file with the edits applied. */
static bool remake(const char *dir, const struct edit *ed, int n_ed, const char *path)
{
	static const float zeros[4096];
	struct gguf_file *src, *v;
	struct fx_err e = { 0 };
	int rc = hf_open(dir, &arch_hf, &src, &e);
	CHECKF(rc == FX_OK, "%s: %s", dir, e.msg);
	if (rc)
		return false;
	CHECK(gguf_build_new(&v) == FX_OK);
	bool used[16] = { 0 };
	for (uint64_t i = 0; i < src->n_kv; i++) {
		const struct gguf_kv *kv = &src->kv[i];
		char k[128];
		snprintf(k, sizeof(k), "%.*s", (int)kv->key.n, kv->key.p);
		int j = 0;
		while (j < n_ed && !(ed[j].key && !ed[j].append && !strcmp(ed[j].key, k)))
			j++;
		if (j < n_ed) {
			used[j] = true;
			rc = put_edit(v, &ed[j]);
		} else if (kv->type == GGUF_T_ARRAY && kv->arr_type == GGUF_T_STRING) {
			rc = gguf_build_str_arr(v, k, kv->data, kv->n); /* tokenizer.json's */
		} else if (kv->type == GGUF_T_ARRAY) {
			rc = gguf_build_arr(v, k, kv->arr_type, kv->data, kv->n);
		} else if (kv->type == GGUF_T_STRING) {
			struct gguf_str st;
			char buf[256];
			gguf_get_str(src, k, &st);
			snprintf(buf, sizeof(buf), "%.*s", (int)st.n, st.p);
			rc = gguf_build_str(v, k, buf);
		} else if (kv->type == GGUF_T_BOOL) {
			rc = gguf_build_bool(v, k, *(const uint8_t *)kv->data != 0);
		} else if (kv->type == GGUF_T_F32) {
			float f;
			memcpy(&f, kv->data, 4);
			rc = gguf_build_f32(v, k, f);
		} else {
			uint32_t u = 0;
			CHECKF(gguf_get_u32(src, k, &u), "%s: key %s of type %d", dir, k, kv->type);
			rc = gguf_build_u32(v, k, u);
		}
		CHECK(rc == FX_OK);
	}
	for (int j = 0; j < n_ed; j++)
		if (ed[j].key && !used[j])
			CHECK(put_edit(v, &ed[j]) == FX_OK);
	for (uint64_t i = 0; i < src->n_tensors; i++) {
		const struct gguf_tensor *t = &src->tensors[i];
		char name[128];
		snprintf(name, sizeof(name), "%.*s", (int)t->name.n, t->name.p);
		int j = 0;
		while (j < n_ed && !(ed[j].drop && !strcmp(ed[j].drop, name)))
			j++;
		if (j < n_ed)
			continue;
		CHECK(gguf_build_tensor(v, name, t->type, t->n_dims, t->ne, t->data) == FX_OK);
	}
	for (int j = 0; j < n_ed; j++)
		if (ed[j].tensor) {
			int64_t ne[4] = { ed[j].n, 1, 1, 1 };
			CHECK(ed[j].n <= 4096);
			CHECK(gguf_build_tensor(v, ed[j].tensor, 0 /* f32 */, 1, ne, zeros) == FX_OK);
		}
	rc = gguf_write(v, path, -1, &e);
	CHECKF(rc == FX_OK, "%s: %s", path, e.msg);
	gguf_close(v);
	gguf_close(src);
	return rc == FX_OK;
}

/* Load fixture `name` with the edits: want code and a message holding
 * needle (or FX_OK). */
static void expect_load(const char *name, const struct edit *ed, int n_ed, int code,
			const char *needle)
{
	char dir[256], path[] = "/tmp/fx_test_gguf_model_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny/%s", name);
	if (remake(dir, ed, n_ed, path)) {
		struct fx_model *m = NULL;
		struct fx_err e = { 0 };
		int rc = fx_model_load(path, NULL, &m, &e);
		CHECKF(rc == code, "%s (%s%s): want %d, got %d (%s)", name,
		       n_ed && ed[0].key ? ed[0].key : "", n_ed && ed[0].tensor ? ed[0].tensor :
		       n_ed && ed[0].drop ? ed[0].drop : "",
		       code, rc, e.msg);
		CHECKF(!needle || strstr(e.msg, needle), "%s: message '%s' lacks '%s'", name, e.msg,
		       needle);
		fx_model_free(m);
	}
	unlink(path);
}

/* Metadata a loader reads must be there once, of its type, and consistent. */
static void test_model_metadata(void)
{
	/* The unchanged fixtures load (the remake itself is sound). */
	expect_load("llama", NULL, 0, FX_OK, NULL);
	expect_load("deepseek_v3", NULL, 0, FX_OK, NULL);

	struct edit arch2 = { .key = "general.architecture", .type = GGUF_T_STRING, .s = "gemma",
			      .append = true };
	expect_load("llama", &arch2, 1, FX_E_FORMAT, "duplicate metadata key 'general.architecture'");
	struct edit heads2 = { .key = "llama.attention.head_count", .type = GGUF_T_U32, .u = 4,
			       .append = true };
	expect_load("llama", &heads2, 1, FX_E_FORMAT, "duplicate metadata key 'llama.attention.head_count'");

	/* A wrong type is said so, not "missing" nor "not a valid count". */
	struct edit ctx = { .key = "llama.context_length", .type = GGUF_T_STRING, .s = "4096" };
	expect_load("llama", &ctx, 1, FX_E_FORMAT,
		    "wrong type: llama.context_length is a string, want uint32");
	struct edit heads = { .key = "llama.attention.head_count_kv", .type = GGUF_T_F32, .f = 2 };
	expect_load("llama", &heads, 1, FX_E_FORMAT,
		    "wrong type: llama.attention.head_count_kv is a float32, want uint32");
	struct edit eps = { .key = "llama.attention.layer_norm_rms_epsilon", .type = GGUF_T_U32, .u = 1 };
	expect_load("llama", &eps, 1, FX_E_FORMAT,
		    "wrong type: llama.attention.layer_norm_rms_epsilon is a uint32, want float32");
	struct edit archt = { .key = "general.architecture", .type = GGUF_T_U32, .u = 1 };
	expect_load("llama", &archt, 1, FX_E_FORMAT,
		    "wrong type: general.architecture is a uint32, want string");
	struct edit rs = { .key = "llama.rope.scaling.type", .type = GGUF_T_U32, .u = 1 };
	expect_load("llama", &rs, 1, FX_E_FORMAT,
		    "wrong type: llama.rope.scaling.type is a uint32, want string");
	struct edit norm = { .key = "deepseek2.expert_weights_norm", .type = GGUF_T_U32, .u = 1 };
	expect_load("deepseek_v3", &norm, 1, FX_E_FORMAT,
		    "wrong type: deepseek2.expert_weights_norm is a uint32, want bool");
	struct edit tmpl = { .key = "tokenizer.chat_template", .type = GGUF_T_U32, .u = 1 };
	expect_load("llama", &tmpl, 1, FX_E_FORMAT,
		    "wrong type: tokenizer.chat_template is a uint32, want string");

	/* MoE routing (fixture: 4 experts, 2 used, one group). Two groups of
	 * 2 with one kept leave 2 experts for 3 picks: DeepSeek's group
	 * routing then chose expert -1, an out-of-bounds read. */
	struct edit grp[3] = {
		{ .key = "deepseek2.expert_group_count", .type = GGUF_T_U32, .u = 2 },
		{ .key = "deepseek2.expert_group_used_count", .type = GGUF_T_U32, .u = 1 },
		{ .key = "deepseek2.expert_used_count", .type = GGUF_T_U32, .u = 3 },
	};
	expect_load("deepseek_v3", grp, 3, FX_E_FORMAT, "keeps 2 experts, fewer than");
	grp[2].u = 2; /* 2 of 2 kept: fine */
	expect_load("deepseek_v3", grp, 3, FX_OK, NULL);
	grp[1].u = 3; /* 3 of 2 groups */
	expect_load("deepseek_v3", grp, 2, FX_E_FORMAT, "expert_group_used_count 3 must be 1..");
	grp[0].u = 3; /* 3 groups do not divide 4 experts */
	expect_load("deepseek_v3", grp, 1, FX_E_FORMAT, "expert_group_count 3 does not divide");
	struct edit used = { .key = "deepseek2.expert_used_count", .type = GGUF_T_U32, .u = 5 };
	expect_load("deepseek_v3", &used, 1, FX_E_FORMAT, "expert_used_count 5 must be 1..4");
	used.u = 0;
	expect_load("deepseek_v3", &used, 1, FX_E_FORMAT, "expert_used_count 0 must be 1..4");

	/* llama.cpp's multi-token-prediction blocks (GLM-4.5, Qwen 3.5):
	 * counted in block_count, said by nextn_predict_layers; loaded as MTP
	 * blocks where the family has them (tests/test_mtp.c), refused by name
	 * in a family without (Llama); without the key such a block is a layer
	 * that lacks its tensors; a count of all blocks is refused. */
	struct edit mtp[4] = { /* the fixture has 3 layers */
		{ .key = "llama.block_count", .type = GGUF_T_U32, .u = 4 },
		{ .key = "llama.nextn_predict_layers", .type = GGUF_T_U32, .u = 1 },
		{ .tensor = "blk.3.nextn.eh_proj.weight", .n = 8 },
		{ .tensor = "blk.3.attn_norm.weight", .n = 64 },
	};
	expect_load("llama", mtp, 4, FX_E_FORMAT, "blk.3.nextn.eh_proj.weight (a multi-token-prediction block)");
	expect_load("llama", mtp, 1, FX_E_FORMAT, "blk.3.attn_norm.weight");
	mtp[1].u = 4;
	expect_load("llama", mtp, 2, FX_E_FORMAT, "nextn_predict_layers is 4 of 4 blocks");
}

/* A model whose context_length is 0 loads, but a context of its default
 * size (0 rows: a ubatch of 0 that never advances) is refused; one given
 * n_ctx works. */
static void test_zero_context(void)
{
	char path[] = "/tmp/fx_test_gguf_ctx0_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct edit ctx0 = { .key = "llama.context_length", .type = GGUF_T_U32, .u = 0 };
	struct fx_model *m = NULL;
	struct fx_err e = { 0 };
	if (remake("tests/fixtures/hf-tiny/llama", &ctx0, 1, path) &&
	    fx_model_load(path, NULL, &m, &e) == FX_OK) {
		struct fx_context_params p = fx_context_default_params();
		struct fx_context *c = NULL;
		p.n_ctx = 0;
		int rc = fx_context_create(m, &p, &c, &e);
		CHECKF(rc == FX_E_INVALID && strstr(e.msg, "n_ctx is 0"), "rc %d (%s)", rc,
		       rc ? e.msg : "created");
		fx_context_free(c);
		c = NULL;
		p.n_ctx = 16;
		CHECKF(fx_context_create(m, &p, &c, &e) == FX_OK, "%s", e.msg);
		fx_token t = 1;
		CHECK(c && fx_decode(c, &t, 1, false) == FX_OK);
		fx_context_free(c);
	} else {
		CHECKF(false, "context_length 0: %s", e.msg);
	}
	fx_model_free(m);
	unlink(path);
}

/* A tensor the architecture's row does not bind is refused, named: it
 * would be read by nobody (Q/K norms in a Llama file were ignored). */
static void test_unused_tensors(void)
{
	struct edit qn = { .tensor = "blk.0.attn_q_norm.weight", .n = 16 };
	expect_load("llama", &qn, 1, FX_E_FORMAT,
		    "1 of 31 tensors are not used by architecture llama: blk.0.attn_q_norm.weight");
	struct edit two[2] = { { .tensor = "blk.1.attn_k_norm.weight", .n = 16 },
			       { .tensor = "vision.patch_embd.weight", .n = 64 } };
	expect_load("llama", two, 2, FX_E_FORMAT,
		    "blk.1.attn_k_norm.weight (a Q/K norm), vision.patch_embd.weight (unknown)");
	/* Qwen 3 binds Q/K norms but has no post norms. */
	struct edit post = { .tensor = "blk.0.post_ffw_norm.weight", .n = 64 };
	expect_load("qwen3", &post, 1, FX_E_FORMAT, "architecture qwen3: blk.0.post_ffw_norm.weight");
	/* A selection bias beside Qwen-MoE's softmax router. */
	struct edit bias = { .tensor = "blk.0.exp_probs_b.bias", .n = 4 };
	expect_load("qwen2_moe", &bias, 1, FX_E_FORMAT, "blk.0.exp_probs_b.bias");
	struct edit many[6];
	char names[6][32];
	for (int i = 0; i < 6; i++) {
		snprintf(names[i], sizeof(names[i]), "extra.%d.weight", i);
		many[i] = (struct edit){ .tensor = names[i], .n = 8 };
	}
	expect_load("llama", many, 6, FX_E_FORMAT,
		    "extra.0.weight (unknown), extra.1.weight (unknown), extra.2.weight (unknown), "
		    "extra.3.weight (unknown) and 2 more");
}

/* Each row lists the tensor groups its files may hold: a tensor of a group
 * the row lacks is refused before binding, named with its decoration (it
 * used to be bound and applied: a Q bias in a Gemma 3 file, a router in a
 * dense Qwen 3, attention norms in OLMo 2, a fused QKV beside Llama's
 * separate projections); one past block_count is left unbound, named. */
static void test_row_groups(void)
{
	/* Of the shape a Q bias has: before the rows listed groups, it loaded. */
	struct edit e = { .tensor = "blk.0.attn_q.bias", .n = 128 };
	expect_load("gemma3", &e, 1, FX_E_FORMAT,
		    "not used by architecture gemma3: blk.0.attn_q.bias (a Q/K/V bias)");
	e = (struct edit){ .tensor = "blk.1.ffn_gate_inp.weight", .n = 64 };
	expect_load("qwen3", &e, 1, FX_E_FORMAT,
		    "architecture qwen3: blk.1.ffn_gate_inp.weight (a mixture-of-experts layer)");
	e = (struct edit){ .tensor = "blk.0.attn_norm.weight", .n = 64 };
	expect_load("olmo2", &e, 1, FX_E_FORMAT,
		    "architecture olmo2: blk.0.attn_norm.weight (a pre-sublayer norm)");
	e = (struct edit){ .tensor = "blk.0.attn_qkv.weight", .n = 64 };
	expect_load("llama", &e, 1, FX_E_FORMAT, "blk.0.attn_qkv.weight (a fused QKV projection)");
	e = (struct edit){ .tensor = "blk.0.attn_sinks.weight", .n = 4 };
	expect_load("qwen2", &e, 1, FX_E_FORMAT, "blk.0.attn_sinks.weight (attention sinks)");
	e = (struct edit){ .tensor = "blk.0.ffn_gate_inp_shexp.weight", .n = 64 };
	expect_load("deepseek_v3", &e, 1, FX_E_FORMAT,
		    "blk.0.ffn_gate_inp_shexp.weight (a shared-expert gate)");
	/* The group is allowed, but no layer binds it. */
	e = (struct edit){ .tensor = "blk.7.attn_norm.weight", .n = 64 };
	expect_load("llama", &e, 1, FX_E_FORMAT,
		    "1 of 31 tensors are not used by architecture llama: blk.7.attn_norm.weight");
	/* A Q bias where the row allows it (Llama's optional biases) is bound. */
	e = (struct edit){ .tensor = "blk.0.attn_q.bias", .n = 64 };
	expect_load("llama", &e, 1, FX_OK, NULL);
}

/* A tensor the row requires (its group implied by a decoration field, or
 * the base set) and the file lacks is named, with its decoration. */
static void test_required_tensors(void)
{
	struct edit e = { .drop = "blk.1.attn_q_norm.weight" };
	expect_load("gemma3", &e, 1, FX_E_FORMAT, "tensor blk.1.attn_q_norm.weight (a Q/K norm) is "
		    "missing; architecture gemma3 requires it");
	e = (struct edit){ .drop = "blk.0.post_ffw_norm.weight" };
	expect_load("gemma2", &e, 1, FX_E_FORMAT,
		    "tensor blk.0.post_ffw_norm.weight (a post-sublayer norm) is missing");
	e = (struct edit){ .drop = "blk.1.exp_probs_b.bias" };
	expect_load("deepseek_v3", &e, 1, FX_E_FORMAT,
		    "tensor blk.1.exp_probs_b.bias (an expert selection bias) is missing");
	/* Without AT_FUSED, a missing ffn_gate is that, not a fused ffn_up. */
	e = (struct edit){ .drop = "blk.0.ffn_gate.weight" };
	expect_load("llama", &e, 1, FX_E_FORMAT,
		    "tensor blk.0.ffn_gate.weight (a base tensor) is missing; architecture llama");
	e = (struct edit){ .drop = "token_embd.weight" };
	expect_load("qwen2", &e, 1, FX_E_FORMAT, "tensor token_embd.weight (a base tensor) is missing");
}

/* A vocabulary-only GGUF (SentencePiece, 5 tokens) with the given extra
 * u32 key (or, when as_string, the string "2") at path. */
static void write_vocab(const char *path, const char *key, uint32_t id, bool as_string)
{
	static const char *const toks[5] = { "<pad>", "<eos>", "<bos>", "\xe2\x96\x81\x61", "b" };
	struct buf b = { 0 };
	put(&b, "GGUF", 4);
	u32(&b, 3);
	u64(&b, 0); /* tensors */
	u64(&b, 4 + (key ? 1 : 0));
	str(&b, "tokenizer.ggml.model"); u32(&b, GGUF_T_STRING); str(&b, "llama");
	str(&b, "tokenizer.ggml.tokens"); u32(&b, GGUF_T_ARRAY); u32(&b, GGUF_T_STRING); u64(&b, 5);
	for (int i = 0; i < 5; i++)
		str(&b, toks[i]);
	str(&b, "tokenizer.ggml.scores"); u32(&b, GGUF_T_ARRAY); u32(&b, GGUF_T_F32); u64(&b, 5);
	for (int i = 0; i < 5; i++) {
		float f = -(float)i;
		put(&b, &f, 4);
	}
	str(&b, "tokenizer.ggml.token_type"); u32(&b, GGUF_T_ARRAY); u32(&b, GGUF_T_I32); u64(&b, 5);
	for (int i = 0; i < 5; i++)
		u32(&b, i < 3 ? 3 : 1); /* control, then normal */
	if (key && as_string) {
		str(&b, key); u32(&b, GGUF_T_STRING); str(&b, "2");
	} else if (key) {
		str(&b, key); u32(&b, GGUF_T_U32); u32(&b, id);
	}
	FILE *f = fopen(path, "wb");
	CHECK(f && fwrite(b.p, 1, b.n, f) == b.n);
	if (f)
		fclose(f);
	free(b.p);
}

/* Special-token ids must name a token: a default in their place (Gemma's
 * BOS default 1 is <eos>) silently changes what a prompt starts with. */
static void test_token_ids(void)
{
	static const char *const keys[] = {
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
		"tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
		"tokenizer.ggml.padding_token_id", "tokenizer.ggml.mask_token_id",
		"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
		"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
		"tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
		"tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id",
		"tokenizer.ggml.middle_token_id",
	};
	char path[] = "/tmp/fx_test_gguf_vocab_XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct fx_model_params p = fx_model_default_params();
	p.vocab_only = true;
	struct fx_model *m = NULL;
	struct fx_err e = { 0 };

	write_vocab(path, "tokenizer.ggml.bos_token_id", 2, false);
	CHECKF(fx_model_load(path, &p, &m, &e) == FX_OK, "%s", e.msg);
	CHECK(m && fx_token_bos(m) == 2 && fx_token_eos(m) == 2);
	fx_model_free(m);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		for (uint32_t id = 5; id <= 6; id++) {
			write_vocab(path, keys[i], id == 6 ? UINT32_MAX : id, false);
			m = NULL;
			CHECKF(fx_model_load(path, &p, &m, &e) == FX_E_FORMAT, "%s = %u: loaded", keys[i], id);
			CHECKF(strstr(e.msg, keys[i]) && strstr(e.msg, "outside the vocabulary of 5 tokens"),
			       "%s", e.msg);
			fx_model_free(m);
		}
		write_vocab(path, keys[i], 4, false); /* the last id is fine */
		m = NULL;
		CHECKF(fx_model_load(path, &p, &m, &e) == FX_OK, "%s = 4: %s", keys[i], e.msg);
		fx_model_free(m);
	}
	write_vocab(path, "tokenizer.ggml.bos_token_id", 0, true);
	m = NULL;
	CHECK(fx_model_load(path, &p, &m, &e) == FX_E_FORMAT);
	CHECKF(strstr(e.msg, "wrong type: tokenizer.ggml.bos_token_id is a string, want uint32"),
	       "%s", e.msg);
	write_vocab(path, "tokenizer.ggml.add_bos_token", 1, false);
	CHECK(fx_model_load(path, &p, &m, &e) == FX_E_FORMAT);
	CHECKF(strstr(e.msg, "wrong type: tokenizer.ggml.add_bos_token is a uint32, want bool"),
	       "%s", e.msg);
	write_vocab(path, "tokenizer.ggml.pre", 1, false);
	CHECK(fx_model_load(path, &p, &m, &e) == FX_E_FORMAT);
	CHECKF(strstr(e.msg, "wrong type: tokenizer.ggml.pre is a uint32, want string"), "%s", e.msg);
	unlink(path);
}

int main(void)
{
	test_valid();
	test_truncations();
	test_malformed();
	test_files();
	test_model_metadata();
	test_unused_tensors();
	test_row_groups();
	test_required_tensors();
	test_zero_context();
	test_token_ids();
	return check_exit();
}
