#include <string.h>

#include "model/arch.h"

static const struct arch_desc *const archs[] = {
	&arch_llama,
	&arch_gemma3,
};

const struct arch_desc *arch_find(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
		if (strlen(archs[i]->name) == n && !memcmp(archs[i]->name, name, n))
			return archs[i];
	return NULL;
}
