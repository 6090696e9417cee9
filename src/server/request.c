/* Request bodies: OpenAI generation options read from parsed JSON, with
 * the type and range checks that turn a bad value into a 400 naming the
 * field. Field names and ranges follow the OpenAI API reference for
 * /v1/completions and /v1/chat/completions. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

void srv_error_set(struct srv_error *e, int status, const char *type, const char *param,
		   const char *fmt, ...)
{
	va_list ap;
	e->status = status;
	e->type = type;
	e->param = param;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

bool srv_buf_add(struct srv_buf *b, const void *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return false;
		b->p = p;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return true;
}

void srv_buf_free(struct srv_buf *b)
{
	free(b->p);
	*b = (struct srv_buf){ 0 };
}

/* RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
bool srv_utf8_valid(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0;
	while (i < n) {
		unsigned c = s[i];
		int len;
		unsigned min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			len = 2, min = 0x80, c &= 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			len = 3, min = 0x800, c &= 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			len = 4, min = 0x10000, c &= 0x07;
		} else {
			return false;
		}
		if (i + (size_t)len > n)
			return false;
		for (int k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			c = (c << 6) | (s[i + k] & 0x3f);
		}
		if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			return false;
		i += (size_t)len;
	}
	return true;
}

static cJSON *parse_once(const char *text, size_t n, size_t *end)
{
	const char *e = NULL;
	cJSON *j = cJSON_ParseWithLengthOpts(text, n, &e, false);
	*end = e && e >= text ? (size_t)(e - text) : 0;
	return j;
}

cJSON *srv_json_parse(const char *text, size_t n, size_t *end, bool *oom)
{
	size_t e1 = 0, e2 = 0;
	cJSON *j = parse_once(text, n, &e1);
	*oom = false;
	if (!j) {
		j = parse_once(text, n, &e2);
		*oom = !j && e2 != e1;
		if (j)
			e1 = e2;
	}
	if (end)
		*end = e1;
	return j;
}

static const char E_INV[] = "invalid_request_error";

/* A number field in [lo, hi], absent or null leaving *out alone. */
static bool get_num(const cJSON *body, const char *key, double lo, double hi, double *out,
		    struct srv_error *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
		srv_error_set(e, 400, E_INV, key, "'%s' must be a number", key);
		return false;
	}
	if (v->valuedouble < lo || v->valuedouble > hi) {
		srv_error_set(e, 400, E_INV, key, "'%s' must be in [%g, %g], got %g", key, lo, hi,
			      v->valuedouble);
		return false;
	}
	*out = v->valuedouble;
	return true;
}

static bool get_int(const cJSON *body, const char *key, double lo, double hi, int64_t *out,
		    struct srv_error *e)
{
	double d = (double)*out;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
	if (!get_num(body, key, lo, hi, &d, e))
		return false;
	if (v && cJSON_IsNumber(v) && d != floor(d)) {
		srv_error_set(e, 400, E_INV, key, "'%s' must be an integer", key);
		return false;
	}
	*out = (int64_t)d;
	return true;
}

bool srv_json_bool(const cJSON *body, const char *key, bool *out, struct srv_error *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key);
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsBool(v)) {
		srv_error_set(e, 400, E_INV, key, "'%s' must be true or false", key);
		return false;
	}
	*out = cJSON_IsTrue(v);
	return true;
}

static bool add_stop(struct srv_gen *g, const cJSON *v, struct srv_error *e)
{
	if (!cJSON_IsString(v)) {
		srv_error_set(e, 400, E_INV, "stop", "'stop' must be a string or a list of strings");
		return false;
	}
	size_t len = strlen(v->valuestring);
	if (len == 0)
		return true; /* an empty stop string matches nothing useful: ignored */
	if (len > SRV_MAX_STOP_LEN) {
		srv_error_set(e, 400, E_INV, "stop", "a stop string is longer than %d bytes",
			      SRV_MAX_STOP_LEN);
		return false;
	}
	if (g->n_stop == SRV_MAX_STOP) {
		srv_error_set(e, 400, E_INV, "stop", "at most %d stop strings are allowed",
			      SRV_MAX_STOP);
		return false;
	}
	if (!(g->stop[g->n_stop] = strdup(v->valuestring))) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return false;
	}
	g->n_stop++;
	return true;
}

static bool get_stop(const cJSON *body, struct srv_gen *g, struct srv_error *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "stop");
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsArray(v))
		return add_stop(g, v, e);
	if (cJSON_GetArraySize(v) > SRV_MAX_STOP) {
		srv_error_set(e, 400, E_INV, "stop", "at most %d stop strings are allowed, got %d",
			      SRV_MAX_STOP, cJSON_GetArraySize(v));
		return false;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, v) if (!add_stop(g, it, e)) return false;
	return true;
}

static bool get_bias(const cJSON *body, int32_t n_vocab, struct srv_gen *g, struct srv_error *e)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, "logit_bias");
	if (!v || cJSON_IsNull(v))
		return true;
	if (!cJSON_IsObject(v)) {
		srv_error_set(e, 400, E_INV, "logit_bias",
			      "'logit_bias' must be an object of token id -> bias");
		return false;
	}
	int n = cJSON_GetArraySize(v);
	if (n > 1024) {
		srv_error_set(e, 400, E_INV, "logit_bias", "at most 1024 logit_bias entries");
		return false;
	}
	g->bias_id = calloc((size_t)n + 1, sizeof(*g->bias_id));
	g->bias_val = calloc((size_t)n + 1, sizeof(*g->bias_val));
	if (!g->bias_id || !g->bias_val) {
		srv_error_set(e, 500, "server_error", NULL, "out of memory");
		return false;
	}
	const cJSON *it;
	cJSON_ArrayForEach(it, v)
	{
		char *end;
		long id = strtol(it->string, &end, 10);
		if (!*it->string || *end || id < 0 || id >= n_vocab) {
			srv_error_set(e, 400, E_INV, "logit_bias",
				      "logit_bias key '%.64s' is not a token id in [0, %d)",
				      it->string, n_vocab);
			return false;
		}
		if (!cJSON_IsNumber(it) || it->valuedouble < -100 || it->valuedouble > 100) {
			srv_error_set(e, 400, E_INV, "logit_bias",
				      "logit_bias values must be numbers in [-100, 100]");
			return false;
		}
		g->bias_id[g->n_bias] = (fx_token)id;
		g->bias_val[g->n_bias++] = (float)it->valuedouble;
	}
	return true;
}

void srv_gen_defaults(const struct fx_model *m, struct fx_sampler_params *d)
{
	*d = fx_sampler_default_params();
	d->temp = 1.0f;
	d->top_k = 0;
	d->top_p = 1.0f;
	d->min_p = 0.0f;
	d->repeat_penalty = 1.0f;
	fx_model_sampling_defaults(m, 0, d);
}

bool srv_gen_parse(const cJSON *body, enum srv_kind kind, int32_t n_vocab,
		   const struct fx_sampler_params *defaults, struct srv_gen *g, struct srv_error *e)
{
	struct fx_sampler_params d;
	if (!defaults) {
		srv_gen_defaults(NULL, &d);
		defaults = &d;
	}
	double temp = defaults->temp, top_p = defaults->top_p, min_p = defaults->min_p, pres = 0,
	       freq = 0, rep = defaults->repeat_penalty;
	int64_t max_tokens = kind == SRV_COMPLETION ? 16 : -1, top_k = defaults->top_k, n = 1,
		seed = -1, top_lp = 0, last_n = defaults->repeat_last_n;
	if (!get_int(body, "max_tokens", 0, 1e9, &max_tokens, e) ||
	    !get_num(body, "repetition_penalty", 0.01, 100, &rep, e) ||
	    !get_num(body, "repeat_penalty", 0.01, 100, &rep, e) ||
	    !get_int(body, "repeat_last_n", -1, 1 << 20, &last_n, e) ||
	    !get_int(body, "max_completion_tokens", 0, 1e9, &max_tokens, e) ||
	    !get_num(body, "temperature", 0, 2, &temp, e) ||
	    !get_num(body, "top_p", 0, 1, &top_p, e) || !get_num(body, "min_p", 0, 1, &min_p, e) ||
	    !get_int(body, "top_k", -1, 1e9, &top_k, e) ||
	    !get_num(body, "presence_penalty", -2, 2, &pres, e) ||
	    !get_num(body, "frequency_penalty", -2, 2, &freq, e) ||
	    !get_int(body, "n", 1, SRV_MAX_N, &n, e) ||
	    !get_int(body, "seed", -9.2e18, 9.2e18, &seed, e) || !get_stop(body, g, e) ||
	    !get_bias(body, n_vocab, g, e) || !srv_json_bool(body, "stream", &g->stream, e) ||
	    !srv_json_bool(body, "ignore_eos", &g->ignore_eos, e))
		return false;
	const cJSON *lp = cJSON_GetObjectItemCaseSensitive(body, "logprobs");
	if (kind == SRV_CHAT) {
		if (!srv_json_bool(body, "logprobs", &g->logprobs, e) ||
		    !get_int(body, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top_lp, e))
			return false;
	} else if (lp && !cJSON_IsNull(lp)) {
		/* legacy completions: logprobs is the number of alternatives */
		if (!get_int(body, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top_lp, e))
			return false;
		g->logprobs = true;
	}
	if (kind == SRV_COMPLETION && !srv_json_bool(body, "echo", &g->echo, e))
		return false;
	const cJSON *so = cJSON_GetObjectItemCaseSensitive(body, "stream_options");
	if (so && !cJSON_IsNull(so)) {
		if (!cJSON_IsObject(so)) {
			srv_error_set(e, 400, E_INV, "stream_options", "'stream_options' must be an object");
			return false;
		}
		if (!srv_json_bool(so, "include_usage", &g->include_usage, e))
			return false;
	}
	g->max_tokens = (int32_t)max_tokens;
	g->temperature = (float)temp;
	g->top_p = (float)top_p;
	g->min_p = (float)min_p;
	g->top_k = (int32_t)top_k;
	g->repeat_penalty = (float)rep;
	g->repeat_last_n = (int32_t)last_n;
	g->presence = (float)pres;
	g->frequency = (float)freq;
	g->n = (int)n;
	g->has_seed = seed != -1;
	g->seed = (uint64_t)seed;
	g->top_logprobs = (int)top_lp;
	return srv_constraint_parse(body, g, e);
}

void srv_gen_fini(struct srv_gen *g)
{
	for (int i = 0; i < g->n_stop; i++)
		free(g->stop[i]);
	free(g->bias_id);
	free(g->bias_val);
	fx_grammar_free(g->grammar);
	memset(g, 0, sizeof(*g));
}

/* The speculative fields of one object (the body with llama-server's
 * dotted names, pre "speculative.", or the nested "speculative" object,
 * pre ""), into sp's working values. */
static bool spec_fields(const cJSON *o, const char *pre, struct fx_spec_params *sp, int64_t v[4],
			double *p_min, struct srv_error *e)
{
	static const char *const names[] = { "n_max", "n_min", "ngram_size_n", "ngram_size_m" };
	static const int64_t lo[] = { 0, 0, 1, 1 };
	char k[64];
	for (int i = 0; i < 4; i++)
		if (!get_int(o, (snprintf(k, sizeof(k), "%s%s", pre, names[i]), k), lo[i], 1024, &v[i], e))
			return false;
	if (!get_num(o, (snprintf(k, sizeof(k), "%sp_min", pre), k), 0, 1, p_min, e))
		return false;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, (snprintf(k, sizeof(k), "%stype", pre), k));
	if (t && !cJSON_IsNull(t)) {
		struct fx_err err;
		if (!cJSON_IsString(t)) {
			srv_error_set(e, 400, E_INV, "speculative.type",
				      "'speculative.type' must be a string such as \"ngram-simple\" or "
				      "\"none\"");
			return false;
		}
		if (fx_spec_types_parse(t->valuestring, &sp->types, &err)) {
			srv_error_set(e, 400, E_INV, "speculative.type", "'speculative.type': %s",
				      err.msg);
			return false;
		}
		if (sp->types & ~(uint32_t)FX_SPEC_NGRAM_SIMPLE) {
			srv_error_set(e, 400, E_INV, "speculative.type", "'speculative.type': the server "
				      "drafts with ngram-simple only");
			return false;
		}
	}
	return true;
}

bool srv_spec_parse(const cJSON *body, const struct fx_spec_params *defaults, struct srv_gen *g,
		    struct srv_error *e)
{
	struct fx_spec_params sp = defaults ? *defaults : fx_spec_default_params();
	int64_t v[4] = { sp.n_max, sp.n_min, sp.ngram_size_n, sp.ngram_size_m };
	double p_min = 0;
	/* llama-server's names, dots included (its server-schema.cpp), or the
	 * same fields in a "speculative" object (which wins) */
	const cJSON *sub = cJSON_GetObjectItemCaseSensitive(body, "speculative");
	if (sub && !cJSON_IsNull(sub) && !cJSON_IsObject(sub)) {
		srv_error_set(e, 400, E_INV, "speculative", "'speculative' must be an object such as "
			      "{\"n_max\": 8}");
		return false;
	}
	if (!spec_fields(body, "speculative.", &sp, v, &p_min, e) ||
	    (sub && cJSON_IsObject(sub) && !spec_fields(sub, "", &sp, v, &p_min, e)))
		return false;
	int64_t n_max = v[0], n_min = v[1], size_n = v[2], size_m = v[3];
	sp.n_max = (int32_t)n_max;
	sp.n_min = (int32_t)n_min;
	sp.ngram_size_n = (int32_t)size_n;
	sp.ngram_size_m = (int32_t)size_m;
	g->spec = sp;
	return true;
}
