/* pool_shared.c -- see pool_shared.h. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lib/pool.h"
#include "tests/lib/pool_shared.h"

void poolt_gate_init(struct gate *g)
{
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->started = g->open = 0;
}

void poolt_gate_deinit(struct gate *g)
{
    pthread_cond_destroy(&g->c);
    pthread_mutex_destroy(&g->m);
}

void poolt_gate_job(void *arg)
{
    struct gate *g = arg;

    pthread_mutex_lock(&g->m);
    g->started++;
    pthread_cond_broadcast(&g->c);
    while (!g->open)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

void poolt_gate_wait_started(struct gate *g, int n)
{
    pthread_mutex_lock(&g->m);
    while (g->started < n)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

void poolt_gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}

void poolt_count_job(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

void poolt_expect_stats(struct pool *p, int workers, int queued, int busy,
                  unsigned long long completed, unsigned long long rejected)
{
    struct pool_stats s;
    pool_get_stats(p, &s);
    cr_expect_eq(s.workers, workers, "workers %d, want %d", s.workers, workers);
    cr_expect_eq(s.queued, queued, "queued %d, want %d", s.queued, queued);
    cr_expect_eq(s.busy, busy, "busy %d, want %d", s.busy, busy);
    cr_expect_eq(s.completed, completed, "completed %llu, want %llu", s.completed, completed);
    cr_expect_eq(s.rejected, rejected, "rejected %llu, want %llu", s.rejected, rejected);
}

/* ---- a bounded queue refuses at once ---- */

/* A pool of one worker, held by gate g, and a queue of 3, full of
 * count_job(ran). */
struct pool *poolt_pool_held_and_full(struct gate *g, atomic_int *ran)
{
    poolt_gate_init(g);
    atomic_init(ran, 0);
    struct pool *p = pool_new(1, 3, 0);
    cr_assert(p);
    cr_assert_eq(pool_submit(p, poolt_gate_job, g), POOL_OK);
    poolt_gate_wait_started(g, 1);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pool_submit(p, poolt_count_job, ran), POOL_OK, "submit %d", i);
    return p;
}
