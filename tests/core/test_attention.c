/* test_attention.c -- the core against its reference and against
 * PyTorch's golden cases. */
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
#include "tests/core/attention_shared.h"

/* Run the fast kernel and the reference on case c; 1 if they agree. */
static int compare_case(const struct rcase *c, unsigned long long seed)
{
    struct att_params p;
    struct rinputs in;
    struct att_error err;
    size_t olen, wlen;
    attt_make_case(&p, &in, c, seed);
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
    attt_rinputs_free(&in);
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
            attt_make_case(&p, &in, &cases[i], 31 + i);
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
            attt_rinputs_free(&in);
        }
    }
    /* past validation, failures are the same too: a missing buffer here,
     * every stage of the range rule in expect_both() */
    struct att_params p;
    struct rinputs in;
    struct att_error e1, e2;
    size_t olen;
    attt_make_case(&p, &in, &cases[0], 7); /* per-head weights */
    cr_assert_eq(att_check(&p, &olen, NULL, NULL), ATT_OK);
    float *out = malloc(olen * 4);
    cr_assert_eq(att_forward(out, NULL, &p, &e1), ATT_EPARAM);
    cr_assert_eq(att_forward_checked(out, NULL, &p, &e2), ATT_EPARAM);
    cr_assert_str_eq(e2.msg, e1.msg);
    cr_assert_eq(att_last_call_threads(), 0, "a call that computed nothing");
    free(out);
    attt_rinputs_free(&in);
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
    attt_make_case(&p, &in, &c, 7);
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
    attt_rinputs_free(&in);
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

#include <xmmintrin.h>

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
    attt_make_case(&p, &in, &c, 77);
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
    attt_rinputs_free(&in);
}
#endif
