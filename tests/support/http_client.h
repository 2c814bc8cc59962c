/* http_client.h -- the HTTP client of the tests and the attention-server
 * process they talk to, without Criterion (jansson-free, libcurl only), so
 * that tools outside the test binaries link it too (tests/differential.c).
 * http_util.h adds what asserts. */
#ifndef TESTS_HTTP_CLIENT_H
#define TESTS_HTTP_CLIENT_H

#include <stddef.h>
#include <sys/types.h>

struct server {
    pid_t pid;
    int port;
    char log[64];
};

struct http_reply {
    long status; /* -(curl error) when the transfer failed */
    char *body;  /* malloc'd, NUL-terminated; the caller frees */
    size_t len, cap;
    char headers[2048];
    size_t hlen;
};

/* Start bin with argv (the flags after the program's name, NULL-terminated;
 * they should include --port 0), its stderr into a temporary log, and wait
 * up to 5 s for the port it reports. 0, or -1 with the reason in err. */
int server_spawn(struct server *s, const char *bin, const char *const *argv, char *err,
                 size_t errlen);
/* Wait up to seconds for GET /v2/health/ready to answer 200 (the models of
 * a repository loaded): 0, or -1. */
int server_ready_within(const struct server *s, int seconds);
/* SIGTERM and wait; returns the exit status (or 128 + signal). */
int server_stop(struct server *s);
/* Wait for the server to exit (after a signal already sent). */
int server_wait(struct server *s);

/* One request. */
struct http_call {
    void *curl;                 /* a CURL handle to reuse (reset first), or NULL */
    const char *method;         /* "GET", "POST", ...; HEAD without a body reads none */
    const char *url;
    const char *body;           /* may be NULL */
    size_t len;
    const char *ctype;          /* Content-Type, or NULL for none (libcurl's for a body) */
    size_t chunk;               /* > 0: the body chunked, chunk bytes at a time */
    const char *const *headers; /* extra lines "Name: value", NULL-terminated, or NULL */
    const char *cafile;         /* to trust for https; NULL: the system's */
    long timeout;               /* seconds */
};
struct http_reply http_fetch(const struct http_call *c);

/* libcurl callbacks gathering an answer's body and headers (ud: struct http_reply). */
size_t on_body(char *p, size_t sz, size_t n, void *ud);
size_t on_header(char *p, size_t sz, size_t n, void *ud);

/* To http://127.0.0.1:port path. method: "GET", "POST", ...; body may be
 * NULL; ctype NULL = application/json; chunk > 0 sends the body chunked,
 * chunk bytes at a time. */
struct http_reply request(int port, const char *method, const char *path, const char *body,
                      size_t len, const char *ctype, size_t chunk);
/* The same with extra header lines ("Name: value", NULL-terminated). */
struct http_reply request_with(int port, const char *method, const char *path, const char *body,
                           size_t len, const char *ctype, size_t chunk,
                           const char *const *headers);
struct http_reply post(int port, const char *body);
/* The value of header name in a, or NULL (static buffer). */
const char *header(const struct http_reply *a, const char *name);

#endif
