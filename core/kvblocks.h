/* kvblocks.h -- the block layout of a sequence's cache (kvcache.h) and the
 * cache kernel that reads it, internal to core/: kvcache.c appends and
 * organises a step, kvattend.c attends a few query rows over the blocks
 * (kvattend.h).
 *
 * Block b holds tokens b·ATT_KV_BLOCK … for every KV head: the keys
 * (Hkv, ATT_KV_BLOCK, d), then the values (Hkv, ATT_KV_BLOCK, d), esize
 * bytes an element (4 FP32, 2 FP16/BF16). A KV head's values of one block
 * are rows, one after the other. Its keys are in tiles of ATT_KV_TILE
 * tokens, each stored transposed, (d, ATT_KV_TILE): element x of the
 * tile's tokens side by side, so that the cache kernel's q·Kᵀ takes a
 * vector of keys at each x with one load and no sums across a vector.
 *
 * Not a published API: only core/ includes this header.
 */
#ifndef ATT_KVBLOCKS_H
#define ATT_KVBLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/kvcache.h"

struct att_kv {
    int Hkv, d, dtype, esize;
    long long len;            /* tokens held */
    size_t nblocks, cap;      /* blocks allocated, slots of blk */
    unsigned char **blk;
    float kmax, vmax;         /* max |k|, |v| held: bounds the scores and contexts */
};

/* Tokens per tile of keys (above); divides ATT_KV_BLOCK. */
#define ATT_KV_TILE 32

/* The start of KV head g's region of keys (which 0) or values (1) in the
 * block holding token j. */
static inline const unsigned char *att_kv_region(const struct att_kv *c, int which, int g,
                                               long long j)
{
    const size_t head = (size_t)ATT_KV_BLOCK * (size_t)c->d;
    return c->blk[j / ATT_KV_BLOCK] +
           ((size_t)which * (size_t)c->Hkv + (size_t)g) * head * (size_t)c->esize;
}

/* Value row of KV head g, token j: d elements. */
static inline const void *att_kv_vrow(const struct att_kv *c, int g, long long j)
{
    return att_kv_region(c, 1, g, j) + (size_t)(j % ATT_KV_BLOCK) * (size_t)c->d * (size_t)c->esize;
}

/* The tile of keys of KV head g holding token j: (d, ATT_KV_TILE), the
 * key of token j in column j % ATT_KV_TILE. */
static inline const void *att_kv_ktile(const struct att_kv *c, int g, long long j)
{
    const size_t t = (size_t)(j % ATT_KV_BLOCK) / ATT_KV_TILE;
    return att_kv_region(c, 0, g, j) + t * ATT_KV_TILE * (size_t)c->d * (size_t)c->esize;
}

/* An FP16 value as float32 (exact). */
static inline float att_f16_to_f32(uint16_t h)
{
    const uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m·2^-24, exact */
        const float v = (float)m * 0x1p-24f;
        return s ? -v : v;
    }
    const uint32_t bits = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* FP16 or BF16 bits (dtype) as float32 (exact). */
static inline float att_half_to_f32(uint16_t h, int dtype)
{
    if (dtype == ATT_KV_F16)
        return att_f16_to_f32(h);
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element i at base, in the cache's dtype, as float32. */
static inline float att_kv_elem(const void *base, size_t i, int dtype)
{
    return dtype == ATT_KV_F32 ? ((const float *)base)[i]
                               : att_half_to_f32(((const uint16_t *)base)[i], dtype);
}

#endif
