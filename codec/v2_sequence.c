/* v2_sequence.c -- a v2 request's batch of sequences as input tensors,
 * read into what codec/sequence.c reads for both protocols; see
 * codec/v2_sequence.h. */
#include "codec/v2_sequence.h"
#include "codec/v2_inputs.h"
#include "codec/v2_params.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "options/options.h"

/* The inputs of a batch of sequences and the options they carry. */
static const int seq_inputs[3] = {IN_SEQ_ID, IN_SEQ_START, IN_SEQ_END};
static const enum opt_id seq_options[3] = {OPT_SEQUENCE_ID, OPT_SEQUENCE_START,
                                           OPT_SEQUENCE_END};

int v2_ids_binary(json_t *ids, const char *name, int bytes, long long B, long long n,
                  const unsigned char *p, struct failure *err)
{
    if (!bytes) {
        char s[32];
        if (n != 8 * B)
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size is %lld "
                             "bytes but shape [%lld] of UINT64 needs %lld", name, n, B, 8 * B);
        for (long long i = 0; i < B; i++) {
            unsigned long long v = 0;
            for (int k = 7; k >= 0; k--)
                v = v << 8 | p[8 * i + k];
            snprintf(s, sizeof s, "%llu", v);
            json_array_append_new(ids, json_string(s));
        }
        return 0;
    }
    long long pos = 0;
    for (long long i = 0; i < B; i++) { /* a 4-byte little-endian length, then the bytes */
        if (n - pos < 4)
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size %lld ends "
                             "before element %lld's length (BYTES: 4 bytes of length, then "
                             "the bytes, for each)", name, n, i);
        const unsigned long long len = (unsigned long long)p[pos] | (unsigned)p[pos + 1] << 8 |
                                       (unsigned)p[pos + 2] << 16 |
                                       (unsigned long long)p[pos + 3] << 24;
        pos += 4;
        if (len > (unsigned long long)(n - pos))
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': element %lld says %llu "
                             "bytes, past binary_data_size %lld", name, i, len, n);
        json_t *v = json_stringn((const char *)p + pos, (size_t)len);
        if (!v)
            return fail_with(err, ERR_INVALID_PARAMETER, "%s[%lld] must be at most %d visible "
                             "ASCII characters", opt_name(OPT_SEQUENCE_ID), i,
                             CODEC_SEQUENCE_ID_MAX);
        json_array_append_new(ids, v);
        pos += (long long)len;
    }
    if (pos != n)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': binary_data_size is %lld bytes "
                         "but its %lld elements take %lld", name, n, B, pos);
    return 0;
}

int v2_ids_json(json_t *ids, const char *name, int bytes, long long B, json_t *data,
                const struct v2_binpart *b, struct failure *err)
{
    if (!json_is_array(data))
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': data must be an array", name);
    if (json_array_size(data) != (size_t)B)
        return fail_with(err, ERR_INVALID_TENSOR, "input '%s': shape [%lld] does not match the "
                         "true shape of data: %zu elements", name, B, json_array_size(data));
    for (size_t i = 0; i < (size_t)B; i++) {
        json_t *v = json_array_get(data, i);
        char s[32];
        if (bytes && json_is_string(v)) {
            json_array_append(ids, v);
            continue;
        }
        if (!bytes && json_is_integer(v) && json_integer_value(v) >= 0) {
            snprintf(s, sizeof s, "%lld", json_integer_value(v));
        } else if (!bytes && !(json_is_real(v) && json_real_value(v) >= 9223372036854775807.0 &&
                               codec_sequence_raw_uint(b->text, b->text_len, "data", (int)i,
                                                       json_real_value(v), s, sizeof s) == 0)) {
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': data[%zu] must be an integer "
                             "from 0 to 18446744073709551615 (UINT64)", name, i);
        } else if (bytes) {
            return fail_with(err, ERR_INVALID_TENSOR, "input '%s': data[%zu] must be a string "
                             "(BYTES)", name, i);
        }
        json_array_append_new(ids, json_string(s));
    }
    return 0;
}

int v2_sequence_inputs(struct codec_values *cv, struct v2_inputs *in, json_t *params,
                       struct failure *err)
{
    for (int k = 0; k < 3; k++) {
        const char *pn = opt_name(seq_options[k]), *name = in->name[seq_inputs[k]];
        if (json_is_array(json_object_get(params, pn)))
            return fail_with(err, ERR_INVALID_PARAMETER, "parameters.%s must be %s: a batch's "
                             "%s come as the input %s", pn,
                             k ? "true or false" : "a string or an integer",
                             k ? "flags" : "ids", pn);
        if (!name)
            continue;
        if (json_object_get(params, pn))
            return fail_with(err, ERR_INVALID_PARAMETER, "input '%s' and parameters.%s cannot be "
                             "used together: give the %s once", name, pn, k ? "flags" : "ids");
        json_t *v = in->ids;
        if (k) {
            const struct tensor *t = &in->t[seq_inputs[k]];
            if (t->ndim != 1)
                return fail_with(err, ERR_SHAPE_MISMATCH, "input '%s' must have shape [B]: one "
                                 "flag per id", name);
            if (!(v = in->flags[k - 1] = json_array()))
                return fail_with(err, ERR_INTERNAL, "out of memory for input '%s'", name);
            for (size_t j = 0; j < t->count; j++)
                json_array_append_new(v, json_boolean(t->u8[j]));
        }
        codec_values_set(cv, seq_options[k], v, name);
    }
    return 0;
}

/* Which of the sequence inputs name is, or -1. */
static int sequence_input(json_t *item)
{
    const int idx = v2_input_index(json_string_value(json_object_get(item, "name")) ?: "");
    for (int k = 0; k < 3; k++)
        if (idx == seq_inputs[k])
            return k;
    return -1;
}

int v2_sequence_named(json_t *inputs)
{
    size_t i;
    json_t *x;
    json_array_foreach(inputs, i, x) {
        if (sequence_input(x) >= 0)
            return 1;
    }
    return 0;
}

int v2_sequence_only(json_t *inputs)
{
    if (!inputs)
        return 1;
    if (!json_is_array(inputs) || !json_array_size(inputs))
        return 0;
    size_t i;
    json_t *x;
    json_array_foreach(inputs, i, x) {
        if (sequence_input(x) < 0)
            return 0;
    }
    return 1;
}

void v2_inputs_deinit(struct v2_inputs *in)
{
    json_decref(in->ids);
    json_decref(in->flags[0]);
    json_decref(in->flags[1]);
    in->ids = in->flags[0] = in->flags[1] = NULL;
}
