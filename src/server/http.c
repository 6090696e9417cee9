/* HTTP front end on libmicrohttpd: one thread per connection, so a handler
 * may block (waiting for the engine) without stalling anyone else. Routes,
 * authentication, body limits, and fx_serve's start-up and drain.
 *
 * Streaming responses come from MHD's content-reader callback, which blocks
 * on the request's condition variable until the engine has written SSE
 * bytes; a client that closes its socket is noticed within 100 ms while
 * waiting (poll for hang-up on the connection's fd) or on the next write,
 * and its request is marked cancelled for the engine's next step.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/compat.h"
#include "server/server.h"
#include "server/webui.h"

struct conn {
	struct srv_buf body;
	bool too_big;
	bool counted;        /* holds one of s->n_http */
};

struct stream {
	struct srv *s;
	struct srv_req *r;
	int fd;
};

static const char E_INV[] = "invalid_request_error";

/* ---- responses ---- */

enum MHD_Result srv_http_body(struct MHD_Connection *mc, unsigned status, char *body,
				 const char *type, bool retry)
{
	if (!body)
		return MHD_NO;
	struct MHD_Response *rsp =
		MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (!rsp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (retry)
		MHD_add_response_header(rsp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	enum MHD_Result ok = MHD_queue_response(mc, status, rsp);
	MHD_destroy_response(rsp);
	return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, unsigned status, cJSON *o)
{
	char *js = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return srv_http_body(mc, status, js, "application/json", false);
}

static enum MHD_Result send_error(struct MHD_Connection *mc, const struct srv_error *e)
{
	return srv_http_body(mc, (unsigned)e->status, srv_error_json(e), "application/json",
			 e->status == 503);
}

enum MHD_Result srv_http_fail(struct MHD_Connection *mc, int status, const char *type,
			    const char *param, const char *fmt, ...)
{
	struct srv_error e = { .status = status, .type = type, .param = param };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	return send_error(mc, &e);
}

/* ---- client liveness ---- */

int srv_http_conn_fd(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

/* true when the peer has closed or reset the connection. */
bool srv_http_client_gone(int fd)
{
	if (fd < 0)
		return false;
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return true;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void srv_http_wait_100ms(pthread_cond_t *cv, pthread_mutex_t *mu)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(cv, mu, &ts);
}

static void cancel_locked(struct srv *s, struct srv_req *r)
{
	if (!r->done) {
		r->cancelled = true;
		pthread_cond_signal(&s->wake);
	}
}

/* ---- streaming ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct stream *st = cls;
	struct srv *s = st->s;
	struct srv_req *r = st->r;
	pthread_mutex_lock(&s->lock);
	while (r->out_off == r->out.n && !r->done) {
		srv_http_wait_100ms(&r->cond, &s->lock);
		if (r->out_off == r->out.n && !r->done && srv_http_client_gone(st->fd)) {
			cancel_locked(s, r);
			pthread_mutex_unlock(&s->lock);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
	size_t k = r->out.n - r->out_off;
	if (!k) {
		pthread_mutex_unlock(&s->lock);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	if (k > max)
		k = max;
	memcpy(buf, r->out.p + r->out_off, k);
	r->out_off += k;
	if (r->out_off == r->out.n)
		r->out_off = r->out.n = 0;
	pthread_mutex_unlock(&s->lock);
	return (ssize_t)k;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	pthread_mutex_lock(&st->s->lock);
	cancel_locked(st->s, st->r);
	srv_req_unref_locked(st->r);
	pthread_mutex_unlock(&st->s->lock);
	free(st);
}

/* The request body as a JSON object, or NULL with why[] saying what is
 * wrong: where the JSON broke (the parse end cJSON hands back, which, unlike
 * cJSON_GetErrorPtr, is not shared between threads) or that it is not an
 * object; why[] is empty when memory ran out. */
static cJSON *body_object(const struct conn *cn, char *why, size_t cap)
{
	const char *p = cn->body.p ? cn->body.p : "";
	size_t at = 0;
	bool oom = false;
	cJSON *b = srv_json_parse(p, cn->body.n, &at, &oom);
	why[0] = 0;
	if (oom)
		return NULL;
	if (!b && cn->body.n == 0) {
		snprintf(why, cap, "the request body is empty (a JSON object is expected)");
		return NULL;
	}
	if (!b) {
		snprintf(why, cap, "the request body is not valid JSON (it breaks at byte %zu of %zu)",
			 at, cn->body.n);
		return NULL;
	}
	if (!cJSON_IsObject(b)) {
		cJSON_Delete(b);
		snprintf(why, cap, "the request body must be a JSON object");
		return NULL;
	}
	return b;
}

/* ---- completions ---- */

struct srv_req *srv_request_build(struct srv *s, enum srv_kind kind, const char *body_text,
				  size_t n, struct srv_error *e)
{
	return srv_request_build_ex(s, kind, false, body_text, n, e);
}

struct srv_req *srv_request_build_ex(struct srv *s, enum srv_kind kind, bool native,
				     const char *body_text, size_t n, struct srv_error *e)
{
	char why[128];
	struct conn cn = { .body = { .p = (char *)body_text, .n = n } };
	cJSON *body = body_object(&cn, why, sizeof(why));
	if (!body) {
		srv_error_set(e, why[0] ? 400 : 500, why[0] ? E_INV : "server_error", NULL, "%s",
			      why[0] ? why : "out of memory");
		return NULL;
	}
	struct srv_req *r = srv_req_new(s, kind);
	if (!r) {
		cJSON_Delete(body);
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	r->native = native;
	r->g.ignore_eos = s->p.ignore_eos; /* the request's field, if any, wins */
	bool ok = srv_gen_parse(body, kind, s->n_vocab, &s->gen_defaults, &r->g, e) &&
		  srv_spec_parse(body, &s->p.spec, &r->g, e) &&
		  (!native || srv_native_opts(s, body, r, e)) &&
		  (native ? srv_native_prompt(s, body, r, e)
			  : kind == SRV_CHAT ? srv_chat_prompt(s, body, r, e)
					     : srv_completion_prompt(s, body, r, e));
	cJSON_Delete(body);
	if (ok && r->n_prompt == 0) {
		srv_error_set(e, 400, E_INV, "prompt", "the prompt is empty");
		ok = false;
	}
	if (ok && (uint32_t)r->n_prompt + 1 > s->n_ctx_seq) {
		srv_error_set(e, 400, E_INV, kind == SRV_CHAT ? "messages" : "prompt",
			      "the prompt has %d tokens; this server's context is %u tokens per "
			      "request (--ctx-size)",
			      r->n_prompt, s->n_ctx_seq);
		ok = false;
	}
	if (ok && !(r->ch = calloc((size_t)r->g.n, sizeof(*r->ch)))) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		ok = false;
	}
	for (int i = 0; ok && i < r->g.n; i++) {
		r->ch[i].req = r;
		r->ch[i].index = i;
		r->ch[i].slot = -1;
		r->ch[i].id_slot = -1;
	}
	if (!ok) {
		pthread_mutex_lock(&s->lock);
		srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->lock);
		return NULL;
	}
	return r;
}

static enum MHD_Result do_completion(struct srv *s, struct MHD_Connection *mc, struct conn *cn,
				     enum srv_kind kind, bool native)
{
	struct srv_error e = { 0 };
	struct srv_req *r = srv_request_build_ex(s, kind, native, cn->body.p ? cn->body.p : "",
						 cn->body.n, &e);
	if (!r)
		return send_error(mc, &e);
	bool ok = true;
	int busy = srv_submit(s, r);
	if (busy) {
		srv_error_set(&e, 503, "server_busy_error", NULL,
			      busy == 503 ? "the server is not ready or is shutting down"
					  : "too many requests are waiting: retry shortly");
		ok = false;
	}
	if (!ok) {
		pthread_mutex_lock(&s->lock);
		srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->lock);
		return send_error(mc, &e);
	}
	pthread_mutex_lock(&s->lock);
	s->n_http++;
	pthread_mutex_unlock(&s->lock);
	cn->counted = true;
	int fd = srv_http_conn_fd(mc);
	if (r->g.stream) {
		struct stream *st = malloc(sizeof(*st));
		struct MHD_Response *rsp =
			st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st,
							       stream_free)
			   : NULL;
		if (!rsp) {
			free(st);
			pthread_mutex_lock(&s->lock);
			cancel_locked(s, r);
			srv_req_unref_locked(r);
			pthread_mutex_unlock(&s->lock);
			return MHD_NO;
		}
		*st = (struct stream){ .s = s, .r = r, .fd = fd };
		MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
		MHD_add_response_header(rsp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		enum MHD_Result res = MHD_queue_response(mc, 200, rsp);
		MHD_destroy_response(rsp);
		return res;
	}
	pthread_mutex_lock(&s->lock);
	while (!r->done) {
		srv_http_wait_100ms(&r->cond, &s->lock);
		if (!r->done && srv_http_client_gone(fd)) {
			cancel_locked(s, r);
			srv_req_unref_locked(r);
			pthread_mutex_unlock(&s->lock);
			return MHD_NO;
		}
	}
	pthread_mutex_unlock(&s->lock);
	if (r->failed) {
		pthread_mutex_lock(&s->lock);
		srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->lock);
		return srv_http_fail(mc, 500, "server_error", NULL,
			    "the engine could not run this request (see the server log)");
	}
	char *js = r->native ? srv_native_final_json(s, r) : srv_final_json(s, r);
	pthread_mutex_lock(&s->lock);
	srv_req_unref_locked(r);
	pthread_mutex_unlock(&s->lock);
	if (!js)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return srv_http_body(mc, 200, js, "application/json", false);
}

/* ---- other endpoints ---- */

static enum MHD_Result do_models(struct srv *s, struct MHD_Connection *mc)
{
	char *js = srv_models_json(s);
	if (!js)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return srv_http_body(mc, 200, js, "application/json", false);
}

/* llama.cpp server's shapes: {"content", "add_special", "parse_special",
 * "with_pieces"} -> {"tokens": [id, ...]} or [{"id", "piece"}, ...]. */
static enum MHD_Result do_tokenize(struct srv *s, struct MHD_Connection *mc, const cJSON *body)
{
	struct srv_error e = { 0 };
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(body, "content");
	bool add = false, parse = true, pieces = false;
	if (!cJSON_IsString(c))
		return srv_http_fail(mc, 400, E_INV, "content", "'content' must be a string");
	if (!srv_json_bool(body, "add_special", &add, &e) ||
	    !srv_json_bool(body, "parse_special", &parse, &e) ||
	    !srv_json_bool(body, "with_pieces", &pieces, &e))
		return send_error(mc, &e);
	size_t len = strlen(c->valuestring), n = 0, cap = len + 8;
	fx_token *t = malloc(cap * sizeof(*t));
	if (!t || fx_tokenize(s->model, c->valuestring, len, add, parse, t, cap, &n)) {
		free(t);
		return srv_http_fail(mc, 500, "server_error", NULL, "tokenization failed");
	}
	char *js = srv_tokenize_json(s, t, n, pieces);
	free(t);
	if (!js)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return srv_http_body(mc, 200, js, "application/json", false);
}

static enum MHD_Result do_detokenize(struct srv *s, struct MHD_Connection *mc, const cJSON *body)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(body, "tokens");
	if (!cJSON_IsArray(a))
		return srv_http_fail(mc, 400, E_INV, "tokens", "'tokens' must be a list of token ids");
	struct srv_buf out = { 0 };
	struct fx_detok dt = { 0 };
	const cJSON *it;
	char buf[512];
	size_t n;
	bool ok = true;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= s->n_vocab ||
		    it->valuedouble != (int32_t)it->valuedouble) {
			srv_buf_free(&out);
			return srv_http_fail(mc, 400, E_INV, "tokens", "token ids must be integers in [0, %d)",
				    s->n_vocab);
		}
		if (fx_detok_push(s->model, &dt, (fx_token)it->valuedouble, true, buf, sizeof(buf),
				  &n) == FX_OK)
			ok &= srv_buf_add(&out, buf, n);
	}
	if (fx_detok_flush(&dt, buf, sizeof(buf), &n) == FX_OK)
		ok &= srv_buf_add(&out, buf, n);
	/* a shorter text would be a wrong answer: out of memory is a 500 */
	cJSON *o = ok ? cJSON_CreateObject() : NULL;
	if (o && !cJSON_AddStringToObject(o, "content", out.p ? out.p : "")) {
		cJSON_Delete(o);
		o = NULL;
	}
	srv_buf_free(&out);
	if (!o)
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return send_json(mc, 200, o);
}

static enum MHD_Result do_metrics(struct srv *s, struct MHD_Connection *mc)
{
	struct srv_buf b = { 0 };
	pthread_mutex_lock(&s->lock);
	struct srv_metrics m = s->met;
	pthread_mutex_unlock(&s->lock);
	uint64_t next;
	if (s->kvev)
		srv_kvev_stats(s->kvev, &m.kv_batches, &m.kv_dropped, &m.kv_events, &next);
	if (!srv_metrics_text(&m, s->model_name, &b))
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	return srv_http_body(mc, 200, b.p, "text/plain; version=0.0.4; charset=utf-8", false);
}

/* The web chat page (webui.h), open without the API key as llama-server's
 * is: it holds nothing secret, and its own API calls send the key. Revalidated
 * by ETag (no-cache), so a new binary's page replaces a cached one. The
 * policy keeps it to its own inline code and this server. */
static enum MHD_Result do_webui(struct MHD_Connection *mc)
{
	const char *inm = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						      MHD_HTTP_HEADER_IF_NONE_MATCH);
	bool same = inm && !strcmp(inm, srv_webui_html_etag);
	struct MHD_Response *rsp = MHD_create_response_from_buffer(
		same ? 0 : srv_webui_html_len, (void *)srv_webui_html, MHD_RESPMEM_PERSISTENT);
	if (!rsp)
		return MHD_NO;
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_ETAG, srv_webui_html_etag);
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_X_CONTENT_TYPE_OPTIONS, "nosniff");
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_SECURITY_POLICY,
				"default-src 'none'; script-src 'unsafe-inline'; style-src "
				"'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; "
				"form-action 'none'; frame-ancestors 'none'");
	enum MHD_Result ok = MHD_queue_response(mc, same ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, rsp);
	MHD_destroy_response(rsp);
	return ok;
}

/* ---- routing ---- */

bool srv_http_refused(struct srv *s, struct MHD_Connection *mc, bool authorized, bool refuse_draining,
		      enum MHD_Result *res)
{
	if (!authorized) {
		*res = srv_http_fail(mc, 401, "authentication_error", NULL,
				     "missing or wrong API key (send 'Authorization: Bearer KEY')");
		return true;
	}
	pthread_mutex_lock(&s->lock);
	bool ready = s->ready, draining = s->draining;
	pthread_mutex_unlock(&s->lock);
	if (!ready || (refuse_draining && draining)) {
		*res = srv_http_fail(mc, 503, "unavailable_error", NULL,
				     !ready ? "loading model" : "shutting down");
		return true;
	}
	return false;
}

static bool authorized(struct srv *s, struct MHD_Connection *mc)
{
	if (!s->p.api_key || !*s->p.api_key)
		return true;
	const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncmp(h, "Bearer ", 7))
		return false;
	h += 7;
	size_t lk = strlen(s->p.api_key), lh = strlen(h);
	unsigned diff = lk != lh;
	for (size_t i = 0; i < lh; i++) /* constant time over the given key */
		diff |= (unsigned char)h[i] ^ (unsigned char)s->p.api_key[i % (lk ? lk : 1)];
	return diff == 0;
}

static bool path_is(const char *url, const char *a)
{
	return !strcmp(url, a);
}

static enum MHD_Result route(struct srv *s, struct MHD_Connection *mc, struct conn *cn,
			     const char *url, const char *method)
{
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
	bool ready, draining;
	pthread_mutex_lock(&s->lock);
	ready = s->ready;
	draining = s->draining;
	pthread_mutex_unlock(&s->lock);
	if (path_is(url, "/health") || path_is(url, "/v1/health")) {
		if (!ready || draining)
			return srv_http_fail(mc, 503, "unavailable_error", NULL,
				    !ready ? "loading model" : "shutting down");
		cJSON *o = cJSON_CreateObject();
		if (o && !cJSON_AddStringToObject(o, "status", "ok")) {
			cJSON_Delete(o);
			o = NULL;
		}
		if (!o)
			return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
		return send_json(mc, 200, o);
	}
	if (path_is(url, "/") || path_is(url, "/index.html")) {
		if (!get && strcmp(method, "HEAD"))
			return srv_http_fail(mc, 405, E_INV, NULL, "%s wants GET", url);
		return do_webui(mc);
	}
	enum { R_NONE, R_METRICS, R_MODELS, R_CMPL, R_NATIVE, R_CHAT, R_TOK, R_DETOK, R_KVSRC,
	       R_KVBLK, R_EMB } r = R_NONE;
	bool want_post = true;
	if (path_is(url, "/metrics"))
		r = R_METRICS, want_post = false;
	else if (path_is(url, "/v1/models") || path_is(url, "/models"))
		r = R_MODELS, want_post = false;
	else if (path_is(url, "/v1/completions"))
		r = R_CMPL;
	else if (path_is(url, "/completion") || path_is(url, "/completions"))
		r = R_NATIVE; /* llama-server's own shape on both (its server.cpp) */
	else if (path_is(url, "/v1/chat/completions") || path_is(url, "/chat/completions"))
		r = R_CHAT;
	else if (path_is(url, "/kv_event_sources"))
		r = R_KVSRC, want_post = false;
	else if (path_is(url, "/kv_cache_blocks"))
		r = R_KVBLK, want_post = false;
	else if (path_is(url, "/v1/embeddings") || path_is(url, "/embeddings"))
		r = R_EMB;
	else if (path_is(url, "/tokenize"))
		r = R_TOK;
	else if (path_is(url, "/detokenize"))
		r = R_DETOK;
	if (r == R_NONE) {
		/* the routers' worker endpoints (compat.c) */
		struct srv_compat_in in = { cn->body.p, cn->body.n, cn->too_big, authorized(s, mc) };
		enum MHD_Result res;
		if (srv_compat_route(s, mc, url, method, &in, &res) ||
		    srv_llama_route(s, mc, url, method, &in, &res))
			return res;
		return srv_http_fail(mc, 404, E_INV, NULL, "no such endpoint: %.200s", url);
	}
	if (want_post ? !post : !get)
		return srv_http_fail(mc, 405, E_INV, NULL, "%s wants %s", url, want_post ? "POST" : "GET");
	if (r != R_METRICS && !authorized(s, mc))
		return srv_http_fail(mc, 401, "authentication_error", NULL,
			    "missing or wrong API key (send 'Authorization: Bearer KEY')");
	if (r == R_METRICS)
		return do_metrics(s, mc);
	if (!ready)
		return srv_http_fail(mc, 503, "unavailable_error", NULL, "loading model");
	if (r == R_MODELS)
		return do_models(s, mc);
	if (r == R_KVSRC || r == R_KVBLK) {
		cJSON *o = r == R_KVSRC ? srv_kv_event_sources_json(s) : srv_kv_blocks_json(s);
		return o ? send_json(mc, 200, o) : srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	}
	if (cn->too_big)
		return srv_http_fail(mc, 413, E_INV, NULL, "the request body is larger than %zu bytes (--max-body)",
			    s->p.max_body);
	if (!srv_utf8_valid(cn->body.p ? cn->body.p : "", cn->body.n))
		return srv_http_fail(mc, 400, E_INV, NULL, "the request body is not valid UTF-8");
	if (r == R_CMPL || r == R_CHAT || r == R_NATIVE)
		return do_completion(s, mc, cn, r == R_CHAT ? SRV_CHAT : SRV_COMPLETION, r == R_NATIVE);
	if (r == R_EMB)
		return srv_embeddings(s, mc, cn->body.p, cn->body.n);
	char why[128];
	cJSON *body = body_object(cn, why, sizeof(why));
	if (!body && !why[0])
		return srv_http_fail(mc, 500, "server_error", NULL, "out of memory");
	if (!body)
		return srv_http_fail(mc, 400, E_INV, NULL, "%s", why);
	enum MHD_Result res = r == R_TOK ? do_tokenize(s, mc, body) : do_detokenize(s, mc, body);
	cJSON_Delete(body);
	return res;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_size, void **con_cls)
{
	(void)version;
	struct srv *s = cls;
	struct conn *cn = *con_cls;
	if (!cn) {
		if (!(cn = calloc(1, sizeof(*cn))))
			return MHD_NO;
		*con_cls = cn;
		const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > s->p.max_body) {
			cn->too_big = true;
			return srv_http_fail(mc, 413, E_INV, NULL,
				    "the request body is larger than %zu bytes (--max-body)",
				    s->p.max_body);
		}
		return MHD_YES;
	}
	if (*data_size) {
		if (!cn->too_big && cn->body.n + *data_size <= s->p.max_body) {
			if (!srv_buf_add(&cn->body, data, *data_size))
				return MHD_NO;
		} else {
			cn->too_big = true;
			srv_buf_free(&cn->body);
		}
		*data_size = 0;
		return MHD_YES;
	}
	return route(s, mc, cn, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	(void)mc;
	(void)toe;
	struct srv *s = cls;
	struct conn *cn = *con_cls;
	if (!cn)
		return;
	if (cn->counted) {
		pthread_mutex_lock(&s->lock);
		s->n_http--;
		pthread_mutex_unlock(&s->lock);
	}
	srv_buf_free(&cn->body);
	free(cn);
	*con_cls = NULL;
}

/* ---- fx_serve ---- */

struct fx_server_params fx_server_default_params(void)
{
	return (struct fx_server_params){ .size = sizeof(struct fx_server_params),
					  .host = "127.0.0.1",
					  .port = 8080,
					  .n_parallel = 4,
					  .timeout_s = 600,
					  .max_body = 8u << 20,
					  .generation_config = true,
					  .block_size = 16,
					  .spec = fx_spec_default_params() };
}

static int set_err(struct fx_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int set_err(struct fx_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static bool stop_asked(const struct fx_server_params *p)
{
	return p->should_stop && p->should_stop(p->stop_arg);
}

/* libmicrohttpd's messages, prefixed; the note it prints when a handler
 * drops a connection on purpose (a client that went away) is skipped. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	/* Our own log says these better: the engine's error, and
	 * "cancelled (client gone)" when a stream's reader left. */
	if (strstr(fmt, "Application reported internal error") ||
	    strstr(fmt, "Failed to send the chunked response body"))
		return;
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(stderr, "serve: http: %s%s", line,
		*line && line[strlen(line) - 1] == '\n' ? "" : "\n");
}

static struct MHD_Daemon *listen_on(struct srv *s, struct fx_err *err)
{
	const struct fx_server_params *p = &s->p;
	struct sockaddr_in v4 = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p->port) };
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)p->port) };
	const struct sockaddr *sa;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
			 MHD_USE_ERROR_LOG;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai = NULL;
	if (inet_pton(AF_INET, p->host, &v4.sin_addr) == 1) {
		sa = (const struct sockaddr *)&v4;
	} else if (inet_pton(AF_INET6, p->host, &v6.sin6_addr) == 1) {
		sa = (const struct sockaddr *)&v6;
		flags |= MHD_USE_IPv6;
	} else if (!getaddrinfo(p->host, NULL, &hints, &ai) && ai) {
		/* a host name ("localhost"): its first address */
		if (ai->ai_family == AF_INET6) {
			memcpy(&v6, ai->ai_addr, sizeof(v6));
			v6.sin6_port = htons((uint16_t)p->port);
			sa = (const struct sockaddr *)&v6;
			flags |= MHD_USE_IPv6;
		} else {
			memcpy(&v4, ai->ai_addr, sizeof(v4));
			v4.sin_port = htons((uint16_t)p->port);
			sa = (const struct sockaddr *)&v4;
		}
		freeaddrinfo(ai);
	} else {
		set_err(err, FX_E_INVALID, "--host '%s' is not an address or a known host name",
			p->host);
		return NULL;
	}
	struct MHD_Daemon *d = MHD_start_daemon(
		flags, (uint16_t)p->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
		mhd_log, NULL, MHD_OPTION_SOCK_ADDR, sa,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)p->timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, s, MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
	if (!d)
		set_err(err, FX_E_IO, "cannot listen on %s:%d (in use, or not an address of this host)",
			p->host, p->port);
	return d;
}

/* Loading progress in the log, as one line rewritten in place, when the
 * log is a terminal (fx_model_params.progress); every 5%. */
static bool load_progress(float f, void *arg)
{
	int *last = arg, pct = (int)(f * 100.0f);
	if (pct / 5 != *last / 5 || (pct == 100 && *last != 100)) {
		*last = pct;
		fprintf(stderr, "\rserve: loading the model: %3d%%%s", pct, pct == 100 ? "\n" : "");
	}
	return true;
}

static int load(struct srv *s, struct fx_err *err)
{
	const struct fx_server_params *p = &s->p;
	struct fx_model_params mp = fx_model_default_params();
	int last_pct = 0;
	mp.no_mmap = p->no_mmap;
	if (isatty(2)) {
		mp.progress = load_progress;
		mp.progress_arg = &last_pct;
	}
	int rc = fx_model_load(p->model_path, &mp, &s->model, err);
	if (rc)
		return rc;
	struct fx_err lerr = { 0 };
	if (p->mlock && fx_model_lock(s->model, &lerr))
		fprintf(stderr, "serve: warning: %s\n", lerr.msg);
	if (!fx_model_has_vocab(s->model))
		return set_err(err, FX_E_UNSUPPORTED,
			       "%s has no tokenizer: the server needs a GGUF file with one",
			       p->model_path);
	s->n_vocab = fx_model_n_vocab(s->model);
	srv_gen_defaults(p->generation_config ? s->model : NULL, &s->gen_defaults);
	uint32_t train = (uint32_t)fx_model_n_ctx_train(s->model);
	uint32_t nc = p->n_ctx_seq ? p->n_ctx_seq : (train && train < 4096 ? train : 4096);
	nc = (nc + s->block_size - 1) / s->block_size * s->block_size;
	s->n_ctx_seq = nc;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = nc * (uint32_t)s->n_parallel;
	cp.n_seq_max = (uint32_t)s->n_parallel;
	cp.kv_layout = FX_KV_PAGED;
	cp.block_size = s->block_size;
	cp.kv_events = s->kvev != NULL;
	cp.n_ubatch = p->n_ubatch ? p->n_ubatch : 512;
	cp.n_threads = p->n_threads;
	/* recurrent layers: the states of the server's draft length to roll
	 * back to (a request asking more drafts gets this many) */
	if (p->spec.types)
		cp.n_rollback = (uint32_t)(p->spec.n_max < SRV_SPEC_STEP_MAX ? p->spec.n_max : SRV_SPEC_STEP_MAX);
	if ((rc = fx_context_create(s->model, &cp, &s->ctx, err)))
		return rc;
	s->can_spec = fx_context_can_roll_back(s->ctx);
	if (p->embeddings && (rc = srv_emb_open(s, err)))
		return rc;
	return srv_engine_start(s, err);
}

int fx_serve(const struct fx_server_params *pp, struct fx_err *err)
{
	struct srv *s = calloc(1, sizeof(*s));
	int rc = FX_OK;
	if (!s)
		return set_err(err, FX_E_NOMEM, "out of memory");
	s->p = *pp;
	struct fx_server_params *p = &s->p;
	const char *rf = pp->reasoning_format;
	if (rf && strcmp(rf, "auto") && strcmp(rf, "none") && strcmp(rf, "deepseek")) {
		free(s);
		return set_err(err, FX_E_INVALID, "reasoning format '%.64s': use auto, none or deepseek",
			       rf);
	}
	if (!p->model_path || !p->host || p->port < 0 || p->port > 65535 || p->n_parallel < 1 ||
	    p->n_parallel > 256 || p->timeout_s < 0 || p->max_body < 1 || p->max_queue < 0) {
		free(s);
		return set_err(err, FX_E_INVALID,
			       "bad server parameters (port 0..65535, parallel 1..256, max body >= 1)");
	}
	const struct fx_spec_params *sp = &p->spec;
	if (sp->types && (sp->n_max < 0 || sp->n_max > 1024 || sp->n_min < 0 || sp->n_min > 1024 ||
			  sp->ngram_size_n < 1 || sp->ngram_size_m < 1)) {
		free(s);
		return set_err(err, FX_E_INVALID, "bad speculative decoding parameters (draft n_max "
			       "and n_min 0..1024, ngram sizes >= 1)");
	}
	if (sp->types & ~(uint32_t)FX_SPEC_NGRAM_SIMPLE) {
		free(s);
		return set_err(err, FX_E_UNSUPPORTED, "the server drafts with ngram-simple only "
			       "(draft-simple and draft-mtp: ferrox run and chat)");
	}
	if (p->block_size < 1 || p->block_size > 1024) {
		uint32_t bs = p->block_size;
		free(s);
		return set_err(err, FX_E_INVALID, "block size %u: use 1..1024 tokens (16 is vLLM's)", bs);
	}
	if (p->pooling != FX_POOLING_LAST && p->pooling != FX_POOLING_MEAN &&
	    p->pooling != FX_POOLING_CLS) {
		int32_t pl = p->pooling;
		free(s);
		return set_err(err, FX_E_INVALID, "pooling %d: use last (0), mean (1) or cls (2)", pl);
	}
	if (p->served_model_name && !*p->served_model_name) {
		free(s);
		return set_err(err, FX_E_INVALID, "the served model name is empty");
	}
	s->block_size = p->block_size;
	s->n_parallel = p->n_parallel;
	s->max_queue = p->max_queue ? p->max_queue : 4 * p->n_parallel;
	s->chunk = 256;
	const char *base = strrchr(p->model_path, '/');
	s->model_name = p->served_model_name ? p->served_model_name
		       : base && base[1] ? base + 1 : p->model_path;
	srv_metrics_init(&s->met);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	/* before listening: an endpoint that cannot be bound fails the start */
	char why[320];
	if ((rc = srv_kvev_open(p, &s->kvev, why, sizeof(why)))) {
		set_err(err, rc, "%s", why);
		goto out_free;
	}
	if (s->kvev) {
		const char *rep = srv_kvev_endpoint(s->kvev, true);
		fprintf(stderr, "serve: KV-cache events on %s%s%s, topic '%s'\n",
			srv_kvev_endpoint(s->kvev, false), rep ? ", replays on " : "", rep ? rep : "",
			srv_kvev_topic(s->kvev));
	}
	struct MHD_Daemon *d = listen_on(s, err);
	if (!d) {
		rc = err->code;
		goto out_free;
	}
	const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	fprintf(stderr, "serve: listening on http://%s:%u (loading %s)\n", p->host,
		di ? di->port : (unsigned)p->port, p->model_path);
	double t0 = srv_now();
	if ((rc = load(s, err)))
		goto out_stop;
	pthread_mutex_lock(&s->lock);
	s->ready = true;
	pthread_mutex_unlock(&s->lock);
	fprintf(stderr,
		"serve: ready in %.2f s: %s, %d parallel sequences x %u tokens, queue %d%s%s\n",
		srv_now() - t0, fx_model_arch_name(s->model), s->n_parallel, s->n_ctx_seq,
		s->max_queue, p->embeddings ? ", embeddings pooled by " : "",
		!p->embeddings ? "" : p->pooling == FX_POOLING_MEAN ? "mean"
		: p->pooling == FX_POOLING_CLS ? "cls" : "last");
	while (!stop_asked(p))
		sleep_ms(100);
	fprintf(stderr, "serve: draining: refusing new requests, finishing accepted ones "
		"(signal again to quit at once)\n");
out_stop:
	pthread_mutex_lock(&s->lock);
	s->draining = true;
	pthread_mutex_unlock(&s->lock);
	srv_engine_stop(s);
	/* let handlers hand their last bytes to the clients (bounded wait) */
	for (int i = 0; i < 300; i++) {
		pthread_mutex_lock(&s->lock);
		int n = s->n_http;
		pthread_mutex_unlock(&s->lock);
		if (!n)
			break;
		sleep_ms(100);
	}
	srv_drain_linger(s);
	MHD_stop_daemon(d);
	srv_kvev_stop(s->kvev);
	s->kvev = NULL;
	free(s->kv_held);
	fx_context_free(s->ctx);
	fx_context_free(s->ectx);
	free(s->e_out);
	fx_grammar_vocab_free(s->gvocab);
	fx_model_free(s->model);
out_free:
	srv_kvev_stop(s->kvev);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return rc;
}
