/* timing.h -- the clock, the median and the CSV file the benchmarks share.
 * Header-only (static inline): each bench is one .c file plus what it
 * measures. */
#ifndef BENCH_TIMING_H
#define BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Monotonic milliseconds. */
static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int timing_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v in place). */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, timing_cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* dir/name opened for writing, its header line written; NULL when it
 * cannot be (the tables still print). */
static inline FILE *csv_open(const char *dir, const char *name, const char *header)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f)
        fprintf(f, "%s\n", header);
    return f;
}

#endif
