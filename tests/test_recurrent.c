/* The recurrent backing's lifecycle on a hybrid model (the LFM2 fixture:
 * three short-convolution layers, one attention layer) and a pure one
 * (the Mamba-2 fixture), with both K/V layouts:
 *   - a state cannot go back: fx_seq_rm to a middle position and
 *     fx_seq_shift are refused, naming the recurrent layers, and the
 *     sequence is unchanged (its next logits equal an untouched run's);
 *   - fx_seq_rm to 0 empties it: the same prompt again gives the same
 *     logits, bit for bit (the state was zeroed with the K/V);
 *   - a prompt shorter than a snapshot interval reuses nothing; a longer
 *     shared prefix is taken from a state snapshot, with logits equal to a
 *     fresh prefill's;
 *   - a config whose layer pattern disagrees with the tensors, or a conv
 *     width that disagrees with the conv tensor, is a clear error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"

#define DIR "tests/fixtures/hf-tiny-next/lfm2"
#define N 20

static struct fx_context *ctx(const struct fx_model *m, int layout)
{
	struct fx_err err = { 0 };
	struct fx_context *c = NULL;
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 64;
	p.n_threads = 2;
	p.kv_layout = layout;
	p.block_size = 4;
	p.n_seq_max = 2;
	if (fx_context_create(m, &p, &c, &err))
		CHECKF(false, "context: %s", err.msg);
	return c;
}

/* Logits after ids[0..n) then one more token, from a fresh context. */
static void fresh(const struct fx_model *m, int layout, const fx_token *ids, int n, fx_token next,
		  float *out, int32_t nv)
{
	struct fx_context *c = ctx(m, layout);
	if (!c)
		return;
	CHECK(fx_decode(c, ids, n, false) == FX_OK);
	CHECK(fx_decode(c, &next, 1, false) == FX_OK);
	memcpy(out, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	fx_context_free(c);
}

static void check_lifecycle(const struct fx_model *m, int layout, const char *label)
{
	int32_t nv = fx_model_n_vocab(m);
	fx_token ids[N], next = 7;
	for (int i = 0; i < N; i++)
		ids[i] = (fx_token)((i * 29 + 3) % nv);
	float *want = malloc((size_t)nv * sizeof(float)), *first = malloc((size_t)nv * sizeof(float));
	fresh(m, layout, ids, N, next, want, nv);
	struct fx_context *c = ctx(m, layout);
	if (!c || !want || !first)
		goto out;
	CHECK(fx_decode(c, ids, N, false) == FX_OK);
	memcpy(first, fx_get_logits(c, NULL), (size_t)nv * sizeof(float));
	/* back to the middle: refused, nothing changes */
	int rc = fx_seq_rm(c, 0, N / 2);
	CHECKF(rc == FX_E_UNSUPPORTED && strstr(fx_context_errmsg(c), "recurrent"),
	       "%s: seq_rm to %d: rc %d '%s'", label, N / 2, rc, fx_context_errmsg(c));
	CHECK(fx_seq_n_past(c, 0) == N);
	rc = fx_seq_shift(c, 0, 8, -1, -4);
	CHECKF(rc == FX_E_UNSUPPORTED && strstr(fx_context_errmsg(c), "recurrent"),
	       "%s: seq_shift: rc %d '%s'", label, rc, fx_context_errmsg(c));
	CHECK(fx_seq_n_past(c, 0) == N);
	CHECK(fx_decode(c, &next, 1, false) == FX_OK);
	CHECKF(!memcmp(fx_get_logits(c, NULL), want, (size_t)nv * sizeof(float)),
	       "%s: a refused roll-back changed the sequence", label);
	/* removing a future position changes nothing either */
	CHECK(fx_seq_rm(c, 0, N + 5) == FX_OK && fx_seq_n_past(c, 0) == N + 1);
	/* back to 0: empty, and the same prompt gives the same logits */
	CHECK(fx_seq_rm(c, 0, 0) == FX_OK && fx_seq_n_past(c, 0) == 0);
	CHECK(fx_decode(c, ids, N, false) == FX_OK);
	CHECKF(!memcmp(fx_get_logits(c, NULL), first, (size_t)nv * sizeof(float)),
	       "%s: after seq_rm to 0 the prompt gives other logits (state not zeroed?)", label);
	/* a second sequence with the same prompt reuses nothing */
	uint32_t reused = 99;
	fx_seq s1 = -1;
	CHECK(fx_seq_add(c, &s1) == FX_OK);
	CHECK(fx_seq_reuse_prefix(c, s1, (const int32_t *)ids, N, &reused) == FX_OK);
	CHECKF(reused == 0, "%s: %u prefix tokens reused without a state behind them", label,
	       reused);
	printf("%-10s roll-back refused and harmless, rm to 0 exact, no prefix reuse\n", label);
out:
	fx_context_free(c);
	free(want);
	free(first);
}

/* Prefix caching through state snapshots: a sequence decodes a 150-token
 * prompt (snapshots at 64 and 128); a second one whose prompt shares its
 * first 140 tokens takes 128 of them from the cache and its logits equal
 * a fresh context's, bit for bit. With the contiguous layout a model with
 * attention layers has no prefix cache (0 reused); a model without any
 * (Mamba-2) reuses the snapshot alone. */
static void check_prefix(const struct fx_model *m, int layout, bool attends, const char *label)
{
	enum { NA = 150, SHARED = 140, NB = 160 };
	int32_t nv = fx_model_n_vocab(m);
	fx_token a[NA], bt[NB];
	for (int i = 0; i < NA; i++)
		a[i] = (fx_token)((i * 31 + 7) % nv);
	for (int i = 0; i < NB; i++)
		bt[i] = i < SHARED ? a[i] : (fx_token)((i * 17 + 5) % nv);
	struct fx_err err = { 0 };
	struct fx_context *c = NULL, *f = NULL;
	struct fx_context_params p = fx_context_default_params();
	p.n_ctx = 256;
	p.n_threads = 2;
	p.kv_layout = layout;
	p.block_size = 4;
	p.n_seq_max = 2;
	p.type_k = p.type_v = FX_KV_F32;
	if (fx_context_create(m, &p, &c, &err) || fx_context_create(m, &p, &f, &err)) {
		CHECKF(false, "context: %s", err.msg);
		goto out;
	}
	CHECK(fx_decode(c, a, NA, false) == FX_OK);
	fx_seq s1 = -1;
	uint32_t got = 0;
	CHECK(fx_seq_add(c, &s1) == FX_OK);
	CHECK(fx_seq_reuse_prefix(c, s1, (const int32_t *)bt, NB, &got) == FX_OK);
	uint32_t want = layout == FX_KV_PAGED || !attends ? 128 : 0;
	CHECKF(got == want, "%s: %u prefix tokens reused, want %u", label, got, want);
	fx_seq rows[NB];
	for (int i = 0; i < NB; i++)
		rows[i] = s1;
	struct fx_batch b = { .n = NB - (int32_t)got, .seq = rows, .token = bt + got, .logits = NULL };
	CHECK(fx_batch_decode(c, &b, NULL) == FX_OK);
	CHECK(fx_decode(f, bt, NB, false) == FX_OK);
	const float *l = fx_batch_logits(c, b.n - 1), *lf = fx_get_logits(f, NULL);
	CHECKF(l && lf && !memcmp(l, lf, (size_t)nv * sizeof(float)),
	       "%s: logits after reusing %u tokens differ from a fresh prefill", label, got);
	printf("%-10s prefix of %d shared tokens: %u reused from a state snapshot, logits == fresh\n",
	       label, SHARED, got);
out:
	fx_context_free(c);
	fx_context_free(f);
}

/* A copy of the fixture with one sed edit of config.json must fail to
 * load with rc and a message holding needle. */
static void check_bad(const char *edit, int want_rc, const char *needle)
{
	char tmp[64] = "/tmp/fx_rec_XXXXXX", cmd[1024];
	if (!mkdtemp(tmp)) {
		CHECK(false);
		return;
	}
	snprintf(cmd, sizeof(cmd), "sed '%s' %s/config.json > %s/config.json && cp %s/model.safetensors %s/",
		 edit, DIR, tmp, DIR, tmp);
	CHECK(system(cmd) == 0);
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	int rc = fx_model_load(tmp, NULL, &m, &err);
	CHECKF(rc == want_rc && strstr(err.msg, needle), "config edit '%s': rc %d '%s'", edit, rc,
	       err.msg);
	if (!rc)
		fx_model_free(m);
	printf("bad config (%s): %s\n", edit, err.msg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	CHECK(system(cmd) == 0);
}

/* A copy of dir whose config.json has `from` replaced by `to` (in C: the
 * edits span lines) must load with rc (and, failing, say needle). */
static void check_cfg_edit(const char *dir, const char *from, const char *to, int want_rc,
			   const char *needle)
{
	char tmp[64] = "/tmp/fx_rec_XXXXXX", path[512], cmd[1024];
	if (!mkdtemp(tmp)) {
		CHECK(false);
		return;
	}
	snprintf(path, sizeof(path), "%s/config.json", dir);
	FILE *f = fopen(path, "rb");
	char buf[8192];
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	char *at = strstr(buf, from);
	CHECKF(at != NULL, "%s: '%s' not in config.json", dir, from);
	if (!at)
		return;
	snprintf(path, sizeof(path), "%s/config.json", tmp);
	f = fopen(path, "wb");
	CHECK(f != NULL);
	if (!f)
		return;
	fwrite(buf, 1, (size_t)(at - buf), f);
	fputs(to, f);
	fputs(at + strlen(from), f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cp %s/model.safetensors %s/", dir, tmp);
	CHECK(system(cmd) == 0);
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	int rc = fx_model_load(tmp, NULL, &m, &err);
	CHECKF(rc == want_rc && (!rc || strstr(err.msg, needle)), "config '%s' -> '%s': rc %d '%s'",
	       from, to, rc, err.msg);
	if (!rc)
		fx_model_free(m);
	printf("config edit (%s): %s\n", to, rc ? err.msg : "loads");
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
	CHECK(system(cmd) == 0);
}

int main(void)
{
	/* LFM2 (attention beside the convolutions) and Mamba-2 (no attention:
	 * the backing keeps positions only) */
	static const char *const dirs[] = { DIR, "tests/fixtures/hf-tiny-next/mamba2",
					    "tests/fixtures/hf-tiny-next/granitemoehybrid",
					    "tests/fixtures/hf-tiny-next/qwen3_5",
					    "tests/fixtures/hf-tiny-next/qwen3_next" /* grouped heads, ssm_ba */ };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		struct fx_err err = { 0 };
		struct fx_model *m = NULL;
		if (fx_model_load(dirs[i], NULL, &m, &err)) {
			CHECKF(false, "%s: %s", dirs[i], err.msg);
			continue;
		}
		printf("%s:\n", dirs[i]);
		check_lifecycle(m, FX_KV_CONTIGUOUS, "contiguous");
		check_lifecycle(m, FX_KV_PAGED, "paged");
		bool attends = !strstr(dirs[i], "mamba2");
		check_prefix(m, FX_KV_CONTIGUOUS, attends, "contiguous");
		check_prefix(m, FX_KV_PAGED, attends, "paged");
		fx_model_free(m);
	}
	/* layer 0 said to attend, but its tensors are a convolution's */
	check_bad("0,/\"conv\"/s//\"full_attention\"/", FX_E_FORMAT, "attn_q");
	/* the attention layer said to be a convolution */
	check_bad("s/\"full_attention\"/\"conv\"/", FX_E_FORMAT, "recurrent mixers");
	/* a conv width the conv tensors do not have */
	check_bad("s/\"conv_L_cache\": 3/\"conv_L_cache\": 4/", FX_E_FORMAT, "shortconv.conv");
	/* Mamba's time_step_limit: Python's bare Infinity (transformers 4's
	 * json) reads as infinity; a finite limit is refused (transformers
	 * clamps dt with it in prefill but not in decode) */
	static const char *const lim = "{\n      \"__float__\": \"Infinity\"\n    }";
	check_cfg_edit("tests/fixtures/hf-tiny-next/mamba2", lim, "Infinity", FX_OK, "");
	check_cfg_edit("tests/fixtures/hf-tiny-next/mamba2", lim, "10.0", FX_E_UNSUPPORTED,
		       "time_step_limit");
	/* a layer type ferrox does not know */
	check_bad("0,/\"conv\"/s//\"retention\"/", FX_E_UNSUPPORTED, "retention");
	return check_exit();
}
