/* tok_dump: ferrox's tokenizer for scripts, one process per vocabulary.
 *
 *   tok_dump MODEL_OR_DIR < requests
 *       Loads the vocabulary only (vocab_only: a GGUF file, or a folder with
 *       tokenizer.json once ferrox reads it) and answers each stdin line
 *           <hex of the text's bytes, or "-" for none> <add_special 0|1> <parse_special 0|1>
 *       with one stdout line: the ids, comma-separated (an empty line for
 *       none), or "ERR <message>" for a malformed request or a failed
 *       fx_tokenize. A line "D <ids comma-separated, or ->" instead asks
 *       for those ids' text through the streaming detokenizer
 *       (fx_detok_push with special false, then fx_detok_flush), answered
 *       as the hex of its bytes ("-" for none) or "ERR <message>".
 *   tok_dump --bench MODEL_OR_DIR FILE [ROUNDS]
 *       Times fx_tokenize over FILE's whole bytes (add_special and
 *       parse_special off, one thread) ROUNDS times (default 5) after one
 *       warm-up and prints "tokens N bytes B best_s S tokens_per_s T".
 *
 * Exit status: 0, 2 when the model does not load or the arguments are
 * wrong (the message on stderr). Uses only include/ferrox.h.
 * tests/test_hf_tokenizer_oracle.py and bench/tokenize_speed.py drive it. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferrox.h"

struct ids {
	fx_token *v;
	size_t cap;
};

/* fx_tokenize into ids, growing the buffer once when it is too small.
 * Returns fx_tokenize's status; *n the number of ids. */
static int tokenize(const struct fx_model *m, const char *text, size_t len, bool add, bool parse,
		    struct ids *ids, size_t *n)
{
	int rc = fx_tokenize(m, text, len, add, parse, ids->v, ids->cap, n);
	if (rc != FX_E_INVALID || *n <= ids->cap)
		return rc;
	fx_token *v = realloc(ids->v, *n * sizeof(*v));
	if (!v)
		return FX_E_NOMEM;
	ids->v = v;
	ids->cap = *n;
	return fx_tokenize(m, text, len, add, parse, ids->v, ids->cap, n);
}

/* The value of hex digit c, or -1. */
static int hexval(int c)
{
	static const char digits[] = "0123456789abcdef";
	const char *d = c ? strchr(digits, tolower(c)) : NULL;
	return d ? (int)(d - digits) : -1;
}

/* Parse "<hex> <0|1> <0|1>" in place: the text's bytes overwrite the hex.
 * Returns NULL on success, else what is wrong. */
static const char *parse_request(char *line, size_t *len, bool *add, bool *parse)
{
	char *sp = strchr(line, ' ');
	if (!sp)
		return "want: <hex> <add_special 0|1> <parse_special 0|1>";
	size_t nhex = (size_t)(sp - line);
	int a, p;
	char tail;
	if (sscanf(sp, " %d %d %c", &a, &p, &tail) != 2 || (a != 0 && a != 1) || (p != 0 && p != 1))
		return "add_special and parse_special must be 0 or 1";
	*add = a;
	*parse = p;
	*len = 0;
	if (nhex == 1 && line[0] == '-')
		return NULL;
	if (nhex % 2)
		return "odd number of hex digits";
	for (size_t i = 0; i < nhex; i += 2) {
		int hi = hexval(line[i]), lo = hexval(line[i + 1]);
		if (hi < 0 || lo < 0)
			return "not a hex digit";
		line[(*len)++] = (char)(hi * 16 + lo);
	}
	return NULL;
}

/* Append out[0..n) to *text (*len bytes so far). FX_E_NOMEM. */
static int append(char **text, size_t *len, const char *out, size_t n)
{
	char *grown = realloc(*text, *len + n + 1);
	if (!grown)
		return FX_E_NOMEM;
	memcpy(grown + *len, out, n);
	*text = grown;
	*len += n;
	return FX_OK;
}

/* Answer a "D <ids>" line (ids in place, NUL-terminated): see the header. */
static void detok(const struct fx_model *m, char *ids)
{
	struct fx_detok st = { 0 };
	char *text = NULL, out[4096];
	size_t n = 0, len = 0;
	int rc = FX_OK;
	for (char *p = ids; rc == FX_OK && *p && strcmp(ids, "-");) {
		char *end;
		long t = strtol(p, &end, 10);
		if (end == p || (*end && *end != ',')) {
			printf("ERR not a list of ids\n");
			free(text);
			return;
		}
		p = *end ? end + 1 : end;
		if ((rc = fx_detok_push(m, &st, (fx_token)t, false, out, sizeof(out), &n)) == FX_OK)
			rc = append(&text, &len, out, n);
	}
	if (rc == FX_OK && (rc = fx_detok_flush(&st, out, sizeof(out), &n)) == FX_OK)
		rc = append(&text, &len, out, n);
	if (rc != FX_OK)
		printf("ERR fx_detok: %s (%d)", fx_status_str(rc), rc);
	for (size_t i = 0; rc == FX_OK && i < len; i++)
		printf("%02x", (unsigned char)text[i]);
	if (rc == FX_OK && !len)
		putchar('-');
	putchar('\n');
	free(text);
}

static int serve(const struct fx_model *m)
{
	char *line = NULL;
	size_t lcap = 0;
	ssize_t got;
	struct ids ids = { NULL, 0 };
	int status = 0;
	while ((got = getline(&line, &lcap, stdin)) >= 0) {
		while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
			line[--got] = 0;
		size_t len, n = 0;
		bool add, parse;
		if (line[0] == 'D' && line[1] == ' ') {
			detok(m, line + 2);
			continue;
		}
		const char *bad = parse_request(line, &len, &add, &parse);
		if (bad) {
			printf("ERR %s\n", bad);
			continue;
		}
		int rc = tokenize(m, line, len, add, parse, &ids, &n);
		if (rc != FX_OK) {
			printf("ERR fx_tokenize: %s (%d)\n", fx_status_str(rc), rc);
			continue;
		}
		for (size_t i = 0; i < n; i++)
			printf(i ? ",%d" : "%d", (int)ids.v[i]);
		putchar('\n');
	}
	if (ferror(stdin)) {
		fprintf(stderr, "tok_dump: reading stdin: %s\n", strerror(errno));
		status = 2;
	}
	free(ids.v);
	free(line);
	return status;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench(const struct fx_model *m, const char *path, int rounds)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "tok_dump: %s: %s\n", path, strerror(errno));
		return 2;
	}
	char *text = NULL;
	size_t len = 0, cap = 0, got;
	char chunk[65536];
	while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + got > cap) {
			cap = (len + got) * 2;
			char *t = realloc(text, cap);
			if (!t) {
				fprintf(stderr, "tok_dump: out of memory reading %s\n", path);
				free(text);
				fclose(f);
				return 2;
			}
			text = t;
		}
		memcpy(text + len, chunk, got);
		len += got;
	}
	fclose(f);
	struct ids ids = { NULL, 0 };
	size_t n = 0;
	double best = 0;
	int rc = FX_OK;
	for (int r = 0; r <= rounds && rc == FX_OK; r++) { /* round 0: warm-up */
		double t0 = now_s();
		rc = tokenize(m, text, len, false, false, &ids, &n);
		double dt = now_s() - t0;
		if (r > 0 && (best == 0 || dt < best))
			best = dt;
	}
	if (rc != FX_OK)
		fprintf(stderr, "tok_dump: fx_tokenize: %s (%d)\n", fx_status_str(rc), rc);
	else
		printf("tokens %zu bytes %zu best_s %.6f tokens_per_s %.0f\n", n, len, best,
		       best > 0 ? (double)n / best : 0.0);
	free(ids.v);
	free(text);
	return rc == FX_OK ? 0 : 2;
}

int main(int argc, char **argv)
{
	bool bench_mode = argc >= 2 && strcmp(argv[1], "--bench") == 0;
	if ((!bench_mode && argc != 2) || (bench_mode && (argc < 4 || argc > 5))) {
		fprintf(stderr, "usage: tok_dump MODEL_OR_DIR < requests\n"
				"       tok_dump --bench MODEL_OR_DIR FILE [ROUNDS]\n");
		return 2;
	}
	const char *path = argv[bench_mode ? 2 : 1];
	int rounds = 5;
	if (bench_mode && argc == 5 && ((rounds = atoi(argv[4])) < 1 || rounds > 1000)) {
		fprintf(stderr, "tok_dump: ROUNDS must be 1..1000, not %s\n", argv[4]);
		return 2;
	}
	struct fx_model_params p = fx_model_default_params();
	p.vocab_only = true;
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	if (fx_model_load(path, &p, &m, &err) != FX_OK) {
		fprintf(stderr, "tok_dump: %s\n", err.msg[0] ? err.msg : path);
		return 2;
	}
	if (!fx_model_has_vocab(m)) {
		fprintf(stderr, "tok_dump: %s: no vocabulary (ferrox does not read this tokenizer)\n", path);
		fx_model_free(m);
		return 2;
	}
	int status = bench_mode ? bench(m, argv[3], rounds) : serve(m);
	fx_model_free(m);
	return status;
}
