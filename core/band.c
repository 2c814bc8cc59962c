/* band.c -- the variants of the fast kernel that act on positions: which
 * keys a query row can see (causal by index, a window by position), the
 * block of keys a block of query rows needs (everything outside it is never
 * computed), a row's scores finished in place (soft-cap, ALiBi, float mask,
 * blocked keys) in float32 or, where float32 left its range, in double, and
 * RoPE's tables and rotation. attention.c calls them; see kernels.h. */
#include "core/kernels.h"

#include <float.h>
#include <math.h>

#include "core/check.h"

/* Keys that causal (either alignment) and the window let query row i see:
 * [*lo, *hi] within [0, S), empty when *hi < *lo. Both bounds grow with i,
 * so a block of rows i0 … i1 needs keys [lo(i0), hi(i1)] only. */
void att_row_band(const struct att_params *p, int i, int *lo, int *hi)
{
    long long l = 0, h = p->S - 1;
    if (p->mask_kind == ATT_MASK_CAUSAL && i < h)
        h = i;
    else if (p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT && (long long)i + p->S - p->L < h)
        h = (long long)i + p->S - p->L;
    if (p->has_window) {
        const long long pos = p->query_position_offset + i;
        if (p->window_left >= 0 && pos - p->window_left > l)
            l = pos - p->window_left;
        if (p->window_right >= 0 && pos + p->window_right < h)
            h = pos + p->window_right;
    }
    if (l > p->S)
        l = p->S;
    if (h < -1)
        h = -1;
    *lo = (int)l, *hi = (int)h;
}

void att_row_init(struct att_row *r, const struct att_params *p, int n, int h, int i, int j0,
                  int W, float slope)
{
    r->n = n, r->h = h, r->i = i, r->j0 = j0, r->W = W, r->slope = slope;
    att_row_band(p, i, &r->lo, &r->hi);
    r->pos = p->query_position_offset + i;
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
    if (r->slope != 0.0f)
        for (int j = 0; j < W; j++)
            row[j] -= r->slope * (float)alibi_dist(r, (long long)j0 + j);
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

/* ---------------------------------------------------------------------- */
/* RoPE                                                                    */

void att_rope_table(float *cs, float *sn, long long pos0, int T, int rd, double theta)
{
    const int half = rd / 2;
    for (int r = 0; r < half; r++) {
        const double freq = pow(theta, -2.0 * r / rd);
        for (int t = 0; t < T; t++) {
            /* m·freq in double: exact to 1e-10 rad at m = 1e6 */
            const double angle = (double)(pos0 + t) * freq;
            cs[(size_t)t * half + r] = (float)cos(angle);
            sn[(size_t)t * half + r] = (float)sin(angle);
        }
    }
}

long long att_rope_rows(float *x, int ldx, int lo, int hi, int T, int nh, int d,
                        const struct att_params *p, const float *cs, const float *sn)
{
    const int rd = p->rope_rotary_dim ? p->rope_rotary_dim : d, half = rd / 2;
    const int inter = p->rope_style == ATT_ROPE_INTERLEAVED;
    for (int m = lo; m < hi; m++) {
        const float *c = cs + (size_t)(m % T) * half, *s = sn + (size_t)(m % T) * half;
        for (int hh = 0; hh < nh; hh++) {
            float *xh = x + (size_t)m * ldx + (size_t)hh * d;
            for (int r = 0; r < half; r++) {
                const int i1 = inter ? 2 * r : r, i2 = inter ? 2 * r + 1 : r + half;
                const double a = (double)xh[i1], b = (double)xh[i2];
                const double y1 = a * (double)c[r] - b * (double)s[r];
                const double y2 = b * (double)c[r] + a * (double)s[r];
                if (att_out_of_range(y1) || att_out_of_range(y2))
                    return m;
                xh[i1] = (float)y1, xh[i2] = (float)y2;
            }
        }
    }
    return -1;
}
