/* grpc.c -- the gRPC transport on gRPC's C core; see grpc.h. Listening,
 * the completion queue's thread, the drain and the stop are here; a
 * call's life is in call.c, what the two share in state.h, and the
 * helpers a handler uses in grpc_route.c.
 *
 * One completion queue and one thread read it: every call's completions
 * come there (call_event). GRPC_ARMED request_call slots stay armed, so
 * every method path arrives (a path no row names is answered
 * UNIMPLEMENTED). The core bounds a message (max_message_bytes), the
 * streams of one connection and an idle connection; call.c bounds the
 * calls open at once and the request bytes held.
 */
#include "grpc/grpc.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc/call.h"
#include "grpc/state.h"

/* Streams one connection may have open at once. */
#define STREAMS_PER_CONNECTION 100
/* Seconds a TLS or HTTP/2 handshake may take, at most. */
#define HANDSHAKE_S 10

/* The core's own log: its errors only, on the server's stderr. */
static void core_log(gpr_log_func_args *a)
{
    if (a->severity == GPR_LOG_SEVERITY_ERROR)
        fprintf(stderr, "attention-server: grpc: %s\n", a->message);
}

static void *cq_thread(void *arg)
{
    struct grpc_transport *s = arg;
    for (;;) {
        const grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                         NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct gtag *t = ev.tag;
        if (t->kind == TAG_SHUTDOWN)
            atomic_store(&s->shut, 1);
        else
            call_event(t, ev.success);
    }
}

/* The contents of a PEM file, or NULL with err filled. */
static char *read_file(const char *name, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    while (f) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *b = realloc(buf, cap);
            if (!b)
                break;
            buf = b;
        }
        const size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) {
            const int bad = ferror(f);
            fclose(f);
            f = NULL;
            if (!bad) {
                buf[len] = '\0';
                return buf;
            }
            errno = EIO;
        }
    }
    snprintf(err, errlen, "%s: cannot read %s: %s", name, path, strerror(errno ? errno : ENOMEM));
    if (f)
        fclose(f);
    free(buf);
    return NULL;
}

/* The listening credentials: TLS from the PEM pair, or none. */
static grpc_server_credentials *credentials(const struct grpc_options *o, int *setting, char *err,
                                            size_t errlen)
{
    const char *cf = o->tls_cert_file ? o->tls_cert_file : "";
    const char *kf = o->tls_key_file ? o->tls_key_file : "";
    if (!cf[0] && !kf[0])
        return grpc_insecure_server_credentials_create();
    *setting = 1;
    if (!cf[0] || !kf[0]) {
        snprintf(err, errlen, "tls_cert_file and tls_key_file: set both or neither (%s is empty)",
                 cf[0] ? "tls_key_file" : "tls_cert_file");
        return NULL;
    }
    char *cert = read_file("tls_cert_file", cf, err, errlen);
    char *key = cert ? read_file("tls_key_file", kf, err, errlen) : NULL;
    grpc_server_credentials *c = NULL;
    if (cert && key) {
        grpc_ssl_pem_key_cert_pair pair = {key, cert};
        c = grpc_ssl_server_credentials_create_ex(NULL, &pair, 1,
                                                  GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, NULL);
        if (!c)
            snprintf(err, errlen, "tls_cert_file, tls_key_file: %s and %s are not a usable "
                     "certificate and key", cf, kf);
    }
    free(cert);
    free(key);
    if (c)
        *setting = 0;
    return c;
}

struct grpc_transport *grpc_start(const struct grpc_options *o, const struct grpc_route_table *t,
                               struct pool *pool, int *setting, char *err, size_t errlen)
{
    *setting = 0;
    struct grpc_transport *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->opt = *o;
    s->table = t;
    s->pool = pool;
    pthread_mutex_init(&s->lock, NULL);
    s->shutdown_tag.kind = TAG_SHUTDOWN;
    grpc_init();
    gpr_set_log_function(core_log);
    gpr_set_log_verbosity(GPR_LOG_SEVERITY_ERROR);

    const long long msg = o->max_message_bytes > INT_MAX ? INT_MAX : o->max_message_bytes;
    grpc_arg args[] = {
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = (int)msg}},
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_CONCURRENT_STREAMS, {.integer = STREAMS_PER_CONNECTION}},
        {GRPC_ARG_INTEGER, GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, {.integer = HANDSHAKE_S * 1000}},
        /* a port in use is an error, not shared */
        {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
        {GRPC_ARG_INTEGER, GRPC_ARG_MAX_CONNECTION_IDLE_MS,
         {.integer = o->idle_timeout > 0 && o->idle_timeout < INT_MAX / 1000
                         ? o->idle_timeout * 1000 : INT_MAX}},
        /* no channelz bookkeeping on every message: nothing here reads it */
        {GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_CHANNELZ, {.integer = 0}},
    };
    const grpc_channel_args cargs = {sizeof args / sizeof args[0], args};
    s->srv = grpc_server_create(&cargs, NULL);
    s->cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->srv, s->cq, NULL);

    grpc_server_credentials *creds = credentials(o, setting, err, errlen);
    if (!creds) {
        grpc_stop(s);
        return NULL;
    }
    const char *addr = o->address && o->address[0] ? o->address : "0.0.0.0";
    char where[300];
    snprintf(where, sizeof where, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, o->port);
    s->port = grpc_server_add_http2_port(s->srv, where, creds);
    grpc_server_credentials_release(creds);
    if (s->port == 0) {
        snprintf(err, errlen, "could not listen on %s", where);
        grpc_stop(s);
        return NULL;
    }
    grpc_server_start(s->srv);
    s->started = 1;
    if (pthread_create(&s->thread, NULL, cq_thread, s) != 0) {
        snprintf(err, errlen, "could not start the gRPC thread");
        grpc_stop(s);
        return NULL;
    }
    s->thread_started = 1;
    for (int i = 0; i < GRPC_ARMED; i++)
        call_arm(s);
    return s;
}

int grpc_port(const struct grpc_transport *h)
{
    return h->port;
}

void grpc_drain_begin(struct grpc_transport *h)
{
    struct grpc_transport *s = h;
    pthread_mutex_lock(&s->lock);
    if (!atomic_load(&s->draining)) {
        atomic_store(&s->draining, 1);
        if (s->started)
            grpc_server_shutdown_and_notify(s->srv, s->cq, &s->shutdown_tag);
        else
            atomic_store(&s->shut, 1);
    }
    pthread_mutex_unlock(&s->lock);
}

/* Until the calls are freed, the slots back and the shutdown's tag in. */
static int settled(struct grpc_transport *s)
{
    return atomic_load(&s->calls_open) == 0 && atomic_load(&s->armed) == 0 &&
           atomic_load(&s->shut);
}

int grpc_drain(struct grpc_transport *h, int timeout_s)
{
    struct grpc_transport *s = h;
    grpc_drain_begin(h);
    const double deadline = grpc_route_now() + timeout_s;
    while (!settled(s) && grpc_route_now() < deadline)
        usleep(5000);
    int cut = 0;
    if (!settled(s) && s->started) {
        cut = atomic_load(&s->calls_open);
        atomic_store(&s->cut, 1);
        grpc_server_cancel_all_calls(s->srv);
        while (!settled(s)) /* (a job being computed finishes first) */
            usleep(5000);
    }
    return cut;
}

void grpc_stop(struct grpc_transport *h)
{
    struct grpc_transport *s = h;
    if (!s)
        return;
    if (s->thread_started)
        grpc_drain(h, 0);
    if (s->srv)
        grpc_server_destroy(s->srv);
    if (s->cq) {
        grpc_completion_queue_shutdown(s->cq);
        if (s->thread_started)
            pthread_join(s->thread, NULL);
        else /* (nothing was started on it) */
            while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                       .type != GRPC_QUEUE_SHUTDOWN) {
            }
        grpc_completion_queue_destroy(s->cq);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
    grpc_shutdown();
}
