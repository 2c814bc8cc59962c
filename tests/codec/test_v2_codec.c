/* test_v2_codec.c -- the Open Inference Protocol infer codec (codec/v2.h):
 * JSON inputs nested and flat, binary inputs, a model's defaults, output
 * selection and binary flags, what clients add, and the answer read as a
 * stream. Bodies are written with ' for " (see v2ct_q()). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "api/service.h"
#include "codec/v2.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/support/golden_v2.h"
#include "tests/support/limits.h"
#include "tests/codec/v2_codec_shared.h"

/* Decode the JSON body s (' for ") for model m. */
static int decode(struct v2_request *r, const char *s, const struct model *m,
                  struct failure *e)
{
    const struct codec_limits lim = test_limits();
    char *body = v2ct_q(s);
    const int rc = v2_decode_infer(r, body, strlen(body), -1, m, &lim, e);
    free(body);
    return rc;
}

Test(v2_codec, nested_and_flat_data_decode_to_the_same_floats)
{
    const char *bodies[] = {
        "{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
        "'data': [[0.5, -1.25], [3, 0.001]]}], 'parameters': {'num_heads': 1}}",
        "{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
        "'data': [0.5, -1.25, 3, 0.001]}], 'parameters': {'num_heads': 1}}",
        "{'inputs': [{'name': 'query', 'shape': [1, 2, 2], 'datatype': 'FP32', "
        "'data': [[[0.5, -1.25], [3, 0.001]]]}], 'parameters': {'num_heads': 1}}",
    };
    const float want[4] = {0.5f, -1.25f, 3.0f, 0.001f};
    for (int i = 0; i < 3; i++) {
        struct v2_request r;
        struct failure e;
        cr_assert_eq(decode(&r, bodies[i], NULL, &e), 0, "body %d: %s", i, e.msg);
        cr_assert_eq(r.c.p.N, 1);
        cr_assert_eq(r.c.p.L, 2);
        cr_assert_eq(r.c.p.E, 2);
        cr_assert_eq(r.c.p.S, 2, "key defaults to query");
        cr_assert_eq(r.c.batched, i == 2);
        for (int j = 0; j < 4; j++)
            cr_assert_eq(r.c.p.query[j], want[j], "body %d element %d", i, j);
        cr_assert_eq(r.c.p.key, r.c.p.query);
        cr_assert_eq(r.c.p.value, r.c.p.query);
        cr_assert_eq(r.c.p.weights_mode, ATT_WEIGHTS_PER_HEAD);
        cr_assert_eq(r.n_outputs, 2);
        cr_assert_null(r.id);
        v2_request_deinit(&r);
    }
}

Test(v2_codec, masks_options_and_id)
{
    struct v2_request r;
    struct failure e;
    cr_assert_eq(decode(&r, "{'id': 'r-1\\u00e9', 'parameters': {'num_heads': 2, 'scale': 0.25, "
                            "'positional_encoding': 'sinusoidal', 'average_attn_weights': true, "
                            "'triton_anything': 5, 'priority': 1}, 'inputs': ["
                            "{'name': 'query', 'shape': [1, 2, 4], 'datatype': 'FP32', "
                            "'data': [1, 2, 3, 4, 5, 6, 7, 8]},"
                            "{'name': 'key', 'shape': [1, 3, 2], 'datatype': 'FP32', "
                            "'data': [1, 2, 3, 4, 5, 6]},"
                            "{'name': 'attn_mask', 'shape': [2, 3], 'datatype': 'FP32', "
                            "'data': [0, '-inf', 1.5, 0, 0, -2]},"
                            "{'name': 'key_padding_mask', 'shape': [1, 3], 'datatype': 'BOOL', "
                            "'data': [[false, true, false]]},"
                            "{'name': 'k_proj_weight', 'shape': [4, 2], 'datatype': 'FP32', "
                            "'data': [1, 0, 0, 1, 1, 1, 0, 0]},"
                            "{'name': 'v_proj_weight', 'shape': [4, 2], 'datatype': 'FP32', "
                            "'data': [0, 1, 1, 0, 1, 1, 0, 0]}]}", NULL, &e), 0, "%s", e.msg);
    const struct att_params *p = &r.c.p;
    cr_assert_str_eq(r.id, "r-1\xc3\xa9");
    cr_assert_eq(p->H, 2);
    cr_assert_eq(p->S, 3);
    cr_assert_eq(p->kdim, 2);
    cr_assert_eq(p->vdim, 2, "value defaults to key");
    cr_assert_eq(p->has_scale, 1);
    cr_assert_eq(p->scale, 0.25f);
    cr_assert_eq(p->positional_encoding, 1);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_AVERAGE);
    cr_assert_eq(p->mask_kind, ATT_MASK_FLOAT);
    cr_assert_eq(p->float_mask[1], -INFINITY);
    cr_assert_eq(p->float_mask[5], -2.0f);
    cr_assert_eq(p->key_padding_mask[1], 1);
    cr_assert_eq(p->key_padding_mask[2], 0);
    cr_assert_not_null(p->w[ATT_W_K]);
    cr_assert_eq(r.c.weights_len, 6, "(N, L, S) averaged");
    v2_request_deinit(&r);

    /* is_causal, and a BOOL attn_mask */
    cr_assert_eq(decode(&r, "{'parameters': {'num_heads': 1, 'is_causal': true}, 'inputs': ["
                            "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
                            "'data': [1, 2, 3, 4]}]}", NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.mask_kind, ATT_MASK_CAUSAL);
    v2_request_deinit(&r);
    cr_assert_eq(decode(&r, "{'parameters': {'num_heads': 1}, 'inputs': ["
                            "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
                            "'data': [1, 2, 3, 4]}, {'name': 'attn_mask', 'shape': [2, 2], "
                            "'datatype': 'BOOL', 'data': [[false, true], [false, false]]}]}",
                        NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.mask_kind, ATT_MASK_BOOL);
    cr_assert_eq(r.c.p.bool_mask[1], 1);
    v2_request_deinit(&r);
}

Test(v2_codec, binary_inputs_equal_their_json_twins)
{
    /* query (2, 2) FP32, attn_mask (2, 2) BOOL, key_padding_mask (2,) BOOL */
    unsigned char bin[16 + 4 + 2];
    const float qf[4] = {0.5f, -1.25f, 3.0f, 1e-3f};
    const unsigned char mask[4] = {0, 1, 0, 0}, pad[2] = {0, 1};
    memcpy(bin, qf, 16);
    memcpy(bin + 16, mask, 4);
    memcpy(bin + 20, pad, 2);
    size_t len;
    long long hl;
    char *body = v2ct_with_binary(
        "{'parameters': {'num_heads': 1}, 'inputs': ["
        "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
        "'parameters': {'binary_data_size': 16}},"
        "{'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
        "'parameters': {'binary_data_size': 4}},"
        "{'name': 'key_padding_mask', 'shape': [2], 'datatype': 'BOOL', "
        "'parameters': {'binary_data_size': 2}}]}", bin, sizeof bin, &len, &hl);
    const struct codec_limits lim = test_limits();
    struct v2_request r, j;
    struct failure e;
    cr_assert_eq(v2_decode_infer(&r, body, len, hl, NULL, &lim, &e), 0, "%s", e.msg);
    free(body);
    cr_assert_eq(decode(&j, "{'parameters': {'num_heads': 1}, 'inputs': ["
                            "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
                            "'data': [0.5, -1.25, 3, 0.001]},"
                            "{'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
                            "'data': [false, true, false, false]},"
                            "{'name': 'key_padding_mask', 'shape': [2], 'datatype': 'BOOL', "
                            "'data': [false, true]}]}", NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(r.c.p.query, j.c.p.query, 16), 0);
    cr_assert_eq(r.c.p.mask_kind, ATT_MASK_BOOL);
    cr_assert_eq(memcmp(r.c.p.bool_mask, j.c.p.bool_mask, 4), 0);
    cr_assert_eq(memcmp(r.c.p.key_padding_mask, j.c.p.key_padding_mask, 2), 0);
    cr_assert_eq(r.c.out_len, j.c.out_len);
    cr_assert_eq(r.c.weights_len, j.c.weights_len);
    v2_request_deinit(&r);
    v2_request_deinit(&j);

    /* -inf travels in a binary FP32 mask; a mixed body (JSON query, binary mask) */
    const float fm[4] = {0.0f, -INFINITY, 1.0f, 2.0f};
    body = v2ct_with_binary("{'parameters': {'num_heads': 1}, 'inputs': ["
                       "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
                       "'data': [1, 2, 3, 4]},"
                       "{'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
                       "'parameters': {'binary_data_size': 16}}]}", fm, 16, &len, &hl);
    cr_assert_eq(v2_decode_infer(&r, body, len, hl, NULL, &lim, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.mask_kind, ATT_MASK_FLOAT);
    cr_assert_eq(r.c.p.float_mask[1], -INFINITY);
    free(body);
    v2_request_deinit(&r);

    /* an Inference-Header-Content-Length equal to the body: no binary part */
    char *js = v2ct_q("{'parameters': {'num_heads': 1}, 'inputs': [{'name': 'query', 'shape': [1, 1], "
                 "'datatype': 'FP32', 'data': [1]}]}");
    cr_assert_eq(v2_decode_infer(&r, js, strlen(js), (long long)strlen(js), NULL, &lim, &e), 0,
                 "%s", e.msg);
    v2_request_deinit(&r);
    free(js);
}

/* ---------------------------------------------------------------------- */
/* A model's defaults, outputs, binary flags                               */

#define TINY_QUERY "{'name': 'query', 'shape': [3, 4], 'datatype': 'FP32', " \
                   "'data': [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}"

Test(v2_codec, model_defaults_fill_what_the_request_leaves_out)
{
    struct model m;
    json_t *d = json_pack("{sssbsfsbssss}", "attn_mask", "causal", "need_weights", 0, "scale",
                          0.5, "average_attn_weights", 1, "positional_encoding", "sinusoidal",
                          "output_encoding", "base64");
    cr_assert_not_null(d);
    v2ct_test_model(&m, d);
    struct v2_request r;
    struct failure e;
    cr_assert_eq(decode(&r, "{'inputs': [" TINY_QUERY "]}", &m, &e), 0, "%s", e.msg);
    const struct att_params *p = &r.c.p;
    cr_assert_eq(p->H, 2, "num_heads from the model");
    cr_assert_eq(p->mask_kind, ATT_MASK_CAUSAL);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_NONE);
    cr_assert_eq(r.c.weights_len, 0);
    cr_assert_eq(p->has_scale, 1);
    cr_assert_eq(p->scale, 0.5f);
    cr_assert_eq(p->positional_encoding, 1);
    cr_assert_eq(r.n_outputs, 1);
    cr_assert_eq(r.outputs[0], V2_OUT_OUTPUT);
    cr_assert_eq(r.binary[V2_OUT_OUTPUT], 0, "output_encoding is not a v2 option");
    v2_request_deinit(&r);

    /* the request's own options win */
    cr_assert_eq(decode(&r, "{'parameters': {'is_causal': false, 'need_weights': true, "
                            "'scale': 2, 'num_heads': 2}, 'inputs': [" TINY_QUERY "]}", &m, &e),
                 0, "%s", e.msg);
    cr_assert_eq(p->mask_kind, ATT_MASK_NONE);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_AVERAGE, "average_attn_weights still defaults");
    cr_assert_eq(r.c.weights_len, 9);
    cr_assert_eq(p->scale, 2.0f);
    cr_assert_eq(r.n_outputs, 2);
    v2_request_deinit(&r);

    /* an attn_mask input takes the place of the default "causal" */
    cr_assert_eq(decode(&r, "{'inputs': [" TINY_QUERY ", {'name': 'attn_mask', 'shape': [3, 3], "
                            "'datatype': 'BOOL', 'data': [false, true, true, false, false, true, "
                            "false, false, false]}]}", &m, &e), 0, "%s", e.msg);
    cr_assert_eq(p->mask_kind, ATT_MASK_BOOL);
    v2_request_deinit(&r);

    /* asking for attention_weights asks for them over the default need_weights false */
    cr_assert_eq(decode(&r, "{'inputs': [" TINY_QUERY "], 'outputs': [{'name': "
                            "'attention_weights'}]}", &m, &e), 0, "%s", e.msg);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_AVERAGE);
    cr_assert_eq(r.n_outputs, 1);
    cr_assert_eq(r.outputs[0], V2_OUT_WEIGHTS);
    v2_request_deinit(&r);
    v2ct_test_model_deinit(&m);

    /* a model's weights are used, not inputs */
    static float w[16] = {2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2};
    v2ct_test_model(&m, NULL);
    m.w[ATT_W_OUT] = w, m.w_len[ATT_W_OUT] = 16;
    cr_assert_eq(decode(&r, "{'inputs': [" TINY_QUERY "]}", &m, &e), 0, "%s", e.msg);
    cr_assert_eq(p->w[ATT_W_OUT], w);
    cr_assert_null(p->w[ATT_W_IN]);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_PER_HEAD);
    v2_request_deinit(&r);
    v2ct_test_model_deinit(&m);
}

Test(v2_codec, outputs_select_what_is_computed_and_sent)
{
    struct v2_request r;
    struct failure e;
    /* only output: the weights are not computed */
    cr_assert_eq(decode(&r, "{'parameters': {'num_heads': 2}, 'inputs': [" TINY_QUERY "], "
                            "'outputs': [{'name': 'output'}]}", NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.weights_mode, ATT_WEIGHTS_NONE);
    cr_assert_eq(r.c.weights_len, 0);
    cr_assert_eq(r.n_outputs, 1);
    float *out = calloc(r.c.out_len, 4);
    struct stream *st = v2_stream_new(&r, "attention", out, NULL);
    char *s = v2ct_read_all(st);
    cr_assert_null(strstr(s, "attention_weights"), "%s", s);
    cr_assert(strstr(s, "{\"name\":\"output\",\"datatype\":\"FP32\",\"shape\":[3,4],\"data\":"
                        "[0,0,0,0,0,0,0,0,0,0,0,0]}"), "%s", s);
    free(s);
    stream_free(st);
    v2_request_deinit(&r);

    /* both, weights first: that order in the answer; per-head (H, L, S) unbatched */
    cr_assert_eq(decode(&r, "{'id': 'a\\\"b', 'parameters': {'num_heads': 2}, 'inputs': ["
                            TINY_QUERY "], 'outputs': [{'name': 'attention_weights'}, "
                            "{'name': 'output'}]}", NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.weights_mode, ATT_WEIGHTS_PER_HEAD);
    cr_assert_eq(r.c.weights_len, 18);
    out = calloc(r.c.out_len, 4);
    float *w = calloc(r.c.weights_len, 4);
    w[17] = 0.1f;
    st = v2_stream_new(&r, "at\"tention", out, w);
    s = v2ct_read_all(st);
    cr_assert_eq((stream_pieces(st) > 0), 0);
    cr_assert_eq(stream_text_len(st), stream_size(st));
    cr_assert(strncmp(s, "{\"model_name\":\"at\\\"tention\",\"model_version\":\"1\",\"id\":"
                         "\"a\\\"b\",\"outputs\":[{\"name\":\"attention_weights\",\"datatype\":"
                         "\"FP32\",\"shape\":[2,3,3],\"data\":[0,", 120) == 0, "%s", s);
    cr_assert(strstr(s, ",0.1]},{\"name\":\"output\""), "%s", s);
    json_t *j = json_loads(s, 0, NULL);
    cr_assert_not_null(j, "%s", s);
    json_decref(j);
    free(s);
    stream_free(st);
    v2_request_deinit(&r);

    /* an empty list: every output; averaged batched weights (N, L, S) */
    cr_assert_eq(decode(&r, "{'parameters': {'num_heads': 2, 'average_attn_weights': true}, "
                            "'inputs': [{'name': 'query', 'shape': [1, 3, 4], 'datatype': 'FP32',"
                            " 'data': [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]}], 'outputs': []}",
                        NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.n_outputs, 2);
    out = calloc(r.c.out_len, 4), w = calloc(r.c.weights_len, 4);
    st = v2_stream_new(&r, "attention", out, w);
    s = v2ct_read_all(st);
    cr_assert(strstr(s, "\"name\":\"output\",\"datatype\":\"FP32\",\"shape\":[1,3,4]"), "%s", s);
    cr_assert(strstr(s, "\"name\":\"attention_weights\",\"datatype\":\"FP32\",\"shape\":[1,3,3]"),
              "%s", s);
    free(s);
    stream_free(st);
    v2_request_deinit(&r);
}

Test(v2_codec, binary_flags_per_output_override_the_request)
{
    static const struct {
        const char *params, *outputs;
        int bin_out, bin_w;
    } cases[] = {
        {"", "", 0, 0},
        {", 'binary_data_output': true", "", 1, 1},
        {", 'binary_data_output': true",
         ", 'outputs': [{'name': 'output', 'parameters': {'binary_data': false}}, "
         "{'name': 'attention_weights'}]", 0, 1},
        {"", ", 'outputs': [{'name': 'output'}, {'name': 'attention_weights', "
             "'parameters': {'binary_data': true, 'classification': 0}}]", 0, 1},
        {", 'binary_data_output': false",
         ", 'outputs': [{'name': 'attention_weights', 'parameters': {'binary_data': true}}, "
         "{'name': 'output', 'parameters': {'binary_data': true}}]", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{'parameters': {'num_heads': 1%s}, 'inputs': [{'name': "
                 "'query', 'shape': [2, 3], 'datatype': 'FP32', 'data': [1, 2, 3, 4, 5, 6]}]%s}",
                 cases[i].params, cases[i].outputs);
        struct v2_request r;
        struct failure e;
        cr_assert_eq(decode(&r, body, NULL, &e), 0, "case %zu: %s", i, e.msg);
        cr_assert_eq(r.binary[V2_OUT_OUTPUT], cases[i].bin_out, "case %zu", i);
        cr_assert_eq(r.binary[V2_OUT_WEIGHTS], cases[i].bin_w, "case %zu", i);
        float *out = malloc(r.c.out_len * 4), *w = malloc(r.c.weights_len * 4);
        for (size_t k = 0; k < r.c.out_len; k++)
            out[k] = (float)k / 3.0f;
        for (size_t k = 0; k < r.c.weights_len; k++)
            w[k] = -(float)k / 7.0f;
        struct stream *st = v2_stream_new(&r, "attention", out, w);
        cr_assert_eq((stream_pieces(st) > 0), cases[i].bin_out || cases[i].bin_w, "case %zu", i);
        size_t at = 0;
        /* binary bytes follow the JSON in the order of the outputs */
        for (int k = 0; k < r.n_outputs; k++) {
            const int o = r.outputs[k];
            if (o == V2_OUT_OUTPUT)
                v2ct_check_answer_floats(st, "output", out, r.c.out_len, r.binary[o], &at);
            else
                v2ct_check_answer_floats(st, "attention_weights", w, r.c.weights_len, r.binary[o],
                                    &at);
        }
        cr_assert_eq(stream_text_len(st) + at, stream_size(st), "case %zu", i);
        stream_free(st);
        v2_request_deinit(&r);
    }
}

Test(v2_codec, stream_reads_in_any_pieces_equal_one_read)
{
    struct v2_request r;
    struct failure e;
    cr_assert_eq(decode(&r, "{'id': 'x', 'parameters': {'num_heads': 2, 'binary_data_output': "
                            "true}, 'inputs': [{'name': 'query', 'shape': [2, 7, 4], 'datatype': "
                            "'FP32', 'data': [" "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,"
                            "20,21,22,23,24,25,26,27,28,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,"
                            "17,18,19,20,21,22,23,24,25,26,27,28]}], 'outputs': [{'name': "
                            "'output', 'parameters': {'binary_data': false}}, {'name': "
                            "'attention_weights'}]}", NULL, &e), 0, "%s", e.msg);
    float *out = malloc(r.c.out_len * 4), *w = malloc(r.c.weights_len * 4);
    unsigned long long seed = 7;
    for (size_t k = 0; k < r.c.out_len; k++)
        out[k] = check_randf(&seed);
    for (size_t k = 0; k < r.c.weights_len; k++)
        w[k] = check_randf(&seed);
    struct stream *st = v2_stream_new(&r, "attention", out, w);
    const size_t n = stream_size(st);
    cr_assert_eq(n, stream_text_len(st) + r.c.weights_len * 4);
    char *whole = v2ct_read_all(st);
    cr_assert_eq(memcmp(whole + stream_text_len(st), w, r.c.weights_len * 4), 0);
    char *pieces = malloc(n + 8);
    static const size_t sizes[] = {1, 2, 3, 5, 7, 13, 64, 333, 4096};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        memset(pieces, 0, n + 8);
        size_t pos = 0, got;
        while ((got = stream_read(st, pos, pieces + pos, sizes[s])) > 0) {
            cr_assert_leq(got, sizes[s]);
            pos += got;
        }
        cr_assert_eq(pos, n, "pieces of %zu", sizes[s]);
        cr_assert_eq(memcmp(pieces, whole, n), 0, "pieces of %zu differ", sizes[s]);
    }
    /* any offset, any length; reading again gives the same */
    for (size_t pos = 0; pos <= n; pos += 37) {
        char buf[101];
        const size_t k = stream_read(st, pos, buf, sizeof buf);
        cr_assert_eq(k, n - pos < sizeof buf ? n - pos : sizeof buf);
        cr_assert_eq(memcmp(buf, whole + pos, k), 0, "at %zu", pos);
    }
    cr_assert_eq(stream_read(st, n + 5, pieces, 10), 0);
    free(pieces);
    free(whole);
    stream_free(st);
    v2_request_deinit(&r);
}

/* ---------------------------------------------------------------------- */
/* What clients add                                                        */

/* The names Triton's, KServe's and MLServer's clients add to a request,
 * with values that cannot change the answer, are accepted and change
 * nothing: the same options, outputs and binary flags as without them. */
Test(v2_codec, reserved_parameters_are_accepted_and_change_nothing)
{
    static const char *const base =
        "{'parameters': {'num_heads': 2, 'is_causal': true%s}, 'inputs': [{'name': 'query', "
        "'shape': [3, 4], 'datatype': 'FP32', 'data': [1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0]%s}]"
        "%s%s}";
    static const struct { const char *params, *input, *outputs, *root; } with[] = {
        {"", "", "", ""},
        /* Triton's client: schedule policy, no sequence, Triton's own */
        {", 'priority': 1, 'timeout': 5000000, 'sequence_id': 0, 'sequence_start': false, "
         "'sequence_end': false, 'triton_enable_empty_final_response': true", "", "", ""},
        {", 'sequence_id': ''", "", "", ""},
        {"", "", ", 'outputs': [{'name': 'output', 'parameters': {'binary_data': false, "
                 "'classification': 0}}, {'name': 'attention_weights'}]", ""},
        /* MLServer's content types and headers, at every level */
        {", 'content_type': 'np', 'headers': {'x-a': 'b'}",
         ", 'parameters': {'content_type': 'np', 'headers': {}}",
         ", 'outputs': [{'name': 'output', 'parameters': {'content_type': 'np'}}, "
         "{'name': 'attention_weights', 'parameters': {'headers': {}}}]", ""},
        /* KServe's InferRequest.to_rest(): model_name at the root */
        {"", "", "", ", 'id': 'x', 'model_name': 'attention'"},
    };
    struct v2_request r0;
    struct failure e;
    char body[1024];
    snprintf(body, sizeof body, base, "", "", "", "");
    cr_assert_eq(decode(&r0, body, NULL, &e), 0, "%s", e.msg);
    for (size_t i = 0; i < sizeof with / sizeof with[0]; i++) {
        snprintf(body, sizeof body, base, with[i].params, with[i].input, with[i].outputs,
                 with[i].root);
        struct v2_request r;
        cr_assert_eq(decode(&r, body, NULL, &e), 0, "case %zu: %s", i, e.msg);
        const struct att_params *p = &r.c.p, *p0 = &r0.c.p;
        cr_expect(p->H == p0->H && p->mask_kind == p0->mask_kind &&
                  p->weights_mode == p0->weights_mode && p->has_scale == p0->has_scale &&
                  p->L == p0->L && p->E == p0->E && r.n_outputs == r0.n_outputs &&
                  memcmp(r.outputs, r0.outputs, sizeof r.outputs) == 0 &&
                  memcmp(r.binary, r0.binary, sizeof r.binary) == 0 &&
                  memcmp(p->query, p0->query, 12 * sizeof(float)) == 0, "case %zu differs", i);
        v2_request_deinit(&r);
    }
    v2_request_deinit(&r0);
}

/* Binary data sent without Inference-Header-Content-Length: the answer
 * names the header and the length it should have had, small body or large
 * (past CODEC_FAST_ERRORS_FROM, where the fast reader meets the bytes
 * first), whatever the bytes are; a JSON part that is itself invalid keeps
 * its own answer. */
Test(v2_codec, binary_data_without_the_header_names_it)
{
    const struct codec_limits lim = test_limits();
    static const char bins[][9] = {"\0\0\x80\x3f\0\0\0\x40", "}}}}}}}}", ",1,2,3,4",
                                   "[1, 2]  "};
    for (int large = 0; large < 2; large++)
        for (size_t k = 0; k < sizeof bins / sizeof bins[0]; k++) {
            /* query (L, 4) in JSON, ~100 KB when large; key (L, 4) binary */
            const size_t L = large ? 4096 : 1, nb = 16 * L;
            char *json = malloc(L * 32 + 512);
            size_t n = (size_t)sprintf(json, "{\"parameters\": {\"num_heads\": 1}, \"inputs\": "
                                             "[{\"name\": \"query\", \"shape\": [%zu, 4], "
                                             "\"datatype\": \"FP32\", \"data\": [", L);
            for (size_t i = 0; i < L; i++)
                n += (size_t)sprintf(json + n, "%s0.125, 1.0, 2.5, 0", i ? ", " : "");
            n += (size_t)sprintf(json + n, "]}, {\"name\": \"key\", \"shape\": [%zu, 4], "
                                           "\"datatype\": \"FP32\", \"parameters\": "
                                           "{\"binary_data_size\": %zu}}]}", L, nb);
            const size_t jlen = n;
            cr_assert(!large || jlen > CODEC_FAST_ERRORS_FROM);
            char *body = malloc(jlen + nb);
            memcpy(body, json, jlen);
            for (size_t i = 0; i < 2 * L; i++)
                memcpy(body + jlen + 8 * i, bins[k], 8);
            struct v2_request r;
            struct failure e = {0};
            const int rc = v2_decode_infer(&r, body, jlen + nb, -1, NULL, &lim, &e);
            char want[160];
            snprintf(want, sizeof want, "the body has %zu bytes after its JSON part (%zu bytes): "
                     "a request with binary tensor data needs the header "
                     "Inference-Header-Content-Length: %zu", nb, jlen, jlen);
            cr_expect(rc == -1 && e.code == ERR_BAD_REQUEST && strcmp(e.msg, want) == 0,
                      "%s body, bytes %zu: %s: %s", large ? "large" : "small", k,
                      http_error_slug(e.code), e.msg);
            v2_request_deinit(&r);
            /* the same with the header: decodes */
            cr_expect_eq(v2_decode_infer(&r, body, jlen + nb, (long long)jlen, NULL, &lim, &e), 0,
                         "%s", e.msg);
            v2_request_deinit(&r);
            /* an invalid JSON part: its own fault first */
            json[jlen - 2] = ',';
            memcpy(body, json, jlen);
            cr_expect(v2_decode_infer(&r, body, jlen + nb, -1, NULL, &lim, &e) == -1 &&
                      e.code == ERR_INVALID_JSON, "%s", e.msg);
            v2_request_deinit(&r);
            free(json);
            free(body);
        }
}
