#include "model/rope.h"

#include <math.h>

/* YaRN's dimension index at which a frequency makes num_rot rotations over
 * the original context (HF find_correction_dim). */
static double yarn_corr_dim(double num_rot, int dim, double base, double orig_ctx)
{
	return dim * log(orig_ctx / (num_rot * 2 * M_PI)) / (2 * log(base));
}

void rope_inv_freq(float *inv_freq, int n_rot, float base, const struct rope_scaling *sc,
		   const float *freq_factors)
{
	int half = n_rot / 2;
	double lo = 0, hi = 0;
	if (sc->type == ROPE_SCALING_YARN) {
		lo = yarn_corr_dim(sc->beta_fast, n_rot, base, sc->orig_ctx);
		hi = yarn_corr_dim(sc->beta_slow, n_rot, base, sc->orig_ctx);
		if (sc->yarn_truncate) {
			lo = floor(lo);
			hi = ceil(hi);
		}
		lo = lo < 0 ? 0 : lo;
		hi = hi > n_rot - 1 ? n_rot - 1 : hi;
		if (lo == hi)
			hi += 0.001;
	}
	for (int i = 0; i < half; i++) {
		double f = 1.0 / pow((double)base, 2.0 * i / n_rot);
		switch (sc->type) {
		case ROPE_SCALING_NONE:
			break;
		case ROPE_SCALING_LINEAR:
			f /= sc->factor;
			break;
		case ROPE_SCALING_LLAMA3: {
			double wl = 2 * M_PI / f;
			double low_wl = sc->orig_ctx / sc->low_freq, high_wl = sc->orig_ctx / sc->high_freq;
			if (wl > low_wl) {
				f /= sc->factor;
			} else if (wl >= high_wl) {
				double s = (sc->orig_ctx / wl - sc->low_freq) / (sc->high_freq - sc->low_freq);
				f = (1 - s) * f / sc->factor + s * f;
			}
			break;
		}
		case ROPE_SCALING_YARN: {
			/* Blend interpolated (f / factor) and extrapolated (f)
			 * frequencies along a linear ramp over the dimensions. */
			double ramp = (i - lo) / (hi - lo);
			ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
			double extrap = 1 - ramp;
			f = f / sc->factor * (1 - extrap) + f * extrap;
			break;
		}
		}
		if (freq_factors)
			f /= freq_factors[i];
		inv_freq[i] = (float)f;
	}
}
