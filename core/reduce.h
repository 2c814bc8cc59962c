/* reduce.h -- the reduced weights outputs (attention.h: weights_top_k,
 * weights_pool), internal to core/: the fast kernel (attention.c) hands
 * each softmax row here as it is made, so the full (N, H, L, S) weights
 * never exist; the reference (reference.c) reduces its full weights with
 * att_reduce_plain().
 *
 *   top-k: per row, the k largest weights (k ≤ S), in descending order,
 *   equal values by the lower key index; a heap of k slots per thread, one
 *   pass over the row. The values are the row's own floats, bit for bit.
 *
 *   pool: per p × p tile, the mean of its cells (edge tiles: of the cells
 *   they have), summed in double. Rows are added to their tile row as they
 *   come; a thread owns whole tile rows (a work item of `span` query rows,
 *   a multiple of p), so no two threads add to one tile.
 *
 * Usage in attention.c, per thread t:
 *     top-k: att_reduce_row() for every finished row;
 *     pool:  att_reduce_item_begin(), att_reduce_row() for the item's rows,
 *            att_reduce_item_end().
 * A row is given as the W weights of keys jlo … jlo + W - 1; the others
 * are 0 (blocks a causal mask or a window skips).
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_REDUCE_H
#define ATT_REDUCE_H

#include <stdint.h>

#include "core/attention.h"

enum att_reduce_kind { ATT_REDUCE_NONE = 0, ATT_REDUCE_TOPK, ATT_REDUCE_POOL };

struct att_topk_slot {
    float v;
    int32_t j;
};

struct att_reduce {
    int kind;           /* enum att_reduce_kind */
    int k;              /* top-k: min(weights_top_k, S) */
    int pool;           /* pool: p */
    int N, heads, L, S; /* heads: H per head, 1 averaged */
    int LT, ST;         /* pool: ⌈L/p⌉, ⌈S/p⌉ */
    int span;           /* pool: query rows per work item, a multiple of p */
    float *vals;        /* (N, heads, L, k) or (N, heads, LT, ST): the caller's */
    int32_t *idx;       /* (N, heads, L, k), after the values; NULL for pool */
    struct att_topk_slot *heap; /* nthreads × k */
    double *tiles;      /* nthreads × (span / p) × ST */
    size_t tiles_per_thread;
    int base[ATT_MAX_THREADS]; /* pool: first row of thread t's item */
};

/* The kind p asks for (att_check has validated p). */
int att_reduce_kind(const struct att_params *p);

/* Set r up for p (validated) writing into weights (att_check's layout),
 * with nt threads and query-row blocks of `rows` rows (the pool's span is
 * a multiple of p near rows, at least p). Returns 0, or -1 when out of
 * memory. A call without a reduction only zeroes r. */
int att_reduce_init(struct att_reduce *r, const struct att_params *p, float *weights, int nt,
                    int rows);
void att_reduce_deinit(struct att_reduce *r);

/* Work items per batch item (and head, when per head) for the pool. */
int att_reduce_items(const struct att_reduce *r);

/* Thread t's row i of batch n, output head h (0 when averaged): the W
 * weights of keys jlo …, the rest 0. row may be NULL when W is 0. */
void att_reduce_row(struct att_reduce *r, int t, int n, int h, int i, const float *row, int jlo,
                    int W);

/* Pool: thread t starts the item whose rows begin at i0 (zeroed tile
 * sums), and ends the one of rows i0 … i1 - 1 (writes its means). */
void att_reduce_item_begin(struct att_reduce *r, int t, int i0);
void att_reduce_item_end(struct att_reduce *r, int t, int n, int h, int i0, int i1);

/* The same reduction of full weights ((N, heads, L, S), as att_forward
 * writes them without one) into dst, with plain loops. Returns 0, or -1
 * when out of memory. */
int att_reduce_plain(float *dst, const float *full, const struct att_params *p);

#endif
