/* test_http_headers.c -- the headers a route reads and sends, end to end:
 * a header a route reads comes once (two X-Sequence-Id are a 400 naming
 * it, in the style of the route's protocol), and under CORS a page may
 * send every header a route reads (the preflight allows it) and read every
 * header a route sends (the answers expose it). The lists come from the
 * route table (api/routes.c), not from the transport (http/cors.h). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tests/support/http_util.h"

/* Send req on a fresh connection (it asks for Connection: close) and read
 * the whole answer into buf (NUL-terminated); its status, or -1. */
static int raw_exchange(int port, const char *req, char *buf, size_t cap)
{
    const int fd = raw_connect(port, 0);
    cr_assert_geq(fd, 0, "connect");
    cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    size_t len = 0;
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 10000) != 1 || len + 1 >= cap)
            break;
        const ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    int status = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
    return status;
}

/* The JSON body of a raw answer (after the blank line), or NULL. */
static json_t *raw_body(const char *answer)
{
    const char *b = strstr(answer, "\r\n\r\n");
    return b ? json_loads(b + 4, 0, NULL) : NULL;
}

/* Whether the comma-separated list holds name (ASCII case aside). */
static int lists(const char *list, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ,");
        const size_t k = strcspn(p, ",");
        size_t t = k;
        while (t && p[t - 1] == ' ')
            t--;
        if (t == n && strncasecmp(p, name, n) == 0)
            return 1;
        p += k;
    }
    return 0;
}

static const char *const start_a =
    "{\"query\": [[1, 0]], \"num_heads\": 1, \"sequence_start\": true}";
static const char *const start_v2 =
    "{\"parameters\": {\"num_heads\": 1, \"sequence_start\": true}, \"inputs\": [{\"name\": "
    "\"query\", \"datatype\": \"FP32\", \"shape\": [1, 2], \"data\": [1, 0]}]}";

/* Two X-Sequence-Id headers (equal or not): 400 naming the header, in the
 * route's error style, before anything starts. Once it was the first that
 * won, silently: a start of sequence "a". */
Test(headers, two_sequence_ids_are_a_400_naming_the_header, .timeout = 60)
{
    struct server s;
    server_start(&s, NULL);
    static const struct {
        const char *path, *second;
        int v2;
    } cases[] = {
        {"/attention", "b", 0},
        {"/attention", "a", 0},
        {"/v2/models/attention/infer", "b", 1},
        {"/v2/models/attention/infer", "a", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *body = cases[i].v2 ? start_v2 : start_a;
        char req[1024], answer[8192];
        snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                 "application/json\r\nX-Sequence-Id: a\r\nx-sequence-id: %s\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", cases[i].path,
                 cases[i].second, strlen(body), body);
        const int status = raw_exchange(s.port, req, answer, sizeof answer);
        cr_expect_eq(status, 400, "%s with X-Sequence-Id a and %s: %s", cases[i].path,
                     cases[i].second, answer);
        json_t *j = raw_body(answer);
        cr_assert_not_null(j, "%s: not JSON: %s", cases[i].path, answer);
        json_t *e = json_object_get(j, "error");
        const char *msg;
        if (cases[i].v2) { /* the Open Inference Protocol's {"error": msg} */
            msg = json_string_value(e);
        } else {           /* {"error": {"code", "message"}} */
            cr_expect_str_eq(json_string_value(json_object_get(e, "code")), "bad_request",
                             "%s", answer);
            msg = json_string_value(json_object_get(e, "message"));
        }
        cr_assert_not_null(msg, "%s: %s", cases[i].path, answer);
        cr_expect(strstr(msg, "2 X-Sequence-Id headers") != NULL, "%s: %s", cases[i].path,
                  msg);
        json_decref(j);
    }
    /* nothing was started: a step on "a" is a sequence the server does not hold */
    const char *const step[] = {"X-Sequence-Id: a", NULL};
    const char *const plain = "{\"query\": [[1, 0]], \"num_heads\": 1}";
    struct http_reply a = request_with(s.port, "POST", "/attention", plain, strlen(plain), NULL,
                                       0, step);
    expect_error(&a, 400, "sequence_not_found", NULL);
    free(a.body);
    /* one is served */
    char req[1024], answer[8192];
    snprintf(req, sizeof req, "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
             "application/json\r\nX-Sequence-Id: a\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n%s", strlen(start_a), start_a);
    cr_expect_eq(raw_exchange(s.port, req, answer, sizeof answer), 200, "%s", answer);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* A page on another origin that steps a sequence sends X-Sequence-Id: its
 * preflight must allow it (once it was not in the list, and the browser
 * never sent the request). */
Test(headers, a_preflight_allows_every_header_the_routes_read)
{
    const char *flags[] = {"--cors-allow-origin", "https://a.example", NULL};
    struct server s;
    server_start(&s, flags);
    static const struct { const char *path, *asks[3]; } cases[] = {
        {"/attention", {"Content-Type", "X-Sequence-Id", NULL}},
        {"/v2/models/attention/infer",
         {"X-Sequence-Id", "Inference-Header-Content-Length", "Content-Type"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *const pre[] = {"Origin: https://a.example",
                                   "Access-Control-Request-Method: POST",
                                   "Access-Control-Request-Headers: content-type, x-sequence-id",
                                   NULL};
        struct http_reply a = request_with(s.port, "OPTIONS", cases[i].path, NULL, 0, NULL, 0,
                                           pre);
        cr_expect_eq(a.status, 204, "%s: %ld", cases[i].path, a.status);
        const char *allowed = header(&a, "Access-Control-Allow-Headers");
        cr_assert_not_null(allowed, "%s: %s", cases[i].path, a.headers);
        for (int k = 0; k < 3 && cases[i].asks[k]; k++)
            cr_expect(lists(allowed, cases[i].asks[k]), "%s: %s is not allowed: %s",
                      cases[i].path, cases[i].asks[k], allowed);
        cr_expect(!lists(allowed, "Authorization"), "a page may send the admin token: %s",
                  allowed);
        free(a.body);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* Whether every header of a that a page cannot read unless exposed is in
 * its Access-Control-Expose-Headers. */
static void expect_all_exposed(const struct http_reply *a, const char *what)
{
    /* the CORS-safelisted response headers, and HTTP's own machinery that
     * no page reads */
    static const char *const readable[] = {
        "Cache-Control", "Content-Language", "Content-Length", "Content-Type", "Expires",
        "Last-Modified", "Pragma", "Date", "Connection", "Vary", "Transfer-Encoding",
        "Keep-Alive"};
    const char *v = header(a, "Access-Control-Expose-Headers");
    cr_assert_not_null(v, "%s: nothing exposed: %s", what, a->headers);
    char exposed[512];
    snprintf(exposed, sizeof exposed, "%s", v);
    const char *line = strstr(a->headers, "\r\n");
    for (; line && line[2] && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        const char *name = line + 2;
        const size_t n = strcspn(name, ":\r");
        char h[80];
        snprintf(h, sizeof h, "%.*s", (int)(n < sizeof h ? n : sizeof h - 1), name);
        int skip = strncasecmp(h, "Access-Control-", 15) == 0;
        for (size_t k = 0; k < sizeof readable / sizeof readable[0]; k++)
            skip |= strcasecmp(h, readable[k]) == 0;
        if (!skip)
            cr_expect(lists(exposed, h), "%s sends %s, not exposed (%s)", what, h, exposed);
    }
}

/* Every header an answer carries, the transport's (Allow, Accept-Encoding
 * of a 415, X-Request-Id) and the handler's (Server-Timing, v2's
 * Inference-Header-Content-Length), is one a page may read. Once a 415's
 * Accept-Encoding was not. */
Test(headers, answers_expose_every_header_they_send, .timeout = 30)
{
    const char *flags[] = {"--cors-allow-origin", "*", NULL};
    struct server s;
    server_start(&s, flags);
    const char *const from[] = {"Origin: https://a.example", NULL};
    struct http_reply a = request_with(s.port, "POST", "/attention",
                                       "{\"query\": [[1, 0]], \"num_heads\": 1}", 35, NULL, 0,
                                       from);
    cr_expect_eq(a.status, 200, "%s", a.body);
    cr_expect_not_null(header(&a, "Server-Timing"), "%s", a.headers);
    expect_all_exposed(&a, "POST /attention");
    free(a.body);
    char body[512];
    snprintf(body, sizeof body, "{\"parameters\": {\"num_heads\": 1, \"binary_data_output\": "
             "true}, \"inputs\": [{\"name\": \"query\", \"datatype\": \"FP32\", \"shape\": "
             "[1, 2], \"data\": [1, 0]}]}");
    a = request_with(s.port, "POST", "/v2/models/attention/infer", body, strlen(body), NULL, 0,
                     from);
    cr_expect_eq(a.status, 200, "%s", a.body);
    cr_expect_not_null(header(&a, "Inference-Header-Content-Length"), "%s", a.headers);
    expect_all_exposed(&a, "v2 infer, binary");
    free(a.body);
    a = request_with(s.port, "POST", "/attention", "{}", 2, "text/plain", 0, from);
    cr_expect_eq(a.status, 415);
    cr_expect_not_null(header(&a, "Accept-Encoding"), "%s", a.headers);
    expect_all_exposed(&a, "a 415");
    free(a.body);
    a = request_with(s.port, "GET", "/attention", NULL, 0, NULL, 0, from);
    cr_expect_eq(a.status, 405);
    expect_all_exposed(&a, "a 405");
    free(a.body);
    a = request_with(s.port, "GET", "/healthz", NULL, 0, NULL, 0, from);
    expect_all_exposed(&a, "GET /healthz");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}
