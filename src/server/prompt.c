/* Prompts: a completion's prompt (text or token ids) and a chat request's
 * messages rendered through the model's template (fx_chat_render) and
 * tokenized so that only the template's scaffolding yields control tokens
 * (fx_tokenize_prompt). Runs on the HTTP threads: the model is read-only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server/tools.h"

static const char E_INV[] = "invalid_request_error";

/* Tokenize text into r->prompt. */
static bool tokenize_into(struct srv *s, struct srv_req *r, const char *text, bool add_special,
			  bool parse_special, struct srv_error *e)
{
	size_t len = strlen(text), n = 0;
	size_t cap = len + 8;
	r->prompt = malloc(cap * sizeof(fx_token));
	if (!r->prompt) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return false;
	}
	int rc = fx_tokenize(s->model, text, len, add_special, parse_special, r->prompt, cap, &n);
	if (rc == FX_E_NOMEM) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory tokenizing the prompt");
		return false;
	}
	if (rc) {
		srv_error_set(e, 400, E_INV, "prompt", "the prompt could not be tokenized");
		return false;
	}
	/* A text that starts with BOS gets no second one (llama-server keeps
	 * both and warns; a doubled BOS only changes what the model sees) */
	fx_token bos = fx_token_bos(s->model);
	if (add_special && fx_add_bos(s->model) && bos >= 0 && n >= 2 && r->prompt[0] == bos &&
	    r->prompt[1] == bos) {
		memmove(r->prompt, r->prompt + 1, (n - 1) * sizeof(fx_token));
		n--;
		fprintf(stderr, "serve: %s: the prompt already starts with BOS; not adding a second one\n", r->id);
	}
	r->n_prompt = (int32_t)n;
	return true;
}

bool srv_completion_prompt(struct srv *s, const cJSON *body, struct srv_req *r,
			      struct srv_error *e)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(body, "prompt");
	if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child))
		p = p->child;
	if (cJSON_IsString(p)) {
		if (r->g.echo && !(r->prompt_text = strdup(p->valuestring))) {
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			return false;
		}
		return tokenize_into(s, r, p->valuestring, true, true, e);
	}
	if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsArray(p->child))
		p = p->child;
	if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_IsNumber(p->child)) {
		int n = cJSON_GetArraySize(p);
		r->prompt = malloc((size_t)n * sizeof(fx_token));
		if (!r->prompt) {
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			return false;
		}
		const cJSON *it;
		cJSON_ArrayForEach(it, p)
		{
			if (!cJSON_IsNumber(it) || it->valuedouble < 0 ||
			    it->valuedouble >= s->n_vocab || it->valuedouble != (int32_t)it->valuedouble) {
				srv_error_set(e, 400, E_INV, "prompt",
					      "prompt token ids must be integers in [0, %d)", s->n_vocab);
				return false;
			}
			r->prompt[r->n_prompt++] = (fx_token)it->valuedouble;
		}
		return true;
	}
	if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 1) {
		srv_error_set(e, 400, E_INV, "prompt", "one prompt per request is supported");
		return false;
	}
	srv_error_set(e, 400, E_INV, "prompt",
		      "'prompt' must be a string or a list of token ids");
	return false;
}

/* A message list the template can read: content given as a list of text
 * parts becomes one string (parts joined by newlines); other content is
 * passed through. Returns a malloc'ed JSON text or NULL with e filled. */
static char *chat_messages(const cJSON *msgs, struct srv_error *e)
{
	cJSON *copy = cJSON_Duplicate(msgs, 1);
	cJSON *m;
	if (!copy) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return NULL;
	}
	cJSON_ArrayForEach(m, copy)
	{
		const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
		cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
		if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
			srv_error_set(e, 400, E_INV, "messages",
				      "each message must be an object with a string 'role'");
			goto fail;
		}
		if (!content || cJSON_IsString(content) || cJSON_IsNull(content))
			continue;
		if (!cJSON_IsArray(content)) {
			srv_error_set(e, 400, E_INV, "messages",
				      "message content must be a string, a list of parts or null");
			goto fail;
		}
		struct srv_buf b = { 0 };
		const cJSON *part;
		bool ok = true, oom = false;
		cJSON_ArrayForEach(part, content)
		{
			const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
			const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
			if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") ||
			    !cJSON_IsString(text)) {
				ok = false;
				break;
			}
			if ((b.n && !srv_buf_add(&b, "\n", 1)) ||
			    !srv_buf_add(&b, text->valuestring, strlen(text->valuestring))) {
				oom = true;
				break;
			}
		}
		if (oom) {
			srv_buf_free(&b);
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			goto fail;
		}
		if (!ok) {
			srv_buf_free(&b);
			srv_error_set(e, 400, E_INV, "messages",
				      "only text content parts ({\"type\": \"text\", \"text\": ...}) "
				      "are supported");
			goto fail;
		}
		cJSON *str = cJSON_CreateString(b.p ? b.p : "");
		srv_buf_free(&b);
		/* cJSON 1.7.15 replaces even when copying the key failed, leaving
		 * the item nameless (the template then saw no content) */
		bool put = str && cJSON_ReplaceItemInObjectCaseSensitive(m, "content", str);
		if (!put || !str->string) {
			if (!put)
				cJSON_Delete(str);
			srv_error_set(e, 500, "server_error", NULL, "out of memory");
			goto fail;
		}
	}
	if (!srvtool_fix_history(copy, e))
		goto fail;
	char *js = cJSON_PrintUnformatted(copy);
	cJSON_Delete(copy);
	if (!js)
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
	return js;
fail:
	cJSON_Delete(copy);
	return NULL;
}

static char *token_text(const struct fx_model *m, fx_token t, char *buf, size_t cap)
{
	size_t n = 0;
	if (t < 0 || fx_token_to_piece(m, t, true, buf, cap - 1, &n))
		return NULL;
	buf[n] = 0;
	return buf;
}

/* Render the model's chat template over the request's messages (tools and
 * chat_template_kwargs passed through) and tokenize it so that only the
 * template's own scaffolding can yield control tokens. */
bool srv_chat_prompt(struct srv *s, const cJSON *body, struct srv_req *r, struct srv_error *e)
{
	const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(body, "messages");
	const cJSON *tools = cJSON_GetObjectItemCaseSensitive(body, "tools");
	const cJSON *kw = cJSON_GetObjectItemCaseSensitive(body, "chat_template_kwargs");
	if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
		srv_error_set(e, 400, E_INV, "messages", "'messages' must be a non-empty list");
		return false;
	}
	if (kw && !cJSON_IsNull(kw) && !cJSON_IsObject(kw)) {
		srv_error_set(e, 400, E_INV, "chat_template_kwargs",
			      "'chat_template_kwargs' must be an object");
		return false;
	}
	const char *tmpl = s->p.chat_template ? s->p.chat_template : fx_model_chat_template(s->model);
	if (!tmpl) {
		srv_error_set(e, 400, E_INV, NULL,
			      "this model has no chat template (a base model?): start the server with "
			      "--chat-template NAME (a built-in: chatml, gemma, llama3, ...) or "
			      "--chat-template-file FILE, or use /v1/completions");
		return false;
	}
	if (!srvtool_req_parse(body, tmpl, s->p.reasoning_format, r->g.n, &r->tool, e))
		return false;
	char *mj = chat_messages(msgs, e);
	if (!mj)
		return false;
	char *tj = cJSON_IsArray(tools) ? cJSON_PrintUnformatted(tools) : NULL;
	char *kj = cJSON_IsObject(kw) ? cJSON_PrintUnformatted(kw) : NULL;
	if ((cJSON_IsArray(tools) && !tj) || (cJSON_IsObject(kw) && !kj)) {
		/* (a template rendered without the tools was once the result) */
		free(mj);
		free(tj);
		free(kj);
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return false;
	}
	char bos[128], eos[128];
	struct fx_chat_prompt *cp = NULL;
	struct fx_err err = { 0 };
	int rc = fx_chat_render(tmpl, mj, tj, kj, true,
				token_text(s->model, fx_token_bos(s->model), bos, sizeof(bos)),
				token_text(s->model, fx_token_eos(s->model), eos, sizeof(eos)), 0,
				&cp, &err);
	free(mj);
	free(tj);
	free(kj);
	if (rc) {
		srv_error_set(e, rc == FX_E_NOMEM ? 500 : 400,
			      rc == FX_E_NOMEM ? "server_error" : E_INV, "messages", "%s", err.msg);
		return false;
	}
	if (r->tool) {
		srvtool_prompt_opened(r->tool, cp->text, cp->len);
		r->detok_special = r->tool->o.fmt->special;
		if (!srvtool_install_grammar(r, e)) {
			fx_chat_prompt_free(cp);
			return false;
		}
	}
	size_t cap = cp->len + 8, n = 0;
	r->prompt = malloc(cap * sizeof(fx_token));
	if (!r->prompt || fx_tokenize_prompt(s->model, cp, true, r->prompt, cap, &n)) {
		fx_chat_prompt_free(cp);
		srv_error_set(e, 500, "server_error", NULL, "could not tokenize the rendered prompt");
		return false;
	}
	fx_chat_prompt_free(cp);
	/* a template that writes bos_token itself, with a tokenizer that adds one */
	fx_token b = fx_token_bos(s->model);
	if (n >= 2 && b >= 0 && r->prompt[0] == b && r->prompt[1] == b) {
		memmove(r->prompt, r->prompt + 1, (n - 1) * sizeof(fx_token));
		n--;
	}
	r->n_prompt = (int32_t)n;
	return true;
}

