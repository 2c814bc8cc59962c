/* kvblocks.h -- the block layout of a sequence's cache (kvcache.h) and the
 * decode kernel that reads it, internal to core/: kvcache.c appends and
 * organises a step, decode.c attends a few query rows over the blocks.
 *
 * Block b holds tokens b·ATT_KV_BLOCK … for every KV head: the keys
 * (Hkv, ATT_KV_BLOCK, d), then the values (Hkv, ATT_KV_BLOCK, d), esize
 * bytes an element (4 FP32, 2 FP16/BF16). A KV head's rows of one block
 * are contiguous, so a tile of keys within a block is one run of memory.
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_KVBLOCKS_H
#define ATT_KVBLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "core/kvcache.h"

struct att_kv {
    int Hkv, d, dtype, esize;
    long long len;            /* tokens held */
    size_t nblocks, cap;      /* blocks allocated, slots of blk */
    unsigned char **blk;
    float kmax, vmax;         /* max |k|, |v| held: bounds the scores and contexts */
};

/* Key (which 0) or value (1) row of KV head g, token j. */
static inline const void *att_kv_row(const struct att_kv *c, int which, int g, long long j)
{
    const size_t B = ATT_KV_BLOCK, head = B * (size_t)c->d;
    const unsigned char *b = c->blk[j / ATT_KV_BLOCK];
    const size_t off = ((size_t)which * (size_t)c->Hkv + (size_t)g) * head +
                       (size_t)(j % ATT_KV_BLOCK) * (size_t)c->d;
    return b + off * (size_t)c->esize;
}

/* Elements in the cache's dtype to float32 (exact): n of them. */
void att_kv_to_f32(float *dst, const void *src, size_t n, int dtype);

/* float32 to FP16 / BF16 bits, rounding to nearest even; an x beyond the
 * type's finite range gives its infinity. */
uint16_t att_f32_to_f16(float x);
uint16_t att_f32_to_bf16(float x);

/* Most query rows the decode kernel takes; more go to att_forward(). */
#define ATT_DECODE_MAX_L 16

/* ctx: (L, H·d) = attention of q: (L, H·d), already rotated and scaled,
 * over the cache's pv->S keys, for the stateless view pv of the step
 * (kvcache.c: S = the cache length, query_position_offset, lower-right
 * causal, masks over the whole cache); no weights. The cache is split over
 * up to nt threads (flash decoding: partial maxima, sums and contexts per
 * thread, merged by log-sum-exp). Returns 0, or 1 when the answer needs
 * the general path: a row with no weight at all (blocked, or every score
 * -inf), a non-finite score, or out of memory. */
int att_decode(float *ctx, const float *q, const struct att_params *pv, const struct att_kv *c,
               int nt);

#endif
