/* test_http.c -- integration tests: the real attention-server process on a
 * free port, driven with libcurl and raw sockets: requests and their answers.
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
#include "tests/support/fixture.h"
#include "tests/support/testdata.h"

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"


Test(http, golden_cases_in_every_tensor_form_and_encoding)
{
    struct server s;
    server_start(&s, NULL);
    char *paths[64];
    int n = fixture_list("tests/golden", paths, 64), failed = 0;
    for (int i = 0; i < n; i++) {
        failed += !check_golden(s.port, paths[i], 2, 0); /* {shape, data}, JSON out */
        failed += !check_golden(s.port, paths[i], 1, 1); /* nested arrays, base64 out */
        failed += !check_golden(s.port, paths[i], 3, 0); /* base64 in, JSON out */
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d golden comparisons over HTTP failed", failed);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, every_invalid_case_gets_its_status_and_slug, .timeout = 60)
{
    struct server s;
    server_start(&s, NULL);
    char *paths[128];
    int n = fixture_list("tests/cases", paths, 128);
    for (int i = 0; i < n; i++) {
        json_t *c = json_load_file(paths[i], JSON_ALLOW_NUL, NULL);
        size_t blen;
        char *body = testdata_body(c, &blen);
        struct http_reply a = request(s.port, "POST", "/attention", body, blen, NULL, 0);
        cr_log_info("%s -> %ld", paths[i], a.status);
        expect_error(&a, json_integer_value(json_object_get(c, "status")),
                     json_string_value(json_object_get(c, "code")),
                     json_string_value(json_object_get(c, "message_contains")));
        free(a.body), free(body), free(paths[i]);
        json_decref(c);
    }
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, http_level_errors)
{
    const char *flags[] = {"--max-body-bytes", "4096", NULL};
    struct server s;
    server_start(&s, flags);
    const char *ok = "{\"query\": [[1, 2]], \"num_heads\": 1}";
    struct http_reply a = request(s.port, "GET", "/nowhere", NULL, 0, NULL, 0);
    expect_error(&a, 404, "not_found", "/nowhere");
    free(a.body);
    a = request(s.port, "GET", "/attention", NULL, 0, NULL, 0);
    expect_error(&a, 405, "method_not_allowed", "use POST");
    cr_assert(strstr(a.headers, "Allow: POST"), "%s", a.headers);
    free(a.body);
    a = request(s.port, "DELETE", "/healthz", NULL, 0, NULL, 0);
    expect_error(&a, 405, "method_not_allowed", "use GET");
    cr_assert(strstr(a.headers, "Allow: GET"), "%s", a.headers);
    free(a.body);
    /* 405 is for a path that exists with another method; else 404 */
    a = request(s.port, "POST", "/nowhere", ok, strlen(ok), NULL, 0);
    expect_error(&a, 404, "not_found", "/nowhere");
    free(a.body);
    a = request(s.port, "POST", "/attention/", ok, strlen(ok), NULL, 0);
    expect_error(&a, 404, "not_found", "/attention/");
    free(a.body);
    a = request(s.port, "POST", "/index.html", ok, strlen(ok), NULL, 0);
    expect_error(&a, 405, "method_not_allowed", "use GET");
    free(a.body);
    a = request(s.port, "PUT", "/metrics", NULL, 0, NULL, 0);
    expect_error(&a, 405, "method_not_allowed", "use GET");
    free(a.body);
    /* messages that quote what the client sent stay JSON */
    a = request(s.port, "GET", "/%FF.js", NULL, 0, NULL, 0);
    expect_error(&a, 404, "not_found", "/\xef\xbf\xbd.js");
    free(a.body);
    a = request(s.port, "POST", "/attention", ok, strlen(ok), "text/\xff", 0);
    expect_error(&a, 415, "unsupported_media_type", "text/\xef\xbf\xbd");
    free(a.body);
    a = request(s.port, "POST", "/attention", ok, strlen(ok), "text/plain", 0);
    expect_error(&a, 415, "unsupported_media_type", "text/plain");
    free(a.body);
    a = request(s.port, "POST", "/attention", ok, strlen(ok), "application/json; charset=utf-8", 0);
    cr_assert_eq(a.status, 200, "a charset parameter is fine: %s", a.body);
    free(a.body);
    a = post(s.port, "{\"query\": [[1e20, 1e20], [1, 1]], \"num_heads\": 1}");
    expect_error(&a, 400, "invalid_parameter", "overflows float32");
    free(a.body);
    char *big = malloc(10000);
    memset(big, ' ', 10000);
    a = request(s.port, "POST", "/attention", big, 10000, NULL, 0);
    expect_error(&a, 413, "payload_too_large", "max_body_bytes");
    free(a.body);
    a = request(s.port, "POST", "/attention", big, 10000, NULL, 997); /* chunked: no length */
    expect_error(&a, 413, "payload_too_large", "max_body_bytes");
    free(a.body);
    free(big);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, hostile_bodies_get_4xx_and_the_server_keeps_serving)
{
    struct server s;
    server_start(&s, NULL);
    /* 64 MB of garbage */
    size_t n = 64000000;
    char *junk = malloc(n);
    unsigned long long st = 99;
    for (size_t i = 0; i < n; i++)
        junk[i] = (char)(check_randf(&st) * 127);
    struct http_reply a = request(s.port, "POST", "/attention", junk, n, NULL, 0);
    expect_error(&a, 400, "invalid_json", NULL);
    free(a.body);
    free(junk);
    /* 10 000-deep nested array */
    char *deep = malloc(20000 + 64);
    int o = sprintf(deep, "{\"num_heads\": 1, \"query\": ");
    for (int i = 0; i < 10000; i++)
        deep[o++] = '[';
    for (int i = 0; i < 10000; i++)
        deep[o++] = ']';
    deep[o++] = '}';
    deep[o] = '\0';
    a = post(s.port, deep);
    expect_error(&a, 400, "invalid_json", "depth");
    free(a.body), free(deep);
    /* 10⁹ declared elements */
    a = post(s.port, "{\"num_heads\": 1, \"query\": {\"shape\": [1000, 1000000], \"data\": [1]}}");
    expect_error(&a, 413, "payload_too_large", "max_tensor_elements");
    free(a.body);
    a = post(s.port, "{\"num_heads\": 1, \"query\": {\"shape\": [31623, 31623], \"dtype\": "
                     "\"float32\", \"b64\": \"AAAA\"}}");
    expect_error(&a, 413, "payload_too_large", "max_tensor_elements");
    free(a.body);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* Raw socket: send the request a few bytes at a time (until the server
 * closes: libmicrohttpd 1.0 does at the first bytes that cannot start a
 * request). */
static char *raw_exchange(int port, const char *req, size_t step)
{
    int fd = raw_connect(port, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t len = strlen(req);
    for (size_t i = 0; i < len; i += step) {
        size_t k = len - i < step ? len - i : step;
        if (send(fd, req + i, k, MSG_NOSIGNAL) != (ssize_t)k)
            break;
        usleep(500);
    }
    shutdown(fd, SHUT_WR);
    size_t cap = 65536, got = 0;
    char *buf = malloc(cap);
    ssize_t r;
    while ((r = read(fd, buf + got, cap - got - 1)) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    close(fd);
    return buf;
}

Test(http, body_in_tiny_chunks_and_malformed_http)
{
    struct server s;
    server_start(&s, NULL);
    const char *body = "{\"query\": [[1, 0], [0, 1], [1, 1]], \"num_heads\": 2, "
                       "\"attn_mask\": \"causal\"}";
    char req[1024];
    snprintf(req, sizeof req, "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: "
             "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             strlen(body), body);
    char *resp = raw_exchange(s.port, req, 3);
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%s", resp);
    cr_assert(strstr(resp, "\"attention_weights\":[[[1,0,0],"), "%s", resp);
    free(resp);
    /* the same body, chunked encoding, 1 byte per chunk, via libcurl */
    struct http_reply a = request(s.port, "POST", "/attention", body, strlen(body), NULL, 1);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* garbage instead of HTTP: the server answers or closes, and lives */
    resp = raw_exchange(s.port, "\x16\x03\x01 not http at all\r\n\r\n", 5);
    cr_assert(resp[0] == '\0' || strncmp(resp, "HTTP/1.1 400", 12) == 0, "%s", resp);
    free(resp);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* Numbers at the edges: any JSON number is a tensor value,
 * integer fields stay integers, and -inf blocks in float masks. */
Test(http, numbers_at_the_edges)
{
    struct server s;
    server_start(&s, NULL);
    /* JavaScript's JSON.stringify(1e20): beyond long long, still 1e20 */
    struct http_reply a = post(s.port, "{\"query\": [[1]], \"key\": [[1]], \"value\": "
                                   "[[100000000000000000000]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"output\":[[1e20]]"), "%s", a.body);
    free(a.body);
    /* the float 0x15ae43fd through the service: its shortest direct form
     * 7.038531e-26 reads back through a double as 0x15ae43fe */
    a = post(s.port, "{\"query\": [[7.0385307e-26]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200, "%s", a.body);
    const char *num = strstr(a.body, "\"output\":[[");
    cr_assert(num, "%s", a.body);
    const float back = (float)strtod(num + strlen("\"output\":[["), NULL);
    uint32_t bits_back;
    memcpy(&bits_back, &back, sizeof bits_back);
    cr_assert_eq(bits_back, 0x15ae43fdu, "%s reads back as 0x%08x", a.body, bits_back);
    free(a.body);
    const struct { const char *body; long status; const char *slug, *msg; } refused[] = {
        {"{\"query\": [[1e39]], \"num_heads\": 1}", 400, "invalid_tensor", "out of float32"},
        {"{\"query\": [[1e400]], \"num_heads\": 1}", 400, "invalid_tensor", "out of float32"},
        {"{\"query\": [[1, 2]], \"num_heads\": 2.0}", 400, "invalid_parameter", "integer"},
        {"{\"query\": [[1, 2]], \"num_heads\": 100000000000000000000}", 413,
         "payload_too_large", "max_heads"},
        {"{\"query\": [[1], [2]], \"num_heads\": 1, \"attn_mask\": [[0, \"+inf\"], [0, 0]]}",
         400, "invalid_tensor", "attn_mask[0][1]"},
        {"{\"query\": [[1], [\"-inf\"]], \"num_heads\": 1}", 400, "invalid_tensor",
         "query[1][0] is not a number"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        a = post(s.port, refused[i].body);
        expect_error(&a, refused[i].status, refused[i].slug, refused[i].msg);
        free(a.body);
    }

    /* A causal mask written with -inf (nested strings, flat strings, base64
     * bits) answers what "causal" answers. */
    enum { L = 5, E = 4 };
    unsigned long long st = 8;
    char q[1024], masks[3][2048], body[4096];
    int o = sprintf(q, "[");
    for (int i = 0; i < L; i++)
        for (int j = 0; j < E; j++)
            o += sprintf(q + o, "%s%.9g%s", j ? "," : i ? ",[" : "[", (double)check_randf(&st),
                         j == E - 1 ? "]" : "");
    sprintf(q + o, "]");
    float bits[L * L];
    int on = sprintf(masks[0], "["), fn = sprintf(masks[1], "{\"shape\": [%d, %d], \"data\": [",
                                                  L, L);
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) {
            const char *w = j <= i ? "0" : (i + j) % 2 ? "\"-inf\"" : "\"-Infinity\"";
            on += sprintf(masks[0] + on, "%s%s%s", j ? "," : i ? ",[" : "[", w,
                          j == L - 1 ? "]" : "");
            fn += sprintf(masks[1] + fn, "%s%s", i + j ? "," : "", w);
            bits[i * L + j] = j <= i ? 0.0f : -INFINITY;
        }
    sprintf(masks[0] + on, "]");
    sprintf(masks[1] + fn, "]}");
    char *b64 = b64_encode((const unsigned char *)bits, sizeof bits);
    snprintf(masks[2], sizeof masks[2], "{\"shape\": [%d, %d], \"dtype\": \"float32\", "
             "\"b64\": \"%s\"}", L, L, b64);
    free(b64);
    snprintf(body, sizeof body, "{\"query\": %s, \"num_heads\": 2, \"attn_mask\": \"causal\"}", q);
    a = post(s.port, body);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *want = json_loadb(a.body, a.len, 0, NULL);
    free(a.body);
    for (int m = 0; m < 3; m++) {
        snprintf(body, sizeof body, "{\"query\": %s, \"num_heads\": 2, \"attn_mask\": %s}", q,
                 masks[m]);
        a = post(s.port, body);
        cr_assert_eq(a.status, 200, "mask %d: %s\n%s", m, a.body, body);
        json_t *got = json_loadb(a.body, a.len, 0, NULL);
        const char *names[2] = {"output", "attention_weights"};
        for (int k = 0; k < 2; k++) {
            size_t nw, ng;
            float *fw = flatten(json_object_get(want, names[k]), &nw);
            float *fg = flatten(json_object_get(got, names[k]), &ng);
            char label[64];
            snprintf(label, sizeof label, "-inf mask %d, %s", m, names[k]);
            cr_expect(ng == nw && check_tensor(label, fg, fw, nw, 0.0, 0.0),
                      "%s differs from the causal answer", label);
            free(fw), free(fg);
        }
        json_decref(got);
        free(a.body);
    }
    json_decref(want);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, tokens_are_echoed)
{
    struct server s;
    server_start(&s, NULL);
    struct http_reply a = post(s.port, "{\"query\": [[1, 2], [3, 4]], \"num_heads\": 1, \"tokens\": "
                                   "[\"the\", \"cat\"], \"need_weights\": false}");
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"tokens\":[\"the\",\"cat\"]"), "%s", a.body);
    cr_assert_null(strstr(a.body, "attention_weights"));
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* The README's curl examples, sent as written, answer what the README says. */
Test(http, readme_examples_answer_what_the_readme_shows)
{
    char *md = fixture_read("README.md", NULL);
    struct server s;
    server_start(&s, NULL);
    char *at = strstr(md, "## Example");
    cr_assert_not_null(at, "README has no Example section");
    int checked = 0;
    for (int ex = 0; ex < 2; ex++) {
        char *d = strstr(at, "-d '");
        cr_assert_not_null(d, "example %d: no curl -d '...'", ex);
        d += 4;
        char *end = strchr(d, '\'');
        char body[512];
        snprintf(body, sizeof body, "%.*s", (int)(end - d), d);
        /* the answer: the next ```json block, wrapped (first example) or
         * on one line (second) */
        char want[4096] = "";
        char *blk = strstr(end, "```json\n");
        cr_assert_not_null(blk, "example %d: no ```json answer after it", ex + 1);
        blk += 8;
        char *stop = ex == 0 ? strstr(blk, "```") : strchr(blk, '\n');
        size_t w = 0;
        for (char *c = blk; c < stop && w < sizeof want - 1; c++)
            if (ex == 1 || (*c != ' ' && *c != '\n')) /* 0: undo the wrapping */
                want[w++] = *c;
        want[w] = '\0';
        struct http_reply a = post(s.port, body);
        cr_assert_str_eq(a.body, want, "README example %d drifted from the server", ex + 1);
        free(a.body);
        at = end;
        checked++;
    }
    cr_assert_eq(checked, 2);
    cr_assert_eq(server_stop(&s), 0);
    free(md);
}
