/* golden_v2.c -- golden requests as v2 infer requests; see golden_v2.h. */
#include "tests/support/golden_v2.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float *floats_of(json_t *data, size_t *n)
{
    *n = json_array_size(data);
    float *f = malloc((*n ? *n : 1) * sizeof *f);
    for (size_t i = 0; i < *n; i++) {
        json_t *v = json_array_get(data, i);
        f[i] = json_is_string(v) ? -INFINITY : (float)json_number_value(v);
    }
    return f;
}

/* data (flat) as nested arrays of shape, from *at. */
static json_t *nest(json_t *data, json_t *shape, size_t d, size_t *at)
{
    if (d == json_array_size(shape))
        return json_incref(json_array_get(data, (*at)++));
    json_t *a = json_array();
    for (json_int_t i = 0; i < json_integer_value(json_array_get(shape, d)); i++)
        json_array_append_new(a, nest(data, shape, d + 1, at));
    return a;
}

static void add_input(json_t *inputs, const char *name, json_t *t, int nested)
{
    json_t *data = json_object_get(t, "data"), *shape = json_object_get(t, "shape");
    const int is_bool = json_is_boolean(json_array_get(data, 0));
    size_t at = 0;
    json_t *d = nested && json_array_size(shape) > 1 ? nest(data, shape, 0, &at)
                                                      : json_incref(data);
    json_array_append_new(inputs, json_pack("{s:s, s:O, s:s, s:o}", "name", name, "shape", shape,
                                            "datatype", is_bool ? "BOOL" : "FP32", "data", d));
}

json_t *golden_v2(json_t *req, int flags)
{
    const int nested = flags & GOLDEN_V2_NESTED, held = flags & GOLDEN_V2_HELD;
    json_t *inputs = json_array(), *params = json_object(), *v;
    static const char *const tensors[] = {"query", "key", "value", "attn_mask",
                                          "key_padding_mask"};
    for (int i = 0; i < 5; i++) {
        json_t *t = json_object_get(req, tensors[i]);
        if (json_is_string(t)) { /* attn_mask "causal" or "causal_lower_right" */
            json_object_set_new(params, "is_causal", json_true());
            if (strcmp(json_string_value(t), "causal_lower_right") == 0)
                json_object_set_new(params, "causal_alignment", json_string("lower_right"));
        } else if (t) {
            add_input(inputs, tensors[i], t, nested);
        }
    }
    const char *k;
    json_object_foreach(json_object_get(req, "weights"), k, v) {
        if (!held)
            add_input(inputs, k, v, nested);
    }
    static const char *const opts[] = {"num_heads", "need_weights", "average_attn_weights",
                                       "scale", "positional_encoding", "num_kv_heads",
                                       "head_dim", "query_position_offset", "alibi", "softcap"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if ((v = json_object_get(req, opts[i])) && (i > 0 || !held))
            json_object_set(params, opts[i], v);
    /* the variants v2 writes otherwise: JSON text, and the window's two ends */
    static const char *const texts[] = {"rope", "alibi_slopes"};
    for (int i = 0; i < 2; i++)
        if ((v = json_object_get(req, texts[i]))) {
            char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
            json_object_set_new(params, texts[i], json_string(s));
            free(s);
        }
    if ((v = json_object_get(req, "window"))) {
        json_object_set(params, "window_left", json_array_get(v, 0));
        json_object_set(params, "window_right", json_array_get(v, 1));
    }
    return json_pack("{s:o, s:o}", "parameters", params, "inputs", inputs);
}

char *golden_v2_body(json_t *v2, enum golden_v2_data data, size_t *len, long long *hlen)
{
    size_t cap = 1 << 16, blen = 0;
    char *bin = malloc(cap);
    json_t *copy = json_deep_copy(v2), *in;
    size_t i;
    json_array_foreach(json_object_get(copy, "inputs"), i, in) {
        const char *name = json_string_value(json_object_get(in, "name"));
        if (data == GOLDEN_V2_JSON ||
            (data == GOLDEN_V2_MIXED && (!strcmp(name, "key") || !strcmp(name, "attn_mask"))))
            continue;
        const int is_bool = strcmp(json_string_value(json_object_get(in, "datatype")), "BOOL") == 0;
        json_t *d = json_object_get(in, "data");
        size_t n;
        float *f = floats_of(d, &n);
        const size_t bytes = n * (is_bool ? 1 : 4);
        while (blen + bytes > cap)
            bin = realloc(bin, cap *= 2);
        for (size_t e = 0; e < n; e++) {
            if (is_bool)
                bin[blen + e] = (char)json_is_true(json_array_get(d, e));
            else
                memcpy(bin + blen + 4 * e, &f[e], 4);
        }
        blen += bytes;
        free(f);
        json_object_del(in, "data");
        json_object_set_new(in, "parameters", json_pack("{s:I}", "binary_data_size",
                                                        (json_int_t)bytes));
    }
    char *head = json_dumps(copy, JSON_COMPACT);
    json_decref(copy);
    const size_t hl = strlen(head);
    *len = hl + blen;
    *hlen = data == GOLDEN_V2_JSON ? -1 : (long long)hl;
    char *body = realloc(head, *len + 1);
    memcpy(body + hl, bin, blen);
    body[*len] = '\0';
    free(bin);
    return body;
}
