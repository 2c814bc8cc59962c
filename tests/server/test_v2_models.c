/* test_v2_models.c -- server-held models over v2: the real server on
 * tests/models/repo (written by tests/gen_models.py), JSON and binary
 * tensors, compared with the golden answers of tests/models/golden and
 * tests/golden; statistics, the repository endpoints, broken models and
 * RoPE defaults. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/support/check.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/support/fixture.h"
#include "tests/support/testdata.h"
#include "tests/server/v2_shared.h"

/* Every golden case of tests/models/golden, through v2 (JSON and binary)
 * and through POST /attention with "model". */
Test(v2, served_models_agree_with_pytorch, .timeout = 120)
{
    struct server s;
    v2t_start_repo(&s);
    char *paths[64];
    int n = fixture_list("tests/models/golden", paths, 64);
    /* Hugging Face layers (hf_llama, hf_mistral, hf_gemma2): GQA, RoPE,
     * windows, soft-cap from the checkpoint's config */
    const int nhf = fixture_list("tests/models/golden/hf", paths + n, 64 - n);
    n += nhf;
    for (int i = 0; i < n; i++) {
        json_t *g = json_load_file(paths[i], 0, NULL);
        const char *model = json_string_value(json_object_get(json_object_get(g, "request"),
                                                              "model"));
        cr_assert_not_null(model, "%s has no model", paths[i]);
        char name[128];
        snprintf(name, sizeof name, "%s", model);
        cr_assert(v2_golden(s.port, paths[i], name, 0), "%s (json)", paths[i]);
        cr_assert(v2_golden(s.port, paths[i], name, 1), "%s (binary)", paths[i]);
        char path[200];
        snprintf(path, sizeof path, "/v2/models/%s/versions/1/ready", name);
        struct http_reply a = request(s.port, "GET", path, NULL, 0, NULL, 0);
        cr_assert_eq(a.status, 200, "%s: %ld", path, a.status);
        free(a.body);
        /* POST /attention with "model" */
        char *body = json_dumps(json_object_get(g, "request"), JSON_COMPACT);
        a = post(s.port, body);
        cr_assert_eq(a.status, 200, "%s via /attention: %.300s", paths[i], a.body);
        json_t *r = json_loadb(a.body, a.len, 0, NULL);
        float got[4096];
        size_t ng = 0, nw;
        flatten_into(json_object_get(r, "output"), got, &ng, 4096);
        json_t *exp = json_object_get(json_object_get(g, "expected"), "output");
        json_t *exp32 = json_object_get(json_object_get(g, "expected_float32"), "output");
        float *fw = floats_of(json_object_get(exp, "data"), &nw);
        float *fw32 = exp32 ? floats_of(json_object_get(exp32, "data"), &nw) : NULL;
        cr_assert_eq(ng, nw, "%s via /attention: %zu outputs, want %zu", paths[i], ng, nw);
        cr_assert(check_tensor_torch(paths[i], got, fw, fw32, nw, 1e-4, 1e-4),
                  "%s via /attention", paths[i]);
        free(fw), free(fw32);
        json_decref(r), free(a.body), free(body);
        json_decref(g);
        free(paths[i]);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* The built-in model "attention" does what POST /attention does: every
 * golden case of tests/golden, weights as inputs. */
Test(v2, builtin_model_agrees_with_pytorch, .timeout = 120)
{
    struct server s;
    server_start(&s, NULL);
    char *paths[64];
    const int n = fixture_list("tests/golden", paths, 64);
    for (int i = 0; i < n; i++) {
        cr_assert(v2_golden(s.port, paths[i], NULL, i % 2), "%s", paths[i]);
        free(paths[i]);
    }
    cr_assert_eq(server_stop(&s), 0);
}

static long long stat_count(int port, const char *model, const char *which)
{
    char path[200];
    snprintf(path, sizeof path, "/v2/models/%s/stats", model);
    json_t *j = v2t_get_json(port, path, 200);
    json_t *st = json_array_get(json_object_get(j, "model_stats"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(st, "name")), model);
    const long long v = json_integer_value(json_object_get(
        json_object_get(json_object_get(st, "inference_stats"), which), "count"));
    json_decref(j);
    return v;
}

Test(v2, statistics_count_successes_and_failures)
{
    struct server s;
    server_start(&s, NULL);
    char body[1024];
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s]}",
             v2t_small_query);
    cr_assert_eq(stat_count(s.port, "attention", "success"), 0);
    for (int i = 0; i < 3; i++) {
        struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
        cr_assert_eq(a.status, 200);
        free(a.body);
    }
    struct http_reply a = infer(s.port, "attention", "{\"inputs\": 5}", 13, -1);
    cr_assert_eq(a.status, 400);
    free(a.body);
    cr_assert_eq(stat_count(s.port, "attention", "success"), 3);
    cr_assert_eq(stat_count(s.port, "attention", "fail"), 1);
    cr_assert_eq(stat_count(s.port, "attention", "compute_infer"), 3);
    json_t *all = v2t_get_json(s.port, "/v2/models/stats", 200);
    cr_assert_geq(json_array_size(json_object_get(all, "model_stats")), 1);
    json_decref(all);
    a = request(s.port, "GET", "/v2/models/nope/stats", NULL, 0, NULL, 0);
    expect_v2_error(&a, 404, NULL);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

static struct http_reply repo_post(int port, const char *path, const char *auth)
{
    const char *headers[] = {auth, NULL};
    return request_with(port, "POST", path, "", 0, NULL, 0, auth ? headers : NULL);
}

Test(v2, repository_needs_the_token_and_unload_load_work)
{
    struct server s;
    server_start(&s, (const char *const[]){"--model-repository", REPO, NULL});
    struct http_reply a = repo_post(s.port, "/v2/repository/index", NULL);
    expect_v2_error(&a, 403, "admin_token");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);

    v2t_start_repo(&s);
    a = repo_post(s.port, "/v2/repository/index", NULL);
    expect_v2_error(&a, 401, "Bearer");
    free(a.body);
    a = repo_post(s.port, "/v2/repository/index", "Authorization: Bearer wrong-token-0123456789");
    expect_v2_error(&a, 403, NULL);
    free(a.body);
    const char *auth = "Authorization: Bearer " TOKEN;
    a = repo_post(s.port, "/v2/repository/index", auth);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *idx = json_loadb(a.body, a.len, 0, NULL);
    cr_assert(json_is_array(idx) && json_array_size(idx) >= 9, "%s", a.body);
    json_decref(idx), free(a.body);
    a = repo_post(s.port, "/v2/repository/models/mha_f32/unload", auth);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = request(s.port, "GET", "/v2/models/mha_f32/ready", NULL, 0, NULL, 0);
    expect_v2_error(&a, 503, "UNLOADED");
    free(a.body);
    a = repo_post(s.port, "/v2/repository/models/mha_f32/load", auth);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = request(s.port, "GET", "/v2/models/mha_f32/ready", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    free(a.body);
    a = repo_post(s.port, "/v2/repository/models/not-there/load", auth);
    cr_assert_geq(a.status, 400);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* A repository of broken models: each is refused with its reason, the
 * server is ready all the same and serves the built-in model. */
Test(v2, broken_models_are_not_ready_and_the_server_is, .timeout = 60)
{
    struct server s;
    server_start(&s, (const char *const[]){"--model-repository", "tests/models/broken", NULL});
    struct http_reply a;
    for (int i = 0; i < 500; i++) {
        a = request(s.port, "GET", "/v2/health/ready", NULL, 0, NULL, 0);
        free(a.body);
        if (a.status == 200)
            break;
        usleep(10000);
    }
    cr_assert_eq(a.status, 200, "not ready with broken models");
    json_t *l = v2t_get_json(s.port, "/v2/models", 200);
    size_t i;
    json_t *name;
    int broken = 0;
    json_array_foreach(json_object_get(l, "models"), i, name) {
        if (i == 0)
            continue;
        char path[200];
        snprintf(path, sizeof path, "/v2/models/%s/ready", json_string_value(name));
        a = request(s.port, "GET", path, NULL, 0, NULL, 0);
        expect_v2_error(&a, 503, "UNAVAILABLE");
        free(a.body);
        broken++;
    }
    cr_assert_geq(broken, 10, "%d broken models listed", broken);
    json_decref(l);
    a = post(s.port, "{\"query\": [[1]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* The one rule of a model's defaults (README "Model defaults: one rule")  */

/* The "output" of body posted to path (POST /attention or a v2 infer), as
 * floats into out (4096 at most); asserts 200. Returns how many. */
static size_t answer_output(int port, const char *path, const char *body, float *out)
{
    struct http_reply a = request(port, "POST", path, body, strlen(body), NULL, 0);
    cr_assert_eq(a.status, 200, "%s: %.300s", path, a.body);
    json_t *r = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(r, "not JSON: %.300s", a.body);
    json_t *o = json_object_get(r, "output");
    if (!o) /* v2: outputs[0] */
        o = json_object_get(json_array_get(json_object_get(r, "outputs"), 0), "data");
    size_t n = 0;
    flatten_into(o, out, &n, 4096);
    json_decref(r);
    free(a.body);
    return n;
}

/* A partial rope over a model's rope default is merged member by member,
 * the same on both protocols: POST /attention's {"theta": t} (refused
 * before the rule, "rope.style is required") and v2's rope as JSON text
 * (which replaced the model's whole before) answer what the whole rope
 * with the model's style and rotary_dim answers. */
Test(v2, rope_defaults_merge_member_by_member_on_both_protocols, .timeout = 60)
{
    struct server s;
    v2t_start_repo(&s);
    json_t *meta = v2t_get_json(s.port, "/v2/models/llama_l1", 200);
    json_t *rope = json_object_get(json_object_get(json_object_get(meta, "parameters"),
                                                   "defaults"), "rope");
    const char *style = json_string_value(json_object_get(rope, "style"));
    const long long rd = json_integer_value(json_object_get(rope, "rotary_dim"));
    json_t *qshape = json_object_get(json_array_get(json_object_get(meta, "inputs"), 0), "shape");
    const long long E = json_integer_value(json_array_get(qshape, json_array_size(qshape) - 1));
    cr_assert(style && rd > 0 && E > 0, "llama_l1 has no rope default");
    const int L = 3;
    char data[8192] = "";
    for (int i = 0; i < L * E; i++)
        snprintf(data + strlen(data), sizeof data - strlen(data), "%s%.3f", i ? "," : "",
                 (double)((i * 37) % 17) / 8.0 - 1.0);
    char body[12288], query[9000];
    snprintf(query, sizeof query, "{\"shape\": [%d, %lld], \"data\": [%s]}", L, E, data);
    static float want[4096], got[4096];
    /* the whole rope, written out */
    snprintf(body, sizeof body, "{\"model\": \"llama_l1\", \"need_weights\": false, \"query\": "
             "%s, \"rope\": {\"style\": \"%s\", \"theta\": 1000, \"rotary_dim\": %lld}}",
             query, style, rd);
    const size_t n = answer_output(s.port, "/attention", body, want);
    cr_assert_eq(n, (size_t)(L * E));
    /* POST /attention: theta alone, the rest the model's */
    snprintf(body, sizeof body, "{\"model\": \"llama_l1\", \"need_weights\": false, \"query\": "
             "%s, \"rope\": {\"theta\": 1000}}", query);
    cr_assert_eq(answer_output(s.port, "/attention", body, got), n);
    cr_assert(check_tensor("/attention rope {theta}", got, want, n, 0, 0));
    /* v2: rope as JSON text, theta alone */
    snprintf(body, sizeof body, "{\"parameters\": {\"need_weights\": false, \"rope\": "
             "\"{\\\"theta\\\": 1000}\"}, \"inputs\": [{\"name\": \"query\", \"datatype\": "
             "\"FP32\", \"shape\": [%d, %lld], \"data\": [%s]}]}", L, E, data);
    cr_assert_eq(answer_output(s.port, "/v2/models/llama_l1/infer", body, got), n);
    cr_assert(check_tensor("v2 rope {theta}", got, want, n, 0, 0));
    /* and the model's own theta is not 1000: the request's member counts */
    snprintf(body, sizeof body, "{\"model\": \"llama_l1\", \"need_weights\": false, \"query\": "
             "%s}", query);
    cr_assert_eq(answer_output(s.port, "/attention", body, got), n);
    cr_assert(memcmp(got, want, n * sizeof *got) != 0, "theta 1000 changed nothing");
    json_decref(meta);
    cr_assert_eq(server_stop(&s), 0);
}
