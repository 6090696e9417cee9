/* POST /v1/embeddings (OpenAI's shape; llama-server's --embeddings).
 *
 * HTTP thread: the body's `input` (a string, a list of strings, a list of
 * token ids, or a list of such lists) becomes one token list per input
 * (text tokenized with the model's special tokens added and control-token
 * texts parsed, as llama-server does), checked against the context, and
 * queued. Engine thread (srv_emb_step, between generation steps): up to
 * SRV_EMBED_SEQS inputs of the queue, about two prefill chunks of tokens,
 * go through one fx_embed_batch on the server's embedding context, so a
 * long queue of embeddings delays a step of the running streams by about
 * what a prefill chunk does (s->chunk tokens; an input longer than that:
 * its length), as a prompt being prefilled beside them does.
 * Every vector is pooled (--pooling) and L2-normalized; `dimensions` keeps
 * the first N floats and normalizes them again (OpenAI's text-embedding-3
 * shortening, meaningful for models trained for it, matryoshka style).
 * `encoding_format` "base64" sends each vector's little-endian float32
 * bytes in base64 (the openai client asks for it by default).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/compat.h"
#include "server/server.h"

static const char E_INV[] = "invalid_request_error";

/* ---- the queue (engine side) ---- */

void srv_emb_unref_locked(struct srv_emb *e)
{
	if (!e || --e->refs > 0)
		return;
	for (int32_t i = 0; e->tok && i < e->n_in; i++)
		free(e->tok[i]);
	free(e->tok);
	free(e->n_tok);
	free(e->out);
	pthread_cond_destroy(&e->cond);
	free(e);
}

int srv_emb_submit(struct srv *s, struct srv_emb *e)
{
	pthread_mutex_lock(&s->lock);
	int rc = s->draining || !s->ready ? 503 : s->n_emb_queued >= s->max_queue ? 429 : 0;
	if (!rc) {
		e->refs++;
		e->next = NULL;
		if (s->e_tail)
			s->e_tail->next = e;
		else
			s->e_head = e;
		s->e_tail = e;
		s->n_emb_queued++;
		pthread_cond_signal(&s->wake);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int srv_emb_open(struct srv *s, struct fx_err *err)
{
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = s->n_ctx_seq; /* one request's context: any single input fits */
	cp.n_seq_max = SRV_EMBED_SEQS;
	cp.kv_layout = FX_KV_PAGED;
	cp.block_size = s->block_size;
	cp.n_ubatch = 512;
	cp.n_threads = s->p.n_threads;
	cp.hidden = true;
	int rc = fx_context_create(s->model, &cp, &s->ectx, err);
	if (rc)
		return rc;
	size_t d = (size_t)fx_model_n_embd(s->model);
	if (!(s->e_out = malloc(SRV_EMBED_SEQS * d * sizeof(float)))) {
		err->code = FX_E_NOMEM;
		snprintf(err->msg, sizeof(err->msg), "out of memory for embeddings");
		return FX_E_NOMEM;
	}
	for (int i = 1; i < SRV_EMBED_SEQS; i++) {
		fx_seq q;
		if ((rc = fx_seq_add(s->ectx, &q))) {
			err->code = rc;
			snprintf(err->msg, sizeof(err->msg), "%s", fx_context_errmsg(s->ectx));
			return rc;
		}
	}
	return FX_OK;
}

/* Under the lock: drop the queue's head (taken whole or cancelled). */
static void pop_head_locked(struct srv *s)
{
	struct srv_emb *e = s->e_head;
	s->e_head = e->next;
	if (!s->e_head)
		s->e_tail = NULL;
	s->n_emb_queued--;
}

static void finish_locked(struct srv_emb *e)
{
	e->done = true;
	pthread_cond_broadcast(&e->cond);
	srv_emb_unref_locked(e); /* the engine's reference */
}

void srv_emb_step(struct srv *s, bool decoding)
{
	struct srv_emb *who[SRV_EMBED_SEQS];
	int32_t idx[SRV_EMBED_SEQS], n_tok[SRV_EMBED_SEQS];
	const int32_t *tok[SRV_EMBED_SEQS];
	fx_seq seq[SRV_EMBED_SEQS];
	int k = 0;
	/* the prefill budget of a generation step: s->chunk tokens while
	 * streams decode, twice that when none does */
	int64_t budget = (decoding ? 1 : 2) * (int64_t)s->chunk, blocks = 0, used = 0;
	int64_t pool = s->n_ctx_seq / s->block_size;
	pthread_mutex_lock(&s->lock);
	while (s->e_head && k < SRV_EMBED_SEQS) {
		struct srv_emb *e = s->e_head;
		if (e->cancelled) {
			pop_head_locked(s);
			finish_locked(e);
			continue;
		}
		int32_t n = e->n_tok[e->next_in];
		int64_t nb = (n + s->block_size - 1) / s->block_size;
		if (k && (used + n > budget || blocks + nb > pool))
			break;
		who[k] = e;
		idx[k] = e->next_in;
		tok[k] = e->tok[e->next_in];
		n_tok[k] = n;
		seq[k] = (fx_seq)k;
		k++;
		used += n;
		blocks += nb;
		if (++e->next_in == e->n_in)
			pop_head_locked(s); /* the engine's reference now rides on who[] */
	}
	pthread_mutex_unlock(&s->lock);
	if (!k)
		return;
	int rc = fx_embed_batch(s->ectx, k, seq, tok, n_tok, s->p.pooling, true, s->e_out);
	if (rc)
		fprintf(stderr, "serve: embeddings: %s\n", fx_context_errmsg(s->ectx));
	size_t d = (size_t)fx_model_n_embd(s->model);
	pthread_mutex_lock(&s->lock);
	s->met.prompt_tokens += (uint64_t)used; /* as vLLM counts pooling requests' */
	for (int i = 0; i < k; i++) {
		struct srv_emb *e = who[i];
		if (rc && !e->rc)
			e->rc = rc;
		if (!rc)
			memcpy(e->out + (size_t)idx[i] * d, s->e_out + (size_t)i * d, d * sizeof(float));
		if (++e->n_done == e->n_in)
			finish_locked(e);
	}
	pthread_mutex_unlock(&s->lock);
}

/* ---- the request (HTTP side) ---- */

/* Input i of the request, v, into e->tok[i] / e->n_tok[i]: text tokenized,
 * or a list of token ids checked. */
static bool one_input(struct srv *s, const cJSON *v, struct srv_emb *e, int32_t i,
		      struct srv_error *err)
{
	size_t n = 0;
	if (cJSON_IsString(v)) {
		size_t len = strlen(v->valuestring), cap = len + 8;
		if (!len) {
			srv_error_set(err, 400, E_INV, "input", "input %d is an empty string", i);
			return false;
		}
		if (!(e->tok[i] = malloc(cap * sizeof(int32_t)))) {
			srv_error_set(err, 500, "server_error", NULL, "out of memory");
			return false;
		}
		int rc = fx_tokenize(s->model, v->valuestring, len, true, true, e->tok[i], cap, &n);
		if (rc) {
			srv_error_set(err, rc == FX_E_NOMEM ? 500 : 400, rc == FX_E_NOMEM ? "server_error"
				      : E_INV, "input", "input %d could not be tokenized", i);
			return false;
		}
	} else if (cJSON_IsArray(v)) {
		int m = cJSON_GetArraySize(v);
		if (!(e->tok[i] = malloc((size_t)(m ? m : 1) * sizeof(int32_t)))) {
			srv_error_set(err, 500, "server_error", NULL, "out of memory");
			return false;
		}
		const cJSON *t;
		cJSON_ArrayForEach(t, v) {
			if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble >= s->n_vocab ||
			    t->valuedouble != (int32_t)t->valuedouble) {
				srv_error_set(err, 400, E_INV, "input", "input %d: token ids must be integers "
					      "in [0, %d)", i, s->n_vocab);
				return false;
			}
			e->tok[i][n++] = (int32_t)t->valuedouble;
		}
	} else {
		srv_error_set(err, 400, E_INV, "input", "input %d must be a string or a list of "
			      "token ids", i);
		return false;
	}
	if (n == 0) {
		srv_error_set(err, 400, E_INV, "input", "input %d has no tokens", i);
		return false;
	}
	if (n > s->n_ctx_seq) {
		srv_error_set(err, 400, E_INV, "input", "input %d has %zu tokens; this server's "
			      "context is %u tokens per input (--ctx-size)", i, n, s->n_ctx_seq);
		return false;
	}
	e->n_tok[i] = (int32_t)n;
	return true;
}

/* The request's inputs into a new srv_emb (one reference), or NULL with err. */
static struct srv_emb *emb_inputs(struct srv *s, const cJSON *body, struct srv_error *err)
{
	const cJSON *in = cJSON_GetObjectItemCaseSensitive(body, "input");
	if (!in) {
		srv_error_set(err, 400, E_INV, "input", "\"input\" is required");
		return NULL;
	}
	/* one input: a string or a flat list of ids; else a list of inputs */
	bool one = cJSON_IsString(in) || (cJSON_IsArray(in) && cJSON_IsNumber(in->child));
	int n = one ? 1 : cJSON_IsArray(in) ? cJSON_GetArraySize(in) : -1;
	if (n < 0) {
		srv_error_set(err, 400, E_INV, "input", "\"input\" must be a string, a list of "
			      "strings, a list of token ids or a list of such lists");
		return NULL;
	}
	if (n == 0 || n > SRV_EMBED_MAX_INPUTS) {
		srv_error_set(err, 400, E_INV, "input", "\"input\" has %d items: give 1 to %d", n,
			      SRV_EMBED_MAX_INPUTS);
		return NULL;
	}
	struct srv_emb *e = calloc(1, sizeof(*e));
	if (!e || pthread_cond_init(&e->cond, NULL)) {
		free(e);
		srv_error_set(err, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	e->refs = 1;
	e->n_in = n;
	e->tok = calloc((size_t)n, sizeof(*e->tok));
	e->n_tok = calloc((size_t)n, sizeof(*e->n_tok));
	e->out = malloc((size_t)n * (size_t)fx_model_n_embd(s->model) * sizeof(float));
	bool ok = e->tok && e->n_tok && e->out;
	if (!ok)
		srv_error_set(err, 500, "server_error", NULL, "out of memory");
	const cJSON *v = one ? in : in->child;
	for (int32_t i = 0; ok && i < n; i++, v = v->next)
		ok = one_input(s, v, e, i, err);
	if (!ok) {
		pthread_mutex_lock(&s->lock);
		srv_emb_unref_locked(e);
		pthread_mutex_unlock(&s->lock);
		return NULL;
	}
	return e;
}

/* encoding_format and dimensions; false with err. */
static bool emb_options(const struct srv *s, const cJSON *body, bool *b64, int32_t *dims,
			struct srv_error *err)
{
	int32_t d = fx_model_n_embd(s->model);
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, "encoding_format");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(body, "dimensions");
	*b64 = false;
	*dims = d;
	if (f && !cJSON_IsNull(f)) {
		if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") &&
					   strcmp(f->valuestring, "base64"))) {
			srv_error_set(err, 400, E_INV, "encoding_format",
				      "\"encoding_format\" must be \"float\" or \"base64\"");
			return false;
		}
		*b64 = !strcmp(f->valuestring, "base64");
	}
	if (n && !cJSON_IsNull(n)) {
		if (!cJSON_IsNumber(n) || n->valuedouble != (int32_t)n->valuedouble ||
		    n->valuedouble < 1 || n->valuedouble > d) {
			srv_error_set(err, 400, E_INV, "dimensions", "\"dimensions\" must be an integer "
				      "in [1, %d] (this model's embeddings have %d floats)", d, d);
			return false;
		}
		*dims = (int32_t)n->valuedouble;
	}
	return true;
}

/* v[0..n) little-endian float32 bytes in base64 (RFC 4648, padded). */
static cJSON *base64_floats(const float *v, int32_t n)
{
	static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t nb = (size_t)n * 4, k = 0;
	unsigned char *b = malloc(nb ? nb : 1);
	char *out = malloc((nb + 2) / 3 * 4 + 1);
	cJSON *o = NULL;
	if (b && out) {
		for (int32_t i = 0; i < n; i++) {
			uint32_t u;
			memcpy(&u, &v[i], 4);
			for (int j = 0; j < 4; j++)
				b[4 * (size_t)i + (size_t)j] = (unsigned char)(u >> (8 * j));
		}
		for (size_t i = 0; i < nb; i += 3) {
			uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < nb ? (uint32_t)b[i + 1] << 8 : 0) |
				     (i + 2 < nb ? b[i + 2] : 0);
			out[k++] = A[x >> 18 & 63];
			out[k++] = A[x >> 12 & 63];
			out[k++] = i + 1 < nb ? A[x >> 6 & 63] : '=';
			out[k++] = i + 2 < nb ? A[x & 63] : '=';
		}
		out[k] = 0;
		o = cJSON_CreateString(out);
	}
	free(b);
	free(out);
	return o;
}

/* The response body: each vector (its first dims floats, normalized again
 * when shortened) as floats or base64, usage. NULL: out of memory. */
static char *emb_json(const struct srv *s, const struct srv_emb *e, bool b64, int32_t dims)
{
	int32_t d = fx_model_n_embd(s->model);
	int64_t n_tok = 0;
	cJSON *o = cJSON_CreateObject();
	cJSON *data = o && cJSON_AddStringToObject(o, "object", "list") ? cJSON_AddArrayToObject(o, "data")
									 : NULL;
	bool ok = data != NULL;
	for (int32_t i = 0; ok && i < e->n_in; i++) {
		float *v = e->out + (size_t)i * (size_t)d;
		if (dims < d) { /* shortened: a unit vector again */
			double ss = 0;
			for (int32_t j = 0; j < dims; j++)
				ss += (double)v[j] * v[j];
			const float scale = ss > 0 ? (float)(1.0 / sqrt(ss)) : 0.0f;
			for (int32_t j = 0; j < dims; j++)
				v[j] *= scale;
		}
		cJSON *it = cJSON_CreateObject();
		if (!it || !cJSON_AddItemToArray(data, it)) {
			cJSON_Delete(it);
			ok = false;
			break;
		}
		ok = cJSON_AddStringToObject(it, "object", "embedding") &&
		     cJSON_AddNumberToObject(it, "index", i);
		cJSON *val = ok ? (b64 ? base64_floats(v, dims) : cJSON_CreateFloatArray(v, dims)) : NULL;
		if (!val || !cJSON_AddItemToObject(it, "embedding", val)) {
			cJSON_Delete(val);
			ok = false;
		}
		n_tok += e->n_tok[i];
	}
	cJSON *u = ok ? cJSON_AddObjectToObject(o, "usage") : NULL;
	ok = ok && cJSON_AddStringToObject(o, "model", s->model_name) && u &&
	     cJSON_AddNumberToObject(u, "prompt_tokens", (double)n_tok) &&
	     cJSON_AddNumberToObject(u, "total_tokens", (double)n_tok);
	char *js = ok ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return js;
}

enum MHD_Result srv_embeddings(struct srv *s, struct MHD_Connection *mc, const char *text, size_t n)
{
	if (!s->p.embeddings)
		return srv_http_fail(mc, 501, "not_supported_error", NULL, "This server does not "
				     "support embeddings. Start it with `--embeddings`");
	size_t at = 0;
	bool oom = false;
	cJSON *body = srv_json_parse(text ? text : "", n, &at, &oom);
	if (!body || !cJSON_IsObject(body)) {
		cJSON_Delete(body);
		return oom ? srv_http_fail(mc, 500, "server_error", NULL, "out of memory")
			   : srv_http_fail(mc, 400, E_INV, NULL, "the request body must be a JSON object");
	}
	struct srv_error err = { 0 };
	bool b64;
	int32_t dims;
	struct srv_emb *e = emb_options(s, body, &b64, &dims, &err) ? emb_inputs(s, body, &err) : NULL;
	cJSON_Delete(body);
	if (!e)
		return srv_http_fail(mc, err.status, err.type, err.param, "%s", err.msg);
	int busy = srv_emb_submit(s, e);
	if (busy) {
		pthread_mutex_lock(&s->lock);
		srv_emb_unref_locked(e);
		pthread_mutex_unlock(&s->lock);
		return srv_http_fail(mc, 503, "server_busy_error", NULL, busy == 503
				     ? "the server is not ready or is shutting down"
				     : "too many requests are waiting: retry shortly");
	}
	int fd = srv_http_conn_fd(mc);
	pthread_mutex_lock(&s->lock);
	while (!e->done) {
		srv_http_wait_100ms(&e->cond, &s->lock);
		if (!e->done && srv_http_client_gone(fd)) {
			e->cancelled = true; /* inputs not yet started are skipped */
			srv_emb_unref_locked(e);
			pthread_mutex_unlock(&s->lock);
			return MHD_NO;
		}
	}
	pthread_mutex_unlock(&s->lock);
	char *js = e->rc ? NULL : emb_json(s, e, b64, dims);
	int rc = e->rc;
	pthread_mutex_lock(&s->lock);
	srv_emb_unref_locked(e);
	pthread_mutex_unlock(&s->lock);
	if (rc)
		return srv_http_fail(mc, 500, "server_error", NULL, "the engine could not embed this "
				     "request (see the server log)");
	if (!js)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return srv_http_body(mc, 200, js, "application/json", false);
}
