#include "kv/kv.h"

#include "core/alloc.h"
#include "ferrox.h"

int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width)
{
	*c = (struct kv_contig){ .n_layer = n_layer, .n_ctx = n_ctx, .k_width = k_width,
				 .v_width = v_width };
	if (n_layer <= 0 || n_ctx <= 0 || k_width <= 0 || v_width <= 0)
		return FX_E_INVALID;
	size_t rows = (size_t)n_layer * (size_t)n_ctx;
	c->k = fx_malloc_array(rows, (size_t)k_width * sizeof(float));
	c->v = fx_malloc_array(rows, (size_t)v_width * sizeof(float));
	if (!c->k || !c->v) {
		kv_contig_fini(c);
		return FX_E_NOMEM;
	}
	return FX_OK;
}

void kv_contig_fini(struct kv_contig *c)
{
	fx_free(c->k);
	fx_free(c->v);
	c->k = c->v = NULL;
}
