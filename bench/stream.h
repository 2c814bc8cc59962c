/* stream.h -- the streaming read the benchmarks compare the cache kernel
 * with (bench_kvattend.c, bench_batch.c): a vectorised sum of a buffer,
 * the fastest a core reads memory with plain loads. Header-only (static):
 * each bench is one .c file plus what it measures. */
#ifndef BENCH_STREAM_H
#define BENCH_STREAM_H

#include <immintrin.h>
#include <stddef.h>

/* The sum of x[0 … n): four vector accumulators, so that neither the
 * adds' latency nor the loop limits the read; one copy per instruction set
 * (as the cache kernel), chosen at run time. The compiler is not trusted
 * to vectorise a float sum: without -ffast-math it may not reorder it (a
 * scalar loop here once read an L3-sized buffer at a third of its speed). */
__attribute__((target("avx512f"))) static float sum_avx512(const float *x, size_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; i++)
        s += x[i];
    return s;
}

__attribute__((target("avx2"))) static float sum_avx2(const float *x, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x + i + 24));
    }
    float t[8], s = 0.0f;
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (int u = 0; u < 8; u++)
        s += t[u];
    for (; i < n; i++)
        s += x[i];
    return s;
}

static float sum_plain(const float *x, size_t n)
{
    float a[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            a[u] += x[i + u];
    for (; i < n; i++)
        a[0] += x[i];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static float sum_floats(const float *x, size_t n)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return sum_avx512(x, n);
    if (__builtin_cpu_supports("avx2"))
        return sum_avx2(x, n);
    return sum_plain(x, n);
}

#endif
