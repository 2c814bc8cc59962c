/* blas.h -- the core's process-level state, internal to core/.
 *
 * OpenBLAS is process-global: its kernels are picked when the library
 * loads, its thread pool is shared, and its pthread build crashes past 128
 * calling threads. blas.c keeps all of that away from the math: the kernel
 * selection by re-exec and att_init() (public: attention.h includes this
 * header for them), and for attention.c the thread count of a call and the
 * gate every call passes through:
 *
 *     int nt = att_gate_enter(wanted);   // may wait; nt ≤ wanted
 *     ... compute on nt threads ...
 *     att_gate_leave(nt);
 *
 * The rest of the service calls the first two through attention.h; the
 * thread count and the gate are core/'s only.
 */
#ifndef ATT_BLAS_H
#define ATT_BLAS_H

#define ATT_MAX_CONCURRENT 64 /* threads inside OpenBLAS at once */
#define ATT_MAX_THREADS 16     /* threads one call may use */

/* OpenBLAS 0.3.21 (Debian 12) does not know recent CPU models and falls
 * back to its generic "Prescott" SSE3 kernels: 5× slower sgemm on an AVX-512
 * Xeon. It picks its kernels once, when the library loads, from
 * $OPENBLAS_CORETYPE. Call this first thing in main(): if the variable is
 * unset, OpenBLAS chose Prescott and the CPU has AVX-512 (or AVX2+FMA), it
 * sets OPENBLAS_CORETYPE=SkylakeX (or Haswell) and re-executes the program
 * with the same argv. It also sets OPENBLAS_NUM_THREADS=1 when unset (the
 * core threads by itself; OpenBLAS's idle pool would only spin). Returns
 * only when no re-exec was needed (or it failed), with the core name in
 * use; variables already set are respected. */
const char *att_blas_select_kernels(char **argv);

/* Threads each att_forward() call may use (1 … ATT_MAX_THREADS; small
 * calls use one). The core splits a call over its own threads and keeps
 * OpenBLAS single-threaded. Call once before the first att_forward(); not
 * thread-safe itself. */
void att_init(int threads);

/* Threads one att_forward() call may split its work over: att_init()'s
 * count, 1 … ATT_MAX_THREADS (1 before att_init()). */
int att_threads_per_call(void);

/* Take up to `want` of the ATT_MAX_CONCURRENT units (1 in all with a serial
 * OpenBLAS), waiting until they are free; returns how many were granted,
 * 1 … want. Each thread of a call inside OpenBLAS holds one unit. */
int att_gate_enter(int want);

/* Give back what att_gate_enter() granted. */
void att_gate_leave(int units);

/* The threads the core's parallel work runs on: a runner of n independent
 * tasks fn(arg, 0 .. n-1) that returns once every task has run, on up to
 * `width` threads at once (the caller's among them). The server sets its
 * worker pool's (lib/pool.h pool_parallel), so that a request's work is
 * spread over the threads that serve requests and no thread is made per
 * request; before att_set_runner() (a test, a benchmark) a task runs on a
 * thread made for it, up to att_threads_per_call() at once. */
typedef void (*att_task_fn)(void *arg, int i);
struct att_runner {
    void (*run)(void *ctx, int n, att_task_fn fn, void *arg);
    void *ctx;
    int width;
};
/* Set once at start-up, before any call into the core; NULL: back to the
 * threads made per call. */
void att_set_runner(const struct att_runner *r);
/* Run fn(arg, i) for i in 0 .. n-1 on the runner's threads; returns when
 * all have run. Any thread, nested calls included. */
void att_parallel(int n, att_task_fn fn, void *arg);
/* A flag the calling thread's computations read (NULL: none, the
 * default): once *flag is nonzero, att_forward*() and att_step_begin() /
 * att_step_finish() stop between heads or at their start and return
 * ATT_ECANCELLED (attention.h), the outputs undefined and a cache as
 * before the step. att_parallel()'s tasks read their caller's flag.
 * Thread-local; the flag must outlive the calls. */
void att_cancel_set(const volatile int *flag);
/* The calling thread's flag; att_cancelled(): it is set and nonzero. */
const volatile int *att_cancel_flag(void);
int att_cancelled(void);
/* How many threads att_parallel() may use at once (>= 1). */
int att_parallel_width(void);

#endif
