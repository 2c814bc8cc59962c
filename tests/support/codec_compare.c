#include "tests/support/codec_compare.h"

#include "codec/variants.h"
#include "codec/request.h"

#include <string.h>

static int same_bytes(const void *x, const void *y, size_t n)
{
    if (!x || !y)
        return x == y;
    return memcmp(x, y, n) == 0;
}

static int same_str(const char *x, const char *y)
{
    if (!x || !y)
        return x == y;
    return strcmp(x, y) == 0;
}

const char *codec_compare(const struct codec_request *a, const struct codec_request *b)
{
    const struct att_params *p = &a->p, *q = &b->p;
    if (p->N != q->N || p->L != q->L || p->S != q->S || p->E != q->E || p->kdim != q->kdim ||
        p->vdim != q->vdim || p->H != q->H)
        return "sizes";
    if (a->batched != b->batched || a->base64_out != b->base64_out)
        return "batched or output_encoding";
    if (p->weights_mode != q->weights_mode || p->has_scale != q->has_scale ||
        (p->has_scale && memcmp(&p->scale, &q->scale, sizeof p->scale)) ||
        p->positional_encoding != q->positional_encoding)
        return "options";
    if (p->Hkv != q->Hkv || p->head_dim != q->head_dim ||
        p->query_position_offset != q->query_position_offset ||
        p->rope_style != q->rope_style || p->rope_rotary_dim != q->rope_rotary_dim ||
        memcmp(&p->rope_theta, &q->rope_theta, sizeof p->rope_theta) ||
        p->has_window != q->has_window || p->window_left != q->window_left ||
        p->window_right != q->window_right || memcmp(&p->softcap, &q->softcap, sizeof p->softcap))
        return "variants";
    const size_t E = (size_t)p->E, fl = sizeof(float);
    if (!same_bytes(p->alibi_slopes, q->alibi_slopes, (size_t)p->H * fl))
        return "alibi_slopes";
    if (!same_bytes(p->query, q->query, (size_t)p->N * p->L * E * fl))
        return "query";
    if (!same_bytes(p->key, q->key, (size_t)p->N * p->S * p->kdim * fl))
        return "key";
    if (!same_bytes(p->value, q->value, (size_t)p->N * p->S * p->vdim * fl))
        return "value";
    /* the weights, with the shapes num_kv_heads and head_dim give them */
    struct att_weight_shape ws[ATT_NWEIGHTS];
    att_weight_shapes(ws, p);
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const size_t n = (size_t)ws[i].d0 * (size_t)(ws[i].ndim == 2 ? ws[i].d1 : 1);
        if (p->w_len[i] != q->w_len[i] || !same_bytes(p->w[i], q->w[i], n * fl))
            return att_weight_name((enum att_weight)i);
    }
    if (p->mask_kind != q->mask_kind || p->mask_ndim != q->mask_ndim ||
        memcmp(p->mask_shape, q->mask_shape, sizeof p->mask_shape))
        return "attn_mask kind or shape";
    size_t mask_n = 0;
    if (p->mask_kind == ATT_MASK_BOOL || p->mask_kind == ATT_MASK_FLOAT)
        mask_n = (size_t)p->mask_shape[0] * p->mask_shape[1] *
                 (p->mask_ndim == 3 ? (size_t)p->mask_shape[2] : 1);
    if (!same_bytes(p->bool_mask, q->bool_mask, mask_n) ||
        !same_bytes(p->float_mask, q->float_mask, mask_n * fl))
        return "attn_mask";
    if (!same_bytes(p->key_padding_mask, q->key_padding_mask, (size_t)p->N * p->S))
        return "key_padding_mask";
    if (!same_str(a->tokens_json, b->tokens_json) ||
        !same_str(a->key_tokens_json, b->key_tokens_json))
        return "tokens";
    return NULL;
}

const char *codec_compare_paths(const char *body, size_t len, const struct codec_limits *lim)
{
    struct codec_request fast, ref;
    struct failure ef = {0}, er = {0};
    int rf = codec_decode_request(&fast, body, len, lim, NULL, &ef);
    int rr = codec_decode_request_reference(&ref, body, len, lim, NULL, &er);
    const char *diff = NULL;
    /* A small body's refusal always comes from the reference itself (the
     * fast decoder hands it over), so it cannot differ in code or message.
     * A large body's comes from the fast decoder: the same slug, and a
     * message of its own wording. Either way the fast decoder must not
     * accept what the reference refuses, or read different numbers. */
    const int large = len > CODEC_FAST_ERRORS_FROM;
    if (rf != rr)
        diff = "one path accepts, the other refuses";
    else if (rf != 0 && !large && fast.path != CODEC_PATH_JANSSON)
        diff = "a refusal that did not come from the reference";
    else if (rf != 0 && large && fast.path != CODEC_PATH_FAST)
        diff = "a large body's refusal that did not come from the fast decoder";
    else if (rf != 0 && large && ef.code != er.code)
        diff = "a large body refused with another slug";
    else if (rf == 0 && ref.path != CODEC_PATH_JANSSON)
        diff = "the reference did not decode with jansson";
    else if (rf == 0)
        diff = codec_compare(&fast, &ref);
    codec_request_deinit(&fast);
    codec_request_deinit(&ref);
    return diff;
}
