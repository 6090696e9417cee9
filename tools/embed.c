/* ferrox embed: pooled embeddings of one or more prompts, as llama-embedding
 * prints them (its flags: --pooling, --embd-normalize, --embd-output-format,
 * --embd-separator). The prompts (-p split at the separator, "\n" by
 * default) are tokenized with special tokens added and parsed, as
 * llama-embedding does, and embedded together in one batch
 * (fx_embed_batch on a paged context sized to them). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

struct embed_opts {
	const char *model, *prompt, *file, *sep, *format;
	int32_t pooling;
	int normalize; /* llama.cpp's embd_normalize: -1 none, 0 max-abs int16, 1 taxicab,
			* 2 euclidean (default), > 2 p-norm */
	int32_t n_threads, n_ubatch;
};

/* llama.cpp's common_embd_normalize, in place. */
static void normalize(float *v, int32_t n, int kind)
{
	double sum = 0.0;
	if (kind == -1) {
		sum = 1.0;
	} else if (kind == 0) {
		for (int32_t i = 0; i < n; i++)
			sum = fmax(sum, fabs(v[i]));
		sum /= 32760.0; /* an int16 range */
	} else if (kind == 2) {
		for (int32_t i = 0; i < n; i++)
			sum += (double)v[i] * v[i];
		sum = sqrt(sum);
	} else {
		for (int32_t i = 0; i < n; i++)
			sum += pow(fabs(v[i]), kind);
		sum = pow(sum, 1.0 / kind);
	}
	const float scale = sum > 0.0 ? (float)(1.0 / sum) : 0.0f;
	for (int32_t i = 0; i < n; i++)
		v[i] *= scale;
}

static float cosine(const float *a, const float *b, int32_t n)
{
	double ab = 0, aa = 0, bb = 0;
	for (int32_t i = 0; i < n; i++) {
		ab += (double)a[i] * b[i];
		aa += (double)a[i] * a[i];
		bb += (double)b[i] * b[i];
	}
	if (aa == 0 || bb == 0)
		return aa == 0 && bb == 0 ? 1.0f : 0.0f;
	return (float)(ab / (sqrt(aa) * sqrt(bb)));
}

/* llama-embedding's output formats: "" (a readable summary and, for
 * several prompts, the cosine similarity matrix), "array", "json",
 * "json+" (json with the matrix), "raw" (one embedding per line). */
static void print_embeddings(const struct embed_opts *o, char **prompts, int n, const float *e,
			     int32_t d)
{
	const char *fmt = o->normalize == 0 ? "%1.0f" : "%1.7f";
	const char *f = o->format;
	if (!*f) {
		for (int j = 0; j < n; j++) {
			printf("embedding %d: ", j);
			for (int32_t i = 0; i < (n > 1 && d > 16 ? 16 : d); i++)
				printf(o->normalize == 0 ? "%6.0f " : "%9.6f ", e[(size_t)j * d + i]);
			printf("\n");
		}
		if (n > 1) {
			printf("\ncosine similarity matrix:\n\n");
			for (int i = 0; i < n; i++)
				printf("%6.6s ", prompts[i]);
			printf("\n");
			for (int i = 0; i < n; i++) {
				for (int j = 0; j < n; j++)
					printf("%6.2f ", cosine(e + (size_t)i * d, e + (size_t)j * d, d));
				printf("%1.10s\n", prompts[i]);
			}
		}
		return;
	}
	if (!strcmp(f, "raw")) {
		for (int j = 0; j < n; j++)
			for (int32_t i = 0; i < d; i++) {
				printf(fmt, e[(size_t)j * d + i]);
				printf(i + 1 < d ? " " : "\n");
			}
		return;
	}
	bool obj = strcmp(f, "array") != 0;
	printf(obj ? "{\n  \"object\": \"list\",\n  \"data\": [\n" : "[");
	for (int j = 0; j < n; j++) {
		if (obj)
			printf("    {\n      \"object\": \"embedding\",\n      \"index\": %d,\n"
			       "      \"embedding\": ", j);
		printf("[");
		for (int32_t i = 0; i < d; i++) {
			printf(fmt, e[(size_t)j * d + i]);
			if (i + 1 < d)
				printf(",");
		}
		printf(obj ? "]\n    }" : "]");
		if (j + 1 < n)
			printf(obj ? ",\n" : ",");
	}
	printf(obj ? "\n  ]" : "]\n");
	if (!strcmp(f, "json+") && n > 1) {
		printf(",\n  \"cosineSimilarity\": [\n");
		for (int i = 0; i < n; i++) {
			printf("    [");
			for (int j = 0; j < n; j++)
				printf("%6.2f%s", cosine(e + (size_t)i * d, e + (size_t)j * d, d),
				       j + 1 < n ? ", " : "");
			printf(" ]%s", i + 1 < n ? ",\n" : "");
		}
		printf("\n  ]");
	}
	if (obj)
		printf("\n}\n");
}

static int parse(int argc, char **argv, struct embed_opts *o)
{
	*o = (struct embed_opts){ .sep = "\n", .format = "", .pooling = FX_POOLING_LAST,
				  .normalize = 2 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		long long n;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox embed -m MODEL (-p TEXT | -f FILE) [--pooling last|mean|cls]\n"
			       "           [--embd-normalize N] [--embd-output-format ''|array|json|json+|raw]\n"
			       "           [--embd-separator S] [-t N] [-ub N]\n"
			       "  pooled final hidden states (after the final norm) of each prompt; the\n"
			       "  prompts are TEXT split at the separator (default a newline)\n"
			       "  --pooling P          last (default), mean or cls (first token)\n"
			       "  --embd-normalize N   -1 none, 0 max absolute (int16 range), 1 taxicab,\n"
			       "                       2 euclidean (default), >2 p-norm\n");
			return 1;
		}
		if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-p") ||
		    !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
		    !strcmp(a, "--embd-separator") || !strcmp(a, "--embd-output-format") ||
		    !strcmp(a, "--pooling") || !strcmp(a, "--embd-normalize") || !strcmp(a, "-t") ||
		    !strcmp(a, "--threads") || !strcmp(a, "-ub") || !strcmp(a, "--ubatch-size") ||
		    !strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
			if (!(v = cli_value(argc, argv, &i)))
				return -1;
		} else {
			fprintf(stderr, "error: unknown option '%s' (ferrox embed --help)\n", a);
			return -1;
		}
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			o->model = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			o->prompt = v;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
			o->file = v;
		} else if (!strcmp(a, "--embd-separator")) {
			if (!*v) {
				fprintf(stderr, "error: --embd-separator is empty\n");
				return -1;
			}
			o->sep = v;
		} else if (!strcmp(a, "--embd-output-format")) {
			if (*v && strcmp(v, "array") && strcmp(v, "json") && strcmp(v, "json+") &&
			    strcmp(v, "raw")) {
				fprintf(stderr, "error: --embd-output-format takes '', array, json, json+ "
					"or raw, not '%s'\n", v);
				return -1;
			}
			o->format = v;
		} else if (!strcmp(a, "--pooling")) {
			if (!strcmp(v, "last") || !strcmp(v, "mean") || !strcmp(v, "cls")) {
				o->pooling = !strcmp(v, "last") ? FX_POOLING_LAST
					     : !strcmp(v, "mean") ? FX_POOLING_MEAN : FX_POOLING_CLS;
			} else {
				fprintf(stderr, "error: --pooling %s: ferrox pools with last, mean or cls "
					"(none and rank, per-token and reranker outputs, are not supported)\n", v);
				return -1;
			}
		} else if (!strcmp(a, "--embd-normalize")) {
			if (!cli_int(a, v, -1, 64, &n))
				return -1;
			o->normalize = (int)n;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			if (!cli_int(a, v, 0, 1024, &n))
				return -1;
			o->n_threads = (int32_t)n;
		} else if (!strcmp(a, "-ub") || !strcmp(a, "--ubatch-size") || !strcmp(a, "-b") ||
			   !strcmp(a, "--batch-size")) {
			if (!cli_int(a, v, 1, 1 << 20, &n))
				return -1;
			o->n_ubatch = (int32_t)n;
		}
	}
	if (!o->model || (!o->prompt == !o->file)) {
		fprintf(stderr, "error: ferrox embed needs -m MODEL and one of -p TEXT or -f FILE\n");
		return -1;
	}
	return 0;
}

/* text split at sep into *n malloc'ed strings (the pointers' array too). */
static char **split(const char *text, const char *sep, int *n)
{
	size_t ls = strlen(sep);
	int cnt = 1;
	for (const char *p = strstr(text, sep); p; p = strstr(p + ls, sep))
		cnt++;
	char **out = calloc((size_t)cnt, sizeof(*out));
	const char *start = text;
	for (int i = 0; out && i < cnt; i++) {
		const char *end = i + 1 < cnt ? strstr(start, sep) : start + strlen(start);
		if (!(out[i] = strndup(start, (size_t)(end - start)))) {
			for (int k = 0; k < i; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
		start = end + ls;
	}
	*n = cnt;
	return out;
}

/* Tokenize, embed and print; 0 or 1. */
static int run(const struct embed_opts *o, struct fx_model *m, char **prompts, int n)
{
	int rc = 1;
	int32_t d = fx_model_n_embd(m), **tok = calloc((size_t)n, sizeof(*tok));
	int32_t *nt = calloc((size_t)n, sizeof(*nt));
	fx_seq *seq = calloc((size_t)n, sizeof(*seq));
	float *e = malloc((size_t)n * (size_t)d * sizeof(float));
	struct fx_context *ctx = NULL;
	uint64_t pool = 0;
	if (!tok || !nt || !seq || !e) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		size_t k;
		if (!(tok[i] = cli_tokenize(m, prompts[i], true, true, &k)) || k == 0) {
			fprintf(stderr, "error: prompt %d: %s\n", i, tok[i] ? "no tokens" : "tokenization failed");
			goto out;
		}
		if (k > (1u << 20)) {
			fprintf(stderr, "error: prompt %d has %zu tokens\n", i, k);
			goto out;
		}
		nt[i] = (int32_t)k;
		pool += ((uint64_t)k + 15) / 16 * 16; /* whole blocks of 16 */
	}
	if (pool > (1u << 24)) {
		fprintf(stderr, "error: %llu tokens in all: embed fewer prompts at once\n",
			(unsigned long long)pool);
		goto out;
	}
	struct fx_context_params cp = fx_context_default_params();
	cp.kv_layout = FX_KV_PAGED;
	cp.n_ctx = (uint32_t)pool;
	cp.n_seq_max = (uint32_t)n;
	cp.n_ubatch = o->n_ubatch ? (uint32_t)o->n_ubatch : 512;
	cp.n_threads = o->n_threads;
	cp.hidden = true;
	struct fx_err err;
	if (fx_context_create(m, &cp, &ctx, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if (i && fx_seq_add(ctx, &seq[i])) {
			fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
			goto out;
		}
	double t0 = cli_now();
	if (fx_embed_batch(ctx, n, seq, (const int32_t *const *)tok, nt, o->pooling, false, e)) {
		fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
		goto out;
	}
	int64_t total = 0;
	for (int i = 0; i < n; i++) {
		normalize(e + (size_t)i * d, d, o->normalize);
		total += nt[i];
	}
	fprintf(stderr, "embed: %d prompt%s, %lld tokens in %.3f s, %d floats each\n", n,
		n == 1 ? "" : "s", (long long)total, cli_now() - t0, d);
	print_embeddings(o, prompts, n, e, d);
	rc = 0;
out:
	fx_context_free(ctx);
	for (int i = 0; tok && i < n; i++)
		free(tok[i]);
	free(tok);
	free(nt);
	free(seq);
	free(e);
	return rc;
}

int cmd_embed(int argc, char **argv)
{
	struct embed_opts o;
	int prc = parse(argc, argv, &o);
	if (prc)
		return prc < 0 ? 2 : 0;
	size_t nf = 0;
	char *file = o.file ? cli_read_file(o.file, &nf) : NULL;
	if (o.file && !file)
		return 1;
	if (nf && file[nf - 1] == '\n') /* the file's last line ends the last prompt */
		file[nf - 1] = 0;
	int n = 0;
	char **prompts = split(o.file ? file : o.prompt, o.sep, &n);
	free(file);
	if (!prompts) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	int rc = 1;
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	if (n > 4096) {
		fprintf(stderr, "error: %d prompts: at most 4096 at once\n", n);
	} else if (fx_model_load(o.model, NULL, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
	} else if (!fx_model_has_vocab(m)) {
		fprintf(stderr, "error: %s has no tokenizer\n", o.model);
	} else {
		rc = run(&o, m, prompts, n);
	}
	fx_model_free(m);
	for (int i = 0; i < n; i++)
		free(prompts[i]);
	free(prompts);
	return rc;
}
