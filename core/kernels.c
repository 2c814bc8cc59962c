/* kernels.c -- the fast kernel's loops over rows: projections on OpenBLAS
 * and RoPE on their rows, soft-cap, the softmax, the range rule's
 * recomputation in double, and the FTZ/DAZ switch. attention.c calls them on its blocks; see kernels.h. */
#include "core/kernels.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "core/check.h"
#include "core/expf.h"
#include "core/variants.h"

/* y: (M, O) = x: (M, K) · Wᵀ + b, W: (O, K) or NULL = identity (K == O),
 * b: (O) or NULL = zero. Rows of y are ldy floats apart, rows of x ldx. */
void att_linear(float *y, int ldy, const float *x, int ldx, const float *W, const float *b,
                int M, int K, int O)
{
    if (M <= 0)
        return;
    if (W) {
        float beta = 0.0f;
        if (b) {
            for (int m = 0; m < M; m++)
                memcpy(y + (size_t)m * ldy, b, (size_t)O * sizeof *b);
            beta = 1.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, O, K,
                    1.0f, x, ldx, W, K, beta, y, ldy);
    } else {
        for (int m = 0; m < M; m++) {
            float *yr = y + (size_t)m * ldy;
            const float *xr = x + (size_t)m * ldx;
            if (xr != yr) /* else already in place (positional encoding) */
                memcpy(yr, xr, (size_t)O * sizeof *x);
            if (b)
                for (int o = 0; o < O; o++)
                    yr[o] += b[o];
        }
    }
}

/* Softmax of one row in place. A row of -inf becomes zeros and reports
 * ROW_NO_FINITE, so the caller can tell a row the caller masked from one
 * that overflowed; a +inf score reports ROW_POS_INF. One clone per
 * instruction set, picked at load time, so the image runs on any x86-64 and
 * uses AVX-512 where there is one. */
__attribute__((target_clones("avx512f", "avx2", "default")))
int att_softmax_inplace(float *row, int S, int *subnormal)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < S; j++)
        mx = row[j] > mx ? row[j] : mx;
    if (mx == INFINITY)
        return ROW_POS_INF;
    if (mx == -INFINITY) { /* zero weights, not NaN */
        memset(row, 0, (size_t)S * sizeof *row);
        return ROW_NO_FINITE;
    }
    /* a weight e^x / sum is subnormal when x < ln(2^-126) + ln(sum), and
     * sum ≤ S: say whether any x falls in that band (above -104, where it
     * rounds to 0 anyway) */
    const float band = -87.33f + logf((float)S) + 0.01f;
    float sum = 0.0f;
    int sub = 0;
#pragma omp simd reduction(+ : sum) reduction(| : sub)
    for (int j = 0; j < S; j++) {
        const float x = row[j] - mx;
        const float e = exp_nonpos(x);
        sub |= (x < band) & (x >= -104.0f);
        row[j] = e;
        sum += e;
    }
    *subnormal |= sub;
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < S; j++)
        row[j] *= inv;
    return ROW_OK;
}

/* Whether every x[i] is finite; x * 0 is 0 unless x is inf or NaN, so one
 * vectorizable sum answers it. */
__attribute__((target_clones("avx512f", "avx2", "default")))
int att_all_finite(const float *x, size_t n)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++)
        acc += x[i] * 0.0f;
    return acc == 0.0f;
}

/* Σ_k x[k]·w[k·wk] in double: what float32 should have found. */
static double dot_double(const float *x, const float *w, size_t wk, int K)
{
    double s = 0.0;
    for (int k = 0; k < K; k++)
        s += (double)x[k] * (double)w[k * wk];
    return s;
}

/* max |x[i]|, or +inf when some x[i] is inf or NaN. One vectorizable pass;
 * the checks of the range rule cost a few percent at most this way. */
__attribute__((target_clones("avx512f", "avx2", "default")))
float att_max_abs(const float *x, size_t n)
{
    float m = 0.0f, acc = 0.0f;
#pragma omp simd reduction(max : m) reduction(+ : acc)
    for (size_t i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        m = a > m ? a : m;
        acc += x[i] * 0.0f;
    }
    return acc == 0.0f ? m : INFINITY;
}

/* q·scale in place, as PyTorch: x / sqrt_d when sqrt_d > 0 (the default
 * scale, a float32 division), else x·scale. Returns max |x| after, or +inf
 * if a value left float32's range. One pass. */
__attribute__((target_clones("avx512f", "avx2", "default")))
float att_scale_row(float *x, int n, float sqrt_d, float scale)
{
    float m = 0.0f, acc = 0.0f;
    if (sqrt_d > 0.0f) {
#pragma omp simd reduction(max : m) reduction(+ : acc)
        for (int i = 0; i < n; i++) {
            x[i] /= sqrt_d;
            const float a = fabsf(x[i]);
            m = a > m ? a : m;
            acc += x[i] * 0.0f;
        }
    } else {
#pragma omp simd reduction(max : m) reduction(+ : acc)
        for (int i = 0; i < n; i++) {
            x[i] *= scale;
            const float a = fabsf(x[i]);
            m = a > m ? a : m;
            acc += x[i] * 0.0f;
        }
    }
    return acc == 0.0f ? m : INFINITY;
}

/* Recompute in double the entries of y (M, O) that float32 arithmetic left
 * inf or NaN: y[m][o] = Σ_k x[m·ldx + k]·w[o·wo + k·wk] + b[o], or
 * x[m·ldx + o] + b[o] when w is NULL (the identity). A float32 inf may come
 * from a partial sum only, or two infs may have made a NaN, while the exact
 * value is in range, so the double value decides; beyond ±FLT_MAX it is out
 * of range. Entries float32 got finite are kept. *amax (if not NULL) gets
 * the largest |y| of the finite entries. Returns the index m·O + o of the
 * first entry out of range, or -1. */
long long att_fix_nonfinite(float *y, int ldy, const float *x, int ldx, const float *w,
                            size_t wo, size_t wk, const float *b, int M, int K, int O,
                            float *amax)
{
    long long bad = -1;
    float mx = 0.0f;
    for (int m = 0; m < M; m++) {
        float *yr = y + (size_t)m * ldy;
        const float *xr = x + (size_t)m * ldx;
        const float a = att_max_abs(yr, (size_t)O);
        if (a != INFINITY) {
            mx = a > mx ? a : mx;
            continue;
        }
        for (int o = 0; o < O; o++) {
            if (isfinite(yr[o]))
                continue;
            const double s = (b ? (double)b[o] : 0.0) + (w ? dot_double(xr, w + o * wo, wk, K) : (double)xr[o]);
            if (att_out_of_range(s)) {
                if (bad < 0)
                    bad = (long long)m * O + o;
            } else
                yr[o] = (float)s;
        }
        const float a2 = att_max_abs(yr, (size_t)O);
        mx = a2 != INFINITY && a2 > mx ? a2 : mx;
    }
    if (amax)
        *amax = mx;
    return bad;
}

/* Subnormals. IEEE arithmetic on subnormal numbers takes microcode assists
 * on these CPUs: measured (make bench, table 5, Xeon model 207) sgemm runs
 * 65-280x slower when half an operand is subnormal, vector loops ~45x; an
 * attention with peaked scores (39 % of its weights below 2^-126) took
 * 393 ms instead of 10 ms. Peaked scores are ordinary data, so the softmax
 * (and the float mask's addition before it) runs with flush-to-zero and
 * denormals-are-zero: a weight below 2^-126
 * becomes 0, and weights·v (IEEE, like every product) then runs at full
 * speed. That changes a result only where the softmax made a subnormal
 * weight (att_softmax_inplace() says so), and then by little:
 *
 *   a flushed weight is < 2^-126, so a context moves by < S·2^-126·max|v|
 *   and an output by < E·max|Wo|·S·2^-126·max|v|;
 *
 * when that bound is above 1e-6 (1 % of the output tolerance 1e-4), the
 * call is computed again without flushing (1e-39 through a weight of 1e38
 * stays 0.1; a weight of e^-95 times 3e38 stays 1.7e-3). A weight itself
 * moves by < 2^-126, far below its 1e-5. Inputs, projections, scores and
 * the out-projection are never flushed. */
int att_flush_is_exact(int S, int E, float vmax, float womax)
{
    return (double)S * (double)FLT_MIN * (double)vmax * E * (double)womax <= 1e-6;
}

/* The floating-point control and status word (MXCSR; 0 without SSE). */
unsigned att_fpu_state(void)
{
#if defined(__SSE__)
    return _mm_getcsr();
#else
    return 0;
#endif
}

/* Set FTZ and DAZ; returns the MXCSR to restore (0 without SSE). */
unsigned att_fpu_flush_subnormals(void)
{
    const unsigned old = att_fpu_state();
#if defined(__SSE__)
    _mm_setcsr(old | 0x8040); /* FTZ | DAZ */
#endif
    return old;
}

void att_fpu_restore(unsigned old)
{
#if defined(__SSE__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

/* Soft-capping in place: x -> c·tanh(x / c) (c > 0), ±inf to ±c. tanh(a)
 * for a = |x| / c is its odd Taylor series to a^9 below 0.25 (error < 1e-9)
 * and (1 - e) / (1 + e), e = e^-2a, above (exp_nonpos: relative error
 * < 2e-7 in e, < 4e-7 in the quotient there); both are computed and one
 * selected, so the loop vectorizes. */
__attribute__((target_clones("avx512f", "avx2", "default")))
void att_softcap_row(float *x, int n, float c)
{
    const float inv = 1.0f / c;
#pragma omp simd
    for (int j = 0; j < n; j++) {
        const float a = fabsf(x[j]) * inv, a2 = a * a;
        const float series =
            a * (1.0f + a2 * (-1.0f / 3 + a2 * (2.0f / 15 + a2 * (-17.0f / 315 +
                                                                   a2 * (62.0f / 2835)))));
        const float e = exp_nonpos(-2.0f * a);
        const float quot = (1.0f - e) / (1.0f + e);
        /* select and sign by bit masks, as exp_nonpos does: the loop vectorizes */
        const int small = -(int)(a < 0.25f);
        int sb, qb, xb;
        memcpy(&sb, &series, sizeof sb);
        memcpy(&qb, &quot, sizeof qb);
        memcpy(&xb, &x[j], sizeof xb);
        const int tb = (sb & small) | (qb & ~small);
        float t;
        memcpy(&t, &tb, sizeof t);
        const float y = c * t;
        int yb;
        memcpy(&yb, &y, sizeof yb);
        yb |= xb & (int)0x80000000u;
        memcpy(&x[j], &yb, sizeof yb);
    }
}

void *att_workspace_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < 4 * huge)
        return malloc(bytes);
    /* aligned to a huge page, a whole number of them */
    const size_t size = (bytes + huge - 1) / huge * huge;
    void *ws = aligned_alloc(huge, size);
    if (ws)
        (void)madvise(ws, size, MADV_HUGEPAGE);
    return ws;
}

/* RoPE on rows of x: variants.c rotates one row of a head. */
long long att_rope_rows(float *x, int ldx, int lo, int hi, int T, int nh, int d,
                        const struct att_params *p, const float *cs)
{
    const int rd = att_rope_dim(p);
    for (int m = lo; m < hi; m++) {
        float *xm = x + (size_t)m * ldx;
        for (int hh = 0; hh < nh; hh++)
            att_rope_rotate(xm + (size_t)hh * d, cs + (size_t)(m % T) * rd, rd, p->rope_style);
        /* |cos|, |sin| <= 1: a product never overflows, a - b·s only when
         * the exact value is beyond FLT_MAX (up to rounding) */
        if (!att_all_finite(xm, (size_t)nh * d))
            return m;
    }
    return -1;
}

/* Stream s (0 q, 1 k, 2 v) of p, rows lo … hi - 1 of x (K wide, row 0 at
 * x) into y (row stride ldy, row 0 at y): the projection, inf or NaN
 * recomputed in double, then RoPE from cs when not NULL. */
long long att_project_rows(float *y, int ldy, const float *x, int K, int s, int lo, int hi,
                           int T, int nh, int d, const struct att_params *p, const float *cs,
                           float *amax)
{
    const int O = s == 0 ? att_q_width(p) : att_kv_width(p);
    float *yl = y + (size_t)lo * ldy;
    const float *xl = x + (size_t)lo * K;
    const float *w = att_proj_weight(p, s), *b = att_proj_bias(p, s);
    att_linear(yl, ldy, xl, K, w, b, hi - lo, K, O);
    const long long bad = att_fix_nonfinite(yl, ldy, xl, K, w, (size_t)K, 1, b, hi - lo, K, O,
                                            amax);
    if (bad >= 0)
        return lo + bad / O;
    return cs ? att_rope_rows(y, ldy, lo, hi, T, nh, d, p, cs) : -1;
}
