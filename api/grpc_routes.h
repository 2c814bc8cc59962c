/* grpc_routes.h -- the Open Inference Protocol's gRPC service
 * (inference.GRPCInferenceService, proto/grpc_service.proto) as one table
 * the gRPC transport serves (grpc/grpc_route.h says what each column
 * means), beside HTTP's (api/routes.h).
 *
 * Every method answers what its HTTP endpoint answers, through the same
 * handlers: ModelInfer and each message of ModelStreamInfer go through
 * service_infer_run() (api/service.h) as v2's infer body (codec/oip.h
 * transcodes), the others through v2_handle_get() and
 * v2_handle_repository() (api/v2.h), their JSON made the method's
 * message. An error's status text is the HTTP answer's {"error": msg}, its
 * code the gRPC code of the HTTP error. Calls are counted in the metrics
 * with protocol "grpc" (api/metrics.h).
 *
 *     const struct route_table *t = routes_init(&cfg, pool);
 *     const struct grpc_route_table *g = grpc_routes_init(&cfg);
 *     struct grpc_server *s = grpc_start(&options, g, pool, ...);
 */
#ifndef API_GRPC_ROUTES_H
#define API_GRPC_ROUTES_H

#include "config/config.h"
#include "grpc/grpc_route.h"

/* The table, its handlers set up for c (the request limits; borrowed:
 * must outlive the server). Call once, after routes_init() (which starts
 * the sequences' store both tables step). Declares the metric labels. */
const struct grpc_route_table *grpc_routes_init(const struct cfg *c);

/* The gRPC code of an error of lib/errors.h (enum http_error), and of an
 * HTTP status. */
int grpc_routes_code_of_error(int http_error);
int grpc_routes_code_of_status(int http_status);

#endif
