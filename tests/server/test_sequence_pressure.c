/* test_sequence_pressure.c -- sequences under pressure, end to end over
 * HTTP (docs/sequences.md, "Limits"): a step that can never fit is a 413
 * that evicts nobody; a refused start evicts nobody; a 503 carries one
 * Retry-After on both protocols; the idle timer counts steps that succeed
 * and were answered, not refused probes, and not the time an answer takes
 * to send. */
#define _GNU_SOURCE /* strcasestr */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

/* A growable text buffer for request bodies. */
struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (t->s && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->cap + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        cr_assert_not_null(t->s);
    }
}

/* rows x width numbers as a JSON matrix: small values that vary, or
 * `big` everywhere when it is not 0. */
static void put_matrix(struct text *t, int rows, int width, double big)
{
    put(t, "[");
    for (int i = 0; i < rows; i++) {
        put(t, "%s[", i ? "," : "");
        for (int j = 0; j < width; j++)
            put(t, "%s%g", j ? "," : "", big != 0 ? big : (double)((i * 7 + j * 3) % 11) / 10.0);
        put(t, "]");
    }
    put(t, "]");
}

/* An /attention step of id: query (L, width), key = value = query (the
 * default), num_heads h, `extra` JSON members (may be ""). */
static char *step_body(const char *id, int start, int L, int width, int h, const char *extra)
{
    struct text t = {0};
    put(&t, "{\"sequence_id\":\"%s\",\"sequence_start\":%s,\"num_heads\":%d,\"query\":", id,
        start ? "true" : "false", h);
    put_matrix(&t, L, width, 0);
    put(&t, "%s%s}", *extra ? "," : "", extra);
    return t.s;
}

static struct http_reply send_step(int port, const char *id, int start, int L, int width, int h,
                                   const char *extra)
{
    char *b = step_body(id, start, L, width, h, extra);
    struct http_reply a = request(port, "POST", "/attention", b, strlen(b), NULL, 0);
    free(b);
    return a;
}

/* A one-row step of id (E 4, 2 heads) answers 200, or fails the test. */
static void tiny_ok(int port, const char *id, int start)
{
    struct http_reply a = send_step(port, id, start, 1, 4, 2, "");
    cr_assert_eq(a.status, 200, "step of %s: %ld %s", id, a.status, a.body);
    free(a.body);
}

/* How many header lines name `name` (case as the server writes it). */
static int header_count(const struct http_reply *a, const char *name)
{
    char key[128];
    snprintf(key, sizeof key, "\n%s:", name);
    int n = 0;
    for (const char *p = a->headers; (p = strstr(p, key)); p += strlen(key))
        n++;
    return n;
}

/* ---------------------------------------------------------------------- */
/* 1, 2: decide first, then evict                                         */

Test(sequence_pressure, a_step_that_can_never_fit_is_413_and_evicts_nobody)
{
    struct server s;
    /* one 1 MiB block of a 512-wide head fits, two never do */
    const char *const flags[] = {"--max-sequence-bytes", "1536K", NULL};
    server_start(&s, flags);
    tiny_ok(s.port, "bystander", 1); /* idle: what a wrong eviction would take */
    /* a start that alone needs two blocks (300 rows x 512): never fits */
    struct http_reply a = send_step(s.port, "huge", 1, 300, 512, 1, "\"need_weights\":false");
    expect_error(&a, 413, "payload_too_large", "max_sequence_bytes");
    cr_assert(strstr(a.body, "never"), "%s", a.body);
    cr_assert_eq(header_count(&a, "Retry-After"), 0, "a 413 says not to retry: %s", a.headers);
    free(a.body);
    /* a step whose growth alone passes it: the same, the sequence as it was */
    a = send_step(s.port, "big", 1, 200, 512, 1, "\"need_weights\":false");
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = send_step(s.port, "big", 0, 100, 512, 1, "\"need_weights\":false");
    expect_error(&a, 413, "payload_too_large", "'big'");
    free(a.body);
    a = send_step(s.port, "big", 0, 56, 512, 1, "\"need_weights\":false");
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"cache_length\":256"), "%s", a.body);
    free(a.body);
    /* nobody was evicted for them */
    tiny_ok(s.port, "bystander", 0);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 0);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_pressure, a_refused_start_evicts_nobody)
{
    struct server s;
    const char *const flags[] = {"--max-sequences", "1", NULL};
    server_start(&s, flags);
    tiny_ok(s.port, "keeper", 1);
    /* with max_sequences reached, starts refused for their body */
    const char *refused[] = {
        "\"key_padding_mask\":[false,false,false]",           /* 3 entries for 1 row */
        "\"attn_mask\":[[false,false],[false,false]]",        /* (2, 2) for (1, 1) */
        "\"kv_cache_dtype\":\"FP16\",\"weights\":{\"in_proj_weight\":" /* beyond FP16 */
        "[[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1],[0,0,0,1e5],[0,1,0,0],[0,0,1,0],[0,0,0,1],"
        "[1,0,0,0],[0,1,0,0],[0,0,1,0],[0,0,0,1]]}",
    };
    const long status[] = {400, 400, 400};
    for (int i = 0; i < 3; i++) {
        struct http_reply a = send_step(s.port, "newcomer", 1, 1, 4, 2, refused[i]);
        cr_assert_eq(a.status, status[i], "refusal %d: %ld %s", i, a.status, a.body);
        free(a.body);
        /* the idle sequence is still there, its cache one step longer */
        a = send_step(s.port, "keeper", 0, 1, 4, 2, "");
        cr_assert_eq(a.status, 200, "after refusal %d: %ld %s", i, a.status, a.body);
        char want[32];
        snprintf(want, sizeof want, "\"cache_length\":%d", i + 2);
        cr_assert(strstr(a.body, want), "%s", a.body);
        free(a.body);
    }
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 0);
    /* a start that is not refused takes the place of the idle one */
    tiny_ok(s.port, "newcomer", 1);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* 4, 5: an answer being sent holds its sequence                          */

/* Send a start of id whose answer (the weights of 1024 x 1024 keys for 2
 * heads, ~20 MB of JSON) cannot fit the socket buffers, on a raw
 * connection with a small receive buffer, and read its first byte: the
 * answer is being sent, and stays so until the test reads it. */
static int slow_start(int port, const char *id)
{
    int fd = raw_connect(port, 4096);
    char *b = step_body(id, 1, 1024, 4, 2, "\"need_weights\":true");
    char head[256];
    const int n = snprintf(head, sizeof head, "POST /attention HTTP/1.1\r\nHost: x\r\n"
                           "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                           strlen(b));
    cr_assert_eq(send(fd, head, (size_t)n, 0), n);
    cr_assert_eq(send(fd, b, strlen(b), 0), (ssize_t)strlen(b));
    free(b);
    char c;
    cr_assert_eq(recv(fd, &c, 1, 0), 1, "no answer began");
    return fd;
}

/* Read the rest of fd's answer (its first byte read); its status. */
static int drain(int fd)
{
    char buf[65536];
    size_t have = 1, hl = 0;
    static char hdr[8192] = "H";
    long long clen = -1;
    while (clen < 0) {
        const ssize_t n = recv(fd, hdr + have, sizeof hdr - 1 - have, 0);
        cr_assert_gt(n, 0, "the answer's headers were cut");
        have += (size_t)n;
        hdr[have] = '\0';
        const char *end = strstr(hdr, "\r\n\r\n"), *cl = strcasestr(hdr, "Content-Length:");
        if (end && cl) {
            clen = atoll(cl + 15);
            hl = (size_t)(end + 4 - hdr);
        }
    }
    long long left = clen - (long long)(have - hl);
    while (left > 0) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        cr_assert_gt(n, 0, "the answer was cut with %lld bytes left", left);
        left -= n;
    }
    close(fd);
    return atoi(hdr + 9);
}

Test(sequence_pressure, a_503_carries_one_retry_after)
{
    struct server s;
    const char *const flags[] = {"--max-sequences", "1", "--min-send-rate", "0", NULL};
    server_start(&s, flags);
    const int fd = slow_start(s.port, "held");
    /* the only place is held while its answer is sent: a new start waits */
    struct http_reply a = send_step(s.port, "other", 1, 1, 4, 2, "");
    expect_error(&a, 503, "overloaded", "max_sequences");
    cr_assert_eq(header_count(&a, "Retry-After"), 1, "%s", a.headers);
    free(a.body);
    const char *v2 = "{\"parameters\":{\"num_heads\":2,\"sequence_id\":\"other\","
                     "\"sequence_start\":true},\"inputs\":[{\"name\":\"query\",\"shape\":[1,4],"
                     "\"datatype\":\"FP32\",\"data\":[1,0,0,1]}]}";
    a = request(s.port, "POST", "/v2/models/attention/infer", v2, strlen(v2), NULL, 0);
    expect_v2_error(&a, 503, "max_sequences");
    cr_assert_eq(header_count(&a, "Retry-After"), 1, "%s", a.headers);
    free(a.body);
    cr_assert_eq(drain(fd), 200);
    /* sent: the sequence steps on, and is idle for the next start to take */
    a = send_step(s.port, "held", 0, 1, 4, 2, "");
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"cache_length\":1025"), "%s", a.body);
    free(a.body);
    tiny_ok(s.port, "other", 1);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_pressure, a_slow_answer_keeps_its_sequence)
{
    struct server s;
    const char *const flags[] = {"--sequence-idle-timeout", "1", "--min-send-rate", "0", NULL};
    server_start(&s, flags);
    const int fd = slow_start(s.port, "slow-reader");
    usleep(2500 * 1000); /* the answer takes longer to read than the timeout */
    tiny_ok(s.port, "someone-else", 1); /* a sweep of the idle sequences */
    cr_assert_eq(drain(fd), 200);
    struct http_reply a = send_step(s.port, "slow-reader", 0, 1, 4, 2, "");
    cr_assert_eq(a.status, 200, "the sequence was lost while its answer was sent: %s", a.body);
    cr_assert(strstr(a.body, "\"cache_length\":1025"), "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_pressure, a_refused_request_does_not_keep_a_sequence_alive)
{
    struct server s;
    const char *const flags[] = {"--sequence-idle-timeout", "2", NULL};
    server_start(&s, flags);
    tiny_ok(s.port, "victim", 1);
    const double t0 = check_now();
    usleep(1200 * 1000);
    /* a stranger's refused requests on it: another head count, another model */
    struct http_reply a = send_step(s.port, "victim", 0, 1, 4, 1, "");
    expect_error(&a, 400, "invalid_parameter", "num_heads");
    free(a.body);
    a = send_step(s.port, "victim", 0, 1, 4, 2, "\"model\":\"no-such-model\"");
    cr_assert_geq(a.status, 400, "%s", a.body);
    free(a.body);
    usleep(1400 * 1000);
    cr_assert_gt(check_now() - t0, 2.0);
    /* 2.6 s after its last step: gone (the refusals 1.4 s ago did not count) */
    a = send_step(s.port, "victim", 0, 1, 4, 2, "");
    expect_error(&a, 400, "sequence_not_found", "'victim'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}
