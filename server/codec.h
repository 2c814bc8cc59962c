/* codec.h -- JSON ↔ tensors for POST /attention.
 *
 * The one place that knows the wire format. codec_decode_request() turns a
 * request body into a struct att_params whose arrays the codec owns, after
 * checking every field, every tensor (three forms: nested arrays,
 * {"shape", "data"}, {"shape", "dtype": "float32", "b64"}) and every limit;
 * codec_encode_response() writes the answer. Errors come back as an
 * enum http_error (server/errors.h) plus a message naming the field.
 *
 *     struct codec_request r;
 *     struct codec_error e;
 *     if (codec_decode_request(&r, body, len, &limits, &e) == 0) {
 *         ... att_forward(out, weights, &r.p, ...) ...
 *         char *json = codec_encode_response(&r, out, weights, &json_len);
 *     }
 *     codec_request_deinit(&r);   (always, success or not)
 *
 * Two ways in. The fast path reads the request's structure itself and
 * every tensor straight into floats (jsonnum.h for numbers, base64 decoded
 * from the body in place), so a big tensor never becomes a DOM; only small
 * scalar fields go through jansson. Anything it does not handle cleanly
 * (escapes in keys, boolean arrays, duplicates, any error at all) sends the
 * whole body down the second way: jansson with JSON_REJECT_DUPLICATES, which
 * is the reference for what is accepted and for every error message. So the
 * fast path changes speed, never answers. Call it on a thread with ≥ 1 MiB
 * of stack (jansson recurses up to its 2048-deep limit).
 *
 * Numbers. A tensor value is any JSON number that fits float32; jansson
 * refuses integers beyond long long and numbers beyond double, so the
 * reference path loads such a body again with stand-ins for them
 * (jsonnum_standin). Integer fields (num_heads, shape) take integers: 2.0
 * is refused, an integral value beyond 2^63 is too large. A float attn_mask
 * may hold -inf, as "-inf" or "-Infinity" or as its base64 bits; no other
 * tensor may, and +inf and NaN are refused everywhere.
 */
#ifndef SERVER_CODEC_H
#define SERVER_CODEC_H

#include <stddef.h>

#include "core/attention.h"

struct codec_limits {
    long long max_tensor_elements;  /* per tensor */
    int max_batch, max_target_len, max_source_len, max_embed_dim, max_heads;
    long long max_weights_elements; /* N·H·L·S of the weights output */
};

struct codec_error {
    int code;      /* enum http_error */
    char msg[240];
};

#define CODEC_MAX_BUFS 16

struct codec_request {
    struct att_params p;  /* arrays point into bufs */
    int batched;          /* query had rank 3 */
    int base64_out;       /* output_encoding "base64" */
    char *tokens_json;    /* compact JSON of "tokens", or NULL (owned) */
    char *key_tokens_json;
    void *bufs[CODEC_MAX_BUFS]; /* owned */
    int nbufs;
    const void *fast;     /* internal: tensors read by the fast path */
};

/* Decode body (len bytes, not NUL-terminated) into r (caller storage).
 * Returns 0, or -1 with err filled. r must be deinit'ed either way. */
int codec_decode_request(struct codec_request *r, const char *body, size_t len,
                         const struct codec_limits *lim, struct codec_error *err);
void codec_request_deinit(struct codec_request *r);

/* The same decoding through jansson alone, without the fast path: the
 * reference the fast path is tested against (same contract). */
int codec_decode_request_reference(struct codec_request *r, const char *body, size_t len,
                                   const struct codec_limits *lim, struct codec_error *err);

/* The 200 body for r's results. out: (N, L, E); weights as r->p.weights_mode
 * says, or NULL. Returns a malloc'd NUL-terminated buffer (caller frees) and
 * its length in *len, or NULL when out of memory. */
char *codec_encode_response(const struct codec_request *r, const float *out,
                            const float *weights, size_t *len);

/* The same 200 body for a request with output_encoding "base64", produced
 * piece by piece as it is sent, so the big payloads are never encoded into
 * one buffer: the JSON text is written now, the base64 when read.
 * Takes ownership of out and weights (malloc'd; freed by codec_stream_free,
 * also on failure). Returns NULL when out of memory. */
struct codec_stream;
struct codec_stream *codec_stream_new(const struct codec_request *r, float *out,
                                      float *weights);
/* Bytes in the whole body. */
size_t codec_stream_size(const struct codec_stream *st);
/* Copy up to max bytes of the body from offset pos into dst; returns how
 * many (0 at the end). Any pos and max work; reads do not change st. */
size_t codec_stream_read(const struct codec_stream *st, size_t pos, char *dst, size_t max);
void codec_stream_free(struct codec_stream *st);

/* The error (enum http_error) that answers a core status (enum att_status):
 * ATT_ERANGE, finite inputs whose result overflows, is invalid_parameter. */
int codec_error_from_att(int att_status);

/* {"error": {"code": slug, "message": msg}} as a malloc'd buffer, or NULL. */
char *codec_encode_error(int code, const char *msg, size_t *len);

/* Base64 (standard alphabet, padded). decode returns the byte count, or -1
 * with the offset of the first bad character in *bad_at. */
size_t codec_base64_encode(char *dst, const unsigned char *src, size_t n);
long long codec_base64_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at);

#endif
