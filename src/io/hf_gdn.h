/* Gated DeltaNet checkpoints in llama.cpp's layout (io/hf_gdn.c). */
#ifndef FX_IO_HF_GDN_H
#define FX_IO_HF_GDN_H

#include <stdbool.h>
#include <stdint.h>

#include "io/gguf.h"
#include "io/safetensors.h"

struct fx_err;

/* A DeltaNet's head counts and widths (config.json's linear_*). */
struct hf_gdn {
	int64_t nk, nv, dk, dv;
};

/* Value heads in llama.cpp's (and ferrox's) order: HF stores them grouped
 * by key head (value head g r + i, r = nv / nk, reads key head g); GGUF
 * tiles them (head i nk + g, reads key head (i nk + g) mod nk), as
 * convert_hf_to_gguf.py's _LinearAttentionVReorderBase does, so a value
 * head's key head is its index mod nk. For tensor t, mapped to GGUF name
 * `name` (attn_qkv's V rows, attn_gate, ssm_beta, ssm_alpha, ssm_conv1d's
 * V channels, ssm_dt.bias, ssm_a, ssm_out's columns), *out becomes t with
 * its data a reordered copy owned by g; other tensors, and nk == nv, leave
 * *out = *t. Errors: FX_E_NOMEM; FX_E_FORMAT (a shape that does not fit
 * d) with a message naming dir. */
int hf_gdn_tile(struct gguf_file *g, const struct hf_gdn *d, const struct st_tensor *t,
		const char *name, struct st_tensor *out, const char *dir, struct fx_err *err);

/* Qwen3-Next's fused in_proj_qkvz (qkvz true) or in_proj_ba of layer il,
 * grouped per key head (Qwen3NextGatedDeltaNet.fix_query_key_value_ordering:
 * per key head [q dk | k dk | v r dv | z r dv], or [b r | a r]). tiled:
 * written as Qwen 3.5's attn_qkv ([all q | all k | all v]), attn_gate,
 * ssm_beta, ssm_alpha with value heads tiled as hf_gdn_tile orders them;
 * else as llama.cpp's qwen3next (conversion/qwen.py): attn_qkv and
 * attn_gate with value heads in HF's grouped order, in_proj_ba unchanged
 * as ssm_ba. Errors as hf_gdn_tile. */
int hf_gdn_split_fused(struct gguf_file *g, const struct hf_gdn *d, const struct st_tensor *t,
		       int il, bool qkvz, bool tiled, const char *dir, struct fx_err *err);

#endif
