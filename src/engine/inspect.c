/* fx_inspect: a report of a GGUF file from its header alone, so it works
 * on files whose architecture ferrox cannot run yet. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

#include "io/gguf.h"
#include "io/hf.h"
#include "model/arch.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

/* A growing string; on allocation failure it latches `failed`. */
struct sbuf {
	char *p;
	size_t n, cap;
	int failed;
};

__attribute__((format(printf, 2, 3)))
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	if (b->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->failed = 1;
			return;
		}
		if (b->p && b->n + (size_t)k < b->cap) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = (b->cap + (size_t)k + 1) * 2;
		char *q = realloc(b->p, cap);
		if (!q) {
			b->failed = 1;
			return;
		}
		b->p = q;
		b->cap = cap;
	}
}

static void print_value(struct sbuf *b, const struct gguf_file *g, const struct gguf_kv *kv)
{
	char k[160];
	snprintf(k, sizeof(k), "%.*s", (int)(kv->key.n < 159 ? kv->key.n : 159), kv->key.p);
	if (kv->type == GGUF_T_STRING) {
		struct gguf_str s;
		gguf_get_str(g, k, &s);
		if (s.n > 60 || memchr(s.p, '\n', s.n))
			sb_printf(b, "(%llu bytes of text)", (unsigned long long)s.n);
		else
			sb_printf(b, "%.*s", (int)s.n, s.p);
	} else if (kv->type == GGUF_T_ARRAY) {
		sb_printf(b, "[%llu x %s]", (unsigned long long)kv->n, gguf_vtype_name(kv->arr_type));
	} else if (kv->type == GGUF_T_F32 || kv->type == GGUF_T_F64) {
		float f = 0;
		gguf_get_f32(g, k, &f);
		sb_printf(b, "%g", f);
	} else if (kv->type == GGUF_T_BOOL) {
		bool v = false;
		gguf_get_bool(g, k, &v);
		sb_printf(b, "%s", v ? "true" : "false");
	} else {
		int64_t v = 0;
		gguf_get_i64(g, k, &v);
		sb_printf(b, "%lld", (long long)v);
	}
}

int fx_inspect(const char *path, char **report, struct fx_err *err)
{
	struct gguf_file *g;
	struct sbuf b = { 0 };
	struct gguf_str s = { "", 0 }, tok = { "?", 1 }, pre = { "", 0 };
	bool hf;
	/* A Hugging Face directory is described through its GGUF-shaped view. */
	int rc = hf_open_any(path, &arch_hf, &g, &hf, err);
	*report = NULL;
	if (rc)
		return rc;
	gguf_get_str(g, "general.architecture", &s);
	gguf_get_str(g, "tokenizer.ggml.model", &tok);
	gguf_get_str(g, "tokenizer.ggml.pre", &pre);
	sb_printf(&b, "file:          %s\n", path);
	if (hf)
		sb_printf(&b, "format:        Hugging Face checkpoint (config.json + safetensors)\n");
	else
		sb_printf(&b, "size:          %zu bytes (%.1f MiB)\n", g->map_size,
			  g->map_size / 1048576.0);
	if (hf)
		sb_printf(&b, "mapped to:     %llu metadata keys and %llu tensors with llama.cpp's names\n",
			  (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors);
	else
		sb_printf(&b, "gguf version:  %u, %llu metadata keys, %llu tensors, alignment %u\n",
			  g->version, (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors,
			  g->alignment);
	sb_printf(&b, "architecture:  %.*s\n", (int)s.n, s.p);
	/* Hyperparameters: every "{arch}." key. */
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct gguf_kv *kv = &g->kv[i];
		if (s.n && kv->key.n > s.n && !memcmp(kv->key.p, s.p, s.n) && kv->key.p[s.n] == '.') {
			sb_printf(&b, "  %-40.*s ", (int)(kv->key.n - s.n - 1), kv->key.p + s.n + 1);
			print_value(&b, g, kv);
			sb_printf(&b, "\n");
		}
	}
	uint64_t n_params = 0, bytes[FX_TYPE_COUNT] = { 0 }, count[FX_TYPE_COUNT] = { 0 };
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
		count[t->type]++;
		bytes[t->type] += t->nbytes;
	}
	sb_printf(&b, "parameters:    %llu (%.1f M)\n", (unsigned long long)n_params, n_params / 1e6);
	sb_printf(&b, "tensor types:\n");
	for (int t = 0; t < FX_TYPE_COUNT; t++)
		if (count[t])
			sb_printf(&b, "  %-6s %4llu tensors %12llu bytes\n", fx_type_get(t)->name,
				  (unsigned long long)count[t], (unsigned long long)bytes[t]);
	const void *toks;
	uint64_t n_tok = 0;
	gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_T_STRING, &toks, &n_tok);
	const char *kind = tok.n == 5 && !memcmp(tok.p, "llama", 5) ? "SentencePiece"
			 : tok.n == 4 && !memcmp(tok.p, "gpt2", 4) ? "byte-level BPE" : "unknown to ferrox";
	struct vocab *hv = NULL;
	if (hf && (rc = vocab_load_hf(path, &hv, err))) {
		gguf_close(g);
		free(b.p);
		return rc;
	}
	if (hv)
		sb_printf(&b, "tokenizer:     %s, %d tokens\n", vocab_kind(hv), vocab_n_tokens(hv));
	else if (!n_tok)
		sb_printf(&b, "tokenizer:     absent (runs from token ids only)\n");
	else
		sb_printf(&b, "tokenizer:     %.*s (%s), pre %.*s, %llu tokens\n", (int)tok.n, tok.p,
			  kind, (int)pre.n, pre.p, (unsigned long long)n_tok);
	if (hf) {
		/* where context_length came from, and tokenizer_config.json's
		 * model_max_length whichever won (a file that cannot be read is
		 * said here, not fatal: the view loaded without it) */
		struct hf_ctx_info ci;
		struct fx_err e2 = { 0 };
		if (hf_context_info(path, &ci, &e2) == FX_OK) {
			sb_printf(&b, "context:       %d (%s)\n", (int)ci.n_ctx_train, ci.from);
			if (ci.model_max_length)
				sb_printf(&b, "model_max_length: %d (tokenizer_config.json)\n",
					  (int)ci.model_max_length);
			else
				sb_printf(&b, "model_max_length: none (tokenizer_config.json has none, "
					  "or transformers' no-limit value)\n");
		} else {
			sb_printf(&b, "model_max_length: unreadable: %s\n", e2.msg);
		}
	}
	struct gguf_str tmpl;
	if (gguf_get_str(g, "tokenizer.chat_template", &tmpl))
		sb_printf(&b, "chat template: present (%llu bytes)\n", (unsigned long long)tmpl.n);
	else
		sb_printf(&b, "chat template: absent\n");
	vocab_free(hv);
	gguf_close(g);
	if (b.failed) {
		free(b.p);
		return fx_fail(err, FX_E_NOMEM, "no memory for the report");
	}
	*report = b.p;
	return FX_OK;
}

void fx_string_free(char *s)
{
	free(s);
}
