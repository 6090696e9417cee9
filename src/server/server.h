/* The HTTP server's internals: requests, the engine loop that serves them,
 * and the metrics they feed.
 *
 * Threads. libmicrohttpd runs one thread per connection (http.c). Such a
 * thread parses and tokenizes its request, queues it (srv_submit) and then
 * blocks on the request's condition variable until the engine has produced
 * output (SSE bytes for a stream, a finished request otherwise). One engine
 * thread (engine.c) owns the fx_context: it admits queued choices into free
 * sequences between steps, runs one fx_batch_decode per step over every
 * running choice (a decode row each, plus prompt chunks of prefilling ones),
 * samples, matches stop strings and publishes the results.
 *
 * Locking: one mutex, struct srv.lock, guards the queue, every request's
 * shared fields (marked "lock" below), the counters and the histograms.
 * Fields marked "engine" belong to the engine thread while the request is
 * queued or running; the HTTP thread reads them only after `done`.
 *
 * Includes only ferrox.h among the project's headers (server sees only the
 * public API, as tools do).
 */
#ifndef FX_SERVER_SERVER_H
#define FX_SERVER_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "ferrox.h"

/* ---- growable byte buffer ---- */
struct srv_buf {
	char *p; /* [cap], NUL-terminated after n bytes; NULL when empty */
	size_t n, cap;
};
/* Append n bytes; false on allocation failure (the buffer is unchanged). */
bool srv_buf_add(struct srv_buf *b, const void *s, size_t n);
void srv_buf_free(struct srv_buf *b);

/* JSON bodies (respond.c). srv_json_take: o printed unformatted
 * (malloc'ed), or NULL when !ok or o is NULL or printing fails; o is
 * deleted either way (ok: false once any step of building o failed).
 * srv_sse_event: "data: <o>\n\n" appended to out, whole or not at all
 * (false: out of memory, out unchanged); o deleted. */
char *srv_json_take(cJSON *o, bool ok);
bool srv_sse_event(struct srv_buf *out, cJSON *o, bool ok);

/* ---- request parameters (request.c) ---- */

#define SRV_MAX_STOP 16       /* more stop strings: 400 */
#define SRV_MAX_STOP_LEN 256  /* bytes per stop string */
#define SRV_MAX_N 16          /* choices per request */
#define SRV_MAX_TOP_LOGPROBS 20
#define SRV_SPEC_STEP_MAX 32  /* drafts verified per choice and step, at most: the
			       * paged layout can always roll back this far
			       * (fx_seq_rm), sliding windows included */

enum srv_kind { SRV_COMPLETION, SRV_CHAT };

struct srv_gen {
	int32_t max_tokens;      /* -1: until the context is full */
	float temperature;       /* 1.0 (OpenAI's default); 0: greedy */
	float top_p, min_p;      /* 1.0 (off), 0 (off) */
	int32_t top_k;           /* 0 (off) */
	float repeat_penalty;    /* 1.0 (off); over the prompt and the output */
	int32_t repeat_last_n;   /* 64; -1: the whole context */
	uint64_t seed;
	bool has_seed;
	float presence, frequency;  /* penalties, OpenAI's definition */
	int32_t n_bias;
	fx_token *bias_id;       /* [n_bias] */
	float *bias_val;         /* [n_bias], added to the logit */
	char *stop[SRV_MAX_STOP];
	int n_stop;
	int n;                   /* choices */
	bool logprobs;
	int top_logprobs;        /* 0..20 */
	bool stream, include_usage;
	bool echo;               /* completions: prepend the prompt to the text */
	bool ignore_eos;         /* llama.cpp's extension: generate past end-of-text
				  * tokens (benchmarks with fixed lengths) */
	struct fx_grammar *grammar; /* owned, or NULL: the output's constraint
				     * (constrain.c), shared by the choices */
	struct fx_spec_params spec; /* speculative decoding: the server's
				     * (fx_server_params.spec) under the request's
				     * speculative.* fields; types 0 or n_max 0: off */
};

/* An HTTP-visible failure: status and OpenAI error fields. */
struct srv_error {
	int status;           /* 400, 401, 404, 413, 503, 500 */
	const char *type;     /* "invalid_request_error", ... (static) */
	const char *param;    /* offending field or NULL (static) */
	char msg[256];
};
void srv_error_set(struct srv_error *e, int status, const char *type, const char *param,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A request's sampling defaults: OpenAI's (temperature 1, top_k / top_p /
 * min_p / repetition penalty off, repeat_last_n 64), then model m's own
 * (generation_config.json / general.sampling.*) when m is not NULL. */
void srv_gen_defaults(const struct fx_model *m, struct fx_sampler_params *d);
/* Read the generation options of a completion or chat request body into g
 * (zero-initialised by the caller; free with srv_gen_fini). n_vocab bounds
 * logit_bias ids; what the body leaves out comes from defaults
 * (srv_gen_defaults; NULL: OpenAI's). Sampling fields: OpenAI's, plus
 * top_k, min_p (both servers), repetition_penalty (vLLM), repeat_penalty and
 * repeat_last_n (llama-server). Returns false with e filled (400) on a wrong
 * type or value. */
bool srv_gen_parse(const cJSON *body, enum srv_kind kind, int32_t n_vocab,
		   const struct fx_sampler_params *defaults, struct srv_gen *g, struct srv_error *e);
void srv_gen_fini(struct srv_gen *g);
/* constrain.c: response_format, grammar, json_schema, structured_outputs
 * and guided_* into g->grammar (at most one of them); false with e filled
 * (400 naming the field) on a bad or unsupported schema, regex or grammar. */
bool srv_constraint_parse(const cJSON *body, struct srv_gen *g, struct srv_error *e);
/* request.c: g->spec from defaults (the server's) and llama-server's request
 * fields speculative.n_max, .n_min, .p_min (checked, unused: ngram-simple has
 * no draft probabilities), .type, .ngram_size_n and .ngram_size_m; false
 * with e filled (400 naming the field) on a wrong type or range. */
bool srv_spec_parse(const cJSON *body, const struct fx_spec_params *defaults, struct srv_gen *g,
		    struct srv_error *e);
/* Optional boolean field key of body into *out (left as is when absent or
 * null); false with e filled (400) when it is not a boolean. */
bool srv_json_bool(const cJSON *body, const char *key, bool *out, struct srv_error *e);
/* cJSON_ParseWithLengthOpts(text, n) that tells bad JSON from a failed
 * allocation (cJSON returns NULL for both): a failed parse is repeated
 * once; bad JSON breaks at the same byte again (*oom false, *end that
 * byte), anything else is memory (*oom true). *end: where the value ended
 * on success. */
cJSON *srv_json_parse(const char *text, size_t n, size_t *end, bool *oom);
/* true when s[0..n) is well-formed UTF-8. */
bool srv_utf8_valid(const char *s, size_t n);

/* ---- requests ---- */

struct srv_req;

/* One completion choice: one sequence in the context while running. */
struct srv_choice {
	struct srv_req *req;
	int index;
	/* engine */
	int slot;                  /* running slot, -1 while queued */
	fx_seq seq;
	int32_t n_fed;             /* prompt tokens fed to the context */
	fx_token last;             /* sampled token still to feed */
	struct fx_sampler *smp;
	struct fx_matcher *matcher; /* NULL unless the request has a grammar */
	struct fx_detok dt;
	int32_t *counts;           /* [n_vocab] or NULL: generated-token counts
				    * for presence/frequency penalties */
	int32_t n_gen;             /* tokens generated (incl. the one ending it) */
	struct srv_buf text;       /* generated text, cut at a stop string */
	size_t n_sent;             /* bytes of text already streamed */
	cJSON *lp;                 /* logprobs entries not yet streamed (array) */
	cJSON *lp_all;             /* non-streaming: every entry (array) */
	const char *finish;        /* "stop", "length", NULL while running */
	double t_first, t_last;    /* seconds (monotonic) of first/last token */
	double t_prev;             /* of the last token before the last step's */
	bool hit_stop;             /* text was cut at a stop string */
	bool role_sent;            /* chat stream: the first delta went out */
	/* speculative decoding (engine.c); hist is NULL when the choice
	 * decodes plainly */
	fx_token *hist;            /* [hist_cap]: prompt, then every sampled token */
	int32_t n_hist, hist_cap;
	fx_token draft[SRV_SPEC_STEP_MAX]; /* this step's drafts, after last */
	int32_t n_draft;           /* of them in this step's batch */
	int32_t draft_len;         /* the next draft's length, at most: the accepted run + 1
				    * after a step, doubled after a wholly accepted one
				    * (fx_spec_drafter's rule) */
	int32_t step_gen;          /* tokens sampled this step */
	int64_t draft_n, draft_n_accepted; /* drafted, and kept, over the choice
					    * (llama-server's timings) */
	/* llama-server's fields (llama.c) and the slot's record (engine) */
	fx_token *toks;            /* [toks_cap]: every token sampled, in order */
	int32_t n_toks, toks_cap;
	int32_t n_toks_sent;       /* native stream: tokens already in a chunk */
	int32_t n_cached;          /* prompt tokens served from the prefix cache */
	int id_slot;               /* the slot it ran in; -1: never admitted */
	int stop_idx;              /* the stop string that cut the text (hit_stop) */
	double t_admit;            /* monotonic seconds it got its slot */
};

struct srvtool_req;

struct srv_req {
	enum srv_kind kind;
	struct srv_gen g;
	struct srvtool_req *tool;  /* chat: tool calls / reasoning to parse out of
				    * the reply (tools.h), or NULL: plain text */
	bool detok_special;        /* show control tokens in the text (the call
				    * format's markers are control tokens) */
	fx_token *prompt;          /* [n_prompt] */
	int32_t n_prompt;
	char *prompt_text;         /* completions with echo: the prompt text */
	char id[48];
	uint64_t n_id;             /* the server's request counter (llama-server's id_task) */
	bool native;               /* llama-server's /completion: its body and SSE shapes
				    * (llama.c) instead of OpenAI's */
	bool return_tokens;        /* native: "tokens" lists the sampled ids */
	int want_slot;             /* native id_slot: the slot to run in; -1: any free one */
	int64_t created;           /* Unix seconds */
	double t_arrive;           /* monotonic seconds */
	const char *model_name;    /* borrowed from struct srv */
	struct srv_choice *ch;     /* [g.n] */
	/* lock */
	int next_admit;            /* choices handed to slots so far */
	int n_done;                /* finished choices */
	bool done;                 /* every choice finished: output complete */
	bool cancelled;            /* the client went away */
	bool failed;               /* a choice failed in the engine (set with done) */
	int refs;                  /* HTTP side + engine side */
	struct srv_buf out;        /* streaming: SSE bytes ready to send */
	size_t out_off;            /* bytes of out already handed to MHD */
	pthread_cond_t cond;       /* signalled when out grows or done is set */
	struct srv_req *next;      /* queue link */
};

/* ---- metrics (metrics.c), guarded by srv.lock ---- */

struct srv_hist {
	const double *le;  /* [n] upper bounds, ascending (+Inf implied) */
	int n;
	uint64_t count[24];/* [n + 1]: per bucket, not cumulative; last = +Inf */
	double sum;
};
void srv_hist_add(struct srv_hist *h, double v);

struct srv_metrics {
	uint64_t req_stop, req_length, req_abort; /* finished requests by finish reason
						   * (of the last choice); abort: cancelled
						   * or failed */
	uint64_t prompt_tokens, gen_tokens;
	uint64_t prefix_queries;        /* prompt tokens of admitted choices */
	int64_t prefix_hits;            /* fx_context_prefix_hits after the last step */
	uint64_t steps, step_rows;
	uint64_t spec_drafts, spec_draft_tokens, spec_accepted; /* steps that verified
								 * drafts; drafted; kept */
	int32_t blocks_used, blocks_total;
	int running, waiting;           /* choices */
	uint64_t kv_batches, kv_dropped, kv_events; /* KV-event batches sent and
						     * dropped, events (srv_kvev_stats) */
	struct srv_hist ttft, itl, e2e, step_seqs, step_time;
};
void srv_metrics_init(struct srv_metrics *m);
/* Prometheus text exposition (format 0.0.4) into out. */
bool srv_metrics_text(const struct srv_metrics *m, const char *model_name, struct srv_buf *out);

/* ---- llama-server's slots (llama.c) ---- */

/* The sampling settings llama-server shows (/props, /slots, a native
 * response's generation_settings). */
struct srv_params_view {
	int32_t n_predict, top_k, repeat_last_n;
	float temperature, top_p, min_p, repeat_penalty, presence, frequency;
	uint64_t seed;
	bool has_seed, stream, ignore_eos;
};
void srv_params_of(const struct srv_gen *g, struct srv_params_view *v);

/* A slot: one of the n_parallel places a choice runs in. Guarded by
 * srv.lock; written by the engine thread only. The tokens are what the
 * slot's sequence held when its last request ended (prompt, then the
 * output fed back), or what a restore loaded: the sequence itself is freed
 * at the end of each request, and its full blocks stay in the paged
 * layout's prefix cache, which is what serves the slot's next prompt. */
struct srv_slot {
	bool busy;
	uint64_t id_task;
	fx_token *tok;             /* [cap] */
	int32_t n_tok, cap;
	int32_t n_prompt, n_cached, n_decoded;
	bool has_task;             /* a request ran (params, n_prompt valid) */
	struct srv_params_view params;
};

/* POST /slots/{id}?action=...: queued by an HTTP thread, run by the
 * engine thread when the slot is idle (llama-server defers the same way). */
enum srv_slot_act { SRV_SLOT_SAVE, SRV_SLOT_RESTORE, SRV_SLOT_ERASE };
struct srv_slot_task {
	enum srv_slot_act act;
	int id_slot;
	const char *filename;      /* borrowed from the HTTP thread */
	char *path;                /* --slot-save-path/filename (owned by the HTTP thread) */
	/* results, under the lock */
	bool done;
	int status;                /* 200, or the HTTP error status */
	char msg[400];
	int64_t n_tokens;
	uint64_t n_bytes;
	double ms;
	pthread_cond_t cond;       /* signalled with done */
	struct srv_slot_task *next;
};
/* ---- embeddings (embed.c) ---- */

struct srv;

#define SRV_EMBED_MAX_INPUTS 2048 /* inputs per request (OpenAI's limit) */
#define SRV_EMBED_SEQS 16         /* inputs embedded together in one engine step, at most */

/* One POST /v1/embeddings request: its inputs' ids, queued for the engine
 * thread, which embeds them a few per step (srv_emb_step) between
 * generation steps and marks the request done. */
struct srv_emb {
	struct srv_emb *next;    /* lock: the embedding queue */
	int refs;                /* lock: the HTTP thread's and the engine's */
	bool done, cancelled;    /* lock */
	pthread_cond_t cond;     /* done was set */
	int32_t n_in;
	int32_t **tok;           /* [n_in] each input's ids (owned) */
	int32_t *n_tok;          /* [n_in] */
	int32_t next_in;         /* lock: inputs handed to engine steps so far */
	int32_t n_done;          /* engine: inputs embedded */
	int rc;                  /* engine: FX_OK or the first failure */
	float *out;              /* [n_in, n_embd] unit vectors; engine: written before done */
};
/* Queue e for the engine (takes a reference for it). Returns 0, or 503
 * (not ready, draining) or 429 (the queue is full: --queue). */
int srv_emb_submit(struct srv *s, struct srv_emb *e);
/* Drop one reference; the last frees e. Call with s->lock held. */
void srv_emb_unref_locked(struct srv_emb *e);
/* Engine thread, no lock held: embed the next queued inputs on s->ectx:
 * up to SRV_EMBED_SEQS, about chunk tokens while generation streams
 * decode (decoding), twice that when none does, at least one input. */
void srv_emb_step(struct srv *s, bool decoding);
/* At load, with --embeddings: s->ectx and its sequences. fx_context_create's errors. */
int srv_emb_open(struct srv *s, struct fx_err *err);

/* ---- the server ---- */

struct srv {
	struct fx_server_params p;
	const char *model_name;        /* file name of the model */
	struct fx_model *model;        /* NULL while loading */
	struct fx_context *ctx;        /* engine thread only */
	struct fx_grammar_vocab *gvocab; /* engine thread only: built on the first
					  * constrained request */
	int32_t n_vocab;
	struct fx_sampler_params gen_defaults; /* a request's sampling defaults
						* (srv_gen_defaults) */
	uint32_t n_ctx_seq;            /* tokens per choice */
	uint32_t block_size;           /* paged KV block size */
	int32_t n_parallel, max_queue;
	int32_t chunk;                 /* prompt tokens per step, all prefills together;
					* also the drafts verified per step, all
					* choices together */
	bool can_spec;                 /* the context can roll drafts back */
	struct fx_context *ectx;       /* engine thread only: embeddings (--embeddings), or NULL */
	float *e_out;                  /* engine: [SRV_EMBED_SEQS, n_embd] a step's vectors */
	struct srv_emb *e_head, *e_tail; /* lock: the embedding queue */
	int n_emb_queued;              /* lock */
	pthread_t engine;
	bool engine_started;
	pthread_mutex_t lock;
	pthread_cond_t wake;           /* engine: queue grew, a cancel, or stop */
	/* lock */
	bool ready;                    /* model loaded, engine running */
	bool draining;                 /* refuse new work, finish the rest */
	bool stop_engine;              /* engine: exit once idle */
	struct srv_req *q_head, *q_tail;
	int n_queued;                  /* requests waiting for a first slot */
	int n_http;                    /* requests an HTTP thread still holds */
	double t_refused;              /* when srv_submit last refused work because of
					* the drain (srv_drain_linger) */
	struct srv_metrics met;
	uint64_t id_counter;
	struct srv_kvev *kvev;         /* KV-cache events, or NULL: off */
	uint64_t *kv_held;             /* lock: the context's held block hashes after
					* the last step that had events
					* (fx_context_kv_held), for GET /kv_cache_blocks */
	int64_t n_kv_held, kv_held_cap;
	uint64_t kv_held_seq;          /* lock: batches queued when kv_held was taken */
	struct srv_slot *slots;        /* lock: [n_parallel] */
	struct srv_slot_task *sl_head; /* lock: slot actions waiting for the engine */
};

double srv_now(void); /* monotonic seconds */

/* kv_events.c: the KV-cache event publisher (vLLM's wire format). */
struct srv_kvev;
struct srv_kvev_params {
	const char *endpoint;        /* PUB, bound (vLLM: port 5557, every interface) */
	const char *replay_endpoint; /* ROUTER, bound, or NULL: no replays */
	const char *topic;           /* first frame of every message ("") */
	int32_t buffer_steps;        /* batches kept for replays (10000) */
	int32_t hwm;                 /* PUB high-water mark, messages (100000) */
	int32_t max_queue;           /* batches the engine may queue ahead of the
				      * publisher thread, then the oldest is dropped */
};
/* From p's kv_events_config (vLLM's --kv-events-config JSON) overridden by
 * its kv_events_endpoint / _replay / _topic: *out is the started publisher,
 * or NULL when events are off. Errors, with a message in why: FX_E_INVALID
 * (bad JSON, a field of the wrong type), FX_E_UNSUPPORTED (a publisher
 * other than zmq), FX_E_IO (an endpoint that cannot be bound), FX_E_NOMEM. */
int srv_kvev_open(const struct fx_server_params *p, struct srv_kvev **out, char *why, size_t nwhy);
int srv_kvev_start(const struct srv_kvev_params *p, struct srv_kvev **out, char *why, size_t nwhy);
/* Engine thread, after a step: the context's new events as one batch,
 * queued for the publisher thread. Returns whether there were any (NULL
 * k: false). */
bool srv_kvev_collect(struct srv_kvev *k, struct fx_context *ctx);
/* Counters: batches sent and dropped, events encoded, the next batch's
 * sequence number. Any thread. */
void srv_kvev_stats(struct srv_kvev *k, uint64_t *published, uint64_t *dropped,
		    uint64_t *events, uint64_t *next_seq);
const char *srv_kvev_endpoint(const struct srv_kvev *k, bool replay); /* replay: may be NULL */
const char *srv_kvev_topic(const struct srv_kvev *k);
/* Sends what is queued, closes the sockets, frees k (NULL: nothing). */
void srv_kvev_stop(struct srv_kvev *k);
struct srv;
/* GET /kv_event_sources (vLLM's discovery shape for vllm-router): [] when
 * events are off, else [{"data_parallel_rank": 0, "endpoint", "replay_endpoint",
 * "topic"}] with a wildcard host made reachable. NULL: out of memory. */
cJSON *srv_kv_event_sources_json(const struct srv *s);
/* GET /kv_cache_blocks: the server's own view of its announced blocks,
 * {"block_size", "events", "batches_dropped", "seq", "hashes": [u64...]}
 * (hashes as of the last step with events; seq: batches queued by then).
 * NULL: out of memory. */
cJSON *srv_kv_blocks_json(struct srv *s);

/* engine.c */
/* Start the engine thread over s->ctx. Returns FX_OK or FX_E_NOMEM. */
int srv_engine_start(struct srv *s, struct fx_err *err);
/* Tell the engine to finish its work and exit; join it. */
void srv_engine_stop(struct srv *s);
/* Queue r (refs already counts the caller). Under no lock. Returns 0, or
 * 503 when draining or the queue is full. Takes a reference for the engine. */
int srv_submit(struct srv *s, struct srv_req *r);
/* compat.c: after a drain, keep the listener open (answering 503, which
 * routers retry on another worker) while work still arrives: until none
 * was refused for 1 s, at most 10 s. A router that keeps a replica until
 * its next health check would otherwise meet a closed socket, an error it
 * may not retry. No wait when nothing was refused. */
void srv_drain_linger(struct srv *s);
/* Drop one reference; the last frees r. Call with s->lock held. */
void srv_req_unref_locked(struct srv_req *r);
/* Allocate a request with n choices and one reference (the caller's). */
struct srv_req *srv_req_new(struct srv *s, enum srv_kind kind);

/* prompt.c: fill r->prompt / r->n_prompt (and r->prompt_text for echo)
 * from a parsed body; false with e filled (400 naming the field, 500 on
 * allocation failure). */
bool srv_completion_prompt(struct srv *s, const cJSON *body, struct srv_req *r,
			   struct srv_error *e);
bool srv_chat_prompt(struct srv *s, const cJSON *body, struct srv_req *r, struct srv_error *e);

/* respond.c: JSON bodies */
/* http.c: a completion (kind) request from its body text[0..n): parsed,
 * its options read, its prompt rendered and tokenized, its choices
 * allocated (one reference, the caller's; not queued). NULL with e filled:
 * 400 naming the field, 500 when memory ran out. The HTTP handler's first
 * half, callable without a connection (tests/test_request_oom.c). */
struct srv_req *srv_request_build(struct srv *s, enum srv_kind kind, const char *text, size_t n,
				  struct srv_error *e);
/* The same for llama-server's POST /completion (native: its options and
 * prompt forms, llama.c) or, native false, srv_request_build. */
struct srv_req *srv_request_build_ex(struct srv *s, enum srv_kind kind, bool native,
				     const char *text, size_t n, struct srv_error *e);

/* llama.c: llama-server's own endpoints. */
/* native /completion options: n_predict (-1: until the context is full;
 * the default), return_tokens, cache_prompt (always on here: the prefix
 * cache), id_slot (the request waits for that slot; -1: any); n must be 1. */
bool srv_native_opts(const struct srv *s, const cJSON *body, struct srv_req *r,
		     struct srv_error *e);
/* native prompt: a string, token ids, or one list mixing both (strings
 * tokenized, the first one with BOS as the model asks); fills r->prompt
 * and r->prompt_text (the prompt's text, for the "prompt" field). */
bool srv_native_prompt(struct srv *s, const cJSON *body, struct srv_req *r, struct srv_error *e);
/* The final body of a finished native request (llama-server's shape). */
char *srv_native_final_json(const struct srv *s, const struct srv_req *r);
/* Stream events of a native request: {"content", "tokens", "stop": false,
 * ...} for new text; when c finished, then the final object (stop true,
 * content "", timings). No [DONE]. */
bool srv_native_sse(const struct srv_req *r, const struct srv_choice *c, const char *text,
		    size_t n, struct srv_buf *out);
/* GET /props, GET /slots (malloc'ed; NULL: out of memory). */
char *srv_props_json(const struct srv *s);
char *srv_slots_json(struct srv *s);
/* Engine thread: run t (its slot idle) with seq, an empty sequence it may
 * use and then frees; fills t's results (not done: the caller sets it). */
void srv_slot_run(struct srv *s, struct srv_slot_task *t, fx_seq seq);
/* Engine thread, lock held: a choice took slot i / ended there. */
void srv_slot_begin_locked(struct srv *s, int i, const struct srv_choice *c);
void srv_slot_end_locked(struct srv *s, int i, const struct srv_choice *c);

/* The non-streaming body of a finished request (engine fields readable). */
char *srv_final_json(const struct srv *s, const struct srv_req *r);
/* Append SSE events for choice c: text delta (may be empty with a finish),
 * its logprobs and finish reason. Called by the engine with the lock held. */
bool srv_sse_chunk(const struct srv_req *r, const struct srv_choice *c, const char *text,
		   size_t n, bool first, struct srv_buf *out);
/* Final events: an error event if the engine failed a choice, the usage
 * chunk when asked, then "data: [DONE]". */
bool srv_sse_end(const struct srv_req *r, struct srv_buf *out);
/* s[0..n) as a JSON string, bytes that are not UTF-8 as U+FFFD (a token
 * may end inside a character); NULL: out of memory. */
cJSON *srv_json_text(const char *s, size_t n);
/* {"error":{...}} for e. malloc'ed. */
char *srv_error_json(const struct srv_error *e);
/* The bodies of GET /v1/models and POST /tokenize (llama.cpp's shapes:
 * {"tokens": [id, ...]}, or [{"id", "piece"}, ...] with pieces, a piece
 * that is not valid UTF-8 as its bytes). malloc'ed; NULL when memory ran
 * out (a 500), never a body missing a field. */
char *srv_models_json(const struct srv *s);
char *srv_tokenize_json(const struct srv *s, const fx_token *t, size_t n, bool pieces);
/* A logprobs entry for token t chosen from logits (raw, [n_vocab]). */
cJSON *srv_logprob_entry(const struct srv *s, const struct srv_req *r, const float *logits,
			 fx_token t);

#endif
