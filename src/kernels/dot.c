/* Kernel-set selection (see kernels/dot.h). */
#include "kernels/dot.h"

#include "quant/quant.h"

enum kern_isa kern_isa_best(void)
{
#if defined(__x86_64__)
	/* libgcc's cpu model is filled once by a constructor; reading it is
	 * free of side effects. */
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	    __builtin_cpu_supports("f16c"))
		return KERN_AVX2;
#endif
	return KERN_PORTABLE;
}

kern_dot_fn kern_dot_get(int t, enum kern_isa isa)
{
#if defined(__x86_64__)
	if (isa == KERN_AVX2 && kern_isa_best() == KERN_AVX2)
		return kern_dot_get_avx2(t);
#else
	(void)t;
	(void)isa;
#endif
	return NULL;
}

void kern_vec_dot(enum kern_isa isa, int t, int64_t n, float *s, const void *x, const void *y)
{
	kern_dot_fn k = kern_dot_get(t, isa);
	if (k)
		k(n, x, y, 0, 1, s, 0);
	else
		fx_type_get(t)->vec_dot(n, s, x, y);
}

void kern_axpy(enum kern_isa isa, int t, int64_t n, float w, const void *v, float *out, float *tmp)
{
#if defined(__x86_64__)
	if (isa == KERN_AVX2 && kern_isa_best() == KERN_AVX2) {
		if (t == FX_TYPE_F32) {
			kern_axpy_avx2_f32(n, w, v, out);
			return;
		}
		if (t == FX_TYPE_F16) {
			kern_axpy_avx2_f16(n, w, v, out);
			return;
		}
	}
#endif
	const float *vf = v;
	if (t != FX_TYPE_F32) {
		fx_type_get(t)->to_float(v, tmp, n);
		vf = tmp;
	}
	for (int64_t i = 0; i < n; i++)
		out[i] += w * vf[i];
}
