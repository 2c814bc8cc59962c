/* test_attention_threads.c -- the core under concurrent calls: 16 threads
 * at once give bit-identical results to the same calls made one at a time. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/core/attention_shared.h"

/* ---------------------------------------------------------------------- */
/* Concurrency: 16 threads at once give bit-identical results to the same
 * calls made one at a time.                                               */

#define NTHREADS 16

struct job {
    struct att_params p;
    struct rinputs in;
    float *out, *w, *out1, *w1;
    size_t olen, wlen;
    pthread_barrier_t *start;
    int rc;
    int threads_used; /* att_last_call_threads() after each concurrent call */
};

static void *job_run(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(j->start);
    for (int rep = 0; rep < 3 && j->rc == ATT_OK; rep++) {
        j->rc = att_forward(j->out, j->w, &j->p, NULL);
        const int used = att_last_call_threads();
        j->threads_used = rep == 0 || used == j->threads_used ? used : -1;
    }
    return NULL;
}

/* Multiply-adds of a call, as attention.h counts them for
 * ATT_PARALLEL_MIN_MACS. */
static double call_macs(const struct att_params *p)
{
    return (double)p->N * (p->L + 2.0 * p->S) * p->E * p->E +
           2.0 * p->N * p->L * (double)p->S * p->E;
}

/* Every call big enough to be split (ATT_PARALLEL_MIN_MACS): with
 * threads_per_request > 1 each runs on that many threads, all 16 at once. */
static void concurrency_round(int threads_per_request)
{
    att_init(threads_per_request);
    struct job jobs[NTHREADS];
    pthread_t th[NTHREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; t++) {
        struct job *j = &jobs[t];
        struct rcase c = {2 + t % 2, 96 + t, 120 - t, 64, 64, 48, 4, .proj = PROJ_SEPARATE,
                          .bias = 1, .mask = t % 3 ? M_BOOL2 : M_CAUSAL, .padding = t % 2,
                          .wmode = t % 3, .pe = t % 4 == 0};
        if (c.mask == M_CAUSAL)
            c.S = c.L;
        attt_make_case(&j->p, &j->in, &c, 1000 + (unsigned)t);
        cr_assert_eq(att_check(&j->p, &j->olen, &j->wlen, NULL), ATT_OK);
        cr_assert_geq(call_macs(&j->p), ATT_PARALLEL_MIN_MACS,
                      "job %d is too small to be split: the test would run one thread", t);
        j->out = calloc(j->olen, sizeof(float)), j->out1 = calloc(j->olen, sizeof(float));
        j->w = calloc(j->wlen + 1, sizeof(float)), j->w1 = calloc(j->wlen + 1, sizeof(float));
        cr_assert_eq(att_forward(j->out1, j->w1, &j->p, NULL), ATT_OK); /* one at a time */
        cr_assert_eq(att_last_call_threads(), threads_per_request,
                     "job %d, alone: %d threads, not threads_per_request %d", t,
                     att_last_call_threads(), threads_per_request);
        j->start = &start;
        j->rc = ATT_OK;
    }
    for (int t = 0; t < NTHREADS; t++)
        cr_assert_eq(pthread_create(&th[t], NULL, job_run, &jobs[t]), 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NTHREADS; t++) {
        struct job *j = &jobs[t];
        cr_assert_eq(j->rc, ATT_OK);
        cr_assert_eq(j->threads_used, threads_per_request,
                     "thread %d: its calls ran on %d threads (-1: not always the same), "
                     "not threads_per_request %d", t, j->threads_used, threads_per_request);
        cr_assert(memcmp(j->out, j->out1, j->olen * sizeof(float)) == 0,
                  "thread %d: output differs from the serial call (threads_per_request %d)", t,
                  threads_per_request);
        cr_assert(memcmp(j->w, j->w1, j->wlen * sizeof(float)) == 0,
                  "thread %d: weights differ from the serial call", t);
        free(j->out), free(j->out1), free(j->w), free(j->w1);
        attt_rinputs_free(&j->in);
    }
    pthread_barrier_destroy(&start);
}

Test(attention_concurrency, sixteen_threads_bit_identical_one_thread_per_request)
{
    concurrency_round(1);
}

Test(attention_concurrency, sixteen_threads_bit_identical_two_threads_per_request)
{
    concurrency_round(2);
}

Test(attention_concurrency, thread_count_changes_results_only_by_rounding)
{
    /* Big enough to be split (ATT_PARALLEL_MIN_MACS), rows not divisible by
     * the thread counts, every weights mode. Not bit-identical: OpenBLAS picks
     * different kernels (its "small matrix" path) for the smaller row blocks
     * of a split, which sum in another order. */
    for (int mode = ATT_WEIGHTS_NONE; mode <= ATT_WEIGHTS_AVERAGE; mode++) {
        struct rcase c = {2, 201, 150, 64, 48, 40, 4, .proj = PROJ_SEPARATE, .bias = 1,
                          .mask = M_BOOL3, .padding = 1, .wmode = mode};
        struct att_params p;
        struct rinputs in;
        size_t olen, wlen;
        attt_make_case(&p, &in, &c, 4242);
        cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
        float *out1 = malloc(olen * 4), *outn = malloc(olen * 4);
        float *w1 = malloc(wlen * 4 + 4), *wn = malloc(wlen * 4 + 4);
        att_init(1);
        cr_assert_eq(att_forward(out1, w1, &p, NULL), ATT_OK);
        for (int threads = 2; threads <= 5; threads++) {
            att_init(threads);
            cr_assert_eq(att_forward(outn, wn, &p, NULL), ATT_OK);
            cr_assert_eq(att_last_call_threads(), threads, "mode %d: the call was not split",
                         mode);
            cr_assert(check_tensor("output, n threads vs 1", outn, out1, olen, 1e-5, 1e-5),
                      "mode %d: output with %d threads", mode, threads);
            cr_assert(check_tensor("weights, n threads vs 1", wn, w1, wlen, 1e-6, 0.0),
                      "mode %d: weights with %d threads", mode, threads);
        }
        free(out1), free(outn), free(w1), free(wn);
        attt_rinputs_free(&in);
    }
}

/* attention.h: results are bit-identical for a given configuration and
 * input, and within the tolerance across configurations (threads,
 * batching, the fused self-attention projection), which sum in other
 * orders. */
Test(attention_concurrency, bit_identical_per_configuration_within_tolerance_across)
{
    struct rcase c = {2, 97, 97, 64, 64, 64, 4, .proj = PROJ_PACKED, .bias = 1,
                      .mask = M_CAUSAL, .wmode = ATT_WEIGHTS_PER_HEAD, .self = 1};
    struct att_params p;
    struct rinputs in;
    size_t olen, wlen;
    attt_make_case(&p, &in, &c, 9090);
    cr_assert_eq(att_check(&p, &olen, &wlen, NULL), ATT_OK);
    float *ref_o = malloc(olen * 4), *ref_w = malloc(wlen * 4);
    float *o1 = malloc(olen * 4), *w1 = malloc(wlen * 4);
    float *o2 = malloc(olen * 4), *w2 = malloc(wlen * 4);
    cr_assert_eq(att_forward_ref(ref_o, ref_w, &p, NULL), ATT_OK);
    /* copies of the query: the same numbers, but not the fused path */
    const size_t nq = olen;
    float *kcopy = malloc(nq * 4), *vcopy = malloc(nq * 4);
    memcpy(kcopy, p.query, nq * 4), memcpy(vcopy, p.query, nq * 4);
    for (int config = 0; config < 8; config++) {
        const int threads = 1 + config % 4, fused = config < 4;
        att_init(threads);
        p.key = fused ? p.query : kcopy, p.value = fused ? p.query : vcopy;
        cr_assert_eq(att_forward(o1, w1, &p, NULL), ATT_OK);
        cr_assert_eq(att_forward(o2, w2, &p, NULL), ATT_OK);
        cr_assert_eq(att_last_call_threads(), threads, "threads %d, fused %d: not split",
                     threads, fused);
        cr_assert(memcmp(o1, o2, olen * 4) == 0 && memcmp(w1, w2, wlen * 4) == 0,
                  "threads %d, fused %d: two calls differ", threads, fused);
        cr_assert(check_tensor("output vs reference", o1, ref_o, olen, OUT_ATOL, OUT_RTOL),
                  "threads %d, fused %d", threads, fused);
        cr_assert(check_tensor("weights vs reference", w1, ref_w, wlen, W_ATOL, 0.0),
                  "threads %d, fused %d", threads, fused);
    }
    /* batching: each item alone, within the tolerance of the batch */
    att_init(1);
    p.key = p.value = p.query;
    cr_assert_eq(att_forward(o1, w1, &p, NULL), ATT_OK);
    struct att_params one = p;
    one.N = 1;
    const size_t per_o = olen / 2, per_w = wlen / 2;
    for (int n = 0; n < 2; n++) {
        one.query = one.key = one.value = p.query + n * per_o;
        cr_assert_eq(att_forward(o2, w2, &one, NULL), ATT_OK);
        cr_assert(check_tensor("item alone vs in the batch", o2, o1 + n * per_o, per_o,
                               OUT_ATOL, OUT_RTOL));
        cr_assert(check_tensor("item alone vs in the batch (weights)", w2, w1 + n * per_w,
                               per_w, W_ATOL, 0.0));
    }
    free(ref_o), free(ref_w), free(o1), free(w1), free(o2), free(w2), free(kcopy), free(vcopy);
    attt_rinputs_free(&in);
}
