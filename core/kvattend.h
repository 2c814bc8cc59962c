/* kvattend.h -- the cache kernel (core/kvattend.c): a few query rows attended
 * over a sequence's cache (kvblocks.h), and the conversions between the
 * cache's dtypes and float32. kvcache.c calls them. Not a published API:
 * only core/ includes this header.
 */
#ifndef CORE_KVATTEND_H
#define CORE_KVATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/kvblocks.h"

/* Elements in the cache's dtype to float32 (exact): n of them. */
void att_kv_to_f32(float *dst, const void *src, size_t n, int dtype);

/* float32 to FP16 / BF16 bits, rounding to nearest even; an x beyond the
 * type's finite range gives its infinity. */
uint16_t att_f32_to_f16(float x);
uint16_t att_f32_to_bf16(float x);

/* Most query rows the cache kernel takes; more go to att_forward(). */
#define ATT_KV_ATTEND_MAX_L 16

/* ctx: (L, H·d) = attention of q: (L, H·d), already rotated and scaled,
 * over the cache's pv->S keys, for the stateless view pv of the step
 * (kvcache.c: S = the cache length, query_position_offset, lower-right
 * causal, masks over the whole cache); no weights. The cache is split into
 * up to nt runs of tokens, run by att_parallel() (flash decoding: partial maxima, sums and contexts per
 * thread, merged by log-sum-exp). Returns 0, or 1 when the answer needs
 * the general path: a row with no weight at all (blocked, or every score
 * -inf), a non-finite score, or out of memory. */
int att_kv_attend(float *ctx, const float *q, const struct att_params *pv,
                  const struct att_kv *c, int nt);

#endif
