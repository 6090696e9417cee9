#include "kv/kv.h"

#include "core/alloc.h"
#include "ferrox.h"
#include "quant/quant.h"

bool kv_type_ok(int type, int64_t head_width)
{
	if (type != FX_TYPE_F32 && type != FX_TYPE_F16 && type != FX_TYPE_Q8_0)
		return false;
	return head_width > 0 && head_width % fx_type_get(type)->blck_size == 0;
}

int kv_contig_init(struct kv_contig *c, int32_t n_layer, int32_t n_ctx, int64_t k_width,
		   int64_t v_width, int k_type, int v_type)
{
	*c = (struct kv_contig){ .n_layer = n_layer, .n_ctx = n_ctx, .k_width = k_width,
				 .v_width = v_width, .k_type = k_type, .v_type = v_type };
	if (n_layer <= 0 || n_ctx <= 0 || k_width <= 0 || v_width <= 0 ||
	    !kv_type_ok(k_type, k_width) || !kv_type_ok(v_type, v_width))
		return FX_E_INVALID;
	c->k_row = fx_row_size(k_type, k_width);
	c->v_row = fx_row_size(v_type, v_width);
	size_t rows = (size_t)n_layer * (size_t)n_ctx;
	c->k = fx_malloc_lines(rows, c->k_row); /* rows on cache lines where their size allows */
	c->v = fx_malloc_lines(rows, c->v_row);
	c->bytes = fx_lines_bytes(rows, c->k_row) + fx_lines_bytes(rows, c->v_row);
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
