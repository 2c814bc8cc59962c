/* http_util.c -- the server process and the HTTP client of the HTTP tests;
 * see http_util.h. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/http_util.h"

/* A line in the test log that shows without --verbose and, unlike
 * cr_log_warn (which makes Criterion exit 1), does not fail the run: known
 * limits of a dependency, and skips. */
void loud(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("[NOTE] ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---------------------------------------------------------------------- */
/* Server process                                                          */


/* The server with extra flags; without a model repository unless
 * default_repo (or a flag in extra names one: the later flag wins). */
static void start(struct server *s, const char *const *extra, int default_repo)
{
    const char *bin = getenv("ATTN_SERVER") ? getenv("ATTN_SERVER") : "build/attention-server";
    /* gRPC off unless extra turns it on: servers started at once share no port */
    const char *argv[32] = {"--port", "0", "--bind", "127.0.0.1", "--grpc-port", "0",
                            "--model-repository", ""};
    int argc = default_repo ? 6 : 8;
    for (int i = 0; extra && extra[i] && argc < 30; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    char err[160];
    cr_assert_eq(server_spawn(s, bin, argv, err, sizeof err), 0, "%s", err);
}

void server_start(struct server *s, const char *const *extra)
{
    start(s, extra, 0);
}

void server_start_default(struct server *s, const char *const *extra)
{
    start(s, extra, 1);
}

/* CLOCK_MONOTONIC seconds. */
double check_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Check an error answer: status, slug, and optional message text. */
void expect_error(const struct http_reply *a, long status, const char *slug,
                         const char *contains)
{
    cr_assert_eq(a->status, status, "status %ld, want %ld: %s", a->status, status,
                 a->body ? a->body : "");
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "error body is not JSON: %s", a->body ? a->body : "(none)");
    const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
    const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
    cr_assert(code && strcmp(code, slug) == 0, "slug %s, want %s", code, slug);
    cr_assert(msg && (!contains || strstr(msg, contains)), "message '%s' lacks '%s'", msg,
              contains);
    json_decref(j);
}

void server_still_serves(int port)
{
    struct http_reply a = request(port, "GET", "/healthz", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "server stopped serving");
    free(a.body);
}

void server_wait_ready(struct server *s)
{
    cr_assert_eq(server_ready_within(s, 5), 0, "the server did not become ready");
}

void server_start_ready(struct server *s, const char *const *extra)
{
    server_start(s, extra);
    server_wait_ready(s);
}

/* A raw TCP connection to the server; rcvbuf > 0 shrinks its receive buffer
 * (set before connect, so the window stays small). */
int raw_connect(int port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "connect: %m");
    return fd;
}

int has_header(const struct http_reply *a, const char *name, const char *value)
{
    char line[512];
    snprintf(line, sizeof line, "\r\n%s: %s\r\n", name, value);
    return strstr(a->headers, line) != NULL;
}

int server_startup_output(const char *args, char *out, size_t outlen)
{
    const char *bin = getenv("ATTN_SERVER") ? getenv("ATTN_SERVER") : "build/attention-server";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 10 %s --port 0 --bind 127.0.0.1 --grpc-port 0 %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

double server_metric(int port, const char *name)
{
    struct http_reply a = request(port, "GET", "/metrics", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(a.body, key);
    cr_assert_not_null(p, "no %s in /metrics", name);
    const double v = strtod(p + strlen(key), NULL);
    free(a.body);
    return v;
}
