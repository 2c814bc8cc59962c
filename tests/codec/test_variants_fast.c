/* test_variants_fast.c -- the fast kernel (att_forward) against the
 * reference (att_forward_ref) on the attention variants: grouped KV heads,
 * head_dim, RoPE, positions, ALiBi, windows, soft-cap, both causal
 * alignments, alone and combined with every older option, on one thread
 * and two; and the blocks the band skips come back as exact zeros. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"

enum vproj { VP_ABSENT, VP_SEPARATE, VP_PACKED };
enum vmask { VM_NONE, VM_CAUSAL, VM_CAUSAL_LR, VM_BOOL2, VM_BOOL3, VM_FLOAT2 };

struct vcase {
    int N, L, S, E, H, Hkv, d; /* d = 0: E / H */
    int kdim, vdim;            /* 0: what the projection needs */
    int proj;                  /* enum vproj */
    int bias, mask, padding, full_rows;
    int rope, rotary_dim;      /* enum att_rope_style; 0 = d */
    double theta;
    long long offset;
    int alibi;                 /* 1: the paper's slopes, 2: random ones */
    int window, wl, wr;
    float softcap;
    int wmode, scale, self;
};

/* Everything a case allocates, freed together. */
struct vin {
    float *q, *k, *v, *w[6], *fmask, *slopes;
    uint8_t *bmask, *pad;
};

static void vin_free(struct vin *in)
{
    free(in->q), free(in->k), free(in->v), free(in->fmask), free(in->slopes);
    free(in->bmask), free(in->pad);
    for (int i = 0; i < 6; i++)
        free(in->w[i]);
    memset(in, 0, sizeof *in);
}

/* Fill p and in for case c (kdim, vdim, d resolved), seeded by seed. */
static void make_vcase(struct att_params *p, struct vin *in, const struct vcase *c,
                       unsigned long long seed)
{
    unsigned long long st = seed * 2654435761ULL + 88172645463325252ULL;
    memset(in, 0, sizeof *in);
    att_params_init(p);
    const int d = c->d ? c->d : c->E / c->H, Hkv = c->Hkv ? c->Hkv : c->H;
    const size_t Dq = (size_t)c->H * d, Dkv = (size_t)Hkv * d, E = (size_t)c->E;
    p->N = c->N, p->L = c->L, p->S = c->S, p->E = c->E, p->H = c->H;
    p->Hkv = c->Hkv, p->head_dim = c->d;
    p->kdim = c->kdim ? c->kdim : c->proj == VP_ABSENT ? (int)Dkv : c->E;
    p->vdim = c->vdim ? c->vdim : p->kdim;
    p->query = in->q = check_randv((size_t)c->N * c->L * E, 1.0f, &st);
    p->key = in->k = check_randv((size_t)c->N * c->S * p->kdim, 1.0f, &st);
    p->value = in->v = check_randv((size_t)c->N * c->S * p->vdim, 1.0f, &st);
    if (c->self)
        p->key = p->value = p->query;
    if (c->proj == VP_PACKED) {
        p->w[ATT_W_IN] = in->w[0] = check_randv((Dq + 2 * Dkv) * E, 1.0f / sqrtf((float)E), &st);
    } else if (c->proj == VP_SEPARATE) {
        p->w[ATT_W_Q] = in->w[0] = check_randv(Dq * E, 1.0f / sqrtf((float)E), &st);
        p->w[ATT_W_K] = in->w[1] = check_randv(Dkv * p->kdim, 1.0f / sqrtf((float)p->kdim), &st);
        p->w[ATT_W_V] = in->w[2] = check_randv(Dkv * p->vdim, 1.0f / sqrtf((float)p->vdim), &st);
    }
    if (c->proj != VP_ABSENT)
        p->w[ATT_W_OUT] = in->w[3] = check_randv(E * Dq, 1.0f / sqrtf((float)Dq), &st);
    if (c->bias) {
        p->w[ATT_W_IN_BIAS] = in->w[4] = check_randv(Dq + 2 * Dkv, 0.1f, &st);
        p->w[ATT_W_OUT_BIAS] = in->w[5] = check_randv(E, 0.1f, &st);
    }
    golden_weight_lens(p);
    const size_t plane = (size_t)c->L * c->S;
    const size_t planes = c->mask == VM_BOOL3 ? (size_t)c->N * c->H : 1;
    p->mask_ndim = planes > 1 ? 3 : 2;
    p->mask_shape[0] = planes > 1 ? c->N * c->H : c->L;
    p->mask_shape[1] = planes > 1 ? c->L : c->S;
    p->mask_shape[2] = planes > 1 ? c->S : 0;
    switch (c->mask) {
    case VM_CAUSAL:
        p->mask_kind = ATT_MASK_CAUSAL;
        break;
    case VM_CAUSAL_LR:
        p->mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
        break;
    case VM_BOOL2:
    case VM_BOOL3:
        p->mask_kind = ATT_MASK_BOOL;
        p->bool_mask = in->bmask = check_randb(planes * plane, 0.3, &st);
        if (c->full_rows) /* row 0 of the last plane blocked everywhere */
            memset(in->bmask + (planes - 1) * plane, 1, (size_t)c->S);
        break;
    case VM_FLOAT2:
        p->mask_kind = ATT_MASK_FLOAT;
        p->float_mask = in->fmask = check_randv(plane, 2.0f, &st);
        for (size_t x = 0; x < plane; x += 7)
            in->fmask[x] = -INFINITY;
        break;
    default:
        break;
    }
    if (c->padding) {
        p->key_padding_mask = in->pad = check_randb((size_t)c->N * c->S, 0.25, &st);
        if (c->full_rows)
            memset(in->pad + (size_t)(c->N - 1) * c->S, 1, (size_t)c->S);
    }
    p->rope_style = c->rope, p->rope_rotary_dim = c->rotary_dim, p->rope_theta = c->theta;
    p->query_position_offset = c->offset;
    if (c->alibi) {
        in->slopes = malloc((size_t)c->H * sizeof *in->slopes);
        cr_assert(in->slopes);
        if (c->alibi == 1)
            att_alibi_slopes(in->slopes, c->H);
        else
            for (int h = 0; h < c->H; h++)
                in->slopes[h] = 0.5f * (check_randf(&st) + 1.0f);
        p->alibi_slopes = in->slopes;
    }
    p->has_window = c->window, p->window_left = c->wl, p->window_right = c->wr;
    p->softcap = c->softcap;
    p->weights_mode = c->wmode;
    if (c->scale)
        p->has_scale = 1, p->scale = 0.37f;
}

/* Is key j blocked for query i of p by causal or the window, from the
 * definitions (attention.h), independently of the kernel's band? */
static int band_blocks(const struct att_params *p, int i, int j)
{
    if (p->mask_kind == ATT_MASK_CAUSAL && j > i)
        return 1;
    if (p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT && j > i + p->S - p->L)
        return 1;
    const long long pos = p->query_position_offset + i;
    return p->has_window && ((p->window_left >= 0 && j < pos - p->window_left) ||
                             (p->window_right >= 0 && j > pos + p->window_right));
}

static void describe(char *name, size_t n, const struct vcase *c)
{
    snprintf(name, n,
             "N%d L%d S%d E%d H%d Hkv%d d%d proj%d bias%d mask%d pad%d full%d rope%d rd%d "
             "off%lld alibi%d win%d[%d,%d] cap%g w%d scale%d self%d",
             c->N, c->L, c->S, c->E, c->H, c->Hkv, c->d, c->proj, c->bias, c->mask, c->padding,
             c->full_rows, c->rope, c->rotary_dim, c->offset, c->alibi, c->window, c->wl, c->wr,
             (double)c->softcap, c->wmode, c->scale, c->self);
}

/* Run the fast kernel and the reference on c; 1 when they agree, every
 * weight is written (the buffer starts as NaN) and the keys causal or the
 * window block have weight exactly 0. */
static int compare_vcase(const struct vcase *c, unsigned long long seed)
{
    struct att_params p;
    struct vin in;
    struct att_error err;
    size_t olen, wlen;
    char name[320];
    describe(name, sizeof name, c);
    make_vcase(&p, &in, c, seed);
    cr_assert_eq(att_check(&p, &olen, &wlen, &err), ATT_OK, "%s: %s", name, err.msg);
    float *out = malloc(olen * sizeof *out), *ref = malloc(olen * sizeof *ref);
    float *w = wlen ? malloc(wlen * sizeof *w) : NULL;
    float *wref = wlen ? malloc(wlen * sizeof *wref) : NULL;
    for (size_t x = 0; x < wlen; x++)
        w[x] = NAN;
    cr_assert_eq(att_forward(out, w, &p, &err), ATT_OK, "%s: %s", name, err.msg);
    cr_assert_eq(att_forward_ref(ref, wref, &p, &err), ATT_OK, "%s: %s", name, err.msg);
    int ok = check_tensor(name, out, ref, olen, OUT_ATOL, OUT_RTOL);
    if (wlen)
        ok &= check_tensor(name, w, wref, wlen, W_ATOL, 0.0);
    const size_t planes = wlen / ((size_t)c->L * c->S);
    size_t nonzero = 0;
    for (size_t pl = 0; pl < planes; pl++)
        for (int i = 0; i < c->L; i++)
            for (int j = 0; j < c->S; j++)
                nonzero += band_blocks(&p, i, j) && w[(pl * c->L + i) * c->S + j] != 0.0f;
    if (nonzero)
        fprintf(stderr, "%s: %zu blocked weights are not 0\n", name, nonzero);
    ok &= nonzero == 0;
    free(out), free(ref), free(w), free(wref);
    vin_free(&in);
    return ok;
}

/* A random case from st: every option drawn, shapes small. */
static struct vcase random_vcase(unsigned long long *st)
{
#define PICK(n) ((int)((check_randf(st) + 1.0f) * 0.5f * (float)(n)) % (n))
    struct vcase c = {0};
    static const int heads[][2] = {{1, 1}, {2, 1}, {4, 2}, {4, 4}, {6, 3}, {6, 1}, {8, 2},
                                   {3, 3}, {12, 4}};
    const int *hh = heads[PICK(9)];
    c.H = hh[0], c.Hkv = PICK(3) == 0 && hh[1] == hh[0] ? 0 : hh[1];
    c.d = 2 * (1 + PICK(5)); /* even, for RoPE: 2 … 10 */
    c.N = 1 + PICK(2);
    c.L = 1 + PICK(23), c.S = 1 + PICK(23);
    c.proj = PICK(3);
    if (c.proj == VP_ABSENT) { /* identity q and out: E = H·d */
        c.E = c.H * c.d;
    } else {
        c.E = 4 + PICK(13);
        c.d = PICK(2) ? c.d : 0; /* E / H when it divides */
        if (c.d == 0 && c.E % c.H)
            c.d = 4;
        if (c.proj == VP_SEPARATE)
            c.kdim = 3 + PICK(9), c.vdim = 3 + PICK(9);
    }
    c.self = c.proj == VP_PACKED && c.L == c.S && PICK(2);
    c.bias = PICK(2);
    c.mask = PICK(6);
    c.padding = PICK(3) == 0;
    c.full_rows = PICK(4) == 0;
    const int d = c.d ? c.d : c.E / c.H;
    c.rope = d % 2 ? ATT_ROPE_NONE : PICK(3); /* pairs need an even head_dim */
    c.rotary_dim = c.rope && PICK(2) ? 2 * (1 + PICK(d / 2)) : 0;
    c.theta = PICK(2) ? 0.0 : 500.0;
    c.offset = PICK(3) == 0 ? 100000 : PICK(2) ? PICK(30) : 0;
    c.alibi = PICK(3);
    c.window = PICK(2);
    c.wl = PICK(4) == 0 ? -1 : PICK(9);
    c.wr = PICK(4) == 0 ? -1 : PICK(5);
    if (c.window && c.offset >= 100000 && PICK(2)) /* near the keys, not past them */
        c.wl = (int)c.offset + PICK(20);
    c.softcap = PICK(2) ? 0.0f : 0.5f + 3.0f * (check_randf(st) + 1.0f);
    c.wmode = PICK(3);
    c.scale = PICK(4) == 0;
    return c;
#undef PICK
}

Test(variants_fast, matches_reference_on_random_combinations)
{
    att_init(1);
    unsigned long long st = 12345;
    int failed = 0;
    const int n = 600;
    for (int k = 0; k < n; k++) {
        const struct vcase c = random_vcase(&st);
        failed += !compare_vcase(&c, (unsigned long long)k);
    }
    cr_assert_eq(failed, 0, "%d of %d random cases disagree with the reference", failed, n);
}

/* The cases the issue names, each on its own, big enough to cross the
 * 64-row blocks of the band. */
static const struct vcase named[] = {
    /* GQA: H/Hkv = H (multi-query) and 1; head_dim not E / H */
    {1, 70, 90, 32, 8, 1, 0, .proj = VP_SEPARATE, .bias = 1, .wmode = ATT_WEIGHTS_PER_HEAD},
    {2, 40, 40, 32, 4, 4, 0, .proj = VP_PACKED, .self = 1, .wmode = ATT_WEIGHTS_AVERAGE},
    {1, 33, 50, 24, 6, 2, 10, .proj = VP_SEPARATE, .kdim = 7, .vdim = 9},
    /* RoPE, partial, both styles, at offset 1e5 */
    {1, 30, 130, 32, 4, 2, 0, .proj = VP_PACKED, .rope = ATT_ROPE_HALF, .rotary_dim = 4,
     .offset = 100000, .wmode = ATT_WEIGHTS_PER_HEAD},
    {2, 17, 17, 48, 4, 1, 12, .proj = VP_PACKED, .self = 1, .rope = ATT_ROPE_INTERLEAVED,
     .theta = 1e6, .offset = 100000, .mask = VM_CAUSAL},
    /* ALiBi, non-power-of-two heads, bidirectional and causal */
    {1, 50, 60, 48, 6, 3, 0, .proj = VP_ABSENT, .alibi = 1, .wmode = ATT_WEIGHTS_PER_HEAD},
    {1, 130, 130, 48, 12, 12, 0, .proj = VP_SEPARATE, .alibi = 1, .mask = VM_CAUSAL,
     .offset = 100000, .wmode = ATT_WEIGHTS_AVERAGE},
    /* windows: odd, one-sided, at an offset */
    {1, 150, 150, 16, 2, 1, 0, .proj = VP_ABSENT, .window = 1, .wl = 7, .wr = 3,
     .wmode = ATT_WEIGHTS_PER_HEAD},
    {2, 140, 200, 16, 2, 2, 0, .proj = VP_SEPARATE, .window = 1, .wl = 13, .wr = -1,
     .offset = 60, .wmode = ATT_WEIGHTS_AVERAGE, .padding = 1},
    {1, 100, 300, 16, 4, 2, 0, .proj = VP_ABSENT, .window = 1, .wl = 31, .wr = 0,
     .offset = 200, .mask = VM_CAUSAL_LR},
    /* causal, L != S, both alignments, and a window with it */
    {1, 150, 70, 16, 2, 2, 0, .proj = VP_ABSENT, .mask = VM_CAUSAL,
     .wmode = ATT_WEIGHTS_PER_HEAD},
    {1, 150, 70, 16, 2, 2, 0, .proj = VP_ABSENT, .mask = VM_CAUSAL_LR,
     .wmode = ATT_WEIGHTS_PER_HEAD},
    {2, 70, 150, 16, 2, 1, 0, .proj = VP_SEPARATE, .mask = VM_CAUSAL_LR, .bias = 1,
     .wmode = ATT_WEIGHTS_AVERAGE},
    {1, 90, 200, 16, 4, 2, 0, .proj = VP_ABSENT, .mask = VM_CAUSAL, .window = 1, .wl = 9,
     .wr = 0},
    /* soft-cap with masks and ALiBi */
    {1, 40, 50, 32, 4, 2, 0, .proj = VP_SEPARATE, .softcap = 1.5f, .mask = VM_FLOAT2,
     .padding = 1, .alibi = 2, .wmode = ATT_WEIGHTS_PER_HEAD},
    {1, 80, 80, 32, 4, 1, 0, .proj = VP_PACKED, .softcap = 0.7f, .mask = VM_BOOL3,
     .full_rows = 1, .scale = 1, .wmode = ATT_WEIGHTS_PER_HEAD},
};

Test(variants_fast, matches_reference_on_named_cases)
{
    att_init(1);
    int failed = 0;
    const int n = (int)(sizeof named / sizeof named[0]);
    for (int k = 0; k < n; k++)
        failed += !compare_vcase(&named[k], (unsigned long long)k + 1000);
    cr_assert_eq(failed, 0, "%d of %d named cases disagree with the reference", failed, n);
}

/* Split over two threads (the calls are large enough), the same. */
Test(variants_fast, matches_reference_on_two_threads)
{
    att_init(2);
    static const struct vcase big[] = {
        {2, 150, 150, 64, 8, 2, 0, .proj = VP_PACKED, .self = 1, .mask = VM_CAUSAL,
         .rope = ATT_ROPE_HALF, .wmode = ATT_WEIGHTS_PER_HEAD},
        {1, 200, 260, 64, 8, 4, 16, .proj = VP_SEPARATE, .mask = VM_CAUSAL_LR, .alibi = 1,
         .softcap = 2.0f, .wmode = ATT_WEIGHTS_AVERAGE},
        {2, 300, 300, 64, 4, 1, 0, .proj = VP_SEPARATE, .window = 1, .wl = 21, .wr = 2,
         .offset = 100000, .rope = ATT_ROPE_INTERLEAVED, .rotary_dim = 8},
    };
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        cr_assert(compare_vcase(&big[k], 2000 + k), "two-thread case %zu", k);
        /* the reference leaves the count alone: the fast kernel's */
        cr_assert_eq(att_last_call_threads(), 2, "case %zu ran on one thread", k);
    }
}

/* A window far from every key, and causal by index at an offset that the
 * window puts past the row: rows see nothing, weights and outputs are 0. */
Test(variants_fast, rows_that_see_no_key_are_zero)
{
    att_init(1);
    static const struct vcase empty[] = {
        {1, 80, 40, 16, 2, 1, 0, .proj = VP_ABSENT, .window = 1, .wl = 3, .wr = 3,
         .offset = 1000, .wmode = ATT_WEIGHTS_PER_HEAD},
        {1, 80, 100, 16, 2, 1, 0, .proj = VP_ABSENT, .window = 1, .wl = 5, .wr = 0,
         .offset = 50, .mask = VM_CAUSAL, .wmode = ATT_WEIGHTS_AVERAGE},
        {1, 150, 40, 16, 2, 2, 0, .proj = VP_ABSENT, .mask = VM_CAUSAL_LR,
         .wmode = ATT_WEIGHTS_PER_HEAD},
    };
    for (size_t k = 0; k < sizeof empty / sizeof empty[0]; k++) {
        cr_assert(compare_vcase(&empty[k], 3000 + k), "case %zu", k);
        struct att_params p;
        struct vin in;
        make_vcase(&p, &in, &empty[k], 3000 + k);
        size_t olen, wlen;
        cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
        float *out = malloc(olen * sizeof *out), *w = malloc(wlen * sizeof *w);
        cr_assert_eq(att_forward(out, w, &p, NULL), ATT_OK);
        /* the first row of each sees no key (the second: 50 - 5 > 0 = i) */
        for (int e = 0; e < p.E; e++)
            cr_assert_eq(out[e], 0.0f, "case %zu: out[0][%d] = %g", k, e, (double)out[e]);
        for (int j = 0; j < p.S; j++)
            cr_assert_eq(w[j], 0.0f, "case %zu: weight[0][%d]", k, j);
        free(out), free(w);
        vin_free(&in);
    }
}

/* PyTorch float64's answers (tests/golden_variants) through the fast
 * kernel, on one thread and two. */
Test(variants_fast, matches_pytorch_golden_cases)
{
    char *paths[64];
    const int n = golden_list_variants(paths, 64);
    cr_assert(n > 0 && n == golden_count_variants(),
              "listed %d of the %d cases in tests/golden_variants", n, golden_count_variants());
    int failed = 0;
    for (int threads = 1; threads <= 2; threads++) {
        att_init(threads);
        for (int i = 0; i < n; i++) {
            struct golden g;
            char msg[256];
            cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
            failed += !golden_check(&g, att_forward, "fast", OUT_ATOL, OUT_RTOL, W_ATOL);
            golden_deinit(&g);
        }
    }
    for (int i = 0; i < n; i++)
        free(paths[i]);
    cr_assert_eq(failed, 0, "%d of %d variant goldens (x2 thread counts) differ from PyTorch",
                 failed, n);
}
