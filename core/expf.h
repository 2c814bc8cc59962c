/* expf.h -- e^x for x <= 0, branch-free so the loops that call it
 * vectorize; shared by the softmax (kernels.c) and the cache kernel
 * (kvattend.c). Internal to core/. */
#ifndef ATT_EXPF_H
#define ATT_EXPF_H

#include <string.h>

/* e^x for x ≤ 0, down into the subnormal range, and 0 below -104 (where
 * e^x < 2^-150 rounds to zero; -inf, a blocked key, gives 0). Cephes' expf:
 * range reduction by ln 2 and a degree-6 polynomial, relative error < 2e-7
 * for normal results. 2^n is applied in two halves, 2^(n/2)·2^(n - n/2),
 * both normal, so a subnormal result is rounded once, as expf rounds it
 * (a weight of e^-100 = 3.7e-44 is not zero: times a value of 1e38 it is
 * part of the answer). Branch-free, so the loops that call it vectorize. */
static inline __attribute__((always_inline)) float exp_nonpos(float x)
{
    /* xc = max(x, -104) by bit masks: a select the vectorizer accepts, and
     * -inf becomes -104, never NaN */
    const int in_range = -(int)(x >= -104.0f); /* all ones or zero */
    const float floor_val = -104.0f;
    int xb, fb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&fb, &floor_val, sizeof fb);
    const int xcb = (xb & in_range) | (fb & ~in_range);
    float xc;
    memcpy(&xc, &xcb, sizeof xc);
    const int n = (int)(xc * 1.44269504f - 0.5f); /* round(x / ln 2): -150 … 0 */
    const float fn = (float)n;
    const float r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int n1 = n >> 1, n2 = n - n1;  /* each ≥ -75: 2^n1, 2^n2 are normal */
    const int bits1 = (n1 + 127) << 23, bits2 = (n2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &bits1, sizeof s1);
    memcpy(&s2, &bits2, sizeof s2);
    /* below -104 the bits are cleared: 0 (the product there is subnormal,
     * which costs only when the caller runs without flush-to-zero) */
    const float e = p * s1 * s2;
    int eb;
    memcpy(&eb, &e, sizeof eb);
    eb &= in_range;
    float res;
    memcpy(&res, &eb, sizeof res);
    return res;
}

#endif
