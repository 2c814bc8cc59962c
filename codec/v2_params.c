/* v2_codec_params.c -- a v2 infer request's parameters over a model's
 * defaults, its outputs, and its inputs put together into struct
 * att_params with codec_request.c's shape rules and limits; see
 * v2_codec_internal.h. */
#include "codec/v2_internal.h"

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
#define SEQ_WHY "sequences (Triton's sequence extension) are not supported yet: every " \
                "request stands alone (leave it out, or send sequence_id 0 and " \
                "sequence_start and sequence_end false)"

static const struct param_name params_known[] = {
    /* read (v2_read_options, read_variants, read_causal; read_input;
     * v2_read_outputs) */
    {"num_heads", REQ, USE_READ, T_ANY, NULL},
    {"need_weights", REQ, USE_READ, T_ANY, NULL},
    {"average_attn_weights", REQ, USE_READ, T_ANY, NULL},
    {"is_causal", REQ, USE_READ, T_ANY, NULL},
    {"causal_alignment", REQ, USE_READ, T_ANY, NULL},
    {"scale", REQ, USE_READ, T_ANY, NULL},
    {"positional_encoding", REQ, USE_READ, T_ANY, NULL},
    {"binary_data_output", REQ, USE_READ, T_ANY, NULL},
    {"weights_top_k", REQ, USE_READ, T_ANY, NULL},
    {"weights_pool", REQ, USE_READ, T_ANY, NULL},
    {"num_kv_heads", REQ, USE_READ, T_ANY, NULL},
    {"head_dim", REQ, USE_READ, T_ANY, NULL},
    {"rope", REQ, USE_READ, T_ANY, NULL},
    {"rope_style", REQ, USE_READ, T_ANY, NULL},
    {"rope_theta", REQ, USE_READ, T_ANY, NULL},
    {"rope_rotary_dim", REQ, USE_READ, T_ANY, NULL},
    {"query_position_offset", REQ, USE_READ, T_ANY, NULL},
    {"alibi", REQ, USE_READ, T_ANY, NULL},
    {"alibi_slopes", REQ, USE_READ, T_ANY, NULL},
    {"window_left", REQ, USE_READ, T_ANY, NULL},
    {"window_right", REQ, USE_READ, T_ANY, NULL},
    {"softcap", REQ, USE_READ, T_ANY, NULL},
    {"binary_data_size", IN, USE_READ, T_ANY, NULL},
    {"binary_data", OUT, USE_READ, T_ANY, NULL},
    /* Triton's parameters extension (schedule policy, forwarded headers)
     * and MLServer's content type: scheduling hints and annotations */
    {"priority", REQ, USE_IGNORED, T_UINT, NULL},
    {"timeout", REQ, USE_IGNORED, T_UINT, NULL},
    {"headers", REQ | IN | OUT, USE_IGNORED, T_OBJECT, NULL},
    {"content_type", REQ | IN | OUT, USE_IGNORED, T_STRING, NULL},
    /* Triton's extensions the server does not have */
    {"sequence_id", REQ, USE_OFF, T_UINT_OR_STRING, SEQ_WHY},
    {"sequence_start", REQ, USE_OFF, T_BOOL, SEQ_WHY},
    {"sequence_end", REQ, USE_OFF, T_BOOL, SEQ_WHY},
    {"classification", OUT, USE_OFF, T_UINT, "Triton's classification extension is not "
     "supported: the answer is the tensors (leave it out, or send 0)"},
    {"shared_memory_region", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
    {"shared_memory_byte_size", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
    {"shared_memory_offset", IN | OUT, USE_REFUSED, T_ANY, SHM_WHY},
};
#define N_KNOWN (sizeof params_known / sizeof params_known[0])

static const struct param_name *find_param(enum v2_param_level level, const char *k)
{
    for (size_t i = 0; i < N_KNOWN; i++)
        if ((params_known[i].levels & (1u << level)) && strcmp(k, params_known[i].name) == 0)
            return &params_known[i];
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
                        struct api_error *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(params, k, v) {
        const struct param_name *p = find_param(level, k);
        if (!p && strncmp(k, "triton_", 7) == 0)
            continue; /* Triton's own namespace */
        if (!p) { /* the nearest name this level takes */
            const char *names[N_KNOWN];
            char hint[96];
            for (size_t i = 0; i < N_KNOWN; i++)
                names[i] = (params_known[i].levels & (1u << level)) &&
                                   params_known[i].use <= USE_IGNORED
                               ? params_known[i].name : NULL;
            return api_fail(err, ERR_INVALID_PARAMETER, "%sunknown parameter '%.64s'%s", what,
                            k, suggest_hint(hint, sizeof hint, k, names, N_KNOWN));
        }
        if (p->use == USE_REFUSED)
            return api_fail(err, ERR_INVALID_PARAMETER, "%sparameters.%s: %s", what, k, p->why);
        if (p->use != USE_READ && !type_ok(v, p->type))
            return api_fail(err, ERR_INVALID_PARAMETER, "%sparameters.%s must be %s", what, k,
                            type_str(p->type));
        /* on: not 0, "" nor false */
        if (p->use == USE_OFF &&
            (json_is_true(v) || (json_is_string(v) && json_string_length(v) > 0) ||
             (json_is_integer(v) && json_integer_value(v) != 0)))
            return api_fail(err, ERR_INVALID_PARAMETER, "%sparameters.%s: %s", what, k, p->why);
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Parameters, over the model's defaults                                   */

static int check_dim(long long v, int max, const char *what, const char *key,
                     struct api_error *err)
{
    if (v > max)
        return api_fail(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld exceeds the limit %d (%s)", what,
                        v, max, key);
    return 0;
}

/* The request's parameter key or else, with a model, its default dkey;
 * NULL when neither. *from names where it was found, for messages. */
static json_t *option(json_t *params, const char *key, const struct model *m, const char *dkey,
                      char *from, size_t n)
{
    json_t *v = json_object_get(params, key);
    snprintf(from, n, "parameters.%s", key);
    if (!v && m && (v = json_object_get(m->defaults, dkey)))
        snprintf(from, n, "model '%s' defaults.%s", m->name, dkey);
    return v;
}

static int option_bool(json_t *params, const char *key, const struct model *m, int *out,
                       struct api_error *err)
{
    char from[192];
    json_t *v = option(params, key, m, key, from, sizeof from);
    if (v && !json_is_boolean(v))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be true or false", from);
    if (v)
        *out = json_is_true(v);
    return 0;
}

/* The variants' values (codec_variants.h) under v2's names: the scalars
 * keep their POST /attention names; rope is a JSON string (or an object)
 * or the flat rope_style, rope_theta, rope_rotary_dim over the model's
 * rope; window is window_left and window_right over the model's window;
 * the request's alibi or alibi_slopes replace both of the model's. */
static int read_variants(struct codec_variants *cv, json_t *params, const struct model *m,
                         struct api_error *err)
{
    static const struct { enum codec_var i; const char *key; } scalars[] = {
        {CV_NUM_KV_HEADS, "num_kv_heads"},
        {CV_HEAD_DIM, "head_dim"},
        {CV_QUERY_POSITION_OFFSET, "query_position_offset"},
        {CV_SOFTCAP, "softcap"},
    };
    static const char *const flat[3] = {"rope_style", "rope_theta", "rope_rotary_dim"};
    char from[192];
    json_t *v;
    if (m && (codec_model_dim(m, "num_kv_heads", json_object_get(params, "num_kv_heads"),
                              "parameters.num_kv_heads", err) ||
              codec_model_dim(m, "head_dim", json_object_get(params, "head_dim"),
                              "parameters.head_dim", err)))
        return -1;
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
        v = option(params, scalars[i].key, m, scalars[i].key, from, sizeof from);
        codec_variants_set(cv, scalars[i].i, v, from);
    }
    const int own_alibi = json_object_get(params, "alibi") || json_object_get(params, "alibi_slopes");
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "alibi_slopes" : "alibi";
        v = option(own_alibi ? params : NULL, key, own_alibi ? NULL : m, key, from, sizeof from);
        if (k && json_is_string(v) && !(v = codec_variants_parse(cv, v, from, err)))
            return -1;
        codec_variants_set(cv, k ? CV_ALIBI_SLOPES : CV_ALIBI, v, from);
    }

    json_t *rope = json_object_get(params, "rope");
    for (int k = 0; k < 3; k++) {
        snprintf(from, sizeof from, "parameters.%s", flat[k]);
        if (rope && json_object_get(params, flat[k]))
            return api_fail(err, ERR_INVALID_PARAMETER, "parameters.rope and %s cannot be used "
                            "together: give the rope object or the flat parameters", from);
        codec_variants_set(cv, (enum codec_var)(CV_ROPE_STYLE + k), NULL, from);
    }
    if (!rope && m && (v = json_object_get(m->defaults, "rope"))) {
        snprintf(from, sizeof from, "model '%s' defaults.rope", m->name);
        if (codec_variants_rope(cv, v, from, err))
            return -1;
    }
    if (rope && ((json_is_string(rope) &&
                  !(rope = codec_variants_parse(cv, rope, "parameters.rope", err))) ||
                 codec_variants_rope(cv, rope, "parameters.rope", err)))
        return -1;
    for (int k = 0; k < 3; k++)
        if ((v = json_object_get(params, flat[k]))) {
            snprintf(from, sizeof from, "parameters.%s", flat[k]);
            codec_variants_set(cv, (enum codec_var)(CV_ROPE_STYLE + k), v, from);
        }

    if (m && (v = json_object_get(m->defaults, "window"))) {
        snprintf(from, sizeof from, "model '%s' defaults.window", m->name);
        if (codec_variants_window(cv, v, from, err))
            return -1;
    }
    for (int k = 0; k < 2; k++) {
        const char *key = k ? "window_right" : "window_left";
        if ((v = json_object_get(params, key))) {
            snprintf(from, sizeof from, "parameters.%s", key);
            codec_variants_set(cv, (enum codec_var)(CV_WINDOW_LEFT + k), v, from);
        }
    }
    return 0;
}

/* is_causal over the model's attn_mask "causal" or "causal_lower_right",
 * and causal_alignment. */
static int read_causal(struct v2_options *o, json_t *params, const struct model *m,
                       struct api_error *err)
{
    char from[192];
    json_t *v;
    if (option_bool(params, "is_causal", NULL, &o->causal, err))
        return -1;
    /* a model's default attn_mask "causal" is is_causal's default */
    if ((v = option(NULL, "is_causal", m, "attn_mask", from, sizeof from))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "causal") && strcmp(s, "causal_lower_right")))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s must be \"causal\" or "
                            "\"causal_lower_right\"", from);
        if (!o->causal_asked)
            o->causal = 1;
        o->lower_right = strcmp(s, "causal_lower_right") == 0;
    }
    if ((v = json_object_get(params, "causal_alignment"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "upper_left") && strcmp(s, "lower_right")))
            return api_fail(err, ERR_INVALID_PARAMETER, "parameters.causal_alignment must be "
                            "\"upper_left\" or \"lower_right\"");
        if (!o->causal)
            return api_fail(err, ERR_INVALID_PARAMETER, "parameters.causal_alignment needs "
                            "is_causal true");
        o->lower_right = strcmp(s, "lower_right") == 0;
    }
    return 0;
}

void v2_options_deinit(struct v2_options *o)
{
    codec_variants_deinit(&o->cv);
}

int v2_read_options(struct v2_options *o, json_t *params, const struct model *m,
                    const struct codec_limits *lim, struct api_error *err)
{
    char from[192];
    json_t *v;
    *o = (struct v2_options){.need = 1};
    if (params && !json_is_object(params))
        return api_fail(err, ERR_INVALID_PARAMETER, "parameters must be an object");
    if (v2_check_parameters(params, V2_PARAMS_REQUEST, "", err))
        return -1;
    o->need_asked = json_object_get(params, "need_weights") != NULL;
    o->top_k = json_object_get(params, "weights_top_k");
    o->pool = json_object_get(params, "weights_pool");
    o->causal_asked = json_object_get(params, "is_causal") != NULL;
    if (option_bool(params, "need_weights", m, &o->need, err) ||
        option_bool(params, "average_attn_weights", m, &o->avg, err) ||
        option_bool(params, "binary_data_output", NULL, &o->binary_out, err) ||
        read_causal(o, params, m, err) || read_variants(&o->cv, params, m, err))
        return -1;
    if ((v = option(params, "scale", m, "scale", from, sizeof from))) {
        const double s = json_number_value(v);
        if (!json_is_number(v) || !(s > 0) || !isfinite((float)s))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s must be a number > 0", from);
        o->has_scale = 1, o->scale = (float)s;
    }
    v = option(params, "positional_encoding", m, "positional_encoding", from, sizeof from);
    if (v) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "sinusoidal"))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s must be \"sinusoidal\"", from);
        o->pe = 1;
    }
    if ((v = json_object_get(params, "num_heads"))) {
        const enum json_int hk = json_int_value(v, &o->heads);
        if (hk == JSON_INT_HUGE)
            return api_fail(err, ERR_PAYLOAD_TOO_LARGE, "parameters.num_heads is beyond 2^63; "
                            "the limit is %d (max_heads)", lim->max_heads);
        if (hk != JSON_INT_OK || o->heads < 1)
            return api_fail(err, ERR_INVALID_PARAMETER, "parameters.num_heads must be an "
                            "integer >= 1");
    }
    if (!m && !o->heads)
        return api_fail(err, ERR_INVALID_PARAMETER, "parameters.num_heads is required by the "
                        "built-in model 'attention'");
    if (m && o->heads && o->heads != m->H)
        return api_fail(err, ERR_INVALID_PARAMETER, "parameters.num_heads is %lld but model "
                        "'%s' has num_heads %d", o->heads, m->name, m->H);
    if (m && !o->heads)
        o->heads = m->H;
    return check_dim(o->heads, lim->max_heads, "num_heads", "max_heads", err);
}

/* ---------------------------------------------------------------------- */
/* Shapes against each other, limits, weights: codec_request.c's rules     */

/* query, key, value: ranks, batch, lengths and their limits into r->c.p */
static int set_sequences(struct v2_request *r, const struct v2_inputs *in,
                         const struct codec_limits *lim, struct api_error *err)
{
    struct att_params *p = &r->c.p;
    const struct tensor *q = &in->t[IN_QUERY];
    if (q->ndim != 2 && q->ndim != 3)
        return api_fail(err, ERR_SHAPE_MISMATCH, "query must have rank 2 (L, E) or 3 (N, L, E), "
                        "got rank %d", q->ndim);
    const struct tensor *kt = in->name[IN_KEY] ? &in->t[IN_KEY] : q;
    const struct tensor *vt = in->name[IN_VALUE] ? &in->t[IN_VALUE] : kt;
    const int b = r->c.batched = q->ndim == 3;
    if (kt->ndim != q->ndim || vt->ndim != q->ndim)
        return api_fail(err, ERR_SHAPE_MISMATCH, "%s has rank %d but query has rank %d",
                        kt->ndim != q->ndim ? "key" : "value",
                        kt->ndim != q->ndim ? kt->ndim : vt->ndim, q->ndim);
    if (b && (kt->shape[0] != q->shape[0] || vt->shape[0] != q->shape[0]))
        return api_fail(err, ERR_SHAPE_MISMATCH, "%s has batch size %lld but query has %lld",
                        kt->shape[0] != q->shape[0] ? "key" : "value",
                        kt->shape[0] != q->shape[0] ? kt->shape[0] : vt->shape[0], q->shape[0]);
    if (kt->shape[b] != vt->shape[b])
        return api_fail(err, ERR_SHAPE_MISMATCH, "key has source length %lld but value has %lld",
                        kt->shape[b], vt->shape[b]);
    if (check_dim(b ? q->shape[0] : 1, lim->max_batch, "batch size", "max_batch", err) ||
        check_dim(q->shape[b], lim->max_target_len, "target length", "max_target_len", err) ||
        check_dim(kt->shape[b], lim->max_source_len, "source length", "max_source_len", err) ||
        check_dim(q->shape[b + 1], lim->max_embed_dim, "embed_dim", "max_embed_dim", err) ||
        check_dim(kt->shape[b + 1], lim->max_embed_dim, "kdim", "max_embed_dim", err) ||
        check_dim(vt->shape[b + 1], lim->max_embed_dim, "vdim", "max_embed_dim", err))
        return -1;
    p->N = b ? (int)q->shape[0] : 1;
    p->L = (int)q->shape[b], p->E = (int)q->shape[b + 1];
    p->S = (int)kt->shape[b], p->kdim = (int)kt->shape[b + 1], p->vdim = (int)vt->shape[b + 1];
    p->query = q->f, p->key = kt->f, p->value = vt->f;
    return 0;
}

/* The projections: a server-held model's (its dimensions must be the
 * inputs'), or the built-in model's weight inputs with their exact
 * PyTorch shapes. */
static int set_weights(struct att_params *p, const struct v2_inputs *in, const struct model *m,
                       struct api_error *err)
{
    if (m) {
        static const char *const what[3] = {"query (embed_dim)", "key (kdim)",
                                            "value (vdim)"};
        int got, want;
        const int i = codec_model_mismatch(p, m, &got, &want);
        if (i >= 0)
            return api_fail(err, ERR_SHAPE_MISMATCH, "%s has %d features but model '%s' "
                            "takes %d", what[i], got, m->name, want);
        codec_model_weights(p, m);
        return codec_identity_check(p, "the model's ", err);
    }
    struct att_weight_shape ws[ATT_NWEIGHTS];
    att_weight_shapes(ws, p);
    for (int i = 0; i < 7; i++) {
        const struct tensor *t = &in->t[IN_WEIGHT + i];
        if (!in->name[IN_WEIGHT + i])
            continue;
        if (codec_expect_shape(t, in->name[IN_WEIGHT + i], ws[i].ndim, ws[i].d0, ws[i].d1, err))
            return -1;
        codec_set_weight(p, i, t->f, t->count);
    }
    return codec_identity_check(p, "input ", err);
}

static int set_masks(struct v2_request *r, const struct v2_inputs *in, struct api_error *err)
{
    struct att_params *p = &r->c.p;
    if (in->name[IN_ATTN_MASK]) {
        const struct tensor *t = &in->t[IN_ATTN_MASK];
        if (t->ndim != 2 && t->ndim != 3)
            return api_fail(err, ERR_SHAPE_MISMATCH, "attn_mask must have rank 2 (L, S) or 3 "
                            "(N*num_heads, L, S), got rank %d", t->ndim);
        p->mask_kind = t->is_bool ? ATT_MASK_BOOL : ATT_MASK_FLOAT;
        p->bool_mask = t->u8, p->float_mask = t->f;
        p->mask_ndim = t->ndim;
        for (int i = 0; i < t->ndim; i++)
            p->mask_shape[i] = (int)t->shape[i];
    }
    if (in->name[IN_KPM]) {
        const struct tensor *t = &in->t[IN_KPM];
        if (r->c.batched ? codec_expect_shape(t, "key_padding_mask", 2, p->N, p->S, err)
                         : codec_expect_shape(t, "key_padding_mask", 1, p->S, 0, err))
            return -1;
        p->key_padding_mask = t->u8;
    }
    return 0;
}

int v2_set_tensors(struct v2_request *r, const struct v2_inputs *in, const struct model *m,
                   const struct v2_options *o, const struct codec_limits *lim,
                   struct api_error *err)
{
    if (set_sequences(r, in, lim, err) ||
        codec_variants_apply(&r->c.p, &o->cv, lim, &r->c.arena, err) ||
        set_weights(&r->c.p, in, m, err))
        return -1;
    return set_masks(r, in, err);
}

/* ---------------------------------------------------------------------- */
/* Outputs                                                                 */

static const char *const output_names[V2_OUT_COUNT] = {
    "output", "attention_weights", "attention_weights_top_k_values",
    "attention_weights_top_k_indices", "attention_weights_pooled"};

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
    *lo = o->top_k ? V2_OUT_TOPK_VALUES : o->pool ? V2_OUT_POOLED : V2_OUT_WEIGHTS;
    *hi = o->top_k ? V2_OUT_POOLED : *lo + 1;
}

/* r's outputs, their binary flags and the weights mode. Without "outputs"
 * (or with an empty list) every output the options produce. */
int v2_read_outputs(struct v2_request *r, json_t *list, const struct v2_options *o,
                    struct api_error *err)
{
    struct att_params *p = &r->c.p;
    int need = o->need, wlo, whi;
    if (o->top_k && o->pool) /* refused, with the message both endpoints give */
        return codec_weights_reduce(p, o->top_k, o->pool, 1, "parameters.", err);
    weights_outputs(o, &wlo, &whi);
    for (int k = 0; k < V2_OUT_COUNT; k++)
        r->binary[k] = o->binary_out;
    if (list && !json_is_array(list))
        return api_fail(err, ERR_INVALID_PARAMETER, "outputs must be an array");
    if (json_array_size(list) == 0) {
        r->outputs[r->n_outputs++] = V2_OUT_OUTPUT;
        for (int k = wlo; need && k < whi; k++)
            r->outputs[r->n_outputs++] = k;
    }
    int asked[V2_OUT_COUNT] = {0};
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *x = json_array_get(list, i), *v;
        const char *name = json_string_value(json_object_get(x, "name"));
        if (!json_is_object(x) || !name)
            return api_fail(err, ERR_INVALID_PARAMETER, "outputs[%zu] must be an object with a "
                            "string name", i);
        const int idx = output_index(name);
        if (idx < 0) {
            char hint[96];
            return api_fail(err, ERR_INVALID_PARAMETER, "unknown output '%.64s'%s (outputs are "
                            "output, attention_weights, attention_weights_top_k_values, "
                            "attention_weights_top_k_indices and attention_weights_pooled)",
                            name, suggest_hint(hint, sizeof hint, name, output_names,
                                               V2_OUT_COUNT));
        }
        if (idx != V2_OUT_OUTPUT && (idx < wlo || idx >= whi))
            return api_fail(err, ERR_INVALID_PARAMETER, "output '%s' is not made by these "
                            "parameters: %s", name,
                            idx == V2_OUT_WEIGHTS ? "the full weights are never made with "
                                                    "weights_top_k or weights_pool"
                            : idx == V2_OUT_POOLED ? "it needs parameters.weights_pool"
                                                   : "it needs parameters.weights_top_k");
        if (asked[idx])
            return api_fail(err, ERR_INVALID_PARAMETER, "output '%s' already exists in request",
                            name);
        static const char *const fields[] = {"name", "parameters", NULL};
        char what[96];
        snprintf(what, sizeof what, "output '%s'", name);
        if (v2_known_fields(x, fields, what, err))
            return -1;
        json_t *params = json_object_get(x, "parameters");
        if (params && !json_is_object(params))
            return api_fail(err, ERR_INVALID_PARAMETER, "output '%s': parameters must be an "
                            "object", name);
        snprintf(what, sizeof what, "output '%s': ", name);
        if (v2_check_parameters(params, V2_PARAMS_OUTPUT, what, err))
            return -1;
        if ((v = json_object_get(params, "binary_data"))) {
            if (!json_is_boolean(v))
                return api_fail(err, ERR_INVALID_PARAMETER, "output '%s': "
                                "parameters.binary_data must be true or false", name);
            r->binary[idx] = json_is_true(v);
        }
        asked[idx] = 1;
        r->outputs[r->n_outputs++] = idx;
    }
    if (json_array_size(list)) {
        /* asking for the weights asks for need_weights, over a model's
         * default; against the request's own need_weights false it is a
         * contradiction */
        int any = 0;
        for (int k = wlo; k < whi; k++)
            any |= asked[k];
        if (any && o->need_asked && !o->need)
            return api_fail(err, ERR_INVALID_PARAMETER, "output '%s' is requested but "
                            "parameters.need_weights is false", output_names[wlo]);
        need = any;
    }
    p->weights_mode = !need ? ATT_WEIGHTS_NONE
                      : o->avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    /* the reductions' own rules; not asked for through outputs, none is made */
    if (codec_weights_reduce(p, o->top_k, o->pool, need || !(o->need_asked && !o->need),
                             "parameters.", err))
        return -1;
    if (!need)
        p->weights_top_k = p->weights_pool = 0;
    return 0;
}
