/* v2_internal.h -- what the two halves of the v2 request decoder
 * share (not an API): codec/v2.c reads the JSON part and every input;
 * codec/v2_params.c reads the parameters (over a model's defaults) and
 * the outputs, and puts the inputs together into struct att_params with
 * codec/request.c's shape rules and limits. */
#ifndef CODEC_V2_INTERNAL_H
#define CODEC_V2_INTERNAL_H

#include <jansson.h>

#include "codec/scan_json.h"
#include "codec/variants.h"
#include "codec/resolve.h"
#include "codec/v2.h"

/* The inputs a request may name: five tensors, then (built-in model only)
 * the weights in the core's order (enum att_weight). */
enum {
    IN_QUERY, IN_KEY, IN_VALUE, IN_ATTN_MASK, IN_KPM, IN_WEIGHT,
    IN_COUNT = IN_WEIGHT + ATT_NWEIGHTS
};

struct v2_inputs {
    struct tensor t[IN_COUNT];
    const char *name[IN_COUNT]; /* borrowed from the JSON; NULL: not given */
    int seq;                    /* a step of a sequence */
};

/* The input named so (its enum position), or -1; and the name of one. */
int v2_input_index(const char *name);
const char *v2_input_name(int idx);

/* The "data" arrays of root.inputs[i], read before jansson reads the rest
 * (v2_scan.c): slot i for input i < IN_COUNT (an input further on is
 * refused before its data is read), and the byte ranges jansson reads as
 * a placeholder, "0" and spaces, instead. */
enum { V2_FAST_NONE, V2_FAST_READ, V2_FAST_REFUSED };
struct v2_fast_slot {
    int state;            /* V2_FAST_*: the placeholder stands for t, or err */
    struct tensor t;      /* data in the arena; the shape of the nesting */
    struct api_error err; /* a large body's refusal, for when the schema reaches it */
};
struct v2_fast {
    struct v2_fast_slot slot[IN_COUNT];
    struct scan_blanks blanks; /* the values read here, blanked for jansson (scan_json.h) */
};

/* Read the arrays of s (len bytes, the JSON part). errors: a large body
 * (never handed to jansson whole). 0, or -1 refused (err: invalid JSON). */
int v2_fast_scan(struct v2_fast *f, const char *s, size_t len, int errors,
                 const struct model *m, const struct codec_limits *lim,
                 struct tensor_arena *a, struct api_error *err);
/* jansson over s with f's ranges replaced (a number it cannot hold: again
 * with its stand-in). NULL with je filled, or *nomem set. */
json_t *v2_fast_load(const struct v2_fast *f, const char *s, size_t n, json_error_t *je,
                     int *nomem);
void v2_fast_free(struct v2_fast *f);

/* Where a JSON object at the start of s ends, when it is valid JSON and
 * more than whitespace follows it (binary data sent without
 * Inference-Header-Content-Length); else 0. */
size_t v2_json_end(const char *s, size_t len);

/* The request's options, resolved (codec/resolve.h: request parameter,
 * else the model's default, else PyTorch's default), and v2's own. */
struct v2_options {
    struct codec_options c;   /* is_causal and causal_alignment over c.causal, c.lower_right */
    int binary_out;           /* binary_data_output */
    int need_asked;   /* need_weights came from the request, not a default */
    int causal_asked; /* is_causal came from the request */
    struct codec_variants cv; /* the values, the variants checked by v2_set_tensors */
};

/* Refuse a field of obj that list (NULL-terminated) lacks; what names obj. */
/* Item i of the array list (of inputs or of outputs: what) with its
 * "name": the name, *x the item; NULL with err filled when the item is not
 * an object with a string name. */
const char *v2_named_item(json_t *list, size_t i, const char *what, json_t **x,
                          struct api_error *err);
int v2_known_fields(json_t *obj, const char *const *list, const char *what,
                    struct api_error *err);

/* The three levels of "parameters": the request's, an input's, an output's. */
enum v2_param_level { V2_PARAMS_REQUEST, V2_PARAMS_INPUT, V2_PARAMS_OUTPUT };

/* Refuse a name params (an object, or NULL) may not hold at that level: an
 * unknown one (naming the nearest known), one of an extension the server
 * does not have, a reserved one of the wrong type, a sequence's. what
 * prefixes the message ("" or "input 'query': "). 0 or -1. */
int v2_check_parameters(json_t *params, enum v2_param_level level, const char *what,
                        struct api_error *err);
/* Whether name is one of that level's parameters (read, or reserved and
 * checked): the fast reader keeps such a value for jansson. */
int v2_param_known(enum v2_param_level level, const char *name);

/* "parameters" (NULL: none) over m's defaults (m NULL: the built-in model).
 * o must be deinit'ed with v2_options_deinit() whatever this returns. */
int v2_read_options(struct v2_options *o, json_t *params, const struct model *m,
                    const struct codec_limits *lim, struct api_error *err);
void v2_options_deinit(struct v2_options *o);

/* The inputs into r->c.p: ranks, lengths, limits, the variants of o (and
 * the projection shapes they give), the model's or the inputs' weights,
 * masks (H is set by the caller, the other options after). */
int v2_set_tensors(struct v2_request *r, const struct v2_inputs *in, const struct model *m,
                   const struct v2_options *o, const struct codec_limits *lim,
                   struct api_error *err);

/* "outputs" (NULL: none): r's outputs, binary flags, and the weights mode. */
int v2_read_outputs(struct v2_request *r, json_t *list, const struct v2_options *o,
                    struct api_error *err);

#endif
