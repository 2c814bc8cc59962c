/* defaults.c -- a model's "defaults": the POST /attention options it sets
 * when a request does not (model.h). The hf_* formats derive some from the
 * checkpoint's config (hf.c); the model config's own "defaults" override
 * them, each value checked here against the rules of model.h. */
#include "model/model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const option_keys[] = {
    "need_weights", "average_attn_weights", "attn_mask", "scale", "positional_encoding",
    "output_encoding", "num_kv_heads", "head_dim", "rope", "window", "sliding_window",
    "softcap", "alibi", "query_position_offset",
};

int model_is_default_option(const char *key)
{
    for (size_t i = 0; i < sizeof option_keys / sizeof option_keys[0]; i++)
        if (!strcmp(key, option_keys[i]))
            return 1;
    return 0;
}

/* A number > 0 that stays finite and > 0 in float32. */
static int positive_float(json_t *v)
{
    double d = json_number_value(v);
    return json_is_number(v) && d > 0 && isfinite((float)d) && (float)d > 0;
}

static int int_in(json_t *v, long long lo, long long hi)
{
    return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

/* rope: {"style": "half" | "interleaved", "theta": > 0, "rotary_dim": even
 * 2..head_dim}; style required. */
static int rope_ok(json_t *v, int head_dim)
{
    const char *style = json_string_value(json_object_get(v, "style"));
    if (!json_is_object(v) || !style || (strcmp(style, "half") && strcmp(style, "interleaved")))
        return 0;
    const char *k;
    json_t *x;
    json_object_foreach (v, k, x) {
        if (!strcmp(k, "theta")) {
            if (!json_is_number(x) || !(json_number_value(x) > 0) ||
                !isfinite(json_number_value(x)))
                return 0;
        } else if (!strcmp(k, "rotary_dim")) {
            if (!int_in(x, 2, head_dim) || json_integer_value(x) % 2)
                return 0;
        } else if (strcmp(k, "style")) {
            return 0;
        }
    }
    return 1;
}

/* window: [left, right], integers >= -1. */
static int window_ok(json_t *v)
{
    return json_is_array(v) && json_array_size(v) == 2 &&
           int_in(json_array_get(v, 0), -1, 1LL << 40) &&
           int_in(json_array_get(v, 1), -1, 1LL << 40);
}

/* num_kv_heads and head_dim are the weights' own: a "defaults" entry may
 * only repeat them. null (which removes an option) would let a request
 * fall back to H and E / H, which the weights contradict; another value
 * likewise. Either is a load error naming the key and both values. */
static int fixed_by_weights(const struct model *m, const char *key, json_t *v, char *err,
                            size_t errlen)
{
    int own;
    if (!strcmp(key, "num_kv_heads"))
        own = m->Hkv;
    else if (!strcmp(key, "head_dim"))
        own = m->head_dim;
    else
        return 0;
    if (json_is_integer(v) && json_integer_value(v) == own)
        return 0;
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    model_fail(err, errlen, "config.json: defaults.%s = %.40s contradicts the weights: "
               "their shapes give %s %d (remove the entry, or set it to %d)", key,
               text ? text : "?", key, own, own);
    free(text);
    return -1;
}

/* One value of the config's "defaults" against the rules of model.h;
 * what it must be in *rule when not. */
static int default_ok(const struct model *m, const char *key, json_t *v, const char **rule)
{
    const char *s = json_string_value(v);
    if (!strcmp(key, "need_weights") || !strcmp(key, "average_attn_weights") ||
        !strcmp(key, "alibi")) {
        *rule = "a boolean";
        return json_is_boolean(v);
    } else if (!strcmp(key, "attn_mask")) {
        *rule = "\"causal\" or \"causal_lower_right\"";
        return s && (!strcmp(s, "causal") || !strcmp(s, "causal_lower_right"));
    } else if (!strcmp(key, "positional_encoding")) {
        *rule = "only \"sinusoidal\"";
        return s && !strcmp(s, "sinusoidal");
    } else if (!strcmp(key, "output_encoding")) {
        *rule = "\"json\" or \"base64\"";
        return s && (!strcmp(s, "json") || !strcmp(s, "base64"));
    } else if (!strcmp(key, "rope")) {
        *rule = "{\"style\": \"half\" | \"interleaved\", \"theta\": > 0, \"rotary_dim\": even, "
                "2..head_dim}";
        return rope_ok(v, m->head_dim);
    } else if (!strcmp(key, "window")) {
        *rule = "[left, right], integers >= -1";
        return window_ok(v);
    } else if (!strcmp(key, "sliding_window")) {
        *rule = "an integer >= 1 (W keys including the query's own)";
        return int_in(v, 1, 1LL << 40);
    } else if (!strcmp(key, "query_position_offset")) {
        *rule = "an integer >= 0";
        return int_in(v, 0, 1LL << 40);
    }
    *rule = "a number > 0, finite in float32"; /* scale, softcap */
    return positive_float(v);
}

int model_set_defaults(struct model *m, json_t *derived, json_t *user, char *err,
                       size_t errlen)
{
    m->defaults = derived ? derived : json_object();
    if (!m->defaults)
        return model_fail(err, errlen, "out of memory");
    if (user && !json_is_object(user))
        return model_fail(err, errlen, "config.json: defaults is not an object");
    const char *key;
    json_t *v;
    json_object_foreach (user, key, v) {
        const char *rule;
        if (!model_is_default_option(key))
            return model_fail(err, errlen, "config.json: defaults.%.64s is not an option a "
                              "model may set", key);
        /* HF's sliding_window = W is window [W - 1, 0] */
        const char *to = !strcmp(key, "sliding_window") ? "window" : key;
        if (fixed_by_weights(m, key, v, err, errlen))
            return -1;
        if (json_is_null(v)) { /* removes what the checkpoint set */
            json_object_del(m->defaults, to);
            continue;
        }
        if (!default_ok(m, key, v, &rule)) {
            char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            model_fail(err, errlen, "config.json: defaults.%s = %.40s is not allowed (%s)", key,
                       text ? text : "?", rule);
            free(text);
            return -1;
        }
        json_t *val = to == key ? json_incref(v)
                                : json_pack("[Ii]", json_integer_value(v) - 1, 0);
        if (!val || json_object_set_new(m->defaults, to, val))
            return model_fail(err, errlen, "out of memory");
    }
    return 0;
}
