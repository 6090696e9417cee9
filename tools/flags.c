/* Flag tables and the llama.cpp-compatibility flags run, chat and serve
 * share: the unknown-flag check with its "did you mean" (each command
 * lists its flags once, as NULL-terminated name lists, and its parser
 * checks every argument against them before matching it), -b/-ub,
 * -fa/-ngl (no GPU backend yet), --no-warmup, the model-loading flags, the
 * prompt's escapes (-e) and the terminal progress line. Names and meanings
 * follow llama.cpp's common/arg.cpp. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"

const char *const cli_sampling_flags[] = {
	"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
	"--seed", "-s", "--generation-config", NULL,
};
const char *const cli_grammar_flags[] = {
	"--grammar", "--grammar-file", "-j", "--json-schema", "-jf", "--json-schema-file", "--regex", NULL,
};
const char *const cli_spec_flags[] = {
	"--spec-type", "--spec-draft-n-max", "--draft", "--draft-n", "--draft-max", "--spec-draft-n-min",
	"--draft-min", "--draft-n-min", "--spec-draft-p-min", "--draft-p-min",
	"--spec-ngram-simple-size-n", "--spec-ngram-simple-size-m", NULL,
};
const char *const cli_compat_flags[] = {
	"-b", "--batch-size", "-ub", "--ubatch-size", "-fa", "--flash-attn", "-ngl", "--gpu-layers",
	"--n-gpu-layers", "--warmup", "--no-warmup", "--mmap", "--no-mmap", "--mlock", "-lm",
	"--load-mode", "-tb", "--threads-batch", NULL,
};

/* llama.cpp flags a user may bring that ferrox does not take, with what to
 * do instead: said in place of a "did you mean" that would mislead
 * ("-cnv" is one edit from "-ctv"). */
static const struct {
	const char *flag, *hint;
} cli_foreign[] = {
	{ "-cnv", "for a conversation use `ferrox chat` (run is one completion)" },
	{ "--conversation", "for a conversation use `ferrox chat` (run is one completion)" },
	{ "-i", "for a conversation use `ferrox chat`" },
	{ "--interactive", "for a conversation use `ferrox chat`" },
	{ "-no-cnv", "run never converses: drop the flag" },
	{ "--no-conversation", "run never converses: drop the flag" },
	{ "-hf", "ferrox loads local files (-m FILE); scripts/get-model.sh fetches the default models" },
	{ "--hf-repo", "ferrox loads local files (-m FILE); scripts/get-model.sh fetches the default models" },
	{ "--presence-penalty", "not a CLI sampler here; the server takes presence_penalty per request" },
	{ "--frequency-penalty", "not a CLI sampler here; the server takes frequency_penalty per request" },
	{ "--mirostat", "mirostat is not implemented; --temp/--top-k/--top-p/--min-p are" },
	{ "--samplers", "the chain is llama.cpp's default order, not configurable" },
	{ "--color", "ferrox prints no colours" },
};

const char cli_compat_help[] =
	"  -b, --batch-size N     most prompt tokens per decode call (default 2048, as llama.cpp)\n"
	"  -ub, --ubatch-size N   most rows per forward step (default 512; at most -b)\n"
	"  -fa, --flash-attn on|off|auto, -ngl, --gpu-layers N|auto|all\n"
	"                         accepted for llama.cpp's command lines: ferrox has no GPU\n"
	"                         backend yet (its CPU attention always works in chunks)\n"
	"  -tb, --threads-batch N accepted: -t threads run prefill and decode alike\n"
	"  --no-warmup            accepted: ferrox runs no warm-up pass\n"
	"  --no-mmap              read the model file into memory instead of mapping it\n"
	"  --mlock                keep the model's memory resident (mlock; may need a higher\n"
	"                         RLIMIT_MEMLOCK)\n"
	"  -lm, --load-mode M     llama.cpp's newer spelling: auto, mmap, none (= --no-mmap),\n"
	"                         mlock (= --no-mmap --mlock), mmap+mlock (= --mlock)\n";

/* Optimal string alignment distance (Levenshtein plus adjacent swaps:
 * "--tpo-p" is one edit from "--top-p"). Names are short; longer inputs
 * count as far. */
static int edit_distance(const char *a, const char *b)
{
	enum { MAXL = 64 };
	size_t la = strlen(a), lb = strlen(b);
	int d[MAXL + 1][MAXL + 1];
	if (la > MAXL || lb > MAXL)
		return MAXL;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int c = a[i - 1] != b[j - 1], v = d[i - 1][j - 1] + c;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

const char *cli_closest(const char *arg, const char *const *const *sets)
{
	const char *best = NULL;
	int best_d = 1 << 30;
	size_t la = strlen(arg);
	for (size_t s = 0; sets[s]; s++) {
		for (size_t k = 0; sets[s][k]; k++) {
			int d = edit_distance(arg, sets[s][k]);
			/* an abbreviation ("--ubatch") is one edit away */
			if (la >= 4 && la < strlen(sets[s][k]) && !strncmp(arg, sets[s][k], la))
				d = 1;
			if (d < best_d) {
				best_d = d;
				best = sets[s][k];
			}
		}
	}
	/* Near only: at most a third of the longer name's letters changed
	 * (and at least two allowed), so "--tmp" gets --temp but
	 * "--frobnicate" nothing. */
	size_t lb = best ? strlen(best) : 0, l = la > lb ? la : lb;
	int limit = (int)(l / 3) > 2 ? (int)(l / 3) : 2;
	return best && best_d <= limit ? best : NULL;
}

void cli_flag_unknown(const char *cmd, const char *const *const *sets, const char *arg)
{
	if (arg[0] != '-') {
		fprintf(stderr, "error: unexpected argument '%s': options start with '-' (a model is "
			"-m MODEL; see ferrox %s --help)\n", arg, cmd);
		return;
	}
	for (size_t k = 0; k < sizeof(cli_foreign) / sizeof(cli_foreign[0]); k++) {
		if (!strcmp(arg, cli_foreign[k].flag)) {
			fprintf(stderr, "error: ferrox %s does not take llama.cpp's %s: %s\n", cmd, arg,
				cli_foreign[k].hint);
			return;
		}
	}
	const char *best = cli_closest(arg, sets);
	if (best)
		fprintf(stderr, "error: unknown option '%s'; did you mean %s? (see ferrox %s --help)\n", arg,
			best, cmd);
	else
		fprintf(stderr, "error: unknown option '%s' (see ferrox %s --help)\n", arg, cmd);
}

bool cli_flag_known(const char *cmd, const char *const *const *sets, const char *arg)
{
	for (size_t s = 0; sets[s]; s++)
		for (size_t k = 0; sets[s][k]; k++)
			if (!strcmp(arg, sets[s][k]))
				return true;
	cli_flag_unknown(cmd, sets, arg);
	return false;
}

void cli_compat_init(struct cli_compat *c)
{
	*c = (struct cli_compat){ .n_batch = 2048, .n_ubatch = 512 };
}

static bool is_truthy(const char *v)
{
	return !strcmp(v, "on") || !strcmp(v, "enabled") || !strcmp(v, "true") || !strcmp(v, "1");
}

static bool is_falsey(const char *v)
{
	return !strcmp(v, "off") || !strcmp(v, "disabled") || !strcmp(v, "false") || !strcmp(v, "0");
}

int cli_compat_opt(int argc, char **argv, int *i, struct cli_compat *c)
{
	const char *a = argv[*i], *v;
	long long n;
	if (!strcmp(a, "-b") || !strcmp(a, "--batch-size") || !strcmp(a, "-ub") || !strcmp(a, "--ubatch-size")) {
		if (!(v = cli_value(argc, argv, i)) || !cli_int(a, v, 1, 1 << 24, &n))
			return -1;
		*(!strcmp(a, "-b") || !strcmp(a, "--batch-size") ? &c->n_batch : &c->n_ubatch) = n;
		return 1;
	}
	if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
		if (!(v = cli_value(argc, argv, i)))
			return -1;
		if (!is_truthy(v) && !is_falsey(v) && strcmp(v, "auto") && strcmp(v, "-1")) {
			fprintf(stderr, "error: %s wants on, off or auto, got '%s'\n", a, v);
			return -1;
		}
		c->gpu_fa = is_truthy(v) ? a : NULL;
		return 1;
	}
	if (!strcmp(a, "-ngl") || !strcmp(a, "--gpu-layers") || !strcmp(a, "--n-gpu-layers")) {
		if (!(v = cli_value(argc, argv, i)))
			return -1;
		bool word = !strcmp(v, "auto") || !strcmp(v, "all");
		if (!word && !cli_int(a, v, -2, 1 << 20, &n))
			return -1;
		c->gpu_ngl = word || n > 0 ? a : NULL;
		return 1;
	}
	if (!strcmp(a, "-tb") || !strcmp(a, "--threads-batch")) {
		if (!(v = cli_value(argc, argv, i)) || !cli_int(a, v, -1, 1 << 10, &n))
			return -1;
		return 1; /* one thread count (-t) serves prefill and decode */
	}
	if (!strcmp(a, "--no-warmup") || !strcmp(a, "--warmup"))
		return 1; /* nothing to warm: ferrox's first step is no slower to set up */
	if (!strcmp(a, "--no-mmap") || !strcmp(a, "--mmap")) {
		c->no_mmap = a[2] == 'n';
		return 1;
	}
	if (!strcmp(a, "--mlock")) {
		c->mlock = true;
		return 1;
	}
	if (!strcmp(a, "-lm") || !strcmp(a, "--load-mode")) {
		if (!(v = cli_value(argc, argv, i)))
			return -1;
		if (!strcmp(v, "auto") || !strcmp(v, "mmap") || !strcmp(v, "none") || !strcmp(v, "mlock") ||
		    !strcmp(v, "mmap+mlock")) {
			c->no_mmap = !strcmp(v, "none") || !strcmp(v, "mlock");
			c->mlock = !strcmp(v, "mlock") || !strcmp(v, "mmap+mlock");
			return 1;
		}
		fprintf(stderr, "error: %s wants auto, none, mmap, mlock or mmap+mlock, got '%s'\n", a, v);
		return -1;
	}
	return 0;
}

void cli_compat_apply(const struct cli_compat *c, struct fx_model_params *mp, uint32_t *n_ubatch)
{
	if (c->gpu_fa || c->gpu_ngl)
		fprintf(stderr, "ferrox: %s%s%s: no GPU backend yet; everything runs on the CPU\n",
			c->gpu_ngl ? c->gpu_ngl : "", c->gpu_ngl && c->gpu_fa ? " and " : "",
			c->gpu_fa ? c->gpu_fa : "");
	mp->no_mmap = c->no_mmap; /* --mlock: the caller's fx_model_lock after the load */
	if (n_ubatch) /* as llama.cpp: the physical batch is at most the logical one */
		*n_ubatch = (uint32_t)(c->n_ubatch < c->n_batch ? c->n_ubatch : c->n_batch);
}

void cli_unescape(char *s)
{
	char *o = s;
	for (const char *p = s; *p; p++) {
		if (*p != '\\' || !p[1]) {
			*o++ = *p;
			continue;
		}
		char c = *++p;
		static const char from[] = "nrt'\"\\", to[] = "\n\r\t'\"\\";
		const char *f = strchr(from, c);
		if (f) {
			*o++ = to[f - from];
			continue;
		}
		if (c == 'x' && p[1] && p[2]) {
			char hex[3] = { p[1], p[2], 0 }, *end;
			long val = strtol(hex, &end, 16);
			if (end == hex + 2) {
				*o++ = (char)val;
				p += 2;
				continue;
			}
		}
		*o++ = '\\'; /* anything else stays as written */
		*o++ = c;
	}
	*o = 0;
}

void cli_progress(struct cli_progress *pr, const char *what, double done, double total)
{
	if (pr->off || total <= 0)
		return;
	if (!pr->checked) {
		pr->checked = true;
		if (!(pr->off = !isatty(2)))
			pr->t0 = cli_now();
		if (pr->off)
			return;
	}
	int pct = (int)(100.0 * done / total);
	if (pct > 100)
		pct = 100;
	double el = cli_now() - pr->t0;
	/* quiet for the first half second: a quick job prints nothing */
	if ((pct == pr->last_pct && done < total) || (!pr->shown && el < 0.5))
		return;
	pr->last_pct = pct;
	pr->shown = true;
	fprintf(stderr, "\r%s: %3d%% (%.1f s)", what, pct, el);
	if (done >= total) {
		fprintf(stderr, "\n");
		pr->shown = false;
		pr->checked = false; /* a next job starts its own clock */
	}
	fflush(stderr);
}

bool cli_load_progress(float p, void *arg)
{
	cli_progress(arg, "loading", p, 1.0);
	return true;
}

void cli_tail_add(struct cli_tail *tl, const char *p, size_t n)
{
	if (n >= sizeof(tl->buf)) {
		p += n - sizeof(tl->buf);
		n = sizeof(tl->buf);
	}
	if (tl->n + n > sizeof(tl->buf)) {
		size_t drop = tl->n + n - sizeof(tl->buf);
		memmove(tl->buf, tl->buf + drop, tl->n - drop);
		tl->n -= drop;
	}
	memcpy(tl->buf + tl->n, p, n);
	tl->n += n;
}

bool cli_reverse_add(struct cli_reverse *r, const char *opt, const char *v)
{
	if (r->n == CLI_MAX_REVERSE) {
		fprintf(stderr, "error: at most %d reverse prompts\n", CLI_MAX_REVERSE);
		return false;
	}
	/* the tail the check reads holds the last 1 KiB of output */
	if (!v[0] || strlen(v) > 512) {
		fprintf(stderr, "error: %s wants a text of 1 to 512 bytes\n", opt);
		return false;
	}
	r->text[r->n] = v;
	r->tok[r->n++] = -1;
	return true;
}

bool cli_reverse_unescape(struct cli_reverse *r)
{
	for (int k = 0; k < r->n; k++) {
		if (!(r->own[k] = strdup(r->text[k]))) {
			fprintf(stderr, "error: out of memory\n");
			return false;
		}
		cli_unescape(r->own[k]);
		r->text[k] = r->own[k];
	}
	return true;
}

void cli_reverse_tokens(struct cli_reverse *r, const struct fx_model *m)
{
	for (int k = 0; k < r->n; k++) {
		size_t nr = 0;
		fx_token *t = cli_tokenize(m, r->text[k], false, true, &nr);
		r->tok[k] = t && nr == 1 ? t[0] : -1;
		free(t);
	}
}

bool cli_reverse_hit(const struct cli_reverse *r, const struct cli_tail *tl, fx_token last)
{
	for (int k = 0; k < r->n; k++) {
		size_t len = strlen(r->text[k]), from = tl->n > len + 2 ? tl->n - len - 2 : 0;
		if (r->tok[k] >= 0 && r->tok[k] == last)
			return true;
		if (tl->n >= len && memmem(tl->buf + from, tl->n - from, r->text[k], len))
			return true;
	}
	return false;
}

void cli_reverse_free(struct cli_reverse *r)
{
	for (int k = 0; k < r->n; k++)
		free(r->own[k]);
}

int cli_ban_eog(const struct fx_model *m, struct fx_sampler *smp)
{
	int32_t nv = fx_model_n_vocab(m), n = 0;
	fx_token *eog = malloc((size_t)nv * sizeof(*eog));
	struct fx_err err = { 0 };
	if (!eog) {
		fprintf(stderr, "error: out of memory\n");
		return 1;
	}
	for (fx_token t = 0; t < nv; t++)
		if (fx_token_is_eog(m, t))
			eog[n++] = t;
	if (!n) /* llama.cpp says the same and goes on */
		fprintf(stderr, "ferrox: the vocabulary has no end-of-generation token; --ignore-eos changes nothing\n");
	int rc = fx_sampler_ban(smp, eog, n, &err);
	if (rc)
		fprintf(stderr, "error: %s\n", err.msg);
	free(eog);
	return rc ? 1 : 0;
}
