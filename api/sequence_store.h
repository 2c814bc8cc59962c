/* sequence_store.h -- the sequences the server holds: Triton's
 * sequence extension over a key/value cache per sequence and layer
 * (core/kvcache.h, api/sequence_layers.h).
 * docs/sequences.md says what a client sees.
 *
 * One store per process. A sequence is found by its id (text: the client's
 * sequence_id, or X-Sequence-Id) and holds what its start fixed -- the
 * model's name, H, Hkv, head_dim, RoPE, the cache's dtype -- and a cache
 * per layer (begun at the layer's first step; for the built-in model with
 * the weights that step gave, copied).
 *
 *     struct seq_step st;
 *     if (seq_open(&st, id, start, layer, &fix, &err) == 0) { // waits for its turn
 *         ... seq_weights, and every check of the request ...
 *         st.tokens = ...;
 *         if (seq_reserve(&(struct seq_step *){&st}, 1, &which, &err) == 0) // budget
 *             ... att_step(out, w, p, st.kv, &ae) ...        // anyone is evicted
 *         st.hold = 1;                                    // the answer is to be sent
 *         held = seq_close(&st, ok, end);                // next step's turn; end frees
 *     }
 *     ... the answer sent (or given up) ...
 *     seq_sent(held);                                    // the idle timer starts
 *
 * Steps of one sequence run one at a time, in the order they called
 * seq_open (a ticket each): a concurrent step waits. A sequence is busy
 * while a step holds or waits for it, or an answer of its steps is still
 * being sent (held); else idle. Limits (seq_init): max_sequences and
 * max_bytes (every layer's cache's allocated blocks together, att_kv_bytes,
 * and the built-in model's weights the sequences keep). seq_reserve() judges the
 * whole step first: one that would make its sequence pass max_bytes on
 * its own can never fit (ERR_PAYLOAD_TOO_LARGE, 413); one that would not
 * fit even with every idle sequence gone is refused (ERR_OVERLOADED, 503)
 * and evicts nobody; only one that fits evicts the least recently used
 * idle sequences it needs (a new sequence past max_sequences, bytes past
 * max_bytes). A refused step is not applied and the sequence keeps its
 * state, its idle timer and its place. idle_timeout seconds after its
 * last step that succeeded and was answered, an idle sequence is dropped
 * (checked at each seq_open and seq_stats). Finding a sequence and
 * choosing one to evict are O(1) (a hash table, and a list in the order
 * of use). Every function is thread-safe.
 */
#ifndef API_SEQUENCE_STORE_H
#define API_SEQUENCE_STORE_H

#include <stddef.h>

#include "config/config.h"
#include "core/attention.h"
#include "core/kvcache.h"
#include "lib/errors.h"

struct seq_limits {
    int max_sequences;
    double idle_timeout; /* seconds */
    long long max_bytes;
};

/* The limits the settings give (max_sequences, sequence_idle_timeout,
 * max_sequence_bytes). */
struct seq_limits seq_limits_of(const struct cfg *c);
/* (Re)set the limits and forget every sequence (at start-up; tests).
 * Before the first, the limits are the settings' defaults (config/). */
void seq_init(const struct seq_limits *l);
/* The idle_timeout of seq_init, seconds (the model configuration says it). */
double seq_idle_timeout(void);
/* Free every sequence (at exit). */
void seq_shutdown(void);

/* What a sequence's start fixes; later steps must agree. */
enum seq_fix {
    SEQ_FIX_H,
    SEQ_FIX_HKV,
    SEQ_FIX_HEAD_DIM,
    SEQ_FIX_E,
    SEQ_FIX_KDIM,
    SEQ_FIX_VDIM,
    SEQ_FIX_ROPE_STYLE,
    SEQ_FIX_ROPE_DIM,
    SEQ_NFIX
};
struct seq_fixed {
    char model[128];
    const void *model_id; /* the loaded model's identity (its struct), NULL: built-in */
    int v[SEQ_NFIX];      /* the integers (api/sequence.c names them) */
    double rope_theta;
    enum att_kv_dtype dtype;
    int layer;            /* the layer the start came on (its weights: the default of the others) */
};

struct seq;
struct seq_step {
    struct seq *s;
    struct att_kv *kv;      /* the layer's cache (the step's to use while open) */
    const struct seq_fixed *fixed;
    int layer;              /* the layer stepped */
    int started;            /* this step starts it (afresh): its fix is the sequence's */
    int created;            /* ... and it did not exist */
    int fresh;              /* the layer's first step (its cache made by seq_open) */
    struct seq *pending;   /* a live one restarted: what replaces it if the step succeeds */
    size_t weight_bytes;    /* the layer's kept weights (seq_weights), for seq_reserve */
    long long tokens;       /* set by the caller before seq_reserve: the layer's length
                               after the step */
    int hold;               /* set by the caller: seq_close holds it until seq_sent */
};

/* The sequence id, for this step on layer: with start, created if it does
 * not exist; restarted if it does and layer has a cache (the step gets an
 * empty sequence and fix, which replace the live one, every layer, only
 * when it succeeds); else (the layer has no cache yet) the step joins the
 * live sequence, whose start fixed what the caller checks. A start is
 * refused at once when max_sequences is reached and none is idle. Without
 * start the sequence must exist (ERR_SEQUENCE_NOT_FOUND). A layer's cache
 * begins at its first step. Waits for the steps of the same id opened
 * before; a start whose sequence was ended while it waited starts it
 * afresh. Evicts nobody (seq_reserve does). Several steps held at once
 * (a batch) must be opened in one order by every caller (api/sequence.c:
 * by id) and never twice the same id. 0 and st open, or -1 with err. */
int seq_open(struct seq_step *st, const char *id, int start, int layer,
             const struct seq_fixed *fix, struct failure *err);
/* The weights kept for the built-in model, per layer: at the layer's first
 * step, copy p's, or when p has none the start's layer's (a decoder's
 * layers give their own; a client that gives none steps every layer with
 * the start's); they count in max_bytes as the caches do, from seq_reserve
 * on. Later, fill p's absent ones from those kept, and refuse (400) one
 * that differs. 0, or -1 with err. */
int seq_weights(struct seq_step *st, struct att_params *p, struct failure *err);
/* Call once the whole request is checked, with the n steps it holds (each
 * st[i]->tokens set): the budget for every layer to hold its tokens
 * (att_kv_bytes_at) and the kept weights, and the new sequences' places,
 * judged for all together. Refused (413: a sequence can never fit, *which
 * its step; 503: not while others are busy, *which -1) before anyone is
 * evicted; else evicts the least recently used idle sequences (every
 * layer) it needs. The bytes are counted from now on; seq_close() settles
 * them with the caches'. */
int seq_reserve(struct seq_step *const *st, int n, int *which, struct failure *err);
/* Done with this step, which succeeded (ok) or changed nothing (a failed
 * layer's first step leaves no cache there): end frees the sequence (every
 * layer), and so does a failed start of one that did not exist (a failed
 * restart leaves the live one as it was). A step that succeeded stamps the
 * sequence used now; with st->hold (and not end) it stays busy until
 * seq_sent() of what this returns (else NULL). */
struct seq *seq_close(struct seq_step *st, int ok, int end);
/* The answer of a held step was sent or given up: the sequence is stamped
 * used now, and idle again unless a step holds it. NULL: nothing. */
void seq_sent(struct seq *held);

/* End the n sequences ids without a step, all or none: 0, or -1 with
 * *which the first that does not exist (nothing ended). */
int seq_end(const char *const *ids, int n, int *which);
/* Drop every sequence of model name (unloaded or reloaded): a step on one
 * is then ERR_SEQUENCE_NOT_FOUND. Those busy go when their step closes. */
void seq_drop_model(const char *name);

struct seq_stats {
    long long active, bytes;
    unsigned long long evictions;
};
void seq_stats(struct seq_stats *s);
/* Per model: calls f(name, sequences, bytes, cls) for each model holding one. */
void seq_each_model(void (*f)(const char *name, long long n, long long bytes, void *cls),
                     void *cls);

#endif
