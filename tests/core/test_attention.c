/* test_attention.c -- the core against its reference, against PyTorch's
 * golden cases, on every error code, and under concurrent calls. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"

/* Tolerances (docs/numerics.md, "Accuracy"): outputs |Δ| ≤ 1e-4·(1 + |ref|), weights
 * 1e-5; against PyTorch, or 4× PyTorch float32's own error if larger. */
#define OUT_ATOL 1e-4
#define OUT_RTOL 1e-4
#define W_ATOL 1e-5

enum proj { PROJ_PACKED, PROJ_SEPARATE, PROJ_ABSENT };
enum mask { M_NONE, M_CAUSAL, M_BOOL2, M_BOOL3, M_FLOAT2, M_FLOAT3 };

struct rcase {
    int N, L, S, E, kdim, vdim, H;
    int proj;        /* enum proj */
    int bias;        /* biases present */
    int mask;        /* enum mask */
    int padding;     /* key_padding_mask present */
    int full_rows;   /* force fully blocked rows */
    int wmode;       /* enum att_weights_mode */
    int scale;       /* custom scale */
    int pe;          /* positional encoding */
    int self;        /* key and value are the query itself (needs L == S) */
};

/* Random inputs for a case, all in one struct so one free releases them. */
struct rinputs {
    float *q, *k, *v, *w_in, *wq, *wk, *wv, *b_in, *wo, *bo, *fmask;
    uint8_t *bmask, *pad;
};

static void rinputs_free(struct rinputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->w_in), free(in->wq);
    free(in->wk), free(in->wv), free(in->b_in), free(in->wo), free(in->bo);
    free(in->fmask), free(in->bmask), free(in->pad);
    memset(in, 0, sizeof *in);
}

/* Fill p and in with random data for case c, seeded by seed. */
static void make_case(struct att_params *p, struct rinputs *in, const struct rcase *c,
                      unsigned long long seed)
{
    unsigned long long st = seed * 2654435761ULL + 88172645463325252ULL;
    memset(in, 0, sizeof *in);
    att_params_init(p);
    p->N = c->N, p->L = c->L, p->S = c->S, p->E = c->E;
    p->kdim = c->kdim, p->vdim = c->vdim, p->H = c->H;
    const size_t E = (size_t)c->E;
    p->query = in->q = check_randv((size_t)c->N * c->L * E, 1.0f, &st);
    p->key = in->k = check_randv((size_t)c->N * c->S * c->kdim, 1.0f, &st);
    p->value = in->v = check_randv((size_t)c->N * c->S * c->vdim, 1.0f, &st);
    if (c->self)
        p->key = p->value = p->query;
    if (c->proj == PROJ_PACKED) {
        p->w[ATT_W_IN] = in->w_in = check_randv(3 * E * E, 1.0f / sqrtf((float)E), &st);
    } else if (c->proj == PROJ_SEPARATE) {
        p->w[ATT_W_Q] = in->wq = check_randv(E * E, 1.0f / sqrtf((float)E), &st);
        p->w[ATT_W_K] = in->wk = check_randv(E * c->kdim, 1.0f / sqrtf((float)c->kdim), &st);
        p->w[ATT_W_V] = in->wv = check_randv(E * c->vdim, 1.0f / sqrtf((float)c->vdim), &st);
    }
    if (c->proj != PROJ_ABSENT)
        p->w[ATT_W_OUT] = in->wo = check_randv(E * E, 1.0f / sqrtf((float)E), &st);
    if (c->bias) {
        p->w[ATT_W_IN_BIAS] = in->b_in = check_randv(3 * E, 0.1f, &st);
        p->w[ATT_W_OUT_BIAS] = in->bo = check_randv(E, 0.1f, &st);
    }
    golden_weight_lens(p);
    const size_t plane = (size_t)c->L * c->S;
    const size_t planes = (c->mask == M_BOOL3 || c->mask == M_FLOAT3) ? (size_t)c->N * c->H : 1;
    p->mask_ndim = planes > 1 ? 3 : 2;
    p->mask_shape[0] = planes > 1 ? c->N * c->H : c->L;
    p->mask_shape[1] = planes > 1 ? c->L : c->S;
    p->mask_shape[2] = planes > 1 ? c->S : 0;
    switch (c->mask) {
    case M_CAUSAL:
        p->mask_kind = ATT_MASK_CAUSAL;
        break;
    case M_BOOL2:
    case M_BOOL3:
        p->mask_kind = ATT_MASK_BOOL;
        p->bool_mask = in->bmask = check_randb(planes * plane, 0.3, &st);
        if (c->full_rows) /* row 0 of the last plane blocked everywhere */
            memset(in->bmask + (planes - 1) * plane, 1, (size_t)c->S);
        break;
    case M_FLOAT2:
    case M_FLOAT3:
        p->mask_kind = ATT_MASK_FLOAT;
        p->float_mask = in->fmask = check_randv(planes * plane, 2.0f, &st);
        if (c->full_rows)
            for (int j = 0; j < c->S; j++)
                in->fmask[j] = -INFINITY;
        break;
    }
    if (c->padding) {
        p->key_padding_mask = in->pad = check_randb((size_t)c->N * c->S, 0.25, &st);
        if (c->full_rows) /* every key of the last batch item ignored */
            memset(in->pad + (size_t)(c->N - 1) * c->S, 1, (size_t)c->S);
    }
    p->weights_mode = c->wmode;
    if (c->scale)
        p->has_scale = 1, p->scale = 0.37f;
    p->positional_encoding = c->pe;
}

/* Run the fast kernel and the reference on case c; 1 if they agree. */
static int compare_case(const struct rcase *c, unsigned long long seed)
{
    struct att_params p;
    struct rinputs in;
    struct att_error err;
    size_t olen, wlen;
    make_case(&p, &in, c, seed);
    cr_assert_eq(att_check(&p, &olen, &wlen, &err), ATT_OK, "%s", err.msg);
    float *out = malloc(olen * sizeof *out), *ref = malloc(olen * sizeof *ref);
    float *w = wlen ? malloc(wlen * sizeof *w) : NULL;
    float *wref = wlen ? malloc(wlen * sizeof *wref) : NULL;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(att_forward_ref(ref, wref, &p, &err), ATT_OK, "%s", err.msg);
    char name[160];
    snprintf(name, sizeof name,
             "N%d L%d S%d E%d kdim%d vdim%d H%d proj%d bias%d mask%d pad%d full%d w%d "
             "scale%d pe%d self%d", c->N, c->L, c->S, c->E, c->kdim, c->vdim, c->H, c->proj,
             c->bias, c->mask, c->padding, c->full_rows, c->wmode, c->scale, c->pe, c->self);
    int ok = check_tensor(name, out, ref, olen, OUT_ATOL, OUT_RTOL);
    if (wlen)
        ok &= check_tensor(name, w, wref, wlen, W_ATOL, 0.0);
    for (size_t i = 0; ok && i < wlen; i++)
        ok = isfinite(w[i]);
    free(out), free(ref), free(w), free(wref);
    rinputs_free(&in);
    return ok;
}

Test(attention, fast_path_matches_reference_on_random_cases)
{
    att_init(1);
    /* N, L, S, E, kdim, vdim, H: L ≠ S, kdim ≠ vdim ≠ E, N > 1, H = 1,
     * d = 1, L = 1, S = 1, tiles of 64 rows crossed, BLAS blocking crossed. */
    static const int shapes[][7] = {
        {1, 4, 4, 8, 8, 8, 2},     {2, 3, 5, 8, 6, 10, 2},  {3, 1, 7, 6, 6, 6, 1},
        {2, 5, 1, 4, 4, 4, 4},     {1, 9, 9, 5, 5, 5, 5},   {2, 70, 130, 32, 16, 24, 4},
        {1, 257, 257, 96, 96, 96, 6},
    };
    int n = 0, failed = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int *sh = shapes[s];
        const int square = sh[3] == sh[4] && sh[3] == sh[5];
        for (int mask = M_NONE; mask <= M_FLOAT3; mask++) {
            if (mask == M_CAUSAL && sh[1] != sh[2])
                continue;
            for (int variant = 0; variant < 6; variant++) {
                struct rcase c = {sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6],
                                  .bias = variant != 2,
                                  .mask = mask,
                                  .padding = variant % 2,
                                  .full_rows = variant == 3 || variant == 4,
                                  .wmode = variant % 3,
                                  .scale = variant == 1 || variant == 4,
                                  .pe = variant == 5};
                c.proj = !square ? PROJ_SEPARATE : (enum proj)(variant % 3);
                c.self = square && sh[1] == sh[2] && variant % 2 == 0; /* fused q/k/v */
                if (sh[1] == 257 && variant > 2) /* the big shape: fewer variants */
                    continue;
                failed += !compare_case(&c, (unsigned long long)(s * 100 + mask * 10 + variant));
                n++;
            }
        }
    }
    cr_log_info("%d random cases compared", n);
    cr_assert_gt(n, 200);
    cr_assert_eq(failed, 0, "%d of %d random cases disagree with the reference", failed, n);
}

/* att_forward_checked() is att_forward() without its att_check(): the same
 * bits, the same status and message, split over threads or not. */
Test(attention, forward_checked_is_forward_without_the_check)
{
    static const struct rcase cases[] = {
        {2, 33, 47, 32, 24, 40, 4, .proj = PROJ_SEPARATE, .bias = 1, .mask = M_FLOAT3,
         .padding = 1, .wmode = ATT_WEIGHTS_PER_HEAD},
        {1, 50, 50, 64, 64, 64, 8, .proj = PROJ_PACKED, .mask = M_CAUSAL,
         .wmode = ATT_WEIGHTS_AVERAGE, .pe = 1, .self = 1},
        {3, 20, 70, 16, 16, 16, 2, .proj = PROJ_ABSENT, .mask = M_BOOL2, .full_rows = 1,
         .scale = 1},
        {2, 130, 120, 64, 64, 64, 4, .proj = PROJ_SEPARATE, .bias = 1, .mask = M_FLOAT2,
         .wmode = ATT_WEIGHTS_PER_HEAD}, /* big enough to be split */
    };
    for (int threads = 1; threads <= 2; threads++) {
        att_init(threads);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            struct att_params p;
            struct rinputs in;
            struct att_error err;
            size_t olen, wlen;
            make_case(&p, &in, &cases[i], 31 + i);
            cr_assert_eq(att_check(&p, &olen, &wlen, &err), ATT_OK, "%s", err.msg);
            float *o1 = malloc(olen * 4), *o2 = malloc(olen * 4);
            float *w1 = malloc(wlen * 4 + 4), *w2 = malloc(wlen * 4 + 4);
            cr_assert_eq(att_forward(o1, w1, &p, &err), ATT_OK, "%s", err.msg);
            const int used = att_last_call_threads();
            cr_assert_eq(att_forward_checked(o2, w2, &p, &err), ATT_OK, "%s", err.msg);
            cr_assert_eq(att_last_call_threads(), used);
            cr_assert_eq(used, i == 3 ? threads : 1, "case %zu, threads %d", i, threads);
            cr_assert(memcmp(o1, o2, olen * 4) == 0, "case %zu, threads %d: out", i, threads);
            cr_assert(memcmp(w1, w2, wlen * 4) == 0, "case %zu, threads %d: w", i, threads);
            free(o1), free(o2), free(w1), free(w2);
            rinputs_free(&in);
        }
    }
    /* past validation, failures are the same too: a missing buffer here,
     * every stage of the range rule in expect_both() */
    struct att_params p;
    struct rinputs in;
    struct att_error e1, e2;
    size_t olen;
    make_case(&p, &in, &cases[0], 7); /* per-head weights */
    cr_assert_eq(att_check(&p, &olen, NULL, NULL), ATT_OK);
    float *out = malloc(olen * 4);
    cr_assert_eq(att_forward(out, NULL, &p, &e1), ATT_EPARAM);
    cr_assert_eq(att_forward_checked(out, NULL, &p, &e2), ATT_EPARAM);
    cr_assert_str_eq(e2.msg, e1.msg);
    cr_assert_eq(att_last_call_threads(), 0, "a call that computed nothing");
    free(out);
    rinputs_free(&in);
}

Test(attention, positional_encoding_every_path_matches_reference)
{
    /* the core encodes each distinct input once: into a copy for a real
     * projection (shared by self-attention, which stays fused), straight
     * into the projection buffer for an identity one */
    att_init(1);
    static const int shapes[][7] = {{2, 9, 9, 8, 8, 8, 2}, {1, 64, 64, 32, 32, 32, 4}};
    int failed = 0, n = 0;
    for (int s = 0; s < 2; s++)
        for (int proj = PROJ_PACKED; proj <= PROJ_ABSENT; proj++)
            for (int v = 0; v < 4; v++) {
                const int *sh = shapes[s];
                struct rcase c = {sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], sh[6], .proj = proj,
                                  .bias = v & 1, .self = v >> 1, .pe = 1,
                                  .mask = M_CAUSAL, .wmode = ATT_WEIGHTS_PER_HEAD};
                failed += !compare_case(&c, 700u + (unsigned)(s * 100 + proj * 10 + v));
                n++;
            }
    cr_assert_eq(failed, 0, "%d of %d positional-encoding cases disagree", failed, n);
}

Test(attention, one_pointer_for_query_key_value_of_different_lengths)
{
    /* The same buffer as query (L rows) and key/value (S rows) with packed
     * weights is not self-attention: the fused projection covered only L
     * rows (S > L read unset memory; S < L wrote past the workspace). */
    float buf[3] = {1, 2, 3}, w[3] = {1, 1, 1}, out[3], wt[3], ref_out[3], ref_wt[3];
    for (int L = 1; L <= 3; L += 2) {
        struct att_params p;
        att_params_init(&p);
        p.N = 1, p.L = L, p.S = 4 - L, p.E = p.kdim = p.vdim = 1, p.H = 1;
        p.query = p.key = p.value = buf;
        p.w[ATT_W_IN] = w, p.w_len[ATT_W_IN] = 3;
        p.weights_mode = ATT_WEIGHTS_PER_HEAD;
        size_t olen, wlen;
        cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
        cr_assert_eq(att_forward_ref(ref_out, ref_wt, &p, NULL), ATT_OK);
        cr_assert_eq(att_forward(out, wt, &p, NULL), ATT_OK);
        cr_assert(check_tensor("aliased output", out, ref_out, olen, OUT_ATOL, OUT_RTOL), "L %d", L);
        cr_assert(check_tensor("aliased weights", wt, ref_wt, wlen, W_ATOL, 0.0), "L %d", L);
    }
}

Test(attention, fully_blocked_rows_get_zero_weights_and_bias_output)
{
    /* Key padding blocks every key of batch item 1; bool mask blocks row 2. */
    struct rcase c = {2, 4, 5, 8, 8, 8, 2, .proj = PROJ_PACKED, .bias = 1,
                      .mask = M_BOOL2, .padding = 1, .full_rows = 1,
                      .wmode = ATT_WEIGHTS_PER_HEAD};
    struct att_params p;
    struct rinputs in;
    make_case(&p, &in, &c, 7);
    float out[2 * 4 * 8], w[2 * 2 * 4 * 5];
    struct att_error err;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
    for (int i = 0; i < 2 * 4 * 5; i++) /* batch 1: every weight exactly 0 */
        cr_assert_eq(w[2 * 4 * 5 + i], 0.0f);
    for (int l = 0; l < 4; l++)
        for (int e = 0; e < 8; e++)
            cr_assert_eq(out[(4 + l) * 8 + e], in.bo[e]);
    for (int h = 0; h < 2; h++) /* batch 0, query 0: mask row 0 fully blocked */
        for (int j = 0; j < 5; j++)
            cr_assert_eq(w[h * 20 + j], 0.0f);
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        cr_assert(isfinite(out[i]));
    rinputs_free(&in);
}

Test(attention, matches_pytorch_golden_cases)
{
    att_init(1);
    char *paths[64];
    int n = golden_list(paths, 64), failed = 0;
    cr_assert(n > 0 && n == golden_count(), "listed %d of the %d golden cases in tests/golden",
              n, golden_count());
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        int rc = golden_load(&g, paths[i], msg);
        cr_assert_eq(rc, 0, "%s", msg);
        size_t olen, wlen;
        struct att_error err;
        cr_assert_eq(att_check(&g.p, &olen, &wlen, &err), ATT_OK, "%s: %s", g.name, err.msg);
        cr_assert_eq(olen, g.expected_out_len, "%s: output length", g.name);
        cr_assert_eq(wlen, g.expected_weights_len, "%s: weights length", g.name);
        float *out = malloc(olen * sizeof *out), *w = wlen ? malloc(wlen * sizeof *w) : NULL;
        for (int impl = 0; impl < 2; impl++) {
            rc = impl ? att_forward_ref(out, w, &g.p, &err) : att_forward(out, w, &g.p, &err);
            cr_assert_eq(rc, ATT_OK, "%s: %s", g.name, err.msg);
            char name[128];
            snprintf(name, sizeof name, "%s (%s)", g.name, impl ? "reference" : "fast");
            int ok = check_tensor_torch(name, out, g.expected_out, g.expected_out32, olen,
                                        OUT_ATOL, OUT_RTOL);
            if (wlen)
                ok &= check_tensor_torch(name, w, g.expected_weights, g.expected_weights32,
                                         wlen, W_ATOL, 0.0);
            failed += !ok;
        }
        free(out), free(w);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d golden comparisons failed", failed);
}

/* ---------------------------------------------------------------------- */
/* Errors: every status code, with messages that name the parameter.       */

static float dummy[64];

static void small_params(struct att_params *p)
{
    att_params_init(p);
    p->N = 2, p->L = 4, p->S = 4, p->E = 8, p->kdim = 8, p->vdim = 8, p->H = 2;
    p->query = p->key = p->value = dummy;
}

static void expect_error(const struct att_params *p, int code, const char *needle)
{
    struct att_error err = {0};
    float out[1];
    int rc = att_forward(out, out, p, &err);
    cr_assert_eq(rc, code, "got %s (%s), want %s", att_status_str(rc), err.msg,
                 att_status_str(code));
    cr_assert_eq(err.code, code);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_eq(att_forward_ref(out, out, p, &err), code);
}

Test(attention_errors, invalid_parameter)
{
    struct att_params p;
    small_params(&p), p.H = 3;
    expect_error(&p, ATT_EPARAM, "embed_dim 8 is not divisible by num_heads 3");
    small_params(&p), p.H = 0;
    expect_error(&p, ATT_EPARAM, "num_heads must be >= 1 (got 0)");
    small_params(&p), p.S = -1;
    expect_error(&p, ATT_EPARAM, "source length must be >= 1");
    small_params(&p), p.has_scale = 1, p.scale = 0.0f;
    expect_error(&p, ATT_EPARAM, "scale must be a finite number > 0");
    small_params(&p), p.has_scale = 1, p.scale = INFINITY;
    expect_error(&p, ATT_EPARAM, "scale");
    small_params(&p), p.value = NULL;
    expect_error(&p, ATT_EPARAM, "value is missing");
    small_params(&p), p.w[ATT_W_IN] = dummy, p.w[ATT_W_Q] = dummy;
    expect_error(&p, ATT_EPARAM, "mutually exclusive");
    small_params(&p), p.mask_kind = 9;
    expect_error(&p, ATT_EPARAM, "attn_mask kind 9");
    small_params(&p), p.mask_kind = ATT_MASK_BOOL, p.mask_ndim = 2;
    p.mask_shape[0] = 4, p.mask_shape[1] = 4;
    expect_error(&p, ATT_EPARAM, "attn_mask data is missing");
    small_params(&p), p.weights_mode = 7;
    expect_error(&p, ATT_EPARAM, "weights mode 7");
    float fm[16] = {0};
    fm[5] = NAN;
    small_params(&p), p.mask_kind = ATT_MASK_FLOAT, p.float_mask = fm, p.mask_ndim = 2;
    p.mask_shape[0] = 4, p.mask_shape[1] = 4;
    expect_error(&p, ATT_EPARAM, "attn_mask element 5 is NaN");
    fm[5] = INFINITY;
    expect_error(&p, ATT_EPARAM, "attn_mask element 5 is +inf");
    small_params(&p);
    struct att_error err;
    cr_assert_eq(att_forward(NULL, NULL, &p, &err), ATT_EPARAM);
    cr_assert(strstr(err.msg, "output buffer"));
}

Test(attention_errors, shape_mismatch)
{
    struct att_params p;
    uint8_t bm[64] = {0};
    small_params(&p), p.mask_kind = ATT_MASK_BOOL, p.bool_mask = bm;
    p.mask_ndim = 2, p.mask_shape[0] = 3, p.mask_shape[1] = 5;
    expect_error(&p, ATT_ESHAPE, "attn_mask has shape (3, 5), expected (4, 4) or (4, 4, 4)");
    p.mask_ndim = 3, p.mask_shape[0] = 3, p.mask_shape[1] = 4, p.mask_shape[2] = 4;
    expect_error(&p, ATT_ESHAPE, "attn_mask has shape (3, 4, 4)");
    small_params(&p), p.kdim = 6;
    expect_error(&p, ATT_ESHAPE, "key has 6 features but embed_dim is 8");
    small_params(&p), p.vdim = 3;
    expect_error(&p, ATT_ESHAPE, "value has 3 features");
    small_params(&p), p.vdim = 3, p.w[ATT_W_IN] = dummy;
    expect_error(&p, ATT_ESHAPE, "in_proj_weight needs kdim == vdim == embed_dim 8");
}

Test(attention_errors, weights_whose_length_disagrees_with_the_parameters)
{
    /* A model's k_proj_weight made for 2 KV heads (2·4 rows of 8), called
     * with num_kv_heads left at H = 4 (a model default removed): the core
     * must refuse, not read 4·4·8 floats out of 2·4·8. */
    static float wk[2 * 4 * 8], wq[8 * 8];
    struct att_params p;
    small_params(&p), p.w[ATT_W_Q] = wq, p.w_len[ATT_W_Q] = 64;
    p.H = 4, p.head_dim = 2, p.w[ATT_W_K] = wk, p.w_len[ATT_W_K] = 2 * 2 * 8;
    p.w[ATT_W_V] = dummy, p.w_len[ATT_W_V] = 4 * 2 * 8;
    expect_error(&p, ATT_ESHAPE, "k_proj_weight holds 32 floats, but num_heads 4, "
                 "num_kv_heads 4, head_dim 2 and the input widths make it (8, 8): 64");
    p.Hkv = 2, p.w_len[ATT_W_V] = 32; /* the weights' own value: accepted */
    float out[2 * 4 * 8];
    struct att_error err;
    cr_assert_eq(att_forward(out, NULL, &p, &err), ATT_OK, "%s", err.msg);
    /* every array, whichever caller: a count of 0 with a pointer is refused */
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const char *name = att_weight_name((enum att_weight)i);
        small_params(&p);
        p.w[i] = dummy;
        golden_weight_lens(&p);
        cr_assert_eq(att_check(&p, NULL, NULL, &err), ATT_OK, "%s: %s", name, err.msg);
        p.w_len[i] -= 1;
        expect_error(&p, ATT_ESHAPE, name);
        p.w_len[i] = 0;
        expect_error(&p, ATT_ESHAPE, name);
    }
}

Test(attention_errors, too_large_and_out_of_memory)
{
    struct att_params p;
    small_params(&p), p.N = 1 << 30, p.L = 1 << 30;
    expect_error(&p, ATT_ETOOBIG, "tensor sizes overflow");
    small_params(&p), p.N = 1 << 20, p.L = 1 << 10, p.S = 1 << 10, p.H = 1 << 3;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD, p.E = 1 << 3;
    size_t o, w;
    cr_assert_eq(att_check(&p, &o, &w, NULL), ATT_OK); /* 2^43 weights: fits */
    cr_assert_eq(w, (size_t)1 << 43);
    p.N = 1 << 28, p.L = 1 << 2, p.S = 1 << 30, p.kdim = p.vdim = p.E = 1 << 3;
    p.H = 1 << 3;
    expect_error(&p, ATT_ETOOBIG, "overflow");
    /* Sizes that fit size_t but no machine: the workspace malloc fails.
     * (ASan is run with allocator_may_return_null=1 for this.) */
    small_params(&p), p.N = 1, p.L = 1 << 30, p.S = 1, p.E = p.kdim = p.vdim = 1 << 24, p.H = 1;
    struct att_error err;
    cr_assert_eq(att_forward(dummy, NULL, &p, &err), ATT_ENOMEM, "%s", err.msg);
    cr_assert(strstr(err.msg, "out of memory"));
    cr_assert_eq(att_forward_ref(dummy, NULL, &p, &err), ATT_ENOMEM);
}

Test(attention_errors, status_strings)
{
    cr_assert_str_eq(att_status_str(ATT_OK), "ok");
    cr_assert_str_eq(att_status_str(ATT_EPARAM), "invalid_parameter");
    cr_assert_str_eq(att_status_str(ATT_ESHAPE), "shape_mismatch");
    cr_assert_str_eq(att_status_str(ATT_ETOOBIG), "too_large");
    cr_assert_str_eq(att_status_str(ATT_ENOMEM), "out_of_memory");
    cr_assert_str_eq(att_status_str(ATT_ERANGE), "out_of_range");
    cr_assert_str_eq(att_status_str(-99), "unknown");
}

Test(attention, positional_encoding_values)
{
    float x[2 * 3 * 4] = {0};
    att_add_positional_encoding(x, 2, 3, 4);
    /* pos 0: sin 0 = 0, cos 0 = 1 alternating; pos 2, i = 2: sin(2 / 100) */
    cr_assert_float_eq(x[0], 0.0f, 1e-7);
    cr_assert_float_eq(x[1], 1.0f, 1e-7);
    cr_assert_float_eq(x[2 * 4 + 2], (float)sin(2.0 / 100.0), 1e-7);
    cr_assert_float_eq(x[2 * 4 + 3], (float)cos(2.0 / 100.0), 1e-7);
    cr_assert_eq(x[12 + 2 * 4 + 2], x[2 * 4 + 2]); /* same for every batch item */
}

/* ---------------------------------------------------------------------- */
/* Concurrency: 16 threads at once give bit-identical results to the same
 * calls made one at a time.                                               */

#define NTHREADS 16

struct job {
    struct att_params p;
    struct rinputs in;
    float *out, *w, *out1, *w1;
    size_t olen, wlen;
    pthread_barrier_t *start;
    int rc;
    int threads_used; /* att_last_call_threads() after each concurrent call */
};

static void *job_run(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(j->start);
    for (int rep = 0; rep < 3 && j->rc == ATT_OK; rep++) {
        j->rc = att_forward(j->out, j->w, &j->p, NULL);
        const int used = att_last_call_threads();
        j->threads_used = rep == 0 || used == j->threads_used ? used : -1;
    }
    return NULL;
}

/* Multiply-adds of a call, as attention.h counts them for
 * ATT_PARALLEL_MIN_MACS. */
static double call_macs(const struct att_params *p)
{
    return (double)p->N * (p->L + 2.0 * p->S) * p->E * p->E +
           2.0 * p->N * p->L * (double)p->S * p->E;
}

/* Every call big enough to be split (ATT_PARALLEL_MIN_MACS): with
 * threads_per_request > 1 each runs on that many threads, all 16 at once. */
static void concurrency_round(int threads_per_request)
{
    att_init(threads_per_request);
    struct job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; t++) {
        struct job *j = &jobs[t];
        struct rcase c = {2 + t % 2, 96 + t, 120 - t, 64, 64, 48, 4, .proj = PROJ_SEPARATE,
                          .bias = 1, .mask = t % 3 ? M_BOOL2 : M_CAUSAL, .padding = t % 2,
                          .wmode = t % 3, .pe = t % 4 == 0};
        if (c.mask == M_CAUSAL)
            c.S = c.L;
        make_case(&j->p, &j->in, &c, 1000 + (unsigned)t);
        cr_assert_eq(att_check(&j->p, &j->olen, &j->wlen, NULL), ATT_OK);
        cr_assert_geq(call_macs(&j->p), ATT_PARALLEL_MIN_MACS,
                      "job %d is too small to be split: the test would run one thread", t);
        j->out = calloc(j->olen, sizeof(float)), j->out1 = calloc(j->olen, sizeof(float));
        j->w = calloc(j->wlen + 1, sizeof(float)), j->w1 = calloc(j->wlen + 1, sizeof(float));
        cr_assert_eq(att_forward(j->out1, j->w1, &j->p, NULL), ATT_OK); /* one at a time */
        cr_assert_eq(att_last_call_threads(), threads_per_request,
                     "job %d, alone: %d threads, not threads_per_request %d", t,
                     att_last_call_threads(), threads_per_request);
        j->start = &start;
        j->rc = ATT_OK;
    }
    for (int t = 0; t < NTHREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, job_run, &jobs[t]), 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) {
        struct job *j = &jobs[t];
        cr_assert_eq(j->rc, ATT_OK);
        cr_assert_eq(j->threads_used, threads_per_request,
                     "thread %d: its calls ran on %d threads (-1: not always the same), "
                     "not threads_per_request %d", t, j->threads_used, threads_per_request);
        cr_assert(memcmp(j->out, j->out1, j->olen * sizeof(float)) == 0,
                  "thread %d: output differs from the serial call (threads_per_request %d)", t,
                  threads_per_request);
        cr_assert(memcmp(j->w, j->w1, j->wlen * sizeof(float)) == 0,
                  "thread %d: weights differ from the serial call", t);
        free(j->out), free(j->out1), free(j->w), free(j->w1);
        rinputs_free(&j->in);
    }
    pthread_barrier_destroy(&start);
}

Test(attention_concurrency, sixteen_threads_bit_identical_one_thread_per_request)
{
    concurrency_round(1);
}

Test(attention_concurrency, sixteen_threads_bit_identical_two_threads_per_request)
{
    concurrency_round(2);
}

Test(attention_concurrency, thread_count_changes_results_only_by_rounding)
{
    /* Big enough to be split (ATT_PARALLEL_MIN_MACS), rows not divisible by
     * the thread counts, every weights mode. Not bit-identical: OpenBLAS picks
     * different kernels (its "small matrix" path) for the smaller row blocks
     * of a split, which sum in another order. */
    for (int mode = ATT_WEIGHTS_NONE; mode <= ATT_WEIGHTS_AVERAGE; mode++) {
        struct rcase c = {2, 201, 150, 64, 48, 40, 4, .proj = PROJ_SEPARATE, .bias = 1,
                          .mask = M_BOOL3, .padding = 1, .wmode = mode};
        struct att_params p;
        struct rinputs in;
        size_t olen, wlen;
        make_case(&p, &in, &c, 4242);
        cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
        float *out1 = malloc(olen * 4), *outn = malloc(olen * 4);
        float *w1 = malloc(wlen * 4 + 4), *wn = malloc(wlen * 4 + 4);
        att_init(1);
        cr_assert_eq(att_forward(out1, w1, &p, NULL), ATT_OK);
        for (int threads = 2; threads <= 5; threads++) {
            att_init(threads);
            cr_assert_eq(att_forward(outn, wn, &p, NULL), ATT_OK);
            cr_assert_eq(att_last_call_threads(), threads, "mode %d: the call was not split",
                         mode);
            cr_assert(check_tensor("output, n threads vs 1", outn, out1, olen, 1e-5, 1e-5),
                      "mode %d: output with %d threads", mode, threads);
            cr_assert(check_tensor("weights, n threads vs 1", wn, w1, wlen, 1e-6, 0.0),
                      "mode %d: weights with %d threads", mode, threads);
        }
        free(out1), free(outn), free(w1), free(wn);
        rinputs_free(&in);
    }
}


/* attention.h: results are bit-identical for a given configuration and
 * input, and within the tolerance across configurations (threads,
 * batching, the fused self-attention projection), which sum in other
 * orders. */
Test(attention_concurrency, bit_identical_per_configuration_within_tolerance_across)
{
    struct rcase c = {2, 97, 97, 64, 64, 64, 4, .proj = PROJ_PACKED, .bias = 1,
                      .mask = M_CAUSAL, .wmode = ATT_WEIGHTS_PER_HEAD, .self = 1};
    struct att_params p;
    struct rinputs in;
    size_t olen, wlen;
    make_case(&p, &in, &c, 9090);
    cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
    float *ref_o = malloc(olen * 4), *ref_w = malloc(wlen * 4);
    float *o1 = malloc(olen * 4), *w1 = malloc(wlen * 4);
    float *o2 = malloc(olen * 4), *w2 = malloc(wlen * 4);
    cr_assert_eq(att_forward_ref(ref_o, ref_w, &p, NULL), ATT_OK);
    /* copies of the query: the same numbers, but not the fused path */
    const size_t nq = olen;
    float *kcopy = malloc(nq * 4), *vcopy = malloc(nq * 4);
    memcpy(kcopy, p.query, nq * 4), memcpy(vcopy, p.query, nq * 4);
    for (int config = 0; config < 8; config++) {
        const int threads = 1 + config % 4, fused = config < 4;
        att_init(threads);
        p.key = fused ? p.query : kcopy, p.value = fused ? p.query : vcopy;
        cr_assert_eq(att_forward(o1, w1, &p, NULL), ATT_OK);
        cr_assert_eq(att_forward(o2, w2, &p, NULL), ATT_OK);
        cr_assert_eq(att_last_call_threads(), threads, "threads %d, fused %d: not split",
                     threads, fused);
        cr_assert(memcmp(o1, o2, olen * 4) == 0 && memcmp(w1, w2, wlen * 4) == 0,
                  "threads %d, fused %d: two calls differ", threads, fused);
        cr_assert(check_tensor("output vs reference", o1, ref_o, olen, OUT_ATOL, OUT_RTOL),
                  "threads %d, fused %d", threads, fused);
        cr_assert(check_tensor("weights vs reference", w1, ref_w, wlen, W_ATOL, 0.0),
                  "threads %d, fused %d", threads, fused);
    }
    /* batching: each item alone, within the tolerance of the batch */
    att_init(1);
    p.key = p.value = p.query;
    cr_assert_eq(att_forward(o1, w1, &p, NULL), ATT_OK);
    struct att_params one = p;
    one.N = 1;
    const size_t per_o = olen / 2, per_w = wlen / 2;
    for (int n = 0; n < 2; n++) {
        one.query = one.key = one.value = p.query + n * per_o;
        cr_assert_eq(att_forward(o2, w2, &one, NULL), ATT_OK);
        cr_assert(check_tensor("item alone vs in the batch", o2, o1 + n * per_o, per_o,
                               OUT_ATOL, OUT_RTOL));
        cr_assert(check_tensor("item alone vs in the batch (weights)", w2, w1 + n * per_w,
                               per_w, W_ATOL, 0.0));
    }
    free(ref_o), free(ref_w), free(o1), free(w1), free(o2), free(w2), free(kcopy), free(vcopy);
    rinputs_free(&in);
}

Test(attention, averaged_weights_are_the_mean_over_all_heads_blocked_ones_adding_zero)
{
    /* H = 2; head 1 blocks every key of query 0: averaged, that row sums to
     * 1/2 (live heads / H) and equals head 0's weights / 2 */
    float x[3 * 4], outp[3 * 4], outa[3 * 4], wp[2 * 3 * 3], wa[3 * 3];
    unsigned long long st = 5;
    for (int i = 0; i < 12; i++)
        x[i] = check_randf(&st);
    uint8_t m[2 * 3 * 3] = {0};
    memset(m + 9, 1, 3); /* plane 1 (n 0, head 1), row 0 */
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = p.S = 3, p.E = p.kdim = p.vdim = 4, p.H = 2;
    p.query = p.key = p.value = x;
    p.mask_kind = ATT_MASK_BOOL, p.bool_mask = m, p.mask_ndim = 3;
    p.mask_shape[0] = 2, p.mask_shape[1] = 3, p.mask_shape[2] = 3;
    for (int impl = 0; impl < 2; impl++) {
        p.weights_mode = ATT_WEIGHTS_PER_HEAD;
        cr_assert_eq((impl ? att_forward_ref : att_forward)(outp, wp, &p, NULL), ATT_OK);
        p.weights_mode = ATT_WEIGHTS_AVERAGE;
        cr_assert_eq((impl ? att_forward_ref : att_forward)(outa, wa, &p, NULL), ATT_OK);
        for (int i = 0; i < 3; i++) {
            float sum = 0.0f;
            for (int j = 0; j < 3; j++) {
                sum += wa[i * 3 + j];
                cr_assert_float_eq(wa[i * 3 + j], (wp[i * 3 + j] + wp[9 + i * 3 + j]) / 2, 1e-7);
            }
            cr_assert_float_eq(sum, i == 0 ? 0.5f : 1.0f, 1e-6, "row %d sums to %g", i,
                               (double)sum);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* The range rule (attention.h "Range"), on the examples that were wrong.   */

/* One-head attention with E = kdim = vdim = 1 unless given: q (L), k, v (S). */
struct tiny {
    struct att_params p;
    float out[8], w[16];
};

static void tiny_init(struct tiny *t, const float *q, int L, const float *k, const float *v,
                      int S)
{
    att_params_init(&t->p);
    t->p.N = 1, t->p.L = L, t->p.S = S, t->p.E = t->p.kdim = t->p.vdim = 1, t->p.H = 1;
    t->p.query = q, t->p.key = k, t->p.value = v;
    t->p.weights_mode = ATT_WEIGHTS_PER_HEAD;
}

/* Both paths answer rc; with ATT_ERANGE the message contains needle. The
 * reference runs first, the fast kernel last, so the caller's checks of
 * t->out and t->w are on the fast kernel's answer, and the two must agree.
 * att_forward_checked() must answer as att_forward(), to the bit. */
static void expect_both(struct tiny *t, int rc, const char *needle)
{
    struct att_error err, err_checked;
    float ref_out[8], ref_w[16], checked_out[8], checked_w[16];
    size_t olen, wlen;
    golden_weight_lens(&t->p);
    cr_assert_eq(att_check(&t->p, &olen, &wlen, NULL), ATT_OK);
    for (int impl = 1; impl >= 0; impl--) {
        memset(&err, 0, sizeof err);
        int got = impl ? att_forward_ref(t->out, t->w, &t->p, &err)
                       : att_forward(t->out, t->w, &t->p, &err);
        cr_assert_eq(got, rc, "%s: status %d, want %d (%s)", impl ? "reference" : "fast", got,
                     rc, err.msg);
        if (rc == ATT_ERANGE)
            cr_assert(strstr(err.msg, needle), "%s: message '%s' lacks '%s'",
                      impl ? "reference" : "fast", err.msg, needle);
        if (rc == ATT_OK && impl)
            memcpy(ref_out, t->out, olen * sizeof *ref_out), memcpy(ref_w, t->w, wlen * 4);
    }
    memset(&err_checked, 0, sizeof err_checked);
    cr_assert_eq(att_forward_checked(checked_out, checked_w, &t->p, &err_checked), rc);
    if (rc != ATT_OK)
        cr_assert_str_eq(err_checked.msg, err.msg, "att_forward_checked's message");
    else
        cr_assert(memcmp(checked_out, t->out, olen * 4) == 0 &&
                      memcmp(checked_w, t->w, wlen * 4) == 0,
                  "att_forward_checked differs from att_forward");
    if (rc == ATT_OK) {
        cr_assert(check_tensor("fast vs reference output", t->out, ref_out, olen, OUT_ATOL,
                               OUT_RTOL));
        cr_assert(check_tensor("fast vs reference weights", t->w, ref_w, wlen, W_ATOL, 0.0));
    }
}

Test(attention_range, every_score_overflowing_downward_is_400_not_a_masked_row)
{
    /* was 200 with output = out_proj_bias and weights 0 */
    const float q[1] = {1e20f}, k[2] = {-1e20f, -2e20f}, v[2] = {1, 2}, bo[1] = {0.5f};
    struct tiny t;
    tiny_init(&t, q, 1, k, v, 2);
    t.p.w[ATT_W_OUT_BIAS] = bo;
    expect_both(&t, ATT_ERANGE, "every unmasked attention score of query 0");
    /* one finite score: the overflowed one takes weight 0 */
    const float k2[2] = {-1e20f, 1.0f};
    t.p.key = k2;
    expect_both(&t, ATT_OK, NULL);
    cr_assert_eq(t.w[0], 0.0f);
    cr_assert_eq(t.w[1], 1.0f);
    cr_assert_float_eq(t.out[0], 2.5f, 1e-6);
}

Test(attention_range, float_mask_of_minus_flt_max_on_scores_below_minus_1e32)
{
    const float q[1] = {1e16f}, k[2] = {-1e16f, -2e16f}, v[2] = {1, 2};
    const float fm[2] = {-FLT_MAX, -FLT_MAX};
    struct tiny t;
    tiny_init(&t, q, 1, k, v, 2);
    t.p.mask_kind = ATT_MASK_FLOAT, t.p.float_mask = fm;
    t.p.mask_ndim = 2, t.p.mask_shape[0] = 1, t.p.mask_shape[1] = 2;
    expect_both(&t, ATT_ERANGE, "below -3.4e38");
    /* the same row blocked by the caller (-inf) is a masked row: zeros */
    const float fm_inf[2] = {-INFINITY, -INFINITY};
    t.p.float_mask = fm_inf;
    expect_both(&t, ATT_OK, NULL);
    cr_assert(t.w[0] == 0.0f && t.w[1] == 0.0f && t.out[0] == 0.0f);
    /* -FLT_MAX on one key, a finite score on the other: weights [0, 1] */
    const float fm_one[2] = {-FLT_MAX, 0.0f};
    t.p.float_mask = fm_one;
    expect_both(&t, ATT_OK, NULL);
    cr_assert(t.w[0] == 0.0f && t.w[1] == 1.0f && t.out[0] == 2.0f);
}

Test(attention_range, each_stage_of_the_rule)
{
    struct tiny t;
    /* a projection above FLT_MAX: 3e38 + a bias of 3e38 */
    const float big[1] = {3e38f}, one[1] = {1.0f}, b3[3] = {3e38f, 0, 0};
    tiny_init(&t, big, 1, one, one, 1);
    t.p.w[ATT_W_IN_BIAS] = b3;
    expect_both(&t, ATT_ERANGE, "query projection");
    /* the scaled query above FLT_MAX */
    const float q[1] = {1e10f};
    tiny_init(&t, q, 1, one, one, 1);
    t.p.has_scale = 1, t.p.scale = 1e30f;
    expect_both(&t, ATT_ERANGE, "scaled query");
    /* a score above FLT_MAX */
    const float k[1] = {1e30f};
    t.p.scale = 1.0f, t.p.key = k;
    expect_both(&t, ATT_ERANGE, "attention score");
    /* the output above FLT_MAX: 3e38 through an out-projection of 2 */
    const float two[1] = {2.0f};
    tiny_init(&t, one, 1, one, big, 1);
    t.p.w[ATT_W_OUT] = two;
    expect_both(&t, ATT_ERANGE, "output");
}

Test(attention_range, float32_intermediate_overflow_with_a_finite_float64_value_is_answered)
{
    /* q·k = 1e40 - 1e40 = 0 in float64; float32 makes inf - inf = NaN. */
    const float q[2] = {1e20f, 1e20f}, k[2] = {1e20f, -1e20f}, v[2] = {3, 4};
    struct att_params p;
    float out[2], w[1];
    att_params_init(&p);
    p.N = 1, p.L = 1, p.S = 1, p.E = p.kdim = p.vdim = 2, p.H = 1;
    p.query = q, p.key = k, p.value = v;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    struct att_error err;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert(out[0] == 3.0f && out[1] == 4.0f && w[0] == 1.0f);
    /* a projection whose float32 partial sum overflows: 3e38 + 3e38 - 3e38 */
    const float x[3] = {3e38f, 3e38f, -3e38f}, W[3] = {1, 1, 1}, one[1] = {1.0f};
    att_params_init(&p);
    p.N = 1, p.L = 1, p.S = 1, p.E = 1, p.kdim = 1, p.vdim = 3, p.H = 1;
    p.query = one, p.key = one, p.value = x, p.w[ATT_W_V] = W, p.w_len[ATT_W_V] = 3;
    p.weights_mode = ATT_WEIGHTS_NONE;
    cr_assert_eq(att_forward(out, NULL, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(out[0], 3e38f);
}

Test(attention_range, a_blocked_keys_score_never_matters)
{
    /* key 1's score is 1e40, but the caller blocks it */
    const float q[1] = {1e20f}, k[2] = {1.0f, 1e20f}, v[2] = {5, 6};
    const uint8_t pad[2] = {0, 1};
    struct tiny t;
    tiny_init(&t, q, 1, k, v, 2);
    t.p.key_padding_mask = pad;
    expect_both(&t, ATT_OK, NULL);
    cr_assert(t.out[0] == 5.0f && t.w[0] == 1.0f && t.w[1] == 0.0f);
    /* unblocked, it overflows */
    t.p.key_padding_mask = NULL;
    expect_both(&t, ATT_ERANGE, "attention score");
}

Test(attention_range, subnormals_are_computed_not_flushed)
{
    /* a subnormal value times 1e38; was 0 under DAZ/FTZ */
    const float one[1] = {1.0f}, tiny_v[1] = {1e-39f}, w38[1] = {1e38f};
    struct tiny t;
    tiny_init(&t, one, 1, one, tiny_v, 1);
    t.p.w[ATT_W_V] = w38;
    expect_both(&t, ATT_OK, NULL);
    cr_assert_float_eq(t.out[0], 0.1f, 1e-6);
    /* bug 4: a weight of e^-87.2 = 1.35e-38 times 3e38; was 0 */
    const float k[2] = {0.0f, -87.2f}, v[2] = {0.0f, 3e38f};
    tiny_init(&t, one, 1, k, v, 2);
    expect_both(&t, ATT_OK, NULL);
    cr_assert_float_eq(t.out[0], 4.0424414f, 1e-5);
    /* a subnormal weight, e^-100 = 3.7e-44, is not zero either when a
     * value of 3e38 makes it count (the softmax's flush is undone) */
    const float k2[2] = {0.0f, -100.0f};
    tiny_init(&t, one, 1, k2, v, 2);
    expect_both(&t, ATT_OK, NULL);
    cr_assert(t.w[1] > 3.0e-44f && t.w[1] < 4.4e-44f, "weight %g", (double)t.w[1]);
    cr_assert_float_eq((double)t.out[0], (double)t.w[1] * 3e38, 1e-9);
    /* with ordinary values it cannot count (< S·2^-126·max|v|), and the
     * softmax flushes it to 0: the documented speed trade */
    const float v_small[2] = {0.0f, 2.0f};
    t.p.value = v_small;
    expect_both(&t, ATT_OK, NULL);
    cr_assert_eq(t.w[1], 0.0f, "weight %g", (double)t.w[1]);
    /* but through an out-projection of 1e33 the bound S·2^-126·max|v|·E·max|Wo|
     * = 2 · 2^-126 · 2 · 1e33 = 4.7e-5 exceeds 1e-6: computed without flushing */
    const float wo_big[1] = {1e33f};
    t.p.w[ATT_W_OUT] = wo_big;
    expect_both(&t, ATT_OK, NULL);
    cr_assert(t.w[1] > 3.0e-44f, "weight %g", (double)t.w[1]);
}

#if defined(__SSE__)
#include <xmmintrin.h>
Test(attention, caller_floating_point_state_is_restored)
{
    /* The softmax runs with FTZ/DAZ (core/kernels.c, att_flush_is_exact) and must
     * hand the caller's MXCSR back unchanged, also when a call is computed
     * again without flushing (a subnormal weight times a value of 3e38). */
    struct rcase c = {1, 80, 90, 32, 32, 32, 4, .proj = PROJ_PACKED, .bias = 1,
                      .wmode = ATT_WEIGHTS_PER_HEAD};
    struct att_params p;
    struct rinputs in;
    make_case(&p, &in, &c, 77);
    float *out = malloc(80 * 32 * 4), *w = malloc(4 * 80 * 90 * 4);
    att_init(2);
    const unsigned before = _mm_getcsr();
    cr_assert_eq(before & 0x8040, 0u, "test precondition: FTZ/DAZ off");
    cr_assert_eq(att_forward(out, w, &p, NULL), ATT_OK);
    cr_assert_eq(_mm_getcsr(), before);
    const float one[1] = {1.0f}, k[2] = {0.0f, -95.0f}, v[2] = {0.0f, 3e38f};
    struct att_params t;
    att_params_init(&t);
    t.N = 1, t.L = 1, t.S = 2, t.E = t.kdim = t.vdim = 1, t.H = 1;
    t.query = one, t.key = k, t.value = v;
    cr_assert_eq(att_forward(out, NULL, &t, NULL), ATT_OK);
    cr_assert_eq(_mm_getcsr(), before);
    free(out), free(w);
    rinputs_free(&in);
}
#endif

Test(attention_errors, result_overflowing_float32_is_an_error_not_nan)
{
    /* q·k = 2e40 > FLT_MAX: the score is inf and the softmax NaN */
    float x[4] = {1e20f, 1e20f, 1.0f, 1.0f}, out[4], w[4];
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = 2, p.S = 2, p.E = 2, p.kdim = 2, p.vdim = 2, p.H = 1;
    p.query = p.key = p.value = x;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    struct att_error err;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_ERANGE);
    cr_assert(strstr(err.msg, "overflows float32"), "%s", err.msg);
    x[0] = x[1] = 1e10f; /* large but finite all the way */
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s", err.msg);
}
