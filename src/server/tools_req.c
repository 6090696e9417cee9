/* The request side of tool calling (tools.h): tools, tool_choice,
 * parallel_tool_calls and reasoning_format read and checked as the OpenAI
 * API reference describes them (400 naming the field), the history's
 * string arguments turned into objects for the template, the GBNF
 * grammar for the calls a request allows, and the stream deltas of a
 * parsed reply. */
#include <stdint.h>
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

bool srvtool_req_parse(const cJSON *body, const char *tmpl, const char *rf_default, int n_choices,
		       struct srvtool_req **out, struct srv_error *e)
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
	if (rf_default && !strcmp(rf_default, "none"))
		t->rf = SRVTOOL_RF_NONE;
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
	fx_grammar_free(t->lazy_g);
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
				bool oom = false;
				cJSON *obj = *s ? srv_json_parse(s, strlen(s), NULL, &oom)
						: cJSON_CreateObject();
				oom |= !*s && !obj;
				if (!oom && !cJSON_IsObject(obj)) {
					cJSON_Delete(obj);
					srv_error_set(e, 400, E_INV, "messages",
						      "messages[%d].tool_calls[%d].function.arguments: not a JSON "
						      "object",
						      i, j);
					return false;
				}
				/* cJSON 1.7.15 replaces even when copying the key fails */
				bool put = !oom && cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
				if (!put || !obj->string) {
					if (!put)
						cJSON_Delete(obj);
					srv_error_set(e, 500, "server_error", NULL, "out of memory");
					return false;
				}
			}
			j++;
		}
		i++;
	}
	return true;
}

/* ---- the grammar of the calls ---- */

/* Any JSON value: a tool without "parameters" takes any object. */
static const char JSON_RULES[] =
	"tc-ws ::= [ \\t\\n]{0,48}\n"
	"tc-value ::= tc-object | tc-array | tc-string | tc-number | \"true\" | \"false\" | \"null\"\n"
	"tc-object ::= \"{\" tc-ws ( tc-string tc-ws \":\" tc-ws tc-value tc-ws "
	"( \",\" tc-ws tc-string tc-ws \":\" tc-ws tc-value tc-ws )* )? \"}\"\n"
	"tc-array ::= \"[\" tc-ws ( tc-value tc-ws ( \",\" tc-ws tc-value tc-ws )* )? \"]\"\n"
	"tc-string ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} ) )* \"\\\"\"\n"
	"tc-number ::= \"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [+-]? [0-9]+ )?\n";

struct gb {
	struct srv_buf b;
	bool oom;
};

static void gput(struct gb *g, const char *s)
{
	if (!g->oom && !srv_buf_add(&g->b, s, strlen(s)))
		g->oom = true;
}

/* s[0..n) as a GBNF string literal. */
static void glit_n(struct gb *g, const char *s, size_t n)
{
	gput(g, "\"");
	for (size_t i = 0; i < n; i++) {
		char c[8] = { s[i], 0 };
		if (s[i] == '"' || s[i] == '\\')
			c[0] = '\\', c[1] = s[i], c[2] = 0;
		else if (s[i] == '\n')
			strcpy(c, "\\n");
		else if (s[i] == '\t')
			strcpy(c, "\\t");
		else if (s[i] == '\r')
			strcpy(c, "\\r");
		gput(g, c);
	}
	gput(g, "\"");
}

static void glit(struct gb *g, const char *s)
{
	glit_n(g, s, strlen(s));
}

/* A marker as the parser matches it: its whitespace runs as tc-ws. */
static void gmarker(struct gb *g, const char *m)
{
	bool any = false;
	while (*m) {
		size_t k = strcspn(m, " \t\n");
		if (k) {
			gput(g, any ? " " : "");
			glit_n(g, m, k);
			any = true;
			m += k;
		}
		size_t w = strspn(m, " \t\n");
		if (w) {
			gput(g, any ? " tc-ws" : "tc-ws");
			any = true;
			m += w;
		}
	}
}

/* obj-i: {"NAME_KEY": "N", "ARGS_KEY": args} */
static void gobject(struct gb *g, const struct srvtool_format *f, const char *name, int i)
{
	char r[80];
	gput(g, "\"{\" tc-ws \"\\\"");
	gput(g, f->name_key ? f->name_key : "name");
	gput(g, "\\\"\" tc-ws \":\" tc-ws \"\\\"\" ");
	glit(g, name);
	gput(g, " \"\\\"\" tc-ws \",\" tc-ws \"\\\"");
	gput(g, f->args_key[0] ? f->args_key[0] : "arguments");
	snprintf(r, sizeof(r), "\\\"\" tc-ws \":\" tc-ws tool%d-args tc-ws \"}\"", i);
	gput(g, r);
}

/* XML_PARAMS formats (MiniMax M2, Seed-OSS) write a parameter's value raw
 * when its schema's type is "string" (the parser keeps the text verbatim)
 * and as JSON otherwise (the parser reads JSON). Raw text never holds
 * "</": the parser ends a value at the first param_close. */
static const char XML_RULES[] = "xml-text ::= ( [^<] | \"<\" [^/<] )*\n"
				"xml-key ::= [^<>\"=\\n]+\n";

/* Keywords a raw string value honours (besides annotations). */
static bool xml_string_keyword(const char *k)
{
	static const char *const ok[] = { "type", "enum", "const", "minLength", "maxLength", "title",
					  "description", "default", "examples", "$comment",
					  "deprecated", "readOnly", "writeOnly", "$schema", "$id" };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(k, ok[i]))
			return true;
	return false;
}

static int xml_fail(struct fx_err *err, int rc, int i, const char *fmt, const char *a,
		    const char *b)
{
	char m[sizeof(err->msg)];
	snprintf(m, sizeof(m), fmt, a, b);
	err->code = rc;
	snprintf(err->msg, sizeof(err->msg), "tools[%d].function.parameters: %.400s", i, m);
	return rc;
}

/* Rule r ::= a raw string value of schema s (type "string"): its enum or
 * const literals, else text of minLength..maxLength characters. */
static int xml_raw_value(struct gb *g, int i, const char *key, const cJSON *s, const char *r,
			 struct fx_err *err)
{
	const cJSON *kw;
	cJSON_ArrayForEach(kw, s)
	{
		if (!xml_string_keyword(kw->string))
			return xml_fail(err, FX_E_UNSUPPORTED, i,
					"property '%.100s': the call format writes strings raw, where "
					"'%.60s' cannot be enforced", key, kw->string);
	}
	const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
	const cJSON *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
	const cJSON *lo = cJSON_GetObjectItemCaseSensitive(s, "minLength");
	const cJSON *hi = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
	gput(g, r);
	gput(g, " ::= ");
	if (en || cn) {
		/* const, or else the enum's strings (with both, const must be
		 * one of them) */
		int n = 0;
		bool in_enum = !en;
		const cJSON *v;
		if (cn && !cJSON_IsString(cn))
			return xml_fail(err, FX_E_INVALID, i, "property '%.100s': 'const' of a string "
					"must be a string%s", key, "");
		cJSON_ArrayForEach(v, en)
		{
			if (!cJSON_IsString(v))
				return xml_fail(err, FX_E_INVALID, i, "property '%.100s': 'enum' of a "
						"string must hold strings%s", key, "");
			in_enum |= cn && !strcmp(v->valuestring, cn->valuestring);
			if (!cn) {
				gput(g, n++ ? " | " : "");
				glit(g, v->valuestring);
			}
		}
		if (cn && in_enum)
			glit(g, cn->valuestring);
		else if (!n)
			return xml_fail(err, FX_E_INVALID, i, "property '%.100s': 'enum' / 'const' "
					"leave no value%s", key, "");
	} else if (lo || hi) {
		double a = cJSON_IsNumber(lo) ? lo->valuedouble : 0, b = cJSON_IsNumber(hi) ? hi->valuedouble : -1;
		char q[64];
		if ((lo && !cJSON_IsNumber(lo)) || (hi && !cJSON_IsNumber(hi)) || a < 0 || a > 4096 ||
		    b > 4096 || (hi && b < a))
			return xml_fail(err, FX_E_INVALID, i, "property '%.100s': minLength / maxLength "
					"must be counts (0..4096), minLength <= maxLength%s", key, "");
		/* no newline inside: the parser trims one on each side (the
		 * optional ones around every value), which would change the
		 * length */
		if (hi)
			snprintf(q, sizeof(q), "[^<\\n]{%d,%d}", (int)a, (int)b);
		else
			snprintf(q, sizeof(q), "[^<\\n]{%d,}", (int)a);
		gput(g, q);
	} else {
		gput(g, "xml-text");
	}
	gput(g, "\n");
	return FX_OK;
}

/* Rule r ::= the JSON value of schema s, the tool's $defs / definitions
 * beside it so that its $refs resolve. */
static int xml_json_value(struct gb *g, int i, const cJSON *params, const cJSON *s,
			  const char *r, struct fx_err *err)
{
	cJSON *d = cJSON_Duplicate(s, true);
	static const char *const defs[] = { "$defs", "definitions" };
	bool ok = d != NULL;
	for (int k = 0; ok && k < 2; k++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, defs[k]);
		if (!v || !cJSON_IsObject(d) || cJSON_GetObjectItemCaseSensitive(d, defs[k]))
			continue;
		cJSON *c = cJSON_Duplicate(v, true);
		ok = c && cJSON_AddItemToObject(d, defs[k], c);
		if (!ok)
			cJSON_Delete(c);
	}
	char *js = ok ? cJSON_PrintUnformatted(d) : NULL, *gbnf = NULL;
	cJSON_Delete(d);
	int rc = js ? fx_json_schema_to_gbnf(js, r, &gbnf, err) : FX_E_NOMEM;
	free(js);
	if (rc == FX_OK) {
		gput(g, gbnf);
		gput(g, "\n");
	} else if (rc != FX_E_NOMEM) {
		char m[sizeof(err->msg)];
		snprintf(m, sizeof(m), "tools[%d].function.parameters: %.400s", i, err->msg);
		memcpy(err->msg, m, sizeof(m));
	}
	fx_string_free(gbnf);
	return rc;
}

/* tool-i's arguments in an XML_PARAMS format: the properties of params in
 * their order, the required ones always and the others optionally, each
 * P_OPEN "key" P_END value P_CLOSE; without properties any keys with raw
 * values (the parser's reading of a free object). Keywords that would
 * make the object looser than this (minProperties, ...) are refused. */
static int xml_args(struct gb *g, const struct srvtool_format *f, int i, const cJSON *params,
		    struct fx_err *err)
{
	static const char *const refused[] = { "minProperties", "maxProperties", "patternProperties",
					       "propertyNames", "dependentRequired", "dependentSchemas",
					       "anyOf", "oneOf", "allOf", "not", "if", "then", "else",
					       "unevaluatedProperties" };
	char r[64];
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
	const cJSON *req = cJSON_GetObjectItemCaseSensitive(params, "required");
	for (size_t k = 0; params && k < sizeof(refused) / sizeof(refused[0]); k++)
		if (cJSON_GetObjectItemCaseSensitive(params, refused[k]))
			return xml_fail(err, FX_E_UNSUPPORTED, i, "'%.60s' cannot be enforced on the %s "
					"call format's parameters", refused[k], f->name);
	const cJSON *q;
	cJSON_ArrayForEach(q, req)
	{
		if (!cJSON_IsString(q) || !cJSON_GetObjectItemCaseSensitive(props, q->valuestring))
			return xml_fail(err, FX_E_UNSUPPORTED, i, "required '%.100s' is not one of the "
					"properties%s", cJSON_IsString(q) ? q->valuestring : "?", "");
	}
	snprintf(r, sizeof(r), "tool%d-args ::= ", i);
	gput(g, r);
	if (!props || !cJSON_GetArraySize(props)) {
		gput(g, "( tc-ws ");
		glit(g, f->param_open);
		gput(g, " xml-key ");
		gmarker(g, f->param_name_end);
		gput(g, " xml-text ");
		gmarker(g, f->param_close);
		gput(g, " )*\n");
		return FX_OK;
	}
	int j = 0;
	cJSON_ArrayForEach(q, props)
	{
		bool need = false;
		const cJSON *n;
		cJSON_ArrayForEach(n, req)
			need |= !strcmp(n->valuestring, q->string);
		snprintf(r, sizeof(r), "%stool%d-p%d%s", j ? " " : "", i, j, need ? "" : "?");
		gput(g, r);
		j++;
	}
	gput(g, "\n");
	j = 0;
	cJSON_ArrayForEach(q, props)
	{
		snprintf(r, sizeof(r), "tool%d-p%d ::= tc-ws ", i, j);
		gput(g, r);
		glit(g, f->param_open);
		gput(g, " ");
		glit(g, q->string);
		gput(g, " ");
		gmarker(g, f->param_name_end);
		/* the templates' layout: a newline on each side of a value,
		 * which the parser trims */
		snprintf(r, sizeof(r), " \"\\n\"? tool%d-v%d \"\\n\"? ", i, j);
		gput(g, r);
		gmarker(g, f->param_close);
		gput(g, "\n");
		snprintf(r, sizeof(r), "tool%d-v%d", i, j);
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(q, "type");
		int rc = cJSON_IsString(ty) && !strcmp(ty->valuestring, "string")
				 ? xml_raw_value(g, i, q->string, q, r, err)
				 : xml_json_value(g, i, params, q, r, err);
		if (rc)
			return rc;
		j++;
	}
	return FX_OK;
}

/* call-i in the format f. */
static void gcall(struct gb *g, const struct srvtool_format *f, const char *name, int i)
{
	char r[128];
	switch (f->family) {
	case SRVTOOL_JSON_EACH:
		gmarker(g, f->call_open);
		gput(g, " tc-ws ");
		gobject(g, f, name, i);
		gput(g, " tc-ws ");
		gmarker(g, f->call_close);
		break;
	case SRVTOOL_NAME_ARGS:
		gmarker(g, f->call_open);
		gput(g, " ");
		if (f->name_prefix) {
			glit(g, f->name_prefix);
			gput(g, " ");
		}
		glit(g, name);
		if (f->name_index)
			gput(g, " \":\" [0-9]{1,3}");
		if (f->id_marker) {
			gput(g, " ( ");
			glit(g, f->id_marker);
			gput(g, " [a-zA-Z0-9]{9} )?");
		}
		gput(g, " ");
		gmarker(g, f->name_end);
		snprintf(r, sizeof(r), " tc-ws tool%d-args", i);
		gput(g, r);
		if (f->call_close) {
			gput(g, " ");
			gmarker(g, f->call_close);
		}
		break;
	case SRVTOOL_XML_PARAMS: /* exact tags: "<invoke name=" keeps its blank */
		glit(g, f->call_open);
		gput(g, " ");
		glit(g, name);
		gput(g, " ");
		gmarker(g, f->name_end);
		snprintf(r, sizeof(r), " tool%d-args tc-ws ", i);
		gput(g, r);
		gmarker(g, f->call_close);
		break;
	case SRVTOOL_GPT_OSS:
		/* the recipient after the channel, or before it (as the template
		 * writes the history) */
		gput(g, "( \"<|channel|>commentary to=functions.\" ");
		glit(g, name);
		gput(g, " | \" to=functions.\" ");
		glit(g, name);
		snprintf(r, sizeof(r), " \"<|channel|>commentary\" ) ( \" json\" | \" <|constrain|>json\" )? "
				       "\"<|message|>\" tool%d-args", i);
		gput(g, r);
		break;
	default: /* the JSON object families */
		gobject(g, f, name, i);
		break;
	}
}

/* The calls rule: one call or (parallel) several, in the format's layout. */
static void gcalls(struct gb *g, const struct srvtool_req *t)
{
	const struct srvtool_format *f = t->o.fmt;
	const char *many = t->parallel ? " )*" : " )?";
	switch (f->family) {
	case SRVTOOL_JSON_LIST:
		gmarker(g, f->call_open);
		if (f->list_pre) {
			gput(g, " tc-ws ");
			gmarker(g, f->list_pre);
		}
		gput(g, " tc-ws \"[\" tc-ws call");
		if (t->parallel)
			gput(g, " ( tc-ws \",\" tc-ws call )*");
		gput(g, " tc-ws \"]\"");
		if (f->call_close) {
			gput(g, " tc-ws ");
			gmarker(g, f->call_close);
		}
		break;
	case SRVTOOL_GENERIC:
		if (t->parallel)
			gput(g, "\"{\" tc-ws \"\\\"tool_calls\\\"\" tc-ws \":\" tc-ws \"[\" tc-ws call "
				"( tc-ws \",\" tc-ws call )* tc-ws \"]\" tc-ws \"}\"");
		else
			gput(g, "\"{\" tc-ws \"\\\"tool_call\\\"\" tc-ws \":\" tc-ws call tc-ws \"}\"");
		break;
	case SRVTOOL_JSON_BARE:
		gput(g, "call");
		if (t->parallel)
			gput(g, " ( tc-ws \";\"? tc-ws call )*");
		break;
	case SRVTOOL_XML_PARAMS:
		/* several calls in one section (MiniMax M2's template) or each
		 * in its own (Seed-OSS's); the parser reads both */
		gput(g, "xml-section");
		if (t->parallel)
			gput(g, " ( tc-ws xml-section )*");
		gput(g, "\nxml-section ::= ");
		glit(g, f->sect_open);
		gput(g, " tc-ws call");
		if (t->parallel)
			gput(g, " ( tc-ws call )*");
		gput(g, " tc-ws ");
		glit(g, f->sect_close);
		break;
	default:
		if (f->sect_open) {
			gmarker(g, f->sect_open);
			gput(g, " tc-ws ");
		}
		gput(g, "call");
		if (t->parallel) {
			gput(g, " ( tc-ws call");
			gput(g, many);
		}
		if (f->sect_close) { /* optional, as for the parser (R1 distills' template omits it) */
			gput(g, " ( tc-ws ");
			gmarker(g, f->sect_close);
			gput(g, " )?");
		}
		break;
	}
}

static int add_trigger(struct srvtool_req *t, const char *s, struct fx_err *err)
{
	char **tr = realloc(t->triggers, (size_t)(t->n_triggers + 1) * sizeof(*tr));
	if (!tr || !(tr[t->n_triggers] = strdup(s))) {
		if (tr)
			t->triggers = tr;
		err->code = FX_E_NOMEM;
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return FX_E_NOMEM;
	}
	t->triggers = tr;
	t->n_triggers++;
	return FX_OK;
}

int srvtool_grammar(struct srvtool_req *t, struct fx_err *err)
{
	const struct srvtool_format *f = t->o.fmt;
	if (!t->tools || t->choice == SRVTOOL_CHOICE_NONE)
		return FX_OK;
	struct gb g = { 0 };
	/* generic: the reply is always JSON, a call or a response */
	bool lazy = t->choice == SRVTOOL_CHOICE_AUTO && f->family != SRVTOOL_GENERIC;
	gput(&g, "root ::= ");
	if (t->o.in_reasoning && !lazy && f->think_close) {
		/* the prompt opened the thinking block: a forced call comes
		 * after its close (else the parser reads the call as thinking) */
		gput(&g, "tc-ws ");
		gmarker(&g, f->think_close);
		gput(&g, " tc-ws ");
	}
	gput(&g, "calls");
	if (t->choice == SRVTOOL_CHOICE_AUTO && f->family == SRVTOOL_GENERIC)
		gput(&g, " | \"{\" tc-ws \"\\\"response\\\"\" tc-ws \":\" tc-ws tc-string tc-ws \"}\"");
	gput(&g, "\ncalls ::= ");
	gcalls(&g, t);
	gput(&g, "\ncall ::= ");
	int i = 0, n_alt = 0;
	const cJSON *tool;
	cJSON_ArrayForEach(tool, t->tools)
	{
		const char *name = tool_name(tool);
		if (t->choice != SRVTOOL_CHOICE_NAMED || !strcmp(name, t->forced)) {
			char r[32];
			snprintf(r, sizeof(r), "%scall%d", n_alt++ ? " | " : "", i);
			gput(&g, r);
		}
		i++;
	}
	gput(&g, "\n");
	i = 0;
	int rc = FX_OK;
	cJSON_ArrayForEach(tool, t->tools)
	{
		const char *name = tool_name(tool);
		char r[48];
		snprintf(r, sizeof(r), "call%d ::= ", i);
		gput(&g, r);
		gcall(&g, f, name, i);
		gput(&g, "\n");
		const cJSON *params = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(tool, "function"), "parameters");
		snprintf(r, sizeof(r), "tool%d-args", i);
		if (f->family == SRVTOOL_XML_PARAMS) {
			if ((rc = xml_args(&g, f, i, cJSON_IsObject(params) ? params : NULL, err)))
				goto fail;
		} else if (!params || cJSON_IsNull(params)) {
			gput(&g, r);
			gput(&g, " ::= tc-object\n");
		} else {
			char *schema = cJSON_PrintUnformatted(params), *gbnf = NULL;
			rc = schema ? fx_json_schema_to_gbnf(schema, r, &gbnf, err) : FX_E_NOMEM;
			free(schema);
			if (rc) {
				if (rc == FX_E_NOMEM) {
					err->code = FX_E_NOMEM;
					snprintf(err->msg, sizeof(err->msg), "out of memory");
				} else {
					char m[sizeof(err->msg)];
					snprintf(m, sizeof(m), "tools[%d].function.parameters: %.400s", i,
						 err->msg);
					memcpy(err->msg, m, sizeof(m));
				}
				fx_string_free(gbnf);
				goto fail;
			}
			gput(&g, gbnf);
			gput(&g, "\n");
			fx_string_free(gbnf);
		}
		i++;
	}
	gput(&g, JSON_RULES);
	if (f->family == SRVTOOL_XML_PARAMS)
		gput(&g, XML_RULES);
	if (g.oom)
		goto nomem;
	if (lazy) {
		const char *open = f->family == SRVTOOL_NAME_ARGS || f->family == SRVTOOL_XML_PARAMS
					   ? (f->sect_open ? f->sect_open : f->call_open)
					   : f->call_open;
		if (f->family == SRVTOOL_GPT_OSS) {
			if ((rc = add_trigger(t, " to=functions.", err)))
				goto fail;
			open = "<|channel|>commentary to=functions.";
		}
		if (f->family == SRVTOOL_JSON_BARE)
			open = "{"; /* Llama 3.x: a call is the whole reply */
		if ((rc = add_trigger(t, open, err)))
			goto fail;
	}
	t->lazy = lazy;
	t->grammar = g.b.p;
	return FX_OK;
nomem:
	err->code = FX_E_NOMEM;
	snprintf(err->msg, sizeof(err->msg), "out of memory");
	rc = FX_E_NOMEM;
fail:
	srv_buf_free(&g.b);
	return rc;
}

bool srvtool_install_grammar(struct srv_req *r, struct srv_error *e)
{
	struct srvtool_req *t = r->tool;
	if (!t || !t->o.calls)
		return true;
	bool forced = t->choice == SRVTOOL_CHOICE_REQUIRED || t->choice == SRVTOOL_CHOICE_NAMED;
	if (forced && r->g.grammar) {
		srv_error_set(e, 400, E_INV, "tool_choice",
			      "tool_choice forces a call and another field (response_format, grammar, "
			      "json_schema, ...) constrains the output too: send one");
		return false;
	}
	struct fx_err err = { 0 };
	int rc = srvtool_grammar(t, &err);
	if (rc == FX_E_NOMEM)
		return oom(e);
	if (rc && forced) {
		srv_error_set(e, 400, E_INV, "tools", "tool_choice cannot be enforced: %s", err.msg);
		return false;
	}
	if (rc) {
		fprintf(stderr, "serve: %s: %s (tool calls parsed, not constrained)\n", r->id, err.msg);
		return true;
	}
	if (!t->grammar || (!forced && r->g.grammar))
		return true; /* auto beside another constraint: that one rules */
	/* generic + auto: no trigger, so parsed only. llama.cpp forces its JSON
	 * from the start and tells the model so in the system prompt; without
	 * that prompt a model that does not know the format calls a tool for
	 * every request (SmolLM2 did), so ferrox leaves auto replies free. */
	bool from_start = forced;
	struct fx_grammar *g = NULL;
	rc = fx_grammar_parse(t->grammar, strlen(t->grammar), NULL, &g, &err);
	if (rc == FX_E_NOMEM)
		return oom(e);
	if (rc) { /* our own text: a bug, not the client's fault */
		srv_error_set(e, 500, "server_error", NULL, "tool-call grammar: %s", err.msg);
		return false;
	}
	if (from_start)
		r->g.grammar = g;
	else
		t->lazy_g = g;
	return true;
}

void srvtool_lazy_step(struct srv *s, struct srv_choice *c)
{
	struct srvtool_req *t = c->req->tool;
	if (!t || !t->lazy_g || c->matcher || c->index >= t->n_sent)
		return;
	struct srvtool_sent *st = &t->sent[c->index];
	size_t best = c->text.n;
	for (int i = 0; i < t->n_triggers; i++) {
		size_t k = strlen(t->triggers[i]);
		size_t from = st->scanned > k ? st->scanned - k : 0; /* a trigger across tokens */
		const char *q = from <= c->text.n
					? memmem(c->text.p + from, c->text.n - from, t->triggers[i], k)
					: NULL;
		if (q && (size_t)(q - c->text.p) < best)
			best = (size_t)(q - c->text.p);
	}
	st->scanned = c->text.n;
	if (best == c->text.n)
		return;
	struct fx_err err = { 0 };
	if (!s->gvocab && fx_grammar_vocab_create(s->model, &s->gvocab, &err)) {
		fprintf(stderr, "serve: %s\n", err.msg);
		return;
	}
	struct fx_matcher *m = NULL;
	if (fx_matcher_create(t->lazy_g, s->gvocab, &m, &err) ||
	    fx_matcher_accept_bytes(m, c->text.p + best, c->text.n - best)) {
		fprintf(stderr, "serve: %s: the reply's tool call does not fit its grammar; left "
				"unconstrained\n",
			c->req->id);
		fx_matcher_free(m);
		st->scanned = (size_t)-1 / 2; /* never again for this choice */
		return;
	}
	c->matcher = m;
	fx_sampler_set_matcher(c->smp, m);
}

/* ---- streaming ---- */

/* FNV-1a over s and i: ids that are the same for every parse of a reply. */
void srvtool_call_id(const struct srvtool_msg *m, int i, const char *id_base, char out[64])
{
	if (i < m->n_calls && m->calls[i].id && strlen(m->calls[i].id) < 64) {
		strcpy(out, m->calls[i].id);
		return;
	}
	uint64_t h1 = 1469598103934665603ull, h2 = 1099511628211ull * 31;
	for (const char *c = id_base ? id_base : ""; *c; c++) {
		h1 = (h1 ^ (unsigned char)*c) * 1099511628211ull;
		h2 = (h2 ^ (unsigned char)*c) * 0x100000001b3ull + 7;
	}
	h1 = (h1 ^ (uint64_t)i) * 1099511628211ull;
	h2 = (h2 ^ ((uint64_t)i << 8)) * 0x100000001b3ull;
	if (m->id9) {
		static const char al[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
		uint64_t h = h1 ^ (h2 << 17);
		for (int k = 0; k < 9; k++, h /= 62)
			out[k] = al[h % 62];
		out[9] = 0;
		return;
	}
	snprintf(out, 64, "call_%016llx%08llx", (unsigned long long)h1,
		 (unsigned long long)(h2 & 0xffffffffull));
}

/* Extend sent bytes of have[0..n): the new bytes, or NULL when have no
 * longer starts with what was sent (a contradiction). */
static bool extends(const struct srv_buf *have, size_t sent)
{
	return have->n >= sent;
}

bool srvtool_delta(const struct srvtool_msg *m, const char *id_base, struct srvtool_sent *st,
		   cJSON *delta)
{
	/* The parser's output only grows (tools.h); extends() checks lengths
	 * and the caller's tests check bytes. */
	if (m->reasoning.n > st->reasoning) {
		cJSON *v = cJSON_CreateString(m->reasoning.p + st->reasoning);
		if (!v || !cJSON_AddItemToObject(delta, "reasoning_content", v)) {
			cJSON_Delete(v); /* not added: still ours */
			return false;
		}
		st->reasoning = m->reasoning.n;
	} else if (!extends(&m->reasoning, st->reasoning)) {
		st->diverged = true;
	}
	if (m->content.n > st->content) {
		cJSON *v = cJSON_CreateString(m->content.p + st->content);
		if (!v || !cJSON_AddItemToObject(delta, "content", v)) {
			cJSON_Delete(v); /* not added: still ours */
			return false;
		}
		st->content = m->content.n;
	} else if (!extends(&m->content, st->content)) {
		st->diverged = true;
	}
	if (m->n_calls < st->n_calls)
		st->diverged = true;
	cJSON *tcs = NULL;
	for (int i = 0; i < m->n_calls; i++) {
		const struct srvtool_call *c = &m->calls[i];
		bool head = i >= st->n_calls;
		size_t from = head ? 0 : st->args[i];
		if (c->args.n < from) {
			st->diverged = true;
			continue;
		}
		if (!head && c->args.n == from)
			continue;
		if (!tcs && !(tcs = cJSON_AddArrayToObject(delta, "tool_calls")))
			return false;
		cJSON *tc = cJSON_CreateObject();
		if (!tc || !cJSON_AddItemToArray(tcs, tc)) {
			cJSON_Delete(tc);
			return false;
		}
		/* a chunk is whole or refused: a call without its id or name
		 * would be a different reply, not a shorter one */
		if (!cJSON_AddNumberToObject(tc, "index", i))
			return false;
		cJSON *fn;
		if (head) {
			char id[64];
			srvtool_call_id(m, i, id_base, id);
			if (!cJSON_AddStringToObject(tc, "id", id) ||
			    !cJSON_AddStringToObject(tc, "type", "function"))
				return false;
			fn = cJSON_AddObjectToObject(tc, "function");
			if (fn && !cJSON_AddStringToObject(fn, "name", c->name))
				return false;
		} else {
			fn = cJSON_AddObjectToObject(tc, "function");
		}
		if (!fn || !cJSON_AddStringToObject(fn, "arguments", c->args.p ? c->args.p + from : ""))
			return false;
		st->args[i] = c->args.n;
	}
	if (m->n_calls > st->n_calls)
		st->n_calls = m->n_calls;
	return true;
}
