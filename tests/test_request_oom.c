/* The server's request path under allocation failure, in process on
 * SmolLM2 (skipped, 77, without it unless FX_REQUIRE_MODELS=1): for
 * requests with tools, response_format json_schema, a GBNF grammar, a
 * regex, stop strings, n > 1 with logprobs, tool-call history, json_object,
 * a schema sent as a string, a stream, and a speculative stream (ngram-simple
 * drafts verified and rolled back), the k-th heap
 * call fails (cJSON's through its hooks, PCRE2's through the tokenizer's
 * general context) in
 *   1. srv_request_build (body JSON -> options, constraint, template
 *      render, tool setup, tokenization), every k: a 500 error, or the
 *      request a clean build gives (same prompt tokens);
 *   2. the engine's run of the request (sampler, matcher, text, logprobs,
 *      SSE chunks), every k up to SWEEP_ALL, then every 5th (every 31st
 *      under FX_SANITIZE_RUN; ~0.2 s a run, 500-600 calls for n > 1 and
 *      the stream): the request
 *      fails whole (the HTTP side answers 500), or gives the clean run's
 *      output byte for byte; either way the same engine and context then
 *      serve it again with the clean output;
 *   3. srv_final_json over a finished request, every k: NULL (500) or the
 *      clean body;
 *   4. the /v1/models and /tokenize bodies (ids, and pieces: valid UTF-8
 *      or bytes), every k: NULL (500) or the clean body.
 * Nothing leaks (the ASan build's LeakSanitizer). The engine thread makes
 * the calls of step 2 while this thread waits on the request, so the
 * counter is only ever touched by one thread at a time (ordered by the
 * server's lock). malloc/calloc/realloc are wrapped (tests.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"
#include "server/server.h"

struct case_ {
	const char *name;
	enum srv_kind kind;
	const char *body;
};

static const struct case_ cases[] = {
	{ "tools", SRV_CHAT,
	  "{\"messages\":[{\"role\":\"system\",\"content\":\"You call tools.\"},"
	  "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Weather in Paris?\"}]}],"
	  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
	  "\"description\":\"Current weather\",\"parameters\":{\"type\":\"object\","
	  "\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}}}],"
	  "\"tool_choice\":\"required\",\"max_tokens\":10,\"temperature\":0}" },
	{ "json_schema", SRV_CHAT,
	  "{\"messages\":[{\"role\":\"user\",\"content\":\"A person as JSON.\"}],"
	  "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
	  "\"schema\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
	  "\"age\":{\"type\":\"integer\"}},\"required\":[\"name\",\"age\"]}}},"
	  "\"max_tokens\":8,\"temperature\":0}" },
	{ "grammar", SRV_COMPLETION,
	  "{\"prompt\":\"Is the sky blue? Answer:\",\"grammar\":\"root ::= \\\" \\\" (\\\"yes\\\" | "
	  "\\\"no\\\") \\\".\\\"\",\"max_tokens\":4,\"temperature\":0}" },
	{ "regex", SRV_COMPLETION,
	  "{\"prompt\":\"The year was\",\"structured_outputs\":{\"regex\":\" [12][0-9]{3}\"},"
	  "\"max_tokens\":6,\"temperature\":0}" },
	{ "stop", SRV_COMPLETION,
	  "{\"prompt\":\"1, 2, 3, 4,\",\"stop\":[\" 7\",\"\\n\\n\"],\"max_tokens\":12,"
	  "\"temperature\":0,\"echo\":true}" },
	{ "n3_logprobs", SRV_COMPLETION,
	  "{\"prompt\":\"Once upon a time\",\"n\":3,\"temperature\":0.9,\"seed\":7,\"max_tokens\":4,"
	  "\"logprobs\":2,\"frequency_penalty\":0.5,\"logit_bias\":{\"13\":-1}}" },
	{ "tool_history", SRV_CHAT,
	  "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
	  "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\","
	  "\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
	  "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},"
	  "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"18 C, sunny\"}],"
	  "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
	  "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}],"
	  "\"max_tokens\":6,\"temperature\":0}" },
	{ "json_object", SRV_COMPLETION,
	  "{\"prompt\":\"JSON:\",\"response_format\":{\"type\":\"json_object\"},\"max_tokens\":5,"
	  "\"temperature\":0}" },
	{ "guided_json_string", SRV_COMPLETION,
	  "{\"prompt\":\"JSON:\",\"guided_json\":\"{\\\"type\\\":\\\"array\\\"}\",\"max_tokens\":5,"
	  "\"temperature\":0}" },
	{ "stream", SRV_CHAT,
	  "{\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}],\"stream\":true,"
	  "\"stream_options\":{\"include_usage\":true},\"logprobs\":true,\"top_logprobs\":2,"
	  "\"max_tokens\":5,\"temperature\":0}" },
	{ "spec_stream", SRV_COMPLETION,
	  "{\"prompt\":\"a b c d e a b c d e a b c d e a b\",\"stream\":true,"
	  "\"speculative.type\":\"ngram-simple\",\"speculative.ngram_size_n\":2,"
	  "\"speculative.ngram_size_m\":4,\"max_tokens\":10,\"temperature\":0}" },
};

enum { SWEEP_ALL = 120 };

/* A server as fx_serve sets it up, without the HTTP daemon. */
static struct srv *server(struct fx_model *m)
{
	struct srv *s = calloc(1, sizeof(*s));
	struct fx_err err = { 0 };
	s->p = fx_server_default_params();
	s->model = m;
	s->model_name = "smollm2";
	s->n_vocab = fx_model_n_vocab(m);
	srv_gen_defaults(m, &s->gen_defaults);
	s->n_ctx_seq = 256;
	s->n_parallel = 4;
	s->max_queue = 16;
	s->chunk = 256;
	srv_metrics_init(&s->met);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = s->n_ctx_seq * 4;
	cp.n_seq_max = 4;
	cp.kv_layout = FX_KV_PAGED;
	cp.block_size = 16;
	cp.n_threads = 2;
	CHECKF(fx_context_create(m, &cp, &s->ctx, &err) == FX_OK, "context: %s", err.msg);
	s->can_spec = fx_context_can_roll_back(s->ctx);
	CHECKF(srv_engine_start(s, &err) == FX_OK, "engine: %s", err.msg);
	s->ready = true;
	return s;
}

static void server_free(struct srv *s)
{
	srv_engine_stop(s);
	fx_context_free(s->ctx);
	fx_grammar_vocab_free(s->gvocab);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void unref(struct srv *s, struct srv_req *r)
{
	pthread_mutex_lock(&s->lock);
	srv_req_unref_locked(r);
	pthread_mutex_unlock(&s->lock);
}

/* A clean build with a fixed id and time, so outputs compare byte for byte. */
static struct srv_req *build(struct srv *s, const struct case_ *c)
{
	struct srv_error e = { 0 };
	struct srv_req *r = srv_request_build(s, c->kind, c->body, strlen(c->body), &e);
	CHECKF(r != NULL, "%s: build: %d %s", c->name, e.status, e.msg);
	if (r) {
		snprintf(r->id, sizeof(r->id), "id-%s", c->name);
		r->created = 1;
	}
	return r;
}

/* Run r through the engine (the k-th heap call failing, k = -1: none) and
 * wait for it. Returns the output (SSE bytes or the final body; malloc'ed)
 * or NULL when the request failed. */
static char *run(struct srv *s, struct srv_req *r, long k, long *n_calls)
{
	calls = 0;
	fail_at = k;
	int busy = srv_submit(s, r);
	CHECK(busy == 0);
	pthread_mutex_lock(&s->lock);
	while (!busy && !r->done)
		pthread_cond_wait(&r->cond, &s->lock);
	fail_at = -1;
	*n_calls = calls;
	pthread_mutex_unlock(&s->lock);
	if (busy || r->failed)
		return NULL;
	if (r->g.stream)
		return r->out.p ? strdup(r->out.p) : strdup("");
	return srv_final_json(s, r);
}

/* Step 1: srv_request_build, every k. */
static void sweep_build(struct srv *s, const struct case_ *c, const struct srv_req *ref)
{
	long k, n_err = 0;
	for (k = 0;; k++) {
		struct srv_error e = { 0 };
		calls = 0;
		fail_at = k;
		struct srv_req *r = srv_request_build(s, c->kind, c->body, strlen(c->body), &e);
		bool reached = calls > k;
		fail_at = -1;
		if (!r) {
			n_err++;
			CHECKF(e.status == 500 && e.msg[0], "%s: build, failing call %ld: %d %s (%s), "
			       "want a 500", c->name, k, e.status, e.type, e.msg);
		} else {
			CHECKF(r->n_prompt == ref->n_prompt &&
			       !memcmp(r->prompt, ref->prompt, (size_t)r->n_prompt * sizeof(fx_token)) &&
			       !r->g.grammar == !ref->g.grammar && !r->tool == !ref->tool &&
			       r->g.n_stop == ref->g.n_stop && r->g.n == ref->g.n,
			       "%s: build past failing call %ld differs from a clean one", c->name, k);
			unref(s, r);
		}
		if (!reached)
			break;
	}
	printf("%s: build: %ld heap calls, each failed in turn: %ld refused (500)\n", c->name, k,
	       n_err);
	CHECK(n_err > 0);
}

/* Step 2: the engine's run, every k below SWEEP_ALL, then every stride-th. */
static void sweep_engine(struct srv *s, const struct case_ *c, const char *want, long stride)
{
	long k, n_fail = 0, n_calls = 0, tried = 0;
	for (k = 0;; k += k < SWEEP_ALL ? 1 : stride, tried++) {
		struct srv_req *r = build(s, c);
		if (!r)
			return;
		char *got = run(s, r, k, &n_calls);
		unref(s, r);
		if (!got) {
			n_fail++;
			/* the same engine and context serve it cleanly next */
			r = build(s, c);
			if (!r)
				return;
			got = run(s, r, -1, &(long){ 0 });
			unref(s, r);
			CHECKF(got && !strcmp(got, want), "%s: engine: after failing call %ld the clean "
			       "run gives %s", c->name, k, got ? got : "(failed)");
		} else {
			CHECKF(!strcmp(got, want), "%s: engine: run past failing call %ld gives\n%s\n"
			       "want\n%s", c->name, k, got, want);
		}
		free(got);
		if (n_calls <= k)
			break;
	}
	printf("%s: engine: %ld heap calls, %ld failed in turn: %ld requests failed (500)\n",
	       c->name, n_calls, tried + 1, n_fail);
	CHECK(n_fail > 0);
}

/* Step 3: the non-streaming body, every k. */
static void sweep_json(struct srv *s, const struct case_ *c, const struct srv_req *r,
		       const char *want)
{
	long k, n_null = 0;
	for (k = 0;; k++) {
		calls = 0;
		fail_at = k;
		char *js = srv_final_json(s, r);
		bool reached = calls > k;
		fail_at = -1;
		if (!js)
			n_null++;
		else
			CHECKF(!strcmp(js, want), "%s: final json past failing call %ld differs", c->name,
			       k);
		free(js);
		if (!reached)
			break;
	}
	printf("%s: final json: %ld heap calls: %ld refused\n", c->name, k, n_null);
	CHECK(n_null > 0);
}

/* Step 4: GET /v1/models and POST /tokenize's bodies, every k: NULL (the
 * handler's 500) or the clean body, never one missing a field. */
static void sweep_other(struct srv *s)
{
	static const char *const text[] = { "Hello, world", "caf\xc3\xa9 \xe2\x82\xac", "" };
	fx_token t[64];
	for (int w = 0; w < 1 + 2 * 3; w++) {
		size_t n = 0;
		bool pieces = w > 3;
		if (w)
			CHECK(fx_tokenize(s->model, text[(w - 1) % 3], strlen(text[(w - 1) % 3]), false,
					  false, t, 64, &n) == FX_OK);
		char *want = w ? srv_tokenize_json(s, t, n, pieces) : srv_models_json(s);
		CHECKF(want != NULL, "body %d: the clean build failed", w);
		long k, n_null = 0;
		for (k = 0; want; k++) {
			calls = 0;
			fail_at = k;
			char *js = w ? srv_tokenize_json(s, t, n, pieces) : srv_models_json(s);
			bool reached = calls > k;
			fail_at = -1;
			if (!js)
				n_null++;
			else
				CHECKF(!strcmp(js, want), "body %d past failing call %ld:\n%s\nwant\n%s", w, k,
				       js, want);
			free(js);
			if (!reached)
				break;
		}
		printf("%s body %d: %ld heap calls: %ld refused\n", w ? "tokenize" : "models", w, k, n_null);
		CHECK(!want || n_null > 0);
		free(want);
	}
}

int main(void)
{
	char buf[512];
	const char *path = check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", buf, sizeof(buf));
	if (!path)
		return check_failures ? check_exit() : 77;
	oom_hook_cjson();
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	if (fx_model_load(path, NULL, &m, &err)) {
		CHECKF(false, "%s: %s", path, err.msg);
		return check_exit();
	}
	struct srv *s = server(m);
	long stride = getenv("FX_SANITIZE_RUN") ? 31 : 5;
	const char *only = getenv("FX_OOM_CASE"); /* one case by name ("bodies": step 4) */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct case_ *c = &cases[i];
		if (only && strcmp(only, c->name))
			continue;
		struct srv_req *ref = build(s, c);
		if (!ref)
			continue;
		sweep_build(s, c, ref);
		long n = 0;
		char *want = run(s, ref, -1, &n);
		CHECKF(want != NULL, "%s: the clean run failed", c->name);
		if (want) {
			printf("%s: %s\n", c->name, want);
			sweep_engine(s, c, want, stride);
			if (!ref->g.stream)
				sweep_json(s, c, ref, want);
		}
		free(want);
		unref(s, ref);
	}
	if (!only || !strcmp(only, "bodies"))
		sweep_other(s);
	server_free(s);
	fx_model_free(m);
	return check_exit();
}
