/* variants.h -- the attention variants' options (docs/variants.md, "Attention
 * variants") and the other options a model's defaults may set, with one
 * set of rules for both protocols: POST /attention's
 * fields (codec/request.c) and the v2 request parameters
 * (codec/v2_params.c).
 *
 * A protocol gathers each value with the name its messages should blame
 * (codec_values_set), reading a rope object or a window array whole
 * with codec_values_rope() / codec_values_window(), and a v2 parameter
 * that holds JSON text with codec_values_parse(). codec_values_apply()
 * then checks every value, and the values against each other and against
 * H and E, and sets struct att_params; every refusal is a 400 naming the
 * field (413 for a limit).
 *
 *     struct codec_values cv;
 *     codec_values_init(&cv);
 *     codec_values_defaults(&cv, model, 0);  (a server-held model's, if any)
 *     codec_values_over(&cv, root, 0);       (the request's, over them)
 *     ...                                    (p->H and p->E set before)
 *     if (codec_values_apply(p, &cv, lim, &arena, &err) == 0)
 *         ... att_weight_shapes(ws, p) ... codec_identity_check(p, "weights.", &err) ...
 *     codec_values_deinit(&cv);              (always)
 *
 * The projections' shapes follow from H, Hkv = num_kv_heads and
 * d = head_dim: with Dq = H·d and Dkv = Hkv·d, q (Dq, E), k (Dkv, kdim),
 * v (Dkv, vdim), packed in_proj (Dq + 2·Dkv, E) and its bias, out (E, Dq).
 */
#ifndef CODEC_VARIANTS_H
#define CODEC_VARIANTS_H

#include <jansson.h>

#include "core/attention.h"
#include "codec/codec.h"
#include "options/options.h"
#include "lib/errors.h"
#include "codec/tensor.h"

/* The largest query_position_offset: positions stay exact in a double. */
#define CODEC_MAX_POSITION_OFFSET (1LL << 52)

/* The parts of a request's options a protocol gathers: each option's
 * value at its id (enum opt_id: OPT_SOFTCAP, ...), but rope's and window's,
 * which come in members, after them. codec_values_apply() checks the
 * variants; each protocol reads the rest itself. */
enum {
    CV_ROPE_STYLE = OPT_COUNT,
    CV_ROPE_THETA,
    CV_ROPE_ROTARY_DIM,
    CV_WINDOW_LEFT,
    CV_WINDOW_RIGHT,
    CV_COUNT
};

/* Every option's value of a request (the request's over the model's
 * defaults), each with the name a message calls it. */
struct codec_values {
    json_t *v[CV_COUNT];      /* borrowed (or in own[]); NULL: not given */
    char name[CV_COUNT][192]; /* what a message calls each value */
    json_t *own[4];           /* values parsed from JSON text (owned) */
    int n_own;
};

void codec_values_init(struct codec_values *cv);
void codec_values_deinit(struct codec_values *cv);

/* a then b into dst (size bytes, size >= 1), cut to fit as snprintf(dst,
 * size, "%s%s", a, b) would (without its cost on the request path); the
 * length written. */
size_t codec_join(char *dst, size_t size, const char *a, const char *b);

/* Value i is v (borrowed; NULL: not given, the name is kept for messages). */
void codec_values_set(struct codec_values *cv, int i, json_t *v,
                      const char *name);

/* The request's value of part i over what is there (a model's default):
 * v given replaces it; NULL keeps it (naming the part name when there is
 * none, for messages). */
void codec_values_merge(struct codec_values *cv, int i, json_t *v,
                        const char *name);

struct model;
/* The one rule of a model's defaults, for both protocols (docs/models.md,
 * "Model defaults"): called first, it puts each default of m (NULL: none)
 * into its parts; the request's values then go over them with
 * codec_values_merge() member by member (rope's members, window's ends,
 * each whole option), except alibi and alibi_slopes, one option whose
 * either, given, replaces both (codec_values_over). say_model: messages
 * call a default "model 'x' defaults.name" (v2) rather than by the field's
 * own name (POST /attention, as when defaults were merged into its body). */
void codec_values_defaults(struct codec_values *cv, const struct model *m, int say_model);

/* The whole options of obj over cv (codec_values_merge; alibi and
 * alibi_slopes: both set when obj has either), by their names: POST
 * /attention's fields (v2 0, names as they are), or a v2 request's
 * parameters of the same name (v2 1, named "parameters.name"; alibi_slopes
 * is then its JSON text, for the caller to parse). */
void codec_values_over(struct codec_values *cv, json_t *obj, int v2);

/* A rope object {style, theta?, rotary_dim?} (name: what it is called,
 * rope): its members go over the three rope values (codec_values_merge). */
int codec_values_rope(struct codec_values *cv, json_t *rope, const char *name,
                      struct failure *err);

/* A window [left, right] (name: what it is called, window). */
int codec_values_window(struct codec_values *cv, json_t *w, const char *name,
                        struct failure *err);

/* The JSON text of string s, parsed; held by cv. NULL with err filled when
 * s is not a string of JSON (name: what it is called). */
json_t *codec_values_parse(struct codec_values *cv, json_t *s, const char *name,
                           struct failure *err);

/* Check the values and set p's variant fields (p->H, E, kdim, vdim set).
 * ALiBi slopes (alibi true, or alibi_slopes) go into a. */
int codec_values_apply(struct att_params *p, const struct codec_values *cv,
                       const struct codec_limits *lim, struct tensor_arena *a,
                       struct failure *err);

/* Set weight i (enum att_weight) of p; w holds len floats (borrowed). */
void codec_set_weight(struct att_params *p, int i, const float *w, size_t len);

/* t (called name) has shape (d0) or (d0, d1) for ndim 1 or 2; else
 * shape_mismatch saying both shapes. */
int codec_expect_shape(const struct tensor *t, const char *name, int ndim, long long d0,
                       long long d1, struct failure *err);

/* An absent matrix is the identity only where its dimensions allow it:
 * shape_mismatch naming it (prefix + its name) otherwise. The cases
 * without num_kv_heads or head_dim are left to att_check(). */
int codec_identity_check(const struct att_params *p, const char *prefix,
                         struct failure *err);

/* A model's value for a dimension it fixes (OPT_NUM_KV_HEADS or
 * OPT_HEAD_DIM: its weights' Hkv or d); a request may repeat it but not
 * change it (the weights' shapes follow from it). given: the request's
 * value (NULL: none), called name. */
int codec_model_dim(const struct model *m, enum opt_id id, json_t *given, const char *name,
                    struct failure *err);

/* The rest of a request's rules, for both protocols. */

/* v (called what) over max: payload_too_large naming the setting key. */
int codec_check_dim(long long v, int max, const char *what, const char *key,
                    struct failure *err);
/* query's rank: 2 (L, E) or 3 (N, L, E). */
int codec_query_rank(const struct tensor *q, struct failure *err);
/* query, key and value (key: query when not given, value: key) against
 * each other and the limits, into p (N, L, E, S, kdim, vdim, the data);
 * *batched: query has rank 3. */
int codec_set_qkv(struct att_params *p, int *batched, const struct tensor *q,
                  const struct tensor *kt, const struct tensor *vt,
                  const struct codec_limits *lim, struct failure *err);
/* A mask tensor (L, S) or (N*H, L, S) into p. */
int codec_set_mask(struct att_params *p, const struct tensor *t, struct failure *err);
/* key_padding_mask (S) or, batched, (N, S) into p (p->N and S set). */
int codec_set_key_padding_mask(struct att_params *p, int batched, const struct tensor *t,
                               struct failure *err);

#endif
