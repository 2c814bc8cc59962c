/* sequence.c -- a request's place in a sequence (Triton's sequence
 * extension) and a step's own rules, for both protocols; see sequence.h. */
#include "codec/sequence.h"

#include "codec/variants.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* An integer beyond long long reaches us as its stand-in, a real
 * (jsonnum_standin): read its digits from the JSON text instead, after a
 * "name": whose digits give that real. 0, or -1 when not found. */
static int raw_uint(const struct codec_sequence *s, const char *name, double standin,
                    char *out, size_t outlen)
{
    char key[64];
    const int kn = snprintf(key, sizeof key, "\"%s\"", name);
    const char *t = s->text, *end = s->text ? s->text + s->text_len : NULL;
    for (const char *p = t; p && p + kn <= end; p++) {
        if (memcmp(p, key, (size_t)kn))
            continue;
        p += kn - 1;
        const char *q = p + 1;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q >= end || *q++ != ':')
            continue;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        size_t n = 0;
        while (q + n < end && q[n] >= '0' && q[n] <= '9' && n < 24)
            n++;
        if (n == 0 || n >= outlen || (q + n < end && (q[n] == '.' || q[n] == 'e' ||
                                                      q[n] == 'E')))
            continue;
        char digits[32];
        memcpy(digits, q, n);
        digits[n] = '\0';
        errno = 0;
        const unsigned long long v = strtoull(digits, NULL, 10);
        if (errno == ERANGE || (double)v != standin)
            continue;
        snprintf(out, outlen, "%llu", v);
        return 0;
    }
    return -1;
}

/* sequence_id's value as text into s->id ("" for 0 or ""). */
static int read_id(struct codec_sequence *s, json_t *v, const char *name,
                   struct failure *err)
{
    char tmp[32];
    if (json_is_string(v)) {
        const size_t n = json_string_length(v);
        if (n && !id_text_ok(json_string_value(v), n))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be at most %d visible ASCII "
                             "characters (no spaces), or an integer from 0 to "
                             "18446744073709551615", name, CODEC_SEQUENCE_ID_MAX);
        snprintf(s->id, sizeof s->id, "%s", json_string_value(v));
    } else if (json_is_integer(v) && json_integer_value(v) >= 0) {
        snprintf(s->id, sizeof s->id, "%lld", json_integer_value(v));
    } else if (json_is_real(v) && json_real_value(v) >= 9223372036854775807.0 &&
               raw_uint(s, opt_name(OPT_SEQUENCE_ID), json_real_value(v), tmp,
                        sizeof tmp) == 0) {
        snprintf(s->id, sizeof s->id, "%s", tmp);
    } else {
        return fail_with(err, ERR_INVALID_PARAMETER, "%s must be a string or an integer from 0 "
                         "to 18446744073709551615 (0 or \"\": not in a sequence)", name);
    }
    if (!strcmp(s->id, "0"))
        s->id[0] = '\0';
    return 0;
}

int codec_sequence_read(struct codec_sequence *s, const struct codec_values *cv,
                        json_t *own, struct failure *err)
{
    const int ids[3] = {OPT_SEQUENCE_ID, OPT_SEQUENCE_START, OPT_SEQUENCE_END};
    json_t *id = cv->v[OPT_SEQUENCE_ID];
    if (id && read_id(s, id, cv->name[OPT_SEQUENCE_ID], err))
        return -1;
    if (s->header) { /* X-Sequence-Id: the same id, as text */
        const char *h = s->header;
        while (*h == ' ' || *h == '\t')
            h++;
        size_t n = strlen(h);
        while (n && (h[n - 1] == ' ' || h[n - 1] == '\t'))
            n--;
        if (n && !id_text_ok(h, n))
            return fail_with(err, ERR_BAD_REQUEST, "X-Sequence-Id must be at most %d visible "
                             "ASCII characters", CODEC_SEQUENCE_ID_MAX);
        char hid[CODEC_SEQUENCE_ID_MAX + 1];
        snprintf(hid, sizeof hid, "%.*s", (int)n, h);
        if (!strcmp(hid, "0"))
            hid[0] = '\0';
        if (id && strcmp(hid, s->id))
            return fail_with(err, ERR_INVALID_PARAMETER, "X-Sequence-Id '%s' differs from %s "
                             "'%.*s': give one id, or the same in both", hid,
                             cv->name[OPT_SEQUENCE_ID], 64, s->id);
        memcpy(s->id, hid, sizeof hid);
    }
    for (int k = 1; k < 3; k++) {
        json_t *v = cv->v[ids[k]];
        if (v && !json_is_boolean(v))
            return fail_with(err, ERR_INVALID_PARAMETER, "%s must be true or false",
                             cv->name[ids[k]]);
        if (json_is_true(v) && !s->id[0])
            return fail_with(err, ERR_INVALID_PARAMETER, "%s needs a %s (not 0 or \"\"), in "
                             "the request or in X-Sequence-Id", cv->name[ids[k]],
                             opt_name(OPT_SEQUENCE_ID));
        *(k == 1 ? &s->start : &s->end) = json_is_true(v);
    }
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
    if (s->dtype_asked && !s->id[0])
        return fail_with(err, ERR_INVALID_PARAMETER, "%s applies to a sequence only: give it "
                         "with %s and %s true", cv->name[OPT_KV_CACHE_DTYPE],
                         opt_name(OPT_SEQUENCE_ID), opt_name(OPT_SEQUENCE_START));
    if (s->id[0]) {
        if (!(s->item = calloc(1, sizeof *s->item)))
            return fail_with(err, ERR_INTERNAL, "out of memory");
        s->n = 1;
        memcpy(s->item[0].id, s->id, sizeof s->id);
        s->item[0].start = s->start, s->item[0].end = s->end;
    }
    return 0;
}

int codec_sequence_rules(struct att_params *p, json_t *own, int no_mask_asked, const char *prefix,
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
    if (p->N != 1)
        return fail_with(err, ERR_INVALID_PARAMETER, "a step of a sequence has one batch item "
                         "(N = 1), not %d", p->N);
    if (p->S < p->L)
        return fail_with(err, ERR_INVALID_PARAMETER, "a step of a sequence needs S >= L (a "
                         "key/value row for each query row): S = %d, L = %d", p->S, p->L);
    p->query_position_offset = 0;
    if (p->mask_kind == ATT_MASK_CAUSAL || (p->mask_kind == ATT_MASK_NONE && !no_mask_asked))
        p->mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    return 0;
}

int codec_sequence_kpm(struct codec_sequence *s, struct att_params *p, int batched,
                       const struct tensor *t, struct failure *err)
{
    const char *name = opt_name(OPT_KEY_PADDING_MASK);
    if (t->ndim != 1 + batched || (batched && t->shape[0] != 1))
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s must have shape (%s(cache length) + S) "
                         "in a sequence", name, batched ? "1, " : "");
    p->key_padding_mask = t->u8;
    s->kpm_count = t->count;
    return 0;
}

int codec_sequence_end_only(struct codec_sequence *s, int has_step)
{
    s->end_only = s->id[0] && s->end && !s->start && !has_step;
    return s->end_only;
}
