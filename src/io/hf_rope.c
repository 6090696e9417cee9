/* Llama 3 RoPE scaling as frequency factors (see io/hf_rope.h). */
#include "io/hf_rope.h"

#include <math.h>

#include "quant/quant.h"

int hf_rope_llama3_freqs(struct gguf_file *g, int n_rot, double base, double factor, double lo,
			 double hi, double orig, struct fx_err *err)
{
	if (n_rot <= 0 || n_rot % 2 || !(factor > 0) || !(orig > 0) || !(lo > 0) || !(hi > lo))
		return fx_fail(err, FX_E_FORMAT, "config.json: llama3 RoPE scaling over %d dims with "
			       "factor %g, low_freq_factor %g, high_freq_factor %g, "
			       "original_max_position_embeddings %g", n_rot, factor, lo, hi, orig);
	int half = n_rot / 2;
	float *f = gguf_build_alloc(g, (size_t)half * sizeof(float));
	if (!f)
		return FX_E_NOMEM;
	for (int i = 0; i < half; i++) {
		double wl = 2 * M_PI * pow(base, 2.0 * i / n_rot);
		double s = (orig / wl - lo) / (hi - lo);
		f[i] = (float)(wl < orig / hi ? 1.0 : wl > orig / lo ? factor : 1.0 / ((1 - s) / factor + s));
	}
	int64_t ne[4] = { half, 1, 1, 1 };
	return gguf_build_tensor(g, "rope_freqs.weight", FX_TYPE_F32, 1, ne, f);
}
