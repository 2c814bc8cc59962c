/* codec_variants.h -- the attention variants' options (README "Attention
 * variants"), with one set of rules for both protocols: POST /attention's
 * fields (codec_request.c) and the v2 request parameters
 * (v2_codec_params.c).
 *
 * A protocol gathers each value with the name its messages should blame
 * (codec_variants_set), reading a "rope" object or a "window" array whole
 * with codec_variants_rope() / codec_variants_window(), and a v2 parameter
 * that holds JSON text with codec_variants_parse(). codec_variants_apply()
 * then checks every value, and the values against each other and against
 * H and E, and sets struct att_params; every refusal is a 400 naming the
 * field (413 for a limit).
 *
 *     struct codec_variants cv;
 *     codec_variants_init(&cv);
 *     codec_variants_set(&cv, CV_SOFTCAP, json_object_get(root, "softcap"), "softcap");
 *     ...                                  (p->H and p->E set before)
 *     if (codec_variants_apply(p, &cv, lim, &arena, &err) == 0)
 *         ... att_weight_shapes(ws, p) ... codec_identity_check(p, "weights.", &err) ...
 *     codec_variants_deinit(&cv);          (always)
 *
 * The projections' shapes follow from H, Hkv = num_kv_heads and
 * d = head_dim: with Dq = H·d and Dkv = Hkv·d, q (Dq, E), k (Dkv, kdim),
 * v (Dkv, vdim), packed in_proj (Dq + 2·Dkv, E) and its bias, out (E, Dq).
 */
#ifndef SERVER_CODEC_VARIANTS_H
#define SERVER_CODEC_VARIANTS_H

#include <jansson.h>

#include "core/attention.h"
#include "codec/codec.h"
#include "lib/errors.h"
#include "codec/tensor.h"

/* The largest query_position_offset: positions stay exact in a double. */
#define CODEC_MAX_POSITION_OFFSET (1LL << 52)

enum codec_var {
    CV_NUM_KV_HEADS,
    CV_HEAD_DIM,
    CV_ROPE_STYLE,
    CV_ROPE_THETA,
    CV_ROPE_ROTARY_DIM,
    CV_QUERY_POSITION_OFFSET,
    CV_ALIBI,
    CV_ALIBI_SLOPES,
    CV_WINDOW_LEFT,
    CV_WINDOW_RIGHT,
    CV_SOFTCAP,
    CV_COUNT
};

struct codec_variants {
    json_t *v[CV_COUNT];      /* borrowed (or in own[]); NULL: not given */
    char name[CV_COUNT][192]; /* what a message calls each value */
    json_t *own[4];           /* values parsed from JSON text (owned) */
    int n_own;
};

void codec_variants_init(struct codec_variants *cv);
void codec_variants_deinit(struct codec_variants *cv);

/* Value i is v (borrowed; NULL: not given, the name is kept for messages). */
void codec_variants_set(struct codec_variants *cv, enum codec_var i, json_t *v,
                        const char *name);

/* A rope object {"style", "theta"?, "rotary_dim"?} (name: what it is
 * called, "rope"): its members replace all three rope values. */
int codec_variants_rope(struct codec_variants *cv, json_t *rope, const char *name,
                        struct api_error *err);

/* A window [left, right] (name: "window"). */
int codec_variants_window(struct codec_variants *cv, json_t *w, const char *name,
                          struct api_error *err);

/* The JSON text of string s, parsed; held by cv. NULL with err filled when
 * s is not a string of JSON (name: what it is called). */
json_t *codec_variants_parse(struct codec_variants *cv, json_t *s, const char *name,
                             struct api_error *err);

/* Check the values and set p's variant fields (p->H, E, kdim, vdim set).
 * ALiBi slopes (alibi true, or alibi_slopes) go into a. */
int codec_variants_apply(struct att_params *p, const struct codec_variants *cv,
                         const struct codec_limits *lim, struct tensor_arena *a,
                         struct api_error *err);

/* Set weight i of p, in the order of the one list of weights
 * (scan_weight_index, att_weight_shapes): in_proj_weight, q, k, v,
 * in_proj_bias, out, out_bias; w holds len floats (borrowed). */
void codec_set_weight(struct att_params *p, int i, const float *w, size_t len);

/* t (called name) has shape (d0) or (d0, d1) for ndim 1 or 2; else
 * shape_mismatch saying both shapes. */
int codec_expect_shape(const struct tensor *t, const char *name, int ndim, long long d0,
                       long long d1, struct api_error *err);

struct model;
/* A server-held model's dimensions against the request's: the first that
 * differs, 0 (E), 1 (kdim) or 2 (vdim), its values in *got and *want; or
 * -1 when they agree. Each protocol words the refusal itself. */
int codec_model_mismatch(const struct att_params *p, const struct model *m, int *got,
                         int *want);
/* The model's weights into p (after codec_model_mismatch() found none). */
void codec_model_weights(struct att_params *p, const struct model *m);

/* An absent matrix is the identity only where its dimensions allow it:
 * shape_mismatch naming it (prefix + its name) otherwise. The cases
 * without num_kv_heads or head_dim are left to att_check(). */
int codec_identity_check(const struct att_params *p, const char *prefix,
                         struct api_error *err);

/* A model's value for a dimension it fixes ("num_kv_heads" or
 * "head_dim": its defaults, else H or E/H); a request may repeat it but
 * not change it (the weights' shapes follow from it). given: the request's
 * value (NULL: none), called name. */
struct model;
int codec_model_dim(const struct model *m, const char *key, json_t *given, const char *name,
                    struct api_error *err);

#endif
