/* ferrox convert (io/gguf_write.c, fx_convert) on the tiny HF fixtures:
 *   - f32: the GGUF loads and gives logits bit-identical to loading the
 *     checkpoint directory (same weights, same math), and within
 *     1e-4 x max(1, max |ref|) of transformers' reference logits;
 *   - q8_0: loads; greedy argmax per prompt row vs the f32 file (counted),
 *     logits within 0.5 x max(1, max |ref|), a sanity bound: on these
 *     64-wide random weights q8_0 alone moves dense models' logits by
 *     1e-2..1.2e-1 and flips MoE routing (0.2..0.37); llama.cpp's own logits
 *     on the same q8_0 files are 5.0e-2, 7.5e-2 and 2.2e-2 from
 *     transformers for llama, qwen2 and phi3;
 *   - every target type with a quantizer: the file's general.file_type and
 *     each tensor's type, including llama.cpp's fallbacks for rows shorter
 *     than a k-quant block;
 *   - types kept: the file re-opens with gguf_open and holds every key and
 *     tensor of the HF view, byte for byte, plus general.file_type;
 *   - rows of 256: each k-quant file holds exactly its from_float output;
 *   - a real GGUF (models/SmolLM2-135M-Instruct.Q4_1.gguf, when present):
 *     types kept, every key (tokenizer string arrays too) and tensor is
 *     unchanged and the logits are identical; requantized to q8_0 it loads
 *     and its argmax mostly agrees;
 *   - failures (unknown type, missing directory, disk full via
 *     RLIMIT_FSIZE, destination a directory) give a message and leave no
 *     file behind, and an existing destination untouched.
 * A GGUF written from a checkpoint directory carries no tokenizer; where
 * the model loader still requires one, the logits checks are skipped with
 * a note (the lead owns model.c).
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "fixture_ref.h"
#include "ferrox.h"
#include "io/gguf.h"
#include "io/gguf_write.h"
#include "io/hf.h"
#include "model/arch.h"
#include "io/safetensors.h"
#include "quant/quant.h"

#define ROOT "tests/fixtures/hf-tiny"
#define TOL 1e-4
#define TOL_Q8 0.5 /* sanity: routers of the tiny MoE fixtures flip under q8_0 */
/* The tiny Gated DeltaNet fixtures are more sensitive still: the gated norm
 * rescales near-zero head outputs. transformers itself, with its weights
 * rounded as q8_0 (blocks of 32, scale max/127; measured 2026-12-04), moves
 * qwen3_next's logits by 0.26 of max|ref| (out_proj alone 0.75). */
#define TOL_Q8_GDN 1.0
/* glm4_moe likewise: transformers with its weights rounded as q8_0 (the
 * same simulation, measured 2026-12-04) moves the logits by 0.684 of
 * max|ref| (ferrox's q8_0 GGUF: 0.682); routers flip, scaled by 2.5. */
#define TOL_Q8_GLM 0.75


/* max |a - ref| / max(1, max |ref|) over n values (ref f32, maybe unaligned). */
static double rel_err(const float *a, const void *ref, size_t n)
{
	double d = 0, mx = 1;
	for (size_t i = 0; i < n; i++) {
		float r;
		memcpy(&r, (const char *)ref + i * sizeof(float), sizeof(r));
		d = fmax(d, fabs((double)a[i] - r));
		mx = fmax(mx, fabs((double)r));
	}
	return d / mx;
}

/* Prefill logits [n_prompt, *nv] of the model at path (f32 KV cache), or
 * NULL with err filled. *no_vocab: the load failed for want of a tokenizer. */
static float *prompt_logits(const char *path, const struct ref *r, int32_t *nv, bool *no_vocab,
			    struct fx_err *err)
{
	struct fx_model *m = NULL;
	struct fx_context *c = NULL;
	float *out = NULL;
	*no_vocab = false;
	if (fx_model_load(path, NULL, &m, err)) {
		*no_vocab = strstr(err->msg, "tokenizer.ggml") != NULL;
		return NULL;
	}
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = 512;
	cp.n_threads = 2;
	cp.type_k = FX_KV_F32;
	cp.type_v = FX_KV_F32;
	if (fx_context_create(m, &cp, &c, err))
		goto out;
	if (fx_decode(c, r->prompt, r->n_prompt, true)) {
		snprintf(err->msg, sizeof(err->msg), "decode: %s", fx_context_errmsg(c));
		goto out;
	}
	*nv = fx_model_n_vocab(m);
	size_t n = (size_t)r->n_prompt * (size_t)*nv;
	if ((out = malloc(n * sizeof(float))))
		memcpy(out, fx_get_logits(c, NULL), n * sizeof(float));
out:
	fx_context_free(c);
	fx_model_free(m);
	return out;
}

static bool exists(const char *p)
{
	return access(p, F_OK) == 0;
}

static int argmax(const float *x, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		b = x[i] > x[b] ? i : b;
	return b;
}

static bool str_eq(const struct gguf_str *a, const struct gguf_str *b)
{
	return a->n == b->n && !memcmp(a->p, b->p, a->n);
}

/* Bytes of a key's value as gguf.h lays it out (not for string arrays). */
static size_t kv_bytes(const struct gguf_kv *kv)
{
	uint64_t n;
	if (kv->type == GGUF_T_STRING) {
		memcpy(&n, kv->data, 8);
		return 8 + n;
	}
	if (kv->type == GGUF_T_ARRAY)
		return (size_t)kv->n * gguf_vtype_size[kv->arr_type];
	return gguf_vtype_size[kv->type];
}

static bool kv_same(const struct gguf_kv *a, const struct gguf_kv *b)
{
	if (a->type != b->type || a->n != b->n ||
	    (a->type == GGUF_T_ARRAY && a->arr_type != b->arr_type))
		return false;
	if (a->type == GGUF_T_ARRAY && a->arr_type == GGUF_T_STRING) {
		const struct gguf_str *x = a->data, *y = b->data;
		for (uint64_t i = 0; i < a->n; i++)
			if (!str_eq(&x[i], &y[i]))
				return false;
		return true;
	}
	return !memcmp(a->data, b->data, kv_bytes(a));
}

/* Types kept: the written file holds the view's keys and tensors exactly. */
static void check_roundtrip(const char *name, const char *dir, const char *tmp)
{
	struct fx_err err = { 0 };
	struct gguf_file *v = NULL, *g = NULL;
	char path[600];
	snprintf(path, sizeof(path), "%s/kept.gguf", tmp);
	CHECKF(hf_open(dir, &arch_hf, &v, &err) == FX_OK, "%s: %s", name, err.msg);
	if (!v)
		return;
	CHECKF(gguf_write(v, path, -1, &err) == FX_OK, "%s: %s", name, err.msg);
	CHECKF(gguf_open(path, &g, &err) == FX_OK, "%s: re-open: %s", name, err.msg);
	if (!g)
		goto out;
	CHECK(g->version == 3 && g->alignment == 32);
	CHECKF(g->n_tensors == v->n_tensors, "%s: %llu tensors, view has %llu", name,
	       (unsigned long long)g->n_tensors, (unsigned long long)v->n_tensors);
	CHECKF(g->n_kv == v->n_kv + 1, "%s: %llu keys, view has %llu + file_type", name,
	       (unsigned long long)g->n_kv, (unsigned long long)v->n_kv);
	for (uint64_t i = 0; i < v->n_kv; i++) {
		char k[128];
		snprintf(k, sizeof(k), "%.*s", (int)v->kv[i].key.n, v->kv[i].key.p);
		const struct gguf_kv *w = gguf_find(g, k);
		CHECKF(w && kv_same(&v->kv[i], w), "%s: key %s differs after writing", name, k);
	}
	uint32_t ft = 99;
	CHECKF(gguf_get_u32(g, "general.file_type", &ft) && ft == 0, "%s: file_type %u", name, ft);
	CHECK(!gguf_find(g, "general.quantization_version"));
	struct gguf_str arch;
	CHECK(gguf_get_str(g, "general.architecture", &arch));
	char bk[96];
	snprintf(bk, sizeof(bk), "%.*s.block_count", (int)arch.n, arch.p);
	CHECKF(gguf_find(g, bk), "%s: %s missing", name, bk);
	for (uint64_t i = 0; i < v->n_tensors; i++) {
		const struct gguf_tensor *a = &v->tensors[i], *b = &g->tensors[i];
		CHECKF(str_eq(&a->name, &b->name) && a->n_dims == b->n_dims && a->type == b->type &&
		       !memcmp(a->ne, b->ne, sizeof(a->ne)) && a->nbytes == b->nbytes &&
		       !memcmp(a->data, b->data, a->nbytes),
		       "%s: tensor %.*s differs after writing", name, (int)a->name.n, a->name.p);
	}
	gguf_close(g);
out:
	gguf_close(v);
	unlink(path);
}

/* Both conversions of one fixture against its HF load and references.
 * Returns false when the GGUF could not be loaded for want of a tokenizer. */
static bool check_fixture(const char *name, const char *dir, const char *tmp)
{
	static struct ref r;
	struct fx_err err = { 0 };
	char f32p[600], q8p[600];
	int32_t nv = 0, nv2 = 0;
	bool no_vocab, loaded = true;
	float *hf = NULL, *l32 = NULL, *l8 = NULL;

	CHECKF(load_ref(dir, &r), "%s: cannot read its references", name);
	if (!r.st)
		return true;
	snprintf(f32p, sizeof(f32p), "%s/%s-f32.gguf", tmp, name);
	snprintf(q8p, sizeof(q8p), "%s/%s-q8_0.gguf", tmp, name);
	CHECKF(fx_convert(dir, f32p, "f32", NULL, &err) == FX_OK, "%s: convert f32: %s", name, err.msg);
	CHECKF(fx_convert(dir, q8p, "q8_0", NULL, &err) == FX_OK, "%s: convert q8_0: %s", name, err.msg);
	struct gguf_file *g = NULL;
	uint32_t ft = 0, qv = 0;
	CHECKF(gguf_open(q8p, &g, &err) == FX_OK, "%s: re-open q8_0: %s", name, err.msg);
	CHECKF(g && gguf_get_u32(g, "general.file_type", &ft) && ft == 7 &&
	       gguf_get_u32(g, "general.quantization_version", &qv) && qv == 2,
	       "%s: q8_0 file_type %u, quantization_version %u", name, ft, qv);
	gguf_close(g);
	hf = prompt_logits(dir, &r, &nv, &no_vocab, &err);
	CHECKF(hf, "%s: HF load: %s", name, err.msg);
	l32 = prompt_logits(f32p, &r, &nv2, &no_vocab, &err);
	CHECKF(l32, "%s: f32 GGUF load (no tokenizer in the file): %s", name, err.msg);
	if (!hf || !l32)
		goto out;
	size_t n = (size_t)r.n_prompt * (size_t)nv;
	const struct st_tensor *ref = st_find(r.st, "logits");
	CHECKF(nv == nv2 && ref && (size_t)ref->ne[0] * (size_t)ref->ne[1] == n,
	       "%s: vocab %d vs %d, or reference logits missing", name, nv, nv2);
	if (nv != nv2 || !ref)
		goto out;
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff += memcmp(&hf[i], &l32[i], sizeof(float)) != 0;
	double e32 = rel_err(l32, ref->data, n), e8 = INFINITY;
	double ehf = rel_err(l32, hf, n);
	CHECKF(diff == 0,
	       "%s: f32 GGUF logits differ from the HF load in %zu of %zu values (rel err %.3g)",
	       name, diff, n, ehf);
	CHECKF(e32 <= TOL, "%s: f32 GGUF rel err %.3g vs transformers", name, e32);

	l8 = prompt_logits(q8p, &r, &nv2, &no_vocab, &err);
	CHECKF(l8 && nv2 == nv, "%s: q8_0 GGUF load: %s", name, err.msg);
	int agree = 0;
	if (l8 && nv2 == nv) {
		for (int t = 0; t < r.n_prompt; t++)
			agree += argmax(l8 + (size_t)t * nv, nv) == argmax(l32 + (size_t)t * nv, nv);
		e8 = rel_err(l8, ref->data, n);
		bool gdn = !strncmp(name, "qwen3_5", 7) || !strcmp(name, "qwen3_next");
		double tol8 = gdn ? TOL_Q8_GDN : !strcmp(name, "glm4_moe") ? TOL_Q8_GLM : TOL_Q8;
		CHECKF(e8 <= tol8, "%s: q8_0 rel err %.3g vs transformers", name, e8);
		CHECKF(2 * agree > r.n_prompt, "%s: q8_0 argmax agrees on %d/%d rows", name, agree,
		       r.n_prompt);
	}
	printf("%-8s f32: bit-identical to HF %s, rel err %.2e | q8_0: argmax %d/%d rows, rel err %.2e\n",
	       name, diff ? "NO" : "yes", e32, agree, r.n_prompt, e8);
out:
	free(hf);
	free(l32);
	free(l8);
	st_close(r.st);
	r.st = NULL;
	unlink(f32p);
	unlink(q8p);
	return loaded;
}

/* Every target type with a quantizer, on llama (64-wide rows): file_type,
 * and matrices of that type (or llama.cpp's fallback), vectors f32. */
static void check_types(const char *tmp)
{
	static const struct {
		const char *name;
		int type, ftype, fallback; /* fallback: the type of 64-wide rows */
	} types[] = {
		{ "f32", FX_TYPE_F32, 0, FX_TYPE_F32 },    { "f16", FX_TYPE_F16, 1, FX_TYPE_F16 },
		{ "bf16", FX_TYPE_BF16, 32, FX_TYPE_BF16 }, { "q8_0", FX_TYPE_Q8_0, 7, FX_TYPE_Q8_0 },
		{ "q4_0", FX_TYPE_Q4_0, 2, FX_TYPE_Q4_0 }, { "q4_1", FX_TYPE_Q4_1, 3, FX_TYPE_Q4_1 },
		{ "q5_0", FX_TYPE_Q5_0, 8, FX_TYPE_Q5_0 }, { "q5_1", FX_TYPE_Q5_1, 9, FX_TYPE_Q5_1 },
		{ "q4_k", FX_TYPE_Q4_K, 14, FX_TYPE_Q5_0 }, { "q5_k", FX_TYPE_Q5_K, 16, FX_TYPE_Q5_1 },
		{ "q6_k", FX_TYPE_Q6_K, 18, FX_TYPE_Q8_0 },
	};
	char path[600];
	snprintf(path, sizeof(path), "%s/types.gguf", tmp);
	int n_done = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const struct fx_type_traits *tt = fx_type_get(types[i].type);
		if (!tt || !tt->from_float)
			continue;
		struct fx_err err = { 0 };
		struct gguf_file *g = NULL;
		int rc = fx_convert(ROOT "/llama", path, types[i].name, NULL, &err);
		CHECKF(rc == FX_OK, "%s: %s", types[i].name, err.msg);
		if (rc || gguf_open(path, &g, &err)) {
			CHECKF(rc, "%s: re-open: %s", types[i].name, err.msg);
			continue;
		}
		uint32_t ft = 99, qv = 0;
		CHECKF(gguf_get_u32(g, "general.file_type", &ft) && ft == (uint32_t)types[i].ftype,
		       "%s: file_type %u, want %d", types[i].name, ft, types[i].ftype);
		bool quant = fx_type_get(types[i].fallback)->is_quantized;
		CHECKF(gguf_get_u32(g, "general.quantization_version", &qv) == quant &&
		       (!quant || qv == 2), "%s: quantization_version", types[i].name);
		for (uint64_t j = 0; j < g->n_tensors; j++) {
			const struct gguf_tensor *t = &g->tensors[j];
			int want = t->n_dims == 2 ? types[i].fallback : FX_TYPE_F32;
			CHECKF(t->type == want, "%s: tensor %.*s is %s, want %s", types[i].name,
			       (int)t->name.n, t->name.p, fx_type_get(t->type)->name,
			       fx_type_get(want)->name);
		}
		gguf_close(g);
		unlink(path);
		n_done++;
	}
	printf("types: %d target types written and checked\n", n_done);
}

/* A real GGUF (tokenizer string arrays, a quantized source): written with
 * types kept it is the same file in substance, and loads to the same
 * logits; requantized to q8_0 it loads and mostly agrees. */
static void check_real_gguf(const char *tmp)
{
	char buf[512], out[600];
	const char *src = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));
	if (!src)
		return;
	struct fx_err err = { 0 };
	struct gguf_file *a = NULL, *b = NULL;
	snprintf(out, sizeof(out), "%s/smollm2.gguf", tmp);
	CHECKF(fx_convert(src, out, NULL, NULL, &err) == FX_OK, "%s", err.msg);
	if (gguf_open(src, &a, &err) || gguf_open(out, &b, &err)) {
		CHECKF(0, "re-open: %s", err.msg);
		goto out;
	}
	CHECK(a->n_tensors == b->n_tensors);
	uint64_t same_kv = 0;
	for (uint64_t i = 0; i < a->n_kv; i++) {
		char k[128];
		snprintf(k, sizeof(k), "%.*s", (int)a->kv[i].key.n, a->kv[i].key.p);
		const struct gguf_kv *w = gguf_find(b, k);
		same_kv += w && kv_same(&a->kv[i], w);
	}
	CHECKF(same_kv == a->n_kv, "%llu of %llu keys survive", (unsigned long long)same_kv,
	       (unsigned long long)a->n_kv);
	for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
		const struct gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
		CHECKF(str_eq(&x->name, &y->name) && x->type == y->type && x->nbytes == y->nbytes &&
		       !memcmp(x->data, y->data, x->nbytes), "tensor %.*s differs", (int)x->name.n,
		       x->name.p);
	}
	static struct ref r = { .prompt = { 1, 504, 3458, 314, 253, 2634, 30, 216, 77, 1009 },
				.n_prompt = 10 };
	int32_t nv = 0, nv2 = 0;
	bool nov;
	float *l0 = prompt_logits(src, &r, &nv, &nov, &err);
	CHECKF(l0, "%s", err.msg);
	float *l1 = prompt_logits(out, &r, &nv2, &nov, &err);
	CHECKF(l1, "%s", err.msg);
	CHECK(l0 && l1 && nv == nv2 && !memcmp(l0, l1, (size_t)nv * r.n_prompt * sizeof(float)));
	free(l1);
	unlink(out);
	CHECKF(fx_convert(src, out, "q8_0", NULL, &err) == FX_OK, "%s", err.msg);
	l1 = prompt_logits(out, &r, &nv2, &nov, &err);
	CHECKF(l1, "q8_0: %s", err.msg);
	int agree = 0;
	for (int t = 0; l0 && l1 && t < r.n_prompt; t++)
		agree += argmax(l0 + (size_t)t * nv, nv) == argmax(l1 + (size_t)t * nv, nv);
	CHECKF(2 * agree > r.n_prompt, "q4_1 -> q8_0: argmax agrees on %d/%d rows", agree, r.n_prompt);
	printf("SmolLM2 q4_1: kept types: %llu keys, %llu tensors identical, logits identical; "
	       "-> q8_0: argmax %d/%d rows\n", (unsigned long long)same_kv,
	       (unsigned long long)a->n_tensors, agree, r.n_prompt);
	free(l0);
	free(l1);
out:
	gguf_close(a);
	gguf_close(b);
	unlink(out);
}

/* Rows long enough for k-quants: each type's file holds exactly what its
 * from_float makes of the row (built view, 256 x 4). */
static void check_wide_rows(const char *tmp)
{
	static float w[4][256];
	int64_t ne[4] = { 256, 4, 1, 1 };
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 256; j++)
			w[i][j] = sinf(0.37f * (float)(i * 256 + j)) * (1.0f + (float)i);
	struct gguf_file *v = NULL;
	char path[600];
	snprintf(path, sizeof(path), "%s/wide.gguf", tmp);
	CHECK(gguf_build_new(&v) == FX_OK);
	CHECK(gguf_build_str(v, "general.architecture", "llama") == FX_OK);
	CHECK(gguf_build_tensor(v, "blk.0.attn_q.weight", FX_TYPE_F32, 2, ne, w) == FX_OK);
	static const int ks[] = { FX_TYPE_Q4_K, FX_TYPE_Q5_K, FX_TYPE_Q6_K, FX_TYPE_Q8_0 };
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		const struct fx_type_traits *tt = fx_type_get(ks[i]);
		if (!tt || !tt->from_float)
			continue;
		struct fx_err err = { 0 };
		struct gguf_file *g = NULL;
		CHECKF(gguf_write(v, path, ks[i], &err) == FX_OK, "%s: %s", tt->name, err.msg);
		if (gguf_open(path, &g, &err)) {
			CHECKF(0, "%s: re-open: %s", tt->name, err.msg);
			continue;
		}
		size_t row = fx_row_size(ks[i], 256);
		uint8_t q[4][512];
		for (int r = 0; r < 4; r++)
			tt->from_float(w[r], q[r], 256);
		CHECKF(g->n_tensors == 1 && g->tensors[0].type == ks[i] &&
		       g->tensors[0].nbytes == 4 * row, "%s: wrong type or size", tt->name);
		for (int r = 0; r < 4 && g->n_tensors == 1 && g->tensors[0].nbytes == 4 * row; r++)
			CHECKF(!memcmp((const uint8_t *)g->tensors[0].data + r * row, q[r], row),
			       "%s: row %d differs from from_float", tt->name, r);
		gguf_close(g);
		unlink(path);
	}
	/* out_type without a quantizer (q8_1: activations only) is refused. */
	struct fx_err err = { 0 };
	const struct fx_type_traits *q81 = fx_type_get(FX_TYPE_Q8_1);
	if (!q81 || !q81->from_float) {
		CHECK(gguf_write(v, path, FX_TYPE_Q8_1, &err) == FX_E_INVALID);
		CHECK(!exists(path));
	}
	gguf_close(v);
}


static size_t file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) ? 0 : (size_t)st.st_size;
}

static void check_write_failures(const char *tmp)
{
	struct fx_err err = { 0 };
	char dst[600], tmpf[640];
	const char *dir = ROOT "/llama";

	/* Unknown type: the message lists the valid names. */
	snprintf(dst, sizeof(dst), "%s/x.gguf", tmp);
	CHECK(fx_convert(dir, dst, "q9_9", NULL, &err) == FX_E_INVALID);
	CHECKF(strstr(err.msg, "q9_9") && strstr(err.msg, "q8_0") && strstr(err.msg, "f16"),
	       "message: %s", err.msg);
	CHECK(!exists(dst));
	/* A type without a quantizer in this build (if any) names the ones there are. */
	const struct fx_type_traits *k6 = fx_type_get(FX_TYPE_Q6_K);
	if (!k6 || !k6->from_float) {
		CHECK(fx_convert(dir, dst, "q6_k", NULL, &err) == FX_E_UNSUPPORTED);
		CHECKF(strstr(err.msg, "quantizer") && strstr(err.msg, "q8_0"), "message: %s", err.msg);
	}
	CHECK(fx_convert(ROOT "/no-such-model", dst, "f32", NULL, &err) != FX_OK);
	CHECK(!exists(dst));

	/* A directory that does not exist. */
	snprintf(dst, sizeof(dst), "%s/no/such/dir/x.gguf", tmp);
	CHECK(fx_convert(dir, dst, "f32", NULL, &err) == FX_E_IO);
	CHECKF(strstr(err.msg, "x.gguf.tmp") && strstr(err.msg, "No such file"), "message: %s",
	       err.msg);

	/* The destination is a directory: the rename fails, the .tmp goes. */
	snprintf(dst, sizeof(dst), "%s/adir", tmp);
	snprintf(tmpf, sizeof(tmpf), "%s.tmp", dst);
	CHECK(mkdir(dst, 0700) == 0);
	CHECK(fx_convert(dir, dst, "f32", NULL, &err) == FX_E_IO);
	CHECKF(strstr(err.msg, "rename"), "message: %s", err.msg);
	CHECK(!exists(tmpf));
	rmdir(dst);

	/* Disk full (a file size limit): the old file stays, no .tmp is left. */
	snprintf(dst, sizeof(dst), "%s/old.gguf", tmp);
	snprintf(tmpf, sizeof(tmpf), "%s.tmp", dst);
	CHECK(fx_convert(dir, dst, "q8_0", NULL, &err) == FX_OK);
	size_t old = file_size(dst);
	struct rlimit saved, lim;
	CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
	lim = saved;
	lim.rlim_cur = 64 << 10;
	void (*h)(int) = signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	int rc = fx_convert(dir, dst, "f32", NULL, &err);
	setrlimit(RLIMIT_FSIZE, &saved);
	signal(SIGXFSZ, h);
	CHECK(rc == FX_E_IO);
	CHECKF(strstr(err.msg, "old.gguf.tmp") && strstr(err.msg, "space"), "message: %s", err.msg);
	CHECK(!exists(tmpf));
	CHECK(old > 0 && file_size(dst) == old);
	unlink(dst);
}

/* Llama 4's switches reach the model and survive conversion (config
 * variants of the llama4 fixture in tmp, weights symlinked): with
 * attn_temperature_tuning false the NoPE layer's queries are not scaled,
 * which leaves positions 0-2 as transformers computed them (the scale
 * 1 + 0.1 ln(1 + floor((pos + 1) / 4)) is 1 there) and moves later ones;
 * with use_qk_norm false the logits move too. Each variant's f32 GGUF
 * gives its directory's logits bit for bit. */
static void check_llama4_switches(const char *tmp)
{
	static const char *const src = "tests/fixtures/hf-tiny-next/llama4";
	static const char *const from[2] = { "\"attn_temperature_tuning\": true", "\"use_qk_norm\": true" };
	static const char *const to[2] = { "\"attn_temperature_tuning\": false", "\"use_qk_norm\": false" };
	static struct ref r;
	char path[700], dir[600], gg[600], st[4096];
	struct fx_err err = { 0 };
	CHECKF(load_ref(src, &r) && r.st, "llama4: cannot read its references");
	snprintf(path, sizeof(path), "%s/config.json", src);
	FILE *f = fopen(path, "rb");
	static char cfg[1 << 16], var[(1 << 16) + 64];
	size_t n = f ? fread(cfg, 1, sizeof(cfg) - 1, f) : 0;
	if (f)
		fclose(f);
	cfg[n] = 0;
	snprintf(path, sizeof(path), "%s/model.safetensors", src);
	const struct st_tensor *ref = r.st ? st_find(r.st, "logits") : NULL;
	CHECKF(n > 0 && realpath(path, st) && ref, "llama4: config, weights or reference logits missing");
	for (int v = 0; v < 2 && n > 0 && ref; v++) {
		const char *at = strstr(cfg, from[v]);
		CHECKF(at, "llama4: config.json lacks %s", from[v]);
		if (!at)
			continue;
		snprintf(var, sizeof(var), "%.*s%s%s", (int)(at - cfg), cfg, to[v], at + strlen(from[v]));
		snprintf(dir, sizeof(dir), "%s/llama4-%d", tmp, v);
		snprintf(gg, sizeof(gg), "%s/llama4-%d.gguf", tmp, v);
		CHECK(mkdir(dir, 0700) == 0);
		snprintf(path, sizeof(path), "%s/model.safetensors", dir);
		CHECK(symlink(st, path) == 0);
		snprintf(path, sizeof(path), "%s/config.json", dir);
		FILE *o = fopen(path, "wb");
		CHECK(o && fwrite(var, 1, strlen(var), o) == strlen(var));
		if (o)
			fclose(o);
		int32_t nv = 0, nv2 = 0;
		bool nov;
		float *a = prompt_logits(dir, &r, &nv, &nov, &err);
		CHECKF(a, "llama4 variant %d: %s", v, err.msg);
		CHECKF(fx_convert(dir, gg, "f32", NULL, &err) == FX_OK, "llama4 variant %d: convert: %s", v, err.msg);
		float *b = prompt_logits(gg, &r, &nv2, &nov, &err);
		CHECKF(b && nv2 == nv, "llama4 variant %d GGUF: %s", v, err.msg);
		if (a && b && nv == nv2 && (size_t)ref->ne[0] * (size_t)ref->ne[1] == (size_t)r.n_prompt * (size_t)nv) {
			double head = 0, tail = 0;
			for (int t = 0; t < r.n_prompt; t++) {
				double e = rel_err(a + (size_t)t * nv, (const float *)ref->data + (size_t)t * nv, (size_t)nv);
				if (t < 3)
					head = fmax(head, e);
				else
					tail = fmax(tail, e);
			}
			CHECKF(!memcmp(a, b, (size_t)r.n_prompt * (size_t)nv * sizeof(float)),
			       "llama4 variant %d: GGUF logits differ from the directory's", v);
			if (v == 0)
				CHECKF(head <= TOL, "llama4 without temperature: positions 0-2 rel err %.3g", head);
			CHECKF(tail > 1e-3, "llama4 variant %d: logits did not move (%.3g)", v, tail);
			printf("llama4 %s: positions 0-2 rel err %.2e, 3-%d %.2e vs the reference\n",
			       to[v], head, r.n_prompt - 1, tail);
		}
		free(a);
		free(b);
		unlink(gg);
		unlink(path);
		snprintf(path, sizeof(path), "%s/model.safetensors", dir);
		unlink(path);
		rmdir(dir);
	}
	st_close(r.st);
	r.st = NULL;
}

/* qwen3_next's mapping as ferrox wrote it before llama.cpp's qwen3next
 * layout: DeltaNet value heads tiled, ssm_beta / ssm_alpha split. */
static const struct hf_family *tiled_find(const char *model_type, const char **arch)
{
	static struct hf_family f;
	const struct hf_family *x = arch_hf.find(model_type, arch);
	if (!x)
		return NULL;
	f = *x;
	f.gdn_grouped = false;
	return &f;
}

static const char *tiled_names(char *buf, size_t n)
{
	return arch_hf.names(buf, n);
}

/* ferrox's f32 conversion of fixture `name` (in tmp), rewritten by edit
 * (names, keys or values of the open file changed in place) into a second
 * file; both files' prompt logits must be bit-identical (same) or differ
 * (!same), and edit must have changed something. */
static void check_edited(const char *name, const char *tmp, int (*edit)(struct gguf_file *g),
			 bool same)
{
	static struct ref r;
	char dir[256], a[600], b[600];
	struct fx_err err = { 0 };
	struct gguf_file *g = NULL;
	snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-next/%s", name);
	snprintf(a, sizeof(a), "%s/%s-written.gguf", tmp, name);
	snprintf(b, sizeof(b), "%s/%s-edited.gguf", tmp, name);
	CHECKF(load_ref(dir, &r), "%s: cannot read its references", name);
	CHECKF(fx_convert(dir, a, "f32", NULL, &err) == FX_OK, "%s: convert: %s", name, err.msg);
	CHECKF(gguf_open(a, &g, &err) == FX_OK, "%s: re-open: %s", name, err.msg);
	int n_edit = g ? edit(g) : 0;
	CHECKF(n_edit > 0, "%s: nothing to edit", name);
	CHECKF(g && gguf_write(g, b, -1, &err) == FX_OK, "%s: write edited: %s", name, err.msg);
	gguf_close(g);
	int32_t nv = 0, nv2 = 0;
	bool nov;
	float *la = prompt_logits(a, &r, &nv, &nov, &err);
	CHECKF(la, "%s: written form: %s", name, err.msg);
	float *lb = prompt_logits(b, &r, &nv2, &nov, &err);
	CHECKF(lb, "%s: edited form: %s", name, err.msg);
	CHECKF(la && lb && nv == nv2 &&
	       !memcmp(la, lb, (size_t)r.n_prompt * (size_t)nv * sizeof(float)) == same,
	       "%s: the edited form's logits %s", name, same ? "differ" : "are the same");
	printf("%s: %d names, keys or values edited, logits %s\n", name, n_edit,
	       same ? "bit-identical" : "moved");
	free(la);
	free(lb);
	st_close(r.st);
	r.st = NULL;
	unlink(a);
	unlink(b);
}

/* Falcon-H1 as ferrox wrote it before: blk.N.ffn_norm.weight. */
static int falcon_norm_weight(struct gguf_file *g)
{
	static char names[64][32];
	int n = 0;
	for (uint64_t i = 0; i < g->n_tensors && n < 64; i++) {
		struct gguf_str *s = &g->tensors[i].name;
		if (s->n < 9 || memcmp(s->p + s->n - 9, ".ffn_norm", 9))
			continue;
		snprintf(names[n], sizeof(names[n]), "%.*s.weight", (int)s->n, s->p);
		s->p = names[n];
		s->n = strlen(names[n++]);
	}
	return n;
}

/* Nemotron-H as llama.cpp's converter writes it: no RMS epsilon key, only
 * attention.layer_norm_epsilon (with big, that key set to 0.5, which must
 * move the logits: the fixture's 1e-5 is also ferrox's default). */
static int nemotron_eps(struct gguf_file *g, bool big)
{
	static const char key[] = "nemotron_h_moe.attention.layer_norm_rms_epsilon";
	static const char other[] = "ferrox.test.renamed";
	static const float half = 0.5f;
	int n = 0;
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct gguf_kv *kv = &g->kv[i];
		if (kv->key.n == strlen(key) && !memcmp(kv->key.p, key, strlen(key))) {
			kv->key = (struct gguf_str){ other, strlen(other) };
			n++;
		}
	}
	struct gguf_kv *ln = (struct gguf_kv *)gguf_find(g, "nemotron_h_moe.attention.layer_norm_epsilon");
	if (!ln || ln->type != GGUF_T_F32)
		return 0;
	if (big)
		ln->data = &half, n++;
	return n;
}

static int nemotron_no_rms_eps(struct gguf_file *g)
{
	return nemotron_eps(g, false);
}

static int nemotron_big_eps(struct gguf_file *g)
{
	return nemotron_eps(g, true);
}

/* The forms of these families ferrox reads besides the llama.cpp layout it
 * writes: ferrox's earlier Qwen3-Next (tiled heads, split beta / alpha:
 * same heads in another order, so within TOL rather than bit for bit) and
 * Falcon-H1 files, and llama.cpp's Nemotron-H keys. */
static void check_llamacpp_forms(const char *tmp)
{
	static struct ref r;
	static const char dir[] = "tests/fixtures/hf-tiny-next/qwen3_next";
	const struct hf_registry reg = { .find = tiled_find, .names = tiled_names };
	struct fx_err err = { 0 };
	struct gguf_file *v = NULL;
	char p[600];
	snprintf(p, sizeof(p), "%s/qwen3_next-tiled.gguf", tmp);
	CHECKF(load_ref(dir, &r) && r.st, "qwen3_next: cannot read its references");
	CHECKF(hf_open(dir, &reg, &v, &err) == FX_OK, "qwen3_next tiled: %s", err.msg);
	CHECKF(v && gguf_find_tensor(v, "blk.0.ssm_beta.weight") &&
	       !gguf_find_tensor(v, "blk.0.ssm_ba.weight"),
	       "qwen3_next tiled: no ssm_beta, or an ssm_ba");
	CHECKF(v && gguf_write(v, p, -1, &err) == FX_OK, "qwen3_next tiled: write: %s", err.msg);
	gguf_close(v);
	int32_t nv = 0;
	bool nov;
	float *l = prompt_logits(p, &r, &nv, &nov, &err);
	CHECKF(l, "qwen3_next tiled: %s", err.msg);
	const struct st_tensor *ref = r.st ? st_find(r.st, "logits") : NULL;
	if (l && ref && (size_t)ref->ne[0] * (size_t)ref->ne[1] == (size_t)r.n_prompt * (size_t)nv) {
		double e = rel_err(l, ref->data, (size_t)r.n_prompt * (size_t)nv);
		CHECKF(e <= TOL, "qwen3_next tiled: rel err %.3g vs transformers", e);
		printf("qwen3_next, ferrox's earlier tiled form: rel err %.2e\n", e);
	}
	free(l);
	st_close(r.st);
	r.st = NULL;
	unlink(p);
	check_edited("falcon_h1", tmp, falcon_norm_weight, true);
	check_edited("nemotron_h", tmp, nemotron_no_rms_eps, true);
	check_edited("nemotron_h", tmp, nemotron_big_eps, false);
}

int main(void)
{
	static const char *const fixtures[] = {
		"llama", "qwen2", "gemma3", "phi3", "qwen3", "gemma2", "olmo2", "granite",
		"mixtral", "gpt_oss", "deepseek_v3",
	};
	char tmp[] = "/tmp/fx_convert_XXXXXX";
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	int skipped = 0;
	for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
		char dir[256];
		snprintf(dir, sizeof(dir), "%s/%s", ROOT, fixtures[i]);
		skipped += !check_fixture(fixtures[i], dir, tmp);
		check_roundtrip(fixtures[i], dir, tmp);
	}
	/* hybrid and recurrent families: per-layer head counts, ssm_* tensors */
	static const char *const next[] = { "lfm2", "mamba2", "granitemoehybrid", "qwen3_5", "qwen3_5_moe",
					    "qwen3_next", "lfm2_moe", "nemotron_h", "falcon_h1",
					    "qwen3_5_vlm_layout", "granitemoehybrid_dense",
					    "olmo3", "seed_oss", "ernie4_5",
					    "ernie4_5_moe", "glm4_moe", "minimax_m2", "llama4", "gemma4",
					    "gemma4_ple_kvshare", "gemma4_moe" };
	for (size_t i = 0; i < sizeof(next) / sizeof(next[0]); i++) {
		char dir[256];
		snprintf(dir, sizeof(dir), "tests/fixtures/hf-tiny-next/%s", next[i]);
		skipped += !check_fixture(next[i], dir, tmp);
		check_roundtrip(next[i], dir, tmp);
	}
	check_llama4_switches(tmp);
	check_llamacpp_forms(tmp);
	check_types(tmp);
	check_wide_rows(tmp);
	check_real_gguf(tmp);
	if (skipped)
		printf("note: %d fixtures could not be loaded from GGUF without a tokenizer\n", skipped);
	check_write_failures(tmp);
	CHECKF(rmdir(tmp) == 0, "%s is not empty: a file was left behind", tmp);
	return check_exit();
}
