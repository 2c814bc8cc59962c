/* v2_params.c -- a v2 infer request's parameters (the options table's v2
 * names, options/options.h) over a model's defaults, its outputs, and its
 * inputs put together into struct att_params with the rules POST
 * /attention uses too (codec/variants.h); see v2_internal.h. */
#include "codec/v2_params.h"
#include "codec/v2_inputs.h"
#include "codec/reduce.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/suggest.h"

/* ---------------------------------------------------------------------- */
/* Parameter names, at each level                                          */

/* The names a level's "parameters" may hold: those the server reads, and
 * those the protocols and their clients reserve. The server is the backend
 * of every model it serves, so any other name is a mistake (400, with the
 * nearest known name). Reserved names the server has no use for are
 * accepted and ignored only where they cannot change the answer; the
 * others are refused as not supported. */
enum use {
    USE_READ,      /* read by the decoder */
    USE_IGNORED,   /* accepted, checked for its type, ignored */
    USE_OFF,       /* an extension the server does not have: only its "off" value
                      (0, "" or false), else 400 */
    USE_REFUSED,   /* an extension the server does not have: 400 when present */
};
enum type { T_ANY, T_BOOL, T_UINT, T_STRING, T_OBJECT, T_UINT_OR_STRING };

/* The levels a name is a parameter at (bits of 1 << enum v2_param_level). */
#define REQ (1u << V2_PARAMS_REQUEST)
#define IN (1u << V2_PARAMS_INPUT)
#define OUT (1u << V2_PARAMS_OUTPUT)

struct param_name {
    const char *name;
    unsigned levels;
    enum use use;
    enum type type;     /* for USE_IGNORED and USE_OFF */
    const char *why;    /* for USE_OFF and USE_REFUSED: what is not supported */
};

#define SHM_WHY "Triton's shared-memory extension is not supported: send the data in the body"

/* The names v2 keeps for its own protocol and its clients; the options'
 * parameters are the options table's (options/options.h), read. */
static const struct param_name params_known[] = {
    {"binary_data_size", IN, USE_READ, T_ANY, NULL},
    {"binary_data", OUT, USE_READ, T_ANY, NULL},
    /* Triton's parameters extension (schedule policy, forwarded headers)
     * and MLServer's content type: scheduling hints and annotations */
    {"priority", REQ, USE_IGNORED, T_UINT, NULL},
    {"timeout", REQ, USE_IGNORED, T_UINT, NULL},
    {"headers", REQ | IN | OUT, USE_IGNORED, T_OBJECT, NULL},
    {"content_type", REQ | IN | OUT, USE_IGNORED, T_STRING, NULL},
    /* Triton's extensions the server does not have */
    {"classification", OUT, USE_OFF, T_UINT, "Triton's classification extension is not "
     "supported: the answer is the tensors (leave it out, or send 0)"},
    {"shared_memory_region", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
    {"shared_memory_byte_size", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
    {"shared_memory_offset", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
};
#define N_KNOWN (sizeof params_known / sizeof params_known[0])
/* The most names a level may hold: every option's v2 parameters, and those. */
#define N_NAMES (OPT_COUNT * OPT_MAX_V2 + N_KNOWN)

/* A request parameter an option of the table is read from. */
static const struct param_name option_param = {NULL, REQ, USE_READ, T_ANY, NULL};

static const struct param_name *find_param(enum v2_param_level level, const char *k)
{
    int i;
    if (level == V2_PARAMS_REQUEST && opt_find_v2(k, &i) >= 0)
        return &option_param;
    for (size_t n = 0; n < N_KNOWN; n++)
        if ((params_known[n].levels & (1u << level)) && strcmp(k, params_known[n].name) == 0)
            return &params_known[n];
    return NULL;
}

int v2_param_known(enum v2_param_level level, const char *name)
{
    return find_param(level, name) != NULL;
}

static int type_ok(json_t *v, enum type t)
{
    long long x;
    switch (t) {
    case T_BOOL:
        return json_is_boolean(v);
    case T_UINT:
        return json_int_value(v, &x) == JSON_INT_OK && x >= 0;
    case T_STRING:
        return json_is_string(v);
    case T_OBJECT:
        return json_is_object(v);
    case T_UINT_OR_STRING:
        return json_is_string(v) || type_ok(v, T_UINT);
    default:
        return 1;
    }
}

static const char *type_str(enum type t)
{
    static const char *const s[] = {"anything", "true or false", "an integer >= 0",
                                    "a string", "an object",
                                    "an integer >= 0 or a string"};
    return s[t];
}

int v2_check_parameters(json_t *params, enum v2_param_level level, const char *what,
                        struct failure *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(params, k, v) {
        const struct param_name *p = find_param(level, k);
        if (!p && strncmp(k, "triton_", 7) == 0)
            continue; /* Triton's own namespace */
        if (!p) { /* the nearest name this level takes */
            const char *names[N_NAMES];
            size_t n = 0;
            char hint[96];
            for (int o = 0; level == V2_PARAMS_REQUEST && o < OPT_COUNT; o++)
                for (int i = 0; opt_v2((enum opt_id)o, i); i++)
                    names[n++] = opt_v2((enum opt_id)o, i);
            for (size_t i = 0; i < N_KNOWN; i++)
                if ((params_known[i].levels & (1u << level)) &&
                    params_known[i].use <= USE_IGNORED)
                    names[n++] = params_known[i].name;
            return fail_with(err, ERR_INVALID_PARAMETER, "%sunknown parameter '%.64s'%s", what,
                             k, suggest_hint(hint, sizeof hint, k, names, n));
        }
        if (p->use == USE_REFUSED)
            return fail_with(err, ERR_INVALID_PARAMETER, "%sparameters.%s: %s", what, k, p->why);
        if (p->use != USE_READ && !type_ok(v, p->type))
            return fail_with(err, ERR_INVALID_PARAMETER, "%sparameters.%s must be %s", what, k,
                             type_str(p->type));
        /* on: not 0, "" nor false */
        if (p->use == USE_OFF &&
            (json_is_true(v) || (json_is_string(v) && json_string_length(v) > 0) ||
             (json_is_integer(v) && json_integer_value(v) != 0)))
            return fail_with(err, ERR_INVALID_PARAMETER, "%sparameters.%s: %s", what, k, p->why);
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Parameters, over the model's defaults                                   */

/* The variants' values (codec/variants.h) under v2's names, over the
 * model's defaults (in cv already): the scalars keep their POST /attention
 * names; rope is a JSON string (or an object) or the flat rope_style,
 * rope_theta, rope_rotary_dim; window is window_left and window_right;
 * alibi_slopes is JSON text. */
static int read_variants(struct codec_values *cv, json_t *params, const struct model *m,
                         struct failure *err)
{
    char from[192];
    json_t *v;
    for (int k = 0; m && k < 2; k++) {
        const enum opt_id id = k ? OPT_HEAD_DIM : OPT_NUM_KV_HEADS;
        codec_join(from, sizeof from, "parameters.", opt_name(id));
        if (codec_model_dim(m, id, json_object_get(params, opt_name(id)), from, err))
            return -1;
    }
    if (json_is_string(v = json_object_get(params, opt_name(OPT_ALIBI_SLOPES))) &&
        !(v = codec_values_parse(cv, v, cv->name[OPT_ALIBI_SLOPES], err)))
        return -1;
    if (v)
        cv->v[OPT_ALIBI_SLOPES] = v;

    const char *rn = opt_name(OPT_ROPE);
    json_t *rope = json_object_get(params, rn);
    for (int k = 0; k < 3; k++) { /* opt_v2(OPT_ROPE, 1..3): the flat members */
        codec_join(from, sizeof from, "parameters.", opt_v2(OPT_ROPE, k + 1));
        if (rope && json_object_get(params, opt_v2(OPT_ROPE, k + 1)))
            return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s and %s cannot be used "
                             "together: give the %s object or the flat parameters", rn, from, rn);
        if (!cv->name[CV_ROPE_STYLE + k][0]) /* a default's keeps its name */
            codec_values_set(cv, CV_ROPE_STYLE + k, NULL, from);
    }
    codec_join(from, sizeof from, "parameters.", rn);
    if (rope && ((json_is_string(rope) && !(rope = codec_values_parse(cv, rope, from, err))) ||
                 codec_values_rope(cv, rope, from, err)))
        return -1;
    for (int k = 0; k < 3; k++)
        if ((v = json_object_get(params, opt_v2(OPT_ROPE, k + 1)))) {
            codec_join(from, sizeof from, "parameters.", opt_v2(OPT_ROPE, k + 1));
            codec_values_set(cv, CV_ROPE_STYLE + k, v, from);
        }
    for (int k = 0; k < 2; k++)
        if ((v = json_object_get(params, opt_v2(OPT_WINDOW, k)))) {
            codec_join(from, sizeof from, "parameters.", opt_v2(OPT_WINDOW, k));
            codec_values_set(cv, CV_WINDOW_LEFT + k, v, from);
        }
    return 0;
}

/* is_causal over the model's attn_mask causal or causal_lower_right (in
 * o->c already), and causal_alignment (opt_v2(OPT_ATTN_MASK, 0 and 1)). */
static int read_causal(struct v2_options *o, json_t *params, struct failure *err)
{
    const char *ic = opt_v2(OPT_ATTN_MASK, 0), *ca = opt_v2(OPT_ATTN_MASK, 1);
    json_t *v = json_object_get(params, ic);
    if (v && !json_is_boolean(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s must be true or false", ic);
    if (v)
        o->c.causal = json_is_true(v);
    if ((v = json_object_get(params, ca))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "upper_left") && strcmp(s, "lower_right")))
            return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s must be "
                             "\"upper_left\" or \"lower_right\"", ca);
        if (!o->c.causal)
            return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s needs %s true", ca, ic);
        o->c.lower_right = strcmp(s, "lower_right") == 0;
    }
    return 0;
}

void v2_options_deinit(struct v2_options *o)
{
    codec_values_deinit(&o->cv);
}

int v2_read_options(struct v2_options *o, json_t *params, const struct model *m,
                    const struct codec_limits *lim, struct failure *err)
{
    json_t *v;
    memset(o, 0, sizeof *o);
    o->c.need = 1;
    if (params && !json_is_object(params))
        return fail_with(err, ERR_INVALID_PARAMETER, "parameters must be an object");
    if (v2_check_parameters(params, V2_PARAMS_REQUEST, "", err))
        return -1;
    /* the one rule of defaults (codec_values_defaults), then the request's */
    codec_values_defaults(&o->cv, m, 1);
    codec_values_over(&o->cv, params, 1);
    o->need_asked = json_object_get(params, opt_name(OPT_NEED_WEIGHTS)) != NULL;
    o->causal_asked = json_object_get(params, opt_v2(OPT_ATTN_MASK, 0)) != NULL;
    if (codec_options_resolve(&o->c, &o->cv, m, lim, err))
        return -1;
    v = json_object_get(params, opt_name(OPT_BINARY_DATA_OUTPUT));
    if (v && !json_is_boolean(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s must be true or false",
                         opt_name(OPT_BINARY_DATA_OUTPUT));
    o->binary_out = json_is_true(v);
    return read_causal(o, params, err) || read_variants(&o->cv, params, m, err) ? -1 : 0;
}

/* ---------------------------------------------------------------------- */
/* Shapes against each other, limits, weights: codec/request.c's rules     */

/* The projections: a server-held model's (its dimensions must be the
 * inputs'), or the built-in model's weight inputs with their exact
 * PyTorch shapes. */
static int set_weights(struct att_params *p, const struct v2_inputs *in, const struct model *m,
                       struct failure *err)
{
    if (m)
        return codec_model_check(p, m, err) || codec_identity_check(p, "the model's ", err)
                   ? -1
                   : 0;
    struct att_weight_shape ws[ATT_NWEIGHTS];
    att_weight_shapes(ws, p);
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const struct tensor *t = &in->t[IN_WEIGHT + i];
        if (!in->name[IN_WEIGHT + i])
            continue;
        if (codec_expect_shape(t, in->name[IN_WEIGHT + i], ws[i].ndim, ws[i].d0, ws[i].d1, err))
            return -1;
        codec_set_weight(p, i, t->f, t->count);
    }
    /* a later step of a sequence takes the weights its start gave: the
     * caller checks them */
    return in->seq ? 0 : codec_identity_check(p, "input ", err);
}

static int set_masks(struct v2_request *r, const struct v2_inputs *in, struct failure *err)
{
    return (in->name[IN_ATTN_MASK] && (codec_sequence_mask(&r->c.seq, err) ||
                                        codec_set_mask(&r->c.p, &in->t[IN_ATTN_MASK], err))) ||
                   (in->name[IN_KPM] &&
                    (r->c.seq.n ? codec_sequence_kpm(&r->c.seq, &r->c.p, r->c.batched,
                                                         &in->t[IN_KPM], err)
                                    : codec_set_key_padding_mask(&r->c.p, r->c.batched,
                                                                 &in->t[IN_KPM], err)))
               ? -1
               : 0;
}

int v2_set_tensors(struct v2_request *r, const struct v2_inputs *in, const struct model *m,
                   const struct v2_options *o, const struct codec_limits *lim,
                   struct failure *err)
{
    const struct tensor *q = &in->t[IN_QUERY];
    const struct tensor *kt = in->name[IN_KEY] ? &in->t[IN_KEY] : q;
    const struct tensor *vt = in->name[IN_VALUE] ? &in->t[IN_VALUE] : kt;
    if (codec_set_qkv(&r->c.p, &r->c.batched, q, kt, vt, lim, err) ||
        codec_values_apply(&r->c.p, &o->cv, lim, &r->c.arena, err) ||
        set_weights(&r->c.p, in, m, err))
        return -1;
    return set_masks(r, in, err);
}

/* ---------------------------------------------------------------------- */
/* Outputs                                                                 */

static const char *const output_names[V2_OUT_COUNT] = {
    "output", "attention_weights", "attention_weights_top_k_values",
    "attention_weights_top_k_indices", "attention_weights_pooled", "cache_length"};

const char *v2_output_name(enum v2_output k)
{
    return output_names[k];
}

static int output_index(const char *name)
{
    for (int k = 0; k < V2_OUT_COUNT; k++)
        if (strcmp(name, output_names[k]) == 0)
            return k;
    return -1;
}

/* The weights output(s) o's parameters make: first and one past the last. */
static void weights_outputs(const struct v2_options *o, int *lo, int *hi)
{
    *lo = o->c.top_k ? V2_OUT_TOPK_VALUES : o->c.pool ? V2_OUT_POOLED : V2_OUT_WEIGHTS;
    *hi = o->c.top_k ? V2_OUT_POOLED : *lo + 1;
}

/* r's outputs, their binary flags and the weights mode. Without "outputs"
 * (or with an empty list) every output the options produce. A batch of
 * sequences (r->c.seq.array) answers cache_length whether it is named or
 * not (last, when not); named, it may ask for binary data. */
int v2_read_outputs(struct v2_request *r, json_t *list, const struct v2_options *o,
                    struct failure *err)
{
    struct att_params *p = &r->c.p;
    int need = o->c.need, wlo, whi;
    if (o->c.top_k && o->c.pool) /* refused, with the message both endpoints give */
        return codec_weights_reduce(p, o->c.top_k, o->c.pool, 1, "parameters.", err);
    weights_outputs(o, &wlo, &whi);
    for (int k = 0; k < V2_OUT_COUNT; k++)
        r->binary[k] = o->binary_out;
    if (list && !json_is_array(list))
        return fail_with(err, ERR_INVALID_PARAMETER, "outputs must be an array");
    if (json_array_size(list) == 0) {
        r->outputs[r->n_outputs++] = V2_OUT_OUTPUT;
        for (int k = wlo; need && k < whi; k++)
            r->outputs[r->n_outputs++] = k;
    }
    int asked[V2_OUT_COUNT] = {0};
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *x, *v;
        const char *name = v2_named_item(list, i, "outputs", &x, err);
        if (!name)
            return -1;
        const int idx = output_index(name);
        if (idx < 0) {
            char hint[96];
            return fail_with(err, ERR_INVALID_PARAMETER, "unknown output '%.64s'%s (outputs are "
                             "output, attention_weights, attention_weights_top_k_values, "
                             "attention_weights_top_k_indices, attention_weights_pooled and "
                             "cache_length)",
                             name, suggest_hint(hint, sizeof hint, name, output_names,
                                               V2_OUT_COUNT));
        }
        if (idx == V2_OUT_CACHE_LENGTH && !r->c.seq.array)
            return fail_with(err, ERR_INVALID_PARAMETER, "output '%s' is made for a batch of "
                             "sequences only (the input %s); one sequence's step answers "
                             "parameters.%s", name, opt_name(OPT_SEQUENCE_ID), name);
        if (idx != V2_OUT_OUTPUT && idx != V2_OUT_CACHE_LENGTH && (idx < wlo || idx >= whi))
            return fail_with(err, ERR_INVALID_PARAMETER, "output '%s' is not made by these "
                             "parameters: %s", name,
                             idx == V2_OUT_WEIGHTS ? "the full weights are never made with "
                                                    "weights_top_k or weights_pool"
                             : idx == V2_OUT_POOLED ? "it needs parameters.weights_pool"
                                                   : "it needs parameters.weights_top_k");
        if (asked[idx])
            return fail_with(err, ERR_INVALID_PARAMETER, "output '%s' already exists in request",
                             name);
        static const char *const fields[] = {"name", "parameters", NULL};
        char what[96];
        const size_t n = codec_join(what, sizeof what, "output '", name);
        codec_join(what + n, sizeof what - n, "'", "");
        if (v2_known_fields(x, fields, what, err))
            return -1;
        json_t *params = json_object_get(x, "parameters");
        if (params && !json_is_object(params))
            return fail_with(err, ERR_INVALID_PARAMETER, "output '%s': parameters must be an "
                             "object", name);
        codec_join(what + n, sizeof what - n, "': ", "");
        if (v2_check_parameters(params, V2_PARAMS_OUTPUT, what, err))
            return -1;
        if ((v = json_object_get(params, "binary_data"))) {
            if (!json_is_boolean(v))
                return fail_with(err, ERR_INVALID_PARAMETER, "output '%s': "
                                 "parameters.binary_data must be true or false", name);
            r->binary[idx] = json_is_true(v);
        }
        asked[idx] = 1;
        r->outputs[r->n_outputs++] = idx;
    }
    if (r->c.seq.array && !asked[V2_OUT_CACHE_LENGTH])
        r->outputs[r->n_outputs++] = V2_OUT_CACHE_LENGTH;
    if (json_array_size(list)) {
        /* asking for the weights asks for need_weights, over a model's
         * default; against the request's own need_weights false it is a
         * contradiction */
        int any = 0;
        for (int k = wlo; k < whi; k++)
            any |= asked[k];
        if (any && o->need_asked && !o->c.need)
            return fail_with(err, ERR_INVALID_PARAMETER, "output '%s' is requested but "
                             "parameters.%s is false", output_names[wlo],
                             opt_name(OPT_NEED_WEIGHTS));
        need = any;
    }
    p->weights_mode = !need ? ATT_WEIGHTS_NONE
                      : o->c.avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    /* the reductions' own rules; not asked for through outputs, none is made */
    if (codec_weights_reduce(p, o->c.top_k, o->c.pool, need || !(o->need_asked && !o->c.need),
                             "parameters.", err))
        return -1;
    if (!need)
        p->weights_top_k = p->weights_pool = 0;
    return 0;
}
