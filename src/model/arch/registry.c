#include <string.h>

#include "model/arch.h"

static const struct arch_desc *const archs[] = {
	&arch_llama, &arch_granite, &arch_smollm3, &arch_qwen2, &arch_qwen3, &arch_phi3,
	&arch_gemma, &arch_gemma2, &arch_gemma3, &arch_olmo2, &arch_qwen2moe, &arch_qwen3moe,
	&arch_gpt_oss, &arch_deepseek2,
};

const char *arch_names(void)
{
	return "llama, granite, smollm3, qwen2, qwen3, phi3, gemma, gemma2, gemma3, olmo2, "
	       "qwen2moe, qwen3moe, gpt-oss, deepseek2";
}

const struct arch_desc *arch_find(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (strlen(archs[i]->name) == n && !memcmp(archs[i]->name, name, n))
			return archs[i];
	return NULL;
}
