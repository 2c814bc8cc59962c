/* repo.c -- the models the server holds; see repo.h. */
#include "model/repo.h"

#include <dirent.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* One loaded model and the requests using it. */
struct repo_ref {
    struct model *m; /* NULL for the built-in model */
    struct entry *e;
    int refs;
    int retired;     /* 1: replaced, freed at its last release;
                        2: unloaded, repo_unload waits for it and frees it */
};

struct entry {
    struct entry *next;
    char name[128];
    int builtin;
    int state;         /* enum repo_state */
    time_t since;      /* when it entered that state (UTC) */
    char reason[512];  /* why it is not ready, or "" */
    struct repo_ref *cur; /* READY: what new requests get */
    /* load and unload calls on this model run one at a time, in the order
     * they arrived: each takes a ticket and waits for its turn (R.turn) */
    unsigned long ticket_next, ticket_now;
    /* statistics */
    struct repo_count success, fail, stage[REPO_STAGES];
    unsigned long long inference_count, execution_count;
    long long last_ms;
};

static struct {
    pthread_mutex_t lock;    /* everything below */
    pthread_cond_t released; /* a retired model's last reference went */
    pthread_cond_t turn;     /* an entry's ticket_now moved on */
    pthread_mutex_t loading; /* one load at a time */
    char dir[256];
    struct entry *head;      /* the built-in model first, then by name */
    FILE *log;
    int reserved_folder;     /* DIR/attention exists: an index row says why it is not used */
    atomic_int done;
    pthread_t loader;
    int loader_started;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .released = PTHREAD_COND_INITIALIZER,
       .turn = PTHREAD_COND_INITIALIZER,
       .loading = PTHREAD_MUTEX_INITIALIZER};

#define RESERVED_REASON                                                                   \
    "the folder 'attention' is not loaded: the name is reserved for the built-in model; "   \
    "rename the folder"

static struct entry builtin_entry = {.name = REPO_BUILTIN, .builtin = 1, .state = REPO_READY};
static struct repo_ref builtin_ref = {.e = &builtin_entry};

const char *repo_state_str(int state)
{
    static const char *names[] = {"LOADING", "READY", "UNAVAILABLE", "UNLOADED"};
    return state >= 0 && state <= REPO_UNLOADED ? names[state] : "UNKNOWN";
}

/* Every change of e's state, with the time it took place (lock held). */
static void set_state(struct entry *e, int state)
{
    e->state = state, e->since = time(NULL);
}

static struct entry *find(const char *name)
{
    for (struct entry *e = R.head; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    return NULL;
}

/* Add name in order (after the built-in model); lock held. */
static struct entry *add(const char *name)
{
    struct entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    snprintf(e->name, sizeof e->name, "%s", name);
    set_state(e, REPO_UNLOADED);
    struct entry **at = &R.head->next;
    while (*at && strcmp((*at)->name, name) < 0)
        at = &(*at)->next;
    e->next = *at;
    *at = e;
    return e;
}

/* Take ref out of service; freed now if unused. Lock held. */
static void retire(struct repo_ref *ref)
{
    if (!ref)
        return;
    ref->retired = 1;
    if (ref->refs == 0) {
        model_free(ref->m);
        free(ref);
    }
}

static int valid_name(const char *name)
{
    if (!name[0] || name[0] == '.' || strlen(name) >= sizeof builtin_entry.name)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

/* Whether DIR/name is a directory. */
static int is_model_dir(const char *name)
{
    char path[600];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", R.dir, name);
    return valid_name(name) && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* turn_take waits (lock held, released meanwhile) for the load and unload
 * calls on e that arrived first to end; turn_end lets the next one go. */
static void turn_take(struct entry *e)
{
    const unsigned long ticket = e->ticket_next++;
    while (e->ticket_now != ticket)
        pthread_cond_wait(&R.turn, &R.lock);
}

static void turn_end(struct entry *e)
{
    e->ticket_now++;
    pthread_cond_broadcast(&R.turn);
}

/* bytes in the unit that reads best: "512 B", "17.2 KB", "9.4 MB", "1.25 GB"
 * (powers of 1000, as the sizes of files); returns buf. */
static const char *size_str(char *buf, size_t len, size_t bytes)
{
    const double b = (double)bytes;
    if (bytes < 1000)
        snprintf(buf, len, "%zu B", bytes);
    else if (b < 999.95e3)
        snprintf(buf, len, "%.1f KB", b / 1e3);
    else if (b < 999.95e6)
        snprintf(buf, len, "%.1f MB", b / 1e6);
    else
        snprintf(buf, len, "%.2f GB", b / 1e9);
    return buf;
}

/* repo_load(); startup: the start-up loader's load, skipped (REPO_OK) when
 * a call through the API came first (the model is no longer LOADING). */
static int load(const char *name, int startup, char *why, size_t whylen)
{
    if (!R.dir[0]) {
        snprintf(why, whylen, "no model_repository is set");
        return REPO_EINVAL;
    }
    if (strcmp(name, REPO_BUILTIN) == 0) {
        snprintf(why, whylen, "'%s' is the built-in model; a repository folder may not have "
                 "its name", REPO_BUILTIN);
        return REPO_EINVAL;
    }
    if (!is_model_dir(name)) {
        snprintf(why, whylen, "no model folder '%.128s' in the model repository", name);
        return REPO_EINVAL;
    }
    pthread_mutex_lock(&R.lock);
    struct entry *e = find(name);
    if (!e && !(e = add(name))) {
        pthread_mutex_unlock(&R.lock);
        snprintf(why, whylen, "out of memory");
        return REPO_ENOTREADY;
    }
    turn_take(e);
    if (startup && e->state != REPO_LOADING) {
        turn_end(e);
        pthread_mutex_unlock(&R.lock);
        return REPO_OK;
    }
    pthread_mutex_unlock(&R.lock);
    pthread_mutex_lock(&R.loading);
    struct model *m = NULL;
    char err[512] = "out of memory";
    struct repo_ref *ref = calloc(1, sizeof *ref);
    const int rc = ref ? model_load(&m, R.dir, name, err, sizeof err) : -1;
    if (rc != 0)
        free(ref);
    pthread_mutex_lock(&R.lock);
    const int kept = rc != 0 && e->cur; /* a failed reload keeps what is served (Triton) */
    if (rc == 0) {
        retire(e->cur);
        ref->m = m, ref->e = e;
        e->cur = ref;
        set_state(e, REPO_READY);
        e->reason[0] = '\0';
    } else if (kept) {
        snprintf(e->reason, sizeof e->reason, "the last load failed, the weights loaded before "
                 "are served: %.400s", err);
        snprintf(why, whylen, "%s (the weights loaded before are still served)", err);
    } else {
        set_state(e, REPO_UNAVAILABLE);
        snprintf(e->reason, sizeof e->reason, "%s", err);
        snprintf(why, whylen, "%s", err);
    }
    /* the line is made before the next call's turn: an unload may free m */
    char line[768];
    if (rc == 0) {
        char size[32];
        snprintf(line, sizeof line, "model %s: loaded (%s, E %d, heads %d, kv heads %d, head_dim "
                 "%d, %s, %s)", name, model_format_name(m->format), m->E, m->H, m->Hkv,
                 m->head_dim, m->dtype, size_str(size, sizeof size, m->bytes));
    } else {
        snprintf(line, sizeof line, "model %s: NOT loaded%s: %s", name,
                 kept ? " (still serving the weights loaded before)" : "", err);
    }
    turn_end(e);
    pthread_mutex_unlock(&R.lock);
    pthread_mutex_unlock(&R.loading);
    if (R.log)
        fprintf(R.log, "attention-server: %s\n", line);
    return rc == 0 ? REPO_OK : REPO_ENOTREADY;
}

/* Stop serving e: new requests are refused at once; returns (lock held,
 * released while waiting) when its requests in flight are done, and frees
 * the model. */
static void take_down(struct entry *e)
{
    struct repo_ref *ref = e->cur;
    e->cur = NULL;
    set_state(e, REPO_UNLOADED);
    snprintf(e->reason, sizeof e->reason, "unloaded");
    if (ref) {
        ref->retired = 2;
        while (ref->refs > 0) /* its requests in flight */
            pthread_cond_wait(&R.released, &R.lock);
        model_free(ref->m);
        free(ref);
    }
}

int repo_unload(const char *name, char *why, size_t whylen)
{
    pthread_mutex_lock(&R.lock);
    struct entry *e = find(name);
    if (!e || e->builtin) {
        pthread_mutex_unlock(&R.lock);
        snprintf(why, whylen, e ? "the built-in model '%s' cannot be unloaded"
                                : "unknown model '%.128s'", name);
        return e ? REPO_EINVAL : REPO_ENOTFOUND;
    }
    turn_take(e);
    take_down(e);
    turn_end(e);
    pthread_mutex_unlock(&R.lock);
    return REPO_OK;
}

int repo_load(const char *name, char *why, size_t whylen)
{
    return load(name, 0, why, whylen);
}

static void *loader_main(void *arg)
{
    (void)arg;
    for (;;) {
        char name[128] = "";
        pthread_mutex_lock(&R.lock);
        for (struct entry *e = R.head; e; e = e->next)
            if (e->state == REPO_LOADING && !e->cur) {
                snprintf(name, sizeof name, "%s", e->name);
                break;
            }
        pthread_mutex_unlock(&R.lock);
        if (!name[0])
            break;
        char why[512];
        if (load(name, 1, why, sizeof why) == REPO_EINVAL) {
            pthread_mutex_lock(&R.lock);
            struct entry *e = find(name);
            if (e && e->state == REPO_LOADING) {
                set_state(e, REPO_UNAVAILABLE);
                snprintf(e->reason, sizeof e->reason, "%s", why);
            }
            pthread_mutex_unlock(&R.lock);
        }
    }
    atomic_store(&R.done, 1);
    return NULL;
}

int repo_start(const char *dir, FILE *log)
{
    pthread_mutex_lock(&R.lock);
    R.log = log;
    R.head = &builtin_entry;
    builtin_entry.next = NULL;
    builtin_entry.cur = &builtin_ref;
    snprintf(R.dir, sizeof R.dir, "%s", dir ? dir : "");
    int rc = 0;
    if (R.dir[0]) {
        DIR *d = opendir(R.dir);
        if (!d) {
            if (log)
                fprintf(log, "attention-server: model_repository '%s' cannot be listed\n", R.dir);
            rc = -1;
        }
        for (struct dirent *de; d && (de = readdir(d));) {
            if (de->d_name[0] == '.' || !is_model_dir(de->d_name))
                continue;
            if (strcmp(de->d_name, REPO_BUILTIN) == 0) {
                R.reserved_folder = 1;
                if (log)
                    fprintf(log, "attention-server: model %s: NOT loaded: %s\n", REPO_BUILTIN,
                            RESERVED_REASON);
                continue;
            }
            struct entry *e = add(de->d_name);
            if (e)
                set_state(e, REPO_LOADING);
        }
        if (d)
            closedir(d);
    }
    pthread_mutex_unlock(&R.lock);
    atomic_store(&R.done, 0); /* nothing to load: done before it returns (ready at once) */
    R.loader_started = R.head->next && pthread_create(&R.loader, NULL, loader_main, NULL) == 0;
    if (!R.loader_started)
        loader_main(NULL);
    return rc;
}

void repo_stop(void)
{
    if (R.loader_started)
        pthread_join(R.loader, NULL);
    R.loader_started = 0;
    pthread_mutex_lock(&R.lock);
    for (struct entry *e = R.head ? R.head->next : NULL; e; e = e->next)
        take_down(e);
    struct entry *e = R.head ? R.head->next : NULL;
    if (R.head)
        R.head->next = NULL;
    while (e) {
        struct entry *next = e->next;
        free(e);
        e = next;
    }
    memset(&builtin_entry.success, 0,
           sizeof builtin_entry - offsetof(struct entry, success));
    R.dir[0] = '\0';
    R.reserved_folder = 0;
    pthread_mutex_unlock(&R.lock);
}

int repo_loading_done(void)
{
    return atomic_load(&R.done);
}

int repo_acquire(struct repo_ref **ref, const char *name, const char *version, char *why,
                 size_t whylen)
{
    *ref = NULL;
    if (version && strcmp(version, REPO_VERSION) != 0) {
        snprintf(why, whylen, "model '%.128s' has no version '%.32s' (it has version %s)",
                 name, version, REPO_VERSION);
        return REPO_ENOTFOUND;
    }
    pthread_mutex_lock(&R.lock);
    struct entry *e = R.head ? find(name) : strcmp(name, REPO_BUILTIN) ? NULL : &builtin_entry;
    int rc = REPO_OK;
    if (!e) {
        snprintf(why, whylen, "unknown model '%.128s'", name);
        rc = REPO_ENOTFOUND;
    } else if (e->builtin) {
        *ref = &builtin_ref;
    } else if (e->state != REPO_READY || !e->cur) {
        /* the reason (a path, a field of a config) is the operator's: the
         * log and the repository index (admin_token) have it */
        char since[32] = "?";
        struct tm tm;
        if (gmtime_r(&e->since, &tm))
            strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(why, whylen, "model '%s' is not ready (%s since %s)", name,
                 repo_state_str(e->state), since);
        rc = REPO_ENOTREADY;
    } else {
        e->cur->refs++;
        *ref = e->cur;
    }
    pthread_mutex_unlock(&R.lock);
    return rc;
}

const struct model *repo_model(const struct repo_ref *ref)
{
    return ref ? ref->m : NULL;
}

const char *repo_ref_name(const struct repo_ref *ref)
{
    return ref->e->name;
}

void repo_release(struct repo_ref *ref)
{
    if (!ref || ref == &builtin_ref)
        return;
    pthread_mutex_lock(&R.lock);
    if (--ref->refs == 0 && ref->retired) {
        if (ref->e->cur == ref)
            ref->e->cur = NULL;
        /* repo_unload frees it itself (it waits); a replaced one goes here */
        if (ref->retired == 2)
            pthread_cond_broadcast(&R.released);
        else {
            model_free(ref->m);
            free(ref);
        }
    }
    pthread_mutex_unlock(&R.lock);
}

int repo_state(const char *name, int *state, char *reason, size_t n)
{
    pthread_mutex_lock(&R.lock);
    struct entry *e = R.head ? find(name) : strcmp(name, REPO_BUILTIN) ? NULL : &builtin_entry;
    if (e) {
        *state = e->state;
        snprintf(reason, n, "%s", e->reason);
    }
    pthread_mutex_unlock(&R.lock);
    return e ? 0 : -1;
}

int repo_snapshot(struct repo_snapshot *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_lock(&R.lock);
    /* before repo_start, the built-in model alone (as repo_acquire serves it) */
    struct entry *const head = R.head ? R.head : &builtin_entry;
    size_t n = 0;
    for (const struct entry *e = head; e; e = e->next)
        n++;
    s->models = calloc(n, sizeof *s->models);
    for (const struct entry *e = head; e && s->models; e = e->next) {
        struct repo_info *m = &s->models[s->n++];
        snprintf(m->name, sizeof m->name, "%s", e->name);
        snprintf(m->reason, sizeof m->reason, "%s", e->reason);
        m->builtin = e->builtin, m->state = e->state;
        m->success = e->success, m->fail = e->fail;
        memcpy(m->stage, e->stage, sizeof m->stage);
        m->inference_count = e->inference_count, m->execution_count = e->execution_count;
        m->last_ms = e->last_ms;
    }
    s->reserved = R.reserved_folder ? RESERVED_REASON : NULL;
    pthread_mutex_unlock(&R.lock);
    return s->models ? 0 : -1;
}

void repo_snapshot_free(struct repo_snapshot *s)
{
    free(s->models);
    memset(s, 0, sizeof *s);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static unsigned long long ns(double s)
{
    return s > 0 ? (unsigned long long)(s * 1e9) : 0;
}

void repo_record(const char *name, int ok, double total_s, const double stage_s[REPO_STAGES],
                 long long batch)
{
    pthread_mutex_lock(&R.lock);
    struct entry *e = R.head ? find(name) : NULL;
    if (e) {
        struct repo_count *p = ok ? &e->success : &e->fail;
        p->count++, p->ns += ns(total_s);
        if (ok) { /* Triton counts the stages of successful requests */
            for (int s = 0; s < REPO_STAGES; s++)
                e->stage[s].count++, e->stage[s].ns += ns(stage_s[s]);
            e->inference_count += (unsigned long long)batch;
            e->execution_count++;
            e->last_ms = now_ms();
        }
    }
    pthread_mutex_unlock(&R.lock);
}
