/* The portable kernel set (generic.h). */
#include "kernels/generic/generic.h"

#include <math.h>
#include <string.h>

#include "kernels/softmax.h"
#include "quant/blocks.h"
#include "quant/quant.h"

/* kern_softmax_fn with softmax.h's e^x and sum order. */
static void softmax(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	for (int h = 0; h < nh; h++) {
		float *sh = s + (size_t)h * ss, cm = -INFINITY;
		for (int i = 0; i < n; i++) {
			sh[i] *= scale;
			cm = sh[i] > cm ? sh[i] : cm;
		}
		r[h] = 1.0f;
		if (cm > m[h]) {
			r[h] = kern_exp_neg(m[h] - cm);
			l[h] *= r[h];
			m[h] = cm;
		}
		float lanes[8] = { 0 };
		for (int i = 0; i < n; i++) {
			sh[i] = kern_exp_neg(sh[i] - m[h]);
			lanes[i % 8] += sh[i];
		}
		l[h] += kern_sum8(lanes);
	}
}

/* SiLU / swish: x * sigmoid(x) (Elfwing et al. 2017). */
static void glu_silu(float *g, const float *u, long n)
{
	for (long i = 0; i < n; i++)
		g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* GELU, tanh approximation (Hendrycks & Gimpel 2016), as gelu_pytorch_tanh. */
static void glu_gelu(float *g, const float *u, long n)
{
	const float c = 0.7978845608028654f; /* sqrt(2/pi) */
	for (long i = 0; i < n; i++) {
		float x = g[i];
		g[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
	}
}

/* Row by row, each converted to f32 first (through tmp unless already
 * f32), then out += w * v per head. */
static void pv_rows(int64_t n, int nh, int nk, const float *w, size_t ws, const void *const *v,
		    float *out, size_t os, float *tmp, int t)
{
	for (int r = 0; r < nk; r++) {
		const float *x = v[r];
		if (t != FX_TYPE_F32) {
			fx_type_get(t)->to_float(v[r], tmp, n);
			x = tmp;
		}
		for (int h = 0; h < nh; h++)
			for (int64_t i = 0; i < n; i++)
				out[(size_t)h * os + i] += w[(size_t)h * ws + r] * x[i];
	}
}

#define PV_PORTABLE(name, type)                                                               \
	static void name(int64_t n, int nh, int nk, const float *w, size_t ws,                \
			 const void *const *v, float *out, size_t os, float *tmp)               \
	{                                                                                      \
		pv_rows(n, nh, nk, w, ws, v, out, os, tmp, type);                              \
	}
PV_PORTABLE(pv_f32, FX_TYPE_F32)
PV_PORTABLE(pv_f16, FX_TYPE_F16)
PV_PORTABLE(pv_q8_0, FX_TYPE_Q8_0)

static void round_f16(const float *x, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] = quant_fp16_to_fp32(quant_fp32_to_fp16(x[i]));
}

void kern_generic_fill(struct kern_set *ks)
{
	memset(ks, 0, sizeof(*ks));
	ks->isa = KERN_PORTABLE;
	for (int t = 0; t < FX_TYPE_COUNT; t++) {
		const struct fx_type_traits *tt = fx_type_get(t);
		ks->act_quant[t] = tt ? tt->from_float : NULL;
	}
	ks->pv[FX_TYPE_F32] = pv_f32;
	ks->pv[FX_TYPE_F16] = pv_f16;
	ks->pv[FX_TYPE_Q8_0] = pv_q8_0;
	ks->glu[KERN_GLU_SILU] = glu_silu;
	ks->glu[KERN_GLU_GELU] = glu_gelu;
	ks->softmax = softmax;
	ks->round_f16 = round_f16;
	ks->tok_block = KERN_NT_MAX;
	ks->chunk_bytes = 96 * 1024;
}
