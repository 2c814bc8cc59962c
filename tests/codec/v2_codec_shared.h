/* v2_codec_shared.h -- what the test_v2_*.c codec tests share: bodies
 * written with ' for ", decoding against a model, binary data appended,
 * an answer stream read whole, a hand-built server-held model. */
#ifndef TESTS_V2_CODEC_SHARED_H
#define TESTS_V2_CODEC_SHARED_H

#include <jansson.h>
#include <stddef.h>

#include "codec/v2.h"

/* s with every ' turned into " (malloc'd): JSON without escapes. */
char *v2ct_q(const char *s);

/* The JSON s (' for ") followed by n bytes of bin: body and header length. */
char *v2ct_with_binary(const char *s, const void *bin, size_t n, size_t *len, long long *hl);

/* The whole answer, read in one piece. */
char *v2ct_read_all(const struct stream *st);

/* A model of E = 4, H = 2, identity projections, with defaults d (owned). */
void v2ct_test_model(struct model *m, json_t *d);

void v2ct_test_model_deinit(struct model *m);

/* The floats of output k in the answer: JSON data or binary bytes. */
void v2ct_check_answer_floats(const struct stream *st, const char *name, const float *x,
                         size_t n, int binary, size_t *bin_at);

#endif
