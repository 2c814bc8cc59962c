/* http_shared.c -- see http_shared.h. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "tests/support/check.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/http_shared.h"

/* A request heavy enough to keep a worker busy for a while: L = S = 768,
 * E = 256, 4 heads, base64 input, weights requested. */
char *httpt_heavy_body(void)
{
    const int L = 768, E = 256;
    json_t *data = json_array();
    unsigned long long st = 5;
    for (int i = 0; i < L * E; i++)
        json_array_append_new(data, json_real(check_randf(&st)));
    json_t *t = json_pack("{s:[i,i],s:o}", "shape", L, E, "data", data);
    json_t *req = json_pack("{s:o,s:i,s:b}", "query", reform(t, 3), "num_heads", 4,
                            "need_weights", 1);
    json_decref(t);
    char *s = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return s;
}

void *httpt_heavy_run(void *arg)
{
    struct heavy *h = arg;
    struct http_reply a = post(h->port, h->body);
    h->status = a.status;
    h->retry_after = strstr(a.headers, "Retry-After: ") != NULL;
    if (a.status == 503) {
        json_t *j = json_loadb(a.body, a.len, 0, NULL);
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        h->valid_error = code && strcmp(code, "overloaded") == 0;
        json_decref(j);
    }
    free(a.body);
    return NULL;
}

double httpt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Send len bytes (NULs allowed) on a fresh loopback connection to family's
 * loopback address, then read until the server closes or wait_s pass. */
void httpt_proto_send_af(int family, int port, const char *req, size_t len, double wait_s,
                   struct reply *r)
{
    int fd = socket(family, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
    inet_pton(AF_INET6, "::1", &a6.sin6_addr);
    int rc = family == AF_INET ? connect(fd, (struct sockaddr *)&a4, sizeof a4)
                               : connect(fd, (struct sockaddr *)&a6, sizeof a6);
    cr_assert_eq(rc, 0, "connect to port %d failed", port);
    cr_assert_eq(write(fd, req, len), (ssize_t)len);
    r->len = 0, r->closed = 0;
    double t0 = httpt_now_s(), end = t0 + wait_s;
    for (double t = t0; t < end && r->len < sizeof r->buf - 1; t = httpt_now_s()) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)((end - t) * 1000) + 1) <= 0)
            continue;
        ssize_t n = read(fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
        if (n <= 0) {
            r->closed = 1;
            break;
        }
        r->len += (size_t)n;
    }
    r->secs = httpt_now_s() - t0;
    r->buf[r->len] = '\0';
    close(fd);
}
