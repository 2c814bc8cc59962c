/* variants.h -- what the fast kernel (attention.c, kernels.c) and the
 * reference (reference.c) share about the attention variants (attention.h,
 * "Variants"), internal to core/: the head layout with its defaults
 * resolved, the positions, the RoPE angles and rotation, the ALiBi bias,
 * and which keys the causal masks and the window let a query see. Both
 * paths call these, so they agree by construction on everything but
 * float32 rounding; the goldens (tests/golden_variants/, written from the
 * definitions in PyTorch float64) check the definitions themselves.
 *
 * Everything here assumes p passed att_check(). Per query row the fast
 * kernel asks att_visible_keys() for the keys the causal masks and the
 * window leave (one interval: whole blocks outside it are never computed),
 * and att_blocked() (check.h) for the rest (bool mask, key padding, -inf).
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_VARIANTS_H
#define ATT_VARIANTS_H

#include "core/attention.h"

/* Query positions are offset + i < ATT_MAX_POSITION (2^53): exact in a
 * double, so RoPE angles and ALiBi distances are exact products of exact
 * integers. att_check() refuses offsets beyond it. */
#define ATT_MAX_POSITION (1LL << 53)
#define ATT_ROPE_THETA_DEFAULT 10000.0

/* ---- Head layout --------------------------------------------------------- */

/* d: head_dim, or E / H when head_dim is 0. */
int att_head_dim(const struct att_params *p);
/* Hkv: num_kv_heads, or H when 0. */
int att_num_kv_heads(const struct att_params *p);
/* The KV head query head h reads: h / (H / Hkv) (contiguous groups). */
int att_kv_head(const struct att_params *p, int h);
/* Widths of the projections: q is (·, H·d), k and v are (·, Hkv·d). */
int att_q_width(const struct att_params *p);
int att_kv_width(const struct att_params *p);

/* ---- Positions ----------------------------------------------------------- */

/* Position of query i: query_position_offset + i. Key j is at j. */
long long att_query_pos(const struct att_params *p, int i);

/* The keys query i may see as far as the causal masks (by index) and the
 * window (by position) go: lo <= j < hi, clamped to [0, S); *lo >= *hi when
 * none. The bool mask, key padding and -inf in a float mask may block more
 * (att_blocked() in check.h says all of it, key by key). */
void att_visible_keys(const struct att_params *p, int i, int *lo, int *hi);

/* ---- RoPE ---------------------------------------------------------------- */

/* rotary_dim resolved (0 = d), or 0 when p has no RoPE. */
int att_rope_dim(const struct att_params *p);
/* theta resolved (0 = ATT_ROPE_THETA_DEFAULT). */
double att_rope_theta(const struct att_params *p);

/* cosv, sinv: (rotary_dim / 2): cos and sin of pos·freq_i, freq_i =
 * theta^(-2i / rotary_dim). The angle is formed and reduced mod 2π in long
 * double (x86-64: 64-bit significand), then cos/sin in double: absolute
 * error about |angle|·2^-62 + 2^-52, i.e. 1e-13 rad at positions of 10^6
 * (a double product would give 1e-10; float32, as Hugging Face computes
 * it, 0.06 rad). Costs one expl per i and a remainderl, cos and sin per
 * (pos, i). */
void att_rope_angles(double *cosv, double *sinv, long long pos, int rotary_dim,
                     double theta);

/* cs: (npos, rotary_dim) float: row t holds cos(·) in its first
 * rotary_dim / 2 entries and sin(·) in the rest, for position pos0 + t,
 * from att_rope_angles() rounded once to float. */
void att_rope_table(float *cs, long long pos0, int npos, int rotary_dim, double theta);

/* Rotate the first rotary_dim entries of one head vector x in place (the
 * rest pass through): style ATT_ROPE_HALF pairs (i, i + rotary_dim/2),
 * ATT_ROPE_INTERLEAVED pairs (2i, 2i+1); pair i with (a, b) becomes
 * (a·cos_i − b·sin_i, b·cos_i + a·sin_i). cs is one att_rope_table() row;
 * cosv/sinv as att_rope_angles() fills them. */
void att_rope_rotate(float *x, const float *cs, int rotary_dim, int style);
void att_rope_rotate_d(double *x, const double *cosv, const double *sinv, int rotary_dim,
                       int style);

/* ---- ALiBi --------------------------------------------------------------- */

/* -slope·|qpos − j|, in double (exact distance: positions < 2^53). */
double att_alibi_bias(double slope, long long qpos, int j);

/* att_alibi_slopes() (attention.h) lives in variants.c too. */

/* x + PE for the three inputs of a call (attention.c step 1), each
 * distinct input once; in[s] is what stream s then projects. */
void att_encode_inputs(const struct att_params *p, float *const copies[3], const float *in[3]);

#endif
