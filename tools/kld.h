/* KL divergence between two runs over the same tokens, in llama-perplexity's
 * file format and statistics (tools/perplexity/perplexity.cpp: the
 * --kl-divergence-base writer and kl_divergence()), so a file written by
 * either engine can be read by the other.
 *
 * File (native byte order, little-endian on every machine llama.cpp and
 * ferrox run on):
 *   "_logits_"                 8 bytes
 *   n_ctx                      uint32
 *   n_vocab, n_chunk           int32, int32
 *   tokens[n_chunk * n_ctx]    int32, the text's tokens as tokenized (not
 *                              the BOS that replaces each chunk's first)
 *   then per chunk, per scored position (n_ctx/2 .. n_ctx-2, i.e.
 *   n_ctx - 1 - n_ctx/2 records), one record of kld_record_len(n_vocab)
 *   uint16: float scale, float min_log_prob, then a 16-bit code per
 *   vocabulary entry (one pad entry when n_vocab is odd);
 *   log p_i = scale * code_i + min_log_prob for log-probabilities within
 *   16 nats of the top one, code 0 below that.
 * The 16-bit codes resolve log-probabilities to 16/65535 nats. A token
 * more than 16 nats below the top one reads back as exactly 16 below, so
 * the base run's nll, and PPL(base), come out a little low when the text
 * holds such tokens (Gemma 3 on GPL-3: 13.8887 against its 13.9062);
 * llama-perplexity reads its own files the same way. The Q side is exact.
 */
#ifndef FX_TOOLS_KLD_H
#define FX_TOOLS_KLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One row of logits [n_vocab], scanned once for the perplexity sum, the
 * encoder and the KL statistics: its max (top: the first index holding
 * it), its min, and the sum of exp(x_i - max) in double. Borrows logits. */
struct kld_row {
	const float *logits;
	float max, min;
	int32_t top;
	double sum_exp;
};
void kld_row_scan(struct kld_row *r, const float *logits, int32_t n_vocab);

/* -log softmax(logits)[tok], the log taken in double (llama-perplexity's
 * perplexity() scoring). */
double kld_row_nll(const struct kld_row *r, int32_t tok);

/* uint16 entries in one position's record. */
size_t kld_record_len(int32_t n_vocab);

/* Writes the header and tokens; false (message printed) on a write error. */
bool kld_write_header(FILE *f, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
		      const int32_t *tokens);

/* Encodes one scanned row into rec [kld_record_len(n_vocab)]. */
void kld_encode(const struct kld_row *r, int32_t n_vocab, uint16_t *rec);

/* Reads the header; *tokens is malloc'ed [n_chunk * n_ctx] (caller frees).
 * false (message naming the file) when it is not such a file, its sizes
 * are out of range, or its length is not exactly what they promise. */
bool kld_read_header(FILE *f, const char *path, uint32_t *n_ctx, int32_t *n_vocab,
		     int32_t *n_chunk, int32_t **tokens);

/* Whether a record read from a file has a usable head: finite, a scale in
 * [0, 16/65535] and a log-probability floor <= 0 (a corrupt file would
 * otherwise give NaN or infinite statistics). */
bool kld_record_ok(const uint16_t *rec);

/* Running sums over scored positions, llama-perplexity's
 * kl_divergence_result, plus every position's KL and delta-p for the
 * percentiles (arrays of cap entries, owned). */
struct kld_stats {
	double sum_nll, sum_nll2, sum_nll_base, sum_nll_base2, sum_nll_nll_base;
	double sum_kld, sum_kld2, sum_p_diff, sum_p_diff2, sum_p_diff4;
	size_t n_same_top, count, cap;
	float *kld, *p_diff;
	/* Per chunk: the sum of nll - nll_base over the open chunk, and the
	 * sums of the closed chunks' means and squared means. */
	double chunk_diff, sum_chunk, sum_chunk2;
	size_t chunk_count, n_chunks;
};

/* cap: the number of positions that will be added. false on OOM. */
bool kld_stats_init(struct kld_stats *s, size_t cap);
void kld_stats_free(struct kld_stats *s);

/* Adds one position: r this run's scanned logits [n_vocab], rec the base run's
 * record for the same position, tok the token that follows. Per position:
 * nll = -log q(tok), nll_base = -log p(tok),
 * KL(p || q) = sum over i with log p_i > -16 of p_i (log p_i - log q_i),
 * same top = argmax q == argmax p, delta-p = q(tok) - p(tok). false, with
 * nothing added, when rec's probabilities do not sum to ~1 (a corrupt
 * record). */
bool kld_stats_add(struct kld_stats *s, const struct kld_row *r, int32_t n_vocab,
		   const uint16_t *rec, int32_t tok);

/* Closes a chunk: its mean of nll - nll_base becomes one sample of the
 * chunk-level standard error (chunks start from an empty cache, so they
 * are independent; the tokens inside one are not). */
void kld_stats_end_chunk(struct kld_stats *s);

/* One line per chunk (after that chunk's positions): running PPL,
 * ln(PPL(Q)/PPL(base)), KL, RMS delta-p, same top, each +/- its standard
 * error; the header line when chunk is 1. */
void kld_print_chunk(FILE *out, const struct kld_stats *s, int chunk);

/* The final statistics (llama-perplexity's three blocks). The uncertainty
 * of ln(PPL(Q)/PPL(base)) is paired: it subtracts the covariance of the two
 * runs' per-token nll, so it measures how well the two runs' difference is
 * known, not how well either perplexity is. It treats tokens as
 * independent; a second line gives the same from the chunks' means, which
 * does not. Sorts the stored values. */
void kld_print_final(FILE *out, struct kld_stats *s);

#endif
