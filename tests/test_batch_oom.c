/* Decoding under allocation failure, on a paged context with prefix
 * caching (tests/fixtures/hf-tiny/llama, blocks of 4): the k-th heap call
 * of one fx_decode fails, for every k until a decode needs no more calls.
 * Each decode either succeeds with the logits of a run without failures,
 * or returns FX_E_NOMEM leaving the sequence as it was (no tokens, no
 * blocks). Either way, decoding on, and a later identical prompt (which
 * reuses cached blocks), give a fresh context's logits bit for bit.
 *
 * Before: when the logits buffer could not grow, the rows never computed
 * were committed and their blocks keyed into the prefix cache, so the
 * later prompt reused never-written K/V (logits off by up to 2.5); a
 * failed kv_seq_commit was ignored, its table lagging n_past.
 * malloc/calloc/realloc are wrapped by the linker (tests.cmake). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ferrox.h"
#include "oom_wrap.h"


enum { N_P = 12, N_Q = 70 }; /* Q takes the token record past its first 64 */

static struct fx_context *paged(const struct fx_model *m)
{
	struct fx_context_params p = fx_context_default_params();
	struct fx_context *c = NULL;
	struct fx_err err = { 0 };
	p.n_ctx = 128;
	p.n_seq_max = 2;
	p.kv_layout = FX_KV_PAGED;
	p.block_size = 4;
	p.n_threads = 2;
	p.type_k = p.type_v = FX_KV_F32;
	CHECKF(fx_context_create(m, &p, &c, &err) == FX_OK, "context: %s", err.msg);
	return c;
}

/* Logits of fx_decode(toks, all_logits) on c, copied into out (rows x nv). */
static int decode_into(struct fx_context *c, const fx_token *toks, int n, bool all, float *out,
		       int32_t nv)
{
	int rc = fx_decode(c, toks, n, all);
	int32_t rows = 0;
	const float *l = fx_get_logits(c, &rows);
	if (rc == FX_OK && l && rows == (all ? n : 1))
		memcpy(out, l, (size_t)rows * (size_t)nv * sizeof(float));
	return rc;
}

int main(void)
{
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	if (fx_model_load("tests/fixtures/hf-tiny/llama", NULL, &m, &err)) {
		CHECKF(false, "llama: %s", err.msg);
		return check_exit();
	}
	int32_t nv = fx_model_n_vocab(m);
	fx_token p[N_P], q[N_Q];
	for (int i = 0; i < N_P; i++)
		p[i] = (fx_token)((i * 37 + 5) % nv);
	for (int i = 0; i < N_Q; i++)
		q[i] = (fx_token)((i * 53 + 11) % nv);
	size_t row = (size_t)nv * sizeof(float);
	float *ref_p = malloc(N_P * row), *ref_q = malloc(N_Q * row), *ref_last = malloc(row);
	float *got = malloc((N_P + N_Q) * row);
	/* References: fresh contexts, no failures. */
	struct fx_context *c = paged(m);
	CHECK(c && decode_into(c, p, N_P, true, ref_p, nv) == FX_OK);
	CHECK(c && decode_into(c, q, N_Q, true, ref_q, nv) == FX_OK);
	fx_context_free(c);
	c = paged(m);
	CHECK(c && decode_into(c, p, N_P, false, ref_last, nv) == FX_OK);
	fx_context_free(c);

	long k, n_nomem = 0, n_ok = 0;
	for (k = 0; k < 10000; k++) {
		c = paged(m);
		if (!c)
			break;
		/* Decode P (every row's logits: the logits buffer grows) and Q,
		 * the k-th heap call of the two failing. */
		calls = 0;
		fail_at = k;
		int rc = decode_into(c, p, N_P, true, got, nv), rc_q;
		if (rc == FX_OK) {
			CHECKF(!memcmp(got, ref_p, N_P * row), "k=%ld: P's logits differ", k);
			rc_q = decode_into(c, q, N_Q, true, got + N_P * (size_t)nv, nv);
		} else {
			fail_at = -1;
			CHECKF(rc == FX_E_NOMEM, "k=%ld: P rc %d", k, rc);
			CHECKF(fx_seq_n_past(c, 0) == 0 && fx_context_kv_blocks_used(c) == 0 &&
			       !fx_get_logits(c, NULL),
			       "k=%ld: failed P left n_past %u, %d blocks, logits %p", k,
			       fx_seq_n_past(c, 0), fx_context_kv_blocks_used(c),
			       (const void *)fx_get_logits(c, NULL));
			/* Nothing of the failed decode was cached: the same prompt on
			 * a fresh sequence reuses no block and computes the logits. */
			fx_seq_free(c, 0);
			int64_t h0 = fx_context_prefix_hits(c);
			CHECK(decode_into(c, p, N_P, false, got, nv) == FX_OK);
			CHECKF(fx_context_prefix_hits(c) == h0, "k=%ld: %lld tokens reused after a failed "
			       "decode", k, (long long)(fx_context_prefix_hits(c) - h0));
			CHECKF(!memcmp(got, ref_last, row), "k=%ld: P after a failed P: logits differ", k);
			fx_seq_free(c, 0);
			CHECK(decode_into(c, p, N_P, true, got, nv) == FX_OK);
			CHECKF(!memcmp(got, ref_p, N_P * row), "k=%ld: P after a failed P differs", k);
			rc_q = decode_into(c, q, N_Q, true, got + N_P * (size_t)nv, nv);
		}
		bool reached = calls > k;
		fail_at = -1;
		bool q_failed = rc_q == FX_E_NOMEM;
		if (q_failed) {
			CHECKF(fx_seq_n_past(c, 0) == N_P, "k=%ld: failed Q left n_past %u", k,
			       fx_seq_n_past(c, 0));
			rc_q = decode_into(c, q, N_Q, true, got + N_P * (size_t)nv, nv);
		}
		CHECKF(rc_q == FX_OK, "k=%ld: Q rc %d", k, rc_q);
		CHECKF(!memcmp(got + N_P * (size_t)nv, ref_q, N_Q * row), "k=%ld: Q's logits differ", k);
		/* The same prompt on a fresh sequence reuses P's first two blocks:
		 * what they hold must be what was computed. */
		fx_seq_free(c, 0);
		int64_t hits = fx_context_prefix_hits(c);
		CHECK(decode_into(c, p, N_P, false, got, nv) == FX_OK);
		CHECKF(fx_context_prefix_hits(c) - hits == 8, "k=%ld: %lld prefix tokens reused, want 8",
		       k, (long long)(fx_context_prefix_hits(c) - hits));
		CHECKF(!memcmp(got, ref_last, row), "k=%ld: the reused prefix gives other logits", k);
		n_nomem += rc == FX_E_NOMEM || q_failed;
		n_ok += rc == FX_OK && !q_failed;
		fx_context_free(c);
		if (!reached)
			break;
	}
	printf("%ld heap calls failed in turn: %ld decodes refused (FX_E_NOMEM), %ld done anyway\n",
	       k, n_nomem, n_ok);
	CHECKF(n_nomem >= 3, "only %ld decodes met a failing heap call", n_nomem);
	free(ref_p);
	free(ref_q);
	free(ref_last);
	free(got);
	fx_model_free(m);
	return check_exit();
}
