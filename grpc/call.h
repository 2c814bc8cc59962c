/* call.h -- one call's life on the completion queue's thread (and a
 * worker's, for its job): see call.c. */
#ifndef GRPC_CALL_H
#define GRPC_CALL_H

#include "grpc/state.h"

/* Keep one more request_call slot armed (none once draining). */
void call_arm(struct grpc_transport *s);

/* A completion of the queue: t's call moves on (ok: the op succeeded). */
void call_event(struct gtag *t, int ok);

#endif
