/* request.h -- decoding a POST /attention request body into struct
 * codec_request (codec/request.c; the protocol and the types in
 * codec/codec.h). */
#ifndef CODEC_REQUEST_H
#define CODEC_REQUEST_H

#include <stddef.h>

#include "codec/codec.h"

/* Decode body (len bytes, not NUL-terminated) into r (caller storage).
 * models: where "model" is looked up (NULL: no server-held models, any
 * "model" is 404 not_found). Returns 0, or -1 with err filled. r must be
 * deinit'ed either way. */
int codec_decode_request(struct codec_request *r, const char *body, size_t len,
                         const struct codec_limits *lim, const struct codec_models *models,
                         struct failure *err);
void codec_request_deinit(struct codec_request *r);

/* codec_decode_request() with the X-Sequence-Id header (NULL: none). */
int codec_decode_request_seq(struct codec_request *r, const char *body, size_t len,
                             const struct codec_limits *lim, const struct codec_models *models,
                             const char *sequence_header, struct failure *err);

/* The same decoding through jansson alone, without the fast decoder: the
 * reference the fast decoder is tested against (same contract). */
int codec_decode_request_reference(struct codec_request *r, const char *body, size_t len,
                                   const struct codec_limits *lim,
                                   const struct codec_models *models, struct failure *err);

#endif
