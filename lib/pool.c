/* pool.c -- worker threads and a ring buffer of jobs behind one mutex.
 *
 * Every field below `lock` is read and written only while holding it.
 * Two condition variables: `work` wakes a worker when a job is queued or
 * the pool starts closing; `closed` wakes second callers of pool_close()
 * once the first one has joined the workers. Nobody ever waits for space
 * in the queue: a full queue is an immediate POOL_EFULL. */
#include "lib/pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

struct job {
    pool_fn fn;
    void *arg;
};

/* A pool_parallel() call: indices next .. n-1 not yet taken. */
struct par {
    pool_task_fn fn;
    void *arg;
    int n, next, done;
    pthread_cond_t finished; /* done == n */
    struct par *link;        /* the pool's list of calls with indices left */
};

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_cond_t closed;
    struct job *ring;   /* cap slots; jobs at head, head+1, ... mod cap */
    size_t cap, head, count;
    int busy;
    int closing;        /* pool_close() has begun: refuse submits */
    int joined;         /* every worker has been joined */
    unsigned long long completed, rejected;
    struct par *par, **par_tail; /* calls with indices left, oldest first */
    pthread_t *threads; /* nthreads of them were started */
    int nthreads;
};

/* Take index i of c and run it (entered and left under p->lock). */
static void run_one(struct pool *p, struct par *c)
{
    const int i = c->next++;
    if (c->next == c->n) { /* the last index taken: off the list */
        struct par **l = &p->par;
        while (*l != c)
            l = &(*l)->link;
        *l = c->link;
        if (p->par_tail == &c->link)
            p->par_tail = l;
    }
    pthread_mutex_unlock(&p->lock);
    c->fn(c->arg, i);
    pthread_mutex_lock(&p->lock);
    if (++c->done == c->n)
        pthread_cond_signal(&c->finished);
}

/* Take jobs in FIFO order until the pool is closing and the queue is empty:
 * closing alone does not stop a worker, so queued jobs are drained. */
static void *worker_main(void *arg)
{
    struct pool *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->count == 0 && !p->par && !p->closing)
            pthread_cond_wait(&p->work, &p->lock);
        if (p->par) { /* a running job's work first */
            run_one(p, p->par);
            continue;
        }
        if (p->count == 0)
            break;
        struct job job = p->ring[p->head];
        p->head = p->head + 1 == p->cap ? 0 : p->head + 1;
        p->count--;
        p->busy++;
        pthread_mutex_unlock(&p->lock);

        job.fn(job.arg);

        pthread_mutex_lock(&p->lock);
        p->busy--;
        p->completed++;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

void pool_parallel(struct pool *p, int n, pool_task_fn fn, void *arg)
{
    if (!p || n <= 1) {
        for (int i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    struct par c = {fn, arg, n, 0, 0, PTHREAD_COND_INITIALIZER, NULL};
    pthread_mutex_lock(&p->lock);
    *p->par_tail = &c, p->par_tail = &c.link;
    pthread_cond_broadcast(&p->work);
    while (c.next < c.n)
        run_one(p, &c);
    while (c.done < c.n)
        pthread_cond_wait(&c.finished, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_cond_destroy(&c.finished);
}

int pool_workers(const struct pool *p)
{
    return p ? p->nthreads : 0;
}

/* Round up to a whole number of pages: POSIX lets pthread_attr_setstacksize
 * refuse other sizes. 0 when that overflows. */
static size_t page_round(size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t page = pg > 0 ? (size_t)pg : 4096;

    if (n > SIZE_MAX - (page - 1))
        return 0;
    return (n + page - 1) / page * page;
}

struct pool *pool_new(int workers, int queue_depth, size_t stack_bytes)
{
    if (workers < 1 || queue_depth < 1)
        return NULL;
    if (stack_bytes == 0)
        stack_bytes = POOL_DEFAULT_STACK;
    if (stack_bytes < POOL_MIN_STACK)
        return NULL;
    stack_bytes = page_round(stack_bytes);
    if (stack_bytes == 0)
        return NULL;

    struct pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->cap = (size_t)queue_depth;
    p->par_tail = &p->par;
    p->ring = calloc(p->cap, sizeof *p->ring);
    p->threads = calloc((size_t)workers, sizeof *p->threads);
    if (!p->ring || !p->threads)
        goto fail_alloc;
    if (pthread_mutex_init(&p->lock, NULL))
        goto fail_alloc;
    if (pthread_cond_init(&p->work, NULL))
        goto fail_lock;
    if (pthread_cond_init(&p->closed, NULL))
        goto fail_work;

    /* From here the pool is complete with p->nthreads workers, so
     * pool_free() is the cleanup for a thread that fails to start. */
    pthread_attr_t attr;
    if (pthread_attr_init(&attr)) {
        pool_free(p);
        return NULL;
    }
    int ok = pthread_attr_setstacksize(&attr, stack_bytes) == 0;
    while (ok && p->nthreads < workers) {
        ok = pthread_create(&p->threads[p->nthreads], &attr, worker_main, p) == 0;
        if (ok)
            p->nthreads++;
    }
    pthread_attr_destroy(&attr);
    if (!ok) {
        pool_free(p);
        return NULL;
    }
    return p;

fail_work:
    pthread_cond_destroy(&p->work);
fail_lock:
    pthread_mutex_destroy(&p->lock);
fail_alloc:
    free(p->threads);
    free(p->ring);
    free(p);
    return NULL;
}

int pool_submit(struct pool *p, pool_fn fn, void *arg)
{
    int rc = POOL_OK;

    pthread_mutex_lock(&p->lock);
    if (p->closing) {
        rc = POOL_ECLOSED;
    } else if (p->count == p->cap) {
        p->rejected++;
        rc = POOL_EFULL;
    } else {
        size_t tail = p->head + p->count; /* < 2·cap: no overflow, cap ≤ INT_MAX */
        if (tail >= p->cap)
            tail -= p->cap;
        p->ring[tail] = (struct job){fn, arg};
        p->count++;
        pthread_cond_signal(&p->work);
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

void pool_get_stats(struct pool *p, struct pool_stats *out)
{
    pthread_mutex_lock(&p->lock);
    out->workers = p->nthreads;
    out->queued = (int)p->count;
    out->busy = p->busy;
    out->completed = p->completed;
    out->rejected = p->rejected;
    pthread_mutex_unlock(&p->lock);
}

void pool_close(struct pool *p)
{
    if (!p)
        return;

    pthread_mutex_lock(&p->lock);
    if (p->closing) {
        /* Another thread is joining (or has joined) the workers: wait for
         * it, so every caller returns with the queue drained. */
        while (!p->joined)
            pthread_cond_wait(&p->closed, &p->lock);
        pthread_mutex_unlock(&p->lock);
        return;
    }
    p->closing = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);

    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);

    pthread_mutex_lock(&p->lock);
    p->joined = 1;
    pthread_cond_broadcast(&p->closed);
    pthread_mutex_unlock(&p->lock);
}

void pool_free(struct pool *p)
{
    if (!p)
        return;
    pool_close(p);
    pthread_cond_destroy(&p->closed);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p->threads);
    free(p->ring);
    free(p);
}
