/* llama-perplexity's log-probability file and KL statistics (kld.h). */
#include "kld.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KLD_MAGIC "_logits_"
/* Log-probabilities this far below the top one are stored as code 0 and
 * left out of the KL sum (llama-perplexity's cut). */
#define KLD_RANGE 16.0f

size_t kld_record_len(int32_t n_vocab)
{
	return 2 * (((size_t)n_vocab + 1) / 2) + 4;
}

bool kld_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
		      const int32_t *tokens)
{
	size_t n = (size_t)n_chunk * n_ctx;
	if (fwrite(KLD_MAGIC, 1, 8, f) != 8 || fwrite(&n_ctx, 4, 1, f) != 1 ||
	    fwrite(&n_vocab, 4, 1, f) != 1 || fwrite(&n_chunk, 4, 1, f) != 1 ||
	    fwrite(tokens, 4, n, f) != n) {
		fprintf(stderr, "error: cannot write the log-probability file's header\n");
		return false;
	}
	return true;
}

void kld_row_scan(struct kld_row *r, const float *logits, int32_t n_vocab)
{
	r->logits = logits;
	r->max = r->min = logits[0];
	r->top = 0;
	for (int32_t i = 1; i < n_vocab; i++) {
		if (logits[i] > r->max) {
			r->max = logits[i];
			r->top = i;
		}
		r->min = logits[i] < r->min ? logits[i] : r->min;
	}
	r->sum_exp = 0;
	for (int32_t i = 0; i < n_vocab; i++)
		r->sum_exp += expf(logits[i] - r->max);
}

double kld_row_nll(const struct kld_row *r, int32_t tok)
{
	return -((double)(r->logits[tok] - r->max) - log(r->sum_exp));
}

void kld_encode(const struct kld_row *r, int32_t n_vocab, uint16_t *rec)
{
	const float *logits = r->logits;
	float mx = r->max, mn = r->min;
	if (mn < mx - KLD_RANGE)
		mn = mx - KLD_RANGE;
	float lse = (float)log(r->sum_exp);
	float head[2] = { (mx - mn) / 65535.0f, mn - mx - lse };
	memcpy(rec, head, sizeof(head));
	uint16_t *code = rec + 4;
	memset(code, 0, (kld_record_len(n_vocab) - 4) * sizeof(uint16_t));
	if (head[0] == 0)
		return;
	float inv = 1 / head[0];
	for (int32_t i = 0; i < n_vocab; i++)
		if (logits[i] > mn)
			code[i] = (uint16_t)lrintf(inv * (logits[i] - mn));
}

bool kld_read_header(FILE *f, const char *path, uint32_t *n_ctx, int32_t *n_vocab,
		     int32_t *n_chunk, int32_t **tokens)
{
	char magic[8];
	*tokens = NULL;
	if (fread(magic, 1, 8, f) != 8 || memcmp(magic, KLD_MAGIC, 8)) {
		fprintf(stderr, "error: %s is not a log-probability file "
			"(llama-perplexity / ferrox perplexity --kl-divergence-base)\n", path);
		return false;
	}
	if (fread(n_ctx, 4, 1, f) != 1 || fread(n_vocab, 4, 1, f) != 1 ||
	    fread(n_chunk, 4, 1, f) != 1) {
		fprintf(stderr, "error: %s is truncated in its header\n", path);
		return false;
	}
	if (*n_ctx < 4 || *n_ctx > (1u << 20) || *n_vocab < 1 || *n_chunk < 1 ||
	    *n_chunk > (1 << 20)) {
		fprintf(stderr, "error: %s: implausible header (n_ctx %u, n_vocab %d, n_chunk %d)\n",
			path, *n_ctx, *n_vocab, *n_chunk);
		return false;
	}
	size_t n = (size_t)*n_chunk * *n_ctx;
	/* The records must follow the tokens: a header that promises more
	 * than the file holds is refused before anything is allocated. */
	long here = ftell(f), end = -1;
	if (here >= 0 && !fseek(f, 0, SEEK_END))
		end = ftell(f);
	if (end < 0 || fseek(f, here, SEEK_SET)) {
		fprintf(stderr, "error: cannot seek in %s\n", path);
		return false;
	}
	size_t recs = (size_t)*n_chunk * (*n_ctx - 1 - *n_ctx / 2);
	double want = (double)n * 4 + (double)recs * (double)kld_record_len(*n_vocab) * 2;
	if (want != (double)(end - here)) {
		fprintf(stderr, "error: %s is %s: its header promises %d chunk(s) of %u tokens over a "
			"vocabulary of %d, %.0f bytes after it, and it holds %ld\n", path,
			want > (double)(end - here) ? "truncated" : "not what its header says",
			*n_chunk, *n_ctx, *n_vocab, want, end - here);
		return false;
	}
	*tokens = malloc(n * sizeof(int32_t));
	if (!*tokens) {
		fprintf(stderr, "error: out of memory for %zu tokens of %s\n", n, path);
		return false;
	}
	if (fread(*tokens, 4, n, f) != n) {
		fprintf(stderr, "error: %s is truncated in its tokens\n", path);
		free(*tokens);
		*tokens = NULL;
		return false;
	}
	return true;
}

bool kld_record_ok(const uint16_t *rec)
{
	float head[2];
	memcpy(head, rec, sizeof(head));
	return isfinite(head[0]) && isfinite(head[1]) && head[0] >= 0 &&
	       head[0] * 65535.0f <= KLD_RANGE * 1.001f && head[1] <= 0;
}

bool kld_stats_init(struct kld_stats *s, size_t cap)
{
	memset(s, 0, sizeof(*s));
	s->cap = cap;
	s->kld = malloc((cap ? cap : 1) * sizeof(float));
	s->p_diff = malloc((cap ? cap : 1) * sizeof(float));
	if (!s->kld || !s->p_diff) {
		kld_stats_free(s);
		return false;
	}
	return true;
}

void kld_stats_free(struct kld_stats *s)
{
	free(s->kld);
	free(s->p_diff);
	s->kld = s->p_diff = NULL;
}

bool kld_stats_add(struct kld_stats *s, const struct kld_row *r, int32_t n_vocab,
		   const uint16_t *rec, int32_t tok)
{
	const float *logits = r->logits;
	int32_t top = r->top, top_base = 0;
	float mx = r->max, lse = (float)log(r->sum_exp);
	float head[2];
	memcpy(head, rec, sizeof(head));
	const uint16_t *code = rec + 4;
	float nll = mx + lse - logits[tok];
	float nll_base = -(head[0] * code[tok] + head[1]);
	float lp_top = 0;
	double kl = 0, mass = 0;
	for (int32_t i = 0; i < n_vocab; i++) {
		float lp = head[0] * code[i] + head[1];
		if (i == 0 || lp > lp_top) {
			lp_top = lp;
			top_base = i;
		}
		if (lp > -KLD_RANGE) {
			kl += expf(lp) * (lp - (logits[i] - mx - lse));
			mass += expf(lp);
		}
	}
	/* A record's probabilities sum to 1, less what sits at the floor
	 * (each below e^-16; 0.03 for a 262k vocabulary) and the codes'
	 * rounding: far from that, the record is not a distribution. */
	if (!(mass > 0.9 && mass < 1.01))
		return false;
	float p_diff = expf(-nll) - expf(-nll_base);
	s->sum_nll += nll;
	s->sum_nll2 += (double)nll * nll;
	s->sum_nll_base += nll_base;
	s->sum_nll_base2 += (double)nll_base * nll_base;
	s->sum_nll_nll_base += (double)nll * nll_base;
	s->sum_kld += kl;
	s->sum_kld2 += kl * kl;
	s->sum_p_diff += p_diff;
	s->sum_p_diff2 += (double)p_diff * p_diff;
	s->sum_p_diff4 += (double)p_diff * p_diff * p_diff * p_diff;
	s->n_same_top += top == top_base;
	s->chunk_diff += (double)nll - nll_base;
	s->chunk_count++;
	if (s->count < s->cap) {
		s->kld[s->count] = (float)kl;
		s->p_diff[s->count] = p_diff;
	}
	s->count++;
	return true;
}

void kld_stats_end_chunk(struct kld_stats *s)
{
	if (!s->chunk_count)
		return;
	double m = s->chunk_diff / (double)s->chunk_count;
	s->sum_chunk += m;
	s->sum_chunk2 += m * m;
	s->n_chunks++;
	s->chunk_diff = 0;
	s->chunk_count = 0;
}

/* Mean of the summed quantity and the standard error of that mean. */
static void mean_se(double sum, double sum2, size_t n, double *mean, double *se)
{
	*mean = n ? sum / (double)n : 0;
	double var = n ? sum2 / (double)n - *mean * *mean : 0;
	*se = var > 0 && n > 10 ? sqrt(var / (double)(n - 1)) : 0;
}

/* Covariance of the two means (of nll and nll_base). */
static double cov_of_means(const struct kld_stats *s)
{
	if (s->count < 10)
		return 0;
	double n = (double)s->count;
	return (s->sum_nll_nll_base / n - (s->sum_nll / n) * (s->sum_nll_base / n)) / (n - 1);
}

struct kld_summary {
	double lp, lp_se, lpb, lpb_se, cov, ratio, ratio_se, kl, kl_se;
	double rms, rms_se, top, top_se;
};

static struct kld_summary summarize(const struct kld_stats *s)
{
	struct kld_summary r;
	mean_se(s->sum_nll, s->sum_nll2, s->count, &r.lp, &r.lp_se);
	mean_se(s->sum_nll_base, s->sum_nll_base2, s->count, &r.lpb, &r.lpb_se);
	r.cov = cov_of_means(s);
	r.ratio = r.lp - r.lpb;
	double v = r.lp_se * r.lp_se + r.lpb_se * r.lpb_se - 2 * r.cov;
	r.ratio_se = v > 0 ? sqrt(v) : 0;
	mean_se(s->sum_kld, s->sum_kld2, s->count, &r.kl, &r.kl_se);
	double mse, mse_se;
	mean_se(s->sum_p_diff2, s->sum_p_diff4, s->count, &mse, &mse_se);
	r.rms = sqrt(mse);
	r.rms_se = r.rms > 0 ? 0.5 / r.rms * mse_se : 0;
	r.top = s->count ? (double)s->n_same_top / (double)s->count : 0;
	r.top_se = s->count > 1 ? sqrt(r.top * (1 - r.top) / (double)(s->count - 1)) : 0;
	return r;
}

void kld_print_chunk(FILE *out, const struct kld_stats *s, int chunk)
{
	if (chunk == 1)
		fprintf(out, "chunk             PPL               ln(PPL(Q)/PPL(base))"
			"          KL Divergence              Δp RMS            Same top p\n");
	struct kld_summary r = summarize(s);
	fprintf(out, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f"
		"    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n", chunk, exp(r.lp), exp(r.lp) * r.lp_se,
		r.ratio, r.ratio_se, r.kl, r.kl_se, 100 * r.rms, 100 * r.rms_se,
		100 * r.top, 100 * r.top_se);
	fflush(out);
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* Linear interpolation between the sorted values around fraction * (n-1). */
static float percentile(const float *v, size_t n, float fraction)
{
	if (fraction <= 0)
		return v[0];
	if (fraction >= 1)
		return v[n - 1];
	float p = fraction * (float)(n - 1);
	size_t i = (size_t)p;
	p -= (float)i;
	return (1 - p) * v[i] + p * v[i + 1 < n ? i + 1 : n - 1];
}

static void print_spread(FILE *out, const char *what, const float *v, size_t n,
			 double scale, const char *unit)
{
	static const struct { const char *label; float at; } rows[] = {
		{ "Maximum", 1 }, { "99.9%  ", 0.999f }, { "99.0%  ", 0.99f },
		{ "95.0%  ", 0.95f }, { "90.0%  ", 0.9f }, { "75.0%  ", 0.75f },
		{ "Median ", 0.5f }, { "25.0%  ", 0.25f }, { "10.0%  ", 0.1f }, { " 5.0%  ", 0.05f }, { " 1.0%  ", 0.01f },
		{ " 0.1%  ", 0.001f }, { "Minimum", 0 },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		fprintf(out, "%s %s: %10.6f%s\n", rows[i].label, what,
			scale * percentile(v, n, rows[i].at), unit);
}

void kld_print_final(FILE *out, struct kld_stats *s)
{
	if (s->count < 100 || s->count > s->cap) {
		fprintf(out, "\n(%zu positions: too few for the statistics)\n", s->count);
		return;
	}
	struct kld_summary r = summarize(s);
	double ppl = exp(r.lp), ppl_b = exp(r.lpb);
	double ppl_se = ppl * r.lp_se, ppl_b_se = ppl_b * r.lpb_se;
	double cov_ppl = ppl * ppl_b * r.cov;
	double diff_v = ppl_se * ppl_se + ppl_b_se * ppl_b_se - 2 * cov_ppl;
	fprintf(out, "\n====== Perplexity statistics ======\n");
	fprintf(out, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_se);
	fprintf(out, "Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_b, ppl_b_se);
	fprintf(out, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n",
		r.lp_se > 0 && r.lpb_se > 0 ? 100 * r.cov / (r.lp_se * r.lpb_se) : 0);
	fprintf(out, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.ratio, r.ratio_se);
	if (s->n_chunks > 1) {
		double n = (double)s->n_chunks, m = s->sum_chunk / n;
		double v = (s->sum_chunk2 / n - m * m) / (n - 1);
		fprintf(out, "  its SE from the %zu chunks' means : %10.6f\n", s->n_chunks,
			v > 0 ? sqrt(v) : 0);
	}
	fprintf(out, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", exp(r.ratio),
		exp(r.ratio) * r.ratio_se);
	fprintf(out, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", ppl - ppl_b,
		diff_v > 0 ? sqrt(diff_v) : 0);

	qsort(s->kld, s->count, sizeof(float), cmp_float);
	qsort(s->p_diff, s->count, sizeof(float), cmp_float);
	fprintf(out, "\n====== KL divergence statistics ======\n");
	fprintf(out, "Mean    KLD: %10.6f ± %10.6f\n", r.kl, r.kl_se);
	print_spread(out, "KLD", s->kld, s->count, 1, "");

	double pd, pd_se;
	mean_se(s->sum_p_diff, s->sum_p_diff2, s->count, &pd, &pd_se);
	fprintf(out, "\n====== Token probability statistics ======\n");
	fprintf(out, "Mean    Δp: %6.3f ± %5.3f %%\n", 100 * pd, 100 * pd_se);
	print_spread(out, "Δp", s->p_diff, s->count, 100, "%");
	fprintf(out, "RMS Δp    : %6.3f ± %5.3f %%\n", 100 * r.rms, 100 * r.rms_se);
	fprintf(out, "Same top p: %6.3f ± %5.3f %%\n", 100 * r.top, 100 * r.top_se);
}
