/* resolve.h -- a request's options resolved, once for both protocols.
 *
 * Each protocol gathers its values (codec/variants.h: the request's over
 * the model's defaults, each with the name it was given under, "num_heads"
 * or "parameters.num_heads"); codec_options_resolve() then turns the
 * options both protocols share into struct codec_options with one set of
 * rules and messages. POST /attention (codec/request.c) and v2
 * (codec/v2_params.c) both call it; what only v2 has (binary_data_output,
 * is_causal, causal_alignment) stays v2's.
 *
 *     struct codec_options o;
 *     if (codec_options_resolve(&o, &cv, model, &limits, &err) == 0)
 *         ... p->H = (int)o.heads ... */
#ifndef CODEC_RESOLVE_H
#define CODEC_RESOLVE_H

#include <jansson.h>

#include "core/attention.h"
#include "codec/codec.h"
#include "codec/variants.h"
#include "lib/errors.h"

/* The options both protocols share, resolved: the request's value, else
 * the model's default, else PyTorch's. */
struct codec_options {
    long long heads;          /* num_heads, or the model's H */
    int need, avg;            /* need_weights (default true), average_attn_weights */
    int has_scale, pe;        /* scale given; positional_encoding "sinusoidal" */
    float scale;
    int causal, lower_right;  /* attn_mask "causal" or "causal_lower_right" (a string) */
    json_t *top_k, *pool;     /* weights_top_k, weights_pool (borrowed), or NULL */
};

struct model;

/* The one num_heads rule: v (NULL: not given), called name, against the
 * model m (NULL: the built-in model, which needs it) and the limit, into
 * *heads (m's H when v is NULL). 0, or -1 with err (400, or 413 for the
 * limit). */
int codec_heads(long long *heads, json_t *v, const char *name, const struct model *m,
                const struct codec_limits *lim, struct failure *err);

/* The options shared by both protocols from cv (the request's values over
 * the model's defaults), checked, into o. 0, or -1 with err. */
int codec_options_resolve(struct codec_options *o, const struct codec_values *cv,
                          const struct model *m, const struct codec_limits *lim,
                          struct failure *err);

/* The input dimensions a model fixes, in this order: embed_dim, kdim, vdim. */
enum codec_dim { CODEC_DIM_E, CODEC_DIM_KDIM, CODEC_DIM_VDIM, CODEC_NDIM };

/* What every message calls dimension d: "embed_dim (query's last
 * dimension)", ... */
const char *codec_dim_label(enum codec_dim d);

/* A server-held model's dimensions against the request's (p's E, kdim,
 * vdim): shape_mismatch naming the first that differs, else the model's
 * weights into p. 0, or -1 with err. */
int codec_model_check(struct att_params *p, const struct model *m, struct failure *err);

#endif
