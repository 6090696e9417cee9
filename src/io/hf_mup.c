/* Falcon-H1 (HF modeling_falcon_h1.py: FalconH1Model, FalconH1Mixer's
 * mup_vector, FalconH1MLP, FalconH1Attention) scales activations by fixed
 * muP multipliers; each is a per-row scale of one weight matrix, so it is
 * folded in at load, as llama.cpp's converter does. */
#include "io/hf_mup.h"

#include <string.h>

#include "core/status.h"
#include "ferrox.h"
#include "quant/quant.h"

static double num(const cJSON *cfg, const char *k, double dflt)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, k);
	return v && cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static bool ends(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

/* Element i of the number array k (n elements), or FX_E_FORMAT. */
static int arr(const cJSON *cfg, const char *k, int n, double *out, const char *dir,
	       struct fx_err *err)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(cfg, k);
	for (int i = 0; i < n; i++) {
		const cJSON *e = a ? cJSON_GetArrayItem(a, i) : NULL;
		if (!e || !cJSON_IsNumber(e))
			return fx_fail(err, FX_E_FORMAT, "%s/config.json: %s must hold %d numbers", dir,
				       k, n);
		out[i] = e->valuedouble;
	}
	return FX_OK;
}

int hf_mup_fold(const cJSON *cfg, const char *dir, struct gguf_file *g, const struct st_tensor *t,
		const char *name, const void **data, int *type, struct fx_err *err)
{
	double ai = num(cfg, "attention_in_multiplier", 1), sec[5] = { 1, 1, 1, 1, 1 }, mlp[2] = { 1, 1 };
	double whole = 1;
	bool in_proj = ends(name, ".ssm_in.weight");
	int rc;
	if (ends(name, "token_embd.weight"))
		whole = num(cfg, "embedding_multiplier", 1);
	else if (!strcmp(name, "output.weight"))
		whole = num(cfg, "lm_head_multiplier", 1);
	else if (ends(name, ".attn_q.weight") || ends(name, ".attn_v.weight"))
		whole = ai;
	else if (ends(name, ".attn_k.weight"))
		whole = ai * num(cfg, "key_multiplier", 1);
	else if (ends(name, ".attn_output.weight"))
		whole = num(cfg, "attention_out_multiplier", 1);
	else if (ends(name, ".ssm_out.weight"))
		whole = num(cfg, "ssm_out_multiplier", 1);
	else if (in_proj)
		whole = num(cfg, "ssm_in_multiplier", 1);
	if ((ends(name, ".ffn_gate.weight") || ends(name, ".ffn_down.weight")) &&
	    cJSON_GetObjectItemCaseSensitive(cfg, "mlp_multipliers")) {
		if ((rc = arr(cfg, "mlp_multipliers", 2, mlp, dir, err)))
			return rc;
		whole = ends(name, ".ffn_gate.weight") ? mlp[0] : mlp[1];
	}
	if (in_proj && cJSON_GetObjectItemCaseSensitive(cfg, "ssm_multipliers") &&
	    (rc = arr(cfg, "ssm_multipliers", 5, sec, dir, err)))
		return rc;
	if (whole == 1 && (!in_proj || (sec[0] == 1 && sec[1] == 1 && sec[2] == 1 && sec[3] == 1 && sec[4] == 1)))
		return FX_OK;
	int64_t cols = t->ne[0], rows = t->n_dims >= 2 ? t->ne[1] : 1;
	/* in_proj rows: z [d_ssm], x [d_ssm], B [G N], C [G N], dt [heads] */
	int64_t d = (int64_t)num(cfg, "mamba_d_ssm", 0), gs = (int64_t)(num(cfg, "mamba_n_groups", 1) *
									num(cfg, "mamba_d_state", 0));
	int64_t bound[5] = { d, 2 * d, 2 * d + gs, 2 * d + 2 * gs, rows };
	if (in_proj && (d <= 0 || 2 * d + 2 * gs >= rows))
		return fx_fail(err, FX_E_FORMAT, "%s: %s has %lld rows, which do not fit mamba_d_ssm %lld "
			       "and groups x state %lld", dir, t->name, (long long)rows, (long long)d,
			       (long long)gs);
	float *out = gguf_build_alloc(g, (size_t)(rows * cols) * sizeof(float));
	if (!out)
		return FX_E_NOMEM;
	fx_type_get(t->type)->to_float(t->data, out, rows * cols);
	for (int64_t r = 0, s = 0; r < rows; r++) {
		while (in_proj && s < 4 && r >= bound[s])
			s++;
		float m = (float)(whole * (in_proj ? sec[s] : 1));
		for (int64_t c = 0; c < cols; c++)
			out[r * cols + c] *= m;
	}
	*data = out;
	*type = FX_TYPE_F32;
	return FX_OK;
}
