/* Built-in chat templates (fx_chat_builtin_template, src/chat/templates.c)
 * against llama.cpp's own llama_chat_apply_template: every case of
 * tests/data/chat/builtin_refs.json (written by
 * scripts/make-chat-builtin-refs.py from llama.cpp's output: each name on
 * twelve conversations, add_generation_prompt off and on) renders through
 * fx_chat_render to the same bytes. Also: every name llama.cpp's output
 * covers is listed by fx_chat_builtin_names and vice versa, the list is
 * sorted, and unknown names give NULL. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

static void against_llama_cpp(void)
{
	size_t n = 0;
	char *text = check_read_file("tests/data/chat/builtin_refs.json", &n);
	if (!text)
		return;
	cJSON *root = cJSON_ParseWithLength(text, n);
	CHECKF(root != NULL, "builtin_refs.json is not JSON");
	const cJSON *c;
	const char *names[64];
	size_t n_names = fx_chat_builtin_names(names, 64);
	bool seen[64] = { 0 };
	int n_cases = 0, n_ok = 0;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
		const char *conv = cJSON_GetStringValue(cJSON_GetObjectItem(c, "conversation"));
		const char *msgs = cJSON_GetStringValue(cJSON_GetObjectItem(c, "messages_json"));
		const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(c, "expect"));
		bool agp = cJSON_IsTrue(cJSON_GetObjectItem(c, "agp"));
		const char *tmpl = fx_chat_builtin_template(name);
		n_cases++;
		for (size_t i = 0; i < n_names && i < 64; i++)
			if (!strcmp(names[i], name))
				seen[i] = true;
		CHECKF(tmpl != NULL, "%s: not a built-in", name);
		if (!tmpl || !msgs || !want)
			continue;
		/* bos/eos set to texts no built-in may print: llama.cpp's
		 * formatter writes neither */
		struct fx_chat_prompt *p = NULL;
		struct fx_err err = { 0 };
		int rc = fx_chat_render(tmpl, msgs, NULL, NULL, agp, "<BOS?>", "<EOS?>", 1, &p, &err);
		CHECKF(rc == FX_OK, "%s/%s: %s", name, conv, err.msg);
		if (rc == FX_OK) {
			bool same = p->len == strlen(want) && !memcmp(p->text, want, p->len);
			CHECKF(same, "%s/%s agp=%d:\n  llama.cpp: [%s]\n  ferrox:    [%s]", name, conv, agp, want,
			       p->text);
			n_ok += same;
		}
		fx_chat_prompt_free(p);
	}
	printf("chat builtins: %d of %d llama.cpp renderings match byte for byte\n", n_ok, n_cases);
	CHECKF(n_cases >= 600, "only %d cases in builtin_refs.json", n_cases);
	for (size_t i = 0; i < n_names && i < 64; i++)
		CHECKF(seen[i], "built-in %s has no llama.cpp reference", names[i]);
	cJSON_Delete(root);
	free(text);
}

static void names(void)
{
	const char *all[64];
	size_t n = fx_chat_builtin_names(all, 64);
	CHECKF(n >= 7 && n <= 64, "%zu names", n);
	CHECKF(fx_chat_builtin_names(NULL, 0) == n, "count without a buffer");
	for (size_t i = 1; i < n; i++)
		CHECKF(strcmp(all[i - 1], all[i]) < 0, "not sorted: %s, %s", all[i - 1], all[i]);
	const char *need[] = { "chatml", "llama2", "llama3", "gemma", "mistral", "phi3", "zephyr" };
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		CHECKF(fx_chat_builtin_template(need[i]) != NULL, "no built-in %s", need[i]);
	CHECKF(!fx_chat_builtin_template("nope") && !fx_chat_builtin_template(NULL) &&
	       !fx_chat_builtin_template("ChatML") && !fx_chat_builtin_template(""), "unknown names");
	const char *two[2] = { NULL, NULL };
	CHECKF(fx_chat_builtin_names(two, 1) == n && two[0] == all[0] && two[1] == NULL, "cap respected");
}

/* Content that is not a string (an assistant's tool-call turn has null)
 * renders as "", never as "None". */
static void null_content(void)
{
	struct fx_chat_prompt *p = NULL;
	struct fx_err err = { 0 };
	int rc = fx_chat_render(fx_chat_builtin_template("chatml"),
				"[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"assistant\",\"content\":null}]",
				NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_OK && !strcmp(p->text, "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"),
	       "rc %d [%s]", rc, p ? p->text : err.msg);
	fx_chat_prompt_free(p);
}

int main(void)
{
	against_llama_cpp();
	names();
	null_content();
	return check_exit();
}
