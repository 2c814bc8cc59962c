/* test_model_config.c -- GET /v2/models/{m}[/versions/1]/config answers
 * Triton's model configuration (the JSON form of model_config.proto's
 * ModelConfig, what tritonclient's get_model_config() returns), derived
 * from the model metadata so that the two agree; and every model's own
 * config.json stays reachable at .../config.json. The real server on
 * tests/models/repo and on the repository's models/. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

#define REPO "tests/models/repo"

/* GET path: status want, and its JSON body (NULL when want is not 200). */
static json_t *get(int port, const char *path, long want)
{
    struct http_reply a = request(port, "GET", path, NULL, 0, NULL, 0);
    cr_assert_eq(a.status, want, "GET %s: %ld %s", path, a.status, a.body);
    json_t *j = NULL;
    if (want == 200) {
        j = json_loadb(a.body ? a.body : "", a.len, 0, NULL);
        cr_assert_not_null(j, "GET %s: not JSON: %s", path, a.body);
    } else {
        expect_v2_error(&a, want, NULL);
    }
    free(a.body);
    return j;
}

/* One of the config's input or output lists against the metadata's:
 * the same tensors in the same order, data_type "TYPE_" + datatype, dims
 * the shape (max_batch_size 0: the full shape, -1 where free); an input
 * other than query is optional. Returns how many dims were -1. */
static int check_tensors(const char *model, const char *what, json_t *cfg, json_t *meta)
{
    cr_assert(json_is_array(cfg), "%s: %s is not an array", model, what);
    cr_assert_eq(json_array_size(cfg), json_array_size(meta), "%s: %zu %s, metadata %zu", model,
                 json_array_size(cfg), what, json_array_size(meta));
    int free_dims = 0;
    size_t i, k;
    json_t *t;
    json_array_foreach(cfg, i, t) {
        json_t *m = json_array_get(meta, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        cr_assert(name && !strcmp(name, json_string_value(json_object_get(m, "name"))),
                  "%s: %s %zu is %s, metadata %s", model, what, i, name,
                  json_string_value(json_object_get(m, "name")));
        char want[32];
        snprintf(want, sizeof want, "TYPE_%s", json_string_value(json_object_get(m, "datatype")));
        const char *dt = json_string_value(json_object_get(t, "data_type"));
        cr_assert(dt && !strcmp(dt, want), "%s: %s.data_type %s, want %s", model, name, dt, want);
        json_t *dims = json_object_get(t, "dims"), *shape = json_object_get(m, "shape"), *d;
        cr_assert(json_is_array(dims) && json_array_size(dims) == json_array_size(shape),
                  "%s: %s.dims not the metadata's shape", model, name);
        json_array_foreach(dims, k, d) {
            cr_assert(json_is_integer(d), "%s: %s.dims[%zu] is not an integer", model, name, k);
            cr_assert_eq(json_integer_value(d), json_integer_value(json_array_get(shape, k)),
                         "%s: %s.dims[%zu]", model, name, k);
            free_dims += json_integer_value(d) == -1;
        }
        if (!strcmp(what, "input")) {
            json_t *opt = json_object_get(t, "optional");
            const int optional = strcmp(name, "query") != 0;
            cr_assert(json_is_boolean(opt) && json_is_true(opt) == optional,
                      "%s: %s.optional should be %s", model, name, optional ? "true" : "false");
        }
    }
    return free_dims;
}

/* Every model the server lists: its config has Triton's fields, of
 * Triton's types, agreeing with its metadata. idle_us: the expected
 * max_sequence_idle_microseconds. */
static void check_every_model(int port, long long idle_us)
{
    json_t *list = get(port, "/v2/models", 200), *n;
    size_t i;
    int models = 0;
    json_array_foreach(json_object_get(list, "models"), i, n) {
        const char *model = json_string_value(n);
        char path[256];
        snprintf(path, sizeof path, "/v2/models/%s", model);
        json_t *meta = get(port, path, 200);
        snprintf(path, sizeof path, "/v2/models/%s/%s", model, i % 2 ? "versions/1/config"
                                                                       : "config");
        json_t *c = get(port, path, 200);
        cr_assert_str_eq(json_string_value(json_object_get(c, "name")), model, "%s: name", path);
        const char *platform = json_string_value(json_object_get(c, "platform"));
        cr_assert(platform && !strcmp(platform, json_string_value(json_object_get(meta,
                  "platform"))), "%s: platform %s is not the metadata's", path, platform);
        cr_assert(json_is_string(json_object_get(c, "backend")), "%s: backend", path);
        json_t *mbs = json_object_get(c, "max_batch_size");
        cr_assert(json_is_integer(mbs) && json_integer_value(mbs) == 0,
                  "%s: max_batch_size should be 0 (the dims are the full shape)", path);
        const int free_in = check_tensors(model, "input", json_object_get(c, "input"),
                                          json_object_get(meta, "inputs"));
        const int free_out = check_tensors(model, "output", json_object_get(c, "output"),
                                           json_object_get(meta, "outputs"));
        cr_assert(free_in > 0 && free_out > 0, "%s: no free (-1) dimension", path);
        json_t *seq = json_object_get(c, "sequence_batching");
        json_t *us = json_object_get(seq, "max_sequence_idle_microseconds");
        cr_assert(json_is_integer(us), "%s: sequence_batching.max_sequence_idle_microseconds "
                  "is not an integer", path);
        cr_assert_eq(json_integer_value(us), idle_us, "%s: idle %lld us, want %lld", path,
                     (long long)json_integer_value(us), idle_us);
        /* parameters: name -> {"string_value": text}; a loaded model's
         * metadata parameters, each as text */
        json_t *params = json_object_get(c, "parameters"), *p;
        cr_assert(json_is_object(params), "%s: parameters", path);
        const char *key;
        json_object_foreach(params, key, p) {
            cr_assert(json_is_string(json_object_get(p, "string_value")) && json_object_size(p) == 1,
                      "%s: parameters.%s is not {\"string_value\": text}", path, key);
        }
        json_t *mp = json_object_get(meta, "parameters");
        json_object_foreach(mp, key, p) {
            const char *got = json_string_value(
                json_object_get(json_object_get(params, key), "string_value"));
            char *want = json_is_string(p) ? strdup(json_string_value(p))
                                           : json_dumps(p, JSON_COMPACT | JSON_ENCODE_ANY);
            cr_assert(got && !strcmp(got, want), "%s: parameters.%s is %s, metadata %s", path,
                      key, got, want);
            free(want);
        }
        /* none of config.json's own keys at the top */
        cr_assert_null(json_object_get(c, "format"), "%s: config.json's format at the top", path);
        json_decref(meta);
        json_decref(c);
        models++;
    }
    cr_assert_gt(models, 0);
    json_decref(list);
}

Test(model_config, every_model_answers_tritons_fields_as_its_metadata_says)
{
    struct server s;
    static const char *const flags[] = {"--model-repository", REPO, "--sequence-idle-timeout",
                                        "37", NULL};
    server_start_ready(&s, flags);
    check_every_model(s.port, 37000000LL);
    cr_assert_eq(server_stop(&s), 0);
    /* the repository's models (trained, induction) at the default 600 s */
    server_start_default(&s, NULL);
    server_wait_ready(&s);
    check_every_model(s.port, 600000000LL);
    cr_assert_eq(server_stop(&s), 0);
}

/* The configuration of the built-in model and of a loaded one, field by
 * field as a Triton client reads them. */
Test(model_config, the_builtin_and_a_loaded_model_in_full)
{
    struct server s;
    static const char *const flags[] = {"--model-repository", REPO, NULL};
    server_start_ready(&s, flags);
    json_t *c = get(s.port, "/v2/models/attention/config", 200);
    json_t *q = json_array_get(json_object_get(c, "input"), 0);
    json_t *want = json_pack("{s:s, s:s, s:[i,i,i], s:b}", "name", "query", "data_type",
                             "TYPE_FP32", "dims", -1, -1, -1, "optional", 0);
    cr_assert(json_equal(q, want), "attention's query: %s", json_dumps(q, JSON_COMPACT));
    json_decref(want);
    json_decref(c);
    c = get(s.port, "/v2/models/mha_f32/versions/1/config", 200);
    q = json_array_get(json_object_get(c, "input"), 0);
    want = json_pack("{s:s, s:s, s:[i,i,i], s:b}", "name", "query", "data_type", "TYPE_FP32",
                     "dims", -1, -1, 16, "optional", 0);
    cr_assert(json_equal(q, want), "mha_f32's query: %s", json_dumps(q, JSON_COMPACT));
    json_decref(want);
    json_t *heads = json_object_get(json_object_get(c, "parameters"), "num_heads");
    cr_assert_str_eq(json_string_value(json_object_get(heads, "string_value")), "4");
    json_decref(c);
    get(s.port, "/v2/models/mha_f32/versions/2/config", 404);
    get(s.port, "/v2/models/nope/config", 404);
    cr_assert_eq(server_stop(&s), 0);
}

/* config.json as written, at .../config.json, with or without a version;
 * the built-in model's is {"name": "attention", "format": "builtin"}. */
Test(model_config, config_json_stays_reachable)
{
    struct server s;
    static const char *const flags[] = {"--model-repository", REPO, NULL};
    server_start_ready(&s, flags);
    json_t *file = json_load_file(REPO "/mha_f32/config.json", 0, NULL);
    cr_assert_not_null(file);
    static const char *const paths[] = {"/v2/models/mha_f32/config.json",
                                        "/v2/models/mha_f32/versions/1/config.json"};
    for (int i = 0; i < 2; i++) {
        json_t *c = get(s.port, paths[i], 200);
        cr_assert(json_equal(c, file), "%s: %s", paths[i], json_dumps(c, JSON_COMPACT));
        json_decref(c);
    }
    json_decref(file);
    json_t *c = get(s.port, "/v2/models/attention/config.json", 200);
    json_t *want = json_pack("{s:s, s:s}", "name", "attention", "format", "builtin");
    cr_assert(json_equal(c, want), "attention: %s", json_dumps(c, JSON_COMPACT));
    json_decref(want);
    json_decref(c);
    get(s.port, "/v2/models/mha_f32/versions/2/config.json", 404);
    get(s.port, "/v2/models/nope/config.json", 404);
    cr_assert_eq(server_stop(&s), 0);
}
