/* band.c -- the variants of the fast kernel that act on positions: the
 * block of keys a block of query rows needs (everything outside it is never
 * computed), a row's scores finished in place (soft-cap, ALiBi, float mask,
 * blocked keys) in float32 or, where float32 left its range, in double.
 * The definitions (visible keys) are variants.c's, shared with the
 * reference. attention.c and kvattend.c call them; see band.h. */
#include "core/band.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "core/check.h"
#include "core/kernels.h"
#include "core/variants.h"

void att_row_init(struct att_row *r, const struct att_params *p, int n, int h, int i, int j0,
                  int W, float slope)
{
    r->n = n, r->h = h, r->i = i, r->j0 = j0, r->W = W, r->slope = slope;
    att_visible_keys(p, i, &r->lo, &r->hi);
    r->hi--; /* inclusive */
    r->pos = att_query_pos(p, i);
    /* ALiBi's bias is -slope·|pos - j|; every key of the row is shifted by
     * slope·dmin (dmin: the least distance in the band), which the softmax
     * does not see, so that a query far from key 0 (offset 1e5) does not
     * lose its scores' bits to a bias of 1e5·slope */
    r->dmin = r->pos < r->lo ? r->lo - r->pos : r->pos > r->hi ? r->pos - r->hi : 0;
    if (r->hi < r->lo)
        r->dmin = 0;
}

/* |pos - key| - dmin, exact (positions < 2^62, the result < 2^24 in use). */
static long long alibi_dist(const struct att_row *r, long long key)
{
    const long long dd = r->pos - key;
    return (dd < 0 ? -dd : dd) - r->dmin;
}

/* row[j] -= slope·alibi_dist(j0 + j) for the W keys of the buffer. With
 * B = pos - j0 that distance is |c - j| + e for small ints c and e: the
 * buffer holds only keys of the rows' bands, so it is below W plus the
 * band's distance from the buffer, whatever the position. The loop then
 * runs on ints and vectorizes. The band must not be empty. */
static void alibi_row(float *row, const struct att_row *r)
{
    const long long B = r->pos - r->j0;
    long long c = B, e = -r->dmin;
    if (B >= r->W) /* the query after every key: |W - j| = W - j */
        c = r->W, e = B - r->dmin - r->W;
    else if (B < 0) /* before every key: |-1 - j| = j + 1 */
        c = -1, e = -B - r->dmin - 1;
    const int ci = (int)c, ei = (int)e;
    const float slope = r->slope;
    for (int j = 0; j < r->W; j++)
        row[j] -= slope * (float)(abs(ci - j) + ei);
}

/* Keys j0 … j0 + W - 1 of row r that the band leaves out become -inf. */
static void block_outside_band(float *row, const struct att_row *r)
{
    int a = r->lo - r->j0, b = r->hi - r->j0 + 1; /* [a, b) stays */
    a = a < 0 ? 0 : a > r->W ? r->W : a;
    b = b < a ? a : b > r->W ? r->W : b;
    for (int j = 0; j < a; j++)
        row[j] = -INFINITY;
    for (int j = b; j < r->W; j++)
        row[j] = -INFINITY;
}

void att_row_finish(float *row, const struct att_params *p, const struct att_row *r)
{
    const int W = r->W, j0 = r->j0;
    if (p->softcap > 0.0f)
        att_softcap_row(row, W, p->softcap);
    if (r->slope != 0.0f && r->lo <= r->hi)
        alibi_row(row, r);
    const float *fm = att_float_mask_row(p, r->n, r->h, r->i);
    if (fm)
        for (int j = 0; j < W; j++)
            row[j] += fm[j0 + j];
    block_outside_band(row, r);
    if (p->mask_kind == ATT_MASK_BOOL) {
        const size_t plane = p->mask_ndim == 3 ? (size_t)r->n * p->H + r->h : 0;
        const uint8_t *m = p->bool_mask + (plane * p->L + r->i) * p->S + j0;
        for (int j = 0; j < W; j++)
            row[j] = m[j] ? -INFINITY : row[j];
    }
    if (p->key_padding_mask) {
        const uint8_t *m = p->key_padding_mask + (size_t)r->n * p->S + j0;
        for (int j = 0; j < W; j++)
            row[j] = m[j] ? -INFINITY : row[j];
    }
}

/* Is key `key` of row r blocked: outside its band, or by the caller's
 * masks (att_blocked)? */
static int row_blocks(const struct att_params *p, const struct att_row *r, int key)
{
    return key < r->lo || key > r->hi || att_blocked(p, r->n, r->h, r->i, key);
}

int att_row_fix(float *row, const float *qrow, const float *kh, int ldk, int d,
                const struct att_params *p, const struct att_row *r)
{
    const float *fm = att_float_mask_row(p, r->n, r->h, r->i);
    int bad = 0;
    for (int j = 0; j < r->W; j++) {
        const int key = r->j0 + j;
        if (row_blocks(p, r, key)) {
            row[j] = -INFINITY;
            continue;
        }
        const float *kr = kh + (size_t)key * ldk;
        double s = 0.0;
        for (int c = 0; c < d; c++)
            s += (double)qrow[c] * (double)kr[c];
        if (p->softcap > 0.0f)
            s = (double)p->softcap * tanh(s / (double)p->softcap);
        if (r->slope != 0.0f)
            s -= (double)r->slope * (double)alibi_dist(r, key);
        if (fm)
            s += (double)fm[key];
        bad |= s > (double)FLT_MAX;
        row[j] = s < -(double)FLT_MAX ? -INFINITY : (float)s;
    }
    return bad;
}

int att_row_caller_blocks(const struct att_params *p, const struct att_row *r)
{
    for (int key = r->lo < 0 ? 0 : r->lo; key <= r->hi; key++)
        if (!row_blocks(p, r, key))
            return 0;
    return 1;
}
