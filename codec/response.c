/* response.c -- the 200 body of POST /attention, written in one
 * buffer or, for base64 answers, as it is sent; see codec/response.h. */
#include "codec/response.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/jsonnum.h"
#include "codec/stream.h"
#include "codec/reduce.h"

struct buf {
    char *p;
    size_t len, cap;
    int oom;
    struct stream *defer; /* set: leave base64 payloads out, record them (stream.h) */
};

static int reserve(struct buf *b, size_t extra)
{
    if (b->oom)
        return 0;
    if (b->len + extra + 1 <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) {
        b->oom = 1;
        return 0;
    }
    b->p = np, b->cap = cap;
    return 1;
}

static void put(struct buf *b, const char *s, size_t n)
{
    if (reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
    }
}

static void puts_(struct buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* x: (shape[0], ...) as nested arrays, floats in their shortest form, or
 * (ix) int32 values as integers. */
static void put_nested(struct buf *b, const float *x, const int32_t *ix, const long long *shape,
                       int ndim)
{
    if (ndim == 1 && ix) {
        char s[16];
        put(b, "[", 1);
        for (long long i = 0; i < shape[0]; i++) {
            const int n = snprintf(s, sizeof s, "%s%d", i ? "," : "", (int)ix[i]);
            put(b, s, (size_t)n);
        }
        put(b, "]", 1);
        return;
    }
    if (ndim == 1) {
        if (reserve(b, JSONNUM_ARRAY_MAX(shape[0])))
            b->len += jsonnum_format_array(b->p + b->len, x, (size_t)shape[0]);
        return;
    }
    size_t stride = 1;
    for (int d = 1; d < ndim; d++)
        stride *= (size_t)shape[d];
    put(b, "[", 1);
    for (long long i = 0; i < shape[0]; i++) {
        if (i)
            put(b, ",", 1);
        put_nested(b, x ? x + (size_t)i * stride : NULL, ix ? ix + (size_t)i * stride : NULL,
                   shape + 1, ndim - 1);
    }
    put(b, "]", 1);
}

/* x: float32, or int32 (int32 set: the same bytes read as such). */
static void put_tensor(struct buf *b, const float *x, const long long *shape, int ndim,
                       int base64, int int32)
{
    if (!base64) {
        put_nested(b, int32 ? NULL : x, int32 ? (const int32_t *)(const void *)x : NULL, shape,
                   ndim);
        return;
    }
    size_t count = 1;
    char s[32];
    puts_(b, "{\"shape\":[");
    for (int d = 0; d < ndim; d++) {
        int n = snprintf(s, sizeof s, "%s%lld", d ? "," : "", shape[d]);
        put(b, s, (size_t)n);
        count *= (size_t)shape[d];
    }
    puts_(b, int32 ? "],\"dtype\":\"int32\",\"b64\":\"" : "],\"dtype\":\"float32\",\"b64\":\"");
    size_t chars = BASE64_LEN(count * 4);
    if (b->defer && stream_piece(b->defer, b->len, x, count * 4, STREAM_BASE64) == 0) {
        /* encoded when read */
    } else if (reserve(b, chars)) {
        b->len += base64_encode(b->p + b->len, (const unsigned char *)x, count * 4);
        b->p[b->len] = '\0';
    }
    puts_(b, "\"}");
}

/* "cache_length": the layer's cache length after the step (0 when
 * ended without one), an array of them in the array form. */
static void put_cache_length(struct buf *b, const struct codec_sequence *q)
{
    char s[32];
    puts_(b, q->array ? "\"cache_length\":[" : "\"cache_length\":");
    for (int i = 0; i < q->n; i++) {
        const int n = snprintf(s, sizeof s, "%s%lld", i ? "," : "",
                               q->end_only ? 0 : q->item[i].length);
        put(b, s, (size_t)n);
    }
    if (q->array)
        puts_(b, "]");
}

/* The whole 200 body into b (base64 payloads left out when b->defer). */
static void write_response(struct buf *bp, const struct codec_request *r, const float *out,
                           const float *weights)
{
    struct buf b = *bp;
    if (r->seq.end_only) { /* sequence_end without a step: nothing computed */
        puts_(&b, "{");
        put_cache_length(&b, &r->seq);
        puts_(&b, "}");
        *bp = b;
        return;
    }
    const struct att_params *p = &r->p;
    long long shape[4];
    int nd = 0;
    char s[256];

    /* One allocation of the right size: base64 is 4 characters per 3 bytes,
     * a shortest float at most JSONNUM_FLOAT_MAX characters with its comma. */
    size_t floats = (size_t)p->N * p->L * p->E;
    if (weights && p->weights_mode != ATT_WEIGHTS_NONE)
        floats += r->weights_len; /* an int32 index takes no more than a float */
    reserve(&b, (b.defer ? 0 : r->base64_out ? floats * 4 / 3 + 8 : floats * JSONNUM_FLOAT_MAX) +
                    1024 +
                    (r->tokens_json ? strlen(r->tokens_json) : 0) +
                    (r->key_tokens_json ? strlen(r->key_tokens_json) : 0));
    puts_(&b, "{\"output\":");
    if (r->batched)
        shape[nd++] = p->N;
    shape[nd++] = p->L, shape[nd++] = p->E;
    put_tensor(&b, out, shape, nd, r->base64_out, 0);
    if (weights && p->weights_mode != ATT_WEIGHTS_NONE) {
        size_t count;
        nd = codec_weights_shape(r, shape, &count);
        if (p->weights_top_k > 0) { /* values, then their key indices (attention.h) */
            puts_(&b, ",\"attention_weights_top_k\":{\"values\":");
            put_tensor(&b, weights, shape, nd, r->base64_out, 0);
            puts_(&b, ",\"indices\":");
            put_tensor(&b, weights + count, shape, nd, r->base64_out, 1);
            puts_(&b, "}");
        } else {
            puts_(&b, p->weights_pool > 0 ? ",\"attention_weights_pooled\":"
                                          : ",\"attention_weights\":");
            put_tensor(&b, weights, shape, nd, r->base64_out, 0);
        }
    }
    int n = snprintf(s, sizeof s, ",\"num_heads\":%d,\"head_dim\":%d,\"embed_dim\":%d,"
                     "\"target_len\":%d,\"source_len\":%d,\"batch\":%d", p->H,
                     p->head_dim ? p->head_dim : p->E / p->H,
                     p->E, p->L, p->S, p->N);
    put(&b, s, (size_t)n);
    if (r->seq.n) { /* a step of sequences: each one's cache length after it */
        puts_(&b, ",");
        put_cache_length(&b, &r->seq);
    }
    if (r->tokens_json) {
        puts_(&b, ",\"tokens\":");
        puts_(&b, r->tokens_json);
    }
    if (r->key_tokens_json) {
        puts_(&b, ",\"key_tokens\":");
        puts_(&b, r->key_tokens_json);
    }
    put(&b, "}", 1);
    *bp = b;
}

char *codec_encode_response(const struct codec_request *r, const float *out,
                            const float *weights, size_t *len)
{
    struct buf b = {0};
    write_response(&b, r, out, weights);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* ---------------------------------------------------------------------- */
/* Streaming a base64 response                                             */

struct stream *codec_stream_new(const struct codec_request *r, float *out, float *weights)
{
    struct stream *st = stream_new(out, weights);
    if (!st)
        return NULL;
    struct buf b = {.defer = st};
    write_response(&b, r, out, weights);
    if (b.oom) {
        free(b.p);
        stream_free(st);
        return NULL;
    }
    st->text = b.p;
    stream_done(st, b.len);
    return st;
}
