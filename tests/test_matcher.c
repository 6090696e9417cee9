/* The grammar matcher over real vocabularies (SmolLM2's 49k tokens,
 * Gemma 3's 262k):
 * - the mask (trie walk) and the per-token check (fx_matcher_allows) agree
 *   on every token of the vocabulary at several states of a generation;
 * - at temperature 0 the sampler's cheap path (check the argmax, mask only
 *   when it is rejected) picks what full masking picks, at every step;
 * - end-of-generation tokens are allowed exactly where the grammar may end;
 * - a rejected token or byte string leaves the state unchanged;
 * and prints the mask time per call. Byte-level API checks need no model.
 */
#include <math.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ferrox.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static struct fx_grammar *compile(const char *text)
{
	struct fx_grammar *g = NULL;
	struct fx_err err = { 0 };
	int rc = fx_grammar_parse(text, strlen(text), NULL, &g, &err);
	CHECKF(rc == FX_OK, "%s", err.msg);
	return g;
}

static void byte_api(void)
{
	struct fx_grammar *g = compile("root ::= \"ab\" [0-9]{0,2} (\"!\" | \"?\")?\n");
	struct fx_matcher *m = NULL;
	bool next[256];
	if (!g)
		return;
	CHECK(fx_matcher_create(g, NULL, &m, NULL) == FX_OK);
	CHECK(!fx_matcher_can_end(m));
	CHECK(fx_matcher_accept_bytes(m, "ab", 2) == FX_OK);
	CHECK(fx_matcher_can_end(m) && !fx_matcher_is_done(m));
	CHECK(fx_matcher_accept_bytes(m, "x", 1) == FX_E_INVALID);
	CHECK(fx_matcher_can_end(m)); /* unchanged by the rejection */
	CHECK(fx_matcher_accept_bytes(m, "12", 2) == FX_OK);
	fx_matcher_next_bytes(m, next);
	int n = 0;
	for (int b = 0; b < 256; b++)
		n += next[b];
	CHECK(n == 2 && next['!'] && next['?']);
	CHECK(fx_matcher_accept_bytes(m, "3", 1) == FX_E_INVALID); /* {0,2} */
	CHECK(fx_matcher_accept_bytes(m, "!", 1) == FX_OK);
	CHECK(fx_matcher_is_done(m));
	fx_matcher_reset(m);
	CHECK(!fx_matcher_can_end(m) && fx_matcher_accept_bytes(m, "ab?", 3) == FX_OK);
	CHECK(!fx_matcher_allows(m, 0)); /* no vocabulary: no token */
	CHECK(fx_matcher_accept(m, 0) == FX_E_INVALID);
	fx_matcher_free(m);
	fx_grammar_free(g);
}

static fx_token argmax(const float *x, int32_t n)
{
	fx_token best = 0;
	for (int32_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* Greedy generation of one JSON object under the grammar of
 * tests/data/grammars/json.gbnf. */
static void model_checks(const char *file)
{
	char path[512];
	const char *p = check_model_path(file, path, sizeof(path));
	struct fx_model *m = NULL;
	struct fx_context *ctx = NULL;
	struct fx_sampler *smp = NULL;
	struct fx_grammar_vocab *v = NULL;
	struct fx_matcher *mt = NULL;
	struct fx_grammar *g = NULL;
	struct fx_err err = { 0 };
	float *masked = NULL;
	size_t len = 0;
	char *text;
	if (!p)
		return;
	text = check_read_file("tests/data/grammars/json.gbnf", &len);
	if (!text)
		return;
	text = realloc(text, len + 1);
	text[len] = 0;
	g = compile(text);
	free(text);
	struct fx_model_params mp = fx_model_default_params();
	struct fx_context_params cp = fx_context_default_params();
	struct fx_sampler_params sp = fx_sampler_default_params();
	cp.n_ctx = 512;
	sp.temp = 0;
	double t0 = now();
	if (!g || fx_model_load(p, &mp, &m, &err) || fx_context_create(m, &cp, &ctx, &err) ||
	    fx_sampler_create(&sp, fx_model_n_vocab(m), &smp, &err) ||
	    fx_grammar_vocab_create(m, &v, &err)) {
		CHECKF(0, "%s: %s", file, err.msg);
		goto out;
	}
	double t_vocab = now() - t0;
	CHECK(fx_matcher_create(g, v, &mt, &err) == FX_OK);
	fx_sampler_set_matcher(smp, mt);
	int32_t nv = fx_model_n_vocab(m);
	masked = malloc((size_t)nv * sizeof(float));
	size_t n_prompt = 0;
	fx_token prompt[64];
	const char *q = "A JSON object describing a book, with its title, author and year:\n";
	CHECK(fx_tokenize(m, q, strlen(q), true, false, prompt, 64, &n_prompt) == FX_OK);
	CHECK(fx_decode(ctx, prompt, (int32_t)n_prompt, false) == FX_OK);
	double t_mask = 0;
	int n_mask = 0, n_cheap = 0, step, n_full_checks = 0;
	fx_token eos = fx_token_eos(m);
	for (step = 0; step < 80; step++) {
		const float *lg = fx_get_logits(ctx, NULL);
		memcpy(masked, lg, (size_t)nv * sizeof(float));
		double t1 = now();
		int32_t n_allowed = fx_matcher_mask(mt, masked);
		t_mask += now() - t1;
		n_mask++;
		CHECK(n_allowed > 0);
		fx_token full = argmax(masked, nv);
		fx_token t = fx_sampler_sample(smp, lg);
		CHECKF(t == full, "%s step %d: cheap path %d, full mask %d", file, step, t, full);
		n_cheap += t == argmax(lg, nv);
		/* every token, at the first steps and then every 16th */
		if (step < 3 || step % 16 == 0) {
			int bad = 0, n = 0;
			for (fx_token k = 0; k < nv; k++) {
				bool a = fx_matcher_allows(mt, k), b = masked[k] != -INFINITY;
				bad += a != b;
				n += a;
			}
			CHECKF(!bad && n == n_allowed, "%s step %d: %d tokens differ (mask %d, allows %d)",
			       file, step, bad, n_allowed, n);
			n_full_checks++;
		}
		if (eos >= 0)
			CHECK(fx_matcher_allows(mt, eos) == fx_matcher_can_end(mt));
		if (fx_token_is_eog(m, t))
			break;
		CHECK(fx_matcher_accept(mt, t) == FX_OK);
		if (fx_decode(ctx, &t, 1, false) != FX_OK)
			break;
	}
	/* a token the grammar rejects leaves the state as it was */
	bool end = fx_matcher_can_end(mt);
	fx_token bad_tok = -1;
	for (fx_token k = 0; k < nv && bad_tok < 0; k++)
		if (!fx_matcher_allows(mt, k) && !fx_token_is_eog(m, k))
			bad_tok = k;
	if (bad_tok >= 0)
		CHECK(fx_matcher_accept(mt, bad_tok) == FX_E_INVALID && fx_matcher_can_end(mt) == end);
	printf("%s: vocab trie %.0f ms (with load), %d steps, mask %.3f ms per call (cache included), "
	       "argmax allowed at %d of %d steps, %d whole-vocabulary checks\n",
	       file, t_vocab * 1e3, step, n_mask ? t_mask / n_mask * 1e3 : 0.0, n_cheap, n_mask,
	       n_full_checks);
out:
	free(masked);
	fx_matcher_free(mt);
	fx_grammar_vocab_free(v);
	fx_grammar_free(g);
	fx_sampler_free(smp);
	fx_context_free(ctx);
	fx_model_free(m);
}

int main(void)
{
	byte_api();
	model_checks("SmolLM2-135M-Instruct.Q4_1.gguf");
	model_checks("gemma-3-270m-q4_k_m.gguf");
	printf("test_matcher: %d checks, %d failed\n", check_count, check_failures);
	return check_failures ? 1 : 0;
}
