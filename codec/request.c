/* codec_request.c -- the request schema of POST /attention: fields,
 * shapes against each other, limits; see codec.h. Tensors come from
 * tensor.c (jansson) or scan.c (the fast decoder), and every one goes
 * through tensor_check() here, whichever read it. */
#include "codec/codec.h"
#include "codec/variants.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "lib/jsonnum.h"
#include "codec/scan.h"

/* A tensor the fast decoder read (a placeholder in v), or any of the three
 * forms through jansson (the reference, or a value the fast decoder left
 * to jansson alone); then the one check. */
static int decode_tensor(struct codec_request *r, const struct scan_tensors *fast,
                         struct tensor *t, json_t *v, enum tensor_kind k, const char *name,
                         const struct codec_limits *lim, struct api_error *err)
{
    const struct api_error *refused = NULL;
    const struct tensor *scanned = fast ? scan_tensor_of(fast, v, &refused) : NULL;
    if (refused) {
        *err = *refused;
        return -1;
    }
    if (scanned)
        *t = *scanned;
    else if (tensor_from_json(t, v, k, name, lim->max_tensor_elements, &r->arena, err)) {
        return -1;
    }
    return tensor_check(t, k, name, err);
}

static int check_dim(long long v, int max, const char *what, const char *key,
                     struct api_error *err)
{
    if (v > max)
        return api_fail(err, ERR_PAYLOAD_TOO_LARGE, "%s %lld exceeds the limit %d (%s)", what, v,
                    max, key);
    return 0;
}

static int get_bool(json_t *root, const char *key, int dflt, int *out, struct api_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* Labels: an array of strings, exactly one per position (want: L or S;
 * the same labels serve every batch item). */
static int get_tokens(json_t *root, const char *key, int want, const char *what, char **out,
                      struct api_error *err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_array(v))
        return api_fail(err, ERR_INVALID_PARAMETER, "%s must be an array of strings", key);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i)))
            return api_fail(err, ERR_INVALID_PARAMETER, "%s[%zu] is not a string", key, i);
    if (json_array_size(v) != (size_t)want)
        return api_fail(err, ERR_INVALID_PARAMETER, "%s has %zu entries but %s; it needs "
                        "exactly one per position", key, json_array_size(v), what);
    *out = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
    return *out ? 0 : api_fail(err, ERR_INTERNAL, "out of memory copying %s", key);
}

static int num_heads(struct att_params *p, json_t *v, const struct model *m,
                     const struct codec_limits *lim, struct api_error *err)
{
    long long heads = 0;
    const enum json_int hk = json_int_value(v, &heads);
    if (hk == JSON_INT_HUGE)
        return api_fail(err, ERR_PAYLOAD_TOO_LARGE, "num_heads is beyond 2^63; the limit is %d "
                    "(max_heads)", lim->max_heads);
    if (hk != JSON_INT_OK || heads < 1)
        return api_fail(err, ERR_INVALID_PARAMETER, "num_heads must be an integer >= 1");
    if (check_dim(heads, lim->max_heads, "num_heads", "max_heads", err))
        return -1;
    if (m && heads != m->H)
        return api_fail(err, ERR_INVALID_PARAMETER, "num_heads is %lld but model '%s' has %d "
                        "heads; leave num_heads out or give %d", heads, m->name, m->H, m->H);
    p->H = (int)heads;
    return 0;
}

/* "model": hold it (r->model) and fill the options it has defaults for. */
static int use_model(struct codec_request *r, json_t *root, json_t *v, const struct model **m,
                     struct api_error *err)
{
    if (!json_is_string(v))
        return api_fail(err, ERR_INVALID_PARAMETER, "model must be a string: the name of a "
                        "server-held model");
    if (json_object_get(root, "weights"))
        return api_fail(err, ERR_INVALID_PARAMETER, "model and weights cannot be used together: "
                        "the model '%.100s' holds its weights", json_string_value(v));
    if (!r->models)
        return api_fail(err, ERR_NOT_FOUND, "unknown model '%.64s'", json_string_value(v));
    if (r->models->acquire(r->models->ctx, json_string_value(v), m, &r->model_ref, err))
        return -1;
    if (!*m) /* the built-in model, weights inline */
        return 0;
    /* the dimensions its weights have: a request may repeat them only */
    if (codec_model_dim(*m, "num_kv_heads", json_object_get(root, "num_kv_heads"),
                        "num_kv_heads", err) ||
        codec_model_dim(*m, "head_dim", json_object_get(root, "head_dim"), "head_dim", err))
        return -1;
    /* alibi and alibi_slopes are one option: the request's either replaces both */
    const int alibi = json_object_get(root, "alibi") || json_object_get(root, "alibi_slopes");
    const char *k;
    json_t *dv;
    json_object_foreach((*m)->defaults, k, dv) {
        if (alibi && !strncmp(k, "alibi", 5))
            continue;
        if (!json_object_get(root, k) && json_object_set(root, k, dv))
            return api_fail(err, ERR_INTERNAL, "out of memory applying defaults");
    }
    return 0;
}

/* The model's weights, after its dimensions are checked against the request's. */
static int model_weights(struct att_params *p, const struct model *m, struct api_error *err)
{
    static const char *const what[3] = {"embed_dim (query's last dimension)",
                                        "kdim (key's last dimension)",
                                        "vdim (value's last dimension)"};
    int got, want;
    const int i = codec_model_mismatch(p, m, &got, &want);
    if (i >= 0)
        return api_fail(err, ERR_SHAPE_MISMATCH, "%s is %d but model '%s' takes %d", what[i],
                        got, m->name, want);
    codec_model_weights(p, m);
    return 0;
}

/* The variant fields by their names (codec_variants.h), checked and set. */
static int variants(struct att_params *p, json_t *root, const struct codec_limits *lim,
                    struct tensor_arena *a, struct api_error *err)
{
    static const struct { enum codec_var i; const char *name; } scalars[] = {
        {CV_NUM_KV_HEADS, "num_kv_heads"},
        {CV_HEAD_DIM, "head_dim"},
        {CV_QUERY_POSITION_OFFSET, "query_position_offset"},
        {CV_ALIBI, "alibi"},
        {CV_ALIBI_SLOPES, "alibi_slopes"},
        {CV_SOFTCAP, "softcap"},
    };
    struct codec_variants cv;
    codec_variants_init(&cv);
    for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
        codec_variants_set(&cv, scalars[i].i, json_object_get(root, scalars[i].name),
                           scalars[i].name);
    json_t *rope = json_object_get(root, "rope"), *window = json_object_get(root, "window");
    const int rc = (rope && codec_variants_rope(&cv, rope, "rope", err)) ||
                   (window && codec_variants_window(&cv, window, "window", err)) ||
                   codec_variants_apply(p, &cv, lim, a, err);
    codec_variants_deinit(&cv);
    return rc ? -1 : 0;
}

static int decode_fields(struct codec_request *r, json_t *root, const struct scan_tensors *fast,
                         const struct codec_limits *lim, struct api_error *err)
{
    struct att_params *p = &r->p;
    const char *k;
    json_t *v;

    /* 1. No unknown fields: a typo should not be silently ignored. */
    json_object_foreach(root, k, v) {
        if (!scan_is_field(k))
            return scan_unknown_field(err, 0, k);
    }

    /* 1b. a server-held model: weights, num_heads, defaults (codec.h) */
    const struct model *m = NULL;
    if ((v = json_object_get(root, "model")) && use_model(r, root, v, &m, err))
        return -1;

    /* 2. num_heads */
    v = json_object_get(root, "num_heads");
    if (!v && m)
        p->H = m->H;
    else if (!v)
        return api_fail(err, ERR_INVALID_PARAMETER, "num_heads is required");
    else if (num_heads(p, v, m, lim, err))
        return -1;

    /* 3. query, key, value: same rank, same batch */
    struct tensor q, kt, vt;
    v = json_object_get(root, "query");
    if (!v)
        return api_fail(err, ERR_INVALID_PARAMETER, "query is required");
    if (decode_tensor(r, fast, &q, v, TENSOR_FLOAT, "query", lim, err))
        return -1;
    if (q.ndim != 2 && q.ndim != 3)
        return api_fail(err, ERR_SHAPE_MISMATCH, "query must have rank 2 (L, E) or 3 (N, L, E), "
                    "got rank %d", q.ndim);
    r->batched = q.ndim == 3;
    kt = q, vt = q;
    if ((v = json_object_get(root, "key"))) {
        if (decode_tensor(r, fast, &kt, v, TENSOR_FLOAT, "key", lim, err))
            return -1;
        vt = kt;
    }
    if ((v = json_object_get(root, "value")) &&
        decode_tensor(r, fast, &vt, v, TENSOR_FLOAT, "value", lim, err))
        return -1;
    if (kt.ndim != q.ndim || vt.ndim != q.ndim)
        return api_fail(err, ERR_SHAPE_MISMATCH, "%s has rank %d but query has rank %d",
                    kt.ndim != q.ndim ? "key" : "value", kt.ndim != q.ndim ? kt.ndim : vt.ndim,
                    q.ndim);
    const int b = r->batched;
    if (b && (kt.shape[0] != q.shape[0] || vt.shape[0] != q.shape[0]))
        return api_fail(err, ERR_SHAPE_MISMATCH, "%s has batch size %lld but query has %lld",
                    kt.shape[0] != q.shape[0] ? "key" : "value",
                    kt.shape[0] != q.shape[0] ? kt.shape[0] : vt.shape[0], q.shape[0]);
    if (kt.shape[b] != vt.shape[b])
        return api_fail(err, ERR_SHAPE_MISMATCH, "key has source length %lld but value has %lld",
                    kt.shape[b], vt.shape[b]);
    if (check_dim(b ? q.shape[0] : 1, lim->max_batch, "batch size", "max_batch", err) ||
        check_dim(q.shape[b], lim->max_target_len, "target length", "max_target_len", err) ||
        check_dim(kt.shape[b], lim->max_source_len, "source length", "max_source_len", err) ||
        check_dim(q.shape[b + 1], lim->max_embed_dim, "embed_dim", "max_embed_dim", err) ||
        check_dim(kt.shape[b + 1], lim->max_embed_dim, "kdim", "max_embed_dim", err) ||
        check_dim(vt.shape[b + 1], lim->max_embed_dim, "vdim", "max_embed_dim", err))
        return -1;
    p->N = b ? (int)q.shape[0] : 1;
    p->L = (int)q.shape[b], p->E = (int)q.shape[b + 1];
    p->S = (int)kt.shape[b], p->kdim = (int)kt.shape[b + 1], p->vdim = (int)vt.shape[b + 1];
    p->query = q.f, p->key = kt.f, p->value = vt.f;

    /* 3b. the variants (codec_variants.h): heads, head_dim, RoPE, ALiBi, ... */
    if (variants(p, root, lim, &r->arena, err) || (m && model_weights(p, m, err)))
        return -1;

    /* 4. weights, each with its exact PyTorch shape (for H, Hkv and d) */
    json_t *w = json_object_get(root, "weights");
    if (w && !json_is_object(w))
        return api_fail(err, ERR_INVALID_PARAMETER, "weights must be an object");
    if (w) {
        /* in the order of the one list of names (scan_weight_index) */
        struct att_weight_shape ws[ATT_NWEIGHTS];
        att_weight_shapes(ws, p);
        json_object_foreach(w, k, v) {
            const int i = scan_weight_index(k);
            if (i < 0)
                return scan_unknown_field(err, 1, k);
            char name[48];
            snprintf(name, sizeof name, "weights.%s", k);
            struct tensor t;
            if (decode_tensor(r, fast, &t, v, TENSOR_FLOAT, name, lim, err) ||
                codec_expect_shape(&t, name, ws[i].ndim, ws[i].d0, ws[i].d1, err))
                return -1;
            codec_set_weight(p, i, t.f, t.count);
        }
    }
    if (codec_identity_check(p, m ? "the model's " : "weights.", err))
        return -1;

    /* 5. masks */
    if ((v = json_object_get(root, "attn_mask"))) {
        if (json_is_string(v)) {
            const char *s = json_string_value(v);
            if (strcmp(s, "causal") && strcmp(s, "causal_lower_right"))
                return api_fail(err, ERR_INVALID_PARAMETER, "attn_mask must be \"causal\", "
                                "\"causal_lower_right\" or a tensor, not \"%.64s\"", s);
            p->mask_kind = strcmp(s, "causal") ? ATT_MASK_CAUSAL_LOWER_RIGHT : ATT_MASK_CAUSAL;
        } else {
            struct tensor t;
            if (decode_tensor(r, fast, &t, v, TENSOR_MASK, "attn_mask", lim, err))
                return -1;
            if (t.ndim != 2 && t.ndim != 3)
                return api_fail(err, ERR_SHAPE_MISMATCH, "attn_mask must have rank 2 (L, S) or 3 "
                            "(N*num_heads, L, S), got rank %d", t.ndim);
            p->mask_kind = t.is_bool ? ATT_MASK_BOOL : ATT_MASK_FLOAT;
            p->bool_mask = t.u8, p->float_mask = t.f;
            p->mask_ndim = t.ndim;
            for (int i = 0; i < t.ndim; i++)
                p->mask_shape[i] = (int)t.shape[i];
        }
    }
    if ((v = json_object_get(root, "key_padding_mask"))) {
        struct tensor t;
        if (decode_tensor(r, fast, &t, v, TENSOR_BOOL, "key_padding_mask", lim, err))
            return -1;
        if (b ? codec_expect_shape(&t, "key_padding_mask", 2, p->N, p->S, err)
              : codec_expect_shape(&t, "key_padding_mask", 1, p->S, 0, err))
            return -1;
        p->key_padding_mask = t.u8;
    }

    /* 6. options */
    int need = 1, avg = 0;
    if (get_bool(root, "need_weights", 1, &need, err) ||
        get_bool(root, "average_attn_weights", 0, &avg, err))
        return -1;
    p->weights_mode = !need ? ATT_WEIGHTS_NONE : avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    if (codec_weights_reduce(p, json_object_get(root, "weights_top_k"),
                             json_object_get(root, "weights_pool"), need, "", err))
        return -1;
    if ((v = json_object_get(root, "scale"))) {
        double s = json_number_value(v);
        if (!json_is_number(v) || !(s > 0) || !isfinite((float)s))
            return api_fail(err, ERR_INVALID_PARAMETER, "scale must be a number > 0");
        p->has_scale = 1, p->scale = (float)s;
    }
    if ((v = json_object_get(root, "positional_encoding"))) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "sinusoidal"))
            return api_fail(err, ERR_INVALID_PARAMETER, "positional_encoding must be "
                            "\"sinusoidal\"");
        p->positional_encoding = 1;
    }
    if ((v = json_object_get(root, "output_encoding"))) {
        const char *s = json_string_value(v);
        if (!s || (strcmp(s, "json") && strcmp(s, "base64")))
            return api_fail(err, ERR_INVALID_PARAMETER, "output_encoding must be \"json\" or "
                        "\"base64\"");
        r->base64_out = strcmp(s, "base64") == 0;
    }
    char lw[48], sw[48];
    snprintf(lw, sizeof lw, "query has L = %d", p->L);
    snprintf(sw, sizeof sw, "the keys have S = %d", p->S);
    if (get_tokens(root, "tokens", p->L, lw, &r->tokens_json, err) ||
        get_tokens(root, "key_tokens", p->S, sw, &r->key_tokens_json, err))
        return -1;

    /* 7. the whole, as the core sees it, once: the sizes stay with r;
     *    then the weights-output limit */
    struct att_error ae;
    int st = att_check(p, &r->out_len, &r->weights_len, &ae);
    if (st != ATT_OK)
        return api_fail(err, http_error_from_att(st), "%s", ae.msg);
    return codec_weights_limit(r, lim, "ask for need_weights false, average_attn_weights true, "
                               "weights_top_k or weights_pool", err);
}

int codec_decode_request_reference(struct codec_request *r, const char *body, size_t len,
                                   const struct codec_limits *lim,
                                   const struct codec_models *models, struct api_error *err)
{
    memset(r, 0, sizeof *r);
    r->models = models;
    att_params_init(&r->p);
    r->path = CODEC_PATH_JANSSON;
    if (len == 0)
        return api_fail(err, ERR_INVALID_JSON, "the request body is empty");
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root && json_error_code(&je) == json_error_numeric_overflow) {
        /* A number jansson cannot hold (beyond long long or double) is still
         * a JSON number. Load a copy in which each such number is replaced
         * by its stand-in: the real of the same value, or ±1e39 for one
         * beyond double (jsonnum.h). Tensors then read what the fast decoder
         * reads; integer fields see what json_int_value() explains. Rare, so a
         * second parse and a copy of the body are fine. */
        char *copy = malloc(len + 1);
        if (!copy)
            return api_fail(err, ERR_INTERNAL, "out of memory for a copy of the body");
        memcpy(copy, body, len);
        copy[len] = '\0';
        jsonnum_standin(copy, len);
        root = json_loadb(copy, len, JSON_REJECT_DUPLICATES, &je);
        free(copy);
    }
    if (!root)
        return api_fail(err, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s", je.line,
                    je.column, je.text);
    int rc = json_is_object(root)
                 ? decode_fields(r, root, NULL, lim, err)
                 : api_fail(err, ERR_INVALID_JSON, "the request body must be a JSON object");
    json_decref(root);
    return rc;
}

int codec_decode_request(struct codec_request *r, const char *body, size_t len,
                         const struct codec_limits *lim, const struct codec_models *models,
                         struct api_error *err)
{
    memset(r, 0, sizeof *r);
    r->models = models;
    att_params_init(&r->p);

    /* 1. the fast decoder (an empty body is not for it). A small body, on
     *    any doubt or error, starts over with jansson, which says what is
     *    wrong; a large one gets its answer here, without a DOM of it. */
    struct scan_tensors fast;
    const int errors = len > CODEC_FAST_ERRORS_FROM;
    json_t *root = NULL;
    const int sr = len ? scan_request(&root, body, len, lim, errors, &fast, &r->arena, err) : 1;
    if (sr <= 0) {
        int rc = sr < 0 ? -1 : decode_fields(r, root, &fast, lim, err);
        json_decref(root);
        if (rc && errors && err->code != ERR_INVALID_JSON)
            scan_json_check(body, len, err); /* invalid JSON anywhere comes first */
        if (rc == 0 || errors) {
            r->path = CODEC_PATH_FAST;
            return rc;
        }
    }
    codec_request_deinit(r);

    /* 2. jansson: the reference for what is accepted and what is said */
    return codec_decode_request_reference(r, body, len, lim, models, err);
}

void codec_request_deinit(struct codec_request *r)
{
    tensor_arena_free(&r->arena);
    free(r->tokens_json);
    free(r->key_tokens_json);
    r->tokens_json = r->key_tokens_json = NULL;
    if (r->model_ref)
        r->models->release(r->models->ctx, r->model_ref);
    r->model_ref = NULL;
}
