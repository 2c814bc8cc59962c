/* attention.c -- multi-head attention on OpenBLAS, and its plain reference.
 * See attention.h for the contract and the threading policy. */
#include "attention.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

/* OpenBLAS extensions (declared in its cblas.h, repeated for clarity). */
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);
char *openblas_get_corename(void);

/* Query rows per tile when the scores go to scratch rather than to the
 * caller's weights buffer: up to ATT_TILE rows, fewer for long sources so
 * a thread's scratch (rows × S floats) stays within ATT_SCRATCH_FLOATS
 * (2 MiB): extra memory stays bounded however long the sequences. */
#define ATT_TILE 256
#define ATT_TILE_MIN 16
#define ATT_SCRATCH_FLOATS (1 << 19)

const char *att_status_str(int code)
{
    switch (code) {
    case ATT_OK:      return "ok";
    case ATT_EPARAM:  return "invalid_parameter";
    case ATT_ESHAPE:  return "shape_mismatch";
    case ATT_ETOOBIG: return "too_large";
    case ATT_ENOMEM:  return "out_of_memory";
    case ATT_ERANGE:  return "out_of_range";
    default:          return "unknown";
    }
}

static int fail(struct att_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* *r = a * b; returns 0 on overflow. */
static int mul_ok(size_t *r, size_t a, size_t b)
{
    if (a != 0 && b > SIZE_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

static int mul3_ok(size_t *r, size_t a, size_t b, size_t c)
{
    size_t t;
    return mul_ok(&t, a, b) && mul_ok(r, t, c);
}

void att_params_init(struct att_params *p)
{
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------------- */
/* Validation                                                              */

static int check_mask_shape(const struct att_params *p, struct att_error *err)
{
    const int *s = p->mask_shape;
    if (p->mask_ndim == 2 && s[0] == p->L && s[1] == p->S)
        return ATT_OK;
    if (p->mask_ndim == 3 && (long long)s[0] == (long long)p->N * p->H &&
        s[1] == p->L && s[2] == p->S)
        return ATT_OK;
    char got[48];
    if (p->mask_ndim == 2)
        snprintf(got, sizeof got, "(%d, %d)", s[0], s[1]);
    else if (p->mask_ndim == 3)
        snprintf(got, sizeof got, "(%d, %d, %d)", s[0], s[1], s[2]);
    else
        snprintf(got, sizeof got, "rank %d", p->mask_ndim);
    return fail(err, ATT_ESHAPE,
                "attn_mask has shape %s, expected (%d, %d) or (%lld, %d, %d)",
                got, p->L, p->S, (long long)p->N * p->H, p->L, p->S);
}

int att_check(const struct att_params *p, size_t *out_len, size_t *weights_len,
              struct att_error *err)
{
    static const char *const dim_names[] = {
        "batch size", "target length", "source length",
        "embed_dim", "kdim", "vdim", "num_heads"};
    const int dims[] = {p->N, p->L, p->S, p->E, p->kdim, p->vdim, p->H};
    for (int i = 0; i < 7; i++)
        if (dims[i] < 1)
            return fail(err, ATT_EPARAM, "%s must be >= 1 (got %d)",
                        dim_names[i], dims[i]);
    if (p->E % p->H != 0)
        return fail(err, ATT_EPARAM,
                    "embed_dim %d is not divisible by num_heads %d", p->E, p->H);
    if (!p->query || !p->key || !p->value)
        return fail(err, ATT_EPARAM, "%s is missing",
                    !p->query ? "query" : !p->key ? "key" : "value");

    if (p->in_proj_weight) {
        if (p->q_proj_weight || p->k_proj_weight || p->v_proj_weight)
            return fail(err, ATT_EPARAM,
                        "in_proj_weight and q/k/v_proj_weight are mutually exclusive");
        if (p->kdim != p->E || p->vdim != p->E)
            return fail(err, ATT_ESHAPE,
                        "in_proj_weight needs kdim == vdim == embed_dim %d "
                        "(got kdim %d, vdim %d); use k_proj_weight and v_proj_weight",
                        p->E, p->kdim, p->vdim);
    } else {
        if (!p->k_proj_weight && p->kdim != p->E)
            return fail(err, ATT_ESHAPE,
                        "key has %d features but embed_dim is %d and "
                        "k_proj_weight is absent", p->kdim, p->E);
        if (!p->v_proj_weight && p->vdim != p->E)
            return fail(err, ATT_ESHAPE,
                        "value has %d features but embed_dim is %d and "
                        "v_proj_weight is absent", p->vdim, p->E);
    }

    if (p->has_scale && !(p->scale > 0.0f && isfinite(p->scale)))
        return fail(err, ATT_EPARAM, "scale must be a finite number > 0 (got %g)",
                    (double)p->scale);

    switch (p->mask_kind) {
    case ATT_MASK_NONE:
        break;
    case ATT_MASK_CAUSAL:
        if (p->L != p->S)
            return fail(err, ATT_ESHAPE,
                        "causal attn_mask needs target length == source length "
                        "(got %d and %d)", p->L, p->S);
        break;
    case ATT_MASK_BOOL:
    case ATT_MASK_FLOAT: {
        if ((p->mask_kind == ATT_MASK_BOOL ? (const void *)p->bool_mask
                                           : (const void *)p->float_mask) == NULL)
            return fail(err, ATT_EPARAM, "attn_mask data is missing");
        int rc = check_mask_shape(p, err);
        if (rc != ATT_OK)
            return rc;
        if (p->mask_kind == ATT_MASK_FLOAT) {
            /* -inf blocks a key; NaN or +inf would poison the whole row */
            size_t cnt = (size_t)p->mask_shape[0] * p->mask_shape[1] *
                         (p->mask_ndim == 3 ? (size_t)p->mask_shape[2] : 1);
            for (size_t x = 0; x < cnt; x++)
                if (isnan(p->float_mask[x]) || p->float_mask[x] == INFINITY)
                    return fail(err, ATT_EPARAM,
                                "attn_mask element %zu is %s", x,
                                isnan(p->float_mask[x]) ? "NaN" : "+inf");
        }
        break;
    }
    default:
        return fail(err, ATT_EPARAM, "attn_mask kind %d is unknown", p->mask_kind);
    }
    if (p->weights_mode < ATT_WEIGHTS_NONE || p->weights_mode > ATT_WEIGHTS_AVERAGE)
        return fail(err, ATT_EPARAM, "weights mode %d is unknown", p->weights_mode);

    /* Sizes: every element count must fit size_t, and every BLAS dimension
     * (rows of a projection: N·L, N·S) must fit int. */
    size_t o, w = 0, t;
    if (!mul3_ok(&o, (size_t)p->N, (size_t)p->L, (size_t)p->E) ||
        !mul3_ok(&t, (size_t)p->N, (size_t)p->S, (size_t)p->E) ||
        !mul3_ok(&t, (size_t)p->N, (size_t)p->S, (size_t)(p->kdim > p->vdim ? p->kdim : p->vdim)) ||
        (size_t)p->N * p->L > INT32_MAX || (size_t)p->N * p->S > INT32_MAX ||
        o > SIZE_MAX / sizeof(float) / 8 || t > SIZE_MAX / sizeof(float) / 8)
        return fail(err, ATT_ETOOBIG, "tensor sizes overflow (N %d, L %d, S %d, E %d)",
                    p->N, p->L, p->S, p->E);
    if (p->weights_mode != ATT_WEIGHTS_NONE) {
        size_t heads = p->weights_mode == ATT_WEIGHTS_PER_HEAD ? (size_t)p->H : 1;
        if (!mul3_ok(&t, (size_t)p->N, heads, (size_t)p->L) || !mul_ok(&w, t, (size_t)p->S) ||
            w > SIZE_MAX / sizeof(float))
            return fail(err, ATT_ETOOBIG, "attention weights size overflows "
                        "(N %d, H %d, L %d, S %d)", p->N, p->H, p->L, p->S);
    }
    if (out_len)
        *out_len = o;
    if (weights_len)
        *weights_len = w;
    return ATT_OK;
}

/* ---------------------------------------------------------------------- */
/* Shared helpers                                                          */

/* Float mask row for (n, h, i), or NULL. */
static inline const float *float_mask_row(const struct att_params *p, int n, int h, int i)
{
    if (p->mask_kind != ATT_MASK_FLOAT)
        return NULL;
    size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
    return p->float_mask + (plane * p->L + i) * p->S;
}

/* Does the caller block key j for query i of batch n, head h? Key padding,
 * causal, a bool mask, or -inf in a float mask (a score that overflowed to
 * -inf is not blocked: the range rule decides about it). */
static inline int blocked(const struct att_params *p, int n, int h, int i, int j)
{
    if (p->key_padding_mask && p->key_padding_mask[(size_t)n * p->S + j])
        return 1;
    if (p->mask_kind == ATT_MASK_CAUSAL)
        return j > i;
    if (p->mask_kind == ATT_MASK_BOOL) {
        size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
        return p->bool_mask[(plane * p->L + i) * p->S + j] != 0;
    }
    if (p->mask_kind == ATT_MASK_FLOAT)
        return float_mask_row(p, n, h, i)[j] == -INFINITY;
    return 0;
}

/* Projection weight and bias for stream 0 (q), 1 (k), 2 (v). */
static const float *proj_weight(const struct att_params *p, int which)
{
    if (p->in_proj_weight)
        return p->in_proj_weight + (size_t)which * p->E * p->E;
    return which == 0 ? p->q_proj_weight : which == 1 ? p->k_proj_weight : p->v_proj_weight;
}

static const float *proj_bias(const struct att_params *p, int which)
{
    return p->in_proj_bias ? p->in_proj_bias + (size_t)which * p->E : NULL;
}

/* ---------------------------------------------------------------------- */
/* Concurrency gate (see attention.h): at most ATT_MAX_CONCURRENT threads
 * inside OpenBLAS at once (a call with T threads takes T units), or one call
 * at a time if the library is the serial build. */

static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_free, gate_size;

static void gate_setup(void)
{
    gate_size = gate_free = openblas_get_parallel() == 0 ? 1 : ATT_MAX_CONCURRENT;
}

/* Take up to `want` units; returns how many were granted (≥ 1). */
static int gate_enter(int want)
{
    pthread_once(&gate_once, gate_setup);
    if (want > gate_size)
        want = gate_size;
    pthread_mutex_lock(&gate_mu);
    while (gate_free < want)
        pthread_cond_wait(&gate_cv, &gate_mu);
    gate_free -= want;
    pthread_mutex_unlock(&gate_mu);
    return want;
}

static void gate_leave(int units)
{
    pthread_mutex_lock(&gate_mu);
    gate_free += units;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

const char *att_blas_select_kernels(char **argv)
{
    const char *core = openblas_get_corename();
    int changed = 0;
    /* The core never uses OpenBLAS's own threads (see att_init); without
     * this, its idle pool threads spin in sched_yield() next to ours. */
    if (!getenv("OPENBLAS_NUM_THREADS"))
        changed |= setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
    if (!getenv("OPENBLAS_CORETYPE") && core && strcasecmp(core, "Prescott") == 0) {
        const char *want = NULL;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512cd"))
            want = "SkylakeX";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            want = "Haswell";
        if (want)
            changed |= setenv("OPENBLAS_CORETYPE", want, 1) == 0;
    }
    if (!changed)
        return core;
    execv("/proc/self/exe", argv); /* returns only on failure */
    return core;
}

/* Threads each att_forward() call splits its work across (att_init). */
static int att_threads = 1;

void att_init(int threads)
{
    att_threads = threads < 1 ? 1 : threads > ATT_MAX_THREADS ? ATT_MAX_THREADS : threads;
    /* OpenBLAS itself stays single-threaded: the core splits each call over
     * its own threads (rows of the projections, row blocks of attention), so
     * concurrent callers never contend for OpenBLAS's one thread pool and a
     * result never depends on how OpenBLAS would have split it. */
    openblas_set_num_threads(1);
    pthread_once(&gate_once, gate_setup);
}

/* ---------------------------------------------------------------------- */
/* Fast path                                                               */

/* y: (M, O) = x: (M, K) · Wᵀ + b, W: (O, K) or NULL = identity (K == O),
 * b: (O) or NULL = zero. Rows of y are ldy floats apart, rows of x ldx. */
static void linear(float *y, int ldy, const float *x, int ldx, const float *W, const float *b,
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

/* What softmax_inplace() found in a row. */
enum row_state {
    ROW_OK = 0,
    ROW_NO_FINITE, /* every score -inf: zeros written; blocked or overflowed */
    ROW_POS_INF,   /* a score +inf: the row is left as it was */
};

/* Softmax of one row in place. A row of -inf becomes zeros and reports
 * ROW_NO_FINITE, so the caller can tell a row the caller masked from one
 * that overflowed; a +inf score reports ROW_POS_INF. One clone per
 * instruction set, picked at load time, so the image runs on any x86-64 and
 * uses AVX-512 where there is one. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int softmax_inplace(float *row, int S, int *subnormal)
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

/* Masks of query row i (batch n, head h) applied to its scores in place:
 * the float mask is added (unless add_float is 0: fix_scores() did it),
 * blocked keys become -inf. */
static void mask_row(float *row, const struct att_params *p, int n, int h, int i,
                     int add_float)
{
    const int S = p->S;
    const float *fm = add_float ? float_mask_row(p, n, h, i) : NULL;
    if (fm)
        for (int j = 0; j < S; j++)
            row[j] += fm[j];
    if (p->mask_kind == ATT_MASK_CAUSAL) {
        for (int j = i + 1; j < S; j++)
            row[j] = -INFINITY;
    } else if (p->mask_kind == ATT_MASK_BOOL) {
        size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
        const uint8_t *m = p->bool_mask + (plane * p->L + i) * S;
        for (int j = 0; j < S; j++)
            row[j] = m[j] ? -INFINITY : row[j];
    }
    if (p->key_padding_mask) {
        const uint8_t *m = p->key_padding_mask + (size_t)n * S;
        for (int j = 0; j < S; j++)
            row[j] = m[j] ? -INFINITY : row[j];
    }
}

/* ---------------------------------------------------------------------- */
/* The range rule (attention.h, "Range"): which value left float32's range
 * first. The fast path and the reference report it with the same words.   */

enum range_stage {
    RANGE_NONE = 0,
    RANGE_QPROJ, RANGE_KPROJ, RANGE_VPROJ, /* a projection beyond ±FLT_MAX */
    RANGE_QSCALED,                         /* q·scale beyond ±FLT_MAX */
    RANGE_SCORE,                           /* a score (+ float mask) > FLT_MAX */
    RANGE_ROW,                             /* every unmasked score < -FLT_MAX */
    RANGE_CONTEXT,                         /* weights·v beyond ±FLT_MAX */
    RANGE_OUTPUT,                          /* the output beyond ±FLT_MAX */
};

struct range_error {
    int stage;   /* enum range_stage; RANGE_NONE: no error */
    int n, h, i; /* batch item, head (-1: none), row (query or key position) */
};

/* Is a before b in (stage, n, i, h) order? A stage of 0 is never before. */
static int range_before(const struct range_error *a, const struct range_error *b)
{
    if (!a->stage)
        return 0;
    if (!b->stage || a->stage != b->stage)
        return !b->stage || a->stage < b->stage;
    if (a->n != b->n)
        return a->n < b->n;
    return a->i != b->i ? a->i < b->i : a->h < b->h;
}

static int range_fail(struct att_error *err, const struct range_error *re)
{
    static const char *const proj[] = {"query", "key", "value"};
    const char *pre = "the result overflows float32:";
    switch (re->stage) {
    case RANGE_QPROJ:
    case RANGE_KPROJ:
    case RANGE_VPROJ:
        return fail(err, ATT_ERANGE, "%s the %s projection exceeds 3.4e38 in magnitude "
                    "(batch %d, position %d)", pre, proj[re->stage - RANGE_QPROJ], re->n, re->i);
    case RANGE_QSCALED:
        return fail(err, ATT_ERANGE, "%s the scaled query q*scale exceeds 3.4e38 in magnitude "
                    "(batch %d, position %d)", pre, re->n, re->i);
    case RANGE_SCORE:
        return fail(err, ATT_ERANGE, "%s an attention score (q.k plus attn_mask) exceeds "
                    "3.4e38 (batch %d, head %d, query %d)", pre, re->n, re->h, re->i);
    case RANGE_ROW:
        return fail(err, ATT_ERANGE, "%s every unmasked attention score of query %d (batch %d, "
                    "head %d) is below -3.4e38", pre, re->i, re->n, re->h);
    case RANGE_CONTEXT:
        return fail(err, ATT_ERANGE, "%s an attention context (weights.v) exceeds 3.4e38 in "
                    "magnitude (batch %d, head %d, query %d)", pre, re->n, re->h, re->i);
    default:
        return fail(err, ATT_ERANGE, "%s the output exceeds 3.4e38 in magnitude "
                    "(batch %d, position %d)", pre, re->n, re->i);
    }
}

/* Does the caller block every key of query row i (batch n, head h)? */
static int caller_blocks_row(const struct att_params *p, int n, int h, int i)
{
    for (int j = 0; j < p->S; j++)
        if (!blocked(p, n, h, i, j))
            return 0;
    return 1;
}

/* Is x beyond float32's range? */
static int out_of_range(double x)
{
    return x > FLT_MAX || x < -FLT_MAX;
}

/* Whether every x[i] is finite; x * 0 is 0 unless x is inf or NaN, so one
 * vectorizable sum answers it. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static int all_finite(const float *x, size_t n)
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
        s += (double)x[k] * w[k * wk];
    return s;
}

/* max |x[i]|, or +inf when some x[i] is inf or NaN. One vectorizable pass;
 * the checks of the range rule cost a few percent at most this way. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static float max_abs(const float *x, size_t n)
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
static float scale_row(float *x, int n, float sqrt_d, float scale)
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
static long long fix_nonfinite(float *y, int ldy, const float *x, int ldx, const float *w,
                               size_t wo, size_t wk, const float *b, int M, int K, int O,
                               float *amax)
{
    long long bad = -1;
    float mx = 0.0f;
    for (int m = 0; m < M; m++) {
        float *yr = y + (size_t)m * ldy;
        const float *xr = x + (size_t)m * ldx;
        const float a = max_abs(yr, (size_t)O);
        if (a != INFINITY) {
            mx = a > mx ? a : mx;
            continue;
        }
        for (int o = 0; o < O; o++) {
            if (isfinite(yr[o]))
                continue;
            const double s = (b ? b[o] : 0.0) + (w ? dot_double(xr, w + o * wo, wk, K) : xr[o]);
            if (out_of_range(s)) {
                if (bad < 0)
                    bad = (long long)m * O + o;
            } else
                yr[o] = (float)s;
        }
        const float a2 = max_abs(yr, (size_t)O);
        mx = a2 != INFINITY && a2 > mx ? a2 : mx;
    }
    if (amax)
        *amax = mx;
    return bad;
}

/* The same for one row of scores (query i of batch n, head h; S keys),
 * q_row · k_jᵀ for the keys whose float32 score is inf or NaN. The rule
 * is on the score plus the float mask, so the mask is added here, to every
 * key of the row (mask_row() then must not add it again): a finite float32
 * score as mask_row() would, a recomputed one in double. A key the caller
 * blocks takes no weight whatever its score: it becomes -inf. A sum below
 * -FLT_MAX becomes -inf too (no weight, unless the whole row is so:
 * softmax_inplace() tells). Returns 1 when a live sum is above FLT_MAX. */
static int fix_scores(float *row, const float *qrow, const float *kh, int ldk, int d,
                      const struct att_params *p, int n, int h, int i)
{
    const float *fm = float_mask_row(p, n, h, i);
    int bad = 0;
    for (int j = 0; j < p->S; j++) {
        if (isfinite(row[j])) {
            if (fm)
                row[j] += fm[j];
            continue;
        }
        if (blocked(p, n, h, i, j)) {
            row[j] = -INFINITY;
            continue;
        }
        const double s = dot_double(qrow, kh + (size_t)j * ldk, 1, d) + (fm ? fm[j] : 0.0);
        bad |= s > FLT_MAX;
        row[j] = s < -FLT_MAX ? -INFINITY : (float)s;
    }
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
 * weight (softmax_inplace() says so), and then by little:
 *
 *   a flushed weight is < 2^-126, so a context moves by < S·2^-126·max|v|
 *   and an output by < E·max|Wo|·S·2^-126·max|v|;
 *
 * when that bound is above 1e-6 (1 % of the output tolerance 1e-4), the
 * call is computed again without flushing (1e-39 through a weight of 1e38
 * stays 0.1; a weight of e^-95 times 3e38 stays 1.7e-3). A weight itself
 * moves by < 2^-126, far below its 1e-5. Inputs, projections, scores and
 * the out-projection are never flushed. */
static int flush_is_exact(int S, int E, float vmax, float womax)
{
    return (double)S * FLT_MIN * (double)vmax * E * womax <= 1e-6;
}

/* The floating-point control and status word (MXCSR; 0 without SSE). */
static unsigned fpu_state(void)
{
#if defined(__SSE__)
    return _mm_getcsr();
#else
    return 0;
#endif
}

/* Set FTZ and DAZ; returns the MXCSR to restore (0 without SSE). */
static unsigned fpu_flush_subnormals(void)
{
    const unsigned old = fpu_state();
#if defined(__SSE__)
    _mm_setcsr(old | 0x8040); /* FTZ | DAZ */
#endif
    return old;
}

static void fpu_restore(unsigned old)
{
#if defined(__SSE__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

/* One call's shared state; every thread runs fwd_part() on its share. */
struct fwd {
    const struct att_params *p;
    float *out, *weights;
    float *q, *k, *v;      /* projections; q becomes the context in place */
    int ldq, ldk, ldv;     /* their row strides: E, or 3E when fused */
    int fused;             /* one (N·L, 3E) projection: self-attention, packed */
    float *scratch;        /* nthreads × rows_per_block × S, or NULL */
    const float *qin, *kin, *vin;
    float scale;           /* custom scale; q is multiplied by it */
    float sqrt_d;          /* default: q is divided by this, as PyTorch does */
    int nthreads, rows_per_block, blocks_per_item;
    int any_range;         /* some thread found a range error (atomic) */
    /* max |q·scale| and max |k| of each thread's rows: when d·max·max is
     * far below FLT_MAX no score, not even a partial sum, can overflow, and
     * the scores need no check (the usual case) */
    float qmax[ATT_MAX_THREADS], kmax[ATT_MAX_THREADS];
    float vmax[ATT_MAX_THREADS]; /* max |v| of each thread's rows */
    int flush;             /* the softmax runs with FTZ/DAZ (see flush_is_exact) */
    int subnormal[ATT_MAX_THREADS]; /* a thread's softmax made subnormal weights */
    pthread_barrier_t barrier;
    /* start line: helper threads wait here until nthreads is final */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
};

/* [*lo, *hi) = thread t's share of n items split nt ways. */
static void share(int n, int t, int nt, int *lo, int *hi)
{
    *lo = (int)((long long)n * t / nt);
    *hi = (int)((long long)n * (t + 1) / nt);
}

/* Keep a thread's first range error (later ones follow from it). */
static void note_range(struct fwd *f, struct range_error *re, int stage, int n, int h, int i)
{
    if (re->stage)
        return;
    *re = (struct range_error){stage, n, h, i};
    __atomic_store_n(&f->any_range, 1, __ATOMIC_RELAXED);
}

/* A projection's first bad entry (fix_nonfinite's index into rows lo…) as
 * a range error: stream 0-2 (q, k, v), T rows per batch item. */
static void note_proj(struct fwd *f, struct range_error *re, long long bad, int lo, int O,
                      int stream, int T)
{
    if (bad < 0)
        return;
    const int row = lo + (int)(bad / O);
    note_range(f, re, RANGE_QPROJ + stream, row / T, -1, row % T);
}

/* Thread t's share of one call, in PyTorch's order: project, scale q,
 * scores, masks, softmax, context, out-projection. Range errors go to *re;
 * a thread stops computing at its first one, but every thread passes every
 * barrier. */
static void fwd_part(struct fwd *f, int t, struct range_error *re)
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, E = p->E, H = p->H, d = E / H, nt = f->nthreads;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const int average = p->weights_mode == ATT_WEIGHTS_AVERAGE;
    int lo, hi;
    float qmax = 0.0f, kmax = 0.0f, vmax = 0.0f;

    /* 2. Projections, this thread's rows of N·L (N·S). Self-attention with
     *    packed weights is one product with 3E outputs, as PyTorch does.
     *    An inf or NaN is recomputed in double (fix_nonfinite). */
    share(p->N * L, t, nt, &lo, &hi);
    if (f->fused) {
        float *y = f->q + (size_t)lo * f->ldq;
        linear(y, f->ldq, f->qin + (size_t)lo * E, E, p->in_proj_weight, p->in_proj_bias,
               hi - lo, E, 3 * E);
        /* kmax: the largest |q|, |k| or |v|, a bound on |k| */
        long long bad = fix_nonfinite(y, f->ldq, f->qin + (size_t)lo * E, E, p->in_proj_weight,
                                      (size_t)E, 1, p->in_proj_bias, hi - lo, E, 3 * E, &kmax);
        if (bad >= 0) /* the stream is the column's third */
            note_proj(f, re, bad, lo, 3 * E, (int)(bad % (3 * E)) / E, L);
        vmax = kmax;
    } else {
        for (int s = 0; s < 3; s++) {
            const int T = s == 0 ? L : S;
            const int K = s == 0 ? E : s == 1 ? p->kdim : p->vdim;
            const float *x = s == 0 ? f->qin : s == 1 ? f->kin : f->vin;
            float *y = s == 0 ? f->q : s == 1 ? f->k : f->v;
            share(p->N * T, t, nt, &lo, &hi);
            y += (size_t)lo * E, x += (size_t)lo * K;
            linear(y, E, x, K, proj_weight(p, s), proj_bias(p, s), hi - lo, K, E);
            note_proj(f, re, fix_nonfinite(y, E, x, K, proj_weight(p, s), (size_t)K, 1,
                                           proj_bias(p, s), hi - lo, K, E,
                                           s == 1 ? &kmax : s == 2 ? &vmax : NULL),
                      lo, E, s, T);
        }
        share(p->N * L, t, nt, &lo, &hi);
    }
    /* q·scale before q·kᵀ, as PyTorch scales q (q / sqrt(d) by default):
     * scores that only the unscaled product would overflow stay in range */
    for (int m = lo; m < hi && !re->stage; m++) {
        float *qr = f->q + (size_t)m * f->ldq;
        const float a = scale_row(qr, E, f->sqrt_d, f->scale);
        if (a == INFINITY)
            note_range(f, re, RANGE_QSCALED, m / L, -1, m % L);
        qmax = a > qmax ? a : qmax;
    }
    f->qmax[t] = qmax, f->kmax[t] = kmax, f->vmax[t] = vmax;
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    /* Every thread sees the same projection errors here (they were all
     * written before the barrier) and stops alike. */
    int stop = __atomic_load_n(&f->any_range, __ATOMIC_RELAXED);
    for (int u = 0; u < nt; u++) {
        qmax = f->qmax[u] > qmax ? f->qmax[u] : qmax;
        kmax = f->kmax[u] > kmax ? f->kmax[u] : kmax;
        vmax = f->vmax[u] > vmax ? f->vmax[u] : vmax;
    }
    const int check_scores = !((double)d * qmax * kmax <= FLT_MAX / 2.0);
    /* a context is a weighted mean of v: it overflows only near FLT_MAX */
    const int check_context = !(vmax <= FLT_MAX / 2.0f);

    /* 3-5. Blocks of query rows, every head: block b ≡ t (mod nt). */
    float *scratch = f->scratch ? f->scratch + (size_t)t * f->rows_per_block * S : NULL;
    for (int b = t; b < p->N * f->blocks_per_item && !stop && !re->stage; b += nt) {
        const int n = b / f->blocks_per_item;
        const int i0 = (b % f->blocks_per_item) * f->rows_per_block;
        const int T = L - i0 < f->rows_per_block ? L - i0 : f->rows_per_block;
        float *acc = average ? f->weights + ((size_t)n * L + i0) * S : NULL;
        if (acc)
            memset(acc, 0, (size_t)T * S * sizeof *acc);
        for (int h = 0; h < H && !re->stage; h++) {
            const float *kh = f->k + (size_t)n * S * f->ldk + (size_t)h * d;
            const float *vh = f->v + (size_t)n * S * f->ldv + (size_t)h * d;
            float *qh = f->q + ((size_t)n * L + i0) * f->ldq + (size_t)h * d;
            float *sc = per_head ? f->weights + (((size_t)n * H + h) * L + i0) * S : scratch;
            /* 3. scores (T, S) = (q_h·scale) · k_hᵀ, strided views */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, d,
                        1.0f, qh, f->ldq, kh, f->ldk, 0.0f, sc, S);
            /* 4. masks and softmax per row; an inf or NaN score is
             *    recomputed in double, and the range rule applied */
            const int masked = p->mask_kind != ATT_MASK_NONE || p->key_padding_mask;
            const unsigned mxcsr = f->flush ? fpu_flush_subnormals() : 0;
            for (int r = 0; r < T; r++) {
                float *row = sc + (size_t)r * S;
                int add_float = 1;
                if (check_scores && !all_finite(row, (size_t)S)) { /* rare: IEEE here */
                    if (f->flush)
                        fpu_restore(mxcsr);
                    if (fix_scores(row, qh + (size_t)r * f->ldq, kh, f->ldk, d, p, n, h, i0 + r))
                        note_range(f, re, RANGE_SCORE, n, h, i0 + r);
                    if (f->flush)
                        fpu_flush_subnormals();
                    add_float = 0; /* fix_scores added the float mask */
                }
                if (masked)
                    mask_row(row, p, n, h, i0 + r, add_float);
                const int st = softmax_inplace(row, S, &f->subnormal[t]);
                if (st == ROW_POS_INF)
                    note_range(f, re, RANGE_SCORE, n, h, i0 + r);
                else if (st == ROW_NO_FINITE && !caller_blocks_row(p, n, h, i0 + r))
                    note_range(f, re, RANGE_ROW, n, h, i0 + r);
            }
            if (f->flush)
                fpu_restore(mxcsr);
            if (re->stage)
                break;
            if (acc)
                for (size_t x = 0; x < (size_t)T * S; x++)
                    acc[x] += sc[x];
            /* 5. context_h (T, d) = weights · v_h, written over q_h, which
             *    this block no longer needs */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, S,
                        1.0f, sc, S, vh, f->ldv, 0.0f, qh, f->ldq);
            long long bad = !check_context ? -1
                            : fix_nonfinite(qh, f->ldq, sc, S, vh, 1, (size_t)f->ldv, NULL,
                                            T, S, d, NULL);
            if (bad >= 0)
                note_range(f, re, RANGE_CONTEXT, n, h, i0 + (int)(bad / d));
        }
        if (acc) {
            const float invh = 1.0f / (float)H;
            for (size_t x = 0; x < (size_t)T * S; x++)
                acc[x] *= invh;
        }
    }
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    if (__atomic_load_n(&f->any_range, __ATOMIC_RELAXED))
        return;

    /* 6. out = context · Woᵀ + bo, this thread's rows */
    share(p->N * L, t, nt, &lo, &hi);
    float *y = f->out + (size_t)lo * E;
    const float *x = f->q + (size_t)lo * f->ldq;
    linear(y, E, x, f->ldq, p->out_proj_weight, p->out_proj_bias, hi - lo, E, E);
    long long bad = fix_nonfinite(y, E, x, f->ldq, p->out_proj_weight, (size_t)E, 1,
                                  p->out_proj_bias, hi - lo, E, E, NULL);
    if (bad >= 0)
        note_range(f, re, RANGE_OUTPUT, (lo + (int)(bad / E)) / L, -1, (lo + (int)(bad / E)) % L);
}

struct fwd_thread {
    struct fwd *f;
    int t;
    struct range_error re;
};

static void *fwd_thread_main(void *arg)
{
    struct fwd_thread *ft = arg;
    pthread_mutex_lock(&ft->f->mu);
    while (!ft->f->go)
        pthread_cond_wait(&ft->f->cv, &ft->f->mu);
    pthread_mutex_unlock(&ft->f->mu);
    fwd_part(ft->f, ft->t, &ft->re);
    return NULL;
}

/* Run steps 2-6 of f on this thread and nt - 1 helpers (ft: one slot per
 * thread, range errors come back in ft[i].re); if a helper cannot start,
 * the call goes on with those that did. Returns how many ran. */
static int fwd_run(struct fwd *f, int nt, struct fwd_thread *ft)
{
    pthread_t th[ATT_MAX_THREADS];
    f->any_range = 0, f->go = 0;
    memset(f->subnormal, 0, sizeof f->subnormal);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int started = 1;
    for (; started < nt; started++) {
        ft[started] = (struct fwd_thread){f, started, {0, 0, 0, 0}};
        if (pthread_create(&th[started], NULL, fwd_thread_main, &ft[started]) != 0)
            break;
    }
    f->nthreads = started;
    if (started > 1)
        pthread_barrier_init(&f->barrier, NULL, (unsigned)started);
    pthread_mutex_lock(&f->mu);
    f->go = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    ft[0] = (struct fwd_thread){f, 0, {0, 0, 0, 0}};
    fwd_part(f, 0, &ft[0].re);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    if (started > 1)
        pthread_barrier_destroy(&f->barrier);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    return started;
}

/* Did the softmax of any thread make a subnormal weight (and flush it)? */
static int fwd_made_subnormals(const struct fwd *f, int started)
{
    for (int i = 0; i < started; i++)
        if (f->subnormal[i])
            return 1;
    return 0;
}

/* x + PE for the three inputs of p (positional encoding), in[s] = what
 * stream s projects: in one pass, once per distinct input (self-attention
 * encodes one, and keeps the fused projection). A stream whose projection
 * is the identity gets it straight in its projection buffer proj[s], which
 * step 2 would only have copied the input to (step 2 adds the bias there,
 * in PyTorch's order: (x + PE) + b); a stream with weights reads an encoded
 * copy (copies[s]), shared by streams with the same input. Step 2 changes
 * the projection buffers, so a second run calls this again. */
static void encode_inputs(const struct att_params *p, float *const proj[3],
                          float *const copies[3], const float *in[3])
{
    const float *src[3] = {p->query, p->key, p->value};
    const int T[3] = {p->L, p->S, p->S}, D[3] = {p->E, p->kdim, p->vdim};
    for (int st = 0; st < 3; st++) {
        const size_t cnt = (size_t)p->N * T[st] * D[st];
        int same_id = -1, same_copy = -1; /* an earlier stream of this input */
        for (int r = st - 1; r >= 0; r--)
            if (src[r] == src[st] && T[r] == T[st] && D[r] == D[st]) {
                if (proj_weight(p, r))
                    same_copy = r;
                else
                    same_id = r;
            }
        float *dst = proj_weight(p, st) ? copies[st] : proj[st];
        if (proj_weight(p, st) && same_copy >= 0)
            dst = (float *)in[same_copy];
        else if (same_id >= 0 || same_copy >= 0)
            memcpy(dst, same_id >= 0 ? proj[same_id] : copies[same_copy], cnt * sizeof *dst);
        else
            att_positional_encoding_from(dst, src[st], p->N, T[st], D[st]);
        in[st] = dst;
    }
}

/* Below this many multiply-adds a call runs on one thread: starting threads
 * would cost more than it saves. */
#define ATT_PARALLEL_MIN_MACS 4000000.0

int att_forward(float *out, float *weights, const struct att_params *p,
                struct att_error *err)
{
    size_t out_len, w_len;
    int rc = att_check(p, &out_len, &w_len, err);
    if (rc != ATT_OK)
        return rc;
    if (!out || (w_len && !weights))
        return fail(err, ATT_EPARAM, "output buffer is missing");

    const int N = p->N, L = p->L, S = p->S, E = p->E;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const double macs = (double)N * (L + 2.0 * S) * E * E + 2.0 * N * L * (double)S * E;
    int nt = macs < ATT_PARALLEL_MIN_MACS ? 1 : att_threads;
    if (nt > N * L)
        nt = N * L;

    /* Row blocks: with per-head weights the scores go straight to the
     * caller's buffer, so blocks are big (one per thread and batch item);
     * otherwise they go to scratch, and blocks stay small enough that the
     * scratch is at most ATT_SCRATCH_FLOATS per thread: the (H, L, S)
     * scores never exist. */
    int rows = (L + nt - 1) / nt;
    if (!per_head) {
        int cap = ATT_SCRATCH_FLOATS / S;
        cap = cap < ATT_TILE_MIN ? ATT_TILE_MIN : cap > ATT_TILE ? ATT_TILE : cap;
        if (rows > cap)
            rows = cap;
    }

    /* 1. One workspace: q (becomes the context in place), k, v, score
     *    scratch, and copies of the inputs when positional encoding is on. */
    const size_t nq = (size_t)N * L * E, nk = (size_t)N * S * E;
    const size_t nscratch = per_head ? 0 : (size_t)nt * rows * S;
    const size_t nqin = p->positional_encoding ? nq : 0;
    const size_t nkin = p->positional_encoding ? (size_t)N * S * p->kdim : 0;
    const size_t nvin = p->positional_encoding ? (size_t)N * S * p->vdim : 0;
    size_t total = nq + 2 * nk + nscratch + nqin + nkin + nvin; /* sizes checked */
    float *ws = malloc(total * sizeof *ws);
    if (!ws)
        return fail(err, ATT_ENOMEM, "out of memory for a %zu-byte workspace",
                    total * sizeof *ws);
    struct fwd f = {
        .p = p, .out = out, .weights = weights,
        .q = ws, .k = ws + nq, .v = ws + nq + nk, .ldq = E, .ldk = E, .ldv = E,
        .scratch = nscratch ? ws + nq + 2 * nk : NULL,
        .qin = p->query, .kin = p->key, .vin = p->value,
        .scale = p->has_scale ? p->scale : 0.0f,
        .sqrt_d = p->has_scale ? 0.0f : (float)sqrt((double)(E / p->H)),
        .rows_per_block = rows, .blocks_per_item = (L + rows - 1) / rows,
    };
    /* x + PE: into copies for streams with weights, into the projection
     * buffers for identity ones (see encode_inputs) */
    float *const proj_bufs[3] = {f.q, f.k, f.v};
    float *const copy = ws + nq + 2 * nk + nscratch;
    float *const copies[3] = {copy, copy + nqin, copy + nqin + nkin};
    if (p->positional_encoding) {
        const float *in[3];
        encode_inputs(p, proj_bufs, copies, in);
        f.qin = in[0], f.kin = in[1], f.vin = in[2];
    }
    /* one tensor for query, key and value, of one length (a caller may pass
     * the same pointer with S != L: then the streams are not one product) */
    if (p->in_proj_weight && f.qin == f.kin && f.kin == f.vin && p->L == p->S) {
        f.fused = 1;
        f.k = ws + E, f.v = ws + 2 * E;
        f.ldq = f.ldk = f.ldv = 3 * E;
    }

    /* 2-6 on nt threads, with the softmax flushing subnormals; again
     * without, in the rare case where that could change the answer (see
     * flush_is_exact) */
    nt = gate_enter(nt);
    struct fwd_thread ft[ATT_MAX_THREADS];
    /* the caller's MXCSR comes back as it was, exception flags included
     * (the exact path's subnormal arithmetic raises some) */
    const unsigned mxcsr = fpu_state();
    f.flush = 1;
    int started = fwd_run(&f, nt, ft);
    if (!f.any_range && fwd_made_subnormals(&f, started)) {
        float vmax = 0.0f;
        for (int i = 0; i < started; i++)
            vmax = f.vmax[i] > vmax ? f.vmax[i] : vmax;
        const float womax = p->out_proj_weight ? max_abs(p->out_proj_weight, (size_t)E * E)
                                               : 1.0f;
        if (!flush_is_exact(S, E, vmax, womax)) {
            f.flush = 0;
            if (p->positional_encoding) { /* the first run changed them */
                const float *in[3];
                encode_inputs(p, proj_bufs, copies, in);
            }
            started = fwd_run(&f, nt, ft);
        }
    }
    fpu_restore(mxcsr);
    gate_leave(nt);
    free(ws);
    /* The first range error in (stage, batch, row, head) order among the
     * threads' first ones: the same answer for the same configuration. */
    struct range_error re = {0, 0, 0, 0};
    for (int i = 0; i < started; i++)
        if (range_before(&ft[i].re, &re))
            re = ft[i].re;
    if (re.stage)
        return range_fail(err, &re);
    return ATT_OK;
}

/* ---------------------------------------------------------------------- */
/* Reference: loops and double accumulation, no BLAS.                      */

/* y (M, O) = x (M, K) · Wᵀ + b in double; W NULL = identity. */
static void ref_linear(double *y, const float *x, const float *W, const float *b,
                       int M, int K, int O)
{
    for (int m = 0; m < M; m++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0;
            if (W)
                for (int i = 0; i < K; i++)
                    s += (double)x[(size_t)m * K + i] * W[(size_t)o * K + i];
            else
                s += x[(size_t)m * K + o];
            y[(size_t)m * O + o] = s;
        }
}

/* Is an element of x (M rows of O) out of range? Then *re names the first,
 * as stage with T rows per batch item. */
static int ref_range(const double *x, int M, int O, int stage, int T, struct range_error *re)
{
    for (size_t e = 0; e < (size_t)M * O; e++)
        if (out_of_range(x[e])) {
            const int row = (int)(e / (size_t)O);
            *re = (struct range_error){stage, row / T, -1, row % T};
            return 1;
        }
    return 0;
}

int att_forward_ref(float *out, float *weights, const struct att_params *p,
                    struct att_error *err)
{
    size_t out_len, w_len;
    int rc = att_check(p, &out_len, &w_len, err);
    if (rc != ATT_OK)
        return rc;
    if (!out || (w_len && !weights))
        return fail(err, ATT_EPARAM, "output buffer is missing");

    const int N = p->N, L = p->L, S = p->S, E = p->E, H = p->H, d = E / H;
    const size_t nq = (size_t)N * L * E, nk = (size_t)N * S * E;
    const size_t nkin = (size_t)N * S * p->kdim, nvin = (size_t)N * S * p->vdim;
    double *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k);
    double *v = malloc(nk * sizeof *v), *ctx = malloc(nq * sizeof *ctx);
    double *row = malloc((size_t)S * sizeof *row), *avg = malloc((size_t)S * sizeof *avg);
    float *qin = malloc(nq * sizeof *qin), *kin = malloc(nkin * sizeof *kin);
    float *vin = malloc(nvin * sizeof *vin);
    struct range_error re = {0, 0, 0, 0};
    if (!q || !k || !v || !ctx || !row || !avg || !qin || !kin || !vin) {
        rc = fail(err, ATT_ENOMEM, "out of memory in the reference");
        goto done;
    }
    memcpy(qin, p->query, nq * sizeof *qin);
    memcpy(kin, p->key, nkin * sizeof *kin);
    memcpy(vin, p->value, nvin * sizeof *vin);
    if (p->positional_encoding) {
        att_add_positional_encoding(qin, N, L, E);
        att_add_positional_encoding(kin, N, S, p->kdim);
        att_add_positional_encoding(vin, N, S, p->vdim);
    }
    /* 1. projections, then q·scale (q / sqrt(d) by default), in PyTorch's
     *    order; the range rule checks each value in double */
    ref_linear(q, qin, proj_weight(p, 0), proj_bias(p, 0), N * L, E, E);
    ref_linear(k, kin, proj_weight(p, 1), proj_bias(p, 1), N * S, p->kdim, E);
    ref_linear(v, vin, proj_weight(p, 2), proj_bias(p, 2), N * S, p->vdim, E);
    if (ref_range(q, N * L, E, RANGE_QPROJ, L, &re) || ref_range(k, N * S, E, RANGE_KPROJ, S, &re) ||
        ref_range(v, N * S, E, RANGE_VPROJ, S, &re))
        goto range;
    const double sqrt_d = sqrt((double)d);
    for (size_t e = 0; e < nq; e++)
        q[e] = p->has_scale ? q[e] * p->scale : q[e] / sqrt_d;
    if (ref_range(q, N * L, E, RANGE_QSCALED, L, &re))
        goto range;

    /* 2. per query row and head: scores, softmax, context */
    for (int n = 0; n < N; n++)
        for (int i = 0; i < L; i++) {
            for (int j = 0; j < S; j++)
                avg[j] = 0.0;
            for (int h = 0; h < H; h++) {
                const float *fm = float_mask_row(p, n, h, i);
                double mx = -INFINITY;
                int unblocked = 0;
                for (int j = 0; j < S; j++) {
                    row[j] = -INFINITY;
                    if (blocked(p, n, h, i, j))
                        continue;
                    unblocked = 1;
                    double s = fm ? fm[j] : 0.0;
                    for (int c = 0; c < d; c++)
                        s += q[((size_t)n * L + i) * E + h * d + c] *
                             k[((size_t)n * S + j) * E + h * d + c];
                    if (s > FLT_MAX) {
                        re = (struct range_error){RANGE_SCORE, n, h, i};
                        goto range;
                    }
                    row[j] = s < -FLT_MAX ? -INFINITY : s; /* takes no weight */
                    if (row[j] > mx)
                        mx = row[j];
                }
                if (unblocked && mx == -INFINITY) {
                    re = (struct range_error){RANGE_ROW, n, h, i};
                    goto range;
                }
                double sum = 0.0;
                for (int j = 0; j < S; j++) {
                    row[j] = mx == -INFINITY ? 0.0 : exp(row[j] - mx);
                    sum += row[j];
                }
                for (int j = 0; j < S; j++) {
                    row[j] = sum > 0.0 ? row[j] / sum : 0.0;
                    avg[j] += row[j];
                }
                for (int c = 0; c < d; c++) {
                    double s = 0.0;
                    for (int j = 0; j < S; j++)
                        s += row[j] * v[((size_t)n * S + j) * E + h * d + c];
                    if (out_of_range(s)) {
                        re = (struct range_error){RANGE_CONTEXT, n, h, i};
                        goto range;
                    }
                    ctx[((size_t)n * L + i) * E + h * d + c] = s;
                }
                if (p->weights_mode == ATT_WEIGHTS_PER_HEAD)
                    for (int j = 0; j < S; j++)
                        weights[(((size_t)n * H + h) * L + i) * S + j] = (float)row[j];
            }
            /* the mean over all H heads: a head that blocks the row adds 0 */
            if (p->weights_mode == ATT_WEIGHTS_AVERAGE)
                for (int j = 0; j < S; j++)
                    weights[((size_t)n * L + i) * S + j] = (float)(avg[j] / H);
        }

    /* 3. out = context · Woᵀ + bo */
    for (int m = 0; m < N * L; m++)
        for (int o = 0; o < E; o++) {
            double s = p->out_proj_bias ? p->out_proj_bias[o] : 0.0;
            if (p->out_proj_weight)
                for (int c = 0; c < E; c++)
                    s += ctx[(size_t)m * E + c] * p->out_proj_weight[(size_t)o * E + c];
            else
                s += ctx[(size_t)m * E + o];
            if (out_of_range(s)) {
                re = (struct range_error){RANGE_OUTPUT, m / L, -1, m % L};
                goto range;
            }
            out[(size_t)m * E + o] = (float)s;
        }
    goto done;
range:
    rc = range_fail(err, &re);
done:
    free(q), free(k), free(v), free(ctx), free(row), free(avg);
    free(qin), free(kin), free(vin);
    return rc;
}
