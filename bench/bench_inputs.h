/* bench_inputs.h -- the random inputs of bench_core.c and bench_causal.c
 * (inline: bench_causal.c calls nothing of bench_core.c), and table 1d,
 * which bench_causal.c writes and bench_core.c calls. */
#ifndef BENCH_BENCH_INPUTS_H
#define BENCH_BENCH_INPUTS_H

#include <stddef.h>
#include <stdlib.h>

/* n floats uniform in [-amp, amp), from the generator state *s
 * (malloc'd). */
static inline float *randv(size_t n, float amp, unsigned long long *s)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        x[i] = amp * ((float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f);
    }
    return x;
}

/* Table 1d: causal and windows vs unmasked, window time vs L, under dir. */
int causal_table(const char *dir);

#endif
