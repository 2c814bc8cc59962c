/* main.c -- attention-server: configuration, start-up, signal-driven drain.
 *
 * SIGTERM or SIGINT: readiness turns 503, the listening socket closes, and
 * requests on connections already open are answered (Connection: close)
 * until no connection remains or drain_timeout has passed; then the ones
 * still uploading are closed with 503, those being computed are still
 * answered, and the process exits 0 (http/http.h). gRPC (grpc_port not 0)
 * drains at the same time: GOAWAY at once, its calls in flight finish
 * within what is left of drain_timeout, then are cancelled (grpc/grpc.h).
 * A second SIGTERM or SIGINT exits at once, with status 1.
 *
 * The composition root: the settings (config/) become the transports'
 * options (http/http.h, grpc/grpc.h) and the route tables' setup
 * (api/routes.h, api/grpc_routes.h), and main hands each table to its
 * transport, both on the one worker pool.
 *
 * Exit statuses (enum cfg_exit, printed by --help): 2 when start-up
 * refuses a setting, for its value (cfg_parse) or for what it names
 * (static_dir here, the TLS pair: http_start and grpc_start;
 * model_repository: repo_start); 1 for the system's failures (the port in use, out of
 * memory), then or later. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/grpc_routes.h"
#include "api/routes.h"
#include "config/config.h"
#include "config/cpus.h"
#include "core/attention.h"
#include "model/repo.h"
#include "http/framing.h"
#include "http/http.h"
#include "grpc/grpc.h"
#include "lib/pool.h"

extern char **environ;

/* After the first signal: a second one stops the process at once, however
 * far the drain has come. */
static void *second_signal(void *arg)
{
    const sigset_t *sigs = arg;
    int sig = 0;
    sigwait(sigs, &sig);
    static const char msg[] = "attention-server: second signal, stopping now\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(CFG_EXIT_FAILURE);
}

/* What the server speaks: HTTPS when the TLS files are set (http_start). */
static const char *scheme_of(const struct cfg *c)
{
    return c->tls_cert_file[0] ? "https" : "http";
}

/* The web page's address, for the start-up line: a wildcard bind is
 * reached on the loopback address, an IPv6 address goes in brackets. */
static void page_url(char *out, size_t len, const struct cfg *c, int port)
{
    const char *host = strcmp(c->bind, "0.0.0.0") == 0 ? "127.0.0.1"
                     : strcmp(c->bind, "::") == 0      ? "::1"
                                                       : c->bind;
    const int v6 = strchr(host, ':') != NULL;
    snprintf(out, len, "%s://%s%s%s:%d/", scheme_of(c), v6 ? "[" : "", host, v6 ? "]" : "",
             port);
}

/* What the transport takes of the settings (strings borrowed from c). */
static struct http_options http_options_of(const struct cfg *c)
{
    return (struct http_options){
        .bind = c->bind,
        .port = c->port,
        .conn_timeout = c->conn_timeout,
        .conn_memory_limit = c->conn_memory_limit,
        .max_connections = c->max_connections,
        .header_timeout = c->header_timeout,
        .body_timeout = c->body_timeout,
        .min_upload_rate = c->min_upload_rate,
        .min_send_rate = c->min_send_rate,
        .max_body_bytes = c->max_body_bytes,
        .max_inflight_bytes = c->max_inflight_bytes,
        .max_answer_bytes = c->max_answer_bytes,
        .cors_allow_origin = c->cors_allow_origin,
        .admin_token = c->admin_token,
        .tls_cert_file = c->tls_cert_file,
        .tls_key_file = c->tls_key_file,
        .log_requests = c->log_level >= CFG_LOG_INFO,
    };
}

/* What the gRPC transport takes of the settings: HTTP's budgets, on its
 * own port and address (bind's when unset). */
static struct grpc_options grpc_options_of(const struct cfg *c)
{
    return (struct grpc_options){
        .address = c->grpc_address[0] ? c->grpc_address : c->bind,
        .port = c->grpc_port,
        .max_calls = c->max_connections,
        .max_message_bytes = c->max_body_bytes,
        .max_inflight_bytes = c->max_inflight_bytes,
        .idle_timeout = c->conn_timeout,
        .admin_token = c->admin_token,
        .tls_cert_file = c->tls_cert_file,
        .tls_key_file = c->tls_key_file,
        .log_requests = c->log_level >= CFG_LOG_INFO,
    };
}

/* ", gRPC on https://ADDR:PORT" for the start-up line, or "" without gRPC. */
static void grpc_line(char *out, size_t len, const struct cfg *c, const struct grpc_transport *g)
{
    if (!g) {
        out[0] = '\0';
        return;
    }
    const char *addr = c->grpc_address[0] ? c->grpc_address : c->bind;
    const int v6 = strchr(addr, ':') != NULL;
    snprintf(out, len, "; gRPC on %s://%s%s%s:%d", scheme_of(c), v6 ? "[" : "", addr,
             v6 ? "]" : "", grpc_port(g));
}

/* The core's runner (core/blas.h) on the worker pool. */
static void pool_run(void *ctx, int n, att_task_fn fn, void *arg)
{
    pool_parallel(ctx, n, fn, arg);
}

int main(int argc, char **argv)
{
    const char *blas_core = att_blas_select_kernels(argv); /* may re-exec */
    struct cfg c;
    char err[256];
    int rc = cfg_parse(&c, argc, argv, environ, stdout, err, sizeof err);
    if (rc == 1)
        return CFG_EXIT_OK; /* --help */
    if (rc < 0) {
        fprintf(stderr, "attention-server: %s\n", err);
        return CFG_EXIT_SETTING;
    }

    /* Block the signals before any thread starts, so all inherit the mask
     * and only sigwait() below receives them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* workers: as set, else the CPUs this process may use (config/cpus.h) */
    char workers_from[96] = "set";
    if (!c.workers_explicit) {
        struct cfg_cpus cpus;
        cfg_cpus_detect(c.threads_per_request, &cpus);
        c.workers = cpus.workers > 64 ? 64 : cpus.workers;
        char quota[16] = "none";
        if (cpus.quota > 0)
            snprintf(quota, sizeof quota, "%d", cpus.quota);
        snprintf(workers_from, sizeof workers_from, "%d CPU%s: affinity %d, cgroup quota %s%s",
                 cpus.cpus, cpus.cpus == 1 ? "" : "s", cpus.affinity, quota,
                 c.threads_per_request > 1 ? ", / threads_per_request" : "");
    }

    att_init(c.threads_per_request);
    if (c.workers * c.threads_per_request > 2 * (int)sysconf(_SC_NPROCESSORS_ONLN))
        fprintf(stderr, "attention-server: warning: workers %d x threads_per_request %d "
                        "oversubscribes %ld cores\n", c.workers, c.threads_per_request,
                sysconf(_SC_NPROCESSORS_ONLN));
    struct pool *pool = pool_new(c.workers, c.queue_depth, 0);
    if (!pool) {
        fprintf(stderr, "attention-server: could not start %d workers\n", c.workers);
        return CFG_EXIT_FAILURE;
    }
    /* the core's parallel work (a batch of sequences, a long cache) runs on
     * the workers, not on threads made per request */
    att_set_runner(&(struct att_runner){pool_run, pool, pool_workers(pool)});
    char msg[512];
    const int sd = cfg_check_static_dir(c.static_dir, msg, sizeof msg);
    if (sd < 0) {
        fprintf(stderr, "attention-server: %s\n", msg);
        pool_free(pool);
        return CFG_EXIT_SETTING;
    }
    if (sd > 0 && c.log_level >= CFG_LOG_WARN)
        fprintf(stderr, "attention-server: WARNING: %s\n", msg);
    const struct http_options opt = http_options_of(&c);
    int refused = 0;
    struct http_server *srv =
        http_start(&opt, routes_init(&c, pool), pool, &refused, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "attention-server: %s\n", err);
        pool_free(pool);
        return refused ? CFG_EXIT_SETTING : CFG_EXIT_FAILURE;
    }
    /* gRPC, on the same workers: the same refusals as HTTP's */
    struct grpc_transport *grpc = NULL;
    if (c.grpc_port) {
        const struct grpc_options gopt = grpc_options_of(&c);
        grpc = grpc_start(&gopt, grpc_routes_init(&c), pool, &refused, err, sizeof err);
        if (!grpc) {
            fprintf(stderr, "attention-server: gRPC: %s\n", err);
            http_stop(srv);
            pool_free(pool);
            return refused ? CFG_EXIT_SETTING : CFG_EXIT_FAILURE;
        }
    }
    /* The default repository, "models" beside the working directory, may be
     * missing (the binary run from elsewhere): then only the built-in model.
     * One set explicitly must be there. */
    struct stat repo_st;
    if (!c.model_repository_explicit && c.model_repository[0] &&
        stat(c.model_repository, &repo_st) != 0 && errno == ENOENT) {
        fprintf(stderr, "attention-server: no model repository at '%s' (the default "
                        "model_repository): serving the built-in model only\n",
                c.model_repository);
        c.model_repository[0] = '\0';
    }
    /* models load in the background: live at once, ready when loaded */
    if (repo_start(c.model_repository, stderr) != 0) { /* it cannot be listed */
        if (grpc)
            grpc_stop(grpc);
        http_stop(srv);
        pool_free(pool);
        return CFG_EXIT_SETTING;
    }
    if (c.log_level >= CFG_LOG_DEBUG)
        cfg_dump(&c, stderr);
    fprintf(stderr, "attention-server: %s\n", framing_library());
    char page[128] = "";
    if (sd == 0) { /* static_dir has the page's index.html */
        char url[96];
        page_url(url, sizeof url, &c, http_port(srv));
        snprintf(page, sizeof page, "; the page: open %s in a browser", url);
    }
    char gline[128];
    grpc_line(gline, sizeof gline, &c, grpc);
    fprintf(stderr, "attention-server: listening on %s://%s:%d (workers %d (%s), queue %d, "
                    "threads_per_request %d, OpenBLAS kernels %s)%s%s\n", scheme_of(&c), c.bind,
            http_port(srv), c.workers, workers_from, c.queue_depth, c.threads_per_request,
            blas_core, page, gline);

    int sig = 0;
    sigwait(&sigs, &sig);
    if (grpc)
        grpc_drain_begin(grpc); /* GOAWAY now, while HTTP drains */
    const double drain_start = route_now();
    fprintf(stderr, "attention-server: %s, draining (up to %d s)\n", strsignal(sig),
            c.drain_timeout);
    pthread_t second;
    if (pthread_create(&second, NULL, second_signal, &sigs) != 0)
        fprintf(stderr, "attention-server: warning: a second signal will not stop the drain\n");
    int cut = http_drain(srv, c.drain_timeout);
    if (grpc) { /* what is left of drain_timeout (its calls drained meanwhile) */
        const int left = c.drain_timeout - (int)(route_now() - drain_start);
        cut += grpc_drain(grpc, left > 0 ? left : 0);
    }
    pool_close(pool); /* every job has resumed its connection or call by now */
    if (grpc)
        grpc_stop(grpc);
    http_stop(srv);
    att_set_runner(NULL);
    pool_free(pool);
    routes_stop(); /* the sequences the routes started */
    repo_stop();
    fprintf(stderr, "attention-server: stopped (%d requests cut off at drain_timeout)\n", cut);
    return CFG_EXIT_OK;
}
