/* test_http_tls_cors.c -- the real server with TLS (a self-signed
 * certificate made by openssl) and with CORS off, listed and "*".
 *
 * $ATTN_SERVER names the binary (the Makefile sets it). Each test starts its
 * own server with --port 0 and reads the bound port from its log. */
#define _GNU_SOURCE /* CPU_COUNT, sched_getaffinity */
#include <arpa/inet.h>
#include <sched.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <errno.h>
#include <unistd.h>

#include "tests/support/check.h"
#include "tests/support/testdata.h"

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"


/* One request to url on handle c (a new one when c is NULL): extra request
 * headers (NULL-terminated list, may be NULL), a body for POST, cafile to
 * trust for https (NULL: the system's), a timeout in seconds. The status is
 * -(curl error) when the transfer failed. */
static struct http_reply fetch_on(CURL *c, const char *method, const char *url,
                              const char *const *headers, const char *body,
                              const char *cafile, long timeout)
{
    const struct http_call call = {c, method, url, body, body ? strlen(body) : 0, NULL, 0,
                                   headers, cafile, timeout};
    return http_fetch(&call);
}

static struct http_reply fetch(const char *method, const char *url, const char *const *headers,
                           const char *body, const char *cafile)
{
    return fetch_on(NULL, method, url, headers, body, cafile, 30);
}

/* A self-signed certificate for 127.0.0.1 (dir/cert.pem, dir/key.pem) from
 * the openssl command, which scripts/deps.sh installs for the tests. */
static void make_cert(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
             "-keyout %s/key.pem -out %s/cert.pem 2>/dev/null", dir, dir);
    cr_assert_eq(system(cmd), 0, "could not make a certificate with openssl (scripts/deps.sh "
                                 "test installs it): %s", cmd);
}

static void remove_dir(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

Test(http, tls_serves_https_and_drops_plain_http, .timeout = 60)
{
    char dir[] = "/tmp/attn-tls-XXXXXX", cert[64], key[64], url[128];
    cr_assert_not_null(mkdtemp(dir));
    make_cert(dir);
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    const char *flags[] = {"--tls-cert-file", cert, "--tls-key-file", key, NULL};
    struct server s;
    server_start(&s, flags);
    /* the start-up line names the scheme it serves */
    char line[64], *log = testdata_read(s.log, NULL);
    cr_assert_not_null(log, "cannot read the server's log %s", s.log);
    snprintf(line, sizeof line, "listening on https://127.0.0.1:%d ", s.port);
    cr_expect(strstr(log, line) != NULL, "no '%s' in the log:\n%s", line, log);
    free(log);

    /* HTTPS, trusting the generated certificate */
    snprintf(url, sizeof url, "https://127.0.0.1:%d/healthz", s.port);
    struct http_reply a = fetch("GET", url, NULL, NULL, cert);
    cr_assert_eq(a.status, 200, "GET over HTTPS: %ld %s", a.status, a.body ? a.body : "");
    cr_expect_str_eq(a.body, "{\"status\":\"ok\"}");
    free(a.body);
    const char *json[] = {"Content-Type: application/json", NULL};
    snprintf(url, sizeof url, "https://127.0.0.1:%d/attention", s.port);
    a = fetch("POST", url, json, "{\"query\": [[1, 0, 1, 0], [0, 1, 0, 1]], \"num_heads\": 2}",
              cert);
    cr_assert_eq(a.status, 200, "POST over HTTPS: %ld %s", a.status, a.body ? a.body : "");
    cr_expect(strstr(a.body, "\"output\":[[") != NULL, "%s", a.body);
    free(a.body);
    /* it is this certificate: without trusting it, verification fails */
    a = fetch("GET", url, NULL, NULL, "/dev/null");
    cr_expect_lt(a.status, 0, "a self-signed certificate was trusted without its CA file");
    free(a.body);

    /* plain HTTP to the TLS port fails at once (not a timeout)... */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", s.port);
    a = fetch_on(NULL, "GET", url, NULL, NULL, NULL, 10);
    cr_expect_lt(a.status, 0, "plain HTTP answered %ld on the TLS port", a.status);
    cr_expect_neq(a.status, -(long)CURLE_OPERATION_TIMEDOUT, "plain HTTP hung");
    free(a.body);
    /* ...and the server carries on */
    snprintf(url, sizeof url, "https://127.0.0.1:%d/readyz", s.port);
    a = fetch("GET", url, NULL, NULL, cert);
    cr_expect_eq(a.status, 200, "after a plain-HTTP request: %ld", a.status);
    free(a.body);
    cr_expect_eq(server_stop(&s), 0);
    remove_dir(dir);
}

Test(http, tls_bad_files_stop_startup_naming_the_setting, .timeout = 60)
{
    char dir[] = "/tmp/attn-tls-XXXXXX", args[512], out[2048];
    cr_assert_not_null(mkdtemp(dir));
    make_cert(dir);
    char other[300];
    snprintf(other, sizeof other, "%s/other", dir);
    cr_assert_eq(mkdir(other, 0700), 0);
    make_cert(other);
    snprintf(args, sizeof args, "echo not a certificate > %s/junk.pem", dir);
    cr_assert_eq(system(args), 0);

    static const struct {
        const char *cert, *key; /* relative to dir; "" = not given */
        const char *want;
    } cases[] = {
        {"cert.pem", "", "tls_cert_file and tls_key_file: set both or neither "
                         "(tls_key_file is empty)"},
        {"", "key.pem", "set both or neither (tls_cert_file is empty)"},
        {"missing.pem", "key.pem", "tls_cert_file: "},
        {"cert.pem", "missing.pem", "tls_key_file: "},
        {"junk.pem", "key.pem", "tls_cert_file: "},
        {"cert.pem", "junk.pem", "tls_key_file: "},
        {"key.pem", "cert.pem", "tls_cert_file: "},          /* swapped */
        {"cert.pem", "other/key.pem", "not a usable certificate and key"}, /* not a pair */
        {".", "key.pem", "tls_cert_file: "},                 /* a directory */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = 0;
        if (cases[i].cert[0])
            n += snprintf(args + n, sizeof args - (size_t)n, "--tls-cert-file %s/%s ", dir,
                          cases[i].cert);
        if (cases[i].key[0])
            snprintf(args + n, sizeof args - (size_t)n, "--tls-key-file %s/%s", dir,
                     cases[i].key);
        int st = server_startup_output(args, out, sizeof out);
        cr_expect_eq(st, 2, "%s: exit %d, want 2 (a setting refused): %s", args, st, out);
        cr_expect(strstr(out, cases[i].want) != NULL, "%s: no '%s' in: %s", args, cases[i].want,
                  out);
        cr_expect(strstr(out, "listening") == NULL, "%s: started: %s", args, out);
    }
    remove_dir(dir);
}

Test(http, cors_is_off_by_default)
{
    struct server s;
    server_start(&s, NULL);
    char url[128];
    const char *from_a[] = {"Origin: https://a.example", "Access-Control-Request-Method: POST",
                            NULL};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
    struct http_reply a = fetch("OPTIONS", url, from_a, NULL, NULL);
    expect_error(&a, 405, "method_not_allowed", "use POST");
    cr_expect(has_header(&a, "Allow", "POST"), "%s", a.headers);
    cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s", a.headers);
    free(a.body);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/nowhere", s.port);
    a = fetch("OPTIONS", url, from_a, NULL, NULL);
    expect_error(&a, 404, "not_found", "/nowhere");
    free(a.body);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", s.port);
    a = fetch("GET", url, from_a, NULL, NULL);
    cr_expect_eq(a.status, 200);
    cr_expect(strstr(a.headers, "Access-Control-") == NULL && strstr(a.headers, "Vary") == NULL,
              "%s", a.headers);
    free(a.body);
    cr_expect_eq(server_stop(&s), 0);
}

Test(http, cors_list_answers_listed_origins_errors_included, .timeout = 60)
{
    const char *flags[] = {"--cors-allow-origin", "https://a.example, http://localhost:3000",
                           "--max-body-bytes", "4096", NULL};
    struct server s;
    server_start(&s, flags);
    char url[128];
    const char *preflight_a[] = {"Origin: https://a.example",
                                 "Access-Control-Request-Method: POST",
                                 "Access-Control-Request-Headers: content-type", NULL};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);

    /* 1. the preflight, then the POST on the same connection */
    CURL *c = curl_easy_init();
    struct http_reply a = fetch_on(c, "OPTIONS", url, preflight_a, NULL, NULL, 30);
    cr_assert_eq(a.status, 204, "preflight: %ld %s", a.status, a.body ? a.body : "");
    cr_expect(a.len == 0, "a 204 with a body: %s", a.body);
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "https://a.example"), "%s",
              a.headers);
    cr_expect(has_header(&a, "Access-Control-Allow-Methods", "POST"), "%s", a.headers);
    cr_expect(has_header(&a, "Access-Control-Allow-Headers", SERVICE_CORS_ALLOW), "%s", a.headers);
    cr_expect(has_header(&a, "Access-Control-Max-Age", "7200"), "%s", a.headers);
    cr_expect(has_header(&a, "Vary", "Origin"), "%s", a.headers);
    cr_expect(has_header(&a, "Allow", "POST"), "%s", a.headers);
    cr_expect(strstr(a.headers, "Connection: close") == NULL, "%s", a.headers);
    free(a.body);
    const char *post_a[] = {"Origin: https://a.example", "Content-Type: application/json",
                            NULL};
    a = fetch_on(c, "POST", url, post_a, "{\"query\": [[1, 0]], \"num_heads\": 1}", NULL, 30);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body ? a.body : "");
    long connects = -1;
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
    cr_expect_eq(connects, 0, "the preflight closed its connection");
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "https://a.example"), "%s",
              a.headers);
    cr_expect(has_header(&a, "Access-Control-Expose-Headers", SERVICE_CORS_EXPOSE),
              "%s", a.headers);
    cr_expect(strstr(a.headers, "\r\nServer-Timing: receive;") != NULL, "%s", a.headers);
    free(a.body);
    curl_easy_cleanup(c);

    /* 2. errors carry the headers too, for every listed origin */
    static const struct {
        const char *method, *path, *ctype, *body;
        long status;
    } errs[] = {
        {"POST", "/attention", "Content-Type: text/plain", "{}", 415},
        {"POST", "/attention", "Content-Type: application/json", "{\"query\": ", 400},
        {"POST", "/attention", "Content-Type: application/json", "{\"query\": [[1]]}", 400},
        {"GET", "/attention", "X-Nothing: 1", NULL, 405},
        {"GET", "/nowhere", "X-Nothing: 1", NULL, 404},
        {"DELETE", "/metrics", "X-Nothing: 1", NULL, 405},
    };
    const char *origins[] = {"https://a.example", "http://localhost:3000"};
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        for (int o = 0; o < 2; o++) {
            char origin[64];
            snprintf(origin, sizeof origin, "Origin: %s", origins[o]);
            const char *hdrs[] = {origin, errs[i].ctype, NULL};
            snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s.port, errs[i].path);
            a = fetch(errs[i].method, url, hdrs, errs[i].body, NULL);
            cr_expect_eq(a.status, errs[i].status, "%s %s: %ld", errs[i].method, errs[i].path,
                         a.status);
            cr_expect(has_header(&a, "Access-Control-Allow-Origin", origins[o]),
                      "%s %s from %s: %s", errs[i].method, errs[i].path, origins[o], a.headers);
            cr_expect(has_header(&a, "Vary", "Origin"), "%s", a.headers);
            free(a.body);
        }
    }
    /* a body over max_body_bytes (413), answered before it is read */
    char *big = malloc(8001);
    memset(big, ' ', 8000);
    big[8000] = '\0';
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
    a = fetch("POST", url, post_a, big, NULL);
    cr_expect_eq(a.status, 413);
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "https://a.example"), "%s",
              a.headers);
    free(a.body), free(big);

    /* 3. preflights elsewhere: GET paths say so; unknown paths stay 404 */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", s.port);
    a = fetch("OPTIONS", url, preflight_a, NULL, NULL);
    cr_expect_eq(a.status, 204);
    cr_expect(has_header(&a, "Access-Control-Allow-Methods", "GET, HEAD"), "%s", a.headers);
    free(a.body);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/index.html", s.port);
    a = fetch("OPTIONS", url, preflight_a, NULL, NULL);
    cr_expect_eq(a.status, 204, "OPTIONS on a static file: %ld", a.status);
    free(a.body);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/nowhere", s.port);
    a = fetch("OPTIONS", url, preflight_a, NULL, NULL);
    expect_error(&a, 404, "not_found", "/nowhere");
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "https://a.example"), "%s",
              a.headers);
    free(a.body);

    /* 4. an origin not in the list: answered, but nothing a browser would
     * let the page read; the preflight grants nothing */
    const char *from_evil[] = {"Origin: https://evil.example", "Content-Type: application/json",
                               "Access-Control-Request-Method: POST", NULL};
    static const char *const near_misses[] = {"https://evil.example", "https://a.example.evil",
                                              "http://a.example", "https://a.example:443",
                                              "null"};
    for (size_t i = 0; i < sizeof near_misses / sizeof near_misses[0]; i++) {
        char origin[64];
        snprintf(origin, sizeof origin, "Origin: %s", near_misses[i]);
        from_evil[0] = origin;
        snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
        a = fetch("POST", url, from_evil, "{\"query\": [[1, 0]], \"num_heads\": 1}", NULL);
        cr_expect_eq(a.status, 200);
        cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s: %s", origin, a.headers);
        cr_expect(has_header(&a, "Vary", "Origin"), "%s", a.headers);
        free(a.body);
        a = fetch("OPTIONS", url, from_evil, NULL, NULL);
        cr_expect_eq(a.status, 204);
        cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s: %s", origin, a.headers);
        free(a.body);
    }
    server_still_serves(s.port);
    cr_expect_eq(server_stop(&s), 0);
}

Test(http, cors_star_answers_any_origin)
{
    const char *flags[] = {"--cors-allow-origin", "*", NULL};
    struct server s;
    server_start(&s, flags);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", s.port);
    /* every answer says *, with or without Origin, so caches need no Vary */
    struct http_reply a = fetch("GET", url, NULL, NULL, NULL);
    cr_expect_eq(a.status, 200);
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "*"), "%s", a.headers);
    cr_expect(strstr(a.headers, "Vary") == NULL, "%s", a.headers);
    free(a.body);
    const char *from[] = {"Origin: https://anywhere.example", "Content-Type: application/json",
                          "Access-Control-Request-Method: POST", NULL};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
    a = fetch("OPTIONS", url, from, NULL, NULL);
    cr_expect_eq(a.status, 204);
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "*"), "%s", a.headers);
    cr_expect(has_header(&a, "Access-Control-Allow-Methods", "POST"), "%s", a.headers);
    free(a.body);
    a = fetch("POST", url, from, "{\"query\": [[1, 0]], \"num_heads\": 3}", NULL);
    expect_error(&a, 400, "invalid_parameter", "num_heads");
    cr_expect(has_header(&a, "Access-Control-Allow-Origin", "*"), "%s", a.headers);
    cr_expect(has_header(&a, "Access-Control-Expose-Headers", SERVICE_CORS_EXPOSE),
              "%s", a.headers);
    free(a.body);
    cr_expect_eq(server_stop(&s), 0);
}
