/* Endpoints that routers call on their workers, beyond the OpenAI API
 * (compat.c): SGLang's /get_model_info, /health_generate, /get_load and
 * /generate (sglang-router), vLLM's /v1/completions/render and
 * /v1/chat/completions/render (vllm-router's kv_aware policy tokenizes a
 * request through them). One entry point, called by http.c's route() for a
 * path it does not know.
 */
#ifndef FX_SERVER_COMPAT_H
#define FX_SERVER_COMPAT_H

#include <stdbool.h>
#include <stddef.h>

#include <microhttpd.h>

#include "server/server.h"

/* What compat.c needs of the connection: its body (body[0..n), NULL when
 * empty; too_big when it was over --max-body) and whether its API key is
 * right. */
struct srv_compat_in {
	const char *body;
	size_t n;
	bool too_big;
	bool authorized;
};

/* http.c's response helpers, shared with compat.c: body (malloc'ed, taken;
 * NULL: MHD_NO) sent with status and content type, a Retry-After: 1 when
 * retry; fail: an OpenAI-shaped error (a 503 with Retry-After). */
enum MHD_Result srv_http_body(struct MHD_Connection *mc, unsigned status, char *body,
			      const char *type, bool retry);
enum MHD_Result srv_http_fail(struct MHD_Connection *mc, int status, const char *type,
			      const char *param, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Wait on cv (mu held) for at most 100 ms. */
void srv_http_wait_100ms(pthread_cond_t *cv, pthread_mutex_t *mu);
/* The connection's socket (-1: unknown), and whether its peer has closed
 * or reset it (polled, nothing read). */
int srv_http_conn_fd(struct MHD_Connection *mc);
bool srv_http_client_gone(int fd);
/* The gate of an endpoint outside http.c's own routes: a wrong API key
 * (401), the model still loading (503), and when refuse_draining a drain
 * under way (503). True when the request is refused: the error is sent
 * and *res is its result. */
bool srv_http_refused(struct srv *s, struct MHD_Connection *mc, bool authorized, bool refuse_draining,
		      enum MHD_Result *res);

/* embed.c: POST /v1/embeddings with body text[0..n) (501 naming
 * --embeddings when the server runs without it). */
enum MHD_Result srv_embeddings(struct srv *s, struct MHD_Connection *mc, const char *text, size_t n);

/* Answer url if it is one of compat.c's endpoints: true with *res set
 * (the response queued, or MHD_NO); false for any other path (the caller
 * answers 404). */
bool srv_compat_route(struct srv *s, struct MHD_Connection *mc, const char *url,
		      const char *method, const struct srv_compat_in *in, enum MHD_Result *res);

/* llama.c: llama-server's GET /props (POST: 501), GET /slots and POST
 * /slots/{id}?action=save|restore|erase, the same way. */
bool srv_llama_route(struct srv *s, struct MHD_Connection *mc, const char *url,
		     const char *method, const struct srv_compat_in *in, enum MHD_Result *res);

#endif
