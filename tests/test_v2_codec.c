/* test_v2_codec.c -- the Open Inference Protocol infer codec (v2_codec.h):
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
#include "server/service.h"
#include "server/v2_codec.h"
#include "tests/check.h"
#include "tests/golden.h"

static struct codec_limits limits(void)
{
    struct cfg c;
    cfg_defaults(&c);
    return service_limits(&c);
}

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
    const struct codec_limits lim = limits();
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
    memcpy(body + j, bin, n);
    free(json);
    *len = j + n, *hl = (long long)j;
    return body;
}

/* The whole answer, read in one piece. */
static char *read_all(const struct v2_stream *st)
{
    const size_t n = v2_stream_size(st);
    char *b = malloc(n + 1);
    cr_assert_eq(v2_stream_read(st, 0, b, n + 1), n);
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
    cr_assert_not_null(p->k_proj_weight);
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
    const struct codec_limits lim = limits();
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

/* Append tensor t ({shape, data} of a golden request) as input name: JSON
 * data (flat), or its bytes appended to bin when binary. */
static void add_input(json_t *inputs, const char *name, json_t *t, int binary, char **bin,
                      size_t *nbin)
{
    json_t *data = json_object_get(t, "data");
    const int is_bool = json_is_boolean(json_array_get(data, 0));
    json_t *in = json_pack("{sssOss}", "name", name, "shape", json_object_get(t, "shape"),
                           "datatype", is_bool ? "BOOL" : "FP32");
    if (!binary) {
        json_object_set(in, "data", data);
    } else {
        const size_t n = json_array_size(data), size = n * (is_bool ? 1 : 4);
        *bin = realloc(*bin, *nbin + size);
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(data, i);
            if (is_bool) {
                (*bin)[*nbin + i] = (char)json_is_true(v);
            } else {
                const float f = (float)json_number_value(v);
                memcpy(*bin + *nbin + 4 * i, &f, 4);
            }
        }
        *nbin += size;
        json_object_set_new(in, "parameters", json_pack("{sI}", "binary_data_size",
                                                        (json_int_t)size));
    }
    json_array_append_new(inputs, in);
}

/* A golden request (a POST /attention body) as a v2 infer request: each
 * tensor an input (the weights too, unless a model holds them), the
 * options as parameters. Returns the body; *hl is -1 without binary data. */
static char *golden_to_v2(json_t *req, int binary, int with_weights, size_t *len, long long *hl)
{
    json_t *root = json_object(), *inputs = json_array(), *params = json_object();
    char *bin = NULL;
    size_t nbin = 0;
    static const char *const tensors[] = {"query", "key", "value", "attn_mask",
                                          "key_padding_mask"};
    for (int i = 0; i < 5; i++) {
        json_t *t = json_object_get(req, tensors[i]);
        if (json_is_string(t)) /* attn_mask "causal" */
            json_object_set_new(params, "is_causal", json_true());
        else if (t)
            add_input(inputs, tensors[i], t, binary && i % 2 == 0, &bin, &nbin);
    }
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(req, "weights"), k, v) {
        if (with_weights)
            add_input(inputs, k, v, binary, &bin, &nbin);
    }
    static const char *const options[] = {"num_heads", "need_weights", "average_attn_weights",
                                          "scale", "positional_encoding"};
    for (int i = 0; i < 5; i++)
        if ((v = json_object_get(req, options[i])) && (i > 0 || with_weights))
            json_object_set(params, options[i], v);
    json_object_set_new(root, "id", json_string("golden"));
    json_object_set_new(root, "parameters", params);
    json_object_set_new(root, "inputs", inputs);
    char *json = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    const size_t j = strlen(json);
    json = realloc(json, j + nbin + 1);
    if (nbin)
        memcpy(json + j, bin, nbin);
    free(bin);
    *len = j + nbin;
    *hl = nbin ? (long long)j : -1;
    return json;
}

/* The floats of output k in the answer: JSON data or binary bytes. */
static void check_answer_floats(const struct v2_stream *st, const char *name, const float *x,
                                size_t n, int binary, size_t *bin_at)
{
    char *all = read_all(st);
    json_t *root = json_loadb(all, v2_stream_header_len(st), 0, NULL);
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
        cr_assert_eq(memcmp(all + v2_stream_header_len(st) + *bin_at, x, n * 4), 0,
                     "%s: binary bytes differ from the floats", name);
        *bin_at += n * 4;
    } else {
        json_t *data = json_object_get(o, "data");
        cr_assert_eq(json_array_size(data), n);
        for (i = 0; i < n; i++) {
            const float f = (float)json_number_value(json_array_get(data, i));
            cr_assert(memcmp(&f, &x[i], 4) == 0, "%s[%zu]: %a written, %a read back", name, i,
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
    const struct codec_limits lim = limits();
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
    struct v2_stream *st = v2_stream_new(&r, "attention", out, w);
    cr_assert_not_null(st);
    size_t at = 0;
    check_answer_floats(st, "output", out, r.c.out_len, binary_out, &at);
    if (w)
        check_answer_floats(st, "attention_weights", w, r.c.weights_len, binary_out, &at);
    cr_assert_eq(v2_stream_header_len(st) + at, v2_stream_size(st));
    v2_stream_free(st);
    v2_request_deinit(&r);
    return ok;
}

Test(v2_codec, golden_cases_through_the_built_in_model, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    int failed = 0, runs = 0;
    cr_assert_geq(n, 28, "expected the golden cases in tests/golden, found %d", n);
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
        m.in_proj_weight = (float *)g.p.in_proj_weight;
        m.q_proj_weight = (float *)g.p.q_proj_weight;
        m.k_proj_weight = (float *)g.p.k_proj_weight;
        m.v_proj_weight = (float *)g.p.v_proj_weight;
        m.in_proj_bias = (float *)g.p.in_proj_bias;
        m.out_proj_weight = (float *)g.p.out_proj_weight;
        m.out_proj_bias = (float *)g.p.out_proj_bias;
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
    cr_assert_geq(runs, 28);
    cr_assert_eq(failed, 0, "%d of %d golden runs out of tolerance", failed, runs);
}
