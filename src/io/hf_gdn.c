/* Gated DeltaNet tensors from Hugging Face's layout into llama.cpp's
 * (value heads tiled over key heads; see io/hf_gdn.h). Rows and columns are
 * copied whole, so any element type works. */
#include "io/hf_gdn.h"

#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "ferrox.h"
#include "quant/quant.h"

static bool ends(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

/* The HF (grouped) value head whose data GGUF value head jj holds. */
static int64_t grouped(const struct hf_gdn *d, int64_t jj)
{
	return (jj % d->nk) * (d->nv / d->nk) + jj / d->nk;
}

int hf_gdn_tile(struct gguf_file *g, const struct hf_gdn *d, const struct st_tensor *t,
		const char *name, struct st_tensor *out, const char *dir, struct fx_err *err)
{
	*out = *t;
	if (d->nk <= 0 || d->nv <= d->nk || d->nv % d->nk)
		return FX_OK;
	/* rows from row0 in blocks of blk rows (a value head's), or columns */
	int64_t row0 = 0, blk = d->dv;
	bool cols = false;
	if (ends(name, ".attn_qkv.weight") || ends(name, ".ssm_conv1d.weight"))
		row0 = 2 * d->nk * d->dk;
	else if (ends(name, ".ssm_beta.weight") || ends(name, ".ssm_alpha.weight") ||
		 ends(name, ".ssm_dt.bias") || ends(name, ".ssm_a"))
		blk = 1;
	else if (ends(name, ".ssm_out.weight"))
		cols = true;
	else if (!ends(name, ".attn_gate.weight"))
		return FX_OK;
	size_t es = fx_row_size(t->type, 1);
	/* 1-D vectors (dt bias, A_log): one element a row */
	int64_t width = t->n_dims == 1 ? 1 : t->ne[0];
	int64_t rows = (int64_t)(t->nbytes / ((size_t)width * es));
	size_t row = (size_t)width * es;
	if (cols ? width != d->nv * d->dv : rows != row0 + d->nv * blk)
		return fx_fail(err, FX_E_FORMAT, "%s: '%s' does not have a Gated DeltaNet shape for %lld "
			       "value heads of %lld", dir, t->name, (long long)d->nv, (long long)d->dv);
	uint8_t *dst = gguf_build_alloc(g, t->nbytes);
	if (!dst)
		return FX_E_NOMEM;
	const uint8_t *src = t->data;
	if (cols) {
		size_t hb = (size_t)d->dv * es;
		for (int64_t r = 0; r < rows; r++)
			for (int64_t jj = 0; jj < d->nv; jj++)
				memcpy(dst + (size_t)r * row + (size_t)jj * hb,
				       src + (size_t)r * row + (size_t)grouped(d, jj) * hb, hb);
	} else {
		memcpy(dst, src, (size_t)row0 * row);
		size_t bb = (size_t)blk * row;
		for (int64_t jj = 0; jj < d->nv; jj++)
			memcpy(dst + (size_t)row0 * row + (size_t)jj * bb,
			       src + (size_t)row0 * row + (size_t)grouped(d, jj) * bb, bb);
	}
	out->data = dst;
	return FX_OK;
}

int hf_gdn_split_fused(struct gguf_file *g, const struct hf_gdn *d, const struct st_tensor *t,
		       int il, bool qkvz, bool tiled, const char *dir, struct fx_err *err)
{
	int64_t nk = d->nk, r = nk > 0 ? d->nv / nk : 0, dk = d->dk, dv = d->dv;
	int64_t grp = qkvz ? 2 * dk + 2 * r * dv : 2 * r;
	if (r <= 0 || t->n_dims != 2 || t->ne[1] != nk * grp)
		return fx_fail(err, FX_E_FORMAT, "%s: '%s' does not have the fused DeltaNet shape for "
			       "%lld key heads", dir, t->name, (long long)nk);
	size_t row = fx_row_size(t->type, t->ne[0]);
	const uint8_t *src = t->data;
	if (!qkvz && !tiled) { /* llama.cpp's qwen3next keeps in_proj_ba as it is */
		char name[96];
		snprintf(name, sizeof(name), "blk.%d.ssm_ba.weight", il);
		return gguf_build_tensor(g, name, t->type, 2, t->ne, t->data);
	}
	/* each output: rows before the value heads (q, k: per key head dk each),
	 * then value head jj (tiled) from grouped head g r + i at row offset
	 * off + i * per of key group g */
	struct part {
		const char *name;
		int64_t per, off;
	} parts[] = { { "attn_qkv", dv, 2 * dk }, { "attn_gate", dv, 2 * dk + r * dv },
		      { "ssm_beta", 1, 0 }, { "ssm_alpha", 1, r } };
	for (int p = qkvz ? 0 : 2; p < (qkvz ? 2 : 4); p++) {
		const struct part *pt = &parts[p];
		int64_t lead = p == 0 ? 2 * nk * dk : 0, rows = lead + d->nv * pt->per;
		uint8_t *dst = gguf_build_alloc(g, (size_t)rows * row), *o = dst;
		if (!dst)
			return FX_E_NOMEM;
		for (int q = 0; p == 0 && q < 2; q++) /* every q, then every k */
			for (int64_t k = 0; k < nk; k++, o += (size_t)dk * row)
				memcpy(o, src + (size_t)(k * grp + q * dk) * row, (size_t)dk * row);
		for (int64_t jj = 0; jj < d->nv; jj++, o += (size_t)pt->per * row) {
			int64_t gk = tiled ? jj % nk : jj / r, i = tiled ? jj / nk : jj % r;
			memcpy(o, src + (size_t)(gk * grp + pt->off + i * pt->per) * row,
			       (size_t)pt->per * row);
		}
		char name[96];
		snprintf(name, sizeof(name), "blk.%d.%s.weight", il, pt->name);
		int64_t ne[4] = { t->ne[0], rows, 1, 1 };
		int rc = gguf_build_tensor(g, name, t->type, 2, ne, dst);
		if (rc)
			return rc;
	}
	return FX_OK;
}
