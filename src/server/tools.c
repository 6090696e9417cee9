/* Tool-call and reasoning parsing of a chat reply (tools.h): the format
 * table, the parser families, and the stream deltas.
 *
 * The formats' markers are facts about the models' chat templates (read
 * from the templates themselves and llama.cpp's common/chat.cpp, whose
 * handlers choose by markers in the template source as srvtool_detect
 * does). Every parse starts from the beginning of the reply; a reply is a
 * few KB, so re-parsing on each streamed token costs little and keeps one
 * code path for streaming and for the final message. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools.h"

/* ---- the formats ---- */

#define THINK "<think>", "</think>"

static const struct srvtool_format FORMATS[] = {
	/* gpt-oss (harmony): <|channel|>analysis<|message|>...<|end|>
	 * <|start|>assistant<|channel|>commentary to=functions.N <|constrain|>json<|message|>{..}<|call|> */
	{ .name = "gpt-oss", .detect = { "<|channel|>", "<|message|>" }, .family = SRVTOOL_GPT_OSS,
	  .special = true },
	/* Kimi K2: <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0
	 * <|tool_call_argument_begin|>{..}<|tool_call_end|><|tool_calls_section_end|> */
	{ .name = "kimi-k2", .detect = { "<|tool_calls_section_begin|>" }, .family = SRVTOOL_NAME_ARGS,
	  .sect_open = "<|tool_calls_section_begin|>", .sect_close = "<|tool_calls_section_end|>",
	  .call_open = "<|tool_call_begin|>", .call_close = "<|tool_call_end|>",
	  .name_end = "<|tool_call_argument_begin|>", .name_prefix = "functions.", .name_index = true,
	  .think_open = "<think>", .think_close = "</think>", .special = true },
	/* MiniMax M2: <minimax:tool_call><invoke name="N"><parameter name="K">V</parameter></invoke></minimax:tool_call> */
	{ .name = "minimax-m2", .detect = { "<minimax:tool_call>" }, .family = SRVTOOL_XML_PARAMS,
	  .sect_open = "<minimax:tool_call>", .sect_close = "</minimax:tool_call>",
	  .call_open = "<invoke name=\"", .name_end = "\">", .call_close = "</invoke>",
	  .param_open = "<parameter name=\"", .param_name_end = "\">", .param_close = "</parameter>",
	  .think_open = "<think>", .think_close = "</think>" },
	/* Seed-OSS: <seed:tool_call><function=N><parameter=K>V</parameter></function></seed:tool_call> */
	{ .name = "seed-oss", .detect = { "<seed:tool_call>" }, .family = SRVTOOL_XML_PARAMS,
	  .sect_open = "<seed:tool_call>", .sect_close = "</seed:tool_call>",
	  .call_open = "<function=", .name_end = ">", .call_close = "</function>",
	  .param_open = "<parameter=", .param_name_end = ">", .param_close = "</parameter>",
	  .think_open = "<seed:think>", .think_close = "</seed:think>", .special = true },
	/* DeepSeek R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N
	 * ```json {..} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜> */
	{ .name = "deepseek-r1", .detect = { "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>" },
	  .family = SRVTOOL_NAME_ARGS,
	  .sect_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>",
	  .sect_close = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
	  .call_open = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>",
	  .name_end = " ```json ",
	  .call_close = " ``` <\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>",
	  .think_open = "<think>", .think_close = "</think>", .special = true },
	/* Command R(+): Action: ```json [{"tool_name": N, "parameters": {..}}] ``` */
	{ .name = "command-r", .detect = { "<|START_OF_TURN_TOKEN|>", "Action:" },
	  .family = SRVTOOL_JSON_LIST, .call_open = "Action:", .list_pre = "```json",
	  .call_close = "```", .name_key = "tool_name", .args_key = { "parameters", "arguments" } },
	/* Functionary v3.1 (Llama 3.1): <function=N>{..}</function> */
	{ .name = "functionary-v3.1", .detect = { "<function=", "<|start_header_id|>" },
	  .family = SRVTOOL_NAME_ARGS, .call_open = "<function=", .name_end = ">",
	  .call_close = "</function>" },
	/* Firefunction v2:  functools[{"name": N, "arguments": {..}}] */
	{ .name = "firefunction-v2", .detect = { " functools[" }, .family = SRVTOOL_JSON_LIST,
	  .call_open = " functools", .name_key = "name", .args_key = { "arguments", "parameters" } },
	/* Devstral, Mistral Small 3.2: [TOOL_CALLS]N[CALL_ID]I[ARGS]{..} per
	 * call (Devstral's template writes no [CALL_ID]) */
	{ .name = "mistral-args", .detect = { "[TOOL_CALLS]", "[ARGS]" }, .family = SRVTOOL_NAME_ARGS,
	  .call_open = "[TOOL_CALLS]", .name_end = "[ARGS]", .id_marker = "[CALL_ID]", .special = true, .id9 = true },
	/* Mistral Nemo and older: [TOOL_CALLS][{"name": N, "arguments": {..}, "id": I}] */
	{ .name = "mistral", .detect = { "[TOOL_CALLS]" }, .family = SRVTOOL_JSON_LIST,
	  .call_open = "[TOOL_CALLS]", .name_key = "name", .args_key = { "arguments", "parameters" },
	  .special = true, .id9 = true },
	/* Nemotron Nano v2: <TOOLCALL>[{"name": N, "arguments": {..}}]</TOOLCALL> */
	{ .name = "nemotron-v2", .detect = { "<TOOLCALL>" }, .family = SRVTOOL_JSON_LIST,
	  .call_open = "<TOOLCALL>", .call_close = "</TOOLCALL>", .name_key = "name",
	  .args_key = { "arguments", "parameters" }, .think_open = "<think>", .think_close = "</think>" },
	/* Apriel 1.5: <tool_calls>[{"name": N, "arguments": {..}}]</tool_calls> */
	{ .name = "apriel", .detect = { "<tool_calls>[" }, .family = SRVTOOL_JSON_LIST,
	  .call_open = "<tool_calls>", .call_close = "</tool_calls>", .name_key = "name",
	  .args_key = { "arguments", "parameters" } },
	/* LFM2: <|tool_call_start|>[{"name": N, "arguments": {..}}]<|tool_call_end|>,
	 * or Python calls [N(k="v"), ...] as LFM2's model cards show */
	{ .name = "lfm2", .detect = { "<|tool_list_start|>" }, .family = SRVTOOL_JSON_LIST,
	  .call_open = "<|tool_call_start|>", .call_close = "<|tool_call_end|>", .name_key = "name",
	  .args_key = { "arguments", "parameters" }, .special = true, .py_calls = true },
	/* Hermes 2 Pro, Qwen 2.5 / 3, QwQ: <tool_call>{"name": N, "arguments": {..}}</tool_call> */
	{ .name = "hermes", .detect = { "<tool_call>" }, .family = SRVTOOL_JSON_EACH,
	  .call_open = "<tool_call>", .call_close = "</tool_call>", .name_key = "name",
	  .args_key = { "arguments", "parameters" }, .think_open = "<think>", .think_close = "</think>" },
	/* Llama 3.1 / 3.2: the reply is {"name": N, "parameters": {..}}, or
	 * 3.1's <|python_tag|> before it */
	{ .name = "llama3", .detect = { "<|start_header_id|>", "ipython" }, .family = SRVTOOL_JSON_BARE,
	  .name_key = "name", .args_key = { "parameters", "arguments" }, .alt_open = "<|python_tag|>",
	  .special = true },
};

static const struct srvtool_format GENERIC = {
	.name = "generic", .family = SRVTOOL_GENERIC, .name_key = "name",
	.args_key = { "arguments", "parameters" },
};
static const struct srvtool_format GENERIC_THINK = {
	.name = "generic-think", .family = SRVTOOL_GENERIC, .name_key = "name",
	.args_key = { "arguments", "parameters" }, .think_open = "<think>", .think_close = "</think>",
};

#define N_FORMATS ((int)(sizeof(FORMATS) / sizeof(FORMATS[0])))

const struct srvtool_format *srvtool_format_at(int i)
{
	if (i == N_FORMATS)
		return &GENERIC;
	if (i == N_FORMATS + 1)
		return &GENERIC_THINK;
	return i >= 0 && i < N_FORMATS ? &FORMATS[i] : NULL;
}

const struct srvtool_format *srvtool_format_named(const char *name)
{
	const struct srvtool_format *f;
	for (int i = 0; (f = srvtool_format_at(i)); i++)
		if (!strcmp(f->name, name))
			return f;
	return NULL;
}

const struct srvtool_format *srvtool_detect(const char *tmpl)
{
	if (!tmpl)
		return &GENERIC;
	for (int i = 0; i < N_FORMATS; i++) {
		const struct srvtool_format *f = &FORMATS[i];
		bool all = true;
		for (int k = 0; k < 2 && f->detect[k]; k++)
			all &= strstr(tmpl, f->detect[k]) != NULL;
		if (all)
			return f;
	}
	return strstr(tmpl, "<think>") ? &GENERIC_THINK : &GENERIC;
}

/* ---- message building ---- */

void srvtool_msg_free(struct srvtool_msg *m)
{
	srv_buf_free(&m->content);
	srv_buf_free(&m->reasoning);
	for (int i = 0; i < m->n_calls; i++) {
		free(m->calls[i].id);
		free(m->calls[i].name);
		srv_buf_free(&m->calls[i].args);
	}
	free(m->calls);
	memset(m, 0, sizeof(*m));
}

/* The parse in progress: the text, options and output, and whether memory
 * ran out (then every further step is skipped and the parse fails). */
struct P {
	const struct srvtool_opts *o;
	const struct srvtool_format *f;
	const char *s;
	size_t n;
	bool partial, oom;
	struct srvtool_msg *m;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const struct P *p, size_t i)
{
	while (i < p->n && is_ws(p->s[i]))
		i++;
	return i;
}

static void add(struct P *p, struct srv_buf *b, const char *s, size_t n)
{
	if (b && !p->oom && n && !srv_buf_add(b, s, n))
		p->oom = true;
}

static void add_str(struct P *p, struct srv_buf *b, const char *s)
{
	add(p, b, s, strlen(s));
}

/* Append s[a..b) to content, whitespace trimmed on the sides asked for. */
static void add_text(struct P *p, struct srv_buf *to, size_t a, size_t b, bool lstrip, bool rstrip)
{
	while (lstrip && a < b && is_ws(p->s[a]))
		a++;
	while (rstrip && b > a && is_ws(p->s[b - 1]))
		b--;
	add(p, to, p->s + a, b - a);
}

static struct srvtool_call *new_call(struct P *p)
{
	struct srvtool_msg *m = p->m;
	int max = p->o->max_calls > 0 && p->o->max_calls < SRVTOOL_MAX_CALLS ? p->o->max_calls
									       : SRVTOOL_MAX_CALLS;
	if (p->oom || m->n_calls >= max)
		return NULL;
	if (m->n_calls == m->cap_calls) {
		int cap = m->cap_calls ? 2 * m->cap_calls : 4;
		struct srvtool_call *c = realloc(m->calls, (size_t)cap * sizeof(*c));
		if (!c) {
			p->oom = true;
			return NULL;
		}
		m->calls = c;
		m->cap_calls = cap;
	}
	struct srvtool_call *c = &m->calls[m->n_calls];
	memset(c, 0, sizeof(*c));
	return c;
}

/* Make the call being built (calls[n_calls], filled by new_call) visible. */
static void commit_call(struct P *p)
{
	p->m->n_calls++;
}

/* Drop the calls from index keep on (a block that turned out not to be one). */
static void drop_calls(struct P *p, int keep)
{
	struct srvtool_msg *m = p->m;
	while (m->n_calls > keep) {
		struct srvtool_call *c = &m->calls[--m->n_calls];
		free(c->id);
		free(c->name);
		srv_buf_free(&c->args);
	}
}

static char *dup_n(struct P *p, const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (!d) {
		p->oom = true;
		return NULL;
	}
	memcpy(d, s, n);
	d[n] = 0;
	return d;
}

/* ---- matching ---- */

enum res { R_DONE, R_MORE, R_BAD };

/* Loose match of lit at s[i..): whitespace in lit matches any run of
 * whitespace, leading whitespace in the text is skipped. R_MORE when the
 * text ends while it still matches. */
static enum res match(const struct P *p, size_t i, const char *lit, size_t *end)
{
	i = skip_ws(p, i);
	for (const char *l = lit; *l;) {
		if (is_ws(*l)) {
			while (is_ws(*l))
				l++;
			i = skip_ws(p, i);
			continue;
		}
		if (i >= p->n)
			return R_MORE;
		if (p->s[i] != *l)
			return R_BAD;
		i++, l++;
	}
	*end = i;
	return R_DONE;
}

/* Exact: does s[i..) start with lit (R_MORE: a proper prefix of it)? */
static enum res starts(const struct P *p, size_t i, const char *lit, size_t *end)
{
	size_t k = strlen(lit), have = p->n - i;
	if (memcmp(p->s + i, lit, have < k ? have : k))
		return R_BAD;
	if (have < k)
		return R_MORE;
	*end = i + k;
	return R_DONE;
}

/* Length of the longest suffix of s[a..n) that is a proper prefix of lit. */
static size_t prefix_tail(const struct P *p, size_t a, const char *lit)
{
	size_t k = strlen(lit);
	size_t best = k - 1 < p->n - a ? k - 1 : p->n - a;
	for (; best > 0; best--)
		if (!memcmp(p->s + p->n - best, lit, best))
			return best;
	return 0;
}

static const char *find(const struct P *p, size_t from, const char *lit)
{
	return from <= p->n ? memmem(p->s + from, p->n - from, lit, strlen(lit)) : NULL;
}

/* ---- JSON ---- */

/* Scan a JSON string at s[i] == '"': its raw bytes go to out (if any). */
static enum res js_string(struct P *p, size_t i, struct srv_buf *out, size_t *end)
{
	size_t j = i + 1;
	add(p, out, "\"", 1);
	while (j < p->n) {
		unsigned char c = (unsigned char)p->s[j];
		if (c == '"') {
			add(p, out, "\"", 1);
			*end = j + 1;
			return R_DONE;
		}
		if (c < 0x20)
			return R_BAD;
		if (c != '\\') {
			size_t k = j;
			while (k < p->n && p->s[k] != '"' && p->s[k] != '\\' &&
			       (unsigned char)p->s[k] >= 0x20)
				k++;
			add(p, out, p->s + j, k - j);
			j = k;
			continue;
		}
		if (j + 1 >= p->n)
			return R_MORE;
		char e = p->s[j + 1];
		size_t len = 2;
		if (e == 'u') {
			len = 6;
			for (size_t k = j + 2; k < j + 6; k++) {
				if (k >= p->n)
					return R_MORE;
				if (!isxdigit((unsigned char)p->s[k]))
					return R_BAD;
			}
		} else if (!strchr("\"\\/bfnrt", e)) {
			return R_BAD;
		}
		add(p, out, p->s + j, len);
		j += len;
	}
	return R_MORE;
}

/* A number or literal (true false null) at s[i]. */
static enum res js_atom(struct P *p, size_t i, struct srv_buf *out, size_t *end)
{
	static const char *const lits[] = { "true", "false", "null" };
	/* On R_BAD the bytes that were still valid are kept in out, as a
	 * partial parse cut just before the bad byte would have sent them. */
	for (int k = 0; k < 3; k++) {
		if (p->s[i] != lits[k][0])
			continue;
		enum res r = starts(p, i, lits[k], end);
		size_t j = i;
		while (r == R_BAD && p->s[j] == lits[k][j - i])
			j++;
		add(p, out, p->s + i, (r == R_DONE ? *end : r == R_MORE ? p->n : j) - i);
		return r;
	}
	/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
	size_t j = i;
	if (j < p->n && p->s[j] == '-')
		j++;
	if (j < p->n && p->s[j] == '0') {
		j++;
	} else {
		size_t d = j;
		while (j < p->n && isdigit((unsigned char)p->s[j]))
			j++;
		if (j == d && j < p->n)
			goto bad;
	}
	if (j < p->n && p->s[j] == '.') {
		size_t d = ++j;
		while (j < p->n && isdigit((unsigned char)p->s[j]))
			j++;
		if (j == d && j < p->n)
			goto bad;
	}
	if (j < p->n && (p->s[j] == 'e' || p->s[j] == 'E')) {
		j++;
		if (j < p->n && (p->s[j] == '+' || p->s[j] == '-'))
			j++;
		size_t d = j;
		while (j < p->n && isdigit((unsigned char)p->s[j]))
			j++;
		if (j == d && j < p->n)
			goto bad;
	}
	add(p, out, p->s + i, j - i);
	if (j >= p->n)
		return R_MORE; /* a number may go on */
	*end = j;
	return R_DONE;
bad:
	add(p, out, p->s + i, j - i);
	return R_BAD;
}

/* Scan one JSON value at s[i..) (whitespace first): its compact form
 * (whitespace outside strings dropped) is appended to out (NULL: none).
 * R_MORE: the text ended inside it (out holds a prefix that any
 * continuation keeps); R_BAD: not JSON. */
static enum res js_value(struct P *p, size_t i, struct srv_buf *out, size_t *end)
{
	char stack[64];
	int depth = 0;
	enum { VAL, VAL_OR_CLOSE, KEY, KEY_OR_CLOSE, COLON, NEXT } st = VAL;
	for (;;) {
		i = skip_ws(p, i);
		if (i >= p->n)
			return R_MORE;
		char c = p->s[i];
		enum res r;
		size_t e = i;
		switch (st) {
		case KEY_OR_CLOSE:
		case VAL_OR_CLOSE:
			if (c == (st == KEY_OR_CLOSE ? '}' : ']'))
				goto close;
			if (st == VAL_OR_CLOSE)
				goto value;
			/* fall through */
		case KEY:
			if (c != '"')
				return R_BAD;
			if ((r = js_string(p, i, out, &e)) != R_DONE)
				return r;
			i = e;
			st = COLON;
			continue;
		case COLON:
			if (c != ':')
				return R_BAD;
			add(p, out, ":", 1);
			i++;
			st = VAL;
			continue;
		case NEXT:
			if (c == ',') {
				add(p, out, ",", 1);
				i++;
				st = stack[depth - 1] == '{' ? KEY : VAL;
				continue;
			}
			if (c == (stack[depth - 1] == '{' ? '}' : ']'))
				goto close;
			return R_BAD;
		case VAL:
		value:
			if (c == '{' || c == '[') {
				if (depth == (int)sizeof(stack))
					return R_BAD;
				stack[depth++] = c;
				add(p, out, &c, 1);
				i++;
				st = c == '{' ? KEY_OR_CLOSE : VAL_OR_CLOSE;
				continue;
			}
			r = c == '"' ? js_string(p, i, out, &e) : js_atom(p, i, out, &e);
			if (r != R_DONE)
				return r;
			i = e;
			goto value_done;
		}
	close:
		add(p, out, &c, 1);
		depth--;
		i++;
	value_done:
		if (depth == 0) {
			*end = i;
			return R_DONE;
		}
		st = NEXT;
	}
}

/* A complete JSON string at s[i..) decoded (malloc'ed), or NULL with r. */
static char *js_decode_string(struct P *p, size_t i, size_t *end, enum res *r)
{
	struct srv_buf raw = { 0 };
	i = skip_ws(p, i);
	if (i >= p->n) {
		*r = R_MORE;
		return NULL;
	}
	if (p->s[i] != '"') {
		*r = R_BAD;
		return NULL;
	}
	if ((*r = js_string(p, i, &raw, end)) != R_DONE || p->oom) {
		srv_buf_free(&raw);
		return NULL;
	}
	cJSON *v = cJSON_ParseWithLength(raw.p, raw.n);
	srv_buf_free(&raw);
	char *s = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
	cJSON_Delete(v);
	if (!s)
		p->oom = true; /* the scanner accepted it: only memory can fail */
	return s;
}

/* args = the compact form of JSON text t (a decoded "arguments" string). */
static bool compact_text(struct P *p, const char *t, struct srv_buf *args)
{
	struct P q = { .o = p->o, .f = p->f, .s = t, .n = strlen(t), .m = p->m };
	size_t end = 0;
	enum res r = js_value(&q, 0, args, &end);
	p->oom |= q.oom;
	return r == R_DONE && skip_ws(&q, end) == q.n && q.n && q.s[skip_ws(&q, 0)] == '{';
}

/* ---- calls as JSON objects ---- */

static bool key_is(const char *k, const char *want)
{
	return want && !strcmp(k, want);
}

/* Is name one of the request's tools (any name when the tools are not known)? */
static bool known_tool(const struct P *p, const char *name, size_t n)
{
	const cJSON *t;
	if (!p->o->tools)
		return true;
	cJSON_ArrayForEach(t, p->o->tools)
	{
		const char *tn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(t, "function"), "name"));
		if (tn && strlen(tn) == n && !memcmp(tn, name, n))
			return true;
	}
	return false;
}

/* A call object {"name": N, "arguments": {..} | "..", ...} at s[i..).
 * The call (new_call's slot) is committed once its name is complete (and
 * a tool's, when the tools are known) and its arguments have begun, so a
 * JSON answer that merely has a "name" key is not a call; the arguments
 * then stream in as they are scanned (given as a JSON string, they are
 * decoded when complete). R_BAD after a commit leaves the call. */
static enum res call_object(struct P *p, size_t i, size_t *end, bool *committed)
{
	const struct srvtool_format *f = p->f;
	struct srvtool_call *c = new_call(p);
	*committed = false;
	if (!c)
		return R_BAD;
	i = skip_ws(p, i);
	if (i >= p->n)
		return R_MORE;
	if (p->s[i] != '{')
		return R_BAD;
	i++;
	bool have_args = false, first = true;
	struct srv_buf pending = { 0 }; /* arguments seen before the commit */
	enum res r = R_BAD;
#define COMMIT()                                                  \
	do {                                                      \
		add(p, &c->args, pending.p, pending.n);           \
		srv_buf_free(&pending);                           \
		commit_call(p);                                   \
		*committed = true;                                \
	} while (0)
	for (;;) {
		i = skip_ws(p, i);
		if (i >= p->n) {
			r = R_MORE;
			break;
		}
		if (p->s[i] == '}') {
			if (!c->name || !have_args) {
				r = R_BAD; /* no name or no arguments: not a call */
				break;
			}
			if (!*committed)
				COMMIT();
			c->done = true;
			*end = i + 1;
			r = R_DONE;
			break;
		}
		if (!first) {
			if (p->s[i] != ',') {
				r = R_BAD;
				break;
			}
			i++;
		}
		first = false;
		size_t e = i;
		char *key = js_decode_string(p, i, &e, &r);
		if (!key)
			break;
		i = e;
		if ((r = match(p, i, ":", &e)) != R_DONE) {
			free(key);
			break;
		}
		i = skip_ws(p, e);
		bool is_name = !c->name && key_is(key, f->name_key);
		bool is_args = !have_args && (key_is(key, f->args_key[0]) || key_is(key, f->args_key[1]));
		free(key);
		if (is_name && i < p->n && p->s[i] == '"') {
			char *v = js_decode_string(p, i, &e, &r);
			if (!v)
				break;
			c->name = v;
			if (!*v || !known_tool(p, v, strlen(v))) {
				r = R_BAD;
				break;
			}
			if (have_args)
				COMMIT();
			i = e;
			continue;
		}
		if (is_args && i < p->n && p->s[i] == '"') {
			char *v = js_decode_string(p, i, &e, &r);
			if (!v)
				break;
			bool ok = compact_text(p, v, &pending);
			free(v);
			if (!ok) {
				r = R_BAD;
				break;
			}
			have_args = true;
			if (c->name)
				COMMIT();
			i = e;
			continue;
		}
		if (is_args && i < p->n && p->s[i] != '{') {
			r = R_BAD;
			break;
		}
		if (is_args && i < p->n) {
			have_args = true; /* begun: "{" */
			if (c->name && !*committed)
				COMMIT();
		}
		r = js_value(p, i, is_args ? (*committed ? &c->args : &pending) : NULL, &e);
		if (r != R_DONE)
			break;
		i = e;
	}
#undef COMMIT
	srv_buf_free(&pending);
	if (!*committed) {
		free(c->name);
		free(c->id);
		srv_buf_free(&c->args);
		memset(c, 0, sizeof(*c));
	}
	return r;
}

/* ---- call blocks ---- */

/* A name: [A-Za-z0-9_.:-]+ at s[i..) (after whitespace). R_MORE when the
 * text ends inside it. */
static enum res name_run(const struct P *p, size_t i, size_t *a, size_t *b)
{
	i = skip_ws(p, i);
	size_t j = i;
	while (j < p->n && (isalnum((unsigned char)p->s[j]) || strchr("_.:-", p->s[j])))
		j++;
	if (j == p->n)
		return R_MORE;
	if (j == i)
		return R_BAD;
	*a = i;
	*b = j;
	return R_DONE;
}

/* Commit a call named s[a..b) (the format's prefix and ":N" stripped; the
 * raw name is the id then, as Kimi's template writes ids). */
static struct srvtool_call *named_call(struct P *p, size_t a, size_t b)
{
	const struct srvtool_format *f = p->f;
	struct srvtool_call *c = new_call(p);
	if (!c)
		return NULL;
	size_t na = a, nb = b;
	if (f->name_prefix && nb - na > strlen(f->name_prefix) &&
	    !memcmp(p->s + na, f->name_prefix, strlen(f->name_prefix)))
		na += strlen(f->name_prefix);
	if (f->name_index) {
		size_t k = nb;
		while (k > na && isdigit((unsigned char)p->s[k - 1]))
			k--;
		if (k < nb && k > na + 1 && p->s[k - 1] == ':') {
			nb = k - 1;
			c->id = dup_n(p, p->s + a, b - a);
		}
	}
	if (!known_tool(p, p->s + na, nb - na)) {
		free(c->id);
		c->id = NULL;
		return NULL;
	}
	c->name = dup_n(p, p->s + na, nb - na);
	if (!c->name) {
		free(c->id);
		return NULL;
	}
	commit_call(p);
	return c;
}

/* NAME_ARGS: OPEN N NAME_END {..} [CLOSE] at s[i..) (OPEN already matched). */
static enum res name_args_call(struct P *p, size_t i, size_t *end)
{
	const struct srvtool_format *f = p->f;
	size_t a, b, e;
	enum res r = name_run(p, i, &a, &b);
	if (r != R_DONE)
		return r;
	size_t ia = 0, ib = 0, after = b;
	if (f->id_marker && (r = match(p, b, f->id_marker, &e)) != R_BAD) {
		if (r == R_MORE || (r = name_run(p, e, &ia, &ib)) != R_DONE)
			return r;
		after = ib;
	}
	if ((r = match(p, after, f->name_end, &e)) != R_DONE)
		return r;
	i = skip_ws(p, e);
	if (i >= p->n)
		return R_MORE; /* committed only once the arguments begin */
	if (p->s[i] != '{')
		return R_BAD;
	struct srvtool_call *c = named_call(p, a, b);
	if (!c)
		return R_BAD;
	if (ib > ia && !c->id)
		c->id = dup_n(p, p->s + ia, ib - ia);
	if ((r = js_value(p, i, &c->args, &e)) != R_DONE)
		return r;
	c->done = true;
	i = e;
	if (f->call_close) {
		r = match(p, i, f->call_close, &e);
		if (r == R_MORE && p->partial)
			return R_MORE;
		if (r == R_DONE)
			i = e;
	}
	*end = i;
	return R_DONE;
}

/* The JSON type a tool gives parameter k of function fn ("string", ...),
 * or NULL. */
static const char *param_type(const struct P *p, const char *fn, const char *k)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, p->o->tools)
	{
		const cJSON *fo = cJSON_GetObjectItemCaseSensitive(t, "function");
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fo, "name"));
		if (!name || strcmp(name, fn))
			continue;
		const cJSON *props = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(fo, "parameters"), "properties");
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(props, k), "type");
		return cJSON_GetStringValue(ty);
	}
	return NULL;
}

/* A Python literal (dict / list / str / number / True False None, as
 * Seed-OSS's template writes non-string values with Python's str()) as
 * JSON into out; false when it is not one. */
static bool py_literal_json(struct P *p, const char *v, size_t n, struct srv_buf *out)
{
	static const char *const py[] = { "True", "False", "None" };
	static const char *const js[] = { "true", "false", "null" };
	struct srv_buf b = { 0 };
	bool ok = true;
	for (size_t i = 0; ok && i < n;) {
		char c = v[i];
		if (c != '\'' && c != '"') {
			int k = 0;
			while (k < 3 && !(n - i >= strlen(py[k]) && !memcmp(v + i, py[k], strlen(py[k]))))
				k++;
			add(p, &b, k < 3 ? js[k] : &c, k < 3 ? strlen(js[k]) : 1);
			i += k < 3 ? strlen(py[k]) : 1;
			continue;
		}
		add(p, &b, "\"", 1);
		for (i++; i < n && v[i] != c; i++) {
			char e = v[i];
			if (e == '\\' && i + 1 < n) {
				e = v[++i];
				if (e == '"')
					add(p, &b, "\\\"", 2);
				else if (e == '\'')
					add(p, &b, "'", 1);
				else {
					add(p, &b, "\\", 1);
					add(p, &b, &e, 1);
				}
			} else if (e == '"') {
				add(p, &b, "\\\"", 2);
			} else if ((unsigned char)e < 0x20) {
				char u[8];
				snprintf(u, sizeof(u), "\\u%04x", (unsigned char)e);
				add(p, &b, u, 6);
			} else {
				add(p, &b, &e, 1);
			}
		}
		ok = i < n; /* the closing quote */
		add(p, &b, "\"", 1);
		i++;
	}
	add(p, &b, "\n", 1); /* the newline ends a trailing number */
	if (!ok || p->oom || !b.p) {
		srv_buf_free(&b);
		return false;
	}
	struct P q = { .o = p->o, .f = p->f, .s = b.p, .n = b.n, .m = p->m };
	size_t e = 0;
	struct srv_buf tmp = { 0 };
	ok = js_value(&q, 0, &tmp, &e) == R_DONE && skip_ws(&q, e) == q.n && !q.oom;
	if (ok)
		add(p, out, tmp.p, tmp.n);
	p->oom |= q.oom;
	srv_buf_free(&tmp);
	srv_buf_free(&b);
	return ok;
}

/* Value text v[0..n) of an XML parameter as JSON: a string parameter (by
 * the tool's schema) verbatim as a string; otherwise JSON if it is JSON,
 * else a string. One newline on each side is the template's layout. */
static void xml_value(struct P *p, const char *fn, const char *k, const char *v, size_t n,
		      struct srv_buf *out)
{
	if (n && v[0] == '\n')
		v++, n--;
	if (n && v[n - 1] == '\n')
		n--;
	const char *ty = param_type(p, fn, k);
	if (!ty || strcmp(ty, "string")) {
		/* a newline after the value ends a number at the end of it */
		char *t = dup_n(p, v, n + 1);
		if (!t)
			return;
		t[n] = '\n';
		struct P q = { .o = p->o, .f = p->f, .s = t, .n = n + 1, .m = p->m };
		struct srv_buf tmp = { 0 };
		size_t e = 0;
		bool ok = js_value(&q, 0, &tmp, &e) == R_DONE && skip_ws(&q, e) == n + 1 && !q.oom;
		free(t);
		if (ok) {
			add(p, out, tmp.p, tmp.n);
			srv_buf_free(&tmp);
			return;
		}
		p->oom |= q.oom;
		srv_buf_free(&tmp);
		if (ty && (!strcmp(ty, "object") || !strcmp(ty, "array")) &&
		    py_literal_json(p, v, n, out))
			return;
	}
	char *t = dup_n(p, v, n);
	cJSON *s = t ? cJSON_CreateString(t) : NULL;
	char *js = s ? cJSON_PrintUnformatted(s) : NULL;
	if (t && !js)
		p->oom = true;
	if (js)
		add_str(p, out, js);
	free(js);
	cJSON_Delete(s);
	free(t);
}

/* XML_PARAMS: OPEN N NAME_END (P_OPEN K P_END value P_CLOSE)* CLOSE. The
 * arguments grow one whole parameter at a time: "{", "\"k\":v", ",..", "}". */
static enum res xml_call(struct P *p, size_t i, size_t *end)
{
	const struct srvtool_format *f = p->f;
	size_t a, b, e;
	enum res r;
	if (f->name_end[0] == '"') { /* a quoted name: anything up to the quote */
		const char *q = find(p, i, f->name_end);
		if (!q)
			return R_MORE;
		a = i, b = (size_t)(q - p->s);
		if (b == a || memchr(p->s + a, '<', b - a))
			return R_BAD;
		e = b;
	} else if ((r = name_run(p, i, &a, &b)) != R_DONE) {
		return r;
	}
	if ((r = match(p, b, f->name_end, &e)) != R_DONE)
		return r;
	struct srvtool_call *c = named_call(p, a, b);
	if (!c)
		return R_BAD;
	add(p, &c->args, "{", 1);
	i = e;
	for (int np = 0;; np++) {
		if ((r = match(p, i, f->call_close, &e)) == R_DONE) {
			add(p, &c->args, "}", 1);
			c->done = true;
			*end = e;
			return R_DONE;
		}
		if (r == R_MORE)
			return R_MORE;
		if ((r = match(p, i, f->param_open, &e)) != R_DONE)
			return r;
		const char *ke = find(p, e, f->param_name_end);
		if (!ke)
			return R_MORE;
		size_t ka = e, kb = (size_t)(ke - p->s);
		if (kb == ka || memchr(p->s + ka, '<', kb - ka) || memchr(p->s + ka, '\n', kb - ka))
			return R_BAD;
		size_t va = kb + strlen(f->param_name_end);
		const char *ve = find(p, va, f->param_close);
		if (!ve)
			return R_MORE;
		char *key = dup_n(p, p->s + ka, kb - ka);
		cJSON *ks = key ? cJSON_CreateString(key) : NULL;
		char *kjs = ks ? cJSON_PrintUnformatted(ks) : NULL;
		if (!kjs) {
			p->oom = true;
		} else {
			if (np)
				add(p, &c->args, ",", 1);
			add_str(p, &c->args, kjs);
			add(p, &c->args, ":", 1);
			xml_value(p, c->name, key, p->s + va, (size_t)(ve - p->s) - va, &c->args);
		}
		free(kjs);
		cJSON_Delete(ks);
		free(key);
		i = (size_t)(ve - p->s) + strlen(f->param_close);
	}
}

/* Calls of a section (SECT_OPEN matched): OPEN call ... up to SECT_CLOSE
 * (optional at the end of the reply). */
static enum res section(struct P *p, size_t i, size_t *end,
			enum res (*call)(struct P *, size_t, size_t *))
{
	const struct srvtool_format *f = p->f;
	for (;;) {
		size_t e;
		enum res r = match(p, i, f->sect_close, &e);
		if (r == R_DONE) {
			*end = e;
			return R_DONE;
		}
		if (r == R_MORE) {
			if (p->partial)
				return R_MORE;
			*end = p->n;
			return R_DONE;
		}
		if ((r = match(p, i, f->call_open, &e)) != R_DONE)
			return r;
		if ((r = call(p, e, &i)) != R_DONE)
			return r;
	}
}

static enum res py_call(struct P *p, size_t i, const char *suffix, size_t *end);

/* JSON_LIST: OPEN [PRE] [ call, ... ] [CLOSE] (OPEN matched). */
static enum res json_list(struct P *p, size_t i, size_t *end)
{
	const struct srvtool_format *f = p->f;
	size_t e;
	enum res r;
	if (f->list_pre) {
		r = match(p, i, f->list_pre, &e);
		if (r == R_MORE)
			return R_MORE;
		if (r == R_DONE)
			i = e;
	}
	if ((r = match(p, i, "[", &e)) != R_DONE)
		return r;
	i = e;
	for (bool first = true;; first = false) {
		i = skip_ws(p, i);
		if (i >= p->n)
			return R_MORE;
		if (p->s[i] == ']' && first) {
			i++;
			break;
		}
		bool committed;
		if (f->py_calls && p->s[i] != '{')
			r = py_call(p, i, "", &e); /* LFM2: [name(k=v), ...] */
		else
			r = call_object(p, i, &e, &committed);
		if (r != R_DONE)
			return r;
		i = skip_ws(p, e);
		if (i >= p->n)
			return R_MORE;
		if (p->s[i] == ']') {
			i++;
			break;
		}
		if (p->s[i] != ',')
			return R_BAD;
		i++;
	}
	if (f->call_close) {
		r = match(p, i, f->call_close, &e);
		if (r == R_MORE && p->partial)
			return R_MORE;
		if (r == R_DONE)
			i = e;
	}
	*end = i;
	return R_DONE;
}

/* JSON_EACH: OPEN call [CLOSE] (OPEN matched). */
static enum res json_each(struct P *p, size_t i, size_t *end)
{
	size_t e;
	bool committed;
	enum res r = call_object(p, i, &e, &committed);
	if (r != R_DONE)
		return r;
	i = e;
	r = match(p, i, p->f->call_close, &e);
	if (r == R_MORE && p->partial)
		return R_MORE;
	*end = r == R_DONE ? e : i;
	return R_DONE;
}

/* A Python-style call N(k=v, ...) at s[i..) (v JSON values), as Llama
 * 3.1's built-in tools (<|python_tag|>N.call(...): suffix ".call") and
 * LFM2 (suffix "") write them. The call is committed whole. */
static enum res py_call(struct P *p, size_t i, const char *suffix, size_t *end)
{
	size_t a, b, e, ls = strlen(suffix);
	enum res r = name_run(p, i, &a, &b);
	if (r != R_DONE)
		return r;
	if (b - a <= ls || memcmp(p->s + b - ls, suffix, ls) || memchr(p->s + a, ':', b - a))
		return R_BAD;
	if ((r = match(p, b, "(", &e)) != R_DONE)
		return r;
	struct srv_buf args = { 0 };
	add(p, &args, "{", 1);
	for (int k = 0;; k++) {
		size_t ka, kb, ve;
		i = skip_ws(p, e);
		if (i < p->n && p->s[i] == ')')
			break;
		if ((r = name_run(p, i, &ka, &kb)) == R_DONE && (r = match(p, kb, "=", &e)) == R_DONE) {
			if (k)
				add(p, &args, ",", 1);
			add(p, &args, "\"", 1);
			add(p, &args, p->s + ka, kb - ka);
			add(p, &args, "\":", 2);
			r = js_value(p, e, &args, &ve);
		}
		if (r == R_DONE && (r = match(p, ve, ",", &e)) == R_BAD) {
			e = ve;
			r = R_DONE;
		}
		if (r != R_DONE) {
			srv_buf_free(&args);
			return r;
		}
	}
	add(p, &args, "}", 1);
	struct srvtool_call *c = named_call(p, a, b - ls);
	if (c) {
		c->args = args;
		c->done = true;
	} else {
		srv_buf_free(&args);
	}
	*end = i + 1;
	return R_DONE;
}

/* Llama 3.x: the reply is one or more call objects (';' between), or
 * <|python_tag|> and a call. */
static enum res json_bare(struct P *p, size_t i, size_t *end)
{
	const struct srvtool_format *f = p->f;
	size_t e;
	if (f->alt_open) {
		enum res r = starts(p, skip_ws(p, i), f->alt_open, &e);
		if (r == R_MORE)
			return R_MORE;
		if (r == R_DONE) {
			i = skip_ws(p, e);
			if (i < p->n && p->s[i] != '{')
				return py_call(p, i, ".call", end);
		}
	}
	for (int k = 0;; k++) {
		bool committed;
		enum res r = call_object(p, i, &e, &committed);
		if (r != R_DONE)
			return r;
		i = e;
		if (match(p, i, ";", &e) == R_DONE)
			i = e;
		size_t j = skip_ws(p, i);
		if (j >= p->n && p->partial)
			return R_MORE; /* another call may follow */
		if (j >= p->n || p->s[j] != '{') {
			*end = i;
			return R_DONE;
		}
	}
}

/* GENERIC: {"tool_calls": [..]} | {"tool_call": {..}} | {"response": ".."} */
static enum res generic(struct P *p, size_t i, size_t *end)
{
	size_t e;
	enum res r = match(p, i, "{", &e);
	if (r != R_DONE)
		return r;
	char *key = js_decode_string(p, e, &e, &r);
	if (!key)
		return r;
	bool list = !strcmp(key, "tool_calls"), one = !strcmp(key, "tool_call"),
	     resp = !strcmp(key, "response");
	free(key);
	if (!list && !one && !resp)
		return R_BAD;
	if ((r = match(p, e, ":", &e)) != R_DONE)
		return r;
	if (resp) {
		/* the decoded string so far is content: hold it until complete */
		char *v = js_decode_string(p, e, &e, &r);
		if (!v)
			return r;
		if ((r = match(p, e, "}", &e)) == R_DONE)
			add_str(p, &p->m->content, v);
		free(v);
		*end = e;
		return r;
	}
	if (one) {
		bool committed;
		if ((r = call_object(p, e, &e, &committed)) != R_DONE)
			return r;
	} else {
		const char *open = p->f->call_open;
		(void)open;
		if ((r = match(p, e, "[", &e)) != R_DONE)
			return r;
		for (bool first = true;; first = false) {
			size_t j = skip_ws(p, e);
			if (j >= p->n)
				return R_MORE;
			if (p->s[j] == ']' && first) {
				e = j + 1;
				break;
			}
			bool committed;
			if ((r = call_object(p, j, &e, &committed)) != R_DONE)
				return r;
			j = skip_ws(p, e);
			if (j >= p->n)
				return R_MORE;
			e = j + 1;
			if (p->s[j] == ']')
				break;
			if (p->s[j] != ',')
				return R_BAD;
		}
	}
	if ((r = match(p, e, "}", &e)) != R_DONE)
		return r;
	*end = e;
	return R_DONE;
}

/* The block starting at s[k] (its opening marker), dispatched by family. */
static enum res block(struct P *p, size_t k, const char *marker, size_t *end)
{
	const struct srvtool_format *f = p->f;
	size_t i = k + strlen(marker);
	switch (f->family) {
	case SRVTOOL_JSON_EACH:
		return json_each(p, i, end);
	case SRVTOOL_JSON_LIST:
		return json_list(p, i, end);
	case SRVTOOL_NAME_ARGS:
		if (f->sect_open)
			return section(p, i, end, name_args_call);
		return name_args_call(p, i, end);
	case SRVTOOL_XML_PARAMS:
		return section(p, i, end, xml_call);
	default:
		return R_BAD;
	}
}

/* ---- the reply ---- */

/* Earliest opening marker of a call block in s[from..): its offset and the
 * marker, or n when none. *hold: how many trailing bytes could begin one. */
static size_t next_block(const struct P *p, size_t from, const char **marker, size_t *hold)
{
	const struct srvtool_format *f = p->f;
	const char *open = f->family == SRVTOOL_NAME_ARGS || f->family == SRVTOOL_XML_PARAMS
				   ? (f->sect_open ? f->sect_open : f->call_open)
				   : f->call_open;
	*hold = 0;
	if (!open)
		return p->n;
	const char *q = find(p, from, open);
	*marker = open;
	if (q)
		return (size_t)(q - p->s);
	*hold = prefix_tail(p, from, open);
	return p->n;
}

/* Content and calls of the body s[i..n) (after any reasoning block).
 * lstrip: the body follows a reasoning block. */
static void body(struct P *p, size_t i, bool lstrip)
{
	const struct srvtool_format *f = p->f;
	bool calls = p->o->calls;
	struct srv_buf *content = &p->m->content;
	if (calls && (f->family == SRVTOOL_JSON_BARE || f->family == SRVTOOL_GENERIC)) {
		/* a call (or generic's JSON) only as the whole reply */
		size_t j = skip_ws(p, i), e = 0;
		bool maybe = j >= p->n || p->s[j] == '{' ||
			     (f->alt_open && starts(p, j, f->alt_open, &e) != R_BAD);
		if (maybe) {
			if (j >= p->n && p->partial)
				return;
			int keep = p->m->n_calls;
			size_t before = content->n;
			enum res r = j >= p->n ? R_BAD
				     : f->family == SRVTOOL_GENERIC ? generic(p, j, &e)
								    : json_bare(p, j, &e);
			if (r == R_MORE && p->partial)
				return;
			if (r == R_DONE || p->m->n_calls > keep) {
				/* calls (complete, cut short or broken after they began):
				 * text after complete ones is content */
				if (r == R_DONE)
					add_text(p, content, e, p->n, true, p->partial);
				return;
			}
			drop_calls(p, keep);
			content->n = before;
			if (content->p)
				content->p[before] = 0;
		}
		add_text(p, content, i, p->n, lstrip, p->partial);
		return;
	}
	size_t seg = i, from = i;
	for (;;) {
		const char *marker = NULL;
		size_t hold, k = calls ? next_block(p, from, &marker, &hold) : p->n;
		if (!calls)
			hold = 0;
		if (k == p->n) {
			add_text(p, content, seg, p->n - (p->partial ? hold : 0), lstrip, p->partial);
			return;
		}
		int keep = p->m->n_calls;
		size_t end = 0;
		enum res r = block(p, k, marker, &end);
		bool committed = p->m->n_calls > keep;
		if (r == R_MORE && !committed && !p->partial)
			r = R_BAD; /* a reply cut inside a marker's block: text */
		if (r == R_BAD && !committed) {
			from = k + 1;
			continue;
		}
		/* calls: the text before them, without its trailing whitespace */
		add_text(p, content, seg, k, lstrip, true);
		if (r == R_MORE)
			return;
		if (r == R_BAD) {
			/* broken after a call began: resume after its closing marker */
			const char *close = f->sect_close ? f->sect_close : f->call_close;
			const char *q = close ? find(p, k, close) : NULL;
			if (!q && p->partial)
				return;
			end = q ? (size_t)(q - p->s) + strlen(close) : p->n;
		}
		seg = from = end;
		lstrip = true;
	}
}

/* gpt-oss: messages [<|start|>assistant] HEADER <|message|> BODY END,
 * HEADER holding <|channel|>C and possibly to=functions.N, END one of
 * <|end|> <|call|> <|return|> or the next <|start|>. */
static void harmony(struct P *p)
{
	static const char *const ends[] = { "<|end|>", "<|call|>", "<|return|>", "<|start|>" };
	size_t i = 0;
	while (i < p->n) {
		size_t e;
		enum res r = starts(p, i, "<|start|>", &e);
		if (r == R_MORE && p->partial)
			return;
		if (r == R_DONE)
			i = e;
		const char *msg = find(p, i, "<|message|>");
		bool header = starts(p, i, "<|channel|>", &e) != R_BAD ||
			      starts(p, i, "assistant", &e) != R_BAD || starts(p, i, " to=", &e) != R_BAD;
		if (!header || (!msg && !p->partial)) {
			add_text(p, &p->m->content, i, p->n, true, p->partial);
			return; /* not the harmony layout: text */
		}
		if (!msg)
			return;
		size_t h = (size_t)(msg - p->s), b = h + strlen("<|message|>");
		/* the header's channel and recipient */
		const char *ch = find(p, i, "<|channel|>");
		bool analysis = false;
		if (ch && (size_t)(ch - p->s) < h) {
			size_t c0 = (size_t)(ch - p->s) + strlen("<|channel|>");
			analysis = h - c0 >= 8 && !memcmp(p->s + c0, "analysis", 8);
		}
		const char *to = find(p, i, "to=functions.");
		size_t body_end = p->n, next = p->n;
		for (int k = 0; k < 4; k++) {
			const char *q = find(p, b, ends[k]);
			if (q && (size_t)(q - p->s) < body_end) {
				body_end = (size_t)(q - p->s);
				next = body_end + (k < 3 ? strlen(ends[k]) : 0);
			}
		}
		bool closed = body_end < p->n;
		size_t hold = 0;
		for (int k = 0; !closed && p->partial && k < 4; k++) {
			size_t t = prefix_tail(p, b, ends[k]);
			hold = t > hold ? t : hold;
		}
		if (to && (size_t)(to - p->s) < h) {
			size_t a = (size_t)(to - p->s) + 3, nb;
			struct P q = *p;
			q.n = h;
			if (name_run(&q, a, &a, &nb) == R_MORE)
				nb = h;
			while (nb > a && is_ws(p->s[nb - 1]))
				nb--;
			a += strlen("functions."); /* to=functions.NAME */
			struct srvtool_call *c = nb > a ? named_call(p, a, nb) : NULL;
			if (c) {
				q.n = body_end - hold; /* not a terminator's first bytes */
				if (js_value(&q, b, &c->args, &e) == R_DONE)
					c->done = true;
				p->oom |= q.oom;
			}
		} else if (analysis && p->o->reasoning) {
			add_text(p, &p->m->reasoning, b, body_end - hold, true, true);
		} else {
			add_text(p, &p->m->content, b, body_end - hold, true, !closed);
		}
		if (!closed)
			return;
		i = next;
	}
}

bool srvtool_parse(const struct srvtool_opts *o, const char *text, size_t n, bool partial,
		   struct srvtool_msg *m)
{
	struct P p = { .o = o, .f = o->fmt ? o->fmt : &GENERIC, .s = text ? text : "", .n = text ? n : 0,
		       .partial = partial, .m = m };
	m->id9 = p.f->id9;
	if (p.f->family == SRVTOOL_GPT_OSS) {
		harmony(&p);
		return !p.oom;
	}
	size_t i = 0;
	bool after_think = false;
	const char *to = p.f->think_open, *tc = p.f->think_close;
	if (o->reasoning && to) {
		bool inside = o->in_reasoning;
		size_t e = 0, j = skip_ws(&p, 0);
		if (!inside) {
			enum res r = starts(&p, j, to, &e);
			if ((r == R_MORE || j == p.n) && partial)
				return true;
			if (r == R_DONE)
				inside = true, j = e;
		} else {
			j = 0;
		}
		if (inside) {
			const char *q = find(&p, j, tc);
			if (!q) {
				size_t hold = partial ? prefix_tail(&p, j, tc) : 0;
				add_text(&p, &m->reasoning, j, p.n - hold, true, true);
				return !p.oom;
			}
			add_text(&p, &m->reasoning, j, (size_t)(q - p.s), true, true);
			i = (size_t)(q - p.s) + strlen(tc);
			after_think = true;
		}
	}
	body(&p, i, after_think);
	return !p.oom;
}
