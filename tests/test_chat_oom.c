/* Chat templates under allocation failure: fx_chat_render with the k-th
 * heap call failing, for every k until a render needs no more calls.
 * Each must return FX_E_NOMEM (or succeed, when the failed call was one
 * the library can do without) and leak nothing (the ASan build checks
 * leaks). malloc/calloc/realloc are wrapped by the linker (tests.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"


static const char *const tmpl =
	"{%- set ns = namespace(n=0, items=[]) -%}\n"
	"{%- macro show(m, sep=': ') -%}{{ m.role|upper ~ sep ~ m.content|trim }}{%- endmacro -%}\n"
	"{{ bos_token }}{% for m in messages if m.role != 'tool' %}\n"
	"{%- set ns.n = ns.n + 1 -%}\n"
	"{%- set ns.items = ns.items + [m.role] -%}\n"
	"<{{ loop.index }}/{{ loop.length }}>{{ show(m) }}{% if not loop.last %}|{% endif %}\n"
	"{%- endfor %}\n"
	"{% if tools %}{{ tools|tojson(indent=2) }}{{ tools|map(attribute='function.name')|join(',') }}{% endif %}\n"
	"{{ ns.items|unique|list|tojson }} {{ '%s-%d' % ('x', ns.n) }} {{ '{}'.format(ns.n) }}\n"
	"{% set blk %}{% filter upper %}{{ messages[0].content.split(' ')|join('_') }}{% endfilter %}{% endset %}"
	"{{ blk[::-1] }}{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
	"{% macro wrap(t) %}[{{ caller(t) }}]{% endmacro %}{% call(v) wrap('w') %}{{ v * 2 }}{% endcall %}"
	"{% with q = messages|length %}{{ q }}{{ messages[1].content|title|replace(' ', '') }}{% endwith %}"
	"{{ messages[2].tool_calls[0].function.arguments|dictsort }}{{ 'ΣΑΣ'|lower }}"
	"{% if add_generation_prompt %}<assistant>{% endif %}";

static const char *const msgs =
	"[{\"role\":\"system\",\"content\":\" Be brief. \"},{\"role\":\"user\",\"content\":\"héllo <|x|> wörld\"},"
	"{\"role\":\"assistant\",\"content\":\"hi\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5]}}}]},"
	"{\"role\":\"tool\",\"content\":\"42\"}]";

static const char *const tools =
	"[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{}}}]";

/* Fail every heap call of one render in turn. */
static void oom_loop(const char *name, const char *tmpl)
{
	struct fx_err err = { 0 };
	struct fx_chat_prompt *ref = NULL;
	int rc = fx_chat_render(tmpl, msgs, tools, "{\"x\": 1}", true, "<s>", "</s>", 1, &ref, &err);
	CHECKF(rc == FX_OK, "%s: reference render: %s", name, err.msg);
	if (rc)
		return;
	long k, n_ok = 0, n_nomem = 0;
	for (k = 0;; k++) {
		struct fx_chat_prompt *p = NULL;
		calls = 0;
		fail_at = k;
		rc = fx_chat_render(tmpl, msgs, tools, "{\"x\": 1}", true, "<s>", "</s>", 1, &p, &err);
		bool reached = calls > k;
		fail_at = -1;
		if (rc == FX_OK) {
			n_ok++;
			CHECKF(p->len == ref->len && !memcmp(p->text, ref->text, p->len),
			       "%s: failing call %ld: a different prompt", name, k);
		} else {
			n_nomem++;
			CHECKF(rc == FX_E_NOMEM, "%s: failing call %ld: rc %d (%s), want FX_E_NOMEM", name, k, rc, err.msg);
			CHECKF(p == NULL, "%s: failing call %ld: *out set on failure", name, k);
		}
		fx_chat_prompt_free(p);
		if (!reached)
			break; /* the render made fewer than k + 1 calls: every one has failed once */
	}
	printf("%s: %ld heap calls per render: %ld renders failed with FX_E_NOMEM, %ld succeeded\n", name, k,
	       n_nomem, n_ok);
	CHECK(k > 50 && n_nomem > 0);
	fx_chat_prompt_free(ref);
}

int main(void)
{
	oom_loop("test template", tmpl);
	/* real templates too, when the shared ones are there */
	static const char *const real[] = { "Qwen-Qwen3-0.6B.jinja", "openai-gpt-oss-120b.jinja",
					    "meta-llama-Llama-3.1-8B-Instruct.jinja" };
	for (size_t i = 0; i < sizeof(real) / sizeof(real[0]); i++) {
		char path[256];
		snprintf(path, sizeof(path), "../shared/templates/%s", real[i]);
		FILE *f = fopen(path, "rb");
		if (!f) {
			fprintf(stderr, "note: %s absent; skipped\n", path);
			continue;
		}
		fclose(f);
		size_t n = 0;
		char *buf = check_read_file(path, &n);
		char *t = buf ? calloc(n + 1, 1) : NULL;
		if (t) {
			memcpy(t, buf, n);
			oom_loop(real[i], t);
		}
		free(t);
		free(buf);
	}
	return check_exit();
}
