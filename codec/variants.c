/* codec_variants.c -- the attention variants' options, checked once for
 * both protocols, and the projection shapes that follow from them; see
 * codec_variants.h. */
#include "codec/variants.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "lib/suggest.h"

void codec_variants_init(struct codec_variants *cv)
{
    memset(cv, 0, sizeof *cv);
}

void codec_variants_deinit(struct codec_variants *cv)
{
    for (int i = 0; i < cv->n_own; i++)
        json_decref(cv->own[i]);
    cv->n_own = 0;
}

void codec_variants_set(struct codec_variants *cv, enum codec_var i, json_t *v,
                        const char *name)
{
    cv->v[i] = v;
    snprintf(cv->name[i], sizeof cv->name[i], "%s", name);
}

int codec_variants_rope(struct codec_variants *cv, json_t *rope, const char *name,
                        struct api_error *err)
{
    static const char *const members[3] = {"style", "theta", "rotary_dim"};
    if (!json_is_object(rope))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be an object {\"style\": \"half\" "
                        "or \"interleaved\", \"theta\", \"rotary_dim\"}", name);
    const char *k;
    json_t *v;
    json_object_foreach(rope, k, v) {
        if (strcmp(k, members[0]) && strcmp(k, members[1]) && strcmp(k, members[2])) {
            char hint[96];
            return api_fail(err, ERR_INVALID_PARAMETER, "%s has an unknown field '%.64s'%s (its "
                            "fields are style, theta and rotary_dim)", name, k,
                            suggest_hint(hint, sizeof hint, k, members, 3));
        }
    }
    for (int i = 0; i < 3; i++) {
        char full[192];
        snprintf(full, sizeof full, "%s.%s", name, members[i]);
        codec_variants_set(cv, (enum codec_var)(CV_ROPE_STYLE + i),
                           json_object_get(rope, members[i]), full);
    }
    return 0;
}

int codec_variants_window(struct codec_variants *cv, json_t *w, const char *name,
                          struct api_error *err)
{
    if (!json_is_array(w) || json_array_size(w) != 2)
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be [left, right]: two integers "
                        ">= -1 (-1: unlimited)", name);
    char full[192];
    snprintf(full, sizeof full, "%s[0] (left)", name);
    codec_variants_set(cv, CV_WINDOW_LEFT, json_array_get(w, 0), full);
    snprintf(full, sizeof full, "%s[1] (right)", name);
    codec_variants_set(cv, CV_WINDOW_RIGHT, json_array_get(w, 1), full);
    return 0;
}

json_t *codec_variants_parse(struct codec_variants *cv, json_t *s, const char *name,
                             struct api_error *err)
{
    if (!json_is_string(s)) {
        api_fail(err, ERR_INVALID_PARAMETER, "%s must be a string of JSON", name);
        return NULL;
    }
    if (cv->n_own == (int)(sizeof cv->own / sizeof cv->own[0])) {
        api_fail(err, ERR_INTERNAL, "too many JSON parameters");
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(json_string_value(s), json_string_length(s),
                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v) {
        api_fail(err, ERR_INVALID_PARAMETER, "%s is not valid JSON (column %d: %s)", name,
                 je.column, je.text);
        return NULL;
    }
    cv->own[cv->n_own++] = v;
    return v;
}

/* ---------------------------------------------------------------------- */
/* The checks                                                              */

/* v, called name, as an integer in [min, max]; rule says which, for the message. */
static int get_int(json_t *v, const char *name, long long min, long long max,
                   const char *rule, long long *out, struct api_error *err)
{
    long long x = 0;
    if (json_int_value(v, &x) != JSON_INT_OK || x < min || x > max)
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be %s", name, rule);
    *out = x;
    return 0;
}

/* num_kv_heads and head_dim: Hkv divides H; d given, or E / H. */
static int set_heads(struct att_params *p, const struct codec_variants *cv,
                     const struct codec_limits *lim, struct api_error *err)
{
    long long x = 0;
    if (cv->v[CV_NUM_KV_HEADS]) {
        if (get_int(cv->v[CV_NUM_KV_HEADS], cv->name[CV_NUM_KV_HEADS], 1, LLONG_MAX,
                    "an integer >= 1", &x, err))
            return -1;
        if (x < 1 || x > p->H || p->H % x)
            return api_fail(err, ERR_INVALID_PARAMETER, "%s is %lld, which does not divide "
                            "num_heads %d (each KV head serves num_heads / num_kv_heads query "
                            "heads)", cv->name[CV_NUM_KV_HEADS], x, p->H);
        p->Hkv = (int)x;
    }
    if (!cv->v[CV_HEAD_DIM]) {
        if (p->E % p->H)
            return api_fail(err, ERR_INVALID_PARAMETER, "embed_dim %d is not divisible by "
                            "num_heads %d", p->E, p->H);
        return 0;
    }
    if (get_int(cv->v[CV_HEAD_DIM], cv->name[CV_HEAD_DIM], 1, LLONG_MAX, "an integer >= 1", &x,
                err))
        return -1;
    if (x > lim->max_embed_dim || x * p->H > lim->max_embed_dim)
        return api_fail(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld times num_heads %d exceeds the "
                        "limit %d (max_embed_dim)", cv->name[CV_HEAD_DIM], x, p->H,
                        lim->max_embed_dim);
    p->head_dim = (int)x;
    return 0;
}

static int set_rope(struct att_params *p, const struct codec_variants *cv,
                    struct api_error *err)
{
    json_t *const *v = cv->v;
    if (!v[CV_ROPE_STYLE] && !v[CV_ROPE_THETA] && !v[CV_ROPE_ROTARY_DIM])
        return 0;
    const char *style = json_string_value(v[CV_ROPE_STYLE]);
    if (!v[CV_ROPE_STYLE])
        return api_fail(err, ERR_INVALID_PARAMETER, "%s is required with %s (\"half\" or "
                        "\"interleaved\")", cv->name[CV_ROPE_STYLE],
                        cv->name[v[CV_ROPE_THETA] ? CV_ROPE_THETA : CV_ROPE_ROTARY_DIM]);
    if (!style || (strcmp(style, "half") && strcmp(style, "interleaved")))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be \"half\" (GPT-NeoX, Hugging "
                        "Face Llama) or \"interleaved\" (GPT-J, Meta)", cv->name[CV_ROPE_STYLE]);
    p->rope_style = strcmp(style, "half") == 0 ? ATT_ROPE_HALF : ATT_ROPE_INTERLEAVED;
    if (v[CV_ROPE_THETA]) {
        const double t = json_number_value(v[CV_ROPE_THETA]);
        if (!json_is_number(v[CV_ROPE_THETA]) || !(t > 0) || !isfinite(t))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s must be a number > 0",
                            cv->name[CV_ROPE_THETA]);
        p->rope_theta = t;
    }
    if (v[CV_ROPE_ROTARY_DIM]) {
        const long long d = p->head_dim ? p->head_dim : p->E / p->H;
        long long x = 0;
        if (get_int(v[CV_ROPE_ROTARY_DIM], cv->name[CV_ROPE_ROTARY_DIM], 1, LLONG_MAX,
                    "an even integer >= 2", &x, err))
            return -1;
        if (x % 2)
            return api_fail(err, ERR_INVALID_PARAMETER, "%s is %lld: it must be even "
                            "(dimensions rotate in pairs)", cv->name[CV_ROPE_ROTARY_DIM], x);
        if (x > d)
            return api_fail(err, ERR_INVALID_PARAMETER, "%s is %lld, more than head_dim %lld",
                            cv->name[CV_ROPE_ROTARY_DIM], x, d);
        p->rope_rotary_dim = (int)x;
    } else if ((p->head_dim ? p->head_dim : p->E / p->H) % 2) {
        return api_fail(err, ERR_INVALID_PARAMETER, "head_dim %d is odd: RoPE rotates pairs; "
                        "give %s (even)", p->head_dim ? p->head_dim : p->E / p->H,
                        cv->name[CV_ROPE_ROTARY_DIM]);
    }
    return 0;
}

/* alibi true (the paper's slopes) or alibi_slopes (H numbers), into a. */
static int set_alibi(struct att_params *p, const struct codec_variants *cv,
                     const struct codec_limits *lim, struct tensor_arena *a,
                     struct api_error *err)
{
    json_t *on = cv->v[CV_ALIBI], *slopes = cv->v[CV_ALIBI_SLOPES];
    if (on && !json_is_boolean(on))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be true or false",
                        cv->name[CV_ALIBI]);
    if (on && slopes)
        return api_fail(err, ERR_INVALID_PARAMETER, "%s and %s cannot be used together: give "
                        "alibi true for the paper's slopes, or the slopes",
                        cv->name[CV_ALIBI], cv->name[CV_ALIBI_SLOPES]);
    if (slopes) {
        struct tensor t;
        if (tensor_from_json(&t, slopes, TENSOR_FLOAT, cv->name[CV_ALIBI_SLOPES],
                             lim->max_tensor_elements, a, err) ||
            tensor_check(&t, TENSOR_FLOAT, cv->name[CV_ALIBI_SLOPES], err) ||
            codec_expect_shape(&t, cv->name[CV_ALIBI_SLOPES], 1, p->H, 0, err))
            return -1;
        p->alibi_slopes = t.f;
    } else if (json_is_true(on)) {
        float *s = tensor_arena_keep(a, malloc((size_t)p->H * sizeof *s));
        if (!s)
            return api_fail(err, ERR_INTERNAL, "out of memory for the ALiBi slopes");
        att_alibi_slopes(s, p->H);
        p->alibi_slopes = s;
    }
    return 0;
}

int codec_variants_apply(struct att_params *p, const struct codec_variants *cv,
                         const struct codec_limits *lim, struct tensor_arena *a,
                         struct api_error *err)
{
    json_t *const *v = cv->v;
    long long x = 0;
    if (set_heads(p, cv, lim, err) || set_rope(p, cv, err))
        return -1;
    if (v[CV_QUERY_POSITION_OFFSET]) {
        if (get_int(v[CV_QUERY_POSITION_OFFSET], cv->name[CV_QUERY_POSITION_OFFSET], 0,
                    CODEC_MAX_POSITION_OFFSET, "an integer from 0 to 2^52", &x, err))
            return -1;
        p->query_position_offset = x;
    }
    if (set_alibi(p, cv, lim, a, err))
        return -1;
    if (v[CV_WINDOW_LEFT] || v[CV_WINDOW_RIGHT]) {
        p->has_window = 1;
        p->window_left = p->window_right = -1;
        for (int i = CV_WINDOW_LEFT; i <= CV_WINDOW_RIGHT; i++) {
            if (v[i] && get_int(v[i], cv->name[i], -1, INT_MAX, "an integer >= -1 (-1: "
                                "unlimited)", &x, err))
                return -1;
            if (v[i])
                *(i == CV_WINDOW_LEFT ? &p->window_left : &p->window_right) = (int)x;
        }
    }
    if (v[CV_SOFTCAP]) {
        const double c = json_number_value(v[CV_SOFTCAP]);
        if (!json_is_number(v[CV_SOFTCAP]) || !(c > 0) || !isfinite((float)c) || !((float)c > 0))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s must be a number > 0 (finite in "
                            "float32)", cv->name[CV_SOFTCAP]);
        p->softcap = (float)c;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Projection shapes                                                       */

void codec_set_weight(struct att_params *p, int i, const float *w, size_t len)
{
    const float **f[7] = {&p->in_proj_weight, &p->q_proj_weight,   &p->k_proj_weight,
                          &p->v_proj_weight,  &p->in_proj_bias,    &p->out_proj_weight,
                          &p->out_proj_bias};
    size_t *n[7] = {&p->in_proj_weight_len, &p->q_proj_weight_len, &p->k_proj_weight_len,
                    &p->v_proj_weight_len,  &p->in_proj_bias_len,  &p->out_proj_weight_len,
                    &p->out_proj_bias_len};
    *f[i] = w;
    *n[i] = w ? len : 0;
}

int codec_expect_shape(const struct tensor *t, const char *name, int ndim, long long d0,
                       long long d1, struct api_error *err)
{
    if (t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1))
        return 0;
    char got[96], want[96];
    const long long w[2] = {d0, d1};
    tensor_shape_str(got, sizeof got, t->shape, t->ndim);
    tensor_shape_str(want, sizeof want, w, ndim);
    return api_fail(err, ERR_SHAPE_MISMATCH, "%s has shape %s, expected %s", name, got, want);
}

int codec_model_mismatch(const struct att_params *p, const struct model *m, int *got,
                         int *want)
{
    const int g[3] = {p->E, p->kdim, p->vdim}, w[3] = {m->E, m->kdim, m->vdim};
    for (int i = 0; i < 3; i++)
        if (g[i] != w[i]) {
            *got = g[i], *want = w[i];
            return i;
        }
    return -1;
}

void codec_model_weights(struct att_params *p, const struct model *m)
{
    const float *w[7] = {m->in_proj_weight, m->q_proj_weight,   m->k_proj_weight,
                         m->v_proj_weight,  m->in_proj_bias,    m->out_proj_weight,
                         m->out_proj_bias};
    for (int i = 0; i < 7; i++)
        codec_set_weight(p, i, w[i], m->weight_len[i]);
}

int codec_identity_check(const struct att_params *p, const char *prefix,
                         struct api_error *err)
{
    const long long d = p->head_dim ? p->head_dim : p->E / p->H;
    const long long dq = p->H * d, dkv = (p->Hkv ? p->Hkv : p->H) * d;
    const int packed = p->in_proj_weight != NULL;
    /* dout == E is att_check()'s case (the messages of before) */
    const struct {
        const float *w;
        const char *name, *width;
        long long dout;
        int din;
        const char *in;
    } m[] = {
        {packed ? p->in_proj_weight : p->q_proj_weight, "q_proj_weight", "num_heads", dq, p->E,
         "embed_dim"},
        {packed ? p->in_proj_weight : p->k_proj_weight, "k_proj_weight", "num_kv_heads", dkv,
         p->kdim, "kdim"},
        {packed ? p->in_proj_weight : p->v_proj_weight, "v_proj_weight", "num_kv_heads", dkv,
         p->vdim, "vdim"},
        {p->out_proj_weight, "out_proj_weight", "num_heads", dq, p->E, "embed_dim"},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!m[i].w && m[i].dout != p->E && m[i].dout != m[i].din)
            return api_fail(err, ERR_SHAPE_MISMATCH, "%s%s is absent, and the identity needs "
                            "%s x head_dim = %lld to equal %s %d: give %s%s", prefix,
                            m[i].name, m[i].width, m[i].dout, m[i].in, m[i].din, prefix,
                            m[i].name);
    return 0;
}

int codec_model_dim(const struct model *m, const char *key, json_t *given, const char *name,
                    struct api_error *err)
{
    /* the weights' own values, never the defaults (model_set_defaults keeps
     * those equal to them) */
    const long long want = strcmp(key, "num_kv_heads") == 0 ? m->Hkv : m->head_dim;
    long long got = 0;
    if (!given || (json_int_value(given, &got) == JSON_INT_OK && got == want))
        return 0;
    return api_fail(err, ERR_INVALID_PARAMETER, "%s must be %lld for model '%s' (its weights "
                    "have that shape): leave it out or give %lld", name, want, m->name, want);
}
