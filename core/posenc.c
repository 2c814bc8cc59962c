/* posenc.c -- the sinusoidal positional encoding (attention.h).
 *
 * The contract is the float32 nearest to the float64 value
 *     sin(a) or cos(a),  a = pos / pow(10000, 2i/D)   (a rounded to double),
 * i.e. what `(float)sin(pos / pow(10000.0, (double)(2i)/D))` gives with
 * glibc. That plain loop costs a pow and a sin per element of every tensor
 * (450 ms at L = 1024, E = 4096). Here:
 *
 *   - pow runs once per frequency, not once per element;
 *   - one PE value per (pos, i) is added to every batch item;
 *   - sin(a) and cos(a) come together from one vectorizable double-precision
 *     kernel (a copy per instruction set: AVX-512, AVX2 + FMA, plain
 *     x86-64): a Cody-Waite reduction by π/2 split in three parts, exact
 *     where it must be, so the reduced argument keeps its relative accuracy
 *     even when a lies next to a multiple of π/2; then fdlibm's sin and cos
 *     polynomials on [-π/4, π/4].
 *
 * The kernel works on the same double a as the plain loop (bit for bit:
 * the division, or Markstein's exact replacement for it). The angle-addition
 * recurrence would give sin(t / p) for the exact quotient, which is not
 * sin(fl(t / p)): up to 2^-38 apart at pos = 65535, a visible fraction of a
 * float ulp near a zero of sin. The kernel's double is within a few
 * double ulps (about 2^-50 relative) of sin(a), so the float it rounds to
 * is the nearest one unless sin(a) lies within about 2^-26 float ulps of a
 * midpoint between two floats, and then it is off by at most 0.5 + 2^-26
 * ulp. (Checked once, exhaustively for positions 0..65535 at D = 1000,
 * 4095 and 4096, on every copy: every element the nearest float.)
 * tests/core/test_posenc.c checks 0.5 + 1e-3 ulp on every copy. Angles of 2^19
 * and more (positions beyond half a million) take libm's sin and cos.
 *
 * No state: everything lives on the stack (34 KiB), so the function is
 * reentrant and thread-safe. */
#include "core/attention.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Frequencies per pass over x (p and 1/p for each: 32 KiB of stack), and
 * per batch of values made and added at once (2 KiB). */
#define PE_CHUNK 2048
#define PE_SUB 256

/* Beyond this angle k = round(a·2/π) may exceed 2^19 and k·PIO2_n stop
 * being exact; such angles take libm. */
#define PE_VEC_MAX 524288.0

/* π/2 = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_3T (fdlibm's e_rem_pio2.c): the
 * first three have 33 significant bits, so k·PIO2_n is exact for k < 2^20. */
static const double PIO2_1 = 1.57079632673412561417e+00;  /* 0x3FF921FB54400000 */
static const double PIO2_2 = 6.07710050630396597660e-11;  /* 0x3DD0B4611A600000 */
static const double PIO2_3 = 2.02226624871116645580e-21;  /* 0x3BA3198A2E000000 */
static const double PIO2_3T = 8.47842766036889956997e-32; /* 0x397B839A252049C1 */
/* With an FMA: π/2 = PIO2_HI + PIO2_MID + PIO2_LO + O(2^-160), each the
 * double nearest what is left. */
static const double PIO2_HI = 0x1.921fb54442d18p+0;
static const double PIO2_MID = 0x1.1a62633145c07p-54;
static const double PIO2_LO = -0x1.f1976b7ed8fbcp-110;
static const double INV_PIO2 = 6.36619772367581382433e-01;

/* fdlibm k_sin.c and k_cos.c: |error| < 2^-58 on [-π/4, π/4]. */
static const double S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03,
                    S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06,
                    S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10;
static const double C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03,
                    C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07,
                    C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;

static inline uint64_t bits_of(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double double_of(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Exact x + y = *s + *e (Knuth's two-sum: no condition on magnitudes). */
static inline void two_sum(double x, double y, double *s, double *e)
{
    const double sum = x + y, yy = sum - x;
    *s = sum;
    *e = (x - (sum - yy)) + (y - yy);
}

/* pe[2j] = sin(t / p[j]), pe[2j + 1] = cos(t / p[j]) for j < nj, rounded to
 * float; valid while t / p[j] < PE_VEC_MAX. inv[j] = 1 / p[j] (rounded).
 * Branch-free, so it vectorizes: the quadrant comes from the bits of the
 * rounded k, and the sin/cos swap and the signs are bit operations.
 * has_fma is a constant after inlining: with a fused multiply-add the
 * quotient and the reduction take fewer, cheaper steps (below), without it
 * every step is exact by construction. */
static inline __attribute__((always_inline))
void pe_row(float *pe, const double *p, const double *inv, double t, int nj, int has_fma)
{
#pragma omp simd
    for (int j = 0; j < nj; j++) {
        /* 1. a = t / p, rounded as the division rounds it. With an FMA,
         *    Markstein's theorem gives the same double without a divide:
         *    inv = RN(1/p) and q0 = RN(t·inv) is within one ulp of t/p, so
         *    t - q0·p is exact and RN(q0 + (t - q0·p)·inv) = RN(t/p). */
        double a;
        if (has_fma) {
            const double q0 = t * inv[j];
            a = fma(fma(-q0, p[j], t), inv[j], q0);
        } else {
            a = t / p[j];
        }
        /* 2. k = round(a·2/π), its low bits from the mantissa of z */
        const double z = a * INV_PIO2 + 0x1.8p52;
        const uint64_t q = bits_of(z);
        const double k = z - 0x1.8p52;
        /* 3. r = a - k·π/2 to a few ulps relative, even next to a multiple
         *    of π/2 (|r| > 2^-60 here). With an FMA: a - k·PIO2_HI is exact
         *    (both are multiples of ulp(a) or 2^-53 and |r| < 1), the other
         *    two terms round once each. Without: a - k·PIO2_1 is exact
         *    (Sterbenz), the next two products are exact and summed exactly,
         *    the last is tiny. */
        double r;
        if (has_fma) {
            r = fma(-k, PIO2_HI, a);
            r = fma(-k, PIO2_MID, r);
            r = fma(-k, PIO2_LO, r);
        } else {
            double s2, e2, s3, e3;
            two_sum(a - k * PIO2_1, -(k * PIO2_2), &s2, &e2);
            two_sum(s2, -(k * PIO2_3), &s3, &e3);
            r = s3 + ((e2 + e3) - k * PIO2_3T);
        }
        /* 4. sin r and cos r on [-π/4, π/4] */
        const double zz = r * r;
        const double ps = S2 + zz * (S3 + zz * (S4 + zz * (S5 + zz * S6)));
        const double sr = r + (zz * r) * (S1 + zz * ps);
        const double cr =
            1.0 + zz * (-0.5 + zz * (C1 + zz * (C2 + zz * (C3 + zz * (C4 + zz * (C5 + zz * C6))))));
        /* 5. quadrant q: sin a = (sr, cr, -sr, -cr)[q], cos a = (cr, -sr, -cr, sr)[q] */
        const uint64_t swap = 0 - (q & 1), bs = bits_of(sr), bc = bits_of(cr);
        const uint64_t us = ((bs & ~swap) | (bc & swap)) ^ ((q & 2) << 62);
        const uint64_t uc = ((bc & ~swap) | (bs & swap)) ^ (((q + 1) & 2) << 62);
        pe[2 * j] = (float)double_of(us);
        pe[2 * j + 1] = (float)double_of(uc);
    }
}

/* The whole encoding, inlined into one function per instruction set.
 * Frequencies go in chunks of PE_CHUNK (their p and 1/p on the stack), so
 * for D <= 2·PE_CHUNK each row of x is read and written once; within a row
 * the values are made PE_SUB pairs at a time and added at once, while
 * they are in L1. */
static inline __attribute__((always_inline))
void pe_add(float *x, const float *src, int N, int T, int D, int has_fma)
{
    const int pairs = (D + 1) / 2; /* frequency j covers columns 2j, 2j + 1 */
    double p[PE_CHUNK], inv[PE_CHUNK];
    float pe[2 * PE_SUB];
    for (int j0 = 0; j0 < pairs; j0 += PE_CHUNK) {
        const int nj = pairs - j0 < PE_CHUNK ? pairs - j0 : PE_CHUNK;
        double pmin = INFINITY;
        for (int j = 0; j < nj; j++) {
            p[j] = pow(10000.0, (double)(2 * (j0 + j)) / D);
            inv[j] = 1.0 / p[j];
            pmin = p[j] < pmin ? p[j] : pmin;
        }
        for (int t = 0; t < T; t++) {
            for (int s0 = 0; s0 < nj; s0 += PE_SUB) {
                const int ns = nj - s0 < PE_SUB ? nj - s0 : PE_SUB;
                const int c0 = 2 * (j0 + s0); /* first column */
                const int cols = c0 + 2 * ns <= D ? 2 * ns : D - c0;
                /* the rows' data is on its way while the values are made */
                for (int n = 0; n < N; n++)
                    for (int c = 0; c < cols; c += 16)
                        __builtin_prefetch(x + ((size_t)n * T + t) * D + c0 + c, 1, 3);
                pe_row(pe, p + s0, inv + s0, (double)t, ns, has_fma);
                if (t / pmin >= PE_VEC_MAX) /* only past position 524288 */
                    for (int j = 0; j < ns; j++) {
                        const double a = t / p[s0 + j];
                        if (a >= PE_VEC_MAX) {
                            pe[2 * j] = (float)sin(a);
                            pe[2 * j + 1] = (float)cos(a);
                        }
                    }
                for (int n = 0; n < N; n++) {
                    float *row = x + ((size_t)n * T + t) * D + c0;
                    const float *in = src + ((size_t)n * T + t) * D + c0;
#pragma omp simd
                    for (int c = 0; c < cols; c++)
                        row[c] = in[c] + pe[c];
                }
            }
        }
    }
}

/* One copy per instruction set, picked per call. GCC 12's target_clones
 * cannot name "AVX2 with FMA", and its arch= clones go by CPU model, which
 * misses CPUs newer than the compiler; the features are tested instead. */
__attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
static void pe_add_avx512(float *x, const float *src, int N, int T, int D)
{
    pe_add(x, src, N, T, D, 1);
}

__attribute__((target("avx2,fma")))
static void pe_add_avx2(float *x, const float *src, int N, int T, int D)
{
    pe_add(x, src, N, T, D, 1);
}

static void pe_add_generic(float *x, const float *src, int N, int T, int D)
{
    pe_add(x, src, N, T, D, 0);
}

static int pe_has_avx512(void)
{
    __builtin_cpu_init(); /* idempotent; needed if called before constructors */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

static int pe_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void att_positional_encoding_from(float *dst, const float *src, int N, int T, int D)
{
    if (N <= 0 || T <= 0 || D <= 0)
        return;
    if (pe_has_avx512())
        pe_add_avx512(dst, src, N, T, D);
    else if (pe_has_avx2())
        pe_add_avx2(dst, src, N, T, D);
    else
        pe_add_generic(dst, src, N, T, D);
}

void att_add_positional_encoding(float *x, int N, int T, int D)
{
    att_positional_encoding_from(x, x, N, T, D);
}
