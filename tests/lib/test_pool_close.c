/* test_pool_close.c -- the worker pool's close and free: they drain the
 * queue, refuse new jobs, and a second close waits for the drain.
 *
 * Nothing here passes or fails on timing (see test_pool.c). One test
 * sleeps 20 ms to make a bug more likely to show; it passes for a correct
 * pool whatever the scheduling. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "lib/pool.h"
#include "tests/lib/pool_shared.h"

/* ---- close drains the queue and refuses new jobs ---- */

struct closer {
    struct pool *p;
    void (*op)(struct pool *);
};

static void *closer_main(void *arg)
{
    struct closer *c = arg;
    c->op(c->p);
    return NULL;
}

/* Submit fn(arg) until the pool, which another thread is closing, answers
 * POOL_ECLOSED; returns how many POOL_EFULL came first. */
static unsigned long long submit_until_closed(struct pool *p, pool_fn fn, void *arg)
{
    unsigned long long efull = 0;
    int rc;
    while ((rc = pool_submit(p, fn, arg)) == POOL_EFULL) {
        efull++;
        sched_yield();
    }
    cr_assert_eq(rc, POOL_ECLOSED);
    return efull;
}

/* With the only worker held and 3 jobs queued, another thread starts
 * closing; the test sees POOL_ECLOSED (so closing has begun while the jobs
 * were still queued), then opens the gate. The closer must not return
 * before the 3 jobs have run. */
static void drain_while_closing(void (*op)(struct pool *))
{
    struct gate g;
    atomic_int ran;
    struct pool *p = poolt_pool_held_and_full(&g, &ran);

    pthread_t t;
    struct closer c = {p, op};
    cr_assert_eq(pthread_create(&t, NULL, closer_main, &c), 0);

    /* The pool cannot be freed yet: its worker is held by the gate. */
    const unsigned long long efull = submit_until_closed(p, poolt_count_job, &ran);
    cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_ECLOSED);
    /* POOL_ECLOSED is not a rejection; the 3 jobs are still waiting. */
    poolt_expect_stats(p, 1, 3, 1, 0, efull);
    cr_expect_eq(atomic_load(&ran), 0);

    poolt_gate_open(&g);
    pthread_join(t, NULL);
    cr_expect_eq(atomic_load(&ran), 3, "queued jobs run before close returns: %d of 3",
                 atomic_load(&ran));
    if (op == pool_close) {
        poolt_expect_stats(p, 1, 0, 0, 4, efull);
        cr_expect_eq(pool_submit(p, poolt_count_job, &ran), POOL_ECLOSED);
        pool_free(p);
    }
    poolt_gate_deinit(&g);
}

Test(pool, free_runs_queued_jobs_before_returning, .timeout = TIMEOUT)
{
    drain_while_closing(pool_free);
}

Test(pool, close_runs_queued_jobs_and_then_refuses, .timeout = TIMEOUT)
{
    drain_while_closing(pool_close);
}

Test(pool, free_right_after_submit_runs_every_job, .timeout = TIMEOUT)
{
    atomic_int ran;
    atomic_init(&ran, 0);
    struct pool *p = pool_new(3, 1000, 0);
    cr_assert(p);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_OK);
    pool_free(p);
    cr_expect_eq(atomic_load(&ran), 1000);
}

/* A second pool_close() while the first is joining must wait for the drain
 * too. The queued probe job runs before the workers can be joined, so it
 * looks at whether the second closer has already returned: it must not
 * have. */
struct second_closer {
    struct pool *p;
    atomic_int returned;
};

static void *second_closer_main(void *arg)
{
    struct second_closer *c = arg;
    pool_close(c->p);
    atomic_store(&c->returned, 1);
    return NULL;
}

struct probe {
    struct second_closer *c;
    atomic_int ran, saw_returned;
};

static void probe_job(void *arg)
{
    struct probe *pr = arg;
    atomic_store(&pr->saw_returned, atomic_load(&pr->c->returned));
    atomic_fetch_add(&pr->ran, 1);
}

Test(pool, second_close_waits_for_the_drain, .timeout = TIMEOUT)
{
    struct gate g;
    poolt_gate_init(&g);
    struct pool *p = pool_new(1, 1, 0);
    cr_assert(p);
    struct second_closer c2 = {.p = p};
    atomic_init(&c2.returned, 0);
    struct probe pr = {.c = &c2};
    atomic_init(&pr.ran, 0);
    atomic_init(&pr.saw_returned, -1);
    cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_OK);
    poolt_gate_wait_started(&g, 1);
    cr_assert_eq(pool_submit(p, probe_job, &pr), POOL_OK);

    pthread_t t1, t2;
    struct closer c1 = {p, pool_close};
    cr_assert_eq(pthread_create(&t1, NULL, closer_main, &c1), 0);
    const unsigned long long efull = submit_until_closed(p, probe_job, &pr);

    /* The first closer is joining; start the second one. The sleep only
     * gives it time to reach pool_close() so that a second closer that
     * returned early would be caught; the test passes for a correct pool
     * however long it takes. */
    cr_assert_eq(pthread_create(&t2, NULL, second_closer_main, &c2), 0);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    poolt_gate_open(&g);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    cr_expect_eq(atomic_load(&pr.ran), 1);
    cr_expect_eq(atomic_load(&pr.saw_returned), 0,
                 "the second pool_close() returned before the queue was drained");
    pool_close(p); /* a third, later call returns at once */
    poolt_expect_stats(p, 1, 0, 0, 2, efull);
    pool_free(p);
    poolt_gate_deinit(&g);
}
