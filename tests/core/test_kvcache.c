/* test_kvcache.c -- a sequence's cache (core/kvcache.h) stepped in random
 * chunks: every step's answer against att_forward() of the stateless
 * request it stands for (key/value = every row so far, query positions
 * len + S - L + i, causal lower-right), for the three cache types and the
 * variants; error steps leave the cache as it was; memory grows by blocks;
 * the FP16/BF16 rounding. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "core/kvattend.h"
#include "core/kvcache.h"
#include "core/variants.h"
#include "tests/support/check.h"

/* One model of the tests: sizes, weights, variants. */
struct kv_model {
    int E, kdim, vdim, H, Hkv, d;
    int proj_kv;      /* k and v projected (else identity: kdim = vdim = Hkv·d) */
    int rope;         /* enum att_rope_style */
    int window;       /* window_left, or -1 for none */
    int alibi, softcap;
    int weights_mode, top_k, pool;
    int causal;       /* 0: no mask (every cached key), else ATT_MASK_CAUSAL */
    float *wq, *wk, *wv, *wo, *bias, *bo, slopes[16];
};

static float *rnd(unsigned long long *st, size_t n, float scale)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = check_randf(st) * scale;
    return x;
}

static void model_init(struct kv_model *m, unsigned long long *st)
{
    const int Dq = m->H * m->d, Dkv = m->Hkv * m->d;
    if (!m->proj_kv)
        m->kdim = m->vdim = Dkv;
    m->wq = rnd(st, (size_t)Dq * m->E, 0.4f);
    m->wk = m->proj_kv ? rnd(st, (size_t)Dkv * m->kdim, 0.4f) : NULL;
    m->wv = m->proj_kv ? rnd(st, (size_t)Dkv * m->vdim, 0.4f) : NULL;
    m->wo = rnd(st, (size_t)m->E * Dq, 0.3f);
    m->bias = m->proj_kv ? rnd(st, (size_t)Dq + 2 * Dkv, 0.1f) : NULL;
    m->bo = rnd(st, (size_t)m->E, 0.1f);
    att_alibi_slopes(m->slopes, m->H);
}

static void model_free(struct kv_model *m)
{
    free(m->wq), free(m->wk), free(m->wv), free(m->wo), free(m->bias), free(m->bo);
}

/* p for L query rows over S key rows with m's weights and variants. */
static void model_params(struct att_params *p, const struct kv_model *m, int L, int S,
                         const float *q, const float *k, const float *v)
{
    const int Dq = m->H * m->d, Dkv = m->Hkv * m->d;
    att_params_init(p);
    p->N = 1, p->L = L, p->S = S, p->E = m->E, p->kdim = m->kdim, p->vdim = m->vdim;
    p->H = m->H, p->Hkv = m->Hkv, p->head_dim = m->d;
    p->query = q, p->key = k, p->value = v;
    p->w[ATT_W_Q] = m->wq, p->w_len[ATT_W_Q] = (size_t)Dq * m->E;
    if (m->proj_kv) {
        p->w[ATT_W_K] = m->wk, p->w_len[ATT_W_K] = (size_t)Dkv * m->kdim;
        p->w[ATT_W_V] = m->wv, p->w_len[ATT_W_V] = (size_t)Dkv * m->vdim;
        p->w[ATT_W_IN_BIAS] = m->bias, p->w_len[ATT_W_IN_BIAS] = (size_t)Dq + 2 * Dkv;
    }
    p->w[ATT_W_OUT] = m->wo, p->w_len[ATT_W_OUT] = (size_t)m->E * Dq;
    p->w[ATT_W_OUT_BIAS] = m->bo, p->w_len[ATT_W_OUT_BIAS] = (size_t)m->E;
    p->rope_style = m->rope;
    if (m->window >= 0)
        p->has_window = 1, p->window_left = m->window, p->window_right = -1;
    if (m->alibi)
        p->alibi_slopes = m->slopes;
    if (m->softcap)
        p->softcap = 2.0f;
    p->mask_kind = m->causal;
    p->weights_mode = m->weights_mode;
    p->weights_top_k = m->top_k, p->weights_pool = m->pool;
}

/* x rounded to the cache's type, as a reference independent of
 * kvblocks.h: the compiler's _Float16, BF16 as 8 significant bits. */
static float round_to(float x, int dtype)
{
    if (dtype == ATT_KV_F16)
        return (float)(_Float16)x;
    if (dtype == ATT_KV_BF16 && fabsf(x) < 0x1p-126f) /* subnormal: multiples of 2^-133 */
        return (float)ldexp(nearbyint(ldexp((double)x, 133)), -133);
    if (dtype == ATT_KV_BF16) {
        int e;
        const double mnt = frexp((double)x, &e);
        return (float)ldexp(nearbyint(mnt * 256.0) / 256.0, e);
    }
    return x;
}

/* Steps of random chunks until `total` tokens; each answer against the
 * stateless request. Returns the number of steps that differ. */
static int run_steps(struct kv_model *m, int dtype, int total, unsigned long long seed)
{
    unsigned long long st = seed;
    model_init(m, &st);
    struct att_kv *c = att_kv_new(m->Hkv, m->d, dtype);
    cr_assert_not_null(c);
    float *K = malloc((size_t)total * m->kdim * sizeof *K);
    float *V = malloc((size_t)total * m->vdim * sizeof *V);
    int len = 0, failed = 0, steps = 0;
    while (len < total) {
        const unsigned long long r = check_xorshift(&st);
        int S = r % 4 == 0 ? 1 + (int)(r / 4 % 300) : r % 4 == 1 ? 1 + (int)(r / 4 % 12) : 1;
        S = S > total - len ? total - len : S;
        int L = r % 3 == 0 ? 1 + (int)(r / 16 % (unsigned)S) : 1 + (int)(r / 64 % 4);
        L = L > S ? S : L;
        float *q = rnd(&st, (size_t)L * m->E, 1.0f);
        float *k = rnd(&st, (size_t)S * m->kdim, 1.0f), *v = rnd(&st, (size_t)S * m->vdim, 1.0f);
        for (size_t x = 0; x < (size_t)S * m->kdim; x++)
            K[(size_t)len * m->kdim + x] = m->proj_kv ? k[x] : round_to(k[x], dtype);
        for (size_t x = 0; x < (size_t)S * m->vdim; x++)
            V[(size_t)len * m->vdim + x] = m->proj_kv ? v[x] : round_to(v[x], dtype);
        struct att_params p, ref;
        model_params(&p, m, L, S, q, k, v);
        model_params(&ref, m, L, len + S, q, K, V);
        ref.query_position_offset = len + S - L;
        if (m->causal)
            ref.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
        size_t on, wn, ron, rwn;
        struct att_error err;
        cr_assert_eq(att_step_check(&p, c, &on, &wn, &err), ATT_OK, "%s", err.msg);
        cr_assert_eq(att_check(&ref, &ron, &rwn, &err), ATT_OK, "%s", err.msg);
        cr_assert(on == ron && wn == rwn, "sizes %zu/%zu, stateless %zu/%zu", on, wn, ron, rwn);
        float *out = malloc(on * sizeof *out), *w = wn ? malloc(wn * sizeof *w) : NULL;
        float *rout = malloc(on * sizeof *out), *rw = wn ? malloc(wn * sizeof *w) : NULL;
        cr_assert_eq(att_step(out, w, &p, c, &err), ATT_OK, "step %d: %s", steps, err.msg);
        cr_assert_eq(att_forward(rout, rw, &ref, &err), ATT_OK, "%s", err.msg);
        char name[96];
        snprintf(name, sizeof name, "step %d (len %d, S %d, L %d) out", steps, len, S, L);
        int ok = check_tensor(name, out, rout, on, OUT_ATOL, OUT_RTOL);
        if (wn && m->top_k) /* the values; indices may swap on near-ties */
            ok &= check_tensor("top-k weights", w, rw, wn / 2, W_ATOL, 0.0);
        else if (wn)
            ok &= check_tensor("weights", w, rw, wn, W_ATOL, 0.0);
        failed += !ok;
        len += S, steps++;
        cr_assert_eq(att_kv_len(c), len);
        free(q), free(k), free(v), free(out), free(w), free(rout), free(rw);
    }
    cr_assert_eq(att_kv_bytes(c), att_kv_bytes_at(c, 0));
    att_kv_free(c);
    free(K), free(V);
    model_free(m);
    return failed;
}

static const struct kv_model models[] = {
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1, .window = -1,
     .causal = ATT_MASK_CAUSAL},
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 1, .d = 6, .proj_kv = 1,
     .rope = ATT_ROPE_HALF, .window = -1, .causal = ATT_MASK_CAUSAL},
    {.E = 32, .kdim = 16, .vdim = 16, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1,
     .rope = ATT_ROPE_INTERLEAVED, .window = 40, .causal = ATT_MASK_CAUSAL},
    {.E = 16, .kdim = 12, .vdim = 12, .H = 8, .Hkv = 2, .d = 4, .proj_kv = 1, .window = 100,
     .alibi = 1, .softcap = 1},
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1,
     .rope = ATT_ROPE_HALF, .window = -1, .causal = ATT_MASK_CAUSAL,
     .weights_mode = ATT_WEIGHTS_PER_HEAD},
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1, .window = 30,
     .alibi = 1, .causal = ATT_MASK_CAUSAL, .weights_mode = ATT_WEIGHTS_AVERAGE},
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1, .window = -1,
     .causal = ATT_MASK_CAUSAL, .weights_mode = ATT_WEIGHTS_PER_HEAD, .top_k = 3},
    {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1, .window = -1,
     .softcap = 1, .causal = ATT_MASK_CAUSAL, .weights_mode = ATT_WEIGHTS_AVERAGE, .pool = 2},
};
#define NMODELS (int)(sizeof models / sizeof models[0])

Test(kvcache, fp32_steps_equal_the_stateless_answer)
{
    int failed = 0;
    for (int i = 0; i < NMODELS; i++) {
        struct kv_model m = models[i];
        const int f = run_steps(&m, ATT_KV_F32, 700, 1000 + (unsigned)i);
        if (f)
            fprintf(stderr, "model %d: %d steps differ\n", i, f);
        failed += f;
    }
    cr_assert_eq(failed, 0);
}

/* FP16 and BF16 with identity key/value projections: the stateless
 * request on the inputs rounded to that type is the reference. */
static void rounded_cases(int dtype)
{
    int failed = 0;
    for (int i = 0; i < NMODELS; i++) {
        struct kv_model m = models[i];
        m.proj_kv = 0, m.rope = ATT_ROPE_NONE;
        failed += run_steps(&m, dtype, 600, 2000 + (unsigned)i);
    }
    cr_assert_eq(failed, 0);
}

Test(kvcache, fp16_steps_equal_the_stateless_answer_on_rounded_keys)
{
    rounded_cases(ATT_KV_F16);
}

Test(kvcache, bf16_steps_equal_the_stateless_answer_on_rounded_keys)
{
    rounded_cases(ATT_KV_BF16);
}

/* Rows x: (n, K) projected by W: (O, K) + b (double), RoPE at positions
 * pos0 + r (rope: nh heads of d, or 0 for none), rounded to dtype: y. */
static void project_ref(float *y, const float *x, int n, int K, const float *W, const float *b,
                        int O, long long pos0, int rope, int nh, int d, int dtype)
{
    double *row = malloc((size_t)O * sizeof *row), cs[64], sn[64];
    for (int r = 0; r < n; r++) {
        for (int o = 0; o < O; o++) {
            double acc = b ? (double)b[o] : 0.0;
            for (int k = 0; k < K; k++)
                acc += (double)W[(size_t)o * K + k] * (double)x[(size_t)r * K + k];
            row[o] = acc;
        }
        if (rope) {
            att_rope_angles(cs, sn, pos0 + r, d, ATT_ROPE_THETA_DEFAULT);
            for (int h = 0; h < nh; h++)
                att_rope_rotate_d(row + (size_t)h * d, cs, sn, d, rope);
        }
        for (int o = 0; o < O; o++)
            y[(size_t)r * O + o] = round_to((float)row[o], dtype);
    }
    free(row);
}

/* FP16/BF16 with projections and RoPE: the reference projects and rotates
 * in double, rounds k and v to the type, and asks the stateless request
 * without projections or RoPE for the context, then projects it out. */
static int run_rounded_projected(int dtype, int total, unsigned long long seed)
{
    struct kv_model m = {.E = 24, .kdim = 20, .vdim = 12, .H = 4, .Hkv = 2, .d = 8, .proj_kv = 1,
                         .rope = ATT_ROPE_HALF, .window = 50, .alibi = 1,
                         .causal = ATT_MASK_CAUSAL};
    unsigned long long st = seed;
    model_init(&m, &st);
    const int Dq = m.H * m.d, Dkv = m.Hkv * m.d;
    struct att_kv *c = att_kv_new(m.Hkv, m.d, dtype);
    float *K = malloc((size_t)total * Dkv * sizeof *K), *V = malloc((size_t)total * Dkv * sizeof *V);
    int len = 0, failed = 0;
    while (len < total) {
        const unsigned long long r = check_xorshift(&st);
        int S = r % 3 == 0 ? 1 + (int)(r / 4 % 200) : 1 + (int)(r / 4 % 3);
        S = S > total - len ? total - len : S;
        const int L = 1 + (int)(r / 1024 % (unsigned)S);
        float *q = rnd(&st, (size_t)L * m.E, 1.0f);
        float *k = rnd(&st, (size_t)S * m.kdim, 1.0f), *v = rnd(&st, (size_t)S * m.vdim, 1.0f);
        project_ref(K + (size_t)len * Dkv, k, S, m.kdim, m.wk, m.bias + Dq, Dkv, len, m.rope,
                    m.Hkv, m.d, dtype);
        project_ref(V + (size_t)len * Dkv, v, S, m.vdim, m.wv, m.bias + Dq + Dkv, Dkv, len, 0, 0,
                    m.d, dtype);
        float *qp = malloc((size_t)L * Dq * sizeof *qp), *ctx = malloc((size_t)L * Dq * sizeof *ctx);
        project_ref(qp, q, L, m.E, m.wq, NULL, Dq, len + S - L, m.rope, m.H, m.d, ATT_KV_F32);
        struct att_params p, ref;
        model_params(&p, &m, L, S, q, k, v);
        p.w[ATT_W_IN_BIAS] = NULL, p.w_len[ATT_W_IN_BIAS] = 0; /* q has none here; k, v theirs: */
        float *bias = calloc((size_t)Dq + 2 * Dkv, sizeof *bias);
        memcpy(bias + Dq, m.bias + Dq, 2 * (size_t)Dkv * sizeof *bias);
        p.w[ATT_W_IN_BIAS] = bias, p.w_len[ATT_W_IN_BIAS] = (size_t)Dq + 2 * Dkv;
        att_params_init(&ref);
        ref.N = 1, ref.L = L, ref.S = len + S, ref.E = Dq, ref.kdim = ref.vdim = Dkv;
        ref.H = m.H, ref.Hkv = m.Hkv, ref.head_dim = m.d;
        ref.query = qp, ref.key = K, ref.value = V;
        ref.query_position_offset = len + S - L, ref.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
        ref.has_window = 1, ref.window_left = m.window, ref.window_right = -1;
        ref.alibi_slopes = m.slopes;
        float *out = malloc((size_t)L * m.E * sizeof *out), *want = malloc((size_t)L * m.E * sizeof *want);
        struct att_error err;
        cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_OK, "%s", err.msg);
        cr_assert_eq(att_forward(ctx, NULL, &ref, &err), ATT_OK, "%s", err.msg);
        for (int i = 0; i < L; i++)
            for (int e = 0; e < m.E; e++) {
                double acc = m.bo[e];
                for (int x = 0; x < Dq; x++)
                    acc += (double)m.wo[(size_t)e * Dq + x] * (double)ctx[(size_t)i * Dq + x];
                want[(size_t)i * m.E + e] = (float)acc;
            }
        failed += !check_tensor("rounded, projected", out, want, (size_t)L * m.E, OUT_ATOL, OUT_RTOL);
        len += S;
        free(q), free(k), free(v), free(qp), free(ctx), free(bias), free(out), free(want);
    }
    att_kv_free(c);
    free(K), free(V);
    model_free(&m);
    return failed;
}

Test(kvcache, fp16_bf16_round_after_projection_and_rope)
{
    cr_assert_eq(run_rounded_projected(ATT_KV_F16, 700, 11), 0);
    cr_assert_eq(run_rounded_projected(ATT_KV_BF16, 700, 12), 0);
}

/* The cache kernel split over threads (flash decoding) on a long cache,
 * Llama's grouping (8 query heads of 2 KV heads), one token at a time. */
Test(kvcache, decode_split_over_threads_equals_the_stateless_answer)
{
    att_init(2);
    struct kv_model m = {.E = 64, .kdim = 16, .vdim = 16, .H = 8, .Hkv = 2, .d = 32, .window = -1,
                         .rope = ATT_ROPE_HALF, .causal = ATT_MASK_CAUSAL};
    for (int dt = ATT_KV_F32; dt <= ATT_KV_BF16; dt++) {
        m.proj_kv = dt == ATT_KV_F32;
        if (!m.proj_kv)
            m.rope = ATT_ROPE_NONE;
        cr_assert_eq(run_steps(&m, dt, 3000, 77 + (unsigned)dt), 0, "dtype %d", dt);
    }
}

/* ---------------------------------------------------------------------- */
/* Errors leave the cache as it was                                          */

static void fill(float *x, size_t n, unsigned long long *st)
{
    for (size_t i = 0; i < n; i++)
        x[i] = check_randf(st);
}

Test(kvcache, an_error_step_appends_nothing)
{
    unsigned long long st = 5;
    struct att_kv *c = att_kv_new(2, 4, ATT_KV_F16);
    float q[4 * 8], k[4 * 8], v[4 * 8], out[4 * 8];
    fill(q, 32, &st), fill(k, 32, &st), fill(v, 32, &st);
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = 1, p.S = 3, p.E = 8, p.kdim = 8, p.vdim = 8, p.H = 2, p.Hkv = 2;
    p.query = q, p.key = k, p.value = v, p.mask_kind = ATT_MASK_CAUSAL;
    struct att_error err;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_OK, "%s", err.msg);
    const size_t bytes = att_kv_bytes(c);
    cr_assert_eq(att_kv_len(c), 3);

    /* a key beyond FP16's range, in the second row */
    k[8 + 5] = 70000.0f;
    p.S = 2;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ERANGE);
    cr_assert(strstr(err.msg, "key row 1 (position 4)") && strstr(err.msg, "FP16"),
              "%s", err.msg);
    cr_assert_eq(att_kv_len(c), 3);
    k[8 + 5] = 65504.0f; /* the largest FP16 is fine */
    cr_assert_eq(att_step_check(&p, c, NULL, NULL, &err), ATT_OK, "%s", err.msg);
    k[8 + 5] = 0.5f;
    v[3] = -1e6f;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ERANGE);
    cr_assert(strstr(err.msg, "value row 0 (position 3)"), "%s", err.msg);
    v[3] = 0.5f;

    /* shapes: S < L, N != 1, an offset, a mask of the wrong width */
    p.L = 3;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ESHAPE);
    p.L = 1, p.N = 2;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_EPARAM);
    p.N = 1, p.query_position_offset = 2;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_EPARAM);
    p.query_position_offset = 0;
    uint8_t mask[8] = {0};
    p.mask_kind = ATT_MASK_BOOL, p.bool_mask = mask, p.mask_ndim = 2;
    p.mask_shape[0] = 1, p.mask_shape[1] = 2; /* the step's S, not the cache's 5 */
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ESHAPE, "%s", err.msg);
    p.mask_shape[1] = 5;
    mask[4] = 1;
    /* a query projection beyond float32 */
    const float big = q[0];
    q[0] = 3e38f, q[1] = 3e38f;
    float wq[8 * 8] = {0};
    for (int i = 0; i < 8; i++)
        wq[i * 8 + 0] = 2.0f, wq[i * 8 + 1] = 2.0f;
    p.w[ATT_W_Q] = wq, p.w_len[ATT_W_Q] = 64;
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ERANGE);
    cr_assert_eq(att_kv_len(c), 3);
    cr_assert_eq(att_kv_bytes(c), bytes);
    q[0] = big, p.w[ATT_W_Q] = NULL, p.w_len[ATT_W_Q] = 0;
    /* the cache still answers as the stateless request on its 3 + 2 rows */
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_kv_len(c), 5);
    /* a set cancel flag (blas.h): refused at begin, and at finish, the cache as it was */
    volatile int flag = 1;
    p.mask_kind = ATT_MASK_NONE;
    att_cancel_set(&flag);
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_ECANCELLED);
    flag = 0;
    struct att_step *s;
    cr_assert_eq(att_step_begin(&s, &p, c, &err), ATT_OK, "%s", err.msg);
    flag = 1;
    cr_assert_eq(att_step_finish(out, NULL, s, c, &err), ATT_ECANCELLED);
    att_cancel_set(NULL);
    cr_assert_eq(att_kv_len(c), 5);
    cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_kv_len(c), 7);
    att_kv_free(c);
}

/* Blocks of whole 2 MiB pages are mapped on their own (kvcache.c,
 * block_alloc): Hkv 8, d 128 in FP32 is 256 · 1024 · 2 · 4 bytes = 2 MiB a
 * block; steps over three of them equal the stateless answers. */
Test(kvcache, huge_page_blocks_hold_the_rows)
{
    struct kv_model m = {.E = 256, .kdim = 64, .vdim = 64, .H = 8, .Hkv = 8, .d = 128,
                         .proj_kv = 1, .window = -1, .causal = ATT_MASK_CAUSAL};
    struct att_kv *c = att_kv_new(m.Hkv, m.d, ATT_KV_F32);
    cr_assert_eq(att_kv_bytes_at(c, 1), (size_t)2 << 20);
    att_kv_free(c);
    cr_assert_eq(run_steps(&m, ATT_KV_F32, 600, 77), 0);
}

/* ---------------------------------------------------------------------- */
/* Memory and rounding                                                       */

Test(kvcache, memory_grows_by_blocks)
{
    struct att_kv *c = att_kv_new(2, 4, ATT_KV_BF16);
    const size_t block = (size_t)2 * 2 * ATT_KV_BLOCK * 4 * 2;
    cr_assert_eq(att_kv_bytes(c), 0);
    cr_assert_eq(att_kv_bytes_at(c, 1), block);
    cr_assert_eq(att_kv_bytes_at(c, ATT_KV_BLOCK), block);
    cr_assert_eq(att_kv_bytes_at(c, ATT_KV_BLOCK + 1), 2 * block);
    static float q[8 * 300], k[8 * 300];
    unsigned long long st = 9;
    fill(q, 8 * 300, &st), fill(k, 8 * 300, &st);
    static float out[8 * 300];
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.E = 8, p.kdim = 8, p.vdim = 8, p.H = 2, p.Hkv = 2;
    p.query = q, p.key = k, p.value = k, p.mask_kind = ATT_MASK_CAUSAL;
    const int steps[] = {1, 255, 1, 299};
    long long len = 0;
    for (int i = 0; i < 4; i++) {
        p.L = p.S = steps[i];
        struct att_error err;
        cr_assert_eq(att_step(out, NULL, &p, c, &err), ATT_OK, "%s", err.msg);
        len += steps[i];
        cr_assert_eq(att_kv_bytes(c), block * (size_t)((len + ATT_KV_BLOCK - 1) / ATT_KV_BLOCK),
                     "%lld tokens: %zu bytes", len, att_kv_bytes(c));
    }
    att_kv_free(c);
}

Test(kvcache, conversions_round_to_nearest_even)
{
    unsigned long long st = 3;
    for (int i = 0; i < 200000; i++) {
        const uint32_t b = (uint32_t)check_xorshift(&st);
        float x = check_bits_float(b);
        if (!isfinite(x))
            continue;
        if (i % 2) /* also the FP16 range, subnormals included */
            x = ldexpf(check_randf(&st), (int)(check_xorshift(&st) % 44) - 28);
        const uint16_t h = att_f32_to_f16(x), bf = att_f32_to_bf16(x);
        float fh, fb;
        att_kv_to_f32(&fh, &h, 1, ATT_KV_F16);
        att_kv_to_f32(&fb, &bf, 1, ATT_KV_BF16);
        const float wh = round_to(x, ATT_KV_F16), wb = round_to(x, ATT_KV_BF16);
        cr_assert(fh == wh || (isinf(fh) && isinf(wh) && fh == wh), "FP16 of %a: %a, want %a",
                  (double)x, (double)fh, (double)wh);
        cr_assert(fb == wb || (isinf(fb) && fabsf(x) > 3.38e38f), "BF16 of %a: %a, want %a",
                  (double)x, (double)fb, (double)wb);
    }
    /* ties: 1 + 2^-11 is halfway between 1 and 1 + 2^-10: to even, 1 */
    cr_assert_eq(att_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    cr_assert_eq(att_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    cr_assert_eq(att_f32_to_f16(65519.0f), 0x7bff);
    cr_assert_eq(att_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(att_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
}

/* A step rolled back (a batch's other item failed): the cache is as before,
 * its blocks freed, and the next step answers as on a cache that never had
 * it. */
Test(kvcache, rollback_to_a_mark)
{
    struct att_kv *a = att_kv_new(2, 4, ATT_KV_F16), *b = att_kv_new(2, 4, ATT_KV_F16);
    static float x[8 * 300], out_a[8], out_b[8], scratch[8 * 300];
    unsigned long long st = 21;
    fill(x, 8 * 300, &st);
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.E = 8, p.kdim = 8, p.vdim = 8, p.H = 2, p.Hkv = 2;
    p.query = p.key = p.value = x, p.mask_kind = ATT_MASK_CAUSAL;
    struct att_error err;
    p.L = p.S = 5;
    cr_assert_eq(att_step(scratch, NULL, &p, a, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_step(scratch, NULL, &p, b, &err), ATT_OK, "%s", err.msg);
    const size_t bytes = att_kv_bytes(a);
    const struct att_kv_mark m = att_kv_mark(a);
    p.query = p.key = p.value = x + 8 * 5, p.L = p.S = 290; /* into a second block */
    cr_assert_eq(att_step(scratch, NULL, &p, a, &err), ATT_OK, "%s", err.msg);
    cr_assert_gt(att_kv_bytes(a), bytes);
    att_kv_rollback(a, m);
    cr_assert_eq(att_kv_len(a), 5);
    cr_assert_eq(att_kv_bytes(a), bytes);
    p.query = p.key = p.value = x + 8 * 295, p.L = p.S = 1;
    cr_assert_eq(att_step(out_a, NULL, &p, a, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_step(out_b, NULL, &p, b, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(memcmp(out_a, out_b, sizeof out_a), 0, "the rolled-back rows still count");
    att_kv_free(a), att_kv_free(b);
}
