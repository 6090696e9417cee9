/* The gated MLP half of a decoder layer (Shazeer 2020, "GLU Variants
 * Improve Transformer"): down(act(gate h) * up h). */
#include "model/forward.h"

void ffn_forward(const struct fx_model *m, int il, struct fx_pool *pool, struct fwd_scratch *s,
		 int32_t n, const float *h, float *out)
{
	const struct layer *L = &m->layers[il];
	size_t nf = (size_t)n * (size_t)m->hp.n_ff;
	op_matmul(pool, &L->ffn_gate, h, n, s->gate, s->qbuf);
	op_matmul(pool, &L->ffn_up, h, n, s->up, s->qbuf);
	if (m->arch->act == ACT_GELU_TANH && m->hp.gelu_f16) {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_gelu_tanh_f16(s->gate[i]) * s->up[i];
	} else if (m->arch->act == ACT_GELU_TANH) {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_gelu_tanh(s->gate[i]) * s->up[i];
	} else {
		for (size_t i = 0; i < nf; i++)
			s->gate[i] = op_silu(s->gate[i]) * s->up[i];
	}
	op_matmul(pool, &L->ffn_down, s->gate, n, out, s->qbuf);
}
