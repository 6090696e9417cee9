/* Structured output: the request fields that constrain generation to a
 * grammar, compiled once per request (the choices share the immutable
 * fx_grammar; each gets its own fx_matcher in the engine).
 *
 * Accepted spellings, one constraint per request:
 * - OpenAI: response_format {"type": "text" | "json_object" |
 *   "json_schema", "json_schema": {"name", "schema", "strict"}}
 *   (strict is accepted and changes nothing: the output always matches).
 * - llama-server: "grammar" (GBNF text), "json_schema" (a schema object).
 * - vLLM: "structured_outputs" {"json" | "regex" | "choice" | "grammar"}
 *   and the older guided_json / guided_regex / guided_choice /
 *   guided_grammar (what clients send in extra_body).
 * A bad schema, regex or grammar is a 400 naming the field and the
 * problem.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char E_INV[] = "invalid_request_error";

/* A converter's result as the caller's malloc'ed text: gbnf (released
 * with fx_string_free) on success, else NULL with e filled (400 naming
 * param, 500 when out of memory). */
static char *take_gbnf(int rc, char *gbnf, const struct fx_err *err, const char *param,
		       struct srv_error *e)
{
	char *copy;
	if (rc) {
		srv_error_set(e, rc == FX_E_NOMEM ? 500 : 400,
			      rc == FX_E_NOMEM ? "server_error" : E_INV, param, "%s: %s", param, err->msg);
		return NULL;
	}
	copy = strdup(gbnf);
	fx_string_free(gbnf);
	if (!copy)
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
	return copy;
}

/* GBNF text for a JSON Schema, malloc'ed; NULL with e filled. */
static char *schema_gbnf(const cJSON *schema, const char *param, struct srv_error *e)
{
	struct fx_err err = { 0 };
	char *text = cJSON_PrintUnformatted(schema), *gbnf = NULL;
	if (!text) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	int rc = fx_json_schema_to_gbnf(text, NULL, &gbnf, &err);
	free(text);
	return take_gbnf(rc, gbnf, &err, param, e);
}

static char *regex_gbnf(const cJSON *v, const char *param, struct srv_error *e)
{
	struct fx_err err = { 0 };
	char *gbnf = NULL;
	if (!cJSON_IsString(v)) {
		srv_error_set(e, 400, E_INV, param, "'%s' must be a string (a regular expression)", param);
		return NULL;
	}
	int rc = fx_regex_to_gbnf(v->valuestring, NULL, &gbnf, &err);
	return take_gbnf(rc, gbnf, &err, param, e);
}

/* root ::= "a" | "b" ... for a list of strings (vLLM's choice). */
static char *choice_gbnf(const cJSON *v, const char *param, struct srv_error *e)
{
	struct srv_buf b = { 0 };
	const cJSON *it;
	if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) {
		srv_error_set(e, 400, E_INV, param, "'%s' must be a non-empty list of strings", param);
		return NULL;
	}
	bool ok = srv_buf_add(&b, "root ::= ", 9);
	cJSON_ArrayForEach(it, v)
	{
		if (!cJSON_IsString(it) || !*it->valuestring) {
			srv_buf_free(&b);
			srv_error_set(e, 400, E_INV, param, "'%s' must be a list of non-empty strings", param);
			return NULL;
		}
		if (it != v->child)
			ok = ok && srv_buf_add(&b, " | ", 3);
		ok = ok && srv_buf_add(&b, "\"", 1);
		for (const unsigned char *s = (const unsigned char *)it->valuestring; ok && *s; s++) {
			char esc[8];
			int n;
			if (*s == '"' || *s == '\\')
				n = snprintf(esc, sizeof(esc), "\\%c", *s);
			else if (*s < 0x20)
				n = snprintf(esc, sizeof(esc), "\\x%02X", *s);
			else
				n = snprintf(esc, sizeof(esc), "%c", *s);
			ok = srv_buf_add(&b, esc, (size_t)n);
		}
		ok = ok && srv_buf_add(&b, "\"", 1);
	}
	ok = ok && srv_buf_add(&b, "\n", 1);
	if (!ok) {
		srv_buf_free(&b);
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	return b.p;
}

static char *grammar_text(const cJSON *v, const char *param, struct srv_error *e)
{
	char *copy;
	if (!cJSON_IsString(v)) {
		srv_error_set(e, 400, E_INV, param, "'%s' must be a string (a GBNF grammar)", param);
		return NULL;
	}
	if (!(copy = strdup(v->valuestring)))
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
	return copy;
}

/* response_format's GBNF; *none when it asks for plain text. */
static char *response_format(const cJSON *rf, bool *none, struct srv_error *e)
{
	const char *P = "response_format";
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
	*none = false;
	if (!cJSON_IsObject(rf) || !cJSON_IsString(type)) {
		srv_error_set(e, 400, E_INV, P,
			      "'response_format' must be an object with a 'type' of \"text\", \"json_object\" or \"json_schema\"");
		return NULL;
	}
	if (!strcmp(type->valuestring, "text")) {
		*none = true;
		return NULL;
	}
	if (!strcmp(type->valuestring, "json_object")) {
		/* llama-server also reads a "schema" here; OpenAI's is any object */
		const cJSON *schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
		cJSON *any = schema ? NULL : cJSON_CreateObject();
		if (!schema && !cJSON_AddStringToObject(any, "type", "object")) {
			cJSON_Delete(any);
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			return NULL;
		}
		char *g = schema_gbnf(schema ? schema : any, P, e);
		cJSON_Delete(any);
		return g;
	}
	if (!strcmp(type->valuestring, "json_schema")) {
		const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
		const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
		const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
		if (!cJSON_IsObject(js) || !(cJSON_IsObject(schema) || cJSON_IsBool(schema))) {
			srv_error_set(e, 400, E_INV, P,
				      "'response_format.json_schema' must be an object with a 'schema' (a JSON Schema)");
			return NULL;
		}
		if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict)) {
			srv_error_set(e, 400, E_INV, P, "'response_format.json_schema.strict' must be true or false");
			return NULL;
		}
		return schema_gbnf(schema, P, e);
	}
	srv_error_set(e, 400, E_INV, P,
		      "response_format type '%.64s' is not one of \"text\", \"json_object\", \"json_schema\"",
		      type->valuestring);
	return NULL;
}

/* vLLM's structured_outputs object, or one guided_* field. */
static char *vllm_field(const char *key, const cJSON *v, const char *param, struct srv_error *e)
{
	if (!strcmp(key, "json")) {
		if (cJSON_IsString(v)) { /* a schema sent as a JSON string */
			bool oom = false;
			cJSON *p = srv_json_parse(v->valuestring, strlen(v->valuestring), NULL, &oom);
			char *g = p ? schema_gbnf(p, param, e) : NULL;
			if (!p && oom)
				srv_error_set(e, 500, "server_error", NULL, "out of memory");
			else if (!p)
				srv_error_set(e, 400, E_INV, param, "'%s' is not valid JSON", param);
			cJSON_Delete(p);
			return g;
		}
		return schema_gbnf(v, param, e);
	}
	if (!strcmp(key, "regex"))
		return regex_gbnf(v, param, e);
	if (!strcmp(key, "choice"))
		return choice_gbnf(v, param, e);
	return grammar_text(v, param, e);
}

bool srv_constraint_parse(const cJSON *body, struct srv_gen *g, struct srv_error *e)
{
	static const char *const guided[] = { "json", "regex", "choice", "grammar" };
	static const char *const guided_param[] = { "guided_json", "guided_regex", "guided_choice",
						    "guided_grammar" };
	char *gbnf = NULL;
	const char *from = NULL; /* the field that gave it, for the one-constraint rule */
	int n = 0;
	const cJSON *v;

#define TAKE(expr, name)                                                                     \
	do {                                                                                 \
		if (++n > 1) {                                                               \
			srv_error_set(e, 400, E_INV, name,                                   \
				      "'%s' and '%s' both constrain the output: send one", from, name); \
			free(gbnf);                                                          \
			return false;                                                        \
		}                                                                            \
		from = name;                                                                 \
		if (!(gbnf = (expr)))                                                        \
			return false;                                                        \
	} while (0)

	if ((v = cJSON_GetObjectItemCaseSensitive(body, "response_format")) && !cJSON_IsNull(v)) {
		bool none;
		char *t = response_format(v, &none, e);
		if (!t && !none)
			return false;
		if (t)
			TAKE(t, "response_format");
	}
	if ((v = cJSON_GetObjectItemCaseSensitive(body, "grammar")) && !cJSON_IsNull(v))
		TAKE(grammar_text(v, "grammar", e), "grammar");
	if ((v = cJSON_GetObjectItemCaseSensitive(body, "json_schema")) && !cJSON_IsNull(v)) {
		if (!cJSON_IsObject(v) && !cJSON_IsBool(v)) {
			free(gbnf);
			srv_error_set(e, 400, E_INV, "json_schema", "'json_schema' must be a JSON Schema object");
			return false;
		}
		TAKE(schema_gbnf(v, "json_schema", e), "json_schema");
	}
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(body, "structured_outputs");
	if (so && !cJSON_IsNull(so)) {
		if (!cJSON_IsObject(so)) {
			free(gbnf);
			srv_error_set(e, 400, E_INV, "structured_outputs", "'structured_outputs' must be an object");
			return false;
		}
		for (int i = 0; i < 4; i++)
			if ((v = cJSON_GetObjectItemCaseSensitive(so, guided[i])) && !cJSON_IsNull(v))
				TAKE(vllm_field(guided[i], v, "structured_outputs", e), "structured_outputs");
	}
	for (int i = 0; i < 4; i++)
		if ((v = cJSON_GetObjectItemCaseSensitive(body, guided_param[i])) && !cJSON_IsNull(v))
			TAKE(vllm_field(guided[i], v, guided_param[i], e), guided_param[i]);
#undef TAKE
	if (!gbnf)
		return true;
	struct fx_err err = { 0 };
	int rc = fx_grammar_parse(gbnf, strlen(gbnf), NULL, &g->grammar, &err);
	free(gbnf);
	if (rc) {
		srv_error_set(e, rc == FX_E_NOMEM ? 500 : 400,
			      rc == FX_E_NOMEM ? "server_error" : E_INV, from, "%s", err.msg);
		return false;
	}
	return true;
}
