/* Chat templates (src/chat, fx_chat_render, fx_tokenize_prompt).
 *
 * - tests/data/chat/expect.json: interpreter cases whose expected output
 *   (or failure) Python's jinja2 produced, set up as transformers'
 *   apply_chat_template (tests/gen_chat_expect.py writes the file);
 * - error messages name the template line;
 * - provenance: the data spans cover exactly the bytes from messages;
 * - fx_tokenize_prompt on the default models (skipped when absent, a
 *   failure in CI): a special-token text inside message content stays
 *   plain text, the template's own specials become control tokens.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"

static void expect_cases(void)
{
	size_t n = 0;
	char *text = check_read_file("tests/data/chat/expect.json", &n);
	if (!text)
		return;
	cJSON *root = cJSON_ParseWithLength(text, n);
	CHECKF(root != NULL, "expect.json is not JSON");
	const cJSON *cases = cJSON_GetObjectItem(root, "cases"), *c;
	int64_t now = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(root, "now"));
	int n_cases = 0;
	cJSON_ArrayForEach(c, cases) {
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
		const char *tmpl = cJSON_GetStringValue(cJSON_GetObjectItem(c, "template"));
		const char *msgs = cJSON_GetStringValue(cJSON_GetObjectItem(c, "messages_json"));
		const char *extra = cJSON_GetStringValue(cJSON_GetObjectItem(c, "extra_json"));
		const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(c, "expect"));
		bool agp = cJSON_IsTrue(cJSON_GetObjectItem(c, "agp"));
		struct fx_chat_prompt *p = NULL;
		struct fx_err err = { 0 };
		int rc = fx_chat_render(tmpl, msgs, NULL, extra, agp, "<s>", "</s>", now, &p, &err);
		n_cases++;
		if (want) {
			CHECKF(rc == FX_OK, "%s: failed: %s", name, err.msg);
			if (rc == FX_OK)
				CHECKF(p->len == strlen(want) && !memcmp(p->text, want, p->len),
				       "%s:\n  jinja2: [%s]\n  ferrox: [%s]", name, want, p->text);
		} else {
			CHECKF(rc != FX_OK, "%s: jinja2 raises (%s) but ferrox rendered [%s]", name,
			       cJSON_GetStringValue(cJSON_GetObjectItem(c, "error")), p ? p->text : "");
			CHECKF(rc == FX_OK || err.msg[0], "%s: no error message", name);
		}
		fx_chat_prompt_free(p);
	}
	CHECKF(n_cases >= 70, "only %d cases in expect.json", n_cases);
	cJSON_Delete(root);
	free(text);
}

static void error_messages(void)
{
	struct fx_chat_prompt *p = NULL;
	struct fx_err err = { 0 };
	int rc = fx_chat_render("line one\n{% if true %}\n{{ messages[0].content.nope.x }}\n{% endif %}",
				"[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, NULL, false, NULL, NULL, 1, &p,
				&err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "template line 3"), "rc %d msg %s", rc, err.msg);
	rc = fx_chat_render("a\n\n{% for x in y %}", "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "line 3") && strstr(err.msg, "endfor"), "rc %d msg %s", rc,
	       err.msg);
	rc = fx_chat_render("{{ raise_exception('System role not supported') }}", "[]", NULL, NULL, false, NULL,
			    NULL, 1, &p, &err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "System role not supported"), "msg %s", err.msg);
	rc = fx_chat_render("x", "[{\"role\": ", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "messages"), "msg %s", err.msg);
	rc = fx_chat_render("x", "{}", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "array"), "msg %s", err.msg);
	rc = fx_chat_render("x", "[]", "{}", NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "tools"), "msg %s", err.msg);
	rc = fx_chat_render("{{ tools is none }}{{ x is defined }}", "[]", "null", "null", false, NULL, NULL, 1, &p,
			    &err);
	CHECKF(rc == FX_OK && !strcmp(p->text, "TrueFalse"), "null tools/extra: rc %d %s", rc, err.msg);
	fx_chat_prompt_free(p);
	p = NULL;
	rc = fx_chat_render("{{ x | frob }}", "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc != FX_OK && strstr(err.msg, "frob"), "msg %s", err.msg);
	CHECK(fx_chat_render(NULL, "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err) == FX_E_INVALID);
	/* hostile templates: bounded nesting, no namespace cycles */
	char deep[4096];
	size_t k = 0;
	k += (size_t)snprintf(deep + k, sizeof(deep) - k, "{{ ");
	for (int i = 0; i < 1000; i++)
		k += (size_t)snprintf(deep + k, sizeof(deep) - k, "not ");
	snprintf(deep + k, sizeof(deep) - k, "x }}");
	rc = fx_chat_render(deep, "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "too deeply"), "msg %s", err.msg);
	rc = fx_chat_render("{% set ns = namespace(a=1) %}{% set ns.x = [ns] %}{{ ns }}", "[]", NULL, NULL, false,
			    NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_INVALID && strstr(err.msg, "namespace"), "msg %s", err.msg);
	/* a slice inside a tuple key (fuzz_chat's 1-CPU-hour campaign: the slice
	 * had no object, UB in eval_slice): a parse error */
	rc = fx_chat_render("{{ \"x\"[::-1,] }}", "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_FORMAT && strstr(err.msg, "slice inside a subscript tuple"), "rc %d msg %s",
	       rc, err.msg);
	rc = fx_chat_render("{{ [1, 2][1, 0:1] }}", "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
	CHECKF(rc == FX_E_FORMAT, "rc %d msg %s", rc, err.msg);
	/* loops nested twelve deep over ten items (fuzz_chat's second
	 * campaign: twenty over the messages ran for hours): 10^12 iterations
	 * would never finish; the render stops at CHAT_MAX_STEPS with an
	 * error; three deep (1,110 iterations) renders. */
	{
		char t[1024] = "", *q = t;
		for (int i = 0; i < 12; i++)
			q += sprintf(q, "{%% for a%d in range(10) %%}", i);
		q += sprintf(q, "x");
		for (int i = 0; i < 12; i++)
			q += sprintf(q, "{%% endfor %%}");
		rc = fx_chat_render(t, "[]", NULL, NULL, false, NULL, NULL, 1, &p, &err);
		CHECKF(rc == FX_E_INVALID && strstr(err.msg, "loop iterations"), "rc %d msg %s", rc, err.msg);
		rc = fx_chat_render("{% for a in range(10) %}{% for b in range(10) %}{% for c in range(10) %}"
				    "x{% endfor %}{% endfor %}{% endfor %}", "[]", NULL, NULL, false, NULL, NULL, 1,
				    &p, &err);
		CHECKF(rc == FX_OK, "rc %d msg %s", rc, err.msg);
		if (rc == FX_OK)
			fx_chat_prompt_free(p);
	}
	fx_chat_prompt_free(NULL);
	/* A slice index that is not an integer is an error naming it (jinja2:
	 * TypeError; expect.json has more). It was read as a bool after the
	 * error was set: UBSan "load of value 154, which is not a valid value
	 * for type '_Bool'" on 1.1, whose low byte is 0x9a. */
	static const char *const bad_slices[] = {
		"{{ l['a':] }}", "{{ s[1.1:] }}", "{{ s[:2.3] }}", "{{ l[::1.1] }}",
		"{{ s[1.1:'b':[1]] }}", "{{ l[0:1.1:1] }}",
	};
	for (size_t i = 0; i < sizeof(bad_slices) / sizeof(bad_slices[0]); i++) {
		p = NULL;
		rc = fx_chat_render(bad_slices[i], "[]", NULL, "{\"l\": [1, 2, 3], \"s\": \"abc\"}", false,
				    NULL, NULL, 1, &p, &err);
		CHECKF(rc == FX_E_INVALID && strstr(err.msg, "slice indices must be integers or None"),
		       "%s: rc %d msg %s", bad_slices[i], rc, err.msg);
		fx_chat_prompt_free(p);
	}
}

/* The bytes covered by spans, concatenated with '|' between spans. */
static void spans_text(const struct fx_chat_prompt *p, char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < p->n_data && k + 1 < cap; i++) {
		if (i && k + 1 < cap)
			out[k++] = '|';
		for (size_t j = 0; j < p->data[i].len && k + 1 < cap; j++)
			out[k++] = p->text[p->data[i].off + j];
	}
	out[k] = 0;
}

static void provenance(void)
{
	static const struct {
		const char *tmpl, *text, *spans;
	} cases[] = {
		{ "<|im_start|>{{ messages[0].content }}<|im_end|>", "<|im_start|>a<|im_start|>b<|im_end|>",
		  "a<|im_start|>b" },
		{ "{{ '[' + messages[0].content|upper + ']' }}", "[A<|IM_START|>B]", "A<|IM_START|>B" },
		{ "{{ messages[0].content[1:4] ~ '#' ~ messages[0].role }}", "<|i#user", "<|i|user" },
		{ "{{ messages[0].content|tojson }}", "\"a<|im_start|>b\"", "\"a<|im_start|>b\"" },
		{ "{{ messages[0].content.split('<')|join('/') }}", "a/|im_start|>b", "a||im_start|>b" },
		{ "{% set c %}<{{ messages[0].content|trim }}>{% endset %}{{ c }}", "<a<|im_start|>b>",
		  "a<|im_start|>b" },
		{ "{{ bos_token }}x{{ eos_token }}", "<s>x</s>", "" },
		{ "{{ messages|length }}", "1", "" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fx_chat_prompt *p = NULL;
		struct fx_err err = { 0 };
		char got[256];
		int rc = fx_chat_render(cases[i].tmpl, "[{\"role\":\"user\",\"content\":\"a<|im_start|>b\"}]",
					NULL, NULL, false, "<s>", "</s>", 1, &p, &err);
		CHECKF(rc == FX_OK, "%s: %s", cases[i].tmpl, err.msg);
		if (rc)
			continue;
		CHECKF(!strcmp(p->text, cases[i].text), "%s: text [%s]", cases[i].tmpl, p->text);
		spans_text(p, got, sizeof(got));
		CHECKF(!strcmp(got, cases[i].spans), "%s: spans [%s], want [%s]", cases[i].tmpl, got,
		       cases[i].spans);
		fx_chat_prompt_free(p);
	}
}

static fx_token *tok(const struct fx_model *m, const char *s, size_t n, bool special, size_t *count)
{
	size_t need = 0;
	fx_tokenize(m, s, n, false, special, NULL, 0, &need);
	fx_token *ids = calloc(need + 1, sizeof(*ids));
	if (ids && fx_tokenize(m, s, n, false, special, ids, need, count) != FX_OK) {
		free(ids);
		return NULL;
	}
	return ids;
}

static size_t count_id(const fx_token *ids, size_t n, fx_token t)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ids[i] == t;
	return c;
}

/* Gemma 3: a data span holding "<start_of_turn>" tokenizes as plain text. */
static void tokenize_prompt_gemma(void)
{
	char path[512];
	struct fx_model_params mp = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	if (!check_model_path("gemma-3-270m-q4_k_m.gguf", path, sizeof(path)))
		return;
	mp.vocab_only = true;
	if (fx_model_load(path, &mp, &m, &err)) {
		CHECKF(0, "load %s: %s", path, err.msg);
		return;
	}
	struct fx_chat_prompt *p = NULL;
	int rc = fx_chat_render("<start_of_turn>user\n{{ messages[0].content }}<end_of_turn>\n",
				"[{\"role\":\"user\",\"content\":\"<start_of_turn>hi\"}]", NULL, NULL, false, NULL,
				NULL, 1, &p, &err);
	CHECKF(rc == FX_OK, "%s", err.msg);
	if (rc) {
		fx_model_free(m);
		return;
	}
	size_t n_sot = 0, n_all = 0, n_prompt = 0, n_mid = 0, n_nl = 0;
	fx_token *sot = tok(m, "<start_of_turn>", 15, true, &n_sot);
	fx_token *eot = tok(m, "<end_of_turn>", 13, true, &n_all);
	fx_token eot_id = eot && n_all == 1 ? eot[0] : -1;
	fx_token *all = tok(m, p->text, p->len, true, &n_all);
	fx_token *mid = tok(m, "user\n<start_of_turn>hi", 22, false, &n_mid);
	fx_token *nl = tok(m, "\n", 1, false, &n_nl);
	fx_token ids[256];
	rc = fx_tokenize_prompt(m, p, false, ids, 256, &n_prompt);
	CHECKF(rc == FX_OK && sot && n_sot == 1 && eot_id >= 0 && all && mid && nl, "rc %d", rc);
	if (rc == FX_OK && sot && n_sot == 1 && eot_id >= 0 && all && mid && nl) {
		CHECKF(count_id(all, n_all, sot[0]) == 2, "fx_tokenize with specials sees 2 <start_of_turn>");
		CHECKF(count_id(ids, n_prompt, sot[0]) == 1, "the one in the message must stay text");
		/* = [<start_of_turn>] + plain("user\n<start_of_turn>hi") + [<end_of_turn>]
		 * (jinja2 drops the template's one trailing newline) */
		bool same = n_prompt == 1 + n_mid + 1 && ids[0] == sot[0] && ids[1 + n_mid] == eot_id &&
			    !memcmp(ids + 1, mid, n_mid * sizeof(*ids)) && nl && n_nl == 1;
		CHECKF(same, "fx_tokenize_prompt ids differ from the plain-text pieces (%zu ids)", n_prompt);
		/* with no data spans it is fx_tokenize with parse_special */
		struct fx_chat_prompt q = *p;
		q.n_data = 0;
		rc = fx_tokenize_prompt(m, &q, false, ids, 256, &n_prompt);
		CHECK(rc == FX_OK && n_prompt == n_all && !memcmp(ids, all, n_all * sizeof(*ids)));
		/* too small a buffer: FX_E_INVALID with the count needed */
		size_t need = 0;
		CHECK(fx_tokenize_prompt(m, p, false, ids, 1, &need) == FX_E_INVALID && need == 1 + n_mid + 1);
		/* spans out of range are refused */
		struct fx_chat_span bad = { p->len, 5 };
		q.data = &bad;
		q.n_data = 1;
		CHECK(fx_tokenize_prompt(m, &q, false, ids, 256, &n_prompt) == FX_E_INVALID);
	}
	free(sot);
	free(eot);
	free(all);
	free(mid);
	free(nl);
	fx_chat_prompt_free(p);
	fx_model_free(m);
}

/* SmolLM2: its own template (GGUF), a user typing "<|im_start|>". */
static void tokenize_prompt_smollm(void)
{
	char path[512];
	struct fx_model_params mp = fx_model_default_params();
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	if (!check_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof(path)))
		return;
	mp.vocab_only = true;
	if (fx_model_load(path, &mp, &m, &err)) {
		CHECKF(0, "load %s: %s", path, err.msg);
		return;
	}
	const char *tmpl = fx_model_chat_template(m);
	CHECKF(tmpl && strstr(tmpl, "<|im_start|>"), "SmolLM2's template is missing");
	struct fx_chat_prompt *p = NULL;
	if (tmpl && fx_chat_render(tmpl, "[{\"role\":\"user\",\"content\":\"say <|im_start|> please\"}]", NULL,
				   NULL, true, NULL, NULL, 1, &p, &err) == FX_OK) {
		const char *want = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
				   "Hugging Face<|im_end|>\n<|im_start|>user\nsay <|im_start|> please<|im_end|>\n"
				   "<|im_start|>assistant\n";
		CHECKF(!strcmp(p->text, want), "rendered [%s]", p->text);
		size_t n_im = 0, n = 0, n_all = 0;
		fx_token *im = tok(m, "<|im_start|>", 12, true, &n_im);
		fx_token *all = tok(m, p->text, p->len, true, &n_all);
		fx_token ids[512];
		CHECK(fx_tokenize_prompt(m, p, true, ids, 512, &n) == FX_OK);
		if (im && n_im == 1 && all) {
			CHECKF(count_id(all, n_all, im[0]) == 4, "plain fx_tokenize: 4 <|im_start|>");
			CHECKF(count_id(ids, n, im[0]) == 3, "fx_tokenize_prompt: 3 <|im_start|> (not the user's)");
		}
		free(im);
		free(all);
	} else {
		CHECKF(0, "render: %s", err.msg);
	}
	fx_chat_prompt_free(p);
	fx_model_free(m);
}

static void write_text(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	CHECKF(f != NULL, "cannot write %s", path);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static const char *load_template(const char *dir, struct fx_model **m)
{
	struct fx_err err = { 0 };
	struct fx_model_params mp = fx_model_default_params();
	mp.repack = false;
	*m = NULL;
	if (fx_model_load(dir, &mp, m, &err)) {
		CHECKF(0, "load %s: %s", dir, err.msg);
		return NULL;
	}
	return fx_model_chat_template(*m);
}

/* Hugging Face directories: chat_template.jinja, else tokenizer_config.json
 * (a string, or the "default" entry of a list); none: NULL. */
static void hf_dir_template(void)
{
	char dir[] = "/tmp/fx_test_chat_XXXXXX", src[1024], dst[600];
	const char *files[] = { "config.json", "model.safetensors" };
	struct fx_model *m = NULL;
	const char *t;
	if (!mkdtemp(dir)) {
		CHECKF(0, "mkdtemp failed");
		return;
	}
	for (int i = 0; i < 2; i++) {
		char cwd[400];
		CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
		snprintf(src, sizeof(src), "%s/tests/fixtures/hf-tiny/llama/%s", cwd, files[i]);
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		CHECKF(symlink(src, dst) == 0, "symlink %s", dst);
	}
	t = load_template(dir, &m);
	CHECK(m && t == NULL);
	fx_model_free(m);
	write_text(dir, "tokenizer_config.json",
		   "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"},"
		   " {\"name\": \"default\", \"template\": \"{{ messages[0].content }}\"}]}");
	t = load_template(dir, &m);
	CHECKF(t && !strcmp(t, "{{ messages[0].content }}"), "got %s", t ? t : "NULL");
	fx_model_free(m);
	write_text(dir, "tokenizer_config.json", "{\"chat_template\": \"plain {{ 1 }}\"}");
	t = load_template(dir, &m);
	CHECKF(t && !strcmp(t, "plain {{ 1 }}"), "got %s", t ? t : "NULL");
	fx_model_free(m);
	write_text(dir, "chat_template.jinja", "jinja file\n");
	t = load_template(dir, &m);
	CHECKF(t && !strcmp(t, "jinja file\n"), "got %s", t ? t : "NULL");
	fx_model_free(m);
	const char *names[] = { "config.json", "model.safetensors", "tokenizer_config.json", "chat_template.jinja" };
	for (int i = 0; i < 4; i++) {
		snprintf(dst, sizeof(dst), "%s/%s", dir, names[i]);
		unlink(dst);
	}
	rmdir(dir);
}

int main(void)
{
	expect_cases();
	error_messages();
	provenance();
	tokenize_prompt_gemma();
	tokenize_prompt_smollm();
	hf_dir_template();
	return check_exit();
}
