/* v2_params.h -- a v2 request's parameters at each level, its options
 * over a model's defaults, its outputs, and its inputs put together into
 * struct att_params (codec/v2_params.c; the types in
 * codec/v2_internal.h). */
#ifndef CODEC_V2_PARAMS_H
#define CODEC_V2_PARAMS_H

#include <jansson.h>

#include "codec/v2_internal.h"

/* Refuse a name params (an object, or NULL) may not hold at that level: an
 * unknown one (naming the nearest known), one of an extension the server
 * does not have, a reserved one of the wrong type, a sequence's. what
 * prefixes the message ("" or "input 'query': "). 0 or -1. */
int v2_check_parameters(json_t *params, enum v2_param_level level, const char *what,
                        struct failure *err);
/* Whether name is one of that level's parameters (read, or reserved and
 * checked): the fast reader keeps such a value for jansson. */
int v2_param_known(enum v2_param_level level, const char *name);

/* "parameters" (NULL: none) over m's defaults (m NULL: the built-in model).
 * o must be deinit'ed with v2_options_deinit() whatever this returns. */
int v2_read_options(struct v2_options *o, json_t *params, const struct model *m,
                    const struct codec_limits *lim, struct failure *err);
void v2_options_deinit(struct v2_options *o);

/* The inputs into r->c.p: ranks, lengths, limits, the variants of o (and
 * the projection shapes they give), the model's or the inputs' weights,
 * masks (H is set by the caller, the other options after). */
int v2_set_tensors(struct v2_request *r, const struct v2_inputs *in, const struct model *m,
                   const struct v2_options *o, const struct codec_limits *lim,
                   struct failure *err);

/* "outputs" (NULL: none): r's outputs, binary flags, and the weights mode. */
int v2_read_outputs(struct v2_request *r, json_t *list, const struct v2_options *o,
                    struct failure *err);

#endif
