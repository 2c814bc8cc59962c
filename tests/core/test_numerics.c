/* test_numerics.c -- numbers at the edges (docs/numerics.md, "Accuracy" and "Range").
 *
 * The property: for random requests whose magnitudes are drawn
 * log-uniformly from 1e-40 to 1e38 (values, weights, biases, scales, float
 * masks), att_forward() either answers ATT_ERANGE exactly where the range
 * rule says so, computed in float64 in PyTorch's order, or answers numbers
 * within the stated tolerance of the float64 values, widened by a bound on
 * the float32 rounding of the sums involved. Never ATT_OK with a wrong
 * number, never NaN.
 *
 * The float64 side is computed here, independently of att_forward_ref(),
 * together with an error bound for every value, propagated step by step:
 *   - a sum of terms t_k computed in float32 is off by at most
 *     U·Σ|t_k| with U = 2⁻²⁰ (16 units of float32 rounding: more than the
 *     K+1 roundings of any sum in these shapes, K ≤ 8), plus 2⁻¹⁴⁹ per
 *     rounding (a result may underflow to a subnormal or to zero), plus the
 *     error each term inherits from its factors;
 *   - softmax: score errors of at most Δ in a row change each weight w by at
 *     most w·(e^(2Δ) − 1), plus 1e-6·w for the float32 exp and division, plus
 *     2⁻¹⁴⁹ for a subnormal weight's rounding; never more than 1.
 * Outputs must be within max(1e-4·(1 + |ref|), bound), weights within
 * max(1e-5, bound). A value whose bound reaches float32's range limit may
 * fall on either side of the rule; such a case accepts either answer and is
 * counted apart. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"

#define U 0x1p-20       /* rounding bound per sum, relative to Σ|terms| */
#define TINY 0x1p-149   /* and absolute, per rounding: a result may underflow */
#define MAXE 8          /* largest E, kdim, vdim in the random cases */
#define MAXT 4          /* largest L and S */
#define MAXN 2

/* One random request with its storage. */
struct pcase {
    struct att_params p;
    float q[MAXN * MAXT * MAXE], k[MAXN * MAXT * MAXE], v[MAXN * MAXT * MAXE];
    float wq[MAXE * MAXE], wk[MAXE * MAXE], wv[MAXE * MAXE], win[3 * MAXE * MAXE];
    float bin[3 * MAXE], wo[MAXE * MAXE], bo[MAXE];
    float fmask[MAXN * MAXE * MAXT * MAXT];
    uint8_t bmask[MAXN * MAXE * MAXT * MAXT], pad[MAXN * MAXT];
};

/* The float64 answer, a bound on float32's error for each value, and the
 * rule's verdict: 1 = out of range, 0 = in range, -1 = too close to tell. */
struct pref {
    int verdict;
    double out[MAXN * MAXT * MAXE], out_err[MAXN * MAXT * MAXE];
    double w[MAXN * MAXE * MAXT * MAXT], w_err[MAXN * MAXE * MAXT * MAXT];
};

static double unif(unsigned long long *s)
{
    return (double)(check_xorshift(s) >> 11) * 0x1p-53;
}

/* 10^u, u uniform in [-40, 38]: log-uniform from 1e-40 to 1e38. */
static float logu(unsigned long long *s)
{
    return (float)pow(10.0, -40.0 + 78.0 * unif(s));
}

/* A tensor: either every element log-uniform with a random sign, or one
 * log-uniform magnitude times uniform [-1, 1) (values of similar size, as
 * real data has), with some zeros. */
static void fill(float *x, int n, unsigned long long *s)
{
    const int per_element = unif(s) < 0.5;
    const float base = logu(s);
    for (int i = 0; i < n; i++) {
        const double r = unif(s);
        if (r < 0.05)
            x[i] = 0.0f;
        else if (per_element)
            x[i] = (r < 0.525 ? -1.0f : 1.0f) * logu(s);
        else
            x[i] = base * (float)(2.0 * unif(s) - 1.0);
    }
}

static void make_pcase(struct pcase *c, unsigned long long seed)
{
    unsigned long long s = seed * 0x9E3779B97F4A7C15ULL + 12345;
    static const int Es[] = {1, 2, 4, 6, 8};
    struct att_params *p = &c->p;
    memset(c, 0, sizeof *c);
    att_params_init(p);
    p->N = 1 + (int)(unif(&s) * MAXN);
    p->L = 1 + (int)(unif(&s) * MAXT);
    p->S = 1 + (int)(unif(&s) * MAXT);
    p->E = Es[(int)(unif(&s) * 5)];
    do
        p->H = 1 + (int)(unif(&s) * p->E);
    while (p->E % p->H);
    const int proj = (int)(unif(&s) * 3); /* 0 none, 1 packed, 2 separate */
    p->kdim = proj == 2 ? 1 + (int)(unif(&s) * MAXE) : p->E;
    p->vdim = proj == 2 ? 1 + (int)(unif(&s) * MAXE) : p->E;
    fill(c->q, p->N * p->L * p->E, &s);
    fill(c->k, p->N * p->S * p->kdim, &s);
    fill(c->v, p->N * p->S * p->vdim, &s);
    p->query = c->q, p->key = c->k, p->value = c->v;
    if (proj == 1) {
        fill(c->win, 3 * p->E * p->E, &s);
        p->w[ATT_W_IN] = c->win;
    } else if (proj == 2) {
        fill(c->wq, p->E * p->E, &s), fill(c->wk, p->E * p->kdim, &s);
        fill(c->wv, p->E * p->vdim, &s);
        p->w[ATT_W_Q] = c->wq, p->w[ATT_W_K] = c->wk, p->w[ATT_W_V] = c->wv;
    }
    if (unif(&s) < 0.5)
        fill(c->bin, 3 * p->E, &s), p->w[ATT_W_IN_BIAS] = c->bin;
    if (unif(&s) < 0.5)
        fill(c->wo, p->E * p->E, &s), p->w[ATT_W_OUT] = c->wo;
    if (unif(&s) < 0.5)
        fill(c->bo, p->E, &s), p->w[ATT_W_OUT_BIAS] = c->bo;
    golden_weight_lens(p);
    if (unif(&s) < 0.5)
        p->has_scale = 1, p->scale = logu(&s);
    const double m = unif(&s);
    const int planes = unif(&s) < 0.5 ? 1 : p->N * p->H;
    p->mask_ndim = planes > 1 ? 3 : 2;
    p->mask_shape[0] = planes > 1 ? planes : p->L;
    p->mask_shape[1] = planes > 1 ? p->L : p->S;
    p->mask_shape[2] = planes > 1 ? p->S : 0;
    const int cnt = planes * p->L * p->S;
    if (m < 0.3) {
        p->mask_kind = ATT_MASK_FLOAT, p->float_mask = c->fmask;
        fill(c->fmask, cnt, &s);
        for (int i = 0; i < cnt; i++) {
            const double r = unif(&s);
            if (r < 0.1)
                c->fmask[i] = -INFINITY;
            else if (r < 0.2)
                c->fmask[i] = -FLT_MAX;
        }
    } else if (m < 0.45) {
        p->mask_kind = ATT_MASK_BOOL, p->bool_mask = c->bmask;
        for (int i = 0; i < cnt; i++)
            c->bmask[i] = unif(&s) < 0.3;
    } else if (m < 0.55 && p->L == p->S) {
        p->mask_kind = ATT_MASK_CAUSAL;
    }
    if (unif(&s) < 0.2) {
        p->key_padding_mask = c->pad;
        for (int i = 0; i < p->N * p->S; i++)
            c->pad[i] = unif(&s) < 0.3;
    }
    p->weights_mode = (int)(unif(&s) * 3);
    p->positional_encoding = unif(&s) < 0.3;
}

/* ------------------------------------------------------------------------ */
/* The float64 side, with error bounds                                      */

/* Is x (with error bound e) out of range, in range, or too close to tell? */
static int classify(double x, double e)
{
    const double a = fabs(x);
    if (a - e > FLT_MAX)
        return 1;
    if (a + e <= FLT_MAX)
        return 0;
    return -1;
}

/* Fold one value's verdict into the case's: 1 wins over -1 wins over 0;
 * returns 1 when the computation cannot go on (out of range). */
static int fold(struct pref *r, int v)
{
    if (v == 1 || (v == -1 && r->verdict == 0))
        r->verdict = v;
    return v == 1;
}

/* y (M, O) = x (M, K)·Wᵀ + b, with ye the error bound, from inputs x with
 * error bound xe (NULL: exact). W NULL = identity. */
static void lin(double *y, double *ye, const double *x, const double *xe, const float *W,
                const float *b, int M, int K, int O)
{
    for (int m = 0; m < M; m++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0.0, abs_sum = b ? fabs(b[o]) : 0.0, inh = 0.0;
            for (int k = 0; k < K; k++) {
                const double w = W ? W[(size_t)o * K + k] : (k == o);
                if (w == 0.0)
                    continue;
                const double t = x[(size_t)m * K + k] * w;
                s += t, abs_sum += fabs(t);
                if (xe)
                    inh += xe[(size_t)m * K + k] * fabs(w);
            }
            y[(size_t)m * O + o] = s;
            ye[(size_t)m * O + o] = inh + U * abs_sum + (K + 1) * TINY;
        }
}

static int blocked_at(const struct att_params *p, int n, int h, int i, int j, float *fm)
{
    *fm = 0.0f;
    if (p->key_padding_mask && p->key_padding_mask[n * p->S + j])
        return 1;
    const int plane = p->mask_ndim == 3 ? n * p->H + h : 0;
    const int at = (plane * p->L + i) * p->S + j;
    if (p->mask_kind == ATT_MASK_CAUSAL)
        return j > i;
    if (p->mask_kind == ATT_MASK_BOOL)
        return p->bool_mask[at] != 0;
    if (p->mask_kind == ATT_MASK_FLOAT) {
        *fm = p->float_mask[at];
        return *fm == -INFINITY;
    }
    return 0;
}

static void reference(struct pref *r, const struct att_params *p)
{
    enum { ME = MAXN * MAXT * MAXE };
    const int N = p->N, L = p->L, S = p->S, E = p->E, H = p->H, d = E / H;
    double xin[3][ME], q[ME], qe[ME], k[ME], ke[ME], v[ME], ve[ME], c[ME] = {0}, ce[ME] = {0};
    const float *src[3] = {p->query, p->key, p->value};
    const int rows[3] = {N * L, N * S, N * S}, dims[3] = {E, p->kdim, p->vdim};
    memset(r, 0, sizeof *r);
    for (int t = 0; t < 3; t++) {
        float tmp[ME];
        memcpy(tmp, src[t], (size_t)rows[t] * dims[t] * sizeof *tmp);
        if (p->positional_encoding) /* float32 additions, as the service does */
            att_add_positional_encoding(tmp, N, rows[t] / N, dims[t]);
        for (int e = 0; e < rows[t] * dims[t]; e++)
            xin[t][e] = tmp[e];
    }
    const float *Wq = p->w[ATT_W_IN] ? p->w[ATT_W_IN] : p->w[ATT_W_Q];
    const float *Wk = p->w[ATT_W_IN] ? p->w[ATT_W_IN] + E * E : p->w[ATT_W_K];
    const float *Wv = p->w[ATT_W_IN] ? p->w[ATT_W_IN] + 2 * E * E : p->w[ATT_W_V];
    const float *b = p->w[ATT_W_IN_BIAS];
    lin(q, qe, xin[0], NULL, Wq, b, N * L, E, E);
    lin(k, ke, xin[1], NULL, Wk, b ? b + E : NULL, N * S, p->kdim, E);
    lin(v, ve, xin[2], NULL, Wv, b ? b + 2 * E : NULL, N * S, p->vdim, E);
    for (int e = 0; e < N * L * E; e++)
        if (fold(r, classify(q[e], qe[e])))
            return;
    for (int e = 0; e < N * S * E; e++)
        if (fold(r, classify(k[e], ke[e])) || fold(r, classify(v[e], ve[e])))
            return;
    /* q·scale: q / sqrt(d) by default, one more rounding */
    const double sd = (float)sqrt((double)d);
    for (int e = 0; e < N * L * E; e++) {
        const double f = p->has_scale ? p->scale : 1.0 / sd;
        q[e] *= f, qe[e] = qe[e] * f + U * fabs(q[e]) + TINY;
        if (fold(r, classify(q[e], qe[e])))
            return;
    }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < L; i++)
            for (int h = 0; h < H; h++) {
                /* scores of the live (not caller-blocked) keys: raw value
                 * and bound; s[j] is what the softmax sees (-inf: no weight) */
                double raw[MAXT], raw_e[MAXT], s[MAXT], w[MAXT], we[MAXT];
                double mx = -INFINITY, best = -INFINITY, best_e = 0.0, delta = 0.0;
                int live[MAXT], any_live = 0;
                for (int j = 0; j < S; j++) {
                    float fm;
                    live[j] = !blocked_at(p, n, h, i, j, &fm);
                    s[j] = -INFINITY;
                    if (!live[j])
                        continue;
                    any_live = 1;
                    double sum = fm, abs_sum = fabs(fm), inh = 0.0;
                    for (int cc = 0; cc < d; cc++) {
                        const size_t a = ((size_t)n * L + i) * E + h * d + cc;
                        const size_t bb = ((size_t)n * S + j) * E + h * d + cc;
                        sum += q[a] * k[bb], abs_sum += fabs(q[a] * k[bb]);
                        inh += qe[a] * fabs(k[bb]) + fabs(q[a]) * ke[bb] + qe[a] * ke[bb];
                    }
                    raw[j] = sum, raw_e[j] = inh + U * abs_sum + (d + 1) * TINY;
                    if (sum > 0 && fold(r, classify(sum, raw_e[j])))
                        return;
                    if (sum > FLT_MAX)
                        return; /* too close to tell, and no finite answer */
                    if (sum > best)
                        best = sum, best_e = raw_e[j];
                    if (sum >= -FLT_MAX) {
                        s[j] = sum;
                        mx = sum > mx ? sum : mx;
                    }
                }
                /* the row rule: every live score below -FLT_MAX. A live
                 * score within its bound of -FLT_MAX may take weight or not:
                 * then every weight of the row is uncertain (bound 1). */
                int unsure = 0;
                for (int j = 0; j < S; j++)
                    unsure |= live[j] && fabs(raw[j] + FLT_MAX) <= raw_e[j];
                if (any_live && best + best_e < -FLT_MAX) {
                    fold(r, 1);
                    return;
                }
                if (any_live && best - best_e < -FLT_MAX)
                    fold(r, -1);
                /* float32 rounds s - max too: relative 2⁻²⁴ */
                for (int j = 0; j < S; j++)
                    if (s[j] > -INFINITY && raw_e[j] + 0x1p-23 * (mx - s[j]) > delta)
                        delta = raw_e[j] + 0x1p-23 * (mx - s[j]);
                /* log(e^(2Δ) - 1): a weight w may become w·e^(2Δ) */
                const double lgrow = 2 * delta > 30 ? 2 * delta : log(expm1(2 * delta));
                double sum = 0.0;
                for (int j = 0; j < S; j++) {
                    w[j] = s[j] > -INFINITY ? exp(s[j] - mx) : 0.0;
                    sum += w[j];
                }
                for (int j = 0; j < S; j++) {
                    w[j] = sum > 0 ? w[j] / sum : 0.0;
                    if (mx == -INFINITY) /* caller-blocked row: exact zeros */
                        we[j] = 0.0;
                    else if (unsure)
                        we[j] = 1.0;
                    else if (s[j] == -INFINITY) /* no weight, as in float32 */
                        we[j] = 0.0;
                    else /* in log space: w itself may have underflowed */
                        we[j] = exp(s[j] - mx - log(sum) + lgrow) + 1e-6 * w[j] + 0x1p-149;
                    we[j] = we[j] > 1.0 ? 1.0 : we[j];
                    if (p->weights_mode == ATT_WEIGHTS_PER_HEAD) {
                        const size_t at = (((size_t)n * H + h) * L + i) * S + j;
                        r->w[at] = w[j], r->w_err[at] = we[j];
                    } else if (p->weights_mode == ATT_WEIGHTS_AVERAGE) {
                        const size_t at = ((size_t)n * L + i) * S + j;
                        r->w[at] += w[j] / H, r->w_err[at] += we[j] / H + 1e-7;
                    }
                }
                for (int cc = 0; cc < d; cc++) {
                    double acc = 0.0, abs_sum = 0.0, inh = 0.0;
                    for (int j = 0; j < S; j++) {
                        const size_t bb = ((size_t)n * S + j) * E + h * d + cc;
                        acc += w[j] * v[bb], abs_sum += fabs(w[j] * v[bb]);
                        inh += we[j] * fabs(v[bb]) + w[j] * ve[bb] + we[j] * ve[bb];
                    }
                    const size_t a = ((size_t)n * L + i) * E + h * d + cc;
                    c[a] = acc, ce[a] = inh + U * abs_sum + (S + 1) * TINY;
                    if (fold(r, classify(acc, ce[a])))
                        return;
                }
            }
    double out[ME], oe[ME];
    lin(out, oe, c, ce, p->w[ATT_W_OUT], p->w[ATT_W_OUT_BIAS], N * L, E, E);
    for (int e = 0; e < N * L * E; e++) {
        if (fold(r, classify(out[e], oe[e])))
            return;
        r->out[e] = out[e], r->out_err[e] = oe[e];
    }
}

/* ------------------------------------------------------------------------ */

static void print_tensor(const char *name, const float *x, int n)
{
    fprintf(stderr, "  %s:", name);
    for (int i = 0; i < n; i++)
        fprintf(stderr, " %.9g", (double)x[i]);
    fprintf(stderr, "\n");
}

/* The request of a failing case, so it can be replayed. */
static void print_case(const struct pcase *c)
{
    const struct att_params *p = &c->p;
    fprintf(stderr, "  N %d L %d S %d E %d kdim %d vdim %d H %d scale %s%.9g mask %d/%d "
            "padding %d weights %d pe %d\n", p->N, p->L, p->S, p->E, p->kdim, p->vdim, p->H,
            p->has_scale ? "" : "default ", p->has_scale ? (double)p->scale : 0.0,
            p->mask_kind, p->mask_ndim, p->key_padding_mask != NULL, p->weights_mode,
            p->positional_encoding);
    print_tensor("query", p->query, p->N * p->L * p->E);
    print_tensor("key", p->key, p->N * p->S * p->kdim);
    print_tensor("value", p->value, p->N * p->S * p->vdim);
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        if (p->w[i])
            print_tensor(att_weight_name((enum att_weight)i), p->w[i], (int)p->w_len[i]);
    if (p->float_mask)
        print_tensor("float mask", p->float_mask,
                     (p->mask_ndim == 3 ? p->N * p->H : 1) * p->L * p->S);
    if (p->bool_mask || p->key_padding_mask)
        fprintf(stderr, "  (bool masks not printed)\n");
}

/* got within max(atol + rtol·|want|, err) of want, elementwise; prints the
 * first miss. */
static int within(const char *what, unsigned long long seed, const float *got,
                  const double *want, const double *err, size_t n, double atol, double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * fabs(want[i]);
        if (err[i] > tol)
            tol = err[i];
        if (!(fabs((double)got[i] - want[i]) <= tol)) {
            fprintf(stderr, "seed %llu: %s[%zu] = %.9g, float64 %.9g, tolerance %.3g\n", seed,
                    what, i, (double)got[i], want[i], tol);
            return 0;
        }
    }
    return 1;
}

#ifndef NCASES
#define NCASES 100000 /* more: -DNCASES=... for a longer search (3 000 000 passed) */
#endif

Test(numerics, log_uniform_magnitudes_answer_float64_or_the_range_rule, .timeout = 120)
{
    static struct pcase c;
    static struct pref r;
    static float out[MAXN * MAXT * MAXE], w[MAXN * MAXE * MAXT * MAXT];
    int ok = 0, range = 0, close = 0, fails = 0;
    att_init(1);
    for (unsigned long long seed = 1; seed <= NCASES && fails < 10; seed++) {
        const int fails_before = fails;
        make_pcase(&c, seed);
        size_t olen, wlen;
        struct att_error err;
        cr_assert_eq(att_check(&c.p, &olen, &wlen, &err), ATT_OK, "seed %llu: %s", seed, err.msg);
        reference(&r, &c.p);
        for (int impl = 0; impl < 2; impl++) {
            const char *name = impl ? "reference" : "fast";
            const int rc = impl ? att_forward_ref(out, w, &c.p, &err)
                                : att_forward(out, w, &c.p, &err);
            if (rc != ATT_OK && rc != ATT_ERANGE) {
                fprintf(stderr, "seed %llu (%s): status %d: %s\n", seed, name, rc, err.msg);
                fails++;
                continue;
            }
            if (r.verdict == -1) { /* either answer, but never NaN or inf */
                if (rc == ATT_OK) {
                    for (size_t i = 0; i < olen; i++)
                        fails += !isfinite(out[i]);
                    for (size_t i = 0; i < wlen; i++)
                        fails += !(w[i] >= 0.0f && w[i] <= 1.0f);
                }
                continue;
            }
            if ((rc == ATT_ERANGE) != (r.verdict == 1)) {
                fprintf(stderr, "seed %llu (%s): %s, the rule says %s\n", seed, name,
                        rc == ATT_OK ? "answered" : err.msg,
                        r.verdict ? "out of range" : "in range");
                fails++;
                continue;
            }
            if (rc == ATT_OK) {
                fails += !within(impl ? "reference output" : "fast output", seed, out, r.out,
                                 r.out_err, olen, 1e-4, 1e-4);
                fails += !within(impl ? "reference weights" : "fast weights", seed, w, r.w,
                                 r.w_err, wlen, 1e-5, 0.0);
            }
        }
        if (fails != fails_before)
            print_case(&c);
        ok += r.verdict == 0, range += r.verdict == 1, close += r.verdict == -1;
    }
    fprintf(stderr, "numerics: %d cases: %d answered, %d out of range, %d too close to "
            "tell\n", ok + range + close, ok, range, close);
    cr_assert_eq(fails, 0, "%d mismatches (first ones above)", fails);
    /* the draw must exercise both sides of the rule */
    cr_assert_gt(ok, NCASES / 10, "only %d cases answered", ok);
    cr_assert_gt(range, NCASES / 10, "only %d cases out of range", range);
}
