/* Grammar options shared by run (llama.cpp's --grammar, --grammar-file,
 * -j/--json-schema, -jf/--json-schema-file, plus --regex), and `ferrox
 * grammar`, which checks strings against a grammar and samples strings
 * from it without a model (the tests compare it with other engines and
 * validate its samples). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

int cli_grammar_opt(int argc, char **argv, int *i, struct cli_grammar *g)
{
	const char *a = argv[*i], *v;
	int kind;
	if (!strcmp(a, "--grammar"))
		kind = CLI_GRAMMAR_GBNF;
	else if (!strcmp(a, "--grammar-file"))
		kind = -CLI_GRAMMAR_GBNF;
	else if (!strcmp(a, "-j") || !strcmp(a, "--json-schema"))
		kind = CLI_GRAMMAR_SCHEMA;
	else if (!strcmp(a, "-jf") || !strcmp(a, "--json-schema-file"))
		kind = -CLI_GRAMMAR_SCHEMA;
	else if (!strcmp(a, "--regex"))
		kind = CLI_GRAMMAR_REGEX;
	else
		return 0;
	if (!(v = cli_value(argc, argv, i)))
		return -1;
	if (g->kind) {
		fprintf(stderr, "error: %s: only one of --grammar, --grammar-file, -j, -jf, --regex\n", a);
		return -1;
	}
	g->kind = kind < 0 ? -kind : kind;
	g->arg = v;
	g->is_file = kind < 0;
	return 1;
}

char *cli_grammar_gbnf(const struct cli_grammar *g)
{
	struct fx_err err = { 0 };
	char *text = g->is_file ? cli_read_file(g->arg, NULL) : strdup(g->arg);
	char *out = NULL;
	if (!text) {
		if (!g->is_file)
			fprintf(stderr, "error: out of memory\n");
		return NULL;
	}
	if (g->kind == CLI_GRAMMAR_GBNF)
		return text;
	int rc = g->kind == CLI_GRAMMAR_SCHEMA ? fx_json_schema_to_gbnf(text, NULL, &out, &err)
					       : fx_regex_to_gbnf(text, NULL, &out, &err);
	free(text);
	if (rc) {
		fprintf(stderr, "error: %s\n", err.msg);
		return NULL;
	}
	/* fx_string_free's string; the caller frees with free(): same heap */
	char *copy = strdup(out);
	fx_string_free(out);
	return copy;
}

struct fx_grammar *cli_grammar_compile(const struct cli_grammar *g)
{
	struct fx_err err = { 0 };
	struct fx_grammar *gr = NULL;
	char *text = cli_grammar_gbnf(g);
	if (!text)
		return NULL;
	if (fx_grammar_parse(text, strlen(text), NULL, &gr, &err))
		fprintf(stderr, "error: %s\n", err.msg);
	free(text);
	return gr;
}

/* xorshift64*: the sampler's quality is no concern here, repeatability is. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* s[0..n) as one JSON string and a newline (control bytes, NUL
 * included, as \u escapes; the bytes are UTF-8, as the grammar's are). */
static void print_json_string(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	printf("\"\n");
}

/* One random sentence: bytes drawn uniformly among the allowed ones
 * (ASCII nine times in ten when it is allowed, so strings stay mostly
 * readable), stopping with probability 1/4 wherever the grammar may end.
 * Returns its length, or -1 past max bytes or at a dead end. */
static long sample_one(struct fx_matcher *m, uint64_t *seed, char *buf, long max)
{
	bool ok[256];
	long n = 0;
	fx_matcher_reset(m);
	for (;;) {
		if (fx_matcher_is_done(m) || (fx_matcher_can_end(m) && rnd(seed) % 4 == 0))
			return n;
		if (n == max)
			return -1;
		fx_matcher_next_bytes(m, ok);
		int cand[256], nc = 0, na = 0;
		for (int b = 0; b < 128; b++)
			if (ok[b])
				cand[na++] = b;
		bool ascii = na && rnd(seed) % 10 != 0;
		nc = na;
		if (!ascii)
			for (int b = 128; b < 256; b++)
				if (ok[b])
					cand[nc++] = b;
		if (!nc)
			return fx_matcher_can_end(m) ? n : -1;
		char c = (char)cand[rnd(seed) % (uint64_t)nc];
		if (fx_matcher_accept_bytes(m, &c, 1))
			return -1;
		buf[n++] = c;
	}
}

/* The JSON string literal at s (the whole line) decoded into out (room
 * for strlen(s) bytes: decoding never grows it); its length, or -1 when s
 * is not one string. Unlike cJSON's, keeps an escaped NUL. */
static long json_string(const char *s, char *out)
{
	long n = 0;
	if (*s++ != '"')
		return -1;
	while (*s && *s != '"') {
		unsigned c = (unsigned char)*s++;
		if (c != '\\') {
			out[n++] = (char)c;
			continue;
		}
		switch (c = (unsigned char)*s++) {
		case '"': case '\\': case '/': out[n++] = (char)c; break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			unsigned long cp = 0;
			for (int k = 0; k < 4; k++) {
				char h = *s++;
				int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 :
					h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
				if (d < 0)
					return -1;
				cp = cp * 16 + (unsigned long)d;
			}
			if (cp >= 0xd800 && cp < 0xdc00 && s[0] == '\\' && s[1] == 'u' && s[2] && s[3] && s[4] && s[5]) {
				unsigned long lo = strtoul((char[5]){ s[2], s[3], s[4], s[5], 0 }, NULL, 16);
				if (lo >= 0xdc00 && lo < 0xe000) {
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
					s += 6;
				}
			}
			/* UTF-8 of cp (a lone surrogate as its 3-byte form: no grammar takes it) */
			if (cp < 0x80) {
				out[n++] = (char)cp;
			} else if (cp < 0x800) {
				out[n++] = (char)(0xc0 | (cp >> 6));
				out[n++] = (char)(0x80 | (cp & 0x3f));
			} else if (cp < 0x10000) {
				out[n++] = (char)(0xe0 | (cp >> 12));
				out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				out[n++] = (char)(0x80 | (cp & 0x3f));
			} else {
				out[n++] = (char)(0xf0 | (cp >> 18));
				out[n++] = (char)(0x80 | ((cp >> 12) & 0x3f));
				out[n++] = (char)(0x80 | ((cp >> 6) & 0x3f));
				out[n++] = (char)(0x80 | (cp & 0x3f));
			}
			break;
		}
		default:
			return -1;
		}
	}
	return *s == '"' && !s[1] ? n : -1;
}

static int check_file(struct fx_matcher *m, const char *path)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0;
	if (!f) {
		perror(path);
		return 1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = 0;
		if (!len)
			continue;
		long n = json_string(line, line); /* in place: the decoded text is never longer */
		if (n < 0) {
			fprintf(stderr, "error: %s:%d: not a JSON string\n", path, lineno);
			free(line);
			fclose(f);
			return 1;
		}
		fx_matcher_reset(m);
		int rc = fx_matcher_accept_bytes(m, line, (size_t)n);
		printf("%d\n", rc == FX_OK && fx_matcher_can_end(m));
	}
	free(line);
	fclose(f);
	return 0;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const grammar_flag_names[] = {
	"--print-gbnf", "--check", "--sample", "--seed", "--max-bytes", "-h", "--help", NULL,
};
static const char *const *const grammar_flags[] = { grammar_flag_names, cli_grammar_flags, NULL };

int cmd_grammar(int argc, char **argv)
{
	struct cli_grammar g = { 0 };
	const char *check = NULL;
	long long n_sample = 0, seed = 1, max_bytes = 4096;
	bool print = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		int took = cli_grammar_opt(argc, argv, &i, &g);
		if (took < 0)
			return 2;
		if (took)
			continue;
		if (!strcmp(a, "--print-gbnf")) {
			print = true;
		} else if (!strcmp(a, "--check")) {
			if (!(check = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(a, "--sample")) {
			if (!(v = cli_value(argc, argv, &i)) || !cli_int(a, v, 1, 1000000, &n_sample))
				return 2;
		} else if (!strcmp(a, "--seed")) {
			if (!(v = cli_value(argc, argv, &i)) || !cli_int(a, v, 0, INT64_MAX, &seed))
				return 2;
		} else if (!strcmp(a, "--max-bytes")) {
			if (!(v = cli_value(argc, argv, &i)) || !cli_int(a, v, 1, 1 << 24, &max_bytes))
				return 2;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox grammar (--grammar G | --grammar-file F | -j SCHEMA | -jf FILE |\n"
			       "                      --regex R) [--print-gbnf] [--check FILE]\n"
			       "                      [--sample N [--seed S] [--max-bytes K]]\n"
			       "  --print-gbnf    print the grammar as GBNF (a schema or regex converted)\n"
			       "  --check FILE    FILE has one JSON-encoded string per line; prints 1 when the\n"
			       "                  grammar accepts it whole, else 0\n"
			       "  --sample N      print N random sentences of the grammar, one JSON string per\n"
			       "                  line (bytes drawn uniformly; a walk past K bytes, default\n"
			       "                  4096, is retried)\n");
			return 0;
		} else {
			cli_flag_unknown("grammar", grammar_flags, a);
			return 2;
		}
	}
	if (!g.kind) {
		fprintf(stderr, "error: give a grammar: --grammar, --grammar-file, -j, -jf or --regex\n");
		return 2;
	}
	if (print) {
		char *text = cli_grammar_gbnf(&g);
		if (!text)
			return 1;
		fputs(text, stdout);
		if (*text && text[strlen(text) - 1] != '\n')
			putchar('\n');
		free(text);
		if (!check && !n_sample)
			return 0;
	}
	struct fx_grammar *gr = cli_grammar_compile(&g);
	struct fx_matcher *m = NULL;
	struct fx_err err = { 0 };
	int status = 1;
	if (!gr)
		return 1;
	if (fx_matcher_create(gr, NULL, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (check && check_file(m, check))
		goto out;
	if (n_sample) {
		char *buf = malloc((size_t)max_bytes);
		uint64_t s = (uint64_t)seed * 0x9e3779b97f4a7c15ull + 1;
		if (!buf)
			goto out;
		for (long long k = 0, tries = 0; k < n_sample; tries++) {
			if (tries > n_sample * 100) {
				fprintf(stderr, "error: only %lld of %lld samples ended within %lld bytes\n",
					k, n_sample, max_bytes);
				free(buf);
				goto out;
			}
			long n = sample_one(m, &s, buf, (long)max_bytes);
			if (n < 0)
				continue;
			print_json_string(buf, (size_t)n);
			k++;
		}
		free(buf);
	}
	status = 0;
out:
	fx_matcher_free(m);
	fx_grammar_free(gr);
	return status;
}
