/* Multi-token-prediction blocks (Qwen 3.5 mtp.*): loaded from the
 * checkpoint and from the GGUF ferrox convert writes (llama.cpp's
 * blk.N.nextn.* names), run by an MTP context on the target context's
 * final hidden rows, and compared with the reference
 * scripts/make-mtp-fixtures.py computed from transformers' modules
 * (mtp_logits, mtp_hidden: 1e-4 of max(1, max|ref|)); the same rows split
 * over calls and ubatches, and after a roll-back, give the same logits bit
 * for bit; misuse is refused with a message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ferrox.h"
#include "fixture_ref.h"

#define DIR "tests/fixtures/hf-tiny-next/"

static double rel_err(const float *a, const struct st_tensor *t, size_t off, size_t n)
{
	double d = 0, mx = 1;
	for (size_t i = 0; i < n; i++) {
		float r;
		memcpy(&r, (const uint8_t *)t->data + (off + i) * sizeof(r), sizeof(r));
		d = fmax(d, fabs((double)a[i] - r));
		mx = fmax(mx, fabs((double)r));
	}
	return d / mx;
}

static struct fx_context *ctx_new(const struct fx_model *m, bool mtp, uint32_t ubatch, int32_t kv_layout)
{
	struct fx_context_params p = fx_context_default_params();
	struct fx_context *c = NULL;
	struct fx_err err;
	p.n_ctx = 64;
	p.n_ubatch = ubatch;
	p.n_threads = 2;
	p.type_k = p.type_v = FX_KV_F32;
	p.hidden = true;
	p.mtp = mtp;
	p.kv_layout = kv_layout;
	int rc = fx_context_create(m, &p, &c, &err);
	CHECKF(rc == FX_OK, "context (mtp %d): %s", mtp, err.msg);
	return rc == FX_OK ? c : NULL;
}

/* The MTP rows of tok[0..n) at positions from fx_seq_n_past, given their
 * hidden inputs h_in [n][d], into logits [n][nv] and hidden [n][d]. */
static int mtp_rows(struct fx_context *c, const int32_t *tok, const float *h_in, int n, int32_t nv,
		    int32_t d, float *logits, float *hidden)
{
	fx_seq seq[64];
	bool keep[64];
	for (int i = 0; i < n; i++) {
		seq[i] = 0;
		keep[i] = true;
	}
	struct fx_batch b = { .n = n, .seq = seq, .token = tok, .logits = keep, .hidden = h_in };
	int rc = fx_batch_decode(c, &b, NULL);
	CHECKF(rc == FX_OK, "MTP decode: %s", fx_context_errmsg(c));
	for (int i = 0; rc == FX_OK && i < n; i++) {
		const float *l = fx_batch_logits(c, i), *h = fx_batch_hidden(c, i);
		CHECK(l && h);
		if (!l || !h)
			return FX_E_INVALID;
		memcpy(logits + (size_t)i * nv, l, (size_t)nv * sizeof(float));
		memcpy(hidden + (size_t)i * d, h, (size_t)d * sizeof(float));
	}
	return rc;
}

/* The fixture's model at path (its directory or a converted GGUF): the
 * target's hidden rows, the MTP block on them against the reference, then
 * split / rolled-back runs against the whole. *out_logits gets the
 * whole-run MTP logits (malloc'ed) for comparing two sources. */
static void run(const char *name, const char *path, const struct ref *r, float **out_logits)
{
	struct fx_model *m = NULL;
	struct fx_err err;
	int rc = fx_model_load(path, NULL, &m, &err);
	CHECKF(rc == FX_OK, "%s: %s", path, err.msg);
	if (rc)
		return;
	CHECKF(fx_model_n_mtp(m) == 1, "%s: %d MTP blocks", path, fx_model_n_mtp(m));
	int n = r->n_prompt;
	int32_t nv = fx_model_n_vocab(m), d = fx_model_n_embd(m);
	float *h_in = calloc((size_t)n * d, sizeof(float));
	float *lg = malloc((size_t)n * nv * sizeof(float)), *hd = malloc((size_t)n * d * sizeof(float));
	float *lg2 = malloc((size_t)n * nv * sizeof(float)), *hd2 = malloc((size_t)n * d * sizeof(float));
	struct fx_context *t = ctx_new(m, false, 8, FX_KV_CONTIGUOUS), *c = ctx_new(m, true, 64, FX_KV_CONTIGUOUS);
	if (!h_in || !lg || !hd || !lg2 || !hd2 || !t || !c)
		goto out;
	/* the target's final hidden rows, shifted: row p gets hidden p - 1 */
	CHECK(fx_decode(t, r->prompt, n, false) == FX_OK);
	for (int i = 0; i + 1 < n; i++) {
		const float *h = fx_batch_hidden(t, i);
		CHECKF(h != NULL, "%s: no hidden row %d", name, i);
		if (h)
			memcpy(h_in + (size_t)(i + 1) * d, h, (size_t)d * sizeof(float));
	}
	const struct st_tensor *ref_in = st_find(r->st, "mtp_h_in"), *ref_l = st_find(r->st, "mtp_logits");
	const struct st_tensor *ref_h = st_find(r->st, "mtp_hidden");
	CHECK(ref_in && ref_l && ref_h);
	if (!ref_in || !ref_l || !ref_h)
		goto out;
	double e_in = rel_err(h_in, ref_in, 0, (size_t)n * d);
	CHECKF(e_in < 1e-4, "%s: target hidden rows off by %.3g", name, e_in);
	if (mtp_rows(c, r->prompt, h_in, n, nv, d, lg, hd))
		goto out;
	double el = rel_err(lg, ref_l, 0, (size_t)n * nv), eh = rel_err(hd, ref_h, 0, (size_t)n * d);
	printf("%s (%s): MTP logits %.2e, hidden %.2e, target hidden %.2e\n", name, path, el, eh, e_in);
	CHECKF(el < 1e-4 && eh < 1e-4, "%s: MTP logits off by %.3g, hidden by %.3g", name, el, eh);
	/* the same rows in two calls through 3-row ubatches, after a
	 * roll-back of rows the caller rejected: bit for bit */
	struct fx_context *c3 = ctx_new(m, true, 3, FX_KV_CONTIGUOUS);
	if (c3) {
		int k = n / 2;
		CHECK(mtp_rows(c3, r->prompt, h_in, k + 4, nv, d, lg2, hd2) == FX_OK);
		CHECK(fx_seq_rm(c3, 0, (uint32_t)k) == FX_OK && fx_seq_n_past(c3, 0) == (uint32_t)k);
		CHECK(mtp_rows(c3, r->prompt + k, h_in + (size_t)k * d, n - k, nv, d, lg2 + (size_t)k * nv,
			       hd2 + (size_t)k * d) == FX_OK);
		CHECKF(!memcmp(lg, lg2, (size_t)n * nv * sizeof(float)) &&
		       !memcmp(hd, hd2, (size_t)n * d * sizeof(float)),
		       "%s: MTP rows split over calls and ubatches differ", name);
		fx_context_free(c3);
	}
	/* the draft-mtp drafter on the same rows: its first draft after the
	 * prompt is the block's argmax at the last position */
	struct fx_spec_params sp = fx_spec_default_params();
	struct fx_spec_drafter *dr = NULL;
	sp.types = FX_SPEC_DRAFT_MTP;
	sp.n_max = 1;
	if (fx_spec_drafter_create(&sp, m, NULL, 64, 2, &dr, &err) == FX_OK) {
		struct fx_context *t2 = ctx_new(m, false, 64, FX_KV_CONTIGUOUS);
		fx_token d1 = -1;
		int32_t best = 0;
		const float *last = lg + (size_t)(n - 1) * nv;
		for (int32_t v = 1; v < nv; v++)
			if (last[v] > last[best])
				best = v;
		CHECK(t2 && fx_decode(t2, r->prompt, n - 1, false) == FX_OK &&
		      fx_spec_drafter_observe(dr, t2, 0, 0, n - 1) == FX_OK);
		CHECKF(fx_spec_drafter_draft(dr, r->prompt, n, &d1, 1) == 1 && d1 == best,
		       "%s: draft-mtp drafted %d, the block's argmax is %d", name, d1, best);
		fx_context_free(t2);
		fx_spec_drafter_free(dr);
	} else {
		CHECKF(0, "draft-mtp drafter: %s", err.msg);
	}
	/* misuse: no hidden rows; fx_decode; paged layout */
	fx_seq s0 = 0;
	struct fx_batch nb = { .n = 1, .seq = &s0, .token = r->prompt };
	CHECK(fx_batch_decode(c, &nb, NULL) == FX_E_INVALID && strstr(fx_context_errmsg(c), "hidden"));
	CHECK(fx_decode(c, r->prompt, 1, false) == FX_E_INVALID);
	struct fx_context_params pp = fx_context_default_params();
	struct fx_context *bad = NULL;
	pp.mtp = true;
	pp.kv_layout = FX_KV_PAGED;
	CHECK(fx_context_create(m, &pp, &bad, &err) == FX_E_UNSUPPORTED && !bad);
	if (out_logits) {
		*out_logits = lg;
		lg = NULL;
	}
out:
	fx_context_free(t);
	fx_context_free(c);
	free(h_in);
	free(lg);
	free(hd);
	free(lg2);
	free(hd2);
	fx_model_free(m);
}

int main(void)
{
	static const char *const names[] = { "qwen3_5_mtp", "qwen3_5_moe_mtp" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char dir[256], gguf[256];
		struct ref r;
		snprintf(dir, sizeof(dir), DIR "%s", names[i]);
		if (!load_ref(dir, &r)) {
			CHECKF(0, "%s: cannot read its references", dir);
			continue;
		}
		float *a = NULL, *b = NULL;
		run(names[i], dir, &r, &a);
		/* the f32 GGUF ferrox convert writes: llama.cpp's nextn names,
		 * the same logits bit for bit */
		snprintf(gguf, sizeof(gguf), "/tmp/test_mtp_%d_%s.gguf", (int)getpid(), names[i]);
		struct fx_err err;
		int rc = fx_convert(dir, gguf, "f32", NULL, &err);
		CHECKF(rc == FX_OK, "convert %s: %s", dir, err.msg);
		if (rc == FX_OK) {
			run(names[i], gguf, &r, &b);
			struct fx_model *m = NULL;
			if (a && b && fx_model_load(gguf, NULL, &m, &err) == FX_OK) {
				size_t nn = (size_t)r.n_prompt * (size_t)fx_model_n_vocab(m);
				CHECKF(!memcmp(a, b, nn * sizeof(float)), "%s: the GGUF's MTP logits differ "
				       "from the checkpoint's", names[i]);
				fx_model_free(m);
			}
			unlink(gguf);
		}
		free(a);
		free(b);
		st_close(r.st);
	}
	/* a model without MTP blocks has no MTP context */
	struct fx_model *m = NULL;
	struct fx_err err;
	if (fx_model_load(DIR "qwen3_5", NULL, &m, &err) == FX_OK) {
		struct fx_context_params p = fx_context_default_params();
		struct fx_context *c = NULL;
		p.mtp = true;
		CHECK(fx_model_n_mtp(m) == 0);
		CHECK(fx_context_create(m, &p, &c, &err) == FX_E_INVALID && strstr(err.msg, "multi-token"));
		fx_model_free(m);
	}
	return check_exit();
}
