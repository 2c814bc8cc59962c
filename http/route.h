/* route.h -- what the transport serves: a table of routes, the request a
 * handler sees and the response it fills. No libmicrohttpd here, and
 * nothing of a protocol or a model: the api layer (api/routes.c) writes
 * the table, the transport (http/http.c) serves it, main.c hands one to
 * the other.
 *
 * One row per endpoint:
 *
 *     {ROUTE_POST, "/things/{name}[/versions/{version:31}]", ROUTE_BODY | ROUTE_CORS,
 *      json_error, "things", things_post, things_check, NULL, "X-Thing-Tag", "ETag"}
 *
 * The transport matches a request's path against the rows in order (the
 * first match wins; the table's last row must match every path, "*"),
 * then drives everything from the row's columns:
 *
 *   methods   ROUTE_GET (GET and HEAD) or ROUTE_POST: another method is 405
 *             with Allow. 0: the path names no endpoint; check says why
 *             (404), nothing else runs.
 *   path      a pattern: literal bytes, {name} a non-empty segment (no '/')
 *             of at most 127 bytes ({name:31}: 31), [...] an optional
 *             part, * at the end any rest (a prefix).
 *   flags     ROUTE_BODY: the body is read (max_body_bytes, Content-Length,
 *             Content-Encoding, max_inflight_bytes) and the handler runs
 *             as a job on the worker pool; else the handler runs on the
 *             network thread once the request is in.
 *             ROUTE_ADMIN: Authorization: Bearer <admin_token> is needed
 *             (401/403 before the body is read).
 *             ROUTE_CORS: the responses carry the CORS headers, and OPTIONS
 *             is a preflight (http/cors.h); without it, neither.
 *   error     the error style: fills a response with an error body for an
 *             enum http_error code (lib/errors.h) and a message (NULL: the
 *             code's default). Every error of the row, the transport's
 *             own (limits, timeouts, overload) included, is written by it.
 *   metric    the label the row's requests are counted under (NULL:
 *             requests that reached no endpoint).
 *   handler   fills the response from the request.
 *   check     NULL, or the header checks of the row, run before its body
 *             is read: -1 to go on, or an error code with msg filled.
 *   exists    NULL, or whether a path the row matches names something (a
 *             file server's row). When not: the request counts as reaching
 *             no endpoint (metric NULL), OPTIONS is no preflight, and a
 *             method the row does not take gets the handler's answer at
 *             once (its 404) rather than 405; the row's own methods reach
 *             the handler as always, which answers 404.
 *   reads     NULL, or the request headers the handler and check read
 *             besides HTTP's own (route_http_reads), as a list "A, B":
 *             rq->header() answers NULL for any other name. Each must come
 *             once: two are a 400 naming it, before the check runs.
 *   sends     NULL, or the response headers the handler sets besides
 *             HTTP's own (route_http_sends), as a list: any other is not
 *             sent. Under CORS, what the rows read and send is what a page
 *             may send and read (http/cors.h): the transport names none of
 *             them itself.
 */
#ifndef HTTP_ROUTE_H
#define HTTP_ROUTE_H

#include <stddef.h>

enum route_method {
    ROUTE_GET = 1,  /* GET and HEAD */
    ROUTE_POST = 2,
};

enum route_flag {
    ROUTE_BODY = 1,  /* read the body; the handler runs on the worker pool */
    ROUTE_ADMIN = 2, /* Authorization: Bearer <admin_token> */
    ROUTE_CORS = 4,  /* CORS headers and preflights */
};

/* At most this many {name} segments in a pattern, each of at most
 * ROUTE_CAPTURE_BYTES - 1 bytes. */
#define ROUTE_CAPTURES 4
#define ROUTE_CAPTURE_BYTES 128
/* Extra response headers a handler may set. */
#define ROUTE_HEADERS 3

struct route_capture {
    char name[16];
    char value[ROUTE_CAPTURE_BYTES];
};

/* What the transport's state is when a handler runs. */
struct route_state {
    int draining;               /* shutting down: readiness is 503 */
    long long inflight_bytes;   /* request bodies held */
    long long answer_bytes;     /* responses computed and not yet sent */
    int connections_open;       /* TCP connections accepted and not yet closed */
};

struct route;

/* One request, as a handler sees it (borrowed: valid while it runs). */
struct route_request {
    const struct route *route;  /* its row */
    const char *method, *path;
    struct route_capture captures[ROUTE_CAPTURES];
    int ncaptures;
    const char *body;           /* the body of a ROUTE_BODY row, len bytes */
    size_t len;
    const char *request_id;     /* X-Request-Id: the client's, or made up */
    double t_first, t_body;     /* route_now() at the headers, at the body's end */
    struct route_state state;
    /* A request header (case-insensitive name), or NULL; on a worker too
     * (the connection sleeps meanwhile). NULL for a name that neither the
     * row's reads nor route_http_reads list. */
    const char *(*header)(const struct route_request *rq, const char *name);
    /* Whether the client has gone away (a long handler may stop early). */
    int (*client_gone)(const struct route_request *rq);
    /* Give the body's memory back as soon as it is decoded (may be
     * called once; body is NULL after it). */
    void (*release_body)(void *transport);
    void *transport;            /* the transport's own, for the above */
};

/* A response header besides those the transport writes itself. */
struct route_header {
    const char *name;           /* static; NULL: unused slot */
    char value[200];
};

/* What a handler fills: a status, then one of three bodies -- a buffer,
 * a generator the transport pulls from as it sends (large responses,
 * encoded as they go), or an open file (sent from its descriptor). */
struct route_response {
    int status;
    const char *content_type;   /* static; NULL: no Content-Type */
    char *body;                 /* malloc'd, len bytes; or NULL */
    size_t len;                 /* bytes of the body, whichever kind */
    /* generator: up to max bytes from offset pos into dst; 0 at the end */
    size_t (*read)(void *cls, size_t pos, char *dst, size_t max);
    void (*free_reader)(void *cls);
    void *reader;
    int fd;                     /* with has_fd: a file of len bytes (owned) */
    int has_fd;
    struct route_header headers[ROUTE_HEADERS];
    /* called once, when the answer has been sent or given up (the client
     * gone, an error sent instead): route_response_free() calls it */
    void (*done)(void *cls);
    void *done_cls;
};

typedef void (*route_handler)(const struct route_request *rq, struct route_response *out);
typedef void (*route_error)(struct route_response *out, int code, const char *msg);
typedef int (*route_check)(const struct route_request *rq, char *msg, size_t msglen);

struct route {
    unsigned methods;           /* enum route_method, or 0 */
    const char *path;           /* pattern */
    unsigned flags;             /* enum route_flag */
    route_error error;
    const char *metric;
    route_handler handler;
    route_check check;
    int (*exists)(const char *path);
    const char *reads;          /* request headers, "A, B", or NULL */
    const char *sends;          /* response headers, "A, B", or NULL */
};

/* The whole table, as the transport takes it (borrowed: must outlive the
 * server). */
struct route_table {
    const struct route *rows;
    size_t count;
    /* The 403 message of a ROUTE_ADMIN row while no admin token is set. */
    const char *admin_off;
    /* Each finished request: its row's metric (NULL: no endpoint, or
     * refused before routing), status and seconds. */
    void (*record)(const char *metric, int status, double seconds);
};

/* CLOCK_MONOTONIC seconds. */
double route_now(void);

/* Whether path matches pattern; fills rq's captures when it does. */
int route_match(const char *pattern, const char *path, struct route_request *rq);

/* The first row of t matching path (captures into rq), or NULL. */
const struct route *route_find(const struct route_table *t, const char *path,
                               struct route_request *rq);

/* The headers of HTTP itself that the transport reads and sends for every
 * row (the body's type and coding, the request id it echoes; 503's
 * Retry-After, 405's Allow, 415's Accept-Encoding), which a row's reads
 * and sends need not list. Not Authorization nor WWW-Authenticate: those
 * are the admin rows', which no page may call. */
extern const char route_http_reads[], route_http_sends[];

/* Whether the list ("A, B": names between commas, blanks around them)
 * holds name, ASCII case aside. NULL is the empty list. */
int route_list_has(const char *list, const char *name);

/* The next name of a list at *p: its first byte, its length in *n, and *p
 * moved past it; NULL at the end. */
const char *route_list_next(const char **p, size_t *n);

/* The value of capture name, or "" when the path had none. */
const char *route_param(const struct route_request *rq, const char *name);

/* Set an extra header (name static; value copied, cut to fit); -1 when
 * every slot is taken. */
int route_header_set(struct route_response *out, const char *name, const char *value);

/* The value of extra header name, or NULL. */
const char *route_header_get(const struct route_response *out, const char *name);

/* out becomes the error code in the row's style, with a printf-style
 * message. */
void route_fail(const struct route_request *rq, struct route_response *out, int code,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Free what out still owns (buffer, generator, file, done) and empty it;
 * a sender that took one sets its fields to NULL / has_fd 0 first. */
void route_response_free(struct route_response *out);

#endif
