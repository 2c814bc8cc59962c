/* test_pool.c -- the worker pool: every job once, a bounded queue that
 * refuses instead of blocking, draining on close, stats, stack sizes.
 *
 * Nothing here passes or fails on timing. A job that must stay running
 * waits on a gate the test opens; the test waits on the gate until the
 * jobs it needs have started. A submit that blocked would hang with the
 * gate closed, and the .timeout turns that hang into a failure. (One
 * test sleeps 20 ms to make a bug more likely to show; it passes for a
 * correct pool whatever the scheduling.) */
#define _GNU_SOURCE /* pthread_getattr_np */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "lib/pool.h"

#define TIMEOUT 30.0

/* Jobs that block until the test opens the gate, counting who started. */
struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int started, open;
};

static void gate_init(struct gate *g)
{
    pthread_mutex_init(&g->m, NULL);
    pthread_cond_init(&g->c, NULL);
    g->started = g->open = 0;
}

static void gate_deinit(struct gate *g)
{
    pthread_cond_destroy(&g->c);
    pthread_mutex_destroy(&g->m);
}

static void gate_job(void *arg)
{
    struct gate *g = arg;

    pthread_mutex_lock(&g->m);
    g->started++;
    pthread_cond_broadcast(&g->c);
    while (!g->open)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static void gate_wait_started(struct gate *g, int n)
{
    pthread_mutex_lock(&g->m);
    while (g->started < n)
        pthread_cond_wait(&g->c, &g->m);
    pthread_mutex_unlock(&g->m);
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->m);
    g->open = 1;
    pthread_cond_broadcast(&g->c);
    pthread_mutex_unlock(&g->m);
}

static void count_job(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static void expect_stats(struct pool *p, int workers, int queued, int busy,
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

/* ---- a bounded queue refuses at once ---- */

/* A pool of one worker, held by gate g, and a queue of 3, full of
 * count_job(ran). */
static struct pool *pool_held_and_full(struct gate *g, atomic_int *ran)
{
    gate_init(g);
    atomic_init(ran, 0);
    struct pool *p = pool_new(1, 3, 0);
    cr_assert(p);
    cr_assert_eq(pool_submit(p, gate_job, g), POOL_OK);
    gate_wait_started(g, 1);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(pool_submit(p, count_job, ran), POOL_OK, "submit %d", i);
    return p;
}

Test(pool, full_queue_refuses_without_blocking, .timeout = TIMEOUT)
{
    struct gate g;
    atomic_int ran;
    struct pool *p = pool_held_and_full(&g, &ran);
    /* The only worker is held by the gate, so a blocking submit would
     * never return: reaching the next line proves it did not block. */
    cr_assert_eq(pool_submit(p, count_job, &ran), POOL_EFULL);
    cr_assert_eq(pool_submit(p, count_job, &ran), POOL_EFULL);
    expect_stats(p, 1, 3, 1, 0, 2);
    cr_expect_eq(atomic_load(&ran), 0);

    gate_open(&g);
    pool_close(p);
    expect_stats(p, 1, 0, 0, 4, 2);
    cr_expect_eq(atomic_load(&ran), 3, "queued jobs run: %d of 3", atomic_load(&ran));
    pool_free(p);
    gate_deinit(&g);
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
    gate_init(&g);
    struct order o = {.n = 0};
    struct order_job jobs[8];
    struct pool *p = pool_new(1, 8, 0);
    cr_assert(p);

    cr_assert_eq(pool_submit(p, gate_job, &g), POOL_OK);
    gate_wait_started(&g, 1);
    for (int i = 0; i < 8; i++) {
        jobs[i] = (struct order_job){&o, i};
        cr_assert_eq(pool_submit(p, order_job_run, &jobs[i]), POOL_OK);
    }
    gate_open(&g);
    pool_free(p);

    cr_assert_eq(o.n, 8);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(o.seq[i], i, "position %d ran job %d", i, o.seq[i]);
    gate_deinit(&g);
}

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
    struct pool *p = pool_held_and_full(&g, &ran);

    pthread_t t;
    struct closer c = {p, op};
    cr_assert_eq(pthread_create(&t, NULL, closer_main, &c), 0);

    /* The pool cannot be freed yet: its worker is held by the gate. */
    const unsigned long long efull = submit_until_closed(p, count_job, &ran);
    cr_assert_eq(pool_submit(p, count_job, &ran), POOL_ECLOSED);
    /* POOL_ECLOSED is not a rejection; the 3 jobs are still waiting. */
    expect_stats(p, 1, 3, 1, 0, efull);
    cr_expect_eq(atomic_load(&ran), 0);

    gate_open(&g);
    pthread_join(t, NULL);
    cr_expect_eq(atomic_load(&ran), 3, "queued jobs run before close returns: %d of 3",
                 atomic_load(&ran));
    if (op == pool_close) {
        expect_stats(p, 1, 0, 0, 4, efull);
        cr_expect_eq(pool_submit(p, count_job, &ran), POOL_ECLOSED);
        pool_free(p);
    }
    gate_deinit(&g);
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
        cr_assert_eq(pool_submit(p, count_job, &ran), POOL_OK);
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
    gate_init(&g);
    struct pool *p = pool_new(1, 1, 0);
    cr_assert(p);
    struct second_closer c2 = {.p = p};
    atomic_init(&c2.returned, 0);
    struct probe pr = {.c = &c2};
    atomic_init(&pr.ran, 0);
    atomic_init(&pr.saw_returned, -1);
    cr_assert_eq(pool_submit(p, gate_job, &g), POOL_OK);
    gate_wait_started(&g, 1);
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
    gate_open(&g);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);

    cr_expect_eq(atomic_load(&pr.ran), 1);
    cr_expect_eq(atomic_load(&pr.saw_returned), 0,
                 "the second pool_close() returned before the queue was drained");
    pool_close(p); /* a third, later call returns at once */
    expect_stats(p, 1, 0, 0, 2, efull);
    pool_free(p);
    gate_deinit(&g);
}

/* ---- stats ---- */

Test(pool, stats_track_queued_busy_completed_rejected, .timeout = TIMEOUT)
{
    struct gate g1, g2;
    gate_init(&g1);
    gate_init(&g2);
    atomic_int ran;
    atomic_init(&ran, 0);
    struct pool *p = pool_new(1, 4, 0);
    cr_assert(p);
    expect_stats(p, 1, 0, 0, 0, 0);

    cr_assert_eq(pool_submit(p, gate_job, &g1), POOL_OK);
    gate_wait_started(&g1, 1);
    expect_stats(p, 1, 0, 1, 0, 0);

    for (int i = 0; i < 3; i++)
        cr_assert_eq(pool_submit(p, count_job, &ran), POOL_OK);
    cr_assert_eq(pool_submit(p, gate_job, &g2), POOL_OK);
    expect_stats(p, 1, 4, 1, 0, 0);
    cr_assert_eq(pool_submit(p, count_job, &ran), POOL_EFULL);
    expect_stats(p, 1, 4, 1, 0, 1);

    /* One worker takes jobs in order, so when g2's job starts everything
     * before it has completed and been counted. */
    gate_open(&g1);
    gate_wait_started(&g2, 1);
    expect_stats(p, 1, 0, 1, 4, 1);

    gate_open(&g2);
    pool_free(p);
    cr_expect_eq(atomic_load(&ran), 3);
    gate_deinit(&g1);
    gate_deinit(&g2);
}

Test(pool, busy_counts_jobs_running_on_every_worker, .timeout = TIMEOUT)
{
    struct gate g;
    gate_init(&g);
    struct pool *p = pool_new(3, 2, 0);
    cr_assert(p);

    /* One at a time: the queue holds only 2 until a worker takes a job.
     * All three run at once only if there are three threads. */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(pool_submit(p, gate_job, &g), POOL_OK);
        gate_wait_started(&g, i + 1);
    }
    expect_stats(p, 3, 0, 3, 0, 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pool_submit(p, gate_job, &g), POOL_OK);
    expect_stats(p, 3, 2, 3, 0, 0);
    cr_assert_eq(pool_submit(p, gate_job, &g), POOL_EFULL);

    gate_open(&g);
    pool_close(p);
    expect_stats(p, 3, 0, 0, 5, 1);
    pool_free(p);
    gate_deinit(&g);
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
