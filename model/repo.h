/* repo.h -- the models the server holds: the model repository folder, each
 * model's state, its requests in flight and its statistics.
 *
 * One repository per process (global state, as the server has one). At
 * start-up repo_start() lists DIR's subdirectories and a loader thread loads
 * them one by one (model_load); a model that fails is kept with its reason,
 * state UNAVAILABLE, and the others are served. The built-in model
 * "attention" (weights in the request) is always present and ready.
 *
 *     repo_start("/srv/models", stderr);
 *     ...
 *     struct repo_ref *ref;
 *     char why[256];
 *     switch (repo_acquire(&ref, "bert-l3", "1", why, sizeof why)) {
 *     case REPO_OK: m = repo_model(ref); ... compute ...; repo_release(ref); break;
 *     case REPO_ENOTFOUND: 404; case REPO_ENOTREADY: 503 (why says since when)
 *     }
 *
 * A reference keeps the model it was taken on alive: a load replaces the
 * model for new requests at once, and the old one is freed when its last
 * reference goes; an unload waits for the model's requests in flight.
 * Load and unload calls on one model run one at a time, in the order they
 * arrived (a load sent while an unload waits starts after it), so the
 * model ends in the state the last call asked for. Every function is
 * thread-safe.
 */
#ifndef MODEL_REPO_H
#define MODEL_REPO_H

#include <stddef.h>
#include <stdio.h>

#include "model/model.h"

#define REPO_BUILTIN MODEL_BUILTIN /* the built-in model's name (model.h) */
#define REPO_VERSION "1"         /* every model's one version */

enum repo_status { REPO_OK = 0, REPO_ENOTFOUND = -1, REPO_ENOTREADY = -2, REPO_EINVAL = -3 };

enum repo_state { REPO_LOADING, REPO_READY, REPO_UNAVAILABLE, REPO_UNLOADED };
const char *repo_state_str(int state); /* "LOADING", "READY", "UNAVAILABLE", "UNLOADED" */

/* Start serving dir ("" or NULL: no repository, only the built-in model).
 * Loads in the background; log gets one line per model (NULL: silent).
 * Returns 0, or -1 when dir cannot be listed (the error is logged). */
int repo_start(const char *dir, FILE *log);
/* Unload everything (waits for references) and forget the repository. */
void repo_stop(void);
/* 1 once the start-up loading has finished (whatever each result). */
int repo_loading_done(void);

struct repo_ref;
/* A ready model by name and version (NULL: any; else must be "1").
 * REPO_OK with *ref; REPO_ENOTFOUND (no such model or version);
 * REPO_ENOTREADY (loading, failed or unloaded: why says which, and since
 * when: "model 'm' is not ready (UNAVAILABLE since 2026-11-26T15:40:00Z)").
 * why is for any client: it never holds the reason of a failed load, which
 * only the log and the repository index (repo_snapshot; the admin endpoint) give.
 * The built-in model gives a ref whose repo_model() is NULL. */
int repo_acquire(struct repo_ref **ref, const char *name, const char *version, char *why,
                 size_t whylen);
const struct model *repo_model(const struct repo_ref *ref);
const char *repo_ref_name(const struct repo_ref *ref);
void repo_release(struct repo_ref *ref); /* NULL: nothing */

/* Whether name is known (any state), and its state and reason. */
int repo_state(const char *name, int *state, char *reason, size_t n);

/* Statistics (extension_statistics): per model, counts and nanoseconds. */
enum repo_stage { REPO_QUEUE, REPO_INPUT, REPO_INFER, REPO_OUTPUT, REPO_STAGES };
struct repo_count {
    unsigned long long count, ns;
};

/* One model as it stood when the snapshot was taken. */
struct repo_info {
    char name[128];
    int builtin;      /* the built-in model (always first) */
    int state;        /* enum repo_state */
    char reason[512]; /* why it is not ready (or a failed reload's reason), or "" */
    struct repo_count success, fail; /* requests and their total time */
    struct repo_count stage[REPO_STAGES]; /* of the successful requests */
    unsigned long long inference_count, execution_count;
    long long last_ms; /* its last successful request (ms since the epoch), 0: none */
};

/* Every model, one consistent copy taken under the lock: the built-in
 * first, then the repository's by name. The registry writes no protocol:
 * the API turns this into the v2 index, statistics and /metrics lines. */
struct repo_snapshot {
    size_t n;
    struct repo_info *models; /* n of them (malloc'd) */
    const char *reserved;     /* DIR holds a folder named as the built-in model, not
                                 loaded: why (static text); else NULL */
};
/* 0, or -1 when out of memory (s then empty). */
int repo_snapshot(struct repo_snapshot *s);
void repo_snapshot_free(struct repo_snapshot *s);

/* Load (or reload) DIR/name; waits for the load. REPO_OK, REPO_EINVAL (no
 * repository, or a name that is not a folder of it), REPO_ENOTREADY (the
 * load failed: why says why; the model is then UNAVAILABLE, unless it was
 * READY: a failed reload keeps serving the weights loaded before, READY,
 * with the failure as the index's reason). */
int repo_load(const char *name, char *why, size_t whylen);
/* Unload name: new requests are refused at once; returns when its requests
 * in flight are done. REPO_OK or REPO_ENOTFOUND. */
int repo_unload(const char *name, char *why, size_t whylen);

/* One request on name: ok or failed, its total time and its stages (s). */
void repo_record(const char *name, int ok, double total_s, const double stage_s[REPO_STAGES],
                 long long batch);

#endif
