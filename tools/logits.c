/* ferrox logits: raw little-endian float32 logits [n_ids, n_vocab] for
 * given token ids, row t after ids[0..t]. The ids are used exactly as
 * given (no BOS). Prefill in chunks of --ubatch (default: all at once), or
 * --decode: one token at a time. With --ids-file each line is a sequence
 * run from an empty cache; rows follow in file order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ferrox.h"

struct seq {
	fx_token *ids;
	size_t n;
};

/* Parse "5,17,3" (spaces allowed) into a malloc'ed array. */
static bool parse_ids(const char *s, struct seq *q)
{
	size_t cap = 16;
	q->n = 0;
	q->ids = malloc(cap * sizeof(*q->ids));
	if (!q->ids)
		return false;
	while (*s == ' ' || *s == '\t')
		s++;
	while (*s && *s != '\n' && *s != '\r') {
		char *end;
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > INT32_MAX) {
			fprintf(stderr, "error: bad token id near '%.20s' (want ids like 5,17,3)\n", s);
			return false;
		}
		s = end;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == ',') {
			s++;
			while (*s == ' ' || *s == '\t')
				s++;
			if (!*s || *s == '\n' || *s == '\r' || *s == ',') {
				fprintf(stderr, "error: empty token id in the list\n");
				return false;
			}
		} else if (*s && *s != '\n' && *s != '\r') {
			fprintf(stderr, "error: bad token id near '%.20s' (want ids like 5,17,3)\n", s);
			return false;
		}
		if (q->n == cap) {
			fx_token *t = realloc(q->ids, (cap *= 2) * sizeof(*t));
			if (!t)
				return false;
			q->ids = t;
		}
		q->ids[q->n++] = (fx_token)v;
	}
	return true;
}

static bool read_ids_file(const char *path, struct seq **seqs, size_t *n_seq)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "error: cannot open %s\n", path);
		return false;
	}
	char *line = NULL;
	size_t lcap = 0;
	*seqs = NULL;
	*n_seq = 0;
	bool ok = true;
	while (getline(&line, &lcap, f) > 0) {
		struct seq q;
		if (!parse_ids(line, &q)) {
			free(q.ids);
			ok = false;
			break;
		}
		if (!q.n) {
			free(q.ids);
			continue;
		}
		struct seq *s = realloc(*seqs, (*n_seq + 1) * sizeof(*s));
		if (!s) {
			free(q.ids);
			ok = false;
			break;
		}
		*seqs = s;
		s[(*n_seq)++] = q;
	}
	free(line);
	fclose(f);
	return ok;
}

/* --batch: every sequence advances each step; a sequence's first half is
 * its prompt, prefilled in chunks of `chunk` tokens (0: at once), the rest
 * decoded one token per step. Rows are written in file order. */
static int run_batch(struct fx_context *ctx, const struct seq *seqs, size_t n_seq, int32_t nv,
		     size_t chunk, FILE *fo, const char *out)
{
	size_t total = 0;
	for (size_t s = 0; s < n_seq; s++)
		total += seqs[s].n;
	float *all = malloc(total * (size_t)nv * sizeof(float));
	size_t *done = calloc(n_seq, sizeof(*done)), *base = calloc(n_seq, sizeof(*base));
	fx_seq *id = calloc(n_seq, sizeof(*id)), *bs = malloc(total * sizeof(*bs));
	fx_token *bt = malloc(total * sizeof(*bt));
	size_t *brow = malloc(total * sizeof(*brow));
	int rc = 1;
	if (!all || !done || !base || !id || !bs || !bt || !brow) {
		fprintf(stderr, "error: no memory for %zu rows of logits\n", total);
		goto out;
	}
	for (size_t s = 1; s < n_seq; s++) {
		base[s] = base[s - 1] + seqs[s - 1].n;
		if (fx_seq_add(ctx, &id[s])) {
			fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
			goto out;
		}
	}
	for (;;) {
		int32_t n = 0;
		for (size_t s = 0; s < n_seq; s++) {
			size_t prompt = seqs[s].n - seqs[s].n / 2;
			size_t take = done[s] < prompt ? (chunk ? chunk : prompt) : 1;
			if (done[s] < prompt && done[s] + take > prompt)
				take = prompt - done[s];
			for (size_t k = 0; k < take && done[s] < seqs[s].n; k++, done[s]++, n++) {
				bs[n] = id[s];
				bt[n] = seqs[s].ids[done[s]];
				brow[n] = base[s] + done[s];
			}
		}
		if (!n)
			break;
		struct fx_batch b = { .n = n, .seq = bs, .token = bt };
		bool *k = malloc((size_t)n * sizeof(*k)); /* keep every row's logits */
		if (!k) {
			fprintf(stderr, "error: no memory\n");
			goto out;
		}
		for (int32_t i = 0; i < n; i++)
			k[i] = true;
		b.logits = k;
		int r = fx_batch_decode(ctx, &b, NULL);
		free(k);
		if (r) {
			fprintf(stderr, "error: %s\n", fx_context_errmsg(ctx));
			goto out;
		}
		for (int32_t i = 0; i < n; i++)
			memcpy(all + brow[i] * (size_t)nv, fx_batch_logits(ctx, i), (size_t)nv * sizeof(float));
	}
	if (fwrite(all, sizeof(float) * (size_t)nv, total, fo) != total) {
		fprintf(stderr, "error: writing %s failed\n", out);
		goto out;
	}
	rc = 0;
out:
	free(all);
	free(done);
	free(base);
	free(id);
	free(bs);
	free(bt);
	free(brow);
	return rc;
}

/* The flags, for the unknown-flag message's suggestion (cli_flag_unknown). */
static const char *const logits_flag_names[] = {
	"-m", "--model", "--ids", "--ids-file", "--out", "--cache-type-k", "-ctk", "--cache-type-v", "-ctv", "--quant", "--decode", "--batch", "--portable", "--kv", "--block-size", "--ubatch", "-t", "--threads", "-h", "--help", NULL,
};
static const char *const *const logits_flags[] = { logits_flag_names, NULL };

int cmd_logits(int argc, char **argv)
{
	const char *path = NULL, *ids = NULL, *ids_file = NULL, *out = NULL, *quant = NULL;
	long long ubatch = 0, threads = 0;
	bool decode = false, batch = false, portable = false;
	long long block = 16;
	int32_t layout = FX_KV_CONTIGUOUS;
	int32_t type_k = FX_KV_DEFAULT, type_v = FX_KV_DEFAULT;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
#define VAL() do { if (!(v = cli_value(argc, argv, &i))) return 2; } while (0)
		if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
			VAL(); path = v;
		} else if (!strcmp(a, "--ids")) {
			VAL(); ids = v;
		} else if (!strcmp(a, "--ids-file")) {
			VAL(); ids_file = v;
		} else if (!strcmp(a, "--out")) {
			VAL(); out = v;
		} else if (!strcmp(a, "--cache-type-k") || !strcmp(a, "-ctk")) {
			VAL(); if (!cli_cache_type(a, v, &type_k)) return 2;
		} else if (!strcmp(a, "--cache-type-v") || !strcmp(a, "-ctv")) {
			VAL(); if (!cli_cache_type(a, v, &type_v)) return 2;
		} else if (!strcmp(a, "--quant")) {
			VAL(); quant = v;
		} else if (!strcmp(a, "--decode")) {
			decode = true;
		} else if (!strcmp(a, "--batch")) {
			batch = true;
		} else if (!strcmp(a, "--portable")) {
			portable = true;
		} else if (!strcmp(a, "--kv")) {
			VAL();
			if (!strcmp(v, "contiguous")) {
				layout = FX_KV_CONTIGUOUS;
			} else if (!strcmp(v, "paged")) {
				layout = FX_KV_PAGED;
			} else {
				fprintf(stderr, "error: --kv wants contiguous or paged, got '%s'\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--block-size")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 16, &block)) return 2;
		} else if (!strcmp(a, "--ubatch")) {
			VAL(); if (!cli_int(a, v, 1, 1 << 24, &ubatch)) return 2;
		} else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
			VAL(); if (!cli_int(a, v, 0, 256, &threads)) return 2;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf("usage: ferrox logits -m MODEL (--ids 5,17,3 | --ids-file F) --out F [options]\n"
			       "Writes raw little-endian float32 [n_ids, n_vocab]; row t = logits after\n"
			       "ids[0..t]; ids used as given (no BOS). --ids-file: one sequence per line,\n"
			       "each from an empty cache, rows in file order.\n"
			       "  --decode               one token at a time (default: prefill)\n"
			       "  --ubatch N             prefill in chunks of N tokens (default: all)\n"
			       "  --batch                all sequences advance together: each one's first half\n"
			       "                         prefilled in --ubatch chunks, the rest decoded one\n"
			       "                         token per step (same output as without it)\n"
			       "  --kv contiguous|paged  KV layout (default contiguous)\n"
			       "  --block-size N         paged block size in tokens (default 16)\n"
			       "  -t, --threads N        threads (default: one per core)\n"
			       "  --cache-type-k/-v T    f16, f32 or q8_0 (default: f16 GGUF, f32 HF)\n"
			       "  --quant TYPE           quantize float weights on load (q8_0, q4_K, ...)\n"
			       "  --portable             the portable C kernels (the oracle), not the SIMD ones\n");
			return 0;
		} else {
			cli_flag_unknown("logits", logits_flags, a);
			return 2;
		}
#undef VAL
	}
	if (!path || !out || !ids == !ids_file) {
		fprintf(stderr, "error: -m, --out and exactly one of --ids/--ids-file are required\n");
		return 2;
	}
	struct seq *seqs = NULL;
	size_t n_seq = 0, n_seq_done = 0;
	int status = 1;
	struct fx_err err = { 0 };
	struct fx_model *m = NULL;
	struct fx_context *ctx = NULL;
	FILE *fo = NULL;
	if (ids) {
		seqs = calloc(1, sizeof(*seqs));
		if (!seqs)
			goto out;
		n_seq = 1; /* so the cleanup frees its ids on a parse error */
		if (!parse_ids(ids, &seqs[0]))
			goto out;
	} else if (!read_ids_file(ids_file, &seqs, &n_seq)) {
		goto out;
	}
	size_t longest = 0;
	for (size_t i = 0; i < n_seq; i++)
		longest = seqs[i].n > longest ? seqs[i].n : longest;
	if (!longest) {
		fprintf(stderr, "error: no token ids given\n");
		goto out;
	}
	struct fx_model_params mp = fx_model_default_params();
	mp.repack = !portable; /* the portable kernels read plain rows */
	mp.quant = quant;
	if (fx_model_load(path, &mp, &m, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	struct fx_context_params cp = fx_context_default_params();
	size_t pool = 0;
	for (size_t i = 0; i < n_seq; i++)
		pool += (seqs[i].n + (size_t)block - 1) / (size_t)block * (size_t)block;
	cp.kv_layout = layout;
	cp.block_size = (uint32_t)block;
	cp.n_seq_max = batch ? (uint32_t)n_seq : 1;
	cp.n_ctx = layout == FX_KV_PAGED
		? (uint32_t)(batch ? pool : (longest + (size_t)block - 1) / (size_t)block * (size_t)block)
		: (uint32_t)longest;
	cp.n_ubatch = decode ? 1 : ubatch ? (uint32_t)ubatch : (uint32_t)(batch ? pool : longest);
	cp.n_threads = (int32_t)threads;
	cp.type_k = type_k;
	cp.type_v = type_v;
	cp.kernels = portable ? FX_KERNELS_PORTABLE : FX_KERNELS_AUTO;
	if (fx_context_create(m, &cp, &ctx, &err)) {
		fprintf(stderr, "error: %s\n", err.msg);
		goto out;
	}
	if (!(fo = fopen(out, "wb"))) {
		fprintf(stderr, "error: cannot write %s\n", out);
		goto out;
	}
	int32_t nv = fx_model_n_vocab(m);
	if (batch) {
		if (run_batch(ctx, seqs, n_seq, nv, decode ? 1 : (size_t)ubatch, fo, out))
			goto out;
		n_seq_done = n_seq;
	}
	for (size_t s = n_seq_done; s < n_seq; s++) {
		fx_context_reset(ctx);
		size_t step = decode ? 1 : seqs[s].n;
		for (size_t i = 0; i < seqs[s].n; i += step) {
			int32_t rows;
			if (fx_decode(ctx, seqs[s].ids + i, (int32_t)step, true)) {
				if (ids_file)
					fprintf(stderr, "error: %s line %zu: %s\n", ids_file, s + 1,
						fx_context_errmsg(ctx));
				else
					fprintf(stderr, "error: --ids: %s\n", fx_context_errmsg(ctx));
				goto out;
			}
			const float *l = fx_get_logits(ctx, &rows);
			if (fwrite(l, sizeof(float) * (size_t)nv, (size_t)rows, fo) != (size_t)rows) {
				fprintf(stderr, "error: writing %s failed\n", out);
				goto out;
			}
		}
	}
	if (fclose(fo)) {
		fo = NULL;
		fprintf(stderr, "error: writing %s failed\n", out);
		goto out;
	}
	fo = NULL;
	status = 0;
out:
	if (fo)
		fclose(fo);
	for (size_t i = 0; i < n_seq; i++)
		free(seqs[i].ids);
	free(seqs);
	fx_context_free(ctx);
	fx_model_free(m);
	return status;
}
