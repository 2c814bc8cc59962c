/* check.h -- what the fast kernel (attention.c, kernels.c) and the reference
 * (reference.c) share, internal to core/: the error contract's one writer,
 * the masks and projections as the caller wrote them, and the range rule's
 * error words, so that both paths validate, mask and fail alike.
 *
 * Every path starts the same way:
 *
 *     int rc = att_check(p, NULL, NULL, err);            // attention.h
 *     if (rc == ATT_OK)
 *         rc = att_check_buffers(out, weights, p, err);
 *
 * and reports a value that left float32's range by filling a struct
 * range_error and calling att_range_fail(). att_check() and
 * att_status_str() (public, in attention.h) live in check.c too.
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_CHECK_H
#define ATT_CHECK_H

#include "core/attention.h"

/* Fill err (when not NULL) with code and a printf-style message; returns
 * code, so a failure is one line: return att_fail(err, ATT_EPARAM, ...). */
int att_fail(struct att_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ATT_OK, or ATT_EPARAM when out, or weights for a weights_mode that
 * returns weights, is NULL. */
int att_check_buffers(const float *out, const float *weights, const struct att_params *p,
                      struct att_error *err);

/* The caller's masks, for query row i of batch n, head h: the float mask's
 * row (S floats), or NULL without one; and whether key j is blocked (key
 * padding, either causal mask, the window, bool mask, -inf in the float
 * mask). */
const float *att_float_mask_row(const struct att_params *p, int n, int h, int i);
int att_blocked(const struct att_params *p, int n, int h, int i, int j);

/* Projection weight (out, in) and bias (out) of stream 0 (q), 1 (k), 2 (v),
 * packed or separate; out is H·d for q, Hkv·d for k and v (variants.h);
 * NULL when absent (identity, zero). */
const float *att_proj_weight(const struct att_params *p, int which);
const float *att_proj_bias(const struct att_params *p, int which);

/* The range rule (attention.h, "Range"): the first value that left
 * float32's range, by stage of the computation. */
enum range_stage {
    RANGE_NONE = 0,
    RANGE_QPROJ, RANGE_KPROJ, RANGE_VPROJ, /* a projection beyond ±FLT_MAX */
    RANGE_QSCALED,                         /* q·scale beyond ±FLT_MAX */
    RANGE_SCORE,                           /* a score (+ float mask) > FLT_MAX */
    RANGE_ROW,                             /* every unmasked score < -FLT_MAX */
    RANGE_CONTEXT,                         /* weights·v beyond ±FLT_MAX */
    RANGE_OUTPUT,                          /* the output beyond ±FLT_MAX */
    RANGE_CANCELLED, /* not a range error: the cancel flag turned (blas.h) */
};

struct range_error {
    int stage;   /* enum range_stage; RANGE_NONE: no error */
    int n, h, i; /* batch item, head (-1: none), row (query or key position) */
};

/* Is x beyond float32's range (±FLT_MAX)? */
int att_out_of_range(double x);

/* Is a before b in (stage, n, i, h) order? RANGE_NONE is never before. */
int att_range_before(const struct range_error *a, const struct range_error *b);

/* ATT_ERANGE, with err's message naming re's stage and position
 * (RANGE_CANCELLED: ATT_ECANCELLED). */
int att_range_fail(struct att_error *err, const struct range_error *re);

#endif
