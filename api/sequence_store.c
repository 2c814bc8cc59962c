/* sequence_store.c -- the sequences' store; see sequence_store.h.
 *
 * One mutex guards everything here, held for a lookup and O(1) updates
 * (never while a step computes or a cache is freed): a hash table by id
 * (chained, power-of-two buckets, doubled as it fills); an intrusive list
 * of every linked sequence, most recently used first (moved to the front
 * only when stamped), from whose tail eviction and the idle timeout take,
 * skipping only busy sequences; each sequence's tickets (serving ==
 * next_ticket: no step holds or waits for it) and answers being sent; the
 * totals: count, total_bytes (caches, kept weights and reservations of
 * steps under way: never above max_bytes) and what eviction could free now
 * (evictable_n, evictable_bytes), so that a request is judged before anyone
 * is evicted. A step computes outside the lock, holding its sequence's
 * turn; a sequence ended or dropped while busy is unlinked at once and
 * freed when neither busy nor sending. What to free is collected under the
 * lock and freed after it. */
#include "api/sequence_store.h"
#include "api/sequence_layers.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "options/options.h"
#include "http/route.h"

struct seq {
    char id[CODEC_SEQUENCE_ID_MAX + 1];
    struct seq_fixed fix;
    struct seq_layers layers; /* a cache per layer stepped */
    unsigned long next_ticket, serving; /* no step holds or waits for it when equal */
    int sending;           /* answers of its steps not sent yet (seq_sent) */
    int linked;            /* in the table and the list (found by its id) */
    size_t bytes;          /* its layers' caches' blocks, as counted in total_bytes */
    size_t wbytes;         /* its layers' kept weights, counted there too */
    size_t reserved;       /* counted for the step under way */
    double last_used;      /* its last step that succeeded and was answered */
    struct seq *prev, *next; /* the list, most recently used first */
    struct seq *hnext;       /* the table's chain */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn = PTHREAD_COND_INITIALIZER;
static struct seq **table;  /* nbuckets chains */
static size_t nbuckets;
static struct seq *head, *tail;
static struct seq *dead;    /* to free once mu is released (chained by next) */
static long long count;
static long long total_bytes;
static long long evictable_n, evictable_bytes;
static unsigned long long evictions;
static struct seq_limits limits; /* seq_init's; before it, the settings' defaults */

/* No step holds or waits for it, and every answer of its steps is sent. */
static int at_rest(const struct seq *s)
{
    return s->next_ticket == s->serving && !s->sending;
}

static int evictable(const struct seq *s)
{
    return s->linked && at_rest(s);
}

/* After a change to s that may have made it (un)evictable: was, what
 * evictable(s) was before it. Its bytes only change while it is busy. */
static void recount(const struct seq *s, int was)
{
    const int is = evictable(s);
    if (is == was)
        return;
    const long long b = (long long)s->bytes + (long long)s->wbytes, sign = is ? 1 : -1;
    evictable_n += sign;
    evictable_bytes += sign * b;
}

/* FNV-1a. */
static size_t hash(const char *id)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 32));
}

static struct seq **chain(const char *id)
{
    return &table[hash(id) & (nbuckets - 1)];
}

static struct seq *find(const char *id)
{
    if (!table)
        return NULL;
    for (struct seq *s = *chain(id); s; s = s->hnext)
        if (!strcmp(s->id, id))
            return s;
    return NULL;
}

/* Room in the table for one more: doubled when as full as it has buckets
 * (the rare O(n) rehash). -1 when out of memory. */
static int table_grow(void)
{
    if (table && (size_t)count < nbuckets)
        return 0;
    const size_t n = table ? nbuckets * 2 : 64;
    struct seq **t = calloc(n, sizeof(struct seq *)); /* NOLINT(bugprone-sizeof-expression): an array of chain heads */
    if (!t)
        return table ? 0 : -1; /* a fuller table still works */
    for (size_t b = 0; table && b < nbuckets; b++)
        for (struct seq *s = table[b], *next; s; s = next) {
            next = s->hnext;
            struct seq **c = &t[hash(s->id) & (n - 1)];
            s->hnext = *c, *c = s;
        }
    free(table);
    table = t, nbuckets = n;
    return 0;
}

static void list_remove(struct seq *s)
{
    *(s->prev ? &s->prev->next : &head) = s->next;
    *(s->next ? &s->next->prev : &tail) = s->prev;
    s->prev = s->next = NULL;
}

static void list_push_front(struct seq *s)
{
    s->prev = NULL, s->next = head;
    *(head ? &head->prev : &tail) = s;
    head = s;
}

/* s into the table and the list (table_grow() first). */
static void link_(struct seq *s)
{
    struct seq **c = chain(s->id);
    s->hnext = *c, *c = s;
    list_push_front(s);
    s->linked = 1;
    count++;
    recount(s, 0);
}

/* s out of the table and the list: no step finds it from now on. */
static void unlink_(struct seq *s)
{
    if (!s->linked)
        return;
    const int was = evictable(s);
    for (struct seq **c = chain(s->id); *c; c = &(*c)->hnext)
        if (*c == s) {
            *c = s->hnext;
            break;
        }
    s->hnext = NULL;
    list_remove(s);
    s->linked = 0;
    count--;
    recount(s, was);
}

/* s used now: its stamp, and the front of the list. */
static void stamp(struct seq *s)
{
    s->last_used = route_now();
    if (s->linked && head != s) {
        list_remove(s);
        list_push_front(s);
    }
}

/* Take s (unlinked, at rest, or detached) out of the totals and onto the
 * list of what is freed once mu is released. */
static void bury(struct seq *s)
{
    total_bytes -= (long long)(s->bytes + s->wbytes + s->reserved);
    s->bytes = s->wbytes = s->reserved = 0;
    s->next = dead, dead = s;
}

/* Unlink and bury s when nothing holds it. */
static void drop(struct seq *s)
{
    unlink_(s);
    if (at_rest(s))
        bury(s);
}

static void free_seq(struct seq *s)
{
    seq_layers_free(&s->layers);
    free(s);
}

static void lock(void)
{
    pthread_mutex_lock(&mu);
    if (!limits.max_sequences) { /* no seq_init yet (a test): the settings' defaults */
        struct cfg c;
        cfg_defaults(&c), limits = seq_limits_of(&c);
    }
}

/* Release mu, then free what was buried under it. */
static void unlock(void)
{
    struct seq *d = dead;
    dead = NULL;
    pthread_mutex_unlock(&mu);
    for (struct seq *next; d; d = next) {
        next = d->next;
        free_seq(d);
    }
}

/* Drop the sequences idle too long: from the tail, until one is recent. */
static void sweep(void)
{
    const double t = route_now();
    for (struct seq *s = tail, *prev; s && t - s->last_used > limits.idle_timeout; s = prev) {
        prev = s->prev;
        if (evictable(s)) {
            drop(s);
            evictions++;
        }
    }
}

/* Evict the least recently used evictable sequence; -1 when none is. */
static int evict_one(void)
{
    for (struct seq *s = tail; s; s = s->prev)
        if (evictable(s)) {
            drop(s);
            evictions++;
            return 0;
        }
    return -1;
}

void seq_init(const struct seq_limits *l)
{
    seq_shutdown();
    lock();
    limits = *l;
    unlock();
}

double seq_idle_timeout(void)
{
    lock();
    const double t = limits.idle_timeout;
    unlock();
    return t;
}

struct seq_limits seq_limits_of(const struct cfg *c)
{
    return (struct seq_limits){c->max_sequences, c->sequence_idle_timeout,
                               c->max_sequence_bytes};
}

void seq_shutdown(void)
{
    lock();
    for (struct seq *s = head, *next; s; s = next) {
        next = s->next;
        drop(s); /* a busy one: its step frees it */
    }
    evictions = 0;
    unlock();
}

static int not_found(struct failure *err, const char *id)
{
    return fail_with(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.*s' does not exist (never "
                     "started, ended, evicted, idle too long, dropped with its model, or lost "
                     "in a restart): start it again with %s true", 64, id,
                     opt_name(OPT_SEQUENCE_START));
}

/* 503: max_sequences reached and none idle to evict (under mu). */
static int no_place(struct failure *err)
{
    return fail_with(err, ERR_OVERLOADED, "%d sequences are live and none is idle "
                     "(max_sequences): retry later, or end sequences", limits.max_sequences);
}

/* What a step of s writes to: a restart's pending sequence, or s. */
static struct seq *target(const struct seq_step *st)
{
    return st->pending ? st->pending : st->s;
}

/* Give up st's turn on s (under mu) without a step: the next step's turn. */
static void pass_turn(struct seq *s)
{
    const int was = evictable(s);
    s->serving++;
    recount(s, was);
    if (!s->linked && at_rest(s))
        bury(s);
    pthread_cond_broadcast(&turn);
}

int seq_open(struct seq_step *st, const char *id, int start, int layer,
             const struct seq_fixed *fix, struct failure *err)
{
    memset(st, 0, sizeof *st);
    lock();
    sweep();
    struct seq *s;
    for (;;) {
        s = find(id);
        if (!s && !start) {
            unlock();
            return not_found(err, id);
        }
        if (!s) { /* new: its place is made by seq_reserve, once the request is checked */
            if (count >= limits.max_sequences && evictable_n == 0) {
                unlock();
                return no_place(err);
            }
            if (table_grow() || !(s = calloc(1, sizeof *s))) {
                unlock();
                return fail_with(err, ERR_INTERNAL, "out of memory for a sequence");
            }
            snprintf(s->id, sizeof s->id, "%s", id);
            s->last_used = route_now();
            link_(s);
        }
        const int was = evictable(s);
        const unsigned long ticket = s->next_ticket++;
        recount(s, was);
        while (s->serving != ticket)
            pthread_cond_wait(&turn, &mu);
        if (s->linked)
            break;
        /* ended or dropped while this step waited: a start begins afresh */
        pass_turn(s);
        if (!start) {
            unlock();
            return not_found(err, id);
        }
    }
    st->s = s, st->layer = layer;
    /* a new sequence starts in place; a live one restarted (a start on a
     * layer with a cache) gets a pending one, which replaces it only when
     * the step succeeds (seq_close); a start on a layer without a cache
     * joins the live sequence */
    st->created = start && s->layers.n == 0;
    st->started = st->created || (start && seq_layers_has(&s->layers, layer));
    struct seq *t = s;
    if (st->started && !st->created && !(t = st->pending = calloc(1, sizeof *t))) {
        unlock();
        seq_close(st, 0, 0);
        return fail_with(err, ERR_INTERNAL, "out of memory for a sequence");
    }
    if (st->started)
        t->fix = *fix;
    st->fresh = !seq_layers_has(&t->layers, layer);
    if (st->fresh && seq_layers_add(&t->layers, layer, &t->fix, err)) {
        unlock();
        seq_close(st, 0, 0);
        return -1;
    }
    st->kv = seq_layers_kv(&t->layers, layer), st->fixed = &t->fix;
    unlock();
    return 0;
}

int seq_weights(struct seq_step *st, struct att_params *p, struct failure *err)
{
    size_t kept = 0;
    struct seq *t = target(st);
    const int rc = seq_layers_weights(&t->layers, st->layer, t->fix.layer, st->fresh, p, &kept,
                                      err);
    if (st->fresh) /* counted in the budget by seq_reserve */
        st->weight_bytes = kept;
    return rc;
}

/* The bytes step st adds: its layer's growth to st->tokens, and the
 * weights a layer's first step keeps. */
static long long step_need(const struct seq_step *st)
{
    const size_t at = att_kv_bytes_at(st->kv, st->tokens), have = att_kv_bytes(st->kv);
    return (long long)(at > have ? at - have : 0) + (long long)st->weight_bytes;
}

int seq_reserve(struct seq_step *const *st, int n, int *which, struct failure *err)
{
    long long need = 0, created = 0;
    *which = -1;
    lock();
    /* 1. can each ever fit? a sequence alone above the budget cannot */
    for (int i = 0; i < n; i++) {
        const struct seq *t = target(st[i]);
        const long long own = (long long)(t->bytes + t->wbytes + t->reserved) + step_need(st[i]);
        if (own > limits.max_bytes) {
            unlock();
            *which = i;
            return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "sequence '%.64s' would hold %lld "
                             "bytes after this step, more than max_sequence_bytes (%lld) on "
                             "its own: it can never fit; end it, or start one that holds less "
                             "(this step was not applied)", st[i]->s->id, own, limits.max_bytes);
        }
        need += step_need(st[i]);
        created += st[i]->created;
    }
    /* 2. can they fit now, if every evictable sequence went? (busy ones stay)
     * the new sequences past max_sequences need their own places, no more */
    const long long over = count - limits.max_sequences;
    const long long extra = over <= 0 ? 0 : over < created ? over : created;
    if (total_bytes - evictable_bytes + need > limits.max_bytes || evictable_n < extra) {
        unlock();
        if (extra > evictable_n)
            return no_place(err);
        return fail_with(err, ERR_OVERLOADED, "the sequences' caches would pass "
                         "max_sequence_bytes (%lld bytes) and the rest is held by sequences "
                         "in use: retry later, or end sequences (this step was not applied; "
                         "nothing was evicted)", limits.max_bytes);
    }
    /* 3. only now make room: least recently used first */
    long long evict_for_count = extra;
    while (evict_for_count > 0 || total_bytes + need > limits.max_bytes) {
        if (evict_one())
            break; /* (cannot happen: checked above) */
        evict_for_count--;
    }
    for (int i = 0; i < n; i++) {
        const long long own = step_need(st[i]);
        total_bytes += own;
        target(st[i])->reserved += (size_t)own;
    }
    unlock();
    return 0;
}

/* What a restart replaces, swapped between a and b. */
static void swap_contents(struct seq *a, struct seq *b)
{
    struct seq t = *a;
    a->fix = b->fix, b->fix = t.fix;
    a->layers = b->layers, b->layers = t.layers;
    a->bytes = b->bytes, b->bytes = t.bytes;
    a->wbytes = b->wbytes, b->wbytes = t.wbytes;
    a->reserved = b->reserved, b->reserved = t.reserved;
}

/* s's bytes: its layers' caches' blocks now, the step's reservation
 * settled (the kept weights' part of it into wbytes). */
static void settle(struct seq *s, size_t weight_bytes)
{
    total_bytes -= (long long)(s->bytes + s->wbytes + s->reserved);
    if (s->reserved >= weight_bytes)
        s->wbytes += weight_bytes;
    s->reserved = 0;
    s->bytes = seq_layers_bytes(&s->layers);
    total_bytes += (long long)(s->bytes + s->wbytes);
}

struct seq *seq_close(struct seq_step *st, int ok, int end)
{
    struct seq *s = st->s, *held = NULL;
    if (!s)
        return NULL;
    struct seq_layer gone; /* a failed first step's layer, freed after the lock */
    memset(&gone, 0, sizeof gone);
    lock();
    const int was = evictable(s); /* 0: this step holds it */
    const int restart = st->pending != NULL;
    if (!ok && st->fresh && !restart) { /* the layer's first step failed: no cache there */
        seq_layers_take(&s->layers, st->layer, &gone);
        st->weight_bytes = 0;
    }
    if (restart) { /* a restart: it replaces the sequence if its step succeeded */
        settle(st->pending, st->weight_bytes);
        if (ok)
            swap_contents(s, st->pending);
        bury(st->pending);
        st->pending = NULL;
    } else if (st->created && !ok) {
        end = 1; /* a start whose step failed leaves nothing */
    }
    settle(s, restart ? 0 : st->weight_bytes);
    if (ok && !end) {
        stamp(s); /* used: a refused step leaves the timer and the order as they were */
        if (st->hold)
            s->sending++, held = s;
    }
    s->serving++;
    recount(s, was);
    if (end)
        unlink_(s);
    if (!s->linked && at_rest(s))
        bury(s);
    pthread_cond_broadcast(&turn);
    unlock();
    seq_layer_free(&gone);
    st->s = NULL;
    return held;
}

void seq_sent(struct seq *s)
{
    if (!s)
        return;
    lock();
    const int was = evictable(s);
    s->sending--;
    stamp(s); /* the timer runs from the answer's end */
    recount(s, was);
    if (!s->linked && at_rest(s))
        bury(s);
    unlock();
}

int seq_end(const char *const *ids, int n, int *which)
{
    lock();
    for (int i = 0; i < n; i++)
        if (!find(ids[i])) {
            unlock();
            *which = i;
            return -1;
        }
    for (int i = 0; i < n; i++)
        drop(find(ids[i]));
    unlock();
    return 0;
}

void seq_drop_model(const char *name)
{
    lock();
    for (struct seq *s = head, *next; s; s = next) {
        next = s->next;
        if (!strcmp(s->fix.model, name))
            drop(s);
    }
    unlock();
}

void seq_stats(struct seq_stats *st)
{
    lock();
    sweep();
    st->active = count, st->bytes = total_bytes, st->evictions = evictions;
    unlock();
}

void seq_each_model(void (*f)(const char *name, long long n, long long bytes, void *cls),
                     void *cls)
{
    struct per_model {
        char name[sizeof ((struct seq_fixed *)0)->model];
        long long n, bytes;
    } *m = NULL;
    size_t nm = 0, cap = 0;
    lock();
    /* one pass, each model's figures summed (few models, many sequences) */
    for (const struct seq *s = head; s; s = s->next) {
        size_t i = 0;
        while (i < nm && strcmp(m[i].name, s->fix.model))
            i++;
        if (i == nm) {
            if (nm == cap) {
                const size_t c = cap ? cap * 2 : 8;
                struct per_model *g = realloc(m, c * sizeof *g);
                if (!g)
                    break; /* the rest unreported: out of memory */
                m = g, cap = c;
            }
            snprintf(m[nm].name, sizeof m[nm].name, "%s", s->fix.model);
            m[nm].n = m[nm].bytes = 0;
            nm++;
        }
        m[i].n++, m[i].bytes += (long long)(s->bytes + s->wbytes);
    }
    unlock();
    for (size_t i = 0; i < nm; i++)
        f(m[i].name, m[i].n, m[i].bytes, cls);
    free(m);
}
