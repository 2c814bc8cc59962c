/* kernels.h -- the fast kernel's loops over rows, internal to core/.
 *
 * attention.c organises a call (workspace, threads, steps in PyTorch's
 * order); these do the work on one block of rows: a projection on OpenBLAS
 * (att_linear), the softmax of a row of scores, the range rule's
 * recomputation in double of whatever float32 made inf or NaN
 * (att_fix_nonfinite), the switch to flush-to-zero the softmax runs under,
 * soft-cap, and RoPE on rows of q and k (kernels.c). ALiBi, the masks and
 * the keys a row may see are band.c's (band.h). The vector loops come in
 * one copy per instruction set (AVX-512, AVX2, plain x86-64), picked when
 * the program loads; the Makefile builds both files at -O3, where GCC
 * vectorizes them.
 *
 * Shapes are row-major with explicit row strides (ld*: floats between rows),
 * so a head's columns of a fused (N·L, Dq + 2·Dkv) projection are a view,
 * not a copy, and so are the KV heads a group of query heads shares.
 * Details at each definition in kernels.c. Not a published API: only core/
 * includes this header.
 */
#ifndef ATT_KERNELS_H
#define ATT_KERNELS_H

#include <stddef.h>

#include "core/attention.h"

/* The vector loops' clones, for clang (14; `make fuzz` builds with it):
 * it names the dispatcher "<name>.ifunc" and emits no plain symbol, so a
 * caller in another file must see the attribute to link. GCC must not: it
 * would make a second dispatcher in the caller, naming clones it never made
 * there. */
#ifdef __clang__
#define ATT_CLONED __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATT_CLONED
#endif

/* y: (M, O), row stride ldy = x: (M, K), row stride ldx · Wᵀ + b;
 * W: (O, K) or NULL = identity (K == O); b: (O) or NULL = zero. */
void att_linear(float *y, int ldy, const float *x, int ldx, const float *W, const float *b,
                int M, int K, int O);

/* What att_softmax_inplace() found in a row. */
enum row_state {
    ROW_OK = 0,
    ROW_NO_FINITE, /* every score -inf: zeros written; blocked or overflowed */
    ROW_POS_INF,   /* a score +inf: the row is left as it was */
};

/* row: (S) scores → weights in place; returns enum row_state, and sets
 * *subnormal when a weight fell below 2^-126 (and was flushed). */
ATT_CLONED int att_softmax_inplace(float *row, int S, int *subnormal);

/* x: (n). Whether every element is finite; the largest |x[i]| (+inf when
 * one is inf or NaN). */
ATT_CLONED int att_all_finite(const float *x, size_t n);
ATT_CLONED float att_max_abs(const float *x, size_t n);

/* x: (n) q row in place, x / sqrt_d (sqrt_d > 0) or x·scale; returns max |x|
 * after, +inf when a value left float32's range. */
ATT_CLONED float att_scale_row(float *x, int n, float sqrt_d, float scale);

/* y: (M, O), row stride ldy, as att_linear made it from x: (M, K) and
 * w[o·wo + k·wk] (NULL = identity) + b: entries float32 left inf or NaN
 * recomputed in double. *amax (if not NULL) = max |y| of the finite ones.
 * Returns the index m·O + o of the first entry out of range, or -1. */
long long att_fix_nonfinite(float *y, int ldy, const float *x, int ldx, const float *w,
                            size_t wo, size_t wk, const float *b, int M, int K, int O,
                            float *amax);

/* x: (n) scores in place: c·tanh(x / c), c > 0 (soft-capping). */
ATT_CLONED void att_softcap_row(float *x, int n, float c);

/* x: rows lo … hi - 1 (stride ldx) of nh heads of d, row m at row m % T of
 * cs (att_rope_table): RoPE in place (p's style and rotary_dim). Returns
 * the first row where a value left float32's range, or -1. */
long long att_rope_rows(float *x, int ldx, int lo, int hi, int T, int nh, int d,
                        const struct att_params *p, const float *cs);

/* Stream s (0 q, 1 k, 2 v) of p: rows lo … hi - 1 of x (K floats each,
 * row 0 at x) projected into y (row stride ldy, row 0 at y), entries
 * float32 left inf or NaN recomputed in double (att_fix_nonfinite, *amax
 * as there), then RoPE from the table cs (att_rope_rows: nh heads of d, row
 * m at row m % T) when cs is not NULL. Returns the first row out of range,
 * or -1. attention.c's projections and a sequence's steps (kvcache.c). */
long long att_project_rows(float *y, int ldy, const float *x, int K, int s, int lo, int hi,
                           int T, int nh, int d, const struct att_params *p, const float *cs,
                           float *amax);

/* Whether flushing the softmax's subnormal weights moves no output by more
 * than 1e-6, for S keys, E features, max |v| and max |Wo|. */
int att_flush_is_exact(int S, int E, float vmax, float womax);

/* The MXCSR (0 without SSE); set FTZ and DAZ, returning the MXCSR to
 * restore; restore it. */
unsigned att_fpu_state(void);
unsigned att_fpu_flush_subnormals(void);
void att_fpu_restore(unsigned old);

/* kernels.c: a call's workspace (freed with free()). Past a few MiB it
 * asks for transparent huge pages: a fresh workspace is first touched on
 * every call, and at 4 KiB a page those faults cost a tenth of the compute
 * at L = 1024, E = 4096 (where THP is off, the request is ignored). */
void *att_workspace_alloc(size_t bytes);

#endif
