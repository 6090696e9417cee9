/* libFuzzer target: a regular expression through fx_regex_to_gbnf; what
 * it produces must compile (fx_grammar_parse). */
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
	if (fx_regex_to_gbnf(text, NULL, &gbnf, &err) == FX_OK) {
		if (fx_grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err))
			__builtin_trap();
		fx_grammar_free(g);
		fx_string_free(gbnf);
	}
	free(text);
	return 0;
}
