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

/* OpenBLAS extensions (declared in its cblas.h, repeated for clarity). */
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);

/* Query rows per tile when the scores go to scratch rather than to the
 * caller's weights buffer: scratch is ATT_TILE × S floats per call. */
#define ATT_TILE 64

const char *att_status_str(int code)
{
    switch (code) {
    case ATT_OK:      return "ok";
    case ATT_EPARAM:  return "invalid_parameter";
    case ATT_ESHAPE:  return "shape_mismatch";
    case ATT_ETOOBIG: return "too_large";
    case ATT_ENOMEM:  return "out_of_memory";
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
/* Concurrency gate (see attention.h): at most ATT_MAX_CONCURRENT callers
 * inside OpenBLAS at once, or one if the library is the serial build. */

static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_free;

static void gate_setup(void)
{
    gate_free = openblas_get_parallel() == 0 ? 1 : ATT_MAX_CONCURRENT;
}

static void gate_enter(void)
{
    pthread_once(&gate_once, gate_setup);
    pthread_mutex_lock(&gate_mu);
    while (gate_free == 0)
        pthread_cond_wait(&gate_cv, &gate_mu);
    gate_free--;
    pthread_mutex_unlock(&gate_mu);
}

static void gate_leave(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_free++;
    pthread_cond_signal(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

void att_init(int blas_threads)
{
    openblas_set_num_threads(blas_threads < 1 ? 1 : blas_threads);
    pthread_once(&gate_once, gate_setup);
}

/* ---------------------------------------------------------------------- */
/* Fast path                                                               */

/* y: (M, O) = x: (M, K) · Wᵀ + b, W: (O, K) or NULL = identity (K == O),
 * b: (O) or NULL = zero. */
static void linear(float *y, const float *x, const float *W, const float *b,
                   int M, int K, int O)
{
    if (W) {
        float beta = 0.0f;
        if (b) {
            for (int m = 0; m < M; m++)
                memcpy(y + (size_t)m * O, b, (size_t)O * sizeof *b);
            beta = 1.0f;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, O, K,
                    1.0f, x, K, W, K, beta, y, O);
    } else {
        memcpy(y, x, (size_t)M * O * sizeof *x);
        if (b)
            for (int m = 0; m < M; m++)
                for (int o = 0; o < O; o++)
                    y[(size_t)m * O + o] += b[o];
    }
}

/* Mask and softmax one row of scores in place (blocked keys → 0). */
static void softmax_row(float *row, const struct att_params *p, int n, int h, int i)
{
    const int S = p->S;
    const float *fm = float_mask_row(p, n, h, i);
    const int any_block = p->key_padding_mask || p->mask_kind == ATT_MASK_CAUSAL ||
                          p->mask_kind == ATT_MASK_BOOL;
    float mx = -INFINITY;
    for (int j = 0; j < S; j++) {
        float s = row[j];
        if (fm)
            s += fm[j];
        if (any_block && blocked(p, n, h, i, j))
            s = -INFINITY;
        row[j] = s;
        if (s > mx)
            mx = s;
    }
    if (mx == -INFINITY) { /* every key blocked: zero weights, not NaN */
        memset(row, 0, (size_t)S * sizeof *row);
        return;
    }
    float sum = 0.0f;
    for (int j = 0; j < S; j++) {
        float e = expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < S; j++)
        row[j] *= inv;
}

int att_forward(float *out, float *weights, const struct att_params *p,
                struct att_error *err)
{
    size_t out_len, w_len;
    int rc = att_check(p, &out_len, &w_len, err);
    if (rc != ATT_OK)
        return rc;
    if (!out || (w_len && !weights))
        return fail(err, ATT_EPARAM, "output buffer is missing");

    const int N = p->N, L = p->L, S = p->S, E = p->E, H = p->H, d = E / H;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const int average = p->weights_mode == ATT_WEIGHTS_AVERAGE;
    const float scale = default_scale(p);

    /* 1. One workspace: q (becomes the context in place), k, v, score
     *    scratch, and copies of the inputs when positional encoding is on. */
    const size_t nq = (size_t)N * L * E, nk = (size_t)N * S * E;
    const size_t nscratch = per_head ? 0 : (size_t)(L < ATT_TILE ? L : ATT_TILE) * S;
    const size_t nqin = p->positional_encoding ? nq : 0;
    const size_t nkin = p->positional_encoding ? (size_t)N * S * p->kdim : 0;
    const size_t nvin = p->positional_encoding ? (size_t)N * S * p->vdim : 0;
    size_t total = nq + 2 * nk + nscratch + nqin + nkin + nvin; /* sizes checked */
    float *ws = malloc(total * sizeof *ws);
    if (!ws)
        return fail(err, ATT_ENOMEM, "out of memory for a %zu-byte workspace",
                    total * sizeof *ws);
    float *q = ws, *k = q + nq, *v = k + nk, *scratch = v + nk;
    const float *qin = p->query, *kin = p->key, *vin = p->value;
    if (p->positional_encoding) {
        float *a = scratch + nscratch, *b = a + nqin, *c = b + nkin;
        memcpy(a, p->query, nqin * sizeof *a);
        memcpy(b, p->key, nkin * sizeof *b);
        memcpy(c, p->value, nvin * sizeof *c);
        att_add_positional_encoding(a, N, L, E);
        att_add_positional_encoding(b, N, S, p->kdim);
        att_add_positional_encoding(c, N, S, p->vdim);
        qin = a, kin = b, vin = c;
    }

    gate_enter();

    /* 2. Projections over all N·L (N·S) rows at once. */
    linear(q, qin, proj_weight(p, 0), proj_bias(p, 0), N * L, E, E);
    linear(k, kin, proj_weight(p, 1), proj_bias(p, 1), N * S, p->kdim, E);
    linear(v, vin, proj_weight(p, 2), proj_bias(p, 2), N * S, p->vdim, E);
    if (average)
        memset(weights, 0, w_len * sizeof *weights);

    for (int n = 0; n < N; n++) {
        for (int h = 0; h < H; h++) {
            const float *kh = k + (size_t)n * S * E + (size_t)h * d;
            const float *vh = v + (size_t)n * S * E + (size_t)h * d;
            const int tile = per_head ? L : ATT_TILE;
            for (int i0 = 0; i0 < L; i0 += tile) {
                const int T = L - i0 < tile ? L - i0 : tile;
                float *qh = q + ((size_t)n * L + i0) * E + (size_t)h * d;
                float *sc = per_head ? weights + (((size_t)n * H + h) * L + i0) * S
                                     : scratch;
                /* 3. scores (T, S) = q_h · k_hᵀ · scale, strided views */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, d,
                            scale, qh, E, kh, E, 0.0f, sc, S);
                /* 4. masks and softmax per row */
                for (int r = 0; r < T; r++)
                    softmax_row(sc + (size_t)r * S, p, n, h, i0 + r);
                if (average) {
                    float *acc = weights + ((size_t)n * L + i0) * S;
                    const size_t cnt = (size_t)T * S;
                    for (size_t x = 0; x < cnt; x++)
                        acc[x] += sc[x];
                }
                /* 5. context_h (T, d) = weights · v_h, written over q_h,
                 *    which this (tile, head) no longer needs */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, S,
                            1.0f, sc, S, vh, E, 0.0f, qh, E);
            }
        }
    }
    if (average) {
        const float invh = 1.0f / (float)H;
        for (size_t x = 0; x < w_len; x++)
            weights[x] *= invh;
    }

    /* 6. out = context · Woᵀ + bo */
    linear(out, q, p->out_proj_weight, p->out_proj_bias, N * L, E, E);

    gate_leave();
    free(ws);
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
