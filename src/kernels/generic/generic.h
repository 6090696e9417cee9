/* The portable kernel set (KERN_PORTABLE): plain C, the oracle every ISA
 * set is tested against (tests/test_kernels.c). Its matmul is the type
 * table's vec_dot (quant/quant.h), one row pair per call. */
#ifndef FX_KERNELS_GENERIC_GENERIC_H
#define FX_KERNELS_GENERIC_GENERIC_H

#include "kernels/kern.h"

/* *ks = the portable set: no dot / gemm / gemm_x8 / qk kernels, the type
 * table's quantizers, and the C forms of the rest. */
void kern_generic_fill(struct kern_set *ks);

#endif
