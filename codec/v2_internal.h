/* v2_internal.h -- the types the parts of the v2 request decoder share
 * (not an API; types and constants only): codec/v2.c reads the JSON part
 * and every input; v2_scan.c (v2_scan.h) reads the inputs' data first;
 * v2_params.c (v2_params.h) reads the parameters (over a model's
 * defaults) and the outputs, and puts the inputs together into struct
 * att_params with codec/request.c's shape rules and limits; v2_inputs.c
 * (v2_inputs.h) names the inputs, for all three. */
#ifndef CODEC_V2_INTERNAL_H
#define CODEC_V2_INTERNAL_H

#include <jansson.h>

#include "codec/scan_json.h"
#include "codec/variants.h"
#include "codec/resolve.h"
#include "codec/v2.h"

/* The inputs a request may name: five tensors, a batch of sequences'
 * ids (UINT64 or BYTES) and start and end flags (BOOL), then (built-in
 * model only) the weights in the core's order (enum att_weight). */
enum {
    IN_QUERY, IN_KEY, IN_VALUE, IN_ATTN_MASK, IN_KPM, IN_SEQ_ID, IN_SEQ_START, IN_SEQ_END,
    IN_WEIGHT,
    IN_COUNT = IN_WEIGHT + ATT_NWEIGHTS
};

struct v2_inputs {
    struct tensor t[IN_COUNT];
    const char *name[IN_COUNT]; /* borrowed from the JSON; NULL: not given */
    json_t *ids;                /* IN_SEQ_ID's ids as JSON strings (owned), or NULL */
    json_t *flags[2];           /* IN_SEQ_START's, IN_SEQ_END's as JSON booleans (owned) */
    int seq;                    /* a step of a sequence */
};

/* The bytes after the JSON part, taken in the order of "inputs". */
struct v2_binpart {
    const char *p;
    size_t len, used;
    int present; /* Inference-Header-Content-Length was given */
    const char *text; /* the JSON part (an id beyond long long is read from it) */
    size_t text_len;
};

/* The "data" arrays of root.inputs[i], read before jansson reads the rest
 * (v2_scan.c): slot i for input i < IN_COUNT (an input further on is
 * refused before its data is read), and the byte ranges jansson reads as
 * a placeholder, "0" and spaces, instead. */
enum { V2_FAST_NONE, V2_FAST_READ, V2_FAST_REFUSED };
struct v2_fast_slot {
    int state;            /* V2_FAST_*: the placeholder stands for t, or err */
    struct tensor t;      /* data in the arena; the shape of the nesting */
    struct failure err; /* a large body's refusal, for when the schema reaches it */
};
struct v2_fast {
    struct v2_fast_slot slot[IN_COUNT];
    struct scan_blanks blanks; /* the values read here, blanked for jansson (scan_json.h) */
};

/* The request's options, resolved (codec/resolve.h: request parameter,
 * else the model's default, else PyTorch's default), and v2's own. */
struct v2_options {
    struct codec_options c;   /* is_causal and causal_alignment over c.causal, c.lower_right */
    int binary_out;           /* binary_data_output */
    int need_asked;   /* need_weights came from the request, not a default */
    int causal_asked; /* is_causal came from the request */
    struct codec_values cv; /* the values, the variants checked by v2_set_tensors */
};

/* The three levels of "parameters": the request's, an input's, an output's. */
enum v2_param_level { V2_PARAMS_REQUEST, V2_PARAMS_INPUT, V2_PARAMS_OUTPUT };

#endif
