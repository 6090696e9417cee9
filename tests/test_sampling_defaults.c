/* A model's own sampling defaults (fx_model_sampling_defaults):
 *   - a checkpoint directory's generation_config.json (the llama fixture
 *     with one written beside it): the fields it sets come back, in the
 *     mask and in the params; a field in `keep` (a user's flag) is left;
 *   - `ferrox convert` of that directory writes llama.cpp's
 *     general.sampling.* keys (typed as gguf-py writes them), and the GGUF
 *     gives the same defaults;
 *   - penalty_repeat wins over repetition_penalty (llama.cpp's converter);
 *   - without the file, nothing is set;
 *   - a value of the wrong type or out of range fails the load, naming it;
 *   - the server's request defaults: OpenAI's, the model's under them, a
 *     field the request sends wins, repetition_penalty / repeat_penalty /
 *     repeat_last_n are read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "ferrox.h"
#include "io/gguf.h"
#include "server/server.h"

#define FIX "tests/fixtures/hf-tiny/llama"

/* A checkpoint directory in tmp: the fixture's files linked, and
 * generation_config.json with `json` (NULL: none). */
static void make_dir(const char *dir, const char *json)
{
	char src[4096], dst[4096], cwd[2048];
	mkdir(dir, 0700);
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	const char *files[] = { "config.json", "model.safetensors" };
	for (int i = 0; i < 2; i++) {
		snprintf(src, sizeof(src), "%s/%s/%s", cwd, FIX, files[i]);
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		unlink(dst);
		CHECKF(symlink(src, dst) == 0, "symlink %s", dst);
	}
	snprintf(dst, sizeof(dst), "%s/generation_config.json", dir);
	unlink(dst);
	if (json) {
		FILE *f = fopen(dst, "w");
		CHECK(f != NULL);
		if (f) {
			fputs(json, f);
			fclose(f);
		}
	}
}

static struct fx_model *load(const char *path, int want_rc, const char *want_msg)
{
	struct fx_model *m = NULL;
	struct fx_err err = { 0 };
	int rc = fx_model_load(path, NULL, &m, &err);
	CHECKF(rc == want_rc, "%s: rc %d, want %d (%s)", path, rc, want_rc, err.msg);
	if (want_msg)
		CHECKF(strstr(err.msg, want_msg) != NULL, "%s: message '%s' lacks '%s'", path, err.msg,
		       want_msg);
	return m;
}

static void check_values(const struct fx_model *m, const char *what)
{
	struct fx_sampler_params p = fx_sampler_default_params();
	uint32_t put = fx_model_sampling_defaults(m, 0, &p);
	CHECKF(put == (FX_SAMPLING_TEMP | FX_SAMPLING_TOP_K | FX_SAMPLING_TOP_P |
		       FX_SAMPLING_REPEAT_PENALTY | FX_SAMPLING_REPEAT_LAST_N),
	       "%s: mask %#x", what, put);
	CHECKF(p.temp == 0.6f && p.top_k == 20 && p.top_p == 0.9f && p.repeat_penalty == 1.05f &&
	       p.repeat_last_n == -1, "%s: temp %g top_k %d top_p %g rep %g last_n %d", what,
	       p.temp, p.top_k, p.top_p, p.repeat_penalty, p.repeat_last_n);
	/* min_p is not in the file: the caller's value stays */
	CHECK(p.min_p == fx_sampler_default_params().min_p);
	/* a user's flag (keep) wins */
	struct fx_sampler_params q = fx_sampler_default_params();
	q.temp = 0.3f;
	put = fx_model_sampling_defaults(m, FX_SAMPLING_TEMP | FX_SAMPLING_TOP_K, &q);
	CHECKF(!(put & (FX_SAMPLING_TEMP | FX_SAMPLING_TOP_K)) && q.temp == 0.3f &&
	       q.top_k == fx_sampler_default_params().top_k && q.top_p == 0.9f,
	       "%s: keep ignored (mask %#x, temp %g, top_k %d)", what, put, q.temp, q.top_k);
}

static void check_server_defaults(const struct fx_model *m)
{
	struct fx_sampler_params d;
	struct srv_error e = { 0 };
	srv_gen_defaults(NULL, &d);
	CHECK(d.temp == 1.0f && d.top_k == 0 && d.top_p == 1.0f && d.min_p == 0.0f &&
	      d.repeat_penalty == 1.0f);
	srv_gen_defaults(m, &d);
	CHECK(d.temp == 0.6f && d.top_k == 20 && d.top_p == 0.9f && d.min_p == 0.0f &&
	      d.repeat_penalty == 1.05f && d.repeat_last_n == -1);
	const char *bodies[] = { "{}", "{\"temperature\": 0.2, \"top_k\": 5}",
				 "{\"repetition_penalty\": 1.3, \"repeat_last_n\": 16}",
				 "{\"repeat_penalty\": 0}" };
	for (int i = 0; i < 4; i++) {
		cJSON *b = cJSON_Parse(bodies[i]);
		struct srv_gen g = { 0 };
		bool ok = srv_gen_parse(b, SRV_COMPLETION, 100, &d, &g, &e);
		if (i == 0)
			CHECK(ok && g.temperature == 0.6f && g.top_k == 20 && g.top_p == 0.9f &&
			      g.repeat_penalty == 1.05f && g.repeat_last_n == -1);
		else if (i == 1)
			CHECK(ok && g.temperature == 0.2f && g.top_k == 5 && g.top_p == 0.9f);
		else if (i == 2)
			CHECK(ok && g.repeat_penalty == 1.3f && g.repeat_last_n == 16);
		else
			CHECKF(!ok && e.status == 400 && strstr(e.msg, "repeat_penalty"), "%s", e.msg);
		srv_gen_fini(&g);
		cJSON_Delete(b);
	}
}

int main(void)
{
	char tmp[] = "/tmp/fx-sampling-XXXXXX", dir[4096], gguf[4096];
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/ckpt", tmp);
	snprintf(gguf, sizeof(gguf), "%s/ckpt.gguf", tmp);
	struct fx_err err = { 0 };

	/* both spellings of the repetition penalty: penalty_repeat wins */
	make_dir(dir, "{\"do_sample\": true, \"temperature\": 0.6, \"top_k\": 20, \"top_p\": 0.9, "
		      "\"repetition_penalty\": 1.3, \"penalty_repeat\": 1.05, \"penalty_last_n\": -1, "
		      "\"eos_token_id\": [1, 2], \"transformers_version\": \"5.23.0\"}");
	struct fx_model *m = load(dir, FX_OK, NULL);
	if (m) {
		check_values(m, "directory");
		check_server_defaults(m);
		fx_model_free(m);
	}

	/* the converted GGUF carries llama.cpp's keys, typed as gguf-py writes them */
	CHECKF(fx_convert(dir, gguf, "f32", NULL, &err) == FX_OK, "convert: %s", err.msg);
	struct gguf_file *g = NULL;
	if (gguf_open(gguf, &g, &err) == FX_OK) {
		const struct gguf_kv *k = gguf_find(g, "general.sampling.top_k");
		const struct gguf_kv *t = gguf_find(g, "general.sampling.temp");
		CHECKF(k && k->type == GGUF_T_I32 && t && t->type == GGUF_T_F32,
		       "general.sampling keys missing or mistyped");
		gguf_close(g);
	} else {
		CHECKF(0, "gguf_open %s: %s", gguf, err.msg);
	}
	if ((m = load(gguf, FX_OK, NULL))) {
		check_values(m, "converted GGUF");
		fx_model_free(m);
	}

	/* no generation_config.json: nothing set */
	make_dir(dir, NULL);
	if ((m = load(dir, FX_OK, NULL))) {
		struct fx_sampler_params p = fx_sampler_default_params();
		CHECK(fx_model_sampling_defaults(m, 0, &p) == 0 &&
		      p.temp == fx_sampler_default_params().temp);
		fx_model_free(m);
	}
	CHECK(fx_model_sampling_defaults(NULL, 0, NULL) == 0);

	/* bad values fail the load, named */
	make_dir(dir, "{\"temperature\": \"hot\"}");
	fx_model_free(load(dir, FX_E_FORMAT, "'temperature' is not a number"));
	make_dir(dir, "{\"top_p\": 1.5}");
	fx_model_free(load(dir, FX_E_FORMAT, "general.sampling.top_p is 1.5"));
	make_dir(dir, "{\"top_k\": 2.5}");
	fx_model_free(load(dir, FX_E_FORMAT, "'top_k' is not an integer"));
	make_dir(dir, "{\"repetition_penalty\": 0}");
	fx_model_free(load(dir, FX_E_FORMAT, "penalty_repeat is 0"));
	make_dir(dir, "[1, 2]");
	fx_model_free(load(dir, FX_E_FORMAT, "not a JSON object"));

	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", tmp);
	printf("test_sampling_defaults: %d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
