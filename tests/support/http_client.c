/* http_client.c -- the tests' HTTP client and server process; see
 * http_client.h. */
#include "tests/support/http_client.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <errno.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* Server process                                                          */

int server_spawn(struct server *s, const char *bin, const char *const *argv, char *err,
                 size_t errlen)
{
    const char *args[40] = {bin};
    int argc = 1;
    for (int i = 0; argv && argv[i] && argc < 39; i++)
        args[argc++] = argv[i];
    args[argc] = NULL;
    snprintf(s->log, sizeof s->log, "/tmp/attn-test-XXXXXX");
    int fd = mkstemp(s->log);
    if (fd < 0) {
        snprintf(err, errlen, "mkstemp: %s", strerror(errno));
        return -1;
    }
    s->pid = fork();
    if (s->pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan server if the test dies */
        dup2(fd, 2);
        execv(bin, (char *const *)args);
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
            char *at = strstr(line, "listening on http");
            if (at && (at = strstr(at, "://"))) {
                /* http(s)://host:port, host:port/ or [v6]:port; an IPv6 host has colons */
                at += strlen("://");
                at[strcspn(at, " /\n")] = '\0';
                if (strrchr(at, ':'))
                    s->port = atoi(strrchr(at, ':') + 1);
            }
        }
        if (f)
            fclose(f);
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            snprintf(err, errlen, "server exited during start-up (log %s)", s->log);
            return -1;
        }
    }
    if (s->port <= 0) {
        snprintf(err, errlen, "server did not report its port (log %s)", s->log);
        return -1;
    }
    return 0;
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

int server_ready_within(const struct server *s, int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        struct http_reply a = request(s->port, "GET", "/v2/health/ready", NULL, 0, NULL, 0);
        free(a.body);
        if (a.status == 200)
            return 0;
        usleep(10000);
    }
    return -1;
}

/* ---------------------------------------------------------------------- */
/* HTTP client                                                             */

size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct http_reply *a = ud;
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
    struct http_reply *a = ud;
    size_t k = sz * n;
    if (a->hlen + k < sizeof a->headers - 1) {
        memcpy(a->headers + a->hlen, p, k);
        a->hlen += k;
        a->headers[a->hlen] = '\0';
    }
    return k;
}

/* Body source that hands out `chunk` bytes per callback (chunked upload). */

struct src {
    const char *p;
    size_t left, chunk;
};

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

struct http_reply http_fetch(const struct http_call *call)
{
    struct http_reply a = {0};
    CURL *c = call->curl, *own = c ? NULL : curl_easy_init();
    if (own)
        c = own;
    curl_easy_reset(c);
    struct curl_slist *h = NULL;
    char ct[128];
    if (call->ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", call->ctype);
        h = curl_slist_append(h, ct);
    }
    h = curl_slist_append(h, "Expect:");
    for (int i = 0; call->headers && call->headers[i]; i++)
        h = curl_slist_append(h, call->headers[i]);
    struct src s = {call->body, call->len, call->chunk};
    curl_easy_setopt(c, CURLOPT_URL, call->url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, call->method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, call->timeout);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (call->cafile)
        curl_easy_setopt(c, CURLOPT_CAINFO, call->cafile);
    if (call->body && call->chunk) {
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &s);
    } else if (call->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, call->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->len);
    } else if (strcmp(call->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    else
        a.status = -(long)rc;
    curl_slist_free_all(h);
    if (own)
        curl_easy_cleanup(own);
    return a;
}

/* The value of header name in a, or NULL (static buffer). */
const char *header(const struct http_reply *a, const char *name)
{
    static char v[256];
    const size_t n = strlen(name);
    for (const char *p = a->headers; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            p += n + 1;
            while (*p == ' ')
                p++;
            size_t k = strcspn(p, "\r\n");
            snprintf(v, sizeof v, "%.*s", (int)(k < sizeof v ? k : sizeof v - 1), p);
            return v;
        }
    return NULL;
}

struct http_reply request(int port, const char *method, const char *path, const char *body,
                      size_t len, const char *ctype, size_t chunk)
{
    return request_with(port, method, path, body, len, ctype, chunk, NULL);
}

struct http_reply request_with(int port, const char *method, const char *path, const char *body,
                           size_t len, const char *ctype, size_t chunk,
                           const char *const *headers)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    const struct http_call c = {NULL, method, url, body, len,
                                ctype ? ctype : "application/json", chunk, headers, NULL, 120};
    return http_fetch(&c);
}

struct http_reply post(int port, const char *body)
{
    return request(port, "POST", "/attention", body, strlen(body), NULL, 0);
}

