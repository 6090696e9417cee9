/* fx_chat_render: the public entry of the chat-template interpreter
 * (include/ferrox.h, "chat templates"). Variables as transformers'
 * apply_chat_template passes them: messages, tools (None when absent),
 * documents (None), add_generation_prompt, bos_token, eos_token, then the
 * extra variables (chat_template_kwargs). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/ast.h"
#include "chat/eval.h"
#include "core/alloc.h"
#include "core/status.h"


static int parse_json_arg(const char *what, const char *json, int want, struct value *out, struct fx_err *err)
{
	char msg[256];
	int rc = json_parse(json, strlen(json), true, out, msg);
	if (rc)
		return fx_fail(err, rc, "%s: %s", what, msg);
	if (out->kind == V_NONE && want != V_LIST) { /* extra variables: null is none */
		*out = v_undef(NULL);
		return FX_OK;
	}
	if (out->kind == V_NONE && !strcmp(what, "tools")) /* tools: null is None */
		return FX_OK;
	if (out->kind != want) {
		v_drop(out);
		return fx_fail(err, FX_E_INVALID, "%s: expected a JSON %s", what, want == V_LIST ? "array" : "object");
	}
	return FX_OK;
}

static int make_prompt(struct sbuf *o, struct fx_chat_prompt **out, struct fx_err *err)
{
	struct fx_chat_prompt *p = fx_calloc(1, sizeof(*p));
	size_t ns = 0;
	if (!p)
		return fx_fail(err, FX_E_NOMEM, "out of memory");
	for (size_t i = 0; i < o->n; i++)
		if (o->f[i] && (i == 0 || !o->f[i - 1]))
			ns++;
	if ((ns && !(p->data = fx_calloc(ns, sizeof(*p->data)))) || !(p->text = fx_malloc_array(o->n + 1, 1))) {
		fx_chat_prompt_free(p);
		return fx_fail(err, FX_E_NOMEM, "out of memory");
	}
	if (o->n)
		memcpy(p->text, o->p, o->n);
	p->text[o->n] = 0;
	p->len = o->n;
	for (size_t i = 0; i < o->n; i++) {
		if (!o->f[i])
			continue;
		if (i == 0 || !o->f[i - 1])
			p->data[p->n_data++] = (struct fx_chat_span){ i, 0 };
		p->data[p->n_data - 1].len++;
	}
	*out = p;
	return FX_OK;
}

static int set_str(struct frame *f, const char *name, const char *s, struct fx_err *err)
{
	struct value v;
	if (!s)
		return FX_OK;
	if (!v_str(s, strlen(s), NULL, &v) || frame_set(f, name, v))
		return fx_fail(err, FX_E_NOMEM, "out of memory");
	return FX_OK;
}

int fx_chat_render(const char *tmpl, const char *messages_json, const char *tools_json,
		   const char *extra_json, bool add_generation_prompt, const char *bos_token,
		   const char *eos_token, int64_t now, struct fx_chat_prompt **out, struct fx_err *err)
{
	struct tokens tk = { 0 };
	struct tmpl t = { 0 };
	struct frame ctx = { 0 }, root = { .parent = &ctx };
	struct sbuf o = { 0 };
	struct value msgs, tools = v_none(), extra = v_undef(NULL);
	int rc;

	if (!tmpl || !messages_json || !out)
		return fx_fail(err, FX_E_INVALID, "fx_chat_render: tmpl, messages_json and out are required");
	*out = NULL;
	if ((rc = parse_json_arg("messages", messages_json, V_LIST, &msgs, err)))
		return rc;
	if (tools_json && (rc = parse_json_arg("tools", tools_json, V_LIST, &tools, err)))
		goto out_msgs;
	if (extra_json && (rc = parse_json_arg("extra variables", extra_json, V_DICT, &extra, err)))
		goto out_tools;
	if ((rc = chat_lex(tmpl, strlen(tmpl), &tk, err)) || (rc = chat_parse(&tk, &t, err))) {
		chat_tokens_free(&tk);
		if (rc != FX_E_NOMEM)
			fx_err_prefix(err, "chat template");
		goto out_extra;
	}
	chat_tokens_free(&tk);
	if ((rc = chat_scopes(&t, err)))
		goto out_root;
	if (frame_set(&ctx, "messages", v_ref(msgs)) || frame_set(&ctx, "tools", v_ref(tools)) ||
	    frame_set(&ctx, "documents", v_none()) ||
	    frame_set(&ctx, "add_generation_prompt", v_bool(add_generation_prompt))) {
		rc = fx_fail(err, FX_E_NOMEM, "out of memory");
		goto out_root;
	}
	if ((rc = set_str(&ctx, "bos_token", bos_token, err)) || (rc = set_str(&ctx, "eos_token", eos_token, err)))
		goto out_root;
	if (extra.kind == V_DICT)
		for (size_t i = 0; i < extra.d->n; i++) {
			if (extra.d->k[i].kind != V_STR)
				continue;
			if (frame_set(&ctx, extra.d->k[i].s->p, v_ref(extra.d->v[i]))) {
				rc = fx_fail(err, FX_E_NOMEM, "out of memory");
				goto out_root;
			}
		}
	struct ev e = { .err = err, .ctx = &ctx, .root = &root, .now = now ? now : (int64_t)time(NULL) };
	rc = chat_exec(&e, &t, &o);
	if (!rc && o.oom)
		rc = fx_fail(err, FX_E_NOMEM, "out of memory rendering the template");
	if (!rc)
		rc = make_prompt(&o, out, err);
	else if (rc != FX_E_NOMEM)
		fx_err_prefix(err, "chat template");
out_root:
	sb_free(&o);
	frame_free(&root);
	frame_free(&ctx);
	chat_tmpl_free(&t);
out_extra:
	v_drop(&extra);
out_tools:
	v_drop(&tools);
out_msgs:
	v_drop(&msgs);
	return rc;
}

void fx_chat_prompt_free(struct fx_chat_prompt *p)
{
	if (!p)
		return;
	fx_free(p->text);
	fx_free(p->data);
	fx_free(p);
}
