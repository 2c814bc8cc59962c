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

/* What a start with p on the sequence part q fixes. */
static void fixed_of(struct seq_fixed *f, const struct att_params *p,
                     const struct codec_sequence *q, const char *model, const void *model_id)
{
    memset(f, 0, sizeof *f);
    codec_join(f->model, sizeof f->model, "", model);
    f->model_id = model_id;
    const int v[SEQ_NFIX] = {
        [SEQ_FIX_H] = p->H, [SEQ_FIX_HKV] = p->Hkv ? p->Hkv : p->H,
        [SEQ_FIX_HEAD_DIM] = p->head_dim ? p->head_dim : p->E / p->H,
        [SEQ_FIX_E] = p->E, [SEQ_FIX_KDIM] = p->kdim, [SEQ_FIX_VDIM] = p->vdim,
        [SEQ_FIX_ROPE_STYLE] = p->rope_style, [SEQ_FIX_ROPE_DIM] = p->rope_rotary_dim};
    memcpy(f->v, v, sizeof v);
    f->rope_theta = p->rope_theta;
    f->dtype = q->dtype;
    f->layer = q->layer;
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
 * start's (as it leaves out the built-in model's weights). */
static void inherit(struct att_params *p, const struct seq_fixed *f)
{
    if (!p->Hkv && f->v[SEQ_FIX_HKV] != p->H)
        p->Hkv = f->v[SEQ_FIX_HKV];
    if (!p->head_dim && f->v[SEQ_FIX_HEAD_DIM] != p->E / p->H)
        p->head_dim = f->v[SEQ_FIX_HEAD_DIM];
    if (p->rope_style == ATT_ROPE_NONE && f->v[SEQ_FIX_ROPE_STYLE] != ATT_ROPE_NONE) {
        p->rope_style = f->v[SEQ_FIX_ROPE_STYLE], p->rope_theta = f->rope_theta;
        p->rope_rotary_dim = f->v[SEQ_FIX_ROPE_DIM];
    }
}

/* A batch's item b refused: its index and id before err's words (the
 * scalar form's messages are as they were). -1. */
static int item_fail(struct failure *err, const struct codec_sequence *q, int b)
{
    if (!q->array)
        return -1;
    char m[sizeof err->msg];
    memcpy(m, err->msg, sizeof m);
    const int k = snprintf(err->msg, sizeof err->msg, "%s[%d] '%.48s': ",
                           opt_name(OPT_SEQUENCE_ID), b, q->item[b].id);
    if (k > 0 && (size_t)k < sizeof err->msg)
        snprintf(err->msg + k, sizeof err->msg - (size_t)k, "%.*s",
                 (int)(sizeof err->msg - (size_t)k - 1), m);
    return -1;
}

/* Item b of a batch as a request of its own (N = 1). */
static struct att_params item_params(const struct att_params *p, int b)
{
    struct att_params v = *p;
    v.N = 1;
    v.query = p->query + (size_t)b * p->L * p->E;
    v.key = p->key + (size_t)b * p->S * p->kdim;
    v.value = p->value + (size_t)b * p->S * p->vdim;
    return v;
}

/* One item of a request in a sequence, from its opening to its close. */
struct item {
    struct seq_step st;
    struct att_params p;     /* this step's S rows (N = 1) */
    struct att_step *as;     /* begun, not finished */
    struct att_kv_mark mark; /* the cache before the step, to roll back */
    size_t out_len, w_len;   /* the item's own answer (over st.tokens keys) */
    float *out, *w;          /* where finish writes them */
    int w_own;               /* w is the item's own (copied into the padded answer) */
    int drop, rc;
    struct att_error ae;
};

/* What a request's steps hold until their answers are sent (sequence_sent). */
struct held {
    int n;
    struct seq *s[];
};

/* Every check of item it (open) that needs its sequence's state, then its
 * rows projected and checked against the cache's dtype (it->as): 0, or -1
 * with err. */
static int item_check(struct item *it, struct codec_request *r, const char *model,
                      const void *model_id, const struct codec_limits *lim, const char *id,
                      struct failure *err)
{
    struct seq_step *st = &it->st;
    struct att_params *p = &it->p;
    if (!st->started && st->fixed->model_id != model_id && !strcmp(st->fixed->model, model)) {
        it->drop = 1; /* the model was reloaded under it */
        return fail_with(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' was dropped: its "
                         "model '%.64s' was reloaded; start it again with %s true", id, model,
                         opt_name(OPT_SEQUENCE_START));
    }
    struct seq_fixed fix;
    if (!st->started) { /* a later step, or one joining on a new layer */
        inherit(p, st->fixed);
        fixed_of(&fix, p, &r->seq, model, model_id);
        if (same_fixed(st->fixed, &fix, r->seq.dtype_asked, id, err))
            return -1;
    }
    if (!model_id && (seq_weights(st, p, err) || codec_identity_check(p, "weights.", err)))
        return -1;
    const long long len = att_kv_len(st->kv), total = len + p->S;
    if (r->seq.kpm_count && (long long)r->seq.kpm_count != total)
        return fail_with(err, ERR_SHAPE_MISMATCH, "%s has %zu entries but the cache will hold "
                         "%lld rows after this step (%lld + S = %d)",
                         opt_name(OPT_KEY_PADDING_MASK), r->seq.kpm_count, total, len, p->S);
    if (total > lim->max_source_len)
        return fail_with(err, ERR_INVALID_PARAMETER, "sequence '%.64s' would hold %lld "
                         "tokens, more than max_source_len (%d): end it and start another", id,
                         total, lim->max_source_len);
    struct att_error ae;
    int rc = att_step_check(p, st->kv, &it->out_len, &it->w_len, &ae);
    if (rc == ATT_OK)
        rc = att_step_begin(&it->as, p, st->kv, &ae);
    if (rc != ATT_OK)
        return fail_with(err, http_error_from_att(rc), "%s", ae.msg);
    st->tokens = total;
    return 0;
}

/* att_parallel's task: item i's step appended and attended. */
static void item_finish(void *arg, int i)
{
    struct item *it = (struct item *)arg + i;
    it->mark = att_kv_mark(it->st.kv);
    it->rc = att_step_finish(it->out, it->w, it->as, it->st.kv, &it->ae);
    it->as = NULL;
}

/* End-only: every item's sequence ended, all or none. */
static int end_only(struct codec_sequence *q, struct failure *err)
{
    const char **ids = calloc((size_t)q->n, sizeof(const char *));
    if (!ids)
        return fail_with(err, ERR_INTERNAL, "out of memory");
    for (int b = 0; b < q->n; b++)
        ids[b] = q->item[b].id, q->item[b].length = 0;
    int which = 0;
    const int rc = seq_end(ids, q->n, &which);
    free(ids);
    if (rc) {
        fail_with(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' does not exist: nothing to "
                  "end", q->item[which].id);
        return item_fail(err, q, which);
    }
    return 0;
}

/* An item's place in the order the batch's sequences are opened. */
struct opening {
    const char *id;
    int b; /* its index in the request */
};

static int by_id(const void *x, const void *y)
{
    return strcmp(((const struct opening *)x)->id, ((const struct opening *)y)->id);
}

/* The batch's items in the order every request opens them (by id: two
 * batches sharing sequences never wait for each other in a circle). The
 * codec has refused the same id twice (codec/sequence.c, naming both
 * items); opening one twice would wait for itself, so it is checked here
 * too, as the store's rule. 0, or -1 with err. */
static int open_order(struct opening *order, const struct codec_sequence *q,
                      struct failure *err)
{
    for (int b = 0; b < q->n; b++)
        order[b] = (struct opening){q->item[b].id, b};
    qsort(order, (size_t)q->n, sizeof *order, by_id);
    for (int k = 1; k < q->n; k++)
        if (!strcmp(order[k].id, order[k - 1].id))
            return fail_with(err, ERR_INTERNAL, "sequence '%.64s' twice in one batch",
                             order[k].id);
    return 0;
}

int sequence_step(struct codec_request *r, const char *model, const void *model_id,
                  const struct codec_limits *lim, const char *weights_hint, float **out,
                  float **w, void **held, struct failure *err)
{
    struct codec_sequence *q = &r->seq;
    const int n = q->n;
    *held = NULL;
    if (q->end_only)
        return end_only(q, err);
    if (n > 1 && (r->p.weights_top_k || r->p.weights_pool))
        return fail_with(err, ERR_INVALID_PARAMETER, "reduced weights (weights_top_k, "
                         "weights_pool) are not supported in a batch of sequences: ask for "
                         "the full weights or none");
    struct item *it = calloc((size_t)n, sizeof *it);
    struct opening *order = calloc((size_t)n, sizeof(struct opening));
    struct held *h = calloc(1, sizeof(struct held) + (size_t)n * sizeof(struct seq *));
    int rc = -1, bad = -1, opened = 0;
    if (!it || !order || !h) {
        fail_with(err, ERR_INTERNAL, "out of memory");
        goto done;
    }
    if (open_order(order, q, err))
        goto done;
    /* 1. open every item's sequence, in the order all requests use */
    struct seq_fixed fix;
    fixed_of(&fix, &r->p, q, model, model_id);
    for (; opened < n; opened++) {
        const int b = order[opened].b;
        if (seq_open(&it[b].st, q->item[b].id, q->item[b].start, q->layer, &fix, err)) {
            bad = b;
            goto done;
        }
    }
    /* 2. check each, its rows projected: nothing changed yet */
    long long smax = 0;
    for (int b = 0; b < n; b++) {
        it[b].p = item_params(&r->p, b);
        if (item_check(&it[b], r, model, model_id, lim, q->item[b].id, err)) {
            bad = b;
            goto done;
        }
        smax = it[b].st.tokens > smax ? it[b].st.tokens : smax;
    }
    /* the answer: out (B, L, E), the weights over smax keys, padded */
    const struct att_params one = r->p;
    r->p.S = (int)smax;
    r->out_len = (size_t)n * it[0].out_len;
    r->weights_len = n == 1 || smax < 1 ? it[0].w_len /* (reduced weights too) */
                     : (size_t)n * (it[0].w_len / (size_t)it[0].st.tokens) * (size_t)smax;
    if (codec_weights_limit(r, lim, weights_hint, err))
        goto restore;
    *out = malloc((r->out_len ? r->out_len : 1) * sizeof **out);
    *w = r->weights_len ? calloc(r->weights_len, sizeof **w) : NULL;
    if (!*out || (r->weights_len && !*w)) {
        fail_with(err, ERR_INTERNAL, "out of memory for the output");
        goto restore;
    }
    for (int b = 0; b < n; b++) {
        it[b].out = *out + (size_t)b * it[b].out_len;
        if (!it[b].w_len)
            continue;
        if (it[b].st.tokens == smax) /* in place */
            it[b].w = *w + (size_t)b * (r->weights_len / (size_t)n);
        else if (!(it[b].w = malloc(it[b].w_len * sizeof(float)))) {
            fail_with(err, ERR_INTERNAL, "out of memory for the output");
            goto restore;
        } else {
            it[b].w_own = 1;
        }
    }
    /* 3. the budget, for all together: only now anyone is evicted */
    struct seq_step *stv[1];
    struct seq_step **stp = n == 1 ? stv : calloc((size_t)n, sizeof(struct seq_step *));
    if (!stp) {
        fail_with(err, ERR_INTERNAL, "out of memory");
        goto restore;
    }
    for (int b = 0; b < n; b++)
        stp[b] = &it[b].st;
    int which = -1;
    const int res = seq_reserve(stp, n, &which, err);
    if (stp != stv)
        free(stp);
    if (res) {
        bad = which;
        goto restore;
    }
    /* 4. every item appended and attended, spread over the runner's threads */
    att_parallel(n, item_finish, it);
    for (int b = 0; b < n && bad < 0; b++)
        if (it[b].rc != ATT_OK) {
            fail_with(err, http_error_from_att(it[b].rc), "%s", it[b].ae.msg);
            bad = b;
        }
    if (bad >= 0) { /* all or nothing: the items that were applied go back */
        for (int b = 0; b < n; b++)
            if (it[b].rc == ATT_OK)
                att_kv_rollback(it[b].st.kv, it[b].mark);
        goto restore;
    }
    for (int b = 0; b < n; b++) {
        q->item[b].length = att_kv_len(it[b].st.kv);
        if (it[b].w_own && *w) { /* its rows into the padded (..., smax) */
            const size_t rows = it[b].w_len / (size_t)it[b].st.tokens;
            float *dst = *w + (size_t)b * (r->weights_len / (size_t)n);
            for (size_t k = 0; k < rows; k++)
                memcpy(dst + k * (size_t)smax, it[b].w + k * (size_t)it[b].st.tokens,
                       (size_t)it[b].st.tokens * sizeof(float));
        }
    }
    rc = 0;
    goto done;
restore:
    r->p.S = one.S;
done:
    if (bad >= 0)
        item_fail(err, q, bad);
    /* close every opened item: applied (rc 0) or as before */
    for (int k = 0; it && order && k < opened; k++) {
        const int b = order[k].b;
        att_step_cancel(it[b].as);
        if (it[b].w_own)
            free(it[b].w);
        it[b].st.hold = 1;
        struct seq *s = seq_close(&it[b].st, rc == 0, it[b].drop || (rc == 0 && q->item[b].end));
        if (s)
            h->s[h->n++] = s;
    }
    free(order);
    free(it);
    if (rc == 0)
        *held = h;
    else
        free(h);
    return rc;
}

void sequence_sent(void *held)
{
    struct held *h = held;
    if (!h)
        return;
    for (int i = 0; i < h->n; i++)
        seq_sent(h->s[i]);
    free(h);
}
