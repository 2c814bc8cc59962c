/* test_attention_errors.c -- the core on every error code, with messages
 * that name the parameter, and the range rule (attention.h "Range") on the
 * examples that were wrong. */
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

/* ---------------------------------------------------------------------- */
/* Cancellation (att_cancel_set, blas.h)                                    */

/* A task of att_parallel: whether its thread sees the caller's flag set. */
static void sees_cancel(void *arg, int i)
{
    ((int *)arg)[i] = att_cancelled();
}

/* A set flag stops att_forward (between heads) with ATT_ECANCELLED; a flag
 * at zero, or none, computes as before; the tasks of att_parallel read
 * their caller's flag, on whichever thread they run. */
Test(attention_errors, a_set_cancel_flag_stops_the_call)
{
    enum { N = 2, L = 4, S = 4, E = 8 };
    float q[N * L * E], out[N * L * E], want[N * L * E];
    unsigned long long st = 3;
    for (int i = 0; i < N * L * E; i++)
        q[i] = check_randf(&st);
    struct att_params p;
    small_params(&p);
    p.query = p.key = p.value = q;
    struct att_error err;
    cr_assert_eq(att_forward(want, NULL, &p, &err), ATT_OK, "%s", err.msg);

    volatile int flag = 1;
    att_cancel_set(&flag);
    cr_assert_eq(att_forward(out, NULL, &p, &err), ATT_ECANCELLED);
    cr_assert_eq(err.code, ATT_ECANCELLED);
    cr_assert_str_eq(att_status_str(err.code), "cancelled");
    cr_assert(strstr(err.msg, "cancelled"), "%s", err.msg);
    int seen[5] = {0};
    att_parallel(5, sees_cancel, seen);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(seen[i], 1, "task %d did not see its caller's flag", i);

    flag = 0;
    cr_assert_eq(att_forward(out, NULL, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert_eq(memcmp(out, want, sizeof out), 0);
    att_cancel_set(NULL);
    cr_assert_eq(att_cancelled(), 0);
    att_parallel(5, sees_cancel, seen);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(seen[i], 0);
    cr_assert_eq(att_forward(out, NULL, &p, &err), ATT_OK, "%s", err.msg);
}
