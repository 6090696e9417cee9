/* Kernel-set selection: which sets this CPU runs, and a set's table
 * filled from kernels/generic and kernels/x86 (kernels/kern.h). */
/* syscall (the AMX tile permission) needs _GNU_SOURCE, which the build defines */
#include "kernels/kern.h"

#include <stdbool.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/status.h"
#include "ferrox.h"
#include "kernels/generic/generic.h"
#include "kernels/x86/x86.h"
#include "quant/quant.h"

#if defined(__x86_64__)
/* Register reg (0 EAX .. 3 EDX) of CPUID leaf, subleaf (0 where the leaf
 * is past the highest one the CPU has). */
static unsigned cpuid_reg(unsigned leaf, unsigned sub, int reg)
{
	unsigned r[4] = { 0, 0, 0, 0 };
	if ((unsigned)__get_cpuid_max(0, NULL) >= leaf)
		__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
	return r[reg];
}
#endif

#if defined(FX_HAVE_AMX)
/* Whether this process may run AMX-INT8 tile instructions: CPUID leaf 7
 * EDX bits 24 (AMX-TILE) and 25 (AMX-INT8), XCR0 (xcr0) bits 17 and 18
 * (the OS saves the tile configuration and data), and Linux (5.16 on)
 * granting the process the tile data state: arch_prctl
 * ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18), without which
 * the first tile instruction raises SIGILL (the kernel's
 * Documentation/arch/x86/xstate.rst). The request is per process and
 * idempotent; it lets the kernel enlarge every thread's signal frame.
 * Elsewhere: false. */
static bool amx_usable(unsigned xcr0)
{
	const unsigned edx7 = cpuid_reg(7, 0, 3);
	if ((edx7 >> 24 & 3) != 3 || (xcr0 & 0x60000) != 0x60000)
		return false;
#if defined(__linux__)
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
	return false;
#endif
}
#endif

/* The sets the CPU runs, as bit (1 << set); the portable set always
 * runs. Asked only when setting up (a model's repacking, a context's
 * kernel set), so it is read each time rather than cached in a global. */
static unsigned isa_detect(void)
{
	unsigned m = 1u << KERN_PORTABLE;
#if defined(__x86_64__)
	/* AVX2 through libgcc/compiler-rt, which also checks that the OS
	 * saves YMM state; the rest from CPUID (Intel SDM vol. 2, CPUID),
	 * since clang 14's __builtin_cpu_supports knows neither "f16c" nor
	 * "avxvnni": FMA (leaf 1 ECX bit 12), F16C (leaf 1 ECX bit 29),
	 * AVX-VNNI (leaf 7 subleaf 1 EAX bit 4, present when leaf 7 subleaf 0
	 * EAX >= 1); AVX512F, BW, VL (leaf 7 EBX bits 16, 30, 31) and
	 * AVX512_VNNI (leaf 7 ECX bit 11), with the OS saving the SSE and
	 * AVX state, the opmask and all 512-bit registers (XCR0 bits 1, 2
	 * and 5-7, read by xgetbv once leaf 1 ECX bit 27, OSXSAVE, says it
	 * may be). */
	unsigned ecx1 = cpuid_reg(1, 0, 2);
	if (!__builtin_cpu_supports("avx2") || !(ecx1 >> 12 & 1) || !(ecx1 >> 29 & 1))
		return m;
	m |= 1u << KERN_AVX2;
#if defined(FX_HAVE_AVXVNNI)
	if (cpuid_reg(7, 0, 0) >= 1 && (cpuid_reg(7, 1, 0) >> 4 & 1))
		m |= 1u << KERN_AVXVNNI;
#endif
#if defined(FX_HAVE_AVX512)
	unsigned lo = 0, hi = 0;
	if (ecx1 >> 27 & 1)
		__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	const unsigned ebx_need = 1u << 16 | 1u << 30 | 1u << 31;
	if ((lo & 0xE6) == 0xE6 && (cpuid_reg(7, 0, 1) & ebx_need) == ebx_need && (cpuid_reg(7, 0, 2) >> 11 & 1))
		m |= 1u << KERN_AVX512;
#if defined(FX_HAVE_AMX)
	if (m >> KERN_AVX512 & 1 && amx_usable(lo))
		m |= 1u << KERN_AMX;
#endif
#endif
#endif
	return m;
}

bool kern_isa_runs(enum kern_isa isa)
{
	return (unsigned)isa < 32 && (isa_detect() >> isa & 1);
}

enum kern_isa kern_isa_best(void)
{
	/* the highest bit: the enum lists the sets in order of preference */
	return (enum kern_isa)(31 - __builtin_clz(isa_detect()));
}

static const char *const isa_names[] = {
	[KERN_PORTABLE] = "portable", [KERN_AVX2] = "avx2", [KERN_AVXVNNI] = "avxvnni", [KERN_AVX512] = "avx512",
	[KERN_AMX] = "amx",
};

const char *fx_kernels_built(void)
{
	return "portable"
#if defined(__x86_64__)
	       " avx2"
#if defined(FX_HAVE_AVXVNNI)
	       " avxvnni"
#endif
#if defined(FX_HAVE_AVX512)
	       " avx512"
#endif
#if defined(FX_HAVE_AMX)
	       " amx"
#endif
#endif
		;
}

const char *fx_kernels_auto(void)
{
	return isa_names[kern_isa_best()];
}

const char *kern_isa_name(enum kern_isa isa)
{
	return isa_names[isa];
}

/* enum fx_kernels lists the sets after AUTO in kern_isa's order: set
 * FX_KERNELS_x is kern_isa x + 1. */
_Static_assert(FX_KERNELS_AVX2 == FX_KERNELS_PORTABLE + KERN_AVX2 &&
	       FX_KERNELS_AVXVNNI == FX_KERNELS_PORTABLE + KERN_AVXVNNI &&
	       FX_KERNELS_AVX512 == FX_KERNELS_PORTABLE + KERN_AVX512 &&
	       FX_KERNELS_AMX == FX_KERNELS_PORTABLE + KERN_AMX,
	       "enum fx_kernels follows enum kern_isa");
int kern_isa_of(int32_t kernels, enum kern_isa *isa, struct fx_err *err)
{
	if (kernels == FX_KERNELS_AUTO) {
		*isa = kern_isa_best();
		return FX_OK;
	}
	if (kernels < FX_KERNELS_PORTABLE || kernels > FX_KERNELS_AMX)
		return fx_fail(err, FX_E_INVALID, "kernels = %d is not an enum fx_kernels value", (int)kernels);
	*isa = (enum kern_isa)(kernels - FX_KERNELS_PORTABLE);
	if (!kern_isa_runs(*isa))
		return fx_fail(err, FX_E_UNSUPPORTED, "the %s kernel set does not run here (this build "
			       "has: %s; the best this CPU runs: %s)", isa_names[*isa], fx_kernels_built(),
			       fx_kernels_auto());
	return FX_OK;
}

int fx_kernels_from_name(const char *name, int32_t *kernels)
{
	if (name && !strcmp(name, "auto")) {
		*kernels = FX_KERNELS_AUTO;
		return FX_OK;
	}
	for (int i = KERN_PORTABLE; name && i <= KERN_AMX; i++)
		if (!strcmp(name, isa_names[i])) {
			*kernels = FX_KERNELS_PORTABLE + i;
			return FX_OK;
		}
	return FX_E_INVALID;
}

size_t kern_act_row_bytes(const struct kern_set *ks, int vdt, int64_t n)
{
	size_t blocks = fx_row_size(vdt, n);
	if (!ks->act_arrays || (vdt != FX_TYPE_Q8_0 && vdt != FX_TYPE_Q8_1))
		return blocks;
	/* blocks, then two arrays of the same padded size */
	return 2 * kern_act_s_off(blocks, n / 32) - kern_act_d_off(blocks);
}

size_t kern_act_row_bytes_max(int vdt, int64_t n)
{
	/* the AVX2 layout is never smaller than the plain blocks */
	return kern_act_row_bytes(&(struct kern_set){ .act_arrays = true }, vdt, n);
}

int kern_set_init(struct kern_set *ks, enum kern_isa isa)
{
	kern_generic_fill(ks);
	if (isa == KERN_PORTABLE)
		return FX_OK;
	if (!kern_isa_runs(isa))
		return FX_E_UNSUPPORTED;
#if defined(__x86_64__)
	ks->isa = isa;
	kern_x86_fill(ks);
#endif
	return FX_OK;
}
