/* v2.c -- the Open Inference Protocol infer request: its JSON part
 * through jansson, each input from JSON "data" (read beforehand by
 * v2_scan.c into floats, or by tensor.c as for POST /attention) or from
 * the binary bytes after the JSON, and then the one att_check(); see
 * codec/v2.h. Parameters, outputs and the shape
 * rules are in codec/v2_params.c, the answer in codec/v2_response.c. */
#include "codec/v2_internal.h"
#include "codec/v2_inputs.h"
#include "codec/v2_params.h"
#include "codec/v2_scan.h"
#include "codec/v2_sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options/options.h"
#include "model/model.h"
#include "lib/jsonnum.h"
#include "codec/scan.h"
#include "codec/request.h"
#include "codec/reduce.h"
#include "codec/status.h"
#include "lib/suggest.h"


/* What an input may hold: attn_mask BOOL or FP32 (then -inf too),
 * key_padding_mask, sequence_start and sequence_end BOOL, the rest FP32
 * (sequence_id: read_ids). */
static enum tensor_kind input_kind(int idx)
{
    return idx == IN_ATTN_MASK                                           ? TENSOR_MASK
           : idx == IN_KPM || idx == IN_SEQ_START || idx == IN_SEQ_END ? TENSOR_BOOL
                                                                       : TENSOR_FLOAT;
}

/* ---------------------------------------------------------------------- */
/* One input                                                               */

/* A binary_data_size: an integer >= 0, with a binary part that holds it. */
static int binary_size(long long *n, json_t *size, const char *name,
                       const struct v2_binpart *b, struct failure *err)
{
    if (json_int_value(size, n) != JSON_INT_OK || *n < 0) {
        fail_with(err, ERR_INVALID_PARAMETER, "input '%s': binary_data_size must be an "
                  "integer >= 0", name);
        return -1;
    }
    if (!b->present) {
        fail_with(err, ERR_INVALID_PARAMETER, "input '%s' has binary_data_size but the "
                  "request has no binary part (Inference-Header-Content-Length)", name);
        return -1;
    }
    return 0;
}

/* The n bytes of t (shape counted, is_bool set) from the binary part. */
static int read_binary(struct tensor *t, json_t *size, const char *name, struct v2_binpart *b,
                       struct tensor_arena *a, struct failure *err)
{
    long long n = 0;
    if (binary_size(&n, size, name, b, err) || !b->p)
        return -1;
    const size_t want = t->count * (t->is_bool ? 1 : sizeof(float));
    if ((unsigned long long)n != want) {
        char s[96];
        tensor_shape_str(s, sizeof s, t->shape, t->ndim);
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size is %lld bytes "
                         "but shape %s of %s needs %zu", name, n, s, t->is_bool ? "BOOL" : "FP32",
                         want);
    }
    if (want > b->len - b->used)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size %zu goes past "
                         "the end of the body (%zu bytes of binary data left)", name, want,
                         b->len - b->used);
    /* a copy: the body may be released before the computation (service.h),
     * and its bytes need not be aligned for floats */
    void *buf = tensor_arena_keep(a, malloc(want ? want : 1)); /* (dims >= 1: want >= 1) */
    if (!buf)
        return fail_with(err, ERR_INTERNAL, "out of memory for input '%s'", name);
    memcpy(buf, b->p + b->used, want);
    b->used += want;
    if (t->is_bool)
        t->u8 = buf;
    else
        t->f = buf;
    return 0;
}

/* t's data from JSON "data", flat or nested (row-major either way), read
 * by tensor_from_json() or, when fast is set, already read (v2_scan.c:
 * data is its placeholder); the shape declared in t must be its true
 * shape. */
static int read_data(struct tensor *t, json_t *shape, json_t *data, enum tensor_kind kind,
                     const char *name, const struct codec_limits *lim, struct tensor_arena *a,
                     const struct v2_fast_slot *fast, struct failure *err)
{
    char want[96];
    tensor_shape_str(want, sizeof want, t->shape, t->ndim);
    if (fast && fast->state == V2_FAST_REFUSED) {
        *err = fast->err;
        return -1;
    }
    struct tensor d;
    if (fast) {
        d = fast->t;
        if (d.ndim == 1) { /* flat: t's shape */
            if (d.count != t->count)
                return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape %s does not match "
                                 "the true shape of data: %zu elements where the shape needs "
                                 "%zu", name, want, d.count, t->count);
            d.ndim = t->ndim;
            memcpy(d.shape, t->shape, sizeof d.shape);
        }
    } else if (!json_is_array(data)) {
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': data must be an array", name);
    }
    if (fast && d.ndim != t->ndim) {
        char got[96];
        tensor_shape_str(got, sizeof got, d.shape, d.ndim);
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape %s does not match the "
                         "true shape %s of its nested data", name, want, got);
    } else if (fast) {
        for (int i = 0; i < d.ndim; i++)
            if (d.shape[i] != t->shape[i]) {
                char got[96];
                tensor_shape_str(got, sizeof got, d.shape, d.ndim);
                return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape %s does not match "
                                 "the true shape %s of its nested data", name, want, got);
            }
    } else if (json_is_array(json_array_get(data, 0))) { /* nested: its nesting is its shape */
        char dname[64];
        snprintf(dname, sizeof dname, "%s.data", name);
        if (tensor_from_json(&d, data, kind, dname, lim->max_tensor_elements, a, err))
            return -1;
        int same = d.ndim == t->ndim;
        for (int i = 0; same && i < d.ndim; i++)
            same = d.shape[i] == t->shape[i];
        if (!same) {
            char got[96];
            tensor_shape_str(got, sizeof got, d.shape, d.ndim);
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape %s does not match the "
                             "true shape %s of its nested data", name, want, got);
        }
    } else { /* flat: as the {shape, data} form of POST /attention */
        if (json_array_size(data) != t->count)
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape %s does not match the "
                             "true shape of data: %zu elements where the shape needs %zu", name,
                             want, json_array_size(data), t->count);
        json_t *o = json_pack("{sOsO}", "shape", shape, "data", data);
        if (!o)
            return fail_with(err, ERR_INTERNAL, "out of memory reading input '%s'", name);
        const int rc = tensor_from_json(&d, o, kind, name, lim->max_tensor_elements, a, err);
        json_decref(o);
        if (rc)
            return -1;
    }
    if (d.is_bool != t->is_bool) /* a mask reads either; its datatype says which */
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s' has datatype %s but its data "
                         "holds %s", name, t->is_bool ? "BOOL" : "FP32",
                         d.is_bool ? "booleans" : "numbers");
    *t = d;
    return 0;
}

/* An input's fields (in, called name): none unknown, and its datatype, a
 * string, into *dt. 0, or -1 with err. */
static int input_head(json_t *in, const char *name, const char **dt, struct failure *err)
{
    static const char *const fields[] = {"name", "shape", "datatype", "parameters", "data",
                                         NULL};
    char what[96];
    const size_t n = codec_join(what, sizeof what, "input '", name);
    codec_join(what + n, sizeof what - n, "'", "");
    if (v2_known_fields(in, fields, what, err))
        return -1;
    if (!(*dt = json_string_value(json_object_get(in, "datatype"))))
        return fail_with(err, ERR_INVALID_PARAMETER, "input '%s': datatype must be a string",
                         name);
    return 0;
}

/* An input's parameters, checked, and its data: either "data" (*data) or
 * parameters.binary_data_size (*size). 0, or -1 with err. */
static int input_data(json_t *in, const char *name, json_t **data, json_t **size,
                      struct failure *err)
{
    char what[96];
    json_t *params = json_object_get(in, "parameters");
    if (params && !json_is_object(params))
        return fail_with(err, ERR_INVALID_PARAMETER, "input '%s': parameters must be an object",
                         name);
    const size_t n = codec_join(what, sizeof what, "input '", name);
    codec_join(what + n, sizeof what - n, "': ", "");
    if (v2_check_parameters(params, V2_PARAMS_INPUT, what, err))
        return -1;
    *size = json_object_get(params, "binary_data_size");
    *data = json_object_get(in, "data");
    if (*size && *data)
        return fail_with(err, ERR_INVALID_PARAMETER, "input '%s' has both data and "
                         "binary_data_size", name);
    if (!*size && !*data)
        return fail_with(err, ERR_INVALID_PARAMETER, "input '%s' has no data (nor "
                         "parameters.binary_data_size)", name);
    return 0;
}

/* The sequence_id input (UINT64 or BYTES, shape [B]) into *ids, a JSON
 * array of its ids as strings (owned by the caller). */
static int read_ids(json_t **ids, json_t *in, const char *name, struct v2_binpart *b,
                    struct failure *err)
{
    const char *dt;
    if (input_head(in, name, &dt, err))
        return -1;
    const int bytes = strcmp(dt, "BYTES") == 0;
    if (!bytes && strcmp(dt, "UINT64"))
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s' has datatype %s; it takes UINT64 "
                         "or BYTES", name, dt);
    struct tensor t;
    memset(&t, 0, sizeof t);
    if (tensor_shape_from_json(&t, json_object_get(in, "shape"), name, 1LL << 40, err))
        return -1;
    if (t.ndim != 1)
        return fail_with(err, ERR_SHAPE_MISMATCH, "input '%s' must have shape [B]: one id per "
                         "batch item", name);
    json_t *data = NULL, *size = NULL;
    if (input_data(in, name, &data, &size, err))
        return -1;
    if (!(*ids = json_array()))
        return fail_with(err, ERR_INTERNAL, "out of memory for input '%s'", name);
    if (!size)
        return v2_ids_json(*ids, name, bytes, t.shape[0], data, b, err);
    long long n = 0;
    if (binary_size(&n, size, name, b, err))
        return -1;
    if ((unsigned long long)n > b->len - b->used)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size %lld goes past "
                         "the end of the body (%zu bytes of binary data left)", name, n,
                         b->len - b->used);
    if (v2_ids_binary(*ids, name, bytes, t.shape[0], n, (const unsigned char *)b->p + b->used,
                      err))
        return -1;
    b->used += (size_t)n;
    return 0;
}

static int read_input(struct tensor *t, json_t *in, int idx, const char *name,
                      struct v2_binpart *b, const struct codec_limits *lim, struct tensor_arena *a,
                      const struct v2_fast_slot *fast, struct failure *err)
{
    /* 1. datatype, for this input */
    const enum tensor_kind kind = input_kind(idx);
    const char *dt;
    if (input_head(in, name, &dt, err))
        return -1;
    const int is_bool = strcmp(dt, "BOOL") == 0;
    if ((!is_bool && strcmp(dt, "FP32")) || (is_bool && kind == TENSOR_FLOAT) ||
        (!is_bool && kind == TENSOR_BOOL))
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s' has datatype %s; it takes %s",
                         name, dt, kind == TENSOR_MASK ? "BOOL or FP32"
                                  : kind == TENSOR_BOOL ? "BOOL" : "FP32");

    /* 2. shape: dimensions >= 1, the element limit */
    memset(t, 0, sizeof *t);
    json_t *shape = json_object_get(in, "shape");
    if (tensor_shape_from_json(t, shape, name, lim->max_tensor_elements, err))
        return -1;
    t->is_bool = is_bool;

    /* 3. data, from the JSON or the binary part */
    json_t *data = NULL, *size = NULL;
    if (input_data(in, name, &data, &size, err))
        return -1;
    if (size ? read_binary(t, size, name, b, a, err)
             : read_data(t, shape, data, kind, name, lim, a, fast, err))
        return -1;

    /* 4. the one validation of every tensor */
    return tensor_check(t, kind, name, err);
}

static int read_inputs(struct v2_inputs *in, json_t *list, struct v2_binpart *b,
                       const struct model *m, const struct codec_limits *lim,
                       struct tensor_arena *a, const struct v2_fast *f, int need_query,
                       struct failure *err)
{
    if (!json_is_array(list))
        return fail_with(err, ERR_INVALID_PARAMETER, "inputs must be an array of tensors");
    for (size_t i = 0; i < json_array_size(list); i++) {
        json_t *x;
        const char *name = v2_named_item(list, i, "inputs", &x, err);
        if (!name)
            return -1;
        const int idx = v2_input_index(name);
        if (idx < 0) {
            const char *names[IN_COUNT];
            char hint[96];
            for (int k = 0; k < IN_COUNT; k++)
                names[k] = k < IN_WEIGHT || !m ? v2_input_name(k) : NULL;
            return fail_with(err, ERR_INVALID_PARAMETER, "unknown input '%.64s'%s (inputs are "
                             "query, key, value, attn_mask, key_padding_mask, sequence_id, "
                             "sequence_start, sequence_end%s)", name,
                             suggest_hint(hint, sizeof hint, name, names, IN_COUNT),
                             m ? "" : " and the weights");
        }
        if (idx >= IN_WEIGHT && m)
            return fail_with(err, ERR_INVALID_PARAMETER, "input '%s': model '%s' holds its own "
                             "weights; only the built-in model 'attention' takes them as inputs",
                             name, m->name);
        if (in->name[idx])
            return fail_with(err, ERR_INVALID_PARAMETER, "input '%s' already exists in request",
                             name);
        in->name[idx] = name;
        const struct v2_fast_slot *fast =
            i < IN_COUNT && f->slot[i].state != V2_FAST_NONE ? &f->slot[i] : NULL;
        if (idx == IN_SEQ_ID ? read_ids(&in->ids, x, name, b, err)
                             : read_input(&in->t[idx], x, idx, name, b, lim, a, fast, err))
            return -1;
    }
    if (!in->name[IN_QUERY] && need_query)
        return fail_with(err, ERR_INVALID_PARAMETER, "input 'query' is required");
    if (b->used != b->len)
        return fail_with(err, ERR_INVALID_TENSOR, "%zu bytes of binary data after the JSON part "
                         "belong to no input (the binary_data_size of the inputs add up to %zu)",
                         b->len - b->used, b->used);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The request                                                             */

static int decode_fields(struct v2_request *r, json_t *root, struct v2_inputs *in,
                         struct v2_binpart *b, const struct model *m,
                         const struct codec_limits *lim, const struct v2_fast *f,
                         struct failure *err)
{
    /* model_name: KServe's client (InferRequest.to_rest) repeats the path's */
    static const char *const fields[] = {"id", "parameters", "inputs", "outputs", "model_name",
                                         NULL};
    struct att_params *p = &r->c.p;
    json_t *v;

    /* 1. the fields, id, model_name */
    if (v2_known_fields(root, fields, "the request", err))
        return -1;
    const char *model = m ? m->name : MODEL_BUILTIN;
    if ((v = json_object_get(root, "model_name")) &&
        (!json_is_string(v) || strcmp(json_string_value(v), model)))
        return fail_with(err, ERR_INVALID_PARAMETER, "model_name must be the name of the model "
                         "in the path, '%s'", model);
    if ((v = json_object_get(root, "id"))) {
        if (!json_is_string(v))
            return fail_with(err, ERR_INVALID_PARAMETER, "id must be a string");
        if (!(r->id = strdup(json_string_value(v))))
            return fail_with(err, ERR_INTERNAL, "out of memory copying id");
    }

    /* 2. parameters, then every input and the binary part */
    struct v2_options o;
    json_t *params = json_object_get(root, "parameters");
    json_t *inputs = json_object_get(root, "inputs");
    struct codec_sequence *seq = &r->c.seq;
    if ((!params || json_is_object(params)) && v2_sequence_only(inputs)) {
        /* sequence_end without a step (no query): end them, nothing else */
        const struct codec_sequence before = *seq; /* its inputs */
        const struct v2_binpart b0 = *b;
        struct codec_values cv;
        codec_values_init(&cv);
        codec_values_over(&cv, params, 1);
        const int read = v2_check_parameters(params, V2_PARAMS_REQUEST, "", err) == 0 &&
                         (!inputs || read_inputs(in, inputs, b, m, lim, &r->c.arena, f, 0,
                                                 err) == 0) &&
                         v2_sequence_inputs(&cv, in, params, err) == 0 &&
                         codec_sequence_read(seq, &cv, params, lim, err) == 0;
        const int ended = read ? codec_sequence_end_only(seq, 0, err) : 0;
        codec_values_deinit(&cv);
        if (ended < 0 || (!read && inputs))
            return -1; /* its sequence inputs are all there is to say of */
        if (ended) { /* the answer: cache_length 0 (for each, an output in the array form) */
            if (seq->array)
                r->outputs[r->n_outputs++] = V2_OUT_CACHE_LENGTH;
            r->binary[V2_OUT_CACHE_LENGTH] =
                json_is_true(json_object_get(params, opt_name(OPT_BINARY_DATA_OUTPUT)));
            return 0;
        }
        codec_sequence_deinit(seq);
        *seq = before, *b = b0;
        v2_inputs_deinit(in);
        memset(in, 0, sizeof *in);
    }
    /* the sequence's options first, unless its ids are an input */
    const int tensors = v2_sequence_named(inputs);
    int rc = v2_read_options(&o, params, m, lim, err) ||
             (!tensors && (v2_sequence_inputs(&o.cv, in, params, err) ||
                           codec_sequence_read(seq, &o.cv, params, lim, err)));
    rc = rc || read_inputs(in, inputs, b, m, lim, &r->c.arena, f, 1, err);
    rc = rc || (tensors && (v2_sequence_inputs(&o.cv, in, params, err) ||
                            codec_sequence_read(seq, &o.cv, params, lim, err)));
    p->H = (int)o.c.heads;

    /* 3. shapes against each other, variants, weights, masks, outputs */
    in->seq = seq->n != 0;
    if (rc || v2_set_tensors(r, in, m, &o, lim, err) ||
        v2_read_outputs(r, json_object_get(root, "outputs"), &o, err)) {
        v2_options_deinit(&o);
        return -1;
    }
    v2_options_deinit(&o);
    if (o.c.causal) {
        if (in->name[IN_ATTN_MASK] && o.causal_asked)
            return fail_with(err, ERR_INVALID_PARAMETER, "parameters.is_causal is true and the "
                             "request has an attn_mask input: give one or the other");
        if (!in->name[IN_ATTN_MASK]) /* an attn_mask input overrides a default */
            p->mask_kind = o.c.lower_right ? ATT_MASK_CAUSAL_LOWER_RIGHT : ATT_MASK_CAUSAL;
    }
    p->has_scale = o.c.has_scale, p->scale = o.c.scale;
    p->positional_encoding = o.c.pe;

    /* 3b. a step: its own rules; the whole (the cache's) is the caller's */
    if (seq->n)
        return codec_sequence_rules(seq, p, r->c.batched, params,
                                    o.causal_asked && !o.c.causal, "parameters.", err);

    /* 4. the whole, as the core sees it, once; then the weights limit */
    struct att_error ae;
    const int st = att_check(p, &r->c.out_len, &r->c.weights_len, &ae);
    if (st != ATT_OK)
        return fail_with(err, http_error_from_att(st), "%s", ae.msg);
    return codec_weights_limit(&r->c, lim, CODEC_V2_WEIGHTS_HINT, err);
}

/* decode_fields with the inputs it reads (their JSON arrays freed after). */
static int decode_root(struct v2_request *r, json_t *root, struct v2_binpart *b,
                       const struct model *m, const struct codec_limits *lim,
                       const struct v2_fast *f, struct failure *err)
{
    struct v2_inputs in;
    memset(&in, 0, sizeof in);
    const int rc = decode_fields(r, root, &in, b, m, lim, f, err);
    v2_inputs_deinit(&in);
    return rc;
}

/* Invalid JSON because bytes follow the JSON part: binary data without the
 * header that says where they start. Names the header (and its value). */
static int missing_header(const char *body, size_t len, struct failure *err)
{
    const size_t end = err->code == ERR_INVALID_JSON ? v2_json_end(body, len) : 0;
    if (end)
        fail_with(err, ERR_BAD_REQUEST, "the body has %zu bytes after its JSON part (%zu "
                  "bytes): a request with binary tensor data needs the header "
                  "Inference-Header-Content-Length: %zu", len - end, end, end);
    return -1;
}

int v2_decode_infer(struct v2_request *r, const char *body, size_t len, long long header_len,
                    const struct model *m, const struct codec_limits *lim,
                    struct failure *err)
{
    return v2_decode_infer_seq(r, body, len, header_len, m, lim, NULL, err);
}

int v2_decode_infer_seq(struct v2_request *r, const char *body, size_t len,
                        long long header_len, const struct model *m,
                        const struct codec_limits *lim, const char *sequence_header,
                        struct failure *err)
{
    memset(r, 0, sizeof *r);
    r->c.seq.header = sequence_header;
    att_params_init(&r->c.p);
    r->c.path = CODEC_PATH_JANSSON;
    struct v2_binpart b = {0};
    size_t jlen = len;
    if (header_len >= 0) {
        if ((unsigned long long)header_len > len)
            return fail_with(err, ERR_BAD_REQUEST, "Inference-Header-Content-Length %lld is "
                             "beyond the body's %zu bytes", header_len, len);
        if (header_len == 0)
            return fail_with(err, ERR_BAD_REQUEST, "Inference-Header-Content-Length 0 (a raw "
                             "binary request) is not supported: send the JSON part first");
        jlen = (size_t)header_len;
        b = (struct v2_binpart){.p = body + jlen, .len = len - jlen, .present = 1};
    }
    if (jlen == 0)
        return fail_with(err, ERR_INVALID_JSON, "the request body is empty");
    r->c.seq.text = body, r->c.seq.text_len = jlen;
    b.text = body, b.text_len = jlen;
    /* the big arrays first, without a DOM (v2_scan.c); then jansson over
     * the rest, a number it cannot hold read through its stand-in as POST
     * /attention reads it (codec_decode_request_reference) */
    const int errors = jlen > CODEC_FAST_ERRORS_FROM;
    struct v2_fast f;
    if (v2_fast_scan(&f, body, jlen, errors, m, lim, &r->c.arena, err)) {
        v2_fast_free(&f);
        return header_len < 0 ? missing_header(body, len, err) : -1;
    }
    json_error_t je;
    int nomem;
    json_t *root = v2_fast_load(&f, body, jlen, &je, &nomem);
    int rc;
    if (!root)
        rc = nomem ? fail_with(err, ERR_INTERNAL, "out of memory for a copy of the body")
                   : fail_with(err, ERR_INVALID_JSON, "invalid JSON at line %d, column %d: %s",
                               je.line, je.column, je.text);
    else
        rc = json_is_object(root)
                 ? decode_root(r, root, &b, m, lim, &f, err)
                 : fail_with(err, ERR_INVALID_JSON, "the request must be a JSON object");
    json_decref(root);
    /* a large body's arrays jansson did not read: invalid JSON anywhere in
     * them comes first, as it does for the reference */
    if (rc && f.blanks.n && errors && err->code != ERR_INVALID_JSON)
        scan_json_check(body, jlen, err);
    if (f.blanks.n)
        r->c.path = CODEC_PATH_FAST;
    v2_fast_free(&f);
    return rc && header_len < 0 ? missing_header(body, len, err) : rc;
}

void v2_request_deinit(struct v2_request *r)
{
    codec_request_deinit(&r->c);
    free(r->id);
    r->id = NULL;
}
