/* request.c -- the request schema of POST /attention: fields,
 * shapes against each other, limits; see codec.h. Tensors come from
 * tensor.c (jansson) or scan.c (the fast decoder), and every one goes
 * through tensor_check() here, whichever read it. */
#include "codec/request.h"
#include "options/options.h"
#include "codec/variants.h"
#include "codec/resolve.h"
#include "codec/reduce.h"
#include "codec/status.h"

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
                         const struct codec_limits *lim, struct failure *err)
{
    const struct failure *refused = NULL;
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

/* Labels: an array of strings, exactly one per position (want: L or S;
 * the same labels serve every batch item). */
static int get_tokens(json_t *root, const char *key, int want, const char *what, char **out,
                      struct failure *err)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return 0;
    if (!json_is_array(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an array of strings", key);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i)))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s[%zu] is not a string", key, i);
    if (json_array_size(v) != (size_t)want)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s has %zu entries but %s; it needs "
                         "exactly one per position", key, json_array_size(v), what);
    *out = json_dumps(v, JSON_COMPACT | JSON_ENSURE_ASCII);
    return *out ? 0 : fail_with(err, ERR_INTERNAL, "out of memory copying %s", key);
}

/* model: hold it (r->model); its defaults go under the request's options
 * (codec_values_defaults, in decode_fields). */
static int use_model(struct codec_request *r, json_t *root, json_t *v, const struct model **m,
                     struct failure *err)
{
    if (!json_is_string(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "model must be a string: the name of a "
                         "server-held model");
    if (json_object_get(root, opt_name(OPT_WEIGHTS)))
        return fail_with(err, ERR_INVALID_PARAMETER, "model and weights cannot be used together: "
                         "the model '%.100s' holds its weights", json_string_value(v));
    if (!r->models)
        return fail_with(err, ERR_NOT_FOUND, "unknown model '%.64s'", json_string_value(v));
    if (r->models->acquire(r->models->ctx, json_string_value(v), m, &r->model_ref, err))
        return -1;
    if (!*m) /* the built-in model, weights inline */
        return 0;
    /* the dimensions its weights have: a request may repeat them only */
    const char *kv = opt_name(OPT_NUM_KV_HEADS), *hd = opt_name(OPT_HEAD_DIM);
    return codec_model_dim(*m, OPT_NUM_KV_HEADS, json_object_get(root, kv), kv, err) ||
                   codec_model_dim(*m, OPT_HEAD_DIM, json_object_get(root, hd), hd, err)
               ? -1
               : 0;
}

/* The request's options over the model's defaults (cv holds those), the
 * variants checked and set. */
static int variants(struct att_params *p, struct codec_values *cv, json_t *root,
                    const struct codec_limits *lim, struct tensor_arena *a,
                    struct failure *err)
{
    const char *rn = opt_name(OPT_ROPE), *wn = opt_name(OPT_WINDOW);
    json_t *rope = json_object_get(root, rn), *window = json_object_get(root, wn);
    return (rope && codec_values_rope(cv, rope, rn, err)) ||
                   (window && codec_values_window(cv, window, wn, err)) ||
                   codec_values_apply(p, cv, lim, a, err)
               ? -1
               : 0;
}

static int decode_fields(struct codec_request *r, json_t *root, const struct scan_tensors *fast,
                         struct codec_values *cv, const struct codec_limits *lim,
                         struct failure *err)
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
    if ((v = json_object_get(root, opt_name(OPT_MODEL))) && use_model(r, root, v, &m, err))
        return -1;
    codec_values_defaults(cv, m, 0);
    codec_values_over(cv, root, 0);

    /* 1c. a step of a sequence (codec/sequence.c); sequence_end without a
     *     query ends one without a step */
    struct codec_sequence *seq = &r->seq;
    if (codec_sequence_read(seq, cv, root, lim, err))
        return -1;
    const int end_only =
        codec_sequence_end_only(seq, json_object_get(root, opt_name(OPT_QUERY)) != NULL, err);
    if (end_only)
        return end_only < 0 ? -1 : 0;

    /* 2. the options both protocols share (codec/resolve.h): num_heads,
     *    need_weights, average_attn_weights, attn_mask's strings, scale,
     *    positional_encoding */
    struct codec_options o;
    if (codec_options_resolve(&o, cv, m, lim, err))
        return -1;
    p->H = (int)o.heads;
    p->weights_mode = !o.need ? ATT_WEIGHTS_NONE
                      : o.avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    p->has_scale = o.has_scale, p->scale = o.scale;
    p->positional_encoding = o.pe;
    if (o.causal)
        p->mask_kind = o.lower_right ? ATT_MASK_CAUSAL_LOWER_RIGHT : ATT_MASK_CAUSAL;

    /* 3. query, key, value: same rank, same batch */
    struct tensor q, kt, vt;
    const char *qn = opt_name(OPT_QUERY), *kn = opt_name(OPT_KEY), *vn = opt_name(OPT_VALUE);
    v = json_object_get(root, qn);
    if (!v)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is required", qn);
    if (decode_tensor(r, fast, &q, v, TENSOR_FLOAT, qn, lim, err) || codec_query_rank(&q, err))
        return -1;
    kt = q, vt = q;
    if ((v = json_object_get(root, kn))) {
        if (decode_tensor(r, fast, &kt, v, TENSOR_FLOAT, kn, lim, err))
            return -1;
        vt = kt;
    }
    if ((v = json_object_get(root, vn)) &&
        decode_tensor(r, fast, &vt, v, TENSOR_FLOAT, vn, lim, err))
        return -1;
    if (codec_set_qkv(p, &r->batched, &q, &kt, &vt, lim, err))
        return -1;

    /* 3b. the variants (codec/variants.h): heads, head_dim, RoPE, ALiBi, ... */
    if (variants(p, cv, root, lim, &r->arena, err) || (m && codec_model_check(p, m, err)))
        return -1;

    /* 4. weights, each with its exact PyTorch shape (for H, Hkv and d) */
    json_t *w = json_object_get(root, opt_name(OPT_WEIGHTS));
    if (w && !json_is_object(w))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an object",
                         opt_name(OPT_WEIGHTS));
    if (w) {
        struct att_weight_shape ws[ATT_NWEIGHTS];
        att_weight_shapes(ws, p);
        json_object_foreach(w, k, v) {
            const int i = scan_weight_index(k);
            if (i < 0)
                return scan_unknown_field(err, 1, k);
            char name[48];
            snprintf(name, sizeof name, "%s.%s", opt_name(OPT_WEIGHTS), k);
            struct tensor t;
            if (decode_tensor(r, fast, &t, v, TENSOR_FLOAT, name, lim, err) ||
                codec_expect_shape(&t, name, ws[i].ndim, ws[i].d0, ws[i].d1, err))
                return -1;
            codec_set_weight(p, i, t.f, t.count);
        }
    }
    /* (a later step of a sequence takes the built-in model's weights its
     * start gave: the caller checks them) */
    if ((m || !seq->n) && codec_identity_check(p, m ? "the model's " : "weights.", err))
        return -1;

    /* 5. masks: attn_mask, the request's or the model's (its strings in step 2) */
    if ((v = cv->v[OPT_ATTN_MASK]) && !json_is_string(v)) {
        struct tensor t;
        if (codec_sequence_mask(seq, err) ||
            decode_tensor(r, fast, &t, v, TENSOR_MASK, opt_name(OPT_ATTN_MASK), lim, err) ||
            codec_set_mask(p, &t, err))
            return -1;
    }
    if ((v = json_object_get(root, opt_name(OPT_KEY_PADDING_MASK)))) {
        struct tensor t;
        if (decode_tensor(r, fast, &t, v, TENSOR_BOOL, opt_name(OPT_KEY_PADDING_MASK), lim,
                          err) ||
            (seq->n ? codec_sequence_kpm(seq, p, r->batched, &t, err)
                        : codec_set_key_padding_mask(p, r->batched, &t, err)))
            return -1;
    }

    /* 6. the reductions (options in step 2); output_encoding, labels */
    if (codec_weights_reduce(p, o.top_k, o.pool, o.need, "", err))
        return -1;
    if ((v = cv->v[OPT_OUTPUT_ENCODING])) {
        const int c = opt_choice_index(OPT_OUTPUT_ENCODING, json_string_value(v));
        if (c < 0)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be \"%s\" or \"%s\"",
                             opt_name(OPT_OUTPUT_ENCODING), opt_choice(OPT_OUTPUT_ENCODING, 0),
                             opt_choice(OPT_OUTPUT_ENCODING, 1));
        r->base64_out = c == 1;
    }
    char lw[48], sw[48];
    snprintf(lw, sizeof lw, "query has L = %d", p->L);
    snprintf(sw, sizeof sw, "the keys have S = %d", p->S);
    if (get_tokens(root, opt_name(OPT_TOKENS), p->L, lw, &r->tokens_json, err) ||
        get_tokens(root, opt_name(OPT_KEY_TOKENS), p->S, sw, &r->key_tokens_json, err))
        return -1;

    /* 6b. a step: its own rules; the whole (the cache's) is the caller's */
    if (seq->n)
        return codec_sequence_rules(seq, p, r->batched, root, 0, "", err);

    /* 7. the whole, as the core sees it, once: the sizes stay with r;
     *    then the weights-output limit */
    struct att_error ae;
    int st = att_check(p, &r->out_len, &r->weights_len, &ae);
    if (st != ATT_OK)
        return fail_with(err, http_error_from_att(st), "%s", ae.msg);
    return codec_weights_limit(r, lim, CODEC_WEIGHTS_HINT, err);
}

/* decode_fields with the request's option values (cv) around it. */
static int decode_root(struct codec_request *r, json_t *root, const struct scan_tensors *fast,
                       const struct codec_limits *lim, struct failure *err)
{
    struct codec_values cv;
    codec_values_init(&cv);
    const int rc = decode_fields(r, root, fast, &cv, lim, err);
    codec_values_deinit(&cv);
    return rc;
}

/* r empty, with what both decoders keep of the call: the models lent,
 * the body and the X-Sequence-Id header for the sequence's id. */
static void request_begin(struct codec_request *r, const char *body, size_t len,
                          const struct codec_models *models, const char *header)
{
    memset(r, 0, sizeof *r);
    r->models = models;
    r->seq.header = header, r->seq.text = body, r->seq.text_len = len;
    att_params_init(&r->p);
}

static int reference(struct codec_request *r, const char *body, size_t len,
                     const struct codec_limits *lim, const struct codec_models *models,
                     const char *header, struct failure *err)
{
    request_begin(r, body, len, models, header);
    r->path = CODEC_PATH_JANSSON;
    if (len == 0)
        return fail_with(err, ERR_INVALID_JSON, "the request body is empty");
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
            return fail_with(err, ERR_INTERNAL, "out of memory for a copy of the body");
        memcpy(copy, body, len);
        copy[len] = '\0';
        jsonnum_standin(copy, len);
        root = json_loadb(copy, len, JSON_REJECT_DUPLICATES, &je);
        free(copy);
    }
    if (!root)
        return fail_with(err, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s", je.line,
                    je.column, je.text);
    int rc = json_is_object(root)
                 ? decode_root(r, root, NULL, lim, err)
                 : fail_with(err, ERR_INVALID_JSON, "the request body must be a JSON object");
    json_decref(root);
    return rc;
}

int codec_decode_request_reference(struct codec_request *r, const char *body, size_t len,
                                   const struct codec_limits *lim,
                                   const struct codec_models *models, struct failure *err)
{
    return reference(r, body, len, lim, models, NULL, err);
}

int codec_decode_request(struct codec_request *r, const char *body, size_t len,
                         const struct codec_limits *lim, const struct codec_models *models,
                         struct failure *err)
{
    return codec_decode_request_seq(r, body, len, lim, models, NULL, err);
}

int codec_decode_request_seq(struct codec_request *r, const char *body, size_t len,
                             const struct codec_limits *lim, const struct codec_models *models,
                             const char *header, struct failure *err)
{
    request_begin(r, body, len, models, header);

    /* 1. the fast decoder (an empty body is not for it). A small body, on
     *    any doubt or error, starts over with jansson, which says what is
     *    wrong; a large one gets its answer here, without a DOM of it. */
    struct scan_tensors fast;
    const int errors = len > CODEC_FAST_ERRORS_FROM;
    json_t *root = NULL;
    const int sr = len ? scan_request(&root, body, len, lim, errors, &fast, &r->arena, err) : 1;
    if (sr <= 0) {
        int rc = sr < 0 ? -1 : decode_root(r, root, &fast, lim, err);
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
    return reference(r, body, len, lim, models, header, err);
}

void codec_request_deinit(struct codec_request *r)
{
    codec_sequence_deinit(&r->seq);
    tensor_arena_free(&r->arena);
    free(r->tokens_json);
    free(r->key_tokens_json);
    r->tokens_json = r->key_tokens_json = NULL;
    if (r->model_ref)
        r->models->release(r->models->ctx, r->model_ref);
    r->model_ref = NULL;
}
