/* ferrox render-template: print a chat template rendered with messages,
 * exactly (nothing added), as transformers' apply_chat_template would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ferrox render-template (-m MODEL | --template FILE | --chat-template NAME)\n"
		"         --messages FILE.json"
		" [--tools FILE.json] [--extra FILE.json] [--add-generation-prompt]\n"
		"         [--bos S] [--eos S] [--now SECONDS]\n"
		"Render the chat template (the model's own with -m, or a Jinja file) and print the\n"
		"prompt exactly, nothing added. --messages: a JSON array of OpenAI-style messages;\n"
		"--tools: a JSON array of tool definitions; --extra: a JSON object of extra template\n"
		"variables (chat_template_kwargs). With -m, bos/eos default to the model's BOS/EOS\n"
		"token texts. --now: the time strftime_now sees (default: now). --chat-template NAME:\n"
		"a built-in template by llama.cpp's name (chatml, gemma, llama3, ...; or Jinja\n"
		"source); --chat-template-file is --template. Either, with -m, replaces the\n"
		"model's template (the model still gives bos/eos).\n");
}

/* Text of token t (control tokens included) as a malloc'ed string, or NULL. */
char *cli_token_text(const struct fx_model *m, fx_token t)
{
	char buf[512];
	size_t n = 0;
	if (t < 0 || fx_token_to_piece(m, t, true, buf, sizeof(buf) - 1, &n))
		return NULL;
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, buf, n);
		s[n] = 0;
	}
	return s;
}

/* Load a model for its template and token texts: vocabulary only when the
 * file allows it, else the whole model. */
struct fx_model *cli_load_for_template(const char *path)
{
	struct fx_model_params p = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	p.vocab_only = true;
	if (fx_model_load(path, &p, &m, &err) == FX_OK)
		return m;
	p.vocab_only = false;
	p.repack = false;
	if (fx_model_load(path, &p, &m, &err) == FX_OK)
		return m;
	fprintf(stderr, "error: %s\n", err.msg);
	return NULL;
}

/* Does s look like Jinja source rather than a name? (llama.cpp's
 * --chat-template takes either.) */
static bool looks_like_jinja(const char *s)
{
	return strstr(s, "{{") || strstr(s, "{%");
}

bool cli_chat_template(const char *arg, const char *file, const char **tmpl, char **owned)
{
	*tmpl = NULL;
	*owned = NULL;
	if (arg && file) {
		fprintf(stderr, "error: give --chat-template or --chat-template-file, not both\n");
		return false;
	}
	if (file) {
		if (!(*owned = cli_read_file(file, NULL)))
			return false;
		*tmpl = *owned;
		return true;
	}
	if (!arg)
		return true;
	if ((*tmpl = fx_chat_builtin_template(arg)))
		return true;
	if (looks_like_jinja(arg)) {
		*tmpl = arg;
		return true;
	}
	const char *names[64];
	size_t n = fx_chat_builtin_names(names, 64);
	fprintf(stderr, "error: --chat-template: unknown template '%s'; the built-in ones are:", arg);
	for (size_t i = 0; i < n && i < 64; i++)
		fprintf(stderr, "%s %s", i ? "," : "", names[i]);
	fprintf(stderr, " (or give Jinja source, or a file with --chat-template-file)\n");
	return false;
}
/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const render_template_flag_names[] = {
	"-m", "--model", "--template", "--chat-template", "--messages", "--tools", "--extra", "--bos", "--eos", "--add-generation-prompt", "--now", "-h", "--help", NULL,
};
static const char *const *const render_template_flags[] = { render_template_flag_names, NULL };

int cmd_render_template(int argc, char **argv)
{
	const char *model = NULL, *tmpl_path = NULL, *msgs_path = NULL, *tools_path = NULL, *extra_path = NULL;
	const char *bos = NULL, *eos = NULL, *tmpl_name = NULL;
	bool agp = false;
	long long now = 0;
	int ret = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = !strcmp(a, "-m") || !strcmp(a, "--model") ? &model
				    : !strcmp(a, "--template") || !strcmp(a, "--chat-template-file") ? &tmpl_path
				    : !strcmp(a, "--chat-template") ? &tmpl_name
				    : !strcmp(a, "--messages") ? &msgs_path
				    : !strcmp(a, "--tools") ? &tools_path
				    : !strcmp(a, "--extra") ? &extra_path
				    : !strcmp(a, "--bos") ? &bos
				    : !strcmp(a, "--eos") ? &eos : NULL;
		if (slot) {
			if (!(*slot = cli_value(argc, argv, &i)))
				return 2;
		} else if (!strcmp(a, "--add-generation-prompt")) {
			agp = true;
		} else if (!strcmp(a, "--now")) {
			const char *v = cli_value(argc, argv, &i);
			if (!v || !cli_int("--now", v, 1, 1LL << 40, &now))
				return 2;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else {
			cli_flag_unknown("render-template", render_template_flags, a);
			usage(stderr);
			return 2;
		}
	}
	if ((!model && !tmpl_path && !tmpl_name) || !msgs_path) {
		fprintf(stderr, "error: give -m MODEL, --template FILE or --chat-template NAME, and --messages FILE\n");
		usage(stderr);
		return 2;
	}
	struct fx_model *m = NULL;
	char *tmpl = NULL, *msgs = NULL, *tools = NULL, *extra = NULL, *bos_m = NULL, *eos_m = NULL;
	const char *tmpl_text;
	if (!cli_chat_template(tmpl_name, tmpl_path, &tmpl_text, &tmpl))
		goto out;
	if (model) {
		if (!(m = cli_load_for_template(model)))
			goto out;
		if (!tmpl_text && !(tmpl_text = fx_model_chat_template(m))) {
			fprintf(stderr, "error: %s has no chat template (give one with --chat-template NAME or --template FILE)\n", model);
			goto out;
		}
		if (!bos)
			bos = bos_m = cli_token_text(m, fx_token_bos(m));
		if (!eos)
			eos = eos_m = cli_token_text(m, fx_token_eos(m));
	}
	if (!(msgs = cli_read_file(msgs_path, NULL)) || (tools_path && !(tools = cli_read_file(tools_path, NULL))) ||
	    (extra_path && !(extra = cli_read_file(extra_path, NULL))))
		goto out;
	struct fx_chat_prompt *p = NULL;
	struct fx_err err = { 0 };
	if (fx_chat_render(tmpl_text, msgs, tools, extra, agp, bos, eos, now, &p, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	ret = fwrite(p->text, 1, p->len, stdout) == p->len && fflush(stdout) == 0 ? 0 : 1;
	fx_chat_prompt_free(p);
out:
	free(tmpl);
	free(msgs);
	free(tools);
	free(extra);
	free(bos_m);
	free(eos_m);
	fx_model_free(m);
	return ret;
}
