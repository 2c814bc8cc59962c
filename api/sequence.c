/* sequence.c -- a step of a sequence, for both protocols: the rules that
 * need the sequence's state, then the step on its cache; see sequence.h. */
#include "api/sequence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/sequence_store.h"
#include "options/options.h"
#include "codec/variants.h"
#include "codec/resolve.h"
#include "codec/reduce.h"
#include "codec/status.h"
#include "core/kvcache.h"

/* What a start fixes, in a refusal's words (struct seq_fixed's v[]). */
static const char *fixed_name(enum seq_fix f)
{
    static const enum opt_id opts[SEQ_NFIX] = {
        [SEQ_FIX_H] = OPT_NUM_HEADS, [SEQ_FIX_HKV] = OPT_NUM_KV_HEADS,
        [SEQ_FIX_HEAD_DIM] = OPT_HEAD_DIM, [SEQ_FIX_ROPE_STYLE] = OPT_ROPE,
        [SEQ_FIX_ROPE_DIM] = OPT_ROPE};
    return f == SEQ_FIX_E      ? codec_dim_label(CODEC_DIM_E)
           : f == SEQ_FIX_KDIM ? codec_dim_label(CODEC_DIM_KDIM)
           : f == SEQ_FIX_VDIM ? codec_dim_label(CODEC_DIM_VDIM)
                               : opt_name(opts[f]);
}

/* What r's start fixes. */
static void fixed_of(struct seq_fixed *f, const struct codec_request *r, const char *model,
                     const void *model_id)
{
    const struct att_params *p = &r->p;
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", model);
    f->model_id = model_id;
    const int v[SEQ_NFIX] = {
        [SEQ_FIX_H] = p->H, [SEQ_FIX_HKV] = p->Hkv ? p->Hkv : p->H,
        [SEQ_FIX_HEAD_DIM] = p->head_dim ? p->head_dim : p->E / p->H,
        [SEQ_FIX_E] = p->E, [SEQ_FIX_KDIM] = p->kdim, [SEQ_FIX_VDIM] = p->vdim,
        [SEQ_FIX_ROPE_STYLE] = p->rope_style, [SEQ_FIX_ROPE_DIM] = p->rope_rotary_dim};
    memcpy(f->v, v, sizeof v);
    f->rope_theta = p->rope_theta;
    f->dtype = r->seq.dtype;
}

/* A later step against what the start fixed: 0, or -1 with err. */
static int same_fixed(const struct seq_fixed *a, const struct seq_fixed *b, int dtype_asked,
                      const char *id, struct failure *err)
{
    if (strcmp(a->model, b->model))
        return fail_with(err, ERR_INVALID_PARAMETER, "sequence '%.64s' belongs to model "
                         "'%.64s', not '%.64s': a sequence keeps the model it started with",
                         id, a->model, b->model);
    const char *what = NULL;
    for (int f = 0; f < SEQ_NFIX && !what; f++)
        if (a->v[f] != b->v[f] || (f == SEQ_FIX_ROPE_STYLE && a->rope_theta != b->rope_theta))
            what = fixed_name((enum seq_fix)f);
    if (!what && dtype_asked && a->dtype != b->dtype)
        what = opt_name(OPT_KV_CACHE_DTYPE);
    if (what)
        return fail_with(err, ERR_INVALID_PARAMETER, "%s differs from what sequence '%.64s' "
                         "started with: it is fixed at %s", what, id,
                         opt_name(OPT_SEQUENCE_START));
    return 0;
}

/* A later step that leaves out num_kv_heads, head_dim or rope has the
 * start's (as it leaves out the built-in model's weights). 1 when any. */
static int inherit(struct att_params *p, const struct seq_fixed *f)
{
    int any = 0;
    if (!p->Hkv && f->v[SEQ_FIX_HKV] != p->H)
        p->Hkv = f->v[SEQ_FIX_HKV], any = 1;
    if (!p->head_dim && f->v[SEQ_FIX_HEAD_DIM] != p->E / p->H)
        p->head_dim = f->v[SEQ_FIX_HEAD_DIM], any = 1;
    if (p->rope_style == ATT_ROPE_NONE && f->v[SEQ_FIX_ROPE_STYLE] != ATT_ROPE_NONE) {
        p->rope_style = f->v[SEQ_FIX_ROPE_STYLE], p->rope_theta = f->rope_theta;
        p->rope_rotary_dim = f->v[SEQ_FIX_ROPE_DIM], any = 1;
    }
    return any;
}

int sequence_step(struct codec_request *r, const char *model, const void *model_id,
                  const struct codec_limits *lim, const char *weights_hint, float **out,
                  float **w, struct seq **held, struct failure *err)
{
    struct codec_sequence *q = &r->seq;
    *held = NULL;
    if (q->end_only) {
        if (seq_end(q->item[0].id))
            return fail_with(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' does not exist: "
                             "nothing to end", q->item[0].id);
        return 0;
    }
    struct seq_fixed fix;
    fixed_of(&fix, r, model, model_id);
    struct seq_step st;
    if (seq_open(&st, q->item[0].id, q->item[0].start, &fix, err))
        return -1;
    int rc = -1, drop = 0;
    struct att_step *as = NULL;
    if (!q->item[0].start && st.fixed->model_id != model_id && !strcmp(st.fixed->model, model)) {
        drop = 1; /* the model was reloaded under it */
        fail_with(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' was dropped: its model "
                  "'%.64s' was reloaded; start it again with %s true", q->item[0].id, model,
                  opt_name(OPT_SEQUENCE_START));
        goto done;
    }
    if (!q->item[0].start && inherit(&r->p, st.fixed))
        fixed_of(&fix, r, model, model_id);
    if (!q->item[0].start && same_fixed(st.fixed, &fix, q->dtype_asked, q->item[0].id, err))
        goto done;
    if (!model_id && (seq_weights(&st, &r->p, err) ||
                      codec_identity_check(&r->p, "weights.", err)))
        goto done;
    const long long len = att_kv_len(st.kv), total = len + r->p.S;
    if (q->kpm_count && (long long)q->kpm_count != total) {
        fail_with(err, ERR_SHAPE_MISMATCH, "%s has %zu entries but the cache will hold %lld "
                  "rows after this step (%lld + S = %d)", opt_name(OPT_KEY_PADDING_MASK),
                  q->kpm_count, total, len, r->p.S);
        goto done;
    }
    if (total > lim->max_source_len) {
        fail_with(err, ERR_INVALID_PARAMETER, "sequence '%.64s' would hold %lld tokens, more "
                  "than max_source_len (%d): end it and start another", q->item[0].id, total,
                  lim->max_source_len);
        goto done;
    }
    struct att_error ae;
    int st_rc = att_step_check(&r->p, st.kv, &r->out_len, &r->weights_len, &ae);
    if (st_rc != ATT_OK) {
        fail_with(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto done;
    }
    const struct att_params one = r->p; /* this step's S rows */
    r->p.S = (int)total;                /* the answer's weights span the cache */
    if (codec_weights_limit(r, lim, weights_hint, err))
        goto restore;
    *out = malloc(r->out_len * sizeof **out);
    *w = r->weights_len ? malloc(r->weights_len * sizeof **w) : NULL;
    if (!*out || (r->weights_len && !*w)) {
        fail_with(err, ERR_INTERNAL, "out of memory for the output");
        goto restore;
    }
    /* the rows projected and in the cache's range: only then the budget */
    if ((st_rc = att_step_begin(&as, &one, st.kv, &ae)) != ATT_OK) {
        fail_with(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto restore;
    }
    if (seq_reserve(&st, total, err))
        goto restore;
    st_rc = att_step_finish(*out, *w, as, st.kv, &ae);
    as = NULL;
    if (st_rc != ATT_OK) {
        fail_with(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto restore;
    }
    q->item[0].length = att_kv_len(st.kv);
    rc = 0;
    goto done;
restore:
    r->p.S = one.S;
done:
    att_step_cancel(as);
    st.hold = 1;
    *held = seq_close(&st, rc == 0, drop || (rc == 0 && q->item[0].end));
    return rc;
}

void sequence_sent(void *held)
{
    seq_sent(held);
}
