/* Response bodies in OpenAI's shapes: completion and chat completion
 * objects, their streamed chunks (Server-Sent Events: "data: JSON\n\n",
 * ending with "data: [DONE]\n\n"), logprobs and errors. Field names follow
 * the OpenAI API reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "server/tools.h"

/* s[0..n) as a JSON string value: invalid UTF-8 bytes become U+FFFD (a
 * token may be part of a character). */
static cJSON *str_n(const char *s, size_t n)
{
	struct srv_buf b = { 0 };
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && (unsigned char)s[j] < 0x80)
			j++;
		if (j > i && !srv_buf_add(&b, s + i, j - i))
			goto fail;
		i = j;
		if (i >= n)
			break;
		size_t len = 1;
		unsigned char c = (unsigned char)s[i];
		len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
		if (len > 1 && i + len <= n && srv_utf8_valid(s + i, len)) {
			if (!srv_buf_add(&b, s + i, len))
				goto fail;
			i += len;
		} else {
			if (!srv_buf_add(&b, "\xef\xbf\xbd", 3))
				goto fail;
			i++;
		}
	}
	cJSON *v = cJSON_CreateString(b.p ? b.p : "");
	srv_buf_free(&b);
	return v;
fail:
	srv_buf_free(&b);
	return NULL;
}

cJSON *srv_json_text(const char *s, size_t n)
{
	return str_n(s, n);
}

/* Add v to `to` (an object when key is set, else an array); on any failure
 * (v or `to` NULL from an earlier failed allocation, or the add itself)
 * v is freed and *ok cleared, so a body is whole or refused, never
 * missing a field. Returns v when added, else NULL. */
static cJSON *put(bool *ok, cJSON *to, const char *key, cJSON *v)
{
	bool added = to && v && (key ? cJSON_AddItemToObject(to, key, v) : cJSON_AddItemToArray(to, v));
	if (!added) {
		cJSON_Delete(v);
		*ok = false;
		return NULL;
	}
	return v;
}

static cJSON *piece_bytes(const char *s, size_t n, bool *ok)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < n; i++)
		put(ok, a, NULL, cJSON_CreateNumber((unsigned char)s[i]));
	return a;
}

static cJSON *tok_obj(const struct srv *s, fx_token t, double lp, bool with_bytes, bool *ok)
{
	char buf[256];
	size_t n = 0;
	if (fx_token_to_piece(s->model, t, true, buf, sizeof(buf), &n))
		n = 0;
	cJSON *o = cJSON_CreateObject();
	put(ok, o, "token", str_n(buf, n));
	put(ok, o, "logprob", cJSON_CreateNumber(isfinite(lp) ? lp : -9999.0));
	if (with_bytes)
		put(ok, o, "bytes", piece_bytes(buf, n, ok));
	return o;
}

cJSON *srv_logprob_entry(const struct srv *s, const struct srv_req *r, const float *lg, fx_token t)
{
	int32_t nv = s->n_vocab;
	float mx = -INFINITY;
	for (int32_t i = 0; i < nv; i++)
		mx = lg[i] > mx ? lg[i] : mx;
	double sum = 0;
	for (int32_t i = 0; i < nv; i++)
		sum += exp((double)lg[i] - mx);
	double lse = mx + log(sum);
	bool ok = true;
	cJSON *e = tok_obj(s, t, lg[t] - lse, true, &ok);
	int k = r->g.top_logprobs;
	fx_token top[SRV_MAX_TOP_LOGPROBS];
	int nt = 0;
	for (int32_t i = 0; i < nv && k > 0; i++) {
		if (nt == k && !(lg[i] > lg[top[nt - 1]]))
			continue;
		int j = nt < k ? nt++ : k - 1;
		while (j > 0 && lg[top[j - 1]] < lg[i]) {
			top[j] = top[j - 1];
			j--;
		}
		top[j] = i;
	}
	cJSON *a = put(&ok, e, "top_logprobs", cJSON_CreateArray());
	for (int i = 0; a && i < nt; i++)
		put(&ok, a, NULL, tok_obj(s, top[i], lg[top[i]] - lse, true, &ok));
	if (!ok) {
		cJSON_Delete(e);
		return NULL;
	}
	return e;
}

/* Legacy completions logprobs from chat-style entries. */
static cJSON *legacy_logprobs(const cJSON *entries, size_t base_off, bool *ok)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *toks = put(ok, o, "tokens", cJSON_CreateArray());
	cJSON *lps = put(ok, o, "token_logprobs", cJSON_CreateArray());
	cJSON *tops = put(ok, o, "top_logprobs", cJSON_CreateArray());
	cJSON *offs = put(ok, o, "text_offset", cJSON_CreateArray());
	size_t off = base_off;
	const cJSON *e;
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *tk = cJSON_GetObjectItem(e, "token");
		put(ok, toks, NULL, cJSON_Duplicate(tk, 0));
		put(ok, lps, NULL, cJSON_Duplicate(cJSON_GetObjectItem(e, "logprob"), 0));
		cJSON *m = put(ok, tops, NULL, cJSON_CreateObject());
		const cJSON *t;
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "top_logprobs"))
		{
			const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(t, "token"));
			if (key && m && !cJSON_GetObjectItemCaseSensitive(m, key))
				put(ok, m, key,
				    cJSON_CreateNumber(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "logprob"))));
		}
		put(ok, offs, NULL, cJSON_CreateNumber((double)off));
		off += cJSON_GetArraySize(cJSON_GetObjectItem(e, "bytes"));
	}
	return o;
}

static cJSON *logprobs_obj(const struct srv_req *r, const cJSON *entries, size_t base_off, bool *ok)
{
	if (!r->g.logprobs || !entries)
		return cJSON_CreateNull();
	if (r->kind == SRV_COMPLETION)
		return legacy_logprobs(entries, base_off, ok);
	cJSON *o = cJSON_CreateObject();
	put(ok, o, "content", cJSON_Duplicate(entries, 1));
	return o;
}

static cJSON *usage_obj(const struct srv_req *r, bool *ok)
{
	int64_t gen = 0;
	for (int i = 0; i < r->g.n; i++)
		gen += r->ch[i].n_gen;
	cJSON *u = cJSON_CreateObject();
	put(ok, u, "prompt_tokens", cJSON_CreateNumber(r->n_prompt));
	put(ok, u, "completion_tokens", cJSON_CreateNumber((double)gen));
	put(ok, u, "total_tokens", cJSON_CreateNumber((double)(gen + r->n_prompt)));
	return u;
}

/* llama-server's timings, their counts: prompt_n, predicted_n, and draft_n
 * / draft_n_accepted when something was drafted (over the choices). */
static cJSON *timings_obj(const struct srv_req *r, bool *ok)
{
	int64_t gen = 0, dn = 0, da = 0;
	for (int i = 0; i < r->g.n; i++) {
		gen += r->ch[i].n_gen;
		dn += r->ch[i].draft_n;
		da += r->ch[i].draft_n_accepted;
	}
	cJSON *t = cJSON_CreateObject();
	put(ok, t, "prompt_n", cJSON_CreateNumber(r->n_prompt));
	put(ok, t, "predicted_n", cJSON_CreateNumber((double)gen));
	if (dn) {
		put(ok, t, "draft_n", cJSON_CreateNumber((double)dn));
		put(ok, t, "draft_n_accepted", cJSON_CreateNumber((double)da));
	}
	return t;
}

static cJSON *envelope(const struct srv_req *r, bool chunk, bool *ok)
{
	cJSON *o = cJSON_CreateObject();
	put(ok, o, "id", cJSON_CreateString(r->id));
	put(ok, o, "object",
	    cJSON_CreateString(r->kind == SRV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
						   : "text_completion"));
	put(ok, o, "created", cJSON_CreateNumber((double)r->created));
	put(ok, o, "model", cJSON_CreateString(r->model_name));
	put(ok, o, "system_fingerprint", cJSON_CreateString("ferrox"));
	if (!o)
		*ok = false;
	return o;
}

/* o printed, or NULL when it is incomplete (!ok) or cannot be; frees o. */
char *srv_json_take(cJSON *o, bool ok)
{
	char *js = ok && o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	return js;
}

static const char *finish_name(const char *f)
{
	return f && !strcmp(f, "length") ? "length" : "stop";
}

/* id_base of choice c's call ids (srvtool_call_id). */
static void call_id_base(const struct srv_req *r, const struct srv_choice *c, char out[64])
{
	snprintf(out, 64, "%s/%d", r->id, c->index);
}

/* A chat message (or stream delta) from the reply's parse: content (null
 * when the reply is only calls), reasoning_content, tool_calls. */
static bool message_fields(const struct srv_req *r, const struct srv_choice *c, cJSON *msg,
			   int *n_calls)
{
	struct srvtool_msg m = { 0 };
	char base[64];
	call_id_base(r, c, base);
	bool ok = srvtool_parse(&r->tool->o, c->text.p, c->text.n, false, &m);
	*n_calls = m.n_calls;
	if (ok && m.content.n)
		put(&ok, msg, "content", str_n(m.content.p, m.content.n));
	else if (ok)
		ok = m.n_calls ? cJSON_AddNullToObject(msg, "content") != NULL
			       : cJSON_AddStringToObject(msg, "content", "") != NULL;
	if (ok && m.reasoning.n)
		put(&ok, msg, "reasoning_content", str_n(m.reasoning.p, m.reasoning.n));
	cJSON *tcs = ok && m.n_calls ? cJSON_AddArrayToObject(msg, "tool_calls") : NULL;
	for (int i = 0; tcs && i < m.n_calls; i++) {
		char id[64];
		srvtool_call_id(&m, i, base, id);
		cJSON *tc = cJSON_CreateObject();
		cJSON *fn = tc ? cJSON_AddObjectToObject(tc, "function") : NULL;
		ok = fn && cJSON_AddItemToArray(tcs, tc) && cJSON_AddStringToObject(tc, "id", id) &&
		     cJSON_AddStringToObject(tc, "type", "function") &&
		     cJSON_AddStringToObject(fn, "name", m.calls[i].name) &&
		     cJSON_AddStringToObject(fn, "arguments", m.calls[i].args.p ? m.calls[i].args.p : "");
		if (!ok) {
			if (!fn)
				cJSON_Delete(tc);
			break;
		}
	}
	srvtool_msg_free(&m);
	return ok;
}

/* OpenAI's finish reason "tool_calls" when the model stopped after calls. */
static const char *chat_finish(const char *f, int n_calls)
{
	const char *name = finish_name(f);
	return n_calls && !strcmp(name, "stop") ? "tool_calls" : name;
}

/* Choice c of a finished request, as its final body shows it. */
static cJSON *final_choice(const struct srv_req *r, const struct srv_choice *c, bool *ok)
{
	cJSON *ch = cJSON_CreateObject();
	put(ok, ch, "index", cJSON_CreateNumber(c->index));
	const char *text = c->text.p ? c->text.p : "";
	size_t base = 0;
	if (r->kind == SRV_CHAT) {
		cJSON *msg = put(ok, ch, "message", cJSON_CreateObject());
		put(ok, msg, "role", cJSON_CreateString("assistant"));
		int nc = 0;
		if (r->tool) {
			if (msg && !message_fields(r, c, msg, &nc))
				*ok = false;
		} else {
			put(ok, msg, "content", str_n(text, c->text.n));
		}
		put(ok, ch, "logprobs", logprobs_obj(r, c->lp_all, base, ok));
		put(ok, ch, "finish_reason",
		    cJSON_CreateString(r->tool ? chat_finish(c->finish, nc) : finish_name(c->finish)));
		return ch;
	}
	if (r->g.echo && r->prompt_text) {
		struct srv_buf b = { 0 };
		if (!srv_buf_add(&b, r->prompt_text, strlen(r->prompt_text)) ||
		    !srv_buf_add(&b, text, c->text.n))
			*ok = false;
		base = strlen(r->prompt_text);
		put(ok, ch, "text", *ok ? str_n(b.p, b.n) : NULL);
		srv_buf_free(&b);
	} else {
		put(ok, ch, "text", str_n(text, c->text.n));
	}
	put(ok, ch, "logprobs", logprobs_obj(r, c->lp_all, base, ok));
	put(ok, ch, "finish_reason", cJSON_CreateString(finish_name(c->finish)));
	return ch;
}

char *srv_final_json(const struct srv *s, const struct srv_req *r)
{
	(void)s;
	bool ok = true;
	cJSON *o = envelope(r, false, &ok);
	cJSON *chs = put(&ok, o, "choices", cJSON_CreateArray());
	for (int i = 0; ok && i < r->g.n; i++)
		put(&ok, chs, NULL, final_choice(r, &r->ch[i], &ok));
	put(&ok, o, "usage", usage_obj(r, &ok));
	put(&ok, o, "timings", timings_obj(r, &ok));
	return srv_json_take(o, ok);
}

bool srv_sse_event(struct srv_buf *out, cJSON *o, bool ok)
{
	char *js = srv_json_take(o, ok);
	if (!js)
		return false;
	size_t n0 = out->n;
	ok = srv_buf_add(out, "data: ", 6) && srv_buf_add(out, js, strlen(js)) &&
	     srv_buf_add(out, "\n\n", 2);
	if (!ok && out->p) /* no half event */
		out->p[out->n = n0] = 0;
	free(js);
	return ok;
}

/* The delta of a chat stream with tools: what the parse of the text so far
 * has beyond what was sent. *skip: nothing new, no event. */
static bool tool_delta(const struct srv_req *r, const struct srv_choice *c, const char *text,
		       size_t n, bool first, cJSON *d, int *n_calls, bool *skip)
{
	bool ok = true;
	if (first)
		put(&ok, d, "role", cJSON_CreateString("assistant"));
	size_t upto = c->text.p && text >= c->text.p ? (size_t)(text - c->text.p) + n : 0;
	struct srvtool_msg m = { 0 };
	char base[64];
	call_id_base(r, c, base);
	ok = ok && srvtool_parse(&r->tool->o, c->text.p, upto, c->finish == NULL, &m) &&
	     srvtool_delta(&m, base, &r->tool->sent[c->index], d);
	*n_calls = m.n_calls;
	srvtool_msg_free(&m);
	if (!ok)
		return false;
	if (first && !cJSON_GetObjectItemCaseSensitive(d, "content") &&
	    !cJSON_GetObjectItemCaseSensitive(d, "tool_calls"))
		put(&ok, d, "content", cJSON_CreateString(""));
	*skip = !c->finish && cJSON_GetArraySize(d) == 0 && !(c->lp && cJSON_GetArraySize(c->lp));
	return ok;
}

bool srv_sse_chunk(const struct srv_req *r, const struct srv_choice *c, const char *text,
		   size_t n, bool first, struct srv_buf *out)
{
	if (r->native)
		return srv_native_sse(r, c, text, n, out);
	bool ok = true, skip = false;
	cJSON *o = envelope(r, true, &ok);
	cJSON *chs = put(&ok, o, "choices", cJSON_CreateArray());
	cJSON *ch = put(&ok, chs, NULL, cJSON_CreateObject());
	put(&ok, ch, "index", cJSON_CreateNumber(c->index));
	int n_calls = 0;
	if (r->kind == SRV_CHAT) {
		cJSON *d = put(&ok, ch, "delta", cJSON_CreateObject());
		if (ok && r->tool) {
			ok = tool_delta(r, c, text, n, first, d, &n_calls, &skip);
		} else if (ok) {
			if (first)
				put(&ok, d, "role", cJSON_CreateString("assistant"));
			if (n || first)
				put(&ok, d, "content", str_n(text, n));
		}
	} else {
		put(&ok, ch, "text", str_n(text, n));
	}
	if (skip) {
		cJSON_Delete(o);
		return true; /* nothing new: no event */
	}
	put(&ok, ch, "logprobs",
	    c->lp && cJSON_GetArraySize(c->lp) ? logprobs_obj(r, c->lp, c->n_sent, &ok)
					       : cJSON_CreateNull());
	if (c->finish)
		put(&ok, ch, "finish_reason",
		    cJSON_CreateString(r->kind == SRV_CHAT ? chat_finish(c->finish, n_calls)
							   : finish_name(c->finish)));
	else
		put(&ok, ch, "finish_reason", cJSON_CreateNull());
	/* llama-server: timings on the stream's last chunk (the usage chunk
	 * when there is one, srv_sse_end) */
	if (c->finish && !r->g.include_usage && r->n_done == r->g.n - 1)
		put(&ok, o, "timings", timings_obj(r, &ok));
	return srv_sse_event(out, o, ok);
}

bool srv_sse_end(const struct srv_req *r, struct srv_buf *out)
{
	if (r->failed) {
		struct srv_error e = { .status = 500, .type = "server_error" };
		snprintf(e.msg, sizeof(e.msg),
			 "the engine could not finish this request (see the server log)");
		char *js = srv_error_json(&e);
		bool ok = js && srv_buf_add(out, "data: ", 6) && srv_buf_add(out, js, strlen(js)) &&
			  srv_buf_add(out, "\n\n", 2);
		free(js);
		if (!ok)
			return false;
	}
	if (r->native)
		return true; /* llama-server ends its own stream without [DONE] */
	if (r->g.include_usage) {
		bool ok = true;
		cJSON *o = envelope(r, true, &ok);
		put(&ok, o, "choices", cJSON_CreateArray());
		put(&ok, o, "usage", usage_obj(r, &ok));
		put(&ok, o, "timings", timings_obj(r, &ok));
		if (!srv_sse_event(out, o, ok))
			return false;
	}
	return srv_buf_add(out, "data: [DONE]\n\n", 14);
}

char *srv_error_json(const struct srv_error *e)
{
	bool ok = true;
	cJSON *o = cJSON_CreateObject();
	cJSON *err = put(&ok, o, "error", cJSON_CreateObject());
	put(&ok, err, "message", str_n(e->msg, strlen(e->msg)));
	put(&ok, err, "type", cJSON_CreateString(e->type ? e->type : "invalid_request_error"));
	put(&ok, err, "param", e->param ? cJSON_CreateString(e->param) : cJSON_CreateNull());
	put(&ok, err, "code", cJSON_CreateNumber(e->status));
	return srv_json_take(o, ok);
}

char *srv_models_json(const struct srv *s)
{
	bool ok = true;
	cJSON *o = cJSON_CreateObject();
	put(&ok, o, "object", cJSON_CreateString("list"));
	cJSON *d = put(&ok, o, "data", cJSON_CreateArray());
	cJSON *m = put(&ok, d, NULL, cJSON_CreateObject());
	put(&ok, m, "id", cJSON_CreateString(s->model_name));
	put(&ok, m, "object", cJSON_CreateString("model"));
	put(&ok, m, "created", cJSON_CreateNumber(0));
	put(&ok, m, "owned_by", cJSON_CreateString("ferrox"));
	cJSON *meta = put(&ok, m, "meta", cJSON_CreateObject());
	put(&ok, meta, "n_vocab", cJSON_CreateNumber(s->n_vocab));
	put(&ok, meta, "n_ctx_train", cJSON_CreateNumber(fx_model_n_ctx_train(s->model)));
	put(&ok, meta, "n_ctx", cJSON_CreateNumber(s->n_ctx_seq));
	put(&ok, meta, "arch", cJSON_CreateString(fx_model_arch_name(s->model)));
	return srv_json_take(o, ok);
}

char *srv_tokenize_json(const struct srv *s, const fx_token *t, size_t n, bool pieces)
{
	bool ok = true;
	cJSON *o = cJSON_CreateObject();
	cJSON *a = put(&ok, o, "tokens", cJSON_CreateArray());
	for (size_t i = 0; ok && i < n; i++) {
		if (!pieces) {
			put(&ok, a, NULL, cJSON_CreateNumber(t[i]));
			continue;
		}
		char buf[256];
		size_t pn = 0;
		if (fx_token_to_piece(s->model, t[i], true, buf, sizeof(buf) - 1, &pn))
			pn = 0;
		buf[pn] = 0;
		cJSON *p = put(&ok, a, NULL, cJSON_CreateObject());
		put(&ok, p, "id", cJSON_CreateNumber(t[i]));
		/* a piece that is no valid UTF-8 goes as its bytes (llama.cpp) */
		put(&ok, p, "piece", srv_utf8_valid(buf, pn) ? cJSON_CreateString(buf) : piece_bytes(buf, pn, &ok));
	}
	return srv_json_take(o, ok);
}
