/* test_oip.c -- a ModelInferRequest transcoded to v2's HTTP body
 * (codec/oip.h) and read by the HTTP side's own decoder: raw and typed
 * contents, parameters at every level, the refusals; and the answer
 * written as a ModelInferResponse, read back with protobuf-c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/oip_shared.h"

static const int64_t Q_SHAPE[] = {2, 4};
static const float Q[8] = {0.5f, -1.25f, 3.0f, 0.001f, 1, 2, 3, 4};

/* query (2, 4) FP32 as raw contents, num_heads 2 */
static void query_request(struct oipt_req *r)
{
    oipt_init(r, "attention");
    oipt_input(r, "query", "FP32", Q_SHAPE, 2, 0);
    oipt_raw(r, Q, sizeof Q);
    oipt_int(oipt_param(r, "num_heads"), 2);
}

/* The JSON header of in, parsed. */
static json_t *header(const struct oip_infer *in)
{
    json_error_t je;
    json_t *j = json_loadb(in->body, (size_t)in->header_len, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(j, "%s: %.*s", je.text, (int)in->header_len, in->body);
    return j;
}

Test(oip, raw_contents_become_a_binary_body_the_http_decoder_reads)
{
    struct oipt_req r;
    query_request(&r);
    r.q.id = "r-1 \"\xc3\xa9\"\n";
    r.q.model_version = "1";
    oipt_output(&r, "output");
    struct oip_infer in;
    struct failure e = {0};
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_expect_str_eq(in.model, "attention");
    cr_expect_str_eq(in.version, "1");
    cr_assert_eq(in.len, (size_t)in.header_len + sizeof Q);
    cr_expect_eq(memcmp(in.body + in.header_len, Q, sizeof Q), 0);
    json_t *j = header(&in);
    json_t *q = json_array_get(json_object_get(j, "inputs"), 0);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(q, "parameters"),
                                                    "binary_data_size")), 32);
    json_t *o = json_array_get(json_object_get(j, "outputs"), 0);
    cr_expect(json_is_true(json_object_get(json_object_get(o, "parameters"), "binary_data")));
    cr_expect_null(json_object_get(json_object_get(j, "parameters"), "binary_data_output"),
                   "outputs listed: each says binary_data itself");
    json_decref(j);

    struct v2_request v;
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_expect_eq(v.c.p.H, 2);
    cr_expect_eq(v.c.p.L, 2);
    cr_expect_eq(v.c.p.E, 4);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(v.c.p.query[i], Q[i], "element %d", i);
    cr_expect_str_eq(v.id, "r-1 \"\xc3\xa9\"\n");
    cr_expect_eq(v.n_outputs, 1);
    cr_expect(v.binary[V2_OUT_OUTPUT]);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);
}

Test(oip, typed_fp32_contents_give_the_same_body_as_raw)
{
    struct oipt_req a, b;
    query_request(&a);
    oipt_init(&b, "attention");
    Inference__ModelInferRequest__InferInputTensor *t =
        oipt_input(&b, "query", "FP32", Q_SHAPE, 2, 1);
    t->contents->fp32_contents = (float *)Q, t->contents->n_fp32_contents = 8;
    oipt_int(oipt_param(&b, "num_heads"), 2);
    struct oip_infer x, y;
    struct failure e = {0};
    cr_assert_eq(oipt_decode(&a, &x, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_decode(&b, &y, &e), 0, "%s", e.msg);
    cr_assert_eq(x.len, y.len);
    cr_expect_eq(x.header_len, y.header_len);
    cr_expect_eq(memcmp(x.body, y.body, x.len), 0, "%.*s", (int)y.header_len, y.body);
    json_t *j = header(&x);
    cr_expect(json_is_true(json_object_get(json_object_get(j, "parameters"),
                                           "binary_data_output")),
              "no outputs listed: every output binary");
    json_decref(j);
    oip_infer_deinit(&x);
    oip_infer_deinit(&y);
}

Test(oip, typed_contents_of_every_datatype_are_little_endian_bytes)
{
    struct oipt_req r;
    oipt_init(&r, "m");
    const int64_t two[] = {2};
    int32_t i8[] = {-1, 127}, i16[] = {-2, 300};
    uint32_t u16[] = {65535, 1};
    protobuf_c_boolean bl[] = {1, 0};
    double f64[] = {1.5, -2};
    int64_t i64[] = {-3, INT64_MAX};
    ProtobufCBinaryData by[] = {{3, (uint8_t *)"abc"}, {0, NULL}};
    const char *types[] = {"INT8", "INT16", "UINT16", "BOOL"};
    for (int i = 0; i < 4; i++)
        oipt_input(&r, types[i], types[i], two, 1, 1);
    r.c[0].int_contents = i8, r.c[0].n_int_contents = 2;
    r.c[1].int_contents = i16, r.c[1].n_int_contents = 2;
    r.c[2].uint_contents = u16, r.c[2].n_uint_contents = 2;
    r.c[3].bool_contents = bl, r.c[3].n_bool_contents = 2;
    static const unsigned char want[] = {0xff, 0x7f, 0xfe, 0xff, 0x2c, 0x01,
                                         0xff, 0xff, 0x01, 0x00, 1, 0};
    struct oip_infer in;
    struct failure e = {0};
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(in.len - (size_t)in.header_len, sizeof want);
    cr_expect_eq(memcmp(in.body + in.header_len, want, sizeof want), 0);
    oip_infer_deinit(&in);

    oipt_init(&r, "m");
    oipt_input(&r, "d", "FP64", two, 1, 1);
    oipt_input(&r, "l", "INT64", two, 1, 1);
    oipt_input(&r, "s", "BYTES", two, 1, 1);
    r.c[0].fp64_contents = f64, r.c[0].n_fp64_contents = 2;
    r.c[1].int64_contents = i64, r.c[1].n_int64_contents = 2;
    r.c[2].bytes_contents = by, r.c[2].n_bytes_contents = 2;
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    const unsigned char *p = (const unsigned char *)in.body + in.header_len;
    cr_assert_eq(in.len - (size_t)in.header_len, 16 + 16 + 4 + 3 + 4);
    double d;
    memcpy(&d, p + 8, 8);
    cr_expect_eq(d, -2.0);
    int64_t l;
    memcpy(&l, p + 24, 8);
    cr_expect_eq(l, INT64_MAX);
    cr_expect_eq(memcmp(p + 32, "\3\0\0\0abc\0\0\0\0", 11), 0);
    json_t *j = header(&in);
    json_t *s = json_array_get(json_object_get(j, "inputs"), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(s, "parameters"),
                                                    "binary_data_size")), 11);
    json_decref(j);
    oip_infer_deinit(&in);
}

Test(oip, parameters_keep_their_types_and_http_rules_judge_them)
{
    /* a double stays a real: num_heads 2.0 is refused as over HTTP */
    struct oipt_req r;
    query_request(&r);
    oipt_double(&r.pv[0], 2.0);
    struct oip_infer in;
    struct v2_request v;
    struct failure e = {0}, h = {0};
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_expect_neq(oipt_v2(&v, &in, &e), 0);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);
    const struct oip_infer http = {.body = "{\"inputs\":[{\"name\":\"query\",\"datatype\":"
                                           "\"FP32\",\"shape\":[1,1],\"data\":[1]}],"
                                           "\"parameters\":{\"num_heads\":2.0}}",
                                   .header_len = -1};
    struct oip_infer hb = http;
    hb.len = strlen(hb.body);
    cr_expect_neq(oipt_v2(&v, &hb, &h), 0);
    v2_request_deinit(&v);
    cr_expect_str_eq(e.msg, h.msg);

    /* the others: scale double, need_weights bool, a string, an unknown name */
    query_request(&r);
    oipt_double(oipt_param(&r, "scale"), 0.25);
    oipt_bool(oipt_param(&r, "need_weights"), 0);
    oipt_string(oipt_param(&r, "causal_alignment"), "lower_right");
    oipt_bool(oipt_param(&r, "is_causal"), 1);
    oipt_bool(oipt_param(&r, "binary_data_output"), 0); /* HTTP's own: replaced */
    oipt_int(oipt_param(&r, "priority"), 3);             /* Triton's: ignored */
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_expect_eq(v.c.p.scale, 0.25f);
    cr_expect_eq(v.c.p.weights_mode, ATT_WEIGHTS_NONE);
    cr_expect_eq(v.c.p.mask_kind, ATT_MASK_CAUSAL_LOWER_RIGHT);
    cr_expect(v.binary[V2_OUT_OUTPUT]);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);

    /* a map's last entry of a name wins, as protobuf reads maps */
    query_request(&r);
    oipt_int(&r.pv[0], 1);
    oipt_int(oipt_param(&r, "num_heads"), 4);
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_expect_eq(v.c.p.H, 4);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);

    query_request(&r);
    oipt_bool(oipt_param(&r, "need_weight"), 1);
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_expect_neq(oipt_v2(&v, &in, &e), 0);
    cr_expect(strstr(e.msg, "need_weights"), "the nearest name: %s", e.msg);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);

    /* an output's binary_data false and an input's binary_data_size: HTTP's own */
    query_request(&r);
    oipt_int(oipt_input_param(&r, "binary_data_size"), 7);
    oipt_output(&r, "output");
    oipt_bool(oipt_output_param(&r, "binary_data"), 0);
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_expect(v.binary[V2_OUT_OUTPUT]);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);
}

Test(oip, a_sequence_id_beyond_int64_and_sequence_inputs_reach_the_decoder)
{
    struct oipt_req r;
    query_request(&r);
    oipt_uint(oipt_param(&r, "sequence_id"), UINT64_MAX);
    oipt_bool(oipt_param(&r, "sequence_start"), 1);
    struct oip_infer in;
    struct v2_request v;
    struct failure e = {0};
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(v.c.seq.n, 1);
    cr_expect_str_eq(v.c.seq.item[0].id, "18446744073709551615");
    cr_expect(v.c.seq.item[0].start);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);

    /* a batch of two: sequence_id UINT64 and sequence_end BOOL inputs, typed */
    oipt_init(&r, "attention");
    const int64_t qs[] = {2, 1, 4}, two[] = {2};
    oipt_input(&r, "query", "FP32", qs, 3, 1);
    r.c[0].fp32_contents = (float *)Q, r.c[0].n_fp32_contents = 8;
    uint64_t ids[] = {7, UINT64_MAX};
    protobuf_c_boolean ends[] = {0, 1};
    oipt_input(&r, "sequence_id", "UINT64", two, 1, 1);
    r.c[1].uint64_contents = ids, r.c[1].n_uint64_contents = 2;
    oipt_input(&r, "sequence_end", "BOOL", two, 1, 1);
    r.c[2].bool_contents = ends, r.c[2].n_bool_contents = 2;
    oipt_int(oipt_param(&r, "num_heads"), 2);
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(v.c.seq.n, 2);
    cr_expect_str_eq(v.c.seq.item[0].id, "7");
    cr_expect_str_eq(v.c.seq.item[1].id, "18446744073709551615");
    cr_expect(!v.c.seq.item[0].end && v.c.seq.item[1].end);
    v2_request_deinit(&v);
    oip_infer_deinit(&in);

    /* the ids as BYTES, typed: Triton's length-prefixed layout */
    ProtobufCBinaryData names[] = {{2, (uint8_t *)"s1"}, {3, (uint8_t *)"s-2"}};
    r.in[1].datatype = "BYTES";
    r.c[1].n_uint64_contents = 0;
    r.c[1].bytes_contents = names, r.c[1].n_bytes_contents = 2;
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(&v, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(v.c.seq.n, 2);
    cr_expect_str_eq(v.c.seq.item[0].id, "s1");
    cr_expect_str_eq(v.c.seq.item[1].id, "s-2");
    v2_request_deinit(&v);
    oip_infer_deinit(&in);
}

/* ---------------------------------------------------------------------- */

static void refuse(struct oipt_req *r, int code, const char *want)
{
    struct oip_infer in;
    struct failure e = {0};
    cr_expect_eq(oipt_decode(r, &in, &e), -1, "want \"%s\"", want);
    cr_expect_eq(e.code, code, "%s", e.msg);
    cr_expect(strstr(e.msg, want), "\"%s\" lacks \"%s\"", e.msg, want);
    oip_infer_deinit(&in);
}

Test(oip, refusals_name_the_field)
{
    struct oipt_req r;
    float two[2] = {1, 2};
    query_request(&r);
    oipt_raw(&r, two, sizeof two);
    refuse(&r, ERR_INVALID_TENSOR, "raw_input_contents has 2 entries for 1 inputs");

    query_request(&r);
    r.c[0] = (Inference__InferTensorContents)INFERENCE__INFER_TENSOR_CONTENTS__INIT;
    r.in[0].contents = &r.c[0];
    refuse(&r, ERR_INVALID_TENSOR, "input 'query' has contents, and the request "
                                   "raw_input_contents");

    oipt_init(&r, "attention");
    oipt_input(&r, "query", "FP32", Q_SHAPE, 2, 1);
    int32_t ints[] = {1, 2};
    r.c[0].int_contents = ints, r.c[0].n_int_contents = 2;
    refuse(&r, ERR_INVALID_TENSOR, "input 'query' is FP32: its contents go in fp32_contents, "
                                   "not int_contents");
    r.in[0].datatype = "FP16";
    refuse(&r, ERR_INVALID_TENSOR, "input 'query' is FP16, which has no typed contents");
    r.in[0].datatype = "INT8";
    ints[1] = 128;
    refuse(&r, ERR_INVALID_TENSOR, "input 'query': int_contents[1] = 128 is out of INT8's "
                                   "range");
    r.in[0].contents = NULL;
    refuse(&r, ERR_INVALID_TENSOR, "input 'query' has no data");

    query_request(&r);
    oipt_double(oipt_param(&r, "scale"), NAN);
    refuse(&r, ERR_INVALID_PARAMETER, "request parameter 'scale' is NaN");
    query_request(&r);
    oipt_param(&r, "scale");
    refuse(&r, ERR_INVALID_PARAMETER, "request parameter 'scale' has no value");
    query_request(&r);
    oipt_double(oipt_input_param(&r, "x"), -INFINITY);
    refuse(&r, ERR_INVALID_PARAMETER, "input 'query' parameter 'x' is infinite");

    query_request(&r);
    r.in[0].name = "qu\xff";
    refuse(&r, ERR_INVALID_PARAMETER, "an input's name is not valid UTF-8");
    query_request(&r);
    oipt_string(oipt_param(&r, "causal_alignment"), "\xc0\x80");
    refuse(&r, ERR_INVALID_PARAMETER, "request parameter 'causal_alignment' is not valid "
                                      "UTF-8");

    query_request(&r);
    r.q.model_name = "";
    refuse(&r, ERR_INVALID_PARAMETER, "model_name is required");
    char long_name[200];
    memset(long_name, 'm', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    r.q.model_name = long_name;
    refuse(&r, ERR_NOT_FOUND, "unknown model 'mmm");
    r.q.model_name = "attention";
    r.q.model_version = "12345678901234567890123456789012";
    refuse(&r, ERR_NOT_FOUND, "unknown model 'attention' version 1234");

    struct oip_infer in;
    struct failure e = {0};
    const unsigned char junk[] = {0x0a, 0x10, 'a'};
    cr_expect_eq(oip_infer_decode(&in, junk, sizeof junk, &e), -1);
    cr_expect_eq(e.code, ERR_BAD_REQUEST);
    cr_expect_str_eq(e.msg, "the message is not a valid ModelInferRequest");
    oip_infer_deinit(&in);
}
