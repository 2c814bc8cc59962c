/* http_v2.c -- the HTTP side of the Open Inference Protocol endpoints:
 * routing under /v2, the header checks (method, the admin token of the
 * model repository extension, Inference-Header-Content-Length), and the
 * X-Request-Id every answer carries. Part of the HTTP front (http/http.c);
 * the answers themselves are api/v2.c and service_infer(). */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "http/http_internal.h"

/* Inference-Header-Content-Length above this is refused (Triton parses it
 * as an int32). */
#define MAX_HEADER_LEN 2147483647LL

int http_v2_route(struct req *r, const char *url, char *msg, size_t msglen)
{
    r->v2 = 1;
    if (v2_route(url, &r->rt) != 0) {
        r->ep = EP_OTHER;
        snprintf(msg, msglen, "no endpoint at %.120s", r->path);
        return ERR_NOT_FOUND;
    }
    r->ep = r->rt.kind == V2_INFER ? EP_V2_INFER : v2_route_has_body(&r->rt) ? EP_V2_REPO : EP_V2;
    return 0;
}

/* a and b equal, in time that depends on their lengths only. */
static int same_secret(const char *a, const char *b)
{
    const size_t n = strlen(a), m = strlen(b);
    unsigned char d = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i % (m ? m : 1)]);
    return d == 0;
}

static int check_token(struct req *r, char *msg, size_t msglen)
{
    const char *want = r->srv->cfg.admin_token;
    if (!want[0]) {
        snprintf(msg, msglen, "the model repository endpoints are disabled: set admin_token "
                 "to enable them");
        return ERR_FORBIDDEN;
    }
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        snprintf(msg, msglen, "this endpoint needs Authorization: Bearer <admin_token>");
        return ERR_UNAUTHORIZED;
    }
    h += 7;
    while (*h == ' ')
        h++;
    if (!same_secret(h, want)) {
        snprintf(msg, msglen, "the bearer token is not the admin_token");
        return ERR_FORBIDDEN;
    }
    return -1;
}

/* Inference-Header-Content-Length: absent (-1) or a decimal within range. */
static int header_length(struct req *r, char *msg, size_t msglen)
{
    r->header_len = -1;
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                "Inference-Header-Content-Length");
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
        snprintf(msg, msglen, "Unable to parse Inference-Header-Content-Length '%.40s': it "
                 "must be a decimal number of bytes from 0 to %lld", h, MAX_HEADER_LEN);
        return ERR_BAD_REQUEST;
    }
    r->header_len = v;
    return -1;
}

int http_v2_early_check(struct req *r, char *msg, size_t msglen)
{
    const char *want = v2_route_method(&r->rt);
    const int is_get = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
    if (strcmp(want, "GET") == 0 ? !is_get : strcmp(r->method, want) != 0) {
        snprintf(msg, msglen, "%s is not allowed on %.100s; use %s", r->method, r->path, want);
        return ERR_METHOD_NOT_ALLOWED;
    }
    if (r->ep == EP_V2_REPO)
        return check_token(r, msg, msglen);
    if (r->ep == EP_V2_INFER)
        return header_length(r, msg, msglen);
    return -1;
}

/* A client's id is kept if it is 1..64 characters of [A-Za-z0-9._:-]
 * (what goes into a header and a log line unescaped). */
static int sane_id(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++) {
        const char c = s[n];
        if (n >= 64 || !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return n > 0;
}

void http_request_id(struct req *r)
{
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
    if (h && sane_id(h)) {
        snprintf(r->request_id, sizeof r->request_id, "%s", h);
        return;
    }
    /* 128 random bits as 32 hex digits; a counter if the kernel has none */
    static atomic_ullong counter;
    unsigned char b[16];
    if (getrandom(b, sizeof b, GRND_NONBLOCK) != (ssize_t)sizeof b) {
        const unsigned long long c = atomic_fetch_add(&counter, 1) + 1;
        const unsigned long long t = (unsigned long long)time(NULL);
        memcpy(b, &c, 8);
        memcpy(b + 8, &t, 8);
    }
    for (int i = 0; i < 16; i++)
        snprintf(r->request_id + 2 * i, 3, "%02x", b[i]);
}
