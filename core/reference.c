/* reference.c -- att_forward_ref(): multi-head attention in plain loops
 * with double accumulation, no BLAS, no threads. Slow; the fast kernel
 * (attention.c) is tested and benchmarked against it. */
#include "core/attention.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

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

int att_forward_ref(float *out, float *weights, const struct att_params *p,
                    struct att_error *err)
{
    int rc = att_check(p, NULL, NULL, err);
    if (rc == ATT_OK)
        rc = att_check_buffers(out, weights, p, err);
    if (rc != ATT_OK)
        return rc;

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
        rc = att_fail(err, ATT_ENOMEM, "out of memory in the reference");
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
    ref_linear(q, qin, att_proj_weight(p, 0), att_proj_bias(p, 0), N * L, E, E);
    ref_linear(k, kin, att_proj_weight(p, 1), att_proj_bias(p, 1), N * S, p->kdim, E);
    ref_linear(v, vin, att_proj_weight(p, 2), att_proj_bias(p, 2), N * S, p->vdim, E);
    if (ref_range(q, N * L, E, RANGE_QPROJ, L, &re) || ref_range(k, N * S, E, RANGE_KPROJ, S, &re) ||
        ref_range(v, N * S, E, RANGE_VPROJ, S, &re))
        goto range;
    const double sqrt_d = sqrt((double)d);
    for (size_t e = 0; e < nq; e++)
        q[e] = p->has_scale ? q[e] * (double)p->scale : q[e] / sqrt_d;
    if (ref_range(q, N * L, E, RANGE_QSCALED, L, &re))
        goto range;

    /* 2. per query row and head: scores, softmax, context */
    for (int n = 0; n < N; n++)
        for (int i = 0; i < L; i++) {
            for (int j = 0; j < S; j++)
                avg[j] = 0.0;
            for (int h = 0; h < H; h++) {
                const float *fm = att_float_mask_row(p, n, h, i);
                double mx = -(double)INFINITY;
                int unblocked = 0;
                for (int j = 0; j < S; j++) {
                    row[j] = -(double)INFINITY;
                    if (att_blocked(p, n, h, i, j))
                        continue;
                    unblocked = 1;
                    double s = fm ? (double)fm[j] : 0.0;
                    for (int c = 0; c < d; c++)
                        s += q[((size_t)n * L + i) * E + h * d + c] *
                             k[((size_t)n * S + j) * E + h * d + c];
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
                        s += row[j] * v[((size_t)n * S + j) * E + h * d + c];
                    if (att_out_of_range(s)) {
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
            double s = p->out_proj_bias ? (double)p->out_proj_bias[o] : 0.0;
            if (p->out_proj_weight)
                for (int c = 0; c < E; c++)
                    s += ctx[(size_t)m * E + c] * (double)p->out_proj_weight[(size_t)o * E + c];
            else
                s += ctx[(size_t)m * E + o];
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
    free(q), free(k), free(v), free(ctx), free(row), free(avg);
    free(qin), free(kin), free(vin);
    return rc;
}
