/* sequence.c -- a request's place in its sequences (Triton's sequence
 * extension), one or a batch, and a step's own rules, for both protocols;
 * see sequence.h. */
#include "codec/sequence.h"

#include "codec/codec.h"
#include "codec/tensor.h"
#include "codec/variants.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UINT64_TEXT "18446744073709551615"

/* An id as text: 1..CODEC_SEQUENCE_ID_MAX visible ASCII characters (it
 * travels in a header and in messages). */
static int id_text_ok(const char *s, size_t n)
{
    if (n == 0 || n > CODEC_SEQUENCE_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return 0;
    return 1;
}

static const char *skip_ws(const char *q, const char *end)
{
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
        q++;
    return q;
}

/* Past the JSON scalar at q (a string, a number or a literal). */
static const char *skip_scalar(const char *q, const char *end)
{
    if (q < end && *q == '"') {
        for (q++; q < end && *q != '"'; q++)
            if (*q == '\\')
                q++;
        return q < end ? q + 1 : end;
    }
    while (q < end && *q != ',' && *q != ']' && *q != '}' && *q != ' ' && *q != '\n' &&
           *q != '\t' && *q != '\r')
        q++;
    return q;
}

/* The integer whose digits start at q, when it is standin read as a real,
 * as text into out. 0, or -1. */
static int digits_at(const char *q, const char *end, double standin, char *out, size_t outlen)
{
    size_t n = 0;
    while (q + n < end && q[n] >= '0' && q[n] <= '9' && n < 24)
        n++;
    if (n == 0 || n >= outlen || (q + n < end && (q[n] == '.' || q[n] == 'e' || q[n] == 'E')))
        return -1;
    char digits[32];
    memcpy(digits, q, n);
    digits[n] = '\0';
    errno = 0;
    const unsigned long long v = strtoull(digits, NULL, 10);
    if (errno == ERANGE || (double)v != standin)
        return -1;
    snprintf(out, outlen, "%llu", v);
    return 0;
}

int codec_sequence_raw_uint(const char *text, size_t len, const char *key, int index,
                            double standin, char *out, size_t outlen)
{
    char k[64];
    const int kn = snprintf(k, sizeof k, "\"%s\"", key);
    const char *end = text ? text + len : NULL;
    for (const char *p = text; p && p + kn <= end; p++) {
        if (memcmp(p, k, (size_t)kn))
            continue;
        const char *q = skip_ws(p + kn, end);
        if (q >= end || *q++ != ':')
            continue;
        q = skip_ws(q, end);
        if (index >= 0) { /* element index of the array there */
            if (q >= end || *q++ != '[')
                continue;
            for (int i = 0; q < end && i < index; i++) {
                q = skip_ws(skip_scalar(skip_ws(q, end), end), end);
                if (q >= end || *q++ != ',')
                    q = end;
            }
            q = skip_ws(q, end);
        }
        if (q < end && digits_at(q, end, standin, out, outlen) == 0)
            return 0;
    }
    return -1;
}

/* An id's value v (called name) as text into out ("" for 0 or ""); index:
 * its place in sequence_id's array (-1: the scalar form), for a number
 * beyond long long, read from the text. */
static int read_id(char *out, size_t outlen, const struct codec_sequence *s, json_t *v,
                   const char *name, int index, struct failure *err)
{
    char tmp[32];
    if (json_is_string(v)) {
        const size_t n = json_string_length(v);
        if (n && !id_text_ok(json_string_value(v), n))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be at most %d visible ASCII "
                             "characters (no spaces), or an integer from %d to " UINT64_TEXT,
                             name, CODEC_SEQUENCE_ID_MAX, index < 0 ? 0 : 1);
        codec_join(out, outlen, "", json_string_value(v));
    } else if (json_is_integer(v) && json_integer_value(v) >= 0) {
        snprintf(out, outlen, "%lld", json_integer_value(v));
    } else if (json_is_real(v) && json_real_value(v) >= 9223372036854775807.0 &&
               codec_sequence_raw_uint(s->text, s->text_len, opt_name(OPT_SEQUENCE_ID), index,
                                       json_real_value(v), tmp, sizeof tmp) == 0) {
        snprintf(out, outlen, "%s", tmp);
    } else if (index < 0) {
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a string or an integer from 0 "
                         "to " UINT64_TEXT " (0 or \"\": not in a sequence), or an array of "
                         "them", name);
    } else {
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a non-empty string or an "
                         "integer from 1 to " UINT64_TEXT, name);
    }
    if (!strcmp(out, "0"))
        out[0] = '\0';
    if (index >= 0 && !out[0])
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is %s: every item of a batch needs "
                         "an id (0 and \"\" mean no sequence)", name,
                         json_is_string(v) && !json_string_length(v) ? "\"\"" : "0");
    return 0;
}

/* qsort has no context argument: the items being sorted, per thread */
static _Thread_local const struct codec_sequence_item *sorted_base;

static int by_id(const void *a, const void *b)
{
    const int i = *(const int *)a, j = *(const int *)b;
    const int c = strcmp(sorted_base[i].id, sorted_base[j].id);
    return c ? c : (i > j) - (i < j);
}

/* No id twice in s's items: the first item whose id an earlier one has
 * is refused, naming both. */
static int distinct(const struct codec_sequence *s, const char *name, struct failure *err)
{
    if (s->n < 2)
        return 0;
    int *ix = malloc((size_t)s->n * sizeof *ix);
    if (!ix)
        return fail_with(err, ERR_INTERNAL, "out of memory checking %s", name);
    for (int i = 0; i < s->n; i++)
        ix[i] = i;
    sorted_base = s->item;
    qsort(ix, (size_t)s->n, sizeof *ix, by_id);
    int later = -1, first = -1;
    for (int i = 1; i < s->n; i++) /* in a run of one id, its first two */
        if (!strcmp(s->item[ix[i]].id, s->item[ix[i - 1]].id) &&
            (i < 2 || strcmp(s->item[ix[i - 1]].id, s->item[ix[i - 2]].id)) &&
            (later < 0 || ix[i] < later))
            later = ix[i], first = ix[i - 1];
    free(ix);
    if (later < 0)
        return 0;
    return fail_with(err, ERR_INVALID_PARAMETER, "%s[%d] '%.64s' is also %s[%d]: a batch steps "
                     "each sequence once", name, later, s->item[later].id, name, first);
}

/* sequence_id's array v (called name) into s's items. */
static int read_ids(struct codec_sequence *s, json_t *v, const char *name,
                    const struct codec_limits *lim, struct failure *err)
{
    const size_t b = json_array_size(v);
    if (b == 0)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is an empty array: give one id per "
                         "batch item (or one id, not an array)", name);
    if (codec_check_dim((long long)b, lim->max_batch, "the number of ids in sequence_id",
                        "max_batch", err))
        return -1;
    s->item = calloc(b, sizeof *s->item);
    if (!s->item)
        return fail_with(err, ERR_INTERNAL, "out of memory for %s", name);
    s->n = (int)b, s->array = 1;
    for (size_t i = 0; i < b; i++) {
        char what[224];
        snprintf(what, sizeof what, "%s[%zu]", name, i);
        if (read_id(s->item[i].id, sizeof s->item[i].id, s, json_array_get(v, i), what, (int)i,
                    err))
            return -1;
    }
    return distinct(s, name, err);
}

/* X-Sequence-Id, trimmed, checked, into out ("0" is "" but in the array
 * form, where it is the placement key as it is). */
static int read_header(char *out, size_t outlen, const char *h, int array, struct failure *err)
{
    while (*h == ' ' || *h == '\t')
        h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
        n--;
    if (n && !id_text_ok(h, n))
        return fail_with(err, ERR_BAD_REQUEST, "X-Sequence-Id must be at most %d visible "
                         "ASCII characters", CODEC_SEQUENCE_ID_MAX);
    snprintf(out, outlen, "%.*s", (int)n, h);
    if (!array && !strcmp(out, "0"))
        out[0] = '\0';
    return 0;
}

/* sequence_start (k 0) or sequence_end (k 1): one boolean for every item,
 * or in the array form one per item. */
static int read_flag(struct codec_sequence *s, const struct codec_values *cv, int k,
                     struct failure *err)
{
    const enum opt_id id = k ? OPT_SEQUENCE_END : OPT_SEQUENCE_START;
    json_t *v = cv->v[id];
    const char *name = cv->name[id];
    if (json_is_array(v)) {
        if (!s->array)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s may be an array only with an array "
                             "of %s (one boolean per id)", name, opt_name(OPT_SEQUENCE_ID));
        if (json_array_size(v) != (size_t)s->n)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s has %zu entries but %s has %d ids: "
                             "give one boolean per id, or one for all", name,
                             json_array_size(v), opt_name(OPT_SEQUENCE_ID), s->n);
        for (int i = 0; i < s->n; i++) {
            json_t *x = json_array_get(v, (size_t)i);
            if (!json_is_boolean(x))
                return fail_with(err, ERR_INVALID_PARAMETER, "%s[%d] must be true or false",
                                 name, i);
            *(k ? &s->item[i].end : &s->item[i].start) = json_is_true(x);
        }
        return 0;
    }
    if (v && !json_is_boolean(v))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be true or false%s", name,
                         s->array ? ", or an array of them (one per id)" : "");
    if (json_is_true(v) && !s->n)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s needs a %s (not 0 or \"\"), in "
                         "the request or in X-Sequence-Id", name, opt_name(OPT_SEQUENCE_ID));
    for (int i = 0; i < s->n; i++)
        *(k ? &s->item[i].end : &s->item[i].start) = json_is_true(v);
    return 0;
}

/* The ids: an array, or one (the field's, else the header's). */
static int read_ids_and_key(struct codec_sequence *s, const struct codec_values *cv,
                            const struct codec_limits *lim, struct failure *err)
{
    json_t *v = cv->v[OPT_SEQUENCE_ID];
    const char *name = cv->name[OPT_SEQUENCE_ID];
    if (json_is_array(v))
        return read_ids(s, v, name, lim, err) ||
                       (s->header && read_header(s->key, sizeof s->key, s->header, 1, err))
                   ? -1
                   : 0;
    char id[CODEC_SEQUENCE_ID_MAX + 1] = "";
    if (v && read_id(id, sizeof id, s, v, name, -1, err))
        return -1;
    if (s->header) { /* X-Sequence-Id: the same id, as text */
        char hid[CODEC_SEQUENCE_ID_MAX + 1];
        if (read_header(hid, sizeof hid, s->header, 0, err))
            return -1;
        if (v && strcmp(hid, id))
            return fail_with(err, ERR_INVALID_PARAMETER, "X-Sequence-Id '%s' differs from %s "
                             "'%.*s': give one id, or the same in both", hid, name, 64, id);
        memcpy(id, hid, sizeof hid);
    }
    if (!id[0])
        return 0;
    if (!(s->item = calloc(1, sizeof *s->item)))
        return fail_with(err, ERR_INTERNAL, "out of memory for %s", name);
    s->n = 1;
    memcpy(s->item[0].id, id, sizeof id);
    return 0;
}

int codec_sequence_read(struct codec_sequence *s, const struct codec_values *cv,
                        json_t *own, const struct codec_limits *lim, struct failure *err)
{
    if (read_ids_and_key(s, cv, lim, err) || read_flag(s, cv, 0, err) ||
        read_flag(s, cv, 1, err))
        return -1;
    json_t *dt = cv->v[OPT_KV_CACHE_DTYPE];
    s->dtype_asked = json_object_get(own, opt_name(OPT_KV_CACHE_DTYPE)) != NULL;
    if (dt) {
        const int c = opt_choice_index(OPT_KV_CACHE_DTYPE, json_string_value(dt));
        if (c < 0)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be \"%s\", \"%s\" or \"%s\"",
                             cv->name[OPT_KV_CACHE_DTYPE], opt_choice(OPT_KV_CACHE_DTYPE, 0),
                             opt_choice(OPT_KV_CACHE_DTYPE, 1), opt_choice(OPT_KV_CACHE_DTYPE, 2));
        s->dtype = (enum att_kv_dtype)c;
    }
    if (s->dtype_asked && !s->n)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s applies to a sequence only: give it "
                         "with %s and %s true", cv->name[OPT_KV_CACHE_DTYPE],
                         opt_name(OPT_SEQUENCE_ID), opt_name(OPT_SEQUENCE_START));
    json_t *lv = cv->v[OPT_LAYER];
    long long layer = 0;
    if (lv && !s->n)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s applies to a sequence only: give it "
                         "with %s", cv->name[OPT_LAYER], opt_name(OPT_SEQUENCE_ID));
    if (lv && (json_int_value(lv, &layer) != JSON_INT_OK || layer < 0 ||
               layer >= lim->max_layers))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be an integer from 0 to %d "
                         "(max_layers is %d)", cv->name[OPT_LAYER], lim->max_layers - 1,
                         lim->max_layers);
    s->layer = (int)layer;
    return 0;
}

void codec_sequence_deinit(struct codec_sequence *s)
{
    free(s->item);
    s->item = NULL;
    s->n = 0;
}

int codec_sequence_rules(const struct codec_sequence *s, struct att_params *p, int batched,
                         json_t *own, int no_mask_asked, const char *prefix,
                         struct failure *err)
{
    if (json_object_get(own, opt_name(OPT_QUERY_POSITION_OFFSET)))
        return fail_with(err, ERR_INVALID_PARAMETER, "%s%s cannot be given inside a sequence: "
                         "a step's queries are at (cache length) + S - L, which the server "
                         "sets", prefix, opt_name(OPT_QUERY_POSITION_OFFSET));
    if (p->positional_encoding)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s%s cannot be used inside a sequence: "
                         "it adds to the rows at 0 ... L-1, which has no meaning for a step "
                         "(use rope)", prefix, opt_name(OPT_POSITIONAL_ENCODING));
    if (s->array && !batched)
        return fail_with(err, ERR_SHAPE_MISMATCH, "a batch of %d sequences needs %s of rank 3 "
                         "(B, L, E), B = %d: item b steps %s[b]", s->n, opt_name(OPT_QUERY),
                         s->n, opt_name(OPT_SEQUENCE_ID));
    if (s->array && p->N != s->n)
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s has %d batch items but %s has %d ids: "
                         "item b steps %s[b]", opt_name(OPT_QUERY), p->N,
                         opt_name(OPT_SEQUENCE_ID), s->n, opt_name(OPT_SEQUENCE_ID));
    if (!s->array && p->N != 1)
        return fail_with(err, ERR_INVALID_PARAMETER, "a step of a sequence has one batch item "
                         "(N = 1), not %d (a batch of sequences takes an array of %s)", p->N,
                         opt_name(OPT_SEQUENCE_ID));
    if (p->S < p->L)
        return fail_with(err, ERR_INVALID_PARAMETER, "a step of a sequence needs S >= L (a "
                         "key/value row for each query row): S = %d, L = %d", p->S, p->L);
    p->query_position_offset = 0;
    if (p->mask_kind == ATT_MASK_CAUSAL || (p->mask_kind == ATT_MASK_NONE && !no_mask_asked))
        p->mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    return 0;
}

int codec_sequence_mask(const struct codec_sequence *s, struct failure *err)
{
    if (s->array)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s as a tensor is not supported in a "
                         "batch of sequences (a causal mask is)", opt_name(OPT_ATTN_MASK));
    return 0;
}

int codec_sequence_kpm(struct codec_sequence *s, struct att_params *p, int batched,
                       const struct tensor *t, struct failure *err)
{
    const char *name = opt_name(OPT_KEY_PADDING_MASK);
    if (s->array)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s is not supported in a batch of "
                         "sequences", name);
    if (t->ndim != 1 + batched || (batched && t->shape[0] != 1))
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s must have shape (%s(cache length) + S) "
                         "in a sequence", name, batched ? "1, " : "");
    p->key_padding_mask = t->u8;
    s->kpm_count = t->count;
    return 0;
}

int codec_sequence_end_only(struct codec_sequence *s, int has_step, struct failure *err)
{
    s->end_only = 0;
    if (!s->n || has_step)
        return 0;
    int ends = 0, starts = 0;
    for (int i = 0; i < s->n; i++)
        ends += s->item[i].end != 0, starts += s->item[i].start != 0;
    if (ends == s->n && !starts)
        return s->end_only = 1;
    if (!s->array || (!ends && !starts))
        return 0; /* a step without its query: the caller says so */
    return fail_with(err, ERR_INVALID_PARAMETER, "a batch without %s ends its sequences: %s "
                     "true and %s false for every id (or send the step's %s)",
                     opt_name(OPT_QUERY), opt_name(OPT_SEQUENCE_END),
                     opt_name(OPT_SEQUENCE_START), opt_name(OPT_QUERY));
}
