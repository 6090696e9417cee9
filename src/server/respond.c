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

static cJSON *piece_bytes(const char *s, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)s[i]));
	return a;
}

static cJSON *tok_obj(const struct srv *s, fx_token t, double lp, bool with_bytes)
{
	char buf[256];
	size_t n = 0;
	if (fx_token_to_piece(s->model, t, true, buf, sizeof(buf), &n))
		n = 0;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddItemToObject(o, "token", str_n(buf, n));
	cJSON_AddNumberToObject(o, "logprob", isfinite(lp) ? lp : -9999.0);
	if (with_bytes)
		cJSON_AddItemToObject(o, "bytes", piece_bytes(buf, n));
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
	cJSON *e = tok_obj(s, t, lg[t] - lse, true);
	if (!e)
		return NULL;
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
	cJSON *a = cJSON_AddArrayToObject(e, "top_logprobs");
	for (int i = 0; a && i < nt; i++)
		cJSON_AddItemToArray(a, tok_obj(s, top[i], lg[top[i]] - lse, true));
	return e;
}

/* Legacy completions logprobs from chat-style entries. */
static cJSON *legacy_logprobs(const cJSON *entries, size_t base_off)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *toks = cJSON_AddArrayToObject(o, "tokens");
	cJSON *lps = cJSON_AddArrayToObject(o, "token_logprobs");
	cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs");
	cJSON *offs = cJSON_AddArrayToObject(o, "text_offset");
	size_t off = base_off;
	const cJSON *e;
	cJSON_ArrayForEach(e, entries)
	{
		const cJSON *tk = cJSON_GetObjectItem(e, "token");
		cJSON_AddItemToArray(toks, cJSON_Duplicate(tk, 0));
		cJSON_AddItemToArray(lps, cJSON_Duplicate(cJSON_GetObjectItem(e, "logprob"), 0));
		cJSON *m = cJSON_CreateObject();
		const cJSON *t;
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "top_logprobs"))
		{
			const char *key = cJSON_GetStringValue(cJSON_GetObjectItem(t, "token"));
			if (key && !cJSON_GetObjectItemCaseSensitive(m, key))
				cJSON_AddNumberToObject(
					m, key, cJSON_GetNumberValue(cJSON_GetObjectItem(t, "logprob")));
		}
		cJSON_AddItemToArray(tops, m);
		cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
		off += cJSON_GetArraySize(cJSON_GetObjectItem(e, "bytes"));
	}
	return o;
}

static cJSON *logprobs_obj(const struct srv_req *r, const cJSON *entries, size_t base_off)
{
	if (!r->g.logprobs || !entries)
		return cJSON_CreateNull();
	if (r->kind == SRV_COMPLETION)
		return legacy_logprobs(entries, base_off);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddItemToObject(o, "content", cJSON_Duplicate(entries, 1));
	return o;
}

static cJSON *usage_obj(const struct srv_req *r)
{
	int64_t gen = 0;
	for (int i = 0; i < r->g.n; i++)
		gen += r->ch[i].n_gen;
	cJSON *u = cJSON_CreateObject();
	cJSON_AddNumberToObject(u, "prompt_tokens", r->n_prompt);
	cJSON_AddNumberToObject(u, "completion_tokens", (double)gen);
	cJSON_AddNumberToObject(u, "total_tokens", (double)(gen + r->n_prompt));
	return u;
}

static cJSON *envelope(const struct srv_req *r, bool chunk)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "id", r->id);
	cJSON_AddStringToObject(o, "object",
				r->kind == SRV_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
						    : "text_completion");
	cJSON_AddNumberToObject(o, "created", (double)r->created);
	cJSON_AddStringToObject(o, "model", r->model_name);
	cJSON_AddStringToObject(o, "system_fingerprint", "ferrox");
	return o;
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
		ok = cJSON_AddItemToObject(msg, "content", str_n(m.content.p, m.content.n));
	else if (ok)
		ok = m.n_calls ? cJSON_AddNullToObject(msg, "content") != NULL
			       : cJSON_AddStringToObject(msg, "content", "") != NULL;
	if (ok && m.reasoning.n)
		ok = cJSON_AddItemToObject(msg, "reasoning_content", str_n(m.reasoning.p, m.reasoning.n));
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

char *srv_final_json(const struct srv *s, const struct srv_req *r)
{
	(void)s;
	cJSON *o = envelope(r, false);
	if (!o)
		return NULL;
	cJSON *chs = cJSON_AddArrayToObject(o, "choices");
	for (int i = 0; chs && i < r->g.n; i++) {
		const struct srv_choice *c = &r->ch[i];
		cJSON *ch = cJSON_CreateObject();
		cJSON_AddNumberToObject(ch, "index", i);
		size_t base = 0;
		if (r->kind == SRV_CHAT) {
			cJSON *msg = cJSON_AddObjectToObject(ch, "message");
			cJSON_AddStringToObject(msg, "role", "assistant");
			if (r->tool) {
				int nc = 0;
				if (!message_fields(r, c, msg, &nc)) {
					cJSON_Delete(o);
					return NULL;
				}
				cJSON_AddItemToObject(ch, "logprobs", logprobs_obj(r, c->lp_all, base));
				cJSON_AddStringToObject(ch, "finish_reason", chat_finish(c->finish, nc));
				cJSON_AddItemToArray(chs, ch);
				continue;
			}
			cJSON_AddItemToObject(msg, "content", str_n(c->text.p ? c->text.p : "", c->text.n));
		} else if (r->g.echo && r->prompt_text) {
			struct srv_buf b = { 0 };
			srv_buf_add(&b, r->prompt_text, strlen(r->prompt_text));
			srv_buf_add(&b, c->text.p ? c->text.p : "", c->text.n);
			base = strlen(r->prompt_text);
			cJSON_AddItemToObject(ch, "text", str_n(b.p ? b.p : "", b.n));
			srv_buf_free(&b);
		} else {
			cJSON_AddItemToObject(ch, "text", str_n(c->text.p ? c->text.p : "", c->text.n));
		}
		cJSON_AddItemToObject(ch, "logprobs", logprobs_obj(r, c->lp_all, base));
		cJSON_AddStringToObject(ch, "finish_reason", finish_name(c->finish));
		cJSON_AddItemToArray(chs, ch);
	}
	cJSON_AddItemToObject(o, "usage", usage_obj(r));
	char *out = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return out;
}

static bool sse_add(struct srv_buf *out, cJSON *o)
{
	char *js = o ? cJSON_PrintUnformatted(o) : NULL;
	cJSON_Delete(o);
	if (!js)
		return false;
	bool ok = srv_buf_add(out, "data: ", 6) && srv_buf_add(out, js, strlen(js)) &&
		  srv_buf_add(out, "\n\n", 2);
	free(js);
	return ok;
}

bool srv_sse_chunk(const struct srv_req *r, const struct srv_choice *c, const char *text,
		   size_t n, bool first, struct srv_buf *out)
{
	cJSON *o = envelope(r, true);
	if (!o)
		return false;
	cJSON *chs = cJSON_AddArrayToObject(o, "choices");
	cJSON *ch = cJSON_CreateObject();
	cJSON_AddItemToArray(chs, ch);
	cJSON_AddNumberToObject(ch, "index", c->index);
	int n_calls = 0;
	if (r->kind == SRV_CHAT && r->tool) {
		/* the parse of the text so far: send what it has beyond what was sent */
		cJSON *d = cJSON_AddObjectToObject(ch, "delta");
		if (first)
			cJSON_AddStringToObject(d, "role", "assistant");
		size_t upto = c->text.p && text >= c->text.p ? (size_t)(text - c->text.p) + n : 0;
		struct srvtool_msg m = { 0 };
		char base[64];
		call_id_base(r, c, base);
		bool ok = srvtool_parse(&r->tool->o, c->text.p, upto, c->finish == NULL, &m) &&
			  srvtool_delta(&m, base, &r->tool->sent[c->index], d);
		n_calls = m.n_calls;
		srvtool_msg_free(&m);
		if (!ok) {
			cJSON_Delete(o);
			return false;
		}
		if (first && !cJSON_GetObjectItemCaseSensitive(d, "content") &&
		    !cJSON_GetObjectItemCaseSensitive(d, "tool_calls"))
			cJSON_AddStringToObject(d, "content", "");
		if (!c->finish && cJSON_GetArraySize(d) == 0 &&
		    !(c->lp && cJSON_GetArraySize(c->lp))) {
			cJSON_Delete(o);
			return true; /* nothing new: no event */
		}
	} else if (r->kind == SRV_CHAT) {
		cJSON *d = cJSON_AddObjectToObject(ch, "delta");
		if (first)
			cJSON_AddStringToObject(d, "role", "assistant");
		if (n || first)
			cJSON_AddItemToObject(d, "content", str_n(text, n));
	} else {
		cJSON_AddItemToObject(ch, "text", str_n(text, n));
	}
	cJSON_AddItemToObject(ch, "logprobs",
			      c->lp && cJSON_GetArraySize(c->lp) ? logprobs_obj(r, c->lp, c->n_sent)
								 : cJSON_CreateNull());
	if (c->finish)
		cJSON_AddStringToObject(ch, "finish_reason",
					r->kind == SRV_CHAT ? chat_finish(c->finish, n_calls)
							    : finish_name(c->finish));
	else
		cJSON_AddNullToObject(ch, "finish_reason");
	return sse_add(out, o);
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
	if (r->g.include_usage) {
		cJSON *o = envelope(r, true);
		if (o) {
			cJSON_AddArrayToObject(o, "choices");
			cJSON_AddItemToObject(o, "usage", usage_obj(r));
		}
		if (!sse_add(out, o))
			return false;
	}
	return srv_buf_add(out, "data: [DONE]\n\n", 14);
}

char *srv_error_json(const struct srv_error *e)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *err = cJSON_AddObjectToObject(o, "error");
	cJSON_AddItemToObject(err, "message", str_n(e->msg, strlen(e->msg)));
	cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
	if (e->param)
		cJSON_AddStringToObject(err, "param", e->param);
	else
		cJSON_AddNullToObject(err, "param");
	cJSON_AddNumberToObject(err, "code", e->status);
	char *js = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return js;
}
