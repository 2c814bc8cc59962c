/* v2.h -- the Open Inference Protocol (KServe v2) endpoints other than the
 * infer body itself (service_infer, api/service.h): the URL routes, and
 * the answers of server and model metadata, health, the model list, the
 * model configuration, statistics and the model repository extension. No
 * libmicrohttpd: the route table (api/routes.c) names the endpoint, the
 * transport sends what these fill in. Every non-2xx answer is {"error": msg}.
 */
#ifndef API_V2_H
#define API_V2_H

#include <stddef.h>

#include "api/service.h"

enum v2_kind {
    V2_SERVER,            /* GET  /v2 */
    V2_LIVE,              /* GET  /v2/health/live */
    V2_READY,             /* GET  /v2/health/ready */
    V2_MODELS,            /* GET  /v2/models */
    V2_ALL_STATS,         /* GET  /v2/models/stats */
    V2_MODEL,             /* GET  /v2/models/{m}[/versions/{v}] */
    V2_MODEL_READY,       /* GET  .../ready */
    V2_MODEL_CONFIG,      /* GET  .../config: Triton's model configuration */
    V2_MODEL_CONFIG_JSON, /* GET  .../config.json: the model's own file */
    V2_MODEL_STATS,       /* GET  .../stats */
    V2_INFER,             /* POST .../infer */
    V2_REPO_INDEX,        /* POST /v2/repository/index */
    V2_REPO_LOAD,         /* POST /v2/repository/models/{m}/load */
    V2_REPO_UNLOAD,       /* POST /v2/repository/models/{m}/unload */
};

struct v2_route {
    enum v2_kind kind;
    char model[128];
    char version[32]; /* "" when the URL has none */
};

/* What the server's state is, for health and metadata. */
struct v2_server_state {
    int draining;
};

/* The answer of a GET route (a buffer, in a). */
void v2_handle_get(const struct v2_route *rt, const struct v2_server_state *s,
                   struct route_response *a);

/* The answer of a repository route (index, load, unload), on a worker: a
 * load reads the model's files and an unload waits for its requests. */
void v2_handle_repository(const struct v2_route *rt, const char *body, size_t len,
                          struct route_response *a);

#endif
