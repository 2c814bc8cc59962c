/* posenc.c -- the sinusoidal positional encoding (attention.h). */
#include "attention.h"

#include <math.h>
#include <stddef.h>

void att_add_positional_encoding(float *x, int N, int T, int D)
{
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            double angle = t / pow(10000.0, (double)(i - i % 2) / D);
            float pe = (float)(i % 2 ? cos(angle) : sin(angle));
            for (int n = 0; n < N; n++)
                x[((size_t)n * T + t) * D + i] += pe;
        }
    }
}
