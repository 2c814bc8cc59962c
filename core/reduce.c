/* reduce.c -- top-k and pooled attention weights, a row at a time; see
 * reduce.h. */
#include "core/reduce.h"

#include <stdlib.h>
#include <string.h>

int att_reduce_kind(const struct att_params *p)
{
    if (p->weights_mode == ATT_WEIGHTS_NONE)
        return ATT_REDUCE_NONE;
    return p->weights_top_k > 0 ? ATT_REDUCE_TOPK
           : p->weights_pool > 0 ? ATT_REDUCE_POOL : ATT_REDUCE_NONE;
}

int att_reduce_init(struct att_reduce *r, const struct att_params *p, float *weights, int nt,
                    int rows)
{
    memset(r, 0, sizeof *r);
    r->kind = att_reduce_kind(p);
    if (!r->kind)
        return 0;
    r->N = p->N, r->L = p->L, r->S = p->S;
    r->heads = p->weights_mode == ATT_WEIGHTS_PER_HEAD ? p->H : 1;
    r->vals = weights;
    if (r->kind == ATT_REDUCE_TOPK) {
        r->k = p->weights_top_k < p->S ? p->weights_top_k : p->S;
        r->idx = (int32_t *)(weights + (size_t)r->N * r->heads * r->L * r->k);
        r->heap = malloc((size_t)nt * r->k * sizeof *r->heap);
        return r->heap ? 0 : -1;
    }
    const int pl = p->weights_pool;
    r->pool = pl;
    r->LT = (p->L - 1) / pl + 1, r->ST = (p->S - 1) / pl + 1; /* pl may be INT_MAX */
    r->span = pl < rows ? pl * (rows / pl) : pl;
    r->tiles_per_thread = (size_t)(r->span / pl) * r->ST;
    r->tiles = malloc((size_t)nt * r->tiles_per_thread * sizeof *r->tiles);
    return r->tiles ? 0 : -1;
}

void att_reduce_deinit(struct att_reduce *r)
{
    free(r->heap);
    free(r->tiles);
    r->heap = NULL, r->tiles = NULL;
}

int att_reduce_items(const struct att_reduce *r)
{
    return (r->L - 1) / r->span + 1;
}

/* Is slot a worse than slot b: smaller, or equal with a higher key? */
static int worse(struct att_topk_slot a, struct att_topk_slot b)
{
    return a.v < b.v || (a.v == b.v && a.j > b.j);
}

/* Restore the heap (worst at the top) below slot i of n. */
static void sift_down(struct att_topk_slot *hp, int n, int i)
{
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && worse(hp[c + 1], hp[c]))
            c++;
        if (!worse(hp[c], hp[i]))
            return;
        const struct att_topk_slot tmp = hp[i];
        hp[i] = hp[c], hp[c] = tmp;
        i = c;
    }
}

/* The k best of keys 0 … S - 1 (value of key j: row[j - jlo] inside
 * jlo … jlo + W - 1, else 0), best first, into vals and idx. */
static void topk_row(float *vals, int32_t *idx, struct att_topk_slot *hp, int k, int S,
                     const float *row, int jlo, int W)
{
    /* 1. the first k keys, made a heap */
    for (int j = 0; j < k; j++)
        hp[j] = (struct att_topk_slot){j >= jlo && j < jlo + W ? row[j - jlo] : 0.0f, j};
    for (int i = k / 2 - 1; i >= 0; i--)
        sift_down(hp, k, i);
    /* 2. the rest in key order: a later key wins only by a larger value */
    for (int j = k; j < S; j++) {
        const float v = j >= jlo && j < jlo + W ? row[j - jlo] : 0.0f;
        if (v > hp[0].v) {
            hp[0] = (struct att_topk_slot){v, j};
            sift_down(hp, k, 0);
        }
    }
    /* 3. heapsort: the worst goes last, so the best ends up first */
    for (int n = k - 1; n > 0; n--) {
        const struct att_topk_slot tmp = hp[0];
        hp[0] = hp[n], hp[n] = tmp;
        sift_down(hp, n, 0);
    }
    for (int x = 0; x < k; x++)
        vals[x] = hp[x].v, idx[x] = hp[x].j;
}

void att_reduce_item_begin(struct att_reduce *r, int t, int i0)
{
    r->base[t] = i0;
    memset(r->tiles + (size_t)t * r->tiles_per_thread, 0, r->tiles_per_thread * sizeof *r->tiles);
}

void att_reduce_row(struct att_reduce *r, int t, int n, int h, int i, const float *row, int jlo,
                    int W)
{
    if (r->kind == ATT_REDUCE_TOPK) {
        const size_t o = (((size_t)n * r->heads + h) * r->L + i) * r->k;
        topk_row(r->vals + o, r->idx + o, r->heap + (size_t)t * r->k, r->k, r->S, row, jlo, W);
        return;
    }
    /* pool: each cell into its tile of the row's tile row */
    const int pl = r->pool;
    double *tr = r->tiles + (size_t)t * r->tiles_per_thread +
                 (size_t)((i - r->base[t]) / pl) * r->ST;
    for (int j = jlo; j < jlo + W;) {
        const int tj = j / pl, end = (tj + 1) * pl < jlo + W ? (tj + 1) * pl : jlo + W;
        double s = 0.0;
        for (; j < end; j++)
            s += (double)row[j - jlo];
        tr[tj] += s;
    }
}

/* Cells of tile (ti, tj) of a T × U matrix in p × p tiles. */
static double tile_cells(int ti, int tj, int T, int U, int pl)
{
    const int a = T - ti * pl < pl ? T - ti * pl : pl;
    const int b = U - tj * pl < pl ? U - tj * pl : pl;
    return (double)a * (double)b;
}

void att_reduce_item_end(struct att_reduce *r, int t, int n, int h, int i0, int i1)
{
    const int pl = r->pool;
    const double *tiles = r->tiles + (size_t)t * r->tiles_per_thread;
    for (int ti = i0 / pl; ti * pl < i1; ti++) {
        const double *tr = tiles + (size_t)(ti - i0 / pl) * r->ST;
        float *o = r->vals + (((size_t)n * r->heads + h) * r->LT + ti) * r->ST;
        for (int tj = 0; tj < r->ST; tj++)
            o[tj] = (float)(tr[tj] / tile_cells(ti, tj, r->L, r->S, pl));
    }
}

int att_reduce_plain(float *dst, const float *full, const struct att_params *p)
{
    const int heads = p->weights_mode == ATT_WEIGHTS_PER_HEAD ? p->H : 1;
    const int L = p->L, S = p->S;
    const size_t planes = (size_t)p->N * heads;
    if (att_reduce_kind(p) == ATT_REDUCE_TOPK) {
        const int k = p->weights_top_k < S ? p->weights_top_k : S;
        struct att_topk_slot *hp = malloc((size_t)k * sizeof *hp);
        if (!hp)
            return -1;
        int32_t *idx = (int32_t *)(dst + planes * L * k);
        for (size_t row = 0; row < planes * L; row++)
            topk_row(dst + row * k, idx + row * k, hp, k, S, full + row * S, 0, S);
        free(hp);
        return 0;
    }
    const int pl = p->weights_pool, LT = (L - 1) / pl + 1, ST = (S - 1) / pl + 1;
    for (size_t pn = 0; pn < planes; pn++)
        for (int ti = 0; ti < LT; ti++)
            for (int tj = 0; tj < ST; tj++) {
                double s = 0.0;
                for (int i = ti * pl; i < L && i < (ti + 1) * pl; i++)
                    for (int j = tj * pl; j < S && j < (tj + 1) * pl; j++)
                        s += (double)full[(pn * L + i) * S + j];
                dst[(pn * LT + ti) * ST + tj] = (float)(s / tile_cells(ti, tj, L, S, pl));
            }
    return 0;
}
