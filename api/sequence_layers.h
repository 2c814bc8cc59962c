/* sequence_layers.h -- a sequence's layers (api/sequence_store.c keeps one
 * struct seq_layers per sequence): a cache per layer, begun at the layer's
 * first step, and for the built-in model the weights that step gave. No
 * lock of its own: the store calls it for the one step that holds the
 * sequence, or under its lock.
 */
#ifndef API_SEQUENCE_LAYERS_H
#define API_SEQUENCE_LAYERS_H

#include <stddef.h>

#include "api/sequence_store.h"
#include "core/attention.h"
#include "core/kvcache.h"
#include "lib/errors.h"

/* A layer's cache (NULL: no step yet) and its kept weights. */
struct seq_layer {
    struct att_kv *kv;
    float *w[ATT_NWEIGHTS];
    size_t wlen[ATT_NWEIGHTS];
};

struct seq_layers {
    struct seq_layer *l; /* n of them: 0 .. the highest layer stepped */
    int n;
};

/* Whether layer has a cache. */
int seq_layers_has(const struct seq_layers *ls, int layer);
/* layer's cache, or NULL. */
struct att_kv *seq_layers_kv(const struct seq_layers *ls, int layer);
/* A fresh, empty cache for layer (which has none), laid out as f says. 0,
 * or -1 with err (out of memory). */
int seq_layers_add(struct seq_layers *ls, int layer, const struct seq_fixed *f,
                   struct failure *err);
/* The weights of a step on layer (built-in model): on its first step
 * (fresh) copy p's, or when p gives none those of layer from (the
 * start's), *kept their bytes; later fill p's absent ones from those kept
 * and refuse (400) one that differs. 0, or -1 with err. */
int seq_layers_weights(struct seq_layers *ls, int layer, int from, int fresh,
                       struct att_params *p, size_t *kept, struct failure *err);
/* Bytes of every layer's cache's blocks (att_kv_bytes). */
size_t seq_layers_bytes(const struct seq_layers *ls);
/* Move layer's cache and weights out into *out (to free later): the layer
 * has none from now on. */
void seq_layers_take(struct seq_layers *ls, int layer, struct seq_layer *out);
void seq_layer_free(struct seq_layer *l);
/* Free every layer. */
void seq_layers_free(struct seq_layers *ls);

#endif
