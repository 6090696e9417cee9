/* Tool-call and reasoning parsing (src/server/tools.c).
 *
 * Without arguments: unit checks. Hand-written replies in each format
 * (well-formed, malformed, truncated) parse to the expected content,
 * reasoning and calls; and for every reply, streaming it one byte at a
 * time (partial parses, srvtool_delta) assembles exactly the final parse,
 * with every partial parse a prefix of the final one.
 *
 * As a driver for tests/test_tool_parse.py:
 *   test_tool_parse parse (--template FILE | --format NAME) --text FILE
 *       [--prompt FILE] [--tools FILE] [--reasoning auto|none] [--no-calls]
 *       [--chunks FILE]
 * prints {"format", "content", "reasoning_content", "tool_calls": [{id,
 * type, function {name, arguments}}], "stream_ok"} for the reply in
 * --text; --prompt: the rendered prompt (a prompt ending in the thinking
 * marker starts the reply inside it); --chunks: write the byte-at-a-time
 * stream's chat.completion.chunk objects there, one per line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools.h"

static int n_fail, n_pass;

#define CHECK(cond, ...)                                                         \
	do {                                                                     \
		if (cond) {                                                      \
			n_pass++;                                                \
		} else {                                                         \
			n_fail++;                                                \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);     \
			fprintf(stderr, __VA_ARGS__);                            \
			fputc('\n', stderr);                                     \
		}                                                                \
	} while (0)

/* Assembled stream state, as OpenAI's client accumulates it. */
struct acc {
	struct srv_buf content, reasoning;
	char *name[SRVTOOL_MAX_CALLS], *id[SRVTOOL_MAX_CALLS];
	struct srv_buf args[SRVTOOL_MAX_CALLS];
	int n;
};

static void acc_free(struct acc *a)
{
	srv_buf_free(&a->content);
	srv_buf_free(&a->reasoning);
	for (int i = 0; i < SRVTOOL_MAX_CALLS; i++) {
		free(a->name[i]);
		free(a->id[i]);
		srv_buf_free(&a->args[i]);
	}
}

static bool acc_add(struct acc *a, const cJSON *d)
{
	const char *s;
	if ((s = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"))))
		srv_buf_add(&a->content, s, strlen(s));
	if ((s = cJSON_GetStringValue(cJSON_GetObjectItem(d, "reasoning_content"))))
		srv_buf_add(&a->reasoning, s, strlen(s));
	const cJSON *tc;
	cJSON_ArrayForEach(tc, cJSON_GetObjectItem(d, "tool_calls"))
	{
		int i = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(tc, "index"));
		if (i < 0 || i >= SRVTOOL_MAX_CALLS || i > a->n)
			return false; /* indices come in order */
		if (i == a->n)
			a->n++;
		const cJSON *fn = cJSON_GetObjectItem(tc, "function");
		if ((s = cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id")))) {
			if (a->id[i])
				return false; /* an id is sent once */
			a->id[i] = strdup(s);
		}
		if ((s = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name")))) {
			if (a->name[i])
				return false;
			a->name[i] = strdup(s);
		}
		if ((s = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "arguments"))))
			srv_buf_add(&a->args[i], s, strlen(s));
	}
	return true;
}

static bool buf_eq(const struct srv_buf *a, const struct srv_buf *b)
{
	return a->n == b->n && (!a->n || !memcmp(a->p, b->p, a->n));
}

static bool buf_prefix(const struct srv_buf *a, const struct srv_buf *b)
{
	return a->n <= b->n && (!a->n || !memcmp(a->p, b->p, a->n));
}

/* Stream text one character at a time; true when the assembled deltas equal
 * the final parse and every partial parse is a prefix of it. chunks: if
 * not NULL, each non-empty delta is written there as a chunk object. */
static bool stream_check(const struct srvtool_opts *o, const char *text, size_t n, FILE *chunks,
			 const struct srvtool_msg *fin)
{
	struct srvtool_sent st = { 0 };
	struct acc a = { 0 };
	bool ok = true;
	for (size_t k = 0; k <= n && ok; k++) {
		bool last = k == n;
		if (!last && ((unsigned char)text[k] & 0xc0) == 0x80)
			continue; /* the engine's detokenizer never splits a character */
		struct srvtool_msg m = { 0 };
		srvtool_parse(o, text, k, !last, &m);
		ok &= buf_prefix(&m.content, &fin->content) && buf_prefix(&m.reasoning, &fin->reasoning) &&
		      m.n_calls <= fin->n_calls;
		for (int i = 0; ok && i < m.n_calls; i++)
			ok &= !strcmp(m.calls[i].name, fin->calls[i].name) &&
			      buf_prefix(&m.calls[i].args, &fin->calls[i].args);
		if (!ok)
			fprintf(stderr, "stream: the parse of %zu bytes is not a prefix of the final one\n", k);
		cJSON *d = cJSON_CreateObject();
		srvtool_delta(&m, "chatcmpl-test", &st, d);
		ok &= acc_add(&a, d) && !st.diverged;
		if (chunks && (cJSON_GetArraySize(d) || k == 0 || last)) {
			cJSON *c = cJSON_CreateObject(), *chs = cJSON_AddArrayToObject(c, "choices");
			cJSON *ch = cJSON_CreateObject();
			cJSON_AddStringToObject(c, "id", "chatcmpl-test");
			cJSON_AddStringToObject(c, "object", "chat.completion.chunk");
			cJSON_AddNumberToObject(c, "created", 0);
			cJSON_AddStringToObject(c, "model", "test");
			cJSON_AddItemToArray(chs, ch);
			cJSON_AddNumberToObject(ch, "index", 0);
			if (k == 0)
				cJSON_AddStringToObject(d, "role", "assistant");
			cJSON_AddItemToObject(ch, "delta", d);
			d = NULL;
			if (last)
				cJSON_AddStringToObject(ch, "finish_reason",
							fin->n_calls ? "tool_calls" : "stop");
			else
				cJSON_AddNullToObject(ch, "finish_reason");
			char *js = cJSON_PrintUnformatted(c);
			fprintf(chunks, "%s\n", js);
			free(js);
			cJSON_Delete(c);
		}
		cJSON_Delete(d);
		srvtool_msg_free(&m);
	}
	ok &= buf_eq(&a.content, &fin->content) && buf_eq(&a.reasoning, &fin->reasoning) &&
	      a.n == fin->n_calls;
	for (int i = 0; ok && i < a.n; i++) {
		char id[64];
		srvtool_call_id(fin, i, "chatcmpl-test", id);
		ok &= a.name[i] && !strcmp(a.name[i], fin->calls[i].name) && a.id[i] &&
		      !strcmp(a.id[i], id) && buf_eq(&a.args[i], &fin->calls[i].args);
	}
	acc_free(&a);
	return ok;
}

/* ---- unit checks ---- */

struct want {
	const char *content, *reasoning;
	int n_calls;
	const char *name[3], *args[3];
};

/* Mutations of every expected reply: each byte deleted or replaced by one
 * of a few structural characters. Whatever they parse to, the stream of
 * each must assemble its final parse. */
static int n_mut, n_mut_bad;

static void mutations(const struct srvtool_opts *o, const char *text)
{
	static const char subst[] = "{}[]\"<> ,:\\";
	size_t n = strlen(text);
	char *t = malloc(n + 1);
	for (size_t i = 0; t && i < n; i++) {
		for (int k = -1; k < (int)sizeof(subst) - 1; k++) {
			size_t m = n;
			memcpy(t, text, n + 1);
			if (k < 0) {
				memmove(t + i, t + i + 1, n - i);
				m--;
			} else {
				t[i] = subst[k];
			}
			if (((unsigned char)text[i] & 0xc0) == 0x80 || (unsigned char)text[i] >= 0xc0)
				continue; /* keep UTF-8 whole */
			struct srvtool_msg fin = { 0 };
			srvtool_parse(o, t, m, false, &fin);
			n_mut++;
			if (!stream_check(o, t, m, NULL, &fin)) {
				if (n_mut_bad++ < 40) {
					cJSON *js = cJSON_CreateString(t);
					char *q = cJSON_PrintUnformatted(js);
					fprintf(stderr, "mutation: %s: %s\n", o->fmt->name, q);
					free(q);
					cJSON_Delete(js);
				}
			}
			srvtool_msg_free(&fin);
		}
	}
	free(t);
}

static void expect(const char *fmt, bool reasoning, bool in_reasoning, const char *text,
		   struct want w)
{
	const struct srvtool_format *f = srvtool_format_named(fmt);
	if (!f) {
		CHECK(0, "no format %s", fmt);
		return;
	}
	struct srvtool_opts o = { .fmt = f, .calls = true, .reasoning = reasoning,
				  .in_reasoning = in_reasoning };
	struct srvtool_msg m = { 0 };
	CHECK(srvtool_parse(&o, text, strlen(text), false, &m), "%s: parse failed", fmt);
	const char *c = m.content.p ? m.content.p : "", *r = m.reasoning.p ? m.reasoning.p : "";
	CHECK(!strcmp(c, w.content ? w.content : ""), "%s: %.40s...: content '%s', want '%s'", fmt,
	      text, c, w.content ? w.content : "");
	CHECK(!strcmp(r, w.reasoning ? w.reasoning : ""), "%s: %.40s...: reasoning '%s', want '%s'",
	      fmt, text, r, w.reasoning ? w.reasoning : "");
	CHECK(m.n_calls == w.n_calls, "%s: %.40s...: %d calls, want %d", fmt, text, m.n_calls,
	      w.n_calls);
	for (int i = 0; i < m.n_calls && i < w.n_calls; i++) {
		CHECK(!strcmp(m.calls[i].name, w.name[i]), "%s: call %d name '%s', want '%s'", fmt, i,
		      m.calls[i].name, w.name[i]);
		const char *a = m.calls[i].args.p ? m.calls[i].args.p : "";
		CHECK(!strcmp(a, w.args[i]), "%s: call %d args '%s', want '%s'", fmt, i, a, w.args[i]);
	}
	CHECK(stream_check(&o, text, strlen(text), NULL, &m), "%s: %.60s...: stream differs", fmt,
	      text);
	srvtool_msg_free(&m);
	mutations(&o, text);
}

static void unit(void)
{
	const char *W = "{\"city\":\"Paris\",\"opts\":{\"u\":\"c\",\"d\":[1,2.5e3,true,null]}}";
	/* Hermes / Qwen */
	expect("hermes", false, false,
	       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"opts\": "
	       "{\"u\": \"c\", \"d\": [1, 2.5e3, true, null]}}}\n</tool_call>",
	       (struct want){ .n_calls = 1, .name = { "get_weather" }, .args = { W } });
	expect("hermes", false, false,
	       "Let me check.\n<tool_call>\n{\"arguments\": {\"a\": \"x \\\" \\u00e9\"}, \"name\": \"f\"}\n"
	       "</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"b\\\": 2}\"}\n</tool_call>",
	       (struct want){ .content = "Let me check.", .n_calls = 2, .name = { "f", "g" },
			      .args = { "{\"a\":\"x \\\" \\u00e9\"}", "{\"b\":2}" } });
	/* malformed: not JSON, no name, unterminated before the name */
	expect("hermes", false, false, "<tool_call>\nnot json\n</tool_call> ok",
	       (struct want){ .content = "<tool_call>\nnot json\n</tool_call> ok" });
	expect("hermes", false, false, "<tool_call>{\"arguments\": {}}</tool_call>",
	       (struct want){ .content = "<tool_call>{\"arguments\": {}}</tool_call>" });
	expect("hermes", false, false, "Hi <tool_call>{\"na",
	       (struct want){ .content = "Hi <tool_call>{\"na" });
	expect("hermes", false, false, "a < b and <tool_ca",
	       (struct want){ .content = "a < b and <tool_ca" });
	/* truncated after the name: a call with the arguments so far */
	expect("hermes", false, false, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":[1,2" } });
	/* reasoning: Qwen 3 style, and a prompt that opened <think> (R1, QwQ) */
	expect("hermes", true, false,
	       "<think>\nI should call f.\n</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
	       (struct want){ .reasoning = "I should call f.", .n_calls = 1, .name = { "f" },
			      .args = { "{}" } });
	expect("hermes", true, true, "Hmm, 2+2.\n</think>\n\nIt is 4.",
	       (struct want){ .content = "It is 4.", .reasoning = "Hmm, 2+2." });
	expect("hermes", true, true, "still thinking <",
	       (struct want){ .reasoning = "still thinking <" });
	expect("hermes", false, false, "<think>\nx\n</think>\n\nIt is 4.",
	       (struct want){ .content = "<think>\nx\n</think>\n\nIt is 4." });
	/* Mistral Nemo and Devstral */
	expect("mistral", false, false,
	       "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"x\": 1}, \"id\": \"abcdefghi\"}, "
	       "{\"name\": \"g\", \"arguments\": {}}]",
	       (struct want){ .n_calls = 2, .name = { "f", "g" }, .args = { "{\"x\":1}", "{}" } });
	expect("mistral-args", false, false,
	       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]f[ARGS]{}",
	       (struct want){ .n_calls = 2, .name = { "get_weather", "f" },
			      .args = { "{\"city\":\"Paris\"}", "{}" } });
	expect("mistral-args", false, false,
	       "[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{\"a\": [1]}",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":[1]}" } });
	expect("mistral-args", false, false, "[TOOL_CALLS]get weather[ARGS]{}",
	       (struct want){ .content = "[TOOL_CALLS]get weather[ARGS]{}" });
	/* Llama 3.x */
	expect("llama3", false, false, "{\"name\": \"f\", \"parameters\": {\"q\": \"x\"}}",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"q\":\"x\"}" } });
	expect("llama3", false, false, "{\"answer\": 42}", (struct want){ .content = "{\"answer\": 42}" });
	expect("llama3", false, false, "<|python_tag|>brave_search.call(query=\"ferrox\")",
	       (struct want){ .n_calls = 1, .name = { "brave_search" }, .args = { "{\"query\":\"ferrox\"}" } });
	expect("llama3", false, false, "Plain answer.", (struct want){ .content = "Plain answer." });
	/* DeepSeek R1 */
	expect("deepseek-r1", true, true,
	       "Need weather.\n</think>\n\n<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
	       "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>"
	       "get_weather\n```json\n{\"city\": \"Paris\"}\n```<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>"
	       "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>",
	       (struct want){ .reasoning = "Need weather.", .n_calls = 1, .name = { "get_weather" },
			      .args = { "{\"city\":\"Paris\"}" } });
	/* Command R */
	expect("command-r", false, false,
	       "Action:\n```json\n[\n    {\n        \"tool_name\": \"f\",\n        \"parameters\": {\"a\": 1}\n    }\n]\n```",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":1}" } });
	/* Functionary v3.1, Firefunction v2 */
	expect("functionary-v3.1", false, false, "<function=f>{\"a\": 1}</function><function=g>{}</function>",
	       (struct want){ .n_calls = 2, .name = { "f", "g" }, .args = { "{\"a\":1}", "{}" } });
	expect("firefunction-v2", false, false, " functools[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":1}" } });
	/* LFM2: JSON or Python-style elements */
	expect("lfm2", false, false,
	       "<|tool_call_start|>[get_weather(city=\"Paris (FR)\", days=2), f()]<|tool_call_end|>Checking.",
	       (struct want){ .content = "Checking.", .n_calls = 2, .name = { "get_weather", "f" },
			      .args = { "{\"city\":\"Paris (FR)\",\"days\":2}", "{}" } });
	expect("lfm2", false, false,
	       "<|tool_call_start|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]<|tool_call_end|>",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":1}" } });
	expect("lfm2", false, false, "<|tool_call_start|>[f(a=)]<|tool_call_end|>",
	       (struct want){ .content = "<|tool_call_start|>[f(a=)]<|tool_call_end|>" });
	/* Kimi K2: the raw name is the id */
	expect("kimi-k2", false, false,
	       "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>"
	       "{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{\"a\":1}" } });
	/* MiniMax M2, Seed-OSS: parameters */
	expect("minimax-m2", true, true,
	       "plan\n</think>\n\n<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"city\">Paris</parameter>\n"
	       "<parameter name=\"n\">2</parameter>\n<parameter name=\"o\">{\"u\": [1]}</parameter>\n</invoke>\n</minimax:tool_call>",
	       (struct want){ .reasoning = "plan", .n_calls = 1, .name = { "f" },
			      .args = { "{\"city\":\"Paris\",\"n\":2,\"o\":{\"u\":[1]}}" } });
	expect("seed-oss", true, false,
	       "<seed:think>hmm</seed:think><seed:tool_call>\n<function=f>\n<parameter=x>a\nb</parameter>\n"
	       "</function>\n</seed:tool_call>",
	       (struct want){ .reasoning = "hmm", .n_calls = 1, .name = { "f" }, .args = { "{\"x\":\"a\\nb\"}" } });
	/* Seed-OSS writes non-string values with Python's str(): with the
	 * tools' types an object parameter's repr becomes JSON */
	{
		cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\","
					   "\"parameters\":{\"properties\":{\"o\":{\"type\":\"object\"},"
					   "\"s\":{\"type\":\"string\"}}}}}]");
		struct srvtool_opts o = { .fmt = srvtool_format_named("seed-oss"), .calls = true,
					  .tools = tools };
		const char *t = "<seed:tool_call>\n<function=f>\n<parameter=o>{'u': 'it\\'s \"x\"', "
				"'d': [1, 2.5], 'b': True, 'n': None}</parameter>\n<parameter=s>{'a': 1}"
				"</parameter>\n</function>\n</seed:tool_call>";
		struct srvtool_msg m = { 0 };
		srvtool_parse(&o, t, strlen(t), false, &m);
		const char *want = "{\"o\":{\"u\":\"it's \\\"x\\\"\",\"d\":[1,2.5],\"b\":true,\"n\":null},"
				   "\"s\":\"{'a': 1}\"}";
		CHECK(m.n_calls == 1 && m.calls[0].args.p && !strcmp(m.calls[0].args.p, want),
		      "seed-oss python values: '%s', want '%s'", m.n_calls ? m.calls[0].args.p : "", want);
		CHECK(stream_check(&o, t, strlen(t), NULL, &m), "seed-oss python values: stream");
		srvtool_msg_free(&m);
		cJSON_Delete(tools);
	}
	/* gpt-oss */
	expect("gpt-oss", true, false,
	       "<|channel|>analysis<|message|>Need f.<|end|><|start|>assistant<|channel|>commentary "
	       "to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
	       (struct want){ .reasoning = "Need f.", .n_calls = 1, .name = { "f" }, .args = { "{\"a\":1}" } });
	expect("gpt-oss", true, false,
	       "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Four.",
	       (struct want){ .content = "Four.", .reasoning = "Easy." });
	expect("gpt-oss", true, false, "Just text, no channels.",
	       (struct want){ .content = "Just text, no channels." });
	/* generic */
	expect("generic", false, false,
	       "{\"tool_calls\": [{\"name\": \"f\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {}}]}",
	       (struct want){ .n_calls = 2, .name = { "f", "g" }, .args = { "{\"a\":1}", "{}" } });
	expect("generic", false, false, "{\"response\": \"Hello \\\"you\\\"\"}",
	       (struct want){ .content = "Hello \"you\"" });
	expect("generic", false, false, "{\"tool_call\": {\"name\": \"f\", \"arguments\": {}}}",
	       (struct want){ .n_calls = 1, .name = { "f" }, .args = { "{}" } });
	expect("generic", false, false, "Hello {there}", (struct want){ .content = "Hello {there}" });
	expect("generic", false, false, "{\"response\": 5}", (struct want){ .content = "{\"response\": 5}" });

	/* with the request's tools known, an unknown function is not a call,
	 * nor is a JSON answer that has a "name" key but no arguments */
	{
		cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]");
		struct srvtool_opts o = { .fmt = srvtool_format_named("hermes"), .calls = true,
					  .tools = tools };
		const char *t = "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"
				"<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
		struct srvtool_msg m = { 0 };
		srvtool_parse(&o, t, strlen(t), false, &m);
		CHECK(m.n_calls == 1 && !strcmp(m.calls[0].name, "f") && m.content.p &&
			      !strcmp(m.content.p, "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>"),
		      "unknown tool g: %d calls, content '%s'", m.n_calls, m.content.p ? m.content.p : "");
		srvtool_msg_free(&m);
		o.fmt = srvtool_format_named("llama3");
		t = "{\"name\": \"f\", \"age\": 3}";
		srvtool_parse(&o, t, strlen(t), false, &m);
		CHECK(m.n_calls == 0 && m.content.p && !strcmp(m.content.p, t),
		      "JSON with a name and no arguments: %d calls", m.n_calls);
		srvtool_msg_free(&m);
		cJSON_Delete(tools);
	}

	/* detection from template text */
	CHECK(!strcmp(srvtool_detect("{{ '<tool_call>' }}")->name, "hermes"), "detect hermes");
	CHECK(!strcmp(srvtool_detect("[TOOL_CALLS] [ARGS]")->name, "mistral-args"), "detect devstral");
	CHECK(!strcmp(srvtool_detect("plain {{ messages }}")->name, "generic"), "detect generic");
	CHECK(!strcmp(srvtool_detect("<think>{{ x }}")->name, "generic-think"), "detect think");

	/* hostile input: every prefix of every byte pattern parses without crashing */
	const char *junk = "<tool_call>{\"name\":\"\\u12\",\"arguments\":{{{[[[\"\\\"}}]]</tool_call>\xff\xfe";
	for (int i = 0; srvtool_format_at(i); i++) {
		struct srvtool_opts o = { .fmt = srvtool_format_at(i), .calls = true, .reasoning = true };
		for (size_t k = 0; k <= strlen(junk); k++) {
			struct srvtool_msg m = { 0 };
			srvtool_parse(&o, junk, k, k < strlen(junk), &m);
			srvtool_msg_free(&m);
		}
	}
	n_pass++;
}

/* ---- driver ---- */

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct srv_buf b = { 0 };
	char tmp[4096];
	size_t k;
	while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
		srv_buf_add(&b, tmp, k);
	fclose(f);
	if (n)
		*n = b.n;
	return b.p ? b.p : strdup("");
}

static int drive(int argc, char **argv)
{
	const char *tmpl_path = NULL, *fmt = NULL, *text_path = NULL, *prompt_path = NULL,
		   *tools_path = NULL, *chunks_path = NULL;
	bool reasoning = true, calls = true;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-calls")) {
			calls = false;
			continue;
		}
		if (!v) {
			fprintf(stderr, "%s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--template"))
			tmpl_path = v;
		else if (!strcmp(a, "--format"))
			fmt = v;
		else if (!strcmp(a, "--text"))
			text_path = v;
		else if (!strcmp(a, "--prompt"))
			prompt_path = v;
		else if (!strcmp(a, "--tools"))
			tools_path = v;
		else if (!strcmp(a, "--chunks"))
			chunks_path = v;
		else if (!strcmp(a, "--reasoning"))
			reasoning = strcmp(v, "none") != 0;
		else {
			fprintf(stderr, "unknown option %s\n", a);
			return 2;
		}
	}
	size_t n = 0;
	char *text = text_path ? slurp(text_path, &n) : NULL;
	char *tmpl = tmpl_path ? slurp(tmpl_path, NULL) : NULL;
	char *prompt = prompt_path ? slurp(prompt_path, NULL) : NULL;
	char *tools_txt = tools_path ? slurp(tools_path, NULL) : NULL;
	const struct srvtool_format *f = fmt ? srvtool_format_named(fmt) : srvtool_detect(tmpl);
	if (!text || !f) {
		fprintf(stderr, "usage: test_tool_parse parse (--template F | --format N) --text F ...\n");
		return 2;
	}
	cJSON *tools = tools_txt ? cJSON_Parse(tools_txt) : NULL;
	struct srvtool_opts o = { .fmt = f, .calls = calls, .reasoning = reasoning, .tools = tools };
	if (prompt && f->think_open) {
		size_t k = strlen(prompt);
		while (k && (prompt[k - 1] == '\n' || prompt[k - 1] == ' '))
			k--;
		size_t t = strlen(f->think_open);
		o.in_reasoning = k >= t && !memcmp(prompt + k - t, f->think_open, t);
	}
	struct srvtool_msg m = { 0 };
	srvtool_parse(&o, text, n, false, &m);
	FILE *ch = chunks_path ? fopen(chunks_path, "w") : NULL;
	bool sok = stream_check(&o, text, n, ch, &m);
	if (ch)
		fclose(ch);
	cJSON *out = cJSON_CreateObject();
	cJSON_AddStringToObject(out, "format", f->name);
	cJSON_AddStringToObject(out, "content", m.content.p ? m.content.p : "");
	cJSON_AddStringToObject(out, "reasoning_content", m.reasoning.p ? m.reasoning.p : "");
	cJSON_AddBoolToObject(out, "in_reasoning", o.in_reasoning);
	cJSON *tcs = cJSON_AddArrayToObject(out, "tool_calls");
	for (int i = 0; i < m.n_calls; i++) {
		char id[64];
		srvtool_call_id(&m, i, "chatcmpl-test", id);
		cJSON *tc = cJSON_CreateObject(), *fn;
		cJSON_AddStringToObject(tc, "id", id);
		cJSON_AddStringToObject(tc, "type", "function");
		fn = cJSON_AddObjectToObject(tc, "function");
		cJSON_AddStringToObject(fn, "name", m.calls[i].name);
		cJSON_AddStringToObject(fn, "arguments", m.calls[i].args.p ? m.calls[i].args.p : "");
		cJSON_AddBoolToObject(tc, "done", m.calls[i].done);
		cJSON_AddItemToArray(tcs, tc);
	}
	cJSON_AddBoolToObject(out, "stream_ok", sok);
	char *js = cJSON_PrintUnformatted(out);
	printf("%s\n", js);
	free(js);
	cJSON_Delete(out);
	cJSON_Delete(tools);
	srvtool_msg_free(&m);
	free(text);
	free(tmpl);
	free(prompt);
	free(tools_txt);
	return 0;
}

/* test_tool_parse grammar --template F --tools F [--choice auto|required|none|NAME]
 * [--no-parallel]: {"gbnf", "lazy", "triggers"} or {"error"}. */
static int grammar(int argc, char **argv)
{
	const char *tmpl_path = NULL, *tools_path = NULL, *choice = "auto";
	bool parallel = true;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--no-parallel"))
			parallel = false;
		else if (i + 1 < argc && !strcmp(argv[i], "--template"))
			tmpl_path = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--tools"))
			tools_path = argv[++i];
		else if (i + 1 < argc && !strcmp(argv[i], "--choice"))
			choice = argv[++i];
		else
			return 2;
	}
	char *tmpl = tmpl_path ? slurp(tmpl_path, NULL) : NULL;
	char *tools = tools_path ? slurp(tools_path, NULL) : NULL;
	if (!tmpl || !tools)
		return 2;
	struct srv_buf body = { 0 };
	bool named = strcmp(choice, "auto") && strcmp(choice, "required") && strcmp(choice, "none");
	char *cj = malloc(strlen(choice) + 64);
	if (named)
		sprintf(cj, "{\"type\":\"function\",\"function\":{\"name\":\"%s\"}}", choice);
	else
		sprintf(cj, "\"%s\"", choice);
	srv_buf_add(&body, "{\"tools\":", 9);
	srv_buf_add(&body, tools, strlen(tools));
	srv_buf_add(&body, ",\"tool_choice\":", 15);
	srv_buf_add(&body, cj, strlen(cj));
	srv_buf_add(&body, parallel ? "}" : ",\"parallel_tool_calls\":false}", parallel ? 1 : 29);
	cJSON *b = cJSON_Parse(body.p);
	struct srvtool_req *t = NULL;
	struct srv_error e = { 0 };
	cJSON *out = cJSON_CreateObject();
	if (!srvtool_req_parse(b, tmpl, NULL, 1, &t, &e)) {
		cJSON_AddStringToObject(out, "error", e.msg);
	} else if (t) {
		struct fx_err err = { 0 };
		if (srvtool_grammar(t, &err)) {
			cJSON_AddStringToObject(out, "error", err.msg);
		} else {
			cJSON_AddStringToObject(out, "gbnf", t->grammar ? t->grammar : "");
			cJSON_AddBoolToObject(out, "lazy", t->lazy);
			cJSON *tr = cJSON_AddArrayToObject(out, "triggers");
			for (int i = 0; i < t->n_triggers; i++)
				cJSON_AddItemToArray(tr, cJSON_CreateString(t->triggers[i]));
		}
		cJSON_AddStringToObject(out, "format", t->o.fmt->name);
	}
	char *js = cJSON_PrintUnformatted(out);
	printf("%s\n", js);
	free(js);
	cJSON_Delete(out);
	cJSON_Delete(b);
	srvtool_req_free(t);
	srv_buf_free(&body);
	free(cj);
	free(tmpl);
	free(tools);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "parse"))
		return drive(argc, argv);
	if (argc > 1 && !strcmp(argv[1], "grammar"))
		return grammar(argc, argv);
	unit();
	CHECK(n_mut_bad == 0, "%d of %d mutated replies stream differently from their final parse",
	      n_mut_bad, n_mut);
	printf("test_tool_parse: %d passed, %d failed (%d mutated replies streamed)\n", n_pass, n_fail,
	       n_mut);
	return n_fail ? 1 : 0;
}
