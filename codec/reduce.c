/* reduce.c -- the reduced weights options (weights_top_k,
 * weights_pool) and the weights output's shape and limit, which POST
 * /attention (codec/request.c, codec/response.c) and v2 (codec/v2*.c)
 * share; see codec/reduce.h. */
#include "codec/reduce.h"
#include "codec/variants.h"

#include <limits.h>
#include <stdio.h>

/* One option: an integer >= 1 (2.0 refused); beyond int it means the same
 * as INT_MAX (k beyond S is S, a tile beyond L and S is one tile). */
static int reduce_int(json_t *v, const char *name, int *out, struct failure *err)
{
    long long x = 0;
    const enum json_int k = json_int_value(v, &x);
    if (k == JSON_INT_HUGE)
        x = INT_MAX;
    else if (k != JSON_INT_OK || x < 1)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an integer >= 1", name);
    *out = x > INT_MAX ? INT_MAX : (int)x;
    return 0;
}

int codec_weights_reduce(struct att_params *p, json_t *top_k, json_t *pool, int need,
                         const char *prefix, struct failure *err)
{
    char tn[64], pn[64];
    codec_join(tn, sizeof tn, prefix, opt_name(OPT_WEIGHTS_TOP_K));
    codec_join(pn, sizeof pn, prefix, opt_name(OPT_WEIGHTS_POOL));
    if (top_k && pool)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s and %s cannot be used together: ask "
                         "for one reduction of the weights", tn, pn);
    if ((top_k || pool) && !need)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s reduces the attention weights, but "
                         "%sneed_weights is false: leave one out", top_k ? tn : pn, prefix);
    if (top_k)
        return reduce_int(top_k, tn, &p->weights_top_k, err);
    if (pool)
        return reduce_int(pool, pn, &p->weights_pool, err);
    return 0;
}

int codec_weights_shape(const struct codec_request *r, long long shape[4], size_t *count)
{
    const struct att_params *p = &r->p;
    int nd = 0;
    if (r->batched)
        shape[nd++] = p->N;
    if (p->weights_mode == ATT_WEIGHTS_PER_HEAD)
        shape[nd++] = p->H;
    *count = r->weights_len;
    if (p->weights_top_k > 0) {
        shape[nd++] = p->L, shape[nd++] = p->weights_top_k < p->S ? p->weights_top_k : p->S;
        *count = r->weights_len / 2; /* values, then as many indices */
    } else if (p->weights_pool > 0) {
        shape[nd++] = (p->L - 1) / p->weights_pool + 1;
        shape[nd++] = (p->S - 1) / p->weights_pool + 1;
    } else {
        shape[nd++] = p->L, shape[nd++] = p->S;
    }
    return nd;
}

int codec_weights_limit(const struct codec_request *r, const struct codec_limits *lim,
                        const char *full_hint, struct failure *err)
{
    long long shape[4];
    size_t count;
    codec_weights_shape(r, shape, &count);
    if (count <= (unsigned long long)lim->max_weights_elements)
        return 0;
    if (r->p.weights_top_k > 0 || r->p.weights_pool > 0)
        return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s attention weights would have %zu "
                         "elements, more than %lld (max_weights_elements); ask for a %s",
                         r->p.weights_top_k > 0 ? "top-k" : "pooled", count,
                         lim->max_weights_elements,
                         r->p.weights_top_k > 0 ? "smaller weights_top_k"
                                               : "larger weights_pool");
    return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "attention weights would have %zu elements, "
                     "more than %lld (max_weights_elements); %s", count,
                     lim->max_weights_elements, full_hint);
}
