/* v2_sequence.h -- a v2 request's batch of sequences as input tensors
 * (codec/v2_sequence.c): sequence_id (UINT64 or BYTES, shape [B], JSON
 * data or binary) and the BOOL sequence_start and sequence_end, [B], read
 * into the JSON arrays codec/sequence.h's codec_sequence_read() takes, so
 * that both protocols have one set of rules and messages. codec/v2.c
 * reads the input's fields and calls it. */
#ifndef CODEC_V2_SEQUENCE_H
#define CODEC_V2_SEQUENCE_H

#include <jansson.h>

#include "codec/v2_internal.h"

/* The sequence_id input's B ids (called name) appended to ids as JSON
 * strings: from JSON data, B integers (UINT64; one beyond long long read
 * from b's text) or strings (BYTES); or from n bytes p of the binary part,
 * in Triton's layouts (UINT64 8 bytes little-endian each; BYTES each a
 * 4-byte little-endian length and its bytes). bytes: the datatype is
 * BYTES. 0, or -1 with err. */
int v2_ids_json(json_t *ids, const char *name, int bytes, long long B, json_t *data,
                const struct v2_binpart *b, struct failure *err);
int v2_ids_binary(json_t *ids, const char *name, int bytes, long long B, long long n,
                  const unsigned char *p, struct failure *err);

/* The sequence inputs of in into cv (borrowed from in: keep in until the
 * sequence is read), in place of the parameters of the same names, which
 * must then be absent from params. 0, or -1 with err. */
int v2_sequence_inputs(struct codec_values *cv, struct v2_inputs *in, json_t *params,
                       struct failure *err);

/* Whether the "inputs" list names a sequence input (which); whether it is
 * absent or names sequence inputs only (a sequence_end without a step). */
int v2_sequence_named(json_t *inputs);
int v2_sequence_only(json_t *inputs);

/* Free what in owns (the JSON arrays). */
void v2_inputs_deinit(struct v2_inputs *in);

#endif
