/* pool.h -- a fixed set of worker threads fed by a bounded FIFO queue.
 *
 * The HTTP server's network thread must never do the heavy work (decode
 * JSON, compute attention, encode) nor wait for it. It hands each request
 * to the pool instead (but small ones that have proved quick: http/http.c),
 * and a full queue is refused at once so the server can answer 503 rather
 * than stall every other connection:
 *
 *     struct pool *p = pool_new(4, 64, 0);      (4 workers, 64 waiting, 8 MiB stacks)
 *     int rc = pool_submit(p, run_request, req); (run_request(req) runs on a worker)
 *     if (rc == POOL_EFULL)        answer 503 "overloaded", free req;
 *     else if (rc == POOL_ECLOSED) answer 503 "shutting_down", free req;
 *     ...
 *     pool_close(p);     (refuse new jobs, run what is queued, join the workers)
 *     pool_free(p);      (once nothing can call pool_submit any more)
 *
 * Jobs run in submission order, each exactly once, on whichever worker is
 * free; with more than one worker they may finish in any order. Workers get
 * an explicit stack size because jansson's nesting limit (2048) can overflow
 * a small thread stack, and the default one depends on `ulimit -s`.
 *
 * Shutdown is two steps because the server needs both orders at once:
 * queued jobs resume suspended MHD connections, so they must finish while
 * the daemon still runs, and the daemon may still submit while they do.
 * pool_close() drains and joins but keeps the pool valid (submit returns
 * POOL_ECLOSED, stats still work); pool_free() releases it after
 * MHD_stop_daemon(). pool_free() alone also closes first.
 *
 * Threading: pool_submit() and pool_get_stats() may be called from any
 * thread, including from inside a job, until pool_free() begins.
 * pool_close() may be called from any thread except a job (it joins the
 * workers), more than once; pool_free() once, when no other call is in
 * progress or can start.
 *
 * Ownership: the pool never frees, copies or reads `arg`; it is borrowed
 * from submit until fn(arg) returns, and fn (or its caller) owns it. A job
 * refused with POOL_EFULL or POOL_ECLOSED is not run: `arg` stays the
 * submitter's to free.
 */
#ifndef LIB_POOL_H
#define LIB_POOL_H

#include <stddef.h>

/* pool_submit() results: 0 is success, negatives are refusals. */
enum pool_status {
    POOL_OK = 0,
    POOL_EFULL = -1,   /* queue_depth jobs already waiting; nothing queued */
    POOL_ECLOSED = -2, /* pool_close() has begun; nothing queued */
};

#define POOL_DEFAULT_STACK ((size_t)8 << 20)
#define POOL_MIN_STACK ((size_t)1 << 20)

struct pool;
typedef void (*pool_fn)(void *arg);

/* workers ≥ 1 threads, each with stack_bytes of stack (0 = POOL_DEFAULT_STACK,
 * otherwise ≥ POOL_MIN_STACK because jansson's nesting limit needs deep
 * stacks), queue_depth ≥ 1 jobs waiting (not counting the ones running).
 * The queue is allocated here, once. Returns NULL on failure (bad argument,
 * out of memory, or a thread that could not be created); nothing is left
 * running then. */
struct pool *pool_new(int workers, int queue_depth, size_t stack_bytes);

/* Queue fn(arg); fn must not be NULL. Returns POOL_OK when queued,
 * POOL_EFULL when queue_depth jobs are already waiting (counted in
 * `rejected`), POOL_ECLOSED once pool_close() has begun (not counted). Never
 * blocks waiting for space or for a job. Thread-safe. */
int pool_submit(struct pool *p, pool_fn fn, void *arg);

/* Run fn(arg, i) for i in 0 .. n-1, spread over the pool's workers and the
 * calling thread, and return once every i has run (a fork and a join:
 * one request's work on every core, no thread made for it). Idle workers
 * take the indices before queued jobs; a busy one takes them when its job
 * ends; the caller takes them too, so the call finishes even when every
 * worker is busy (or p is NULL or closing: then the caller runs them all).
 * Calls may nest (fn may call pool_parallel) and may come from any
 * thread, a job's included. */
typedef void (*pool_task_fn)(void *arg, int i);
void pool_parallel(struct pool *p, int n, pool_task_fn fn, void *arg);
/* Threads that run jobs (pool_new's workers). */
int pool_workers(const struct pool *p);

struct pool_stats {
    int workers;                  /* threads started by pool_new() */
    int queued;                   /* jobs waiting for a worker */
    int busy;                     /* jobs running now */
    unsigned long long completed; /* jobs whose fn has returned */
    unsigned long long rejected;  /* submits refused with POOL_EFULL */
};

/* A consistent snapshot of all fields, taken under the pool's lock.
 * Thread-safe. */
void pool_get_stats(struct pool *p, struct pool_stats *out);

/* Stop accepting (pool_submit returns POOL_ECLOSED from now on), run every
 * job already queued to completion and join the workers. Blocks until then,
 * also when another thread is already closing. The pool stays valid until
 * pool_free(). NULL is a no-op. */
void pool_close(struct pool *p);

/* pool_close(), then free the pool. NULL is a no-op. */
void pool_free(struct pool *p);

#endif
