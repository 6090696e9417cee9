/* The attention softmax's arithmetic, shared by every kernel set's
 * kern_softmax_fn (kern.h) so that all of them give the same bits on any
 * libm: the portable C calls these scalar forms, the ISA forms repeat each
 * operation lane by lane (kernels/x86/act_avx2.c).
 *
 * e^x for x <= 0 (a score minus the running maximum): Cephes' expf
 * algorithm (Moshier 1984) in single precision with fused multiply-adds,
 * x = n ln2 + r, |r| <= ln2 / 2, n = round-to-nearest-even(x log2 e)
 * through the 1.5 * 2^23 shift, ln2 in two parts (Cody & Waite), a
 * degree-6 polynomial for e^r and 2^n through the exponent bits. Within 2
 * ulp of e^x on [-87, 0] (tests/test_kernels.c sweeps it); x < -87 (e^x
 * below 2^-125, against a maximum weight of 1) and -inf give 0; NaN stays
 * NaN. Every step is one IEEE operation (fmaf is fused in C as in the
 * vector units), so vector lanes and this scalar form agree exactly.
 *
 * A chunk's weights are summed in eight lanes (weight i into lane i % 8),
 * then the lanes as (0+4, 1+5, 2+6, 3+7), then pairs, then the two:
 * vertical vector adds and a fixed tree, the same order whatever the ISA. */
#ifndef FX_KERNELS_SOFTMAX_H
#define FX_KERNELS_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define KERN_EXP_CUT (-87.0f)        /* below: e^x is taken as 0 */
#define KERN_EXP_SHIFT 0x1.8p23f     /* 1.5 * 2^23: x log2e + it rounds to an integer */
#define KERN_EXP_LOG2E 0x1.715476p+0f
#define KERN_EXP_LN2_HI 0.693359375f /* ln 2 = HI + LO; HI has 9 bits, n HI exact */
#define KERN_EXP_LN2_LO (-2.12194440e-4f)
#define KERN_EXP_P0 1.9875691500e-4f /* e^r ~ 1 + r + r^2 (P5 + r (P4 + ... r P0)) */
#define KERN_EXP_P1 1.3981999507e-3f
#define KERN_EXP_P2 8.3334519073e-3f
#define KERN_EXP_P3 4.1665795894e-2f
#define KERN_EXP_P4 1.6666665459e-1f
#define KERN_EXP_P5 5.0000001201e-1f

/* e^x for x <= 0, as above. */
static inline float kern_exp_neg(float x)
{
	if (x != x)
		return x;
	if (x < KERN_EXP_CUT)
		return 0.0f;
	float z = fmaf(x, KERN_EXP_LOG2E, KERN_EXP_SHIFT), n = z - KERN_EXP_SHIFT;
	float r = fmaf(n, -KERN_EXP_LN2_HI, x);
	r = fmaf(n, -KERN_EXP_LN2_LO, r);
	float p = fmaf(KERN_EXP_P0, r, KERN_EXP_P1);
	p = fmaf(p, r, KERN_EXP_P2);
	p = fmaf(p, r, KERN_EXP_P3);
	p = fmaf(p, r, KERN_EXP_P4);
	p = fmaf(p, r, KERN_EXP_P5);
	float y = fmaf(p, r * r, r) + 1.0f;
	/* z's low mantissa bits hold n (two's complement): n << 23 plus the
	 * bias is 2^n, n in [-126, 0] */
	uint32_t zb, sb;
	memcpy(&zb, &z, sizeof(zb));
	sb = (zb << 23) + (127u << 23);
	float sc;
	memcpy(&sc, &sb, sizeof(sc));
	return y * sc;
}

/* The eight lanes' sum in the fixed tree above. */
static inline float kern_sum8(const float v[8])
{
	float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
	float b0 = a0 + a2, b1 = a1 + a3;
	return b0 + b1;
}

#endif
