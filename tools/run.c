/* ferrox run: generate a continuation of a prompt, streamed to stdout;
 * timings to stderr (load, prompt tokens/s, generation tokens/s). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"

struct run_opts {
	const char *model, *prompt, *prompt_file, *quant, *draft_model;
	const char *tmpl_name, *tmpl_path, *system; /* -p as a chat turn when any is set */
	char *prompt_buf; /* -f's text, or the prompt unescaped (owned) */
	long long n_predict, n_ctx, n_threads, n_keep;
	bool echo, context_shift, special, escape, ignore_eos;
	struct cli_reverse rev;
	int32_t type_k, type_v;
	struct cli_sampling samp;
	struct cli_grammar grammar;
	struct fx_spec_params spec;
	struct cli_compat compat;
};

/* Every flag `ferrox run` takes: cli_flag_known checks each argument
 * against these before parse() matches it. */
static const char *const run_own_flags[] = {
	"-m", "--model", "-md", "--model-draft", "--spec-draft-model", "-p", "--prompt", "-f", "--file",
	"-n", "--n-predict", "--predict", "-c", "--ctx-size", "-t", "--threads", "--cache-type-k", "-ctk",
	"--cache-type-v", "-ctv", "--quant", "--echo", "--context-shift", "--no-context-shift", "--keep",
	"-sp", "--special", "-e", "--escape", "--no-escape", "-r", "--reverse-prompt", "--ignore-eos",
	"--chat-template", "--chat-template-file", "-sys", "--system-prompt", "--jinja",
	"-h", "--help", NULL,
};
static const char *const *const run_flags[] = {
	run_own_flags, cli_sampling_flags, cli_grammar_flags, cli_spec_flags, cli_compat_flags, NULL,
};

static void run_opts_free(struct run_opts *o)
{
	free(o->prompt_buf);
	cli_reverse_free(&o->rev);
}

/* The prompt (-p or -f, the last given: llama.cpp's) and the reverse
 * prompts as generation sees them: -f's text without one trailing newline,
 * then, unless --no-escape, escapes processed (llama.cpp does both, in
 * that order). */
static int finish_prompt(struct run_opts *o)
{
	if (o->prompt_file) {
		size_t n;
		if (!(o->prompt_buf = cli_read_file(o->prompt_file, &n)))
			return 2;
		if (n && o->prompt_buf[n - 1] == '\n')
			o->prompt_buf[n - 1] = 0;
		o->prompt = o->prompt_buf;
	} else if (o->escape && o->prompt && !(o->prompt_buf = strdup(o->prompt))) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	if (o->escape && o->prompt_buf) {
		cli_unescape(o->prompt_buf);
		o->prompt = o->prompt_buf;
	}
	return o->escape && !cli_reverse_unescape(&o->rev) ? 2 : 0;
}

static int parse(int argc, char **argv, struct run_opts *o)
{
	cli_sampling_init(&o->samp);
	cli_compat_init(&o->compat);
	o->n_predict = 128;
	o->n_ctx = 4096;
	o->escape = true; /* llama.cpp's default */
	o->type_k = o->type_v = FX_KV_DEFAULT;
	o->spec = fx_spec_default_params();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!cli_flag_known("run", run_flags, a))
			return 2;
		int took = cli_sampling_opt(argc, argv, &i, &o->samp);
		if (!took)
			took = cli_compat_opt(argc, argv, &i, &o->compat);
		if (!took)
			took = cli_grammar_opt(argc, argv, &i, &o->grammar);
		if (!took)
			took = cli_spec_opt(argc, argv, &i, &o->spec);
		if (took < 0)
			return 2;
		if (took)
			continue;
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); o->model = v;
		} else if (!strcmp(a, "-md") || !strcmp(a, "--model-draft") || !strcmp(a, "--spec-draft-model")) {
			VAL(); o->draft_model = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			VAL(); o->prompt = v; o->prompt_file = NULL;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
			VAL(); o->prompt_file = v;
		} else if (!strcmp(a, "-sp") || !strcmp(a, "--special")) {
			o->special = true;
		} else if (!strcmp(a, "-e") || !strcmp(a, "--escape") || !strcmp(a, "--no-escape")) {
			o->escape = strcmp(a, "--no-escape") != 0;
		} else if (!strcmp(a, "--ignore-eos")) {
			o->ignore_eos = true;
		} else if (!strcmp(a, "-r") || !strcmp(a, "--reverse-prompt")) {
			VAL(); if (!cli_reverse_add(&o->rev, a, v)) return 2;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--predict")) {
			VAL(); if (!cli_int(a, v, -1, 1 << 30, &o->n_predict)) return 2;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
			VAL(); if (!cli_int(a, v, 0, 1 << 24, &o->n_ctx)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &o->n_threads)) return 2;
		} else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "-ctk")) {
			VAL(); if (!cli_cache_type(a, v, &o->type_k)) return 2;
		} else if (!strcmp(a, "--cache-type-v") || !strcmp(a, "-ctv")) {
			VAL(); if (!cli_cache_type(a, v, &o->type_v)) return 2;
		} else if (!strcmp(a, "--quant")) {
			VAL(); o->quant = v;
		} else if (!strcmp(a, "--echo")) {
			o->echo = true;
		} else if (!strcmp(a, "--context-shift") || !strcmp(a, "--no-context-shift")) {
			o->context_shift = !strcmp(a, "--context-shift");
		} else if (!strcmp(a, "--keep")) {
			VAL(); if (!cli_int(a, v, -1, 1 << 24, &o->n_keep)) return 2;
		} else if (!strcmp(a, "--chat-template")) {
			VAL(); o->tmpl_name = v;
		} else if (!strcmp(a, "--chat-template-file")) {
			VAL(); o->tmpl_path = v;
		} else if (!strcmp(a, "-sys") || !strcmp(a, "--system-prompt")) {
			VAL(); o->system = v;
		} else if (!strcmp(a, "--jinja")) {
			/* llama.cpp's switch to its Jinja engine: ferrox has no other */
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox run -m MODEL (-p PROMPT | -f FILE) [options]\n"
			       "  -p, --prompt TEXT      the prompt; special-token text in it (\"<|im_start|>\",\n"
			       "                         \"<bos>\") is read as those tokens, as llama.cpp does; a\n"
			       "                         BOS the text starts with is not doubled\n"
			       "  -f, --file FILE        the prompt from a file (one trailing newline dropped)\n"
			       "  -e, --escape           process \\n \\r \\t \\' \\\" \\\\ \\xHH in the prompt and -r\n"
			       "                         (the default, as llama.cpp); --no-escape: leave them\n"
			       "  -sp, --special         print special tokens (<|im_end|>, <eos>) in the output\n"
			       "  -r, --reverse-prompt S stop once the output ends with S (repeatable)\n"
			       "  --ignore-eos           never pick an end-of-generation token: run on to -n\n"
			       "  -n, --n-predict N      tokens to generate (default 128, -1: until the context is full)\n"
			       "  -c, --ctx-size N       context size in tokens (default 4096, 0: the model's)\n"
			       "  -t, --threads N        threads (default: one per core)\n"
			       "  --temp T               temperature (default 0.8; 0: greedy)\n"
			       "  --top-k K              (default 40; 0: off)\n"
			       "  --top-p P              (default 0.95; 1: off)\n"
			       "  --min-p P              (default 0.05; 0: off)\n"
			       "  --repeat-penalty R     (default 1.0: off)\n"
			       "  --repeat-last-n N      tokens the penalty looks back (default 64, -1: the context)\n"
			       "  --generation-config auto|none  auto (default): the model's own sampling\n"
			       "                         defaults (generation_config.json, or the GGUF's\n"
			       "                         general.sampling.* keys) replace the defaults above;\n"
			       "                         a flag given here wins over both\n"
			       "  -s, --seed S           sampling seed (same seed, same text; default: random,\n"
			       "                         printed to stderr)\n"
			       "  --cache-type-k/-v T    KV cache element type, f16, f32 or q8_0 (default: f16 for GGUF\n"
			       "                         files, as llama.cpp; f32 for HF checkpoints)\n"
			       "  --quant TYPE           quantize float (F32/F16/BF16) weights on load: q8_0, q4_0,\n"
			       "                         q4_K, ... (already-quantized weights stay as they are)\n"
			       "  --echo                 print the prompt before the continuation\n"
			       "  --context-shift        when the context fills, keep the first --keep tokens, drop\n"
			       "                         half of the rest and go on (llama.cpp's; with -n -1: no end;\n"
			       "                         --no-context-shift: stop, the default)\n"
			       "  --keep N               prompt tokens a context shift keeps, after the BOS (default 0;\n"
			       "                         -1: the whole prompt)\n"
			       "  --grammar G            constrain the output to GBNF grammar G (llama.cpp's syntax)\n"
			       "  --grammar-file F       the same, read from file F\n"
			       "  -j, --json-schema S    constrain the output to JSON matching schema S\n"
			       "  -jf, --json-schema-file F  the same, read from file F\n"
			       "  --regex R              constrain the output to strings matching regex R\n"
			       "                         (with a grammar, generation ends where it must)\n"
			       "  --chat-template NAME   render -p as one user turn of a chat template (after the\n"
			       "                         -sys system prompt), with the generation prompt, then\n"
			       "                         generate as usual: a built-in by llama.cpp's name (chatml,\n"
			       "                         gemma, llama2, llama3, mistral, phi3, zephyr, ...; an unknown\n"
			       "                         name lists them all) or Jinja source. Text in -p stays text\n"
			       "                         (a typed \"<|im_start|>\" is not a control token)\n"
			       "  --chat-template-file F the same, the template read from file F\n"
			       "  -sys, --system-prompt TEXT  a system message before -p, which then becomes a chat\n"
			       "                         turn (the model's own template unless one is given)\n"
			       "  --jinja                accepted, a no-op (templates are always Jinja)\n%s%s",
			       cli_spec_help, cli_compat_help);
			return 1;
		} else { /* listed in run_own_flags, matched by nothing above */
			fprintf(stderr, "error: ferrox run: option '%s' is not handled\n", a);
			return 2;
		}
#undef VAL
	}
	if (!o->model || (!o->prompt && !o->prompt_file)) {
		fprintf(stderr, "error: -m MODEL and -p PROMPT (or -f FILE) are required\n");
		return 2;
	}
	return finish_prompt(o);
}

/* Room for the next token when the context is full, as llama.cpp's
 * --context-shift: keep the first n_keep tokens, drop half of the rest and
 * move the other half down. Returns false (with the reason in *stop) when
 * there is nothing to drop or the shift is refused. */
static bool shift_context(struct fx_context *ctx, int32_t n_keep, const char **stop, int *n_shift)
{
	int32_t n_past = (int32_t)fx_context_n_past(ctx), n_discard = (n_past - n_keep) / 2;
	if (n_discard <= 0) {
		*stop = "a full context (--keep leaves nothing to drop)";
		return false;
	}
	if (fx_seq_shift(ctx, 0, n_keep + n_discard, -1, -n_discard)) {
		fprintf(stderr, "\nerror: context shift: %s\n", fx_context_errmsg(ctx));
		*stop = "a refused context shift";
		return false;
	}
	(*n_shift)++;
	return true;
}

/* -p as one user turn after the -sys system message, rendered with the
 * chat template (--chat-template / --chat-template-file, else the model's)
 * and its generation prompt, tokenized as the server does: control tokens
 * only from the template's own text, BOS added when the model asks and not
 * doubled when the template wrote one. A malloc'ed array of *n tokens, or
 * NULL with a message printed. */
static fx_token *chat_tokens(const struct fx_model *m, const struct run_opts *o, size_t *n)
{
	const char *tmpl;
	char *owned = NULL, *json = NULL, *bos = NULL, *eos = NULL;
	fx_token *toks = NULL;
	struct fx_chat_prompt *p = NULL;
	struct fx_err err = { 0 };
	if (!cli_chat_template(o->tmpl_name, o->tmpl_path, &tmpl, &owned))
		return NULL;
	if (!tmpl && !(tmpl = fx_model_chat_template(m))) {
		fprintf(stderr, "error: %s has no chat template (a base model?) for -sys: give one with "
			"--chat-template NAME (e.g. chatml, gemma) or --chat-template-file FILE\n", o->model);
		return NULL;
	}
	cJSON *msgs = cJSON_CreateArray(), *mu;
	bool ok = msgs != NULL;
	for (int i = 0; ok && i < 2; i++) {
		const char *text = i ? o->prompt : o->system;
		if (!text)
			continue;
		ok = (mu = cJSON_CreateObject()) && cJSON_AddItemToArray(msgs, mu) &&
		     cJSON_AddStringToObject(mu, "role", i ? "user" : "system") &&
		     cJSON_AddStringToObject(mu, "content", text);
	}
	if (!ok || !(json = cJSON_PrintUnformatted(msgs))) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	bos = cli_token_text(m, fx_token_bos(m));
	eos = cli_token_text(m, fx_token_eos(m));
	if (fx_chat_render(tmpl, json, NULL, NULL, true, bos, eos, 0, &p, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	size_t need = 0;
	fx_tokenize_prompt(m, p, true, NULL, 0, &need);
	if (!(toks = malloc((need + 1) * sizeof(*toks))) || fx_tokenize_prompt(m, p, true, toks, need, n)) {
		fprintf(stderr, "error: cannot tokenize the prompt\n");
		free(toks);
		toks = NULL;
		goto out;
	}
	fx_token b = fx_token_bos(m);
	if (*n >= 2 && b >= 0 && toks[0] == b && toks[1] == b)
		memmove(toks, toks + 1, --*n * sizeof(*toks));
out:
	fx_chat_prompt_free(p);
	cJSON_Delete(msgs);
	free(json);
	free(bos);
	free(eos);
	free(owned);
	return toks;
}

/* Print token t's text through the streaming detokenizer (into tl too
 * when not NULL). */
static void emit(const struct fx_model *m, struct fx_detok *st, fx_token t, bool special, struct cli_tail *tl)
{
	char buf[512];
	size_t n;
	if (fx_detok_push(m, st, t, special, buf, sizeof(buf), &n) == FX_OK && n) {
		fwrite(buf, 1, n, stdout);
		fflush(stdout);
		if (tl)
			cli_tail_add(tl, buf, n);
	}
}

/* Most drafted tokens one step verifies. */
#define STEP_MAX 256

/* The sequence's tokens so far (prompt and output), for the drafters. */
struct step {
	fx_token *hist;
	int32_t n_hist, cap;
};

static bool step_push(struct step *s, fx_token t)
{
	if (s->n_hist == s->cap) {
		int32_t cap = s->cap * 2 + 64;
		fx_token *h = realloc(s->hist, (size_t)cap * sizeof(*h));
		if (!h)
			return false;
		s->hist = h;
		s->cap = cap;
	}
	s->hist[s->n_hist++] = t;
	return true;
}

/* One step: decode [last, draft[0..k)] with every row's logits, then
 * sample them (fx_spec_accept; its time into *t_sample). */
static int step_run(struct fx_context *ctx, struct fx_sampler *smp, struct fx_spec_drafter *dr, fx_token last,
		    const fx_token *draft, int32_t k, fx_token *out, int32_t *n_out, double *t_sample,
		    bool *in_decode)
{
	int32_t p = (int32_t)fx_context_n_past(ctx); /* last's position */
	fx_seq seq[STEP_MAX + 1] = { 0 };
	fx_token tok[STEP_MAX + 1];
	bool keep[STEP_MAX + 1];
	*n_out = 0;
	for (int32_t i = 0; i <= k; i++) {
		tok[i] = i ? draft[i - 1] : last;
		keep[i] = true;
	}
	struct fx_batch b = { .n = k + 1, .seq = seq, .token = tok, .logits = keep };
	int rc = fx_batch_decode(ctx, &b, NULL);
	if ((*in_decode = rc != FX_OK))
		return rc;
	double ts = cli_now();
	rc = fx_spec_accept(ctx, 0, smp, 0, draft, k, out, n_out);
	*t_sample += cli_now() - ts;
	/* draft-mtp: the rows the sequence kept */
	return rc ? rc : fx_spec_drafter_observe(dr, ctx, 0, p, *n_out);
}

static void step_error(struct fx_context *ctx, int rc, bool in_decode)
{
	if (in_decode)
		fprintf(stderr, "\nerror: %s\n", fx_context_errmsg(ctx));
	else if (rc == FX_E_NOMEM)
		fprintf(stderr, "\nerror: out of memory (the grammar matcher)\n");
	else
		fprintf(stderr, "\nerror: the grammar allows no token here (out of memory, or a "
			"grammar the model's tokens cannot spell)\n");
}

int cmd_run(int argc, char **argv)
{
	struct run_opts o = { 0 };
	int rc = parse(argc, argv, &o);
	if (rc) {
		run_opts_free(&o);
		return rc == 1 ? 0 : rc;
	}
	struct fx_err err = { 0 };
	struct fx_model *m = NULL, *dm = NULL;
	struct fx_spec_drafter *dr = NULL;
	struct fx_context *ctx = NULL;
	struct fx_sampler *smp = NULL;
	struct fx_grammar *gram = NULL;
	struct fx_grammar_vocab *gv = NULL;
	struct fx_matcher *mt = NULL;
	fx_token *toks = NULL;
	struct step st_ = { 0 };
	bool in_decode = false; /* the last step failed in its forward pass */
	int status = 1;

	struct cli_tail tl = { .n = 0 };
	struct cli_progress prog = { 0 };
	uint32_t n_ubatch;
	double t0 = cli_now();
	struct fx_model_params mp = fx_model_default_params();
	mp.quant = o.quant;
	mp.progress = cli_load_progress;
	mp.progress_arg = &prog;
	cli_compat_apply(&o.compat, &mp, &n_ubatch);
	if (fx_model_load(o.model, &mp, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		run_opts_free(&o);
		return 1;
	}
	/* as llama.cpp: a refused lock is a warning */
	if (o.compat.mlock && fx_model_lock(m, &err))
		fprintf(stderr, "ferrox: warning: %s\n", err.msg);
	double t_load = cli_now() - t0;
	if (!fx_model_has_vocab(m)) {
		fprintf(stderr, "error: %s has no tokenizer (a Hugging Face checkpoint without "
			"tokenizer.json, or a GGUF converted from one), so it cannot run from text. "
			"Use `ferrox logits --ids`, or add the tokenizer files.\n",
			o.model);
		fx_model_free(m);
		run_opts_free(&o);
		return 1;
	}

	struct fx_context_params cp = fx_context_default_params();
	cp.n_ubatch = n_ubatch;
	cp.n_ctx = (uint32_t)o.n_ctx;
	if (cp.n_ctx > (uint32_t)fx_model_n_ctx_train(m))
		fprintf(stderr, "ferrox: -c %u exceeds the model's training context; using %d\n",
			cp.n_ctx, fx_model_n_ctx_train(m));
	if (cp.n_ctx == 0 || cp.n_ctx > (uint32_t)fx_model_n_ctx_train(m))
		cp.n_ctx = (uint32_t)fx_model_n_ctx_train(m);
	cli_sampling_apply(&o.samp, m, (int32_t)cp.n_ctx);
	if (!o.samp.seed_set) {
		/* Like llama.cpp: a fresh seed per run unless one is given. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		o.samp.sp.seed = ((uint64_t)ts.tv_sec * 1000000007ULL) ^ (uint64_t)ts.tv_nsec ^
			    ((uint64_t)getpid() << 32);
		o.samp.sp.seed &= INT64_MAX; /* so --seed can reproduce it */
	}
	if (o.samp.sp.temp > 0)
		fprintf(stderr, "ferrox: seed %llu\n", (unsigned long long)o.samp.sp.seed);
	cp.n_threads = (int32_t)o.n_threads;
	cp.type_k = o.type_k;
	cp.type_v = o.type_v;
	/* recurrent layers keep a state per draft position to roll back to */
	cp.n_rollback = o.spec.types || o.draft_model ? (uint32_t)o.spec.n_max : 0;
	cp.hidden = (o.spec.types & FX_SPEC_DRAFT_MTP) != 0; /* the MTP block reads them */
	if (fx_context_create(m, &cp, &ctx, &err) ||
	    fx_sampler_create(&o.samp.sp, fx_model_n_vocab(m), &smp, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (o.ignore_eos && cli_ban_eog(m, smp))
		goto out;
	cli_reverse_tokens(&o.rev, m);
	if (o.draft_model && !o.spec.types)
		o.spec.types = FX_SPEC_DRAFT_SIMPLE; /* as llama.cpp: -md alone drafts with it */
	if (o.draft_model && fx_model_load(o.draft_model, &mp, &dm, &err)) {
		fprintf(stderr, "error: draft model: %s\n", err.msg);
		goto out;
	}
	if (o.spec.types && fx_spec_drafter_create(&o.spec, m, dm, cp.n_ctx, cp.n_threads, &dr, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (o.grammar.kind) {
		if (!(gram = cli_grammar_compile(&o.grammar)))
			goto out;
		if (fx_grammar_vocab_create(m, &gv, &err) || fx_matcher_create(gram, gv, &mt, &err)) {
			fprintf(stderr, "error: %s\n", err.msg);
			goto out;
		}
		fx_sampler_set_matcher(smp, mt);
	}

	size_t n_prompt = 0;
	if (o.tmpl_name || o.tmpl_path || o.system) {
		if (!(toks = chat_tokens(m, &o, &n_prompt)))
			goto out;
	} else if (!(toks = cli_tokenize_prompt(m, o.prompt, &n_prompt))) {
		fprintf(stderr, "error: cannot tokenize the prompt\n");
		goto out;
	}
	if (n_prompt == 0) {
		fprintf(stderr, "error: the prompt is empty\n");
		goto out;
	}
	if (n_prompt >= fx_context_n_ctx(ctx)) {
		fprintf(stderr, "error: the prompt has %zu tokens; the context of %u leaves no room "
			"to generate (raise -c)\n", n_prompt, fx_context_n_ctx(ctx));
		goto out;
	}
	struct fx_detok st = { 0 };
	if (o.echo) {
		for (size_t i = 0; i < n_prompt; i++)
			emit(m, &st, toks[i], true, NULL); /* the prompt as given */
	}
	for (size_t i = 0; i < n_prompt; i++)
		fx_sampler_accept(smp, toks[i]);

	double t1 = cli_now();
	/* -b: the prompt in calls of at most n_batch tokens (each in steps of
	 * -ub rows); the same logits whatever the split. A drafter observes
	 * the whole prompt's rows of one call (draft-mtp's hidden states). */
	size_t nb = 0, n_batch = dr ? n_prompt : (size_t)o.compat.n_batch;
	for (size_t off = 0; off < n_prompt; off += nb) {
		/* nb: this call's tokens; after the loop the last call's, whose
		 * last row has the logits */
		nb = n_prompt - off < n_batch ? n_prompt - off : n_batch;
		if (fx_decode(ctx, toks + off, (int32_t)nb, false)) {
			fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
			goto out;
		}
	}
	double t_prompt = cli_now() - t1;

	/* As llama.cpp: --keep counts after the BOS, and at most the prompt. */
	long long keep = o.n_keep < 0 ? (long long)n_prompt : o.n_keep + fx_add_bos(m);
	int32_t n_keep = (int32_t)(keep < (long long)n_prompt ? keep : (long long)n_prompt);
	int n_shift = 0;
	double t2 = cli_now();
	long long n_gen = 0, n_drafted = 0, n_accepted = 0;
	double t_sample = 0; /* in the sampler and the grammar matcher */
	const char *stop = "the -n limit";
	/* Each step decodes the last token with the drafts after it (none
	 * without --spec-type: plain decoding) and samples every row at its
	 * position (fx_spec_accept), so speculative output is plain output. */
	st_ = (struct step){ .hist = toks, .n_hist = (int32_t)n_prompt, .cap = (int32_t)n_prompt };
	toks = NULL;
	fx_token out_t[STEP_MAX + 1];
	int32_t n_out = 0;
	double ts = cli_now();
	int src = fx_spec_accept(ctx, 0, smp, (int32_t)nb - 1, NULL, 0, out_t, &n_out);
	if (!src)
		src = fx_spec_drafter_observe(dr, ctx, 0, 0, (int32_t)n_prompt);
	t_sample += cli_now() - ts;
	for (;;) {
		if (src) {
			step_error(ctx, src, in_decode);
			goto out;
		}
		bool done = false;
		for (int32_t i = 0; i < n_out && !done; i++) {
			fx_token t = out_t[i];
			if (fx_token_is_eog(m, t)) {
				if (o.special) /* -sp: shown, as llama.cpp's completion tool does */
					emit(m, &st, t, true, NULL);
				stop = "an end-of-generation token";
				done = true;
			} else if (!step_push(&st_, t)) {
				fprintf(stderr, "\nerror: out of memory\n");
				goto out;
			} else {
				emit(m, &st, t, o.special, &tl);
				n_gen++;
				if (cli_reverse_hit(&o.rev, &tl, t)) {
					stop = "a reverse prompt";
					done = true;
				} else if (mt && fx_matcher_is_done(mt)) {
					stop = "the end of the grammar";
					done = true;
				} else if (o.n_predict >= 0 && n_gen >= o.n_predict) {
					done = true;
				}
			}
		}
		if (done)
			break;
		if (fx_context_n_past(ctx) >= fx_context_n_ctx(ctx)) {
			if (!o.context_shift) {
				stop = "a full context";
				break;
			}
			if (!shift_context(ctx, n_keep, &stop, &n_shift))
				break;
		}
		/* drafts fit in the context and the -n budget */
		long long room = (long long)fx_context_n_ctx(ctx) - fx_context_n_past(ctx) - 1;
		if (o.n_predict >= 0 && o.n_predict - n_gen - 1 < room)
			room = o.n_predict - n_gen - 1;
		if (room > STEP_MAX)
			room = STEP_MAX;
		if (room > fx_context_roll_back_max(ctx))
			room = fx_context_roll_back_max(ctx);
		fx_token draft[STEP_MAX];
		int32_t k = room > 0 ? fx_spec_drafter_draft(dr, st_.hist, st_.n_hist, draft, (int32_t)room) : 0;
		if (k < o.spec.n_min)
			k = 0;
		src = step_run(ctx, smp, dr, st_.hist[st_.n_hist - 1], draft, k, out_t, &n_out, &t_sample,
			       &in_decode);
		n_drafted += k;
		for (int32_t i = 0; i < k && i < n_out && out_t[i] == draft[i]; i++)
			n_accepted++;
	}
	double t_gen = cli_now() - t2;
	char tail[16];
	size_t nt;
	fx_detok_flush(&st, tail, sizeof(tail), &nt);
	fwrite(tail, 1, nt, stdout);
	printf("\n");
	fflush(stdout);
	fprintf(stderr, "\nferrox: stopped at %s\n", stop);
	if (n_shift)
		fprintf(stderr, "ferrox: %d context shifts (keeping %d tokens)\n", n_shift, n_keep);
	fprintf(stderr, "ferrox: load %.2f s | prompt %zu tokens, %.2f tokens/s | generation %lld tokens, %.2f tokens/s",
		t_load, n_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9), n_gen,
		n_gen ? n_gen / (t_gen > 0 ? t_gen : 1e-9) : 0.0);
	if (o.spec.types)
		fprintf(stderr, " | draft %lld, accepted %lld (%.1f%%)", n_drafted, n_accepted,
			n_drafted ? 100.0 * (double)n_accepted / (double)n_drafted : 0.0);
	fprintf(stderr, "\n");
	if (n_gen)
		fprintf(stderr, "ferrox: sampling%s %.3f ms per token\n", mt ? " and grammar" : "",
			t_sample / (double)n_gen * 1e3);
	status = 0;
out:
	free(toks);
	free(st_.hist);
	fx_sampler_free(smp);
	fx_matcher_free(mt);
	fx_grammar_vocab_free(gv);
	fx_grammar_free(gram);
	fx_context_free(ctx);
	fx_spec_drafter_free(dr);
	fx_model_free(dm);
	fx_model_free(m);
	run_opts_free(&o);
	return status;
}
