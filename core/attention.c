/* attention.c -- multi-head attention on OpenBLAS: one call's workspace,
 * its split over threads and its steps in PyTorch's order. The loops over
 * rows are in kernels.c and band.c (the variants on a row), validation and
 * the range rule in check.c, the variants' definitions in variants.c, the
 * OpenBLAS and threading policy in blas.c, the plain reference in
 * reference.c. See attention.h for the contract.
 *
 * Causal masks and windows: a block of query rows computes only the keys
 * some row of it can see (att_visible_keys), with one sgemm each way over
 * that range; the weights outside it are written as zeros. At L = S the
 * causal work is about half, a window's linear in L. */
#include "core/attention.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/band.h"
#include "core/blas.h"
#include "core/check.h"
#include "core/kernels.h"
#include "core/reduce.h"
#include "core/variants.h"

/* Query rows per tile when the scores go to scratch rather than to the
 * caller's weights buffer: up to ATT_TILE rows, fewer for long sources so
 * a thread's scratch (rows × S floats) stays within ATT_SCRATCH_FLOATS
 * (2 MiB): extra memory stays bounded however long the sequences. */
#define ATT_TILE 256
#define ATT_TILE_MIN 16
#define ATT_SCRATCH_FLOATS (1 << 19)
/* Query rows per block under causal or a window: a block computes the keys
 * its last row sees from those its first row sees, so the work beyond the
 * band is about ATT_BAND_ROWS / 2 keys per row. */
#define ATT_BAND_ROWS 64

/* One call's shared state; every thread runs fwd_part() on its share. */
struct fwd {
    const struct att_params *p;
    float *out, *weights;
    float *q, *k, *v;      /* projections; q becomes the context in place */
    int ldq, ldk, ldv;     /* their row strides: Dq, Dkv, Dkv, or Dq + 2·Dkv when fused */
    int fused;             /* one (N·L, Dq + 2·Dkv) projection: self-attention, packed */
    /* stream s (k, v) is the caller's input as it is (identity, no bias, no
     * RoPE, no PE): the blocks read it there, not a copy */
    int borrow[3];
    const float *kr, *vr;  /* what the blocks read: k and v, or key and value */
    int d, Dq, Dkv;        /* head_dim, H·d, Hkv·d */
    int group;             /* H / Hkv: query heads per KV head */
    int band;              /* causal or a window: blocks of keys are skipped */
    float *scratch;        /* nthreads × rows_per_block × S, or NULL */
    int whead;             /* per-head weights go straight to the caller's buffer */
    struct att_reduce red; /* top-k or pooled weights (reduce.h), or none */
    float *avg;            /* reduced averages: nthreads × rows_per_block × S, or NULL */
    const float *qin, *kin, *vin;
    const float *rope_q, *rope_k; /* RoPE tables (att_rope_table): (L, rd), (S, rd) */
    float scale;           /* custom scale; q is multiplied by it */
    float sqrt_d;          /* default: q is divided by this, as PyTorch does */
    int nthreads, rows_per_block, blocks_per_item;
    int any_range;         /* some thread found a range error (atomic) */
    const volatile int *cancel; /* the caller's cancel flag (blas.h), or NULL */
    /* max |q·scale| and max |k| of each thread's rows: when d·max·max is
     * far below FLT_MAX no score, not even a partial sum, can overflow, and
     * the scores need no check (the usual case) */
    float qmax[ATT_MAX_THREADS], kmax[ATT_MAX_THREADS];
    float vmax[ATT_MAX_THREADS]; /* max |v| of each thread's rows */
    int flush;             /* the softmax runs with FTZ/DAZ (see att_flush_is_exact) */
    int subnormal[ATT_MAX_THREADS]; /* a thread's softmax made subnormal weights */
    pthread_barrier_t barrier;
    /* start line: helper threads wait here until nthreads is final */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
};

/* [*lo, *hi) = thread t's share of n items split nt ways. */
static void share(int n, int t, int nt, int *lo, int *hi)
{
    *lo = (int)((long long)n * t / nt);
    *hi = (int)((long long)n * (t + 1) / nt);
}

/* Keep a thread's first range error (later ones follow from it). */
static void note_range(struct fwd *f, struct range_error *re, int stage, int n, int h, int i)
{
    if (re->stage)
        return;
    *re = (struct range_error){stage, n, h, i};
    __atomic_store_n(&f->any_range, 1, __ATOMIC_RELAXED);
}

/* A projection's first bad entry (att_fix_nonfinite's index into rows lo…) as
 * a range error: stream 0-2 (q, k, v), T rows per batch item. */
static void note_proj(struct fwd *f, struct range_error *re, long long bad, int lo, int O,
                      int stream, int T)
{
    if (bad < 0)
        return;
    const int row = lo + (int)(bad / O);
    note_range(f, re, RANGE_QPROJ + stream, row / T, -1, row % T);
}

/* A projected or rotated row out of range (att_rope_rows' or
 * att_project_rows' row, or -1) as a range error of its projection. */
static void note_rope(struct fwd *f, struct range_error *re, long long row, int stream, int T)
{
    if (row >= 0)
        note_range(f, re, RANGE_QPROJ + stream, (int)(row / T), -1, (int)(row % T));
}

/* 2. Projections of thread t's rows of N·L (N·S), RoPE on q and k, then
 *    q·scale. Self-attention with packed weights is one product with
 *    Dq + 2·Dkv outputs, as PyTorch does. An inf or NaN is recomputed in
 *    double (att_fix_nonfinite). mx: max |q·scale|, a bound on |k|, max |v|. */
static void fwd_project(struct fwd *f, int t, struct range_error *re, float mx[3])
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, E = p->E, nt = f->nthreads;
    const int ld[3] = {f->ldq, f->ldk, f->ldv};
    const int heads[3] = {p->H, f->Dkv / f->d, 0};
    float *const base[3] = {f->q, f->k, f->v};
    const float *const cs[3] = {f->rope_q, f->rope_k, NULL};
    int lo, hi;
    float qmax = 0.0f, kmax = 0.0f, vmax = 0.0f;
    if (f->fused) {
        const int Of = f->Dq + 2 * f->Dkv;
        share(p->N * L, t, nt, &lo, &hi);
        float *y = f->q + (size_t)lo * f->ldq;
        att_linear(y, f->ldq, f->qin + (size_t)lo * E, E, p->w[ATT_W_IN], p->w[ATT_W_IN_BIAS],
                   hi - lo, E, Of);
        /* kmax: the largest |q|, |k| or |v|, a bound on |k| */
        long long bad = att_fix_nonfinite(y, f->ldq, f->qin + (size_t)lo * E, E, p->w[ATT_W_IN],
                                          (size_t)E, 1, p->w[ATT_W_IN_BIAS], hi - lo, E, Of, &kmax);
        if (bad >= 0) { /* the stream is the column's block */
            const int col = (int)(bad % Of);
            note_proj(f, re, bad, lo, Of, col < f->Dq ? 0 : col < f->Dq + f->Dkv ? 1 : 2, L);
        }
        vmax = kmax;
        for (int s = 0; s < 2 && p->rope_style && !re->stage; s++)
            note_rope(f, re, att_rope_rows(base[s], ld[s], lo, hi, L, heads[s], f->d, p, cs[s]),
                      s, L);
    } else {
        for (int s = 0; s < 3; s++) {
            const int T = s == 0 ? L : S;
            const int K = s == 0 ? E : s == 1 ? p->kdim : p->vdim;
            const float *x = s == 0 ? f->qin : s == 1 ? f->kin : f->vin;
            share(p->N * T, t, nt, &lo, &hi);
            if (f->borrow[s]) {
                *(s == 1 ? &kmax : &vmax) = att_max_abs(x + (size_t)lo * K, (size_t)(hi - lo) * K);
                continue;
            }
            /* RoPE on q and k, unless an earlier stream is already out of range */
            const float *rope = s < 2 && p->rope_style && !re->stage ? cs[s] : NULL;
            note_rope(f, re, att_project_rows(base[s], ld[s], x, K, s, lo, hi, T, heads[s], f->d,
                                              p, rope, s == 1 ? &kmax : s == 2 ? &vmax : NULL),
                      s, T);
        }
        share(p->N * L, t, nt, &lo, &hi);
    }
    if (p->rope_style) /* a rotated pair is at most √2 times its larger half */
        kmax *= 1.4143f;
    /* q·scale before q·kᵀ, as PyTorch scales q (q / sqrt(d) by default):
     * scores that only the unscaled product would overflow stay in range */
    for (int m = lo; m < hi && !re->stage; m++) {
        float *qr = f->q + (size_t)m * f->ldq;
        const float a = att_scale_row(qr, f->Dq, f->sqrt_d, f->scale);
        if (a == INFINITY)
            note_range(f, re, RANGE_QSCALED, m / L, -1, m % L);
        qmax = a > qmax ? a : qmax;
    }
    mx[0] = qmax, mx[1] = kmax, mx[2] = vmax;
}

/* 3-5. One block of query rows (batch n, rows i0 … i0 + T - 1), heads
 * h0 … h1 - 1. With causal or a window only the keys [jlo, jhi] some row
 * of the block sees are computed; the weights outside are written as zeros.
 * Reduced weights take each row as it is made (per head), or each averaged
 * row once the block has every head. */
static void fwd_block(struct fwd *f, int t, int n, int i0, int T, int h0, int h1,
                      float *scratch, int check_scores, int check_context, struct range_error *re)
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, H = p->H, d = f->d;
    struct att_reduce *red = f->red.kind ? &f->red : NULL;
    const int red_head = red && p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    int jlo = 0, jhi = S - 1;
    if (f->band) { /* the union of the rows' intervals (rows that see none excluded) */
        jlo = S, jhi = -1;
        for (int r = 0; r < T; r++) {
            int lo, hi;
            att_visible_keys(p, i0 + r, &lo, &hi);
            if (lo < hi) {
                jlo = lo < jlo ? lo : jlo;
                jhi = hi - 1 > jhi ? hi - 1 : jhi;
            }
        }
    }
    const int W = jhi >= jlo ? jhi - jlo + 1 : 0;
    float *acc = p->weights_mode != ATT_WEIGHTS_AVERAGE ? NULL
                 : red ? f->avg + (size_t)t * f->rows_per_block * S
                       : f->weights + ((size_t)n * L + i0) * S;
    if (acc && h0 == 0)
        memset(acc, 0, (size_t)T * S * sizeof *acc);
    for (int h = h0; h < h1 && !re->stage; h++) {
        if (f->cancel && *f->cancel) { /* between heads: stop as a range error does */
            note_range(f, re, RANGE_CANCELLED, n, h, i0);
            break;
        }
        const int g = h / f->group; /* its KV head */
        const float *kh = f->kr + (size_t)n * S * f->ldk + (size_t)g * d;
        const float *vh = f->vr + (size_t)n * S * f->ldv + (size_t)g * d;
        float *qh = f->q + ((size_t)n * L + i0) * f->ldq + (size_t)h * d;
        float *wh = f->whead ? f->weights + (((size_t)n * H + h) * L + i0) * S : NULL;
        if (W == 0) { /* no row of the block sees a key: zeros */
            if (wh)
                memset(wh, 0, (size_t)T * S * sizeof *wh);
            for (int r = 0; red_head && r < T; r++)
                att_reduce_row(red, t, n, h, i0 + r, NULL, 0, 0);
            for (int r = 0; r < T; r++)
                memset(qh + (size_t)r * f->ldq, 0, (size_t)d * sizeof *qh);
            continue;
        }
        float *sc = wh ? wh + jlo : scratch;
        const int lds = wh ? S : W;
        for (int r = 0; wh && W < S && r < T; r++) {
            memset(wh + (size_t)r * S, 0, (size_t)jlo * sizeof *wh);
            memset(wh + (size_t)r * S + jhi + 1, 0, (size_t)(S - 1 - jhi) * sizeof *wh);
        }
        /* 3. scores (T, W) = (q_h·scale) · k_gᵀ over keys jlo … jhi, strided views */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, W, d,
                    1.0f, qh, f->ldq, kh + (size_t)jlo * f->ldk, f->ldk, 0.0f, sc, lds);
        /* 4. soft-cap, ALiBi, masks and softmax per row; a row with an inf or
         *    NaN score is recomputed in double, and the range rule applied */
        const float slope = p->alibi_slopes ? p->alibi_slopes[h] : 0.0f;
        const unsigned mxcsr = f->flush ? att_fpu_flush_subnormals() : 0;
        for (int r = 0; r < T; r++) {
            float *row = sc + (size_t)r * lds;
            struct att_row ar;
            att_row_init(&ar, p, n, h, i0 + r, jlo, W, slope);
            if (check_scores && !att_all_finite(row, (size_t)W)) { /* rare: IEEE here */
                if (f->flush)
                    att_fpu_restore(mxcsr);
                if (att_row_fix(row, qh + (size_t)r * f->ldq, kh, f->ldk, d, p, &ar))
                    note_range(f, re, RANGE_SCORE, n, h, i0 + r);
                if (f->flush)
                    att_fpu_flush_subnormals();
            } else {
                att_row_finish(row, p, &ar);
            }
            const int st = att_softmax_inplace(row, W, &f->subnormal[t]);
            if (st == ROW_POS_INF)
                note_range(f, re, RANGE_SCORE, n, h, i0 + r);
            else if (st == ROW_NO_FINITE && !att_row_caller_blocks(p, &ar))
                note_range(f, re, RANGE_ROW, n, h, i0 + r);
        }
        if (f->flush)
            att_fpu_restore(mxcsr);
        if (re->stage)
            break;
        for (int r = 0; red_head && r < T; r++)
            att_reduce_row(red, t, n, h, i0 + r, sc + (size_t)r * lds, jlo, W);
        for (int r = 0; acc && r < T; r++) {
            float *ar = acc + (size_t)r * S + jlo;
            const float *sr = sc + (size_t)r * lds;
            for (int j = 0; j < W; j++)
                ar[j] += sr[j];
        }
        /* 5. context_h (T, d) = weights · v_g, written over q_h, which this
         *    block no longer needs */
        const float *vj = vh + (size_t)jlo * f->ldv;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, W,
                    1.0f, sc, lds, vj, f->ldv, 0.0f, qh, f->ldq);
        long long bad = !check_context ? -1
                        : att_fix_nonfinite(qh, f->ldq, sc, lds, vj, 1, (size_t)f->ldv, NULL,
                                            T, W, d, NULL);
        if (bad >= 0)
            note_range(f, re, RANGE_CONTEXT, n, h, i0 + (int)(bad / d));
    }
    if (acc && h1 == H) {
        const float invh = 1.0f / (float)H;
        for (size_t x = 0; x < (size_t)T * S; x++)
            acc[x] *= invh;
        for (int r = 0; red && !re->stage && r < T; r++)
            att_reduce_row(red, t, n, 0, i0 + r, acc + (size_t)r * S, 0, S);
    }
}

/* 3-5 over block b of the call's N · blocks_per_item. */
static void fwd_block_b(struct fwd *f, int t, int b, int h0, int h1, float *scratch,
                        int check_scores, int check_context, struct range_error *re)
{
    const int n = b / f->blocks_per_item, i0 = (b % f->blocks_per_item) * f->rows_per_block;
    const int T = f->p->L - i0 < f->rows_per_block ? f->p->L - i0 : f->rows_per_block;
    fwd_block(f, t, n, i0, T, h0, h1, scratch, check_scores, check_context, re);
}

/* 3-5 for pooled weights: work items of whole tile rows (red.span query
 * rows), per head when the weights are, item it ≡ t (mod nthreads); the
 * thread that owns an item owns its tiles. */
static void fwd_pool(struct fwd *f, int t, float *scratch, int check_scores, int check_context,
                     struct range_error *re)
{
    struct att_reduce *r = &f->red;
    const int L = f->p->L, H = f->p->H, R = f->rows_per_block;
    const int items = att_reduce_items(r), heads = r->heads;
    for (int it = t; it < f->p->N * heads * items && !re->stage; it += f->nthreads) {
        const int n = it / (heads * items), h = it / items % heads, i0 = it % items * r->span;
        const int i1 = L - i0 < r->span ? L : i0 + r->span;
        att_reduce_item_begin(r, t, i0);
        for (int i = i0; i < i1 && !re->stage; i += R)
            fwd_block(f, t, n, i, i1 - i < R ? i1 - i : R, heads > 1 ? h : 0,
                      heads > 1 ? h + 1 : H, scratch, check_scores, check_context, re);
        att_reduce_item_end(r, t, n, h, i0, i1);
    }
}

/* Thread t's share of one call, in PyTorch's order: project, RoPE, scale
 * q, scores, soft-cap, biases, masks, softmax, context, out-projection.
 * Range errors go to *re; a thread stops computing at its first one, but
 * every thread passes every barrier. */
static void fwd_part(struct fwd *f, int t, struct range_error *re)
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, E = p->E, nt = f->nthreads;
    float mx[3];
    fwd_project(f, t, re, mx);
    f->qmax[t] = mx[0], f->kmax[t] = mx[1], f->vmax[t] = mx[2];
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    /* Every thread sees the same projection errors here (they were all
     * written before the barrier) and stops alike. */
    int stop = __atomic_load_n(&f->any_range, __ATOMIC_RELAXED);
    float qmax = 0.0f, kmax = 0.0f, vmax = 0.0f;
    for (int u = 0; u < nt; u++) {
        qmax = f->qmax[u] > qmax ? f->qmax[u] : qmax;
        kmax = f->kmax[u] > kmax ? f->kmax[u] : kmax;
        vmax = f->vmax[u] > vmax ? f->vmax[u] : vmax;
    }
    const int check_scores =
        !((double)f->d * (double)qmax * (double)kmax <= (double)FLT_MAX / 2.0);
    /* a context is a weighted mean of v: it overflows only near FLT_MAX */
    const int check_context = !(vmax <= FLT_MAX / 2.0f);

    /* 3-5. Blocks of query rows, every head: block b ≡ t (mod nt). */
    float *scratch = f->scratch ? f->scratch + (size_t)t * f->rows_per_block * S : NULL;
    const int nb = p->N * f->blocks_per_item;
    /* head by head, the keys of a band stay in cache from block to block;
     * not for reduced averages, whose scratch holds one block */
    const int by_head = f->band && !(f->red.kind && p->weights_mode == ATT_WEIGHTS_AVERAGE);
    if (f->red.kind == ATT_REDUCE_POOL && !stop)
        fwd_pool(f, t, scratch, check_scores, check_context, re);
    else if (by_head)
        for (int h = 0; h < p->H; h++)
            for (int b = t; b < nb && !stop && !re->stage; b += nt)
                fwd_block_b(f, t, b, h, h + 1, scratch, check_scores, check_context, re);
    else
        for (int b = t; b < nb && !stop && !re->stage; b += nt)
            fwd_block_b(f, t, b, 0, p->H, scratch, check_scores, check_context, re);
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    if (__atomic_load_n(&f->any_range, __ATOMIC_RELAXED))
        return;

    /* 6. out = context · Woᵀ + bo, this thread's rows */
    int lo, hi;
    share(p->N * L, t, nt, &lo, &hi);
    float *y = f->out + (size_t)lo * E;
    const float *x = f->q + (size_t)lo * f->ldq;
    att_linear(y, E, x, f->ldq, p->w[ATT_W_OUT], p->w[ATT_W_OUT_BIAS], hi - lo, f->Dq, E);
    long long bad = att_fix_nonfinite(y, E, x, f->ldq, p->w[ATT_W_OUT], (size_t)f->Dq, 1,
                                      p->w[ATT_W_OUT_BIAS], hi - lo, f->Dq, E, NULL);
    if (bad >= 0)
        note_range(f, re, RANGE_OUTPUT, (lo + (int)(bad / E)) / L, -1, (lo + (int)(bad / E)) % L);
}

struct fwd_thread {
    struct fwd *f;
    int t;
    struct range_error re;
};

static void *fwd_thread_main(void *arg)
{
    struct fwd_thread *ft = arg;
    pthread_mutex_lock(&ft->f->mu);
    while (!ft->f->go)
        pthread_cond_wait(&ft->f->cv, &ft->f->mu);
    pthread_mutex_unlock(&ft->f->mu);
    fwd_part(ft->f, ft->t, &ft->re);
    return NULL;
}

/* Run steps 2-6 of f on this thread and nt - 1 helpers (ft: one slot per
 * thread, range errors come back in ft[i].re); if a helper cannot start,
 * the call goes on with those that did. Returns how many ran. */
static int fwd_run(struct fwd *f, int nt, struct fwd_thread *ft)
{
    pthread_t th[ATT_MAX_THREADS];
    f->any_range = 0, f->go = 0;
    memset(f->subnormal, 0, sizeof f->subnormal);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int started = 1;
    for (; started < nt; started++) {
        ft[started] = (struct fwd_thread){f, started, {0, 0, 0, 0}};
        if (pthread_create(&th[started], NULL, fwd_thread_main, &ft[started]) != 0)
            break;
    }
    f->nthreads = started;
    if (started > 1)
        pthread_barrier_init(&f->barrier, NULL, (unsigned)started);
    pthread_mutex_lock(&f->mu);
    f->go = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    ft[0] = (struct fwd_thread){f, 0, {0, 0, 0, 0}};
    fwd_part(f, 0, &ft[0].re);
    for (int i = 1; i < started; i++)
        pthread_join(th[i], NULL);
    if (started > 1)
        pthread_barrier_destroy(&f->barrier);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    return started;
}

/* Did the softmax of any thread make a subnormal weight (and flush it)? */
static int fwd_made_subnormals(const struct fwd *f, int started)
{
    for (int i = 0; i < started; i++)
        if (f->subnormal[i])
            return 1;
    return 0;
}

/* What att_last_call_threads() reports: one per thread. */
static _Thread_local int last_call_threads;

int att_last_call_threads(void)
{
    return last_call_threads;
}

int att_forward(float *out, float *weights, const struct att_params *p,
                struct att_error *err)
{
    int rc = att_check(p, NULL, NULL, err);
    if (rc != ATT_OK) {
        last_call_threads = 0;
        return rc;
    }
    return att_forward_checked(out, weights, p, err);
}

int att_forward_checked(float *out, float *weights, const struct att_params *p,
                        struct att_error *err)
{
    last_call_threads = 0;
    int rc = att_check_buffers(out, weights, p, err);
    if (rc != ATT_OK)
        return rc;

    const int N = p->N, L = p->L, S = p->S, E = p->E, H = p->H;
    const int d = att_head_dim(p), Dq = att_q_width(p), Dkv = att_kv_width(p);
    /* per-head weights, in full: the scores go to the caller's buffer */
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD && !att_reduce_kind(p);
    const int band = p->mask_kind == ATT_MASK_CAUSAL ||
                     p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT || p->has_window;
    /* attention.h's N·(L + 2S)·E² + 2·N·L·S·E, with the variants' widths */
    const double macs = (double)N * ((double)L * E * Dq + (double)S * (p->kdim + p->vdim) * Dkv) +
                        2.0 * N * L * (double)S * Dq;
    int nt = macs < ATT_PARALLEL_MIN_MACS ? 1 : att_threads_per_call();
    if (nt > N * L)
        nt = N * L;

    /* Row blocks: with per-head weights the scores go straight to the
     * caller's buffer, so blocks are big (one per thread and batch item);
     * otherwise they go to scratch, and blocks stay small enough that the
     * scratch is at most ATT_SCRATCH_FLOATS per thread: the (H, L, S)
     * scores never exist. With causal or a window, blocks of ATT_BAND_ROWS
     * rows, so that the keys a block needs are about those each row sees. */
    int rows = (L + nt - 1) / nt;
    if (!per_head) {
        int cap = ATT_SCRATCH_FLOATS / S;
        cap = cap < ATT_TILE_MIN ? ATT_TILE_MIN : cap > ATT_TILE ? ATT_TILE : cap;
        if (rows > cap)
            rows = cap;
    }
    if (band && rows > ATT_BAND_ROWS)
        rows = ATT_BAND_ROWS;

    /* 1. One workspace: q (becomes the context in place), k, v, score
     *    scratch, copies of the inputs when positional encoding is on, and
     *    RoPE's cos and sin tables for the key positions 0 … S - 1 and the
     *    query positions (a view into the keys' when they are among them). */
    int borrow[3] = {0, 0, 0};
    for (int s = 1; s < 3; s++)
        borrow[s] = !att_proj_weight(p, s) && !att_proj_bias(p, s) && !(s == 1 && p->rope_style);
    const size_t nq = (size_t)N * L * Dq, nk = (size_t)N * S * Dkv;
    const size_t nkv = (borrow[1] ? 0 : nk) + (borrow[2] ? 0 : nk); /* k | v */
    const size_t nscratch = per_head ? 0 : (size_t)nt * rows * S;
    const size_t navg = att_reduce_kind(p) && p->weights_mode == ATT_WEIGHTS_AVERAGE ? nscratch : 0;
    const size_t nqin = p->positional_encoding ? (size_t)N * L * E : 0;
    const size_t nkin = p->positional_encoding ? (size_t)N * S * p->kdim : 0;
    const size_t nvin = p->positional_encoding ? (size_t)N * S * p->vdim : 0;
    const int rd = att_rope_dim(p);
    const long long off = p->query_position_offset;
    const int q_in_k = off + L <= S;
    const size_t nrope = !p->rope_style ? 0 : (size_t)(q_in_k ? S : S + L) * (size_t)rd;
    size_t total = nq + nkv + nscratch + nqin + nkin + nvin + nrope + navg; /* sizes checked */
    struct att_reduce red; /* its scratch: a heap of k, or the tile sums of a span */
    float *ws = att_reduce_init(&red, p, weights, nt, rows) ? NULL : att_workspace_alloc(total * sizeof *ws);
    if (!ws) {
        att_reduce_deinit(&red);
        return att_fail(err, ATT_ENOMEM, "out of memory for a %zu-byte workspace",
                        total * sizeof *ws);
    }
    struct fwd f = {
        .p = p, .out = out, .weights = weights,
        .q = ws, .k = ws + nq, .v = ws + nq + (borrow[1] ? 0 : nk),
        .ldq = Dq, .ldk = Dkv, .ldv = Dkv, .borrow = {0, borrow[1], borrow[2]},
        .d = d, .Dq = Dq, .Dkv = Dkv, .group = H / att_num_kv_heads(p), .band = band,
        .scratch = nscratch ? ws + nq + nkv : NULL,
        .qin = p->query, .kin = p->key, .vin = p->value,
        .scale = p->has_scale ? p->scale : 0.0f,
        .sqrt_d = p->has_scale ? 0.0f : (float)sqrt((double)d),
        .rows_per_block = rows, .blocks_per_item = (L + rows - 1) / rows,
        .whead = per_head, .red = red, .avg = navg ? ws + (total - navg) : NULL,
        .cancel = att_cancel_flag(),
    };
    if (p->rope_style) {
        float *tab = ws + nq + nkv + nscratch + nqin + nkin + nvin;
        att_rope_table(tab, 0, S, rd, att_rope_theta(p));
        f.rope_k = tab;
        f.rope_q = tab + (q_in_k ? (size_t)off * rd : (size_t)S * rd);
        if (!q_in_k)
            att_rope_table(tab + (size_t)S * rd, off, L, rd, att_rope_theta(p));
    }
    /* x + PE into copies, read by step 2 as the inputs (att_encode_inputs) */
    float *const copy = ws + nq + nkv + nscratch;
    float *const copies[3] = {copy, copy + nqin, copy + nqin + nkin};
    if (p->positional_encoding) {
        const float *in[3];
        att_encode_inputs(p, copies, in);
        f.qin = in[0], f.kin = in[1], f.vin = in[2];
    }
    /* one tensor for query, key and value, of one length (a caller may pass
     * the same pointer with S != L: then the streams are not one product) */
    if (p->w[ATT_W_IN] && f.qin == f.kin && f.kin == f.vin && p->L == p->S) {
        f.fused = 1;
        f.k = ws + Dq, f.v = ws + Dq + Dkv;
        f.ldq = f.ldk = f.ldv = Dq + 2 * Dkv;
    }
    f.kr = borrow[1] ? f.kin : f.k, f.vr = borrow[2] ? f.vin : f.v;

    /* 2-6 on nt threads, with the softmax flushing subnormals; again
     * without, in the rare case where that could change the answer (see
     * att_flush_is_exact) */
    nt = att_gate_enter(nt);
    struct fwd_thread ft[ATT_MAX_THREADS];
    /* the caller's MXCSR comes back as it was, exception flags included
     * (the exact path's subnormal arithmetic raises some) */
    const unsigned mxcsr = att_fpu_state();
    f.flush = 1;
    int started = fwd_run(&f, nt, ft);
    if (!f.any_range && fwd_made_subnormals(&f, started)) {
        float vmax = 0.0f;
        for (int i = 0; i < started; i++)
            vmax = f.vmax[i] > vmax ? f.vmax[i] : vmax;
        const float womax =
            p->w[ATT_W_OUT] ? att_max_abs(p->w[ATT_W_OUT], (size_t)E * Dq) : 1.0f;
        if (!att_flush_is_exact(S, Dq, vmax, womax)) {
            f.flush = 0; /* (the encoded copies are unchanged: inputs only) */
            started = fwd_run(&f, nt, ft);
        }
    }
    att_fpu_restore(mxcsr);
    att_gate_leave(nt);
    free(ws);
    att_reduce_deinit(&f.red);
    last_call_threads = started;
    /* The first range error in (stage, batch, row, head) order among the
     * threads' first ones: the same answer for the same configuration. */
    struct range_error re = {0, 0, 0, 0};
    for (int i = 0; i < started; i++)
        if (att_range_before(&ft[i].re, &re))
            re = ft[i].re;
    if (re.stage)
        return att_range_fail(err, &re);
    return ATT_OK;
}
