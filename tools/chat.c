/* ferrox chat: an interactive terminal chat with the model's own chat
 * template. Each turn renders the whole conversation (fx_chat_render, as
 * transformers' apply_chat_template with add_generation_prompt), tokenizes
 * it with fx_tokenize_prompt (what the user types stays plain text), feeds
 * the context only the tokens past what it already holds, and streams the
 * reply until an end-of-generation token. Ctrl-C during a reply stops it
 * (the text so far stays in the conversation) and returns to the prompt;
 * at the prompt it quits. The two flags below are the tool's only global
 * mutable state: a signal handler can reach nothing else. */
#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"

static volatile sig_atomic_t g_replying, g_interrupt;

static void on_sigint(int sig)
{
	if (!g_replying) { /* at the prompt: quit as Ctrl-C always does */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	g_interrupt = 1;
}

struct chat_opts {
	const char *model, *tmpl_path, *tmpl_name, *system, *draft_model;
	const char *first, *first_file; /* -p / -f: the first message */
	char *first_buf;                /* its text read or unescaped (owned) */
	long long n_predict, n_ctx, n_threads;
	bool special, escape, ignore_eos, context_shift;
	struct cli_reverse rev;
	struct cli_sampling samp;
	struct fx_spec_params spec;
	struct cli_compat compat;
};

/* Every flag `ferrox chat` takes (cli_flag_known). */
static const char *const chat_own_flags[] = {
	"-m", "--model", "-md", "--model-draft", "--spec-draft-model", "--template", "--system", "-n",
	"--n-predict", "--predict", "-c", "--ctx-size", "-t", "--threads", "-p", "--prompt", "-f", "--file", "-sp",
	"--special", "-e", "--escape", "--no-escape", "-r", "--reverse-prompt", "--ignore-eos",
	"--context-shift", "--no-context-shift", "--chat-template", "--chat-template-file", "-sys",
	"--system-prompt", "--jinja", "-h", "--help", NULL,
};
static const char *const *const chat_flags[] = {
	chat_own_flags, cli_sampling_flags, cli_spec_flags, cli_compat_flags, NULL,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: ferrox chat -m MODEL [options]\n"
		   "  -n N               most tokens per reply (default 1024)\n"
		   "  -c, --ctx-size N   context size (default 4096, 0: the model's)\n"
		   "  -t, --threads N    threads (default: one per core)\n"
		   "  --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R,\n"
		   "  --repeat-last-n N, --seed S          sampling (as ferrox run)\n"
		   "  --generation-config auto|none        the model's own sampling defaults\n"
		   "                     (generation_config.json / general.sampling.*) or not; flags win\n"
		   "  -sys, --system-prompt TEXT  a system message first (also --system)\n"
		   "  --chat-template NAME  a built-in chat template instead of the model's, by\n"
		   "                     llama.cpp's name (chatml, gemma, llama2, llama3, mistral, phi3,\n"
		   "                     zephyr, ...; an unknown name lists them all), or Jinja source\n"
		   "  --chat-template-file FILE  a Jinja chat template file instead (also --template)\n"
		   "  --jinja            accepted, a no-op (templates are always Jinja)\n"
		   "  -p, --prompt TEXT  the first user message, sent before reading any (llama-cli's)\n"
		   "  -f, --file FILE    the same from a file (one trailing newline dropped)\n"
		   "  -e, --escape       \\n \\t ... in -p/-f and -r processed (the default); --no-escape\n"
		   "  -sp, --special     show special tokens in the replies\n"
		   "  -r, --reverse-prompt S  end a reply once it ends with S (repeatable)\n"
		   "  --ignore-eos       never pick an end-of-generation token: replies run to -n\n"
		   "  --context-shift    when a reply fills the context, drop the older half of the\n"
		   "                     tokens after the BOS and go on (llama.cpp's); the next message\n"
		   "                     then needs room for the whole conversation, or /reset\n"
		   "%s%s"
		   "Type a message and Enter; /reset starts over, /exit (or end of input) quits.\n",
		cli_spec_help, cli_compat_help);
}

static int parse(int argc, char **argv, struct chat_opts *o)
{
	cli_sampling_init(&o->samp);
	cli_compat_init(&o->compat);
	o->n_predict = 1024;
	o->n_ctx = 4096;
	o->escape = true; /* llama.cpp's default */
	o->spec = fx_spec_default_params();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!cli_flag_known("chat", chat_flags, a))
			return 2;
		int took = cli_sampling_opt(argc, argv, &i, &o->samp);
		if (!took)
			took = cli_compat_opt(argc, argv, &i, &o->compat);
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
		} else if (!strcmp(a, "--template") || !strcmp(a, "--chat-template-file")) {
			VAL(); o->tmpl_path = v;
		} else if (!strcmp(a, "--chat-template")) {
			VAL(); o->tmpl_name = v;
		} else if (!strcmp(a, "--jinja")) {
			/* llama.cpp's switch to its Jinja engine: ferrox has no other */
		} else if (!strcmp(a, "--system") || !strcmp(a, "-sys") || !strcmp(a, "--system-prompt")) {
			VAL(); o->system = v;
		} else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			VAL(); o->first = v; o->first_file = NULL;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
			VAL(); o->first_file = v;
		} else if (!strcmp(a, "-sp") || !strcmp(a, "--special")) {
			o->special = true;
		} else if (!strcmp(a, "-e") || !strcmp(a, "--escape") || !strcmp(a, "--no-escape")) {
			o->escape = strcmp(a, "--no-escape") != 0;
		} else if (!strcmp(a, "-r") || !strcmp(a, "--reverse-prompt")) {
			VAL(); if (!cli_reverse_add(&o->rev, a, v)) return 2;
		} else if (!strcmp(a, "--ignore-eos")) {
			o->ignore_eos = true;
		} else if (!strcmp(a, "--context-shift") || !strcmp(a, "--no-context-shift")) {
			o->context_shift = !strcmp(a, "--context-shift");
		} else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--predict")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 30, &o->n_predict)) return 2;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
			VAL(); if (!cli_int(a, v, 0, 1 << 24, &o->n_ctx)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &o->n_threads)) return 2;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 1;
		} else { /* listed in chat_own_flags, matched by nothing above */
			fprintf(stderr, "error: ferrox chat: option '%s' is not handled\n", a);
			return 2;
		}
#undef VAL
	}
	if (!o->model) {
		fprintf(stderr, "error: -m MODEL is required\n");
		return 2;
	}
	/* as ferrox run: -f's text without one trailing newline, then escapes */
	if (o->first_file) {
		size_t n;
		if (!(o->first_buf = cli_read_file(o->first_file, &n)))
			return 2;
		if (n && o->first_buf[n - 1] == '\n')
			o->first_buf[n - 1] = 0;
	} else if (o->first && o->escape && !(o->first_buf = strdup(o->first))) {
		fprintf(stderr, "error: out of memory\n");
		return 2;
	}
	if (o->first_buf) {
		if (o->escape)
			cli_unescape(o->first_buf);
		o->first = o->first_buf;
	}
	return o->escape && !cli_reverse_unescape(&o->rev) ? 2 : 0;
}

/* One line from stdin without its newline (malloc'ed), or NULL at the end. */
static char *read_line(void)
{
	size_t cap = 256, n = 0;
	char *s = malloc(cap);
	int c;
	if (!s)
		return NULL;
	while ((c = getchar()) != EOF && c != '\n') {
		if (n + 2 > cap) {
			char *t = realloc(s, cap *= 2);
			if (!t) {
				free(s);
				return NULL;
			}
			s = t;
		}
		s[n++] = (char)c;
	}
	if (c == EOF && n == 0) {
		free(s);
		return NULL;
	}
	s[n] = 0;
	return s;
}

static bool add_message(cJSON *msgs, const char *role, const char *content)
{
	cJSON *m = cJSON_CreateObject();
	if (!m || !cJSON_AddStringToObject(m, "role", role) || !cJSON_AddStringToObject(m, "content", content)) {
		cJSON_Delete(m);
		return false;
	}
	return cJSON_AddItemToArray(msgs, m);
}

struct session {
	struct fx_model *m;
	struct fx_context *ctx;
	struct fx_sampler *smp;
	struct fx_spec_drafter *dr;    /* NULL: plain decoding */
	int32_t spec_n_min;
	bool special, context_shift;
	const struct cli_reverse *rev;
	const char *tmpl, *bos, *eos;
	fx_token *held;       /* the tokens the context holds, in order */
	size_t n_held, cap_held;
};

static bool hold(struct session *s, const fx_token *t, size_t n)
{
	if (s->n_held + n > s->cap_held) {
		size_t cap = (s->n_held + n) * 2 + 64;
		fx_token *a = realloc(s->held, cap * sizeof(*a));
		if (!a)
			return false;
		s->held = a;
		s->cap_held = cap;
	}
	memcpy(s->held + s->n_held, t, n * sizeof(*t));
	s->n_held += n;
	return true;
}

/* Feed the context the rendered prompt, reusing the tokens it holds. As
 * llama.cpp and the server: the tokenizer adds BOS when the model asks
 * (templates such as the built-ins write none), and a template that wrote
 * bos_token itself does not get a second one. */
static int feed_prompt(struct session *s, const struct fx_chat_prompt *p)
{
	size_t n = 0, need = 0;
	fx_tokenize_prompt(s->m, p, true, NULL, 0, &need);
	fx_token *toks = malloc((need + 1) * sizeof(*toks));
	if (!toks || fx_tokenize_prompt(s->m, p, true, toks, need, &n)) {
		free(toks);
		fprintf(stderr, "error: cannot tokenize the prompt\n");
		return 1;
	}
	fx_token bos = fx_token_bos(s->m);
	if (n >= 2 && bos >= 0 && toks[0] == bos && toks[1] == bos)
		memmove(toks, toks + 1, --n * sizeof(*toks));
	if (n + 1 >= fx_context_n_ctx(s->ctx)) {
		fprintf(stderr, "error: the conversation has %zu tokens, the context %u: /reset or raise -c\n", n,
			fx_context_n_ctx(s->ctx));
		free(toks);
		return 1;
	}
	size_t same = 0;
	while (same < n && same < s->n_held && toks[same] == s->held[same])
		same++;
	if (same < s->n_held || same == n) { /* history changed, or nothing new: start over */
		fx_context_reset(s->ctx);
		s->n_held = 0;
		same = 0;
	}
	int rc = 0;
	if (fx_decode(s->ctx, toks + same, (int32_t)(n - same), false) ||
	    fx_spec_drafter_observe(s->dr, s->ctx, 0, (int32_t)same, (int32_t)(n - same))) {
		fprintf(stderr, "error: %s\n", fx_context_errmsg(s->ctx));
		rc = 1;
	} else if (!hold(s, toks + same, n - same)) {
		fprintf(stderr, "error: out of memory\n");
		rc = 1;
	}
	for (size_t i = 0; i < n && !rc; i++)
		fx_sampler_accept(s->smp, toks[i]);
	free(toks);
	return rc;
}

/* Most drafted tokens one step verifies. */
#define CHAT_STEP 256

/* Append text[0..n) to the growing reply; false without memory. */
static bool add_text(char **text, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t c = 2 * (*len + n + 1);
		char *t = realloc(*text, c);
		if (!t)
			return false;
		*text = t;
		*cap = c;
	}
	memcpy(*text + *len, p, n);
	*len += n;
	(*text)[*len] = 0;
	return true;
}

/* --context-shift, as llama.cpp's: keep the BOS (its --keep 0), drop half
 * of the tokens after it, move the rest down (fx_seq_shift) and forget the
 * dropped ones in held. False when off, with a drafter (whose positions
 * would go stale) or when the context refuses (recurrent layers). */
static bool shift_context(struct session *s)
{
	int32_t n_keep = fx_add_bos(s->m) ? 1 : 0, n_past = (int32_t)fx_context_n_past(s->ctx);
	int32_t n_discard = (n_past - n_keep) / 2;
	if (!s->context_shift || s->dr || n_discard <= 0 || (size_t)n_past != s->n_held)
		return false;
	if (fx_seq_shift(s->ctx, 0, n_keep + n_discard, -1, -n_discard)) {
		fprintf(stderr, "\nferrox: context shift: %s", fx_context_errmsg(s->ctx));
		return false;
	}
	memmove(s->held + n_keep, s->held + n_keep + n_discard,
		(s->n_held - (size_t)(n_keep + n_discard)) * sizeof(*s->held));
	s->n_held -= (size_t)n_discard;
	return true;
}

/* Generate and stream one reply; its text goes to *reply (malloc'ed).
 * Each step decodes the last token and any drafts (--spec-type) and
 * samples every row at its position, so the reply is the same with or
 * without speculation. */
static int generate(struct session *s, long long n_predict, char **out)
{
	struct fx_detok st = { 0 };
	struct cli_tail tl = { .n = 0 };
	size_t len = 0, cap = 1024;
	char *text = malloc(cap), buf[512];
	size_t nb;
	fx_token o[CHAT_STEP + 1], draft[CHAT_STEP];
	int32_t n_o = 1;
	if (!text)
		return 1;
	text[0] = 0;
	o[0] = fx_sampler_sample_at(s->smp, fx_get_logits(s->ctx, NULL), fx_context_n_past(s->ctx));
	if (!fx_token_is_eog(s->m, o[0]))
		fx_sampler_accept(s->smp, o[0]);
	for (long long k = 0;;) {
		bool done = false;
		for (int32_t i = 0; i < n_o && !done; i++) {
			if ((done = fx_token_is_eog(s->m, o[i])))
				break;
			if (fx_detok_push(s->m, &st, o[i], s->special, buf, sizeof(buf), &nb) == FX_OK && nb) {
				fwrite(buf, 1, nb, stdout);
				fflush(stdout);
				cli_tail_add(&tl, buf, nb);
				if (!add_text(&text, &len, &cap, buf, nb)) {
					free(text);
					return 1;
				}
			}
			done = ++k >= n_predict || cli_reverse_hit(s->rev, &tl, o[i]);
		}
		if (done)
			break;
		if (g_interrupt) {
			fprintf(stderr, " [interrupted]");
			break;
		}
		if (fx_context_n_past(s->ctx) + 1 >= fx_context_n_ctx(s->ctx) && !shift_context(s)) {
			fprintf(stderr, "\n[context full]");
			break;
		}
		/* last joins the held tokens (the step decodes it); drafts fit
		 * in the context and the reply's budget */
		fx_token last = o[n_o - 1];
		long long room = (long long)fx_context_n_ctx(s->ctx) - fx_context_n_past(s->ctx) - 2;
		if (n_predict - k - 1 < room)
			room = n_predict - k - 1;
		if (room > CHAT_STEP)
			room = CHAT_STEP;
		if (room > fx_context_roll_back_max(s->ctx))
			room = fx_context_roll_back_max(s->ctx);
		if (!hold(s, &last, 1)) {
			free(text);
			return 1;
		}
		int32_t nd = room > 0 ? fx_spec_drafter_draft(s->dr, s->held, (int32_t)s->n_held, draft,
							       (int32_t)room) : 0;
		if (nd < s->spec_n_min)
			nd = 0;
		int32_t p = (int32_t)fx_context_n_past(s->ctx);
		if (fx_spec_verify(s->ctx, 0, s->smp, last, draft, nd, o, &n_o) || !hold(s, draft, (size_t)n_o - 1) ||
		    fx_spec_drafter_observe(s->dr, s->ctx, 0, p, n_o)) {
			fprintf(stderr, "\nerror: %s\n", fx_context_errmsg(s->ctx));
			free(text);
			return 1;
		}
	}
	fx_detok_flush(&st, buf, sizeof(buf), &nb);
	fwrite(buf, 1, nb, stdout);
	if (!add_text(&text, &len, &cap, buf, nb)) {
		free(text);
		return 1;
	}
	printf("\n");
	fflush(stdout);
	*out = text;
	return 0;
}

/* generate() with Ctrl-C turned into "stop this reply". */
static int reply(struct session *s, long long n_predict, char **out)
{
	g_interrupt = 0;
	g_replying = 1;
	int rc = generate(s, n_predict, out);
	g_replying = 0;
	return rc;
}

int cmd_chat(int argc, char **argv)
{
	struct chat_opts o = { 0 };
	int rc = parse(argc, argv, &o);
	if (rc) {
		free(o.first_buf);
		cli_reverse_free(&o.rev);
		return rc == 1 ? 0 : rc;
	}
	struct session s = { 0 };
	struct fx_model *dm = NULL;
	struct fx_err err = { 0 };
	char *tmpl_file = NULL, *bos = NULL, *eos = NULL;
	cJSON *msgs = NULL;
	int status = 1;
	struct fx_model_params mp = fx_model_default_params();
	struct cli_progress prog = { 0 };
	uint32_t n_ubatch;
	mp.progress = cli_load_progress;
	mp.progress_arg = &prog;
	cli_compat_apply(&o.compat, &mp, &n_ubatch);
	s.special = o.special;
	s.context_shift = o.context_shift;
	s.rev = &o.rev;
	if (fx_model_load(o.model, &mp, &s.m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (o.compat.mlock && fx_model_lock(s.m, &err)) /* as llama.cpp: a warning */
		fprintf(stderr, "ferrox: warning: %s\n", err.msg);
	cli_reverse_tokens(&o.rev, s.m);
	if (!fx_model_has_vocab(s.m)) {
		fprintf(stderr, "error: %s has no tokenizer ferrox can read\n", o.model);
		goto out;
	}
	if (!cli_chat_template(o.tmpl_name, o.tmpl_path, &s.tmpl, &tmpl_file))
		goto out;
	if (!s.tmpl && !(s.tmpl = fx_model_chat_template(s.m))) {
		fprintf(stderr, "error: %s has no chat template (a base model?); give one with --chat-template NAME "
			"(e.g. chatml, gemma) or --chat-template-file FILE\n", o.model);
		goto out;
	}
	s.bos = bos = cli_token_text(s.m, fx_token_bos(s.m));
	s.eos = eos = cli_token_text(s.m, fx_token_eos(s.m));
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = (uint32_t)o.n_ctx;
	if (cp.n_ctx == 0 || cp.n_ctx > (uint32_t)fx_model_n_ctx_train(s.m))
		cp.n_ctx = (uint32_t)fx_model_n_ctx_train(s.m);
	cp.n_threads = (int32_t)o.n_threads;
	cp.n_ubatch = n_ubatch;
	cp.n_rollback = o.spec.types || o.draft_model ? (uint32_t)o.spec.n_max : 0;
	cp.hidden = (o.spec.types & FX_SPEC_DRAFT_MTP) != 0; /* the MTP block reads them */
	cli_sampling_apply(&o.samp, s.m, (int32_t)cp.n_ctx);
	if (!o.samp.seed_set)
		o.samp.sp.seed = ((uint64_t)time(NULL) * 1000000007ULL ^ ((uint64_t)getpid() << 32)) & INT64_MAX;
	if (fx_context_create(s.m, &cp, &s.ctx, &err) ||
	    fx_sampler_create(&o.samp.sp, fx_model_n_vocab(s.m), &s.smp, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (o.ignore_eos && cli_ban_eog(s.m, s.smp))
		goto out;
	if (o.draft_model && !o.spec.types)
		o.spec.types = FX_SPEC_DRAFT_SIMPLE; /* as llama.cpp: -md alone drafts with it */
	s.spec_n_min = o.spec.n_min;
	if (o.draft_model && fx_model_load(o.draft_model, NULL, &dm, &err)) {
		fprintf(stderr, "error: draft model: %s\n", err.msg);
		goto out;
	}
	if (o.spec.types && fx_spec_drafter_create(&o.spec, s.m, dm, cp.n_ctx, cp.n_threads, &s.dr, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	struct sigaction sa = { .sa_handler = on_sigint };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	bool tty = isatty(0);
	if (tty)
		fprintf(stderr, "ferrox chat: %s, context %u tokens. /reset starts over, /exit quits.\n", o.model,
			fx_context_n_ctx(s.ctx));
	for (;;) {
		if (!msgs) {
			if (!(msgs = cJSON_CreateArray()) || (o.system && !add_message(msgs, "system", o.system))) {
				fprintf(stderr, "error: out of memory\n");
				goto out;
			}
		}
		if (tty) {
			fprintf(stderr, "> ");
			fflush(stderr);
		}
		char *line = NULL;
		if (o.first) { /* -p / -f: the first message */
			if (!(line = strdup(o.first))) {
				fprintf(stderr, "error: out of memory\n");
				goto out;
			}
			if (tty)
				fprintf(stderr, "%s\n", line);
			o.first = NULL;
		} else {
			line = read_line();
		}
		if (!line || !strcmp(line, "/exit") || !strcmp(line, "/quit")) {
			free(line);
			break;
		}
		if (!strcmp(line, "/reset")) {
			free(line);
			cJSON_Delete(msgs);
			msgs = NULL;
			continue;
		}
		if (!line[0]) {
			free(line);
			continue;
		}
		bool ok = add_message(msgs, "user", line);
		free(line);
		char *json = ok ? cJSON_PrintUnformatted(msgs) : NULL;
		struct fx_chat_prompt *p = NULL;
		if (!json) {
			fprintf(stderr, "error: out of memory\n");
			goto out;
		}
		rc = fx_chat_render(s.tmpl, json, NULL, NULL, true, s.bos, s.eos, 0, &p, &err);
		free(json);
		if (rc == FX_E_NOMEM) {
			fprintf(stderr, "error: %s\n", err.msg);
			goto out;
		}
		if (rc || feed_prompt(&s, p)) { /* the template refused it, or it does not fit: */
			if (rc)                 /* say why and drop the message */
				fprintf(stderr, "error: %s\n", err.msg);
			fx_chat_prompt_free(p);
			cJSON_DeleteItemFromArray(msgs, cJSON_GetArraySize(msgs) - 1);
			continue;
		}
		char *text = NULL;
		rc = reply(&s, o.n_predict, &text);
		fx_chat_prompt_free(p);
		if (rc)
			goto out;
		ok = add_message(msgs, "assistant", text);
		free(text);
		if (!ok) {
			fprintf(stderr, "error: out of memory\n");
			goto out;
		}
	}
	status = 0;
out:
	cJSON_Delete(msgs);
	free(s.held);
	free(tmpl_file);
	free(bos);
	free(eos);
	fx_sampler_free(s.smp);
	fx_spec_drafter_free(s.dr);
	fx_model_free(dm);
	fx_context_free(s.ctx);
	fx_model_free(s.m);
	free(o.first_buf);
	cli_reverse_free(&o.rev);
	return status;
}
