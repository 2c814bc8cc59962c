/* test_pool.c -- the worker pool: every job once, a bounded queue that
 * refuses instead of blocking, FIFO order, stats, jobs that submit, bad
 * arguments, stack sizes.
 *
 * Nothing here passes or fails on timing. A job that must stay running
 * waits on a gate the test opens; the test waits on the gate until the
 * jobs it needs have started. A submit that blocked would hang with the
 * gate closed, and the .timeout turns that hang into a failure. */
#define _GNU_SOURCE /* pthread_getattr_np */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "lib/pool.h"
#include "tests/lib/pool_shared.h"

/* ---- every job runs exactly once ---- */

#define NJOBS 10000

#define NSUBMITTERS 4

struct many {
    struct pool *pool;
    atomic_int runs[NJOBS];
    atomic_ullong efull; /* POOL_EFULL answers seen by the submitters */
    atomic_int bad_rc;   /* a submit answer other than POOL_OK or POOL_EFULL */
};

struct many_job {
    struct many *m;
    int i;
};

static struct many_job many_jobs[NJOBS];

static void many_job_run(void *arg)
{
    struct many_job *j = arg;
    atomic_fetch_add(&j->m->runs[j->i], 1);
}

struct submitter {
    struct many *m;
    int first, step;
};

static void *submitter_main(void *arg)
{
    struct submitter *s = arg;

    for (int i = s->first; i < NJOBS; i += s->step) {
        int rc;
        while ((rc = pool_submit(s->m->pool, many_job_run, &many_jobs[i])) == POOL_EFULL) {
            atomic_fetch_add(&s->m->efull, 1);
            sched_yield();
        }
        /* Criterion's asserts belong to the test's own thread. */
        if (rc != POOL_OK)
            atomic_store(&s->m->bad_rc, rc);
    }
    return NULL;
}

Test(pool, every_job_runs_exactly_once, .timeout = TIMEOUT)
{
    static struct many m;
    /* A short queue so the submitters keep hitting POOL_EFULL and retrying. */
    m.pool = pool_new(4, 8, 0);
    cr_assert(m.pool);
    for (int i = 0; i < NJOBS; i++) {
        atomic_init(&m.runs[i], 0);
        many_jobs[i] = (struct many_job){&m, i};
    }
    atomic_init(&m.efull, 0);
    atomic_init(&m.bad_rc, POOL_OK);

    pthread_t t[NSUBMITTERS];
    struct submitter s[NSUBMITTERS];
    for (int k = 0; k < NSUBMITTERS; k++) {
        s[k] = (struct submitter){&m, k, NSUBMITTERS};
        cr_assert_eq(pthread_create(&t[k], NULL, submitter_main, &s[k]), 0);
    }
    for (int k = 0; k < NSUBMITTERS; k++)
        pthread_join(t[k], NULL);
    cr_expect_eq(atomic_load(&m.bad_rc), POOL_OK, "a submit returned %d",
                 atomic_load(&m.bad_rc));

    pool_close(m.pool);
    struct pool_stats st;
    pool_get_stats(m.pool, &st);
    cr_expect_eq(st.completed, NJOBS, "completed %llu", st.completed);
    cr_expect_eq(st.rejected, atomic_load(&m.efull), "rejected %llu, submitters saw %llu",
                 st.rejected, (unsigned long long)atomic_load(&m.efull));
    cr_expect_eq(st.queued, 0);
    cr_expect_eq(st.busy, 0);
    pool_free(m.pool);

    int bad = 0;
    for (int i = 0; i < NJOBS; i++) {
        int r = atomic_load(&m.runs[i]);
        if (r != 1 && bad++ < 5)
            cr_log_error("job %d ran %d times", i, r);
    }
    cr_expect_eq(bad, 0, "%d of %d jobs did not run exactly once", bad, NJOBS);
}

Test(pool, full_queue_refuses_without_blocking, .timeout = TIMEOUT)
{
    struct gate g;
    atomic_int ran;
    struct pool *p = poolt_pool_held_and_full(&g, &ran);
    /* The only worker is held by the gate, so a blocking submit would
     * never return: reaching the next line proves it did not block. */
    cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_EFULL);
    cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_EFULL);
    poolt_expect_stats(p, 1, 3, 1, 0, 2);
    cr_expect_eq(atomic_load(&ran), 0);

    poolt_gate_open(&g);
    pool_close(p);
    poolt_expect_stats(p, 1, 0, 0, 4, 2);
    cr_expect_eq(atomic_load(&ran), 3, "queued jobs run: %d of 3", atomic_load(&ran));
    pool_free(p);
    poolt_gate_deinit(&g);
}

/* ---- FIFO order ---- */

struct order {
    int seq[8];
    int n; /* written only by the one worker */
};

struct order_job {
    struct order *o;
    int id;
};

static void order_job_run(void *arg)
{
    struct order_job *j = arg;
    j->o->seq[j->o->n++] = j->id;
}

Test(pool, one_worker_runs_jobs_in_submission_order, .timeout = TIMEOUT)
{
    struct gate g;
    poolt_gate_init(&g);
    struct order o = {.n = 0};
    struct order_job jobs[8];
    struct pool *p = pool_new(1, 8, 0);
    cr_assert(p);

    cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_OK);
    poolt_gate_wait_started(&g, 1);
    for (int i = 0; i < 8; i++) {
        jobs[i] = (struct order_job){&o, i};
        cr_assert_eq(pool_submit(p, order_job_run, &jobs[i]), POOL_OK);
    }
    poolt_gate_open(&g);
    pool_free(p);

    cr_assert_eq(o.n, 8);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(o.seq[i], i, "position %d ran job %d", i, o.seq[i]);
    poolt_gate_deinit(&g);
}

/* ---- stats ---- */

Test(pool, stats_track_queued_busy_completed_rejected, .timeout = TIMEOUT)
{
    struct gate g1, g2;
    poolt_gate_init(&g1);
    poolt_gate_init(&g2);
    atomic_int ran;
    atomic_init(&ran, 0);
    struct pool *p = pool_new(1, 4, 0);
    cr_assert(p);
    poolt_expect_stats(p, 1, 0, 0, 0, 0);

    cr_assert_eq(pool_submit(p, poolt_gate_job, &g1), POOL_OK);
    poolt_gate_wait_started(&g1, 1);
    poolt_expect_stats(p, 1, 0, 1, 0, 0);

    for (int i = 0; i < 3; i++)
        cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_OK);
    cr_assert_eq(pool_submit(p, poolt_gate_job, &g2), POOL_OK);
    poolt_expect_stats(p, 1, 4, 1, 0, 0);
    cr_assert_eq(pool_submit(p, poolt_count_job, &ran), POOL_EFULL);
    poolt_expect_stats(p, 1, 4, 1, 0, 1);

    /* One worker takes jobs in order, so when g2's job starts everything
     * before it has completed and been counted. */
    poolt_gate_open(&g1);
    poolt_gate_wait_started(&g2, 1);
    poolt_expect_stats(p, 1, 0, 1, 4, 1);

    poolt_gate_open(&g2);
    pool_free(p);
    cr_expect_eq(atomic_load(&ran), 3);
    poolt_gate_deinit(&g1);
    poolt_gate_deinit(&g2);
}

Test(pool, busy_counts_jobs_running_on_every_worker, .timeout = TIMEOUT)
{
    struct gate g;
    poolt_gate_init(&g);
    struct pool *p = pool_new(3, 2, 0);
    cr_assert(p);

    /* One at a time: the queue holds only 2 until a worker takes a job.
     * All three run at once only if there are three threads. */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_OK);
        poolt_gate_wait_started(&g, i + 1);
    }
    poolt_expect_stats(p, 3, 0, 3, 0, 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_OK);
    poolt_expect_stats(p, 3, 2, 3, 0, 0);
    cr_assert_eq(pool_submit(p, poolt_gate_job, &g), POOL_EFULL);

    poolt_gate_open(&g);
    pool_close(p);
    poolt_expect_stats(p, 3, 0, 0, 5, 1);
    pool_free(p);
    poolt_gate_deinit(&g);
}

/* ---- jobs may submit ---- */

struct chain {
    struct pool *p;
    atomic_int ran;
    atomic_int rc;
};

static void chain_second(void *arg)
{
    atomic_fetch_add(&((struct chain *)arg)->ran, 1);
}

static void chain_first(void *arg)
{
    struct chain *c = arg;
    atomic_store(&c->rc, pool_submit(c->p, chain_second, c));
    atomic_fetch_add(&c->ran, 1);
}

Test(pool, job_may_submit_another_job, .timeout = TIMEOUT)
{
    struct chain c;
    atomic_init(&c.ran, 0);
    atomic_init(&c.rc, 99);
    c.p = pool_new(1, 1, 0);
    cr_assert(c.p);
    cr_assert_eq(pool_submit(c.p, chain_first, &c), POOL_OK);
    /* Close only once the first job has queued the second: a second job
     * submitted during close would (rightly) get POOL_ECLOSED. */
    while (atomic_load(&c.ran) < 1)
        sched_yield();
    pool_free(c.p);
    cr_expect_eq(atomic_load(&c.rc), POOL_OK);
    cr_expect_eq(atomic_load(&c.ran), 2);
}

/* ---- arguments ---- */

Test(pool, new_rejects_bad_arguments)
{
    cr_expect_null(pool_new(0, 1, 0));
    cr_expect_null(pool_new(-1, 1, 0));
    cr_expect_null(pool_new(1, 0, 0));
    cr_expect_null(pool_new(1, -5, 0));
    cr_expect_null(pool_new(1, 1, POOL_MIN_STACK - 1));
    cr_expect_null(pool_new(1, 1, 64 << 10));
    cr_expect_null(pool_new(1, 1, SIZE_MAX));

    struct pool *p = pool_new(1, 1, POOL_MIN_STACK);
    cr_expect(p, "exactly the minimum stack is accepted");
    pool_free(p);
}

Test(pool, new_returns_null_when_threads_cannot_start)
{
    /* No system maps a 4 EiB stack. */
    cr_expect_null(pool_new(2, 1, (size_t)1 << 62));
}

Test(pool, free_null_is_a_noop)
{
    pool_free(NULL);
    pool_close(NULL);
}

/* ---- stacks ---- */

struct stack_probe {
    size_t size; /* the worker's stack size, from pthread_getattr_np */
    int ok;
};

static void stack_probe_job(void *arg)
{
    struct stack_probe *s = arg;
    pthread_attr_t a;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        s->ok = pthread_attr_getstacksize(&a, &s->size) == 0;
        pthread_attr_destroy(&a);
    }
}

static size_t worker_stack(size_t requested)
{
    struct stack_probe s = {0, 0};
    struct pool *p = pool_new(1, 1, requested);
    cr_assert(p);
    cr_assert_eq(pool_submit(p, stack_probe_job, &s), POOL_OK);
    pool_free(p);
    cr_assert(s.ok, "pthread_getattr_np failed");
    return s.size;
}

Test(pool, workers_get_the_requested_stack, .timeout = TIMEOUT)
{
    /* Not `ulimit -s`: glibc's default for new threads follows it. */
    size_t def = worker_stack(0);
    cr_expect_geq(def, POOL_DEFAULT_STACK, "default stack %zu", def);
    /* Only lower bounds: glibc reuses a cached stack up to 4× bigger than
     * asked for. 16 MiB is more than both defaults, so it was honoured. */
    size_t big = worker_stack((size_t)16 << 20);
    cr_expect_geq(big, (size_t)16 << 20, "16 MiB requested, got %zu", big);
    /* Sizes that are not whole pages are rounded up, not refused. */
    size_t odd = worker_stack(POOL_MIN_STACK + 1);
    cr_expect_gt(odd, POOL_MIN_STACK, "got %zu", odd);
}

#define BIG_FRAME (512 << 10)

/* noinline and the volatile touch keep the 512 KiB frame real. */
__attribute__((noinline)) static unsigned deep_frame(unsigned seed)
{
    volatile unsigned char buf[BIG_FRAME];
    for (size_t i = 0; i < sizeof buf; i += 512)
        buf[i] = (unsigned char)(seed + i);
    unsigned sum = 0;
    for (size_t i = 0; i < sizeof buf; i += 512)
        sum += buf[i];
    return sum;
}

static void deep_job(void *arg)
{
    *(unsigned *)arg = deep_frame(7);
}

Test(pool, job_with_512k_of_stack_runs_on_default_stack, .timeout = TIMEOUT)
{
    unsigned want = 0;
    for (size_t i = 0; i < BIG_FRAME; i += 512)
        want += (unsigned char)(7 + i);
    unsigned got = 0;
    struct pool *p = pool_new(2, 1, 0);
    cr_assert(p);
    cr_assert_eq(pool_submit(p, deep_job, &got), POOL_OK);
    pool_free(p);
    cr_expect_eq(got, want);
}
