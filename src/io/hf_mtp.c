/* Qwen 3.5 / Qwen3-Next multi-token-prediction tensors, renamed as
 * llama.cpp's converter renames them so the layer table maps them like any
 * layer's (blk.{n_layer + I}.*, blk.N.nextn.*). */
#include "io/hf_mtp.h"

#include <stdio.h>
#include <string.h>

/* name without "mtp." or "model.mtp.", or NULL. */
static const char *mtp_rest(const char *name)
{
	if (!strncmp(name, "model.mtp.", 10))
		return name + 10;
	return strncmp(name, "mtp.", 4) ? NULL : name + 4;
}

int hf_mtp_count(const struct st_set *st)
{
	int n = 0;
	for (size_t f = 0; f < st->n_files; f++)
		for (size_t i = 0; i < st->files[f]->n_tensors; i++) {
			const char *r = mtp_rest(st->files[f]->tensors[i].name);
			int il, off = 0;
			if (r && sscanf(r, "layers.%d.%n", &il, &off) == 1 && off > 0 && il >= 0 &&
			    il < 16 && il + 1 > n)
				n = il + 1;
		}
	return n;
}

bool hf_mtp_rename(const char *name, int n_layer, char *buf, size_t n)
{
	static const struct {
		const char *hf, *as;
	} heads[] = {
		{ "fc.weight", "eh_proj.weight" },
		{ "pre_fc_norm_embedding.weight", "enorm.weight" },
		{ "pre_fc_norm_hidden.weight", "hnorm.weight" },
		{ "norm.weight", "shared_head.norm.weight" },
	};
	const char *r = mtp_rest(name);
	int il, off = 0;
	if (!r)
		return false;
	if (sscanf(r, "layers.%d.%n", &il, &off) == 1 && off > 0 && il >= 0 && il < 16) {
		snprintf(buf, n, "model.layers.%d.%s", n_layer + il, r + off);
		return true;
	}
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++)
		if (!strcmp(r, heads[i].hf)) {
			snprintf(buf, n, "model.layers.%d.%s", n_layer, heads[i].as);
			return true;
		}
	return false;
}
