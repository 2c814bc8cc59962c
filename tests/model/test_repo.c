/* test_repo.c -- the model repository (model/repo.h): load and unload
 * calls on one model run in the order they arrived, and what the index,
 * the ready state and acquire say agree with the last call. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/repo.h"
#include "tests/support/testdata.h"

#define SRC "tests/models/repo/mha_f32"

/* A repository folder holding one model, "m" (a copy of mha_f32). */
static void make_repo(char *dir)
{
    char path[256];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/m", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/m/config.json", dir);
    cr_assert_eq(testdata_copy_file(SRC "/config.json", path), 0);
    snprintf(path, sizeof path, "%s/m/model.safetensors", dir);
    cr_assert_eq(testdata_copy_file(SRC "/model.safetensors", path), 0);
}

static void remove_repo(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static atomic_int finished; /* how many calls returned */

struct call {
    int unload;   /* else load */
    int rc;
};

static void *run_call(void *arg)
{
    struct call *c = arg;
    char why[512];
    c->rc = c->unload ? repo_unload("m", why, sizeof why) : repo_load("m", why, sizeof why);
    atomic_fetch_add(&finished, 1);
    return NULL;
}

static int state_of(const char *name)
{
    int state = -1;
    char reason[512];
    cr_assert_eq(repo_state(name, &state, reason, sizeof reason), 0);
    return state;
}

/* What the snapshot (which the repository index shows) says of "m". */
static const char *index_state(void)
{
    static char out[32];
    struct repo_snapshot s;
    cr_assert_eq(repo_snapshot(&s), 0);
    out[0] = '\0';
    for (size_t i = 0; i < s.n; i++)
        if (!strcmp(s.models[i].name, "m"))
            snprintf(out, sizeof out, "%s", repo_state_str(s.models[i].state));
    repo_snapshot_free(&s);
    return out;
}

/* Finding: with a request in flight, unload waits; a load sent during that
 * wait answered first, the unload then answered 200 too, and the model was
 * READY although the unload had come last to finish. */
Test(repo, load_and_unload_of_one_model_run_in_arrival_order, .timeout = 30)
{
    char dir[] = "/tmp/test_repo.XXXXXX";
    make_repo(dir);
    cr_assert_eq(repo_start(dir, NULL), 0);
    while (!repo_loading_done())
        sleep_ms(5);
    cr_assert_eq(state_of("m"), REPO_READY);

    struct repo_ref *slow; /* a request in flight */
    char why[512];
    cr_assert_eq(repo_acquire(&slow, "m", NULL, why, sizeof why), REPO_OK, "%s", why);

    pthread_t tu, tl;
    struct call unload = {.unload = 1}, load = {.unload = 0};
    cr_assert_eq(pthread_create(&tu, NULL, run_call, &unload), 0);
    for (int i = 0; i < 2000 && state_of("m") != REPO_UNLOADED; i++)
        sleep_ms(1);
    cr_assert_eq(state_of("m"), REPO_UNLOADED, "the unload has begun");
    /* inference during the unload's wait is refused (503 over HTTP) */
    struct repo_ref *late;
    cr_assert_eq(repo_acquire(&late, "m", NULL, why, sizeof why), REPO_ENOTREADY);

    cr_assert_eq(pthread_create(&tl, NULL, run_call, &load), 0);
    sleep_ms(300);
    cr_assert_eq(atomic_load(&finished), 0, "a call returned while the unload waits for its "
                 "request in flight");
    cr_assert_eq(state_of("m"), REPO_UNLOADED, "the load ran before the unload finished");
    cr_assert_eq(repo_acquire(&late, "m", NULL, why, sizeof why), REPO_ENOTREADY);

    repo_release(slow);
    pthread_join(tu, NULL);
    pthread_join(tl, NULL);
    cr_assert_eq(unload.rc, REPO_OK);
    cr_assert_eq(load.rc, REPO_OK);
    /* (which thread reports first after both returned is the scheduler's
     * choice; that the load waited is shown above) */
    /* the last call was the load: every view says READY */
    cr_assert_eq(state_of("m"), REPO_READY);
    cr_assert_str_eq(index_state(), "READY");
    cr_assert_eq(repo_acquire(&late, "m", NULL, why, sizeof why), REPO_OK, "%s", why);
    repo_release(late);

    /* and the other way round: a load, then an unload, ends UNLOADED */
    atomic_store(&finished, 0);
    cr_assert_eq(repo_acquire(&slow, "m", NULL, why, sizeof why), REPO_OK, "%s", why);
    struct call l2 = {.unload = 0}, u2 = {.unload = 1};
    cr_assert_eq(pthread_create(&tl, NULL, run_call, &l2), 0);
    sleep_ms(50);
    cr_assert_eq(pthread_create(&tu, NULL, run_call, &u2), 0);
    pthread_join(tl, NULL);
    repo_release(slow); /* the reload left this one retired: freed here */
    pthread_join(tu, NULL);
    cr_assert_eq(state_of("m"), REPO_UNLOADED);
    cr_assert_str_eq(index_state(), "UNLOADED");
    repo_stop();
    remove_repo(dir);
}
