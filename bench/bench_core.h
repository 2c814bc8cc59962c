/* bench_core.h -- what bench_core.c and bench_causal.c share: random
 * inputs, and table 1d, which bench_causal.c writes. */
#ifndef BENCH_BENCH_CORE_H
#define BENCH_BENCH_CORE_H

#include <stddef.h>

/* n floats uniform in [-amp, amp), from the generator state *s. */
float *randv(size_t n, float amp, unsigned long long *s);

/* Table 1d: causal and windows vs unmasked, window time vs L, under dir. */
int causal_table(const char *dir);

#endif
