/* test_v2_codec.c -- the Open Inference Protocol infer codec (codec/v2.h):
 * JSON inputs nested and flat, binary inputs, every golden case through the
 * built-in model and a hand-built server-held model, a model's defaults,
 * output selection and binary flags, every refusal, and the answer read as
 * a stream. Bodies are written with ' for " (see q()). */
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

/* s with every ' turned into " (malloc'd): JSON without escapes. */
static char *q(const char *s)
{
    char *d = strdup(s);
    for (char *c = d; *c; c++)
        if (*c == '\'')
            *c = '"';
    return d;
}

/* Decode the JSON body s (' for ") for model m. */
static int decode(struct v2_request *r, const char *s, const struct model *m,
                  struct api_error *e)
{
    const struct codec_limits lim = test_limits();
    char *body = q(s);
    const int rc = v2_decode_infer(r, body, strlen(body), -1, m, &lim, e);
    free(body);
    return rc;
}

/* The JSON s (' for ") followed by n bytes of bin: body and header length. */
static char *with_binary(const char *s, const void *bin, size_t n, size_t *len, long long *hl)
{
    char *json = q(s);
    const size_t j = strlen(json);
    char *body = malloc(j + n + 1);
    memcpy(body, json, j);
    if (n)
        memcpy(body + j, bin, n);
    free(json);
    *len = j + n, *hl = (long long)j;
    return body;
}

/* The whole answer, read in one piece. */
static char *read_all(const struct stream *st)
{
    const size_t n = stream_size(st);
    char *b = malloc(n + 1);
    cr_assert_eq(stream_read(st, 0, b, n + 1), n);
    b[n] = '\0';
    return b;
}

/* A model of E = 4, H = 2, identity projections, with defaults d (owned). */
static void test_model(struct model *m, json_t *d)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "tiny");
    m->E = m->kdim = m->vdim = 4, m->H = 2;
    m->defaults = d ? d : json_object();
    m->config = json_object();
}

static void test_model_deinit(struct model *m)
{
    json_decref(m->defaults);
    json_decref(m->config);
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
        struct api_error e;
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
    struct api_error e;
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
    char *body = with_binary(
        "{'parameters': {'num_heads': 1}, 'inputs': ["
        "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', "
        "'parameters': {'binary_data_size': 16}},"
        "{'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
        "'parameters': {'binary_data_size': 4}},"
        "{'name': 'key_padding_mask', 'shape': [2], 'datatype': 'BOOL', "
        "'parameters': {'binary_data_size': 2}}]}", bin, sizeof bin, &len, &hl);
    const struct codec_limits lim = test_limits();
    struct v2_request r, j;
    struct api_error e;
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
    body = with_binary("{'parameters': {'num_heads': 1}, 'inputs': ["
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
    char *js = q("{'parameters': {'num_heads': 1}, 'inputs': [{'name': 'query', 'shape': [1, 1], "
                 "'datatype': 'FP32', 'data': [1]}]}");
    cr_assert_eq(v2_decode_infer(&r, js, strlen(js), (long long)strlen(js), NULL, &lim, &e), 0,
                 "%s", e.msg);
    v2_request_deinit(&r);
    free(js);
}

/* ---------------------------------------------------------------------- */
/* Golden cases                                                            */

/* A golden request (a POST /attention body) as a v2 infer request: each
 * tensor an input (the weights too, unless a model holds them), the
 * options as parameters; binary: the data of query, value, the padding
 * mask and the weights binary, key's and attn_mask's JSON. Returns the
 * body; *hl is -1 without binary data. */
static char *golden_to_v2(json_t *req, int binary, int with_weights, size_t *len, long long *hl)
{
    json_t *v2 = golden_v2(req, with_weights ? 0 : GOLDEN_V2_HELD);
    json_object_set_new(v2, "id", json_string("golden"));
    char *body = golden_v2_body(v2, binary ? GOLDEN_V2_MIXED : GOLDEN_V2_JSON, len, hl);
    json_decref(v2);
    return body;
}

/* The floats of output k in the answer: JSON data or binary bytes. */
static void check_answer_floats(const struct stream *st, const char *name, const float *x,
                                size_t n, int binary, size_t *bin_at)
{
    char *all = read_all(st);
    json_t *root = json_loadb(all, stream_text_len(st), 0, NULL);
    cr_assert_not_null(root, "the JSON part is not JSON");
    json_t *o = NULL, *v;
    size_t i;
    json_array_foreach(json_object_get(root, "outputs"), i, v) {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
            o = v;
    }
    cr_assert_not_null(o, "output %s missing", name);
    cr_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "FP32");
    if (binary) {
        cr_assert_null(json_object_get(o, "data"));
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "parameters"),
                                                        "binary_data_size")),
                     (json_int_t)(n * 4));
        cr_assert_eq(memcmp(all + stream_text_len(st) + *bin_at, x, n * 4), 0,
                     "%s: binary bytes differ from the floats", name);
        *bin_at += n * 4;
    } else {
        json_t *data = json_object_get(o, "data");
        cr_assert_eq(json_array_size(data), n);
        for (i = 0; i < n; i++) {
            /* (jansson reads "-0" as the integer 0) */
            const float f = (float)json_number_value(json_array_get(data, i));
            cr_assert(memcmp(&f, &x[i], 4) == 0 || (f == 0 && x[i] == 0), "%s[%zu]: %a written, %a read back", name, i,
                      (double)x[i], (double)f);
        }
    }
    json_decref(root);
    free(all);
}

/* Decode body for m, compute, compare with g's expected values, and check
 * the answer carries exactly the computed floats. */
static int run_golden(const struct golden *g, const char *body, size_t len, long long hl,
                      const struct model *m, int binary_out)
{
    const struct codec_limits lim = test_limits();
    struct v2_request r;
    struct api_error e;
    cr_assert_eq(v2_decode_infer(&r, body, len, hl, m, &lim, &e), 0, "%s: %s", g->name, e.msg);
    r.binary[V2_OUT_OUTPUT] = r.binary[V2_OUT_WEIGHTS] = binary_out;
    cr_assert_eq(r.c.out_len, g->expected_out_len, "%s", g->name);
    cr_assert_eq(r.c.weights_len, g->expected_weights_len, "%s", g->name);
    float *out = malloc(r.c.out_len * 4), *w = r.c.weights_len ? malloc(r.c.weights_len * 4)
                                                                 : NULL;
    struct att_error ae;
    cr_assert_eq(att_forward_checked(out, w, &r.c.p, &ae), ATT_OK, "%s: %s", g->name, ae.msg);
    int ok = check_tensor_torch(g->name, out, g->expected_out, g->expected_out32, r.c.out_len,
                                1e-4, 1e-4);
    if (w)
        ok &= check_tensor_torch(g->name, w, g->expected_weights, g->expected_weights32,
                                 r.c.weights_len, 1e-5, 0.0);
    struct stream *st = v2_stream_new(&r, "attention", out, w);
    cr_assert_not_null(st);
    size_t at = 0;
    check_answer_floats(st, "output", out, r.c.out_len, binary_out, &at);
    if (w)
        check_answer_floats(st, "attention_weights", w, r.c.weights_len, binary_out, &at);
    cr_assert_eq(stream_text_len(st) + at, stream_size(st));
    stream_free(st);
    v2_request_deinit(&r);
    return ok;
}

Test(v2_codec, golden_cases_through_the_built_in_model, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    int failed = 0, runs = 0;
    cr_assert(n > 0 && n == golden_count(), "listed %d of the %d golden cases in tests/golden",
              n, golden_count());
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        json_t *c = json_load_file(paths[i], 0, NULL);
        for (int binary = 0; binary < 2; binary++) {
            size_t len;
            long long hl;
            char *body = golden_to_v2(json_object_get(c, "request"), binary, 1, &len, &hl);
            failed += !run_golden(&g, body, len, hl, NULL, binary);
            runs++;
            free(body);
        }
        json_decref(c);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d of %d golden runs out of tolerance", failed, runs);
}

Test(v2_codec, golden_cases_through_a_server_held_model, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    int failed = 0, runs = 0;
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        /* the case's weights and sizes, held by a model */
        struct model m;
        test_model(&m, NULL);
        m.E = g.p.E, m.kdim = g.p.kdim, m.vdim = g.p.vdim, m.H = g.p.H;
        for (int w = 0; w < ATT_NWEIGHTS; w++)
            m.w[w] = (float *)g.p.w[w], m.w_len[w] = g.p.w_len[w];
        json_t *c = json_load_file(paths[i], 0, NULL);
        size_t len;
        long long hl;
        char *body = golden_to_v2(json_object_get(c, "request"), i % 2, 0, &len, &hl);
        failed += !run_golden(&g, body, len, hl, &m, i % 2);
        runs++;
        free(body);
        json_decref(c);
        test_model_deinit(&m);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert(runs > 0 && runs == golden_count(), "ran %d of the %d golden cases", runs,
              golden_count());
    cr_assert_eq(failed, 0, "%d of %d golden runs out of tolerance", failed, runs);
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
    test_model(&m, d);
    struct v2_request r;
    struct api_error e;
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
    test_model_deinit(&m);

    /* a model's weights are used, not inputs */
    static float w[16] = {2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2};
    test_model(&m, NULL);
    m.w[ATT_W_OUT] = w, m.w_len[ATT_W_OUT] = 16;
    cr_assert_eq(decode(&r, "{'inputs': [" TINY_QUERY "]}", &m, &e), 0, "%s", e.msg);
    cr_assert_eq(p->w[ATT_W_OUT], w);
    cr_assert_null(p->w[ATT_W_IN]);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_PER_HEAD);
    v2_request_deinit(&r);
    test_model_deinit(&m);
}

Test(v2_codec, outputs_select_what_is_computed_and_sent)
{
    struct v2_request r;
    struct api_error e;
    /* only output: the weights are not computed */
    cr_assert_eq(decode(&r, "{'parameters': {'num_heads': 2}, 'inputs': [" TINY_QUERY "], "
                            "'outputs': [{'name': 'output'}]}", NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(r.c.p.weights_mode, ATT_WEIGHTS_NONE);
    cr_assert_eq(r.c.weights_len, 0);
    cr_assert_eq(r.n_outputs, 1);
    float *out = calloc(r.c.out_len, 4);
    struct stream *st = v2_stream_new(&r, "attention", out, NULL);
    char *s = read_all(st);
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
    s = read_all(st);
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
    s = read_all(st);
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
        struct api_error e;
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
                check_answer_floats(st, "output", out, r.c.out_len, r.binary[o], &at);
            else
                check_answer_floats(st, "attention_weights", w, r.c.weights_len, r.binary[o],
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
    struct api_error e;
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
    char *whole = read_all(st);
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
/* Refusals                                                                */

#define Q22 "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}"
#define P1 "'parameters': {'num_heads': 1}"
#define HL_JSON (-2) /* header length: the JSON text's */

struct refusal {
    const char *body; /* ' for " */
    int model;        /* 1: the tiny model (E 4, H 2), 2: it with bad defaults */
    const char *bin;  /* bytes after the JSON */
    size_t nbin;
    long long hl;     /* -1, HL_JSON or a number */
    int code;
    const char *msg;  /* a part of the message */
};

static const char inf_bits[] = "\0\0\x80\x3f\0\0\x80\x7f\0\0\0\0\0\0\0\0"; /* 1, +inf, 0, 0 */

static const struct refusal refusals[] = {
    /* the JSON part and its fields */
    {"{'inputs': [", 0, NULL, 0, -1, ERR_INVALID_JSON, "invalid JSON at line 1"},
    {"[1]", 0, NULL, 0, -1, ERR_INVALID_JSON, "must be a JSON object"},
    {"", 0, NULL, 0, -1, ERR_INVALID_JSON, "the request body is empty"},
    {"{'inputs': [" Q22 "], " P1 ", 'inputs': []}", 0, NULL, 0, -1, ERR_INVALID_JSON,
     "duplicate object key"},
    {"{'inputs': [" Q22 "], " P1 ", 'model': 'x'}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "the request has an unknown field 'model' (its fields are id, parameters, inputs, "
     "outputs, model_name)"},
    {"{'id': 5, 'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "id must be a string"},
    {"{" P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "inputs must be an array"},
    {"{'inputs': [5], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "inputs[0] must be an object with a string name"},
    {"{'inputs': [], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' is required"},
    {"{'inputs': [" Q22 ", {'name': 'foo', 'shape': [1], 'datatype': 'FP32', 'data': [1]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input 'foo'"},
    {"{'inputs': [" Q22 ", " Q22 "], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' already exists in request"},
    {"{'inputs': [{'name': 'query', 'shape': [3, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4, "
     "5, 6, 7, 8, 9, 10, 11, 12]}, {'name': 'out_proj_bias', 'shape': [4], 'datatype': 'FP32', "
     "'data': [0, 0, 0, 0]}]}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'out_proj_bias': model 'tiny' holds its own weights"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': [1], "
     "'content': 1}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' has an unknown field 'content'"},
    /* datatypes */
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'BOOL', 'data': [true]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query' has datatype BOOL; it takes "
     "FP32"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'INT32', "
     "'data': [0, 0, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype INT32; it takes BOOL or FP32"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [2], 'datatype': 'FP32', "
     "'data': [0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'key_padding_mask' has datatype FP32; it takes BOOL"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_bias', 'shape': [6], 'datatype': 'FP16', "
     "'data': [0, 0, 0, 0, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'in_proj_bias' has datatype FP16; it takes FP32"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'data': [1]}], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "input 'query': datatype must be a string"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [true, false, false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype FP32 but its data holds booleans"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'data': [[0, 1], [0, 0]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype BOOL but its data holds numbers"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [2], 'datatype': 'BOOL', "
     "'data': [0, 1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "key_padding_mask.data[0] is not a boolean"},
    /* shapes against data */
    {"{'inputs': [{'name': 'query', 'shape': [2, 3], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4, 5]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': shape (2, 3) "
     "does not match the true shape of data: 5 elements where the shape needs 6"},
    {"{'inputs': [{'name': 'query', 'shape': [3, 2], 'datatype': 'FP32', 'data': [[1, 2, 3], "
     "[4, 5, 6]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': shape (3, 2) "
     "does not match the true shape (2, 3) of its nested data"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [[1, 2], "
     "[3]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1]: ragged array"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "[4]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[3] is not a number"},
    {"{'inputs': [{'name': 'query', 'shape': [-1, 2], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query: dimension 0 is -1; every dimension "
     "must be >= 1"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 0], 'datatype': 'FP32', 'data': []}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query: dimension 1 is 0"},
    {"{'inputs': [{'name': 'query', 'shape': [4294967296, 4294967296], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE,
     "max_tensor_elements"},
    {"{'inputs': [{'name': 'query', 'shape': [4097, 4097], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE,
     "query: shape (4097, 4097) has more than 16777216 elements"},
    {"{'inputs': [{'name': 'query', 'shape': [99999999999999999999, 1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE, "beyond 2^63"},
    {"{'inputs': [{'name': 'query', 'shape': [2.0, 1], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.shape[0] is not an integer"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1, 1, 1, 1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.shape must be an "
     "array of 1 to 4 integers"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': 1}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': data must be an array"},
    /* values */
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, "
     "'-inf']}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1] is not a "
     "number"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, "
     "1e39]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1] is out of float32 "
     "range"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [[1, "
     "1e400]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[0][1] is out of "
     "float32 range"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [0, null, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "attn_mask.data[1] is null"},
    /* binary data */
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 16, HL_JSON, ERR_INVALID_TENSOR,
     "query element 1 is not finite"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'parameters': {'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 16, HL_JSON,
     ERR_INVALID_TENSOR, "attn_mask element 1 is NaN or +inf"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'parameters': {'binary_data_size': 4}}], " P1 "}", 0, "\0\2\0\0", 4, HL_JSON,
     ERR_INVALID_TENSOR, "attn_mask: bool byte 1 is 2, not 0 or 1"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': [1], "
     "'parameters': {'binary_data_size': 4}}], " P1 "}", 0, "\0\0\0\0", 4, HL_JSON,
     ERR_INVALID_PARAMETER, "input 'query' has both data and binary_data_size"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32'}], " P1 "}", 0, NULL,
     0, -1, ERR_INVALID_PARAMETER, "input 'query' has no data"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 12}}], " P1 "}", 0, inf_bits, 12, HL_JSON, ERR_INVALID_TENSOR,
     "input 'query': binary_data_size is 12 bytes but shape (2, 2) of FP32 needs 16"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': -16}}], " P1 "}", 0, inf_bits, 16, HL_JSON, ERR_INVALID_PARAMETER,
     "input 'query': binary_data_size must be an integer >= 0"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 15, HL_JSON, ERR_INVALID_TENSOR,
     "input 'query': binary_data_size 16 goes past the end of the body (15 bytes"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, inf_bits + 8, 9, HL_JSON, ERR_INVALID_TENSOR,
     "1 bytes of binary data after the JSON part belong to no input"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, "\0", 1, HL_JSON, ERR_INVALID_TENSOR,
     "1 bytes of binary data after the JSON part belong to no input"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' has binary_data_size but the request has no binary part"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, 1000, ERR_BAD_REQUEST,
     "Inference-Header-Content-Length 1000 is beyond the body's"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, 0, ERR_BAD_REQUEST,
     "a raw binary request) is not supported"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'parameters': 5}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "input 'query': parameters must be an "
     "object"},
    /* parameters */
    {"{'inputs': [" Q22 "], 'parameters': 1}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters must be an object"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'need_weights': 'no'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.need_weights must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'average_attn_weights': 1}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.average_attn_weights must be true or "
     "false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'is_causal': 1}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.is_causal must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'binary_data_output': 'true'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.binary_data_output must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': 0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': 1e39}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': '0.5'}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'positional_encoding': 'rope'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.positional_encoding must be "
     "\"sinusoidal\""},
    {"{'inputs': [" Q22 "]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.num_heads is required by the built-in model 'attention'"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 2.0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.num_heads must be an integer >= 1"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.num_heads must be an integer >= 1"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1e30}}", 0, NULL, 0, -1,
     ERR_PAYLOAD_TOO_LARGE, "parameters.num_heads is beyond 2^63"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1000}}", 0, NULL, 0, -1,
     ERR_PAYLOAD_TOO_LARGE, "num_heads 1000 exceeds the limit 256 (max_heads)"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 3}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "embed_dim 2 is not divisible by num_heads 3"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}], 'parameters': {'num_heads': 4}}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.num_heads is 4 but model 'tiny' has num_heads 2"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'data': [false, false, false, false]}], 'parameters': {'num_heads': 1, 'is_causal': "
     "true}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.is_causal is true and the "
     "request has an attn_mask input"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}]}", 2, NULL, 0, -1, ERR_INVALID_PARAMETER, "model 'tiny' defaults.need_weights must "
     "be true or false"},
    /* shapes against each other, and against a model */
    {"{'inputs': [" Q22 "]}", 1, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "query (embed_dim) has 2 features but model 'tiny' takes 4"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}, {'name': 'key', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}]}", 1, NULL, 0,
     -1, ERR_SHAPE_MISMATCH, "key (kdim) has 2 features but model 'tiny' takes 4"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}, {'name': 'value', 'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}]}", 1,
     NULL, 0, -1, ERR_SHAPE_MISMATCH, "value (vdim) has 3 features but model 'tiny' takes 4"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_weight', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [1, 0, 0, 1]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "in_proj_weight has shape (2, 2), expected (6, 2)"},
    {"{'inputs': [" Q22 ", {'name': 'out_proj_bias', 'shape': [3], 'datatype': 'FP32', "
     "'data': [1, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "out_proj_bias has shape (3,), expected (2,)"},
    {"{'inputs': [{'name': 'query', 'shape': [4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}], "
     P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH, "query must have rank 2 (L, E) or 3"},
    {"{'inputs': [" Q22 ", {'name': 'key', 'shape': [1, 2, 2], 'datatype': 'FP32', "
     "'data': [1, 2, 3, 4]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "key has rank 3 but query has rank 2"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [4], 'datatype': 'BOOL', "
     "'data': [false, false, false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "attn_mask must have rank 2 (L, S) or 3"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [1, 2], 'datatype': 'BOOL', "
     "'data': [false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "attn_mask has shape (1, 2), expected (2, 2)"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [1, 2], 'datatype': 'BOOL', "
     "'data': [false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "key_padding_mask has shape (1, 2), expected (2,)"},
    {"{'inputs': [{'name': 'query', 'shape': [4097, 1], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16388}}], " P1 "}", 0, NULL, 16388, HL_JSON, ERR_PAYLOAD_TOO_LARGE,
     "target length 4097 exceeds the limit 4096 (max_target_len)"},
    {"{'inputs': [{'name': 'query', 'shape': [4096, 8], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 131072}}], 'parameters': {'num_heads': 8}}", 0, NULL, 131072,
     HL_JSON, ERR_PAYLOAD_TOO_LARGE, "more than 67108864 (max_weights_elements); leave "
     "attention_weights out of outputs"},
    /* outputs */
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': {}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "outputs must be an array"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'logits'}]}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown output 'logits'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output'}, {'name': 'output'}]}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "output 'output' already exists in request"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': ['output']}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "outputs[0] must be an object with a string name"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'datatype': 'FP32'}]}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "output 'output' has an unknown field 'datatype'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'binary_data': 1}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.binary_data must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'need_weights': false}, "
     "'outputs': [{'name': 'attention_weights'}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'attention_weights' is requested but parameters.need_weights is false"},
    /* unknown names: the nearest known one (suggest.h) */
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 2, 'is_casual': true}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown parameter 'is_casual' (did you mean 'is_causal'?)"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'junk': [1, 2]}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown parameter 'junk'"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'binary_data_outptu': true}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown parameter 'binary_data_outptu' (did you mean "
     "'binary_data_output'?)"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'binary_data_sise': 8}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': unknown parameter 'binary_data_sise' (did you mean 'binary_data_size'?)"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'num_heads': 1}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': unknown parameter 'num_heads'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'binary_dat': true}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': unknown parameter 'binary_dat' (did you mean 'binary_data'?)"},
    {"{'inputs': [" Q22 "], 'parametres': {'num_heads': 1}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "the request has an unknown field 'parametres' (did you mean "
     "'parameters'? its fields are"},
    {"{'inputs': [{'name': 'query', 'shap': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "input 'query' has an unknown field "
     "'shap' (did you mean 'shape'? its fields are"},
    {"{'inputs': [" Q22 ", {'name': 'qeury', 'shape': [1], 'datatype': 'FP32', 'data': [1]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input 'qeury' (did you mean "
     "'query'?)"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_weigth', 'shape': [1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input "
     "'in_proj_weigth' (did you mean 'in_proj_weight'?)"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'outptu'}]}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown output 'outptu' (did you mean 'output'?)"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'attention_weight'}]}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "unknown output 'attention_weight' (did you mean "
     "'attention_weights'?)"},
    /* reserved names: their types; the extensions the server does not have */
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 42, "
     "'query_position_offset': 1}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.query_position_offset cannot be given inside a sequence"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 'abc', "
     "'kv_cache_dtype': 'FP8'}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.kv_cache_dtype must be \"FP32\", \"FP16\" or \"BF16\""},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'kv_cache_dtype': 'FP16'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.kv_cache_dtype applies to a sequence only"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 'a b'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_id must be at most 128 visible ASCII"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_start': true}}", 0, NULL,
     0, -1, ERR_INVALID_PARAMETER, "parameters.sequence_start needs a sequence_id"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 0, "
     "'sequence_end': true}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.sequence_end needs a sequence_id"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': -1}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_id must be a string or an integer from 0 "
     "to 18446744073709551615"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_start': 0}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_start must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'priority': 'high'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.priority must be an integer >= 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'timeout': -5}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.timeout must be an integer >= 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'headers': 'x'}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.headers must be an object"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'content_type': 5}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': parameters.content_type must be a string"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'classification': 3}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.classification: Triton's classification extension is not "
     "supported"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'shared_memory_region': 'r', 'shared_memory_byte_size': 8}}], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "input 'query': parameters.shared_memory_region: Triton's "
     "shared-memory extension is not supported"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'shared_memory_offset': 0}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.shared_memory_offset: Triton's shared-memory extension"},
    /* KServe's model_name: the path's model */
    {"{'model_name': 'bert', 'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "model_name must be the name of the model in the path, "
     "'attention'"},
    {"{'model_name': 'attention', 'inputs': [" Q22 "]}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "model_name must be the name of the model in the path, 'tiny'"},
    /* binary data without Inference-Header-Content-Length */
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, "\0\0\x80\x3f\0\0\0\x40", 8, -1,
     ERR_BAD_REQUEST, "the body has 8 bytes after its JSON part (139 bytes): a request with "
     "binary tensor data needs the header Inference-Header-Content-Length: 139"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, "    \x0a\x0d\x09 ", 8, -1, ERR_INVALID_PARAMETER,
     "input 'query' has binary_data_size but the request has no binary part"},
};

/* Every refusal, and again with the JSON part padded past
 * CODEC_FAST_ERRORS_FROM (trailing spaces), where the fast reader of
 * "data" answers without handing a large body to jansson: the same
 * answer (these values are small). */
Test(v2_codec, every_refusal_names_the_problem)
{
    const struct codec_limits lim = test_limits();
    int failed = 0;
    const size_t n = sizeof refusals / sizeof refusals[0];
    for (size_t i = 0; i < 2 * n; i++) {
        const struct refusal *c = &refusals[i % n];
        const size_t pad = i < n ? 0 : CODEC_FAST_ERRORS_FROM + 1;
        if (pad && (c->hl >= 0 || (c->hl == -1 && c->nbin) || !c->body[0]))
            continue; /* a header length given as a number, binary bytes read as JSON,
                         the empty body */
        struct model m;
        test_model(&m, c->model == 2 ? json_pack("{ss}", "need_weights", "no") : NULL);
        size_t len;
        long long hl;
        char *zeros = c->nbin && !c->bin ? calloc(1, c->nbin) : NULL;
        char *body = with_binary(c->body, c->bin ? c->bin : zeros, c->nbin, &len, &hl);
        if (pad) { /* spaces after the JSON part */
            body = realloc(body, len + pad);
            memmove(body + hl + pad, body + hl, len - (size_t)hl);
            memset(body + hl, ' ', pad);
            len += pad, hl += (long long)pad;
        }
        if (c->hl != HL_JSON)
            hl = c->hl;
        struct v2_request r;
        struct api_error e = {0};
        const int rc = v2_decode_infer(&r, body, len, hl, c->model ? &m : NULL, &lim, &e);
        if (rc != -1 || e.code != c->code || !strstr(e.msg, c->msg)) {
            cr_log_error("case %zu%s (%s): rc %d, %s: \"%s\"; expected %s: \"%s\"", i % n,
                         pad ? ", padded" : "", c->body, rc, http_error_slug(e.code), e.msg,
                         http_error_slug(c->code), c->msg);
            failed++;
        }
        v2_request_deinit(&r);
        free(body);
        free(zeros);
        test_model_deinit(&m);
    }
    cr_log_info("%zu refusals", n);
    cr_assert_eq(failed, 0, "%d of %zu refusals answered wrongly", failed, n);
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
    struct api_error e;
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
            struct api_error e = {0};
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
