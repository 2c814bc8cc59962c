/* oip_infer.c -- a ModelInferRequest as the body of v2's HTTP infer with
 * Triton's binary tensor extension: the JSON header written here (every
 * input binary, every output asked for as binary), then each input's
 * bytes, raw or converted from its typed contents; see codec/oip.h. The
 * HTTP decoder then applies its own rules (names, shapes, sizes). */
#include "codec/oip_infer.h"
#include "options/options.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_service.pb-c.h"
#include "lib/utf8.h"
#include "codec/pb_write.h"

typedef Inference__ModelInferRequest Request;
typedef Inference__ModelInferRequest__InferInputTensor Input;
typedef Inference__InferTensorContents Contents;
typedef Inference__InferParameter Param;

/* One parameter of a map, whichever message's map it is. */
struct param {
    const char *key;
    const Param *v;
};

/* A JSON string of the valid UTF-8 s, quotes included. */
static void put_json_string(struct pb_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    pb_byte(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t run = 0; /* bytes as they are */
        while (p[run] >= 0x20 && p[run] != '"' && p[run] != '\\')
            run++;
        pb_bytes(b, p, run);
        p += run;
        if (*p == '"' || *p == '\\') {
            pb_byte(b, '\\');
            pb_byte(b, *p++);
        } else if (*p) {
            const char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            pb_bytes(b, e, sizeof e);
            p++;
        }
    }
    pb_byte(b, '"');
}

/* Where a parameter is: the request's (name NULL), or input or output
 * (kind) name's. */
struct where {
    const char *kind, *name;
};

/* w as the messages say it ("request", "input 'q'"), into dst[96]. */
static const char *where_text(char *dst, const struct where *w)
{
    if (!w->name)
        return "request";
    snprintf(dst, 96, "%s '%.64s'", w->kind, w->name);
    return dst;
}

/* err: "<what> is not valid UTF-8", what the format's text cut to the
 * cap - 1 bytes it has always had. */
__attribute__((format(printf, 3, 4)))
static int not_utf8(struct failure *err, size_t cap, const char *fmt, ...)
{
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, cap < sizeof what ? cap : sizeof what, fmt, ap);
    va_end(ap);
    return fail_with(err, ERR_INVALID_PARAMETER, "%s is not valid UTF-8", what);
}

static int is_utf8(const char *s)
{
    return utf8_valid(s, strlen(s));
}

/* The decimal digits of v, as "%llu" writes them, ending at end: the first. */
static char *digits(char *end, unsigned long long v)
{
    do
        *--end = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    return end;
}

/* v as "%lld" writes it. */
static void put_ll(struct pb_buf *b, long long v)
{
    char t[24], *e = t + sizeof t;
    char *a = digits(e, v < 0 ? 0 - (unsigned long long)v : (unsigned long long)v);
    if (v < 0)
        *--a = '-';
    pb_bytes(b, a, (size_t)(e - a));
}

/* Parameter p's value as JSON (of where). */
static int put_value(struct pb_buf *b, const struct param *p, const struct where *w,
                     struct failure *err)
{
    char t[40], where[96];
    switch (p->v ? p->v->parameter_choice_case : INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
        pb_str(b, p->v->bool_param ? "true" : "false");
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
        put_ll(b, (long long)p->v->int64_param);
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
        /* beyond long long too: the HTTP decoder reads such an id from the text */
    {
        const char *a = digits(t + sizeof t, p->v->uint64_param);
        pb_bytes(b, a, (size_t)(t + sizeof t - a));
        return 0;
    }
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM: {
        const double d = p->v->double_param;
        if (!isfinite(d))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s parameter '%.64s' is %s: a "
                             "double_param must be finite", where_text(where, w), p->key,
                             isnan(d) ? "NaN" : "infinite");
        size_t n = (size_t)snprintf(t, sizeof t, "%.17g", d);
        if (strspn(t, "-0123456789") == n) /* still a real in JSON: 2.0, not 2 */
            n += (size_t)snprintf(t + n, sizeof t - n, ".0");
        pb_bytes(b, t, n);
        return 0;
    }
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM: {
        if (!is_utf8(p->v->string_param))
            return not_utf8(err, 128, "%s parameter '%.64s'", where_text(where, w), p->key);
        put_json_string(b, p->v->string_param);
        return 0;
    }
    default:
        return fail_with(err, ERR_INVALID_PARAMETER, "%s parameter '%.64s' has no value: set "
                         "bool_param, int64_param, uint64_param, double_param or "
                         "string_param", where_text(where, w), p->key);
    }
}

/* `,"parameters":{...}` of p[0..n) but the one named drop (HTTP's own,
 * which the transcoder sets) and those a later one of the same name
 * replaces (a map's last entry wins), then extra (members' text, or
 * NULL); nothing when that leaves it empty. */
static int put_params(struct pb_buf *b, const struct param *p, size_t n, const char *drop,
                      const char *extra, const struct where *w, struct failure *err)
{
    int first = 1;
    for (size_t i = 0; i < n; i++) {
        char where[96];
        if (!is_utf8(p[i].key))
            return not_utf8(err, 96, "%s parameter name", where_text(where, w));
        int later = !strcmp(p[i].key, drop);
        for (size_t j = i + 1; j < n && !later; j++)
            later = !strcmp(p[i].key, p[j].key);
        if (later)
            continue;
        pb_str(b, first ? ",\"parameters\":{" : ",");
        first = 0;
        put_json_string(b, p[i].key);
        pb_byte(b, ':');
        if (put_value(b, &p[i], w, err))
            return -1;
    }
    if (extra) {
        pb_str(b, first ? ",\"parameters\":{" : ",");
        pb_str(b, extra);
        first = 0;
    }
    if (!first)
        pb_byte(b, '}');
    return 0;
}

/* Entries a map has room for without a malloc. */
#define PARAMS_HERE 8

/* A map's entries as struct param: into here[PARAMS_HERE] when they fit,
 * else malloc'd into *out (NULL when that fails); free with PARAMS_FREE. */
#define PARAMS_OF(out, here, n, entries)                                           \
    do {                                                                           \
        (out) = (n) <= PARAMS_HERE ? (here) : calloc((n), sizeof *(out));          \
        for (size_t i_ = 0; (out) && i_ < (n); i_++)                               \
            (out)[i_] = (struct param){(entries)[i_]->key, (entries)[i_]->value};   \
    } while (0)
#define PARAMS_FREE(p, here)                                                       \
    do {                                                                           \
        if ((p) != (here))                                                         \
            free(p);                                                               \
    } while (0)

/* ---------------------------------------------------------------------- */
/* Typed contents                                                          */

enum field { F_NONE = -1, F_BOOL, F_INT, F_INT64, F_UINT, F_UINT64, F_FP32, F_FP64, F_BYTES };

static const char *const field_name[] = {
    "bool_contents", "int_contents", "int64_contents", "uint_contents",
    "uint64_contents", "fp32_contents", "fp64_contents", "bytes_contents",
};

/* The protocol's datatypes: the typed field each takes and its bytes an
 * element (BYTES: 4 + each element's length). */
static const struct {
    const char *name;
    int field; /* enum field */
    int size;
} types[] = {
    {"BOOL", F_BOOL, 1},     {"INT8", F_INT, 1},      {"INT16", F_INT, 2},
    {"INT32", F_INT, 4},     {"INT64", F_INT64, 8},   {"UINT8", F_UINT, 1},
    {"UINT16", F_UINT, 2},   {"UINT32", F_UINT, 4},   {"UINT64", F_UINT64, 8},
    {"FP16", F_NONE, 2},     {"BF16", F_NONE, 2},     {"FP32", F_FP32, 4},
    {"FP64", F_FP64, 8},     {"BYTES", F_BYTES, 0},
};

/* Elements of contents c in field f. */
static size_t field_count(const Contents *c, int f)
{
    const size_t n[] = {c->n_bool_contents,   c->n_int_contents,  c->n_int64_contents,
                        c->n_uint_contents,   c->n_uint64_contents, c->n_fp32_contents,
                        c->n_fp64_contents,   c->n_bytes_contents};
    return n[f];
}

/* Input in's typed contents: which row of types, and their bytes. */
static int typed_size(const Input *in, int *row, size_t *bytes, struct failure *err)
{
    int t = -1;
    for (int i = 0; i < (int)(sizeof types / sizeof types[0]); i++)
        if (!strcmp(in->datatype, types[i].name))
            t = i;
    if (t < 0)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s' has datatype '%.16s', which "
                         "has no typed contents: send it in raw_input_contents", in->name,
                         in->datatype);
    const int f = types[t].field;
    if (f == F_NONE)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s' is %s, which has no typed "
                         "contents: send it in raw_input_contents", in->name, types[t].name);
    for (int g = F_BOOL; g <= F_BYTES; g++)
        if (g != f && field_count(in->contents, g))
            return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s' is %s: its contents go in "
                             "%s, not %s", in->name, types[t].name, field_name[f],
                             field_name[g]);
    const size_t n = field_count(in->contents, f);
    size_t total = n * (size_t)types[t].size; /* n is within the message: no overflow */
    for (size_t i = 0; f == F_BYTES && i < n; i++)
        total += 4 + in->contents->bytes_contents[i].len;
    *row = t, *bytes = total;
    return 0;
}

/* Little-endian v in size bytes at dst. */
static void put_le(unsigned char *dst, uint64_t v, int size)
{
    for (int i = 0; i < size; i++)
        dst[i] = (unsigned char)(v >> (8 * i));
}

/* Input in's typed contents (types[row]) as its binary data at dst. */
static int typed_write(unsigned char *dst, const Input *in, int row, struct failure *err)
{
    const Contents *c = in->contents;
    const int size = types[row].size, f = types[row].field;
    const size_t n = field_count(c, f);
    for (size_t i = 0; i < n; i++, dst += size) {
        uint64_t v = 0;
        switch (f) {
        case F_BOOL:
            v = c->bool_contents[i] != 0;
            break;
        case F_INT: {
            const long long x = c->int_contents[i], lim = 1LL << (8 * size - 1);
            if (x < -lim || x >= lim)
                return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s': int_contents[%zu] "
                                 "= %lld is out of %s's range", in->name, i, x,
                                 types[row].name);
            v = (uint64_t)x;
            break;
        }
        case F_UINT: {
            const unsigned long long x = c->uint_contents[i];
            if (size < 4 && x >> (8 * size))
                return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s': uint_contents[%zu] "
                                 "= %llu is out of %s's range", in->name, i, x,
                                 types[row].name);
            v = x;
            break;
        }
        case F_INT64:
            v = (uint64_t)c->int64_contents[i];
            break;
        case F_UINT64:
            v = c->uint64_contents[i];
            break;
        case F_FP32:
            memcpy(dst, &c->fp32_contents[i], 4); /* x86-64: little-endian */
            continue;
        case F_FP64:
            memcpy(dst, &c->fp64_contents[i], 8);
            continue;
        default: { /* F_BYTES: Triton's layout, a 4-byte length then the bytes */
            const ProtobufCBinaryData *e = &c->bytes_contents[i];
            put_le(dst, e->len, 4);
            if (e->len) /* data is NULL for an empty one */
                memcpy(dst + 4, e->data, e->len);
            dst += 4 + e->len;
            continue;
        }
        }
        put_le(dst, v, size);
    }
    return 0;
}

/* ---------------------------------------------------------------------- */
/* The request                                                             */

/* Input i's JSON: name, datatype, shape and parameters (binary_data_size
 * bytes of data). */
static int put_input(struct pb_buf *b, const Input *in, size_t bytes, struct failure *err)
{
    if (!is_utf8(in->name))
        return not_utf8(err, 96, "an input's name");
    if (!is_utf8(in->datatype))
        return not_utf8(err, 96, "input '%.64s' datatype", in->name);
    pb_str(b, "{\"name\":");
    put_json_string(b, in->name);
    pb_str(b, ",\"datatype\":");
    put_json_string(b, in->datatype);
    pb_str(b, ",\"shape\":[");
    for (size_t d = 0; d < in->n_shape; d++) {
        if (d)
            pb_byte(b, ',');
        put_ll(b, (long long)in->shape[d]);
    }
    pb_byte(b, ']');
    static const char size_key[] = "\"binary_data_size\":";
    char extra[48], *e = extra + sizeof extra - 1;
    *e = '\0';
    char *a = digits(e, bytes);
    a -= sizeof size_key - 1;
    memcpy(a, size_key, sizeof size_key - 1);
    const struct where w = {"input", in->name};
    struct param here[PARAMS_HERE], *p;
    PARAMS_OF(p, here, in->n_parameters, in->parameters);
    const int rc = !p ? fail_with(err, ERR_INTERNAL, "out of memory")
                      : put_params(b, p, in->n_parameters, "binary_data_size", a, &w, err);
    PARAMS_FREE(p, here);
    pb_byte(b, '}');
    return rc;
}

static int put_outputs(struct pb_buf *b, const Request *q, struct failure *err)
{
    pb_str(b, ",\"outputs\":[");
    for (size_t i = 0; i < q->n_outputs; i++) {
        const Inference__ModelInferRequest__InferRequestedOutputTensor *o = q->outputs[i];
        if (!is_utf8(o->name))
            return not_utf8(err, 96, "an output's name");
        const struct where w = {"output", o->name};
        pb_str(b, i ? ",{\"name\":" : "{\"name\":");
        put_json_string(b, o->name);
        struct param here[PARAMS_HERE], *p;
        PARAMS_OF(p, here, o->n_parameters, o->parameters);
        const int rc = !p ? fail_with(err, ERR_INTERNAL, "out of memory")
                          : put_params(b, p, o->n_parameters, "binary_data",
                                       "\"binary_data\":true", &w, err);
        PARAMS_FREE(p, here);
        if (rc)
            return -1;
        pb_byte(b, '}');
    }
    pb_byte(b, ']');
    return 0;
}

/* Each input's bytes (sizes[i]; typed: row[i] of types). */
static int input_sizes(const Request *q, size_t *sizes, int *row, struct failure *err)
{
    const int raw = q->n_raw_input_contents > 0;
    if (raw && q->n_raw_input_contents != q->n_inputs)
        return fail_with(err, ERR_INVALID_TENSOR, "raw_input_contents has %zu entries for %zu "
                         "inputs: one per input, in order", q->n_raw_input_contents,
                         q->n_inputs);
    for (size_t i = 0; i < q->n_inputs; i++) {
        const Input *in = q->inputs[i];
        if (raw && in->contents)
            return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s' has contents, and the "
                             "request raw_input_contents: send one or the other", in->name);
        if (raw)
            sizes[i] = q->raw_input_contents[i].len, row[i] = -1;
        else if (!in->contents)
            return fail_with(err, ERR_INVALID_TENSOR, "input '%.64s' has no data: send its "
                             "contents or raw_input_contents", in->name);
        else if (typed_size(in, &row[i], &sizes[i], err))
            return -1;
    }
    return 0;
}

/* The JSON header into b (*header bytes), then the inputs' bytes. */
static int write_body(struct pb_buf *b, const Request *q, long long *header,
                      struct failure *err)
{
    enum { HERE = 8 }; /* inputs without a malloc */
    size_t sizes_here[HERE];
    int row_here[HERE];
    const size_t n = q->n_inputs ? q->n_inputs : 1;
    size_t *sizes = n <= HERE ? sizes_here : calloc(n, sizeof *sizes);
    int *row = n <= HERE ? row_here : calloc(n, sizeof *row);
    int rc = -1;
    if (!sizes || !row) {
        rc = fail_with(err, ERR_INTERNAL, "out of memory");
        goto done;
    }
    if (input_sizes(q, sizes, row, err))
        goto done;
    size_t total = 0;
    for (size_t i = 0; i < q->n_inputs; i++)
        total += sizes[i];
    pb_reserve(b, total + 512 + 256 * (q->n_inputs + q->n_outputs)); /* the header's most often */

    /* 1. the JSON header */
    pb_str(b, "{\"inputs\":[");
    for (size_t i = 0; i < q->n_inputs; i++) {
        if (i)
            pb_byte(b, ',');
        if (put_input(b, q->inputs[i], sizes[i], err))
            goto done;
    }
    pb_byte(b, ']');
    if (q->n_outputs && put_outputs(b, q, err))
        goto done;
    if (q->id[0]) {
        if (!is_utf8(q->id)) {
            not_utf8(err, 96, "the request's id");
            goto done;
        }
        pb_str(b, ",\"id\":");
        put_json_string(b, q->id);
    }
    struct param here[PARAMS_HERE], *p;
    PARAMS_OF(p, here, q->n_parameters, q->parameters);
    if (!p) {
        rc = fail_with(err, ERR_INTERNAL, "out of memory");
        goto done;
    }
    const char *all_binary = opt_name(OPT_BINARY_DATA_OUTPUT);
    char extra[64] = "";
    if (!q->n_outputs)
        snprintf(extra, sizeof extra, "\"%s\":true", all_binary);
    const struct where w = {"request", NULL};
    const int prc = put_params(b, p, q->n_parameters, all_binary, q->n_outputs ? NULL : extra,
                               &w, err);
    PARAMS_FREE(p, here);
    if (prc)
        goto done;
    pb_byte(b, '}');

    /* 2. the inputs' bytes */
    *header = (long long)b->len;
    if (pb_reserve(b, total) == 0) {
        unsigned char *dst = b->p + b->len;
        for (size_t i = 0; i < q->n_inputs; dst += sizes[i], i++) {
            if (row[i] < 0) {
                if (sizes[i]) /* data is NULL for an empty one */
                    memcpy(dst, q->raw_input_contents[i].data, sizes[i]);
            } else if (typed_write(dst, q->inputs[i], row[i], err))
                goto done;
        }
        b->len += total;
    }
    rc = b->nomem ? fail_with(err, ERR_INTERNAL, "out of memory for the request") : 0;
done:
    if (sizes != sizes_here)
        free(sizes);
    if (row != row_here)
        free(row);
    return rc;
}

/* The unpacked request's memory: first a bump arena (a small request's
 * all, without a malloc), then malloc (spilled set). */
struct arena {
    unsigned char *p;
    size_t used, cap;
    int spilled;
};

static void *arena_alloc(void *cls, size_t n)
{
    struct arena *a = cls;
    const size_t at = (a->used + 15) & ~(size_t)15;
    if (at <= a->cap && n <= a->cap - at) {
        a->used = at + n;
        return a->p + at;
    }
    a->spilled = 1;
    return malloc(n);
}

static void arena_free(void *cls, void *ptr)
{
    const struct arena *a = cls;
    const uintptr_t u = (uintptr_t)ptr, lo = (uintptr_t)a->p;
    if (u < lo || u >= lo + a->cap)
        free(ptr);
}

int oip_infer_decode(struct oip_infer *r, const unsigned char *msg, size_t len,
                     struct failure *err)
{
    memset(r, 0, sizeof *r);
    _Alignas(16) unsigned char space[8192];
    struct arena ar = {space, 0, sizeof space, 0};
    ProtobufCAllocator alloc = {arena_alloc, arena_free, &ar};
    Request *q = inference__model_infer_request__unpack(&alloc, len, msg);
    if (!q)
        return fail_with(err, ERR_BAD_REQUEST, "the message is not a valid ModelInferRequest");
    int rc = -1;
    if (!q->model_name[0]) {
        rc = fail_with(err, ERR_INVALID_PARAMETER, "model_name is required");
        goto done;
    }
    if (strlen(q->model_name) >= sizeof r->model) {
        rc = fail_with(err, ERR_NOT_FOUND, "unknown model '%.64s...' (a name is at most %zu "
                       "bytes)", q->model_name, sizeof r->model - 1);
        goto done;
    }
    if (strlen(q->model_version) >= sizeof r->version) {
        rc = fail_with(err, ERR_NOT_FOUND, "unknown model '%.64s' version %.32s...",
                       q->model_name, q->model_version);
        goto done;
    }
    memcpy(r->model, q->model_name, strlen(q->model_name) + 1); /* both fit: seen above */
    memcpy(r->version, q->model_version, strlen(q->model_version) + 1);
    struct pb_buf b = {0};
    rc = write_body(&b, q, &r->header_len, err);
    r->body = (char *)b.p;
    r->len = b.len;
done:
    if (ar.spilled) /* else all of it is in space */
        inference__model_infer_request__free_unpacked(q, &alloc);
    return rc;
}

void oip_infer_deinit(struct oip_infer *r)
{
    free(r->body);
    r->body = NULL;
    r->len = 0;
}
