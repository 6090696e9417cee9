/* Grammars under allocation failure: fx_grammar_parse, fx_matcher_create
 * and fx_matcher_accept_bytes with the k-th heap call failing, for every k
 * until the whole sequence needs no more calls. Each call must return
 * FX_E_NOMEM (or succeed), crash nothing and leak nothing (the ASan build
 * checks leaks), and a matcher whose step ran out of memory must be where
 * it was: the same bytes then go through. malloc/calloc/realloc are
 * wrapped by the linker (tests.cmake), as in test_chat_oom. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"


static const char *const gbnf =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	"object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
	"array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
	"number ::= \"-\"? [0-9]+ (\".\" [0-9]+)? ws\n"
	"ws     ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

/* Nested 40 deep, so that the matcher's tables grow while it is fed. */
static void make_doc(char *doc, size_t cap)
{
	size_t n = 0;
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(doc + n, cap - n, "{\"k%d\": [%d, \"h\\u00e9 \xce\xb1\", ", i, i);
	n += (size_t)snprintf(doc + n, cap - n, "null");
	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(doc + n, cap - n, "]}");
}

int main(void)
{
	long k, ok_at = -1;
	int n_nomem = 0;
	static char doc[8192];
	make_doc(doc, sizeof(doc));
	for (k = 0; ok_at < 0 && k < 100000; k++) {
		struct fx_grammar *g = NULL;
		struct fx_matcher *m = NULL;
		struct fx_err err = { 0 };
		calls = 0;
		fail_at = k;
		int rc = fx_grammar_parse(gbnf, strlen(gbnf), NULL, &g, &err);
		if (rc == FX_OK)
			rc = fx_matcher_create(g, NULL, &m, &err);
		size_t fed = 0;
		/* byte by byte, so a failure lands inside some step */
		while (rc == FX_OK && fed < strlen(doc)) {
			rc = fx_matcher_accept_bytes(m, doc + fed, 1);
			if (rc == FX_E_NOMEM) {
				/* the failed byte left the state as it was: it goes through now */
				fail_at = -1;
				CHECKF(fx_matcher_accept_bytes(m, doc + fed, 1) == FX_OK, "k=%ld byte %zu", k, fed);
				n_nomem++;
				rc = FX_OK;
			}
			fed++;
		}
		bool whole = fed == strlen(doc);
		fail_at = -1;
		CHECKF(rc == FX_OK || rc == FX_E_NOMEM, "k=%ld: rc %d (%s)", k, rc, err.msg);
		if (whole)
			CHECKF(fx_matcher_can_end(m), "k=%ld: the document is not accepted", k);
		if (rc == FX_OK && whole && calls <= k)
			ok_at = k; /* the k-th call was never made: every point was reached */
		fx_matcher_free(m);
		fx_grammar_free(g);
	}
	CHECKF(ok_at > 0, "no run finished without a failure (k up to %ld)", k);
	printf("test_grammar_oom: %ld failure points, %d mid-document failures recovered; %d checks, %d failed\n",
	       ok_at, n_nomem, check_count, check_failures);
	return check_failures ? 1 : 0;
}
