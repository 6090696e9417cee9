/* libFuzzer target: GBNF text (the input up to its first NUL byte, or all
 * of it) through fx_grammar_parse; when it compiles, the bytes after the
 * NUL (at most 64) are fed to a matcher one at a time, with next_bytes
 * at each of the first 16 steps.
 * Any crash, leak or sanitizer report is a finding. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ferrox.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const uint8_t *nul = memchr(data, 0, size);
	size_t n = nul ? (size_t)(nul - data) : size;
	struct fx_grammar *g = NULL;
	struct fx_matcher *m = NULL;
	if (fx_grammar_parse(text, n, NULL, &g, NULL))
		return 0;
	if (!fx_matcher_create(g, NULL, &m, NULL)) {
		bool next[256];
		for (size_t i = n + 1; i < size && i < n + 1 + 64; i++) {
			bool check = i < n + 1 + 16;
			if (check)
				fx_matcher_next_bytes(m, next);
			if (fx_matcher_accept_bytes(m, (const char *)data + i, 1) == FX_OK && check && !next[data[i]])
				__builtin_trap(); /* accepted a byte next_bytes ruled out */
		}
		(void)fx_matcher_can_end(m);
		fx_matcher_free(m);
	}
	fx_grammar_free(g);
	return 0;
}
