/* The one list of families: GGUF architecture names, the HF model_types
 * each maps, the tensor groups a file may hold. Everything that names the
 * families (arch_find, the "supported:" messages, hf_open's table) reads
 * this list. */
#include <stdio.h>
#include <string.h>

#include "model/arch.h"

extern const struct arch_desc arch_llama, arch_granite, arch_smollm3, arch_qwen2, arch_qwen3,
	arch_phi3, arch_gemma, arch_gemma2, arch_gemma3, arch_olmo2, arch_qwen2moe, arch_qwen3moe,
	arch_gpt_oss, arch_deepseek2, arch_lfm2, arch_mamba2, arch_granite_hybrid, arch_qwen35,
	arch_qwen35moe, arch_qwen3next, arch_lfm2moe, arch_nemotron_h, arch_falcon_h1,
	arch_seed_oss, arch_ernie4_5, arch_ernie4_5_moe, arch_glm4moe, arch_minimax_m2, arch_llama4, arch_gemma4;
extern const struct arch_desc arch_nemotron_h_moe;

static const struct arch_desc *const archs[] = {
	&arch_llama, &arch_granite, &arch_smollm3, &arch_qwen2, &arch_qwen3, &arch_phi3,
	&arch_gemma, &arch_gemma2, &arch_gemma3, &arch_olmo2, &arch_qwen2moe, &arch_qwen3moe,
	&arch_gpt_oss, &arch_deepseek2, &arch_lfm2, &arch_mamba2, &arch_granite_hybrid, &arch_qwen35,
	&arch_qwen35moe, &arch_qwen3next, &arch_lfm2moe, &arch_nemotron_h, &arch_falcon_h1,
	&arch_nemotron_h_moe,
	&arch_seed_oss, &arch_ernie4_5, &arch_ernie4_5_moe, &arch_glm4moe, &arch_minimax_m2, &arch_llama4, &arch_gemma4,
};

#define N_ARCHS (sizeof(archs) / sizeof(archs[0]))

/* The names of every row (its HF model_types when hf), comma-separated. */
static const char *join(char *buf, size_t n, bool hf)
{
	size_t len = 0;
	if (!n)
		return buf;
	buf[0] = 0;
	for (size_t i = 0; i < N_ARCHS; i++)
		for (int k = 0; k < (hf ? ARCH_MAX_HF : 1); k++) {
			const char *s = hf ? archs[i]->hf[k].model_type : archs[i]->name;
			if (!s)
				break;
			int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", s);
			if (w < 0 || (size_t)w >= n - len)
				return buf;
			len += (size_t)w;
		}
	return buf;
}

const char *arch_names(char *buf, size_t n)
{
	return join(buf, n, false);
}

const struct arch_desc *arch_find(const char *name, size_t n)
{
	for (size_t i = 0; i < N_ARCHS; i++)
		if (strlen(archs[i]->name) == n && !memcmp(archs[i]->name, name, n))
			return archs[i];
	return NULL;
}

unsigned arch_groups(const struct arch_desc *a)
{
	return a->tensors | (a->no_pre_norms ? 0u : AT_PRE_NORMS) |
	       (a->qk_norm == QK_NORM_HEAD || a->qk_norm == QK_NORM_FULL ? AT_QK_NORM : 0u) | (a->post_norms ? AT_POST_NORMS : 0u) |
	       (a->router == ROUTER_SIGMOID_BIAS ? AT_EXP_PROBS_B : 0u);
}

/* Per-layer tensors (after "blk.N.") by group; group 0 is the base set. */
static const struct {
	unsigned group;
	const char *what;
	const char *names[6];
} layer_tensors[] = {
	{ 0, "a base tensor", { "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
		       "ffn_gate.weight", "ffn_up.weight" } },
	{ 0, "a base tensor", { "ffn_down.weight" } },
	{ AT_PRE_NORMS, "a pre-sublayer norm", { "attn_norm.weight", "ffn_norm.weight" } },
	{ AT_QK_NORM, "a Q/K norm", { "attn_q_norm.weight", "attn_k_norm.weight" } },
	{ AT_POST_NORMS, "a post-sublayer norm", { "post_attention_norm.weight", "post_ffw_norm.weight" } },
	{ AT_QKV_BIAS, "a Q/K/V bias", { "attn_q.bias", "attn_k.bias", "attn_v.bias" } },
	{ AT_OUT_BIAS, "an attention output bias", { "attn_output.bias" } },
	{ AT_SINKS, "attention sinks", { "attn_sinks.weight" } },
	{ AT_FUSED, "a fused QKV projection", { "attn_qkv.weight" } },
	{ AT_MLA, "latent attention (MLA)", { "attn_q_a.weight", "attn_q_a_norm.weight",
		"attn_q_b.weight", "attn_kv_a_mqa.weight", "attn_kv_a_norm.weight", "attn_kv_b.weight" } },
	{ AT_MOE, "a mixture-of-experts layer", { "ffn_gate_inp.weight", "ffn_gate_exps.weight",
		"ffn_up_exps.weight", "ffn_down_exps.weight" } },
	{ AT_MOE_BIAS, "a router or expert bias", { "ffn_gate_inp.bias", "ffn_gate_exps.bias",
		"ffn_up_exps.bias", "ffn_down_exps.bias" } },
	{ AT_EXP_PROBS_B, "an expert selection bias", { "exp_probs_b.bias" } },
	{ AT_SHEXP, "a shared expert", { "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
		"ffn_down_shexp.weight" } },
	{ AT_SHEXP_GATE, "a shared-expert gate", { "ffn_gate_inp_shexp.weight" } },
	{ AT_SHORTCONV, "a short-convolution mixer", { "shortconv.conv.weight",
		"shortconv.in_proj.weight", "shortconv.out_proj.weight" } },
	{ AT_SSM | AT_GDN, "a Mamba-2 or Gated DeltaNet mixer", { "ssm_conv1d.weight", "ssm_dt.bias",
		"ssm_a", "ssm_norm.weight", "ssm_out.weight" } },
	{ AT_SSM, "a Mamba-2 mixer", { "ssm_in.weight", "ssm_conv1d.bias", "ssm_d" } },
	{ AT_GDN, "a Gated DeltaNet mixer", { "attn_gate.weight", "ssm_beta.weight",
		"ssm_alpha.weight", "ssm_ba.weight" } },
	{ AT_OUT_SCALE, "a layer output scale", { "layer_output_scale.weight" } },
	{ AT_PLE, "a per-layer input", { "inp_gate.weight", "proj.weight", "post_norm.weight" } },
	{ AT_MOE_PAR, "a parallel mixture of experts", { "ffn_gate_inp.scale", "ffn_gate_up_exps.weight",
		"ffn_down_exps.scale", "pre_ffw_norm_2.weight", "post_ffw_norm_1.weight",
		"post_ffw_norm_2.weight" } },
	{ AT_NEXTN, "a multi-token-prediction block", { "nextn.eh_proj.weight", "nextn.enorm.weight",
		"nextn.hnorm.weight", "nextn.embed_tokens.weight", "nextn.shared_head_head.weight",
		"nextn.shared_head_norm.weight" } },
};

static const struct {
	unsigned group;
	const char *what, *name;
} global_tensors[] = {
	{ 0, "a base tensor", "token_embd.weight" },
	{ 0, "a base tensor", "output_norm.weight" },
	{ 0, "a base tensor", "output.weight" },
	{ AT_ROPE_FREQS, "RoPE frequency factors", "rope_freqs.weight" },
	{ AT_EMBD_NORM, "LFM2's final norm", "token_embd_norm.weight" },
	{ AT_PLE, "the per-layer inputs", "per_layer_token_embd.weight" },
	{ AT_PLE, "the per-layer inputs", "per_layer_model_proj.weight" },
	{ AT_PLE, "the per-layer inputs", "per_layer_proj_norm.weight" },
};

static bool span_is(const char *p, size_t n, const char *s)
{
	return strlen(s) == n && !memcmp(p, s, n);
}

/* name[0..n) after a "blk.<digits>." prefix, or NULL without one. */
static const char *layer_suffix(const char *name, size_t n, size_t *rest)
{
	size_t i = 4;
	if (n < 6 || memcmp(name, "blk.", 4))
		return NULL;
	while (i < n && name[i] >= '0' && name[i] <= '9')
		i++;
	if (i == 4 || i >= n || name[i] != '.')
		return NULL;
	*rest = n - i - 1;
	return name + i + 1;
}

long arch_tensor_group(const struct arch_desc *a, const char *name, size_t n, const char **what)
{
	size_t sn;
	const char *s = layer_suffix(name, n, &sn);
	*what = "unknown";
	if (!s) {
		for (size_t i = 0; i < sizeof(global_tensors) / sizeof(global_tensors[0]); i++)
			if (span_is(name, n, global_tensors[i].name)) {
				*what = global_tensors[i].what;
				return global_tensors[i].group;
			}
		return -1;
	}
	/* The row's own name for the pre-MLP norm comes first: gpt-oss's
	 * post_attention_norm is Gemma's post norm. */
	if (a->ffn_norm_name && sn == strlen(a->ffn_norm_name) + 7 &&
	    !memcmp(s, a->ffn_norm_name, sn - 7) && !memcmp(s + sn - 7, ".weight", 7)) {
		*what = "a pre-sublayer norm";
		return AT_PRE_NORMS;
	}
	if (a->ffn_norm_bare && span_is(s, sn, a->ffn_norm_name ? a->ffn_norm_name : "ffn_norm")) {
		*what = "a pre-sublayer norm";
		return AT_PRE_NORMS;
	}
	for (size_t i = 0; i < sizeof(layer_tensors) / sizeof(layer_tensors[0]); i++)
		for (int k = 0; k < 6 && layer_tensors[i].names[k]; k++)
			if (span_is(s, sn, layer_tensors[i].names[k])) {
				*what = layer_tensors[i].what;
				return layer_tensors[i].group;
			}
	return -1;
}

static const struct hf_family *hf_find(const char *model_type, const char **arch)
{
	for (size_t i = 0; i < N_ARCHS; i++)
		for (int k = 0; k < ARCH_MAX_HF && archs[i]->hf[k].model_type; k++)
			if (!strcmp(archs[i]->hf[k].model_type, model_type)) {
				*arch = archs[i]->name;
				return &archs[i]->hf[k];
			}
	return NULL;
}

static const char *hf_names(char *buf, size_t n)
{
	return join(buf, n, true);
}

const struct hf_registry arch_hf = { .find = hf_find, .names = hf_names };
