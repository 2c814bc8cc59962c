/* variants.c -- the helpers the fast kernel and the reference share for the
 * attention variants: head layout, positions, visible keys, RoPE angles and
 * rotation, ALiBi slopes and bias; and the positional encoding of a call's
 * inputs (att_encode_inputs). See variants.h. */
#include "core/variants.h"

#include <math.h>
#include <string.h>

int att_head_dim(const struct att_params *p)
{
    return p->head_dim > 0 ? p->head_dim : p->E / p->H;
}

int att_num_kv_heads(const struct att_params *p)
{
    return p->Hkv > 0 ? p->Hkv : p->H;
}

int att_kv_head(const struct att_params *p, int h)
{
    return h / (p->H / att_num_kv_heads(p));
}

int att_q_width(const struct att_params *p)
{
    return p->H * att_head_dim(p);
}

int att_kv_width(const struct att_params *p)
{
    return att_num_kv_heads(p) * att_head_dim(p);
}

long long att_query_pos(const struct att_params *p, int i)
{
    return p->query_position_offset + i;
}

/* Narrow [lo, hi] (inclusive, long long) to [a, b]. */
static void narrow(long long *lo, long long *hi, long long a, long long b)
{
    if (a > *lo)
        *lo = a;
    if (b < *hi)
        *hi = b;
}

void att_visible_keys(const struct att_params *p, int i, int *lo, int *hi)
{
    long long a = 0, b = (long long)p->S - 1;
    if (p->mask_kind == ATT_MASK_CAUSAL)
        narrow(&a, &b, 0, i);
    else if (p->mask_kind == ATT_MASK_CAUSAL_LOWER_RIGHT)
        narrow(&a, &b, 0, (long long)i + p->S - p->L);
    if (p->has_window) {
        /* positions < 2^53 and |left|, |right| < 2^31: no overflow */
        const long long pos = att_query_pos(p, i);
        if (p->window_left >= 0)
            narrow(&a, &b, pos - p->window_left, b);
        if (p->window_right >= 0)
            narrow(&a, &b, a, pos + p->window_right);
    }
    if (b < a) { /* none: a >= 0 always, b <= S - 1 */
        *lo = *hi = 0;
        return;
    }
    *lo = (int)a;
    *hi = (int)(b + 1);
}

/* ---------------------------------------------------------------------- */
/* RoPE                                                                    */

int att_rope_dim(const struct att_params *p)
{
    if (p->rope_style == ATT_ROPE_NONE)
        return 0;
    return p->rope_rotary_dim > 0 ? p->rope_rotary_dim : att_head_dim(p);
}

double att_rope_theta(const struct att_params *p)
{
    return p->rope_theta > 0.0 ? p->rope_theta : ATT_ROPE_THETA_DEFAULT;
}

/* 2π to 64 bits (x86-64 long double); more digits are rounded away where
 * long double is narrower, and used where it is wider. */
#define TWO_PI_L 6.283185307179586476925286766559005768L

/* freq_i = theta^(-2i/rd) = exp(-(2i/rd)·ln theta) in long double: the
 * exponent's error is a few 2^-64 relative, which the product keeps. */
static long double rope_freq(long double ln_theta, int i, int rotary_dim)
{
    return expl(-(long double)(2 * i) / (long double)rotary_dim * ln_theta);
}

/* cos and sin of pos·freq, the product reduced mod 2π in long double. */
static void rope_cos_sin(double *c, double *s, long long pos, long double freq)
{
    const double r = (double)remainderl((long double)pos * freq, TWO_PI_L);
    *c = cos(r);
    *s = sin(r);
}

void att_rope_angles(double *cosv, double *sinv, long long pos, int rotary_dim,
                     double theta)
{
    const long double lt = logl((long double)theta);
    for (int i = 0; i < rotary_dim / 2; i++)
        rope_cos_sin(&cosv[i], &sinv[i], pos, rope_freq(lt, i, rotary_dim));
}

void att_rope_table(float *cs, long long pos0, int npos, int rotary_dim, double theta)
{
    const int half = rotary_dim / 2;
    const long double lt = logl((long double)theta);
    for (int i = 0; i < half; i++) {
        const long double freq = rope_freq(lt, i, rotary_dim);
        for (int t = 0; t < npos; t++) {
            double c, s;
            rope_cos_sin(&c, &s, pos0 + t, freq);
            cs[(size_t)t * rotary_dim + i] = (float)c;
            cs[(size_t)t * rotary_dim + half + i] = (float)s;
        }
    }
}

/* Index of the two entries of pair i. */
static void rope_pair(int style, int i, int half, int *a, int *b)
{
    if (style == ATT_ROPE_INTERLEAVED)
        *a = 2 * i, *b = 2 * i + 1;
    else
        *a = i, *b = i + half;
}

void att_rope_rotate(float *x, const float *cs, int rotary_dim, int style)
{
    const int half = rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        int a, b;
        rope_pair(style, i, half, &a, &b);
        const float c = cs[i], s = cs[half + i], xa = x[a], xb = x[b];
        x[a] = xa * c - xb * s;
        x[b] = xb * c + xa * s;
    }
}

void att_rope_rotate_d(double *x, const double *cosv, const double *sinv, int rotary_dim,
                       int style)
{
    const int half = rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        int a, b;
        rope_pair(style, i, half, &a, &b);
        const double xa = x[a], xb = x[b];
        x[a] = xa * cosv[i] - xb * sinv[i];
        x[b] = xb * cosv[i] + xa * sinv[i];
    }
}

/* ---------------------------------------------------------------------- */
/* ALiBi                                                                   */

/* The paper's reference code (ofirpress/attention_with_linear_biases,
 * get_slopes): for n = 2^k heads, slope_h = start^(h+1) with start =
 * 2^(-8/n); otherwise the slopes of the largest power of two c <= H, then
 * every other slope of 2c heads (indices 0, 2, 4, ... of get_slopes(2c),
 * i.e. 2^(-8(2m+1)/(2c))) for the H - c heads left. */
void att_alibi_slopes(float *slopes, int H)
{
    int c = 1;
    while (c * 2 <= H)
        c *= 2;
    for (int h = 0; h < H && h < c; h++)
        slopes[h] = (float)exp2(-8.0 * (h + 1) / c);
    for (int m = 0; c + m < H; m++)
        slopes[c + m] = (float)exp2(-8.0 * (2 * m + 1) / (2 * c));
}

double att_alibi_bias(double slope, long long qpos, int j)
{
    const long long dist = qpos >= j ? qpos - j : (long long)j - qpos;
    return -slope * (double)dist;
}

/* x + PE for the three inputs of p (positional encoding), in[s] = what
 * stream s projects: in one pass, once per distinct input, into copies[s]
 * (self-attention encodes one, shared by the three streams, and keeps the
 * fused projection). Step 2 then reads the copies as it would the caller's
 * inputs: a stream whose projection is the identity borrows its copy (k, v)
 * or copies it to scale it (q), and adds a bias there, in PyTorch's order:
 * (x + PE) + b. Nothing changes the copies, so they hold for a second run. */
void att_encode_inputs(const struct att_params *p, float *const copies[3], const float *in[3])
{
    const float *src[3] = {p->query, p->key, p->value};
    const int T[3] = {p->L, p->S, p->S}, D[3] = {p->E, p->kdim, p->vdim};
    for (int st = 0; st < 3; st++) {
        int same = -1; /* an earlier stream of this input */
        for (int r = st - 1; r >= 0 && same < 0; r--)
            if (src[r] == src[st] && T[r] == T[st] && D[r] == D[st])
                same = r;
        if (same >= 0) {
            in[st] = in[same];
        } else {
            att_positional_encoding_from(copies[st], src[st], p->N, T[st], D[st]);
            in[st] = copies[st];
        }
    }
}
