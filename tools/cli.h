/* Shared helpers of the `ferrox` subcommands. Tools see only ferrox.h. */
#ifndef FX_TOOLS_CLI_H
#define FX_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ferrox.h"

int cmd_run(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_batched_bench(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_render_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_grammar(int argc, char **argv);
int cmd_embed(int argc, char **argv);

/* Parse a whole decimal/float argument; false (with a message naming the
 * option) when it is not one. */
bool cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
bool cli_float(const char *opt, const char *s, double *out);
/* The value after option argv[*i], advancing *i; NULL (with a message)
 * when missing. */
const char *cli_value(int argc, char **argv, int *i);
double cli_now(void); /* monotonic seconds */
/* "f16" or "f32" -> FX_KV_F16 / FX_KV_F32 (llama.cpp's --cache-type-k/v). */
bool cli_cache_type(const char *opt, const char *s, int32_t *out);

/* The sampling options run and chat share, as the user gave them. */
struct cli_sampling {
	struct fx_sampler_params sp; /* fx_sampler_default_params + the flags */
	uint32_t user;               /* FX_SAMPLING_* bits the flags set */
	bool seed_set;               /* --seed given */
	bool model_defaults;         /* --generation-config auto (the default) */
};
void cli_sampling_init(struct cli_sampling *s);
/* --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
 * --seed/-s (llama.cpp's names) and --generation-config auto|none (vLLM's)
 * at argv[*i]. Returns 1 when it took the option (and its value, advancing
 * *i), 0 when argv[*i] is not one of them, -1 on a bad value (message
 * printed). */
int cli_sampling_opt(int argc, char **argv, int *i, struct cli_sampling *s);
/* After the model is loaded: its own sampling defaults (generation_config
 * / general.sampling.*) under the flags (fx_model_sampling_defaults),
 * unless --generation-config none; repeat_last_n -1 becomes n_ctx. Says on
 * stderr which values came from the model. */
void cli_sampling_apply(struct cli_sampling *s, const struct fx_model *m, int32_t n_ctx);

/* Speculative decoding flags, llama.cpp's spellings (tools/main.c):
 * --spec-type LIST, --spec-draft-n-max N (and the older --draft / --draft-n /
 * --draft-max, which llama.cpp now refuses), --spec-draft-n-min N (--draft-min,
 * --draft-n-min), --spec-draft-p-min P (--draft-p-min),
 * --spec-ngram-simple-size-n N, --spec-ngram-simple-size-m N. Same
 * contract as cli_sampling_opt. */
int cli_spec_opt(int argc, char **argv, int *i, struct fx_spec_params *sp);
/* The help lines of those flags. */
extern const char cli_spec_help[];

/* A grammar named on the command line (tools/grammar.c). */
enum { CLI_GRAMMAR_NONE, CLI_GRAMMAR_GBNF, CLI_GRAMMAR_SCHEMA, CLI_GRAMMAR_REGEX };
struct cli_grammar {
	int kind;        /* CLI_GRAMMAR_* */
	const char *arg; /* the text, or a file's path when is_file */
	bool is_file;
};
/* --grammar G, --grammar-file F, -j/--json-schema S, -jf/--json-schema-file
 * F (llama.cpp's names) and --regex R at argv[*i]: same contract as
 * cli_sampler_opt (1 taken, 0 not ours, -1 bad, message printed). */
int cli_grammar_opt(int argc, char **argv, int *i, struct cli_grammar *g);
/* The grammar as GBNF text (malloc'ed), a schema or regex converted; NULL
 * with a message printed. */
char *cli_grammar_gbnf(const struct cli_grammar *g);
/* Compiled (fx_grammar_free); NULL with a message printed. */
struct fx_grammar *cli_grammar_compile(const struct cli_grammar *g);

struct fx_model;
/* Tokenize a NUL-terminated text into a malloc'ed array of *n ids; NULL on
 * failure. */
int32_t *cli_tokenize(const struct fx_model *m, const char *text, bool add_special,
		      bool parse_special, size_t *n);

/* A whole file as a malloc'ed NUL-terminated string, its length in *n
 * (may be NULL); NULL, with a message, when it cannot be read. */
char *cli_read_file(const char *path, size_t *n);

/* Chat helpers (tools/render_template.c): token t's text incl. control
 * tokens (malloc'ed, NULL if none); a model loaded for its template
 * (vocabulary only when possible). */
char *cli_token_text(const struct fx_model *m, int32_t t);
struct fx_model *cli_load_for_template(const char *path);
/* llama.cpp's --chat-template NAME|JINJA and --chat-template-file F (NULL
 * when not given): *tmpl is a built-in's source (fx_chat_builtin_template)
 * when arg names one, arg itself when it holds Jinja ("{{" or "{%"), or
 * the file's text, read into *owned (the caller frees it); NULL when
 * neither is given. false, with a message printed, for an unknown name
 * (the built-in names listed), an unreadable file, or both flags. */
bool cli_chat_template(const char *arg, const char *file, const char **tmpl, char **owned);

#endif
