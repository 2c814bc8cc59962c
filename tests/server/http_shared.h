/* http_shared.h -- what the test_http_*.c files share: a request heavy
 * enough to keep a worker busy, and raw loopback exchanges. */
#ifndef TESTS_HTTP_SHARED_H
#define TESTS_HTTP_SHARED_H

#include <stddef.h>

/* A request heavy enough to keep a worker busy for a while: L = S = 768,
 * E = 256, 4 heads, base64 input, weights requested. */
char *httpt_heavy_body(void);

struct heavy {
    int port;
    const char *body;
    long status;
    int retry_after;
    int valid_error;
};

void *httpt_heavy_run(void *arg);

struct reply {
    char buf[16384];
    size_t len;
    int closed;  /* the server closed the connection */
    double secs; /* until the close, or the wait */
};

double httpt_now_s(void);

/* Send len bytes (NULs allowed) on a fresh loopback connection to family's
 * loopback address, then read until the server closes or wait_s pass. */
void httpt_proto_send_af(int family, int port, const char *req, size_t len, double wait_s,
                   struct reply *r);

#endif
