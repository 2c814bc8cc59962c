/* attention.c -- multi-head attention on OpenBLAS: one call's workspace,
 * its split over threads and its steps in PyTorch's order. The loops over
 * rows are in kernels.c, validation and the range rule in check.c, the
 * OpenBLAS and threading policy in blas.c, the plain reference in
 * reference.c. See attention.h for the contract. */
#include "core/attention.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/blas.h"
#include "core/check.h"
#include "core/kernels.h"

/* Query rows per tile when the scores go to scratch rather than to the
 * caller's weights buffer: up to ATT_TILE rows, fewer for long sources so
 * a thread's scratch (rows × S floats) stays within ATT_SCRATCH_FLOATS
 * (2 MiB): extra memory stays bounded however long the sequences. */
#define ATT_TILE 256
#define ATT_TILE_MIN 16
#define ATT_SCRATCH_FLOATS (1 << 19)

/* One call's shared state; every thread runs fwd_part() on its share. */
struct fwd {
    const struct att_params *p;
    float *out, *weights;
    float *q, *k, *v;      /* projections; q becomes the context in place */
    int ldq, ldk, ldv;     /* their row strides: E, or 3E when fused */
    int fused;             /* one (N·L, 3E) projection: self-attention, packed */
    float *scratch;        /* nthreads × rows_per_block × S, or NULL */
    const float *qin, *kin, *vin;
    float scale;           /* custom scale; q is multiplied by it */
    float sqrt_d;          /* default: q is divided by this, as PyTorch does */
    int nthreads, rows_per_block, blocks_per_item;
    int any_range;         /* some thread found a range error (atomic) */
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

/* Thread t's share of one call, in PyTorch's order: project, scale q,
 * scores, masks, softmax, context, out-projection. Range errors go to *re;
 * a thread stops computing at its first one, but every thread passes every
 * barrier. */
static void fwd_part(struct fwd *f, int t, struct range_error *re)
{
    const struct att_params *p = f->p;
    const int L = p->L, S = p->S, E = p->E, H = p->H, d = E / H, nt = f->nthreads;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const int average = p->weights_mode == ATT_WEIGHTS_AVERAGE;
    int lo, hi;
    float qmax = 0.0f, kmax = 0.0f, vmax = 0.0f;

    /* 2. Projections, this thread's rows of N·L (N·S). Self-attention with
     *    packed weights is one product with 3E outputs, as PyTorch does.
     *    An inf or NaN is recomputed in double (att_fix_nonfinite). */
    share(p->N * L, t, nt, &lo, &hi);
    if (f->fused) {
        float *y = f->q + (size_t)lo * f->ldq;
        att_linear(y, f->ldq, f->qin + (size_t)lo * E, E, p->in_proj_weight, p->in_proj_bias,
                   hi - lo, E, 3 * E);
        /* kmax: the largest |q|, |k| or |v|, a bound on |k| */
        long long bad = att_fix_nonfinite(y, f->ldq, f->qin + (size_t)lo * E, E, p->in_proj_weight,
                                          (size_t)E, 1, p->in_proj_bias, hi - lo, E, 3 * E, &kmax);
        if (bad >= 0) /* the stream is the column's third */
            note_proj(f, re, bad, lo, 3 * E, (int)(bad % (3 * E)) / E, L);
        vmax = kmax;
    } else {
        for (int s = 0; s < 3; s++) {
            const int T = s == 0 ? L : S;
            const int K = s == 0 ? E : s == 1 ? p->kdim : p->vdim;
            const float *x = s == 0 ? f->qin : s == 1 ? f->kin : f->vin;
            float *y = s == 0 ? f->q : s == 1 ? f->k : f->v;
            share(p->N * T, t, nt, &lo, &hi);
            y += (size_t)lo * E, x += (size_t)lo * K;
            att_linear(y, E, x, K, att_proj_weight(p, s), att_proj_bias(p, s), hi - lo, K, E);
            note_proj(f, re, att_fix_nonfinite(y, E, x, K, att_proj_weight(p, s), (size_t)K, 1,
                                               att_proj_bias(p, s), hi - lo, K, E,
                                               s == 1 ? &kmax : s == 2 ? &vmax : NULL),
                      lo, E, s, T);
        }
        share(p->N * L, t, nt, &lo, &hi);
    }
    /* q·scale before q·kᵀ, as PyTorch scales q (q / sqrt(d) by default):
     * scores that only the unscaled product would overflow stay in range */
    for (int m = lo; m < hi && !re->stage; m++) {
        float *qr = f->q + (size_t)m * f->ldq;
        const float a = att_scale_row(qr, E, f->sqrt_d, f->scale);
        if (a == INFINITY)
            note_range(f, re, RANGE_QSCALED, m / L, -1, m % L);
        qmax = a > qmax ? a : qmax;
    }
    f->qmax[t] = qmax, f->kmax[t] = kmax, f->vmax[t] = vmax;
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    /* Every thread sees the same projection errors here (they were all
     * written before the barrier) and stops alike. */
    int stop = __atomic_load_n(&f->any_range, __ATOMIC_RELAXED);
    for (int u = 0; u < nt; u++) {
        qmax = f->qmax[u] > qmax ? f->qmax[u] : qmax;
        kmax = f->kmax[u] > kmax ? f->kmax[u] : kmax;
        vmax = f->vmax[u] > vmax ? f->vmax[u] : vmax;
    }
    const int check_scores = !((double)d * (double)qmax * (double)kmax <= (double)FLT_MAX / 2.0);
    /* a context is a weighted mean of v: it overflows only near FLT_MAX */
    const int check_context = !(vmax <= FLT_MAX / 2.0f);

    /* 3-5. Blocks of query rows, every head: block b ≡ t (mod nt). */
    float *scratch = f->scratch ? f->scratch + (size_t)t * f->rows_per_block * S : NULL;
    for (int b = t; b < p->N * f->blocks_per_item && !stop && !re->stage; b += nt) {
        const int n = b / f->blocks_per_item;
        const int i0 = (b % f->blocks_per_item) * f->rows_per_block;
        const int T = L - i0 < f->rows_per_block ? L - i0 : f->rows_per_block;
        float *acc = average ? f->weights + ((size_t)n * L + i0) * S : NULL;
        if (acc)
            memset(acc, 0, (size_t)T * S * sizeof *acc);
        for (int h = 0; h < H && !re->stage; h++) {
            const float *kh = f->k + (size_t)n * S * f->ldk + (size_t)h * d;
            const float *vh = f->v + (size_t)n * S * f->ldv + (size_t)h * d;
            float *qh = f->q + ((size_t)n * L + i0) * f->ldq + (size_t)h * d;
            float *sc = per_head ? f->weights + (((size_t)n * H + h) * L + i0) * S : scratch;
            /* 3. scores (T, S) = (q_h·scale) · k_hᵀ, strided views */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, S, d,
                        1.0f, qh, f->ldq, kh, f->ldk, 0.0f, sc, S);
            /* 4. masks and softmax per row; an inf or NaN score is
             *    recomputed in double, and the range rule applied */
            const int masked = p->mask_kind != ATT_MASK_NONE || p->key_padding_mask;
            const unsigned mxcsr = f->flush ? att_fpu_flush_subnormals() : 0;
            for (int r = 0; r < T; r++) {
                float *row = sc + (size_t)r * S;
                int add_float = 1;
                if (check_scores && !att_all_finite(row, (size_t)S)) { /* rare: IEEE here */
                    if (f->flush)
                        att_fpu_restore(mxcsr);
                    if (att_fix_scores(row, qh + (size_t)r * f->ldq, kh, f->ldk, d, p, n, h,
                                       i0 + r))
                        note_range(f, re, RANGE_SCORE, n, h, i0 + r);
                    if (f->flush)
                        att_fpu_flush_subnormals();
                    add_float = 0; /* att_fix_scores added the float mask */
                }
                if (masked)
                    att_mask_row(row, p, n, h, i0 + r, add_float);
                const int st = att_softmax_inplace(row, S, &f->subnormal[t]);
                if (st == ROW_POS_INF)
                    note_range(f, re, RANGE_SCORE, n, h, i0 + r);
                else if (st == ROW_NO_FINITE && !att_caller_blocks_row(p, n, h, i0 + r))
                    note_range(f, re, RANGE_ROW, n, h, i0 + r);
            }
            if (f->flush)
                att_fpu_restore(mxcsr);
            if (re->stage)
                break;
            if (acc)
                for (size_t x = 0; x < (size_t)T * S; x++)
                    acc[x] += sc[x];
            /* 5. context_h (T, d) = weights · v_h, written over q_h, which
             *    this block no longer needs */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, d, S,
                        1.0f, sc, S, vh, f->ldv, 0.0f, qh, f->ldq);
            long long bad = !check_context ? -1
                            : att_fix_nonfinite(qh, f->ldq, sc, S, vh, 1, (size_t)f->ldv, NULL,
                                                T, S, d, NULL);
            if (bad >= 0)
                note_range(f, re, RANGE_CONTEXT, n, h, i0 + (int)(bad / d));
        }
        if (acc) {
            const float invh = 1.0f / (float)H;
            for (size_t x = 0; x < (size_t)T * S; x++)
                acc[x] *= invh;
        }
    }
    if (nt > 1)
        pthread_barrier_wait(&f->barrier);
    if (__atomic_load_n(&f->any_range, __ATOMIC_RELAXED))
        return;

    /* 6. out = context · Woᵀ + bo, this thread's rows */
    share(p->N * L, t, nt, &lo, &hi);
    float *y = f->out + (size_t)lo * E;
    const float *x = f->q + (size_t)lo * f->ldq;
    att_linear(y, E, x, f->ldq, p->out_proj_weight, p->out_proj_bias, hi - lo, E, E);
    long long bad = att_fix_nonfinite(y, E, x, f->ldq, p->out_proj_weight, (size_t)E, 1,
                                      p->out_proj_bias, hi - lo, E, E, NULL);
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

/* x + PE for the three inputs of p (positional encoding), in[s] = what
 * stream s projects: in one pass, once per distinct input (self-attention
 * encodes one, and keeps the fused projection). A stream whose projection
 * is the identity gets it straight in its projection buffer proj[s], which
 * step 2 would only have copied the input to (step 2 adds the bias there,
 * in PyTorch's order: (x + PE) + b); a stream with weights reads an encoded
 * copy (copies[s]), shared by streams with the same input. Step 2 changes
 * the projection buffers, so a second run calls this again. */
static void encode_inputs(const struct att_params *p, float *const proj[3],
                          float *const copies[3], const float *in[3])
{
    const float *src[3] = {p->query, p->key, p->value};
    const int T[3] = {p->L, p->S, p->S}, D[3] = {p->E, p->kdim, p->vdim};
    for (int st = 0; st < 3; st++) {
        const size_t cnt = (size_t)p->N * T[st] * D[st];
        int same_id = -1, same_copy = -1; /* an earlier stream of this input */
        for (int r = st - 1; r >= 0; r--)
            if (src[r] == src[st] && T[r] == T[st] && D[r] == D[st]) {
                if (att_proj_weight(p, r))
                    same_copy = r;
                else
                    same_id = r;
            }
        float *dst = att_proj_weight(p, st) ? copies[st] : proj[st];
        if (att_proj_weight(p, st) && same_copy >= 0)
            dst = (float *)in[same_copy];
        else if (same_id >= 0 || same_copy >= 0)
            memcpy(dst, same_id >= 0 ? proj[same_id] : copies[same_copy], cnt * sizeof *dst);
        else
            att_positional_encoding_from(dst, src[st], p->N, T[st], D[st]);
        in[st] = dst;
    }
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

    const int N = p->N, L = p->L, S = p->S, E = p->E;
    const int per_head = p->weights_mode == ATT_WEIGHTS_PER_HEAD;
    const double macs = (double)N * (L + 2.0 * S) * E * E + 2.0 * N * L * (double)S * E;
    int nt = macs < ATT_PARALLEL_MIN_MACS ? 1 : att_threads_per_call();
    if (nt > N * L)
        nt = N * L;

    /* Row blocks: with per-head weights the scores go straight to the
     * caller's buffer, so blocks are big (one per thread and batch item);
     * otherwise they go to scratch, and blocks stay small enough that the
     * scratch is at most ATT_SCRATCH_FLOATS per thread: the (H, L, S)
     * scores never exist. */
    int rows = (L + nt - 1) / nt;
    if (!per_head) {
        int cap = ATT_SCRATCH_FLOATS / S;
        cap = cap < ATT_TILE_MIN ? ATT_TILE_MIN : cap > ATT_TILE ? ATT_TILE : cap;
        if (rows > cap)
            rows = cap;
    }

    /* 1. One workspace: q (becomes the context in place), k, v, score
     *    scratch, and copies of the inputs when positional encoding is on. */
    const size_t nq = (size_t)N * L * E, nk = (size_t)N * S * E;
    const size_t nscratch = per_head ? 0 : (size_t)nt * rows * S;
    const size_t nqin = p->positional_encoding ? nq : 0;
    const size_t nkin = p->positional_encoding ? (size_t)N * S * p->kdim : 0;
    const size_t nvin = p->positional_encoding ? (size_t)N * S * p->vdim : 0;
    size_t total = nq + 2 * nk + nscratch + nqin + nkin + nvin; /* sizes checked */
    float *ws = malloc(total * sizeof *ws);
    if (!ws)
        return att_fail(err, ATT_ENOMEM, "out of memory for a %zu-byte workspace",
                        total * sizeof *ws);
    struct fwd f = {
        .p = p, .out = out, .weights = weights,
        .q = ws, .k = ws + nq, .v = ws + nq + nk, .ldq = E, .ldk = E, .ldv = E,
        .scratch = nscratch ? ws + nq + 2 * nk : NULL,
        .qin = p->query, .kin = p->key, .vin = p->value,
        .scale = p->has_scale ? p->scale : 0.0f,
        .sqrt_d = p->has_scale ? 0.0f : (float)sqrt((double)(E / p->H)),
        .rows_per_block = rows, .blocks_per_item = (L + rows - 1) / rows,
    };
    /* x + PE: into copies for streams with weights, into the projection
     * buffers for identity ones (see encode_inputs) */
    float *const proj_bufs[3] = {f.q, f.k, f.v};
    float *const copy = ws + nq + 2 * nk + nscratch;
    float *const copies[3] = {copy, copy + nqin, copy + nqin + nkin};
    if (p->positional_encoding) {
        const float *in[3];
        encode_inputs(p, proj_bufs, copies, in);
        f.qin = in[0], f.kin = in[1], f.vin = in[2];
    }
    /* one tensor for query, key and value, of one length (a caller may pass
     * the same pointer with S != L: then the streams are not one product) */
    if (p->in_proj_weight && f.qin == f.kin && f.kin == f.vin && p->L == p->S) {
        f.fused = 1;
        f.k = ws + E, f.v = ws + 2 * E;
        f.ldq = f.ldk = f.ldv = 3 * E;
    }

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
            p->out_proj_weight ? att_max_abs(p->out_proj_weight, (size_t)E * E) : 1.0f;
        if (!att_flush_is_exact(S, E, vmax, womax)) {
            f.flush = 0;
            if (p->positional_encoding) { /* the first run changed them */
                const float *in[3];
                encode_inputs(p, proj_bufs, copies, in);
            }
            started = fwd_run(&f, nt, ft);
        }
    }
    att_fpu_restore(mxcsr);
    att_gate_leave(nt);
    free(ws);
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
