/* reference.c -- att_forward_ref(): multi-head attention in plain loops
 * with double accumulation, no BLAS, no threads, written the way
 * attention.h states the semantics, variants included (GQA, head_dim,
 * RoPE, ALiBi, window, soft-cap, both causal alignments). Slow; the fast
 * kernel (attention.c) is tested and benchmarked against it, and it is
 * tested against PyTorch float64 goldens (tests/golden, tests/golden_variants). */
#include "core/attention.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/reduce.h"
#include "core/variants.h"

/* y (M, O) = x (M, K) · Wᵀ + b in double; W NULL = identity. */
static void ref_linear(double *y, const float *x, const float *W, const float *b,
                       int M, int K, int O)
{
    for (int m = 0; m < M; m++)
        for (int o = 0; o < O; o++) {
            double s = b ? (double)b[o] : 0.0;
            if (W)
                for (int i = 0; i < K; i++)
                    s += (double)x[(size_t)m * K + i] * (double)W[(size_t)o * K + i];
            else
                s += (double)x[(size_t)m * K + o];
            y[(size_t)m * O + o] = s;
        }
}

/* Is an element of x (M rows of O) out of range? Then *re names the first,
 * as stage with T rows per batch item. */
static int ref_range(const double *x, int M, int O, int stage, int T, struct range_error *re)
{
    for (size_t e = 0; e < (size_t)M * O; e++)
        if (att_out_of_range(x[e])) {
            const int row = (int)(e / (size_t)O);
            *re = (struct range_error){stage, row / T, -1, row % T};
            return 1;
        }
    return 0;
}

/* x: (M rows of width W, T rows per batch item), heads of d columns from
 * column 0: rotate the first rotary_dim entries of every head at the row's
 * position, offset + (row mod T). cosv, sinv: scratch (rotary_dim / 2). */
static void ref_rope(double *x, int M, int W, int T, long long offset, int d,
                     const struct att_params *p, double *cosv, double *sinv)
{
    const int rd = att_rope_dim(p);
    for (int m = 0; m < M; m++) {
        att_rope_angles(cosv, sinv, offset + m % T, rd, att_rope_theta(p));
        for (int c = 0; c < W; c += d)
            att_rope_rotate_d(x + (size_t)m * W + c, cosv, sinv, rd, p->rope_style);
    }
}

/* The score of key j for query i (batch n, head h): q_h·k_jᵀ (q scaled
 * already), soft-capped, + ALiBi, + the float mask fm (or NULL). */
static double ref_score(const double *qrow, const double *krow, int d, const struct att_params *p,
                        int h, int i, int j, const float *fm)
{
    double s = 0.0;
    for (int c = 0; c < d; c++)
        s += qrow[c] * krow[c];
    if (p->softcap > 0.0f)
        s = (double)p->softcap * tanh(s / (double)p->softcap);
    if (p->alibi_slopes)
        s += att_alibi_bias((double)p->alibi_slopes[h], att_query_pos(p, i), j);
    return fm ? s + (double)fm[j] : s;
}

/* Scratch of one call, one allocation each; free_scratch() accepts NULLs. */
struct scratch {
    double *q, *k, *v, *ctx, *row, *avg, *cosv, *sinv;
    float *qin, *kin, *vin;
};

static void free_scratch(struct scratch *w)
{
    free(w->q), free(w->k), free(w->v), free(w->ctx), free(w->row), free(w->avg);
    free(w->cosv), free(w->sinv), free(w->qin), free(w->kin), free(w->vin);
}

static int ref_forward(float *out, float *weights, const struct att_params *p,
                       struct att_error *err);

/* Reduced weights (top-k, pool): the full weights, then att_reduce_plain. */
int att_forward_ref(float *out, float *weights, const struct att_params *p,
                    struct att_error *err)
{
    int rc = att_check(p, NULL, NULL, err);
    if (rc == ATT_OK)
        rc = att_check_buffers(out, weights, p, err);
    if (rc != ATT_OK || !att_reduce_kind(p))
        return rc != ATT_OK ? rc : ref_forward(out, weights, p, err);
    struct att_params full = *p;
    full.weights_top_k = full.weights_pool = 0;
    size_t wl = 0;
    att_check(&full, NULL, &wl, NULL);
    float *w = malloc(wl * sizeof *w);
    if (!w)
        return att_fail(err, ATT_ENOMEM, "out of memory in the reference");
    rc = ref_forward(out, w, &full, err);
    if (rc == ATT_OK && att_reduce_plain(weights, w, p))
        rc = att_fail(err, ATT_ENOMEM, "out of memory in the reference");
    free(w);
    return rc;
}

static int ref_forward(float *out, float *weights, const struct att_params *p,
                       struct att_error *err)
{
    int rc = ATT_OK;

    const int N = p->N, L = p->L, S = p->S, E = p->E, H = p->H, d = att_head_dim(p);
    const int Dq = att_q_width(p), Dkv = att_kv_width(p), rd = att_rope_dim(p);
    const size_t nq = (size_t)N * L * Dq, nk = (size_t)N * S * Dkv, nqin = (size_t)N * L * E;
    const size_t nkin = (size_t)N * S * p->kdim, nvin = (size_t)N * S * p->vdim;
    struct scratch w = {
        malloc(nq * sizeof(double)), malloc(nk * sizeof(double)), malloc(nk * sizeof(double)),
        malloc(nq * sizeof(double)), malloc((size_t)S * sizeof(double)),
        malloc((size_t)S * sizeof(double)), malloc((size_t)(rd / 2 + 1) * sizeof(double)),
        malloc((size_t)(rd / 2 + 1) * sizeof(double)), malloc(nqin * sizeof(float)),
        malloc(nkin * sizeof(float)), malloc(nvin * sizeof(float))};
    double *q = w.q, *k = w.k, *v = w.v, *ctx = w.ctx, *row = w.row, *avg = w.avg;
    struct range_error re = {0, 0, 0, 0};
    if (!q || !k || !v || !ctx || !row || !avg || !w.cosv || !w.sinv || !w.qin || !w.kin ||
        !w.vin) {
        rc = att_fail(err, ATT_ENOMEM, "out of memory in the reference");
        goto done;
    }
    memcpy(w.qin, p->query, nqin * sizeof(float));
    memcpy(w.kin, p->key, nkin * sizeof(float));
    memcpy(w.vin, p->value, nvin * sizeof(float));
    if (p->positional_encoding) {
        att_add_positional_encoding(w.qin, N, L, E);
        att_add_positional_encoding(w.kin, N, S, p->kdim);
        att_add_positional_encoding(w.vin, N, S, p->vdim);
    }
    /* 1. projections: q (N·L, H·d), k and v (N·S, Hkv·d); the range rule
     *    checks each value in double */
    ref_linear(q, w.qin, att_proj_weight(p, 0), att_proj_bias(p, 0), N * L, E, Dq);
    ref_linear(k, w.kin, att_proj_weight(p, 1), att_proj_bias(p, 1), N * S, p->kdim, Dkv);
    ref_linear(v, w.vin, att_proj_weight(p, 2), att_proj_bias(p, 2), N * S, p->vdim, Dkv);
    if (ref_range(q, N * L, Dq, RANGE_QPROJ, L, &re) ||
        ref_range(k, N * S, Dkv, RANGE_KPROJ, S, &re) ||
        ref_range(v, N * S, Dkv, RANGE_VPROJ, S, &re))
        goto range;
    /* 2. RoPE on every head of q (at offset + i) and k (at j); a rotated
     *    value is still the projection's, for the range rule */
    if (rd > 0) {
        ref_rope(q, N * L, Dq, L, p->query_position_offset, d, p, w.cosv, w.sinv);
        ref_rope(k, N * S, Dkv, S, 0, d, p, w.cosv, w.sinv);
        if (ref_range(q, N * L, Dq, RANGE_QPROJ, L, &re) ||
            ref_range(k, N * S, Dkv, RANGE_KPROJ, S, &re))
            goto range;
    }
    /* 3. q·scale (q / sqrt(d) by default), in PyTorch's order */
    const double sqrt_d = sqrt((double)d);
    for (size_t e = 0; e < nq; e++)
        q[e] = p->has_scale ? q[e] * (double)p->scale : q[e] / sqrt_d;
    if (ref_range(q, N * L, Dq, RANGE_QSCALED, L, &re))
        goto range;

    /* 4. per query row and head: scores of the keys not blocked, softmax,
     *    context from the head's KV head */
    for (int n = 0; n < N; n++)
        for (int i = 0; i < L; i++) {
            for (int j = 0; j < S; j++)
                avg[j] = 0.0;
            for (int h = 0; h < H; h++) {
                const float *fm = att_float_mask_row(p, n, h, i);
                const double *qrow = q + ((size_t)n * L + i) * Dq + (size_t)h * d;
                const double *kh = k + (size_t)n * S * Dkv + (size_t)att_kv_head(p, h) * d;
                const double *vh = v + (size_t)n * S * Dkv + (size_t)att_kv_head(p, h) * d;
                double mx = -(double)INFINITY;
                int unblocked = 0;
                for (int j = 0; j < S; j++) {
                    row[j] = -(double)INFINITY;
                    if (att_blocked(p, n, h, i, j))
                        continue;
                    unblocked = 1;
                    const double s = ref_score(qrow, kh + (size_t)j * Dkv, d, p, h, i, j, fm);
                    if (s > (double)FLT_MAX) {
                        re = (struct range_error){RANGE_SCORE, n, h, i};
                        goto range;
                    }
                    row[j] = s < -(double)FLT_MAX ? -(double)INFINITY : s; /* takes no weight */
                    if (row[j] > mx)
                        mx = row[j];
                }
                if (unblocked && mx == -(double)INFINITY) {
                    re = (struct range_error){RANGE_ROW, n, h, i};
                    goto range;
                }
                double sum = 0.0;
                for (int j = 0; j < S; j++) {
                    row[j] = mx == -(double)INFINITY ? 0.0 : exp(row[j] - mx);
                    sum += row[j];
                }
                for (int j = 0; j < S; j++) {
                    row[j] = sum > 0.0 ? row[j] / sum : 0.0;
                    avg[j] += row[j];
                }
                for (int c = 0; c < d; c++) {
                    double s = 0.0;
                    for (int j = 0; j < S; j++)
                        s += row[j] * vh[(size_t)j * Dkv + c];
                    if (att_out_of_range(s)) {
                        re = (struct range_error){RANGE_CONTEXT, n, h, i};
                        goto range;
                    }
                    ctx[((size_t)n * L + i) * Dq + (size_t)h * d + c] = s;
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

    /* 5. out (N·L, E) = context (N·L, H·d) · Woᵀ + bo */
    for (int m = 0; m < N * L; m++)
        for (int o = 0; o < E; o++) {
            double s = p->w[ATT_W_OUT_BIAS] ? (double)p->w[ATT_W_OUT_BIAS][o] : 0.0;
            if (p->w[ATT_W_OUT])
                for (int c = 0; c < Dq; c++)
                    s += ctx[(size_t)m * Dq + c] * (double)p->w[ATT_W_OUT][(size_t)o * Dq + c];
            else
                s += ctx[(size_t)m * Dq + o];
            if (att_out_of_range(s)) {
                re = (struct range_error){RANGE_OUTPUT, m / L, -1, m % L};
                goto range;
            }
            out[(size_t)m * E + o] = (float)s;
        }
    goto done;
range:
    rc = att_range_fail(err, &re);
done:
    free_scratch(&w);
    return rc;
}
