/* test_http_startup.c -- the real server's start-up and what it serves
 * besides attention: bad settings, bind addresses, the start-up line, health,
 * metrics, the spec and static files.
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

Test(http, health_readiness_metrics_and_spec)
{
    struct server s;
    server_start(&s, NULL);
    struct http_reply a = request(s.port, "GET", "/healthz", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    free(a.body);
    a = request(s.port, "GET", "/readyz", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert(strstr(a.body, "ready"));
    free(a.body);
    a = post(s.port, "{\"query\": [[1, 2]], \"num_heads\": 1}");
    cr_assert_eq(a.status, 200);
    /* the five stages, in order: the upload is its own stage */
    const char *timing = strstr(a.headers, "Server-Timing: receive;dur=");
    cr_assert(timing, "%s", a.headers);
    const char *stage[] = {"receive;", "queue;", "decode;", "compute;", "encode;"};
    for (int i = 1; i < 5; i++) {
        const char *next = strstr(timing, stage[i]);
        cr_assert(next && next < strchr(timing, '\r'), "%s after %s", stage[i], stage[i - 1]);
        timing = next;
    }
    free(a.body);
    a = post(s.port, "{\"query\": [[1, 2]]}");
    free(a.body);
    /* a worker resumes the connection before it marks itself idle: wait
     * (bounded) for the gauges to settle */
    for (int i = 0; i < 200; i++) {
        a = request(s.port, "GET", "/metrics", NULL, 0, NULL, 0);
        if (i == 199 || (a.body && strstr(a.body, "attention_workers_busy 0\n")))
            break;
        free(a.body);
        a.body = NULL;
        usleep(5000);
    }
    cr_assert_eq(a.status, 200);
    cr_assert(strstr(a.body, "attention_http_requests_total{endpoint=\"attention\",status=\"200\"} 1\n"),
              "%s", a.body);
    cr_assert(strstr(a.body, "attention_http_requests_total{endpoint=\"attention\",status=\"400\"} 1\n"));
    cr_assert(strstr(a.body, "attention_http_request_duration_seconds_bucket{endpoint=\"attention\",le=\"+Inf\"} 2\n"));
    cr_assert(strstr(a.body, "attention_queue_depth 0\n"));
    cr_assert(strstr(a.body, "attention_workers_busy 0\n"));
    cr_assert(strstr(a.body, "attention_inflight_bytes 0\n"));
    cr_assert(strstr(a.body, "attention_jobs_total 1\n"));
    for (int i = 0; i < 5; i++) {
        char want[96];
        snprintf(want, sizeof want, "attention_stage_duration_seconds_count{stage=\"%.*s\"} 1\n",
                 (int)strlen(stage[i]) - 1, stage[i]);
        cr_assert(strstr(a.body, want), "%s missing", want);
    }
    free(a.body);
    a = request(s.port, "GET", "/openapi.yaml", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    const char *spec = fixture_spec();
    cr_assert(strlen(spec) == a.len && memcmp(spec, a.body, a.len) == 0,
              "GET /openapi.yaml differs from the file");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http, bad_configuration_stops_startup_with_a_message)
{
    const char *bin = getenv("ATTN_SERVER") ? getenv("ATTN_SERVER") : "build/attention-server";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --workers 0 2>&1", bin);
    FILE *p = popen(cmd, "r");
    char out[512] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cr_assert_neq(WEXITSTATUS(st), 0);
    cr_assert(strstr(out, "workers") && strstr(out, "1..64"), "%s", out);
}

/* Static files: sent as they are on disk, up to 16 MiB; a bigger one is
 * refused with 413 rather than read into memory. */
Test(http, static_files_are_sent_from_disk_with_a_size_cap, .timeout = 60)
{
    char dir[] = "/tmp/attn-static-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128];
    const size_t small = 300000, cap = 16u << 20;
    unsigned char *bytes = malloc(cap + 1);
    for (size_t i = 0; i <= cap; i++)
        bytes[i] = (unsigned char)(i * 2654435761u >> 13);
    const struct { const char *name; size_t n; } files[] = {
        {"index.html", small}, {"at_cap.js", cap}, {"over_cap.js", cap + 1}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(bytes, 1, files[i].n, f), files[i].n);
        fclose(f);
    }
    const char *flags[] = {"--static-dir", dir, NULL};
    struct server s;
    server_start(&s, flags);
    struct http_reply a = request(s.port, "GET", "/", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert(a.len == small && memcmp(a.body, bytes, small) == 0, "index.html: %zu bytes",
              a.len);
    cr_assert(strstr(a.headers, "text/html"), "%s", a.headers);
    free(a.body);
    a = request(s.port, "GET", "/at_cap.js", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert(a.len == cap && memcmp(a.body, bytes, cap) == 0, "at_cap.js: %zu bytes", a.len);
    free(a.body);
    a = request(s.port, "GET", "/over_cap.js", NULL, 0, NULL, 0);
    expect_error(&a, 413, "payload_too_large", "16777216");
    free(a.body);
    a = request(s.port, "GET", "/missing.js", NULL, 0, NULL, 0);
    expect_error(&a, 404, "not_found", "/missing.js");
    free(a.body);
    server_still_serves(s.port);
    cr_assert_eq(server_stop(&s), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        unlink(path);
    }
    rmdir(dir);
    free(bytes);
}

/* Finding 10: bind took only IPv4. "::" listens on IPv6 and IPv4. */
Test(http, bind_takes_ipv6_and_dual_stack, .timeout = 30)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int have_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&lo, sizeof lo) == 0;
    if (probe >= 0)
        close(probe);
    if (!have_v6) {
        loud("SKIPPED bind_takes_ipv6_and_dual_stack: this host has no IPv6 loopback (::1)");
        cr_skip_test("no IPv6 loopback on this host");
    }
    const char *get = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct reply r;
    struct server s;
    const char *dual[] = {"--bind", "::", NULL};
    server_start(&s, dual);
    httpt_proto_send_af(AF_INET6, s.port, get, strlen(get), 3.0, &r);
    cr_assert(strncmp(r.buf, "HTTP/1.1 200", 12) == 0, "[::1]: %s", r.buf);
    httpt_proto_send_af(AF_INET, s.port, get, strlen(get), 3.0, &r);
    cr_assert(strncmp(r.buf, "HTTP/1.1 200", 12) == 0, "127.0.0.1 on '::': %s", r.buf);
    cr_assert_eq(server_stop(&s), 0);
    const char *v6only[] = {"--bind", "::1", NULL};
    server_start(&s, v6only);
    httpt_proto_send_af(AF_INET6, s.port, get, strlen(get), 3.0, &r);
    cr_assert(strncmp(r.buf, "HTTP/1.1 200", 12) == 0, "[::1] on '::1': %s", r.buf);
    cr_assert_eq(server_stop(&s), 0);
}

/* Finding 10: static_dir=/ served any readable .json/.html/... of the host. */
Test(http, static_dir_on_the_host_root_stops_startup)
{
    const char *bin = getenv("ATTN_SERVER") ? getenv("ATTN_SERVER") : "build/attention-server";
    const char *dirs[] = {"/", "/etc"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "timeout 5 %s --port 0 --bind 127.0.0.1 --static-dir %s 2>&1",
                 bin, dirs[i]);
        FILE *p = popen(cmd, "r");
        char out[1024] = "";
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2,
                  "static_dir=%s: exit status %d, want 2 (a setting refused): %s", dirs[i],
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
        cr_assert(strstr(out, "would be served"), "%s", out);
    }
}

/* The "listening on" line of a server started with extra, and the CPUs the
 * test process may use (the server inherits its affinity). */
static void startup_line(const char *const *extra, char *line, size_t len)
{
    struct server s;
    server_start(&s, extra);
    FILE *f = fopen(s.log, "r");
    cr_assert(f != NULL);
    line[0] = '\0';
    char buf[512];
    while (fgets(buf, sizeof buf, f))
        if (strstr(buf, "listening on http://"))
            snprintf(line, len, "%s", buf);
    fclose(f);
    cr_expect_eq(server_stop(&s), 0);
    cr_assert(line[0] != '\0', "no start-up line");
}

/* The start-up line names the page's address (the server's static_dir has
 * the page): with --bind 127.0.0.1 it is http://127.0.0.1:<port>/. */
Test(http, startup_line_names_the_page_url, .timeout = 60)
{
    char line[512], want[96];
    startup_line(NULL, line, sizeof line);
    int port = 0;
    const char *at = strstr(line, "listening on http://127.0.0.1:");
    cr_assert(at && sscanf(at, "listening on http://127.0.0.1:%d", &port) == 1, "line: %s", line);
    snprintf(want, sizeof want, "; the page: open http://127.0.0.1:%d/ in a browser\n", port);
    cr_expect(strstr(line, want) != NULL, "line: %s", line);
}

/* workers defaults to the CPUs this process may use (affinity and cgroup
 * quota) over threads_per_request, and the start-up line says so; a
 * workers setting wins and the line says it was set. */
Test(http, startup_line_says_where_workers_came_from, .timeout = 60)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int affinity = CPU_COUNT(&set);
    char line[512];

    startup_line(NULL, line, sizeof line);
    int n = 0, cpus = 0, aff = 0;
    char quota[16] = "";
    const char *at = strstr(line, "(workers ");
    cr_assert(at != NULL, "%s", line);
    cr_assert_eq(sscanf(at, "(workers %d (%d CPU", &n, &cpus), 2, "line: %s", line);
    const char *from = strstr(at, "affinity ");
    cr_assert(from != NULL && sscanf(from, "affinity %d, cgroup quota %15[^)]", &aff, quota) == 2,
              "line: %s", line);
    cr_expect_eq(aff, affinity, "line: %s", line);
    int q = strcmp(quota, "none") == 0 ? 0 : atoi(quota);
    cr_expect_eq(cpus, q > 0 && q < aff ? q : aff, "line: %s", line);
    cr_expect_eq(n, cpus, "line: %s", line);
    cr_expect(strstr(line, "), queue 64, threads_per_request 1,") != NULL, "line: %s", line);

    const char *tpr[] = {"--threads-per-request", "2", NULL};
    startup_line(tpr, line, sizeof line);
    at = strstr(line, "(workers ");
    cr_assert(at != NULL && sscanf(at, "(workers %d (%d CPU", &n, &cpus) == 2, "%s", line);
    cr_expect_eq(n, cpus / 2 < 1 ? 1 : cpus / 2, "line: %s", line);
    cr_expect(strstr(line, "/ threads_per_request") != NULL, "line: %s", line);

    const char *set3[] = {"--workers", "3", NULL};
    startup_line(set3, line, sizeof line);
    cr_expect(strstr(line, "(workers 3 (set), queue 64,") != NULL, "line: %s", line);
}
