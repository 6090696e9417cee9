/* libFuzzer target: an HTTP request body as the server turns it into an
 * internal request (src/server), stopping before the engine queue.
 *
 * As http.c's do_completion: the body parsed as JSON (an object, else
 * refused), srv_req_new, srv_gen_parse (sampling options, stop strings,
 * logit_bias, response_format / grammar / json_schema through
 * constrain.c), srv_spec_parse (speculative.*), then srv_chat_prompt
 * (messages, tools and tool_choice through tools_req.c, the template
 * rendered and tokenized) when the body has "messages", else
 * srv_completion_prompt; then the request is
 * released as a refused one would be. The model is SmolLM2 (vocab_only,
 * from FX_MODELS_DIR, default models/; loaded once). Chat bodies are
 * rendered with SmolLM2's template or, chosen by the input's size, one of the
 * .jinja files of ../shared/templates when that folder exists (their tool-call
 * formats differ). Seeds: tests/fuzz/corpus/request (bodies from
 * tests/test_server.py, test_structured.py, test_tool_server.py). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define MAX_TMPL 64

static struct srv srv;
static char *tmpl[MAX_TMPL];
static int n_tmpl;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;
	if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (s = malloc((size_t)n + 1)) && fread(s, 1, (size_t)n, f) == (size_t)n)
		s[n] = 0;
	else if (s) {
		free(s);
		s = NULL;
	}
	if (f)
		fclose(f);
	return s;
}

static void load_templates(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)) && n_tmpl < MAX_TMPL) {
		size_t n = strlen(e->d_name);
		char p[1024];
		if (n < 6 || strcmp(e->d_name + n - 6, ".jinja"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if ((tmpl[n_tmpl] = slurp(p)))
			n_tmpl++;
	}
	if (d)
		closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	const char *dir = getenv("FX_MODELS_DIR") ? getenv("FX_MODELS_DIR") : "models";
	char path[512];
	struct fx_model_params mp = fx_model_default_params();
	struct fx_err err;
	mp.vocab_only = true;
	snprintf(path, sizeof(path), "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dir);
	if (fx_model_load(path, &mp, &srv.model, &err)) {
		fprintf(stderr, "fuzz_request: %s (the target needs SmolLM2)\n", err.msg);
		exit(1);
	}
	srv.p = fx_server_default_params();
	srv.model_name = "SmolLM2-135M-Instruct.Q4_1.gguf";
	srv.n_vocab = fx_model_n_vocab(srv.model);
	srv.n_ctx_seq = 4096;
	srv.n_parallel = 4;
	pthread_mutex_init(&srv.lock, NULL);
	load_templates("../shared/templates");
	return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const char *end = NULL;
	cJSON *body = cJSON_ParseWithLengthOpts((const char *)data, size, &end, false);
	struct srv_error e = { 0 };
	if (!body)
		return 0;
	if (!cJSON_IsObject(body)) {
		cJSON_Delete(body);
		return 0;
	}
	enum srv_kind kind =
		cJSON_GetObjectItemCaseSensitive(body, "messages") ? SRV_CHAT : SRV_COMPLETION;
	size_t pick = size % (size_t)(n_tmpl + 1);
	srv.p.chat_template = pick < (size_t)n_tmpl ? tmpl[pick] : NULL;
	struct srv_req *r = srv_req_new(&srv, kind);
	if (!r) {
		cJSON_Delete(body);
		return 0;
	}
	struct fx_spec_params spd = fx_spec_default_params();
	bool ok = srv_gen_parse(body, kind, srv.n_vocab, NULL, &r->g, &e) &&
		  srv_spec_parse(body, &spd, &r->g, &e) &&
		  (kind == SRV_CHAT ? srv_chat_prompt(&srv, body, r, &e)
				    : srv_completion_prompt(&srv, body, r, &e));
	for (int32_t i = 0; ok && i < r->n_prompt; i++)
		if (r->prompt[i] < 0 || r->prompt[i] >= srv.n_vocab)
			__builtin_trap(); /* a prompt the engine would index out of range */
	const struct fx_spec_params *sp = &r->g.spec;
	if (ok && (sp->n_max < 0 || sp->n_max > 1024 || sp->n_min < 0 || sp->ngram_size_n < 1 ||
		   sp->ngram_size_m < 1))
		__builtin_trap(); /* speculative.* out of the range the engine assumes */
	if (!ok && (e.status < 400 || e.status > 500 || !e.msg[0]))
		__builtin_trap(); /* a refusal without an HTTP error status or message */
	cJSON_Delete(body);
	pthread_mutex_lock(&srv.lock);
	srv_req_unref_locked(r);
	pthread_mutex_unlock(&srv.lock);
	return 0;
}
