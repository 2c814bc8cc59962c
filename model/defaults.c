/* defaults.c -- see defaults.h. A model's "defaults": the POST /attention
 * options it sets when a request does not (model.h). The hf_* formats
 * derive some from the checkpoint's config (hf.c); the model config's own
 * "defaults" override them, each value checked here against its row of
 * the options table (options/options.h). */
#include "model/defaults.h"

#include "model/load.h"
#include "options/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Hugging Face's notation for a window, which "defaults" takes too: W keys
 * including the query's own, stored as the window option [W - 1, 0]. */
#define HF_SLIDING_WINDOW "sliding_window"

/* Whether key is an option "defaults" may set, as POST /attention names
 * it: a row of the options table marked OPT_DEFAULT (options/options.h:
 * need_weights, average_attn_weights, alibi, attn_mask's strings, scale,
 * softcap, positional_encoding, output_encoding, num_kv_heads and head_dim
 * (the model's own only), rope, window, query_position_offset), each
 * checked against its row; or sliding_window (W >= 1), Hugging Face's
 * notation, stored as window [W - 1, 0]. */
static int is_default_option(const char *key)
{
    const int id = opt_find(key);
    return !strcmp(key, HF_SLIDING_WINDOW) ||
           (id >= 0 && (opt_get((enum opt_id)id)->flags & OPT_DEFAULT));
}

/* The options the weights fix (OPT_FIXED: num_kv_heads, head_dim) are the
 * weights' own: a "defaults" entry may only repeat them. null (which
 * removes an option) would let a request fall back to H and E / H, which
 * the weights contradict; another value likewise. Either is a load error
 * naming the key and both values. */
static int fixed_by_weights(const struct model *m, enum opt_id id, json_t *v, char *err,
                            size_t errlen)
{
    if (!(opt_get(id)->flags & OPT_FIXED))
        return 0;
    const int own = id == OPT_NUM_KV_HEADS ? m->Hkv : m->head_dim;
    if (json_is_integer(v) && json_integer_value(v) == own)
        return 0;
    const char *key = opt_name(id);
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    load_fail(err, errlen, "config.json: defaults.%s = %.40s contradicts the weights: "
              "their shapes give %s %d (remove the entry, or set it to %d)", key,
              text ? text : "?", key, own, own);
    free(text);
    return -1;
}

int model_set_defaults(struct model *m, json_t *derived, json_t *user, char *err,
                       size_t errlen)
{
    m->defaults = derived ? derived : json_object();
    if (!m->defaults)
        return load_fail(err, errlen, "out of memory");
    if (user && !json_is_object(user))
        return load_fail(err, errlen, "config.json: defaults is not an object");
    const char *key;
    json_t *v;
    json_object_foreach (user, key, v) {
        if (!is_default_option(key))
            return load_fail(err, errlen, "config.json: defaults.%.64s is not an option a "
                             "model may set", key);
        /* HF's sliding_window = W is window [W - 1, 0] */
        const int hf = !strcmp(key, HF_SLIDING_WINDOW);
        const enum opt_id id = hf ? OPT_WINDOW : (enum opt_id)opt_find(key);
        if (!hf && fixed_by_weights(m, id, v, err, errlen))
            return -1;
        if (json_is_null(v)) { /* removes what the checkpoint set */
            json_object_del(m->defaults, opt_name(id));
            continue;
        }
        if (hf ? !(json_is_integer(v) && json_integer_value(v) >= 1 &&
                   json_integer_value(v) <= 1LL << 40)
               : !opt_default_ok(id, v, m->head_dim)) {
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            load_fail(err, errlen, "config.json: defaults.%s = %.40s is not allowed (%s)", key,
                      text ? text : "?",
                      hf ? "an integer >= 1 (W keys including the query's own)"
                         : opt_get(id)->rule);
            free(text);
            return -1;
        }
        json_t *val = hf ? json_pack("[Ii]", json_integer_value(v) - 1, 0) : json_incref(v);
        if (!val || json_object_set_new(m->defaults, opt_name(id), val))
            return load_fail(err, errlen, "out of memory");
    }
    return 0;
}
