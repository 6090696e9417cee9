/* llama.cpp's mixture-of-experts layout keys (see io/hf_moe.h): the values
 * its converter (convert_hf_to_gguf.py's base set_gguf_parameters,
 * Glm4MoeModel, Ernie4_5MoeModel, Llama4Model) writes from config.json. */
#include "io/hf_moe.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ferrox.h"

/* config.json's k as a whole number in 0..2^31, into *out. */
static bool count(const cJSON *cfg, const char *k, uint32_t *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, k);
	if (!v || !cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 2147483647.0 ||
	    v->valuedouble != floor(v->valuedouble))
		return false;
	*out = (uint32_t)v->valuedouble;
	return true;
}

/* {arch}.suffix = v unless g holds it already. */
static int put(struct gguf_file *g, const char *arch, const char *suffix, uint32_t v)
{
	char k[128];
	snprintf(k, sizeof(k), "%s.%s", arch, suffix);
	if (gguf_find(g, k))
		return FX_OK;
	return gguf_build_u32(g, k, v) ? FX_E_NOMEM : FX_OK;
}

int hf_moe_keys(struct gguf_file *g, const char *arch, const cJSON *cfg, int gating_func)
{
	/* config.json's router score function, llama.cpp's enum values */
	static const struct {
		const char *name;
		uint32_t func;
	} scores[] = { { "softmax", 1 }, { "sigmoid", 2 }, { "sqrtsoftplus", 4 } };
	char k[128];
	uint32_t n, sh, fe;
	int rc = FX_OK;
	snprintf(k, sizeof(k), "%s.expert_count", arch);
	if (!gguf_find(g, k))
		return FX_OK;
	const cJSON *sf = cJSON_GetObjectItemCaseSensitive(cfg, "scoring_func");
	for (size_t i = 0; i < sizeof(scores) / sizeof(scores[0]); i++)
		if (!gating_func && sf && cJSON_IsString(sf) && !strcmp(sf->valuestring, scores[i].name))
			gating_func = (int)scores[i].func;
	if ((gating_func > 0 && (rc = put(g, arch, "expert_gating_func", (uint32_t)gating_func))) ||
	    (count(cfg, "n_shared_experts", &n) && (rc = put(g, arch, "expert_shared_count", n))) ||
	    ((count(cfg, "moe_layer_interval", &n) || count(cfg, "interleave_moe_layer_step", &n)) &&
	     n > 0 && (rc = put(g, arch, "interleave_moe_layer_step", n))) ||
	    (count(cfg, "moe_layer_start_index", &n) && n > 0 &&
	     (rc = put(g, arch, "leading_dense_block_count", n))) ||
	    (count(cfg, "moe_num_shared_experts", &sh) && sh > 0 &&
	     count(cfg, "moe_intermediate_size", &fe) && (uint64_t)sh * fe <= UINT32_MAX &&
	     (rc = put(g, arch, "expert_shared_feed_forward_length", sh * fe))))
		return rc;
	return FX_OK;
}
