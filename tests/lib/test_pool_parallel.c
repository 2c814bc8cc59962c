/* test_pool_parallel.c -- pool_parallel (lib/pool.h): every index run once,
 * on the workers and the caller, nested calls, and a call that finishes
 * when every worker is busy or the pool is NULL. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "tests/lib/pool_shared.h"

struct tally {
    atomic_int runs[256];
    atomic_int total;
    pthread_t who[256];
    int sleep_ms;
    struct pool *pool; /* nested: each index runs 4 more in the same pool, and counts
                          once they all ran */
};

static void nap(int ms)
{
    struct timespec t = {0, (long)ms * 1000000L};
    nanosleep(&t, NULL);
}

static void count(void *arg, int i)
{
    struct tally *t = arg;
    atomic_fetch_add(&t->runs[i], 1);
    atomic_fetch_add(&t->total, 1);
    t->who[i] = pthread_self();
    if (t->sleep_ms)
        nap(t->sleep_ms);
}

static void nested(void *arg, int i)
{
    struct tally *t = arg;
    struct tally inner;
    memset(&inner, 0, sizeof inner);
    pool_parallel(t->pool, 4, count, &inner);
    if (atomic_load(&inner.total) == 4) /* (no assert off the test's thread) */
        count(t, i);
}

Test(pool_parallel, every_index_runs_once)
{
    struct pool *p = pool_new(3, 8, 0);
    cr_assert_not_null(p);
    cr_assert_eq(pool_workers(p), 3);
    static struct tally t;
    memset(&t, 0, sizeof t);
    pool_parallel(p, 200, count, &t);
    cr_assert_eq(atomic_load(&t.total), 200);
    for (int i = 0; i < 200; i++)
        cr_assert_eq(atomic_load(&t.runs[i]), 1, "index %d ran %d times", i,
                     atomic_load(&t.runs[i]));
    pool_free(p);
}

/* Idle workers take part: tasks that sleep run on more than one thread. */
Test(pool_parallel, idle_workers_help)
{
    struct pool *p = pool_new(2, 8, 0);
    static struct tally t;
    memset(&t, 0, sizeof t);
    t.sleep_ms = 20;
    pool_parallel(p, 8, count, &t);
    int others = 0;
    for (int i = 0; i < 8; i++)
        others += !pthread_equal(t.who[i], pthread_self());
    cr_assert_gt(others, 0, "every task ran on the caller: no worker helped");
    pool_free(p);
}

Test(pool_parallel, nested_calls)
{
    struct pool *p = pool_new(2, 8, 0);
    static struct tally t;
    memset(&t, 0, sizeof t);
    t.pool = p;
    pool_parallel(p, 16, nested, &t);
    cr_assert_eq(atomic_load(&t.total), 16);
    pool_free(p);
}

/* Every worker held by a job: the caller runs every index itself. */
Test(pool_parallel, finishes_with_every_worker_busy)
{
    struct gate g;
    poolt_gate_init(&g);
    struct pool *p = pool_new(1, 4, 0);
    cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_OK);
    poolt_gate_wait_started(&g, 1);
    static struct tally t;
    memset(&t, 0, sizeof t);
    pool_parallel(p, 10, count, &t);
    cr_assert_eq(atomic_load(&t.total), 10);
    for (int i = 0; i < 10; i++)
        cr_assert(pthread_equal(t.who[i], pthread_self()));
    poolt_gate_open(&g);
    pool_free(p);
    poolt_gate_deinit(&g);
    memset(&t, 0, sizeof t);
    pool_parallel(NULL, 5, count, &t); /* no pool: all here */
    cr_assert_eq(atomic_load(&t.total), 5);
}
