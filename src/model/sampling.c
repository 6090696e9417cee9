/* The model's own sampling defaults: llama.cpp's general.sampling.* GGUF
 * keys (llama-model.cpp's LLAMA_MODEL_META_KEY_SAMPLING_*, read by
 * common.cpp's common_init_from_params), which a Hugging Face directory's
 * generation_config.json becomes in io/hf.c. Read once at load, checked
 * here for both formats, applied by the caller under its own flags
 * (fx_model_sampling_defaults). */
#include <math.h>
#include <stdio.h>

#include "core/status.h"
#include "io/gguf.h"
#include "model/model.h"

/* One key: its type, its range, where it goes. */
struct sampling_key {
	const char *key;
	uint32_t field;  /* FX_SAMPLING_* */
	bool integer;
	double lo, hi;   /* accepted range, both ends included */
};

static const struct sampling_key keys[] = {
	{ "general.sampling.temp", FX_SAMPLING_TEMP, false, 0, 100 },
	{ "general.sampling.top_k", FX_SAMPLING_TOP_K, true, 0, 1 << 30 },
	{ "general.sampling.top_p", FX_SAMPLING_TOP_P, false, 0, 1 },
	{ "general.sampling.min_p", FX_SAMPLING_MIN_P, false, 0, 1 },
	{ "general.sampling.penalty_repeat", FX_SAMPLING_REPEAT_PENALTY, false, 0, 100 },
	/* -1: the whole context, as llama.cpp's --repeat-last-n -1 */
	{ "general.sampling.penalty_last_n", FX_SAMPLING_REPEAT_LAST_N, true, -1, 1 << 20 },
};

int model_sampling_load(struct fx_model *m, struct fx_err *err)
{
	struct model_sampling *s = &m->sampling;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct sampling_key *k = &keys[i];
		double v;
		if (!gguf_find(m->g, k->key))
			continue;
		if (k->integer) {
			int64_t n;
			if (!gguf_get_i64(m->g, k->key, &n))
				return gguf_type_error(m->g, k->key, "int32", err);
			v = (double)n;
		} else {
			float f;
			if (!gguf_get_f32(m->g, k->key, &f))
				return gguf_type_error(m->g, k->key, "float32", err);
			v = f;
		}
		/* a bad default would change every reply silently: refuse it */
		if (!(v >= k->lo && v <= k->hi) || (k->field == FX_SAMPLING_REPEAT_PENALTY && v <= 0))
			return fx_fail(err, FX_E_FORMAT, "%s is %g, want %s%g to %g", k->key, v,
				       k->field == FX_SAMPLING_REPEAT_PENALTY ? "more than " : "",
				       k->lo, k->hi);
		switch (k->field) {
		case FX_SAMPLING_TEMP: s->temp = (float)v; break;
		case FX_SAMPLING_TOP_K: s->top_k = (int32_t)v; break;
		case FX_SAMPLING_TOP_P: s->top_p = (float)v; break;
		case FX_SAMPLING_MIN_P: s->min_p = (float)v; break;
		case FX_SAMPLING_REPEAT_PENALTY: s->repeat_penalty = (float)v; break;
		default: s->repeat_last_n = (int32_t)v; break;
		}
		s->set |= k->field;
	}
	return FX_OK;
}

uint32_t fx_model_sampling_defaults(const struct fx_model *m, uint32_t keep,
				    struct fx_sampler_params *p)
{
	if (!m || !p)
		return 0;
	const struct model_sampling *s = &m->sampling;
	uint32_t put = s->set & ~keep;
	if (put & FX_SAMPLING_TEMP)
		p->temp = s->temp;
	if (put & FX_SAMPLING_TOP_K)
		p->top_k = s->top_k;
	if (put & FX_SAMPLING_TOP_P)
		p->top_p = s->top_p;
	if (put & FX_SAMPLING_MIN_P)
		p->min_p = s->min_p;
	if (put & FX_SAMPLING_REPEAT_PENALTY)
		p->repeat_penalty = s->repeat_penalty;
	if (put & FX_SAMPLING_REPEAT_LAST_N)
		p->repeat_last_n = s->repeat_last_n;
	return put;
}
