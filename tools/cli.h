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

/* ---- flag tables (tools/flags.c) ----
 * Each command lists its flags as NULL-terminated name lists (its own and
 * the shared groups below) and checks every argument against them before
 * matching it: one table says what a command takes, and an unknown flag's
 * message names the closest known one (edit distance). */
extern const char *const cli_sampling_flags[]; /* cli_sampling_opt's */
extern const char *const cli_grammar_flags[];  /* cli_grammar_opt's */
extern const char *const cli_spec_flags[];     /* cli_spec_opt's */
extern const char *const cli_compat_flags[];   /* cli_compat_opt's */
/* true when arg is in one of sets (a NULL-terminated array of lists);
 * otherwise false, with "error: unknown option 'X'; did you mean Y? (see
 * ferrox CMD --help)" on stderr (the suggestion only when it is close). */
bool cli_flag_known(const char *cmd, const char *const *const *sets, const char *arg);
/* That message alone, for a command whose parser found arg unknown. */
void cli_flag_unknown(const char *cmd, const char *const *const *sets, const char *arg);
/* The name in sets nearest to arg (edit distance; an abbreviation counts
 * as one edit), or NULL when none is near (more than a third changed). */
const char *cli_closest(const char *arg, const char *const *const *sets);

/* llama.cpp's flags for what ferrox does without a knob of its own, or
 * does not do yet: -b/--batch-size N and -ub/--ubatch-size N (logical and
 * physical batch), -fa/--flash-attn on|off|auto and -ngl/--gpu-layers N
 * (accepted; no GPU backend yet), --no-warmup/--warmup (no warm-up pass to
 * skip), --no-mmap/--mmap, --mlock and -lm/--load-mode (llama.cpp's newer
 * spelling of the two), -tb/--threads-batch N (ferrox's -t threads serve
 * prefill and decode alike: accepted, unused). */
struct cli_compat {
	long long n_batch, n_ubatch; /* 2048, 512 (llama.cpp's defaults) */
	bool no_mmap, mlock;
	const char *gpu_fa, *gpu_ngl; /* -fa on / -ngl N > 0 as given (for the notice), or NULL:
				       * off, auto and 0 ask nothing of a GPU */
};
extern const char cli_compat_help[];
void cli_compat_init(struct cli_compat *c);
/* Same contract as cli_sampling_opt. */
int cli_compat_opt(int argc, char **argv, int *i, struct cli_compat *c);
/* Into the load and context parameters (n_ubatch: min(-ub, -b), as
 * llama.cpp; NULL: not wanted); says once on stderr that -fa/-ngl find no
 * GPU backend. */
void cli_compat_apply(const struct cli_compat *c, struct fx_model_params *mp, uint32_t *n_ubatch);

/* llama.cpp's -e/--escape (its string_process_escapes, on by default):
 * \n \r \t \' \" \\ and \xHH in place; any other backslash stays. */
void cli_unescape(char *s);

/* A progress line on stderr ("\rWHAT:  42% (3.1 s)"), only when stderr is
 * a terminal and the job has run half a second; the line ends at 100%.
 * Zero-initialize. */
struct cli_progress {
	bool checked, off, shown;
	int last_pct;
	double t0;
};
void cli_progress(struct cli_progress *pr, const char *what, double done, double total);
/* fx_model_params.progress for a struct cli_progress (arg). */
bool cli_load_progress(float p, void *arg);

/* The output's last bytes, for the -r check (cli_reverse_hit). */
struct cli_tail {
	char buf[1024];
	size_t n;
};
void cli_tail_add(struct cli_tail *tl, const char *p, size_t n);

/* -r/--reverse-prompt (llama.cpp's antiprompts, repeatable): generation
 * stops once the output ends with one. Zero-initialize. */
#define CLI_MAX_REVERSE 16
struct cli_reverse {
	const char *text[CLI_MAX_REVERSE]; /* argv's, or own's */
	char *own[CLI_MAX_REVERSE];        /* unescaped copies (owned) */
	fx_token tok[CLI_MAX_REVERSE];     /* the text as one token, or -1 */
	int n;
};
/* Take -r's value v; false (message printed) when empty, longer than 512
 * bytes or one too many. */
bool cli_reverse_add(struct cli_reverse *r, const char *opt, const char *v);
/* -e (the default): escapes processed in each; false without memory. */
bool cli_reverse_unescape(struct cli_reverse *r);
/* After the model is loaded: which texts are one (control) token. */
void cli_reverse_tokens(struct cli_reverse *r, const struct fx_model *m);
/* As llama.cpp's completion tool outside interactive mode: a reverse
 * prompt found in the output's last len + 2 bytes (a token may carry a
 * character or two past it), or one that is a single token and was the
 * last sampled. */
bool cli_reverse_hit(const struct cli_reverse *r, const struct cli_tail *tl, fx_token last);
void cli_reverse_free(struct cli_reverse *r);

/* --ignore-eos: every end-of-generation token banned from the sampler
 * (llama.cpp gives them a -inf logit bias). 1 on failure, message printed. */
int cli_ban_eog(const struct fx_model *m, struct fx_sampler *smp);

/* A prompt's tokens: when the model adds BOS and the text already began
 * with it (parsed as a control token), the second BOS is dropped with one
 * notice on stderr. Same contract as cli_tokenize. */
int32_t *cli_tokenize_prompt(const struct fx_model *m, const char *text, size_t *n);

#endif
