/* band.h -- the variants of the fast kernel that act on positions
 * (core/band.c): the keys a row of scores may see, and the row finished in
 * place (soft-cap, ALiBi, float mask, blocked keys). attention.c and
 * kvattend.c call them. Not a published API: only core/ includes this header.
 */
#ifndef ATT_BAND_H
#define ATT_BAND_H

#include "core/attention.h"

/* One row of scores in a buffer: query i of batch n, head h; the buffer
 * holds keys j0 … j0 + W - 1. */
struct att_row {
    int n, h, i;
    int j0, W;
    int lo, hi;         /* the keys causal and window leave (att_visible_keys),
                           inclusive; hi < lo: none */
    float slope;        /* ALiBi slope of head h, 0 = none */
    long long pos;      /* the query's position */
    long long dmin;     /* ALiBi distance every key is shifted by */
};
void att_row_init(struct att_row *r, const struct att_params *p, int n, int h, int i, int j0,
                  int W, float slope);

/* row: (W) scores q·kᵀ of r, in place: soft-cap, ALiBi, + float mask, and
 * -inf for blocked keys (band, bool mask, key padding). */
void att_row_finish(float *row, const struct att_params *p, const struct att_row *r);

/* The same in double from qrow: (d) and kh: (S, d), row stride ldk (key 0),
 * for a row float32 left inf or NaN. Returns 1 when an unblocked score is
 * above FLT_MAX. */
int att_row_fix(float *row, const float *qrow, const float *kh, int ldk, int d,
                const struct att_params *p, const struct att_row *r);

/* Does the caller block every key of row r (band and masks)? */
int att_row_caller_blocks(const struct att_params *p, const struct att_row *r);

#endif
