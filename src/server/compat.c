/* Endpoints that routers call on their workers, beyond the OpenAI API.
 * Which ones, and the JSON they read, were found by running the routers in
 * front of ferrox (tests/test_routers.py; notes in /work/research/routers.md
 * at the time of writing):
 *
 * - GET /get_model_info (and /model_info, the name sglang-router 0.3.2 asks
 *   first): SGLang's shape {"model_path", "tokenizer_path", "is_generation",
 *   "model_type", ...}; sglang-router reads model_type and architectures as
 *   worker labels, vllm-router forwards a client's GET to one worker.
 * - GET /health_generate: SGLang's deep health check: 200 once a one-token
 *   generation went through the engine, 503 while loading, draining or when
 *   it did not finish within 20 s (SGLang's timeout).
 * - GET /get_load: SGLang's [{"dp_rank", "num_reqs", "num_waiting_reqs",
 *   "num_tokens"}]; sglang-router's load monitor sums num_tokens (KV tokens
 *   in use). vllm-router 0.1.17 reads {"load": N} from the same path, but
 *   vLLM itself has no /get_load either, so it sees -1 there as with vLLM.
 * - POST /generate: SGLang's native request, non-streaming and one prompt:
 *   {"text" | "input_ids", "sampling_params": {max_new_tokens (128),
 *   temperature, top_p, top_k (-1: off), min_p, stop, ignore_eos,
 *   repetition/frequency/presence_penalty, sampling_seed}} -> {"text",
 *   "meta_info": {"id", "finish_reason": {"type": "stop"|"length"},
 *   "prompt_tokens", "completion_tokens", "e2e_latency"}}. A streaming or
 *   batched one is refused (400) naming what to use instead.
 * - POST /v1/completions/render and /v1/chat/completions/render: vLLM's
 *   render endpoints, which vllm-router 0.1.17's kv_aware policy calls to
 *   turn a request into token ids before it looks up prefix blocks (it does
 *   not tokenize text itself for HTTP workers). The request is parsed and
 *   tokenized exactly as the completion would be (chat template, BOS), not
 *   run: chat -> {"model", "token_ids", "sampling_params", "features": null};
 *   completions -> a list of those, one per prompt (one here).
 *
 * Also the drain's linger (srv_drain_linger, server.h): SIGTERM under a
 * router's traffic keeps refusing with 503 until the router stops sending.
 *
 * Not here: /flush_cache (the prefix cache has no clearing call in the
 * public API yet) and /get_server_info (the KV-events work owns it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/compat.h"

static const char E_INV[] = "invalid_request_error";

/* ---- responses ---- */

static enum MHD_Result reply(struct MHD_Connection *mc, unsigned status, char *body, bool retry)
{
	return srv_http_body(mc, status, body, "application/json", retry);
}

/* o (consumed) as the 200 body; a NULL o (allocation failed) is a 500. */
static enum MHD_Result reply_json(struct MHD_Connection *mc, cJSON *o)
{
	char *js = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!js)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return reply(mc, 200, js, false);
}

/* ---- waiting for a request ---- */

static void drop_locked(struct srv *s, struct srv_req *r)
{
	if (!r->done) {
		r->cancelled = true;
		pthread_cond_signal(&s->wake);
	}
	srv_req_unref_locked(r);
}

enum ran { RAN_OK, RAN_BUSY, RAN_GONE, RAN_TIMEOUT, RAN_FAILED };

/* Submit r (one reference, the caller's) and wait until it is done, the
 * client goes away or limit_s seconds pass (0: no limit). On RAN_OK the
 * caller still holds r and reads its engine fields; otherwise r is
 * released (cancelled if it was running). */
static enum ran run_request(struct srv *s, struct srv_req *r, int fd, double limit_s)
{
	int busy = srv_submit(s, r);
	pthread_mutex_lock(&s->lock);
	if (busy) {
		srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->lock);
		return RAN_BUSY;
	}
	double t0 = srv_now();
	while (!r->done) {
		srv_http_wait_100ms(&r->cond, &s->lock);
		if (r->done)
			break;
		bool timeout = limit_s > 0 && srv_now() - t0 > limit_s;
		if (timeout || srv_http_client_gone(fd)) {
			drop_locked(s, r);
			pthread_mutex_unlock(&s->lock);
			return timeout ? RAN_TIMEOUT : RAN_GONE;
		}
	}
	if (r->failed) {
		srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->lock);
		return RAN_FAILED;
	}
	pthread_mutex_unlock(&s->lock);
	return RAN_OK;
}

static void release(struct srv *s, struct srv_req *r)
{
	pthread_mutex_lock(&s->lock);
	srv_req_unref_locked(r);
	pthread_mutex_unlock(&s->lock);
}

/* A request of kind built from the JSON object body (not consumed); NULL
 * with e filled. */
static struct srv_req *build_from(struct srv *s, enum srv_kind kind, const cJSON *body,
				  struct srv_error *e)
{
	char *txt = cJSON_PrintUnformatted(body);
	if (!txt) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	struct srv_req *r = srv_request_build(s, kind, txt, strlen(txt), e);
	free(txt);
	return r;
}

/* ---- GET endpoints ---- */

static enum MHD_Result do_model_info(struct srv *s, struct MHD_Connection *mc)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *arch = cJSON_CreateArray();
	const char *a = fx_model_arch_name(s->model);
	bool ok = o && arch && cJSON_AddItemToObject(o, "architectures", arch);
	if (!ok)
		cJSON_Delete(arch);
	ok = ok && cJSON_AddItemToArray(arch, cJSON_CreateString(a ? a : "unknown")) &&
	     cJSON_AddStringToObject(o, "model_path", s->p.model_path) &&
	     cJSON_AddStringToObject(o, "tokenizer_path", s->p.model_path) &&
	     cJSON_AddBoolToObject(o, "is_generation", true) &&
	     cJSON_AddStringToObject(o, "model_type", a ? a : "unknown") &&
	     cJSON_AddNullToObject(o, "preferred_sampling_params") &&
	     cJSON_AddStringToObject(o, "weight_version", "default") &&
	     cJSON_AddBoolToObject(o, "has_image_understanding", false) &&
	     cJSON_AddBoolToObject(o, "has_audio_understanding", false) &&
	     cJSON_AddNumberToObject(o, "max_context_length", s->n_ctx_seq);
	if (!ok) {
		cJSON_Delete(o);
		o = NULL;
	}
	return reply_json(mc, o);
}

/* SGLang's server info (sglang-router 0.3.2 registers a worker's
 * served_model_name, model_path, max_running_requests, max_total_tokens,
 * ...) with vLLM's vllm_config.{model_config.model, cache_config.block_size}
 * beside it (what vllm-router 0.1.17 reads from a worker's server info) and
 * the KV-event publisher's sources. */
static enum MHD_Result do_server_info(struct srv *s, struct MHD_Connection *mc)
{
	cJSON *o = cJSON_CreateObject(), *vc = cJSON_CreateObject();
	cJSON *mcfg = cJSON_CreateObject(), *cc = cJSON_CreateObject();
	bool ok = o && vc && mcfg && cc && cJSON_AddItemToObject(o, "vllm_config", vc);
	if (!ok)
		cJSON_Delete(vc);
	ok = ok && cJSON_AddItemToObject(vc, "model_config", mcfg);
	if (!ok)
		cJSON_Delete(mcfg);
	ok = ok && cJSON_AddItemToObject(vc, "cache_config", cc);
	if (!ok)
		cJSON_Delete(cc);
	double total = (double)s->n_ctx_seq * s->n_parallel;
	ok = ok && cJSON_AddStringToObject(o, "model_id", s->model_name) &&
	     cJSON_AddStringToObject(o, "served_model_name", s->model_name) &&
	     cJSON_AddStringToObject(o, "model_path", s->p.model_path) &&
	     cJSON_AddStringToObject(o, "tokenizer_path", s->p.model_path) &&
	     cJSON_AddStringToObject(o, "version", "ferrox") &&
	     cJSON_AddNumberToObject(o, "dp_size", 1) &&
	     cJSON_AddNumberToObject(o, "max_running_requests", s->n_parallel) &&
	     cJSON_AddNumberToObject(o, "max_num_reqs", s->n_parallel) &&
	     cJSON_AddNumberToObject(o, "max_batch_size", s->n_parallel) &&
	     cJSON_AddNumberToObject(o, "max_total_tokens", total) &&
	     cJSON_AddNumberToObject(o, "max_prefill_tokens", s->chunk) &&
	     cJSON_AddNumberToObject(o, "context_length", s->n_ctx_seq) &&
	     cJSON_AddNumberToObject(o, "kv_block_size", s->block_size) &&
	     cJSON_AddNumberToObject(o, "page_size", s->block_size) &&
	     cJSON_AddStringToObject(mcfg, "model", s->model_name) &&
	     cJSON_AddNumberToObject(mcfg, "max_model_len", s->n_ctx_seq) &&
	     cJSON_AddNumberToObject(cc, "block_size", s->block_size) &&
	     cJSON_AddBoolToObject(cc, "enable_prefix_caching", true) &&
	     cJSON_AddItemToObject(o, "kv_event_sources", srv_kv_event_sources_json(s));
	if (!ok) {
		cJSON_Delete(o);
		o = NULL;
	}
	return reply_json(mc, o);
}

static enum MHD_Result do_get_load(struct srv *s, struct MHD_Connection *mc)
{
	pthread_mutex_lock(&s->lock);
	int running = s->met.running, waiting = s->met.waiting;
	int32_t used = s->met.blocks_used, total = s->met.blocks_total;
	pthread_mutex_unlock(&s->lock);
	/* KV tokens in use: the used share of the pool's n_parallel x ctx rows */
	double cap = (double)s->n_ctx_seq * s->n_parallel;
	double tokens = total > 0 ? cap * used / total : 0;
	cJSON *a = cJSON_CreateArray(), *o = cJSON_CreateObject();
	bool ok = a && o && cJSON_AddItemToArray(a, o);
	if (!ok)
		cJSON_Delete(o);
	ok = ok && cJSON_AddNumberToObject(o, "dp_rank", 0) &&
	     cJSON_AddNumberToObject(o, "num_reqs", running + waiting) &&
	     cJSON_AddNumberToObject(o, "num_waiting_reqs", waiting) &&
	     cJSON_AddNumberToObject(o, "num_tokens", (double)(int64_t)(tokens + 0.5));
	if (!ok) {
		cJSON_Delete(a);
		a = NULL;
	}
	return reply_json(mc, a);
}

static enum MHD_Result do_health_generate(struct srv *s, struct MHD_Connection *mc)
{
	static const char probe[] = "{\"prompt\":\"ping\",\"max_tokens\":1,\"temperature\":0}";
	struct srv_error e = { 0 };
	struct srv_req *r = srv_request_build(s, SRV_COMPLETION, probe, sizeof(probe) - 1, &e);
	if (!r)
		return reply(mc, (unsigned)e.status, srv_error_json(&e), e.status == 503);
	enum ran how = run_request(s, r, srv_http_conn_fd(mc), 20.0);
	if (how == RAN_GONE)
		return MHD_NO;
	if (how != RAN_OK)
		return srv_http_fail(mc, 503, "unavailable_error", NULL, "%s",
			    how == RAN_BUSY	 ? "the server is busy or shutting down"
			    : how == RAN_TIMEOUT ? "no token within 20 s"
						 : "the engine failed the probe");
	release(s, r);
	cJSON *o = cJSON_CreateObject();
	if (o && !cJSON_AddStringToObject(o, "status", "ok")) {
		cJSON_Delete(o);
		o = NULL;
	}
	return reply_json(mc, o);
}

/* ---- POST /generate ---- */

/* Copy SGLang sampling field from (in sp) to OpenAI field to (in out). */
static bool copy_field(const cJSON *sp, const char *from, cJSON *out, const char *to)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(sp, from);
	if (!v || cJSON_IsNull(v))
		return true;
	cJSON *d = cJSON_Duplicate(v, true);
	return d && cJSON_AddItemToObject(out, to, d);
}

/* SGLang's /generate body -> an OpenAI completions body; NULL with e
 * filled. */
static cJSON *generate_body(const cJSON *in, struct srv_error *e)
{
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(in, "text");
	const cJSON *ids = cJSON_GetObjectItemCaseSensitive(in, "input_ids");
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(in, "sampling_params");
	const cJSON *stream = cJSON_GetObjectItemCaseSensitive(in, "stream");
	if (cJSON_IsTrue(stream)) {
		srv_error_set(e, 400, E_INV, "stream",
			      "streaming /generate is not supported: use /v1/completions");
		return NULL;
	}
	bool has_text = text && !cJSON_IsNull(text), has_ids = ids && !cJSON_IsNull(ids);
	if (has_text == has_ids) {
		srv_error_set(e, 400, E_INV, "text", "give exactly one of 'text' and 'input_ids'");
		return NULL;
	}
	const cJSON *p = has_text ? text : ids;
	if (has_text ? !cJSON_IsString(p)
		     : !cJSON_IsArray(p) || (cJSON_GetArraySize(p) && !cJSON_IsNumber(p->child))) {
		srv_error_set(e, 400, E_INV, has_text ? "text" : "input_ids",
			      "one prompt per request: 'text' a string or 'input_ids' a list of "
			      "token ids (batches: send one request each)");
		return NULL;
	}
	if (sp && !cJSON_IsNull(sp) && !cJSON_IsObject(sp)) {
		srv_error_set(e, 400, E_INV, "sampling_params", "'sampling_params' must be an object");
		return NULL;
	}
	cJSON *out = cJSON_CreateObject();
	cJSON *dup = cJSON_Duplicate(p, true);
	bool ok = out && dup && cJSON_AddItemToObject(out, "prompt", dup);
	if (!ok)
		cJSON_Delete(dup);
	/* SGLang's defaults where OpenAI's differ: 128 new tokens */
	const cJSON *mx = sp ? cJSON_GetObjectItemCaseSensitive(sp, "max_new_tokens") : NULL;
	ok = ok && (mx && !cJSON_IsNull(mx) ? copy_field(sp, "max_new_tokens", out, "max_tokens")
					    : cJSON_AddNumberToObject(out, "max_tokens", 128) != NULL);
	const cJSON *tk = sp ? cJSON_GetObjectItemCaseSensitive(sp, "top_k") : NULL;
	if (ok && cJSON_IsNumber(tk) && tk->valuedouble > 0)
		ok = copy_field(sp, "top_k", out, "top_k");
	static const char *const same[][2] = {
		{ "temperature", "temperature" },
		{ "top_p", "top_p" },
		{ "min_p", "min_p" },
		{ "stop", "stop" },
		{ "ignore_eos", "ignore_eos" },
		{ "repetition_penalty", "repetition_penalty" },
		{ "frequency_penalty", "frequency_penalty" },
		{ "presence_penalty", "presence_penalty" },
		{ "sampling_seed", "seed" },
	};
	for (size_t i = 0; ok && sp && i < sizeof(same) / sizeof(same[0]); i++)
		ok = copy_field(sp, same[i][0], out, same[i][1]);
	if (!ok) {
		cJSON_Delete(out);
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	return out;
}

static enum MHD_Result do_generate(struct srv *s, struct MHD_Connection *mc, const cJSON *in)
{
	struct srv_error e = { 0 };
	cJSON *body = generate_body(in, &e);
	if (!body)
		return reply(mc, (unsigned)e.status, srv_error_json(&e), e.status == 503);
	struct srv_req *r = build_from(s, SRV_COMPLETION, body, &e);
	cJSON_Delete(body);
	if (!r)
		return reply(mc, (unsigned)e.status, srv_error_json(&e), e.status == 503);
	double t0 = srv_now();
	enum ran how = run_request(s, r, srv_http_conn_fd(mc), 0);
	if (how == RAN_GONE)
		return MHD_NO;
	if (how == RAN_BUSY)
		return srv_http_fail(mc, 503, "server_busy_error", NULL,
			    "the server is not ready, is shutting down or its queue is full");
	if (how != RAN_OK)
		return srv_http_fail(mc, 500, "server_error", NULL,
			    "the engine could not run this request (see the server log)");
	const struct srv_choice *c = &r->ch[0];
	cJSON *o = cJSON_CreateObject(), *mi = cJSON_CreateObject(), *fr = cJSON_CreateObject();
	bool ok = o && mi && fr && cJSON_AddItemToObject(o, "meta_info", mi);
	if (!ok)
		cJSON_Delete(mi);
	ok = ok && cJSON_AddItemToObject(mi, "finish_reason", fr);
	if (!ok)
		cJSON_Delete(fr);
	bool len = c->finish && !strcmp(c->finish, "length");
	ok = ok && cJSON_AddStringToObject(o, "text", c->text.p ? c->text.p : "") &&
	     cJSON_AddStringToObject(mi, "id", r->id) &&
	     cJSON_AddStringToObject(fr, "type", len ? "length" : "stop") &&
	     (!len || cJSON_AddNumberToObject(fr, "length", c->n_gen)) &&
	     cJSON_AddNumberToObject(mi, "prompt_tokens", r->n_prompt) &&
	     cJSON_AddNumberToObject(mi, "completion_tokens", c->n_gen) &&
	     cJSON_AddNumberToObject(mi, "e2e_latency", srv_now() - t0);
	release(s, r);
	if (!ok) {
		cJSON_Delete(o);
		o = NULL;
	}
	return reply_json(mc, o);
}

/* ---- POST .../render ---- */

/* {"model", "token_ids", "sampling_params", "features": null} of a built
 * request r. */
static cJSON *rendered(const struct srv *s, const struct srv_req *r)
{
	cJSON *o = cJSON_CreateObject(), *sp = cJSON_CreateObject();
	cJSON *ids = cJSON_CreateArray();
	bool ok = o && sp && ids && cJSON_AddItemToObject(o, "token_ids", ids);
	if (!ok)
		cJSON_Delete(ids);
	for (int32_t i = 0; ok && i < r->n_prompt; i++)
		ok = cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->prompt[i]));
	ok = ok && cJSON_AddItemToObject(o, "sampling_params", sp);
	if (!ok)
		cJSON_Delete(sp);
	const struct srv_gen *g = &r->g;
	ok = ok && cJSON_AddStringToObject(o, "model", s->model_name) &&
	     (g->max_tokens >= 0 ? cJSON_AddNumberToObject(sp, "max_tokens", g->max_tokens)
				 : cJSON_AddNullToObject(sp, "max_tokens")) &&
	     cJSON_AddNumberToObject(sp, "temperature", g->temperature) &&
	     cJSON_AddNumberToObject(sp, "top_p", g->top_p) &&
	     cJSON_AddNumberToObject(sp, "top_k", g->top_k) &&
	     cJSON_AddNumberToObject(sp, "min_p", g->min_p) &&
	     cJSON_AddNumberToObject(sp, "n", g->n) && cJSON_AddNullToObject(o, "features");
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static enum MHD_Result do_render(struct srv *s, struct MHD_Connection *mc,
				 const struct srv_compat_in *in, enum srv_kind kind)
{
	struct srv_error e = { 0 };
	struct srv_req *r = srv_request_build(s, kind, in->body ? in->body : "", in->n, &e);
	if (!r)
		return reply(mc, (unsigned)e.status, srv_error_json(&e), e.status == 503);
	cJSON *o = rendered(s, r);
	release(s, r);
	if (o && kind == SRV_COMPLETION) {
		cJSON *a = cJSON_CreateArray();
		if (!a || !cJSON_AddItemToArray(a, o)) {
			cJSON_Delete(a);
			cJSON_Delete(o);
			a = NULL;
		}
		o = a;
	}
	return reply_json(mc, o);
}

/* ---- the drain's linger ---- */

void srv_drain_linger(struct srv *s)
{
	double t0 = srv_now();
	for (;;) {
		pthread_mutex_lock(&s->lock);
		double last = s->t_refused;
		pthread_mutex_unlock(&s->lock);
		double now = srv_now();
		if (last <= 0 || now - last >= 1.0 || now - t0 >= 10.0) {
			if (now - t0 >= 0.05)
				fprintf(stderr, "serve: drain: kept refusing new work for %.1f s "
					"(it was still arriving)\n", now - t0);
			return;
		}
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- routing ---- */

bool srv_compat_route(struct srv *s, struct MHD_Connection *mc, const char *url,
		      const char *method, const struct srv_compat_in *in, enum MHD_Result *res)
{
	enum { C_MODEL, C_SERVER, C_HEALTH_GEN, C_LOAD, C_GENERATE, C_RENDER_CMPL,
	       C_RENDER_CHAT } c;
	bool want_post = false;
	if (!strcmp(url, "/get_model_info") || !strcmp(url, "/model_info"))
		c = C_MODEL;
	else if (!strcmp(url, "/get_server_info") || !strcmp(url, "/server_info"))
		c = C_SERVER;
	else if (!strcmp(url, "/health_generate"))
		c = C_HEALTH_GEN;
	else if (!strcmp(url, "/get_load"))
		c = C_LOAD;
	else if (!strcmp(url, "/generate"))
		c = C_GENERATE, want_post = true;
	else if (!strcmp(url, "/v1/completions/render"))
		c = C_RENDER_CMPL, want_post = true;
	else if (!strcmp(url, "/v1/chat/completions/render"))
		c = C_RENDER_CHAT, want_post = true;
	else
		return false;
	if (strcmp(method, want_post ? "POST" : "GET")) {
		*res = srv_http_fail(mc, 405, E_INV, NULL, "%s wants %s", url, want_post ? "POST" : "GET");
		return true;
	}
	if (srv_http_refused(s, mc, in->authorized, c == C_HEALTH_GEN, res))
		return true;
	if (c == C_MODEL) {
		*res = do_model_info(s, mc);
		return true;
	}
	if (c == C_SERVER) {
		*res = do_server_info(s, mc);
		return true;
	}
	if (c == C_HEALTH_GEN) {
		*res = do_health_generate(s, mc);
		return true;
	}
	if (c == C_LOAD) {
		*res = do_get_load(s, mc);
		return true;
	}
	if (in->too_big) {
		*res = srv_http_fail(mc, 413, E_INV, NULL, "the request body is larger than %zu bytes (--max-body)",
			    s->p.max_body);
		return true;
	}
	if (!srv_utf8_valid(in->body ? in->body : "", in->n)) {
		*res = srv_http_fail(mc, 400, E_INV, NULL, "the request body is not valid UTF-8");
		return true;
	}
	if (c != C_GENERATE) {
		*res = do_render(s, mc, in, c == C_RENDER_CHAT ? SRV_CHAT : SRV_COMPLETION);
		return true;
	}
	size_t end = 0;
	bool oom = false;
	cJSON *body = srv_json_parse(in->body ? in->body : "", in->n, &end, &oom);
	if (!body || !cJSON_IsObject(body)) {
		cJSON_Delete(body);
		*res = oom ? srv_http_fail(mc, 500, "server_error", NULL, "out of memory")
			   : srv_http_fail(mc, 400, E_INV, NULL, "the request body must be a JSON object");
		return true;
	}
	*res = do_generate(s, mc, body);
	cJSON_Delete(body);
	return true;
}
