/* check.c -- what the fast kernel (attention.c) and the reference
 * (reference.c) share: status codes, parameter validation, the masks as the
 * caller wrote them, and the words of the range rule. See check.h. */
#include "core/check.h"

#include "core/variants.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *att_status_str(int code)
{
    switch (code) {
    case ATT_OK:      return "ok";
    case ATT_EPARAM:  return "invalid_parameter";
    case ATT_ESHAPE:  return "shape_mismatch";
    case ATT_ETOOBIG: return "too_large";
    case ATT_ENOMEM:  return "out_of_memory";
    case ATT_ERANGE:  return "out_of_range";
    case ATT_ECANCELLED: return "cancelled";
    default:          return "unknown";
    }
}

int att_fail(struct att_error *err, int code, const char *fmt, ...)
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
    return att_fail(err, ATT_ESHAPE,
                    "attn_mask has shape %s, expected (%d, %d) or (%lld, %d, %d)",
                    got, p->L, p->S, (long long)p->N * p->H, p->L, p->S);
}

/* The head layout (attention.h): H, Hkv, head_dim and the widths they give,
 * each fitting int. */
static int check_heads(const struct att_params *p, struct att_error *err)
{
    if (p->Hkv < 0)
        return att_fail(err, ATT_EPARAM, "num_kv_heads must not be negative (got %d)", p->Hkv);
    if (p->H % att_num_kv_heads(p) != 0)
        return att_fail(err, ATT_EPARAM, "num_heads %d is not divisible by num_kv_heads %d",
                        p->H, p->Hkv);
    if (p->head_dim < 0)
        return att_fail(err, ATT_EPARAM, "head_dim must not be negative (got %d)", p->head_dim);
    if (p->head_dim == 0 && p->E % p->H != 0)
        return att_fail(err, ATT_EPARAM,
                        "embed_dim %d is not divisible by num_heads %d", p->E, p->H);
    /* Dq + 2·Dkv <= 3·H·d rows of a packed in_proj_weight */
    if ((long long)p->H * att_head_dim(p) > INT32_MAX / 3)
        return att_fail(err, ATT_ETOOBIG, "num_heads %d times head_dim %d is too large",
                        p->H, p->head_dim);
    return ATT_OK;
}

/* An absent projection is the identity: its input and output widths must
 * agree. The width is named as the caller knows it (embed_dim when it is). */
static int check_identity(const struct att_params *p, struct att_error *err)
{
    const int dq = att_q_width(p), dkv = att_kv_width(p);
    const char *qname = dq == p->E ? "embed_dim" : "num_heads*head_dim";
    const char *kvname = dkv == p->E ? "embed_dim" : "num_kv_heads*head_dim";
    if (p->w[ATT_W_IN]) {
        if (p->w[ATT_W_Q] || p->w[ATT_W_K] || p->w[ATT_W_V])
            return att_fail(err, ATT_EPARAM, "%s and q/k/v_proj_weight are mutually exclusive",
                            att_weight_name(ATT_W_IN));
        if (p->kdim != p->E || p->vdim != p->E)
            return att_fail(err, ATT_ESHAPE,
                            "%s needs kdim == vdim == embed_dim %d (got kdim %d, vdim %d); "
                            "use %s and %s", att_weight_name(ATT_W_IN), p->E, p->kdim,
                            p->vdim, att_weight_name(ATT_W_K), att_weight_name(ATT_W_V));
        return ATT_OK;
    }
    if (!p->w[ATT_W_Q] && dq != p->E)
        return att_fail(err, ATT_ESHAPE,
                        "query has %d features but num_heads*head_dim is %d and "
                        "%s is absent", p->E, dq, att_weight_name(ATT_W_Q));
    if (!p->w[ATT_W_K] && p->kdim != dkv)
        return att_fail(err, ATT_ESHAPE,
                        "key has %d features but %s is %d and %s is absent",
                        p->kdim, kvname, dkv, att_weight_name(ATT_W_K));
    if (!p->w[ATT_W_V] && p->vdim != dkv)
        return att_fail(err, ATT_ESHAPE,
                        "value has %d features but %s is %d and %s is absent",
                        p->vdim, kvname, dkv, att_weight_name(ATT_W_V));
    if (!p->w[ATT_W_OUT] && dq != p->E)
        return att_fail(err, ATT_ESHAPE,
                        "%s is absent but %s %d differs from embed_dim %d",
                        att_weight_name(ATT_W_OUT), qname, dq, p->E);
    return ATT_OK;
}

/* RoPE, positions, ALiBi, the window and the soft-cap (attention.h,
 * "Variants"); each message names the request's field. */
static int check_variants(const struct att_params *p, struct att_error *err)
{
    if (p->rope_style < ATT_ROPE_NONE || p->rope_style > ATT_ROPE_INTERLEAVED)
        return att_fail(err, ATT_EPARAM, "rope style %d is unknown", p->rope_style);
    if (p->rope_style != ATT_ROPE_NONE) {
        const int rd = att_rope_dim(p), d = att_head_dim(p);
        if (p->rope_rotary_dim < 0 || rd > d || rd % 2 != 0)
            return att_fail(err, ATT_EPARAM,
                            "rope rotary_dim must be even and between 2 and head_dim %d "
                            "(got %d%s)", d, p->rope_rotary_dim,
                            p->rope_rotary_dim == 0 ? ": head_dim by default" : "");
        if (!(p->rope_theta >= 0.0 && isfinite(p->rope_theta)))
            return att_fail(err, ATT_EPARAM, "rope theta must be a finite number > 0 (got %g)",
                            p->rope_theta);
    }
    if (p->query_position_offset < 0)
        return att_fail(err, ATT_EPARAM, "query_position_offset must be >= 0 (got %lld)",
                        p->query_position_offset);
    if (p->query_position_offset > ATT_MAX_POSITION - p->L)
        return att_fail(err, ATT_EPARAM,
                        "query_position_offset %lld puts query positions beyond 2^53",
                        p->query_position_offset);
    if (p->alibi_slopes)
        for (int h = 0; h < p->H; h++)
            if (!isfinite(p->alibi_slopes[h]))
                return att_fail(err, ATT_EPARAM, "alibi_slopes[%d] is not finite", h);
    if (p->has_window && (p->window_left < -1 || p->window_right < -1))
        return att_fail(err, ATT_EPARAM,
                        "window %s must be >= -1 (-1: unlimited) (got %d)",
                        p->window_left < -1 ? "left" : "right",
                        p->window_left < -1 ? p->window_left : p->window_right);
    if (!(p->softcap >= 0.0f && isfinite(p->softcap)))
        return att_fail(err, ATT_EPARAM, "softcap must be a finite number >= 0 (got %g)",
                        (double)p->softcap);
    return ATT_OK;
}

const char *att_weight_name(enum att_weight w)
{
    static const char *const names[ATT_NWEIGHTS] = {
        [ATT_W_IN] = "in_proj_weight",  [ATT_W_Q] = "q_proj_weight",
        [ATT_W_K] = "k_proj_weight",    [ATT_W_V] = "v_proj_weight",
        [ATT_W_IN_BIAS] = "in_proj_bias", [ATT_W_OUT] = "out_proj_weight",
        [ATT_W_OUT_BIAS] = "out_proj_bias"};
    return names[w];
}

void att_weight_shapes(struct att_weight_shape s[ATT_NWEIGHTS], const struct att_params *p)
{
    const long long d = att_head_dim(p), dq = p->H * d, dkv = att_num_kv_heads(p) * d, E = p->E;
    s[ATT_W_IN] = (struct att_weight_shape){2, dq + 2 * dkv, E};
    s[ATT_W_Q] = (struct att_weight_shape){2, dq, E};
    s[ATT_W_K] = (struct att_weight_shape){2, dkv, p->kdim};
    s[ATT_W_V] = (struct att_weight_shape){2, dkv, p->vdim};
    s[ATT_W_IN_BIAS] = (struct att_weight_shape){1, dq + 2 * dkv, 0};
    s[ATT_W_OUT] = (struct att_weight_shape){2, E, dq};
    s[ATT_W_OUT_BIAS] = (struct att_weight_shape){1, E, 0};
}

/* Each weight array's element count against att_weight_shapes(); the
 * products fit size_t (the widths are ints, check_heads bounds H·d). */
static int check_weight_lens(const struct att_params *p, struct att_error *err)
{
    struct att_weight_shape s[ATT_NWEIGHTS];
    att_weight_shapes(s, p);
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const size_t rows = (size_t)s[i].d0, cols = s[i].ndim == 2 ? (size_t)s[i].d1 : 1;
        if (p->w[i] && p->w_len[i] != rows * cols)
            return att_fail(err, ATT_ESHAPE,
                            "%s holds %zu floats, but num_heads %d, num_kv_heads %d, head_dim "
                            "%d and the input widths make it (%zu, %zu): %zu",
                            att_weight_name((enum att_weight)i), p->w_len[i], p->H,
                            att_num_kv_heads(p), att_head_dim(p), rows, cols, rows * cols);
    }
    return ATT_OK;
}

int att_check(const struct att_params *p, size_t *out_len, size_t *weights_len,
              struct att_error *err)
{
    /* the core's messages name struct att_params' fields; the wire names of
     * the options are the request options table's (options/options.c) */
    static const char *const dim_names[] = {
        "batch size", "target length", "source length",
        "embed_dim", "kdim", "vdim"};
    const int dims[] = {p->N, p->L, p->S, p->E, p->kdim, p->vdim};
    for (int i = 0; i < 6; i++)
        if (dims[i] < 1)
            return att_fail(err, ATT_EPARAM, "%s must be >= 1 (got %d)",
                            dim_names[i], dims[i]);
    if (p->H < 1)
        return att_fail(err, ATT_EPARAM, "num_heads must be >= 1 (got %d)", p->H);
    int rc = check_heads(p, err);
    if (rc != ATT_OK)
        return rc;
    if (!p->query || !p->key || !p->value)
        return att_fail(err, ATT_EPARAM, !p->query ? "query is missing"
                                         : !p->key ? "key is missing" : "value is missing");
    if ((rc = check_identity(p, err)) != ATT_OK)
        return rc;

    if (p->has_scale && !(p->scale > 0.0f && isfinite(p->scale)))
        return att_fail(err, ATT_EPARAM, "scale must be a finite number > 0 (got %g)",
                        (double)p->scale);
    if ((rc = check_variants(p, err)) != ATT_OK)
        return rc;

    switch (p->mask_kind) {
    case ATT_MASK_NONE:
    case ATT_MASK_CAUSAL: /* by index, any L and S */
    case ATT_MASK_CAUSAL_LOWER_RIGHT:
        break;
    case ATT_MASK_BOOL:
    case ATT_MASK_FLOAT: {
        if ((p->mask_kind == ATT_MASK_BOOL ? (const void *)p->bool_mask
                                           : (const void *)p->float_mask) == NULL)
            return att_fail(err, ATT_EPARAM, "attn_mask data is missing");
        if ((rc = check_mask_shape(p, err)) != ATT_OK)
            return rc;
        if (p->mask_kind == ATT_MASK_FLOAT) {
            /* -inf blocks a key; NaN or +inf would poison the whole row */
            size_t cnt = (size_t)p->mask_shape[0] * p->mask_shape[1] *
                         (p->mask_ndim == 3 ? (size_t)p->mask_shape[2] : 1);
            for (size_t x = 0; x < cnt; x++)
                if (isnan(p->float_mask[x]) || p->float_mask[x] == INFINITY)
                    return att_fail(err, ATT_EPARAM,
                                    "attn_mask element %zu is %s", x,
                                    isnan(p->float_mask[x]) ? "NaN" : "+inf");
        }
        break;
    }
    default:
        return att_fail(err, ATT_EPARAM, "attn_mask kind %d is unknown", p->mask_kind);
    }
    if (p->weights_mode < ATT_WEIGHTS_NONE || p->weights_mode > ATT_WEIGHTS_AVERAGE)
        return att_fail(err, ATT_EPARAM, "weights mode %d is unknown", p->weights_mode);
    if (p->weights_top_k < 0 || p->weights_pool < 0 ||
        (p->weights_top_k > 0 && p->weights_pool > 0))
        return att_fail(err, ATT_EPARAM, "weights_top_k (%d) and weights_pool (%d): at most "
                        "one, >= 1", p->weights_top_k, p->weights_pool);
    if ((p->weights_top_k > 0 || p->weights_pool > 0) && p->weights_mode == ATT_WEIGHTS_NONE)
        return att_fail(err, ATT_EPARAM, p->weights_top_k > 0
                                             ? "weights_top_k needs the weights (need_weights)"
                                             : "weights_pool needs the weights (need_weights)");

    /* Sizes: every element count (inputs, projections: (N·L, H·d),
     * (N·S, Hkv·d)) must fit size_t, and every BLAS dimension (rows of a
     * projection: N·L, N·S) must fit int. */
    const int dq = att_q_width(p), dkv = att_kv_width(p);
    const int qw = p->E > dq ? p->E : dq;
    int kw = p->kdim > p->vdim ? p->kdim : p->vdim;
    kw = kw > dkv ? kw : dkv;
    size_t o, w = 0, t, qn;
    if (!mul3_ok(&o, (size_t)p->N, (size_t)p->L, (size_t)p->E) ||
        !mul3_ok(&qn, (size_t)p->N, (size_t)p->L, (size_t)qw) ||
        !mul3_ok(&t, (size_t)p->N, (size_t)p->S, (size_t)kw) ||
        (size_t)p->N * p->L > INT32_MAX || (size_t)p->N * p->S > INT32_MAX ||
        qn > SIZE_MAX / sizeof(float) / 8 || t > SIZE_MAX / sizeof(float) / 8)
        return att_fail(err, ATT_ETOOBIG, "tensor sizes overflow (N %d, L %d, S %d, E %d)",
                        p->N, p->L, p->S, p->E);
    if (p->weights_mode != ATT_WEIGHTS_NONE) {
        /* a row of S, k (values and indices: 2k) or ⌈S/p⌉ tiles of ⌈L/p⌉ rows */
        size_t heads = p->weights_mode == ATT_WEIGHTS_PER_HEAD ? (size_t)p->H : 1;
        size_t rows = (size_t)p->L, cols = (size_t)p->S;
        if (p->weights_top_k > 0)
            cols = 2 * (size_t)(p->weights_top_k < p->S ? p->weights_top_k : p->S);
        else if (p->weights_pool > 0)
            rows = (size_t)(p->L - 1) / (size_t)p->weights_pool + 1,
            cols = (size_t)(p->S - 1) / (size_t)p->weights_pool + 1;
        if (!mul3_ok(&t, (size_t)p->N, heads, rows) || !mul_ok(&w, t, cols) ||
            w > SIZE_MAX / sizeof(float))
            return att_fail(err, ATT_ETOOBIG, "attention weights size overflows "
                            "(N %d, H %d, L %d, S %d)", p->N, p->H, p->L, p->S);
    }
    if ((rc = check_weight_lens(p, err)) != ATT_OK)
        return rc;
    if (out_len)
        *out_len = o;
    if (weights_len)
        *weights_len = w;
    return ATT_OK;
}

int att_check_buffers(const float *out, const float *weights, const struct att_params *p,
                      struct att_error *err)
{
    if (!out || (p->weights_mode != ATT_WEIGHTS_NONE && !weights))
        return att_fail(err, ATT_EPARAM, "output buffer is missing");
    return ATT_OK;
}

/* ---------------------------------------------------------------------- */
/* The caller's masks and projections                                      */

/* Float mask row for (n, h, i), or NULL. */
const float *att_float_mask_row(const struct att_params *p, int n, int h, int i)
{
    if (p->mask_kind != ATT_MASK_FLOAT)
        return NULL;
    size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
    return p->float_mask + (plane * p->L + i) * p->S;
}

/* Does the caller block key j for query i of batch n, head h? Key padding,
 * either causal mask, the window, a bool mask, or -inf in a float mask (a score that overflowed to
 * -inf is not blocked: the range rule decides about it). */
int att_blocked(const struct att_params *p, int n, int h, int i, int j)
{
    if (p->key_padding_mask && p->key_padding_mask[(size_t)n * p->S + j])
        return 1;
    if (p->has_window || p->mask_kind == ATT_MASK_CAUSAL ||
        p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT) {
        int lo, hi;
        att_visible_keys(p, i, &lo, &hi);
        if (j < lo || j >= hi)
            return 1;
    }
    if (p->mask_kind == ATT_MASK_BOOL) {
        size_t plane = p->mask_ndim == 3 ? (size_t)n * p->H + h : 0;
        return p->bool_mask[(plane * p->L + i) * p->S + j] != 0;
    }
    if (p->mask_kind == ATT_MASK_FLOAT)
        return att_float_mask_row(p, n, h, i)[j] == -INFINITY;
    return 0;
}

/* First row of stream 0 (q), 1 (k), 2 (v) in the packed (Dq + 2·Dkv, ·)
 * weight and bias. */
static size_t proj_row(const struct att_params *p, int which)
{
    return which == 0 ? 0 : (size_t)att_q_width(p) + (size_t)(which - 1) * att_kv_width(p);
}

/* Projection weight and bias for stream 0 (q), 1 (k), 2 (v). */
const float *att_proj_weight(const struct att_params *p, int which)
{
    if (p->w[ATT_W_IN])
        return p->w[ATT_W_IN] + proj_row(p, which) * p->E;
    return p->w[ATT_W_Q + which];
}

const float *att_proj_bias(const struct att_params *p, int which)
{
    return p->w[ATT_W_IN_BIAS] ? p->w[ATT_W_IN_BIAS] + proj_row(p, which) : NULL;
}

/* ---------------------------------------------------------------------- */
/* The range rule (attention.h, "Range"): which value left float32's range
 * first. The fast kernel and the reference report it with the same words.   */

/* Is a before b in (stage, n, i, h) order? A stage of 0 is never before. */
int att_range_before(const struct range_error *a, const struct range_error *b)
{
    if (!a->stage)
        return 0;
    if (!b->stage || a->stage != b->stage)
        return !b->stage || a->stage < b->stage;
    if (a->n != b->n)
        return a->n < b->n;
    return a->i != b->i ? a->i < b->i : a->h < b->h;
}

int att_range_fail(struct att_error *err, const struct range_error *re)
{
    const char *pre = "the result overflows float32:";
    switch (re->stage) {
    case RANGE_CANCELLED:
        return att_fail(err, ATT_ECANCELLED, "the computation was cancelled");
    case RANGE_QPROJ:
        return att_fail(err, ATT_ERANGE, "%s the query projection exceeds 3.4e38 in magnitude "
                        "(batch %d, position %d)", pre, re->n, re->i);
    case RANGE_KPROJ:
        return att_fail(err, ATT_ERANGE, "%s the key projection exceeds 3.4e38 in magnitude "
                        "(batch %d, position %d)", pre, re->n, re->i);
    case RANGE_VPROJ:
        return att_fail(err, ATT_ERANGE, "%s the value projection exceeds 3.4e38 in magnitude "
                        "(batch %d, position %d)", pre, re->n, re->i);
    case RANGE_QSCALED:
        return att_fail(err, ATT_ERANGE,
                        "%s the scaled query q*scale exceeds 3.4e38 in magnitude "
                        "(batch %d, position %d)", pre, re->n, re->i);
    case RANGE_SCORE:
        return att_fail(err, ATT_ERANGE,
                        "%s an attention score (q.k plus attn_mask) exceeds 3.4e38 "
                        "(batch %d, head %d, query %d)", pre, re->n, re->h, re->i);
    case RANGE_ROW:
        return att_fail(err, ATT_ERANGE,
                        "%s every unmasked attention score of query %d (batch %d, head %d) "
                        "is below -3.4e38", pre, re->i, re->n, re->h);
    case RANGE_CONTEXT:
        return att_fail(err, ATT_ERANGE,
                        "%s an attention context (weights.v) exceeds 3.4e38 in magnitude "
                        "(batch %d, head %d, query %d)", pre, re->n, re->h, re->i);
    default:
        return att_fail(err, ATT_ERANGE,
                        "%s the output exceeds 3.4e38 in magnitude (batch %d, position %d)",
                        pre, re->n, re->i);
    }
}

/* Is x beyond float32's range? */
int att_out_of_range(double x)
{
    return x > (double)FLT_MAX || x < -(double)FLT_MAX;
}
