/* Model loading: GGUF metadata -> hparams, architecture row -> which
 * tensors to bind, every shape checked before use. Key and tensor names are
 * llama.cpp's (llama-arch.cpp), the names GGUF files carry. */
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

struct loader {
	struct fx_model *m;
	struct fx_err *err;
	char arch[64]; /* general.architecture, NUL-terminated */
};

static const char *key(const struct loader *ld, char *buf, size_t n, const char *suffix)
{
	snprintf(buf, n, "%s.%s", ld->arch, suffix);
	return buf;
}

/* An integer hparam "{arch}.suffix"; *v keeps its default when absent and
 * not required. A per-layer array where a scalar is expected is refused. */
static int get_int(struct loader *ld, const char *suffix, int32_t *v, bool required)
{
	char k[128];
	int64_t x;
	key(ld, k, sizeof(k), suffix);
	const struct gguf_kv *kv = gguf_find(ld->m->g, k);
	if (!kv) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: required key %s is missing", k);
		return FX_OK;
	}
	if (kv->type == GGUF_T_ARRAY)
		return fx_fail(ld->err, FX_E_UNSUPPORTED,
			       "GGUF: %s is a per-layer array; ferrox supports one value for all layers", k);
	if (!gguf_get_i64(ld->m->g, k, &x) || x < 0 || x > INT32_MAX)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is not a valid count", k);
	*v = (int32_t)x;
	return FX_OK;
}

static int get_float(struct loader *ld, const char *suffix, float *v)
{
	char k[128];
	key(ld, k, sizeof(k), suffix);
	if (!gguf_find(ld->m->g, k))
		return FX_OK;
	if (!gguf_get_f32(ld->m->g, k, v) || !isfinite(*v))
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is not a finite float", k);
	return FX_OK;
}

static int read_hparams(struct loader *ld)
{
	struct hparams *hp = &ld->m->hp;
	int rc;
	*hp = (struct hparams){ .rope_base = 10000.0f, .rope_scale = 1.0f, .eps = 1e-5f,
				.gelu_f16 = true };
	if ((rc = get_int(ld, "context_length", &hp->n_ctx_train, true)) ||
	    (rc = get_int(ld, "embedding_length", &hp->n_embd, true)) ||
	    (rc = get_int(ld, "block_count", &hp->n_layer, true)) ||
	    (rc = get_int(ld, "feed_forward_length", &hp->n_ff, true)) ||
	    (rc = get_int(ld, "attention.head_count", &hp->n_head, true)))
		return rc;
	if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_ff <= 0 ||
	    hp->n_layer > 4096)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: impossible sizes (n_embd %d, n_layer %d, n_head %d, n_ff %d)",
			       hp->n_embd, hp->n_layer, hp->n_head, hp->n_ff);
	hp->n_head_kv = hp->n_head;
	hp->head_dim = hp->n_embd / hp->n_head;
	if ((rc = get_int(ld, "attention.head_count_kv", &hp->n_head_kv, false)) ||
	    (rc = get_int(ld, "attention.key_length", &hp->head_dim, false)))
		return rc;
	hp->head_dim_v = hp->head_dim;
	hp->n_rot = hp->head_dim;
	if ((rc = get_int(ld, "attention.value_length", &hp->head_dim_v, false)) ||
	    (rc = get_int(ld, "rope.dimension_count", &hp->n_rot, false)) ||
	    (rc = get_int(ld, "attention.sliding_window", &hp->n_swa, false)))
		return rc;
	if (hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv || hp->head_dim <= 0 ||
	    hp->head_dim_v <= 0 || hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: bad attention shape (n_head %d, n_head_kv %d, head_dim %d, n_rot %d)",
			       hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_rot);
	if ((rc = get_float(ld, "attention.layer_norm_rms_epsilon", &hp->eps)) ||
	    (rc = get_float(ld, "rope.freq_base", &hp->rope_base)) ||
	    (rc = get_float(ld, "final_logit_softcapping", &hp->final_softcap)) ||
	    (rc = get_float(ld, "attn_logit_softcapping", &hp->attn_softcap)))
		return rc;
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
	if ((rc = get_float(ld, "attention.scale", &hp->attn_scale)))
		return rc;
	hp->rope_base_swa = ld->m->arch->rope_base_swa > 0 ? ld->m->arch->rope_base_swa : hp->rope_base;

	char k[128];
	struct gguf_str st;
	if (gguf_get_str(ld->m->g, key(ld, k, sizeof(k), "rope.scaling.type"), &st) &&
	    !(st.n == 4 && !memcmp(st.p, "none", 4))) {
		float f = 1.0f;
		if (!(st.n == 6 && !memcmp(st.p, "linear", 6)))
			return fx_fail(ld->err, FX_E_UNSUPPORTED,
				       "GGUF: RoPE scaling '%.*s' is not supported yet (linear is)",
				       (int)st.n, st.p);
		if ((rc = get_float(ld, "rope.scaling.factor", &f)))
			return rc;
		if (f <= 0)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: rope.scaling.factor %g", f);
		hp->rope_scale = f;
	}
	return FX_OK;
}

/* Which layers use the sliding window: the file's per-layer pattern when
 * present, else the architecture's period, else none. */
static int read_swa_layers(struct loader *ld)
{
	struct fx_model *m = ld->m;
	char k[128];
	const struct gguf_kv *kv = gguf_find(m->g, key(ld, k, sizeof(k), "attention.sliding_window_pattern"));
	int period = m->arch->swa_period;
	if (kv && kv->type == GGUF_T_ARRAY) {
		if (kv->n != (uint64_t)m->hp.n_layer || kv->arr_type == GGUF_T_STRING || !kv->data)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s has %llu entries for %d layers",
				       k, (unsigned long long)kv->n, m->hp.n_layer);
		for (int il = 0; il < m->hp.n_layer; il++)
			m->layers[il].swa = gguf_arr_num(kv, (uint64_t)il) != 0;
		return FX_OK;
	}
	if (kv) {
		uint32_t p;
		if (!gguf_get_u32(m->g, k, &p))
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: %s is not an integer", k);
		period = (int)p;
	}
	for (int il = 0; il < m->hp.n_layer; il++)
		m->layers[il].swa = m->hp.n_swa > 0 && period > 0 && (il + 1) % period != 0;
	return FX_OK;
}

/* Bind matrix `name` with n_in columns and n_out rows. */
static int bind_mat(struct loader *ld, const char *name, int64_t n_in, int64_t n_out,
		    bool required, struct wmat *w)
{
	const struct gguf_tensor *t = gguf_find_tensor(ld->m->g, name);
	memset(w, 0, sizeof(*w));
	if (!t) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is missing (architecture %s)",
				       name, ld->arch);
		return FX_OK;
	}
	if (t->n_dims != 2 || t->ne[0] != n_in || t->ne[1] != n_out)
		return fx_fail(ld->err, FX_E_FORMAT,
			       "GGUF: tensor %s is [%lld, %lld, %lld], want [%lld, %lld]", name,
			       (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
			       (long long)n_in, (long long)n_out);
	const struct fx_type_traits *tt = fx_type_get(t->type);
	if (!tt->vec_dot ||
	    (tt->vec_dot_type != FX_TYPE_F32 && !fx_type_get(tt->vec_dot_type)->from_float))
		return fx_fail(ld->err, FX_E_UNSUPPORTED,
			       "GGUF: tensor %s has type %s, which ferrox cannot multiply yet",
			       name, tt->name);
	*w = (struct wmat){ .data = t->data, .type = t->type, .n_in = n_in, .n_out = n_out,
			    .row_bytes = fx_row_size(t->type, n_in) };
	return FX_OK;
}

/* Bind a 1-D f32 vector of n; other float types are converted once into an
 * owned buffer. */
static int bind_vec(struct loader *ld, const char *name, int64_t n, bool required,
		    const float **out)
{
	struct fx_model *m = ld->m;
	const struct gguf_tensor *t = gguf_find_tensor(m->g, name);
	*out = NULL;
	if (!t) {
		if (required)
			return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s is missing (architecture %s)",
				       name, ld->arch);
		return FX_OK;
	}
	if (t->n_dims != 1 || t->ne[0] != n)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor %s has %lld elements, want %lld",
			       name, (long long)(t->ne[0] * t->ne[1]), (long long)n);
	if (t->type == FX_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
		*out = t->data;
		return FX_OK;
	}
	const struct fx_type_traits *tt = fx_type_get(t->type);
	float *buf = fx_malloc_array((size_t)n, sizeof(float));
	float **ow = fx_realloc_array(m->owned, (size_t)m->n_owned + 1, sizeof(*ow));
	if (!buf || !ow) {
		fx_free(buf);
		if (ow)
			m->owned = ow;
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %s", name);
	}
	m->owned = ow;
	m->owned[m->n_owned++] = buf;
	tt->to_float(t->data, buf, n);
	*out = buf;
	return FX_OK;
}

static int bind_layer(struct loader *ld, int il)
{
	const struct hparams *hp = &ld->m->hp;
	const struct arch_desc *a = ld->m->arch;
	struct layer *L = &ld->m->layers[il];
	int64_t e = hp->n_embd, q = (int64_t)hp->n_head * hp->head_dim;
	int64_t kd = (int64_t)hp->n_head_kv * hp->head_dim, vd = (int64_t)hp->n_head_kv * hp->head_dim_v;
	char n[96];
	int rc;
#define NAME(s) (snprintf(n, sizeof(n), "blk.%d." s, il), n)
	if ((rc = bind_vec(ld, NAME("attn_norm.weight"), e, true, &L->attn_norm)) ||
	    (rc = bind_mat(ld, NAME("attn_q.weight"), e, q, true, &L->wq)) ||
	    (rc = bind_mat(ld, NAME("attn_k.weight"), e, kd, true, &L->wk)) ||
	    (rc = bind_mat(ld, NAME("attn_v.weight"), e, vd, true, &L->wv)) ||
	    (rc = bind_mat(ld, NAME("attn_output.weight"), (int64_t)hp->n_head * hp->head_dim_v, e,
			   true, &L->wo)) ||
	    (rc = bind_vec(ld, NAME("attn_q_norm.weight"), hp->head_dim, a->qk_norm, &L->q_norm)) ||
	    (rc = bind_vec(ld, NAME("attn_k_norm.weight"), hp->head_dim, a->qk_norm, &L->k_norm)) ||
	    (rc = bind_vec(ld, NAME("post_attention_norm.weight"), e, a->post_norms, &L->post_attn_norm)) ||
	    (rc = bind_vec(ld, NAME("ffn_norm.weight"), e, true, &L->ffn_norm)) ||
	    (rc = bind_mat(ld, NAME("ffn_gate.weight"), e, hp->n_ff, true, &L->ffn_gate)) ||
	    (rc = bind_mat(ld, NAME("ffn_up.weight"), e, hp->n_ff, true, &L->ffn_up)) ||
	    (rc = bind_mat(ld, NAME("ffn_down.weight"), hp->n_ff, e, true, &L->ffn_down)) ||
	    (rc = bind_vec(ld, NAME("post_ffw_norm.weight"), e, a->post_norms, &L->post_ffn_norm)))
		return rc;
#undef NAME
	return FX_OK;
}

/* RoPE inverse frequencies base^(-2i/n_rot), computed in double and
 * rounded once (HF computes them in float32 from the same formula). */
static void fill_inv_freq(float *f, int n_rot, float base, float scale)
{
	for (int i = 0; i < n_rot / 2; i++)
		f[i] = (float)(1.0 / pow((double)base, 2.0 * i / n_rot) / scale);
}

static int bind_weights(struct loader *ld)
{
	struct fx_model *m = ld->m;
	struct hparams *hp = &m->hp;
	const struct gguf_tensor *te = gguf_find_tensor(m->g, "token_embd.weight");
	int rc;
	if (!te)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: tensor token_embd.weight is missing");
	hp->n_vocab = (int32_t)te->ne[1];
	if (m->vocab && vocab_n_tokens(m->vocab) != hp->n_vocab)
		return fx_fail(ld->err, FX_E_FORMAT, "GGUF: token_embd has %d rows but the vocabulary %d tokens",
			       hp->n_vocab, vocab_n_tokens(m->vocab));
	if ((rc = bind_mat(ld, "token_embd.weight", hp->n_embd, hp->n_vocab, true, &m->tok_embd)) ||
	    (rc = bind_vec(ld, "output_norm.weight", hp->n_embd, true, &m->output_norm)) ||
	    (rc = bind_mat(ld, "output.weight", hp->n_embd, hp->n_vocab, false, &m->output)))
		return rc;
	if (!fx_type_get(m->tok_embd.type)->to_float)
		return fx_fail(ld->err, FX_E_UNSUPPORTED, "token_embd type cannot be dequantized");
	if (!m->output.data)
		m->output = m->tok_embd; /* tied embeddings */
	m->layers = fx_calloc((size_t)hp->n_layer, sizeof(*m->layers));
	m->inv_freq = fx_calloc((size_t)hp->n_rot, sizeof(float));
	if (!m->layers || !m->inv_freq)
		return fx_fail(ld->err, FX_E_NOMEM, "no memory for %d layers", hp->n_layer);
	float *f_global = m->inv_freq, *f_swa = m->inv_freq + hp->n_rot / 2;
	fill_inv_freq(f_global, hp->n_rot, hp->rope_base, hp->rope_scale);
	fill_inv_freq(f_swa, hp->n_rot, hp->rope_base_swa, 1.0f);
	if ((rc = read_swa_layers(ld)))
		return rc;
	for (int il = 0; il < hp->n_layer; il++) {
		if ((rc = bind_layer(ld, il)))
			return rc;
		m->layers[il].inv_freq = m->layers[il].swa ? f_swa : f_global;
	}
	return FX_OK;
}

struct fx_model_params fx_model_default_params(void)
{
	return (struct fx_model_params){ .size = sizeof(struct fx_model_params) };
}

int fx_model_load(const char *path, const struct fx_model_params *p, struct fx_model **out,
		  struct fx_err *err)
{
	struct fx_model_params dp = fx_model_default_params();
	struct loader ld = { .err = err };
	struct gguf_str arch;
	int rc;
	if (!path || !out)
		return fx_fail(err, FX_E_INVALID, "fx_model_load: path and out are required");
	*out = NULL;
	if (!p)
		p = &dp;
	struct fx_model *m = fx_calloc(1, sizeof(*m));
	if (!m)
		return fx_fail(err, FX_E_NOMEM, "no memory");
	ld.m = m;
	m->vocab_only = p->vocab_only;
	if ((rc = gguf_open(path, &m->g, err)))
		goto fail;
	if (!gguf_get_str(m->g, "general.architecture", &arch)) {
		/* Vocabulary-only files (llama.cpp's ggml-vocab-*.gguf) may lack it. */
		if (!p->vocab_only) {
			rc = fx_fail(err, FX_E_FORMAT, "%s: general.architecture is missing", path);
			goto fail;
		}
		arch = (struct gguf_str){ .p = "", .n = 0 };
	}
	snprintf(ld.arch, sizeof(ld.arch), "%.*s", (int)(arch.n < 63 ? arch.n : 63), arch.p);
	m->arch = arch_find(arch.p, arch.n);
	if (!m->arch && !p->vocab_only) {
		rc = fx_fail(err, FX_E_UNSUPPORTED,
			     "%s: architecture '%s' is not supported (supported: llama, gemma3)", path,
			     ld.arch);
		goto fail;
	}
	if ((rc = vocab_load(m->g, &m->vocab, err)))
		goto fail_path;
	if (p->vocab_only)
		goto done;
	if ((rc = read_hparams(&ld)) || (rc = bind_weights(&ld)))
		goto fail_path;
done:
	*out = m;
	return FX_OK;
fail_path:
	fx_err_prefix(err, path);
fail:
	fx_model_free(m);
	return rc;
}

void fx_model_free(struct fx_model *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n_owned; i++)
		fx_free(m->owned[i]);
	fx_free(m->owned);
	fx_free(m->layers);
	fx_free(m->inv_freq);
	vocab_free(m->vocab);
	gguf_close(m->g);
	fx_free(m);
}

int32_t fx_model_n_vocab(const struct fx_model *m)
{
	return m->vocab_only ? vocab_n_tokens(m->vocab) : m->hp.n_vocab;
}

int32_t fx_model_n_ctx_train(const struct fx_model *m)
{
	return m->hp.n_ctx_train;
}

const char *fx_model_arch_name(const struct fx_model *m)
{
	return m->arch ? m->arch->name : "";
}

const struct vocab *model_vocab(const struct fx_model *m)
{
	return m->vocab;
}
