/* The request side of tool calling (tools.h): tools, tool_choice,
 * parallel_tool_calls and reasoning_format read and checked as the OpenAI
 * API reference describes them (400 naming the field), the history's
 * string arguments turned into objects for the template, and the GBNF
 * grammar for the calls a request allows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tools.h"

static const char E_INV[] = "invalid_request_error";

static bool oom(struct srv_error *e)
{
	srv_error_set(e, 500, "server_error", NULL, "out of memory");
	return false;
}

/* OpenAI: a-z, A-Z, 0-9, underscores and dashes, at most 64. */
static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 64)
		return false;
	for (; *s; s++)
		if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || ('0' <= *s && *s <= '9') ||
		      *s == '_' || *s == '-'))
			return false;
	return true;
}

static const char *tool_name(const cJSON *t)
{
	return cJSON_GetStringValue(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name"));
}

/* tools: [{"type": "function", "function": {"name", "description"?,
 * "parameters"?, "strict"?}}] */
static bool check_tools(const cJSON *tools, struct srv_error *e)
{
	if (!cJSON_IsArray(tools)) {
		srv_error_set(e, 400, E_INV, "tools", "'tools' must be a list of tool objects");
		return false;
	}
	int i = 0;
	const cJSON *t;
	cJSON_ArrayForEach(t, tools)
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
		const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
		const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
		const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
		const cJSON *strict = cJSON_GetObjectItemCaseSensitive(fn, "strict");
		if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function")) {
			srv_error_set(e, 400, E_INV, "tools",
				      "tools[%d]: must be {\"type\": \"function\", \"function\": {...}}", i);
			return false;
		}
		if (!cJSON_IsObject(fn)) {
			srv_error_set(e, 400, E_INV, "tools", "tools[%d].function: must be an object", i);
			return false;
		}
		if (!cJSON_IsString(name) || !name_ok(name->valuestring)) {
			srv_error_set(e, 400, E_INV, "tools",
				      "tools[%d].function.name: must be 1-64 letters, digits, '_' or '-'", i);
			return false;
		}
		if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc)) {
			srv_error_set(e, 400, E_INV, "tools",
				      "tools[%d].function.description: must be a string", i);
			return false;
		}
		if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params)) {
			srv_error_set(e, 400, E_INV, "tools",
				      "tools[%d].function.parameters: must be a JSON Schema object", i);
			return false;
		}
		if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict)) {
			srv_error_set(e, 400, E_INV, "tools", "tools[%d].function.strict: must be a boolean",
				      i);
			return false;
		}
		const cJSON *u;
		int j = 0;
		cJSON_ArrayForEach(u, tools)
		{
			if (j++ >= i)
				break;
			if (!strcmp(tool_name(u), name->valuestring)) {
				srv_error_set(e, 400, E_INV, "tools",
					      "tools[%d]: the name '%s' is used twice", i, name->valuestring);
				return false;
			}
		}
		i++;
	}
	return true;
}

static bool has_tool(const cJSON *tools, const char *name)
{
	const cJSON *t;
	cJSON_ArrayForEach(t, tools)
	{
		const char *n = tool_name(t);
		if (n && !strcmp(n, name))
			return true;
	}
	return false;
}

static bool parse_choice(const cJSON *v, const cJSON *tools, struct srvtool_req *t,
			 struct srv_error *e)
{
	const char *s = cJSON_GetStringValue(v);
	if (s && !strcmp(s, "none"))
		t->choice = SRVTOOL_CHOICE_NONE;
	else if (s && !strcmp(s, "auto"))
		t->choice = SRVTOOL_CHOICE_AUTO;
	else if (s && !strcmp(s, "required"))
		t->choice = SRVTOOL_CHOICE_REQUIRED;
	else if (cJSON_IsObject(v)) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(v, "type");
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(v, "function"), "name"));
		if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !name) {
			srv_error_set(e, 400, E_INV, "tool_choice",
				      "'tool_choice' must be \"none\", \"auto\", \"required\" or "
				      "{\"type\": \"function\", \"function\": {\"name\": ...}}");
			return false;
		}
		if (!tools || !has_tool(tools, name)) {
			srv_error_set(e, 400, E_INV, "tool_choice",
				      "tool_choice names the function '%.64s', which is not in 'tools'", name);
			return false;
		}
		t->choice = SRVTOOL_CHOICE_NAMED;
		if (!(t->forced = strdup(name)))
			return oom(e);
	} else {
		srv_error_set(e, 400, E_INV, "tool_choice",
			      "'tool_choice' must be \"none\", \"auto\", \"required\" or "
			      "{\"type\": \"function\", \"function\": {\"name\": ...}}");
		return false;
	}
	if (t->choice == SRVTOOL_CHOICE_REQUIRED && !tools) {
		srv_error_set(e, 400, E_INV, "tool_choice",
			      "tool_choice \"required\" needs a non-empty 'tools' list");
		return false;
	}
	return true;
}

bool srvtool_req_parse(const cJSON *body, const char *tmpl, int n_choices, struct srvtool_req **out,
		       struct srv_error *e)
{
	*out = NULL;
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
	const cJSON *choice = cJSON_GetObjectItemCaseSensitive(body, "tool_choice");
	const cJSON *rf = cJSON_GetObjectItemCaseSensitive(body, "reasoning_format");
	if (cJSON_IsNull(tools))
		tools = NULL;
	if (tools && !check_tools(tools, e))
		return false;
	if (tools && cJSON_GetArraySize(tools) == 0)
		tools = NULL; /* as no tools (llama-server does the same) */
	struct srvtool_req *t = calloc(1, sizeof(*t));
	if (!t)
		return oom(e);
	t->parallel = true;
	t->choice = tools ? SRVTOOL_CHOICE_AUTO : SRVTOOL_CHOICE_NONE;
	if (choice && !cJSON_IsNull(choice) && !parse_choice(choice, tools, t, e))
		goto fail;
	if (!srv_json_bool(body, "parallel_tool_calls", &t->parallel, e))
		goto fail;
	if (rf && !cJSON_IsNull(rf)) {
		const char *s = cJSON_GetStringValue(rf);
		if (s && !strcmp(s, "none"))
			t->rf = SRVTOOL_RF_NONE;
		else if (s && !strcmp(s, "deepseek"))
			t->rf = SRVTOOL_RF_DEEPSEEK;
		else if (s && !strcmp(s, "auto"))
			t->rf = SRVTOOL_RF_AUTO;
		else {
			srv_error_set(e, 400, E_INV, "reasoning_format",
				      "'reasoning_format' must be \"auto\", \"none\" or \"deepseek\"");
			goto fail;
		}
	}
	const struct srvtool_format *f = srvtool_detect(tmpl);
	bool calls = tools && t->choice != SRVTOOL_CHOICE_NONE;
	bool reasoning = t->rf != SRVTOOL_RF_NONE &&
			 (f->think_open || f->family == SRVTOOL_GPT_OSS);
	if (!calls && !reasoning) {
		srvtool_req_free(t);
		return true; /* plain text: the reply is content as generated */
	}
	if (tools && !(t->tools = cJSON_Duplicate(tools, 1)))
		goto nomem;
	t->o = (struct srvtool_opts){ .fmt = f, .calls = calls, .reasoning = reasoning,
				      .tools = t->tools, .max_calls = t->parallel ? 0 : 1 };
	t->n_sent = n_choices;
	if (!(t->sent = calloc((size_t)n_choices, sizeof(*t->sent))))
		goto nomem;
	*out = t;
	return true;
nomem:
	oom(e);
fail:
	srvtool_req_free(t);
	return false;
}

void srvtool_req_free(struct srvtool_req *t)
{
	if (!t)
		return;
	cJSON_Delete(t->tools);
	free(t->forced);
	free(t->grammar);
	for (int i = 0; i < t->n_triggers; i++)
		free(t->triggers[i]);
	free(t->triggers);
	free(t->sent);
	free(t);
}

void srvtool_prompt_opened(struct srvtool_req *t, const char *prompt, size_t n)
{
	const char *to = t->o.fmt->think_open;
	if (!t->o.reasoning || !to)
		return;
	while (n && (prompt[n - 1] == '\n' || prompt[n - 1] == ' ' || prompt[n - 1] == '\r'))
		n--;
	size_t k = strlen(to);
	t->o.in_reasoning = n >= k && !memcmp(prompt + n - k, to, k);
}

bool srvtool_fix_history(cJSON *msgs, struct srv_error *e)
{
	int i = 0;
	cJSON *m;
	cJSON_ArrayForEach(m, msgs)
	{
		cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
		if (!tcs || cJSON_IsNull(tcs)) {
			i++;
			continue;
		}
		if (!cJSON_IsArray(tcs)) {
			srv_error_set(e, 400, E_INV, "messages", "messages[%d].tool_calls: must be a list", i);
			return false;
		}
		int j = 0;
		cJSON *tc;
		cJSON_ArrayForEach(tc, tcs)
		{
			cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
			cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
			if (!cJSON_IsObject(fn) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name"))) {
				srv_error_set(e, 400, E_INV, "messages",
					      "messages[%d].tool_calls[%d]: must be {\"type\": \"function\", "
					      "\"function\": {\"name\": ..., \"arguments\": ...}}",
					      i, j);
				return false;
			}
			if (cJSON_IsString(args)) {
				const char *s = args->valuestring;
				cJSON *obj = *s ? cJSON_Parse(s) : cJSON_CreateObject();
				if (!cJSON_IsObject(obj)) {
					cJSON_Delete(obj);
					srv_error_set(e, 400, E_INV, "messages",
						      "messages[%d].tool_calls[%d].function.arguments: not a JSON "
						      "object",
						      i, j);
					return false;
				}
				cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
			}
			j++;
		}
		i++;
	}
	return true;
}
