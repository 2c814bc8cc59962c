/* test_route.c -- http/route: path patterns, and the transport serving a
 * route table it is handed. The table here is the tests' own (not the
 * service's, tests/api/test_routes.c): a row and a handler are all an
 * endpoint takes, and the method, the admin token, CORS, the body and the
 * error style come from the row's columns. Loopback only. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "http/cors.h"
#include "http/http.h"
#include "http/route.h"
#include "lib/errors.h"
#include "lib/pool.h"
#include "tests/support/http_util.h"

/* ---------------------------------------------------------------------- */
/* Patterns                                                                */

Test(route, patterns_match_literals_captures_options_and_prefixes)
{
    struct route_request rq = {0};
    cr_assert(route_match("/attention", "/attention", &rq));
    cr_assert_not(route_match("/attention", "/attention/", &rq));
    cr_assert_not(route_match("/attention", "/attentio", &rq));

    const char *model = "/v2/models/{model}[/versions/{version:31}]/ready";
    cr_assert(route_match(model, "/v2/models/m/ready", &rq));
    cr_assert_str_eq(route_param(&rq, "model"), "m");
    cr_assert_str_eq(route_param(&rq, "version"), "");
    cr_assert(route_match(model, "/v2/models/m/versions/7/ready", &rq));
    cr_assert_str_eq(route_param(&rq, "model"), "m");
    cr_assert_str_eq(route_param(&rq, "version"), "7");
    /* a segment is never empty, never holds '/', and has its length limit */
    cr_assert_not(route_match(model, "/v2/models//ready", &rq));
    cr_assert_not(route_match(model, "/v2/models/m/versions/ready", &rq));
    char longer[128];
    snprintf(longer, sizeof longer, "/v2/models/m/versions/%032d/ready", 0);
    cr_assert_not(route_match(model, longer, &rq));
    snprintf(longer, sizeof longer, "/v2/models/m/versions/%031d/ready", 0);
    cr_assert(route_match(model, longer, &rq));
    char name[200];
    snprintf(name, sizeof name, "/v2/models/%0128d/ready", 0);
    cr_assert_not(route_match(model, name, &rq), "a capture holds 127 bytes at most");
    cr_assert_eq(rq.ncaptures, 0, "a failed match keeps no capture");

    cr_assert(route_match("/v2[/*]", "/v2", &rq));
    cr_assert(route_match("/v2[/*]", "/v2/", &rq));
    cr_assert(route_match("/v2[/*]", "/v2/anything/at/all", &rq));
    cr_assert_not(route_match("/v2[/*]", "/v2x", &rq));
    cr_assert(route_match("*", "", &rq));
    cr_assert(route_match("*", "no slash", &rq));
}

/* ---------------------------------------------------------------------- */
/* A transport serving the tests' own table                                */

#define TOKEN "test-admin-token-0123"

/* The tests' two error styles: "<slug>: <message>" and "[<slug>] <message>". */
static void error_as(struct route_response *out, const char *format, int code, const char *msg)
{
    route_response_free(out);
    out->status = http_error_status(code);
    out->content_type = "text/plain";
    char text[300];
    const int n = snprintf(text, sizeof text, format, http_error_slug(code),
                           msg ? msg : http_error_message(code));
    out->body = strdup(text);
    out->len = out->body ? (size_t)n : 0;
}

static void plain_error(struct route_response *out, int code, const char *msg)
{
    error_as(out, "%s: %s", code, msg);
}

static void bracket_error(struct route_response *out, int code, const char *msg)
{
    error_as(out, "[%s] %s", code, msg);
}

static void text(struct route_response *out, const char *s)
{
    out->status = 200;
    out->content_type = "text/plain";
    out->body = strdup(s);
    out->len = strlen(s);
}

/* Reads a header its row does not declare (which it must not see) and
 * sends one (which must not be sent). */
static void hello(const struct route_request *rq, struct route_response *out)
{
    char s[200];
    const char *undeclared = rq->header(rq, "X-Undeclared");
    snprintf(s, sizeof s, "hello %s%s", route_param(rq, "name"), undeclared ? undeclared : "");
    text(out, s);
    route_header_set(out, "X-Greeting", "1");
    route_header_set(out, "X-Unlisted", "1");
}

static void echo(const struct route_request *rq, struct route_response *out)
{
    out->status = 200;
    out->content_type = "application/octet-stream";
    out->body = malloc(rq->len + 1);
    memcpy(out->body, rq->body, rq->len);
    out->len = rq->len;
    const char *thing = rq->header(rq, "x-thing");
    if (thing)
        route_header_set(out, "X-Thing-Seen", thing);
}

static void admin(const struct route_request *rq, struct route_response *out)
{
    (void)rq;
    text(out, "done");
}

static int want_json(const struct route_request *rq, char *msg, size_t msglen)
{
    const char *ct = rq->header(rq, "Content-Type");
    if (ct && strcmp(ct, "application/json") == 0)
        return -1;
    snprintf(msg, msglen, "not JSON");
    return ERR_UNSUPPORTED_MEDIA_TYPE;
}

static int nothing(const struct route_request *rq, char *msg, size_t msglen)
{
    snprintf(msg, msglen, "nothing at %s", rq->path);
    return ERR_NOT_FOUND;
}

/* Requests counted per metric, by the table's record hook (on the
 * network thread, once a response is sent). */
static atomic_int counted_hello, counted_none;

static void record(const char *metric, int status, double seconds)
{
    (void)status, (void)seconds;
    if (!metric)
        counted_none++;
    else if (strcmp(metric, "hello") == 0)
        counted_hello++;
}

static const struct route rows[] = {
    {ROUTE_GET, "/hello/{name}", ROUTE_CORS, plain_error, "hello", hello, NULL, NULL, NULL,
     "X-Greeting"},
    {ROUTE_POST, "/echo", ROUTE_BODY | ROUTE_CORS, plain_error, "echo", echo, want_json, NULL,
     "X-Thing", "X-Thing-Seen, Retry-After"},
    {ROUTE_POST, "/admin", ROUTE_BODY | ROUTE_ADMIN, plain_error, "admin", admin, NULL, NULL,
     "X-Admin-Note", "X-Admin-Done"},
    {0, "*", ROUTE_CORS, bracket_error, NULL, NULL, nothing, NULL, NULL, NULL},
};
static const struct route_table table = {rows, 4, "admin is off", record};

static struct pool *pool;
static struct http_server *srv;

static void start(void)
{
    const struct http_options o = {
        .bind = "127.0.0.1", .port = 0, .conn_timeout = 30, .conn_memory_limit = 32768,
        .max_connections = 16, .header_timeout = 20, .body_timeout = 20,
        .max_body_bytes = 1024, .max_inflight_bytes = 1 << 20, .max_answer_bytes = 1 << 20,
        .cors_allow_origin = "*", .admin_token = TOKEN, .tls_cert_file = "",
        .tls_key_file = "",
    };
    char err[256];
    int setting;
    pool = pool_new(1, 4, 0);
    cr_assert_not_null(pool);
    srv = http_start(&o, &table, pool, &setting, err, sizeof err);
    cr_assert_not_null(srv, "%s", err);
}

static void stop(void)
{
    http_drain(srv, 1);
    pool_close(pool);
    http_stop(srv);
    pool_free(pool);
}

TestSuite(transport, .init = start, .fini = stop);

Test(transport, serves_each_row_by_its_columns)
{
    const int port = http_port(srv);
    struct http_reply a = request(port, "GET", "/hello/bob", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert_str_eq(a.body, "hello bob");
    cr_assert(has_header(&a, "X-Greeting", "1"), "%s", a.headers);
    cr_assert(has_header(&a, "Access-Control-Allow-Origin", "*"), "%s", a.headers);
    free(a.body);

    /* another method: 405 in the row's style, with Allow */
    a = request(port, "POST", "/hello/bob", "x", 1, NULL, 0);
    cr_assert_eq(a.status, 405);
    cr_assert_str_eq(a.body, "method_not_allowed: POST is not allowed on /hello/bob; use GET");
    cr_assert(has_header(&a, "Allow", "GET, HEAD"), "%s", a.headers);
    free(a.body);

    /* a body, read and handed to a worker; the row's own header check */
    a = request(port, "POST", "/echo", "{\"x\": 1}", 8, "application/json", 3);
    cr_assert_eq(a.status, 200);
    cr_assert_str_eq(a.body, "{\"x\": 1}");
    free(a.body);
    a = request(port, "POST", "/echo", "{}", 2, "text/plain", 0);
    cr_assert_eq(a.status, 415);
    cr_assert_str_eq(a.body, "unsupported_media_type: not JSON");
    free(a.body);
    char big[2000];
    memset(big, 'x', sizeof big);
    a = request(port, "POST", "/echo", big, sizeof big, "application/json", 0);
    cr_assert_eq(a.status, 413, "max_body_bytes, in the row's style");
    cr_assert(strncmp(a.body, "payload_too_large: ", 19) == 0, "%s", a.body);
    free(a.body);

    /* the admin token, and no CORS on that row */
    a = request(port, "POST", "/admin", "", 0, NULL, 0);
    cr_assert_eq(a.status, 401);
    cr_assert_null(strstr(a.headers, "Access-Control-"), "%s", a.headers);
    free(a.body);
    const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};
    a = request_with(port, "POST", "/admin", "", 0, NULL, 0, auth);
    cr_assert_eq(a.status, 200);
    cr_assert_str_eq(a.body, "done");
    free(a.body);
}

Test(transport, an_unknown_path_gets_the_404_of_its_row_in_its_style)
{
    const int port = http_port(srv);
    counted_hello = counted_none = 0;
    struct http_reply a = request(port, "GET", "/nope", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 404);
    cr_assert_str_eq(a.body, "[not_found] nothing at /nope");
    cr_assert(has_header(&a, "Content-Type", "text/plain"), "%s", a.headers);
    free(a.body);
    a = request(port, "GET", "/hello/bob", NULL, 0, NULL, 0);
    free(a.body);
    for (int i = 0; i < 500 && atomic_load(&counted_hello) + atomic_load(&counted_none) < 2; i++)
        usleep(10000); /* the count follows the response */
    cr_assert_eq(counted_hello, 1, "the record hook gets the row's metric");
    cr_assert_eq(counted_none, 1, "and NULL for a path that names nothing");
}

/* Under CORS a page may send what the rows read and read what they send:
 * HTTP's own headers, then each row's, once each (Retry-After is both);
 * not the admin row's, which no page may call. */
Test(transport, cors_lists_are_what_the_rows_read_and_send)
{
    const int port = http_port(srv);
    const char *const pre[] = {"Origin: https://a.example",
                               "Access-Control-Request-Method: POST", NULL};
    struct http_reply a = request_with(port, "OPTIONS", "/echo", NULL, 0, NULL, 0, pre);
    cr_assert_eq(a.status, 204);
    cr_expect(has_header(&a, "Access-Control-Allow-Headers",
                         "Content-Type, Content-Encoding, X-Request-Id, X-Thing"), "%s",
              a.headers);
    free(a.body);
    a = request_with(port, "GET", "/hello/bob", NULL, 0, NULL, 0, pre);
    cr_assert_eq(a.status, 200);
    cr_expect(has_header(&a, "Access-Control-Expose-Headers", "Retry-After, Allow, "
                         "X-Request-Id, Accept-Encoding, X-Greeting, X-Thing-Seen"), "%s",
              a.headers);
    free(a.body);
}

/* A handler sees only the request headers its row reads, and sends only
 * those its row sends: the lists above are all there is. */
Test(transport, a_row_reads_and_sends_only_the_headers_it_declares)
{
    const int port = http_port(srv);
    const char *const with[] = {"X-Undeclared: !", NULL};
    struct http_reply a = request_with(port, "GET", "/hello/bob", NULL, 0, NULL, 0, with);
    cr_assert_eq(a.status, 200);
    cr_expect_str_eq(a.body, "hello bob", "an undeclared header was read");
    cr_expect(has_header(&a, "X-Greeting", "1"), "%s", a.headers);
    cr_expect_null(strstr(a.headers, "X-Unlisted"), "an undeclared header was sent: %s",
                   a.headers);
    free(a.body);
}

/* A header a row reads comes once: two are a 400 in the row's style that
 * names it (equal values too), before the row's check and the body. */
Test(transport, a_header_a_row_reads_comes_once)
{
    const int port = http_port(srv);
    const char *const one[] = {"X-Thing: a", NULL};
    struct http_reply a = request_with(port, "POST", "/echo", "{}", 2, "application/json", 0,
                                       one);
    cr_assert_eq(a.status, 200);
    cr_expect(has_header(&a, "X-Thing-Seen", "a"), "%s", a.headers);
    free(a.body);
    const char *const values[][2] = {{"a", "b"}, {"a", "a"}};
    for (int i = 0; i < 2; i++) {
        char h1[32], h2[32];
        snprintf(h1, sizeof h1, "X-Thing: %s", values[i][0]);
        snprintf(h2, sizeof h2, "x-thing: %s", values[i][1]);
        const char *const two[] = {h1, h2, NULL};
        a = request_with(port, "POST", "/echo", "{}", 2, "text/plain", 0, two);
        cr_expect_eq(a.status, 400, "%s, %s: %ld %s", h1, h2, a.status, a.body);
        cr_expect_str_eq(a.body, "bad_request: 2 X-Thing headers; send one");
        free(a.body);
    }
}

/* A table whose header lists are not header names, or that would let a
 * page send the admin token, does not start. */
Test(route, a_table_with_a_bad_header_list_is_refused)
{
    static const struct {
        const char *reads, *want;
    } cases[] = {
        {"X-Good, Bad Name", "'Bad Name' is not a header name"},
        {"X-Good, X-Bad:", "'X-Bad:' is not a header name"},
        {"authorization", "a page may not send Authorization"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct route bad[] = {
            {ROUTE_GET, "*", ROUTE_CORS, plain_error, "x", admin, NULL, NULL, cases[i].reads,
             NULL},
        };
        const struct route_table t = {bad, 1, "off", NULL};
        struct cors_lists l;
        char err[200] = "";
        cr_expect_eq(cors_lists_build(&l, &t, err, sizeof err), -1, "%s", cases[i].reads);
        cr_expect(strstr(err, cases[i].want) != NULL, "%s: %s", cases[i].reads, err);
        int setting;
        const struct http_options o = {.bind = "127.0.0.1", .cors_allow_origin = "*"};
        cr_expect_null(http_start(&o, &t, NULL, &setting, err, sizeof err), "%s", cases[i].reads);
        cr_expect(strstr(err, cases[i].want) != NULL, "%s: %s", cases[i].reads, err);
    }
}
