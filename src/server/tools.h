/* Tool calling and reasoning output for /v1/chat/completions.
 *
 * A chat template implies how its model writes tool calls (Hermes'
 * <tool_call>{json}</tool_call>, Mistral's [TOOL_CALLS], gpt-oss's
 * channels, ...). The formats are data: a table of markers and keys,
 * chosen by markers found in the template's source text, the way
 * llama.cpp's common/chat.cpp picks its chat handlers. A handful of
 * parser families read them:
 *
 *   JSON_EACH   OPEN {"name": N, "arguments": {..}} CLOSE, repeated
 *   JSON_LIST   OPEN [ {"name": N, "arguments": {..}}, ... ] CLOSE
 *   JSON_BARE   the whole reply is {"name": N, "parameters": {..}} (Llama 3.x)
 *   NAME_ARGS   [SECT_OPEN] OPEN N NAME_END {..} CLOSE ... [SECT_CLOSE]
 *   XML_PARAMS  SECT_OPEN OPEN N NAME_END (P_OPEN K P_END value P_CLOSE)* CLOSE SECT_CLOSE
 *   GPT_OSS     harmony channels (analysis / final / commentary to=functions.N)
 *   GENERIC     {"tool_calls": [..]} | {"tool_call": {..}} | {"response": ".."}
 *
 * One parse function serves both the final reply and streaming: called
 * with partial = true on the text generated so far, it returns only what
 * no continuation can contradict (a marker prefix, trailing whitespace, a
 * call without its full name are held back), so that the deltas of
 * successive parses concatenate to the final parse (srvtool_delta).
 * Arguments are the model's JSON with whitespace outside strings removed
 * (compact; numbers and escapes spelled as the model spelled them).
 *
 * Includes only server.h (ferrox.h and cJSON): server code sees the
 * public API only.
 */
#ifndef FX_SERVER_TOOLS_H
#define FX_SERVER_TOOLS_H

#include "server/server.h"

enum srvtool_family {
	SRVTOOL_GENERIC,
	SRVTOOL_JSON_EACH,
	SRVTOOL_JSON_LIST,
	SRVTOOL_JSON_BARE,
	SRVTOOL_NAME_ARGS,
	SRVTOOL_XML_PARAMS,
	SRVTOOL_GPT_OSS,
};

/* One call format. Unused strings are NULL. Markers other than the
 * opening one are matched loosely: whitespace in the marker matches any
 * run of whitespace (or none) in the output, and whitespace before a
 * marker is skipped. */
struct srvtool_format {
	const char *name;           /* id used in docs/TOOLS.md and tests */
	const char *detect[2];      /* all must occur in the template source */
	enum srvtool_family family;
	const char *sect_open, *sect_close;  /* around all calls */
	const char *call_open, *call_close;  /* around one call */
	const char *list_pre;       /* JSON_LIST: optional text before '[' */
	const char *name_end;       /* NAME_ARGS / XML_PARAMS: after the name */
	const char *id_marker;      /* NAME_ARGS: optional "[CALL_ID]" ID before name_end */
	const char *name_key;       /* JSON families: "name" */
	const char *args_key[2];    /* JSON families: "arguments", "parameters" */
	const char *name_prefix;    /* stripped from names ("functions."); with
				     * name_index, ":N" is stripped too */
	bool name_index;
	const char *param_open, *param_name_end, *param_close; /* XML_PARAMS */
	const char *alt_open;       /* a second opening marker ("<|python_tag|>") */
	bool py_calls;              /* JSON_LIST: elements may be N(k=v, ...) */
	const char *think_open, *think_close; /* reasoning block, or NULL */
	bool special;               /* markers are control tokens: detokenize
				     * with special tokens shown */
	bool id9;                   /* call ids of 9 letters and digits (Mistral's
				     * templates refuse others in the history) */
};

/* The format the template tmpl (Jinja source) implies: the first table
 * entry whose detect markers all occur in it, else the generic JSON
 * format. think markers are also set for templates with no call format
 * that use <think>. Never NULL. */
const struct srvtool_format *srvtool_detect(const char *tmpl);
/* Table access for tests and docs: entry i (NULL past the end), by name. */
const struct srvtool_format *srvtool_format_at(int i);
const struct srvtool_format *srvtool_format_named(const char *name);

/* llama-server's --reasoning-format: none leaves the thinking in content;
 * auto and deepseek move it to reasoning_content. */
enum srvtool_reasoning { SRVTOOL_RF_AUTO, SRVTOOL_RF_NONE, SRVTOOL_RF_DEEPSEEK };

struct srvtool_opts {
	const struct srvtool_format *fmt;
	bool calls;             /* look for tool calls (tools given, choice != none) */
	bool reasoning;         /* split the thinking out into reasoning */
	bool in_reasoning;      /* the generation prompt opened the thinking block,
				 * so the reply starts inside it (R1, QwQ) */
	const cJSON *tools;     /* the request's tools, for XML parameter types;
				 * borrowed, may be NULL */
	int max_calls;          /* 1: parallel_tool_calls false (a second call
				 * stays text); 0: SRVTOOL_MAX_CALLS */
};

struct srvtool_call {
	char *id;               /* as the model wrote it (Kimi, Mistral), or NULL */
	char *name;             /* complete; a call has no entry before that */
	struct srv_buf args;    /* compact JSON text, or its stable prefix */
	bool done;              /* args complete */
};

struct srvtool_msg {
	struct srv_buf content, reasoning;
	struct srvtool_call *calls;
	int n_calls, cap_calls;
	bool id9;               /* the format's ids are 9 alphanumerics */
};

#define SRVTOOL_MAX_CALLS 64   /* calls per reply; more are left in content */

/* Parse text[0..n) (the reply so far; partial: more may follow) into m
 * (zeroed by the caller; free with srvtool_msg_free). Never fails on
 * input: what is not a well-formed call is content. false only when
 * memory ran out. */
bool srvtool_parse(const struct srvtool_opts *o, const char *text, size_t n, bool partial,
		   struct srvtool_msg *m);
void srvtool_msg_free(struct srvtool_msg *m);

/* What a stream has sent of one choice's message. Zero-initialised. */
struct srvtool_sent {
	size_t content, reasoning;   /* bytes */
	int n_calls;                 /* calls whose header (id, name) went out */
	size_t args[SRVTOOL_MAX_CALLS];
	bool diverged;               /* a parse disagreed with what was sent */
	size_t scanned;              /* lazy grammar: text searched for triggers */
};

/* Add to delta (a chat.completion.chunk "delta" object) what m has beyond
 * st: "content", "reasoning_content", "tool_calls" [{index, id, type,
 * function {name, arguments}}] pieces; update st. id_base names the
 * calls that carry no id of their own (srvtool_call_id). A parse that
 * contradicts what was sent (only possible for malformed text the parser
 * accepted earlier) sets st->diverged and sends nothing contradicting.
 * Returns false on allocation failure. */
bool srvtool_delta(const struct srvtool_msg *m, const char *id_base, struct srvtool_sent *st,
		   cJSON *delta);
/* The id of call i: the model's, else "call_" + a 24-character digest of
 * id_base and i (9 alphanumerics for Mistral's formats); stable across
 * parses, so stream and final agree. */
void srvtool_call_id(const struct srvtool_msg *m, int i, const char *id_base, char out[64]);

/* ---- the request side ---- */

enum srvtool_choice { SRVTOOL_CHOICE_AUTO, SRVTOOL_CHOICE_NONE, SRVTOOL_CHOICE_REQUIRED,
		      SRVTOOL_CHOICE_NAMED };

/* A chat request's tool and reasoning settings (prompt.c fills it). */
struct srvtool_req {
	struct srvtool_opts o;
	cJSON *tools;                /* owned copy of the validated tools, or NULL */
	enum srvtool_choice choice;
	char *forced;                /* SRVTOOL_CHOICE_NAMED: the function's name */
	bool parallel;               /* parallel_tool_calls (default true) */
	enum srvtool_reasoning rf;
	char *grammar;               /* GBNF for the calls (srvtool_grammar), or NULL */
	char **triggers;             /* lazy grammar: its opening markers */
	int n_triggers;
	bool lazy;                   /* the grammar starts at a trigger (auto) */
	struct fx_grammar *lazy_g;   /* compiled lazy grammar, or NULL */
	struct srvtool_sent *sent;   /* [n choices] streaming state */
	int n_sent;
};

/* Validate body's tools / tool_choice / parallel_tool_calls /
 * reasoning_format (default rf_default: the server's --reasoning-format,
 * NULL = auto) for a model whose template is tmpl, and build the
 * request's settings into *out (NULL when the request has neither tools
 * nor a reasoning format to parse). n_choices sizes the stream state.
 * 400 in e naming the field: tools not a list of {"type": "function",
 * "function": {"name": ^[A-Za-z0-9_.-]{1,64}$, "parameters": object}},
 * duplicate names, tool_choice not one of "none" "auto" "required"
 * {"type": "function", "function": {"name": N}} or naming a tool not in
 * tools. 500 on allocation failure. */
bool srvtool_req_parse(const cJSON *body, const char *tmpl, const char *rf_default,
		       int n_choices, struct srvtool_req **out, struct srv_error *e);
void srvtool_req_free(struct srvtool_req *t);
/* Set t->o.in_reasoning from the rendered prompt: it ends (whitespace
 * aside) with the format's thinking marker, as R1's and QwQ's generation
 * prompts do, so the reply starts inside the thinking. */
void srvtool_prompt_opened(struct srvtool_req *t, const char *prompt, size_t n);

/* The messages array as the template should see it (a modified copy of
 * msgs, which is not changed): each assistant tool_calls[].function.arguments
 * given as a JSON string is parsed into an object (transformers and vLLM
 * do the same, and templates index into it). 400 naming the message when
 * such a string is not a JSON object, or tool_calls is malformed. */
bool srvtool_fix_history(cJSON *msgs_copy, struct srv_error *e);

/* GBNF text for the calls the request allows, in t's format: each tool's
 * parameters through fx_json_schema_to_gbnf (root "tool<i>-args"), the
 * format's markers around them, one call or (parallel) several; for
 * "auto" the grammar is lazy and t->triggers lists the opening markers.
 * Stores it in t->grammar. Errors: FX_E_INVALID (a schema the converter
 * refuses, with its message), FX_E_NOMEM, FX_E_UNSUPPORTED (a format
 * without a grammar: the calls are then only parsed). */
int srvtool_grammar(struct srvtool_req *t, struct fx_err *err);

/* Build and install r's call grammar (prompt.c, after srvtool_req_parse):
 * "required" / a named function: r->g.grammar, from the first token (400
 * when response_format or another constraint is also given, or the
 * grammar cannot be built); "auto": compiled as t->lazy_g for
 * srvtool_lazy_step (a format or schema without a grammar leaves the
 * calls parsed only, logged). false with e filled. */
bool srvtool_install_grammar(struct srv_req *r, struct srv_error *e);

/* Engine hook, after choice c's text grew (engine thread): when a lazy
 * trigger appears in the new text, give c a matcher over t->lazy_g
 * advanced over the text from the trigger on, and constrain its sampler
 * with it (llama.cpp's lazy grammars). s->gvocab is built if needed.
 * A trigger whose text the grammar refuses leaves c unconstrained. */
void srvtool_lazy_step(struct srv *s, struct srv_choice *c);

#endif
