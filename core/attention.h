/* attention.h -- multi-head attention, float32, as PyTorch's
 * nn.MultiheadAttention(batch_first=True) computes it.
 *
 * The core/ layer (the rule: scripts/layers.sh) owns the numbers: the
 * fast kernel and its float64 reference, the variants, the positional
 * encoding, the reduced weights. It includes only core/ and is the
 * header every other layer reaches it through.
 *
 * Where it lives: attention.c (one call: workspace, threads, steps),
 * kernels.c (its loops over rows), check.c (validation, the range rule's
 * errors), reference.c (the plain reference), blas.c (OpenBLAS and the
 * threading policy: att_blas_select_kernels, att_init), posenc.c (the
 * positional encoding), reduce.c (the top-k and pooled weights),
 * kvcache.c and kvattend.c (a sequence's cache and its steps: kvcache.h).
 * Only this header and kvcache.h are the API.
 *
 * This module knows numbers only: no HTTP, no JSON. A caller fills a
 * `struct att_params` with borrowed pointers to row-major float arrays and
 * their sizes, provides output buffers, and calls att_forward():
 *
 *     struct att_params p;
 *     att_params_init(&p);
 *     p.N = 1; p.L = 4; p.S = 4; p.E = 8; p.kdim = 8; p.vdim = 8; p.H = 2;
 *     p.query = q; p.key = k; p.value = v;
 *     struct att_error err;
 *     if (att_forward(out, weights, &p, &err) != ATT_OK)
 *         fprintf(stderr, "%s: %s\n", att_status_str(err.code), err.msg);
 *
 * att_check() validates parameters and computes output sizes without doing
 * any work, so a caller can size (and limit) its buffers first; a caller
 * that does may then call att_forward_checked(), which skips the second
 * validation (a scan of the whole float mask).
 *
 * Semantics, in PyTorch's order (multi_head_attention_forward):
 *   q = query·Wqᵀ + bq, k = key·Wkᵀ + bk, v = value·Wvᵀ + bv (PyTorch Linear
 *   layout, out × in). An absent matrix is the identity (its dimensions must
 *   allow it), an absent bias is zero. Head h uses columns h·d … (h+1)·d,
 *   d = E / H. q is scaled first: q / sqrt(d) (float32 division, as
 *   PyTorch), or q·scale with a custom scale; then scores = q_h·k_hᵀ
 *   (+ float mask), blocked positions take no weight, softmax over S,
 *   context_h = weights_h·v_h, and out = concat(context)·Woᵀ + bo. A row
 *   whose every key the caller blocks (causal, bool mask, key padding, -inf
 *   in a float mask) gets all-zero weights (PyTorch gives NaN) and a zero
 *   context. Averaged weights are the mean over all H heads, a head that
 *   blocks the row adding zeros (the row then sums to live heads / H).
 *
 * Variants, in this order (each optional): head h of q uses KV head
 *   h / (H / Hkv) (grouped-query; K and V are never copied per head);
 *   RoPE rotates q_h and k_h at their positions; q is scaled; scores =
 *   q_h·k_hᵀ; soft-cap c·tanh(s / c); + ALiBi bias; + float mask; the
 *   blocked keys (causal by index, bool mask, key padding, window by
 *   position) take no weight. Blocks of the score matrix that a causal mask
 *   or a window blocks whole are never computed (zeros in the weights).
 *
 * Range: finite inputs can still leave float32's range. The rule, on the
 * values computed in float64 in the order above: a projection (q and k
 * also after RoPE), the scaled q, a context or an output beyond ±FLT_MAX is
 * ATT_ERANGE; a score (soft-capped, plus ALiBi and float mask) of a key the
 * caller does not block above FLT_MAX is ATT_ERANGE; one below -FLT_MAX
 * takes weight 0 as long as another unblocked score of its row is finite,
 * and a row whose every unblocked score is below -FLT_MAX is ATT_ERANGE (it
 * is not a masked row). The fast kernel computes in float32 and recomputes
 * in double any value float32 made inf or NaN, so it follows the same rule
 * (up to values within float32 rounding of ±FLT_MAX).
 *
 * Subnormals: inputs, projections, scores, weights·v and the out-projection
 * are IEEE (a value of 1e-39 through a weight of 1e38 is 0.1). The softmax
 * alone (with the float mask's addition) runs with FTZ/DAZ, for speed, so a
 * weight below 2^-126 becomes 0 —
 * unless S·2^-126·max|v|·E·max|Wo| > 1e-6 (the flush could then move an
 * output by 1 % of its tolerance), where the call is computed again with
 * IEEE weights, down to e^-103 (2^-149). See att_flush_is_exact() in
 * kernels.c.
 *
 * Accuracy: see docs/numerics.md "Accuracy". Results are bit-identical for a given
 * configuration (att_init() threads, batch, fused or separate projections)
 * and input, whichever thread calls; across configurations they differ only
 * by float32 rounding, within the stated tolerance.
 *
 * Threading: att_forward() is reentrant and may be called from many threads
 * at once; it allocates its own workspace per call. OpenBLAS is global
 * state, so the process sets the threading once with att_init() before the
 * first call. Policy (see docs/operations.md "Threading"):
 *   - we link Debian's pthread build of OpenBLAS; the serial build has given
 *     wrong sgemm results under concurrent calls, so if att_init() finds a
 *     serial build it serialises BLAS calls behind a mutex;
 *   - the pthread build crashes past 128 concurrently calling threads, so at
 *     most ATT_MAX_CONCURRENT threads are inside the core at once (a call on
 *     T threads counts T); further callers wait;
 *   - OpenBLAS runs single-threaded; a call of ATT_PARALLEL_MIN_MACS
 *     multiply-adds or more splits its own work over att_init()'s thread
 *     count (projection rows, blocks of query rows), a smaller one runs on
 *     the calling thread alone (att_last_call_threads() tells which);
 *     OpenBLAS picks other kernels for other block sizes, so the split
 *     changes the last bits (see Accuracy above);
 *   - callers should keep workers × threads ≤ cores.
 */
#ifndef ATT_ATTENTION_H
#define ATT_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "core/blas.h" /* att_blas_select_kernels, att_init, ATT_MAX_THREADS */

/* Below this many multiply-adds, N·(L + 2S)·E² + 2·N·L·S·E, a call runs on
 * one thread: starting threads would cost more than it saves. */
#define ATT_PARALLEL_MIN_MACS 4000000.0

/* Status codes: 0 is success, negatives are failures. */
enum att_status {
    ATT_OK = 0,
    ATT_EPARAM = -1,    /* a parameter is out of its range */
    ATT_ESHAPE = -2,    /* tensor shapes do not agree */
    ATT_ETOOBIG = -3,   /* a size overflows size_t or int */
    ATT_ENOMEM = -4,    /* an allocation failed */
    ATT_ERANGE = -5,    /* finite inputs, but the result leaves float32 (Range) */
    ATT_ECANCELLED = -6, /* the caller's cancel flag turned (att_cancel_set, blas.h) */
};

struct att_error {
    int code;      /* enum att_status */
    char msg[160]; /* names the parameter at fault */
};

/* Name of a status code ("ok", "invalid_parameter", "shape_mismatch", ...). */
const char *att_status_str(int code);

enum att_mask_kind {
    ATT_MASK_NONE = 0,
    ATT_MASK_CAUSAL, /* upper-left: key j > query i blocked (by index; any L, S) */
    ATT_MASK_BOOL,   /* uint8_t, nonzero = blocked */
    ATT_MASK_FLOAT,  /* float added to the scores; -inf blocks */
    ATT_MASK_CAUSAL_LOWER_RIGHT, /* key j > i + S - L blocked (by index) */
};

enum att_rope_style {
    ATT_ROPE_NONE = 0,
    ATT_ROPE_HALF,        /* GPT-NeoX / HF Llama: pairs (i, i + rotary_dim/2) */
    ATT_ROPE_INTERLEAVED, /* GPT-J / Meta: pairs (2i, 2i + 1) */
};

enum att_weights_mode {
    ATT_WEIGHTS_NONE = 0, /* no weights: the (N, H, L, S) buffer is never made */
    ATT_WEIGHTS_PER_HEAD, /* weights: (N, H, L, S) */
    ATT_WEIGHTS_AVERAGE,  /* weights: (N, L, S), mean over heads */
};

/* The projection weights of struct att_params, in this order; with Dq = H·d
 * and Dkv = Hkv·d (both E when Hkv = H and d = E/H). att_weight_name() is
 * each one's name in a request (in_proj_weight, ...), as
 * nn.MultiheadAttention names it. Q, K and V follow one another (stream
 * 0, 1, 2 of the projections). */
enum att_weight {
    ATT_W_IN,       /* in_proj_weight (Dq + 2·Dkv, E); needs kdim == vdim == E */
    ATT_W_Q,        /* q_proj_weight (Dq, E) or NULL = identity (Dq == E) */
    ATT_W_K,        /* k_proj_weight (Dkv, kdim) or NULL = identity (Dkv == kdim) */
    ATT_W_V,        /* v_proj_weight (Dkv, vdim) or NULL = identity (Dkv == vdim) */
    ATT_W_IN_BIAS,  /* in_proj_bias (Dq + 2·Dkv): q, k, v blocks; or NULL = zero */
    ATT_W_OUT,      /* out_proj_weight (E, Dq) or NULL = identity (Dq == E) */
    ATT_W_OUT_BIAS, /* out_proj_bias (E) or NULL = zero */
    ATT_NWEIGHTS
};
const char *att_weight_name(enum att_weight w);

/* Every pointer is borrowed for the duration of the call; none is freed. */
struct att_params {
    int N, L, S;         /* batch, target length, source length */
    int E, kdim, vdim;   /* embed dim, key dim, value dim */
    int H;               /* number of (query) heads */
    int Hkv;             /* key/value heads; 0 = H. H % Hkv == 0; query head h
                            uses KV head h / (H / Hkv) (contiguous groups) */
    int head_dim;        /* d; 0 = E / H (then E % H == 0) */

    const float *query;  /* (N, L, E) */
    const float *key;    /* (N, S, kdim) */
    const float *value;  /* (N, S, vdim) */

    /* The projections (enum att_weight): either packed w[ATT_W_IN], or any
     * of w[ATT_W_Q], w[ATT_W_K], w[ATT_W_V], or none; NULL = absent. */
    const float *w[ATT_NWEIGHTS];
    /* The element count of each array of w as the caller holds it (0 with
     * a NULL pointer). att_check() refuses (ATT_ESHAPE) an array whose count
     * is not what N, E, kdim, vdim, H, Hkv and head_dim make of its shape
     * (att_weight_shapes), so a caller whose parameters contradict its
     * weights gets an error, never a read past them. */
    size_t w_len[ATT_NWEIGHTS];

    int has_scale;       /* 0: scale = 1/sqrt(E/H) */
    float scale;         /* > 0 and finite when has_scale */

    int mask_kind;       /* enum att_mask_kind */
    int mask_ndim;       /* 2: (L, S) or 3: (N·H, L, S), index n·H + h */
    int mask_shape[3];   /* declared shape, checked against L, S, N·H */
    const uint8_t *bool_mask;  /* ATT_MASK_BOOL */
    const float *float_mask;   /* ATT_MASK_FLOAT */

    const uint8_t *key_padding_mask; /* (N, S), nonzero = ignored; or NULL */

    int weights_mode;        /* enum att_weights_mode */
    /* Reduced weights, instead of the (N, H, L, S) or (N, L, S) rows (at
     * most one; weights_mode must not be NONE; 0 = none). The full weights
     * are never made: each softmax row (or head-averaged row) is reduced as
     * it is computed, with O(rows of a block × S) scratch per thread.
     * weights_top_k = k: per row, the min(k, S) largest weights in
     *   descending order, equal values by the lower key index, as
     *   (N, H, L, k) floats followed by the same count of int32_t key
     *   indices in the same buffer (att_check's weights_len counts both);
     *   the values are bit for bit those the full weights would hold.
     * weights_pool = p: the mean of each p × p tile of every (L, S) plane,
     *   (N, H, ⌈L/p⌉, ⌈S/p⌉) floats; an edge tile averages the cells it has
     *   (summed in double, one float32 rounding).
     * H is 1 with ATT_WEIGHTS_AVERAGE: the heads are averaged first. */
    int weights_top_k, weights_pool;
    int positional_encoding; /* 1: add sinusoidal PE to query, key, value */

    /* Variants (docs/variants.md). Positions: query i is at
     * query_position_offset + i, key j at j; RoPE, ALiBi and the window use
     * them; the causal masks are by index. */
    long long query_position_offset; /* >= 0 */
    int rope_style;          /* enum att_rope_style: rotate q and k after the
                                projection, per head */
    double rope_theta;       /* > 0; 0 = 10000. freq_i = theta^(-2i/rotary_dim) */
    int rope_rotary_dim;     /* even, 2..d; 0 = d: the first rotary_dim dims rotate */
    const float *alibi_slopes; /* (H) or NULL: -slope_h·|q_pos - k_pos| added to
                                  the (soft-capped) scaled scores */
    int has_window;          /* window_left/right below apply */
    int window_left, window_right; /* >= -1: the query at position p sees keys
                                  p - left <= j <= p + right; -1 = unlimited */
    float softcap;           /* > 0: scores s -> c·tanh(s / c) after scaling, before
                                any bias or mask; 0 = none */
};

/* The shape each weight array of att_params must have under p's sizes (N
 * aside): rank 2 (d0, d1), or rank 1 (d0) for the biases; att_check()
 * refuses an array whose w_len is not d0·max(d1, 1). Needs H >= 1 (and
 * E % H == 0 when head_dim is 0). */
struct att_weight_shape {
    int ndim;
    long long d0, d1;
};
void att_weight_shapes(struct att_weight_shape s[ATT_NWEIGHTS], const struct att_params *p);

/* ALiBi slopes for H heads, as the paper (and BLOOM, MPT) define them:
 * for n = the largest power of two <= H, slope_h = 2^(-8(h+1)/n), h < n;
 * the remaining heads take the odd-indexed slopes of 2n heads. */
void att_alibi_slopes(float *slopes, int H);

/* Zero every field: no weights, no masks, default scale, no outputs. */
void att_params_init(struct att_params *p);

/* Validate p and report the number of floats att_forward() will write to
 * out (*out_len) and to weights (*weights_len, 0 when not requested).
 * Returns ATT_OK or a failure with err filled in. */
int att_check(const struct att_params *p, size_t *out_len, size_t *weights_len,
              struct att_error *err);

/* The fast kernel, on OpenBLAS: att_check(), then att_forward_checked().
 * out: (N, L, E); weights: (N, H, L, S), (N, L, S) or NULL per weights_mode.
 * Returns ATT_OK or a failure with err filled in (err may be NULL). */
int att_forward(float *out, float *weights, const struct att_params *p,
                struct att_error *err);

/* att_forward() without its att_check(), for a caller that has validated p
 * once already (a server sizing its buffers with att_check()): p must have
 * passed att_check(), and neither p nor the float mask it points to may
 * have changed since; otherwise the behaviour is undefined. The results,
 * status codes and messages are those of att_forward(), bit for bit; the
 * output buffers are still checked (ATT_EPARAM when missing). */
int att_forward_checked(float *out, float *weights, const struct att_params *p,
                        struct att_error *err);

/* Threads the calling thread's last att_forward() or att_forward_checked()
 * computed on: 1 below ATT_PARALLEL_MIN_MACS, else up to att_init()'s
 * count (never more than N·L, nor than the concurrency gate grants); 0 when
 * that call failed before computing, or before the first call. Thread-local;
 * for tests and diagnostics. */
int att_last_call_threads(void);

/* Plain loops with double accumulation; same contract as att_forward().
 * Slow; for tests and benchmarks. */
int att_forward_ref(float *out, float *weights, const struct att_params *p,
                    struct att_error *err);

/* Add the sinusoidal positional encoding to x in place.
 * x: (N, T, D); PE(pos, 2i) = sin(pos / 10000^(2i/D)),
 * PE(pos, 2i+1) = cos(pos / 10000^(2i/D)). */
void att_add_positional_encoding(float *x, int N, int T, int D);

/* The same written elsewhere: dst = src + PE, in one pass (src may be dst). */
void att_positional_encoding_from(float *dst, const float *src, int N, int T, int D);

#endif
