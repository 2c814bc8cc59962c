/* sequence.h -- a request's place in a sequence (Triton's sequence
 * extension, docs/sequences.md), for both protocols (codec/sequence.c):
 * what a request says of its sequence, read once for POST /attention and
 * v2, and the rules of a step that the request alone decides. The rules
 * that need the sequence's state (its cache, what its start fixed) are
 * api/sequence.h's.
 */
#ifndef CODEC_SEQUENCE_H
#define CODEC_SEQUENCE_H

#include <jansson.h>
#include <stddef.h>

#include "core/attention.h"
#include "core/kvcache.h"
#include "lib/errors.h"

struct codec_values;
struct tensor;

/* A request's place in a sequence (Triton's sequence
 * extension, docs/sequences.md), read by both protocols (codec/sequence.c):
 * the options sequence_id, sequence_start, sequence_end, kv_cache_dtype,
 * and the X-Sequence-Id header. Ids compare as text: the integer 42, the
 * string "42" and the header value 42 are one sequence. */
#define CODEC_SEQUENCE_ID_MAX 128
struct codec_sequence_item {
    char id[CODEC_SEQUENCE_ID_MAX + 1];
    int start, end;
    long long length; /* set by the step: its layer's cache length after it */
};
struct codec_sequence {
    int n;            /* items: 0 = not in a sequence, 1 = scalar form, B = array form */
    int array;        /* the ids came as an array / v2 tensor: cache_length per item */
    struct codec_sequence_item *item; /* n items, malloc'd here, freed by
                                         codec_request_deinit (n == 0: NULL) */
    int layer;        /* 0 .. max_layers - 1 */
    char key[CODEC_SEQUENCE_ID_MAX + 1]; /* array form: X-Sequence-Id, the placement key */
    enum att_kv_dtype dtype; /* kv_cache_dtype (its choices are the enum's names) */
    int dtype_asked;    /* the request gave kv_cache_dtype itself */
    int end_only;       /* sequence_end without a step (no query): end it, compute nothing */
    size_t kpm_count;   /* a step's key_padding_mask's elements (it spans the whole
                           cache: the caller checks them), 0: none */
    /* inputs, borrowed: the header (NULL: none) and the JSON text (a number
     * beyond long long is read from it) */
    const char *header;
    const char *text;
    size_t text_len;
    char id[CODEC_SEQUENCE_ID_MAX + 1]; /* (scratch while reading) */
    int start, end;                     /* (scratch while reading) */
};

/* The sequence options of a request into s (s->header, text, text_len set
 * before): cv holds them merged over the model's defaults, own is the
 * request's object (its fields, or v2's parameters) for what the request
 * gave itself. X-Sequence-Id, when given, must equal sequence_id when both
 * are. 0, or -1 with err (400). */
int codec_sequence_read(struct codec_sequence *s, const struct codec_values *cv,
                        json_t *own, struct failure *err);

/* A step's own rules (s in a sequence, p's shapes and mask set): N = 1,
 * S >= L >= 1, no query_position_offset of the request's own (a model
 * default's is dropped: the server sets it), no positional_encoding, and
 * causal means lower-right, the default without a mask (v2's is_causal
 * false: none). prefix: "" or "parameters.". 0, or -1 with err. */
int codec_sequence_rules(struct att_params *p, json_t *own, int no_mask_asked, const char *prefix,
                         struct failure *err);

/* A step's key_padding_mask t (it spans the whole cache after the append,
 * which only the caller knows): (len + S) or (1, len + S) for a batched
 * query; its count goes into s, p points at it. */
int codec_sequence_kpm(struct codec_sequence *s, struct att_params *p, int batched,
                       const struct tensor *t, struct failure *err);

/* Whether s, read, is sequence_end without a step (has_step: the request
 * carries a query; v2: inputs): then s->end_only is set, and the request
 * ends its sequence, computes nothing and is answered with cache_length 0. */
int codec_sequence_end_only(struct codec_sequence *s, int has_step);

#endif
