/* route.c -- matching paths against the route table, and the helpers of
 * struct route_response; see route.h. No libmicrohttpd: the api layer
 * and the tests link it alone. */
#include "http/route.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

double route_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Patterns are short: an optional part is tried by writing the pattern
 * out with it and without it. */
#define PATTERN_MAX 256

static int match(const char *p, const char *s, struct route_request *rq)
{
    for (;;) {
        if (*p == '*' && p[1] == '\0')
            return 1;
        if (*p == '[') {
            const char *close = strchr(p, ']');
            char with[PATTERN_MAX];
            if (!close)
                return 0;
            const size_t inside = (size_t)(close - p - 1), after = strlen(close + 1);
            const int kept = rq->ncaptures;
            if (inside + after < sizeof with) {
                memcpy(with, p + 1, inside);
                memcpy(with + inside, close + 1, after + 1);
                if (match(with, s, rq))
                    return 1;
            }
            rq->ncaptures = kept;
            p = close + 1;
            continue;
        }
        if (*p == '{') {
            const char *close = strchr(p, '}');
            if (!close || rq->ncaptures >= ROUTE_CAPTURES)
                return 0;
            const size_t namelen = strcspn(p + 1, ":}");
            size_t max = ROUTE_CAPTURE_BYTES - 1;
            if (p[1 + namelen] == ':')
                max = strtoul(p + 2 + namelen, NULL, 10);
            const size_t n = strcspn(s, "/");
            struct route_capture *c = &rq->captures[rq->ncaptures];
            if (n == 0 || n > max || n >= sizeof c->value || namelen >= sizeof c->name)
                return 0;
            memcpy(c->name, p + 1, namelen);
            c->name[namelen] = '\0';
            memcpy(c->value, s, n);
            c->value[n] = '\0';
            rq->ncaptures++;
            p = close + 1, s += n;
            continue;
        }
        if (*p == '\0' || *p != *s)
            return *p == '\0' && *s == '\0';
        p++, s++;
    }
}

int route_match(const char *pattern, const char *path, struct route_request *rq)
{
    rq->ncaptures = 0;
    if (match(pattern, path, rq))
        return 1;
    rq->ncaptures = 0;
    return 0;
}

const struct route *route_find(const struct route_table *t, const char *path,
                               struct route_request *rq)
{
    for (size_t i = 0; i < t->count; i++) {
        if (route_match(t->rows[i].path, path, rq))
            return &t->rows[i];
    }
    rq->ncaptures = 0;
    return NULL;
}

const char route_http_reads[] = "Content-Type, Content-Encoding, X-Request-Id";
const char route_http_sends[] = "Retry-After, Allow, X-Request-Id, Accept-Encoding";

const char *route_list_next(const char **p, size_t *n)
{
    const char *q = *p ? *p + strspn(*p, " ,") : NULL;
    if (!q || !*q)
        return NULL;
    size_t k = strcspn(q, ","), t = k;
    while (t > 0 && q[t - 1] == ' ')
        t--;
    *n = t, *p = q + k;
    return q;
}

int route_list_has(const char *list, const char *name)
{
    const size_t len = strlen(name);
    size_t n;
    for (const char *p = list, *item; (item = route_list_next(&p, &n));)
        if (n == len && strncasecmp(item, name, n) == 0)
            return 1;
    return 0;
}

const char *route_param(const struct route_request *rq, const char *name)
{
    for (int i = 0; i < rq->ncaptures; i++)
        if (strcmp(rq->captures[i].name, name) == 0)
            return rq->captures[i].value;
    return "";
}

int route_header_set(struct route_response *out, const char *name, const char *value)
{
    for (int i = 0; i < ROUTE_HEADERS; i++) {
        struct route_header *h = &out->headers[i];
        if (!h->name || strcmp(h->name, name) == 0) {
            h->name = name;
            snprintf(h->value, sizeof h->value, "%s", value);
            return 0;
        }
    }
    return -1;
}

const char *route_header_get(const struct route_response *out, const char *name)
{
    for (int i = 0; i < ROUTE_HEADERS; i++)
        if (out->headers[i].name && strcmp(out->headers[i].name, name) == 0)
            return out->headers[i].value;
    return NULL;
}

void route_fail(const struct route_request *rq, struct route_response *out, int code,
                const char *fmt, ...)
{
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rq->route->error(out, code, msg);
}

void route_response_free(struct route_response *out)
{
    free(out->body);
    out->body = NULL;
    if (out->reader && out->free_reader)
        out->free_reader(out->reader);
    out->reader = NULL;
    out->read = NULL;
    out->free_reader = NULL;
    if (out->has_fd)
        close(out->fd);
    out->has_fd = 0;
    void (*done)(void *) = out->done;
    out->done = NULL;
    if (done)
        done(out->done_cls);
}
