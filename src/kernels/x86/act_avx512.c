/* The AVX-512 set's GLU and attention softmax: kernels/x86/vmath.h at 512
 * bits, sixteen elements per step, each element the same operations as
 * act_avx2.c's eight-lane form (so the same bits; test_kernels compares
 * the sets). Built with the AVX-512 flags (CMakeLists.txt). */
#if defined(__x86_64__) && defined(__AVX512F__)

#include "kernels/x86/x86.h"
#define VM_BITS 512
#include "kernels/x86/vmath.h"

VM_GLU_ROW(kern_glu_avx512_silu, silu_glu16)
VM_GLU_ROW(kern_glu_avx512_gelu, gelu_glu16)

void kern_softmax_avx512(float *s, size_t ss, int nh, int n, float scale, float *m, float *l, float *r)
{
	softmax16(s, ss, nh, n, scale, m, l, r);
}

#endif /* __x86_64__ && __AVX512F__ */
