/* `ferrox perplexity`: perplexity of a text, scored as llama-perplexity
 * scores it (tools/perplexity/perplexity.cpp, perplexity()):
 * - the whole file is tokenized once, with BOS when the model adds one;
 * - it is cut into floor(n_tokens / n_ctx) chunks of n_ctx tokens (at least
 *   2 chunks are required); each chunk runs from an empty cache, its first
 *   token replaced by BOS when the model adds one;
 * - only the second half is scored: logits of positions first = n_ctx/2 ..
 *   n_ctx-2 predict the next token; nll = -log_softmax, with the max
 *   logit subtracted in float and the sum of exponentials in double;
 * - the running perplexity exp(mean nll) is printed after each chunk as
 *   [i]value, then the final estimate with its standard error.
 * --kl-divergence-base FILE saves every scored position's log-probabilities
 * (tools/kld.h, llama-perplexity's format); with --kl-divergence the run
 * instead reads FILE (tokens included, so no -f) and compares its own
 * distributions with the saved ones, as llama-perplexity --kl-divergence.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ferrox.h"
#include "kld.h"

/* Removes a base file that was not written whole (it would only fail
 * later as truncated); only a regular file, never /dev/full or a FIFO. */
static void remove_partial(const char *path)
{
	struct stat st;
	if (!stat(path, &st) && S_ISREG(st.st_mode))
		remove(path);
}

/* Where the tokens come from and where each scored position's
 * log-probabilities go: nowhere, to a base file, or compared with one. */
enum kld_mode { KLD_NONE, KLD_SAVE, KLD_COMPARE };

/* The base file's side of a run (mode KLD_SAVE or KLD_COMPARE): the open
 * file, one record's buffer and, when comparing, the statistics. */
struct kld_io {
	enum kld_mode mode;
	const char *path;
	FILE *f;
	uint16_t *rec;
	size_t rec_len;
	struct kld_stats stats;
};

/* Saves or compares one scored position: position pos of chunk (from 1),
 * its scanned logits and the token that follows. false, with a message,
 * on a write error or a truncated or corrupt record. */
static bool kld_io_position(struct kld_io *io, const struct kld_row *row, int32_t n_vocab,
			    fx_token next, long long pos, long long chunk)
{
	if (io->mode == KLD_SAVE) {
		kld_encode(row, n_vocab, io->rec);
		if (fwrite(io->rec, sizeof(uint16_t), io->rec_len, io->f) == io->rec_len)
			return true;
		fprintf(stderr, "error: cannot write %s\n", io->path);
		return false;
	}
	const char *why = NULL;
	bool got = fread(io->rec, sizeof(uint16_t), io->rec_len, io->f) == io->rec_len;
	if (!got)
		why = "the file ends";
	else if (!kld_record_ok(io->rec))
		why = "its scale or floor is out of range";
	else if (!kld_stats_add(&io->stats, row, n_vocab, io->rec, next))
		why = "its probabilities do not sum to 1";
	if (!why)
		return true;
	fprintf(stderr, "error: %s is %s at position %lld of chunk %lld: %s\n", io->path,
		got ? "corrupt" : "truncated", pos, chunk, why);
	return false;
}

/* The tokens to score: the text tokenized (KLD_NONE, KLD_SAVE, the header
 * for the n_chunk that will be scored then written to *kf) or a base
 * file's (KLD_COMPARE, which also fixes *n_ctx). Returns the malloc'ed
 * tokens, NULL with a message printed. */
static fx_token *load_tokens(const struct fx_model *m, enum kld_mode mode, const char *text_path,
			     const char *kld_path, long long n_chunks, FILE **kf, long long *n_ctx,
			     size_t *n_tok)
{
	fx_token *tok = NULL;
	int32_t n_vocab = fx_model_n_vocab(m);
	if (mode == KLD_COMPARE) {
		uint32_t fctx;
		int32_t fvocab, fchunk;
		if (!(*kf = fopen(kld_path, "rb"))) {
			fprintf(stderr, "error: cannot open %s: %s\n", kld_path, strerror(errno));
			return NULL;
		}
		if (!kld_read_header(*kf, kld_path, &fctx, &fvocab, &fchunk, &tok))
			return NULL;
		*n_tok = (size_t)fchunk * fctx;
		if (fvocab != n_vocab) {
			fprintf(stderr, "error: %s was made with a vocabulary of %d tokens, the model has %d\n",
				kld_path, fvocab, n_vocab);
			free(tok);
			return NULL;
		}
		for (size_t i = 0; i < *n_tok; i++)
			if (tok[i] < 0 || tok[i] >= n_vocab) {
				fprintf(stderr, "error: %s holds token %d, outside the vocabulary\n",
					kld_path, tok[i]);
				free(tok);
				return NULL;
			}
		if (*n_ctx != (long long)fctx)
			fprintf(stderr, "perplexity: n_ctx %u from %s\n", fctx, kld_path);
		if ((int32_t)fctx > fx_model_n_ctx_train(m) && fx_model_n_ctx_train(m) > 0)
			fprintf(stderr, "warning: %s's n_ctx %u is longer than the model was trained "
				"for (%d)\n", kld_path, fctx, fx_model_n_ctx_train(m));
		if (text_path)
			fprintf(stderr, "perplexity: -f %s is not read: the tokens come from %s\n",
				text_path, kld_path);
		*n_ctx = fctx;
		return tok;
	}
	size_t len;
	char *text = cli_read_file(text_path, &len);
	if (!text)
		return NULL;
	tok = cli_tokenize(m, text, true, false, n_tok);
	free(text);
	if (tok && *n_tok < (size_t)(2 * *n_ctx)) {
		fprintf(stderr, "error: %s has %zu tokens; at least 2 x -c (%lld) are needed\n",
			text_path, *n_tok, 2 * *n_ctx);
		free(tok);
		return NULL;
	}
	if (tok && mode == KLD_SAVE) {
		long long n_chunk = (long long)(*n_tok / (size_t)*n_ctx);
		if (n_chunks > 0 && n_chunks < n_chunk)
			n_chunk = n_chunks;
		if (!(*kf = fopen(kld_path, "wb")))
			fprintf(stderr, "error: cannot create %s: %s\n", kld_path, strerror(errno));
		if (!*kf || !kld_write_header(*kf, (uint32_t)*n_ctx, n_vocab, (int32_t)n_chunk, tok)) {
			if (*kf) {
				fclose(*kf);
				*kf = NULL;
				remove_partial(kld_path);
			}
			free(tok);
			return NULL;
		}
	}
	return tok;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const perplexity_flag_names[] = {
	"-m", "--model", "-f", "--file", "-c", "--ctx-size", "-b", "--batch-size", "--chunks", "-t", "--threads", "--portable", "--cache-type-k", "-ctk", "--cache-type-v", "-ctv", "--kl-divergence-base", "--kl-divergence", "-h", "--help", NULL,
};
static const char *const *const perplexity_flags[] = { perplexity_flag_names, NULL };

int cmd_perplexity(int argc, char **argv)
{
	const char *path = NULL, *text_path = NULL, *kld_path = NULL;
	long long n_ctx = 512, n_batch = 512, threads = 0, n_chunks = -1;
	bool portable = false, kld_compare = false;
	int32_t type_k = FX_KV_DEFAULT, type_v = FX_KV_DEFAULT;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); path = v;
		} else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
			VAL(); text_path = v;
		} else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
			VAL(); if (!cli_int(a, v, 4, 1 << 20, &n_ctx)) return 2;
		} else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 20, &n_batch)) return 2;
		} else if (!strcmp(a, "--chunks")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 20, &n_chunks)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &threads)) return 2;
		} else if (!strcmp(a, "--portable")) {
			portable = true;
		} else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "-ctk")) {
			VAL(); if (!cli_cache_type(a, v, &type_k)) return 2;
		} else if (!strcmp(a, "--cache-type-v") || !strcmp(a, "-ctv")) {
			VAL(); if (!cli_cache_type(a, v, &type_v)) return 2;
		} else if (!strcmp(a, "--kl-divergence-base")) {
			VAL(); kld_path = v;
		} else if (!strcmp(a, "--kl-divergence")) {
			kld_compare = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox perplexity -m MODEL -f TEXT [-c 512] [-b 512] [--chunks N] [-t N]\n"
			       "                         [--kl-divergence-base FILE]\n"
			       "       ferrox perplexity -m MODEL --kl-divergence-base FILE --kl-divergence\n"
			       "Perplexity over TEXT in chunks of -c tokens, scoring each chunk's second\n"
			       "half (llama-perplexity's method and output).\n"
			       "  -c N               tokens per chunk (512)\n"
			       "  -b N               tokens per forward pass (512; at most -c)\n"
			       "  --chunks N         score only the first N chunks\n"
			       "  -t N               threads (0, the default: one per core)\n"
			       "  -ctk/-ctv T        KV cache types (f16 default, f32, q8_0)\n"
			       "  --portable         the portable C kernels instead of the SIMD ones\n"
			       "  --kl-divergence-base FILE\n"
			       "                     save the scored log-probabilities to FILE, replacing it\n"
			       "                     (llama-perplexity's format: either engine reads it)\n"
			       "  --kl-divergence    read FILE instead (its tokens and -c; no -f) and print\n"
			       "                     the KL divergence and perplexity ratio of this run\n"
			       "                     against it, with paired standard errors (final\n"
			       "                     statistics need at least 100 scored positions)\n");
			return 0;
		} else {
			cli_flag_unknown("perplexity", perplexity_flags, a);
			return 2;
		}
#undef VAL
	}
	enum kld_mode mode = !kld_path ? KLD_NONE : kld_compare ? KLD_COMPARE : KLD_SAVE;
	if (kld_compare && !kld_path) {
		fprintf(stderr, "error: --kl-divergence needs --kl-divergence-base FILE\n");
		return 2;
	}
	if (!path || (!text_path && mode != KLD_COMPARE)) {
		fprintf(stderr, "error: -m MODEL and -f TEXT are required (see --help)\n");
		return 2;
	}
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	struct fx_context *ctx = NULL;
	struct fx_model_params mp = fx_model_default_params();
	/* Progress on stderr when it is a terminal; not while stdout shares
	 * it, where the running [i]ppl values are the progress and a \r line
	 * would overwrite them. */
	struct cli_progress prog = { .off = isatty(1) };
	mp.repack = !portable; /* the portable kernels read plain rows */
	mp.progress = cli_load_progress;
	mp.progress_arg = &prog;
	if (fx_model_load(path, &mp, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		return 1;
	}
	int rc = 1;
	bool *want = NULL;
	fx_seq *seq = NULL;
	struct kld_io io = { .mode = mode, .path = kld_path };
	size_t n_tok = 0;
	fx_token *tok = load_tokens(m, mode, text_path, kld_path, n_chunks, &io.f, &n_ctx, &n_tok);
	if (!tok)
		goto out;
	struct fx_context_params cp = fx_context_default_params();
	cp.n_ctx = (uint32_t)n_ctx;
	cp.n_ubatch = (uint32_t)(n_batch < n_ctx ? n_batch : n_ctx);
	cp.n_threads = (int32_t)threads;
	cp.type_k = type_k;
	cp.type_v = type_v;
	cp.kernels = portable ? FX_KERNELS_PORTABLE : FX_KERNELS_AUTO;
	if (fx_context_create(m, &cp, &ctx, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	long long n_chunk = (long long)(n_tok / (size_t)n_ctx);
	if (n_chunks > n_chunk)
		fprintf(stderr, "perplexity: --chunks %lld: %s has only %lld\n", n_chunks,
			mode == KLD_COMPARE ? kld_path : text_path, n_chunk);
	if (n_chunks > 0 && n_chunks < n_chunk)
		n_chunk = n_chunks;
	int32_t n_vocab = fx_model_n_vocab(m);
	int first = (int)(n_ctx / 2);
	bool add_bos = fx_add_bos(m);
	want = calloc((size_t)n_ctx, sizeof(bool));
	seq = calloc((size_t)n_ctx, sizeof(fx_seq));
	io.rec_len = kld_record_len(n_vocab);
	io.rec = mode != KLD_NONE ? malloc(io.rec_len * sizeof(uint16_t)) : NULL;
	if (!want || !seq || (mode != KLD_NONE && !io.rec) ||
	    (mode == KLD_COMPARE &&
	     !kld_stats_init(&io.stats, (size_t)n_chunk * (size_t)(n_ctx - 1 - first)))) {
		fprintf(stderr, "error: out of memory\n");
		goto out;
	}
	fprintf(stderr, "perplexity: %zu tokens, %lld chunk%s of %lld, scoring the last %d - 1 of each\n",
		n_tok, n_chunk, n_chunk == 1 ? "" : "s", n_ctx, (int)n_ctx - first);
	double nll = 0, nll2 = 0, t0 = cli_now();
	long long count = 0;
	for (long long c = 0; c < n_chunk; c++) {
		fx_token *chunk = tok + c * n_ctx;
		fx_token org = chunk[0];
		if (add_bos)
			chunk[0] = fx_token_bos(m);
		fx_context_reset(ctx);
		for (long long j = 0; j < n_ctx; j += n_batch) {
			int32_t nb = (int32_t)(n_ctx - j < n_batch ? n_ctx - j : n_batch);
			for (int32_t k = 0; k < nb; k++)
				want[k] = j + k >= first && j + k < n_ctx - 1;
			cli_progress(&prog, "perplexity", (double)(c * n_ctx + j), (double)(n_chunk * n_ctx));
			struct fx_batch b = { .n = nb, .seq = seq, .token = chunk + j, .logits = want };
			if (fx_batch_decode(ctx, &b, NULL)) {
				fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
				chunk[0] = org;
				goto out;
			}
			for (int32_t k = 0; k < nb; k++) {
				if (!want[k])
					continue;
				struct kld_row row;
				kld_row_scan(&row, fx_batch_logits(ctx, k), n_vocab);
				fx_token next = chunk[j + k + 1];
				double v = kld_row_nll(&row, next);
				nll += v;
				nll2 += v * v;
				count++;
				if (mode != KLD_NONE &&
				    !kld_io_position(&io, &row, n_vocab, next, j + k, c + 1)) {
					chunk[0] = org;
					goto out;
				}
			}
		}
		chunk[0] = org;
		if (c == 0) /* llama-perplexity's line, with its ETA */
			fprintf(stderr, "%sperplexity: %.2f seconds per pass - ETA %.2f minutes\n", prog.shown ? "\n" : "",
				cli_now() - t0, (cli_now() - t0) * (double)(n_chunk - 1) / 60.0);
		if (mode == KLD_COMPARE) {
			kld_stats_end_chunk(&io.stats);
			kld_print_chunk(stdout, &io.stats, (int)c + 1);
			continue;
		}
		printf("[%lld]%.4f,", c + 1, exp(nll / (double)count));
		fflush(stdout);
	}
	cli_progress(&prog, "perplexity", 1, 1); /* ends the line if one was shown */
	if (mode == KLD_COMPARE) {
		kld_print_final(stdout, &io.stats);
	} else {
		double mean = nll / (double)count, var = nll2 / (double)count - mean * mean;
		double ppl = exp(mean);
		/* Standard error as llama-perplexity: ppl * sqrt(var / (count - 1)). */
		double se = count > 1 && var > 0 ? ppl * sqrt(var / (double)(count - 1)) : 0;
		printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, se);
	}
	fflush(stdout); /* before the stderr line, when both go to one pipe */
	fprintf(stderr, "perplexity: %lld tokens scored in %.1f s\n", count, cli_now() - t0);
	rc = 0;
	if (io.f && mode == KLD_SAVE) {
		rc = fclose(io.f) ? 1 : 0;
		io.f = NULL;
		if (rc)
			fprintf(stderr, "error: cannot write %s\n", kld_path);
	}
out:
	if (io.f)
		fclose(io.f);
	if (rc && mode == KLD_SAVE && tok)
		remove_partial(kld_path);
	free(tok);
	free(want);
	free(seq);
	free(io.rec);
	kld_stats_free(&io.stats);
	fx_context_free(ctx);
	fx_model_free(m);
	return rc;
}
