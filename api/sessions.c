/* sessions.c -- the sequences' store; see sessions.h.
 *
 * One mutex guards everything here: the list (most recently used first),
 * each sequence's tickets, and the byte and count totals. A step computes
 * outside it, holding its sequence's turn (serving == its ticket), which
 * no other thread frees: eviction and the idle timeout take only idle
 * sequences (every ticket served), and a sequence dropped or ended while
 * busy is unlinked at once (no new step finds it) and freed by its last
 * step's sess_close(). total_bytes counts every linked or busy cache's
 * blocks plus the bytes reserved for the steps under way, so it never
 * passes max_bytes. */
#include "api/sessions.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codec/codec.h"
#include "codec/options.h"

struct sess {
    char id[CODEC_SEQUENCE_ID_MAX + 1];
    struct sess_fixed fix;
    struct att_kv *kv;
    float *w[ATT_NWEIGHTS]; /* the built-in model's weights, as the start gave them */
    size_t wlen[ATT_NWEIGHTS];
    unsigned long next_ticket, serving; /* idle when equal */
    int linked;            /* in the list (found by its id) */
    size_t bytes;          /* its cache's blocks, as counted in total_bytes */
    size_t wbytes;         /* its kept weights, counted there too */
    size_t reserved;       /* counted for the step under way */
    double last_used;
    struct sess *prev, *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn = PTHREAD_COND_INITIALIZER;
static struct sess *head, *tail;
static long long count;
static long long total_bytes;
static unsigned long long evictions;
static struct sess_limits limits = {1024, 600, 1LL << 30};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int idle(const struct sess *s)
{
    return s->next_ticket == s->serving;
}

static void unlink_(struct sess *s)
{
    if (!s->linked)
        return;
    *(s->prev ? &s->prev->next : &head) = s->next;
    *(s->next ? &s->next->prev : &tail) = s->prev;
    s->prev = s->next = NULL;
    s->linked = 0;
    count--;
}

static void push_front(struct sess *s)
{
    s->prev = NULL, s->next = head;
    *(head ? &head->prev : &tail) = s;
    head = s;
    s->linked = 1;
    count++;
}

/* (under mu) */
static void free_weights(struct sess *s)
{
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        free(s->w[i]);
        s->w[i] = NULL, s->wlen[i] = 0;
    }
    total_bytes -= (long long)s->wbytes;
    s->wbytes = 0;
}

/* Free s (unlinked first), its bytes out of the total. */
static void destroy(struct sess *s)
{
    unlink_(s);
    total_bytes -= (long long)(s->bytes + s->reserved);
    att_kv_free(s->kv);
    free_weights(s);
    free(s);
}

static struct sess *find(const char *id)
{
    for (struct sess *s = head; s; s = s->next)
        if (!strcmp(s->id, id))
            return s;
    return NULL;
}

/* Drop the sequences idle longer than the timeout. */
static void sweep(void)
{
    const double t = now();
    for (struct sess *s = tail, *prev; s; s = prev) {
        prev = s->prev;
        if (idle(s) && t - s->last_used > limits.idle_timeout) {
            destroy(s);
            evictions++;
        }
    }
}

/* Evict the least recently used idle sequence but keep; 0, or -1 when none is. */
static int evict_one(const struct sess *keep)
{
    for (struct sess *s = tail; s; s = s->prev)
        if (s != keep && idle(s)) {
            destroy(s);
            evictions++;
            return 0;
        }
    return -1;
}

/* Count need more bytes for s (under mu): evict idle sequences, least
 * recently used first, until they fit the budget; 0, or -1 (503) when
 * none is left to evict. */
static int make_room(struct sess *s, long long need, struct api_error *err)
{
    while (total_bytes + need > limits.max_bytes)
        if (evict_one(s))
            return api_fail(err, ERR_OVERLOADED, "the sequences' caches would pass "
                            "max_sequence_bytes (%lld bytes) and none is idle: retry later, "
                            "or end sequences (this step was not applied)", limits.max_bytes);
    total_bytes += need;
    return 0;
}

void sess_init(const struct sess_limits *l)
{
    sess_shutdown();
    pthread_mutex_lock(&mu);
    limits = *l;
    pthread_mutex_unlock(&mu);
}

double sess_idle_timeout(void)
{
    pthread_mutex_lock(&mu);
    const double t = limits.idle_timeout;
    pthread_mutex_unlock(&mu);
    return t;
}

void sess_shutdown(void)
{
    pthread_mutex_lock(&mu);
    for (struct sess *s = head, *next; s; s = next) {
        next = s->next;
        if (idle(s))
            destroy(s);
        else
            unlink_(s); /* its step frees it */
    }
    evictions = 0;
    pthread_mutex_unlock(&mu);
}

static int not_found(struct api_error *err, const char *id)
{
    return api_fail(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.*s' does not exist (never "
                    "started, ended, evicted, idle too long, dropped with its model, or lost "
                    "in a restart): start it again with %s true", 64, id,
                    opt_name(OPT_SEQUENCE_START));
}

/* A fresh cache for s (empty) as fix says. */
static int start_cache(struct sess *s, const struct sess_fixed *fix, struct api_error *err)
{
    s->fix = *fix;
    s->kv = att_kv_new(fix->Hkv, fix->head_dim, fix->dtype);
    return s->kv ? 0 : api_fail(err, ERR_INTERNAL, "out of memory for a sequence's cache");
}

/* Free what a detached sequence holds (a start's pending one), its bytes
 * out of the total (under mu). */
static void drop_detached(struct sess *p)
{
    total_bytes -= (long long)(p->bytes + p->reserved);
    att_kv_free(p->kv);
    free_weights(p);
    free(p);
}

/* What a step of s writes to: a restart's pending sequence, or s. */
static struct sess *target(const struct sess_step *st)
{
    return st->pending ? st->pending : st->s;
}

int sess_open(struct sess_step *st, const char *id, int start, const struct sess_fixed *fix,
              struct api_error *err)
{
    memset(st, 0, sizeof *st);
    pthread_mutex_lock(&mu);
    sweep();
    struct sess *s = find(id);
    if (!s && !start) {
        pthread_mutex_unlock(&mu);
        return not_found(err, id);
    }
    if (!s) {
        while (count >= limits.max_sequences)
            if (evict_one(NULL)) {
                pthread_mutex_unlock(&mu);
                return api_fail(err, ERR_OVERLOADED, "%d sequences are live and none is "
                                "idle (max_sequences): retry later, or end sequences",
                                limits.max_sequences);
            }
        if (!(s = calloc(1, sizeof *s))) {
            pthread_mutex_unlock(&mu);
            return api_fail(err, ERR_INTERNAL, "out of memory for a sequence");
        }
        snprintf(s->id, sizeof s->id, "%s", id);
        push_front(s);
    }
    const unsigned long ticket = s->next_ticket++;
    while (s->serving != ticket)
        pthread_cond_wait(&turn, &mu);
    if (!s->linked) { /* ended or dropped while this step waited */
        s->serving++;
        if (idle(s))
            destroy(s);
        pthread_cond_broadcast(&turn);
        pthread_mutex_unlock(&mu);
        return not_found(err, id);
    }
    st->s = s, st->started = start;
    /* a new sequence starts in place; a live one restarted gets a pending
     * one, which replaces it only when the step succeeds (sess_close) */
    st->created = start && !s->kv;
    struct sess *t = s;
    if (start && !st->created && !(t = st->pending = calloc(1, sizeof *t))) {
        pthread_mutex_unlock(&mu);
        sess_close(st, 0, 0);
        return api_fail(err, ERR_INTERNAL, "out of memory for a sequence");
    }
    if (start && start_cache(t, fix, err)) {
        pthread_mutex_unlock(&mu);
        sess_close(st, 0, 0);
        return -1;
    }
    /* most recently used */
    unlink_(s);
    push_front(s);
    st->kv = t->kv, st->fixed = &t->fix;
    pthread_mutex_unlock(&mu);
    return 0;
}

int sess_weights(struct sess_step *st, struct att_params *p, struct api_error *err)
{
    struct sess *s = target(st);
    size_t *len, wb = 0;
    for (int i = 0; st->started && i < ATT_NWEIGHTS; i++)
        if (*att_weight_slot(p, i, &len))
            wb += *len * sizeof(float);
    if (wb) { /* kept weights count in the budget */
        pthread_mutex_lock(&mu);
        const int rc = make_room(st->s, (long long)wb, err);
        if (rc == 0)
            s->wbytes = wb;
        pthread_mutex_unlock(&mu);
        if (rc)
            return -1;
    }
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const float **w = att_weight_slot(p, i, &len);
        if (st->started) {
            if (!*w)
                continue;
            if (!(s->w[i] = malloc(*len * sizeof(float))))
                return api_fail(err, ERR_INTERNAL, "out of memory keeping the weights");
            memcpy(s->w[i], *w, *len * sizeof(float));
            s->wlen[i] = *len;
        } else if (*w) {
            if (*len != s->wlen[i] || memcmp(*w, s->w[i], *len * sizeof(float)))
                return api_fail(err, ERR_INVALID_PARAMETER, "the weights differ from those "
                                "the sequence started with: a step of a sequence keeps its "
                                "start's weights (leave them out)");
        }
    }
    if (!st->started) /* every step: the start's, none other */
        for (int i = 0; i < ATT_NWEIGHTS; i++) {
            const float **w = att_weight_slot(p, i, &len);
            if (!*w && s->w[i])
                *w = s->w[i], *len = s->wlen[i];
            else if (*w && !s->w[i])
                return api_fail(err, ERR_INVALID_PARAMETER, "the weights differ from those "
                                "the sequence started with: a step of a sequence keeps its "
                                "start's weights (leave them out)");
        }
    return 0;
}

int sess_reserve(struct sess_step *st, long long tokens, struct api_error *err)
{
    struct sess *s = target(st);
    const size_t at = att_kv_bytes_at(s->kv, tokens), have = att_kv_bytes(s->kv);
    const long long need = at > have ? (long long)(at - have) : 0;
    pthread_mutex_lock(&mu);
    const int rc = make_room(st->s, need, err);
    if (rc == 0)
        s->reserved += (size_t)need;
    pthread_mutex_unlock(&mu);
    return rc;
}

/* What a restart replaces, swapped between a and b. */
static void swap_contents(struct sess *a, struct sess *b)
{
    struct sess t = *a;
    a->fix = b->fix, b->fix = t.fix;
    a->kv = b->kv, b->kv = t.kv;
    memcpy(a->w, b->w, sizeof a->w), memcpy(b->w, t.w, sizeof t.w);
    memcpy(a->wlen, b->wlen, sizeof a->wlen), memcpy(b->wlen, t.wlen, sizeof t.wlen);
    a->bytes = b->bytes, b->bytes = t.bytes;
    a->wbytes = b->wbytes, b->wbytes = t.wbytes;
    a->reserved = b->reserved, b->reserved = t.reserved;
}

/* s's bytes: its cache's blocks now, the step's reservation settled. */
static void settle(struct sess *s)
{
    total_bytes -= (long long)(s->bytes + s->reserved);
    s->reserved = 0;
    s->bytes = s->kv ? att_kv_bytes(s->kv) : 0;
    total_bytes += (long long)s->bytes;
}

void sess_close(struct sess_step *st, int ok, int end)
{
    struct sess *s = st->s;
    if (!s)
        return;
    pthread_mutex_lock(&mu);
    if (st->pending) { /* a restart: it replaces the sequence if its step succeeded */
        if (ok)
            swap_contents(s, st->pending);
        drop_detached(st->pending);
        st->pending = NULL;
    } else if (st->created && !ok) {
        end = 1; /* a start whose step failed leaves nothing */
    }
    settle(s);
    s->last_used = now();
    s->serving++;
    if (end)
        unlink_(s);
    if (!s->linked && idle(s))
        destroy(s);
    pthread_cond_broadcast(&turn);
    pthread_mutex_unlock(&mu);
    st->s = NULL;
}

int sess_end(const char *id)
{
    pthread_mutex_lock(&mu);
    struct sess *s = find(id);
    if (s) {
        unlink_(s);
        if (idle(s))
            destroy(s);
    }
    pthread_mutex_unlock(&mu);
    return s ? 0 : -1;
}

void sess_drop_model(const char *name)
{
    pthread_mutex_lock(&mu);
    for (struct sess *s = head, *next; s; s = next) {
        next = s->next;
        if (!strcmp(s->fix.model, name)) {
            unlink_(s);
            if (idle(s))
                destroy(s);
        }
    }
    pthread_mutex_unlock(&mu);
}

void sess_stats(struct sess_stats *st)
{
    pthread_mutex_lock(&mu);
    sweep();
    st->active = count, st->bytes = total_bytes, st->evictions = evictions;
    pthread_mutex_unlock(&mu);
}

void sess_each_model(void (*f)(const char *name, long long n, long long bytes, void *cls),
                     void *cls)
{
    pthread_mutex_lock(&mu);
    /* each model once: at its first sequence in the list */
    for (struct sess *s = head; s; s = s->next) {
        int first = 1;
        for (struct sess *t = head; t != s && first; t = t->next)
            first = strcmp(t->fix.model, s->fix.model) != 0;
        if (!first)
            continue;
        long long n = 0, bytes = 0;
        for (struct sess *t = s; t; t = t->next)
            if (!strcmp(t->fix.model, s->fix.model))
                n++, bytes += (long long)(t->bytes + t->wbytes);
        f(s->fix.model, n, bytes, cls);
    }
    pthread_mutex_unlock(&mu);
}
