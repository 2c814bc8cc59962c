/* routes.c -- THE table of the service's endpoints, and their handlers;
 * see routes.h, and http/route.h for the columns.
 *
 * The handlers are thin: the work is in api/service.c (POST /attention,
 * infer), api/v2.c (the other Open Inference Protocol endpoints),
 * api/metrics.c and api/files.c. The two error styles are
 * service_error ({"error": {"code", "message"}}) and service_v2_error
 * ({"error": msg}, under /v2).
 */
#include "api/routes.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api/files.h"
#include "api/metrics.h"
#include "api/service.h"
#include "api/sequence_store.h"
#include "api/v2.h"
#include "lib/errors.h"
#include "model/repo.h"

/* openapi.yaml, linked into the binary (api/embed.S). */
extern const char openapi_yaml[], openapi_yaml_end[];

/* Set once by routes_init(), before the server starts. */
static struct codec_limits limits;
static struct pool *workers;

/* The protocols' own headers, which their rows declare (http/route.h:
 * reads, sends) and the transport learns from the table. */
#define SEQUENCE_ID "X-Sequence-Id"                        /* docs/sequences.md */
#define HEADER_LEN "Inference-Header-Content-Length"       /* v2's binary body */
/* Inference-Header-Content-Length above this is refused (Triton parses it
 * as an int32). */
#define MAX_HEADER_LEN 2147483647LL

/* A body without a Content-Type of its own is JSON (an empty 200 has none). */
static void json_default(struct route_response *out)
{
    if (!out->content_type && (out->len || out->status != 200))
        out->content_type = "application/json";
}

/* out becomes a copy of text (len bytes) with status and ctype. */
static void copy(struct route_response *out, int status, const char *text, size_t len,
                 const char *ctype)
{
    out->body = malloc(len ? len : 1);
    if (!out->body)
        return; /* the transport answers 500 */
    memcpy(out->body, text, len);
    out->status = status, out->len = len, out->content_type = ctype;
}

/* ---------------------------------------------------------------------- */
/* POST /attention                                                         */

static int is_json_type(const char *ct)
{
    if (!ct)
        return 0;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static int attention_check(const struct route_request *rq, char *msg, size_t msglen)
{
    const char *ct = rq->header(rq, "Content-Type");
    if (!is_json_type(ct)) {
        snprintf(msg, msglen, "Content-Type must be application/json, not '%.60s'",
                 ct ? ct : "(none)");
        return ERR_UNSUPPORTED_MEDIA_TYPE;
    }
    return -1;
}

static void attention(const struct route_request *rq, struct route_response *out)
{
    const struct service_times t = {.first_byte = rq->t_first, .body_done = rq->t_body,
                                    .sequence_id = rq->header(rq, SEQUENCE_ID)};
    service_attention(&limits, rq->body, rq->len, &t, rq->release_body, rq->transport, out);
    json_default(out);
}

/* ---------------------------------------------------------------------- */
/* Probes, metrics, the spec, the web client's files                       */

static void healthz(const struct route_request *rq, struct route_response *out)
{
    (void)rq;
    copy(out, 200, "{\"status\":\"ok\"}", 15, "application/json");
}

static void readyz(const struct route_request *rq, struct route_response *out)
{
    if (rq->state.draining)
        route_fail(rq, out, ERR_SHUTTING_DOWN, "draining: not ready for new requests");
    else if (!repo_loading_done())
        route_fail(rq, out, ERR_MODEL_NOT_READY, "models are still loading");
    else
        copy(out, 200, "{\"status\":\"ready\"}", 18, "application/json");
}

static void metrics(const struct route_request *rq, struct route_response *out)
{
    struct pool_stats ps;
    size_t len;
    pool_get_stats(workers, &ps);
    const struct metrics_gauges g = {ps.queued, ps.busy, ps.workers, rq->state.draining,
                                     rq->state.inflight_bytes, rq->state.answer_bytes,
                                     rq->state.connections_open};
    char *text = metrics_write(&g, &len);
    if (!text) {
        route_fail(rq, out, ERR_INTERNAL, "out of memory writing metrics");
        return;
    }
    out->status = 200, out->body = text, out->len = len;
    out->content_type = "text/plain; version=0.0.4";
}

static void openapi(const struct route_request *rq, struct route_response *out)
{
    (void)rq;
    copy(out, 200, openapi_yaml, (size_t)(openapi_yaml_end - openapi_yaml), "application/yaml");
}

/* A static file, sent from its descriptor (sendfile where the kernel can). */
static void file(const struct route_request *rq, struct route_response *out)
{
    const char *type;
    long long size = 0;
    const int fd = files_open(rq->path, &type, &size);
    if (fd < 0) {
        route_fail(rq, out, ERR_NOT_FOUND, "no endpoint or file at %.120s", rq->path);
        return;
    }
    if (size > FILES_MAX_BYTES) {
        close(fd);
        route_fail(rq, out, ERR_PAYLOAD_TOO_LARGE, "%.100s is %lld bytes; static files are "
                   "served up to %d bytes", rq->path, size, FILES_MAX_BYTES);
        return;
    }
    out->status = 200, out->content_type = type;
    out->fd = fd, out->has_fd = 1, out->len = (size_t)size;
}

/* ---------------------------------------------------------------------- */
/* The Open Inference Protocol (api/v2.h)                                  */

/* The request's {model_name} and {version} as api/v2.c takes them. */
static struct v2_route v2_of(const struct route_request *rq, enum v2_kind kind)
{
    struct v2_route rt = {.kind = kind};
    snprintf(rt.model, sizeof rt.model, "%s", route_param(rq, "model_name"));
    snprintf(rt.version, sizeof rt.version, "%s", route_param(rq, "version"));
    return rt;
}

static void v2_get(const struct route_request *rq, struct route_response *out,
                   enum v2_kind kind)
{
    const struct v2_route rt = v2_of(rq, kind);
    const struct v2_server_state st = {rq->state.draining};
    v2_handle_get(&rt, &st, out);
    json_default(out);
}

static void v2_post(const struct route_request *rq, struct route_response *out,
                    enum v2_kind kind)
{
    const struct v2_route rt = v2_of(rq, kind);
    v2_handle_repository(&rt, rq->body, rq->len, out);
    json_default(out);
}

/* One handler per endpoint, each naming its kind for api/v2.c. */
#define V2_HANDLER(name, how, kind)                                                  \
    static void name(const struct route_request *rq, struct route_response *out)   \
    {                                                                                \
        how(rq, out, kind);                                                          \
    }
V2_HANDLER(v2_server, v2_get, V2_SERVER)
V2_HANDLER(v2_live, v2_get, V2_LIVE)
V2_HANDLER(v2_ready, v2_get, V2_READY)
V2_HANDLER(v2_models, v2_get, V2_MODELS)
V2_HANDLER(v2_all_stats, v2_get, V2_ALL_STATS)
V2_HANDLER(v2_model, v2_get, V2_MODEL)
V2_HANDLER(v2_model_ready, v2_get, V2_MODEL_READY)
V2_HANDLER(v2_model_config, v2_get, V2_MODEL_CONFIG)
V2_HANDLER(v2_model_config_json, v2_get, V2_MODEL_CONFIG_JSON)
V2_HANDLER(v2_model_stats, v2_get, V2_MODEL_STATS)
V2_HANDLER(v2_repo_index, v2_post, V2_REPO_INDEX)
V2_HANDLER(v2_repo_load, v2_post, V2_REPO_LOAD)
V2_HANDLER(v2_repo_unload, v2_post, V2_REPO_UNLOAD)

/* Inference-Header-Content-Length: absent (-1) or a decimal within range. */
static int infer_header_len(const struct route_request *rq, long long *len, char *msg,
                            size_t msglen)
{
    *len = -1;
    const char *h = rq->header(rq, HEADER_LEN);
    if (!h)
        return -1;
    long long v = 0;
    const char *p = h;
    while (*p == ' ')
        p++;
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if ((v = v * 10 + (*p - '0')) > MAX_HEADER_LEN)
            break;
    while (*p == ' ')
        p++;
    if (!digits || *p || v > MAX_HEADER_LEN) {
        snprintf(msg, msglen, "Unable to parse " HEADER_LEN " '%.40s': it "
                 "must be a decimal number of bytes from 0 to %lld", h, MAX_HEADER_LEN);
        return ERR_BAD_REQUEST;
    }
    *len = v;
    return -1;
}

static int v2_infer_check(const struct route_request *rq, char *msg, size_t msglen)
{
    long long len;
    return infer_header_len(rq, &len, msg, msglen);
}

static void v2_infer(const struct route_request *rq, struct route_response *out)
{
    long long header_len;
    char msg[200];
    infer_header_len(rq, &header_len, msg, sizeof msg); /* checked: v2_infer_check */
    if (header_len > (long long)rq->len) {
        snprintf(msg, 160, HEADER_LEN " is %lld but the body has only %zu "
                 "bytes", header_len, rq->len);
        rq->release_body(rq->transport);
        service_v2_error(out, ERR_BAD_REQUEST, msg);
        return;
    }
    const struct service_times t = {.first_byte = rq->t_first, .body_done = rq->t_body,
                                    .sequence_id = rq->header(rq, SEQUENCE_ID)};
    const char *version = route_param(rq, "version");
    service_infer(&limits, route_param(rq, "model_name"), version[0] ? version : NULL, rq->body,
                  rq->len, header_len, &t, rq->release_body, rq->transport, out);
    json_default(out);
}

static int v2_missing(const struct route_request *rq, char *msg, size_t msglen)
{
    snprintf(msg, msglen, "no endpoint at %.120s", rq->path);
    return ERR_NOT_FOUND;
}

/* ---------------------------------------------------------------------- */
/* The table                                                               */

#define GET ROUTE_GET
#define POST ROUTE_POST
#define BODY ROUTE_BODY
#define ADMIN ROUTE_ADMIN
#define CORS ROUTE_CORS
#define V1 service_error
#define V2 service_v2_error
/* The headers the handlers below read and send besides HTTP's own
 * (service.c sets Server-Timing, and Retry-After on a sequence's 503) */
#define ATTENTION_READS SEQUENCE_ID
#define INFER_READS HEADER_LEN ", " SEQUENCE_ID
#define ATTENTION_SENDS "Server-Timing, Retry-After"
#define INFER_SENDS "Server-Timing, Retry-After, " HEADER_LEN
/* /v2/models/{model_name}, or a version of it */
#define MODEL "/v2/models/{model_name}[/versions/{version:31}]"

/* The first row that matches a path serves it; the last matches them all:
 * the web client's files, which also answers 404 for a path that names
 * nothing. The model repository (ADMIN) is not for web pages: no CORS
 * there. */
static const struct route rows[] = {
    /* methods path                     flags         error metric  handler  check  exists  reads  sends */
    {POST, "/attention",                BODY | CORS,  V1, "attention", attention, attention_check, NULL, ATTENTION_READS, ATTENTION_SENDS},
    {GET,  "/healthz",                  CORS,         V1, "healthz", healthz, NULL, NULL, NULL, NULL},
    {GET,  "/readyz",                   CORS,         V1, "readyz", readyz, NULL, NULL, NULL, NULL},
    {GET,  "/metrics",                  CORS,         V1, "metrics", metrics, NULL, NULL, NULL, NULL},
    {GET,  "/openapi.yaml",             CORS,         V1, "openapi", openapi, NULL, NULL, NULL, NULL},
    {GET,  "/v2",                       CORS,         V2, "v2", v2_server, NULL, NULL, NULL, NULL},
    {GET,  "/v2/health/live",           CORS,         V2, "v2", v2_live, NULL, NULL, NULL, NULL},
    {GET,  "/v2/health/ready",          CORS,         V2, "v2", v2_ready, NULL, NULL, NULL, NULL},
    {GET,  "/v2/models",                CORS,         V2, "v2", v2_models, NULL, NULL, NULL, NULL},
    {GET,  "/v2/models/stats",          CORS,         V2, "v2", v2_all_stats, NULL, NULL, NULL, NULL},
    {GET,  MODEL,                       CORS,         V2, "v2", v2_model, NULL, NULL, NULL, NULL},
    {GET,  MODEL "/ready",              CORS,         V2, "v2", v2_model_ready, NULL, NULL, NULL, NULL},
    {GET,  MODEL "/config",             CORS,         V2, "v2", v2_model_config, NULL, NULL, NULL, NULL},
    {GET,  MODEL "/config.json",        CORS,         V2, "v2", v2_model_config_json, NULL, NULL, NULL, NULL},
    {GET,  MODEL "/stats",              CORS,         V2, "v2", v2_model_stats, NULL, NULL, NULL, NULL},
    {POST, MODEL "/infer",              BODY | CORS,  V2, "v2_infer", v2_infer, v2_infer_check, NULL, INFER_READS, INFER_SENDS},
    {POST, "/v2/repository/index",      BODY | ADMIN, V2, "v2_repository", v2_repo_index, NULL, NULL, NULL, NULL},
    {POST, "/v2/repository/models/{model_name}/load",   BODY | ADMIN, V2, "v2_repository", v2_repo_load, NULL, NULL, NULL, NULL},
    {POST, "/v2/repository/models/{model_name}/unload", BODY | ADMIN, V2, "v2_repository", v2_repo_unload, NULL, NULL, NULL, NULL},
    {0,    "/v2/repository*",           0,            V2, NULL, NULL, v2_missing, NULL, NULL, NULL},
    {0,    "/v2[/*]",                   CORS,         V2, NULL, NULL, v2_missing, NULL, NULL, NULL},
    {GET,  "*",                         CORS,         V1, "static", file, NULL, files_exist, NULL, NULL},
};

static const struct route_table table = {
    rows, sizeof rows / sizeof rows[0], ROUTES_ADMIN_OFF, metrics_record,
};

const struct route_table *routes_init(const struct cfg *c, struct pool *pool)
{
    limits = service_limits(c);
    const struct seq_limits sl = seq_limits_of(c);
    seq_init(&sl);
    workers = pool;
    files_init(c->static_dir);
    for (size_t i = 0; i < table.count; i++)
        metrics_endpoint_add(rows[i].metric ? rows[i].metric : METRICS_OTHER);
    return &table;
}

void routes_stop(void)
{
    seq_shutdown(); /* the sequences' caches: they do not outlive the server */
}
