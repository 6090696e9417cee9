/* Binding a file's tensors to a model (model/bind.c), shared with the
 * metadata reader (model/model.c). */
#ifndef FX_MODEL_BIND_H
#define FX_MODEL_BIND_H

#include <stdbool.h>
#include <stdio.h>

#include "model/model.h"

/* One load in progress. */
struct model_loader {
	struct fx_model *m;
	struct fx_err *err;
	int quant;       /* --quant target type, or -1 */
	char arch[64];   /* general.architecture, NUL-terminated */
	bool *used;      /* [n_tensors]: bound (model_bind_weights owns it) */
};

/* "{arch}.suffix" into buf[0..n); returns buf. */
static inline const char *model_key(const struct model_loader *ld, char *buf, size_t n,
				    const char *suffix)
{
	snprintf(buf, n, "%s.%s", ld->arch, suffix);
	return buf;
}

/* Whether a per-layer array key has one entry per decoder layer, or per
 * block of block_count (llama.cpp's length when multi-token-prediction
 * blocks follow the layers; theirs are not read from it). */
static inline bool model_layer_arr_ok(const struct hparams *hp, const struct gguf_kv *kv)
{
	return kv->n == (uint64_t)hp->n_layer || kv->n == (uint64_t)(hp->n_layer + hp->n_nextn);
}

/* Bind every tensor of ld->m->g to ld->m (hparams read): which layers use
 * the sliding window and RoPE, the RoPE frequencies, the global and
 * per-layer tensors the row asks for. A file holding a tensor the row does
 * not allow (arch_groups), one no group knows, or one left unbound is
 * refused before anything is read, FX_E_FORMAT naming up to four of them
 * with the decoration each belongs to; a tensor the row requires and the
 * file lacks, or of another shape, FX_E_FORMAT naming it. What is bound is
 * owned by ld->m (model_free frees it on failure too). */
int model_bind_weights(struct model_loader *ld);

#endif
