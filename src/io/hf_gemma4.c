/* Gemma 4 (transformers 5.23 models/gemma4) in llama.cpp's GGUF form: the
 * per-layer attention shapes of its config and its proportional RoPE. The
 * tensor renames are in io/hf.c's tables. */
#include "io/hf_gemma4.h"

#include <stdio.h>
#include <string.h>

#include "quant/quant.h"

static bool num(const cJSON *o, const char *k, double *out)
{
	const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL;
	if (!v || !cJSON_IsNumber(v))
		return false;
	*out = v->valuedouble;
	return true;
}

bool hf_gemma4_heads(const cJSON *cfg, int n_layer, int n_head_kv, int *head_dim,
		     int *head_dim_swa, uint32_t *kv)
{
	const cJSON *plc = cJSON_GetObjectItemCaseSensitive(cfg, "per_layer_config");
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types");
	const cJSON *keqv = cJSON_GetObjectItemCaseSensitive(cfg, "attention_k_eq_v");
	double ghd = 0, gkv = 0;
	bool global = num(cfg, "global_head_dim", &ghd);
	if (keqv && cJSON_IsTrue(keqv))
		num(cfg, "num_global_key_value_heads", &gkv);
	if (!(plc && cJSON_IsObject(plc)) && !global)
		return false;
	*head_dim_swa = *head_dim;
	int hd_global = global ? (int)ghd : 0;
	for (int il = 0; il < n_layer; il++) {
		const cJSON *t = lt ? cJSON_GetArrayItem(lt, il) : NULL;
		bool swa = t && cJSON_IsString(t) && !strcmp(t->valuestring, "sliding_attention");
		char key[16];
		snprintf(key, sizeof(key), "%d", il);
		const cJSON *c = plc && cJSON_IsObject(plc) ? cJSON_GetObjectItemCaseSensitive(plc, key) : NULL;
		double d;
		kv[il] = (uint32_t)n_head_kv;
		if (!swa && gkv > 0)
			kv[il] = (uint32_t)gkv;
		if (num(c, "num_key_value_heads", &d))
			kv[il] = (uint32_t)d;
		if (!swa && num(c, "head_dim", &d))
			hd_global = (int)d;
	}
	if (hd_global > 0)
		*head_dim = hd_global;
	return true;
}

int hf_gemma4_rope_freqs(struct gguf_file *g, int head_dim, double partial, struct fx_err *err)
{
	if (head_dim <= 0 || head_dim % 2 || !(partial > 0 && partial <= 1))
		return fx_fail(err, FX_E_FORMAT, "config.json: proportional RoPE over head_dim %d with "
			       "partial_rotary_factor %g", head_dim, partial);
	int half = head_dim / 2, turn = (int)(partial * head_dim / 2);
	float *f = gguf_build_alloc(g, (size_t)half * sizeof(float));
	if (!f)
		return FX_E_NOMEM;
	for (int i = 0; i < half; i++)
		f[i] = i < turn ? 1.0f : 1e30f;
	int64_t ne[4] = { half, 1, 1, 1 };
	return gguf_build_tensor(g, "rope_freqs.weight", FX_TYPE_F32, 1, ne, f);
}
