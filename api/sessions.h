/* sessions.h -- the sequences (sessions) the server holds: Triton's
 * sequence extension over a key/value cache per sequence (core/kvcache.h).
 * docs/sessions.md says what a client sees.
 *
 * One store per process. A sequence is found by its id (text: the client's
 * sequence_id, or X-Sequence-Id) and holds what its start fixed -- the
 * model's name, H, Hkv, head_dim, RoPE, the cache's dtype, and for the
 * built-in model the weights given then (copied) -- and its cache.
 *
 *     struct sess_step st;
 *     if (sess_open(&st, id, start, &fix, &err) == 0) {   // waits for its turn
 *         ... sess_weights / sess_fixed_check ...
 *         if (sess_reserve(&st, tokens, &err) == 0)       // the budget, before growing
 *             ... att_step(out, w, p, st.s->kv, &ae) ...
 *         sess_close(&st, ok, end);                       // next step's turn; end frees
 *     }
 *
 * Steps of one sequence run one at a time, in the order they called
 * sess_open (a ticket each): a concurrent step waits. A sequence is idle
 * when no step holds or waits for it. Limits (sess_init): max_sequences
 * and max_bytes (every cache's allocated blocks together, att_kv_bytes,
 * and the built-in model's weights the sequences keep):
 * a new sequence or a step that would pass one evicts the least recently
 * used idle sequences, else is refused (ERR_OVERLOADED, 503; the step is
 * then not applied and the sequence keeps its state); idle_timeout
 * seconds without a step drops one (checked at each call and at
 * sess_stats). Every function is thread-safe.
 */
#ifndef API_SESSIONS_H
#define API_SESSIONS_H

#include <stddef.h>

#include "core/attention.h"
#include "core/kvcache.h"
#include "lib/errors.h"

struct sess_limits {
    int max_sequences;
    double idle_timeout; /* seconds */
    long long max_bytes;
};

/* (Re)set the limits and forget every sequence (at start-up; tests). */
void sess_init(const struct sess_limits *l);
/* The idle_timeout of sess_init, seconds (the model configuration says it). */
double sess_idle_timeout(void);
/* Free every sequence (at exit). */
void sess_shutdown(void);

/* What a sequence's start fixes; later steps must agree. */
struct sess_fixed {
    char model[128];
    const void *model_id; /* the loaded model's identity (its struct), NULL: built-in */
    int H, Hkv, head_dim, E, kdim, vdim;
    int rope_style, rope_rotary_dim;
    double rope_theta;
    enum att_kv_dtype dtype;
};

struct sess;
struct sess_step {
    struct sess *s;
    struct att_kv *kv;      /* the sequence's cache (the step's to use while open) */
    const struct sess_fixed *fixed;
    int started;            /* this step starts it (afresh) */
    int created;            /* ... and it did not exist */
    struct sess *pending;   /* a live one restarted: what replaces it if the step succeeds */
};

/* The sequence id, for this step: with start, created (or restarted: the
 * step gets an empty cache and fix, which replace the live sequence's only
 * when it succeeds) -- refused when max_sequences is reached and none is
 * idle; else it must exist (ERR_SEQUENCE_NOT_FOUND). Waits for the steps
 * of the same id opened before. 0 and st open, or -1 with err. */
int sess_open(struct sess_step *st, const char *id, int start, const struct sess_fixed *fix,
              struct api_error *err);
/* The weights kept for the built-in model: at the start, copy p's (they
 * count in max_bytes as the caches do: evicting, or refused 503); later,
 * fill p's absent ones from those kept, and refuse (400) one that
 * differs. 0, or -1 with err. */
int sess_weights(struct sess_step *st, struct att_params *p, struct api_error *err);
/* Make room for the cache to hold tokens (att_kv_bytes_at): evict idle
 * sequences, least recently used first, or refuse (503). The bytes are
 * counted from now on; sess_close() settles them with the cache's. */
int sess_reserve(struct sess_step *st, long long tokens, struct api_error *err);
/* Done with this step, which succeeded (ok) or changed nothing: end frees
 * the sequence, and so does a failed start of one that did not exist (a
 * failed restart leaves the live one as it was); otherwise it is idle
 * again unless another step waits. */
void sess_close(struct sess_step *st, int ok, int end);

/* End id without a step (0), or -1 when there is none. */
int sess_end(const char *id);
/* Drop every sequence of model name (unloaded or reloaded): a step on one
 * is then ERR_SEQUENCE_NOT_FOUND. Those busy go when their step closes. */
void sess_drop_model(const char *name);

struct sess_stats {
    long long active, bytes;
    unsigned long long evictions;
};
void sess_stats(struct sess_stats *s);
/* Per model: calls f(name, sequences, bytes, cls) for each model holding one. */
void sess_each_model(void (*f)(const char *name, long long n, long long bytes, void *cls),
                     void *cls);

#endif
