/* sequence_layers.c -- a sequence's caches, one per layer; see
 * sequence_layers.h. */
#include "api/sequence_layers.h"

#include <stdlib.h>
#include <string.h>

int seq_layers_has(const struct seq_layers *ls, int layer)
{
    return ls->l && layer >= 0 && layer < ls->n && ls->l[layer].kv;
}

struct att_kv *seq_layers_kv(const struct seq_layers *ls, int layer)
{
    return seq_layers_has(ls, layer) ? ls->l[layer].kv : NULL;
}

int seq_layers_add(struct seq_layers *ls, int layer, const struct seq_fixed *f,
                   struct failure *err)
{
    if (layer >= ls->n) {
        struct seq_layer *g = realloc(ls->l, (size_t)(layer + 1) * sizeof *g);
        if (!g)
            return fail_with(err, ERR_INTERNAL, "out of memory for a sequence's layers");
        memset(g + ls->n, 0, (size_t)(layer + 1 - ls->n) * sizeof *g);
        ls->l = g, ls->n = layer + 1;
    }
    struct att_kv *kv = att_kv_new(f->v[SEQ_FIX_HKV], f->v[SEQ_FIX_HEAD_DIM], f->dtype);
    if (!kv || !ls->l)
        return att_kv_free(kv), fail_with(err, ERR_INTERNAL, "out of memory for a sequence's "
                                          "cache");
    ls->l[layer].kv = kv;
    return 0;
}

static int weights_differ(struct failure *err)
{
    return fail_with(err, ERR_INVALID_PARAMETER, "the weights differ from those the sequence "
                     "started with: a step of a sequence keeps its start's weights (leave them "
                     "out)");
}

int seq_layers_weights(struct seq_layers *ls, int layer, int from, int fresh,
                       struct att_params *p, size_t *kept, struct failure *err)
{
    *kept = 0;
    if (!seq_layers_has(ls, layer))
        return fail_with(err, ERR_INTERNAL, "no cache on layer %d", layer);
    struct seq_layer *s = &ls->l[layer];
    int given = 0;
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        given |= p->w[i] != NULL;
    if (fresh && !given && from != layer && seq_layers_has(ls, from))
        for (int i = 0; i < ATT_NWEIGHTS; i++) /* the start's, copied below */
            p->w[i] = ls->l[from].w[i], p->w_len[i] = ls->l[from].wlen[i];
    if (fresh) {
        for (int i = 0; i < ATT_NWEIGHTS; i++) {
            if (!p->w[i])
                continue;
            if (!(s->w[i] = malloc(p->w_len[i] * sizeof(float))))
                return fail_with(err, ERR_INTERNAL, "out of memory keeping the weights");
            memcpy(s->w[i], p->w[i], p->w_len[i] * sizeof(float));
            s->wlen[i] = p->w_len[i];
            *kept += p->w_len[i] * sizeof(float);
        }
        return 0;
    }
    for (int i = 0; i < ATT_NWEIGHTS; i++) { /* every step: the first's, none other */
        if (!p->w[i] && s->w[i])
            p->w[i] = s->w[i], p->w_len[i] = s->wlen[i];
        else if (p->w[i] && (!s->w[i] || p->w_len[i] != s->wlen[i] ||
                             memcmp(p->w[i], s->w[i], p->w_len[i] * sizeof(float))))
            return weights_differ(err);
    }
    return 0;
}

size_t seq_layers_bytes(const struct seq_layers *ls)
{
    size_t b = 0;
    for (int l = 0; ls->l && l < ls->n; l++)
        b += ls->l[l].kv ? att_kv_bytes(ls->l[l].kv) : 0;
    return b;
}

void seq_layers_take(struct seq_layers *ls, int layer, struct seq_layer *out)
{
    memset(out, 0, sizeof *out);
    if (!ls->l || layer < 0 || layer >= ls->n)
        return;
    *out = ls->l[layer];
    memset(&ls->l[layer], 0, sizeof *out);
}

void seq_layer_free(struct seq_layer *l)
{
    att_kv_free(l->kv);
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        free(l->w[i]);
    memset(l, 0, sizeof *l);
}

void seq_layers_free(struct seq_layers *ls)
{
    for (int l = 0; ls->l && l < ls->n; l++)
        seq_layer_free(&ls->l[l]);
    free(ls->l);
    ls->l = NULL, ls->n = 0;
}
