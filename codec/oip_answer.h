/* oip_answer.h -- v2's answer as a ModelInferResponse, and a stream's
 * error message (codec/oip_answer.c); see codec/oip.h, which includes it. */
#ifndef CODEC_OIP_ANSWER_H
#define CODEC_OIP_ANSWER_H

#include <stddef.h>

#include "codec/stream.h"
#include "lib/errors.h"

/* v2's 200 answer as a ModelInferResponse: body (malloc'd) holds every
 * field but the raw_output_contents, which are tail[0 .. ntail): each
 * output's field tag and length (in prefix), then its bytes in st's
 * buffers (no tail for an empty output's). st must outlive the tails. As a ModelStreamInferResponse
 * (stream != 0): the same, inside its infer_response field. */
struct oip_answer {
    unsigned char *body;
    size_t len;
    struct {
        const void *data;
        size_t len;
    } tail[2 * STREAM_MAX_PIECES];
    int ntail;
    unsigned char prefix[STREAM_MAX_PIECES][16];
};
int oip_answer_encode(struct oip_answer *a, const struct stream *st, int stream,
                      struct failure *err);
/* Free a's body (not st). */
void oip_answer_deinit(struct oip_answer *a);

/* A ModelStreamInferResponse carrying only error_message msg: *out
 * malloc'd, *len bytes; -1 when out of memory. */
int oip_stream_error(const char *msg, unsigned char **out, size_t *len);

#endif
