/* options.c -- the request options table; see options.h. The only C file
 * that spells an option's wire name. */
#include "options/options.h"

#include <math.h>
#include <string.h>

#include "core/attention.h"
#include "core/kvcache.h"

#define BOTH (OPT_ATTENTION | OPT_V2_PARAM)
#define NUMBER_RULE "a number > 0, finite in float32"
#define HUGE_OFFSET (1LL << 40)

static const struct opt rows[OPT_COUNT] = {
    [OPT_QUERY] = {"query", OPT_ATTENTION | OPT_V2_INPUT, OPT_T_TENSOR,
                   .doc = "(L, E) or (N, L, E): the queries (required)"},
    [OPT_KEY] = {"key", OPT_ATTENTION | OPT_V2_INPUT, OPT_T_TENSOR,
                 .doc = "(S, kdim) or (N, S, kdim): the keys (default: query)"},
    [OPT_VALUE] = {"value", OPT_ATTENTION | OPT_V2_INPUT, OPT_T_TENSOR,
                   .doc = "(S, vdim) or (N, S, vdim): the values (default: key)"},
    [OPT_NUM_HEADS] = {"num_heads", BOTH, OPT_T_INT, 1, 0,
                       .doc = "H, the query heads (required but with a server-held model)"},
    [OPT_WEIGHTS] = {"weights", OPT_ATTENTION, OPT_T_WEIGHTS,
                     .doc = "the projections, named as nn.MultiheadAttention's (built-in model)"},
    [OPT_ATTN_MASK] = {"attn_mask", OPT_ATTENTION | OPT_V2_INPUT | OPT_DEFAULT, OPT_T_TENSOR,
                       .choices = {"causal", "causal_lower_right"},
                       .v2 = {"is_causal", "causal_alignment"},
                       .rule = "\"causal\" or \"causal_lower_right\"",
                       .doc = "a mask (L, S) or (N*H, L, S), or a causal mask by name"},
    [OPT_KEY_PADDING_MASK] = {"key_padding_mask", OPT_ATTENTION | OPT_V2_INPUT, OPT_T_TENSOR,
                              .doc = "bool (S) or (N, S): true keys are ignored"},
    [OPT_NEED_WEIGHTS] = {"need_weights", BOTH | OPT_DEFAULT, OPT_T_BOOL, .rule = "a boolean",
                          .doc = "answer the attention weights too (default true)"},
    [OPT_AVERAGE_ATTN_WEIGHTS] = {"average_attn_weights", BOTH | OPT_DEFAULT, OPT_T_BOOL,
                                  .rule = "a boolean",
                                  .doc = "average the weights over the heads (default false)"},
    [OPT_SCALE] = {"scale", BOTH | OPT_DEFAULT, OPT_T_NUMBER, .rule = NUMBER_RULE,
                   .doc = "the scores' factor (default 1/sqrt(head_dim))"},
    [OPT_POSITIONAL_ENCODING] = {"positional_encoding", BOTH | OPT_DEFAULT, OPT_T_CHOICE,
                                 .choices = {"sinusoidal"}, .rule = "only \"sinusoidal\"",
                                 .doc = "add the sinusoidal encoding to query and key"},
    [OPT_OUTPUT_ENCODING] = {"output_encoding", OPT_ATTENTION | OPT_DEFAULT, OPT_T_CHOICE,
                             .choices = {"json", "base64"}, .rule = "\"json\" or \"base64\"",
                             .doc = "the answer's tensors as JSON numbers or base64 float32"},
    [OPT_TOKENS] = {"tokens", OPT_ATTENTION, OPT_T_LABELS,
                    .doc = "one label per query position, echoed in the answer"},
    [OPT_KEY_TOKENS] = {"key_tokens", OPT_ATTENTION, OPT_T_LABELS,
                        .doc = "one label per key position, echoed in the answer"},
    [OPT_MODEL] = {"model", OPT_ATTENTION, OPT_T_STRING,
                   .doc = "a server-held model: its weights and defaults"},
    [OPT_NUM_KV_HEADS] = {"num_kv_heads", BOTH | OPT_DEFAULT | OPT_FIXED, OPT_T_INT, 1, 0,
                          .rule = "the weights' own value",
                          .doc = "Hkv, key/value heads dividing H (grouped-query attention)"},
    [OPT_HEAD_DIM] = {"head_dim", BOTH | OPT_DEFAULT | OPT_FIXED, OPT_T_INT, 1, 0,
                      .rule = "the weights' own value",
                      .doc = "d, the width of a head (default E / H)"},
    [OPT_ROPE] = {"rope", BOTH | OPT_DEFAULT, OPT_T_ROPE, .choices = {"half", "interleaved"},
                  .members = {"style", "theta", "rotary_dim"},
                  .v2 = {"rope_style", "rope_theta", "rope_rotary_dim"},
                  .rule = "{\"style\": \"half\" | \"interleaved\", \"theta\": > 0, "
                          "\"rotary_dim\": even, 2..head_dim}",
                  .doc = "rotary position embedding of q and k"},
    [OPT_QUERY_POSITION_OFFSET] = {"query_position_offset", BOTH | OPT_DEFAULT, OPT_T_INT, 0,
                                   HUGE_OFFSET, .rule = "an integer >= 0",
                                   .doc = "the first query's position (keys start at 0)"},
    [OPT_ALIBI] = {"alibi", BOTH | OPT_DEFAULT, OPT_T_BOOL, .rule = "a boolean",
                   .doc = "ALiBi with the paper's slopes"},
    [OPT_ALIBI_SLOPES] = {"alibi_slopes", BOTH, OPT_T_TENSOR,
                          .doc = "ALiBi with these H slopes"},
    [OPT_WINDOW] = {"window", OPT_ATTENTION | OPT_DEFAULT, OPT_T_WINDOW, -1, HUGE_OFFSET,
                    .v2 = {"window_left", "window_right"},
                    .rule = "[left, right], integers >= -1",
                    .doc = "local attention: keys within [i - left, i + right] (-1: unlimited)"},
    [OPT_SOFTCAP] = {"softcap", BOTH | OPT_DEFAULT | OPT_CORE_FLOAT, OPT_T_NUMBER,
                     .field = offsetof(struct att_params, softcap), .rule = NUMBER_RULE,
                     .doc = "scores become c * tanh(scores / c)"},
    [OPT_WEIGHTS_TOP_K] = {"weights_top_k", BOTH, OPT_T_INT, 1, 0,
                           .doc = "answer the k largest weights of each row instead"},
    [OPT_WEIGHTS_POOL] = {"weights_pool", BOTH, OPT_T_INT, 1, 0,
                          .doc = "answer the weights mean-pooled in p x p tiles instead"},
    [OPT_SEQUENCE_ID] = {"sequence_id", BOTH, OPT_T_ID,
                         .doc = "the sequence (session) this step belongs to: a string or an "
                                "integer < 2^64 (0 or \"\": none), or an array of B ids (a "
                                "batch of sequences); also X-Sequence-Id"},
    [OPT_SEQUENCE_START] = {"sequence_start", BOTH, OPT_T_BOOL,
                            .doc = "start the sequence (afresh if it is live) with this step; "
                                   "in a batch: one boolean for all or one per id"},
    [OPT_SEQUENCE_END] = {"sequence_end", BOTH, OPT_T_BOOL,
                          .doc = "end the sequence after this step (free every layer's cache); "
                                 "in a batch: one boolean for all or one per id"},
    [OPT_KV_CACHE_DTYPE] = {"kv_cache_dtype", BOTH | OPT_DEFAULT, OPT_T_CHOICE,
                            .choices = {ATT_KV_DTYPE_NAMES},
                            .rule = "\"FP32\", \"FP16\" or \"BF16\"",
                            .doc = "the sequence's cache element type, at its start "
                                   "(default FP32)"},
    [OPT_LAYER] = {"layer", BOTH, OPT_T_INT, 0, 0,
                   .doc = "the sequence's layer this step is for, 0 <= layer < max_layers "
                          "(default 0): each layer has its own cache"},
    [OPT_BINARY_DATA_OUTPUT] = {"binary_data_output", OPT_V2_PARAM, OPT_T_BOOL,
                                .doc = "every output as binary data (v2)"},
};

const struct opt *opt_get(enum opt_id id)
{
    return &rows[id];
}

const char *opt_name(enum opt_id id)
{
    return rows[id].name;
}

const char *opt_choice(enum opt_id id, int i)
{
    return i >= 0 && i < 3 ? rows[id].choices[i] : NULL;
}

const char *opt_member(enum opt_id id, int i)
{
    return i >= 0 && i < 3 ? rows[id].members[i] : NULL;
}

const char *opt_v2(enum opt_id id, int i)
{
    if (rows[id].flags & OPT_V2_PARAM) {
        if (i == 0)
            return rows[id].name;
        i--;
    }
    return i >= 0 && i < OPT_MAX_V2 - 1 ? rows[id].v2[i] : NULL;
}

int opt_find(const char *name)
{
    for (int id = 0; id < OPT_COUNT; id++)
        if ((rows[id].flags & OPT_ATTENTION) && strcmp(name, rows[id].name) == 0)
            return id;
    return -1;
}

int opt_find_v2(const char *name, int *i)
{
    for (int id = 0; id < OPT_COUNT; id++)
        for (int k = 0; opt_v2((enum opt_id)id, k); k++)
            if (strcmp(name, opt_v2((enum opt_id)id, k)) == 0) {
                *i = k;
                return id;
            }
    return -1;
}

int opt_choice_index(enum opt_id id, const char *s)
{
    for (int i = 0; s && opt_choice(id, i); i++)
        if (strcmp(s, opt_choice(id, i)) == 0)
            return i;
    return -1;
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

/* rope: {style: one of the choices, theta: > 0, rotary_dim: even
 * 2..head_dim}; style required. */
static int rope_ok(json_t *v, long long head_dim)
{
    const struct opt *o = &rows[OPT_ROPE];
    if (!json_is_object(v) ||
        opt_choice_index(OPT_ROPE, json_string_value(json_object_get(v, o->members[0]))) < 0)
        return 0;
    const char *k;
    json_t *x;
    json_object_foreach (v, k, x) {
        if (!strcmp(k, o->members[1])) {
            if (!json_is_number(x) || !(json_number_value(x) > 0) ||
                !isfinite(json_number_value(x)))
                return 0;
        } else if (!strcmp(k, o->members[2])) {
            if (!int_in(x, 2, head_dim) || json_integer_value(x) % 2)
                return 0;
        } else if (strcmp(k, o->members[0])) {
            return 0;
        }
    }
    return 1;
}

int opt_default_ok(enum opt_id id, json_t *v, long long head_dim)
{
    const struct opt *o = &rows[id];
    if (!(o->flags & OPT_DEFAULT))
        return 0;
    switch (o->type) {
    case OPT_T_BOOL:
        return json_is_boolean(v);
    case OPT_T_TENSOR: /* attn_mask: a model sets one of its strings */
    case OPT_T_CHOICE:
        return opt_choice_index(id, json_string_value(v)) >= 0;
    case OPT_T_ROPE:
        return rope_ok(v, head_dim);
    case OPT_T_WINDOW:
        return json_is_array(v) && json_array_size(v) == 2 &&
               int_in(json_array_get(v, 0), o->min, o->max) &&
               int_in(json_array_get(v, 1), o->min, o->max);
    case OPT_T_INT:
        if (o->flags & OPT_FIXED) /* equal to the weights' (checked before) */
            return positive_float(v);
        return int_in(v, o->min, o->max);
    default: /* OPT_T_NUMBER */
        return positive_float(v);
    }
}
