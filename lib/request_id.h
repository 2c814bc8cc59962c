/* request_id.h -- the id of a request in the access log and its answer,
 * one rule for both transports (http/, grpc/): the client's own
 * (X-Request-Id, or gRPC's x-request-id metadata) when it is 1..64
 * characters of [A-Za-z0-9._:-], which go into a header and a log line
 * unescaped; else 128 random bits as 32 hex digits. */
#ifndef LIB_REQUEST_ID_H
#define LIB_REQUEST_ID_H

/* The bytes an id takes, its terminating NUL included. */
#define REQUEST_ID_BYTES 65

/* out: the client's id (NULL: none) if it is sane, else a new one. Any
 * thread. */
void request_id_of(char out[REQUEST_ID_BYTES], const char *client);

#endif
