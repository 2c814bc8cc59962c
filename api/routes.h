/* routes.h -- every endpoint of the service, as one table the transport
 * serves (http/route.h says what each column means).
 *
 * The api/ layer (the rule: scripts/layers.sh) owns the endpoints: this
 * table and its handlers (service.c, v2.c, files.c), the models by name
 * (models.h, the only caller of the registry) and the metrics. It
 * includes api/, codec/, model/, core/, config/, lib/ and, of the
 * transport, only its interface (http/route.h).
 *
 *     const struct route_table *t = routes_init(&cfg, pool);
 *     struct http_server *s = http_start(&options, t, pool, ...);
 *     ... http_stop(s) ...
 *     routes_stop();
 *
 * Adding an endpoint is a row of api/routes.c plus its handler.
 */
#ifndef API_ROUTES_H
#define API_ROUTES_H

#include "config/config.h"
#include "http/route.h"
#include "lib/pool.h"

/* The table, its handlers set up for c (the request limits, static_dir;
 * borrowed: must outlive the server) and pool (for /metrics): the
 * sequences' store started with c's limits. Declares the metric labels
 * (api/metrics.h). Call once. */
const struct route_table *routes_init(const struct cfg *c, struct pool *pool);
/* The 403 message of the repository's endpoints while no admin token is
 * set (both protocols' tables). */
#define ROUTES_ADMIN_OFF \
    "the model repository endpoints are disabled: set admin_token to enable them"
/* After the server has stopped: every sequence and its cache freed. */
void routes_stop(void);

#endif
