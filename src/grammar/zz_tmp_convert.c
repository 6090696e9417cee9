/* TEMPORARY, until src/grammar/schema.c and regex.c land from the schema
 * branch: DELETE THIS FILE when merging them (they define these two).
 * Until then a JSON Schema or regex is refused as unsupported, saying so. */
#include "core/status.h"

int fx_json_schema_to_gbnf(const char *schema_json, const char *root_name, char **gbnf,
			   struct fx_err *err)
{
	(void)schema_json;
	(void)root_name;
	if (gbnf)
		*gbnf = NULL;
	return fx_fail(err, FX_E_UNSUPPORTED, "json schema: not in this build yet");
}

int fx_regex_to_gbnf(const char *regex, const char *root_name, char **gbnf, struct fx_err *err)
{
	(void)regex;
	(void)root_name;
	if (gbnf)
		*gbnf = NULL;
	return fx_fail(err, FX_E_UNSUPPORTED, "regex: not in this build yet");
}
