/* options.h -- the request options table: one row per option of a request,
 * the one place its wire names are written (as config/config.c's settings
 * table and lib/errors.h's HTTP_ERRORS are for theirs).
 *
 * A row gives the option's POST /attention field name, its type and range
 * (or its allowed strings), the v2 infer request parameter(s) that carry it
 * (v2 writes rope flat as rope_style, rope_theta, rope_rotary_dim, window
 * as window_left and window_right, attn_mask's string forms as is_causal
 * and causal_alignment), whether it is also a v2 input of the same name,
 * whether a model's config.json "defaults" may set it (never to a value
 * other than its weights' for an option the weights fix: num_kv_heads,
 * head_dim), what such a default must be, and a one-line doc. Everything
 * else reads the rows: the /attention decoder's field list (codec/scan.c)
 * and schema (codec/request.c), the v2 parameter names (codec/v2_params.c),
 * the model's defaults (model/defaults.c checks them through
 * opt_default_ok(), the Hugging Face loader writes them under opt_name()),
 * the v2 metadata (api/v2.c), and the tests that compare the table with
 * openapi.yaml.
 *
 *     if (opt_find(key) < 0) ... unknown field ...
 *     json_object_get(root, opt_name(OPT_SOFTCAP));
 *     fail_with(err, ERR_INVALID_PARAMETER, "%s must be ...", opt_name(OPT_SCALE));
 *
 * Adding an option: an id here, its row in options.c and its semantics in
 * the core (struct att_params); a number the core takes as it is
 * (OPT_CORE_FLOAT) needs nothing else: both protocols read it, a model's
 * defaults may set it (OPT_DEFAULT), and codec_values_apply() checks and
 * sets it. Any other needs its reading in codec/variants.c.
 *
 * The table is a layer of its own, below model/, codec/ and api/, which all
 * read it, and above core/ (the row's field is an offset into struct
 * att_params, kv_cache_dtype's choices are core/kvcache.h's) and lib/
 * (scripts/layers.sh). This header includes only jansson.
 */
#ifndef OPTIONS_OPTIONS_H
#define OPTIONS_OPTIONS_H

#include <jansson.h>
#include <stddef.h>

enum opt_id {
    /* POST /attention's fields, in the order of its field list */
    OPT_QUERY,
    OPT_KEY,
    OPT_VALUE,
    OPT_NUM_HEADS,
    OPT_WEIGHTS,
    OPT_ATTN_MASK,
    OPT_KEY_PADDING_MASK,
    OPT_NEED_WEIGHTS,
    OPT_AVERAGE_ATTN_WEIGHTS,
    OPT_SCALE,
    OPT_POSITIONAL_ENCODING,
    OPT_OUTPUT_ENCODING,
    OPT_TOKENS,
    OPT_KEY_TOKENS,
    OPT_MODEL,
    OPT_NUM_KV_HEADS,
    OPT_HEAD_DIM,
    OPT_ROPE,
    OPT_QUERY_POSITION_OFFSET,
    OPT_ALIBI,
    OPT_ALIBI_SLOPES,
    OPT_WINDOW,
    OPT_SOFTCAP,
    OPT_WEIGHTS_TOP_K,
    OPT_WEIGHTS_POOL,
    /* sequences (Triton's sequence extension): a step of a sequence */
    OPT_SEQUENCE_ID,
    OPT_SEQUENCE_START,
    OPT_SEQUENCE_END,
    OPT_KV_CACHE_DTYPE,
    OPT_LAYER,
    /* v2 only */
    OPT_BINARY_DATA_OUTPUT,
    OPT_COUNT
};

enum opt_type {
    OPT_T_TENSOR,  /* a tensor (attn_mask: or one of its strings) */
    OPT_T_WEIGHTS, /* the object of weight tensors */
    OPT_T_BOOL,
    OPT_T_INT,     /* an integer in [min, max] */
    OPT_T_NUMBER,  /* a number > 0, finite in float32 */
    OPT_T_CHOICE,  /* one of choices[] */
    OPT_T_ROPE,    /* an object of members[] */
    OPT_T_WINDOW,  /* [left, right] */
    OPT_T_LABELS,  /* an array of strings, one per position */
    OPT_T_STRING,  /* a model's name */
    OPT_T_ID,      /* a string or an integer in [0, 2^64) (a sequence's id) */
};

/* flags */
#define OPT_ATTENTION 1u  /* a field of POST /attention (named name) */
#define OPT_V2_INPUT 2u   /* a v2 input of the same name */
#define OPT_DEFAULT 4u    /* a model's "defaults" may set it */
#define OPT_FIXED 8u      /* ... only to its weights' own value */
#define OPT_V2_PARAM 16u  /* a v2 request parameter of the same name */
#define OPT_CORE_FLOAT 32u /* a number > 0 (finite in float32) the core takes as it is:
                              codec_values_apply sets struct att_params' float at field */

#define OPT_MAX_V2 4

struct opt {
    const char *name;              /* its name (POST /attention's when it has one) */
    unsigned flags;
    enum opt_type type;
    long long min, max;            /* OPT_T_INT (a model default's range) */
    const char *choices[3];        /* OPT_T_CHOICE, attn_mask's strings, rope's styles */
    const char *members[3];        /* OPT_T_ROPE: its object's members */
    const char *v2[OPT_MAX_V2 - 1]; /* v2 request parameters of other names (NULL-ended) */
    size_t field;                  /* OPT_CORE_FLOAT: offsetof(struct att_params, ...) */
    const char *rule;              /* what a model's default must be (load error) */
    const char *doc;               /* one line */
};

/* Row id (0 <= id < OPT_COUNT). */
const struct opt *opt_get(enum opt_id id);
/* Its name: opt_get(id)->name. */
const char *opt_name(enum opt_id id);
/* Its i-th allowed string / member / v2 request parameter (NULL past the
 * last; the v2 parameters are its own name first when OPT_V2_PARAM, then
 * v2[]: rope, rope_style, rope_theta, rope_rotary_dim; window_left,
 * window_right; is_causal, causal_alignment). */
const char *opt_choice(enum opt_id id, int i);
const char *opt_member(enum opt_id id, int i);
const char *opt_v2(enum opt_id id, int i);

/* The option POST /attention calls name, or -1. */
int opt_find(const char *name);
/* The option whose v2 request parameter name is, or -1; *i: which of its. */
int opt_find_v2(const char *name, int *i);
/* The index of s in id's choices, or -1 (s NULL: -1). */
int opt_choice_index(enum opt_id id, const char *s);

/* Whether v is a value a model's "defaults" may give option id (its row's
 * type and range; head_dim bounds rope's rotary_dim). Not the weights'
 * check (OPT_FIXED), which needs the model. */
int opt_default_ok(enum opt_id id, json_t *v, long long head_dim);

#endif
