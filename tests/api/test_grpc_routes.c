/* test_grpc_routes.c -- api/grpc_routes: the gRPC methods' table, their
 * codes and metrics, and the handlers called directly (no transport): the
 * HTTP side's answers as the protocol's messages, a ModelInfer's numbers
 * the core's, the deadline and a stream's failed message. The calls over
 * a real connection are the tests/server/ gRPC tests. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpc_routes.h"
#include "api/metrics.h"
#include "api/routes.h"
#include "config/config.h"
#include "core/attention.h"
#include "grpc_service.pb-c.h"
#include "lib/errors.h"

#define SERVICE "/inference.GRPCInferenceService/"

static const struct grpc_route_table *table(void)
{
    static struct cfg c;
    cfg_defaults(&c);
    routes_init(&c, NULL);
    return grpc_routes_init(&c);
}

static const struct grpc_route *row(const char *rpc)
{
    const struct grpc_route_table *t = table();
    char path[96];
    snprintf(path, sizeof path, SERVICE "%s", rpc);
    for (size_t i = 0; i < t->count; i++)
        if (!strcmp(t->rows[i].path, path))
            return &t->rows[i];
    cr_assert_fail("no row for %s", rpc);
    return NULL;
}

Test(grpc_routes, the_twelve_methods_and_their_flags)
{
    static const struct {
        const char *rpc;
        unsigned flags;
    } want[] = {
        {"ServerLive", 0}, {"ServerReady", 0}, {"ModelReady", 0}, {"ServerMetadata", 0},
        {"ModelMetadata", 0}, {"ModelInfer", GRPC_ROUTE_POOL},
        {"ModelStreamInfer", GRPC_ROUTE_POOL | GRPC_ROUTE_STREAM}, {"ModelConfig", 0},
        {"ModelStatistics", 0}, {"RepositoryIndex", GRPC_ROUTE_ADMIN},
        {"RepositoryModelLoad", GRPC_ROUTE_POOL | GRPC_ROUTE_ADMIN},
        {"RepositoryModelUnload", GRPC_ROUTE_POOL | GRPC_ROUTE_ADMIN},
    };
    const struct grpc_route_table *t = table();
    cr_assert_eq(t->count, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < t->count; i++) {
        const struct grpc_route *r = row(want[i].rpc);
        cr_expect_eq(r->flags, want[i].flags, "%s", want[i].rpc);
        cr_expect(r->handler && r->metric, "%s", want[i].rpc);
    }
    cr_expect_str_eq(t->admin_off, ROUTES_ADMIN_OFF);
}

/* The contract's codes of the HTTP errors. */
Test(grpc_routes, errors_map_to_their_codes)
{
    static const int want[][2] = {
        {ERR_NOT_FOUND, GRPC_CODE_NOT_FOUND}, {ERR_SEQUENCE_NOT_FOUND, GRPC_CODE_NOT_FOUND},
        {ERR_INVALID_JSON, GRPC_CODE_INVALID_ARGUMENT},
        {ERR_INVALID_PARAMETER, GRPC_CODE_INVALID_ARGUMENT},
        {ERR_SHAPE_MISMATCH, GRPC_CODE_INVALID_ARGUMENT},
        {ERR_PAYLOAD_TOO_LARGE, GRPC_CODE_RESOURCE_EXHAUSTED},
        {ERR_OVERLOADED, GRPC_CODE_RESOURCE_EXHAUSTED},
        {ERR_MODEL_NOT_READY, GRPC_CODE_UNAVAILABLE}, {ERR_SHUTTING_DOWN, GRPC_CODE_UNAVAILABLE},
        {ERR_UNAUTHORIZED, GRPC_CODE_UNAUTHENTICATED}, {ERR_FORBIDDEN, GRPC_CODE_PERMISSION_DENIED},
        {ERR_REQUEST_TIMEOUT, GRPC_CODE_DEADLINE_EXCEEDED},
        {ERR_NOT_IMPLEMENTED, GRPC_CODE_UNIMPLEMENTED}, {ERR_INTERNAL, GRPC_CODE_INTERNAL},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect_eq(grpc_routes_code_of_error(want[i][0]), want[i][1], "%s",
                     http_error_slug(want[i][0]));
    cr_expect_eq(grpc_routes_code_of_status(503), GRPC_CODE_UNAVAILABLE);
    cr_expect_eq(grpc_routes_code_of_status(404), GRPC_CODE_NOT_FOUND);
}

static unsigned long count_of(const char *line)
{
    size_t len;
    const struct metrics_gauges g = {0, 0, 1, 0, 0, 0, 0};
    char *m = metrics_write(&g, &len);
    const char *p = strstr(m, line);
    const unsigned long n = p ? strtoul(p + strlen(line), NULL, 10) : 0;
    free(m);
    return n;
}

/* A call the transport records is counted with protocol "grpc" and its
 * code's name; an HTTP request with protocol "http" and its status. */
Test(grpc_routes, calls_are_counted_with_their_protocol)
{
    const struct grpc_route_table *t = table();
    const char *grpc = "attention_requests_total{protocol=\"grpc\",endpoint=\"v2_infer\","
                       "status=\"INVALID_ARGUMENT\"} ";
    const char *http = "attention_requests_total{protocol=\"http\",endpoint=\"v2_infer\","
                       "status=\"400\"} ";
    const unsigned long g0 = count_of(grpc), h0 = count_of(http);
    t->record(row("ModelInfer")->metric, GRPC_CODE_INVALID_ARGUMENT, 0.01);
    cr_assert_eq(count_of(grpc), g0 + 1);
    cr_assert_eq(count_of(http), h0);
    metrics_record("v2_infer", 400, 0.01);
    cr_assert_eq(count_of(http), h0 + 1);
    cr_assert_eq(count_of(grpc), g0 + 1);
}

/* ---------------------------------------------------------------------- */
/* The handlers, called as the transport calls them                        */

static volatile int not_cancelled;

static struct grpc_route_response call(const char *rpc, const void *msg, size_t len,
                                       int draining, double deadline)
{
    const struct grpc_route *r = row(rpc);
    struct grpc_route_request rq = {
        .route = r, .msg = msg, .len = len, .request_id = "test",
        .t_first = grpc_route_now(), .t_msg = grpc_route_now(), .deadline = deadline,
        .cancelled = &not_cancelled,
    };
    rq.state.draining = draining;
    struct grpc_route_response out;
    memset(&out, 0, sizeof out);
    r->handler(&rq, &out);
    return out;
}

/* The answer's message: its body, then its tails. */
static unsigned char *whole(const struct grpc_route_response *out, size_t *len)
{
    size_t n = out->len;
    for (int i = 0; i < out->ntail; i++)
        n += out->tail[i].len;
    unsigned char *m = malloc(n ? n : 1);
    memcpy(m, out->body, out->len);
    size_t at = out->len;
    for (int i = 0; i < out->ntail; i++) {
        memcpy(m + at, out->tail[i].data, out->tail[i].len);
        at += out->tail[i].len;
    }
    *len = n;
    return m;
}

Test(grpc_routes, health_and_metadata_are_the_http_answers)
{
    struct grpc_route_response out = call("ServerLive", NULL, 0, 0, 0);
    cr_assert_eq(out.code, GRPC_CODE_OK, "%s", out.message);
    Inference__ServerLiveResponse *live =
        inference__server_live_response__unpack(NULL, out.len, out.body);
    cr_assert(live && live->live);
    inference__server_live_response__free_unpacked(live, NULL);
    grpc_route_response_free(&out);

    out = call("ServerReady", NULL, 0, 1, 0); /* draining: not ready, not an error */
    cr_assert_eq(out.code, GRPC_CODE_OK, "%s", out.message);
    Inference__ServerReadyResponse *ready =
        inference__server_ready_response__unpack(NULL, out.len, out.body);
    cr_assert(ready && !ready->ready);
    inference__server_ready_response__free_unpacked(ready, NULL);
    grpc_route_response_free(&out);

    out = call("ServerMetadata", NULL, 0, 0, 0);
    Inference__ServerMetadataResponse *meta =
        inference__server_metadata_response__unpack(NULL, out.len, out.body);
    cr_assert(meta);
    cr_expect_str_eq(meta->name, "attention-service");
    cr_expect_gt(meta->n_extensions, 0);
    inference__server_metadata_response__free_unpacked(meta, NULL);
    grpc_route_response_free(&out);

    /* an unknown model: NOT_FOUND with HTTP's message */
    Inference__ModelReadyRequest mr = INFERENCE__MODEL_READY_REQUEST__INIT;
    mr.name = "nope";
    unsigned char buf[64];
    size_t n = inference__model_ready_request__pack(&mr, buf);
    out = call("ModelReady", buf, n, 0, 0);
    cr_assert_eq(out.code, GRPC_CODE_NOT_FOUND);
    cr_expect(out.message && strstr(out.message, "unknown model 'nope'"), "%s", out.message);
    grpc_route_response_free(&out);

    mr.name = "attention";
    n = inference__model_ready_request__pack(&mr, buf);
    out = call("ModelConfig", buf, n, 0, 0);
    cr_assert_eq(out.code, GRPC_CODE_OK, "%s", out.message);
    Inference__ModelConfigResponse *cfg =
        inference__model_config_response__unpack(NULL, out.len, out.body);
    cr_assert(cfg && cfg->config);
    cr_expect_str_eq(cfg->config->name, "attention");
    inference__model_config_response__free_unpacked(cfg, NULL);
    grpc_route_response_free(&out);
}

/* query, key and value (1, 2, 4) raw, two heads: the core's numbers. */
static size_t infer_request(unsigned char **msg, const float *x, const char *model)
{
    Inference__ModelInferRequest rq = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor in[3], *ins[3];
    static const char *const names[3] = {"query", "key", "value"};
    int64_t shape[3] = {1, 2, 4};
    ProtobufCBinaryData raw[3];
    for (int i = 0; i < 3; i++) {
        inference__model_infer_request__infer_input_tensor__init(&in[i]);
        in[i].name = (char *)names[i], in[i].datatype = "FP32";
        in[i].n_shape = 3, in[i].shape = shape;
        ins[i] = &in[i];
        raw[i] = (ProtobufCBinaryData){8 * sizeof(float), (uint8_t *)x};
    }
    Inference__InferParameter heads = INFERENCE__INFER_PARAMETER__INIT;
    heads.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    heads.int64_param = 2;
    Inference__ModelInferRequest__ParametersEntry e =
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT, *es = &e;
    e.key = "num_heads", e.value = &heads;
    rq.model_name = (char *)model;
    rq.n_inputs = 3, rq.inputs = ins, rq.n_raw_input_contents = 3, rq.raw_input_contents = raw;
    rq.n_parameters = 1, rq.parameters = &es;
    const size_t n = inference__model_infer_request__get_packed_size(&rq);
    *msg = malloc(n);
    return inference__model_infer_request__pack(&rq, *msg);
}

Test(grpc_routes, model_infer_answers_the_cores_numbers)
{
    float x[8], want[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)(i % 5) * 0.25f - 0.5f;
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = 2, p.S = 2, p.E = 4, p.kdim = 4, p.vdim = 4, p.H = 2;
    p.query = p.key = p.value = x;
    cr_assert_eq(att_forward(want, NULL, &p, NULL), ATT_OK);

    unsigned char *msg;
    size_t n = infer_request(&msg, x, "attention");
    struct grpc_route_response out = call("ModelInfer", msg, n, 0, 0);
    cr_assert_eq(out.code, GRPC_CODE_OK, "%s", out.message);
    size_t len;
    unsigned char *m = whole(&out, &len);
    Inference__ModelInferResponse *a = inference__model_infer_response__unpack(NULL, len, m);
    cr_assert(a && a->n_outputs >= 1 && a->n_raw_output_contents == a->n_outputs);
    cr_expect_str_eq(a->model_name, "attention");
    cr_expect_str_eq(a->outputs[0]->datatype, "FP32");
    cr_assert_eq(a->raw_output_contents[0].len, sizeof want);
    cr_expect_eq(memcmp(a->raw_output_contents[0].data, want, sizeof want), 0);
    inference__model_infer_response__free_unpacked(a, NULL);
    free(m);
    grpc_route_response_free(&out);

    /* past its deadline: nothing computed */
    out = call("ModelInfer", msg, n, 0, grpc_route_now() - 1);
    cr_expect_eq(out.code, GRPC_CODE_DEADLINE_EXCEEDED);
    grpc_route_response_free(&out);
    free(msg);

    /* an unknown model: the call's NOT_FOUND; on a stream, a message with it */
    n = infer_request(&msg, x, "nope");
    out = call("ModelInfer", msg, n, 0, 0);
    cr_expect_eq(out.code, GRPC_CODE_NOT_FOUND);
    cr_expect(out.message && strstr(out.message, "unknown model 'nope'"), "%s", out.message);
    grpc_route_response_free(&out);
    out = call("ModelStreamInfer", msg, n, 0, 0);
    cr_assert_eq(out.code, GRPC_CODE_OK);
    Inference__ModelStreamInferResponse *s =
        inference__model_stream_infer_response__unpack(NULL, out.len, out.body);
    cr_assert(s);
    cr_expect(strstr(s->error_message, "unknown model 'nope'"), "%s", s->error_message);
    inference__model_stream_infer_response__free_unpacked(s, NULL);
    grpc_route_response_free(&out);
    free(msg);
}
