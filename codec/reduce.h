/* reduce.h -- the reduced weights (weights_top_k, weights_pool), their
 * output's shape and the weights limit, shared by both protocols
 * (codec/reduce.c). */
#ifndef CODEC_REDUCE_H
#define CODEC_REDUCE_H

#include <jansson.h>

#include "core/attention.h"
#include "codec/codec.h"
#include "lib/errors.h"

/* weights_top_k and weights_pool (the JSON values, NULL when absent) into
 * p: integers >= 1 (one beyond int means INT_MAX: k beyond S is S), at
 * most one, and only when need (the weights are asked for). prefix goes
 * before the names in messages ("" or "parameters."). 0, or -1 with err. */
int codec_weights_reduce(struct att_params *p, json_t *top_k, json_t *pool, int need,
                         const char *prefix, struct failure *err);

/* The shape of the weights output as r asks for it: [N,] [H,] then (L, S),
 * (L, k) for top-k (values; the indices have the same shape) or
 * (⌈L/p⌉, ⌈S/p⌉) pooled; *count its elements. Returns the rank. */
int codec_weights_shape(const struct codec_request *r, long long shape[4], size_t *count);

/* What the weights limit's message suggests, per protocol (full_hint below). */
#define CODEC_WEIGHTS_HINT \
    "ask for need_weights false, average_attn_weights true, weights_top_k or weights_pool"
#define CODEC_V2_WEIGHTS_HINT                                                               \
    "leave attention_weights out of outputs, or set need_weights false or "                \
    "average_attn_weights true, or ask for weights_top_k or weights_pool"

/* max_weights_elements against the weights output r asks for (full: N·H·L·S,
 * or the reduced count). full_hint ends the message for full weights. */
int codec_weights_limit(const struct codec_request *r, const struct codec_limits *lim,
                        const char *full_hint, struct failure *err);

#endif
