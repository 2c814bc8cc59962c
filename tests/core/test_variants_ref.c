/* test_variants_ref.c -- the reference (att_forward_ref) on the attention
 * variants: against PyTorch float64 goldens written from the definitions
 * (tests/golden_variants, tests/gen_variants.py), against second
 * formulations inside the core (GQA as repeated KV heads, RoPE interleaved
 * as half on permuted weights, a window as the bool mask it stands for),
 * the helpers of core/variants.h against their definitions, and every
 * refusal of att_check() on the variant fields. The fast kernel's tests
 * against this reference live with the fast kernel. */
#include <criterion/criterion.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "core/variants.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"

Test(variants_ref, matches_pytorch_golden_cases)
{
    char *paths[64];
    int n = golden_list_variants(paths, 64), failed = 0;
    cr_assert(n > 0 && n == golden_count_variants(),
              "listed %d of the %d cases in tests/golden_variants", n, golden_count_variants());
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        failed += !golden_check(&g, att_forward_ref, "reference", OUT_ATOL, OUT_RTOL, W_ATOL);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d of %d variant goldens differ from PyTorch", failed, n);
}

/* ---------------------------------------------------------------------- */
/* Helpers of core/variants.h against their definitions                     */

Test(variants_ref, alibi_slopes_are_the_papers)
{
    float s[16];
    att_alibi_slopes(s, 1);
    cr_assert_eq(s[0], 0x1p-8f);
    att_alibi_slopes(s, 8);
    for (int h = 0; h < 8; h++)
        cr_assert_eq(s[h], ldexpf(1.0f, -(h + 1)), "H 8, head %d: %g", h, (double)s[h]);
    /* 12 heads: the 8 of H = 8, then heads 0, 2, 4, 6 of H = 16 (2^-0.5 ...) */
    att_alibi_slopes(s, 12);
    for (int h = 0; h < 8; h++)
        cr_assert_eq(s[h], ldexpf(1.0f, -(h + 1)));
    for (int m = 0; m < 4; m++)
        cr_assert_eq(s[8 + m], (float)pow(2.0, -0.5 - m), "H 12, head %d: %g", 8 + m,
                     (double)s[8 + m]);
    att_alibi_slopes(s, 6); /* 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3 */
    const float six[6] = {0x1p-2f, 0x1p-4f, 0x1p-6f, 0x1p-8f, 0x1p-1f, 0x1p-3f};
    for (int h = 0; h < 6; h++)
        cr_assert_eq(s[h], six[h], "H 6, head %d: %g", h, (double)s[h]);
}

/* cos and sin of pos·theta^(-2i/rd), from mpmath at 60 digits. */
static const struct {
    long long pos;
    double theta;
    int rd, i;
    double c, s;
} rope_exact[] = {
    {100000, 10000.0, 128, 0, -0.99936080743821245189, 0.035748797972016509316},
    {100000, 10000.0, 128, 10, 0.54390948168084468642, 0.83914389453637501781},
    {1234567, 10000.0, 128, 1, 0.75601314587736537085, 0.65455643244918880528},
    {1234567, 500000.0, 128, 5, 0.99465733977224457378, -0.10323166392731259649},
    {999999999, 10000.0, 64, 3, 0.92534464227788466986, -0.37912701434692523797},
    {131071, 1000000.0, 128, 63, 0.98680146986033319663, 0.16193473710568067533},
};

Test(variants_ref, rope_angles_stay_accurate_at_large_positions)
{
    double c[64], s[64];
    float cs[2 * 128];
    for (size_t k = 0; k < sizeof rope_exact / sizeof rope_exact[0]; k++) {
        const int rd = rope_exact[k].rd, i = rope_exact[k].i;
        att_rope_angles(c, s, rope_exact[k].pos, rd, rope_exact[k].theta);
        /* variants.h: |angle|·2^-62 + 2^-52 (allowed: 4× that); a double
         * product would be 2^-53·|angle| off, 2048× more */
        const double angle = (double)rope_exact[k].pos * pow(rope_exact[k].theta, -2.0 * i / rd);
        const double tol = 4 * (angle * 0x1p-62 + 0x1p-52);
        cr_assert_leq(fabs(c[i] - rope_exact[k].c), tol, "pos %lld i %d: cos %.17g",
                      rope_exact[k].pos, i, c[i]);
        cr_assert_leq(fabs(s[i] - rope_exact[k].s), tol, "pos %lld i %d: sin %.17g",
                      rope_exact[k].pos, i, s[i]);
        att_rope_table(cs, rope_exact[k].pos - 1, 2, rd, rope_exact[k].theta);
        cr_assert_eq(cs[rd + i], (float)c[i], "table cos, pos %lld", rope_exact[k].pos);
        cr_assert_eq(cs[rd + rd / 2 + i], (float)s[i], "table sin, pos %lld",
                     rope_exact[k].pos);
    }
    att_rope_angles(c, s, 0, 8, 10000.0);
    for (int i = 0; i < 4; i++)
        cr_assert(c[i] == 1.0 && s[i] == 0.0);
}

Test(variants_ref, rope_rotates_the_pairs_of_each_style)
{
    const double cosv[2] = {0.0, 0.6}, sinv[2] = {1.0, 0.8};
    /* half: pairs (0, 2) and (1, 3); entry 4 passes through (rotary_dim 4) */
    double x[5] = {1, 2, 3, 4, 5};
    att_rope_rotate_d(x, cosv, sinv, 4, ATT_ROPE_HALF);
    const double half[5] = {-3, 2 * 0.6 - 4 * 0.8, 1, 4 * 0.6 + 2 * 0.8, 5};
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(x[i], half[i], 1e-15, "half, entry %d: %g", i, x[i]);
    double y[5] = {1, 2, 3, 4, 5};
    att_rope_rotate_d(y, cosv, sinv, 4, ATT_ROPE_INTERLEAVED);
    const double inter[5] = {-2, 1, 3 * 0.6 - 4 * 0.8, 4 * 0.6 + 3 * 0.8, 5};
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(y[i], inter[i], 1e-15, "interleaved, entry %d: %g", i, y[i]);
    float xf[5] = {1, 2, 3, 4, 5};
    const float cs[4] = {0.0f, 0.6f, 1.0f, 0.8f};
    att_rope_rotate(xf, cs, 4, ATT_ROPE_HALF);
    for (int i = 0; i < 5; i++)
        cr_assert_float_eq(xf[i], half[i], 1e-6, "float half, entry %d: %g", i, (double)xf[i]);
}

/* The visible keys by the definitions, one key at a time. */
static int sees(const struct att_params *p, int i, int j)
{
    const long long pos = p->query_position_offset + i;
    if (p->mask_kind == ATT_MASK_CAUSAL && j > i)
        return 0;
    if (p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT && j > i + p->S - p->L)
        return 0;
    if (p->has_window && p->window_left >= 0 && j < pos - p->window_left)
        return 0;
    return !(p->has_window && p->window_right >= 0 && j > pos + p->window_right);
}

Test(variants_ref, visible_keys_are_one_interval_by_the_definitions)
{
    struct att_params p;
    att_params_init(&p);
    int cases = 0;
    for (p.L = 1; p.L <= 7; p.L += 3)
        for (p.S = 1; p.S <= 9; p.S += 2)
            for (int kind = 0; kind < 3; kind++)
                for (int wl = -2; wl <= 3; wl++)
                    for (int wr = -2; wr <= 2; wr++)
                        for (long long off = 0; off <= 12; off += 4) {
                            static const int kinds[] = {ATT_MASK_NONE, ATT_MASK_CAUSAL,
                                                        ATT_MASK_CAUSAL_LOWER_RIGHT};
                            p.mask_kind = kinds[kind];
                            p.has_window = wl > -2; /* -2: no window */
                            p.window_left = wl, p.window_right = wr < -1 ? -1 : wr;
                            p.query_position_offset = off;
                            for (int i = 0; i < p.L; i++) {
                                int lo, hi;
                                att_visible_keys(&p, i, &lo, &hi);
                                cr_assert(lo >= 0 && hi <= p.S && (lo < hi || (lo == 0 && hi == 0)));
                                for (int j = 0; j < p.S; j++)
                                    cr_assert_eq(j >= lo && j < hi, sees(&p, i, j),
                                                 "L %d S %d kind %d window [%d, %d] offset %lld: "
                                                 "query %d, key %d", p.L, p.S, kind, wl, wr,
                                                 off, i, j);
                            }
                            cases++;
                        }
    cr_assert_gt(cases, 1000);
}

/* ---------------------------------------------------------------------- */
/* Second formulations, through att_forward_ref                              */

enum { N_ = 2, L_ = 5, S_ = 6, E_ = 16, H_ = 4, D_ = 4 };

/* Random inputs and projections wide enough for any layout below. */
struct vin {
    float q[N_ * L_ * E_], k[N_ * S_ * E_], v[N_ * S_ * E_];
    float wq[H_ * 8 * E_], wk[H_ * 8 * E_], wv[H_ * 8 * E_], wo[E_ * H_ * 8];
    float b[3 * H_ * 8], bo[E_];
};

static void vin_fill(struct vin *in, unsigned long long seed)
{
    float *all[] = {in->q, in->k, in->v, in->wq, in->wk, in->wv, in->wo, in->b, in->bo};
    const size_t len[] = {N_ * L_ * E_, N_ * S_ * E_, N_ * S_ * E_, H_ * 8 * E_, H_ * 8 * E_,
                          H_ * 8 * E_, E_ * H_ * 8, 3 * H_ * 8, E_};
    for (int a = 0; a < 9; a++)
        for (size_t i = 0; i < len[a]; i++)
            all[a][i] = check_randf(&seed);
}

static void vparams(struct att_params *p, const struct vin *in)
{
    att_params_init(p);
    p->N = N_, p->L = L_, p->S = S_, p->E = p->kdim = p->vdim = E_, p->H = H_;
    p->query = in->q, p->key = in->k, p->value = in->v;
    p->w[ATT_W_Q] = in->wq, p->w[ATT_W_K] = in->wk, p->w[ATT_W_V] = in->wv;
    p->w[ATT_W_OUT] = in->wo, p->w[ATT_W_OUT_BIAS] = in->bo;
    p->weights_mode = ATT_WEIGHTS_PER_HEAD;
}

/* The arrays of vin are built to the shapes each test gives p. */
static void run_ref(float *out, float *w, const struct att_params *p)
{
    struct att_error err;
    struct att_params sized = *p;
    golden_weight_lens(&sized);
    cr_assert_eq(att_forward_ref(out, w, &sized, &err), ATT_OK, "%s", err.msg);
}

Test(variants_ref, gqa_equals_its_kv_heads_repeated)
{
    /* Hkv = 2 with k/v projections (8, E) and biases, RoPE and a window,
     * against Hkv = H = 4 with each KV head's rows (and bias) repeated for
     * its two query heads: the same numbers, by another layout. */
    static struct vin in;
    vin_fill(&in, 11);
    struct att_params p;
    vparams(&p, &in);
    p.Hkv = 2, p.rope_style = ATT_ROPE_HALF, p.has_window = 1, p.window_left = 2;
    p.window_right = 1, p.w[ATT_W_IN_BIAS] = in.b;
    float out[N_ * L_ * E_], w[N_ * H_ * L_ * S_], out4[N_ * L_ * E_], w4[N_ * H_ * L_ * S_];
    run_ref(out, w, &p);
    static float wk4[H_ * D_ * E_], wv4[H_ * D_ * E_], b4[3 * H_ * D_];
    memcpy(b4, in.b, H_ * D_ * sizeof(float));
    for (int h = 0; h < H_; h++) {
        memcpy(wk4 + h * D_ * E_, in.wk + (h / 2) * D_ * E_, D_ * E_ * sizeof(float));
        memcpy(wv4 + h * D_ * E_, in.wv + (h / 2) * D_ * E_, D_ * E_ * sizeof(float));
        memcpy(b4 + H_ * D_ + h * D_, in.b + H_ * D_ + (h / 2) * D_, D_ * sizeof(float));
        memcpy(b4 + 2 * H_ * D_ + h * D_, in.b + H_ * D_ + 2 * D_ + (h / 2) * D_,
               D_ * sizeof(float));
    }
    p.Hkv = 0, p.w[ATT_W_K] = wk4, p.w[ATT_W_V] = wv4, p.w[ATT_W_IN_BIAS] = b4;
    run_ref(out4, w4, &p);
    cr_assert(check_tensor("GQA output", out, out4, N_ * L_ * E_, 1e-6, 0.0));
    cr_assert(check_tensor("GQA weights", w, w4, N_ * H_ * L_ * S_, 1e-7, 0.0));
}

/* HF's convert_llama_weights_to_hf permute() on the first rd rows of each
 * head of W (heads × d rows of E): row 2i -> i, row 2i+1 -> rd/2 + i. */
static void llama_permute(float *dst, const float *W, int heads, int d, int rd)
{
    for (int h = 0; h < heads; h++)
        for (int r = 0; r < d; r++) {
            const int to = r >= rd ? r : r % 2 ? rd / 2 + r / 2 : r / 2;
            memcpy(dst + ((size_t)h * d + to) * E_, W + ((size_t)h * d + r) * E_,
                   E_ * sizeof(float));
        }
}

Test(variants_ref, rope_interleaved_is_half_on_permuted_weights)
{
    static struct vin in;
    vin_fill(&in, 12);
    for (int rd = 2; rd <= 8; rd += 6) { /* partial and full rotary, head_dim 8 */
        struct att_params p;
        vparams(&p, &in);
        p.Hkv = 2, p.head_dim = 8, p.rope_rotary_dim = rd, p.rope_theta = 50.0;
        p.query_position_offset = 100000, p.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
        p.rope_style = ATT_ROPE_INTERLEAVED;
        float out[N_ * L_ * E_], w[N_ * H_ * L_ * S_], out2[N_ * L_ * E_],
            w2[N_ * H_ * L_ * S_];
        run_ref(out, w, &p);
        static float wq2[H_ * 8 * E_], wk2[2 * 8 * E_];
        llama_permute(wq2, in.wq, H_, 8, rd);
        llama_permute(wk2, in.wk, 2, 8, rd);
        p.rope_style = ATT_ROPE_HALF, p.w[ATT_W_Q] = wq2, p.w[ATT_W_K] = wk2;
        run_ref(out2, w2, &p);
        cr_assert(check_tensor("RoPE output", out, out2, N_ * L_ * E_, 1e-6, 0.0), "rd %d", rd);
        cr_assert(check_tensor("RoPE weights", w, w2, N_ * H_ * L_ * S_, 1e-7, 0.0), "rd %d", rd);
    }
}

Test(variants_ref, window_and_causal_are_the_bool_masks_they_stand_for)
{
    static struct vin in;
    vin_fill(&in, 13);
    static const int cfg[][4] = {/* mask kind, left, right, offset */
        {ATT_MASK_CAUSAL, 2, -1, 0}, {ATT_MASK_CAUSAL_LOWER_RIGHT, -1, -1, 0},
        {ATT_MASK_NONE, 3, 0, 1}, {ATT_MASK_NONE, 0, 0, 3}, {ATT_MASK_CAUSAL_LOWER_RIGHT, 1, 2, 4}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        struct att_params p;
        vparams(&p, &in);
        p.mask_kind = cfg[c][0], p.has_window = 1, p.window_left = cfg[c][1];
        p.window_right = cfg[c][2], p.query_position_offset = cfg[c][3];
        p.alibi_slopes = (const float[H_]){0.5f, 0.25f, 1.0f, 0.0f}, p.softcap = 2.0f;
        uint8_t m[L_ * S_];
        for (int i = 0; i < L_; i++)
            for (int j = 0; j < S_; j++)
                m[i * S_ + j] = !sees(&p, i, j);
        float out[N_ * L_ * E_], w[N_ * H_ * L_ * S_], out2[N_ * L_ * E_],
            w2[N_ * H_ * L_ * S_];
        run_ref(out, w, &p);
        p.has_window = 0, p.mask_kind = ATT_MASK_BOOL, p.bool_mask = m, p.mask_ndim = 2;
        p.mask_shape[0] = L_, p.mask_shape[1] = S_;
        run_ref(out2, w2, &p);
        cr_assert(check_tensor("window output", out, out2, N_ * L_ * E_, 0.0, 0.0), "cfg %zu", c);
        cr_assert(check_tensor("window weights", w, w2, N_ * H_ * L_ * S_, 0.0, 0.0), "cfg %zu", c);
    }
}

Test(variants_ref, softcap_and_alibi_under_the_range_rule)
{
    /* q·scale·k = 2e57 overflows float32; soft-capped it is 4; an ALiBi slope of
     * 3e38 pushes every key but the query's own position below -FLT_MAX. */
    float q[4] = {1e19f, 1e19f, 1e19f, 1e19f}, one[4] = {1, 1, 1, 1}, out[2], w[2];
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = 1, p.S = 2, p.E = p.kdim = p.vdim = 2, p.H = 1;
    p.query = q, p.key = q, p.value = one, p.has_scale = 1, p.scale = 1e19f;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    struct att_error err;
    cr_assert_eq(att_forward_ref(out, w, &p, &err), ATT_ERANGE);
    cr_assert(strstr(err.msg, "attention score"), "%s", err.msg);
    p.softcap = 4.0f;
    cr_assert_eq(att_forward_ref(out, w, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert(w[0] == 0.5f && w[1] == 0.5f);
    const float steep[1] = {3e38f};
    p.has_scale = 0, p.query = p.key = one, p.softcap = 0.0f, p.alibi_slopes = steep;
    p.query_position_offset = 1;   /* keys at distance 1 and 0 */
    cr_assert_eq(att_forward_ref(out, w, &p, &err), ATT_OK, "%s", err.msg);
    cr_assert(w[0] == 0.0f && w[1] == 1.0f, "%g %g", (double)w[0], (double)w[1]);
    p.query_position_offset = 3;   /* every key at distance >= 2 */
    cr_assert_eq(att_forward_ref(out, w, &p, &err), ATT_ERANGE);
    cr_assert(strstr(err.msg, "every unmasked attention score"), "%s", err.msg);
}

/* ---------------------------------------------------------------------- */
/* att_check() on the variant fields                                        */

static float dummy[4096];

/* N 2, L 4, S 4, E 8, H 2 (d 4), no weights. */
static void small(struct att_params *p)
{
    att_params_init(p);
    p->N = 2, p->L = 4, p->S = 4, p->E = p->kdim = p->vdim = 8, p->H = 2;
    p->query = p->key = p->value = dummy;
}

static void proj(struct att_params *p)
{
    p->w[ATT_W_Q] = p->w[ATT_W_K] = p->w[ATT_W_V] = p->w[ATT_W_OUT] = dummy;
}

static void refuses(const struct att_params *p, int code, const char *needle)
{
    struct att_error err = {0};
    float out[1];
    int rc = att_check(p, NULL, NULL, &err);
    cr_assert_eq(rc, code, "got %s (%s), want %s '%s'", att_status_str(rc), err.msg,
                 att_status_str(code), needle);
    cr_assert(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_eq(att_forward_ref(out, out, p, &err), code, "reference: %s", err.msg);
}

static void accepts(const struct att_params *p)
{
    struct att_error err = {0};
    struct att_params sized = *p; /* dummy is large enough for every shape */
    golden_weight_lens(&sized);
    cr_assert_eq(att_check(&sized, NULL, NULL, &err), ATT_OK, "%s", err.msg);
}

Test(variants_ref, check_refuses_each_field_by_name)
{
    struct att_params p;
    small(&p), p.Hkv = 3, p.H = 4;
    refuses(&p, ATT_EPARAM, "num_heads 4 is not divisible by num_kv_heads 3");
    small(&p), p.Hkv = -1;
    refuses(&p, ATT_EPARAM, "num_kv_heads must not be negative (got -1)");
    small(&p), p.head_dim = -2;
    refuses(&p, ATT_EPARAM, "head_dim must not be negative (got -2)");
    small(&p), proj(&p), p.head_dim = INT_MAX / 2;
    refuses(&p, ATT_ETOOBIG, "num_heads 2 times head_dim 1073741823 is too large");
    small(&p), p.head_dim = 6;
    refuses(&p, ATT_ESHAPE, "query has 8 features but num_heads*head_dim is 12 and "
                            "q_proj_weight is absent");
    small(&p), p.Hkv = 1;
    refuses(&p, ATT_ESHAPE, "key has 8 features but num_kv_heads*head_dim is 4 and "
                            "k_proj_weight is absent");
    small(&p), p.Hkv = 1, p.w[ATT_W_K] = dummy;
    refuses(&p, ATT_ESHAPE, "value has 8 features but num_kv_heads*head_dim is 4 and "
                            "v_proj_weight is absent");
    small(&p), proj(&p), p.head_dim = 3, p.w[ATT_W_OUT] = NULL;
    refuses(&p, ATT_ESHAPE, "out_proj_weight is absent but num_heads*head_dim 6 differs "
                            "from embed_dim 8");
    small(&p), p.rope_style = 7;
    refuses(&p, ATT_EPARAM, "rope style 7 is unknown");
    const int bad_rd[] = {3, 6, -2};
    for (int k = 0; k < 3; k++) {
        char want[96];
        small(&p), p.rope_style = ATT_ROPE_HALF, p.rope_rotary_dim = bad_rd[k];
        snprintf(want, sizeof want, "rope rotary_dim must be even and between 2 and head_dim 4 "
                 "(got %d)", bad_rd[k]);
        refuses(&p, ATT_EPARAM, want);
    }
    small(&p), proj(&p), p.head_dim = 5, p.rope_style = ATT_ROPE_INTERLEAVED;
    refuses(&p, ATT_EPARAM, "between 2 and head_dim 5 (got 0: head_dim by default)");
    const double bad_theta[] = {-1.0, (double)NAN, (double)INFINITY};
    for (int k = 0; k < 3; k++) {
        small(&p), p.rope_style = ATT_ROPE_HALF, p.rope_theta = bad_theta[k];
        refuses(&p, ATT_EPARAM, "rope theta must be a finite number > 0");
    }
    small(&p), p.query_position_offset = -1;
    refuses(&p, ATT_EPARAM, "query_position_offset must be >= 0 (got -1)");
    small(&p), p.query_position_offset = ATT_MAX_POSITION - 3;
    refuses(&p, ATT_EPARAM, "query_position_offset 9007199254740989 puts query positions "
                            "beyond 2^53");
    small(&p), p.query_position_offset = LLONG_MAX;
    refuses(&p, ATT_EPARAM, "beyond 2^53");
    small(&p), p.alibi_slopes = (const float[2]){0.5f, NAN};
    refuses(&p, ATT_EPARAM, "alibi_slopes[1] is not finite");
    small(&p), p.alibi_slopes = (const float[2]){-INFINITY, 0.5f};
    refuses(&p, ATT_EPARAM, "alibi_slopes[0] is not finite");
    small(&p), p.has_window = 1, p.window_left = -2;
    refuses(&p, ATT_EPARAM, "window left must be >= -1 (-1: unlimited) (got -2)");
    small(&p), p.has_window = 1, p.window_right = -5;
    refuses(&p, ATT_EPARAM, "window right must be >= -1 (-1: unlimited) (got -5)");
    const float bad_cap[] = {-1.0f, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        small(&p), p.softcap = bad_cap[k];
        refuses(&p, ATT_EPARAM, "softcap must be a finite number >= 0");
    }
    small(&p), p.mask_kind = 9;
    refuses(&p, ATT_EPARAM, "attn_mask kind 9 is unknown");
}

Test(variants_ref, check_accepts_the_boundaries_and_sizes_outputs)
{
    struct att_params p;
    small(&p), p.Hkv = 2, p.rope_style = ATT_ROPE_HALF, p.rope_rotary_dim = 4;
    accepts(&p);
    small(&p), p.Hkv = 1, p.w[ATT_W_K] = p.w[ATT_W_V] = dummy;
    p.rope_style = ATT_ROPE_INTERLEAVED, p.rope_rotary_dim = 2, p.rope_theta = 0.0;
    accepts(&p);
    small(&p), p.has_window = 1, p.window_left = p.window_right = -1, p.softcap = 0.0f;
    accepts(&p);
    small(&p), p.query_position_offset = ATT_MAX_POSITION - 4;
    accepts(&p);
    small(&p), p.alibi_slopes = (const float[2]){-1.0f, 0.0f}; /* any finite slope */
    accepts(&p);
    small(&p), p.S = 7, p.mask_kind = ATT_MASK_CAUSAL; /* L != S, both alignments */
    accepts(&p);
    p.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT, p.L = 9;
    accepts(&p);
    /* head_dim independent of E / H: outputs stay (N, L, E) and (N, H, L, S) */
    small(&p), proj(&p), p.E = 12, p.H = 3, p.Hkv = 1, p.head_dim = 8, p.S = 5;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    golden_weight_lens(&p);
    size_t olen, wlen;
    cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
    cr_assert_eq(olen, (size_t)2 * 4 * 12);
    cr_assert_eq(wlen, (size_t)2 * 3 * 4 * 5);
    p.weights_mode = ATT_WEIGHTS_AVERAGE;
    cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
    cr_assert_eq(wlen, (size_t)2 * 4 * 5);
}
