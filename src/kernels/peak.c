/* The compute roofline's measured side: the rate at which this CPU runs
 * the integer dot-product instruction a kernel set builds its sums from
 * (fx_kernels_peak). Chains of that one instruction, independent enough
 * to fill every port that executes it, on every thread at once: what no
 * kernel of the set can exceed, since each also loads, unpacks and
 * scales. Functions carry their ISA as a target attribute and run only
 * where the CPU has it (kern_isa_runs). */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "core/status.h"
#include "ferrox.h"
#include "kernels/kern.h"
#include "kernels/x86/x86.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Independent chains per thread: the instructions' latency (4-5 cycles)
 * times the ports that run them (2), with room to spare. */
enum { PEAK_CHAINS = 12 };

/* One probe: runs iters rounds of PEAK_CHAINS instructions, returns the
 * multiply-accumulates done (u8 x s8 products). */
typedef uint64_t (*peak_fn)(uint64_t iters, uint32_t seed);

#if defined(__x86_64__)
/* A probe over 256-bit registers: PEAK_CHAINS chains of acc = OP(acc),
 * from distinct starting values; the returned count adds 1 when a
 * lane matches a constant so the chains cannot be optimized away. */
#define PEAK_YMM(name, isa, OP)                                                     \
	__attribute__((target(isa))) static uint64_t name(uint64_t iters, uint32_t seed) \
	{                                                                              \
		__m256i a[PEAK_CHAINS];                                                \
		const __m256i u = _mm256_set1_epi8(1), w = _mm256_set1_epi8(2);        \
		(void)u;                                                               \
		for (int k = 0; k < PEAK_CHAINS; k++)                                  \
			a[k] = _mm256_set1_epi32((int)(seed + (uint32_t)k));           \
		for (uint64_t i = 0; i < iters; i++)                                   \
			for (int k = 0; k < PEAK_CHAINS; k++)                          \
				a[k] = OP;                                             \
		__m256i s = a[0];                                                      \
		for (int k = 1; k < PEAK_CHAINS; k++)                                  \
			s = _mm256_xor_si256(s, a[k]);                                 \
		return iters * PEAK_CHAINS * 32 + (_mm256_extract_epi32(s, 0) == 0x7fffffff); \
	}

/* AVX2: vpmaddubsw ymm, 32 u8 x s8 products (pair-summed into int16).
 * The set's kernels also need a widening vpmaddwd per one or two of these
 * on the same ports, so they reach at most half to two thirds of it. */
PEAK_YMM(peak_maddubs_ymm, "avx2", _mm256_maddubs_epi16(a[k], w))
#if defined(FX_HAVE_AVXVNNI)
/* AVX-VNNI: VEX vpdpbusd ymm, 32 products accumulated into int32. */
PEAK_YMM(peak_dpbusd_vex, "avx2,avxvnni", _mm256_dpbusd_avx_epi32(a[k], u, w))
#endif

#if defined(FX_HAVE_AVX512)
/* AVX512-VNNI: EVEX vpdpbusd zmm, 64 products (the set's x8 kernels for
 * many rows), and ymm, 32 (its kernels for a decode step's few rows). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static uint64_t
peak_dpbusd_zmm(uint64_t iters, uint32_t seed)
{
	__m512i a[PEAK_CHAINS];
	const __m512i u = _mm512_set1_epi8(1), w = _mm512_set1_epi8(2);
	for (int k = 0; k < PEAK_CHAINS; k++)
		a[k] = _mm512_set1_epi32((int)(seed + (uint32_t)k));
	for (uint64_t i = 0; i < iters; i++)
		for (int k = 0; k < PEAK_CHAINS; k++)
			a[k] = _mm512_dpbusd_epi32(a[k], u, w);
	__m512i s = a[0];
	for (int k = 1; k < PEAK_CHAINS; k++)
		s = _mm512_xor_si512(s, a[k]);
	return iters * PEAK_CHAINS * 64 + (_mm512_cvtsi512_si32(s) == 0x7fffffff);
}

PEAK_YMM(peak_dpbusd_ymm, "avx512f,avx512bw,avx512vl,avx512vnni", _mm256_dpbusd_epi32(a[k], u, w))
#endif
#endif

/* The portable set: plain C multiply-adds of int8 values into int32, as
 * the type table's vec_dot loops do (the compiler may vectorize them). */
static uint64_t peak_scalar(uint64_t iters, uint32_t seed)
{
	int32_t acc[16];
	int8_t x[16], y[16];
	for (int k = 0; k < 16; k++) {
		acc[k] = (int32_t)(seed + (uint32_t)k);
		x[k] = (int8_t)(k + 1);
		y[k] = (int8_t)(seed >> (k & 7));
	}
	for (uint64_t i = 0; i < iters; i++)
		for (int k = 0; k < 16; k++)
			acc[k] += x[k] * y[(k + i) & 15];
	int32_t s = 0;
	for (int k = 0; k < 16; k++)
		s ^= acc[k];
	return iters * 16 + (s == 0x7fffffff);
}

struct peak_job {
	peak_fn fn;
	uint64_t iters, macs;
	uint32_t seed;
};

static void *peak_thread(void *arg)
{
	struct peak_job *j = arg;
	j->macs = j->fn(j->iters, j->seed);
	return NULL;
}

static double peak_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { PEAK_MAX_THREADS = 256 };

/* Best of five runs of fn on n threads together: MACs / wall seconds. */
static double peak_rate(peak_fn fn, uint64_t iters, int n)
{
	struct peak_job jobs[PEAK_MAX_THREADS];
	pthread_t th[PEAK_MAX_THREADS];
	double best = 0;
	for (int rep = 0; rep < 5; rep++) {
		double t0 = peak_now();
		for (int i = 0; i < n; i++) {
			jobs[i] = (struct peak_job){ .fn = fn, .iters = iters, .seed = (uint32_t)(rep * 131 + i) };
			if (i > 0 && pthread_create(&th[i], NULL, peak_thread, &jobs[i]))
				return 0; /* a thread short: no honest figure */
		}
		peak_thread(&jobs[0]);
		for (int i = 1; i < n; i++)
			pthread_join(th[i], NULL);
		double dt = peak_now() - t0;
		uint64_t macs = 0;
		for (int i = 0; i < n; i++)
			macs += jobs[i].macs;
		if (dt > 0 && (double)macs / dt > best)
			best = (double)macs / dt;
	}
	return best;
}

int fx_kernels_peak(int32_t kernels, int32_t n_threads, double *macs_per_s, const char **instr,
		    struct fx_err *err)
{
	if (!macs_per_s)
		return fx_fail(err, FX_E_INVALID, "fx_kernels_peak: macs_per_s is required");
	*macs_per_s = 0;
	enum kern_isa isa;
	int rc = kern_isa_of(kernels, &isa, err);
	if (rc)
		return rc;
	if (n_threads < 1 || n_threads > PEAK_MAX_THREADS)
		return fx_fail(err, FX_E_INVALID, "fx_kernels_peak: n_threads %d is not in 1..%d",
			       (int)n_threads, PEAK_MAX_THREADS);
	/* each thread's run: about 10-20 ms at 2-4 GHz */
	const uint64_t iters = 1u << 21;
	const char *name = "int8 multiply-add in C (portable)";
	double r = 0;
	switch (isa) {
	case KERN_PORTABLE:
		r = peak_rate(peak_scalar, iters * 8, n_threads);
		break;
#if defined(__x86_64__)
	case KERN_AVX2:
		name = "vpmaddubsw ymm";
		r = peak_rate(peak_maddubs_ymm, iters, n_threads);
		break;
#if defined(FX_HAVE_AVXVNNI)
	case KERN_AVXVNNI:
		name = "vpdpbusd ymm (VEX)";
		r = peak_rate(peak_dpbusd_vex, iters, n_threads);
		break;
#endif
#if defined(FX_HAVE_AVX512)
	case KERN_AVX512: {
		double rz = peak_rate(peak_dpbusd_zmm, iters, n_threads);
		double ry = peak_rate(peak_dpbusd_ymm, iters, n_threads);
		name = rz >= ry ? "vpdpbusd zmm" : "vpdpbusd ymm (EVEX)";
		r = rz >= ry ? rz : ry;
		break;
	}
#endif
#if defined(FX_HAVE_AMX)
	case KERN_AMX:
		/* what its prefill kernels use; its decode steps run the AVX-512
		 * set's ymm kernels (that set's peak) */
		name = "tdpbssd (AMX tiles)";
		r = peak_rate(kern_amx_peak, iters / 32, n_threads);
		break;
#endif
#endif
	default:
		return fx_fail(err, FX_E_UNSUPPORTED, "no peak probe for this kernel set");
	}
	if (r <= 0)
		return fx_fail(err, FX_E_NOMEM, "fx_kernels_peak: cannot start %d threads", (int)n_threads);
	*macs_per_s = r;
	if (instr)
		*instr = name;
	return FX_OK;
}
