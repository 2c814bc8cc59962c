/* variants.c -- the attention variants' options, checked once for
 * both protocols, and the projection shapes that follow from them; see
 * codec/variants.h. */
#include "codec/variants.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "lib/suggest.h"

void codec_values_init(struct codec_values *cv)
{
    memset(cv, 0, sizeof *cv);
}

void codec_values_deinit(struct codec_values *cv)
{
    for (int i = 0; i < cv->n_own; i++)
        json_decref(cv->own[i]);
    cv->n_own = 0;
}

size_t codec_join(char *dst, size_t size, const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    n = n < size ? n : size - 1;
    m = m < size - n ? m : size - n - 1;
    memmove(dst, a, n);
    memmove(dst + n, b, m);
    dst[n + m] = '\0';
    return n + m;
}

void codec_values_set(struct codec_values *cv, int i, json_t *v,
                      const char *name)
{
    cv->v[i] = v;
    codec_join(cv->name[i], sizeof cv->name[i], "", name);
}

void codec_values_merge(struct codec_values *cv, int i, json_t *v,
                        const char *name)
{
    if (v || !cv->v[i])
        codec_values_set(cv, i, v, name);
}

/* Part i's option and its member (rope's, window's end), or -1: the whole
 * option, for i < OPT_COUNT. */
static enum opt_id part_option(int i, int *member)
{
    *member = i < CV_ROPE_STYLE ? -1 : i < CV_WINDOW_LEFT ? i - CV_ROPE_STYLE : i - CV_WINDOW_LEFT;
    return i < CV_ROPE_STYLE ? (enum opt_id)i : i < CV_WINDOW_LEFT ? OPT_ROPE : OPT_WINDOW;
}

void codec_values_defaults(struct codec_values *cv, const struct model *m, int say_model)
{
    if (!m)
        return;
    for (int i = 0; i < CV_COUNT; i++) {
        int k;
        const enum opt_id o = part_option(i, &k);
        json_t *v = json_object_get(m->defaults, opt_name(o));
        if (!v || (k < 0 && (o == OPT_ROPE || o == OPT_WINDOW)))
            continue; /* those two in members */
        char from[sizeof cv->name[0]];
        size_t n = (size_t)snprintf(from, sizeof from, "%s%s%s%s", say_model ? "model '" : "",
                                    say_model ? m->name : "", say_model ? "' defaults." : "",
                                    opt_name(o));
        n = n < sizeof from ? n : sizeof from - 1;
        if (k >= 0 && o == OPT_WINDOW) {
            snprintf(from + n, sizeof from - n, "[%d] (%s)", k, k ? "right" : "left");
            v = json_array_get(v, (size_t)k);
        } else if (k >= 0) {
            snprintf(from + n, sizeof from - n, ".%s", opt_member(o, k));
            v = json_object_get(v, opt_member(o, k));
        }
        codec_values_set(cv, i, v, from);
    }
}

void codec_values_over(struct codec_values *cv, json_t *obj, int v2)
{
    const unsigned flag = v2 ? OPT_V2_PARAM : OPT_ATTENTION;
    const int alibi = json_object_get(obj, opt_name(OPT_ALIBI)) ||
                      json_object_get(obj, opt_name(OPT_ALIBI_SLOPES));
    char from[192];
    for (int i = 0; i < OPT_COUNT; i++) {
        const enum opt_id o = (enum opt_id)i;
        if (o == OPT_ROPE || o == OPT_WINDOW || !(opt_get(o)->flags & flag))
            continue; /* those two in members (codec_values_rope, _window) */
        codec_join(from, sizeof from, v2 ? "parameters." : "", opt_name(o));
        json_t *v = json_object_get(obj, opt_name(o));
        if (o == OPT_ALIBI || o == OPT_ALIBI_SLOPES) {
            if (alibi) /* one option: the request's either replaces both */
                codec_values_set(cv, i, v, from);
            else if (!cv->v[i])
                codec_values_set(cv, i, NULL, from);
        } else {
            codec_values_merge(cv, i, v, from);
        }
    }
}

int codec_values_rope(struct codec_values *cv, json_t *rope, const char *name,
                      struct failure *err)
{
    const char *members[3] = {opt_member(OPT_ROPE, 0), opt_member(OPT_ROPE, 1),
                              opt_member(OPT_ROPE, 2)};
    if (!json_is_object(rope))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an object {\"%s\": \"%s\" "
                         "or \"%s\", \"%s\", \"%s\"}", name, members[0],
                         opt_choice(OPT_ROPE, 0), opt_choice(OPT_ROPE, 1), members[1],
                         members[2]);
    const char *k;
    json_t *v;
    json_object_foreach(rope, k, v) {
        if (strcmp(k, members[0]) && strcmp(k, members[1]) && strcmp(k, members[2])) {
            char hint[96];
            return fail_with(err, ERR_INVALID_PARAMETER, "%s has an unknown field '%.64s'%s (its "
                             "fields are %s, %s and %s)", name, k,
                             suggest_hint(hint, sizeof hint, k, members, 3), members[0],
                             members[1], members[2]);
        }
    }
    for (int i = 0; i < 3; i++) {
        char full[192];
        snprintf(full, sizeof full, "%s.%s", name, members[i]);
        codec_values_merge(cv, CV_ROPE_STYLE + i,
                           json_object_get(rope, members[i]), full);
    }
    return 0;
}

int codec_values_window(struct codec_values *cv, json_t *w, const char *name,
                        struct failure *err)
{
    if (!json_is_array(w) || json_array_size(w) != 2)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be [left, right]: two integers "
                         ">= -1 (-1: unlimited)", name);
    char full[192];
    snprintf(full, sizeof full, "%s[0] (left)", name);
    codec_values_set(cv, CV_WINDOW_LEFT, json_array_get(w, 0), full);
    snprintf(full, sizeof full, "%s[1] (right)", name);
    codec_values_set(cv, CV_WINDOW_RIGHT, json_array_get(w, 1), full);
    return 0;
}

json_t *codec_values_parse(struct codec_values *cv, json_t *s, const char *name,
                           struct failure *err)
{
    if (!json_is_string(s)) {
        fail_with(err, ERR_INVALID_PARAMETER, "%s must be a string of JSON", name);
        return NULL;
    }
    if (cv->n_own == (int)(sizeof cv->own / sizeof cv->own[0])) {
        fail_with(err, ERR_INTERNAL, "too many JSON parameters");
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(json_string_value(s), json_string_length(s),
                           JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!v) {
        fail_with(err, ERR_INVALID_PARAMETER, "%s is not valid JSON (column %d: %s)", name,
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
                   const char *rule, long long *out, struct failure *err)
{
    long long x = 0;
    if (json_int_value(v, &x) != JSON_INT_OK || x < min || x > max)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be %s", name, rule);
    *out = x;
    return 0;
}

/* num_kv_heads and head_dim: Hkv divides H; d given, or E / H. */
static int set_heads(struct att_params *p, const struct codec_values *cv,
                     const struct codec_limits *lim, struct failure *err)
{
    long long x = 0;
    if (cv->v[OPT_NUM_KV_HEADS]) {
        if (get_int(cv->v[OPT_NUM_KV_HEADS], cv->name[OPT_NUM_KV_HEADS], 1, LLONG_MAX,
                    "an integer >= 1", &x, err))
            return -1;
        if (x < 1 || x > p->H || p->H % x)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s is %lld, which does not divide "
                             "num_heads %d (each KV head serves num_heads / num_kv_heads query "
                             "heads)", cv->name[OPT_NUM_KV_HEADS], x, p->H);
        p->Hkv = (int)x;
    }
    if (!cv->v[OPT_HEAD_DIM]) {
        if (p->E % p->H)
            return fail_with(err, ERR_INVALID_PARAMETER, "embed_dim %d is not divisible by "
                             "num_heads %d", p->E, p->H);
        return 0;
    }
    if (get_int(cv->v[OPT_HEAD_DIM], cv->name[OPT_HEAD_DIM], 1, LLONG_MAX, "an integer >= 1", &x,
                err))
        return -1;
    if (x > lim->max_embed_dim || x * p->H > lim->max_embed_dim)
        return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld times num_heads %d exceeds the "
                         "limit %d (max_embed_dim)", cv->name[OPT_HEAD_DIM], x, p->H,
                         lim->max_embed_dim);
    p->head_dim = (int)x;
    return 0;
}

static int set_rope(struct att_params *p, const struct codec_values *cv,
                    struct failure *err)
{
    json_t *const *v = cv->v;
    if (!v[CV_ROPE_STYLE] && !v[CV_ROPE_THETA] && !v[CV_ROPE_ROTARY_DIM])
        return 0;
    const char *style = json_string_value(v[CV_ROPE_STYLE]);
    if (!v[CV_ROPE_STYLE])
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is required with %s (\"half\" or "
                         "\"interleaved\")", cv->name[CV_ROPE_STYLE],
                         cv->name[v[CV_ROPE_THETA] ? CV_ROPE_THETA : CV_ROPE_ROTARY_DIM]);
    const int si = opt_choice_index(OPT_ROPE, style);
    if (si < 0)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be \"%s\" (GPT-NeoX, Hugging "
                         "Face Llama) or \"%s\" (GPT-J, Meta)", cv->name[CV_ROPE_STYLE],
                         opt_choice(OPT_ROPE, 0), opt_choice(OPT_ROPE, 1));
    p->rope_style = si == 0 ? ATT_ROPE_HALF : ATT_ROPE_INTERLEAVED;
    if (v[CV_ROPE_THETA]) {
        const double t = json_number_value(v[CV_ROPE_THETA]);
        if (!json_is_number(v[CV_ROPE_THETA]) || !(t > 0) || !isfinite(t))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a number > 0",
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
            return fail_with(err, ERR_INVALID_PARAMETER, "%s is %lld: it must be even "
                             "(dimensions rotate in pairs)", cv->name[CV_ROPE_ROTARY_DIM], x);
        if (x > d)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s is %lld, more than head_dim %lld",
                             cv->name[CV_ROPE_ROTARY_DIM], x, d);
        p->rope_rotary_dim = (int)x;
    } else if ((p->head_dim ? p->head_dim : p->E / p->H) % 2) {
        return fail_with(err, ERR_INVALID_PARAMETER, "head_dim %d is odd: RoPE rotates pairs; "
                         "give %s (even)", p->head_dim ? p->head_dim : p->E / p->H,
                         cv->name[CV_ROPE_ROTARY_DIM]);
    }
    return 0;
}

/* alibi true (the paper's slopes) or alibi_slopes (H numbers), into a. */
static int set_alibi(struct att_params *p, const struct codec_values *cv,
                     const struct codec_limits *lim, struct tensor_arena *a,
                     struct failure *err)
{
    json_t *on = cv->v[OPT_ALIBI], *slopes = cv->v[OPT_ALIBI_SLOPES];
    if (on && !json_is_boolean(on))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be true or false",
                         cv->name[OPT_ALIBI]);
    if (on && slopes)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s and %s cannot be used together: give "
                         "alibi true for the paper's slopes, or the slopes",
                         cv->name[OPT_ALIBI], cv->name[OPT_ALIBI_SLOPES]);
    if (slopes) {
        struct tensor t;
        if (tensor_from_json(&t, slopes, TENSOR_FLOAT, cv->name[OPT_ALIBI_SLOPES],
                             lim->max_tensor_elements, a, err) ||
            tensor_check(&t, TENSOR_FLOAT, cv->name[OPT_ALIBI_SLOPES], err) ||
            codec_expect_shape(&t, cv->name[OPT_ALIBI_SLOPES], 1, p->H, 0, err))
            return -1;
        p->alibi_slopes = t.f;
    } else if (json_is_true(on)) {
        float *s = tensor_arena_keep(a, malloc((size_t)p->H * sizeof *s));
        if (!s)
            return fail_with(err, ERR_INTERNAL, "out of memory for the ALiBi slopes");
        att_alibi_slopes(s, p->H);
        p->alibi_slopes = s;
    }
    return 0;
}

int codec_values_apply(struct att_params *p, const struct codec_values *cv,
                       const struct codec_limits *lim, struct tensor_arena *a,
                       struct failure *err)
{
    json_t *const *v = cv->v;
    long long x = 0;
    if (set_heads(p, cv, lim, err) || set_rope(p, cv, err))
        return -1;
    if (v[OPT_QUERY_POSITION_OFFSET]) {
        if (get_int(v[OPT_QUERY_POSITION_OFFSET], cv->name[OPT_QUERY_POSITION_OFFSET], 0,
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
    /* the numbers the core takes as they are (options.h: OPT_CORE_FLOAT) */
    for (int id = 0; id < OPT_COUNT; id++) {
        const struct opt *o = opt_get((enum opt_id)id);
        if (!(o->flags & OPT_CORE_FLOAT) || !v[id])
            continue;
        const double c = json_number_value(v[id]);
        if (!json_is_number(v[id]) || !(c > 0) || !isfinite((float)c) || !((float)c > 0))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a number > 0 (finite in "
                             "float32)", cv->name[id]);
        *(float *)(void *)((char *)p + o->field) = (float)c;
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Projection shapes                                                       */

void codec_set_weight(struct att_params *p, int i, const float *w, size_t len)
{
    p->w[i] = w;
    p->w_len[i] = w ? len : 0;
}

int codec_expect_shape(const struct tensor *t, const char *name, int ndim, long long d0,
                       long long d1, struct failure *err)
{
    if (t->ndim == ndim && t->shape[0] == d0 && (ndim == 1 || t->shape[1] == d1))
        return 0;
    char got[96], want[96];
    const long long w[2] = {d0, d1};
    tensor_shape_str(got, sizeof got, t->shape, t->ndim);
    tensor_shape_str(want, sizeof want, w, ndim);
    return fail_with(err, ERR_SHAPE_MISMATCH, "%s has shape %s, expected %s", name, got, want);
}

int codec_identity_check(const struct att_params *p, const char *prefix,
                         struct failure *err)
{
    const long long d = p->head_dim ? p->head_dim : p->E / p->H;
    const long long dq = p->H * d, dkv = (p->Hkv ? p->Hkv : p->H) * d;
    const int packed = p->w[ATT_W_IN] != NULL;
    const char *nh = opt_name(OPT_NUM_HEADS), *nkv = opt_name(OPT_NUM_KV_HEADS);
    /* dout == E is att_check()'s case (the messages of before) */
    const struct {
        const char *width, *in; /* dout's factor; din's name */
        long long dout;
        enum att_weight w;
        int din;
    } m[] = {
        {nh, "embed_dim", dq, ATT_W_Q, p->E},
        {nkv, "kdim", dkv, ATT_W_K, p->kdim},
        {nkv, "vdim", dkv, ATT_W_V, p->vdim},
        {nh, "embed_dim", dq, ATT_W_OUT, p->E},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const char *name = att_weight_name(m[i].w);
        const float *w = packed && m[i].w != ATT_W_OUT ? p->w[ATT_W_IN] : p->w[m[i].w];
        if (!w && m[i].dout != p->E && m[i].dout != m[i].din)
            return fail_with(err, ERR_SHAPE_MISMATCH, "%s%s is absent, and the identity needs "
                             "%s x head_dim = %lld to equal %s %d: give %s%s", prefix, name,
                             m[i].width, m[i].dout, m[i].in, m[i].din, prefix, name);
    }
    return 0;
}

int codec_model_dim(const struct model *m, enum opt_id id, json_t *given, const char *name,
                    struct failure *err)
{
    /* the weights' own values, never the defaults (model_set_defaults keeps
     * those equal to them) */
    const long long want = id == OPT_NUM_KV_HEADS ? m->Hkv : m->head_dim;
    long long got = 0;
    if (!given || (json_int_value(given, &got) == JSON_INT_OK && got == want))
        return 0;
    return fail_with(err, ERR_INVALID_PARAMETER, "%s must be %lld for model '%s' (its weights "
                     "have that shape): leave it out or give %lld", name, want, m->name, want);
}

/* ---------------------------------------------------------------------- */
/* The rest of a request, for both protocols                               */

int codec_check_dim(long long v, int max, const char *what, const char *key,
                    struct failure *err)
{
    if (v > max)
        return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld exceeds the limit %d (%s)", what, v,
                         max, key);
    return 0;
}

int codec_query_rank(const struct tensor *q, struct failure *err)
{
    if (q->ndim != 2 && q->ndim != 3)
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s must have rank 2 (L, E) or 3 (N, L, E), "
                         "got rank %d", opt_name(OPT_QUERY), q->ndim);
    return 0;
}

int codec_set_qkv(struct att_params *p, int *batched, const struct tensor *q,
                  const struct tensor *kt, const struct tensor *vt,
                  const struct codec_limits *lim, struct failure *err)
{
    if (codec_query_rank(q, err))
        return -1;
    const int b = *batched = q->ndim == 3;
    const char *key = opt_name(OPT_KEY), *value = opt_name(OPT_VALUE);
    if (kt->ndim != q->ndim || vt->ndim != q->ndim)
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s has rank %d but query has rank %d",
                         kt->ndim != q->ndim ? key : value,
                         kt->ndim != q->ndim ? kt->ndim : vt->ndim, q->ndim);
    if (b && (kt->shape[0] != q->shape[0] || vt->shape[0] != q->shape[0]))
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s has batch size %lld but query has %lld",
                         kt->shape[0] != q->shape[0] ? key : value,
                         kt->shape[0] != q->shape[0] ? kt->shape[0] : vt->shape[0], q->shape[0]);
    if (kt->shape[b] != vt->shape[b])
        return fail_with(err, ERR_SHAPE_MISMATCH, "key has source length %lld but value has %lld",
                         kt->shape[b], vt->shape[b]);
    if (codec_check_dim(b ? q->shape[0] : 1, lim->max_batch, "batch size", "max_batch", err) ||
        codec_check_dim(q->shape[b], lim->max_target_len, "target length", "max_target_len",
                        err) ||
        codec_check_dim(kt->shape[b], lim->max_source_len, "source length", "max_source_len",
                        err) ||
        codec_check_dim(q->shape[b + 1], lim->max_embed_dim, "embed_dim", "max_embed_dim", err) ||
        codec_check_dim(kt->shape[b + 1], lim->max_embed_dim, "kdim", "max_embed_dim", err) ||
        codec_check_dim(vt->shape[b + 1], lim->max_embed_dim, "vdim", "max_embed_dim", err))
        return -1;
    p->N = b ? (int)q->shape[0] : 1;
    p->L = (int)q->shape[b], p->E = (int)q->shape[b + 1];
    p->S = (int)kt->shape[b], p->kdim = (int)kt->shape[b + 1], p->vdim = (int)vt->shape[b + 1];
    p->query = q->f, p->key = kt->f, p->value = vt->f;
    return 0;
}

int codec_set_mask(struct att_params *p, const struct tensor *t, struct failure *err)
{
    if (t->ndim != 2 && t->ndim != 3)
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s must have rank 2 (L, S) or 3 "
                         "(N*num_heads, L, S), got rank %d", opt_name(OPT_ATTN_MASK), t->ndim);
    p->mask_kind = t->is_bool ? ATT_MASK_BOOL : ATT_MASK_FLOAT;
    p->bool_mask = t->u8, p->float_mask = t->f;
    p->mask_ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++)
        p->mask_shape[i] = (int)t->shape[i];
    return 0;
}

int codec_set_key_padding_mask(struct att_params *p, int batched, const struct tensor *t,
                               struct failure *err)
{
    const char *name = opt_name(OPT_KEY_PADDING_MASK);
    if (batched ? codec_expect_shape(t, name, 2, p->N, p->S, err)
                : codec_expect_shape(t, name, 1, p->S, 0, err))
        return -1;
    p->key_padding_mask = t->u8;
    return 0;
}
