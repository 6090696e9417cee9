/* Test-data helpers shared by the tokenizer tests: hex text and id lists
 * as the tests/data files spell them. */
#ifndef FX_TESTS_HEXIDS_H
#define FX_TESTS_HEXIDS_H

#include <stdlib.h>
#include <string.h>

#include "ferrox.h"

static inline int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* "-" or lowercase hex -> bytes (malloc'ed, *n bytes); NULL on bad hex. */
static inline unsigned char *unhex(const char *s, size_t *n)
{
	size_t len = strcmp(s, "-") ? strlen(s) : 0;
	unsigned char *b = malloc(len / 2 + 1);

	*n = len / 2;
	if (!b || len % 2) {
		free(b);
		return NULL;
	}
	for (size_t i = 0; i < *n; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(b);
			return NULL;
		}
		b[i] = (unsigned char)(hi * 16 + lo);
	}
	return b;
}

/* "-" or comma-separated ids -> array (malloc'ed). */
static inline fx_token *parse_ids(const char *s, size_t *n)
{
	size_t cap = 1;
	fx_token *ids;

	for (const char *p = s; *p; p++)
		cap += *p == ',';
	ids = malloc(cap * sizeof(*ids));
	*n = 0;
	if (!ids || !strcmp(s, "-"))
		return ids;
	for (const char *p = s; *p;) {
		char *end;

		ids[(*n)++] = (fx_token)strtol(p, &end, 10);
		p = *end == ',' ? end + 1 : end;
		if (end == p && *p)
			break;
	}
	return ids;
}

#endif
