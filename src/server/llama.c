/* llama-server's own endpoints, which its users script against (shapes
 * from llama.cpp's tools/server: server-context.cpp's get_res_props and
 * slot handlers, server-task.cpp's to_json_non_oaicompat and
 * task_params::to_json, server-common.cpp's server_slot_stats::to_json):
 *   POST /completion (also /completions): its options and prompt forms,
 *     answered by the same request path and engine as /v1/completions;
 *   GET /props (POST: 501, as llama-server without --props);
 *   GET /slots, POST /slots/{id}?action=save|restore|erase.
 *
 * Slots here. A choice runs in one of n_parallel slots on a sequence of
 * the paged context that is freed when it ends; its full blocks stay in
 * the prefix cache, which serves the slot's (or any slot's) next prompt
 * that starts the same way. A slot's record is the tokens its sequence
 * held. save: those tokens' K/V, rebuilt on a free sequence from the
 * prefix cache (what was evicted, and the last partial block, is
 * recomputed: bit-identical), to a state file (fx_seq_state_save).
 * restore: the file's K/V loaded into a free sequence, which keys its full
 * blocks in the prefix cache, then freed: the next prompt starting with
 * those tokens reuses them (timings.cache_n), whichever slot it lands in;
 * the partial last block is recomputed. erase: the record is forgotten;
 * cached blocks stay until evicted (other slots may share them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/compat.h"
#include "server/server.h"

static const char E_INV[] = "invalid_request_error";

/* Add v to `to` (object with key, else array); a failure frees v and
 * clears *ok, so a body is whole or refused. */
static cJSON *add(bool *ok, cJSON *to, const char *key, cJSON *v)
{
	bool added = to && v && (key ? cJSON_AddItemToObject(to, key, v) : cJSON_AddItemToArray(to, v));
	if (!added) {
		cJSON_Delete(v);
		*ok = false;
		return NULL;
	}
	return v;
}

/* ---- sampling settings ---- */

void srv_params_of(const struct srv_gen *g, struct srv_params_view *v)
{
	*v = (struct srv_params_view){ .n_predict = g->max_tokens, .top_k = g->top_k,
				       .repeat_last_n = g->repeat_last_n,
				       .temperature = g->temperature, .top_p = g->top_p,
				       .min_p = g->min_p, .repeat_penalty = g->repeat_penalty,
				       .presence = g->presence, .frequency = g->frequency,
				       .seed = g->seed, .has_seed = g->has_seed,
				       .stream = g->stream, .ignore_eos = g->ignore_eos };
}

/* task_params::to_json's fields that apply; stop strings when g is given.
 * A request without a seed shows llama.cpp's LLAMA_DEFAULT_SEED. */
static cJSON *params_json(const struct srv_params_view *v, const struct srv_gen *g, bool *ok)
{
	cJSON *o = cJSON_CreateObject();
	add(ok, o, "n_predict", cJSON_CreateNumber(v->n_predict));
	add(ok, o, "max_tokens", cJSON_CreateNumber(v->n_predict));
	add(ok, o, "seed", cJSON_CreateNumber(v->has_seed ? (double)v->seed : 4294967295.0));
	add(ok, o, "temperature", cJSON_CreateNumber(v->temperature));
	add(ok, o, "top_k", cJSON_CreateNumber(v->top_k));
	add(ok, o, "top_p", cJSON_CreateNumber(v->top_p));
	add(ok, o, "min_p", cJSON_CreateNumber(v->min_p));
	add(ok, o, "repeat_last_n", cJSON_CreateNumber(v->repeat_last_n));
	add(ok, o, "repeat_penalty", cJSON_CreateNumber(v->repeat_penalty));
	add(ok, o, "presence_penalty", cJSON_CreateNumber(v->presence));
	add(ok, o, "frequency_penalty", cJSON_CreateNumber(v->frequency));
	add(ok, o, "ignore_eos", cJSON_CreateBool(v->ignore_eos));
	add(ok, o, "stream", cJSON_CreateBool(v->stream));
	add(ok, o, "n_probs", cJSON_CreateNumber(0));
	if (g) {
		cJSON *st = add(ok, o, "stop", cJSON_CreateArray());
		for (int i = 0; st && i < g->n_stop; i++)
			add(ok, st, NULL, cJSON_CreateString(g->stop[i]));
	}
	return o;
}

/* ---- POST /completion: options and prompt ---- */

bool srv_native_opts(const struct srv *s, const cJSON *body, struct srv_req *r,
		     struct srv_error *e)
{
	const cJSON *np = cJSON_GetObjectItemCaseSensitive(body, "n_predict");
	bool cache = true;
	if (np && !cJSON_IsNull(np)) {
		if (!cJSON_IsNumber(np) || np->valuedouble != floor(np->valuedouble) ||
		    np->valuedouble < -2 || np->valuedouble > 1e9) {
			srv_error_set(e, 400, E_INV, "n_predict", "'n_predict' must be an integer: -1 "
				      "(until the context is full) or a token count");
			return false;
		}
		r->g.max_tokens = np->valuedouble < 0 ? -1 : (int32_t)np->valuedouble;
	} else if (!cJSON_GetObjectItemCaseSensitive(body, "max_tokens")) {
		r->g.max_tokens = -1; /* llama-server's default n_predict */
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(body, "id_slot");
	if (id && !cJSON_IsNull(id) &&
	    (!cJSON_IsNumber(id) || id->valuedouble != floor(id->valuedouble) ||
	     id->valuedouble < -1 || id->valuedouble >= s->n_parallel)) {
		srv_error_set(e, 400, E_INV, "id_slot", "'id_slot' must be -1 or a slot id below %d",
			      s->n_parallel);
		return false;
	}
	if (id && cJSON_IsNumber(id))
		r->want_slot = (int)id->valuedouble;
	if (!srv_json_bool(body, "return_tokens", &r->return_tokens, e) ||
	    !srv_json_bool(body, "cache_prompt", &cache, e))
		return false;
	if (r->g.n > 1) {
		srv_error_set(e, 400, E_INV, "n", "/completion answers one completion; ask "
			      "/v1/completions for n > 1");
		return false;
	}
	r->g.echo = false;
	r->g.logprobs = false; /* llama-server's n_probs is not served: /v1/completions' logprobs is */
	return true;
}

/* Append text's tokens to r->prompt (room for *cap, grown). */
static bool push_text(struct srv *s, struct srv_req *r, int32_t *cap, const char *text, bool bos,
		      struct srv_error *e)
{
	size_t len = strlen(text), n = 0;
	if ((size_t)(*cap - r->n_prompt) < len + 8) {
		size_t want = (size_t)r->n_prompt + len + 8;
		fx_token *p = want < INT32_MAX ? realloc(r->prompt, want * sizeof(*p)) : NULL;
		if (!p) {
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			return false;
		}
		r->prompt = p;
		*cap = (int32_t)want;
	}
	int rc = fx_tokenize(s->model, text, len, bos, true, r->prompt + r->n_prompt,
			     (size_t)(*cap - r->n_prompt), &n);
	if (rc) {
		srv_error_set(e, rc == FX_E_NOMEM ? 500 : 400, rc == FX_E_NOMEM ? "server_error" : E_INV,
			      "prompt", "the prompt could not be tokenized");
		return false;
	}
	r->n_prompt += (int32_t)n;
	return true;
}

/* One prompt mixing token ids and strings (llama.cpp's tokenize_mixed: the
 * first element, when a string, gets BOS as the model asks). */
static bool mixed_prompt(struct srv *s, const cJSON *p, struct srv_req *r, struct srv_error *e)
{
	int32_t cap = 0;
	bool first = true;
	const cJSON *it;
	cJSON_ArrayForEach(it, p)
	{
		if (cJSON_IsString(it)) {
			if (!push_text(s, r, &cap, it->valuestring, first, e))
				return false;
		} else if (cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < s->n_vocab &&
			   it->valuedouble == (int32_t)it->valuedouble) {
			if (r->n_prompt == cap) {
				int32_t nc = cap ? 2 * cap : 64;
				fx_token *q = realloc(r->prompt, (size_t)nc * sizeof(*q));
				if (!q) {
					srv_error_set(e, 500, "server_error", NULL, "out of memory");
					return false;
				}
				r->prompt = q;
				cap = nc;
			}
			r->prompt[r->n_prompt++] = (fx_token)it->valuedouble;
		} else {
			srv_error_set(e, 400, E_INV, "prompt", "a mixed prompt holds strings and token "
				      "ids in [0, %d)", s->n_vocab);
			return false;
		}
		first = false;
	}
	return true;
}

/* t[0..n) as text, control tokens shown (llama-server's "prompt"). */
static char *detok_all(const struct srv *s, const fx_token *t, int32_t n)
{
	struct srv_buf b = { 0 };
	struct fx_detok dt = { 0 };
	char buf[512];
	size_t k;
	bool ok = true;
	for (int32_t i = 0; ok && i < n; i++)
		if (fx_detok_push(s->model, &dt, t[i], true, buf, sizeof(buf), &k) == FX_OK)
			ok = srv_buf_add(&b, buf, k);
	if (ok && fx_detok_flush(&dt, buf, sizeof(buf), &k) == FX_OK)
		ok = srv_buf_add(&b, buf, k);
	if (!ok) {
		srv_buf_free(&b);
		return NULL;
	}
	return b.p ? b.p : strdup("");
}

bool srv_native_prompt(struct srv *s, const cJSON *body, struct srv_req *r, struct srv_error *e)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
	bool mixed = false, strings = cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1;
	const cJSON *it, *arr = cJSON_IsArray(p) ? p : NULL;
	cJSON_ArrayForEach(it, arr)
	{
		mixed |= cJSON_IsString(it);
		strings &= cJSON_IsString(it);
	}
	if (strings) {
		srv_error_set(e, 400, E_INV, "prompt", "one prompt per request is supported");
		return false;
	}
	mixed = mixed && cJSON_GetArraySize(p) > 1;
	if (!(mixed ? mixed_prompt(s, p, r, e) : srv_completion_prompt(s, body, r, e)))
		return false;
	free(r->prompt_text);
	if (!(r->prompt_text = detok_all(s, r->prompt, r->n_prompt))) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return false;
	}
	return true;
}

/* ---- responses ---- */

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0;
}

/* server_slot_stats::to_json: prompt (computed, not cached) and
 * generation counts and times. */
static cJSON *timings_json(const struct srv_req *r, const struct srv_choice *c, bool *ok)
{
	double prompt_ms = c->n_gen ? (c->t_first - c->t_admit) * 1e3 : 0;
	double gen_ms = c->n_gen ? (c->t_last - c->t_first) * 1e3 : 0;
	int32_t prompt_n = r->n_prompt - c->n_cached;
	cJSON *t = cJSON_CreateObject();
	add(ok, t, "cache_n", cJSON_CreateNumber(c->n_cached));
	add(ok, t, "prompt_n", cJSON_CreateNumber(prompt_n));
	add(ok, t, "prompt_ms", cJSON_CreateNumber(prompt_ms));
	add(ok, t, "prompt_per_token_ms", cJSON_CreateNumber(ratio(prompt_ms, prompt_n)));
	add(ok, t, "prompt_per_second", cJSON_CreateNumber(ratio(1e3 * prompt_n, prompt_ms)));
	add(ok, t, "predicted_n", cJSON_CreateNumber(c->n_gen));
	add(ok, t, "predicted_ms", cJSON_CreateNumber(gen_ms));
	add(ok, t, "predicted_per_token_ms", cJSON_CreateNumber(ratio(gen_ms, c->n_gen)));
	add(ok, t, "predicted_per_second", cJSON_CreateNumber(ratio(1e3 * c->n_gen, gen_ms)));
	if (c->draft_n) {
		add(ok, t, "draft_n", cJSON_CreateNumber((double)c->draft_n));
		add(ok, t, "draft_n_accepted", cJSON_CreateNumber((double)c->draft_n_accepted));
	}
	return t;
}

static const char *stop_type(const struct srv_choice *c)
{
	if (!c->finish || !strcmp(c->finish, "error") || !strcmp(c->finish, "cancelled"))
		return "none";
	if (!strcmp(c->finish, "length"))
		return "limit";
	return c->hit_stop ? "word" : "eos";
}

static cJSON *tokens_json(const struct srv_req *r, const struct srv_choice *c, int32_t from,
			  bool *ok)
{
	cJSON *a = cJSON_CreateArray();
	for (int32_t i = from; r->return_tokens && a && i < c->n_toks; i++)
		add(ok, a, NULL, cJSON_CreateNumber(c->toks[i]));
	return a;
}

/* to_json_non_oaicompat of the final result; streamed: content and tokens
 * empty (they went out in the chunks). */
static cJSON *final_obj(const struct srv_req *r, const struct srv_choice *c, bool *ok)
{
	const char *text = c->text.p ? c->text.p : "";
	bool full = !r->g.stream;
	struct srv_params_view v;
	srv_params_of(&r->g, &v);
	cJSON *o = cJSON_CreateObject();
	add(ok, o, "index", cJSON_CreateNumber(0));
	add(ok, o, "content", srv_json_text(text, full ? c->text.n : 0));
	add(ok, o, "tokens", full ? tokens_json(r, c, 0, ok) : cJSON_CreateArray());
	add(ok, o, "id_slot", cJSON_CreateNumber(c->id_slot));
	add(ok, o, "stop", cJSON_CreateTrue());
	add(ok, o, "model", cJSON_CreateString(r->model_name));
	add(ok, o, "tokens_predicted", cJSON_CreateNumber(c->n_gen));
	add(ok, o, "tokens_evaluated", cJSON_CreateNumber(r->n_prompt));
	add(ok, o, "generation_settings", params_json(&v, &r->g, ok));
	add(ok, o, "prompt", cJSON_CreateString(r->prompt_text ? r->prompt_text : ""));
	add(ok, o, "has_new_line", cJSON_CreateBool(memchr(text, '\n', c->text.n) != NULL));
	add(ok, o, "truncated", cJSON_CreateFalse());
	add(ok, o, "stop_type", cJSON_CreateString(stop_type(c)));
	add(ok, o, "stopping_word",
	    cJSON_CreateString(c->hit_stop && c->stop_idx < r->g.n_stop ? r->g.stop[c->stop_idx] : ""));
	add(ok, o, "tokens_cached", cJSON_CreateNumber(r->n_prompt + (c->n_gen ? c->n_gen - 1 : 0)));
	add(ok, o, "timings", timings_json(r, c, ok));
	return o;
}

char *srv_native_final_json(const struct srv *s, const struct srv_req *r)
{
	(void)s;
	bool ok = true;
	cJSON *o = final_obj(r, &r->ch[0], &ok);
	return srv_json_take(o, ok);
}

bool srv_native_sse(const struct srv_req *r, const struct srv_choice *c, const char *text,
		    size_t n, struct srv_buf *out)
{
	bool ok = true;
	if (n) {
		cJSON *o = cJSON_CreateObject();
		add(&ok, o, "index", cJSON_CreateNumber(0));
		add(&ok, o, "content", srv_json_text(text, n));
		add(&ok, o, "tokens", tokens_json(r, c, c->n_toks_sent, &ok));
		add(&ok, o, "stop", cJSON_CreateFalse());
		add(&ok, o, "id_slot", cJSON_CreateNumber(c->id_slot));
		add(&ok, o, "tokens_predicted", cJSON_CreateNumber(c->n_gen));
		add(&ok, o, "tokens_evaluated", cJSON_CreateNumber(r->n_prompt));
		if (!srv_sse_event(out, o, ok))
			return false;
	}
	if (!c->finish)
		return true;
	ok = true;
	cJSON *f = final_obj(r, c, &ok);
	return srv_sse_event(out, f, ok);
}

/* ---- GET /props, GET /slots ---- */

static cJSON *piece_json(const struct srv *s, fx_token t)
{
	char buf[256];
	size_t n = 0;
	if (t < 0 || fx_token_to_piece(s->model, t, true, buf, sizeof(buf), &n))
		n = 0;
	return srv_json_text(buf, n);
}

char *srv_props_json(const struct srv *s)
{
	bool ok = true;
	const struct fx_sampler_params *d = &s->gen_defaults;
	struct srv_params_view v = { .n_predict = -1, .top_k = d->top_k,
				     .repeat_last_n = d->repeat_last_n, .temperature = d->temp,
				     .top_p = d->top_p, .min_p = d->min_p,
				     .repeat_penalty = d->repeat_penalty };
	const char *tmpl = s->p.chat_template ? s->p.chat_template : fx_model_chat_template(s->model);
	cJSON *o = cJSON_CreateObject();
	cJSON *dg = add(&ok, o, "default_generation_settings", cJSON_CreateObject());
	add(&ok, dg, "params", params_json(&v, NULL, &ok));
	add(&ok, dg, "n_ctx", cJSON_CreateNumber(s->n_ctx_seq));
	add(&ok, o, "total_slots", cJSON_CreateNumber(s->n_parallel));
	add(&ok, o, "model_alias", cJSON_CreateString(s->model_name));
	add(&ok, o, "model_path", cJSON_CreateString(s->p.model_path));
	cJSON *mod = add(&ok, o, "modalities", cJSON_CreateObject());
	add(&ok, mod, "vision", cJSON_CreateFalse());
	add(&ok, mod, "video", cJSON_CreateFalse());
	add(&ok, mod, "audio", cJSON_CreateFalse());
	add(&ok, o, "endpoint_slots", cJSON_CreateTrue());
	add(&ok, o, "endpoint_props", cJSON_CreateFalse());
	add(&ok, o, "endpoint_metrics", cJSON_CreateTrue());
	add(&ok, o, "chat_template", cJSON_CreateString(tmpl ? tmpl : ""));
	add(&ok, o, "bos_token", piece_json(s, fx_token_bos(s->model)));
	add(&ok, o, "eos_token", piece_json(s, fx_token_eos(s->model)));
	add(&ok, o, "build_info", cJSON_CreateString("ferrox"));
	add(&ok, o, "is_sleeping", cJSON_CreateFalse());
	return srv_json_take(o, ok);
}

char *srv_slots_json(struct srv *s)
{
	bool ok = true;
	cJSON *a = cJSON_CreateArray();
	pthread_mutex_lock(&s->lock);
	for (int i = 0; ok && s->slots && i < s->n_parallel; i++) {
		const struct srv_slot *sl = &s->slots[i];
		cJSON *o = add(&ok, a, NULL, cJSON_CreateObject());
		add(&ok, o, "id", cJSON_CreateNumber(i));
		add(&ok, o, "n_ctx", cJSON_CreateNumber(s->n_ctx_seq));
		add(&ok, o, "speculative", cJSON_CreateBool(s->can_spec && s->p.spec.types));
		add(&ok, o, "is_processing", cJSON_CreateBool(sl->busy));
		add(&ok, o, "n_tokens", cJSON_CreateNumber(sl->n_tok)); /* the record: save's n_saved */
		if (!sl->has_task)
			continue;
		add(&ok, o, "id_task", cJSON_CreateNumber((double)sl->id_task));
		add(&ok, o, "n_prompt_tokens", cJSON_CreateNumber(sl->n_prompt));
		add(&ok, o, "n_prompt_tokens_processed", cJSON_CreateNumber(sl->n_prompt - sl->n_cached));
		add(&ok, o, "n_prompt_tokens_cache", cJSON_CreateNumber(sl->n_cached));
		add(&ok, o, "params", params_json(&sl->params, NULL, &ok));
		cJSON *nt = add(&ok, o, "next_token", cJSON_CreateArray());
		cJSON *n0 = add(&ok, nt, NULL, cJSON_CreateObject());
		int32_t left = sl->params.n_predict < 0 ? -1 : sl->params.n_predict - sl->n_decoded;
		add(&ok, n0, "has_next_token", cJSON_CreateBool(sl->busy));
		add(&ok, n0, "has_new_line", cJSON_CreateFalse());
		add(&ok, n0, "n_remain", cJSON_CreateNumber(left));
		add(&ok, n0, "n_decoded", cJSON_CreateNumber(sl->n_decoded));
	}
	pthread_mutex_unlock(&s->lock);
	return srv_json_take(a, ok);
}

/* ---- slot records (engine thread, lock held) ---- */

void srv_slot_begin_locked(struct srv *s, int i, const struct srv_choice *c)
{
	struct srv_slot *sl = &s->slots[i];
	sl->busy = true;
	sl->has_task = true;
	sl->id_task = c->req->n_id;
	sl->n_prompt = c->req->n_prompt;
	sl->n_cached = c->n_cached;
	sl->n_decoded = 0;
	srv_params_of(&c->req->g, &sl->params);
}

void srv_slot_end_locked(struct srv *s, int i, const struct srv_choice *c)
{
	struct srv_slot *sl = &s->slots[i];
	const struct srv_req *r = c->req;
	/* the last sampled token was never fed back */
	int32_t fed = c->n_toks > 0 ? c->n_toks - 1 : 0, need = r->n_prompt + fed;
	sl->busy = false;
	sl->n_decoded = c->n_gen;
	sl->n_tok = 0;
	if (need > sl->cap) {
		fx_token *p = realloc(sl->tok, (size_t)need * sizeof(*p));
		if (!p)
			return; /* no record: a save says the slot holds nothing */
		sl->tok = p;
		sl->cap = need;
	}
	memcpy(sl->tok, r->prompt, (size_t)r->n_prompt * sizeof(*sl->tok));
	if (fed)
		memcpy(sl->tok + r->n_prompt, c->toks, (size_t)fed * sizeof(*sl->tok));
	sl->n_tok = need;
}

/* ---- slot actions (engine thread) ---- */

/* sl's tokens into seq (empty): the prefix cache's blocks, the rest
 * decoded. Returns FX_OK or the failing code. */
static int rebuild(struct srv *s, const struct srv_slot *sl, fx_seq seq)
{
	uint32_t got = 0;
	int rc = fx_seq_reuse_prefix(s->ctx, seq, sl->tok, (uint32_t)sl->n_tok, &got);
	int32_t n = sl->n_tok, chunk = 512;
	fx_seq *seqs = malloc((size_t)chunk * sizeof(*seqs));
	int *st = calloc((size_t)s->n_parallel, sizeof(*st));
	if (!seqs || !st)
		rc = FX_E_NOMEM;
	for (int32_t i = 0; seqs && i < chunk; i++)
		seqs[i] = seq;
	for (int32_t p = (int32_t)got; !rc && p < n; p += chunk) {
		int32_t k = n - p < chunk ? n - p : chunk;
		rc = fx_batch_decode(s->ctx, &(struct fx_batch){ .n = k, .seq = seqs,
								 .token = sl->tok + p }, st);
		if (!rc)
			rc = st[seq];
	}
	free(seqs);
	free(st);
	return rc;
}

static int status_of(int rc)
{
	return rc == FX_E_KV_FULL ? 503 : rc == FX_E_NOMEM ? 500 : 400;
}

void srv_slot_run(struct srv *s, struct srv_slot_task *t, fx_seq seq)
{
	struct srv_slot *sl = &s->slots[t->id_slot];
	double t0 = srv_now();
	int rc;
	t->status = 200;
	if (t->act == SRV_SLOT_ERASE) {
		pthread_mutex_lock(&s->lock);
		t->n_tokens = sl->n_tok;
		sl->n_tok = 0;
		pthread_mutex_unlock(&s->lock);
	} else if (t->act == SRV_SLOT_SAVE) {
		if (!sl->n_tok) {
			t->status = 400;
			snprintf(t->msg, sizeof(t->msg), "slot %d holds no tokens: nothing to save",
				 t->id_slot);
			return;
		}
		uint64_t bytes = 0;
		if ((rc = rebuild(s, sl, seq)) ||
		    (rc = fx_seq_state_save(s->ctx, seq, t->path, sl->tok, (uint32_t)sl->n_tok, &bytes))) {
			t->status = rc == FX_E_KV_FULL ? 503 : rc == FX_E_UNSUPPORTED ? 501 : 500;
			snprintf(t->msg, sizeof(t->msg), "Unable to save slot %d: %s", t->id_slot,
				 fx_context_errmsg(s->ctx));
			return;
		}
		t->n_tokens = sl->n_tok;
		t->n_bytes = bytes;
	} else {
		uint32_t n = 0;
		uint64_t bytes = 0;
		fx_token *buf = malloc((size_t)s->n_ctx_seq * sizeof(*buf));
		rc = buf ? fx_seq_state_load(s->ctx, seq, t->path, buf, s->n_ctx_seq, &n, &bytes)
			 : FX_E_NOMEM;
		if (rc) {
			free(buf);
			t->status = status_of(rc);
			snprintf(t->msg, sizeof(t->msg), "Unable to restore slot %d: %s", t->id_slot,
				 rc == FX_E_NOMEM && !buf ? "out of memory" : fx_context_errmsg(s->ctx));
			return;
		}
		pthread_mutex_lock(&s->lock);
		free(sl->tok);
		sl->tok = buf;
		sl->cap = (int32_t)s->n_ctx_seq;
		sl->n_tok = (int32_t)n;
		pthread_mutex_unlock(&s->lock);
		t->n_tokens = n;
		t->n_bytes = bytes;
	}
	t->ms = (srv_now() - t0) * 1e3;
}

/* ---- HTTP ---- */

/* A plain file name inside --slot-save-path: no separators, no "." or
 * ".." (nor any leading dot), no control bytes, valid UTF-8. */
static bool filename_ok(const char *f)
{
	size_t n = strlen(f);
	if (!n || n > 255 || f[0] == '.' || !srv_utf8_valid(f, n))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)f[i] < 0x20 || f[i] == '/' || f[i] == '\\' || f[i] == 0x7f)
			return false;
	return true;
}

/* Queue t for the engine and wait for its answer (lock not held). false:
 * the engine is gone (draining), t not queued. */
static bool slot_task_wait(struct srv *s, struct srv_slot_task *t)
{
	pthread_mutex_lock(&s->lock);
	if (s->stop_engine || !s->slots) { /* no engine left to run it */
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	struct srv_slot_task **pp = &s->sl_head;
	while (*pp)
		pp = &(*pp)->next;
	*pp = t;
	pthread_cond_signal(&s->wake);
	while (!t->done)
		srv_http_wait_100ms(&t->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return true;
}

/* The answer to a finished action: llama-server's shapes, or its error. */
static enum MHD_Result slot_task_answer(struct MHD_Connection *mc, const struct srv_slot_task *t)
{
	if (t->status != 200)
		return srv_http_fail(mc, t->status, t->status == 400 ? E_INV
					: t->status == 501 ? "not_supported_error" : "server_error",
				     NULL, "%s", t->msg);
	bool ok = true;
	cJSON *o = cJSON_CreateObject();
	add(&ok, o, "id_slot", cJSON_CreateNumber(t->id_slot));
	if (t->act == SRV_SLOT_ERASE) {
		add(&ok, o, "n_erased", cJSON_CreateNumber((double)t->n_tokens));
	} else {
		bool save = t->act == SRV_SLOT_SAVE;
		add(&ok, o, "filename", cJSON_CreateString(t->filename));
		add(&ok, o, save ? "n_saved" : "n_restored", cJSON_CreateNumber((double)t->n_tokens));
		add(&ok, o, save ? "n_written" : "n_read", cJSON_CreateNumber((double)t->n_bytes));
		cJSON *tm = add(&ok, o, "timings", cJSON_CreateObject());
		add(&ok, tm, save ? "save_ms" : "restore_ms", cJSON_CreateNumber(t->ms));
	}
	char *js = srv_json_take(o, ok);
	return js ? srv_http_body(mc, 200, js, "application/json", false)
		  : srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
}

/* POST /slots/{id}?action=...: the slot and action from the URL, for save
 * and restore the file from the body ({"filename": NAME}, a plain name
 * inside --slot-save-path). */
static enum MHD_Result slot_action(struct srv *s, struct MHD_Connection *mc, const char *url,
				   const struct srv_compat_in *in)
{
	char *end;
	long id = strtol(url + 7, &end, 10);
	if (!url[7] || *end || id < 0 || id >= s->n_parallel)
		return srv_http_fail(mc, 400, E_INV, "id_slot", "Invalid slot ID: slots are 0..%d",
				     s->n_parallel - 1);
	const char *a = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "action");
	struct srv_slot_task t = { .id_slot = (int)id };
	if (a && !strcmp(a, "save"))
		t.act = SRV_SLOT_SAVE;
	else if (a && !strcmp(a, "restore"))
		t.act = SRV_SLOT_RESTORE;
	else if (a && !strcmp(a, "erase"))
		t.act = SRV_SLOT_ERASE;
	else
		return srv_http_fail(mc, 400, E_INV, "action", "Invalid action: use ?action=save, "
				     "restore or erase");
	cJSON *body = NULL;
	if (t.act != SRV_SLOT_ERASE) {
		const char *dir = s->p.slot_save_path;
		if (!dir || !*dir)
			return srv_http_fail(mc, 501, "not_supported_error", NULL, "This server does not "
					     "support slot save and restore. Start it with --slot-save-path DIR");
		if (in->too_big)
			return srv_http_fail(mc, 413, E_INV, NULL, "the request body is too large");
		bool oom = false;
		size_t at = 0;
		body = in->n ? srv_json_parse(in->body, in->n, &at, &oom) : NULL;
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(body, "filename");
		if (!cJSON_IsString(f) || !filename_ok(f->valuestring)) {
			cJSON_Delete(body);
			return srv_http_fail(mc, oom ? 500 : 400, oom ? "server_error" : E_INV, "filename",
					     "Invalid filename: the body must be {\"filename\": NAME}, a "
					     "plain file name (no path separators, no leading dot)");
		}
		t.filename = f->valuestring;
		size_t len = strlen(dir) + strlen(t.filename) + 2;
		if (!(t.path = malloc(len))) {
			cJSON_Delete(body);
			return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
		}
		snprintf(t.path, len, "%s/%s", dir, t.filename);
	}
	pthread_cond_init(&t.cond, NULL);
	enum MHD_Result res = slot_task_wait(s, &t)
		? slot_task_answer(mc, &t)
		: srv_http_fail(mc, 503, "unavailable_error", NULL, "shutting down");
	pthread_cond_destroy(&t.cond);
	free(t.path);
	cJSON_Delete(body); /* t.filename pointed into it */
	return res;
}

bool srv_llama_route(struct srv *s, struct MHD_Connection *mc, const char *url,
		     const char *method, const struct srv_compat_in *in, enum MHD_Result *res)
{
	bool props = !strcmp(url, "/props"), slots = !strcmp(url, "/slots");
	bool slot_n = !strncmp(url, "/slots/", 7);
	if (!props && !slots && !slot_n)
		return false;
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	if (srv_http_refused(s, mc, in->authorized, slot_n, res))
		return true;
	char *js = NULL;
	if (props && post) {
		*res = srv_http_fail(mc, 501, "not_supported_error", NULL, "This server does not "
				     "support changing global properties (llama-server's --props)");
		return true;
	}
	if (slot_n && post) {
		*res = slot_action(s, mc, url, in);
		return true;
	}
	if (!get || slot_n) {
		*res = srv_http_fail(mc, 405, E_INV, NULL, "%s wants %s", url, slot_n ? "POST" : "GET");
		return true;
	}
	js = props ? srv_props_json(s) : srv_slots_json(s);
	*res = js ? srv_http_body(mc, 200, js, "application/json", false)
		  : srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return true;
}
