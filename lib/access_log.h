/* access_log.h -- what both transports' (http/, grpc/) access log lines
 * share: a request's id, and a client's bytes made safe for the line.
 *
 * The id is the client's own (X-Request-Id, or gRPC's x-request-id
 * metadata) when it is 1..64 characters of [A-Za-z0-9._:-], which go into
 * a header and a log line unescaped; else 128 random bits as 32 hex
 * digits. */
#ifndef LIB_ACCESS_LOG_H
#define LIB_ACCESS_LOG_H

#include <stddef.h>

/* The bytes an id takes, its terminating NUL included. */
#define REQUEST_ID_BYTES 65

/* out: the client's id (NULL: none) if it is sane, else a new one. Any
 * thread. */
void request_id_of(char out[REQUEST_ID_BYTES], const char *client);

/* src into dst (n bytes, always terminated) with every byte outside
 * printable ASCII, the space and the backslash written as \xHH: a client
 * cannot forge a log line or a field. Returns dst. */
char *log_escape(char *dst, size_t n, const char *src);

#endif
