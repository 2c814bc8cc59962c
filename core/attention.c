/* attention.c -- multi-head attention on OpenBLAS, and its plain reference.
 * See attention.h for the contract and the threading policy. */
#include "attention.h"

#include <cblas.h>
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

/* Is key j blocked for query i of batch n, head h? (float mask aside) */
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
    return 0;
}

/* Float mask row for (n, h, i), or NULL. */
static inline const float *float_mask_row(const struct att_params *p, int n, int h, int i)
{
    if (p->mask_kind != ATT_MASK_FLOAT)
        return NULL;
    size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
    return p->float_mask + (plane * p->L + i) * p->S;
}

static float default_scale(const struct att_params *p)
{
    return p->has_scale ? p->scale : (float)(1.0 / sqrt((double)(p->E / p->H)));
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
            memcpy(yr, x + (size_t)m * ldx, (size_t)O * sizeof *x);
            if (b)
                for (int o = 0; o < O; o++)
                    yr[o] += b[o];
        }
    }
}

/* e^x for x ≤ 0, and 0 below -87 (so -inf gives 0). Cephes' expf: range
 * reduction by ln 2 and a degree-6 polynomial, relative error < 2e-7.
 * Branch-free, so the loops that call it vectorize. */
static inline __attribute__((always_inline)) float exp_nonpos(float x)
{
    /* xc = max(x, -87) by bit masks: a select the vectorizer accepts, and
     * -inf (a blocked key) becomes -87, never NaN */
    const int in_range = -(int)(x >= -87.0f); /* all ones or zero */
    const float floor_val = -87.0f;
    int xb, fb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&fb, &floor_val, sizeof fb);
    const int xcb = (xb & in_range) | (fb & ~in_range);
    float xc;
    memcpy(&xc, &xcb, sizeof xc);
    const float keep = (float)-in_range; /* 0 below: e^-87 is near FLT_MIN */
    const int n = (int)(xc * 1.44269504f - 0.5f); /* round(x / ln 2), x ≤ 0 */
    const float fn = (float)n;
    const float r = xc - fn * 0.693359375f + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int bits = (n + 127) << 23; /* 2^n */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale * keep;
}

/* Softmax of one row in place; a row of -inf becomes zeros. One clone per
 * instruction set, picked at load time, so the image runs on any x86-64 and
 * uses AVX-512 where there is one. */
__attribute__((target_clones("avx512f", "avx2", "default")))
static void softmax_inplace(float *row, int S)
{
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < S; j++)
        mx = row[j] > mx ? row[j] : mx;
    if (mx == -INFINITY) { /* every key blocked: zero weights, not NaN */
        memset(row, 0, (size_t)S * sizeof *row);
        return;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < S; j++) {
        const float e = exp_nonpos(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < S; j++)
        row[j] *= inv;
}

/* Masks of query row i (batch n, head h) applied to its scores in place:
 * the float mask is added, blocked keys become -inf. */
static void mask_row(float *row, const struct att_params *p, int n, int h, int i)
{
    const int S = p->S;
    const float *fm = float_mask_row(p, n, h, i);
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

/* Whether every x[i] is finite; x * 0 is 0 unless x is inf or NaN, so one
 * vectorizable sum answers it. */
static int all_finite(const float *x, size_t n)
{
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++)
        acc += x[i] * 0.0f;
    return acc == 0.0f;
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
    float scale;
    int nthreads, rows_per_block, blocks_per_item;
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

static void fwd_part(struct fwd *f, int t)
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, E = p->E, H = p->H, d = E / H, nt = f->nthreads;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const int average = p->weights_mode == ATT_WEIGHTS_AVERAGE;
    int lo, hi;

    /* 2. Projections, this thread's rows of N·L (N·S). Self-attention with
     *    packed weights is one product with 3E outputs, as PyTorch does. */
    share(p->N * L, t, nt, &lo, &hi);
    if (f->fused) {
        linear(f->q + (size_t)lo * f->ldq, f->ldq, f->qin + (size_t)lo * E, E,
               p->in_proj_weight, p->in_proj_bias, hi - lo, E, 3 * E);
    } else {
        linear(f->q + (size_t)lo * E, E, f->qin + (size_t)lo * E, E, proj_weight(p, 0),
               proj_bias(p, 0), hi - lo, E, E);
        share(p->N * S, t, nt, &lo, &hi);
        linear(f->k + (size_t)lo * E, E, f->kin + (size_t)lo * p->kdim, p->kdim,
               proj_weight(p, 1), proj_bias(p, 1), hi - lo, p->kdim, E);
        linear(f->v + (size_t)lo * E, E, f->vin + (size_t)lo * p->vdim, p->vdim,
               proj_weight(p, 2), proj_bias(p, 2), hi - lo, p->vdim, E);
    }
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);

    /* 3-5. Blocks of query rows, every head: block b ≡ t (mod nt). */
    float *scratch = f->scratch ? f->scratch + (size_t)t * f->rows_per_block * S : NULL;
    for (int b = t; b < p->N * f->blocks_per_item; b += nt) {
        const int n = b / f->blocks_per_item;
        const int i0 = (b % f->blocks_per_item) * f->rows_per_block;
        const int T = L - i0 < f->rows_per_block ? L - i0 : f->rows_per_block;
        float *acc = average ? f->weights + ((size_t)n * L + i0) * S : NULL;
        if (acc)
            memset(acc, 0, (size_t)T * S * sizeof *acc);
        for (int h = 0; h < H; h++) {
            const float *kh = f->k + (size_t)n * S * f->ldk + (size_t)h * d;
            const float *vh = f->v + (size_t)n * S * f->ldv + (size_t)h * d;
            float *qh = f->q + ((size_t)n * L + i0) * f->ldq + (size_t)h * d;
            float *sc = per_head ? f->weights + (((size_t)n * H + h) * L + i0) * S : scratch;
            /* 3. scores (T, S) = q_h · k_hᵀ · scale, strided views */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, d,
                        f->scale, qh, f->ldq, kh, f->ldk, 0.0f, sc, S);
            /* 4. masks and softmax per row */
            const int masked = p->mask_kind != ATT_MASK_NONE || p->key_padding_mask;
            for (int r = 0; r < T; r++) {
                if (masked)
                    mask_row(sc + (size_t)r * S, p, n, h, i0 + r);
                softmax_inplace(sc + (size_t)r * S, S);
            }
            if (acc)
                for (size_t x = 0; x < (size_t)T * S; x++)
                    acc[x] += sc[x];
            /* 5. context_h (T, d) = weights · v_h, written over q_h, which
             *    this block no longer needs */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, S,
                        1.0f, sc, S, vh, f->ldv, 0.0f, qh, f->ldq);
        }
        if (acc) {
            const float invh = 1.0f / (float)H;
            for (size_t x = 0; x < (size_t)T * S; x++)
                acc[x] *= invh;
        }
    }
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);

    /* 6. out = context · Woᵀ + bo, this thread's rows */
    share(p->N * L, t, nt, &lo, &hi);
    linear(f->out + (size_t)lo * E, E, f->q + (size_t)lo * f->ldq, f->ldq, p->out_proj_weight,
           p->out_proj_bias, hi - lo, E, E);
}

struct fwd_thread {
    struct fwd *f;
    int t;
};

/* Flush subnormals to zero (FTZ) and read them as zero (DAZ) while a
 * thread computes. A softmax weight near e^-87 times a small value is
 * subnormal, and subnormal arithmetic runs ~5x slower through the whole
 * sgemm (measured: 150 ms instead of 32 ms at L=512, E=768); a client could
 * otherwise make any request that slow. Values below 1.2e-38 become 0,
 * far under the tolerances the results are held to. Returns the old MXCSR
 * (0 where there is no SSE) for fpu_restore(). */
static unsigned fpu_flush_subnormals(void)
{
#if defined(__SSE__)
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x8040); /* FTZ | DAZ */
    return old;
#else
    return 0;
#endif
}

static void fpu_restore(unsigned old)
{
#if defined(__SSE__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

static void *fwd_thread_main(void *arg)
{
    struct fwd_thread *ft = arg;
    pthread_mutex_lock(&ft->f->mu);
    while (!ft->f->go)
        pthread_cond_wait(&ft->f->cv, &ft->f->mu);
    pthread_mutex_unlock(&ft->f->mu);
    fpu_flush_subnormals(); /* a fresh thread; nothing to restore */
    fwd_part(ft->f, ft->t);
    return NULL;
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
        .scale = default_scale(p),
        .rows_per_block = rows, .blocks_per_item = (L + rows - 1) / rows,
    };
    if (p->positional_encoding) {
        float *a = ws + nq + 2 * nk + nscratch, *b = a + nqin, *c = b + nkin;
        memcpy(a, p->query, nqin * sizeof *a);
        memcpy(b, p->key, nkin * sizeof *b);
        memcpy(c, p->value, nvin * sizeof *c);
        att_add_positional_encoding(a, N, L, E);
        att_add_positional_encoding(b, N, S, p->kdim);
        att_add_positional_encoding(c, N, S, p->vdim);
        f.qin = a, f.kin = b, f.vin = c;
    }
    if (p->in_proj_weight && f.qin == f.kin && f.kin == f.vin) { /* then L == S */
        f.fused = 1;
        f.k = ws + E, f.v = ws + 2 * E;
        f.ldq = f.ldk = f.ldv = 3 * E;
    }

    /* 2-6 on nt threads: this one and nt - 1 helpers. If a helper cannot
     * start, the call goes on with those that did. */
    nt = gate_enter(nt);
    pthread_t th[ATT_MAX_THREADS];
    struct fwd_thread ft[ATT_MAX_THREADS];
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    int started = 1;
    for (; started < nt; started++) {
        ft[started] = (struct fwd_thread){&f, started};
        if (pthread_create(&th[started], NULL, fwd_thread_main, &ft[started]) != 0)
            break;
    }
    f.nthreads = started;
    if (started > 1)
        pthread_barrier_init(&f.barrier, NULL, (unsigned)started);
    pthread_mutex_lock(&f.mu);
    f.go = 1;
    pthread_cond_broadcast(&f.cv);
    pthread_mutex_unlock(&f.mu);
    const unsigned mxcsr = fpu_flush_subnormals();
    fwd_part(&f, 0);
    fpu_restore(mxcsr);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    if (started > 1)
        pthread_barrier_destroy(&f.barrier);
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
    gate_leave(nt);
    free(ws);
    /* Finite inputs can still overflow: a score above 3.4e38 becomes inf,
     * the softmax turns it into NaN, and NaN reaches every output it
     * touches. Say so instead of answering NaN. */
    if (!all_finite(out, out_len))
        return fail(err, ATT_ERANGE, "the result overflows float32: an attention score or "
                    "projection exceeds 3.4e38; scale the inputs or the scale down");
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
    double *row = malloc((size_t)S * sizeof *row);
    float *qin = malloc(nq * sizeof *qin), *kin = malloc(nkin * sizeof *kin);
    float *vin = malloc(nvin * sizeof *vin);
    if (!q || !k || !v || !ctx || !row || !qin || !kin || !vin) {
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
    ref_linear(q, qin, proj_weight(p, 0), proj_bias(p, 0), N * L, E, E);
    ref_linear(k, kin, proj_weight(p, 1), proj_bias(p, 1), N * S, p->kdim, E);
    ref_linear(v, vin, proj_weight(p, 2), proj_bias(p, 2), N * S, p->vdim, E);
    if (w_len)
        memset(weights, 0, w_len * sizeof *weights);

    const double scale = default_scale(p);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++) {
                const float *fm = float_mask_row(p, n, h, i);
                double mx = -INFINITY;
                for (int j = 0; j < S; j++) {
                    double s = 0.0;
                    for (int c = 0; c < d; c++)
                        s += q[((size_t)n * L + i) * E + h * d + c] *
                             k[((size_t)n * S + j) * E + h * d + c];
                    s *= scale;
                    if (fm)
                        s += fm[j];
                    if (blocked(p, n, h, i, j))
                        s = -INFINITY;
                    row[j] = s;
                    if (s > mx)
                        mx = s;
                }
                double sum = 0.0;
                for (int j = 0; j < S; j++) {
                    row[j] = mx == -INFINITY ? 0.0 : exp(row[j] - mx);
                    sum += row[j];
                }
                for (int j = 0; j < S; j++)
                    row[j] = sum > 0.0 ? row[j] / sum : 0.0;
                for (int c = 0; c < d; c++) {
                    double s = 0.0;
                    for (int j = 0; j < S; j++)
                        s += row[j] * v[((size_t)n * S + j) * E + h * d + c];
                    ctx[((size_t)n * L + i) * E + h * d + c] = s;
                }
                if (p->weights_mode == ATT_WEIGHTS_PER_HEAD)
                    for (int j = 0; j < S; j++)
                        weights[(((size_t)n * H + h) * L + i) * S + j] = (float)row[j];
                else if (p->weights_mode == ATT_WEIGHTS_AVERAGE)
                    for (int j = 0; j < S; j++)
                        weights[((size_t)n * L + i) * S + j] += (float)(row[j] / H);
            }

    for (int m = 0; m < N * L; m++)
        for (int o = 0; o < E; o++) {
            double s = p->out_proj_bias ? p->out_proj_bias[o] : 0.0;
            if (p->out_proj_weight)
                for (int c = 0; c < E; c++)
                    s += ctx[(size_t)m * E + c] * p->out_proj_weight[(size_t)o * E + c];
            else
                s += ctx[(size_t)m * E + o];
            out[(size_t)m * E + o] = (float)s;
        }
done:
    free(q), free(k), free(v), free(ctx), free(row);
    free(qin), free(kin), free(vin);
    return rc;
}
