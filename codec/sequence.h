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
struct codec_limits;
struct tensor;

/* A request's place in its sequences (Triton's sequence
 * extension, docs/sequences.md), read by both protocols (codec/sequence.c):
 * the options sequence_id, sequence_start, sequence_end, layer,
 * kv_cache_dtype, and the X-Sequence-Id header. Ids compare as text: the
 * integer 42, the string "42" and the header value 42 are one sequence.
 *
 * The scalar form (sequence_id a string or an integer) is one item; the
 * array form (sequence_id an array of B ids, v2's sequence_id input) is a
 * batch of B sequences stepped together at one layer, item b on batch
 * item b of the query; then X-Sequence-Id is the batch's placement key
 * (key), not an id. */
#define CODEC_SEQUENCE_ID_MAX 128
struct codec_sequence_item {
    char id[CODEC_SEQUENCE_ID_MAX + 1];
    int start, end;
    long long length;   /* set by the step: its layer's cache length after it */
};
struct codec_sequence {
    int n;              /* items: 0 = not in a sequence, 1 = scalar form, B = array form */
    int array;          /* the ids came as an array / v2 tensor: cache_length per item */
    struct codec_sequence_item *item; /* n items, malloc'd by the codec, freed by
                                         codec_request_deinit (n == 0: NULL) */
    int layer;          /* 0 .. max_layers-1 */
    char key[CODEC_SEQUENCE_ID_MAX + 1]; /* array form: X-Sequence-Id, the placement key */
    enum att_kv_dtype dtype; /* kv_cache_dtype (its choices are the enum's names) */
    int dtype_asked;    /* the request gave kv_cache_dtype itself */
    int end_only;       /* every item ends, no step (no query): compute nothing */
    size_t kpm_count;   /* a step's key_padding_mask's elements (it spans the whole
                           cache: the caller checks them), 0: none */
    /* inputs, borrowed: the header (NULL: none) and the JSON text (a number
     * beyond long long is read from it) */
    const char *header;
    const char *text;
    size_t text_len;
};

/* The sequence options of a request into s (s->header, text, text_len set
 * before): cv holds them merged over the model's defaults, own is the
 * request's object (its fields, or v2's parameters) for what the request
 * gave itself. sequence_id may be an array of B ids (1 <= B <= max_batch;
 * each a non-empty string or an integer >= 1, no id twice), and then
 * sequence_start and sequence_end a boolean or an array of B booleans;
 * v2 puts its sequence_id, sequence_start and sequence_end inputs there
 * as such arrays (codec_values_set). In the scalar form X-Sequence-Id,
 * when given, must equal sequence_id when both are; in the array form it
 * is the placement key. layer only with a sequence. 0, or -1 with err
 * (400; 413 for more ids than max_batch). s->item is malloc'd (free it with
 * codec_sequence_deinit, as codec_request_deinit does). */
int codec_sequence_read(struct codec_sequence *s, const struct codec_values *cv,
                        json_t *own, const struct codec_limits *lim, struct failure *err);

/* An integer beyond long long reaches jansson's reader as its stand-in,
 * a real (jsonnum_standin): its digits from the JSON text (len bytes)
 * instead, as text into out: the number after a "key": (index < 0), or
 * element index of the array after one, whose value read as a real is
 * standin (the first such). 0, or -1 when there is none. */
int codec_sequence_raw_uint(const char *text, size_t len, const char *key, int index,
                            double standin, char *out, size_t outlen);

/* Free s's items (n 0, item NULL after). */
void codec_sequence_deinit(struct codec_sequence *s);

/* A step's own rules (s read, p's shapes and masks set; batched: the
 * query has rank 3): N = s->n (the array form needs a rank-3 query and
 * takes no tensor attn_mask or key_padding_mask), S >= L >= 1, no
 * query_position_offset of the request's own (a model default's is
 * dropped: the server sets it), no positional_encoding, and causal means
 * lower-right, the default without a mask (v2's is_causal false: none).
 * prefix: "" or "parameters.". 0, or -1 with err. */
int codec_sequence_rules(const struct codec_sequence *s, struct att_params *p, int batched,
                         json_t *own, int no_mask_asked, const char *prefix,
                         struct failure *err);

/* A tensor attn_mask in s's step: refused in the array form. 0, or -1. */
int codec_sequence_mask(const struct codec_sequence *s, struct failure *err);

/* A step's key_padding_mask t (it spans the whole cache after the append,
 * which only the caller knows): (len + S) or (1, len + S) for a batched
 * query; its count goes into s, p points at it. Refused in the array form. */
int codec_sequence_kpm(struct codec_sequence *s, struct att_params *p, int batched,
                       const struct tensor *t, struct failure *err);

/* Whether s, read, is sequence_end without a step (has_step: the request
 * carries a query): 1 when every item ends and none starts (s->end_only
 * set: the request ends its sequences, computes nothing and is answered
 * with cache_length 0 for each), 0 when it is not (a step, or a request
 * that is no sequence's), -1 with err when there is no step and some but
 * not all items end or one starts. */
int codec_sequence_end_only(struct codec_sequence *s, int has_step, struct failure *err);

#endif
