/* grpc_routes.c -- THE table of the gRPC methods, and their handlers; see
 * grpc_routes.h, and grpc/grpc_route.h for the columns.
 *
 * The handlers are thin: a request message becomes what the HTTP side
 * reads (codec/oip.h), the HTTP side's handler answers (api/service.c,
 * api/v2.c), and its answer becomes the method's message. So the two
 * protocols cannot disagree on a model, a number or a message.
 */
#include "api/grpc_routes.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/metrics.h"
#include "api/routes.h"
#include "api/service.h"
#include "api/v2.h"
#include "codec/oip.h"
#include "codec/stream.h"
#include "lib/errors.h"

/* Set once by grpc_routes_init(), before the server starts. */
static struct codec_limits limits;

#define SEQUENCE_ID "x-sequence-id" /* X-Sequence-Id as metadata (docs/sequences.md) */

int grpc_routes_code_of_error(int e)
{
    switch (e) {
    case ERR_NOT_FOUND:
    case ERR_SEQUENCE_NOT_FOUND:
        return GRPC_CODE_NOT_FOUND;
    case ERR_PAYLOAD_TOO_LARGE:
    case ERR_OVERLOADED:
        return GRPC_CODE_RESOURCE_EXHAUSTED;
    case ERR_MODEL_NOT_READY:
    case ERR_SHUTTING_DOWN:
        return GRPC_CODE_UNAVAILABLE;
    default:
        return e >= 0 && e < ERR_COUNT ? grpc_routes_code_of_status(http_error_status(e))
                                       : GRPC_CODE_INTERNAL;
    }
}

int grpc_routes_code_of_status(int status)
{
    switch (status) {
    case 200:
        return GRPC_CODE_OK;
    case 400:
        return GRPC_CODE_INVALID_ARGUMENT;
    case 401:
        return GRPC_CODE_UNAUTHENTICATED;
    case 403:
        return GRPC_CODE_PERMISSION_DENIED;
    case 404:
        return GRPC_CODE_NOT_FOUND;
    case 408:
        return GRPC_CODE_DEADLINE_EXCEEDED;
    case 413:
        return GRPC_CODE_RESOURCE_EXHAUSTED;
    case 501:
        return GRPC_CODE_UNIMPLEMENTED;
    case 503:
        return GRPC_CODE_UNAVAILABLE;
    default:
        return GRPC_CODE_INTERNAL;
    }
}

/* The JSON of HTTP's answer a (NULL when it has no body). */
static json_t *json_of(const struct route_response *a)
{
    return a->body && a->len ? json_loadb(a->body, a->len, 0, NULL) : NULL;
}

/* out becomes the error of a non-200 HTTP answer a: its code by a's status,
 * its text the {"error": msg} of a's body. */
static void fail_http(struct grpc_route_response *out, const struct route_response *a)
{
    json_t *o = json_of(a);
    const char *msg = json_string_value(json_object_get(o, "error"));
    grpc_route_fail(out, grpc_routes_code_of_status(a->status), "%s",
                    msg ? msg : "internal error");
    json_decref(o);
}

/* out becomes message m made of j (taken); INTERNAL when it cannot be. */
static void answer_json(struct grpc_route_response *out, enum oip_message m, json_t *j)
{
    struct failure e;
    if (!j)
        grpc_route_fail(out, GRPC_CODE_INTERNAL, "out of memory");
    else if (oip_json_encode(m, j, &out->body, &out->len, &e))
        grpc_route_fail(out, GRPC_CODE_INTERNAL, "%s", e.msg);
    else
        out->code = GRPC_CODE_OK;
    json_decref(j);
}

/* A v2 GET route's answer as message m: wrap names the field the JSON
 * goes in ({"config": ...}), or NULL for the JSON as it is. */
static void get_as(struct grpc_route_response *out, const struct v2_route *rt,
                   const struct v2_server_state *st, enum oip_message m, const char *wrap)
{
    struct route_response a;
    v2_handle_get(rt, st, &a);
    if (a.status != 200)
        fail_http(out, &a);
    else {
        json_t *j = json_of(&a);
        answer_json(out, m, wrap ? json_pack("{s:o}", wrap, j) : j);
    }
    route_response_free(&a);
}

/* The name and version of a model request, into rt; 0, or -1 with out
 * failed. */
static int model_of(const struct grpc_route_request *rq, struct grpc_route_response *out,
                    struct v2_route *rt, enum v2_kind kind)
{
    struct failure e;
    memset(rt, 0, sizeof *rt);
    rt->kind = kind;
    if (oip_name_version(rq->msg, rq->len, rt->model, sizeof rt->model, rt->version,
                         sizeof rt->version, &e) == 0)
        return 0;
    grpc_route_fail(out, grpc_routes_code_of_error(e.code), "%s", e.msg);
    return -1;
}

/* ---------------------------------------------------------------------- */
/* Health, metadata, configuration, statistics                             */

/* live and ready: {"live"|"ready": whether HTTP's answer is 200}. */
static void health(const struct grpc_route_request *rq, struct grpc_route_response *out,
                   enum v2_kind kind, enum oip_message m, const char *field)
{
    const struct v2_route rt = {.kind = kind};
    const struct v2_server_state st = {rq->state.draining};
    struct route_response a;
    v2_handle_get(&rt, &st, &a);
    answer_json(out, m, json_pack("{s:b}", field, a.status == 200));
    route_response_free(&a);
}

static void server_live(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    health(rq, out, V2_LIVE, OIP_SERVER_LIVE_RESPONSE, "live");
}

static void server_ready(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    health(rq, out, V2_READY, OIP_SERVER_READY_RESPONSE, "ready");
}

/* A model not ready is {"ready": false}; an unknown one NOT_FOUND. */
static void model_ready(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    struct v2_route rt;
    if (model_of(rq, out, &rt, V2_MODEL_READY))
        return;
    const struct v2_server_state st = {rq->state.draining};
    struct route_response a;
    v2_handle_get(&rt, &st, &a);
    if (a.status == 200 || a.status == 503)
        answer_json(out, OIP_MODEL_READY_RESPONSE, json_pack("{s:b}", "ready", a.status == 200));
    else
        fail_http(out, &a);
    route_response_free(&a);
}

static void server_metadata(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    const struct v2_route rt = {.kind = V2_SERVER};
    const struct v2_server_state st = {rq->state.draining};
    get_as(out, &rt, &st, OIP_SERVER_METADATA_RESPONSE, NULL);
}

static void model_metadata(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    struct v2_route rt;
    const struct v2_server_state st = {rq->state.draining};
    if (model_of(rq, out, &rt, V2_MODEL) == 0)
        get_as(out, &rt, &st, OIP_MODEL_METADATA_RESPONSE, NULL);
}

static void model_config(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    struct v2_route rt;
    const struct v2_server_state st = {rq->state.draining};
    if (model_of(rq, out, &rt, V2_MODEL_CONFIG) == 0)
        get_as(out, &rt, &st, OIP_MODEL_CONFIG_RESPONSE, "config");
}

/* An empty name: every model's statistics (GET /v2/models/stats). */
static void model_statistics(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    struct v2_route rt;
    const struct v2_server_state st = {rq->state.draining};
    if (model_of(rq, out, &rt, V2_MODEL_STATS) == 0) {
        if (!rt.model[0])
            rt.kind = V2_ALL_STATS;
        get_as(out, &rt, &st, OIP_MODEL_STATISTICS_RESPONSE, NULL);
    }
}

/* ---------------------------------------------------------------------- */
/* The model repository (GRPC_ROUTE_ADMIN: the transport checks the token) */

/* HTTP's repository route on body (taken), as message m. */
static void repository(struct grpc_route_response *out, const struct v2_route *rt, char *body,
                       size_t len, enum oip_message m)
{
    struct route_response a;
    v2_handle_repository(rt, body, len, &a);
    free(body);
    if (a.status != 200)
        fail_http(out, &a);
    else if (rt->kind == V2_REPO_INDEX)
        answer_json(out, m, json_pack("{s:o}", "models", json_of(&a)));
    else
        answer_json(out, m, json_object()); /* an empty message */
    route_response_free(&a);
}

static void repository_index(const struct grpc_route_request *rq,
                             struct grpc_route_response *out)
{
    struct failure e;
    int ready = 0;
    if (oip_repository_index(rq->msg, rq->len, &ready, &e)) {
        grpc_route_fail(out, grpc_routes_code_of_error(e.code), "%s", e.msg);
        return;
    }
    const struct v2_route rt = {.kind = V2_REPO_INDEX};
    char *body = strdup(ready ? "{\"ready\":true}" : "{}");
    if (!body)
        grpc_route_fail(out, GRPC_CODE_INTERNAL, "out of memory");
    else
        repository(out, &rt, body, strlen(body), OIP_REPOSITORY_INDEX_RESPONSE);
}

static void repository_model(const struct grpc_route_request *rq, struct grpc_route_response *out,
                             enum v2_kind kind, enum oip_message m)
{
    struct v2_route rt = {.kind = kind};
    struct failure e;
    char *body = NULL;
    size_t len = 0;
    if (oip_repository_model(rq->msg, rq->len, rt.model, sizeof rt.model, &body, &len, &e)) {
        free(body);
        grpc_route_fail(out, grpc_routes_code_of_error(e.code), "%s", e.msg);
        return;
    }
    repository(out, &rt, body, len, m);
}

static void repository_load(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    repository_model(rq, out, V2_REPO_LOAD, OIP_REPOSITORY_MODEL_LOAD_RESPONSE);
}

static void repository_unload(const struct grpc_route_request *rq,
                              struct grpc_route_response *out)
{
    repository_model(rq, out, V2_REPO_UNLOAD, OIP_REPOSITORY_MODEL_UNLOAD_RESPONSE);
}

/* ---------------------------------------------------------------------- */
/* Inference                                                               */

/* An answer's tails: the stream its outputs' bytes are in, the message
 * around them, and the sequence's hold until it is sent. */
struct answer {
    struct stream *st;
    struct oip_answer a;
    void (*done)(void *cls);
    void *done_cls;
};

static void answer_free(void *cls)
{
    struct answer *an = cls;
    oip_answer_deinit(&an->a);
    stream_free(an->st);
    if (an->done)
        an->done(an->done_cls);
    free(an);
}

/* A failed request: the call's error, or on a stream a message carrying it
 * (the stream goes on). */
static void infer_fail(struct grpc_route_response *out, int stream, int code, const char *msg)
{
    if (!stream) {
        grpc_route_fail(out, code, "%s", msg);
        return;
    }
    out->code = GRPC_CODE_OK;
    if (oip_stream_error(msg, &out->body, &out->len))
        grpc_route_fail(out, GRPC_CODE_INTERNAL, "out of memory");
}

/* The request's body, freed as soon as the service has decoded it. */
static void release_body(void *cls)
{
    struct oip_infer *in = cls;
    free(in->body);
    in->body = NULL, in->len = 0;
}

/* The call has ended (cancelled, its deadline passed, the drain cut it). */
static int call_over(const struct grpc_route_request *rq)
{
    return (rq->cancelled && *rq->cancelled) ||
           (rq->deadline > 0 && grpc_route_now() > rq->deadline);
}

/* One ModelInferRequest: decoded as v2's HTTP body, answered by the same
 * service, its answer a ModelInferResponse (stream: a
 * ModelStreamInferResponse). */
static void infer(const struct grpc_route_request *rq, struct grpc_route_response *out,
                  int stream)
{
    if (call_over(rq)) { /* nothing computed: the answer would go nowhere */
        grpc_route_fail(out, GRPC_CODE_DEADLINE_EXCEEDED, "the call's deadline passed");
        return;
    }
    struct oip_infer in;
    struct failure e;
    memset(&in, 0, sizeof in);
    if (oip_infer_decode(&in, rq->msg, rq->len, &e)) {
        oip_infer_deinit(&in);
        infer_fail(out, stream, grpc_routes_code_of_error(e.code), e.msg);
        return;
    }
    const struct service_times t = { /* a stream's message: from its arrival, not the stream's */
        .first_byte = stream ? rq->t_msg : rq->t_first, .body_done = rq->t_msg,
        .sequence_id = rq->metadata ? rq->metadata(rq, SEQUENCE_ID) : NULL,
        .cancelled = rq->cancelled, .deadline = rq->deadline,
    };
    struct service_result res;
    const int rc = service_infer_run(&limits, in.model, in.version[0] ? in.version : NULL,
                                     in.body, in.len, in.header_len, &t, release_body, &in,
                                     &res);
    oip_infer_deinit(&in);
    if (rc) {
        const int code = grpc_routes_code_of_error(res.e.code);
        if (code == GRPC_CODE_DEADLINE_EXCEEDED) /* the call is over, stream or not */
            grpc_route_fail(out, code, "%s", res.e.msg);
        else
            infer_fail(out, stream, code, res.e.msg);
        return;
    }
    struct answer *an = calloc(1, sizeof *an);
    if (!an || oip_answer_encode(&an->a, res.st, stream, &e)) {
        if (an)
            oip_answer_deinit(&an->a);
        free(an);
        stream_free(res.st);
        if (res.done)
            res.done(res.done_cls);
        infer_fail(out, stream, GRPC_CODE_INTERNAL, an ? e.msg : "out of memory");
        return;
    }
    an->st = res.st, an->done = res.done, an->done_cls = res.done_cls;
    out->code = GRPC_CODE_OK;
    out->body = an->a.body, out->len = an->a.len; /* the transport's to free */
    an->a.body = NULL, an->a.len = 0;
    for (int i = 0; i < an->a.ntail && i < GRPC_ROUTE_TAILS; i++)
        out->tail[i] = (struct grpc_route_tail){an->a.tail[i].data, an->a.tail[i].len};
    out->ntail = an->a.ntail < GRPC_ROUTE_TAILS ? an->a.ntail : GRPC_ROUTE_TAILS;
    out->free_tails = answer_free, out->tails_cls = an;
}

static void model_infer(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    infer(rq, out, 0);
}

static void model_stream_infer(const struct grpc_route_request *rq,
                               struct grpc_route_response *out)
{
    infer(rq, out, 1);
}

/* ---------------------------------------------------------------------- */
/* The table                                                               */

_Static_assert(2 * STREAM_MAX_PIECES <= GRPC_ROUTE_TAILS, "an answer's tails fit a response");

/* Each finished call or stream message, counted as gRPC's. */
static void record(const char *metric, int code, double seconds)
{
    metrics_record_grpc(metric, code, grpc_route_code_name(code), seconds);
}

#define POOL GRPC_ROUTE_POOL
#define ADMIN GRPC_ROUTE_ADMIN
#define STREAM GRPC_ROUTE_STREAM
#define SERVICE "/inference.GRPCInferenceService/"

/* The metric labels are HTTP's for the same endpoints (api/routes.c): the
 * protocol label tells them apart. The repository index is ADMIN as HTTP's
 * POST /v2/repository/index is. */
static const struct grpc_route rows[] = {
    /* path                              flags          metric           handler */
    {SERVICE "ServerLive",               0,             "v2",            server_live},
    {SERVICE "ServerReady",              0,             "v2",            server_ready},
    {SERVICE "ModelReady",               0,             "v2",            model_ready},
    {SERVICE "ServerMetadata",           0,             "v2",            server_metadata},
    {SERVICE "ModelMetadata",            0,             "v2",            model_metadata},
    {SERVICE "ModelInfer",               POOL,          "v2_infer",      model_infer},
    {SERVICE "ModelStreamInfer",         POOL | STREAM, "v2_infer",      model_stream_infer},
    {SERVICE "ModelConfig",              0,             "v2",            model_config},
    {SERVICE "ModelStatistics",          0,             "v2",            model_statistics},
    {SERVICE "RepositoryIndex",          ADMIN,         "v2_repository", repository_index},
    {SERVICE "RepositoryModelLoad",      POOL | ADMIN,  "v2_repository", repository_load},
    {SERVICE "RepositoryModelUnload",    POOL | ADMIN,  "v2_repository", repository_unload},
};

static const struct grpc_route_table table = {
    rows, sizeof rows / sizeof rows[0], ROUTES_ADMIN_OFF, record,
};

const struct grpc_route_table *grpc_routes_init(const struct cfg *c)
{
    limits = service_limits(c);
    for (size_t i = 0; i < table.count; i++)
        metrics_endpoint_add(rows[i].metric);
    return &table;
}
