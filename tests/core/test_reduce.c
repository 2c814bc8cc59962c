/* test_reduce.c -- the reduced weights (attention.h: weights_top_k,
 * weights_pool) against the full weights of the same call: random shapes,
 * masks, heads averaged or not, ties; the fast kernel and the reference.
 * The expected reductions are computed here from the full weights with
 * plain loops, independently of core/reduce.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"

/* Pooled means: both sides sum in double and round once, so they differ
 * by at most one float32 rounding of the mean (2^-23 relative), which is
 * the tolerance, with a floor for means near 0. */
#define POOL_RTOL 2.4e-7
#define POOL_ATOL 1e-30

enum rmask { RM_NONE, RM_CAUSAL, RM_LOWER_RIGHT, RM_PAD, RM_FLOAT_INF, RM_WINDOW, RM_COUNT };

struct rin {
    float *q, *k, *v, *w_in, *wo, *fmask;
    uint8_t *pad;
};

static void rin_free(struct rin *r)
{
    free(r->q), free(r->k), free(r->v), free(r->w_in), free(r->wo), free(r->fmask), free(r->pad);
}

/* Random inputs for (N, L, S, H, d = 3) with mask m; scores of O(1). */
static void rin_make(struct att_params *p, struct rin *r, int N, int L, int S, int H, int m,
                     unsigned long long *st)
{
    const int E = 3 * H;
    memset(r, 0, sizeof *r);
    att_params_init(p);
    p->N = N, p->L = L, p->S = S, p->E = p->kdim = p->vdim = E, p->H = H;
    r->q = check_randv((size_t)N * L * E, 1.0f, st);
    r->k = check_randv((size_t)N * S * E, 1.0f, st);
    r->v = check_randv((size_t)N * S * E, 1.0f, st);
    r->w_in = check_randv((size_t)3 * E * E, 1.0f, st);
    r->wo = check_randv((size_t)E * E, 0.5f, st);
    cr_assert(r->q && r->k && r->v && r->w_in && r->wo);
    p->query = r->q, p->key = r->k, p->value = r->v;
    p->w[ATT_W_IN] = r->w_in, p->w[ATT_W_OUT] = r->wo;
    p->w_len[ATT_W_IN] = (size_t)3 * E * E, p->w_len[ATT_W_OUT] = (size_t)E * E;
    switch (m) {
    case RM_CAUSAL:
        p->mask_kind = ATT_MASK_CAUSAL;
        break;
    case RM_LOWER_RIGHT:
        p->mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
        break;
    case RM_PAD: /* every other batch item's last third padded */
        r->pad = calloc((size_t)N * S, 1);
        cr_assert(r->pad);
        for (int n = 0; n < N; n += 2)
            for (int j = S - S / 3; j < S; j++)
                r->pad[(size_t)n * S + j] = 1;
        p->key_padding_mask = r->pad;
        break;
    case RM_FLOAT_INF: /* about a quarter of the keys at -inf, the rest small biases */
        r->fmask = check_randv((size_t)L * S, 0.5f, st);
        cr_assert(r->fmask);
        for (size_t x = 0; x < (size_t)L * S; x++)
            if (r->fmask[x] > 0.25f)
                r->fmask[x] = -INFINITY;
        p->mask_kind = ATT_MASK_FLOAT, p->float_mask = r->fmask;
        p->mask_ndim = 2, p->mask_shape[0] = L, p->mask_shape[1] = S;
        break;
    case RM_WINDOW:
        p->has_window = 1, p->window_left = 3, p->window_right = 1;
        break;
    default:
        break;
    }
}

/* p0 twice: with full weights, and reduced (top-k k or pool pl); both
 * checked, with their output and weights sizes. */
struct twin {
    struct att_params full, red;
    size_t ol, fl, rl;
};

static void twin_init(struct twin *x, const struct att_params *p0, int k, int pl)
{
    struct att_error err;
    x->full = *p0, x->red = *p0;
    x->red.weights_top_k = k, x->red.weights_pool = pl;
    cr_assert_eq(att_check(&x->full, &x->ol, &x->fl, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_check(&x->red, &x->ol, &x->rl, &err), ATT_OK, "%s", err.msg);
}

/* Top-k of p's call against its full weights (fast kernel, or reference).
 * Returns the number of mismatching rows. */
static int topk_vs_full(const struct att_params *p0, int k,
                        int (*fwd)(float *, float *, const struct att_params *, struct att_error *))
{
    struct twin x;
    twin_init(&x, p0, k, 0);
    const size_t ol = x.ol, fl = x.fl, rl = x.rl;
    struct att_error err;
    const int S = p0->S, kk = k < S ? k : S;
    const size_t rows = fl / (size_t)S;
    cr_assert_eq(rl, 2 * rows * kk, "weights_len %zu for %zu rows of k %d", rl, rows, kk);
    float *o1 = malloc(ol * sizeof *o1), *o2 = malloc(ol * sizeof *o2);
    float *wf = malloc(fl * sizeof *wf), *wr = malloc(rl * sizeof *wr);
    float *ev = malloc(rows * kk * sizeof *ev);
    int *ei = malloc(rows * kk * sizeof *ei);
    cr_assert(o1 && o2 && wf && wr && ev && ei);
    cr_assert_eq(fwd(o1, wf, &x.full, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(fwd(o2, wr, &x.red, &err), ATT_OK, "%s", err.msg);
    const int32_t *gi = (const int32_t *)(wr + rows * kk);
    int bad = 0;
    for (size_t r = 0; r < rows; r++) {
        check_topk_row(ev + r * kk, ei + r * kk, wf + r * S, S, kk);
        const int vbad = memcmp(ev + r * kk, wr + r * kk, (size_t)kk * sizeof *ev) != 0;
        int ibad = 0;
        for (int s = 0; s < kk; s++)
            ibad |= ei[r * kk + s] != gi[r * kk + s];
        if ((vbad || ibad) && bad++ < 3)
            fprintf(stderr, "top-k row %zu (S %d, k %d): got [%g @%d, ...], want [%g @%d, ...]%s\n",
                    r, S, kk, (double)wr[r * kk], gi[r * kk], (double)ev[r * kk], ei[r * kk],
                    vbad ? " (values)" : " (indices)");
    }
    cr_assert(check_tensor("output", o2, o1, ol, 1e-5, 1e-5));
    free(o1), free(o2), free(wf), free(wr), free(ev), free(ei);
    return bad;
}

/* Pooled weights of p's call against the means of its full weights.
 * Returns 1 when they agree. */
static int pool_vs_full(const struct att_params *p0, int pl,
                        int (*fwd)(float *, float *, const struct att_params *, struct att_error *))
{
    struct twin x;
    twin_init(&x, p0, 0, pl);
    const size_t ol = x.ol, fl = x.fl, rl = x.rl;
    struct att_error err;
    const int L = p0->L, S = p0->S, LT = (L + pl - 1) / pl, ST = (S + pl - 1) / pl;
    const size_t planes = fl / ((size_t)L * S);
    cr_assert_eq(rl, planes * LT * ST);
    float *o = malloc(ol * sizeof *o), *wf = malloc(fl * sizeof *wf);
    float *wr = malloc(rl * sizeof *wr), *want = malloc(rl * sizeof *want);
    cr_assert(o && wf && wr && want);
    cr_assert_eq(fwd(o, wf, &x.full, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(fwd(o, wr, &x.red, &err), ATT_OK, "%s", err.msg);
    check_pool(want, wf, planes, L, S, pl);
    const int ok = check_tensor("pooled", wr, want, rl, POOL_ATOL, POOL_RTOL);
    free(o), free(wf), free(wr), free(want);
    return ok;
}

Test(reduce, topk_and_pool_match_full_weights_on_random_cases)
{
    att_init(1);
    unsigned long long st = 0x70b4c0ffeeULL;
    static const int ks[] = {1, 3, 0, 5}; /* 0: S, 5: S + 5 */
    static const int pools[] = {1, 2, 3, 7, 0}; /* 0: larger than L */
    int cases = 0;
    for (int c = 0; c < 48; c++) {
        const int N = 1 + c % 2, H = 1 + (c / 2) % 4, m = c % RM_COUNT;
        const int L = 1 + (int)((check_randf(&st) + 1.0f) * 35.0f);
        const int S = 1 + (int)((check_randf(&st) + 1.0f) * 35.0f);
        struct att_params p;
        struct rin in;
        rin_make(&p, &in, N, L, S, H, m, &st);
        for (int avg = 0; avg < 2; avg++) {
            p.weights_mode = avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
            for (int x = 0; x < 4; x++) {
                const int k = x == 2 ? S : x == 3 ? S + 5 : ks[x];
                cr_assert_eq(topk_vs_full(&p, k, att_forward), 0,
                             "case %d: N %d H %d L %d S %d mask %d avg %d k %d", c, N, H, L, S,
                             m, avg, k);
            }
            for (int x = 0; x < 5; x++) {
                const int pl = pools[x] ? pools[x] : L + 1 + c % 3;
                cr_assert(pool_vs_full(&p, pl, att_forward),
                          "case %d: N %d H %d L %d S %d mask %d avg %d pool %d", c, N, H, L, S,
                          m, avg, pl);
            }
            cases++;
        }
        rin_free(&in);
    }
    cr_assert_eq(cases, 96);
}

Test(reduce, reference_reduces_its_own_full_weights)
{
    unsigned long long st = 0x5eedULL;
    for (int m = 0; m < RM_COUNT; m++) {
        struct att_params p;
        struct rin in;
        rin_make(&p, &in, 2, 9, 11, 2, m, &st);
        p.weights_mode = m % 2 ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
        cr_assert_eq(topk_vs_full(&p, 4, att_forward_ref), 0, "mask %d", m);
        cr_assert(pool_vs_full(&p, 4, att_forward_ref), "mask %d", m);
        rin_free(&in);
    }
}

/* Threads and row blocks: the call is split over threads; causal uses
 * bands. At L = S = 600 on 3 threads the full and the reduced weights use
 * the same row blocks (200 rows); at L = 520, S = 2100 on 2 threads the
 * full per-head weights are computed in blocks of 260 rows (one per
 * thread), the reduced ones in blocks of 249 (bounded scratch: 2^19 / S
 * rows), so OpenBLAS sees other matrix sizes: the top-k values must still
 * be the full weights' floats bit for bit. */
Test(reduce, topk_and_pool_match_full_weights_on_threaded_calls)
{
    static const struct { int threads, L, S; } shapes[2] = {{3, 600, 600}, {2, 520, 2100}};
    unsigned long long st = 0xb10cULL;
    for (int sh = 0; sh < 2; sh++) {
        att_init(shapes[sh].threads);
        for (int m = 0; m < 3; m++) {
            struct att_params p;
            struct rin in;
            rin_make(&p, &in, 1, shapes[sh].L, shapes[sh].S, 4,
                     m == 1 ? RM_CAUSAL : m == 2 ? RM_PAD : RM_NONE, &st);
            for (int avg = 0; avg < 2; avg++) {
                p.weights_mode = avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
                cr_assert_eq(topk_vs_full(&p, 8, att_forward), 0, "shape %d mask %d avg %d", sh,
                             m, avg);
                cr_assert(att_last_call_threads() > 1, "the call ran on one thread");
                cr_assert(pool_vs_full(&p, 32, att_forward), "shape %d mask %d avg %d", sh, m,
                          avg);
                cr_assert(pool_vs_full(&p, 7, att_forward), "shape %d mask %d avg %d", sh, m,
                          avg);
            }
            rin_free(&in);
        }
    }
}

Test(reduce, equal_weights_take_the_lower_key_indices_first)
{
    att_init(1);
    /* zero queries: every score is 0, every weight 1/S; padded keys 0 */
    enum { L = 3, S = 7, E = 2 };
    float q[L * E] = {0}, kv[S * E];
    for (int x = 0; x < S * E; x++)
        kv[x] = (float)x * 0.1f;
    uint8_t pad[S] = {0, 1, 0, 0, 1, 0, 0};
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = L, p.S = S, p.E = p.kdim = p.vdim = E, p.H = 1;
    p.query = q, p.key = kv, p.value = kv;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    p.weights_top_k = S + 5;
    float out[L * E], w[2 * L * S];
    struct att_error err;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
    const int32_t *idx = (const int32_t *)(w + L * S);
    for (int i = 0; i < L; i++)
        for (int x = 0; x < S; x++) {
            cr_assert_eq(idx[i * S + x], x, "row %d slot %d: key %d", i, x, idx[i * S + x]);
            cr_assert_eq(w[i * S + x], 1.0f / (float)S);
        }
    p.key_padding_mask = pad; /* the live keys first, then the padded ones, each by index */
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
    const int32_t order[S] = {0, 2, 3, 5, 6, 1, 4};
    for (int x = 0; x < S; x++) {
        cr_assert_eq(idx[x], order[x], "slot %d: key %d, want %d", x, idx[x], order[x]);
        cr_assert_eq(w[x], x < 5 ? 0.2f : 0.0f);
    }
}

Test(reduce, parameters_are_checked)
{
    float x[4] = {0};
    struct att_params p;
    att_params_init(&p);
    p.N = p.L = p.S = 1, p.E = p.kdim = p.vdim = 4, p.H = 1;
    p.query = p.key = p.value = x;
    struct att_error err;
    size_t ol, wl;
    p.weights_top_k = 2; /* without weights */
    cr_assert_eq(att_check(&p, &ol, &wl, &err), ATT_EPARAM);
    cr_assert(strstr(err.msg, "weights_top_k"), "%s", err.msg);
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    p.weights_pool = 2; /* both */
    cr_assert_eq(att_check(&p, &ol, &wl, &err), ATT_EPARAM);
    p.weights_pool = 0, p.weights_top_k = -1;
    cr_assert_eq(att_check(&p, &ol, &wl, &err), ATT_EPARAM);
    p.weights_top_k = 9; /* k > S counts S */
    cr_assert_eq(att_check(&p, &ol, &wl, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(wl, 2);
}
