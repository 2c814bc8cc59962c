/* test_posenc.c -- att_add_positional_encoding against the float64 formula.
 *
 * The reference is the plain loop the encoding replaced, in float64:
 *     a = pos / pow(10000.0, (double)(2i) / D);  sin(a) or cos(a)
 * Bound: every element is the float nearest that double, or within
 * 0.5 ulp + 1e-3 ulp of it (the fast kernel is about 2^-50 relative from
 * sin(a), so it may round the other way only when sin(a) lies within about
 * 2^-26 ulp of a midpoint between two floats). The ulp is that of the
 * double value. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/check.h"

/* The public function picks one copy per instruction set; this machine
 * would only ever test its own. The file is compiled in here a second time,
 * with its public function renamed, so every copy the CPU can run is
 * checked (AVX-512, AVX2 + FMA, and the plain x86-64 one without FMA,
 * which takes the other quotient and reduction). */
#define att_add_positional_encoding posenc_copy_dispatch
#define att_positional_encoding_from posenc_copy_from
#include "core/posenc.c"
#undef att_add_positional_encoding
#undef att_positional_encoding_from
void att_add_positional_encoding(float *x, int N, int T, int D);
void att_positional_encoding_from(float *dst, const float *src, int N, int T, int D);

#define PE_ULP_BOUND (0.5 + 1e-3)

typedef void (*pe_fn)(float *x, int N, int T, int D);

/* each copy, in place */
static void in_place_avx512(float *x, int N, int T, int D)
{
    pe_add_avx512(x, x, N, T, D);
}

static void in_place_avx2(float *x, int N, int T, int D)
{
    pe_add_avx2(x, x, N, T, D);
}

static void in_place_generic(float *x, int N, int T, int D)
{
    pe_add_generic(x, x, N, T, D);
}

static const struct {
    const char *name;
    pe_fn fn;
    int (*usable)(void);
} variants[] = {
    {"public", att_add_positional_encoding, NULL},
    {"avx512", in_place_avx512, pe_has_avx512},
    {"avx2", in_place_avx2, pe_has_avx2},
    {"generic", in_place_generic, NULL},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static double pe_ref(int pos, int i, int D)
{
    const double angle = pos / pow(10000.0, (double)(i - i % 2) / D);
    return i % 2 ? cos(angle) : sin(angle);
}

static double ulp_of(double v)
{
    if (v == 0.0)
        return 0.0;
    const int e = ilogb(v) < FLT_MIN_EXP - 1 ? FLT_MIN_EXP - 1 : ilogb(v);
    return ldexp(1.0, e - (FLT_MANT_DIG - 1));
}

/* Encodes a zero (T, D) tensor with every variant this CPU runs (saying
 * loudly which it cannot) and checks every element against pe_ref,
 * reporting per variant the max error in ulps and how many elements differ
 * from the nearest float. Returns the number of elements outside the
 * bound, over all variants. */
static long check_pe(int T, int D)
{
    const size_t n = (size_t)T * D;
    float *x[NVARIANTS] = {0};
    long bad[NVARIANTS] = {0}, inexact[NVARIANTS] = {0};
    double worst[NVARIANTS] = {0};
    for (size_t v = 0; v < NVARIANTS; v++) {
        if (variants[v].usable && !variants[v].usable()) {
            fprintf(stderr, "posenc: SKIPPED the %s copy: this CPU cannot run it\n",
                    variants[v].name);
            continue;
        }
        x[v] = calloc(n, sizeof *x[v]);
        cr_assert(x[v], "out of memory for T=%d D=%d", T, D);
        variants[v].fn(x[v], 1, T, D);
    }
    for (int t = 0; t < T; t++)
        for (int i = 0; i < D; i++) {
            const double want = pe_ref(t, i, D), ulp = ulp_of(want);
            for (size_t v = 0; v < NVARIANTS; v++) {
                if (!x[v])
                    continue;
                const float got = x[v][(size_t)t * D + i];
                const double err = fabs((double)got - want);
                const double in_ulps = ulp > 0 ? err / ulp : (err > 0 ? INFINITY : 0);
                worst[v] = in_ulps > worst[v] ? in_ulps : worst[v];
                if (got == (float)want)
                    continue;
                inexact[v]++;
                if (!(in_ulps <= PE_ULP_BOUND) && bad[v]++ < 5)
                    fprintf(stderr, "posenc %s T=%d D=%d: PE(%d, %d) = %.9g, want %.17g "
                            "(%.6f ulp)\n", variants[v].name, T, D, t, i, got, want, in_ulps);
            }
        }
    long total = 0;
    for (size_t v = 0; v < NVARIANTS; v++) {
        if (!x[v])
            continue;
        fprintf(stderr, "posenc %-7s T=%d D=%d: max error %.6f ulp, %ld of %zu not the nearest "
                "float, %ld beyond %.3f ulp\n", variants[v].name, T, D, worst[v], inexact[v], n,
                bad[v], PE_ULP_BOUND);
        total += bad[v];
        free(x[v]);
    }
    return total;
}

Test(posenc, nearest_float_to_position_4095)
{
    const int dims[] = {1, 2, 3, 64, 513, 4096};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        cr_expect_eq(check_pe(4096, dims[k]), 0, "D=%d: elements beyond %.3f ulp", dims[k],
                     PE_ULP_BOUND);
    /* odd D past two chunks of frequencies */
    cr_expect_eq(check_pe(300, 9001), 0, "D=9001: elements beyond %.3f ulp", PE_ULP_BOUND);
}

Test(posenc, nearest_float_to_position_65535)
{
    const int dims[] = {2, 3, 64, 255};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++)
        cr_expect_eq(check_pe(65536, dims[k]), 0, "D=%d: elements beyond %.3f ulp", dims[k],
                     PE_ULP_BOUND);
}

/* Angles of 2^19 and more leave the vector kernel for libm: with D = 2 and
 * D = 4 the first frequency crosses over at position 524288. */
Test(posenc, nearest_float_past_the_vector_range, .timeout = 60)
{
    cr_expect_eq(check_pe(600000, 2), 0);
    cr_expect_eq(check_pe(600000, 4), 0);
}

/* N > 1: the same encoding is added to every batch item, in float, to
 * whatever the item holds. */
Test(posenc, same_encoding_for_every_batch_item)
{
    const int N = 3, T = 37, D = 130;
    const size_t n = (size_t)N * T * D;
    float *x = malloc(n * sizeof *x), *orig = malloc(n * sizeof *orig);
    float *pe = calloc((size_t)T * D, sizeof *pe);
    cr_assert(x && orig && pe);
    unsigned long long st = 42;
    for (size_t k = 0; k < n; k++)
        orig[k] = x[k] = check_randf(&st) * 3.0f;
    att_add_positional_encoding(x, N, T, D);
    att_add_positional_encoding(pe, 1, T, D);
    long bad = 0;
    for (int b = 0; b < N; b++)
        for (size_t k = 0; k < (size_t)T * D; k++) {
            const size_t at = (size_t)b * T * D + k;
            if (x[at] != orig[at] + pe[k] && bad++ < 5)
                fprintf(stderr, "posenc batch %d element %zu: %.9g, want %.9g + %.9g\n", b, k,
                        x[at], orig[at], pe[k]);
        }
    cr_expect_eq(bad, 0, "%ld elements differ from input + PE", bad);
    free(x), free(orig), free(pe);
}

/* Many threads at once (the workers do): every result equals a lone call's. */
#define PE_THREADS 8
static void *encode_one(void *arg)
{
    att_add_positional_encoding(arg, 2, 300, 771);
    return NULL;
}

Test(posenc, concurrent_calls_agree)
{
    const size_t n = (size_t)2 * 300 * 771;
    float *want = calloc(n, sizeof *want), *got[PE_THREADS];
    cr_assert(want);
    att_add_positional_encoding(want, 2, 300, 771);
    pthread_t th[PE_THREADS];
    for (int k = 0; k < PE_THREADS; k++) {
        got[k] = calloc(n, sizeof *got[k]);
        cr_assert(got[k]);
        cr_assert_eq(pthread_create(&th[k], NULL, encode_one, got[k]), 0);
    }
    for (int k = 0; k < PE_THREADS; k++) {
        pthread_join(th[k], NULL);
        cr_expect_eq(memcmp(got[k], want, n * sizeof *want), 0, "thread %d differs", k);
        free(got[k]);
    }
    free(want);
}

/* Empty shapes touch nothing. */
Test(posenc, empty_shapes)
{
    float x[4] = {1, 2, 3, 4};
    att_add_positional_encoding(x, 0, 2, 2);
    att_add_positional_encoding(x, 1, 0, 2);
    att_add_positional_encoding(x, 1, 2, 0);
    for (int k = 0; k < 4; k++)
        cr_expect_eq(x[k], (float)(k + 1));
}

Test(posenc, from_another_buffer_is_the_in_place_result_bit_for_bit)
{
    /* dst = src + PE in one pass (the core encodes a copy of its inputs so)
     * must equal copying and adding in place; D = 9001 spans three chunks */
    static const int dims[][3] = {{2, 5, 7}, {3, 33, 64}, {1, 4, 9001}, {2, 1, 1}};
    for (size_t k = 0; k < sizeof dims / sizeof dims[0]; k++) {
        const int N = dims[k][0], T = dims[k][1], D = dims[k][2];
        const size_t n = (size_t)N * T * D;
        float *src = malloc(n * sizeof *src), *a = malloc(n * sizeof *a);
        float *b = malloc(n * sizeof *b);
        cr_assert(src && a && b);
        for (size_t i = 0; i < n; i++)
            src[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f;
        memcpy(a, src, n * sizeof *a);
        att_add_positional_encoding(a, N, T, D);
        memset(b, 0xff, n * sizeof *b); /* NaN everywhere: every element must be written */
        att_positional_encoding_from(b, src, N, T, D);
        cr_assert(memcmp(a, b, n * sizeof *a) == 0, "N %d T %d D %d: differs", N, T, D);
        free(src), free(a), free(b);
    }
}
