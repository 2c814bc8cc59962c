/* check.h -- float tensor comparison for tests, after llm.c's check_tensor.
 *
 * check_tensor() accepts got[i] when |got[i] - want[i]| <= atol + rtol·|want[i]|;
 * on failure it prints the tensor's name, max |Δ| and the first mismatches
 * to stderr, so a red test says where it went wrong. */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Returns 1 when every element is within tolerance, 0 otherwise. */
int check_tensor(const char *name, const float *got, const float *want, size_t n,
                 double atol, double rtol);

/* The accuracy claim against PyTorch (docs/numerics.md, "Accuracy"): want is PyTorch's
 * float64 answer, want32 its float32 answer (or NULL); got[i] passes when
 * |got[i] - want[i]| <= max(atol + rtol·|want[i]|,
 * CHECK_TORCH32_FACTOR·|want32[i] - want[i]|): never worse than 4× PyTorch's
 * own float32 error, even where that error exceeds the fixed tolerance. */
#define CHECK_TORCH32_FACTOR 4.0

/* The accuracy claim's tolerances, for every test that checks it:
 * outputs |Δ| <= OUT_ATOL + OUT_RTOL·|ref|, weights W_ATOL. */
#define OUT_ATOL 1e-4
#define OUT_RTOL 1e-4
#define W_ATOL 1e-5
int check_tensor_torch(const char *name, const float *got, const float *want,
                       const float *want32, size_t n, double atol, double rtol);

/* A float32's bits and back (inline: tests/roundtrip_all.c, a tool built
 * without check.c, uses them too). */
static inline uint32_t check_float_bits(float f)
{
    return ((union { float f; uint32_t u; }){.f = f}).u;
}

static inline float check_bits_float(uint32_t b)
{
    return ((union { uint32_t u; float f; }){.u = b}).f;
}

/* Deterministic uniform floats in [-1, 1) from a 64-bit state (xorshift). */
float check_randf(unsigned long long *state);
/* The next state of that xorshift (13, 7, 17), as an integer. */
unsigned long long check_xorshift(unsigned long long *state);
/* xorshift64* (12, 25, 27, times 0x2545F4914F6CDD1D): random 64-bit integers
 * whose low bits are random too. */
uint64_t check_xorshift_star(uint64_t *state);

/* Random tensors: n (≥ 0) of them times amp, in a malloc'd array (1
 * element when n is 0). Out of memory, a test cannot go on: it aborts. */
float *check_randv(size_t n, float amp, unsigned long long *state);
/* n random bytes, each 1 with probability p_true, else 0; malloc'd (aborts
 * when out of memory). */
unsigned char *check_randb(size_t n, double p_true, unsigned long long *state);

/* A "key:" line of /proc/<pid>/status (pid 0: this process) in KiB (VmRSS:,
 * VmHWM: ...), or -1. */
long check_status_kib(int pid, const char *key);

/* Peak resident memory of a piece of work: check_peak_reset() before it
 * (0, or -1 when /proc/self/clear_refs is not writable: no measurement
 * here), check_peak_kib() after it: KiB of the peak (VmHWM) above the
 * resident memory (VmRSS) at the reset. */
int check_peak_reset(void);
long check_peak_kib(void);

/* The peak-memory harness of the decoders' memory tests.
 * check_peak_unmeasurable(): why peak resident memory means nothing in
 * this process (AddressSanitizer's shadow memory, no clear_refs), or NULL.
 * check_peak_children(): run(i, ctx) for i in [0, n), each in a child
 * process of its own (glibc keeps freed memory resident and raises its
 * mmap threshold, which would blur the next one) after a 30 MB block is
 * allocated and freed, as in a server that has served a large request
 * (the mmap threshold raised, so that smaller blocks come from the heap).
 * run returns 0 when its case passed, having said on stderr why not;
 * returns how many failed (-1 when fork failed).
 * check_peak_within(): after the work measured from check_peak_reset(),
 * prints label, the body's size and the peak, and returns 1 when the peak
 * is at most most_x times len (else says so). */
const char *check_peak_unmeasurable(void);
int check_peak_children(int n, int (*run)(int i, void *ctx), void *ctx);
int check_peak_within(const char *label, size_t len, double most_x);

/* Reductions of attention weights, written plainly for tests of
 * weights_top_k and weights_pool (test_reduce.c, test_http_reduce.c). */

/* The k best (value, key) of a row of S, larger first, equal values by the
 * lower key, by repeated selection. */
void check_topk_row(float *vals, int *idx, const float *row, int S, int k);

/* dst (planes, ⌈L/p⌉, ⌈S/p⌉) = the mean of each p × p tile of full
 * (planes, L, S), an edge tile over the cells it has, summed in double. */
void check_pool(float *dst, const float *full, size_t planes, int L, int S, int p);

#endif
