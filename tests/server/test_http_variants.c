/* test_http_variants.c -- the attention variants (docs/variants.md, "Attention
 * variants") over HTTP: every golden case of tests/golden_variants through
 * POST /attention and through v2's built-in model (JSON and binary
 * tensors), the causal alignments when L != S, the same options through
 * both protocols on a server-held model, and the refusals, each a 400
 * naming the field. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/check.h"
#include "tests/support/fixture.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/support/testdata.h"

#define GOLDEN_DIR "tests/golden_variants"
#define HF_GOLDEN_DIR "tests/models/golden/hf"
#define MAX_GOLDEN 128

static const char *const repo_flags[] = {"--model-repository", "tests/models/repo", NULL};

/* Which variants the golden requests use, so that a variant without a
 * golden case fails the test rather than going untested. */
enum { V_GQA, V_HEAD_DIM, V_ROPE_HALF, V_ROPE_INTERLEAVED, V_ROTARY_DIM, V_OFFSET, V_ALIBI,
       V_ALIBI_SLOPES, V_WINDOW, V_SOFTCAP, V_CAUSAL_L_NE_S, V_LOWER_RIGHT, V_COUNT };
static const char *const variant_names[V_COUNT] = {
    "num_kv_heads", "head_dim", "rope half", "rope interleaved", "rope rotary_dim",
    "query_position_offset", "alibi", "alibi_slopes", "window", "softcap",
    "attn_mask causal with L != S", "attn_mask causal_lower_right"};

static long long dim(json_t *t, int from_end)
{
    json_t *sh = json_object_get(t, "shape");
    return json_integer_value(json_array_get(sh, json_array_size(sh) - 1 - (size_t)from_end));
}

static void note_variants(json_t *req, int *seen)
{
    json_t *rope = json_object_get(req, "rope"), *m = json_object_get(req, "attn_mask");
    const char *style = json_string_value(json_object_get(rope, "style"));
    json_t *q = json_object_get(req, "query"), *k = json_object_get(req, "key");
    seen[V_GQA] |= json_object_get(req, "num_kv_heads") != NULL;
    seen[V_HEAD_DIM] |= json_object_get(req, "head_dim") != NULL;
    seen[V_ROPE_HALF] |= style && !strcmp(style, "half");
    seen[V_ROPE_INTERLEAVED] |= style && !strcmp(style, "interleaved");
    seen[V_ROTARY_DIM] |= json_object_get(rope, "rotary_dim") != NULL;
    seen[V_OFFSET] |= json_object_get(req, "query_position_offset") != NULL;
    seen[V_ALIBI] |= json_is_true(json_object_get(req, "alibi"));
    seen[V_ALIBI_SLOPES] |= json_object_get(req, "alibi_slopes") != NULL;
    seen[V_WINDOW] |= json_object_get(req, "window") != NULL;
    seen[V_SOFTCAP] |= json_object_get(req, "softcap") != NULL;
    seen[V_CAUSAL_L_NE_S] |= json_is_string(m) && !strcmp(json_string_value(m), "causal") &&
                             k && dim(q, 1) != dim(k, 1);
    seen[V_LOWER_RIGHT] |= json_is_string(m) &&
                           !strcmp(json_string_value(m), "causal_lower_right");
}

Test(http_variants, every_golden_through_attention_and_v2_json_and_binary, .timeout = 300)
{
    struct server s;
    server_start(&s, NULL);
    char *paths[MAX_GOLDEN];
    const int n = fixture_list(GOLDEN_DIR, paths, MAX_GOLDEN);
    int failed = 0, seen[V_COUNT] = {0};
    for (int i = 0; i < n; i++) {
        json_t *g = json_load_file(paths[i], 0, NULL);
        cr_assert_not_null(g, "%s", paths[i]);
        note_variants(json_object_get(g, "request"), seen);
        json_decref(g);
        failed += !check_golden(s.port, paths[i], 2, 0); /* {shape, data}, JSON out */
        failed += !check_golden(s.port, paths[i], 3, 1); /* base64 in and out */
        failed += !v2_golden(s.port, paths[i], NULL, 0); /* v2, JSON tensors */
        failed += !v2_golden(s.port, paths[i], NULL, 1); /* v2, binary tensors */
        free(paths[i]);
    }
    for (int v = 0; v < V_COUNT; v++)
        cr_expect(seen[v], "no golden case in %s uses %s", GOLDEN_DIR, variant_names[v]);
    cr_assert_eq(failed, 0, "%d of %d golden comparisons over HTTP failed", failed, 4 * n);
    cr_assert_eq(server_stop(&s), 0);
}

/* The Hugging Face layers of the test repository: POST /attention bodies
 * naming the model, whose variants come from its config (the model's
 * defaults), through both protocols. */
Test(http_variants, hugging_face_layers_through_attention_and_v2, .timeout = 120)
{
    char *paths[MAX_GOLDEN];
    const int n = fixture_list(HF_GOLDEN_DIR, paths, MAX_GOLDEN);
    struct server s;
    server_start_ready(&s, repo_flags);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        json_t *g = json_load_file(paths[i], 0, NULL);
        cr_assert_not_null(g, "%s", paths[i]);
        char model[128];
        snprintf(model, sizeof model, "%s",
                 json_string_value(json_object_get(json_object_get(g, "request"), "model")));
        json_decref(g);
        failed += !check_golden(s.port, paths[i], 2, 0);
        failed += !check_golden(s.port, paths[i], 3, 1);
        failed += !v2_golden(s.port, paths[i], model, 0);
        failed += !v2_golden(s.port, paths[i], model, 1);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d of %d comparisons over HTTP failed", failed, 4 * n);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Causal alignment when L != S: which keys each query row sees            */

/* The weights (1, 1, L, S) of a one-head request; caller frees. */
static float *weights_of(int port, const char *body, int v2, size_t *n)
{
    struct http_reply a = v2 ? infer(port, "attention", body, strlen(body), -1) : post(port, body);
    cr_assert_eq(a.status, 200, "%s: %ld %s", body, a.status, a.body);
    float *w;
    if (v2) {
        w = output_of(&a, "attention_weights", n, NULL);
    } else {
        json_t *j = json_loadb(a.body, a.len, 0, NULL);
        w = flatten(json_object_get(j, "attention_weights"), n);
        json_decref(j);
    }
    free(a.body);
    return w;
}

/* visible: L·S of 0/1, the keys a row must weigh (> 0); the others are 0. */
static void expect_visible(const float *w, size_t n, const int *visible, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_expect(visible[i] ? w[i] > 0 : w[i] == 0, "%s: weight %zu is %g, want %s", what, i,
                  (double)w[i], visible[i] ? "> 0" : "0");
}

Test(http_variants, causal_masks_when_l_differs_from_s_in_both_protocols)
{
    struct server s;
    server_start(&s, NULL);
    /* L = 2 queries, S = 3 keys: upper-left sees j <= i, lower-right j <= i + 1;
     * L = 3, S = 2: lower-right blocks row 0 whole (zeros) */
    static const struct {
        const char *mask, *align;
        int L, S;
        int visible[6];
    } cases[] = {
        {"causal", "upper_left", 2, 3, {1, 0, 0, 1, 1, 0}},
        {"causal_lower_right", "lower_right", 2, 3, {1, 1, 0, 1, 1, 1}},
        {"causal", "upper_left", 3, 2, {1, 0, 1, 1, 1, 1}},
        {"causal_lower_right", "lower_right", 3, 2, {0, 0, 1, 0, 1, 1}},
    };
    static const char *const rows = "[1, 0], [0, 1], [1, 1]";
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char q[64], k[64], body[512];
        snprintf(q, sizeof q, "[%.*s]", cases[c].L == 2 ? 14 : 22, rows);
        snprintf(k, sizeof k, "[%.*s]", cases[c].S == 2 ? 14 : 22, rows);
        snprintf(body, sizeof body, "{\"query\": %s, \"key\": %s, \"num_heads\": 1, "
                 "\"attn_mask\": \"%s\"}", q, k, cases[c].mask);
        size_t n;
        float *w = weights_of(s.port, body, 0, &n);
        cr_assert_eq(n, (size_t)(cases[c].L * cases[c].S));
        expect_visible(w, n, cases[c].visible, body);
        free(w);
        snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 1, \"is_causal\": true, "
                 "\"causal_alignment\": \"%s\"}, \"inputs\": [{\"name\": \"query\", \"datatype\": "
                 "\"FP32\", \"shape\": [%d, 2], \"data\": %s}, {\"name\": \"key\", \"datatype\": "
                 "\"FP32\", \"shape\": [%d, 2], \"data\": %s}]}", cases[c].align, cases[c].L, q,
                 cases[c].S, k);
        w = weights_of(s.port, body, 1, &n);
        cr_assert_eq(n, (size_t)(cases[c].L * cases[c].S));
        expect_visible(w, n, cases[c].visible, body);
        free(w);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* A server-held model: the same options through both protocols            */

/* bert_f32: E = 16, H = 4 (tests/gen_models.py). */
#define BERT_QUERY                                                                        \
    "[[0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, 0.3, -0.1, 0.2, 0.5], " \
    "[0.5, 0.1, -0.3, 0.2, 0.4, -0.6, 0.1, 0.8, -0.2, 0.3, 0.7, -0.4, 0.6, 0.2, -0.5, 0.1], "  \
    "[-0.3, 0.2, 0.6, -0.1, 0.3, 0.5, -0.7, 0.2, 0.4, -0.6, 0.1, 0.3, -0.2, 0.8, 0.4, -0.3]]"

Test(http_variants, a_model_takes_the_options_alike_in_both_protocols, .timeout = 60)
{
    struct server s;
    server_start_ready(&s, repo_flags);
    static const char *const attention =
        "{\"model\": \"bert_f32\", \"query\": " BERT_QUERY ", \"rope\": {\"style\": "
        "\"interleaved\", \"theta\": 500, \"rotary_dim\": 2}, \"query_position_offset\": 1, "
        "\"window\": [1, 0], \"softcap\": 2.5, \"alibi\": true, \"need_weights\": false}";
    static const char *const v2 =
        "{\"parameters\": {\"rope_style\": \"interleaved\", \"rope_theta\": 500, "
        "\"rope_rotary_dim\": 2, \"query_position_offset\": 1, \"window_left\": 1, "
        "\"window_right\": 0, \"softcap\": 2.5, \"alibi\": true, \"need_weights\": false}, "
        "\"inputs\": [{\"name\": \"query\", \"datatype\": \"FP32\", \"shape\": [3, 16], "
        "\"data\": " BERT_QUERY "}]}";
    struct http_reply a = post(s.port, attention);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *j = json_loadb(a.body, a.len, 0, NULL);
    size_t n1, n2;
    float *o1 = flatten(json_object_get(j, "output"), &n1);
    json_decref(j);
    struct http_reply b = infer(s.port, "bert_f32", v2, strlen(v2), -1);
    cr_assert_eq(b.status, 200, "%s", b.body);
    float *o2 = output_of(&b, "output", &n2, NULL);
    cr_assert_eq(n1, 48);
    cr_assert_eq(n2, 48);
    cr_assert(check_tensor("v2 against POST /attention", o2, o1, n1, 0, 0));
    /* without the options, the answer differs: they were applied */
    struct http_reply c = post(s.port, "{\"model\": \"bert_f32\", \"query\": " BERT_QUERY ", "
                                   "\"need_weights\": false}");
    cr_assert_eq(c.status, 200, "%s", c.body);
    j = json_loadb(c.body, c.len, 0, NULL);
    float *o3 = flatten(json_object_get(j, "output"), &n2);
    json_decref(j);
    cr_assert(memcmp(o1, o3, sizeof *o1 * n1) != 0, "the variants changed nothing");
    free(o1), free(o2), free(o3);
    free(a.body), free(b.body), free(c.body);

    /* the model's dimensions: shown in its metadata, and a request may
     * repeat them but not change them */
    struct http_reply m = request(s.port, "GET", "/v2/models/bert_f32", NULL, 0, NULL, 0);
    j = json_loadb(m.body, m.len, 0, NULL);
    json_t *params = json_object_get(j, "parameters");
    cr_expect_eq(json_integer_value(json_object_get(params, "num_kv_heads")), 4, "%s", m.body);
    cr_expect_eq(json_integer_value(json_object_get(params, "head_dim")), 4, "%s", m.body);
    json_decref(j), free(m.body);
    a = post(s.port, "{\"model\": \"bert_f32\", \"num_kv_heads\": 4, \"head_dim\": 4, "
                     "\"query\": " BERT_QUERY "}");
    cr_expect_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = post(s.port, "{\"model\": \"bert_f32\", \"num_kv_heads\": 2, \"query\": " BERT_QUERY "}");
    expect_error(&a, 400, "invalid_parameter", "num_kv_heads must be 4 for model 'bert_f32'");
    free(a.body);
    static const char *const v2_hd =
        "{\"parameters\": {\"head_dim\": 8}, \"inputs\": [{\"name\": \"query\", \"datatype\": "
        "\"FP32\", \"shape\": [3, 16], \"data\": " BERT_QUERY "}]}";
    a = infer(s.port, "bert_f32", v2_hd, strlen(v2_hd), -1);
    expect_v2_error(&a, 400, "parameters.head_dim must be 4 for model 'bert_f32'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* v2's ways of writing rope and alibi_slopes give the same answer         */

Test(http_variants, v2_rope_and_slopes_as_text_flat_or_json_values)
{
    struct server s;
    server_start(&s, NULL);
    static const char *const params[] = {
        "\"rope\": \"{\\\"style\\\": \\\"interleaved\\\", \\\"theta\\\": 100}\", "
        "\"alibi_slopes\": \"[0.5]\"",
        "\"rope_style\": \"interleaved\", \"rope_theta\": 100, \"alibi_slopes\": [0.5]",
        "\"rope\": {\"style\": \"interleaved\", \"theta\": 100}, "
        "\"alibi_slopes\": \"{\\\"shape\\\": [1], \\\"data\\\": [0.5]}\"",
    };
    float *first = NULL;
    size_t n0 = 0;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 1, "
                 "\"query_position_offset\": 3, %s}, \"inputs\": [{\"name\": \"query\", "
                 "\"datatype\": \"FP32\", \"shape\": [3, 4], \"data\": [[1, 0, 0.5, 1], "
                 "[0, 1, 1, -0.5], [0.25, 0.5, -1, 1]]}]}", params[i]);
        struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
        cr_assert_eq(a.status, 200, "%s: %s", body, a.body);
        size_t n;
        float *w = output_of(&a, "attention_weights", &n, NULL);
        cr_assert_eq(n, 9);
        if (first)
            cr_expect(check_tensor(body, w, first, n, 0, 0));
        else
            first = w, n0 = n, w = NULL;
        free(w), free(a.body);
    }
    /* and they are not the plain answer */
    static const char *const plain =
        "{\"parameters\": {\"num_heads\": 1}, \"inputs\": [{\"name\": \"query\", "
        "\"datatype\": \"FP32\", \"shape\": [3, 4], \"data\": [[1, 0, 0.5, 1], "
        "[0, 1, 1, -0.5], [0.25, 0.5, -1, 1]]}]}";
    struct http_reply a = infer(s.port, "attention", plain, strlen(plain), -1);
    size_t n;
    float *w = output_of(&a, "attention_weights", &n, NULL);
    cr_assert_eq(n, n0);
    cr_expect(memcmp(w, first, n * sizeof *w) != 0, "rope and ALiBi changed nothing");
    free(w), free(first), free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Refusals under v2 (POST /attention's are tests/cases/variant_*.json)    */

Test(http_variants, v2_refusals_name_the_parameter)
{
    struct server s;
    server_start(&s, NULL);
    static const struct {
        const char *params, *extra_input, *contains;
    } cases[] = {
        {"\"num_kv_heads\": 3", "", "parameters.num_kv_heads is 3, which does not divide "
                                    "num_heads 2"},
        {"\"num_kv_heads\": 0", "", "parameters.num_kv_heads must be an integer >= 1"},
        {"\"head_dim\": 3", "", "input q_proj_weight is absent, and the identity needs "
                                "num_heads x head_dim = 6 to equal embed_dim 4"},
        {"\"num_kv_heads\": 1",
         ", {\"name\": \"k_proj_weight\", \"datatype\": \"FP32\", \"shape\": [4, 4], "
         "\"data\": [1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1]}",
         "k_proj_weight has shape (4, 4), expected (2, 4)"},
        {"\"rope_style\": \"half\", \"rope_rotary_dim\": 1", "",
         "parameters.rope_rotary_dim is 1: it must be even"},
        {"\"rope\": \"{\\\"style\\\": \\\"half\\\", \\\"rotary_dim\\\": 4}\"", "",
         "parameters.rope.rotary_dim is 4, more than head_dim 2"},
        {"\"rope\": \"{\\\"style\\\": \\\"neox\\\"}\"", "", "parameters.rope.style must be"},
        {"\"rope\": \"{half\"", "", "parameters.rope is not valid JSON"},
        {"\"rope\": \"{\\\"style\\\": \\\"half\\\"}\", \"rope_theta\": 5", "",
         "parameters.rope and parameters.rope_theta cannot be used together"},
        {"\"rope_theta\": 500000", "", "parameters.rope_style is required with "
                                       "parameters.rope_theta"},
        {"\"query_position_offset\": -1", "",
         "parameters.query_position_offset must be an integer from 0 to 2^52"},
        {"\"alibi\": true, \"alibi_slopes\": \"[0.5, 0.25]\"", "",
         "parameters.alibi and parameters.alibi_slopes cannot be used together"},
        {"\"alibi_slopes\": \"[0.5]\"", "", "parameters.alibi_slopes has shape (1,), "
                                            "expected (2,)"},
        {"\"alibi\": 1", "", "parameters.alibi must be true or false"},
        {"\"window_left\": -2", "", "parameters.window_left must be an integer >= -1"},
        {"\"window_right\": 1.5", "", "parameters.window_right must be an integer >= -1"},
        {"\"softcap\": 0", "", "parameters.softcap must be a number > 0"},
        {"\"is_causal\": true, \"causal_alignment\": \"bottom_right\"", "",
         "parameters.causal_alignment must be \"upper_left\" or \"lower_right\""},
        {"\"causal_alignment\": \"lower_right\"", "",
         "parameters.causal_alignment needs is_causal true"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char body[1024];
        snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2, %s}, \"inputs\": "
                 "[{\"name\": \"query\", \"datatype\": \"FP32\", \"shape\": [2, 4], "
                 "\"data\": [[1, 0, 0, 1], [0, 1, 1, 0]]}%s]}", cases[c].params,
                 cases[c].extra_input);
        struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
        expect_v2_error(&a, 400, cases[c].contains);
        free(a.body);
    }
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}
