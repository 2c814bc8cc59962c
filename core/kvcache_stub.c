/* kvcache_stub.c -- A TEMPORARY STUB of core/kvcache.h, to be replaced by
 * the real cache (core/kvcache.c) at merge: drop this file and its line in
 * the Makefile. It keeps the raw key and value rows of every step (FP32
 * whatever the dtype) and runs att_forward() on the stateless request with
 * key/value = all rows so far; att_kv_bytes counts what the real cache's
 * blocks would take. Written only so the sessions' api can be tested end
 * to end before the real one lands. */
#include "core/kvcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct att_kv {
    int Hkv, d;
    enum att_kv_dtype dtype;
    int kdim, vdim; /* of the raw rows, fixed by the first step */
    long long len;
    float *k, *v;   /* (cap, kdim), (cap, vdim) */
};

struct att_kv *att_kv_new(int Hkv, int d, enum att_kv_dtype dtype)
{
    struct att_kv *c = calloc(1, sizeof *c);
    if (c)
        c->Hkv = Hkv, c->d = d, c->dtype = dtype;
    return c;
}

void att_kv_free(struct att_kv *c)
{
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c);
}

long long att_kv_len(const struct att_kv *c) { return c->len; }
enum att_kv_dtype att_kv_dtype_of(const struct att_kv *c) { return c->dtype; }
int att_kv_head_dim(const struct att_kv *c) { return c->d; }

size_t att_kv_bytes_at(const struct att_kv *c, long long tokens)
{
    const size_t blocks = (size_t)((tokens + ATT_KV_BLOCK - 1) / ATT_KV_BLOCK);
    return blocks * ATT_KV_BLOCK * (size_t)c->Hkv * (size_t)c->d * 2 *
           (c->dtype == ATT_KV_F32 ? 4 : 2);
}

size_t att_kv_bytes(const struct att_kv *c)
{
    return att_kv_bytes_at(c, c->len);
}

/* x rounded to the cache's dtype (nearest, ties to even). The stub keeps
 * the raw rows, so this is the contract's rounding only for identity key
 * and value projections without RoPE. */
static float round_to(enum att_kv_dtype dt, float x)
{
    if (dt == ATT_KV_F16)
        return (float)(_Float16)x;
    if (dt == ATT_KV_BF16) {
        unsigned u;
        memcpy(&u, &x, sizeof u);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x, &u, sizeof x);
    }
    return x;
}

static int fail(struct att_error *err, int code, const char *msg)
{
    if (err) {
        err->code = code;
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return code;
}

/* The stateless request of this step, over k and v (len + S rows). */
static int whole(struct att_params *w, const struct att_params *p, const struct att_kv *c,
                 const float *k, const float *v, struct att_error *err)
{
    if (p->N != 1 || p->L < 1 || p->S < p->L)
        return fail(err, ATT_EPARAM, "a step needs N = 1 and S >= L >= 1");
    if (p->query_position_offset)
        return fail(err, ATT_EPARAM, "a step's query_position_offset must be 0");
    if (c->len && (p->kdim != c->kdim || p->vdim != c->vdim))
        return fail(err, ATT_ESHAPE, "kdim or vdim differs from the cache's");
    *w = *p;
    w->S = (int)(c->len + p->S);
    w->key = k, w->value = v;
    w->query_position_offset = c->len + p->S - p->L;
    if (w->mask_kind == ATT_MASK_CAUSAL)
        w->mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    return ATT_OK;
}

int att_step_check(const struct att_params *p, const struct att_kv *c, size_t *out_len,
                   size_t *weights_len, struct att_error *err)
{
    struct att_params w;
    int rc = whole(&w, p, c, p->key, p->value, err);
    return rc ? rc : att_check(&w, out_len, weights_len, err);
}

int att_step(float *out, float *weights, const struct att_params *p, struct att_kv *c,
             struct att_error *err)
{
    size_t ol, wl;
    int rc = att_step_check(p, c, &ol, &wl, err);
    if (rc)
        return rc;
    const long long n = c->len + p->S;
    float *k = malloc((size_t)n * (size_t)p->kdim * sizeof *k);
    float *v = malloc((size_t)n * (size_t)p->vdim * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return fail(err, ATT_ENOMEM, "out of memory");
    }
    if (c->len) {
        memcpy(k, c->k, (size_t)c->len * (size_t)p->kdim * sizeof *k);
        memcpy(v, c->v, (size_t)c->len * (size_t)p->vdim * sizeof *v);
    }
    for (int t = 0; t < 2; t++) {
        const size_t w = (size_t)(t ? p->vdim : p->kdim);
        const float *src = t ? p->value : p->key;
        float *dst = (t ? v : k) + c->len * (long long)w;
        for (size_t i = 0; i < (size_t)p->S * w; i++) {
            dst[i] = round_to(c->dtype, src[i]);
            if (c->dtype == ATT_KV_F16 && !(dst[i] >= -65504.0f && dst[i] <= 65504.0f)) {
                char msg[96];
                snprintf(msg, sizeof msg, "%s %zu is beyond FP16's range",
                         t ? "value row" : "key row", i / w);
                free(k), free(v);
                return fail(err, ATT_ERANGE, msg);
            }
        }
    }
    struct att_params w;
    whole(&w, p, c, k, v, err);
    rc = att_forward(out, weights, &w, err);
    if (rc) {
        free(k), free(v);
        return rc;
    }
    free(c->k), free(c->v);
    c->k = k, c->v = v, c->len = n, c->kdim = p->kdim, c->vdim = p->vdim;
    return ATT_OK;
}
