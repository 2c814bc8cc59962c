/* blas.c -- the core's process-level work: OpenBLAS's kernel selection
 * (a re-exec), its threading, the gate that bounds the threads inside it,
 * and att_init()'s thread count. The math is in attention.c; see blas.h. */
#include "core/blas.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* OpenBLAS extensions (declared in its cblas.h, repeated for clarity). */
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);
char *openblas_get_corename(void);

/* ---------------------------------------------------------------------- */
/* Concurrency gate (see attention.h): at most ATT_MAX_CONCURRENT threads
 * inside OpenBLAS at once (a call with T threads takes T units), or one call
 * at a time if the library is the serial build. */

static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_free, gate_size;

static void gate_setup(void)
{
    gate_size = gate_free = openblas_get_parallel() == 0 ? 1 : ATT_MAX_CONCURRENT;
}

int att_gate_enter(int want)
{
    pthread_once(&gate_once, gate_setup);
    if (want > gate_size)
        want = gate_size;
    pthread_mutex_lock(&gate_mu);
    while (gate_free < want)
        pthread_cond_wait(&gate_cv, &gate_mu);
    gate_free -= want;
    pthread_mutex_unlock(&gate_mu);
    return want;
}

void att_gate_leave(int units)
{
    pthread_mutex_lock(&gate_mu);
    gate_free += units;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

const char *att_blas_select_kernels(char **argv)
{
    const char *core = openblas_get_corename();
    int changed = 0;
    /* The core never uses OpenBLAS's own threads (see att_init); without
     * this, its idle pool threads spin in sched_yield() next to ours. */
    if (!getenv("OPENBLAS_NUM_THREADS"))
        changed |= setenv("OPENBLAS_NUM_THREADS", "1", 1) == 0;
    if (!getenv("OPENBLAS_CORETYPE") && core && strcasecmp(core, "Prescott") == 0) {
        const char *want = NULL;
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512cd"))
            want = "SkylakeX";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            want = "Haswell";
        if (want)
            changed |= setenv("OPENBLAS_CORETYPE", want, 1) == 0;
    }
    if (!changed)
        return core;
    execv("/proc/self/exe", argv); /* returns only on failure */
    return core;
}

/* Threads each att_forward() call splits its work across (att_init). */
static int att_threads = 1;

int att_threads_per_call(void)
{
    return att_threads;
}

void att_init(int threads)
{
    att_threads = threads < 1 ? 1 : threads > ATT_MAX_THREADS ? ATT_MAX_THREADS : threads;
    /* OpenBLAS itself stays single-threaded: the core splits each call over
     * its own threads (rows of the projections, row blocks of attention), so
     * concurrent callers never contend for OpenBLAS's one thread pool and a
     * result never depends on how OpenBLAS would have split it. */
    openblas_set_num_threads(1);
    pthread_once(&gate_once, gate_setup);
}

/* ---------------------------------------------------------------------- */
/* The runner (blas.h): the server's pool, or threads made per call. */

static struct att_runner runner;

void att_set_runner(const struct att_runner *r)
{
    if (r)
        runner = *r;
    else
        memset(&runner, 0, sizeof runner);
}

int att_parallel_width(void)
{
    return runner.run ? (runner.width < 1 ? 1 : runner.width) : att_threads;
}

struct own_task {
    att_task_fn fn;
    void *arg;
    int i, n, step;
};

static void *own_run(void *a)
{
    const struct own_task *t = a;
    for (int i = t->i; i < t->n; i += t->step)
        t->fn(t->arg, i);
    return NULL;
}

/* The cancel flag (blas.h): the thread's own, or its task's caller's. */
static _Thread_local const volatile int *cancel_flag;

void att_cancel_set(const volatile int *flag)
{
    cancel_flag = flag;
}

const volatile int *att_cancel_flag(void)
{
    return cancel_flag;
}

int att_cancelled(void)
{
    return cancel_flag && *cancel_flag;
}

/* A task run with its caller's cancel flag. */
struct cancel_task {
    att_task_fn fn;
    void *arg;
    const volatile int *flag;
};

static void cancel_run(void *a, int i)
{
    const struct cancel_task *t = a;
    const volatile int *const was = cancel_flag;
    cancel_flag = t->flag;
    t->fn(t->arg, i);
    cancel_flag = was;
}

void att_parallel(int n, att_task_fn fn, void *arg)
{
    if (n <= 0)
        return;
    struct cancel_task ct = {fn, arg, cancel_flag};
    if (ct.flag) /* the tasks, on other threads, read the caller's */
        fn = cancel_run, arg = &ct;
    if (runner.run && n > 1) {
        runner.run(runner.ctx, n, fn, arg);
        return;
    }
    /* no runner: up to att_threads threads, task i on thread i mod nt */
    const int nt = n < att_threads ? n : att_threads < 1 ? 1 : att_threads;
    pthread_t th[ATT_MAX_THREADS];
    struct own_task t[ATT_MAX_THREADS];
    int started = 1;
    for (int k = 0; k < nt; k++)
        t[k] = (struct own_task){fn, arg, k, n, nt};
    for (; started < nt; started++)
        if (pthread_create(&th[started], NULL, own_run, &t[started]) != 0)
            break;
    for (int k = started; k < nt; k++) /* a thread that did not start: here */
        own_run(&t[k]);
    own_run(&t[0]);
    for (int k = 1; k < started; k++)
        pthread_join(th[k], NULL);
}
