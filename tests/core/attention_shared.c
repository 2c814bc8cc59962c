/* attention_shared.c -- see attention_shared.h. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/core/attention_shared.h"

void attt_rinputs_free(struct rinputs *in)
{
    free(in->q), free(in->k), free(in->v), free(in->w_in), free(in->wq);
    free(in->wk), free(in->wv), free(in->b_in), free(in->wo), free(in->bo);
    free(in->fmask), free(in->bmask), free(in->pad);
    memset(in, 0, sizeof *in);
}

/* Fill p and in with random data for case c, seeded by seed. */
void attt_make_case(struct att_params *p, struct rinputs *in, const struct rcase *c,
               unsigned long long seed)
{
    unsigned long long st = seed * 2654435761ULL + 88172645463325252ULL;
    memset(in, 0, sizeof *in);
    att_params_init(p);
    p->N = c->N, p->L = c->L, p->S = c->S, p->E = c->E;
    p->kdim = c->kdim, p->vdim = c->vdim, p->H = c->H;
    const size_t E = (size_t)c->E;
    p->query = in->q = check_randv((size_t)c->N * c->L * E, 1.0f, &st);
    p->key = in->k = check_randv((size_t)c->N * c->S * c->kdim, 1.0f, &st);
    p->value = in->v = check_randv((size_t)c->N * c->S * c->vdim, 1.0f, &st);
    if (c->self)
        p->key = p->value = p->query;
    if (c->proj == PROJ_PACKED) {
        p->w[ATT_W_IN] = in->w_in = check_randv(3 * E * E, 1.0f / sqrtf((float)E), &st);
    } else if (c->proj == PROJ_SEPARATE) {
        p->w[ATT_W_Q] = in->wq = check_randv(E * E, 1.0f / sqrtf((float)E), &st);
        p->w[ATT_W_K] = in->wk = check_randv(E * c->kdim, 1.0f / sqrtf((float)c->kdim), &st);
        p->w[ATT_W_V] = in->wv = check_randv(E * c->vdim, 1.0f / sqrtf((float)c->vdim), &st);
    }
    if (c->proj != PROJ_ABSENT)
        p->w[ATT_W_OUT] = in->wo = check_randv(E * E, 1.0f / sqrtf((float)E), &st);
    if (c->bias) {
        p->w[ATT_W_IN_BIAS] = in->b_in = check_randv(3 * E, 0.1f, &st);
        p->w[ATT_W_OUT_BIAS] = in->bo = check_randv(E, 0.1f, &st);
    }
    golden_weight_lens(p);
    const size_t plane = (size_t)c->L * c->S;
    const size_t planes = (c->mask == M_BOOL3 || c->mask == M_FLOAT3) ? (size_t)c->N * c->H : 1;
    p->mask_ndim = planes > 1 ? 3 : 2;
    p->mask_shape[0] = planes > 1 ? c->N * c->H : c->L;
    p->mask_shape[1] = planes > 1 ? c->L : c->S;
    p->mask_shape[2] = planes > 1 ? c->S : 0;
    switch (c->mask) {
    case M_CAUSAL:
        p->mask_kind = ATT_MASK_CAUSAL;
        break;
    case M_BOOL2:
    case M_BOOL3:
        p->mask_kind = ATT_MASK_BOOL;
        p->bool_mask = in->bmask = check_randb(planes * plane, 0.3, &st);
        if (c->full_rows) /* row 0 of the last plane blocked everywhere */
            memset(in->bmask + (planes - 1) * plane, 1, (size_t)c->S);
        break;
    case M_FLOAT2:
    case M_FLOAT3:
        p->mask_kind = ATT_MASK_FLOAT;
        p->float_mask = in->fmask = check_randv(planes * plane, 2.0f, &st);
        if (c->full_rows)
            for (int j = 0; j < c->S; j++)
                in->fmask[j] = -INFINITY;
        break;
    }
    if (c->padding) {
        p->key_padding_mask = in->pad = check_randb((size_t)c->N * c->S, 0.25, &st);
        if (c->full_rows) /* every key of the last batch item ignored */
            memset(in->pad + (size_t)(c->N - 1) * c->S, 1, (size_t)c->S);
    }
    p->weights_mode = c->wmode;
    if (c->scale)
        p->has_scale = 1, p->scale = 0.37f;
    p->positional_encoding = c->pe;
}
