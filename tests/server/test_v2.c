/* test_v2.c -- the Open Inference Protocol (KServe v2) endpoints over
 * HTTP: metadata, outputs, refusals, what clients add, binary tensors,
 * request ids and compressed bodies. The real server on tests/models/repo
 * (written by tests/gen_models.py). */
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
#include "tests/support/fixture.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/support/testdata.h"
#include "tests/server/v2_shared.h"

/* ---------------------------------------------------------------------- */

Test(v2, server_metadata_health_and_model_list)
{
    struct server s;
    v2t_start_repo(&s);
    json_t *m = v2t_get_json(s.port, "/v2", 200);
    cr_assert(json_is_string(json_object_get(m, "name")) &&
              json_is_string(json_object_get(m, "version")));
    /* one version: openapi.yaml's info.version, and its GET /v2 example */
    char *spec = strdup(fixture_spec()), info[64] = "", example[64] = "";
    cr_assert_not_null(spec);
    int in_info = 0;
    for (char *save = NULL, *line = strtok_r(spec, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        in_info = !strncmp(line, "info:", 5) ? 1 : line[0] != ' ' ? 0 : in_info;
        if (in_info && !info[0])
            sscanf(line, "  version: %63s", info);
        if (!example[0] && strstr(line, "name: attention-service") &&
            (line = strtok_r(NULL, "\n", &save)))
            sscanf(line, " version: %63s", example);
    }
    free(spec);
    const char *served = json_string_value(json_object_get(m, "version"));
    cr_assert(info[0] && !strcmp(served, info), "GET /v2 says %s, openapi.yaml %s", served, info);
    cr_assert_str_eq(example, info, "openapi.yaml's GET /v2 example");
    const char *want[] = {"binary_tensor_data", "statistics", "model_repository", "sequence",
                          "sequence(string_id)"};
    for (int i = 0; i < 5; i++) {
        int found = 0;
        size_t k;
        json_t *e;
        json_array_foreach(json_object_get(m, "extensions"), k, e)
            found |= strcmp(json_string_value(e), want[i]) == 0;
        cr_assert(found, "extension %s not listed", want[i]);
    }
    json_decref(m);
    struct http_reply a = request(s.port, "GET", "/v2/health/live", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert(header(&a, "X-Request-Id"), "no X-Request-Id: %s", a.headers);
    free(a.body);
    a = request(s.port, "GET", "/v2/health/ready", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    free(a.body);
    json_t *l = v2t_get_json(s.port, "/v2/models", 200);
    json_t *names = json_object_get(l, "models");
    cr_assert_str_eq(json_string_value(json_array_get(names, 0)), "attention");
    cr_assert_eq(json_array_size(names), 1 + (size_t)testdata_count_dirs(REPO),
                 "%zu models: the built-in one and the %d of " REPO, json_array_size(names),
                 testdata_count_dirs(REPO));
    json_decref(l);
    /* wrong method, unknown path: {"error": ...} */
    a = request(s.port, "POST", "/v2/health/live", "{}", 2, NULL, 0);
    expect_v2_error(&a, 405, "use GET");
    free(a.body);
    a = request(s.port, "GET", "/v2/nothing/here", NULL, 0, NULL, 0);
    expect_v2_error(&a, 404, NULL);
    free(a.body);
    a = request(s.port, "GET", "/v2/models/no-such-model", NULL, 0, NULL, 0);
    expect_v2_error(&a, 404, "unknown model");
    free(a.body);
    a = request(s.port, "GET", "/v2/models/attention/versions/2/ready", NULL, 0, NULL, 0);
    expect_v2_error(&a, 404, "version");
    free(a.body);
    /* a name quoted in a message is cut by bytes, here inside the é: the
     * answer stays valid JSON (it was a 500 with an empty body) */
    char body[512], path[256];
    snprintf(body, sizeof body, "{\"parameters\": {\"%063d\xc3\xa9\": 1}, \"inputs\": []}", 0);
    a = request(s.port, "POST", "/v2/models/attention/infer", body, strlen(body), NULL, 0);
    expect_v2_error(&a, 400, "unknown parameter");
    free(a.body);
    snprintf(path, sizeof path, "/v2/models/%063d%%C3%%A9/ready", 0);
    a = request(s.port, "GET", path, NULL, 0, NULL, 0);
    expect_v2_error(&a, 404, "unknown model");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(v2, outputs_selection_binary_overrides_and_id)
{
    struct server s;
    server_start(&s, NULL);
    char body[1024];
    /* only "output", as binary by the request-level flag; no weights computed */
    snprintf(body, sizeof body, "{\"id\": \"req-7\", \"parameters\": {\"num_heads\": 2, "
             "\"binary_data_output\": true}, \"inputs\": [%s], \"outputs\": "
             "[{\"name\": \"output\"}]}", v2t_small_query);
    struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *h = answer_head(&a);
    cr_assert_str_eq(json_string_value(json_object_get(h, "id")), "req-7");
    cr_assert_eq(json_array_size(json_object_get(h, "outputs")), 1);
    size_t n;
    float *f = output_of(&a, "output", &n, NULL);
    cr_assert_eq(n, 8);
    cr_assert(header(&a, "Inference-Header-Content-Length"));
    free(f), json_decref(h), free(a.body);
    /* binary_data_output true, but attention_weights overrides with false */
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2, \"binary_data_output\": "
             "true}, \"inputs\": [%s], \"outputs\": [{\"name\": \"attention_weights\", "
             "\"parameters\": {\"binary_data\": false}}, {\"name\": \"output\"}]}",
             v2t_small_query);
    a = infer(s.port, "attention", body, strlen(body), -1);
    cr_assert_eq(a.status, 200, "%s", a.body);
    h = answer_head(&a);
    json_t *o0 = json_array_get(json_object_get(h, "outputs"), 0);
    json_t *o1 = json_array_get(json_object_get(h, "outputs"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(o0, "name")), "attention_weights");
    cr_assert(json_is_array(json_object_get(o0, "data")), "weights should be JSON");
    cr_assert(json_object_get(json_object_get(o1, "parameters"), "binary_data_size"),
              "output should be binary");
    cr_assert_null(json_object_get(h, "id"), "no id was sent");
    f = output_of(&a, "attention_weights", &n, NULL);
    cr_assert_eq(n, 2 * 2 * 2);
    free(f), json_decref(h), free(a.body);
    /* all JSON: no Inference-Header-Content-Length, application/json */
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s]}",
             v2t_small_query);
    a = infer(s.port, "attention", body, strlen(body), -1);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_null(header(&a, "Inference-Header-Content-Length"));
    cr_assert(strstr(header(&a, "Content-Type"), "application/json"));
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(v2, refusals_are_v2_errors_and_the_server_lives)
{
    struct server s;
    v2t_start_repo(&s);
    char body[1024];
    struct {
        const char *model, *body;
        long long hlen;
        long status;
        const char *text;
    } cases[] = {
        {"attention", "{\"inputs\": [", -1, 400, NULL},
        {"attention", "{\"parameters\": {\"num_heads\": 2}, \"inputs\": []}", -1, 400,
         "query"},
        {"no-such", "{}", -1, 404, "unknown model"},
        {"attention", body, 99999999999LL, 400, "Inference-Header-Content-Length"},
        {"attention", body, 100000, 400, "Inference-Header-Content-Length"},
    };
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s]}",
             v2t_small_query);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_reply a = infer(s.port, cases[i].model, cases[i].body, strlen(cases[i].body),
                                cases[i].hlen);
        expect_v2_error(&a, cases[i].status, cases[i].text);
        free(a.body);
        a = request(s.port, "GET", "/v2/health/live", NULL, 0, NULL, 0);
        cr_assert_eq(a.status, 200);
        free(a.body);
    }
    /* a server-held model refuses weights and a wrong num_heads */
    snprintf(body, sizeof body, "{\"query\": [[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]], "
             "\"model\": \"mha_f32\", \"num_heads\": 3}");
    struct http_reply a = post(s.port, body);
    expect_error(&a, 400, "invalid_parameter", "num_heads");
    free(a.body);
    a = post(s.port, "{\"query\": [[1]], \"model\": \"nope\"}");
    expect_error(&a, 404, "not_found", "unknown model");
    free(a.body);
    a = post(s.port, "{\"query\": [[1]], \"model\": \"mha_f32\", \"weights\": {}}");
    expect_error(&a, 400, "invalid_parameter", "together");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* Unknown names answer with the nearest known one, on both protocols; an
 * unknown model lists the models served. */
Test(v2, unknown_names_say_did_you_mean)
{
    struct server s;
    v2t_start_repo(&s);
    static const char served[] = "the models served are attention, bert_bf16, bert_f16, ";
    /* a model name, on every model route and through POST /attention */
    static const char *const paths[] = {"/v2/models/mha_f3", "/v2/models/mha_f3/ready",
                                        "/v2/models/mha_f3/versions/1/config",
                                        "/v2/models/mha_f3/config.json",
                                        "/v2/models/mha_f3/stats"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct http_reply a = request(s.port, "GET", paths[i], NULL, 0, NULL, 0);
        expect_v2_error(&a, 404, "unknown model 'mha_f3' (did you mean 'mha_f32'?); ");
        expect_v2_error(&a, 404, served);
        free(a.body);
    }
    char body[1024];
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s]}",
             v2t_small_query);
    struct http_reply a = infer(s.port, "atention", body, strlen(body), -1);
    expect_v2_error(&a, 404, "unknown model 'atention' (did you mean 'attention'?)");
    free(a.body);
    a = infer(s.port, "zzz", body, strlen(body), -1);
    expect_v2_error(&a, 404, "unknown model 'zzz'; the models served are attention, ");
    free(a.body);
    a = post(s.port, "{\"query\": [[1]], \"model\": \"gpt2_f31\"}");
    expect_error(&a, 404, "not_found", "unknown model 'gpt2_f31' (did you mean 'gpt2_f32'?)");
    expect_error(&a, 404, "not_found", served);
    free(a.body);
    /* the request: is_casual is no parameter */
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2, \"is_casual\": true}, "
             "\"inputs\": [%s]}", v2t_small_query);
    a = infer(s.port, "attention", body, strlen(body), -1);
    expect_v2_error(&a, 400, "unknown parameter 'is_casual' (did you mean 'is_causal'?)");
    free(a.body);
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s], "
             "\"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_date\": true}}]}",
             v2t_small_query);
    a = infer(s.port, "attention", body, strlen(body), -1);
    expect_v2_error(&a, 400, "output 'output': unknown parameter 'binary_date' (did you mean "
                    "'binary_data'?)");
    free(a.body);
    a = post(s.port, "{\"query\": [[1, 2]], \"num_head\": 1}");
    expect_error(&a, 400, "invalid_parameter", "unknown field 'num_head' (did you mean "
                 "'num_heads'?)");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* Bodies as Triton's, KServe's and MLServer's clients write them: the
 * names they add are accepted and the answer is the plain request's;
 * a sequence is refused. */
Test(v2, what_the_clients_add_is_accepted)
{
    struct server s;
    v2t_start_repo(&s);
    char body[2048];
    static const char *const extra[] = {
        "",
        /* tritonclient.http: priority, timeout, binary_data_output, and an
         * output's binary_data */
        ", \"parameters\": {\"num_heads\": 2, \"priority\": 1, \"timeout\": 1000000, "
        "\"binary_data_output\": false}",
        /* kserve InferRequest.to_rest(): id and model_name */
        ", \"id\": \"k-1\", \"model_name\": \"attention\"",
        /* mlserver's codecs: content_type at the request and the inputs */
        ", \"parameters\": {\"num_heads\": 2, \"content_type\": \"np\", \"headers\": {}}",
    };
    float *want = NULL;
    size_t nwant = 0;
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) {
        const int own_params = strstr(extra[i], "parameters") != NULL;
        snprintf(body, sizeof body, "{%s\"inputs\": [{\"name\": \"query\", \"datatype\": "
                 "\"FP32\", \"shape\": [2, 4], \"data\": [[1, 0, 0, 1], [0, 1, 1, 0]]%s}], "
                 "\"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": "
                 "false%s}}]%s}", own_params ? "" : "\"parameters\": {\"num_heads\": 2}, ",
                 i == 3 ? ", \"parameters\": {\"content_type\": \"np\"}" : "",
                 i == 3 ? ", \"content_type\": \"np\"" : "", extra[i]);
        struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
        cr_assert_eq(a.status, 200, "case %zu: %ld %s", i, a.status, a.body);
        size_t n;
        float *got = output_of(&a, "output", &n, NULL);
        if (i == 0)
            want = got, nwant = n;
        else
            cr_expect(n == nwant && memcmp(got, want, n * sizeof *got) == 0, "case %zu", i);
        if (i)
            free(got);
        free(a.body);
    }
    free(want);
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 2, \"sequence_id\": 7, "
             "\"sequence_start\": true}, \"inputs\": [%s]}", v2t_small_query);
    struct http_reply a = infer(s.port, "attention", body, strlen(body), -1);
    cr_assert_eq(a.status, 200, "a sequence's start: %ld %s", a.status, a.body);
    cr_assert(strstr(a.body, "\"parameters\":{\"cache_length\":"), "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* A binary body sent without Inference-Header-Content-Length: 400 naming
 * the header, and the length the JSON part has. */
Test(v2, binary_data_without_the_header_is_named)
{
    struct server s;
    server_start(&s, NULL);
    static const char json[] = "{\"parameters\": {\"num_heads\": 2, \"is_causal\": true}, "
                               "\"inputs\": [{\"name\": \"query\", \"shape\": [3, 4], "
                               "\"datatype\": \"FP32\", \"parameters\": "
                               "{\"binary_data_size\": 48}}]}";
    const size_t jlen = sizeof json - 1;
    char body[sizeof json + 48];
    memcpy(body, json, jlen);
    const float q[12] = {1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0};
    memcpy(body + jlen, q, sizeof q);
    struct http_reply a = infer(s.port, "attention", body, jlen + 48, -1);
    char want[200];
    snprintf(want, sizeof want, "the body has 48 bytes after its JSON part (%zu bytes): a "
             "request with binary tensor data needs the header "
             "Inference-Header-Content-Length: %zu", jlen, jlen);
    expect_v2_error(&a, 400, want);
    free(a.body);
    a = infer(s.port, "attention", body, jlen + 48, (long long)jlen);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(v2, request_id_is_echoed_or_made_up)
{
    struct server s;
    server_start(&s, NULL);
    const char *h[] = {"X-Request-Id: my-id.42", NULL};
    const char *body = "{\"query\": [[1]], \"num_heads\": 1}";
    struct http_reply a = request_with(s.port, "POST", "/attention", body, strlen(body), NULL, 0, h);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_str_eq(header(&a, "X-Request-Id"), "my-id.42");
    free(a.body);
    a = request(s.port, "GET", "/v2", NULL, 0, NULL, 0);
    char first[256];
    snprintf(first, sizeof first, "%s", header(&a, "X-Request-Id"));
    cr_assert_eq(strlen(first), 32, "%s", first);
    free(a.body);
    a = request(s.port, "GET", "/v2", NULL, 0, NULL, 0);
    cr_assert_str_neq(header(&a, "X-Request-Id"), first);
    free(a.body);
    const char *bad[] = {"X-Request-Id: a b\tc", NULL};
    a = request_with(s.port, "GET", "/v2", NULL, 0, NULL, 0, bad);
    cr_assert_eq(strlen(header(&a, "X-Request-Id")), 32);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
    /* the access line has it */
}

/* body compressed with zlib: gzip (window 15 + 16) or zlib (15) format */
static char *compress_body(const char *in, size_t n, int gzip, size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    cr_assert_eq(deflateInit2(&z, 6, Z_DEFLATED, gzip ? 31 : 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    const size_t cap = deflateBound(&z, (uLong)n);
    char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)n;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

Test(v2, compressed_bodies_are_inflated_with_limits_on_the_inflated_size, .timeout = 60)
{
    struct server s;
    server_start(&s, (const char *const[]){"--max-body-bytes", "1M", NULL});
    /* gzip to /attention, deflate (zlib) to v2 infer: the same answers as plain */
    const char *plain = "{\"query\": [[1, 0, 0, 1], [0, 1, 1, 0]], \"num_heads\": 2}";
    struct http_reply want = post(s.port, plain);
    cr_assert_eq(want.status, 200);
    size_t zl;
    char *z = compress_body(plain, strlen(plain), 1, &zl);
    const char *gz[] = {"Content-Encoding: gzip", NULL};
    struct http_reply a = request_with(s.port, "POST", "/attention", z, zl, NULL, 0, gz);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_str_eq(a.body, want.body);
    free(a.body), free(z), free(want.body);
    char v2[512];
    snprintf(v2, sizeof v2, "{\"parameters\": {\"num_heads\": 2}, \"inputs\": [%s]}", v2t_small_query);
    z = compress_body(v2, strlen(v2), 0, &zl);
    const char *df[] = {"Content-Encoding: deflate", NULL};
    a = request_with(s.port, "POST", "/v2/models/attention/infer", z, zl, NULL, 0, df);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body), free(z);
    /* 8 MB of spaces inside a valid JSON object: ~8 KB gzipped, 413 (inflated > 1M) */
    const size_t big = 8u << 20;
    char *bomb = malloc(big);
    memset(bomb, ' ', big);
    bomb[0] = '{', bomb[big - 1] = '}';
    z = compress_body(bomb, big, 1, &zl);
    cr_assert_lt(zl, 64 * 1024);
    a = request_with(s.port, "POST", "/attention", z, zl, NULL, 0, gz);
    expect_error(&a, 413, "payload_too_large", "max_body_bytes");
    free(a.body);
    a = request_with(s.port, "POST", "/v2/models/attention/infer", z, zl, NULL, 0, gz);
    expect_v2_error(&a, 413, "max_body_bytes");
    free(a.body), free(z), free(bomb);
    /* corrupt and unknown codings */
    a = request_with(s.port, "POST", "/attention", "not gzip at all", 15, NULL, 0, gz);
    expect_error(&a, 400, "bad_request", "gzip");
    free(a.body);
    const char *br[] = {"Content-Encoding: br", NULL};
    a = request_with(s.port, "POST", "/v2/models/attention/infer", v2, strlen(v2), NULL, 0, br);
    expect_v2_error(&a, 415, "br");
    cr_assert(header(&a, "Accept-Encoding"), "%s", a.headers);
    free(a.body);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}
