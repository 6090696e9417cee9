/* Nemotron-H's per-layer metadata as llama.cpp's converter writes it
 * (conversion/nemotron.py: NemotronHModel.set_gguf_parameters). */
#include "io/hf_ssm.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "ferrox.h"

static const cJSON *layer_types(const cJSON *cfg)
{
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types");
	if (!lt || !cJSON_IsArray(lt))
		lt = cJSON_GetObjectItemCaseSensitive(cfg, "layers_block_type");
	return lt && cJSON_IsArray(lt) ? lt : NULL;
}

bool hf_ssm_has_moe(const cJSON *cfg)
{
	const cJSON *e, *lt = layer_types(cfg);
	cJSON_ArrayForEach(e, lt)
		if (cJSON_IsString(e) && !strcmp(e->valuestring, "moe"))
			return true;
	/* the released configs' pattern string: 'E' an MoE layer */
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(cfg, "hybrid_override_pattern");
	return !lt && p && cJSON_IsString(p) && strchr(p->valuestring, 'E');
}

void hf_ssm_drop_moe_keys(cJSON *cfg)
{
	static const char *const keys[] = { "n_routed_experts", "num_experts_per_tok",
		"moe_intermediate_size", "moe_shared_expert_intermediate_size", "n_shared_experts",
		"n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob", "moe_latent_size" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cJSON_DeleteItemFromObjectCaseSensitive(cfg, keys[i]);
}

int hf_ssm_ff_per_layer(struct gguf_file *g, const cJSON *cfg, const char *arch, int n_layer,
			int n_ff, const char *dir, struct fx_err *err)
{
	const cJSON *lt = layer_types(cfg);
	const cJSON *mi = cJSON_GetObjectItemCaseSensitive(cfg, "moe_intermediate_size");
	uint32_t moe = mi && cJSON_IsNumber(mi) && mi->valuedouble > 0 ? (uint32_t)mi->valuedouble
								     : (uint32_t)n_ff;
	uint32_t *ff = gguf_build_alloc(g, (size_t)n_layer * sizeof(uint32_t));
	if (!ff)
		return FX_E_NOMEM;
	for (int il = 0; il < n_layer; il++) {
		const cJSON *e = lt ? cJSON_GetArrayItem(lt, il) : NULL;
		if (!e || !cJSON_IsString(e))
			return fx_fail(err, FX_E_FORMAT, "%s/config.json: layers_block_type has no "
				       "entry %d", dir, il);
		ff[il] = !strcmp(e->valuestring, "mlp") ? (uint32_t)n_ff
			 : !strcmp(e->valuestring, "moe") ? moe : 0;
	}
	char k[128];
	snprintf(k, sizeof(k), "%s.feed_forward_length", arch);
	return gguf_build_arr(g, k, GGUF_T_U32, ff, (uint64_t)n_layer);
}
