/* service.c -- decode → compute → encode for POST /attention; see service.h. */
#include "api/service.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/models.h"
#include "model/repo.h"
#include "api/metrics.h"
#include "api/sequence_store.h"
#include "codec/options.h"
#include "codec/v2.h"
#include "codec/variants.h"

double service_now(void)
{
    return route_now();
}

struct codec_limits service_limits(const struct cfg *c)
{
    return (struct codec_limits){
        .max_tensor_elements = c->max_tensor_elements,
        .max_batch = c->max_batch,
        .max_target_len = c->max_target_len,
        .max_source_len = c->max_source_len,
        .max_embed_dim = c->max_embed_dim,
        .max_heads = c->max_heads,
        .max_weights_elements = c->max_weights_elements,
    };
}

void service_error(struct route_response *a, int code, const char *msg)
{
    route_response_free(a);
    a->status = http_error_status(code);
    a->content_type = "application/json";
    a->body = api_error_body(code, msg, &a->len);
    if (!a->body)
        a->len = 0; /* the sender answers 500 with an empty body */
}

void service_v2_error(struct route_response *a, int code, const char *msg)
{
    route_response_free(a);
    a->status = http_error_status(code);
    a->content_type = "application/json";
    a->body = api_v2_error_body(msg ? msg : http_error_message(code), &a->len);
    if (!a->body)
        a->len = 0; /* the sender answers 500 with an empty body */
}

/* ---------------------------------------------------------------------- */
/* A step of a sequence (api/sequence_store.h), for both protocols               */

static const enum att_kv_dtype dtypes[3] = {ATT_KV_F32, ATT_KV_F16, ATT_KV_BF16};

/* What r's start fixes. */
static void fixed_of(struct seq_fixed *f, const struct codec_request *r, const char *model,
                     const void *model_id)
{
    const struct att_params *p = &r->p;
    memset(f, 0, sizeof *f);
    snprintf(f->model, sizeof f->model, "%s", model);
    f->model_id = model_id;
    f->H = p->H, f->Hkv = p->Hkv ? p->Hkv : p->H;
    f->head_dim = p->head_dim ? p->head_dim : p->E / p->H;
    f->E = p->E, f->kdim = p->kdim, f->vdim = p->vdim;
    f->rope_style = p->rope_style, f->rope_rotary_dim = p->rope_rotary_dim;
    f->rope_theta = p->rope_theta;
    f->dtype = dtypes[r->seq.dtype];
}

/* A later step against what the start fixed: 0, or -1 with err. */
static int same_fixed(const struct seq_fixed *a, const struct seq_fixed *b, int dtype_asked,
                      const char *id, struct api_error *err)
{
    if (strcmp(a->model, b->model))
        return api_fail(err, ERR_INVALID_PARAMETER, "sequence '%.64s' belongs to model "
                        "'%.64s', not '%.64s': a sequence keeps the model it started with",
                        id, a->model, b->model);
    const char *what = a->H != b->H ? opt_name(OPT_NUM_HEADS)
                       : a->Hkv != b->Hkv ? opt_name(OPT_NUM_KV_HEADS)
                       : a->head_dim != b->head_dim ? opt_name(OPT_HEAD_DIM)
                       : a->E != b->E ? "embed_dim (query's last dimension)"
                       : a->kdim != b->kdim ? "kdim (key's last dimension)"
                       : a->vdim != b->vdim ? "vdim (value's last dimension)"
                       : a->rope_style != b->rope_style || a->rope_theta != b->rope_theta ||
                               a->rope_rotary_dim != b->rope_rotary_dim
                           ? opt_name(OPT_ROPE)
                       : dtype_asked && a->dtype != b->dtype ? opt_name(OPT_KV_CACHE_DTYPE)
                                                             : NULL;
    if (what)
        return api_fail(err, ERR_INVALID_PARAMETER, "%s differs from what sequence '%.64s' "
                        "started with: it is fixed at %s", what, id,
                        opt_name(OPT_SEQUENCE_START));
    return 0;
}

/* A later step that leaves out num_kv_heads, head_dim or rope has the
 * start's (as it leaves out the built-in model's weights). 1 when any. */
static int inherit(struct att_params *p, const struct seq_fixed *f)
{
    int any = 0;
    if (!p->Hkv && f->Hkv != p->H)
        p->Hkv = f->Hkv, any = 1;
    if (!p->head_dim && f->head_dim != p->E / p->H)
        p->head_dim = f->head_dim, any = 1;
    if (p->rope_style == ATT_ROPE_NONE && f->rope_style != ATT_ROPE_NONE) {
        p->rope_style = f->rope_style, p->rope_theta = f->rope_theta;
        p->rope_rotary_dim = f->rope_rotary_dim, any = 1;
    }
    return any;
}

/* Run r's step on its sequence: out and w malloc'd, r's sizes, S (the
 * whole cache, for the answer) and seq.length set. model_id: the loaded
 * model (NULL: built-in). The whole request is checked, and the step's
 * rows projected and checked against the cache's dtype, before
 * seq_reserve() may evict anyone. 0 and *held (the sequence, busy until
 * seq_sent: the answer is to be sent), or -1 with err (the sequence as
 * before, its idle timer too). */
static int step(struct codec_request *r, const char *model, const void *model_id,
                const struct codec_limits *lim, const char *weights_hint, float **out,
                float **w, struct seq **held, struct api_error *err)
{
    struct codec_sequence *q = &r->seq;
    *held = NULL;
    if (q->end_only) {
        if (seq_end(q->id))
            return api_fail(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' does not exist: "
                            "nothing to end", q->id);
        return 0;
    }
    struct seq_fixed fix;
    fixed_of(&fix, r, model, model_id);
    struct seq_step st;
    if (seq_open(&st, q->id, q->start, &fix, err))
        return -1;
    int rc = -1, drop = 0;
    struct att_step *as = NULL;
    if (!q->start && st.fixed->model_id != model_id && !strcmp(st.fixed->model, model)) {
        drop = 1; /* the model was reloaded under it */
        api_fail(err, ERR_SEQUENCE_NOT_FOUND, "sequence '%.64s' was dropped: its model "
                 "'%.64s' was reloaded; start it again with %s true", q->id, model,
                 opt_name(OPT_SEQUENCE_START));
        goto done;
    }
    if (!q->start && inherit(&r->p, st.fixed))
        fixed_of(&fix, r, model, model_id);
    if (!q->start && same_fixed(st.fixed, &fix, q->dtype_asked, q->id, err))
        goto done;
    if (!model_id && (seq_weights(&st, &r->p, err) ||
                      codec_identity_check(&r->p, "weights.", err)))
        goto done;
    const long long len = att_kv_len(st.kv), total = len + r->p.S;
    if (q->kpm_count && (long long)q->kpm_count != total) {
        api_fail(err, ERR_SHAPE_MISMATCH, "%s has %zu entries but the cache will hold %lld "
                 "rows after this step (%lld + S = %d)", opt_name(OPT_KEY_PADDING_MASK),
                 q->kpm_count, total, len, r->p.S);
        goto done;
    }
    if (total > lim->max_source_len) {
        api_fail(err, ERR_INVALID_PARAMETER, "sequence '%.64s' would hold %lld tokens, more "
                 "than max_source_len (%d): end it and start another", q->id, total,
                 lim->max_source_len);
        goto done;
    }
    struct att_error ae;
    int st_rc = att_step_check(&r->p, st.kv, &r->out_len, &r->weights_len, &ae);
    if (st_rc != ATT_OK) {
        api_fail(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto done;
    }
    const struct att_params one = r->p; /* this step's S rows */
    r->p.S = (int)total;                /* the answer's weights span the cache */
    if (codec_weights_limit(r, lim, weights_hint, err))
        goto restore;
    *out = malloc(r->out_len * sizeof **out);
    *w = r->weights_len ? malloc(r->weights_len * sizeof **w) : NULL;
    if (!*out || (r->weights_len && !*w)) {
        api_fail(err, ERR_INTERNAL, "out of memory for the output");
        goto restore;
    }
    /* the rows projected and in the cache's range: only then the budget */
    if ((st_rc = att_step_begin(&as, &one, st.kv, &ae)) != ATT_OK) {
        api_fail(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto restore;
    }
    if (seq_reserve(&st, total, err))
        goto restore;
    st_rc = att_step_finish(*out, *w, as, st.kv, &ae);
    as = NULL;
    if (st_rc != ATT_OK) {
        api_fail(err, http_error_from_att(st_rc), "%s", ae.msg);
        goto restore;
    }
    q->length = att_kv_len(st.kv);
    rc = 0;
    goto done;
restore:
    r->p.S = one.S;
done:
    att_step_cancel(as);
    st.hold = 1;
    *held = seq_close(&st, rc == 0, drop || (rc == 0 && q->end));
    return rc;
}

/* A held sequence's answer sent (route_response.done). */
static void sequence_sent(void *held)
{
    seq_sent(held);
}

/* A refusal of a step (a 503's Retry-After is the transport's). */
static void step_error(struct route_response *a, const struct api_error *e, int v2)
{
    (v2 ? service_v2_error : service_error)(a, e->code, e->msg);
}

/* A streamed answer's reader (codec/stream.h), for both protocols. */
static size_t answer_read(void *cls, size_t pos, char *dst, size_t max)
{
    return stream_read(cls, pos, dst, max);
}

static void answer_free(void *cls)
{
    stream_free(cls);
}

/* Encode r's results into a: a buffer, or a stream for base64 answers
 * (which takes out and w). */
static int encode(struct route_response *a, const struct codec_request *r, float **out,
                  float **w)
{
    a->status = 200;
    if (r->base64_out) {
        struct stream *st = codec_stream_new(r, *out, *w);
        *out = *w = NULL;
        if (!st)
            return -1;
        a->reader = st, a->read = answer_read, a->free_reader = answer_free;
        a->len = stream_size(st);
        return 0;
    }
    a->body = codec_encode_response(r, *out, *w, &a->len);
    return a->body ? 0 : -1;
}

/* Seconds since *mark, and move the mark to now. */
static double lap(double *mark)
{
    const double now = service_now(), d = now - *mark;
    *mark = now;
    return d;
}

/* Server-Timing, the stage metrics and the model's statistics. */
static void finish(struct route_response *a, const double d[STAGE_COUNT], int ok,
                   const char *model, int batch)
{
    char timing[200];
    size_t o = 0;
    for (int s = 0; s < STAGE_COUNT && o < sizeof timing; s++)
        o += (size_t)snprintf(timing + o, sizeof timing - o, "%s%s;dur=%.3f",
                              s ? ", " : "", metrics_stage_name((enum metrics_stage)s),
                              d[s] * 1e3);
    route_header_set(a, "Server-Timing", timing);
    if (ok)
        metrics_record_stages(d);
    if (model) {
        const double st[REPO_STAGES] = {d[STAGE_QUEUE], d[STAGE_DECODE], d[STAGE_COMPUTE],
                                        d[STAGE_ENCODE]};
        double total = 0;
        for (int s = STAGE_QUEUE; s < STAGE_COUNT; s++)
            total += d[s];
        repo_record(model, ok, total, st, batch);
    }
}

void service_attention(const struct codec_limits *lim, const char *body, size_t len,
                       const struct service_times *t, void (*release)(void *), void *cls,
                       struct route_response *a)
{
    memset(a, 0, sizeof *a);
    double d[STAGE_COUNT] = {0}, mark = t->body_done; /* a stage not run took 0 s */
    d[STAGE_RECEIVE] = t->body_done - t->first_byte;
    d[STAGE_QUEUE] = lap(&mark);
    struct codec_request r;
    struct api_error e;
    float *out = NULL, *w = NULL;
    int ok = 0;

    /* 1. decode: validates everything, att_check() included, once */
    const int rc = codec_decode_request_seq(&r, body, len, lim, &models_codec, t->sequence_id,
                                            &e);
    if (release)
        release(cls); /* the request holds its own copies now */
    d[STAGE_DECODE] = lap(&mark);
    if (rc) {
        service_error(a, e.code, e.msg);
        goto done;
    }
    /* 2. compute, into buffers of the sizes the codec carries; a step of
     *    a sequence on its cache */
    if (r.seq.id[0]) {
        const struct model *m = r.model_ref ? repo_model(r.model_ref) : NULL;
        struct seq *held;
        const int src = step(&r, r.model_ref ? repo_ref_name(r.model_ref) : MODEL_BUILTIN, m,
                             lim, CODEC_WEIGHTS_HINT, &out, &w, &held, &e);
        d[STAGE_COMPUTE] = lap(&mark);
        if (src) {
            step_error(a, &e, 0);
            goto done;
        }
        a->done = sequence_sent, a->done_cls = held; /* the idle timer from the answer's end */
        if (r.seq.end_only) {
            char body_[64];
            const int n = snprintf(body_, sizeof body_, "{\"cache_length\":0}");
            a->status = 200;
            a->body = strdup(body_);
            a->len = a->body ? (size_t)n : 0;
            ok = 1;
            goto done;
        }
        goto encode;
    }
    out = malloc(r.out_len * sizeof *out);
    w = r.weights_len ? malloc(r.weights_len * sizeof *w) : NULL;
    if (!out || (r.weights_len && !w)) {
        service_error(a, ERR_INTERNAL, "out of memory for the output");
        goto done;
    }
    struct att_error ae;
    const int st = att_forward_checked(out, w, &r.p, &ae);
    d[STAGE_COMPUTE] = lap(&mark);
    if (st != ATT_OK) {
        service_error(a, http_error_from_att(ae.code), ae.msg);
        goto done;
    }
encode:;
    /* 3. encode */
    const int enc = encode(a, &r, &out, &w);
    d[STAGE_ENCODE] = lap(&mark);
    if (enc) {
        service_error(a, ERR_INTERNAL, "out of memory encoding the response");
        goto done;
    }
    ok = 1;
done:
    finish(a, d, ok, r.model_ref ? repo_ref_name(r.model_ref) : NULL, r.p.N);
    free(out);
    free(w);
    codec_request_deinit(&r);
}

void service_infer(const struct codec_limits *lim, const char *model, const char *version,
                   const char *body, size_t len, long long header_len,
                   const struct service_times *t, void (*release)(void *), void *cls,
                   struct route_response *a)
{
    memset(a, 0, sizeof *a);
    double d[STAGE_COUNT] = {0}, mark = t->body_done;
    d[STAGE_RECEIVE] = t->body_done - t->first_byte;
    d[STAGE_QUEUE] = lap(&mark);
    struct v2_request r;
    memset(&r, 0, sizeof r);
    struct api_error e;
    float *out = NULL, *w = NULL;
    int ok = 0, counted = 0;

    /* 0. the model, held until the answer is made */
    struct repo_ref *ref = NULL;
    char why[sizeof e.msg];
    int code;
    if (models_acquire(&ref, model, version, &code, why, sizeof why)) {
        if (release)
            release(cls);
        service_v2_error(a, code, why);
        goto done;
    }
    counted = 1;
    /* 1. decode */
    const int rc = v2_decode_infer_seq(&r, body, len, header_len, repo_model(ref), lim,
                                       t->sequence_id, &e);
    if (release)
        release(cls);
    d[STAGE_DECODE] = lap(&mark);
    if (rc) {
        service_v2_error(a, e.code, e.msg);
        goto done;
    }
    /* 2. compute (a step of a sequence on its cache) */
    if (r.c.seq.id[0]) {
        struct seq *held;
        const int src = step(&r.c, repo_ref_name(ref), repo_model(ref), lim,
                             CODEC_V2_WEIGHTS_HINT, &out, &w, &held, &e);
        d[STAGE_COMPUTE] = lap(&mark);
        if (src) {
            step_error(a, &e, 1);
            goto done;
        }
        a->done = sequence_sent, a->done_cls = held; /* the idle timer from the answer's end */
        if (r.c.seq.end_only)
            r.n_outputs = 0; /* the answer: no outputs, cache_length 0 */
    } else {
        out = malloc(r.c.out_len * sizeof *out);
        w = r.c.weights_len ? malloc(r.c.weights_len * sizeof *w) : NULL;
        if (!out || (r.c.weights_len && !w)) {
            service_v2_error(a, ERR_INTERNAL, "out of memory for the output");
            goto done;
        }
        struct att_error ae;
        const int st = att_forward_checked(out, w, &r.c.p, &ae);
        d[STAGE_COMPUTE] = lap(&mark);
        if (st != ATT_OK) {
            service_v2_error(a, http_error_from_att(ae.code), ae.msg);
            goto done;
        }
    }
    /* 3. encode: the JSON now, binary data as it is sent */
    struct stream *vs = v2_stream_new(&r, repo_ref_name(ref), out, w);
    out = w = NULL;
    d[STAGE_ENCODE] = lap(&mark);
    if (!vs) {
        service_v2_error(a, ERR_INTERNAL, "out of memory encoding the response");
        goto done;
    }
    a->status = 200;
    a->reader = vs, a->read = answer_read, a->free_reader = answer_free;
    a->len = stream_size(vs);
    if (stream_pieces(vs) > 0) { /* binary outputs */
        a->content_type = "application/octet-stream";
        char hl[24];
        snprintf(hl, sizeof hl, "%zu", stream_text_len(vs));
        route_header_set(a, "Inference-Header-Content-Length", hl);
    }
    ok = 1;
done:
    finish(a, d, ok, counted ? repo_ref_name(ref) : NULL, r.c.p.N);
    free(out);
    free(w);
    v2_request_deinit(&r);
    repo_release(ref);
}
