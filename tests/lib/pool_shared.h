/* pool_shared.h -- what the test_pool*.c files share: a gate that holds
 * jobs running until the test opens it, a counting job, the stats check. */
#ifndef TESTS_POOL_SHARED_H
#define TESTS_POOL_SHARED_H

#include <pthread.h>
#include <stdatomic.h>

#include "lib/pool.h"

#define TIMEOUT 30.0

/* Jobs that block until the test opens the gate, counting who started. */
struct gate {
    pthread_mutex_t m;
    pthread_cond_t c;
    int started, open;
};

void poolt_gate_init(struct gate *g);

void poolt_gate_deinit(struct gate *g);

void poolt_gate_job(void *arg);

void poolt_gate_wait_started(struct gate *g, int n);

void poolt_gate_open(struct gate *g);

void poolt_count_job(void *arg);

void poolt_expect_stats(struct pool *p, int workers, int queued, int busy,
                  unsigned long long completed, unsigned long long rejected);

/* A pool of one worker, held by gate g, and a queue of 3, full of
 * count_job(ran). */
struct pool *poolt_pool_held_and_full(struct gate *g, atomic_int *ran);

#endif
