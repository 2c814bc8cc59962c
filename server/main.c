/* main.c -- attention-server: configuration, start-up, signal-driven drain.
 *
 * SIGTERM or SIGINT: readiness turns 503, the listening socket closes, every
 * accepted request is answered, then the process exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "config/config.h"
#include "core/attention.h"
#include "server/http.h"
#include "server/pool.h"

extern char **environ;

/* Seconds to wait for in-flight requests when draining. */
#define DRAIN_TIMEOUT_S 120

int main(int argc, char **argv)
{
    const char *blas_core = att_blas_select_kernels(argv); /* may re-exec */
    struct cfg c;
    char err[256];
    int rc = cfg_parse(&c, argc, argv, environ, stdout, err, sizeof err);
    if (rc == 1)
        return 0; /* --help */
    if (rc < 0) {
        fprintf(stderr, "attention-server: %s\n", err);
        return 2;
    }

    /* Block the signals before any thread starts, so all inherit the mask
     * and only sigwait() below receives them. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    att_init(c.threads_per_request);
    if (c.workers * c.threads_per_request > 2 * (int)sysconf(_SC_NPROCESSORS_ONLN))
        fprintf(stderr, "attention-server: warning: workers %d x threads_per_request %d "
                        "oversubscribes %ld cores\n", c.workers, c.threads_per_request,
                sysconf(_SC_NPROCESSORS_ONLN));
    struct pool *pool = pool_new(c.workers, c.queue_depth, 0);
    if (!pool) {
        fprintf(stderr, "attention-server: could not start %d workers\n", c.workers);
        return 1;
    }
    struct http_server *srv = http_start(&c, pool, err, sizeof err);
    if (!srv) {
        fprintf(stderr, "attention-server: %s\n", err);
        pool_free(pool);
        return 1;
    }
    if (c.log_level >= CFG_LOG_DEBUG)
        cfg_dump(&c, stderr);
    fprintf(stderr, "attention-server: listening on http://%s:%d (workers %d, queue %d, "
                    "threads_per_request %d, OpenBLAS kernels %s)\n", c.bind, http_port(srv),
            c.workers, c.queue_depth, c.threads_per_request, blas_core);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "attention-server: %s, draining\n", strsignal(sig));
    int left = http_drain(srv, DRAIN_TIMEOUT_S);
    pool_close(pool); /* finishes queued jobs, which resume their connections */
    http_stop(srv);
    pool_free(pool);
    fprintf(stderr, "attention-server: stopped (%d requests unanswered)\n", left);
    return left ? 1 : 0;
}
