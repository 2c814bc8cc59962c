/* response.h -- the 200 body of POST /attention, whole or streamed
 * (codec/response.c; see codec/codec.h). */
#ifndef CODEC_RESPONSE_H
#define CODEC_RESPONSE_H

#include <stddef.h>

#include "codec/codec.h"
#include "codec/stream.h"

/* The 200 body for r's results. out: (N, L, E); weights as r->p.weights_mode
 * says, or NULL. Returns a malloc'd NUL-terminated buffer (caller frees) and
 * its length in *len, or NULL when out of memory. */
char *codec_encode_response(const struct codec_request *r, const float *out,
                            const float *weights, size_t *len);

/* The same 200 body for a request with output_encoding "base64", produced
 * piece by piece as it is sent (codec/stream.h, the stream both protocols
 * use), so the big payloads are never encoded into one buffer: the JSON
 * text is written now, the base64 when read. Takes ownership of out and
 * weights (malloc'd; freed by stream_free, also on failure). Returns NULL
 * when out of memory. */
struct stream *codec_stream_new(const struct codec_request *r, float *out, float *weights);

#endif
