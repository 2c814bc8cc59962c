/* test_http_load.c -- the real server under load: concurrent clients, a
 * full queue, memory budgets for bodies, and SIGTERM with requests in flight.
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
#include "tests/server/http_shared.h"

struct client {
    int port;
    const char *path;
    int ok;
};

static void *client_run(void *arg)
{
    struct client *c = arg;
    c->ok = check_golden(c->port, c->path, 2, c->ok); /* c->ok: base64 flag in */
    return NULL;
}

Test(http, thirty_two_concurrent_clients_all_answered_correctly)
{
    struct server s;
    server_start(&s, NULL);
    char *paths[64];
    int n = fixture_list("tests/golden", paths, 64);
    struct client cl[32];
    pthread_t th[32];
    for (int i = 0; i < 32; i++) {
        cl[i] = (struct client){s.port, paths[i % n], i % 2};
        pthread_create(&th[i], NULL, client_run, &cl[i]);
    }
    int good = 0;
    for (int i = 0; i < 32; i++) {
        pthread_join(th[i], NULL);
        good += cl[i].ok;
    }
    for (int i = 0; i < n; i++)
        free(paths[i]);
    cr_assert_eq(good, 32, "%d of 32 concurrent clients got correct answers", good);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, full_queue_answers_503_with_retry_after)
{
    const char *flags[] = {"--workers", "1", "--queue-depth", "1", NULL};
    struct server s;
    server_start(&s, flags);
    char *body = httpt_heavy_body();
    enum { NCLIENTS = 12 };
    struct heavy h[NCLIENTS];
    pthread_t th[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        h[i] = (struct heavy){s.port, body, 0, 0, 0};
        pthread_create(&th[i], NULL, httpt_heavy_run, &h[i]);
    }
    int ok = 0, busy = 0;
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(th[i], NULL);
        if (h[i].status == 200)
            ok++;
        if (h[i].status == 503) {
            busy++;
            cr_assert(h[i].retry_after, "503 without Retry-After");
            cr_assert(h[i].valid_error, "503 without the overloaded slug");
        }
    }
    cr_log_info("%d answered 200, %d answered 503", ok, busy);
    cr_assert_eq(ok + busy, NCLIENTS, "every client gets 200 or 503");
    cr_assert_geq(ok, 1);
    cr_assert_geq(busy, 1, "12 heavy requests at once on 1 worker + 1 queue slot: some "
                           "must be refused");
    free(body);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, sigterm_answers_requests_in_flight_then_exits_0)
{
    const char *flags[] = {"--workers", "1", "--queue-depth", "8", NULL};
    struct server s;
    server_start(&s, flags);
    char *body = httpt_heavy_body();
    enum { NCLIENTS = 4 };
    struct heavy h[NCLIENTS];
    pthread_t th[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
        h[i] = (struct heavy){s.port, body, 0, 0, 0};
        pthread_create(&th[i], NULL, httpt_heavy_run, &h[i]);
    }
    /* wait until all four are inside the server (busy + queued = 4) */
    for (int tries = 0; tries < 1000; tries++) {
        struct http_reply m = request(s.port, "GET", "/metrics", NULL, 0, NULL, 0);
        int q = -1, b = -1;
        char *at = m.body ? strstr(m.body, "\nattention_queue_depth ") : NULL;
        if (at)
            q = atoi(at + strlen("\nattention_queue_depth "));
        at = m.body ? strstr(m.body, "\nattention_workers_busy ") : NULL;
        if (at)
            b = atoi(at + strlen("\nattention_workers_busy "));
        free(m.body);
        if (q + b == NCLIENTS)
            break;
        usleep(5000);
    }
    /* Connections opened before the signal stay open while draining: on
     * them, readiness gets 503 shutting_down and new work is still
     * answered, each with Connection: close (a request sent into a
     * kept-alive connection is never refused or cut off). */
    char url[128];
    struct http_reply ka = {0};
    CURL *ready = curl_easy_init(), *work = curl_easy_init();
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", s.port);
    for (int i = 0; i < 2; i++) {
        CURL *k = i ? work : ready;
        curl_easy_setopt(k, CURLOPT_URL, url);
        curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(k, CURLOPT_WRITEDATA, &ka);
        cr_assert_eq(curl_easy_perform(k), CURLE_OK);
        free(ka.body);
        ka = (struct http_reply){0};
    }
    kill(s.pid, SIGTERM);
    usleep(100000); /* the heavy requests keep the drain going for far longer */
    snprintf(url, sizeof url, "http://127.0.0.1:%d/readyz", s.port);
    curl_easy_setopt(ready, CURLOPT_URL, url);
    cr_assert_eq(curl_easy_perform(ready), CURLE_OK);
    curl_easy_getinfo(ready, CURLINFO_RESPONSE_CODE, &ka.status);
    expect_error(&ka, 503, "shutting_down", "draining");
    free(ka.body);
    ka = (struct http_reply){0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(work, CURLOPT_URL, url);
    curl_easy_setopt(work, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(work, CURLOPT_POSTFIELDS, "{\"query\": [[1]], \"num_heads\": 1}");
    cr_assert_eq(curl_easy_perform(work), CURLE_OK);
    long fresh = -1;
    curl_easy_getinfo(work, CURLINFO_RESPONSE_CODE, &ka.status);
    curl_easy_getinfo(work, CURLINFO_NUM_CONNECTS, &fresh);
    cr_assert_eq(ka.status, 200, "work on an open connection while draining got %ld: %s",
                 ka.status, ka.body ? ka.body : "");
    cr_assert_eq(fresh, 0, "the request did not go over the connection already open");
    free(ka.body);
    ka = (struct http_reply){0};
    /* that answer said Connection: close, and nothing listens any more */
    cr_assert_eq(curl_easy_perform(work), CURLE_COULDNT_CONNECT,
                 "after a draining answer the connection should be closed and new ones refused");
    curl_slist_free_all(hdr);
    curl_easy_cleanup(ready);
    curl_easy_cleanup(work);
    int code = server_wait(&s); /* a second SIGTERM would stop it at once */
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(h[i].status, 200, "client %d got %ld during drain", i, h[i].status);
    }
    cr_assert_eq(code, 0, "exit status %d after SIGTERM", code);
    free(body);
}

Test(http, memory_budget_for_bodies_answers_503)
{
    /* One body larger than everything the server may hold at once. */
    const char *flags[] = {"--max-inflight-bytes", "1M", "--max-body-bytes", "8M", NULL};
    struct server s;
    server_start(&s, flags);
    size_t n = 3 << 20;
    char *big = malloc(n);
    memset(big, ' ', n);
    struct http_reply a = request(s.port, "POST", "/attention", big, n, NULL, 0);
    expect_error(&a, 503, "overloaded", "max_inflight_bytes");
    cr_assert(strstr(a.headers, "Retry-After: "), "%s", a.headers);
    free(a.body), free(big);
    /* the budget was given back: a normal request still works */
    a = post(s.port, "{\"query\": [[1, 2]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* A claimed length is not memory: clients that announce 1 MiB bodies
     * (together the whole 2M budget of the second server below) and send a
     * few bytes hold those bytes, not the claims. */
    cr_assert_eq(server_stop(&s), 0);
    const char *flags2[] = {"--max-inflight-bytes", "2M", "--max-body-bytes", "8M", NULL};
    server_start(&s, flags2);
    int fds[4];
    for (int i = 0; i < 4; i++) {
        fds[i] = raw_connect(s.port, 0);
        const char *h = "POST /attention HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                        "\r\nContent-Length: 1048576\r\n\r\n{\"query\"";
        cr_assert_eq(write(fds[i], h, strlen(h)), (ssize_t)strlen(h));
    }
    usleep(200000);
    a = post(s.port, "{\"query\": [[1, 2]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200, "announced but unsent bodies took the budget: %s", a.body);
    free(a.body);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    cr_assert_eq(server_stop(&s), 0);
}

/* A body of rows x cols copies of 0.5 with extra JSON fields. */
static char *uniform_body(int rows, int cols, const char *extra)
{
    size_t cap = (size_t)rows * (cols * 4 + 4) + 256, o = 0;
    char *b = malloc(cap);
    o += (size_t)snprintf(b + o, cap - o, "{\"query\": [");
    for (int i = 0; i < rows; i++) {
        b[o++] = '[';
        for (int j = 0; j < cols; j++)
            memcpy(b + o, j + 1 < cols ? "0.5," : "0.5]", 4), o += 4;
        if (i + 1 < rows)
            b[o++] = ',';
    }
    snprintf(b + o, cap - o, "], \"num_heads\": 1%s}", extra);
    return b;
}

struct bg_post {
    int port;
    const char *body;
    struct http_reply a;
};

static void *bg_post_run(void *arg)
{
    struct bg_post *p = arg;
    p->a = post(p->port, p->body);
    return NULL;
}

/* A body is given back to max_inflight_bytes once it is decoded, not when
 * its answer is ready: while A (655 KB) computes and encodes its 4 M
 * weights, B (410 KB) fits in the 1 MB budget beside it. */
Test(http, body_budget_is_given_back_after_decoding, .timeout = 120)
{
    const char *flags[] = {"--workers", "1", "--max-inflight-bytes", "1M", NULL};
    struct server s;
    server_start(&s, flags);
    char *a_body = uniform_body(2048, 80, "");
    char *b_body = uniform_body(1600, 64, ", \"need_weights\": false");
    cr_assert(strlen(a_body) + strlen(b_body) > (1u << 20) && strlen(a_body) < (1u << 20));
    struct bg_post a = {s.port, a_body, {0}};
    pthread_t th;
    pthread_create(&th, NULL, bg_post_run, &a);
    /* wait until the worker is busy with A and holds no body bytes: A is
     * decoded and still being computed or encoded (its 4 M weights take
     * far longer than a poll) */
    int seen = 0;
    for (int i = 0; i < 2000 && !seen; i++) {
        struct http_reply m = request(s.port, "GET", "/metrics", NULL, 0, NULL, 0);
        seen = m.body && strstr(m.body, "attention_workers_busy 1\n") &&
               strstr(m.body, "attention_inflight_bytes 0\n");
        free(m.body);
        if (!seen)
            usleep(2000);
    }
    struct http_reply b = post(s.port, b_body);
    pthread_join(th, NULL);
    cr_assert(seen, "never saw A computing with its body given back");
    cr_assert_eq(a.a.status, 200, "%.200s", a.a.body);
    cr_assert_eq(b.status, 200, "the budget still held A's body: %.200s", b.body);
    free(a.a.body), free(b.body), free(a_body), free(b_body);
    cr_assert_eq(server_stop(&s), 0);
}

/* Small jobs on a kept-alive connection may run on the network thread
 * (http/http.c, may_inline): the answers are those of new connections. */
Test(http, steps_on_one_kept_alive_connection_answer_as_on_new_connections)
{
    struct server s;
    server_start(&s, NULL);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", s.port);
    CURL *conn = curl_easy_init();
    for (int i = 0; i < 12; i++) {
        char body[2][256];
        for (int k = 0; k < 2; k++)
            snprintf(body[k], sizeof body[k],
                     "{\"query\": [[%d, 0.5]], \"key\": [[0.25, %d]], \"value\": [[1, %d]], "
                     "\"num_heads\": 1, \"sequence_id\": \"%s\"%s}",
                     i % 3, i % 5, i, k ? "fresh" : "kept", i ? "" : ", \"sequence_start\": true");
        struct http_call call = {.curl = conn, .method = "POST", .url = url, .body = body[0],
                                 .len = strlen(body[0]), .ctype = "application/json",
                                 .timeout = 30};
        struct http_reply kept = http_fetch(&call);
        long fresh_connections = -1;
        curl_easy_getinfo(conn, CURLINFO_NUM_CONNECTS, &fresh_connections);
        struct http_reply fresh = request(s.port, "POST", "/attention", body[1],
                                          strlen(body[1]), NULL, 0);
        cr_assert_eq(kept.status, 200, "step %d: %ld %s", i, kept.status, kept.body);
        cr_assert_eq(fresh.status, 200, "step %d: %ld %s", i, fresh.status, fresh.body);
        cr_assert_str_eq(kept.body, fresh.body, "step %d", i);
        cr_assert(i == 0 || fresh_connections == 0, "step %d was not on the same connection", i);
        free(kept.body);
        free(fresh.body);
    }
    curl_easy_cleanup(conn);
    cr_assert_eq(server_stop(&s), 0);
}

/* A request whose body is small but whose job is slow: L = S = 2048, E =
 * 4, weights asked (a few tens of ms). */
static char *slow_small_body(void)
{
    const int L = 2048, E = 4;
    size_t cap = (size_t)L * E * 8 + 256, n = 0;
    char *b = malloc(cap);
    cr_assert(b);
    n += (size_t)snprintf(b + n, cap - n, "{\"query\": [");
    unsigned long long st = 7;
    for (int i = 0; i < L; i++) {
        n += (size_t)snprintf(b + n, cap - n, "%s[", i ? "," : "");
        for (int j = 0; j < E; j++)
            n += (size_t)snprintf(b + n, cap - n, "%s%.2f", j ? "," : "",
                                  (double)check_randf(&st));
        n += (size_t)snprintf(b + n, cap - n, "]");
    }
    /* four heads' full weights computed (the work), pooled to a few numbers
     * (an answer sent at once) */
    snprintf(b + n, cap - n, "], \"num_heads\": 4, \"need_weights\": true, "
                             "\"weights_pool\": 512, \"output_encoding\": \"base64\"}");
    return b;
}

struct slow {
    CURL *conn;
    const char *url, *body;
    struct http_reply a;
    double done_s; /* when its answer had arrived */
};

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
    (void)p, (void)ud;
    return sz * n;
}

static void *slow_run(void *arg)
{
    struct slow *w = arg;
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_reset(w->conn);
    curl_easy_setopt(w->conn, CURLOPT_URL, w->url);
    curl_easy_setopt(w->conn, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(w->conn, CURLOPT_POSTFIELDS, w->body);
    curl_easy_setopt(w->conn, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(w->conn, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(w->conn, CURLOPT_HEADERDATA, &w->a);
    if (curl_easy_perform(w->conn) == CURLE_OK)
        curl_easy_getinfo(w->conn, CURLINFO_RESPONSE_CODE, &w->a.status);
    w->done_s = httpt_now_s();
    curl_slist_free_all(h);
    return NULL;
}

/* The slow request on conn and, 5 ms into it, a health check on a new
 * connection: 1 when the check was held up (its answer came after the slow
 * one's), else 0. An order, not a duration: a loaded machine stretches
 * both, but a network thread that is free answers the check while a
 * worker computes the slow job (at least 5 ms, its Server-Timing says). */
static double health_during_slow(int port, CURL *conn, const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/attention", port);
    struct slow w = {conn, url, body, {0}, 0.0};
    pthread_t th;
    pthread_create(&th, NULL, slow_run, &w);
    usleep(5000);
    const double t0 = httpt_now_s();
    struct http_reply live = request(port, "GET", "/v2/health/live", NULL, 0, NULL, 0);
    const double health_done = httpt_now_s(), health_s = health_done - t0;
    pthread_join(th, NULL);
    cr_assert_eq(live.status, 200);
    free(live.body);
    cr_assert_eq(w.a.status, 200, "the slow request: %ld", w.a.status);
    const char *timing = header(&w.a, "Server-Timing");
    const char *at = timing ? strstr(timing, "compute;dur=") : NULL;
    cr_assert(at, "no compute time in %s", w.a.headers);
    const double compute_s = atof(at + strlen("compute;dur=")) / 1e3;
    cr_log_info("health check %.2f ms during a job of %.2f ms", health_s * 1e3, compute_s * 1e3);
    cr_assert_gt(compute_s, 0.005, "the slow request took %.2f ms only", compute_s * 1e3);
    return health_done > w.done_s ? 1.0 : 0.0;
}

/* Three quick requests on conn: POST path (v2 infer or /attention). */
static void quick_jobs(int port, CURL *conn, const char *path)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    const char *tiny = strstr(path, "/v2/")
                           ? "{\"inputs\": [{\"name\": \"query\", \"datatype\": \"FP32\", "
                             "\"shape\": [1, 2], \"data\": [1, 2]}], "
                             "\"parameters\": {\"num_heads\": 1}}"
                           : "{\"query\": [[1, 2]], \"num_heads\": 1}";
    for (int i = 0; i < 3; i++) {
        struct http_call call = {.curl = conn, .method = "POST", .url = url, .body = tiny,
                                 .len = strlen(tiny), .ctype = "application/json",
                                 .timeout = 30};
        struct http_reply a = http_fetch(&call);
        cr_assert_eq(a.status, 200, "%s: %ld %s", path, a.status, a.body);
        free(a.body);
    }
}

/* The network thread runs a job itself only while the last one on its
 * connection was quick and on the same row, and none there was slow
 * lately: the first job on a connection, one on another row, the one after
 * a slow job, and any just after a slow one on the network thread go to a
 * worker, and other clients are answered meanwhile. */
Test(http, a_slow_job_sends_the_next_one_on_its_connection_to_a_worker, .timeout = 60)
{
    struct server s;
    server_start(&s, NULL);
    char *slow = slow_small_body();
    cr_assert_lt(strlen(slow), 64 * 1024);
    CURL *conn = curl_easy_init();
    cr_assert_lt(health_during_slow(s.port, conn, slow), 0.5,
                 "the first job on a connection held up a health check");
    quick_jobs(s.port, conn, "/v2/models/attention/infer");
    cr_assert_lt(health_during_slow(s.port, conn, slow), 0.5,
                 "a job after quick ones on another row held up a health check");
    quick_jobs(s.port, conn, "/attention"); /* the next may run on the network thread */
    (void)health_during_slow(s.port, conn, slow); /* may hold up the check: one job */
    cr_assert_lt(health_during_slow(s.port, conn, slow), 0.5,
                 "the job after a slow one held up a health check");
    /* one slow job on the network thread keeps jobs off it for ten times
     * as long, on every connection */
    quick_jobs(s.port, conn, "/attention");
    (void)health_during_slow(s.port, conn, slow);
    CURL *other = curl_easy_init();
    quick_jobs(s.port, other, "/attention");
    cr_assert_lt(health_during_slow(s.port, other, slow), 0.5,
                 "a slow job on another connection just after one on the network thread "
                 "held up a health check");
    curl_easy_cleanup(other);
    long fresh_connections = -1;
    curl_easy_getinfo(conn, CURLINFO_NUM_CONNECTS, &fresh_connections);
    cr_assert_eq(fresh_connections, 0, "the requests were not on one connection");
    curl_easy_cleanup(conn);
    free(slow);
    cr_assert_eq(server_stop(&s), 0);
}
