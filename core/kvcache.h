/* kvcache.h -- a sequence's key/value cache and one step of attention over
 * it (the sequences of Triton's sequence extension; the api keeps one cache
 * per sequence and layer, core/ knows nothing of ids, layers, models or
 * protocols).
 *
 *     struct att_kv *c = att_kv_new(Hkv, d, ATT_KV_F16);
 *     ...per step: p as the stateless request of this step (below)
 *     size_t out_len, w_len;
 *     if (att_step_check(&p, c, &out_len, &w_len, &err) == ATT_OK)
 *         att_step(out, w, &p, c, &err);   // appends S rows, attends L
 *     ...
 *     att_kv_free(c);
 *
 * The cache holds, per KV head, the projected key and value rows (RoPE
 * applied to the keys at their positions 0, 1, 2, ...) in the cache's
 * dtype, in blocks of ATT_KV_BLOCK tokens: appending never copies what is
 * there, and memory is allocated a block at a time (att_kv_bytes counts
 * the blocks allocated).
 *
 * A step is the stateless request p with N = 1 whose key and value hold
 * only this step's S rows (S >= L >= 1), with:
 *   - the projections, H, Hkv, head_dim, RoPE, scale, soft-cap, ALiBi,
 *     window, masks and the weights' forms as in p;
 *   - query_position_offset: set by att_step itself to len + S - L, where
 *     len is the cache length before the step (p's own must be 0);
 *   - a causal mask (ATT_MASK_CAUSAL or ATT_MASK_CAUSAL_LOWER_RIGHT) means
 *     lower-right over the whole cache;
 *   - a tensor mask (bool or float) and key_padding_mask span the whole
 *     cache after the append: (L, len + S) / (len + S);
 *   - out (L, E) and the weights over len + S keys, as att_check() would
 *     size them for that stateless request.
 * The answer equals the stateless answer with key/value = every step's rows
 * so far (within float32 rounding: a split of the cache across threads
 * changes the last bits); with an F16/BF16 cache, the stateless answer on
 * keys and values rounded to that dtype after projection and RoPE.
 *
 * On any error (ATT_EPARAM/ESHAPE/ETOOBIG, or ATT_ERANGE for a projected
 * key or value beyond the dtype's finite range, naming the row) nothing is
 * appended: the cache is as before the call.
 *
 * Where it lives: kvcache.c (the cache, the checks, a step: projections as
 * attention.c makes them, the append, the out-projection), kvattend.c (the
 * cache kernel: up to ATT_KV_ATTEND_MAX_L query rows without weights read
 * the cache once per row, the H/Hkv query heads of a KV head together,
 * split into runs of tokens over att_parallel()'s threads with a log-sum-exp
 * merge), kvblocks.h
 * (the block layout). A step with weights, more rows, or scores near
 * float32's limits goes to att_forward() over a float32 copy of the cache,
 * which applies the range rule (attention.h, "Range") as the stateless
 * request does. Not thread-safe per cache: one step at a time on a cache
 * (different caches may step concurrently).
 */
#ifndef CORE_KVCACHE_H
#define CORE_KVCACHE_H

#include <stddef.h>

#include "core/attention.h"

/* The cache's dtypes, in one list: the enum and the names the requests
 * use (kv_cache_dtype's choices, options/options.c) and errors say. */
#define ATT_KV_DTYPES(X) X(ATT_KV_F32, "FP32") X(ATT_KV_F16, "FP16") X(ATT_KV_BF16, "BF16")

#define ATT_KV_ENUM_(e, name) e,
#define ATT_KV_NAME_(e, name) name,
enum att_kv_dtype { ATT_KV_DTYPES(ATT_KV_ENUM_) ATT_KV_NDTYPES };
/* The names, in the enum's order, as an initializer's elements. */
#define ATT_KV_DTYPE_NAMES ATT_KV_DTYPES(ATT_KV_NAME_)

/* Tokens per block of a KV head's cache. */
#define ATT_KV_BLOCK 256

struct att_kv;

/* A new, empty cache for Hkv heads of width d; NULL when out of memory. */
struct att_kv *att_kv_new(int Hkv, int d, enum att_kv_dtype dtype);
void att_kv_free(struct att_kv *c);

/* Tokens held. */
long long att_kv_len(const struct att_kv *c);
/* Bytes of the blocks allocated now, and what they would be after growing
 * to tokens (for a budget checked before the step). */
size_t att_kv_bytes(const struct att_kv *c);
size_t att_kv_bytes_at(const struct att_kv *c, long long tokens);

/* Check a step as att_check() checks a request (see above for what p
 * means), and report the floats att_step() writes to out and weights. */
int att_step_check(const struct att_params *p, const struct att_kv *c, size_t *out_len,
                   size_t *weights_len, struct att_error *err);

/* att_step_check(), then append this step's S projected key/value rows and
 * attend the L queries over the whole cache. ATT_OK, or an error with
 * nothing appended. */
int att_step(float *out, float *weights, const struct att_params *p, struct att_kv *c,
             struct att_error *err);

/* The same in two calls, for a caller that must know a step will be
 * applied before it commits anything else (a budget, an eviction):
 * att_step_begin() checks the step, projects its rows and checks that they
 * fit the cache's dtype, changing nothing; att_step_finish() appends and
 * attends (errors after begin: out of memory, an output beyond float32).
 * The cache must not change between the two. *s is freed by finish, or by
 * att_step_cancel() (NULL: nothing); p's tensors are borrowed until then. */
struct att_step;
int att_step_begin(struct att_step **s, const struct att_params *p, const struct att_kv *c,
                   struct att_error *err);
int att_step_finish(float *out, float *weights, struct att_step *s, struct att_kv *c,
                    struct att_error *err);
void att_step_cancel(struct att_step *s);

/* Where a cache is now, to go back to it: a caller that applied a step and
 * must undo it (a batch of steps, all or nothing) rolls the cache back to
 * the mark taken before; the blocks beyond it are freed. Nothing else may
 * have changed the cache in between. */
struct att_kv_mark {
    long long len;
    float kmax, vmax;
};
struct att_kv_mark att_kv_mark(const struct att_kv *c);
void att_kv_rollback(struct att_kv *c, struct att_kv_mark m);

#endif
