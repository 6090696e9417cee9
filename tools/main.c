/* ferrox: llama.cpp-style subcommands (ferrox-serve: the same with the HTTP server). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build_info.h"
#include "cli.h"
#include "ferrox.h"

bool cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "error: %s wants an integer in [%lld, %lld], got '%s'\n", opt, lo, hi, s);
		return false;
	}
	*out = v;
	return true;
}

bool cli_float(const char *opt, const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v)) {
		fprintf(stderr, "error: %s wants a number, got '%s'\n", opt, s);
		return false;
	}
	*out = v;
	return true;
}

const char *cli_value(int argc, char **argv, int *i)
{
	if (*i + 1 >= argc) {
		fprintf(stderr, "error: %s needs a value\n", argv[*i]);
		return NULL;
	}
	return argv[++*i];
}

bool cli_cache_type(const char *opt, const char *s, int32_t *out)
{
	if (!strcmp(s, "f16")) {
		*out = FX_KV_F16;
	} else if (!strcmp(s, "f32")) {
		*out = FX_KV_F32;
	} else if (!strcmp(s, "q8_0")) {
		*out = FX_KV_Q8_0;
	} else {
		fprintf(stderr, "error: %s wants f16, f32 or q8_0, got '%s'\n", opt, s);
		return false;
	}
	return true;
}

void cli_sampling_init(struct cli_sampling *s)
{
	*s = (struct cli_sampling){ .sp = fx_sampler_default_params(), .model_defaults = true };
}

const char cli_spec_help[] =
	"  --spec-type LIST       speculative decoding, comma-separated: ngram-simple (drafts\n"
	"                         copied from where the last tokens occurred before; run, chat,\n"
	"                         serve), draft-simple (a draft model, -md; run, chat), draft-mtp\n"
	"                         (the model's own MTP block; run, chat), none (default)\n"
	"  -md, --model-draft F   run, chat: the draft model (same vocabulary; implies draft-simple)\n"
	"  --spec-draft-p-min P   draft-simple: stop below this top-token probability (default 0)\n"
	"  --spec-draft-n-max N   most tokens drafted per step, by any drafter (default 16; older\n"
	"                         llama.cpp's --draft-max, which it now refuses, is taken too)\n"
	"  --spec-draft-n-min N   a step with fewer drafts verifies none (default 0; --draft-min)\n"
	"  --spec-ngram-simple-size-n N  tokens matched (default 12; 3-4 suit short texts)\n"
	"  --spec-ngram-simple-size-m N  tokens copied after a match, at most (default 48)\n";

int cli_spec_opt(int argc, char **argv, int *i, struct fx_spec_params *sp)
{
	static const struct {
		const char *name;
		int which; /* 0 n_max, 1 n_min, 2 size n, 3 size m */
	} opts[] = {
		{ "--spec-draft-n-max", 0 }, { "--draft", 0 }, { "--draft-n", 0 }, { "--draft-max", 0 },
		{ "--spec-draft-n-min", 1 }, { "--draft-min", 1 }, { "--draft-n-min", 1 },
		{ "--spec-ngram-simple-size-n", 2 }, { "--spec-ngram-simple-size-m", 3 },
	};
	const char *a = argv[*i], *v;
	if (!strcmp(a, "--spec-draft-p-min") || !strcmp(a, "--draft-p-min")) {
		double f;
		if (!(v = cli_value(argc, argv, i)) || !cli_float(a, v, &f))
			return -1;
		if (f < 0 || f > 1) {
			fprintf(stderr, "error: %s takes a probability in [0, 1], not %s\n", a, v);
			return -1;
		}
		sp->p_min = (float)f;
		return 1;
	}
	if (!strcmp(a, "--spec-type")) {
		struct fx_err err;
		if (!(v = cli_value(argc, argv, i)))
			return -1;
		if (fx_spec_types_parse(v, &sp->types, &err)) {
			fprintf(stderr, "error: %s\n", err.msg);
			return -1;
		}
		return 1;
	}
	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
		long long n;
		if (strcmp(a, opts[k].name))
			continue;
		if (!(v = cli_value(argc, argv, i)) || !cli_int(a, v, opts[k].which >= 2 ? 1 : 0, 1024, &n))
			return -1;
		*(opts[k].which == 0 ? &sp->n_max : opts[k].which == 1 ? &sp->n_min :
		  opts[k].which == 2 ? &sp->ngram_size_n : &sp->ngram_size_m) = (int32_t)n;
		return 1;
	}
	return 0;
}

int cli_sampling_opt(int argc, char **argv, int *i, struct cli_sampling *s)
{
	static const struct {
		const char *name;
		uint32_t field; /* FX_SAMPLING_*, 0: --seed */
	} opts[] = {
		{ "--temp", FX_SAMPLING_TEMP }, { "--top-p", FX_SAMPLING_TOP_P },
		{ "--min-p", FX_SAMPLING_MIN_P }, { "--repeat-penalty", FX_SAMPLING_REPEAT_PENALTY },
		{ "--top-k", FX_SAMPLING_TOP_K }, { "--repeat-last-n", FX_SAMPLING_REPEAT_LAST_N },
		{ "--seed", 0 }, { "-s", 0 },
	};
	const char *a = argv[*i], *v;
	long long n;
	double f;
	struct fx_sampler_params *sp = &s->sp;
	if (!strcmp(a, "--generation-config")) {
		if (!(v = cli_value(argc, argv, i)))
			return -1;
		if (strcmp(v, "auto") && strcmp(v, "none")) {
			fprintf(stderr, "error: --generation-config takes auto or none, not '%s'\n", v);
			return -1;
		}
		s->model_defaults = !strcmp(v, "auto");
		return 1;
	}
	size_t k = 0;
	while (k < sizeof(opts) / sizeof(opts[0]) && strcmp(a, opts[k].name))
		k++;
	if (k == sizeof(opts) / sizeof(opts[0]))
		return 0;
	if (!(v = cli_value(argc, argv, i)))
		return -1;
	uint32_t field = opts[k].field;
	s->user |= field;
	switch (field) {
	case FX_SAMPLING_TEMP: case FX_SAMPLING_TOP_P: case FX_SAMPLING_MIN_P:
	case FX_SAMPLING_REPEAT_PENALTY:
		if (!cli_float(a, v, &f))
			return -1;
		*(field == FX_SAMPLING_TEMP ? &sp->temp : field == FX_SAMPLING_TOP_P ? &sp->top_p :
		  field == FX_SAMPLING_MIN_P ? &sp->min_p : &sp->repeat_penalty) = (float)f;
		return 1;
	case FX_SAMPLING_TOP_K:
		if (!cli_int(a, v, -1, 1 << 30, &n))
			return -1;
		sp->top_k = (int32_t)n;
		return 1;
	case FX_SAMPLING_REPEAT_LAST_N: /* -1: the whole context (llama.cpp) */
		if (!cli_int(a, v, -1, 1 << 20, &n))
			return -1;
		sp->repeat_last_n = (int32_t)n;
		return 1;
	default:
		if (!cli_int(a, v, 0, INT64_MAX, &n))
			return -1;
		sp->seed = (uint64_t)n;
		s->seed_set = true;
		return 1;
	}
}

void cli_sampling_apply(struct cli_sampling *s, const struct fx_model *m, int32_t n_ctx)
{
	struct fx_sampler_params *sp = &s->sp;
	uint32_t put = s->model_defaults ? fx_model_sampling_defaults(m, s->user, sp) : 0;
	if (put) {
		char buf[256];
		int k = snprintf(buf, sizeof(buf), "ferrox: sampling defaults from the model:");
		if (put & FX_SAMPLING_TEMP)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, " temp %g", sp->temp);
		if (put & FX_SAMPLING_TOP_K)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, " top_k %d", sp->top_k);
		if (put & FX_SAMPLING_TOP_P)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, " top_p %g", sp->top_p);
		if (put & FX_SAMPLING_MIN_P)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, " min_p %g", sp->min_p);
		if (put & FX_SAMPLING_REPEAT_PENALTY)
			k += snprintf(buf + k, sizeof(buf) - (size_t)k, " repeat_penalty %g",
				      sp->repeat_penalty);
		if (put & FX_SAMPLING_REPEAT_LAST_N)
			snprintf(buf + k, sizeof(buf) - (size_t)k, " repeat_last_n %d", sp->repeat_last_n);
		fprintf(stderr, "%s (--generation-config none: without them)\n", buf);
	}
	if (sp->repeat_last_n < 0)
		sp->repeat_last_n = n_ctx;
}

char *cli_read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	if (!f) {
		fprintf(stderr, "error: cannot open %s\n", path);
		return NULL;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap = cap ? 2 * cap : 65536;
			char *nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				fclose(f);
				fprintf(stderr, "error: out of memory reading %s\n", path);
				return NULL;
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, 4096, f);
		len += r;
		if (r < 4096)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "error: cannot read %s\n", path);
		free(buf);
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[len] = 0;
	if (n)
		*n = len;
	return buf;
}

double cli_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifndef FX_TOOLS_SERVER
/* `ferrox serve` runs ferrox-serve, the same CLI with the HTTP server
 * linked in, from this binary's folder: see CMakeLists.txt for why the
 * server lives in a binary of its own (as llama.cpp's llama-server). */
int cmd_serve(int argc, char **argv)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 16);
	char *slash = n > 0 ? memrchr(exe, '/', (size_t)n) : NULL;
	if (!slash) {
		fprintf(stderr, "error: ferrox serve: cannot find this binary's folder (%s)\n",
			n < 0 ? strerror(errno) : "no '/' in /proc/self/exe");
		return 1;
	}
	strcpy(slash + 1, "ferrox-serve");
	char **av = calloc((size_t)argc + 2, sizeof(*av));
	if (!av) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	av[0] = exe;
	for (int i = 0; i < argc; i++) /* argv[0] is "serve" */
		av[i + 1] = argv[i];
	execv(exe, av);
	fprintf(stderr, "error: ferrox serve runs %s, which could not be started (%s); "
		"build it with `cmake --build build` (target ferrox-serve)\n", exe, strerror(errno));
	free(av);
	return 1;
}
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ferrox COMMAND [options]\n"
		"MODEL is a .gguf file or a Hugging Face checkpoint directory.\n"
		"commands:\n"
		"  run       -m MODEL (-p PROMPT | -f FILE) [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
		"            [--repeat-penalty R] [--repeat-last-n N] [--seed S] [-t N] [-c N] [--echo]\n"
		"            [--cache-type-k f16|f32|q8_0] [--cache-type-v ...] [--quant TYPE]\n"
		"            [--grammar G | --grammar-file F | -j SCHEMA | -jf FILE | --regex R]\n"
		"            [-sp] [-r STOP] [--ignore-eos] [--no-escape] [-b N] [-ub N] [--no-mmap]\n"
		"            [--mlock] [--context-shift]   generate text\n"
		"  inspect   -m MODEL                 describe a GGUF file or checkpoint\n"
		"  tokenize  -m MODEL -p TEXT [--ids] [--no-bos] [--special]\n"
		"  logits    -m MODEL (--ids 1,2,3 | --ids-file F) --out F [--decode] [--ubatch N] [-t N]\n"
		"            [--batch] [--kv contiguous|paged] [--block-size N] [--cache-type-k ...]\n"
		"            [--quant TYPE]   raw f32 logits\n"
		"  batched-bench -m MODEL [-npp 128] [-ntg 128] [-npl 1,2,4,8,16] [-t N] [-ub 512]\n"
		"            prompt and generation throughput for parallel sequences\n"
		"  convert   SRC -o OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q2_k..q6_k|q4_k_m]\n"
		"            [--vocab-from FILE.gguf]   write an HF directory or GGUF file as GGUF\n"
		"  bench     -m MODEL [-p 512] [-n 128] [-r 5] [-t N] [-b 512] [-o md|json] [--portable]\n"
		"            prompt/generation tokens/s (llama-bench's method), RSS, roofline\n"
		"  perplexity -m MODEL -f TEXT [-c 512] [-b 512] [--chunks N] [-t N] [-ctk T] [-ctv T]\n"
		"            [--portable]\n"
		"            perplexity over a text file (llama-perplexity's method)\n"
		"  render-template (-m MODEL | --template FILE) --messages FILE.json [--tools FILE.json]\n"
		"            [--extra FILE.json] [--add-generation-prompt] [--bos S] [--eos S]\n"
		"            [--now SECONDS]   print a rendered chat prompt\n"
		"  chat      -m MODEL [-n N] [--temp T] [--seed S] [--system TEXT] [--template FILE]\n"
		"            [-t N] [-c N]\n"
		"            interactive chat in the terminal with the model's template\n"
		"  grammar   (--grammar G | --grammar-file F | -j SCHEMA | -jf FILE | --regex R)\n"
		"            [--print-gbnf] [--check FILE] [--sample N [--seed S]]\n"
		"            check or sample strings of a grammar (no model)\n"
		"  embed     -m MODEL (-p TEXT | -f FILE) [--pooling last|mean|cls] [--embd-normalize N]\n"
		"            [--embd-output-format ''|array|json|json+|raw] [--embd-separator S]\n"
		"            pooled embeddings of each line (llama-embedding's flags)\n"
		"  serve     -m MODEL [--host H] [--port 8080] [--parallel 4] [--ctx-size N] [--api-key K]\n"
		"            [--timeout S] [--max-body 8MiB] [--queue N] [-t N]\n"
		"            [--embeddings [--pooling last|mean|cls]]\n"
		"            OpenAI-compatible HTTP server with continuous batching\n"
		"Run `ferrox COMMAND --help` for details; `ferrox --version` (-v): version, build, kernels.\n");
}

/* As `llama-cli --version`: the version line, then what built it, then
 * ferrox's own: the kernel sets compiled in and the one this CPU runs. */
static void print_version(void)
{
	printf("version: %s (commit %s, %s build)\n", FX_BUILD_VERSION, FX_BUILD_COMMIT, FX_BUILD_TYPE);
	printf("built with %s for %s\n", FX_BUILD_COMPILER, FX_BUILD_TARGET);
	printf("kernel sets: %s (this CPU: %s)\n", fx_kernels_built(), fx_kernels_auto());
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "run", cmd_run },
		{ "inspect", cmd_inspect },
		{ "tokenize", cmd_tokenize },
		{ "logits", cmd_logits },
		{ "batched-bench", cmd_batched_bench },
		{ "convert", cmd_convert },
		{ "bench", cmd_bench },
		{ "perplexity", cmd_perplexity },
		{ "serve", cmd_serve },
		{ "render-template", cmd_render_template },
		{ "chat", cmd_chat },
		{ "grammar", cmd_grammar },
		{ "embed", cmd_embed },
	};
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v")) {
		print_version();
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	const char *names[sizeof(cmds) / sizeof(cmds[0]) + 1] = { NULL };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		names[i] = cmds[i].name;
	const char *const *sets[] = { names, NULL };
	const char *near = cli_closest(argv[1], sets);
	if (near)
		fprintf(stderr, "error: unknown command '%s'; did you mean %s?\n", argv[1], near);
	else
		fprintf(stderr, "error: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
