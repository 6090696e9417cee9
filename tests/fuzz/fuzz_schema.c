/* libFuzzer target: a JSON Schema (the input as text) through
 * fx_json_schema_to_gbnf. What it produces must compile
 * (fx_grammar_parse) and its start state must be live: a converted
 * schema that is no valid grammar is a finding, as is any crash or leak. */
#include <stdlib.h>
#include <string.h>

#include "ferrox.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *text = malloc(size + 1), *gbnf = NULL;
	struct fx_grammar *g = NULL;
	struct fx_err err;
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	if (fx_json_schema_to_gbnf(text, size & 1 ? "tool0-args" : NULL, &gbnf, &err) == FX_OK) {
		if (fx_grammar_parse(gbnf, strlen(gbnf), size & 1 ? "tool0-args" : NULL, &g, &err))
			__builtin_trap(); /* the converter wrote a grammar that does not compile */
		fx_grammar_free(g);
		fx_string_free(gbnf);
	}
	free(text);
	return 0;
}
