/* GGUF writer and `ferrox convert` (fx_convert). Layout per
 * ggml/docs/gguf.md, version 3:
 *   magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x (string key, u32 type, value),
 *   n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset),
 *   padding to the alignment, tensor data (each tensor padded to it).
 * Which tensors are converted, the fallback types and general.file_type
 * follow llama.cpp's src/llama-quant.cpp.
 */
#include "io/gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/alloc.h"
#include "io/hf.h"
#include "quant/quant.h"

#define ALIGNMENT 32
#define MAX_NAME 63 /* GGML_MAX_NAME - 1 bytes: llama.cpp rejects longer names */

/* Keys this writer sets itself; the source's values are dropped. */
static const char *const rewritten_keys[] = {
	"general.alignment", "general.file_type", "general.quantization_version",
};

/* llama.cpp's enum llama_ftype for a file whose matrices are mostly of
 * type t (the _S mix for k-quants); -1 when it has none. */
static int ftype_of(int t)
{
	switch (t) {
	case FX_TYPE_F32:  return 0;  /* LLAMA_FTYPE_ALL_F32 */
	case FX_TYPE_F16:  return 1;  /* MOSTLY_F16 */
	case FX_TYPE_Q4_0: return 2;
	case FX_TYPE_Q4_1: return 3;
	case FX_TYPE_Q8_0: return 7;
	case FX_TYPE_Q5_0: return 8;
	case FX_TYPE_Q5_1: return 9;
	case FX_TYPE_Q2_K: return 10;
	case FX_TYPE_Q3_K: return 11; /* Q3_K_S */
	case FX_TYPE_Q4_K: return 14; /* Q4_K_S */
	case FX_TYPE_Q5_K: return 16; /* Q5_K_S */
	case FX_TYPE_Q6_K: return 18;
	case FX_TYPE_BF16: return 32;
	case FX_TYPE_MXFP4: return 38; /* MOSTLY_MXFP4_MOE */
	default:           return -1;
	}
}

static bool str_is(const struct gguf_str *s, const char *c)
{
	size_t n = strlen(c);
	return s->n == n && !memcmp(s->p, c, n);
}

static bool is_matrix(const struct gguf_tensor *t)
{
	static const char suf[] = ".weight";
	size_t n = sizeof(suf) - 1;
	return t->n_dims == 2 && t->name.n >= n && !memcmp(t->name.p + t->name.n - n, suf, n);
}

/* 2-D tensors llama.cpp keeps in f32 whatever the file type (llama-quant.cpp;
 * its ssm_conv kernel asserts f32 taps): convolution taps and norms of
 * recurrent mixers. */
static bool keep_f32(const struct gguf_tensor *t)
{
	static const char *const suf[] = { "ssm_conv1d.weight", "shortconv.conv.weight", "norm.weight" };
	for (size_t i = 0; i < sizeof(suf) / sizeof(suf[0]); i++) {
		size_t n = strlen(suf[i]);
		if (t->name.n >= n && !memcmp(t->name.p + t->name.n - n, suf[i], n))
			return true;
	}
	return false;
}

static bool fits(int type, int64_t ne0)
{
	const struct fx_type_traits *tt = fx_type_get(type);
	return tt && tt->from_float && ne0 % tt->blck_size == 0;
}

/* The type tensor t is written as (see gguf_write's contract). */
/* llama.cpp's use_more_bits (llama-quant.cpp): the first and last eighth
 * of the layers and every third one between get more bits in _M mixes. */
static bool use_more_bits(int i, int n)
{
	return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* Q4_K_M (llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M, dense
 * models): output.weight q6_K; attn_v and ffn_down q6_K in use_more_bits
 * layers; every other matrix q4_K. */
static int q4_k_m_type(const struct gguf_tensor *t, int n_layer)
{
	char name[MAX_NAME + 1];
	size_t n = t->name.n < MAX_NAME ? t->name.n : MAX_NAME;
	memcpy(name, t->name.p, n);
	name[n] = 0;
	if (!strcmp(name, "output.weight"))
		return FX_TYPE_Q6_K;
	int il;
	char rest[MAX_NAME + 1];
	if (sscanf(name, "blk.%d.%63s", &il, rest) == 2 &&
	    (!strcmp(rest, "attn_v.weight") || !strcmp(rest, "ffn_down.weight")) &&
	    use_more_bits(il, n_layer))
		return FX_TYPE_Q6_K;
	return FX_TYPE_Q4_K;
}

static int target_type(const struct gguf_tensor *t, const struct gguf_write_opts *opt,
		       int *type, struct fx_err *err)
{
	int want = t->type, out_type = opt->out_type;
	if (out_type >= 0 && is_matrix(t) && keep_f32(t)) {
		want = FX_TYPE_F32;
	} else if (out_type >= 0 && is_matrix(t)) {
		want = opt->q4_k_m ? q4_k_m_type(t, opt->n_layer) : out_type;
		while (!fits(want, t->ne[0]) && want != FX_TYPE_F16)
			want = fx_type_fallback(want);
	} else if (out_type >= 0 && t->n_dims == 1 &&
		   (t->type == FX_TYPE_F16 || t->type == FX_TYPE_BF16)) {
		want = FX_TYPE_F32;
	}
	if (want != t->type) {
		const struct fx_type_traits *src = fx_type_get(t->type);
		if (!src || !src->to_float || !fits(want, t->ne[0]))
			return fx_fail(err, FX_E_UNSUPPORTED,
				       "tensor '%.*s': cannot convert %s [%lld, ...] to %s",
				       (int)t->name.n, t->name.p, src ? src->name : "?",
				       (long long)t->ne[0], fx_type_get(want)->name);
	}
	*type = want;
	return FX_OK;
}

/* ---- buffered output with a sticky error ------------------------------- */

struct out {
	FILE *f;
	const char *path;  /* the .tmp file, for messages */
	uint64_t pos;      /* bytes written so far */
	int errno_;        /* errno of the first failure; 0 while all is well */
};

static void put(struct out *o, const void *p, size_t n)
{
	if (o->errno_ || !n)
		return;
	errno = 0;
	if (fwrite(p, 1, n, o->f) != n)
		o->errno_ = errno ? errno : EIO;
	o->pos += n;
}

static void put_u32(struct out *o, uint32_t v)
{
	put(o, &v, sizeof(v));
}

static void put_u64(struct out *o, uint64_t v)
{
	put(o, &v, sizeof(v));
}

static void put_str(struct out *o, const struct gguf_str *s)
{
	put_u64(o, s->n);
	put(o, s->p, s->n);
}

static void pad(struct out *o)
{
	static const uint8_t zero[ALIGNMENT];
	put(o, zero, (size_t)((ALIGNMENT - o->pos % ALIGNMENT) % ALIGNMENT));
}

/* ---- sections ------------------------------------------------------------ */

static bool rewritten(const struct gguf_kv *kv)
{
	for (size_t i = 0; i < sizeof(rewritten_keys) / sizeof(rewritten_keys[0]); i++)
		if (str_is(&kv->key, rewritten_keys[i]))
			return true;
	return false;
}

/* One key/value as the spec lays it out (kv comes from gguf.c or
 * gguf_build.c, whose data layouts gguf.h describes). */
static int put_kv(struct out *o, const struct gguf_kv *kv, struct fx_err *err)
{
	put_str(o, &kv->key);
	put_u32(o, kv->type);
	if (kv->type == GGUF_T_STRING) {
		uint64_t n;
		memcpy(&n, kv->data, sizeof(n));
		put(o, kv->data, sizeof(n) + n);
		return FX_OK;
	}
	if (kv->type != GGUF_T_ARRAY) {
		put(o, kv->data, gguf_vtype_size[kv->type]);
		return FX_OK;
	}
	if (kv->arr_type == GGUF_T_ARRAY || (!kv->data && kv->n))
		return fx_fail(err, FX_E_UNSUPPORTED, "key '%.*s': arrays of arrays cannot be written",
			       (int)kv->key.n, kv->key.p);
	put_u32(o, kv->arr_type);
	put_u64(o, kv->n);
	if (kv->arr_type == GGUF_T_STRING) {
		const struct gguf_str *s = kv->data;
		for (uint64_t i = 0; i < kv->n; i++)
			put_str(o, &s[i]);
	} else {
		put(o, kv->data, (size_t)kv->n * gguf_vtype_size[kv->arr_type]);
	}
	return FX_OK;
}

static void put_key_u32(struct out *o, const char *key, uint32_t v)
{
	struct gguf_str k = { key, strlen(key) };
	put_str(o, &k);
	put_u32(o, GGUF_T_U32);
	put_u32(o, v);
}

/* general.file_type for the written types: out_type's, or (keeping types)
 * that of the most common matrix type. */
static int file_ftype(const struct gguf_file *g, const int *types, int out_type)
{
	if (out_type >= 0)
		return ftype_of(out_type);
	int count[FX_TYPE_COUNT] = { 0 }, best = FX_TYPE_F32;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (is_matrix(&g->tensors[i]) && (unsigned)types[i] < FX_TYPE_COUNT)
			count[types[i]]++;
	for (int t = 0; t < FX_TYPE_COUNT; t++)
		if (count[t] > count[best])
			best = t;
	return ftype_of(best);
}

static bool is_tokenizer_key(const struct gguf_kv *kv)
{
	static const char pre[] = "tokenizer.";
	return kv->key.n >= sizeof(pre) - 1 && !memcmp(kv->key.p, pre, sizeof(pre) - 1);
}

/* Whether g's key i is written: not one this writer sets, and not a
 * tokenizer key when the vocabulary comes from another file. */
static bool kept(const struct gguf_file *g, uint64_t i, const struct gguf_write_opts *opt)
{
	return !rewritten(&g->kv[i]) && !(opt->vocab && is_tokenizer_key(&g->kv[i]));
}

static int put_header(struct out *o, const struct gguf_file *g, const int *types,
		      const struct gguf_write_opts *opt, struct fx_err *err)
{
	int ftype = opt->q4_k_m ? 15 /* MOSTLY_Q4_K_M */ : file_ftype(g, types, opt->out_type);
	bool quantized = false;
	for (uint64_t i = 0; i < g->n_tensors; i++)
		quantized |= fx_type_get(types[i])->is_quantized;
	uint64_t n_kv = (ftype >= 0) + quantized;
	for (uint64_t i = 0; i < g->n_kv; i++)
		n_kv += kept(g, i, opt);
	for (uint64_t i = 0; opt->vocab && i < opt->vocab->n_kv; i++)
		n_kv += is_tokenizer_key(&opt->vocab->kv[i]);

	put(o, "GGUF", 4);
	put_u32(o, 3);
	put_u64(o, g->n_tensors);
	put_u64(o, n_kv);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		int rc;
		if (kept(g, i, opt) && (rc = put_kv(o, &g->kv[i], err)))
			return rc;
	}
	for (uint64_t i = 0; opt->vocab && i < opt->vocab->n_kv; i++) {
		int rc;
		if (is_tokenizer_key(&opt->vocab->kv[i]) && (rc = put_kv(o, &opt->vocab->kv[i], err)))
			return rc;
	}
	if (ftype >= 0)
		put_key_u32(o, "general.file_type", (uint32_t)ftype);
	if (quantized)
		put_key_u32(o, "general.quantization_version", 2); /* GGML_QNT_VERSION */

	uint64_t off = 0;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		put_str(o, &t->name);
		put_u32(o, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims; d++)
			put_u64(o, (uint64_t)t->ne[d]);
		put_u32(o, (uint32_t)types[i]);
		put_u64(o, off);
		size_t n = types[i] == t->type ? t->nbytes
			   : fx_row_size(types[i], t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
		off += (n + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
	}
	pad(o);
	return FX_OK;
}

/* Tensor t's data as type `type`: copied as is, or row by row through f32
 * (f32 and dst are one-row scratch buffers of the largest row). */
static void put_data(struct out *o, const struct gguf_tensor *t, int type, float *f32, void *dst)
{
	if (type == t->type) {
		put(o, t->data, t->nbytes);
	} else {
		const struct fx_type_traits *src = fx_type_get(t->type), *tt = fx_type_get(type);
		size_t src_row = fx_row_size(t->type, t->ne[0]), dst_row = fx_row_size(type, t->ne[0]);
		int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
		for (int64_t r = 0; r < rows && !o->errno_; r++) {
			src->to_float((const uint8_t *)t->data + (size_t)r * src_row, f32, t->ne[0]);
			tt->from_float(f32, dst, t->ne[0]);
			put(o, dst, dst_row);
		}
	}
	pad(o);
}

/* Types of every tensor, and the scratch for converting one row. */
static int plan(const struct gguf_file *g, const struct gguf_write_opts *opt, int *types,
		float **f32, void **dst, struct fx_err *err)
{
	int64_t max_ne0 = 1;
	size_t max_row = 1;
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		int rc;
		if (t->name.n > MAX_NAME)
			return fx_fail(err, FX_E_INVALID,
				       "tensor name '%.*s' is longer than llama.cpp's %d bytes",
				       (int)t->name.n, t->name.p, MAX_NAME);
		if ((rc = target_type(t, opt, &types[i], err)))
			return rc;
		if (types[i] != t->type) {
			max_ne0 = t->ne[0] > max_ne0 ? t->ne[0] : max_ne0;
			size_t r = fx_row_size(types[i], t->ne[0]);
			max_row = r > max_row ? r : max_row;
		}
	}
	*f32 = fx_calloc((size_t)max_ne0, sizeof(float));
	*dst = fx_calloc(max_row, 1);
	if (!*f32 || !*dst)
		return fx_fail(err, FX_E_NOMEM, "no memory for a %lld-element row", (long long)max_ne0);
	return FX_OK;
}

static int io_error(struct fx_err *err, const char *what, const char *path, int e)
{
	return fx_fail(err, FX_E_IO, "%s %s: %s%s", what, path, strerror(e),
		       e == ENOSPC || e == EDQUOT || e == EFBIG ? " (free some space, or write elsewhere)"
		       : e == EACCES || e == EROFS || e == ENOENT ? " (is the directory there and writable?)"
		       : "");
}

int gguf_write(const struct gguf_file *g, const char *path, int out_type, struct fx_err *err)
{
	struct gguf_write_opts opt = { .out_type = out_type };
	return gguf_write_opts(g, path, &opt, err);
}

int gguf_write_opts(const struct gguf_file *g, const char *path, const struct gguf_write_opts *opt,
		    struct fx_err *err)
{
	int out_type = opt->out_type;
	const struct fx_type_traits *ot = out_type >= 0 ? fx_type_get(out_type) : NULL;
	float *f32 = NULL;
	void *dst = NULL;
	char *tmp = NULL;
	int *types = NULL;
	struct out o = { 0 };
	FILE *f;
	int rc;

	if (out_type >= 0 && (!ot || !ot->from_float))
		return fx_fail(err, FX_E_INVALID, "cannot write tensors as %s: no quantizer for it",
			       ot ? ot->name : "an unknown type");
	size_t n = strlen(path);
	if (!(tmp = fx_malloc_array(n + 5, 1)) || !(types = fx_calloc(g->n_tensors + 1, sizeof(*types)))) {
		rc = fx_fail(err, FX_E_NOMEM, "no memory");
		goto out_free;
	}
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".tmp", 5);
	if ((rc = plan(g, opt, types, &f32, &dst, err)))
		goto out_free;
	o.path = tmp;
	if (!(o.f = fopen(tmp, "wb"))) {
		rc = io_error(err, "cannot create", tmp, errno);
		goto out_free;
	}
	if ((rc = put_header(&o, g, types, opt, err)))
		goto out_unlink;
	for (uint64_t i = 0; i < g->n_tensors && !o.errno_; i++)
		put_data(&o, &g->tensors[i], types[i], f32, dst);
	if (!o.errno_ && (fflush(o.f) || fsync(fileno(o.f))))
		o.errno_ = errno;
	if (o.errno_) {
		rc = io_error(err, "cannot write", tmp, o.errno_);
		goto out_unlink;
	}
	f = o.f;
	o.f = NULL;
	if (fclose(f)) {
		rc = io_error(err, "cannot write", tmp, errno);
		goto out_unlink;
	}
	if (rename(tmp, path)) {
		rc = io_error(err, "cannot rename the finished file onto", path, errno);
		goto out_unlink;
	}
	rc = FX_OK;
	goto out_free;

out_unlink:
	if (o.f)
		fclose(o.f);
	unlink(tmp);
out_free:
	fx_free(f32);
	fx_free(dst);
	fx_free(types);
	fx_free(tmp);
	return rc;
}

/* ---- fx_convert ------------------------------------------------------------ */

static const struct {
	const char *name;
	int type;
} convert_types[] = {
	{ "f32", FX_TYPE_F32 },   { "f16", FX_TYPE_F16 },   { "bf16", FX_TYPE_BF16 },
	{ "q8_0", FX_TYPE_Q8_0 }, { "q4_0", FX_TYPE_Q4_0 }, { "q4_1", FX_TYPE_Q4_1 },
	{ "q5_0", FX_TYPE_Q5_0 }, { "q5_1", FX_TYPE_Q5_1 }, { "q2_k", FX_TYPE_Q2_K },
	{ "q3_k", FX_TYPE_Q3_K }, { "q4_k", FX_TYPE_Q4_K }, { "q5_k", FX_TYPE_Q5_K },
	{ "q6_k", FX_TYPE_Q6_K },
};

/* The fx_type named name (any case), or -1. */
static int find_type(const char *name)
{
	for (size_t i = 0; i < sizeof(convert_types) / sizeof(convert_types[0]); i++)
		if (!strcasecmp(name, convert_types[i].name))
			return convert_types[i].type;
	return -1;
}

/* "f32, f16, ..." of the names whose type has a quantizer (or all). */
static void list_types(char *buf, size_t n, bool only_available)
{
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(convert_types) / sizeof(convert_types[0]); i++) {
		const struct fx_type_traits *tt = fx_type_get(convert_types[i].type);
		if (only_available && (!tt || !tt->from_float))
			continue;
		int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", convert_types[i].name);
		if (w < 0 || (size_t)w >= n - len)
			return;
		len += (size_t)w;
	}
}

int gguf_convert(const char *src, const struct hf_registry *reg, const char *dst,
		 const char *type_name, const char *vocab_from, struct fx_err *err)
{
	struct gguf_file *g = NULL, *vg = NULL;
	char names[256];
	int type = -1, rc;
	bool q4_k_m = type_name && !strcasecmp(type_name, "q4_k_m");

	if (!src || !dst)
		return fx_fail(err, FX_E_INVALID, "fx_convert: src and dst are required");
	if (q4_k_m) {
		type = FX_TYPE_Q4_K;
	} else if (type_name) {
		type = find_type(type_name);
		if (type < 0) {
			list_types(names, sizeof(names), false);
			return fx_fail(err, FX_E_INVALID, "unknown type '%s' (valid: %s)", type_name,
				       names);
		}
		const struct fx_type_traits *tt = fx_type_get(type);
		if (!tt || !tt->from_float) {
			list_types(names, sizeof(names), true);
			return fx_fail(err, FX_E_UNSUPPORTED,
				       "type '%s' has no quantizer in this build yet (available: %s)",
				       type_name, names);
		}
	}
	if ((rc = hf_open_any(src, reg, &g, NULL, err)))
		return rc;
	struct gguf_write_opts opt = { .out_type = type, .q4_k_m = q4_k_m };
	if (vocab_from) {
		if ((rc = gguf_open(vocab_from, &vg, err))) {
			gguf_close(g);
			return rc;
		}
		if (!gguf_find(vg, "tokenizer.ggml.tokens")) {
			gguf_close(vg);
			gguf_close(g);
			return fx_fail(err, FX_E_INVALID, "%s has no tokenizer.ggml.tokens to copy",
				       vocab_from);
		}
		opt.vocab = vg;
	}
	struct gguf_str why;
	if (!vocab_from && gguf_get_str(g, HF_TOKENIZER_ERROR, &why)) {
		rc = fx_fail(err, FX_E_UNSUPPORTED, "%.*s (--vocab-from FILE.gguf takes the tokenizer "
			     "from a GGUF instead)", (int)(why.n > 900 ? 900 : why.n), why.p);
		gguf_close(g);
		return rc;
	}
	if (q4_k_m) {
		const struct gguf_kv *arch = gguf_find(g, "general.architecture");
		char key[96];
		uint32_t nl = 0;
		if (arch && arch->type == GGUF_T_STRING) {
			uint64_t n;
			memcpy(&n, arch->data, sizeof(n));
			snprintf(key, sizeof(key), "%.*s.block_count", (int)(n < 64 ? n : 64),
				 (const char *)arch->data + sizeof(n));
			gguf_get_u32(g, key, &nl);
		}
		opt.n_layer = (int)nl;
	}
	rc = gguf_write_opts(g, dst, &opt, err);
	gguf_close(vg);
	gguf_close(g);
	return rc;
}
