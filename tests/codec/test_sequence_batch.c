/* test_sequence_batch.c -- a request's place in its sequences as both
 * protocols' decoders read it (codec/sequence.h): the layer option, the
 * batch of sequences (POST /attention's sequence_id array, v2's
 * sequence_id, sequence_start and sequence_end inputs), each rule's
 * refusal, and the answers' cache_length per item. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/request.h"
#include "codec/response.h"
#include "codec/v2.h"
#include "tests/codec/v2_codec_shared.h"
#include "tests/support/limits.h"

/* A batch of two: query (2, 1, 4), two heads. */
#define Q2 "'query': [[[1, 0, 0, 1]], [[0, 1, 1, 0]]], 'num_heads': 2"
#define Q1 "'query': [[1, 0, 0, 1]], 'num_heads': 2"

/* Decode the POST body b (' for ") with X-Sequence-Id h (NULL: none),
 * through the fast decoder and through the reference alone: the same
 * outcome. */
static int decode_post(struct codec_request *r, const char *b, const char *h,
                       struct failure *e)
{
    const struct codec_limits lim = test_limits();
    char *body = v2ct_q(b);
    struct codec_request ref;
    struct failure re = {0};
    const int rrc = h ? 0 : codec_decode_request_reference(&ref, body, strlen(body), &lim, NULL,
                                                           &re);
    const int rc = codec_decode_request_seq(r, body, strlen(body), &lim, NULL, h, e);
    if (!h) {
        cr_expect_eq(rc, rrc, "%s: fast %d, reference %d (%s)", b, rc, rrc, re.msg);
        cr_expect(rc == 0 || !strcmp(e->msg, re.msg), "%s: \"%s\" vs \"%s\"", b, e->msg, re.msg);
        codec_request_deinit(&ref);
    }
    free(body);
    return rc;
}

#define VQ2 "{'name': 'query', 'shape': [2, 1, 4], 'datatype': 'FP32', " \
            "'data': [1, 0, 0, 1, 0, 1, 1, 0]}"
#define VP "'parameters': {'num_heads': 2"

static int decode_v2(struct v2_request *r, const char *json, const void *bin, size_t nbin,
                     struct failure *e)
{
    const struct codec_limits lim = test_limits();
    size_t len;
    long long hl;
    char *body = v2ct_with_binary(json, bin, nbin, &len, &hl);
    const int rc = v2_decode_infer(r, body, len, nbin ? hl : -1, NULL, &lim, e);
    free(body);
    return rc;
}

struct refusal {
    const char *body;
    int code;
    const char *msg;
};

static const struct refusal post_refusals[] = {
    /* layer */
    {"{" Q1 ", 'layer': 1}", ERR_INVALID_PARAMETER,
     "layer applies to a sequence only: give it with sequence_id"},
    {"{" Q1 ", 'sequence_id': 'a', 'layer': 256}", ERR_INVALID_PARAMETER,
     "layer must be an integer from 0 to 255 (max_layers is 256)"},
    {"{" Q1 ", 'sequence_id': 'a', 'layer': -1}", ERR_INVALID_PARAMETER,
     "layer must be an integer from 0 to 255"},
    {"{" Q1 ", 'sequence_id': 'a', 'layer': 1.0}", ERR_INVALID_PARAMETER,
     "layer must be an integer from 0 to 255"},
    /* the ids of a batch */
    {"{" Q2 ", 'sequence_id': []}", ERR_INVALID_PARAMETER, "sequence_id is an empty array"},
    {"{" Q2 ", 'sequence_id': ['a', 0]}", ERR_INVALID_PARAMETER,
     "sequence_id[1] is 0: every item of a batch needs an id"},
    {"{" Q2 ", 'sequence_id': ['', 'b']}", ERR_INVALID_PARAMETER,
     "sequence_id[0] is \"\": every item of a batch needs an id"},
    {"{" Q2 ", 'sequence_id': ['a', '0']}", ERR_INVALID_PARAMETER, "sequence_id[1] is 0"},
    {"{" Q2 ", 'sequence_id': ['a', -3]}", ERR_INVALID_PARAMETER,
     "sequence_id[1] must be a non-empty string or an integer from 1 to 18446744073709551615"},
    {"{" Q2 ", 'sequence_id': ['a', ['b']]}", ERR_INVALID_PARAMETER,
     "sequence_id[1] must be a non-empty string"},
    {"{" Q2 ", 'sequence_id': ['a', 'b c']}", ERR_INVALID_PARAMETER,
     "sequence_id[1] must be at most 128 visible ASCII characters"},
    {"{'query': [[[1, 0, 0, 1]], [[0, 1, 1, 0]], [[1, 1, 0, 0]], [[0, 0, 1, 1]]], "
     "'num_heads': 2, 'sequence_id': ['x', 'y', 7, '7']}", ERR_INVALID_PARAMETER,
     "sequence_id[3] '7' is also sequence_id[2]: a batch steps each sequence once"},
    {"{'query': [[[1, 0, 0, 1]], [[0, 1, 1, 0]], [[1, 1, 0, 0]]], 'num_heads': 2, "
     "'sequence_id': ['x', 'y', 'x']}", ERR_INVALID_PARAMETER,
     "sequence_id[2] 'x' is also sequence_id[0]"},
    /* their flags */
    {"{" Q2 ", 'sequence_id': ['a', 'b'], 'sequence_start': [true]}", ERR_INVALID_PARAMETER,
     "sequence_start has 1 entries but sequence_id has 2 ids"},
    {"{" Q2 ", 'sequence_id': ['a', 'b'], 'sequence_end': [true, 1]}", ERR_INVALID_PARAMETER,
     "sequence_end[1] must be true or false"},
    {"{" Q2 ", 'sequence_id': ['a', 'b'], 'sequence_end': 1}", ERR_INVALID_PARAMETER,
     "sequence_end must be true or false, or an array of them (one per id)"},
    {"{" Q1 ", 'sequence_id': 'a', 'sequence_start': [true]}", ERR_INVALID_PARAMETER,
     "sequence_start may be an array only with an array of sequence_id"},
    /* the step's shapes and masks */
    {"{" Q2 ", 'sequence_id': ['a', 'b', 'c']}", ERR_SHAPE_MISMATCH,
     "query has 2 batch items but sequence_id has 3 ids"},
    {"{" Q1 ", 'sequence_id': ['a']}", ERR_SHAPE_MISMATCH,
     "a batch of 1 sequences needs query of rank 3 (B, L, E)"},
    {"{" Q2 ", 'sequence_id': 'a'}", ERR_INVALID_PARAMETER,
     "a step of a sequence has one batch item (N = 1), not 2"},
    {"{" Q2 ", 'sequence_id': ['a', 'b'], 'attn_mask': [[false]]}", ERR_INVALID_PARAMETER,
     "attn_mask as a tensor is not supported in a batch of sequences"},
    {"{" Q2 ", 'sequence_id': ['a', 'b'], 'key_padding_mask': [[false], [false]]}",
     ERR_INVALID_PARAMETER, "key_padding_mask is not supported in a batch of sequences"},
    /* without a query: every item ends, none starts */
    {"{'sequence_id': ['a', 'b'], 'sequence_end': [true, false]}", ERR_INVALID_PARAMETER,
     "a batch without query ends its sequences: sequence_end true and sequence_start false "
     "for every id"},
    {"{'sequence_id': ['a', 'b'], 'sequence_end': true, 'sequence_start': [false, true]}",
     ERR_INVALID_PARAMETER, "a batch without query ends its sequences"},
};

/* Every case of table (n of them) decoded by POST /attention (v2 0) or
 * v2 (1): refused with its status and message. */
static void expect_refusals(const struct refusal *table, size_t n, int v2)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        const struct refusal *c = &table[i];
        struct codec_request r;
        struct v2_request vr;
        struct failure e = {0};
        const int rc = v2 ? decode_v2(&vr, c->body, NULL, 0, &e) : decode_post(&r, c->body, NULL,
                                                                                &e);
        if (rc != -1 || e.code != c->code || !strstr(e.msg, c->msg)) {
            cr_log_error("case %zu (%s): rc %d, %s: \"%s\"; expected %s: \"%s\"", i, c->body,
                         rc, http_error_slug(e.code), e.msg, http_error_slug(c->code), c->msg);
            failed++;
        }
        if (v2)
            v2_request_deinit(&vr);
        else
            codec_request_deinit(&r);
    }
    cr_assert_eq(failed, 0, "%d of %zu refusals answered wrongly", failed, n);
}

Test(sequence_batch, every_post_refusal_names_the_rule)
{
    expect_refusals(post_refusals, sizeof post_refusals / sizeof post_refusals[0], 0);
}

Test(sequence_batch, more_ids_than_max_batch_is_413)
{
    const struct codec_limits lim = test_limits();
    char body[4096] = "{\"sequence_id\":[";
    for (int i = 0; i <= lim.max_batch; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", i + 1);
    snprintf(body + strlen(body), sizeof body - strlen(body), "],\"sequence_end\":true}");
    struct codec_request r;
    struct failure e = {0};
    cr_assert_eq(codec_decode_request(&r, body, strlen(body), &lim, NULL, &e), -1);
    cr_expect_eq(e.code, ERR_PAYLOAD_TOO_LARGE, "%s", e.msg);
    cr_expect(strstr(e.msg, "max_batch"), "%s", e.msg);
    codec_request_deinit(&r);
}

Test(sequence_batch, the_array_form_is_read_into_items)
{
    struct codec_request r;
    struct failure e = {0};
    cr_assert_eq(decode_post(&r, "{" Q2 ", 'sequence_id': ['a', 18446744073709551615], "
                             "'sequence_start': [true, false], 'sequence_end': true, "
                             "'layer': 3}", "  key-7 ", &e), 0, "%s", e.msg);
    cr_expect_eq(r.seq.n, 2);
    cr_expect(r.seq.array);
    cr_expect_eq(r.seq.layer, 3);
    cr_expect_str_eq(r.seq.item[0].id, "a");
    cr_expect_str_eq(r.seq.item[1].id, "18446744073709551615");
    cr_expect(r.seq.item[0].start && !r.seq.item[1].start);
    cr_expect(r.seq.item[0].end && r.seq.item[1].end);
    cr_expect_str_eq(r.seq.key, "key-7", "X-Sequence-Id is the placement key, not an id");
    cr_expect_eq(r.p.N, 2);
    cr_expect_eq(r.p.mask_kind, ATT_MASK_CAUSAL_LOWER_RIGHT);
    codec_request_deinit(&r);
    cr_expect_null(r.seq.item);

    /* the scalar form: one item, the header its id (as before) */
    cr_assert_eq(decode_post(&r, "{" Q1 "}", "42", &e), 0, "%s", e.msg);
    cr_expect_eq(r.seq.n, 1);
    cr_expect(!r.seq.array);
    cr_expect_str_eq(r.seq.item[0].id, "42");
    cr_expect_eq(r.seq.layer, 0);
    codec_request_deinit(&r);
    cr_assert_eq(decode_post(&r, "{" Q1 "}", NULL, &e), 0, "%s", e.msg);
    cr_expect_eq(r.seq.n, 0);
    cr_expect_null(r.seq.item);
    codec_request_deinit(&r);
}

/* The answers: cache_length per item in the array form, one integer in the
 * scalar form, B zeros for a batch ended without a step. */
Test(sequence_batch, post_answers_carry_each_cache_length)
{
    struct codec_request r;
    struct failure e = {0};
    cr_assert_eq(decode_post(&r, "{" Q2 ", 'sequence_id': [5, 6], 'need_weights': false}",
                             NULL, &e), 0, "%s", e.msg);
    r.seq.item[0].length = 3, r.seq.item[1].length = 1;
    r.out_len = (size_t)r.p.N * r.p.L * r.p.E;
    float out[8] = {0};
    size_t len;
    char *body = codec_encode_response(&r, out, NULL, &len);
    cr_expect(strstr(body, "\"cache_length\":[3,1]"), "%s", body);
    free(body);
    codec_request_deinit(&r);

    cr_assert_eq(decode_post(&r, "{'sequence_id': ['a', 'b', 'c'], 'sequence_end': true}", NULL,
                             &e), 0, "%s", e.msg);
    cr_expect(r.seq.end_only);
    body = codec_encode_response(&r, NULL, NULL, &len);
    cr_expect_str_eq(body, "{\"cache_length\":[0,0,0]}");
    free(body);
    codec_request_deinit(&r);

    cr_assert_eq(decode_post(&r, "{'sequence_id': 'a', 'sequence_end': true}", NULL, &e), 0);
    body = codec_encode_response(&r, NULL, NULL, &len);
    cr_expect_str_eq(body, "{\"cache_length\":0}");
    free(body);
    codec_request_deinit(&r);
}

/* ---------------------------------------------------------------------- */
/* v2                                                                      */

static const struct refusal v2_refusals[] = {
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
     "'data': [1, 2]}], " VP ", 'sequence_id': 3}}", ERR_INVALID_PARAMETER,
     "input 'sequence_id' and parameters.sequence_id cannot be used together"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
     "'data': [1, 2]}, {'name': 'sequence_end', 'shape': [2], 'datatype': 'BOOL', "
     "'data': [true, true]}], " VP ", 'sequence_end': true}}", ERR_INVALID_PARAMETER,
     "input 'sequence_end' and parameters.sequence_end cannot be used together"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
     "'data': [1, 0]}], " VP "}}", ERR_INVALID_PARAMETER, "sequence_id[1] is 0"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'BYTES', "
     "'data': ['', 'b']}], " VP "}}", ERR_INVALID_PARAMETER, "sequence_id[0] is \"\""},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'BYTES', "
     "'data': ['b', 'b']}], " VP "}}", ERR_INVALID_PARAMETER,
     "sequence_id[1] 'b' is also sequence_id[0]"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [3], 'datatype': 'UINT64', "
     "'data': [1, 2, 3]}], " VP "}}", ERR_SHAPE_MISMATCH,
     "query has 2 batch items but sequence_id has 3 ids"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'FP32', "
     "'data': [1, 2]}], " VP "}}", ERR_INVALID_TENSOR,
     "input 'sequence_id' has datatype FP32; it takes UINT64 or BYTES"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
     "'data': [1, 2.5]}], " VP "}}", ERR_INVALID_TENSOR,
     "input 'sequence_id': data[1] must be an integer from 0 to 18446744073709551615"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2, 1], 'datatype': 'UINT64', "
     "'data': [1, 2]}], " VP "}}", ERR_SHAPE_MISMATCH,
     "input 'sequence_id' must have shape [B]"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_start', 'shape': [2], 'datatype': 'BOOL', "
     "'data': [true, true]}], " VP ", 'sequence_id': 4}}", ERR_INVALID_PARAMETER,
     "sequence_start may be an array only with an array of sequence_id"},
    {"{'inputs': [" VQ2 "], " VP ", 'sequence_id': [1, 2]}}", ERR_INVALID_PARAMETER,
     "parameters.sequence_id must be a string or an integer: a batch's ids come as the input "
     "sequence_id"},
    {"{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
     "'data': [1, 2]}, {'name': 'attn_mask', 'shape': [1, 1], 'datatype': 'BOOL', "
     "'data': [false]}], " VP "}}", ERR_INVALID_PARAMETER,
     "attn_mask as a tensor is not supported in a batch of sequences"},
    {"{'inputs': [" VQ2 "], 'outputs': [{'name': 'cache_length'}], " VP ", 'sequence_id': 4}}",
     ERR_INVALID_PARAMETER, "output 'cache_length' is made for a batch of sequences only"},
    {"{'inputs': [" VQ2 "], " VP ", 'sequence_id': 4, 'layer': 300}}", ERR_INVALID_PARAMETER,
     "parameters.layer must be an integer from 0 to 255 (max_layers is 256)"},
    {"{'inputs': [" VQ2 "], " VP ", 'layer': 0}}", ERR_INVALID_PARAMETER,
     "parameters.layer applies to a sequence only"},
    {"{'inputs': [{'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', 'data': [1, 2]},"
     " {'name': 'sequence_end', 'shape': [2], 'datatype': 'BOOL', 'data': [true, false]}]}",
     ERR_INVALID_PARAMETER, "a batch without query ends its sequences"},
    {"{'inputs': [{'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', 'data': [1, 0]}],"
     " 'parameters': {'sequence_end': true}}", ERR_INVALID_PARAMETER, "sequence_id[1] is 0"},
};

Test(sequence_batch, every_v2_refusal_names_the_rule)
{
    expect_refusals(v2_refusals, sizeof v2_refusals / sizeof v2_refusals[0], 1);
}

/* The ids in each of their four forms, the flags as BOOL inputs. */
Test(sequence_batch, v2_reads_the_ids_in_every_form)
{
    static const struct {
        const char *input;
        const char *bin;
        size_t nbin;
    } forms[] = {
        {"{'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
         "'data': [7, 18446744073709551615]}", NULL, 0},
        {"{'name': 'sequence_id', 'shape': [2], 'datatype': 'BYTES', "
         "'data': ['7', '18446744073709551615']}", NULL, 0},
        {"{'name': 'sequence_id', 'shape': [2], 'datatype': 'UINT64', "
         "'parameters': {'binary_data_size': 16}}",
         "\x07\0\0\0\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff", 16},
        {"{'name': 'sequence_id', 'shape': [2], 'datatype': 'BYTES', "
         "'parameters': {'binary_data_size': 29}}",
         "\x01\0\0\0" "7" "\x14\0\0\0" "18446744073709551615", 29},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json, "{'inputs': [" VQ2 ", %s, {'name': 'sequence_start', "
                 "'shape': [2], 'datatype': 'BOOL', 'data': [false, true]}], " VP ", "
                 "'layer': 5}}", forms[i].input);
        struct v2_request r;
        struct failure e = {0};
        cr_assert_eq(decode_v2(&r, json, forms[i].bin, forms[i].nbin, &e), 0, "form %zu: %s", i,
                     e.msg);
        cr_expect_eq(r.c.seq.n, 2, "form %zu", i);
        cr_expect(r.c.seq.array);
        cr_expect_str_eq(r.c.seq.item[0].id, "7", "form %zu", i);
        cr_expect_str_eq(r.c.seq.item[1].id, "18446744073709551615", "form %zu", i);
        cr_expect(!r.c.seq.item[0].start && r.c.seq.item[1].start, "form %zu", i);
        cr_expect(!r.c.seq.item[0].end && !r.c.seq.item[1].end, "form %zu", i);
        cr_expect_eq(r.c.seq.layer, 5);
        cr_expect_eq(r.c.p.N, 2);
        v2_request_deinit(&r);
    }
}

/* cache_length: an INT64 output [B] in the array form (JSON, or binary
 * with the others), the parameter in the scalar form. */
Test(sequence_batch, v2_answers_cache_length_per_item)
{
    struct v2_request r;
    struct failure e = {0};
    cr_assert_eq(decode_v2(&r, "{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], "
                           "'datatype': 'UINT64', 'data': [1, 2]}], " VP
                           ", 'need_weights': false}}", NULL, 0, &e), 0, "%s", e.msg);
    r.c.seq.item[0].length = 9, r.c.seq.item[1].length = 4;
    r.c.out_len = 8;
    float *out = calloc(8, sizeof *out);
    struct stream *st = v2_stream_new(&r, "attention", out, NULL);
    cr_assert_not_null(st);
    char *text = v2ct_read_all(st);
    cr_expect(strstr(text, "{\"name\":\"cache_length\",\"datatype\":\"INT64\",\"shape\":[2],"
                           "\"data\":[9,4]}"), "%s", text);
    cr_expect(!strstr(text, "\"parameters\":{\"cache_length\""), "%s", text);
    free(text);
    stream_free(st);
    v2_request_deinit(&r);

    cr_assert_eq(decode_v2(&r, "{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], "
                           "'datatype': 'UINT64', 'data': [1, 2]}], " VP
                           ", 'need_weights': false, 'binary_data_output': true}}", NULL, 0, &e),
                 0, "%s", e.msg);
    r.c.seq.item[0].length = 9, r.c.seq.item[1].length = 4;
    r.c.out_len = 8;
    st = v2_stream_new(&r, "attention", calloc(8, sizeof(float)), NULL);
    cr_assert_not_null(st);
    text = v2ct_read_all(st);
    cr_expect(strstr(text, "\"cache_length\",\"datatype\":\"INT64\",\"shape\":[2],"
                           "\"parameters\":{\"binary_data_size\":16}"), "%s", text);
    const long long want[2] = {9, 4};
    cr_expect(!memcmp(text + stream_size(st) - 16, want, 16), "the INT64 bytes last");
    free(text);
    stream_free(st);
    v2_request_deinit(&r);

    /* ended without a step: B zeros */
    cr_assert_eq(decode_v2(&r, "{'inputs': [{'name': 'sequence_id', 'shape': [3], 'datatype': "
                           "'BYTES', 'data': ['a', 'b', 'c']}], 'parameters': "
                           "{'sequence_end': true}}", NULL, 0, &e), 0, "%s", e.msg);
    cr_expect(r.c.seq.end_only);
    st = v2_stream_new(&r, "attention", NULL, NULL);
    text = v2ct_read_all(st);
    cr_expect(strstr(text, "\"outputs\":[{\"name\":\"cache_length\",\"datatype\":\"INT64\","
                           "\"shape\":[3],\"data\":[0,0,0]}]"), "%s", text);
    free(text);
    stream_free(st);
    v2_request_deinit(&r);

    /* the scalar form as before */
    cr_assert_eq(decode_v2(&r, "{'parameters': {'sequence_id': 'a', 'sequence_end': true}}",
                           NULL, 0, &e), 0, "%s", e.msg);
    st = v2_stream_new(&r, "attention", NULL, NULL);
    text = v2ct_read_all(st);
    cr_expect(strstr(text, "\"parameters\":{\"cache_length\":0},\"outputs\":[]"), "%s", text);
    free(text);
    stream_free(st);
    v2_request_deinit(&r);
}

/* A large body (its errors from the fast readers): the ids are read
 * exactly, never as float32 numbers. */
Test(sequence_batch, large_bodies_read_the_ids_exactly)
{
    const struct codec_limits lim = test_limits();
    const size_t pad = CODEC_FAST_ERRORS_FROM + 1;
    char *json = v2ct_q("{'inputs': [" VQ2 ", {'name': 'sequence_id', 'shape': [2], "
                        "'datatype': 'UINT64', 'data': [16777217, 18446744073709551615]}], "
                        VP "}}");
    const size_t n = strlen(json);
    char *body = malloc(n + pad);
    memcpy(body, json, n);
    memset(body + n, ' ', pad);
    struct v2_request r;
    struct failure e = {0};
    cr_assert_eq(v2_decode_infer(&r, body, n + pad, -1, NULL, &lim, &e), 0, "%s", e.msg);
    cr_expect_str_eq(r.c.seq.item[0].id, "16777217");
    cr_expect_str_eq(r.c.seq.item[1].id, "18446744073709551615");
    v2_request_deinit(&r);
    free(body);
    free(json);

    json = v2ct_q("{" Q2 ", 'sequence_id': [16777217, 18446744073709551614]}");
    const size_t m = strlen(json);
    body = malloc(m + pad);
    memcpy(body, json, m);
    memset(body + m, ' ', pad);
    struct codec_request c;
    cr_assert_eq(codec_decode_request(&c, body, m + pad, &lim, NULL, &e), 0, "%s", e.msg);
    cr_expect_eq(c.path, CODEC_PATH_FAST);
    cr_expect_str_eq(c.seq.item[0].id, "16777217");
    cr_expect_str_eq(c.seq.item[1].id, "18446744073709551614");
    codec_request_deinit(&c);
    free(body);
    free(json);
}
