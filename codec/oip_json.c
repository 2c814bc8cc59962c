/* oip_json.c -- the JSON answers of the calls other than ModelInfer (the
 * protobuf JSON mapping of their messages) written as those messages,
 * field by field from the generated descriptors; and the small requests
 * of those calls read. See codec/oip.h. */
#include "codec/oip_json.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "lib/base64.h"
#include "lib/utf8.h"
#include "codec/pb_write.h"

#define NESTING_MAX 32 /* messages within messages: the answers nest 3 deep */

static const ProtobufCMessageDescriptor *const messages[] = {
    [OIP_SERVER_LIVE_RESPONSE] = &inference__server_live_response__descriptor,
    [OIP_SERVER_READY_RESPONSE] = &inference__server_ready_response__descriptor,
    [OIP_MODEL_READY_RESPONSE] = &inference__model_ready_response__descriptor,
    [OIP_SERVER_METADATA_RESPONSE] = &inference__server_metadata_response__descriptor,
    [OIP_MODEL_METADATA_RESPONSE] = &inference__model_metadata_response__descriptor,
    [OIP_MODEL_CONFIG_RESPONSE] = &inference__model_config_response__descriptor,
    [OIP_MODEL_STATISTICS_RESPONSE] = &inference__model_statistics_response__descriptor,
    [OIP_REPOSITORY_INDEX_RESPONSE] = &inference__repository_index_response__descriptor,
    [OIP_REPOSITORY_MODEL_LOAD_RESPONSE] = &inference__repository_model_load_response__descriptor,
    [OIP_REPOSITORY_MODEL_UNLOAD_RESPONSE] =
        &inference__repository_model_unload_response__descriptor,
};

typedef const ProtobufCFieldDescriptor Field;

static int bad(struct failure *err, Field *f, const char *what)
{
    return fail_with(err, ERR_INTERNAL, "the answer's field %s %s", f->name, what);
}

/* v as an integer (a JSON integer, an integral real or a decimal string),
 * within [lo, hi] (signed) or [0, uhi] (is_unsigned). */
static int int_of(const json_t *v, Field *f, int is_unsigned, int64_t lo, int64_t hi,
                  uint64_t uhi, uint64_t *out, struct failure *err)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        errno = 0;
        if (is_unsigned && s[0] != '-') {
            const unsigned long long u = strtoull(s, &end, 10);
            if (errno || end == s || *end || u > uhi)
                return bad(err, f, "is not an unsigned integer in range");
            *out = u;
            return 0;
        }
        const long long x = strtoll(s, &end, 10);
        if (errno || end == s || *end || is_unsigned || x < lo || x > hi)
            return bad(err, f, "is not an integer in range");
        *out = (uint64_t)x;
        return 0;
    }
    long long x;
    if (json_is_integer(v))
        x = json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9.0e15)
        x = (long long)json_real_value(v);
    else
        return bad(err, f, "is not an integer");
    if (is_unsigned ? x < 0 || (uint64_t)x > uhi : x < lo || x > hi)
        return bad(err, f, "is out of range");
    *out = (uint64_t)x;
    return 0;
}

/* v as a double (a JSON number, or "NaN", "Infinity", "-Infinity"). */
static int double_of(const json_t *v, Field *f, double *out, struct failure *err)
{
    const char *s = json_string_value(v);
    if (json_is_number(v))
        *out = json_number_value(v);
    else if (s && !strcmp(s, "NaN"))
        *out = NAN;
    else if (s && (!strcmp(s, "Infinity") || !strcmp(s, "-Infinity")))
        *out = s[0] == '-' ? -INFINITY : INFINITY;
    else
        return bad(err, f, "is not a number");
    return 0;
}

static int encode_message(struct pb_buf *b, const ProtobufCMessageDescriptor *d,
                          const json_t *j, int depth, struct failure *err);

/* A length-delimited value of field f from v: string, bytes (base64
 * text) or message. */
static int put_len_value(struct pb_buf *b, Field *f, const json_t *v, int depth,
                         struct failure *err)
{
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        struct pb_buf t = {0};
        const int rc = encode_message(&t, f->descriptor, v, depth + 1, err);
        if (rc == 0)
            pb_len_field(b, f->id, t.p, t.len);
        free(t.p);
        return rc;
    }
    if (!json_is_string(v))
        return bad(err, f, "is not a string");
    const char *s = json_string_value(v);
    const size_t n = json_string_length(v);
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        pb_len_field(b, f->id, s, n);
        return 0;
    }
    unsigned char *bytes = malloc(n / 4 * 3 + 1);
    size_t at;
    const long long k = bytes ? base64_decode(bytes, s, n, &at) : -1;
    if (k >= 0)
        pb_len_field(b, f->id, bytes, (size_t)k);
    free(bytes);
    return k >= 0 ? 0 : bad(err, f, "is not base64");
}

/* The integer types: their range and encoding. */
enum encoding { ENC_VARINT, ENC_ZIGZAG, ENC_FIXED32, ENC_FIXED64 };
static const struct {
    ProtobufCType type;
    int is_unsigned;
    int64_t lo, hi;
    uint64_t uhi;
    enum encoding enc;
} integers[] = {
    {PROTOBUF_C_TYPE_INT32, 0, INT32_MIN, INT32_MAX, 0, ENC_VARINT},
    {PROTOBUF_C_TYPE_ENUM, 0, INT32_MIN, INT32_MAX, 0, ENC_VARINT}, /* by number */
    {PROTOBUF_C_TYPE_SINT32, 0, INT32_MIN, INT32_MAX, 0, ENC_ZIGZAG},
    {PROTOBUF_C_TYPE_SFIXED32, 0, INT32_MIN, INT32_MAX, 0, ENC_FIXED32},
    {PROTOBUF_C_TYPE_INT64, 0, INT64_MIN, INT64_MAX, 0, ENC_VARINT},
    {PROTOBUF_C_TYPE_SINT64, 0, INT64_MIN, INT64_MAX, 0, ENC_ZIGZAG},
    {PROTOBUF_C_TYPE_SFIXED64, 0, INT64_MIN, INT64_MAX, 0, ENC_FIXED64},
    {PROTOBUF_C_TYPE_UINT32, 1, 0, 0, UINT32_MAX, ENC_VARINT},
    {PROTOBUF_C_TYPE_FIXED32, 1, 0, 0, UINT32_MAX, ENC_FIXED32},
    {PROTOBUF_C_TYPE_UINT64, 1, 0, 0, UINT64_MAX, ENC_VARINT},
    {PROTOBUF_C_TYPE_FIXED64, 1, 0, 0, UINT64_MAX, ENC_FIXED64},
};

/* An integer value of field f from v, without its tag. */
static int put_integer(struct pb_buf *b, Field *f, const json_t *v, struct failure *err)
{
    for (size_t i = 0; i < sizeof integers / sizeof integers[0]; i++) {
        if (integers[i].type != f->type)
            continue;
        uint64_t u = 0;
        if (int_of(v, f, integers[i].is_unsigned, integers[i].lo, integers[i].hi,
                   integers[i].uhi, &u, err))
            return -1;
        if (integers[i].enc == ENC_ZIGZAG) /* the same for 32 bits in their range */
            pb_varint(b, (u << 1) ^ (0 - (u >> 63)));
        else if (integers[i].enc == ENC_FIXED32)
            pb_fixed32(b, (uint32_t)u);
        else if (integers[i].enc == ENC_FIXED64)
            pb_fixed64(b, u);
        else
            pb_varint(b, u);
        return 0;
    }
    return bad(err, f, "has a type this writer does not know");
}

/* A scalar (varint or fixed-width) value of field f from v, without its
 * tag. */
static int put_scalar(struct pb_buf *b, Field *f, const json_t *v, struct failure *err)
{
    double x = 0;
    if (f->type == PROTOBUF_C_TYPE_BOOL) {
        if (!json_is_boolean(v))
            return bad(err, f, "is not true or false");
        pb_varint(b, json_is_true(v));
    } else if (f->type == PROTOBUF_C_TYPE_ENUM && json_is_string(v)) {
        const ProtobufCEnumValue *e =
            protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(v));
        if (!e)
            return bad(err, f, "names no value of its enum");
        pb_varint(b, (uint64_t)(int64_t)e->value);
    } else if (f->type == PROTOBUF_C_TYPE_FLOAT || f->type == PROTOBUF_C_TYPE_DOUBLE) {
        if (double_of(v, f, &x, err))
            return -1;
        if (f->type == PROTOBUF_C_TYPE_DOUBLE) {
            uint64_t u;
            memcpy(&u, &x, sizeof u);
            pb_fixed64(b, u);
        } else {
            const float y = (float)x;
            uint32_t w;
            memcpy(&w, &y, sizeof w);
            pb_fixed32(b, w);
        }
    } else
        return put_integer(b, f, v, err);
    return 0;
}

static enum pb_wire wire_of(Field *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return PB_LEN;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return PB_FIXED32;
    case PROTOBUF_C_TYPE_DOUBLE:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
        return PB_FIXED64;
    default:
        return PB_VARINT;
    }
}

/* One value of field f, its tag first. */
static int put_field(struct pb_buf *b, Field *f, const json_t *v, int depth,
                     struct failure *err)
{
    if (wire_of(f) == PB_LEN)
        return put_len_value(b, f, v, depth, err);
    pb_tag(b, f->id, wire_of(f));
    return put_scalar(b, f, v, err);
}

/* A map field (repeated entries of key 1, value 2) from the object v. */
static int put_map(struct pb_buf *b, Field *f, const json_t *v, int depth,
                   struct failure *err)
{
    const ProtobufCMessageDescriptor *e = f->descriptor;
    if (e->n_fields != 2 || e->fields[0].type != PROTOBUF_C_TYPE_STRING)
        return bad(err, f, "is an object, and not a map of strings");
    const char *k;
    json_t *x;
    struct pb_buf t = {0};
    json_object_foreach((json_t *)v, k, x) {
        t.len = 0;
        pb_string(&t, e->fields[0].id, k);
        if (put_field(&t, &e->fields[1], x, depth + 1, err)) {
            free(t.p);
            return -1;
        }
        pb_len_field(b, f->id, t.p, t.len);
    }
    free(t.p);
    return 0;
}

/* A repeated field from the array v: scalars packed, the rest one by one. */
static int put_repeated(struct pb_buf *b, Field *f, const json_t *v, int depth,
                        struct failure *err)
{
    size_t i;
    json_t *x;
    if (wire_of(f) == PB_LEN) {
        json_array_foreach(v, i, x) {
            if (put_field(b, f, x, depth, err))
                return -1;
        }
        return 0;
    }
    if (json_array_size(v) == 0)
        return 0;
    struct pb_buf t = {0};
    json_array_foreach(v, i, x) {
        if (put_scalar(&t, f, x, err)) {
            free(t.p);
            return -1;
        }
    }
    pb_len_field(b, f->id, t.p, t.len);
    free(t.p);
    return 0;
}

static int encode_message(struct pb_buf *b, const ProtobufCMessageDescriptor *d,
                          const json_t *j, int depth, struct failure *err)
{
    if (depth > NESTING_MAX)
        return fail_with(err, ERR_INTERNAL, "the answer nests deeper than %d", NESTING_MAX);
    if (!json_is_object(j))
        return fail_with(err, ERR_INTERNAL, "the answer's %s is not an object", d->short_name);
    for (unsigned i = 0; i < d->n_fields; i++) {
        Field *f = &d->fields[i];
        const json_t *v = json_object_get(j, f->name);
        if (!v || json_is_null(v))
            continue; /* absent: the default */
        int rc;
        if (f->label != PROTOBUF_C_LABEL_REPEATED)
            rc = put_field(b, f, v, depth, err);
        else if (f->type == PROTOBUF_C_TYPE_MESSAGE && json_is_object(v))
            rc = put_map(b, f, v, depth, err);
        else if (json_is_array(v))
            rc = put_repeated(b, f, v, depth, err);
        else
            rc = bad(err, f, "is not a list");
        if (rc)
            return -1;
    }
    return 0;
}

int oip_json_encode(enum oip_message m, const json_t *j, unsigned char **out, size_t *len,
                    struct failure *err)
{
    *out = NULL, *len = 0;
    if ((unsigned)m >= sizeof messages / sizeof messages[0])
        return fail_with(err, ERR_INTERNAL, "no such message");
    struct pb_buf b = {0};
    if (encode_message(&b, messages[m], j, 0, err)) {
        free(b.p);
        return -1;
    }
    if (b.nomem) {
        free(b.p);
        return fail_with(err, ERR_INTERNAL, "out of memory for the answer");
    }
    if (b.len == 0)
        free(b.p), b.p = NULL;
    *out = b.p, *len = b.len;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The small requests                                                      */

/* s into dst (n bytes) as a model's name or version, or refused. */
static int copy_name(char *dst, size_t n, const char *s, const char *model,
                     struct failure *err)
{
    if (strlen(s) >= n)
        return s == model ? fail_with(err, ERR_NOT_FOUND, "unknown model '%.64s...' (a name "
                                      "is at most %zu bytes)", s, n - 1)
                          : fail_with(err, ERR_NOT_FOUND, "unknown model '%.64s' version "
                                      "%.32s...", model, s);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

int oip_name_version(const unsigned char *msg, size_t len, char *name, size_t namelen,
                     char *version, size_t versionlen, struct failure *err)
{
    /* ModelReady-, ModelMetadata-, ModelConfig- and ModelStatisticsRequest
     * are the same two fields */
    Inference__ModelReadyRequest *q = inference__model_ready_request__unpack(NULL, len, msg);
    if (!q)
        return fail_with(err, ERR_BAD_REQUEST, "the message is not a valid request of its "
                         "call (name 1, version 2)");
    const int rc = copy_name(name, namelen, q->name, q->name, err) ||
                           copy_name(version, versionlen, q->version, q->name, err)
                       ? -1
                       : 0;
    inference__model_ready_request__free_unpacked(q, NULL);
    return rc;
}

int oip_repository_index(const unsigned char *msg, size_t len, int *ready, struct failure *err)
{
    Inference__RepositoryIndexRequest *q =
        inference__repository_index_request__unpack(NULL, len, msg);
    if (!q)
        return fail_with(err, ERR_BAD_REQUEST, "the message is not a valid "
                         "RepositoryIndexRequest");
    *ready = q->ready != 0;
    inference__repository_index_request__free_unpacked(q, NULL);
    return 0;
}

/* A ModelRepositoryParameter as the JSON value HTTP's body carries. */
static json_t *repo_value(const char *key, const Inference__ModelRepositoryParameter *p,
                          struct failure *err)
{
    switch (p ? p->parameter_choice_case
              : INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
        return json_boolean(p->bool_param);
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
        return json_integer((json_int_t)p->int64_param);
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
        if (!utf8_valid(p->string_param, strlen(p->string_param))) {
            fail_with(err, ERR_INVALID_PARAMETER, "parameter '%.64s' is not valid UTF-8", key);
            return NULL;
        }
        return json_string(p->string_param);
    case INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM: {
        char *t = malloc(BASE64_LEN(p->bytes_param.len) + 1);
        json_t *v = NULL;
        if (t)
            v = json_stringn(t, base64_encode(t, p->bytes_param.data, p->bytes_param.len));
        free(t);
        if (!v)
            fail_with(err, ERR_INTERNAL, "out of memory");
        return v;
    }
    default:
        fail_with(err, ERR_INVALID_PARAMETER, "parameter '%.64s' has no value: set "
                  "bool_param, int64_param, string_param or bytes_param", key);
        return NULL;
    }
}

int oip_repository_model(const unsigned char *msg, size_t len, char *model, size_t modellen,
                         char **body, size_t *bodylen, struct failure *err)
{
    *body = NULL, *bodylen = 0;
    /* RepositoryModelLoadRequest and ...UnloadRequest are the same fields */
    Inference__RepositoryModelLoadRequest *q =
        inference__repository_model_load_request__unpack(NULL, len, msg);
    if (!q)
        return fail_with(err, ERR_BAD_REQUEST, "the message is not a valid "
                         "RepositoryModelLoadRequest or RepositoryModelUnloadRequest");
    int rc = -1;
    json_t *params = json_object(), *o = NULL;
    if (!q->model_name[0]) {
        fail_with(err, ERR_INVALID_PARAMETER, "model_name is required");
        goto done;
    }
    if (copy_name(model, modellen, q->model_name, q->model_name, err))
        goto done;
    for (size_t i = 0; params && i < q->n_parameters; i++) {
        const char *k = q->parameters[i]->key;
        if (!utf8_valid(k, strlen(k))) {
            fail_with(err, ERR_INVALID_PARAMETER, "a parameter's name is not valid UTF-8");
            goto done;
        }
        json_t *v = repo_value(k, q->parameters[i]->value, err);
        if (!v)
            goto done;
        json_object_set_new(params, k, v); /* a map's last entry wins */
    }
    o = json_object_size(params) ? json_pack("{s:O}", "parameters", params) : json_object();
    *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!*body) {
        fail_with(err, ERR_INTERNAL, "out of memory");
        goto done;
    }
    *bodylen = strlen(*body);
    rc = 0;
done:
    json_decref(params);
    json_decref(o);
    inference__repository_model_load_request__free_unpacked(q, NULL);
    return rc;
}
