/* v2_response.c -- the 200 answer of a v2 infer request: the JSON part
 * written at once (shortest round-trip floats, jsonnum.h), the binary
 * outputs' bytes copied out of the float arrays as they are read; see
 * codec/v2.h. */
#include "codec/v2.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonnum.h"
#include "codec/stream.h"
#include "codec/reduce.h"

/* The answer is a stream (stream.h): the JSON part, then the binary
 * outputs' bytes (the floats', little-endian on x86-64) raw, in the order
 * of the outputs. */
_Static_assert(V2_OUT_COUNT <= STREAM_MAX_PIECES, "a piece for every output");

/* A JSON string for s, quotes and escapes included (malloc'd), or NULL. */
static char *json_quote(const char *s)
{
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
    json_decref(j);
    return q;
}

/* The shape of output k and its element count. */
static int output_shape(const struct v2_request *r, int k, long long shape[4], size_t *count)
{
    const struct att_params *p = &r->c.p;
    if (k == V2_OUT_CACHE_LENGTH) { /* one per sequence of the batch */
        shape[0] = r->c.seq.n;
        *count = (size_t)r->c.seq.n;
        return 1;
    }
    if (k != V2_OUT_OUTPUT) /* the weights, in full or reduced */
        return codec_weights_shape(&r->c, shape, count);
    int nd = 0;
    if (r->c.batched)
        shape[nd++] = p->N;
    shape[nd++] = p->L, shape[nd++] = p->E;
    *count = r->c.out_len;
    return nd;
}

/* Output k's data: out, the weights, the top-k indices after the values
 * (attention.h), int32 read from the same bytes, or the cache lengths
 * (int64, lengths). */
static const void *output_data(const struct v2_request *r, int k, const float *out,
                               const float *weights, const long long *lengths)
{
    long long shape[4];
    size_t count;
    if (k == V2_OUT_OUTPUT)
        return out;
    if (k == V2_OUT_CACHE_LENGTH)
        return lengths;
    output_shape(r, k, shape, &count);
    return k == V2_OUT_TOPK_INDICES ? weights + count : weights;
}

/* n int32 values as a JSON array at dst (JSONNUM_ARRAY_MAX(n) bytes). */
static size_t format_ints(char *dst, const int32_t *x, size_t n)
{
    size_t o = 0;
    dst[o++] = '[';
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(dst + o, 16, "%s%d", i ? "," : "", (int)x[i]);
    dst[o++] = ']';
    dst[o] = '\0';
    return o;
}

/* Append to dst at *o (room reserved by the caller). */
static void put(char *dst, size_t *o, const char *s)
{
    const size_t n = strlen(s);
    memcpy(dst + *o, s, n);
    *o += n;
}

/* Append sep and v in decimal, as "%s%lld" writes them. */
static void put_ll(char *dst, size_t *o, const char *sep, long long v)
{
    char t[24];
    size_t k = 0;
    unsigned long long u = v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v;
    do
        t[k++] = (char)('0' + u % 10);
    while ((u /= 10) > 0);
    if (v < 0)
        t[k++] = '-';
    put(dst, o, sep);
    while (k > 0)
        dst[(*o)++] = t[--k];
}

static void put_output(struct stream *st, char *dst, size_t *o, const struct v2_request *r,
                       int k, const void *x)
{
    long long shape[4];
    size_t count;
    const int nd = output_shape(r, k, shape, &count);
    const size_t esize = k == V2_OUT_CACHE_LENGTH ? sizeof(long long) : sizeof(float);
    put(dst, o, "{\"name\":\"");
    put(dst, o, v2_output_name((enum v2_output)k));
    put(dst, o, k == V2_OUT_TOPK_INDICES    ? "\",\"datatype\":\"INT32\",\"shape\":["
                : k == V2_OUT_CACHE_LENGTH ? "\",\"datatype\":\"INT64\",\"shape\":["
                                           : "\",\"datatype\":\"FP32\",\"shape\":[");
    for (int d = 0; d < nd; d++)
        put_ll(dst, o, d ? "," : "", shape[d]);
    put(dst, o, "],");
    if (r->binary[k]) {
        const size_t bytes = count * esize; /* a body's size: within long long */
        put_ll(dst, o, "\"parameters\":{\"binary_data_size\":", (long long)bytes);
        put(dst, o, "}}");
        stream_piece(st, STREAM_AT_END, x, count * esize, STREAM_RAW);
        return;
    }
    put(dst, o, "\"data\":");
    if (k == V2_OUT_CACHE_LENGTH) {
        const long long *l = x;
        put(dst, o, "[");
        for (size_t i = 0; i < count; i++)
            put_ll(dst, o, i ? "," : "", l[i]);
        put(dst, o, "]");
    } else if (k == V2_OUT_TOPK_INDICES)
        *o += format_ints(dst + *o, (const int32_t *)(const void *)x, count);
    else
        *o += jsonnum_format_array(dst + *o, x, count);
    put(dst, o, "}");
}

struct stream *v2_stream_new(const struct v2_request *r, const char *model_name, float *out,
                             float *weights)
{
    struct stream *st = stream_new(out, weights); /* owns them from here */
    char *name = json_quote(model_name), *id = r->id ? json_quote(r->id) : NULL;
    if (!st || !name || (r->id && !id))
        goto fail;

    /* 1. the room: JSON outputs at JSONNUM_FLOAT_MAX characters a float,
     * 21 an int64 */
    size_t room = 256 + strlen(name) + (id ? strlen(id) : 0);
    const struct codec_sequence *q = &r->c.seq;
    long long *lengths = NULL;
    for (int i = 0; i < r->n_outputs; i++) {
        const int k = r->outputs[i];
        if (k == V2_OUT_CACHE_LENGTH) { /* the stream's: the request goes before it */
            if (!q->n || !(lengths = st->extra = malloc((size_t)q->n * sizeof *lengths)))
                goto fail;
            for (int b = 0; b < q->n; b++)
                lengths[b] = q->end_only ? 0 : q->item[b].length;
            room += 256 + (r->binary[k] ? 0 : (size_t)q->n * 21);
            continue;
        }
        if (k == V2_OUT_OUTPUT ? !out : !weights || r->c.p.weights_mode == ATT_WEIGHTS_NONE)
            goto fail; /* the decoder never asks for weights it does not compute */
        room += 256 + (r->binary[k] ? 0
                       : JSONNUM_ARRAY_MAX(k == V2_OUT_OUTPUT ? r->c.out_len
                                                              : r->c.weights_len));
        /* an int32 index is at most 11 characters and its comma: within a float's room */
    }
    if (!(st->text = malloc(room)))
        goto fail;

    /* 2. the JSON part */
    size_t o = 0;
    put(st->text, &o, "{\"model_name\":");
    put(st->text, &o, name);
    put(st->text, &o, ",\"model_version\":\"1\"");
    if (q->n && !q->array) { /* a step of a sequence: the cache length after it */
        put_ll(st->text, &o, ",\"parameters\":{\"cache_length\":",
               q->end_only ? 0 : q->item[0].length);
        put(st->text, &o, "}");
    }
    if (id) {
        put(st->text, &o, ",\"id\":");
        put(st->text, &o, id);
    }
    put(st->text, &o, ",\"outputs\":[");
    for (int i = 0; i < r->n_outputs; i++) {
        if (i)
            put(st->text, &o, ",");
        const int k = r->outputs[i];
        put_output(st, st->text, &o, r, k, output_data(r, k, out, weights, lengths));
    }
    put(st->text, &o, "]}");
    stream_done(st, o);
    free(name);
    free(id);
    return st;
fail:
    free(name);
    free(id);
    stream_free(st); /* out and weights with it (stream_new freed them if it failed) */
    return NULL;
}
