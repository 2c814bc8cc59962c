/* oip_answer.c -- v2's 200 answer (a stream whose text is the JSON part
 * and whose pieces are the binary outputs) as a ModelInferResponse, the
 * outputs' bytes left where they are; and a stream's error message. See
 * codec/oip.h. Field numbers: proto/grpc_service.proto. */
#include "codec/oip_answer.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/pb_write.h"

/* ModelInferResponse's fields, and its outputs' */
enum { R_MODEL_NAME = 1, R_MODEL_VERSION, R_ID, R_PARAMETERS, R_OUTPUTS, R_RAW_OUTPUT };
enum { O_NAME = 1, O_DATATYPE, O_SHAPE, O_PARAMETERS };
/* InferParameter's */
enum { P_BOOL = 1, P_INT64, P_STRING, P_DOUBLE };
/* ModelStreamInferResponse's */
enum { S_ERROR_MESSAGE = 1, S_INFER_RESPONSE };

/* The InferParameter of JSON value v: its bytes, or 0 when v has no such
 * form (null, an array, an object). */
static size_t param_size(const json_t *v)
{
    if (json_is_boolean(v))
        return 2;
    if (json_is_integer(v))
        return 1 + pb_varint_len((uint64_t)json_integer_value(v));
    if (json_is_real(v))
        return 1 + 8;
    if (json_is_string(v)) {
        const size_t n = json_string_length(v);
        return 1 + pb_varint_len(n) + n;
    }
    return 0;
}

static void put_param(struct pb_buf *b, const json_t *v)
{
    if (json_is_boolean(v))
        pb_varint_field(b, P_BOOL, json_is_true(v));
    else if (json_is_integer(v))
        pb_varint_field(b, P_INT64, (uint64_t)json_integer_value(v));
    else if (json_is_real(v)) {
        const double d = json_real_value(v);
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        pb_tag(b, P_DOUBLE, PB_FIXED64);
        pb_fixed64(b, u);
    } else
        pb_len_field(b, P_STRING, json_string_value(v), json_string_length(v));
}

/* The head of field's map<string, InferParameter> entry of key k (klen
 * bytes) whose value has psize bytes: the value goes next. */
static void put_entry_head(struct pb_buf *b, unsigned field, const char *k, size_t klen,
                           size_t psize)
{
    pb_tag(b, field, PB_LEN);
    pb_varint(b, 1 + pb_varint_len(klen) + klen + 1 + pb_varint_len(psize) + psize);
    pb_len_field(b, 1, k, klen);
    pb_tag(b, 2, PB_LEN);
    pb_varint(b, psize);
}

/* The members of obj but skip as field's map<string, InferParameter>
 * entries (key 1, value 2). */
static int put_params(struct pb_buf *b, unsigned field, json_t *obj, const char *skip,
                      struct failure *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        if (skip && !strcmp(k, skip))
            continue;
        const size_t psize = param_size(v), klen = strlen(k);
        if (!psize)
            return fail_with(err, ERR_INTERNAL, "the answer's parameter '%.64s' is not a "
                             "number, boolean or string", k);
        put_entry_head(b, field, k, klen, psize);
        put_param(b, v);
    }
    return 0;
}

/* Output o of the answer (InferOutputTensor, into t) whose bytes are
 * piece k of st. */
static int put_output(struct pb_buf *t, json_t *o, const struct stream *st, int k,
                      struct failure *err)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    const char *dtype = json_string_value(json_object_get(o, "datatype"));
    json_t *shape = json_object_get(o, "shape"), *params = json_object_get(o, "parameters");
    json_t *size = json_object_get(params, "binary_data_size");
    if (!name || !dtype || !json_is_array(shape))
        return fail_with(err, ERR_INTERNAL, "the answer's output %d has no name, datatype or "
                         "shape", k);
    if (!json_is_integer(size))
        return fail_with(err, ERR_INTERNAL, "the answer's output '%.64s' is not binary", name);
    if (k >= st->npieces || st->piece[k].coding != STREAM_RAW ||
        st->piece[k].at != st->text_len ||
        (unsigned long long)json_integer_value(size) != st->piece[k].nbytes)
        return fail_with(err, ERR_INTERNAL, "the answer's output '%.64s' does not match its "
                         "binary data", name);
    pb_string(t, O_NAME, name);
    pb_string(t, O_DATATYPE, dtype);
    size_t i, packed = 0;
    json_t *d;
    json_array_foreach(shape, i, d) {
        packed += pb_varint_len((uint64_t)json_integer_value(d));
    }
    if (packed) {
        pb_tag(t, O_SHAPE, PB_LEN);
        pb_varint(t, packed);
        json_array_foreach(shape, i, d) {
            pb_varint(t, (uint64_t)json_integer_value(d));
        }
    }
    return put_params(t, O_PARAMETERS, params, "binary_data_size", err);
}

/* The ModelInferResponse's fields but raw_output_contents, from the JSON j. */
static int put_response(struct pb_buf *b, json_t *j, const struct stream *st,
                        struct failure *err)
{
    const char *s;
    if ((s = json_string_value(json_object_get(j, "model_name"))))
        pb_string(b, R_MODEL_NAME, s);
    if ((s = json_string_value(json_object_get(j, "model_version"))))
        pb_string(b, R_MODEL_VERSION, s);
    if ((s = json_string_value(json_object_get(j, "id"))) && s[0])
        pb_string(b, R_ID, s);
    if (put_params(b, R_PARAMETERS, json_object_get(j, "parameters"), NULL, err))
        return -1;
    json_t *outputs = json_object_get(j, "outputs"), *o;
    size_t k;
    struct pb_buf t = {0};
    json_array_foreach(outputs, k, o) {
        t.len = 0;
        if (put_output(&t, o, st, (int)k, err)) {
            free(t.p);
            return -1;
        }
        pb_len_field(b, R_OUTPUTS, t.p, t.len);
    }
    const int nomem = t.nomem;
    free(t.p);
    if (json_array_size(outputs) != (size_t)st->npieces)
        return fail_with(err, ERR_INTERNAL, "the answer has %zu outputs and %d binary pieces",
                         json_array_size(outputs), st->npieces);
    return nomem ? fail_with(err, ERR_INTERNAL, "out of memory for the answer") : 0;
}

/* ---------------------------------------------------------------------- */
/* The answer's JSON as codec/v2_response.c writes it, read in place: a    */
/* text of any other form (an escape in a string, a JSON output, ...)      */
/* goes the general way, through jansson, which says what is wrong.        */

/* A cursor over the text; bad once it is not of the form read. */
struct scan {
    const char *p, *end;
    int bad;
};

/* Whether the text goes on with t (then skipped). */
static int next_is(struct scan *s, const char *t)
{
    const size_t n = strlen(t);
    if (s->bad || (size_t)(s->end - s->p) < n || memcmp(s->p, t, n))
        return 0;
    s->p += n;
    return 1;
}

static void expect(struct scan *s, const char *t)
{
    if (!next_is(s, t))
        s->bad = 1;
}

/* A string of printable ASCII but quotes and backslashes: its bytes. */
static const char *scan_string(struct scan *s, size_t *n)
{
    expect(s, "\"");
    const char *a = s->p;
    while (!s->bad && s->p < s->end && *s->p != '"') {
        const unsigned char c = (unsigned char)*s->p++;
        s->bad = c < 0x20 || c > 0x7e || c == '\\';
    }
    if (s->p == s->end)
        s->bad = 1;
    if (s->bad)
        return *n = 0, NULL;
    *n = (size_t)(s->p++ - a);
    return a;
}

/* An integer of at most 18 digits, no leading zero. */
static long long scan_int(struct scan *s)
{
    const int neg = next_is(s, "-");
    long long v = 0;
    int digits = 0;
    for (; !s->bad && s->p < s->end && *s->p >= '0' && *s->p <= '9'; s->p++, digits++)
        v = 10 * v + (*s->p - '0');
    if (digits == 0 || digits > 18 || (digits > 1 && s->p[-digits] == '0'))
        s->bad = 1;
    return neg ? -v : v;
}

/* Output k (`{"name":..,"datatype":..,"shape":[..],"parameters":
 * {"binary_data_size":n}}`) as an InferOutputTensor field of b, its n
 * bytes piece k of st. */
static void fast_output(struct scan *s, struct pb_buf *b, const struct stream *st, int k)
{
    size_t nl, dl, nd = 0, packed = 0;
    long long dim[8];
    expect(s, "{\"name\":");
    const char *name = scan_string(s, &nl);
    expect(s, ",\"datatype\":");
    const char *dtype = scan_string(s, &dl);
    expect(s, ",\"shape\":[");
    if (!next_is(s, "]")) {
        do {
            if (nd == sizeof dim / sizeof dim[0])
                s->bad = 1;
            else
                dim[nd++] = scan_int(s);
        } while (!s->bad && next_is(s, ","));
        expect(s, "]");
    }
    expect(s, ",\"parameters\":{\"binary_data_size\":");
    const long long size = scan_int(s);
    expect(s, "}}");
    if (s->bad || k >= st->npieces || st->piece[k].coding != STREAM_RAW ||
        st->piece[k].at != st->text_len || (unsigned long long)size != st->piece[k].nbytes) {
        s->bad = 1;
        return;
    }
    for (size_t i = 0; i < nd; i++)
        packed += pb_varint_len((uint64_t)dim[i]);
    pb_tag(b, R_OUTPUTS, PB_LEN);
    pb_varint(b, 1 + pb_varint_len(nl) + nl + 1 + pb_varint_len(dl) + dl +
                     (packed ? 1 + pb_varint_len(packed) + packed : 0));
    pb_len_field(b, O_NAME, name, nl);
    pb_len_field(b, O_DATATYPE, dtype, dl);
    if (packed) {
        pb_tag(b, O_SHAPE, PB_LEN);
        pb_varint(b, packed);
        for (size_t i = 0; i < nd; i++)
            pb_varint(b, (uint64_t)dim[i]);
    }
}

/* put_response's fields from st's text of v2_response.c's form: 0, or -1
 * when it is not of that form or does not match st's pieces (b's length
 * then as it was). */
static int put_fast(struct pb_buf *b, const struct stream *st)
{
    struct scan s = {st->text, st->text + st->text_len, 0};
    const size_t start = b->len;
    size_t nl, il = 0;
    const char *id = NULL;
    long long cache = 0;
    expect(&s, "{\"model_name\":");
    const char *name = scan_string(&s, &nl);
    expect(&s, ",\"model_version\":\"1\"");
    const int has_cache = next_is(&s, ",\"parameters\":{\"cache_length\":");
    if (has_cache) {
        cache = scan_int(&s);
        expect(&s, "}");
    }
    if (next_is(&s, ",\"id\":"))
        id = scan_string(&s, &il);
    expect(&s, ",\"outputs\":[");
    if (s.bad)
        return -1;
    pb_len_field(b, R_MODEL_NAME, name, nl);
    pb_len_field(b, R_MODEL_VERSION, "1", 1);
    if (il)
        pb_len_field(b, R_ID, id, il);
    if (has_cache) {
        static const char key[] = "cache_length";
        put_entry_head(b, R_PARAMETERS, key, sizeof key - 1,
                       1 + pb_varint_len((uint64_t)cache));
        pb_varint_field(b, P_INT64, (uint64_t)cache);
    }
    int k = 0;
    for (; !s.bad && !next_is(&s, "]}"); k++) {
        if (k)
            expect(&s, ",");
        fast_output(&s, b, st, k);
    }
    if (s.bad || s.p != s.end || k != st->npieces) {
        b->len = start;
        return -1;
    }
    return 0;
}

int oip_answer_encode(struct oip_answer *a, const struct stream *st, int stream,
                      struct failure *err)
{
    memset(a, 0, sizeof *a);
    struct pb_buf b = {0};
    pb_reserve(&b, 64 + st->text_len); /* more than the fields take */
    if (stream) /* room for infer_response's tag and length, filled below */
        b.len = b.nomem ? 0 : 1 + PB_VARINT_MAX;
    int rc = 0;
    if (put_fast(&b, st)) {
        json_error_t je;
        json_t *j = json_loadb(st->text, st->text_len, 0, &je);
        if (!json_is_object(j)) {
            json_decref(j);
            free(b.p);
            return fail_with(err, ERR_INTERNAL, "the answer is not a JSON object");
        }
        rc = put_response(&b, j, st, err);
        json_decref(j);
    }
    if (rc || b.nomem) {
        free(b.p);
        return rc ? -1 : fail_with(err, ERR_INTERNAL, "out of memory for the answer");
    }

    /* raw_output_contents: each piece's tag and length, then its bytes */
    size_t tails = 0;
    for (int i = 0; i < st->npieces; i++) {
        const size_t n = st->piece[i].nbytes;
        a->prefix[i][0] = R_RAW_OUTPUT << 3 | PB_LEN;
        const size_t plen = 1 + pb_varint_put(&a->prefix[i][1], n);
        a->tail[a->ntail].data = a->prefix[i], a->tail[a->ntail++].len = plen;
        if (n)
            a->tail[a->ntail].data = st->piece[i].src, a->tail[a->ntail++].len = n;
        tails += plen + n;
    }
    if (stream) { /* ModelStreamInferResponse { infer_response = 2 } around it */
        const size_t inner = b.len - (1 + PB_VARINT_MAX) + tails;
        unsigned char h[1 + PB_VARINT_MAX];
        h[0] = S_INFER_RESPONSE << 3 | PB_LEN;
        const size_t hl = 1 + pb_varint_put(h + 1, inner), gap = sizeof h - hl;
        memcpy(b.p + gap, h, hl);
        memmove(b.p, b.p + gap, b.len - gap);
        b.len -= gap;
    }
    a->body = b.p, a->len = b.len;
    return 0;
}

void oip_answer_deinit(struct oip_answer *a)
{
    free(a->body);
    a->body = NULL;
    a->len = 0;
}

int oip_stream_error(const char *msg, unsigned char **out, size_t *len)
{
    struct pb_buf b = {0};
    pb_string(&b, S_ERROR_MESSAGE, msg);
    if (b.nomem) {
        free(b.p);
        return -1;
    }
    *out = b.p, *len = b.len;
    return 0;
}
