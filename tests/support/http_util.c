/* http_util.c -- the server process and the HTTP client of the HTTP tests;
 * see http_util.h. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
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
    snprintf(s->log, sizeof s->log, "/tmp/attn-test-XXXXXX");
    int fd = mkstemp(s->log);
    cr_assert_geq(fd, 0);
    const char *argv[32] = {bin, "--port", "0", "--bind", "127.0.0.1", "--model-repository", ""};
    int argc = default_repo ? 5 : 7;
    for (int i = 0; extra && extra[i] && argc < 30; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    s->pid = fork();
    cr_assert_geq(s->pid, 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan server if the test dies */
        dup2(fd, 2);
        execv(bin, (char *const *)argv);
        perror("execv");
        _exit(127);
    }
    close(fd);
    s->port = 0;
    for (int tries = 0; tries < 500 && !s->port; tries++) { /* up to 5 s */
        usleep(10000);
        FILE *f = fopen(s->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *at = strstr(line, "listening on http://");
            if (at) { /* host:port, host:port/ or [v6]:port; an IPv6 host has colons */
                at += strlen("listening on http://");
                at[strcspn(at, " /\n")] = '\0';
                if (strrchr(at, ':'))
                    s->port = atoi(strrchr(at, ':') + 1);
            }
        }
        if (f)
            fclose(f);
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid)
            cr_assert_fail("server exited during start-up (log %s)", s->log);
    }
    cr_assert_gt(s->port, 0, "server did not report its port (log %s)", s->log);
}

void server_start(struct server *s, const char *const *extra)
{
    start(s, extra, 0);
}

void server_start_default(struct server *s, const char *const *extra)
{
    start(s, extra, 1);
}

/* SIGTERM and wait; returns the exit status (or 128 + signal). */
int server_stop(struct server *s)
{
    kill(s->pid, SIGTERM);
    int st = 0;
    waitpid(s->pid, &st, 0);
    unlink(s->log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Wait for the server to exit (after a signal already sent); returns the
 * exit status (or 128 + signal). */
int server_wait(struct server *s)
{
    int st = 0;
    waitpid(s->pid, &st, 0);
    unlink(s->log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* CLOCK_MONOTONIC seconds. */
double check_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------- */
/* HTTP client                                                             */


size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct answer *a = ud;
    if (a->len + sz * n + 1 > a->cap) { /* doubling: a 55 MB answer in 16 KB
                                          pieces must not cost n² copies
                                          (ASan's realloc always copies) */
        size_t cap = a->cap ? a->cap : 1 << 16;
        while (cap < a->len + sz * n + 1)
            cap *= 2;
        char *nb = realloc(a->body, cap);
        if (!nb)
            return 0;
        a->body = nb, a->cap = cap;
    }
    char *nb = a->body;
    memcpy(nb + a->len, p, sz * n);
    a->len += sz * n;
    a->body[a->len] = '\0';
    return sz * n;
}

size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct answer *a = ud;
    size_t k = sz * n;
    if (a->hlen + k < sizeof a->headers - 1) {
        memcpy(a->headers + a->hlen, p, k);
        a->hlen += k;
        a->headers[a->hlen] = '\0';
    }
    return k;
}

/* Body source that hands out `chunk` bytes per callback (chunked upload). */

static size_t on_read(char *dst, size_t sz, size_t n, void *ud)
{
    struct src *s = ud;
    size_t k = sz * n < s->chunk ? sz * n : s->chunk;
    if (k > s->left)
        k = s->left;
    memcpy(dst, s->p, k);
    s->p += k, s->left -= k;
    return k;
}

/* method: "GET", "POST", ...; body may be NULL; ctype NULL = application/json;
 * chunk > 0 sends the body chunked, chunk bytes at a time. */
struct answer request(int port, const char *method, const char *path, const char *body,
                             size_t len, const char *ctype, size_t chunk)
{
    return request_with(port, method, path, body, len, ctype, chunk, NULL);
}

struct answer request_with(int port, const char *method, const char *path, const char *body,
                           size_t len, const char *ctype, size_t chunk,
                           const char *const *headers)
{
    struct answer a = {0};
    char url[256], ct[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    snprintf(ct, sizeof ct, "Content-Type: %s", ctype ? ctype : "application/json");
    h = curl_slist_append(h, ct);
    h = curl_slist_append(h, "Expect:");
    for (int i = 0; headers && headers[i]; i++)
        h = curl_slist_append(h, headers[i]);
    struct src s = {body, len, chunk};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body && chunk) {
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &s);
    } else if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    else
        a.status = -(long)rc;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return a;
}

struct answer post(int port, const char *body)
{
    return request(port, "POST", "/attention", body, strlen(body), NULL, 0);
}

/* Check an error answer: status, slug, and optional message text. */
void expect_error(const struct answer *a, long status, const char *slug,
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
    struct answer a = request(port, "GET", "/healthz", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "server stopped serving");
    free(a.body);
}

void server_wait_ready(struct server *s)
{
    for (int i = 0; i < 500; i++) {
        struct answer a = request(s->port, "GET", "/v2/health/ready", NULL, 0, NULL, 0);
        free(a.body);
        if (a.status == 200)
            return;
        usleep(10000);
    }
    cr_assert_fail("the server did not become ready");
}

void server_start_ready(struct server *s, const char *const *extra)
{
    server_start(s, extra);
    server_wait_ready(s);
}

int has_header(const struct answer *a, const char *name, const char *value)
{
    char line[512];
    snprintf(line, sizeof line, "\r\n%s: %s\r\n", name, value);
    return strstr(a->headers, line) != NULL;
}

int server_startup_output(const char *args, char *out, size_t outlen)
{
    const char *bin = getenv("ATTN_SERVER") ? getenv("ATTN_SERVER") : "build/attention-server";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 10 %s --port 0 --bind 127.0.0.1 %s 2>&1", bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, outlen - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}
