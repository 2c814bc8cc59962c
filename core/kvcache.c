/* kvcache.c -- a sequence's key/value cache and one step of attention over
 * it (kvcache.h). The blocks' layout and the cache kernel are in
 * kvblocks.h / kvattend.c; the projections are attention.c's
 * (att_project_rows), the checks att_check()'s on the step's stateless
 * view (step_view below).
 *
 * A step: project q, k, v (RoPE at their positions), round k and v to the
 * cache's dtype into new blocks, then attend: the cache kernel for a few
 * rows without weights, att_forward() on a float32 copy of the cache
 * otherwise (and whenever the kernel cannot answer alone: the range rule),
 * then the out-projection. Any error truncates the cache back to its
 * length before the step. */
#include "core/kvcache.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/blas.h"
#include "core/check.h"
#include "core/kvattend.h"
#include "core/kernels.h"
#include "core/kvblocks.h"
#include "core/variants.h"

static const char *const dtype_names[] = {ATT_KV_DTYPE_NAMES};

static size_t block_bytes(const struct att_kv *c);
static void block_free(void *b, size_t bytes);

struct att_kv *att_kv_new(int Hkv, int d, enum att_kv_dtype dtype)
{
    if (Hkv < 1 || d < 1 || (int)dtype < 0 || dtype >= ATT_KV_NDTYPES ||
        (long long)Hkv * d > INT_MAX / 2)
        return NULL;
    struct att_kv *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->Hkv = Hkv, c->d = d, c->dtype = dtype, c->esize = dtype == ATT_KV_F32 ? 4 : 2;
    return c;
}

void att_kv_free(struct att_kv *c)
{
    if (!c)
        return;
    for (size_t b = 0; b < c->nblocks; b++)
        block_free(c->blk[b], block_bytes(c));
    free(c->blk);
    free(c);
}

long long att_kv_len(const struct att_kv *c)
{
    return c->len;
}

/* Bytes of one block: keys and values of every KV head. */
static size_t block_bytes(const struct att_kv *c)
{
    return (size_t)2 * c->Hkv * ATT_KV_BLOCK * (size_t)c->d * (size_t)c->esize;
}

static size_t blocks_for(long long tokens)
{
    return (size_t)((tokens + ATT_KV_BLOCK - 1) / ATT_KV_BLOCK);
}

size_t att_kv_bytes(const struct att_kv *c)
{
    return c->nblocks * block_bytes(c);
}

size_t att_kv_bytes_at(const struct att_kv *c, long long tokens)
{
    const size_t nb = blocks_for(tokens > c->len ? tokens : c->len);
    return (nb > c->nblocks ? nb : c->nblocks) * block_bytes(c);
}

/* A block of whole pages is mapped on its own, not taken from malloc's
 * heap: a sequence's end gives its memory back to the system at once (a
 * heap keeps freed blocks of a MiB or so, whose threshold for mapping its
 * own rises with every mapped block freed), and the heap's trimming of the
 * steps' workspaces never has a cache's blocks beside them. One of whole
 * 2 MiB pages is also aligned to them, on transparent huge pages where the
 * kernel grants them (a one-row step reads the cache at memory speed; 4 KiB
 * pages would cost it TLB misses). Small blocks (under 64 KiB, or not of
 * whole pages) come from malloc, zeroed as a mapping is: the cache kernel
 * reads a tile's unused columns (and discards them). */
#define HUGE_PAGE ((size_t)2 << 20)
#define SMALL_PAGE ((size_t)4096)
#define MAPPED_MIN ((size_t)64 << 10)

static int mapped(size_t bytes)
{
    return bytes >= MAPPED_MIN && bytes % SMALL_PAGE == 0;
}

static void *block_alloc(size_t bytes)
{
    if (!mapped(bytes))
        return calloc(1, bytes);
    if (bytes % HUGE_PAGE) {
        void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return m == MAP_FAILED ? NULL : m;
    }
    /* a page more than asked, its unaligned ends unmapped */
    unsigned char *m = mmap(NULL, bytes + HUGE_PAGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    const size_t lead = (HUGE_PAGE - (uintptr_t)m % HUGE_PAGE) % HUGE_PAGE;
    if (lead)
        munmap(m, lead);
    if (HUGE_PAGE - lead)
        munmap(m + lead + bytes, HUGE_PAGE - lead);
    (void)madvise(m + lead, bytes, MADV_HUGEPAGE);
    return m + lead;
}

static void block_free(void *b, size_t bytes)
{
    if (!b)
        return;
    if (mapped(bytes))
        munmap(b, bytes);
    else
        free(b);
}

/* Blocks for `tokens` tokens; 0, or -1 when out of memory (then the
 * blocks allocated here are freed again). */
static int grow(struct att_kv *c, long long tokens)
{
    const size_t need = blocks_for(tokens), had = c->nblocks;
    if (need > c->cap) {
        size_t cap = c->cap ? c->cap : 4;
        while (cap < need)
            cap *= 2;
        unsigned char **nb = realloc(c->blk, cap * sizeof *nb);
        if (!nb)
            return -1;
        c->blk = nb, c->cap = cap;
    }
    for (; c->nblocks < need; c->nblocks++) {
        c->blk[c->nblocks] = block_alloc(block_bytes(c));
        if (!c->blk[c->nblocks]) {
            while (c->nblocks > had)
                block_free(c->blk[--c->nblocks], block_bytes(c));
            return -1;
        }
    }
    return 0;
}

/* Back to `tokens` tokens: the blocks beyond them are freed. */
static void truncate_to(struct att_kv *c, long long tokens, float kmax, float vmax)
{
    const size_t keep = blocks_for(tokens);
    while (c->nblocks > keep)
        block_free(c->blk[--c->nblocks], block_bytes(c));
    c->len = tokens, c->kmax = kmax, c->vmax = vmax;
}

struct att_kv_mark att_kv_mark(const struct att_kv *c)
{
    return (struct att_kv_mark){c->len, c->kmax, c->vmax};
}

void att_kv_rollback(struct att_kv *c, struct att_kv_mark m)
{
    if (m.len <= c->len)
        truncate_to(c, m.len, m.kmax, m.vmax);
}

/* The stateless request this step stands for (kvcache.h): S = every key
 * so far, queries at len + S - L + i, causal meaning lower-right. */
static struct att_params step_view(const struct att_params *p, const struct att_kv *c)
{
    struct att_params v = *p;
    v.S = (int)(c->len + p->S);
    v.query_position_offset = c->len + p->S - p->L;
    if (v.mask_kind == ATT_MASK_CAUSAL)
        v.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    return v;
}

int att_step_check(const struct att_params *p, const struct att_kv *c, size_t *out_len,
                   size_t *weights_len, struct att_error *err)
{
    if (!p || !c)
        return att_fail(err, ATT_EPARAM, "a step needs its parameters and a cache");
    if (p->N != 1)
        return att_fail(err, ATT_EPARAM, "a sequence step has batch size 1, not %d", p->N);
    if (p->L < 1 || p->S < p->L)
        return att_fail(err, ATT_ESHAPE,
                        "a sequence step needs at least one query row and at least as many "
                        "key/value rows as query rows (query %d rows, key %d rows)", p->L, p->S);
    if (p->query_position_offset != 0)
        return att_fail(err, ATT_EPARAM,
                        "query_position_offset is set by the sequence (its cache length), "
                        "not by a step");
    if (p->positional_encoding)
        return att_fail(err, ATT_EPARAM,
                        "positional_encoding cannot be used in a sequence: it adds to the rows "
                        "at 0 ... L-1, not at their positions");
    if (c->len + p->S > INT_MAX)
        return att_fail(err, ATT_ETOOBIG, "the cache would hold %lld tokens, above %d",
                        c->len + p->S, INT_MAX);
    const struct att_params v = step_view(p, c);
    const int rc = att_check(&v, out_len, weights_len, err);
    if (rc != ATT_OK)
        return rc;
    if (att_num_kv_heads(&v) != c->Hkv || att_head_dim(&v) != c->d)
        return att_fail(err, ATT_EPARAM,
                        "the sequence's cache holds %d KV heads of width %d; this step has %d "
                        "of width %d", c->Hkv, c->d, att_num_kv_heads(&v), att_head_dim(&v));
    return ATT_OK;
}

/* Rows k, v: (S, Dkv) rounded into the cache at tokens len … len + S - 1
 * (the blocks exist; values as rows, keys into their tiles' columns,
 * kvblocks.h); k and v become what the cache holds (rounded to its dtype).
 * Every value is in the dtype's range (first_out_of_range). */
static void append_rows(struct att_kv *c, float *k, float *v, int S)
{
    const int Hkv = c->Hkv, d = c->d, Dkv = Hkv * d;
    for (int w = 0; w < 2; w++) {
        float *src = w ? v : k;
        float mx = w ? c->vmax : c->kmax;
        for (int r = 0; r < S; r++) {
            const long long j = c->len + r;
            for (int g = 0; g < Hkv; g++) {
                float *x = src + (size_t)r * Dkv + (size_t)g * d;
                /* element e goes to dst[e · step]: a row, or a tile's column */
                unsigned char *dst = (unsigned char *)(w ? att_kv_vrow(c, g, j) : att_kv_ktile(c, g, j));
                const size_t step = w ? 1 : ATT_KV_TILE;
                if (!w)
                    dst += (size_t)(j % ATT_KV_TILE) * (size_t)c->esize;
                if (c->dtype == ATT_KV_F32) {
                    float *f = (float *)(void *)dst;
                    for (int e = 0; e < d; e++) {
                        f[(size_t)e * step] = x[e];
                        mx = fabsf(x[e]) > mx ? fabsf(x[e]) : mx;
                    }
                    continue;
                }
                uint16_t *h = (uint16_t *)(void *)dst;
                for (int e = 0; e < d; e++) {
                    const uint16_t b = c->dtype == ATT_KV_F16 ? att_f32_to_f16(x[e]) : att_f32_to_bf16(x[e]);
                    /* rounding moves a value by 2^-9 of it at most (BF16) */
                    mx = fabsf(x[e]) * 1.01f > mx ? fabsf(x[e]) * 1.01f : mx;
                    h[(size_t)e * step] = b;
                    x[e] = att_half_to_f32(b, c->dtype);
                }
            }
        }
        *(w ? &c->vmax : &c->kmax) = mx;
    }
}

/* The general path: att_forward() over the cache as float32, q (L, Dq)
 * rotated, not scaled; ctx (L, Dq). k, vv: the whole cache as float32
 * when the caller has it (a prompt: the step's own rows as the cache holds
 * them, append_rows), else NULL and the cache is copied. */
static int attend_general(float *ctx, float *weights, const float *q, const float *k,
                          const float *vv, const struct att_params *v, const struct att_kv *c,
                          struct att_error *err)
{
    const int T = v->S, Hkv = c->Hkv, d = c->d, Dkv = Hkv * d;
    float *kv = NULL;
    if (!k) {
        kv = malloc((size_t)2 * T * Dkv * sizeof *kv);
        if (!kv)
            return att_fail(err, ATT_ENOMEM, "out of memory for a %zu-byte copy of the cache",
                            (size_t)2 * T * Dkv * sizeof *kv);
        for (int j = 0; j < T; j++)
            for (int g = 0; g < Hkv; g++) {
                float *kr = kv + (size_t)j * Dkv + (size_t)g * d;
                const void *kt = att_kv_ktile(c, g, j);
                for (int e = 0; e < d; e++) /* the key: column j of its tile */
                    kr[e] = att_kv_elem(kt, (size_t)e * ATT_KV_TILE + (size_t)(j % ATT_KV_TILE),
                                        c->dtype);
                att_kv_to_f32(kv + ((size_t)T + j) * Dkv + (size_t)g * d, att_kv_vrow(c, g, j),
                              (size_t)d, c->dtype);
            }
        k = kv, vv = kv + (size_t)T * Dkv;
    }
    struct att_params in = *v;
    in.E = v->H * d, in.kdim = in.vdim = Dkv, in.head_dim = d, in.Hkv = Hkv;
    in.query = q, in.key = k, in.value = vv;
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        in.w[i] = NULL, in.w_len[i] = 0;
    in.rope_style = ATT_ROPE_NONE, in.rope_theta = 0.0, in.rope_rotary_dim = 0;
    const int rc = att_forward(ctx, weights, &in, err);
    free(kv);
    return rc;
}

/* The cache kernel when it applies (few rows, no weights, no score or
 * context near float32's limits); 0 when it answered into ctx. */
static int attend_fast(float *ctx, const float *q, const struct att_params *v,
                       const struct att_kv *c)
{
    const int L = v->L, Dq = v->H * c->d;
    if (L > ATT_KV_ATTEND_MAX_L || v->weights_mode != ATT_WEIGHTS_NONE)
        return 1;
    float *qs = malloc((size_t)L * Dq * sizeof *qs);
    if (!qs)
        return 1;
    memcpy(qs, q, (size_t)L * Dq * sizeof *qs);
    const float sqrt_d = v->has_scale ? 0.0f : (float)sqrt((double)c->d);
    float qmax = 0.0f;
    for (int i = 0; i < L; i++) {
        const float a = att_scale_row(qs + (size_t)i * Dq, Dq, sqrt_d, v->has_scale ? v->scale : 0.0f);
        qmax = a > qmax ? a : qmax;
    }
    /* as att_forward: no score, not even a partial sum, can overflow */
    int rc = !((double)c->d * (double)qmax * (double)c->kmax <= (double)FLT_MAX / 2.0) ||
             !(c->vmax <= FLT_MAX / 2.0f);
    if (!rc)
        rc = att_kv_attend(ctx, qs, v, c, att_parallel_width());
    free(qs);
    return rc;
}

/* The first key (row) or value (S + row) of k, v (S, Dkv) beyond the
 * cache's dtype's finite range once rounded to it, or -1. */
static long long first_out_of_range(const struct att_kv *c, const float *k, const float *v, int S)
{
    if (c->dtype == ATT_KV_F32)
        return -1;
    const size_t Dkv = (size_t)c->Hkv * (size_t)c->d;
    const uint16_t inf = c->dtype == ATT_KV_F16 ? 0x7c00u : 0x7f80u;
    for (int w = 0; w < 2; w++) {
        const float *src = w ? v : k;
        for (int r = 0; r < S; r++)
            for (size_t e = 0; e < Dkv; e++) {
                const float x = src[(size_t)r * Dkv + e];
                const uint16_t b = c->dtype == ATT_KV_F16 ? att_f32_to_f16(x) : att_f32_to_bf16(x);
                if ((b & inf) == inf)
                    return (long long)w * S + r;
            }
    }
    return -1;
}

/* A step between att_step_begin and att_step_finish: its workspace (q and
 * ctx (L, Dq), k, v (S, Dkv) and the RoPE table, in three pieces, not one:
 * a piece under glibc's mmap threshold (32 MiB at most) is reused from the
 * heap, where one large block would be mapped and its pages faulted in
 * afresh by every step), the request (borrowed pointers) and its view. */
struct att_step {
    float *q, *ctx, *kv;
    struct att_params p, v;
    long long len0;
};

void att_step_cancel(struct att_step *s)
{
    if (!s)
        return;
    free(s->q), free(s->ctx), free(s->kv);
    free(s);
}

int att_step_begin(struct att_step **out, const struct att_params *p, const struct att_kv *c,
                   struct att_error *err)
{
    *out = NULL;
    size_t out_len, w_len;
    const struct range_error cancelled = {RANGE_CANCELLED, 0, -1, 0};
    if (att_cancelled())
        return att_range_fail(err, &cancelled);
    int rc = att_step_check(p, c, &out_len, &w_len, err);
    if (rc != ATT_OK)
        return rc;
    const int L = p->L, S = p->S, H = p->H, d = c->d, Hkv = c->Hkv, E = p->E;
    const int Dq = H * d, Dkv = Hkv * d, rd = att_rope_dim(p);
    const long long len0 = c->len;
    const size_t nq = (size_t)L * Dq, nk = (size_t)S * Dkv, nr = (size_t)S * rd;
    struct att_step *s = calloc(1, sizeof *s);
    if (s)
        *s = (struct att_step){malloc(nq * sizeof(float)), malloc(nq * sizeof(float)),
                               malloc((2 * nk + nr) * sizeof(float)), *p, step_view(p, c), len0};
    if (!s || !s->q || !s->ctx || !s->kv) {
        att_step_cancel(s);
        return att_fail(err, ATT_ENOMEM, "out of memory for a step's %zu-byte workspace",
                        (2 * nq + 2 * nk + nr) * sizeof(float));
    }
    float *q = s->q, *k = s->kv, *vv = k + nk, *rope = vv + nk;
    if (rd)
        att_rope_table(rope, len0, S, rd, att_rope_theta(p));
    struct range_error re = {0, 0, 0, 0};
    long long bad = att_project_rows(q, Dq, p->query, E, 0, 0, L, L, H, d, p,
                                     rd ? rope + (size_t)(S - L) * rd : NULL, NULL);
    if (bad >= 0)
        re = (struct range_error){RANGE_QPROJ, 0, -1, (int)bad};
    bad = re.stage ? -1 : att_project_rows(k, Dkv, p->key, p->kdim, 1, 0, S, S, Hkv, d, p,
                                           rd ? rope : NULL, NULL);
    if (bad >= 0)
        re = (struct range_error){RANGE_KPROJ, 0, -1, (int)(len0 + bad)};
    bad = re.stage ? -1 : att_project_rows(vv, Dkv, p->value, p->vdim, 2, 0, S, S, Hkv, d, p,
                                           NULL, NULL);
    if (bad >= 0)
        re = (struct range_error){RANGE_VPROJ, 0, -1, (int)(len0 + bad)};
    if (re.stage) {
        att_step_cancel(s);
        return att_range_fail(err, &re);
    }
    if ((bad = first_out_of_range(c, k, vv, S)) >= 0) {
        att_step_cancel(s);
        const int row = (int)(bad % S);
        return att_fail(err, ATT_ERANGE,
                        "the projection of %s %d (position %lld) is beyond %s's range (max %s): "
                        "it cannot be held in the cache", bad >= S ? "value row" : "key row", row,
                        len0 + row, dtype_names[c->dtype],
                        c->dtype == ATT_KV_F16 ? "65504" : "3.39e38");
    }
    *out = s;
    return ATT_OK;
}

int att_step_finish(float *out, float *weights, struct att_step *s, struct att_kv *c,
                    struct att_error *err)
{
    if (!s)
        return att_fail(err, ATT_EPARAM, "no step was begun");
    const struct att_params *p = &s->p, *v = &s->v;
    int rc = att_check_buffers(out, weights, v, err);
    const struct range_error cancelled = {RANGE_CANCELLED, 0, -1, 0};
    if (rc == ATT_OK && att_cancelled())
        rc = att_range_fail(err, &cancelled);
    if (rc == ATT_OK && c->len != s->len0)
        rc = att_fail(err, ATT_EPARAM, "the cache changed between a step's begin and finish");
    if (rc != ATT_OK) {
        att_step_cancel(s);
        return rc;
    }
    const int L = p->L, S = p->S, d = c->d, Hkv = c->Hkv, E = p->E;
    const int Dq = p->H * d, Dkv = Hkv * d;
    const long long len0 = s->len0;
    const float kmax0 = c->kmax, vmax0 = c->vmax;
    float *q = s->q, *ctx = s->ctx, *k = s->kv, *vv = k + (size_t)S * Dkv;
    if (grow(c, len0 + S) != 0) {
        att_step_cancel(s);
        return att_fail(err, ATT_ENOMEM, "out of memory for the cache's blocks (%zu bytes)",
                        att_kv_bytes_at(c, len0 + S) - att_kv_bytes(c));
    }
    append_rows(c, k, vv, S); /* in range: att_step_begin checked */
    c->len = len0 + S;
    rc = attend_fast(ctx, q, v, c) == 0 ? ATT_OK
                                         : attend_general(ctx, weights, q, len0 ? NULL : k, len0 ? NULL : vv,
                                                          v, c, err);
    if (rc == ATT_OK) { /* out = ctx · Woᵀ + bo */
        att_linear(out, E, ctx, Dq, p->w[ATT_W_OUT], p->w[ATT_W_OUT_BIAS], L, Dq, E);
        const long long bad = att_fix_nonfinite(out, E, ctx, Dq, p->w[ATT_W_OUT], (size_t)Dq,
                                                1, p->w[ATT_W_OUT_BIAS], L, Dq, E, NULL);
        if (bad >= 0) {
            const struct range_error re = {RANGE_OUTPUT, 0, -1, (int)(bad / E)};
            rc = att_range_fail(err, &re);
        }
    }
    if (rc != ATT_OK)
        truncate_to(c, len0, kmax0, vmax0);
    att_step_cancel(s);
    return rc;
}

int att_step(float *out, float *weights, const struct att_params *p, struct att_kv *c,
             struct att_error *err)
{
    struct att_step *s;
    const int rc = att_step_begin(&s, p, c, err);
    return rc != ATT_OK ? rc : att_step_finish(out, weights, s, c, err);
}
