/* resolve.c -- a request's shared options resolved from its values, and
 * the rules of num_heads and of a model's dimensions, once for both
 * protocols; see codec/resolve.h. */
#include "codec/resolve.h"

#include <math.h>

#include "options/options.h"
#include "lib/jsonnum.h"
#include "model/model.h"

int codec_heads(long long *heads, json_t *v, const char *name, const struct model *m,
                const struct codec_limits *lim, struct failure *err)
{
    if (!v && !m)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is required by the built-in model "
                         "'%s'", name, MODEL_BUILTIN);
    if (!v) {
        *heads = m->H;
        return codec_check_dim(*heads, lim->max_heads, name, "max_heads", err);
    }
    const enum json_int hk = json_int_value(v, heads);
    if (hk == JSON_INT_HUGE)
        return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s is beyond 2^63; the limit is %d "
                         "(max_heads)", name, lim->max_heads);
    if (hk != JSON_INT_OK || *heads < 1)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an integer >= 1", name);
    if (codec_check_dim(*heads, lim->max_heads, name, "max_heads", err))
        return -1;
    if (m && *heads != m->H)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is %lld but model '%s' has %d "
                         "heads; leave %s out or give %d", name, *heads, m->name, m->H, name,
                         m->H);
    return 0;
}

/* Part i (a boolean option) into *out when given (else *out is kept). */
static int option_bool(const struct codec_values *cv, int i, int *out,
                       struct failure *err)
{
    json_t *v = cv->v[i];
    if (v && !json_is_boolean(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be true or false", cv->name[i]);
    if (v)
        *out = json_is_true(v);
    return 0;
}

/* scale, when given, into *has and *scale. */
static int option_scale(const struct codec_values *cv, int *has, float *scale,
                        struct failure *err)
{
    json_t *v = cv->v[OPT_SCALE];
    if (!v)
        return 0;
    const double s = json_number_value(v);
    if (!json_is_number(v) || !(s > 0) || !isfinite((float)s))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a number > 0",
                         cv->name[OPT_SCALE]);
    *has = 1, *scale = (float)s;
    return 0;
}

/* positional_encoding, when given, into *pe. */
static int option_pe(const struct codec_values *cv, int *pe, struct failure *err)
{
    json_t *v = cv->v[OPT_POSITIONAL_ENCODING];
    if (!v)
        return 0;
    if (opt_choice_index(OPT_POSITIONAL_ENCODING, json_string_value(v)) < 0)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be \"%s\"",
                         cv->name[OPT_POSITIONAL_ENCODING],
                         opt_choice(OPT_POSITIONAL_ENCODING, 0));
    *pe = 1;
    return 0;
}

/* attn_mask as one of its strings (a tensor is the protocol's to read). */
static int option_causal(const struct codec_values *cv, struct codec_options *o,
                         struct failure *err)
{
    json_t *v = cv->v[OPT_ATTN_MASK];
    if (!json_is_string(v))
        return 0;
    const int c = opt_choice_index(OPT_ATTN_MASK, json_string_value(v));
    if (c < 0)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be \"%s\", \"%s\" or a tensor, "
                         "not \"%.64s\"", cv->name[OPT_ATTN_MASK], opt_choice(OPT_ATTN_MASK, 0),
                         opt_choice(OPT_ATTN_MASK, 1), json_string_value(v));
    o->causal = 1, o->lower_right = c == 1;
    return 0;
}

int codec_options_resolve(struct codec_options *o, const struct codec_values *cv,
                          const struct model *m, const struct codec_limits *lim,
                          struct failure *err)
{
    *o = (struct codec_options){.need = 1};
    o->top_k = cv->v[OPT_WEIGHTS_TOP_K];
    o->pool = cv->v[OPT_WEIGHTS_POOL];
    return codec_heads(&o->heads, cv->v[OPT_NUM_HEADS], cv->name[OPT_NUM_HEADS], m, lim,
                       err) ||
                   option_bool(cv, OPT_NEED_WEIGHTS, &o->need, err) ||
                   option_bool(cv, OPT_AVERAGE_ATTN_WEIGHTS, &o->avg, err) ||
                   option_causal(cv, o, err) ||
                   option_scale(cv, &o->has_scale, &o->scale, err) ||
                   option_pe(cv, &o->pe, err)
               ? -1
               : 0;
}

const char *codec_dim_label(enum codec_dim d)
{
    static const char *const label[CODEC_NDIM] = {
        "embed_dim (query's last dimension)", "kdim (key's last dimension)",
        "vdim (value's last dimension)"};
    return label[d];
}

int codec_model_check(struct att_params *p, const struct model *m, struct failure *err)
{
    const int got[CODEC_NDIM] = {p->E, p->kdim, p->vdim};
    const int want[CODEC_NDIM] = {m->E, m->kdim, m->vdim};
    for (int i = 0; i < CODEC_NDIM; i++)
        if (got[i] != want[i])
            return fail_with(err, ERR_SHAPE_MISMATCH, "%s is %d but model '%s' takes %d",
                             codec_dim_label((enum codec_dim)i), got[i], m->name, want[i]);
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        codec_set_weight(p, i, m->w[i], m->w_len[i]);
    return 0;
}
