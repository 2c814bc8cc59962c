/* service.c -- decode → compute → encode for POST /attention and v2 infer
 * (a step of a sequence among them); see service.h. */
#include "api/service.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/models.h"
#include "model/repo.h"
#include "api/metrics.h"
#include "api/sequence.h"
#include "options/options.h"
#include "codec/v2.h"
#include "codec/variants.h"
#include "codec/request.h"
#include "codec/response.h"
#include "codec/reduce.h"
#include "codec/status.h"

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
        .max_layers = c->max_layers,
        .max_weights_elements = c->max_weights_elements,
    };
}

void service_error(struct route_response *a, int code, const char *msg)
{
    route_response_free(a);
    a->status = http_error_status(code);
    a->content_type = "application/json";
    a->body = codec_error_body(code, msg, &a->len);
    if (!a->body)
        a->len = 0; /* the sender answers 500 with an empty body */
}

void service_v2_error(struct route_response *a, int code, const char *msg)
{
    route_response_free(a);
    a->status = http_error_status(code);
    a->content_type = "application/json";
    a->body = v2_error_body(msg ? msg : http_error_message(code), &a->len);
    if (!a->body)
        a->len = 0; /* the sender answers 500 with an empty body */
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

/* 2. compute r into out and w (malloc'd, r's sizes): a step of its
 * sequence on the cache (api/sequence.h: *held, to pass to
 * sequence_sent() once the answer is sent), or the stateless request.
 * model, model_id: the model's name and the loaded model, NULL for the
 * built-in one. 0, or -1 with e. */
static int compute(struct codec_request *r, const char *model, const void *model_id,
                   const struct codec_limits *lim, const char *weights_hint, float **out,
                   float **w, void **held, struct failure *e)
{
    *held = NULL;
    if (r->seq.n)
        return sequence_step(r, model, model_id, lim, weights_hint, out, w, held, e);
    *out = malloc(r->out_len * sizeof **out);
    *w = r->weights_len ? malloc(r->weights_len * sizeof **w) : NULL;
    if (!*out || (r->weights_len && !*w))
        return fail_with(e, ERR_INTERNAL, "out of memory for the output");
    struct att_error ae;
    if (att_forward_checked(*out, *w, &r->p, &ae) != ATT_OK)
        return fail_with(e, http_error_from_att(ae.code), "%s", ae.msg);
    return 0;
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

/* "%.3f" of x into dst (at least 32 bytes), its length; without snprintf
 * when x is a plain duration not within 1e-6 of a tie. */
static size_t put_ms(char *dst, double x)
{
    const double y = x * 1e3, f = !signbit(y) && y < 1e12 ? floor(y) : -1;
    if (f < 0 || fabs(y - f - 0.5) < 1e-3)
        return (size_t)snprintf(dst, 32, "%.3f", x);
    long long n = (long long)f + (y - f > 0.5), i = n / 1000;
    char t[24];
    size_t k = 0;
    do
        t[k++] = (char)('0' + i % 10);
    while ((i /= 10) > 0);
    for (size_t j = 0; j < k; j++)
        dst[j] = t[k - 1 - j];
    n %= 1000;
    dst[k] = '.', dst[k + 1] = (char)('0' + n / 100), dst[k + 2] = (char)('0' + n / 10 % 10);
    dst[k + 3] = (char)('0' + n % 10), dst[k + 4] = '\0';
    return k + 4;
}

/* Server-Timing of the stages d. */
static void timing(struct route_response *a, const double d[STAGE_COUNT])
{
    char text[200];
    size_t o = 0;
    for (int s = 0; s < STAGE_COUNT && o < sizeof text; s++) {
        char piece[128]; /* as snprintf "%s%s;dur=%.3f" would write it, o counting it all */
        size_t k = codec_join(piece, 64, s ? ", " : "", metrics_stage_name((enum metrics_stage)s));
        k += codec_join(piece + k, 8, ";dur=", "");
        k += put_ms(piece + k, d[s] * 1e3);
        codec_join(text + o, sizeof text - o, piece, "");
        o += k;
    }
    route_header_set(a, "Server-Timing", text);
}

/* The stage metrics and the model's statistics. */
static void record(const double d[STAGE_COUNT], int ok, const char *model, int batch)
{
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
    struct failure e;
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
    /* 2. compute, into buffers of the sizes the codec carries */
    void *held;
    const int crc = compute(&r, r.model_ref ? repo_ref_name(r.model_ref) : MODEL_BUILTIN,
                            r.model_ref ? repo_model(r.model_ref) : NULL, lim,
                            CODEC_WEIGHTS_HINT, &out, &w, &held, &e);
    d[STAGE_COMPUTE] = lap(&mark);
    if (crc) {
        service_error(a, e.code, e.msg);
        goto done;
    }
    if (r.seq.n) /* the idle timer from the answer's end */
        a->done = sequence_sent, a->done_cls = held;
    /* 3. encode */
    const int enc = encode(a, &r, &out, &w);
    d[STAGE_ENCODE] = lap(&mark);
    if (enc) {
        service_error(a, ERR_INTERNAL, "out of memory encoding the response");
        goto done;
    }
    ok = 1;
done:
    timing(a, d);
    record(d, ok, r.model_ref ? repo_ref_name(r.model_ref) : NULL, r.p.N);
    free(out);
    free(w);
    codec_request_deinit(&r);
}

/* Whether t's call has ended or passed its deadline: e filled. */
static int late(const struct service_times *t, struct failure *e)
{
    if ((t->cancelled && *t->cancelled) || (t->deadline > 0 && service_now() > t->deadline))
        return fail_with(e, ERR_REQUEST_TIMEOUT, "the call's deadline passed");
    return 0;
}

int service_infer_run(const struct codec_limits *lim, const char *model, const char *version,
                      const char *body, size_t len, long long header_len,
                      const struct service_times *t, void (*release)(void *), void *cls,
                      struct service_result *res)
{
    memset(res, 0, sizeof *res);
    double *d = res->stages, mark = t->body_done; /* a stage not run took 0 s */
    d[STAGE_RECEIVE] = t->body_done - t->first_byte;
    d[STAGE_QUEUE] = lap(&mark);
    struct v2_request r;
    memset(&r, 0, sizeof r);
    struct failure *e = &res->e;
    float *out = NULL, *w = NULL;
    void *held = NULL;
    int ok = 0, counted = 0;

    /* 0. the model, held until the answer is made */
    struct repo_ref *ref = NULL;
    if (models_acquire(&ref, model, version, &e->code, e->msg, sizeof e->msg)) {
        if (release)
            release(cls);
        goto done;
    }
    counted = 1;
    /* 1. decode */
    const int rc = late(t, e) ? -1
                              : v2_decode_infer_seq(&r, body, len, header_len, repo_model(ref),
                                                    lim, t->sequence_id, e);
    if (release)
        release(cls);
    d[STAGE_DECODE] = lap(&mark);
    if (rc || late(t, e))
        goto done;
    /* 2. compute, stopped by the call's end (NULL over HTTP) */
    att_cancel_set(t->cancelled);
    const int crc = compute(&r.c, repo_ref_name(ref), repo_model(ref), lim,
                            CODEC_V2_WEIGHTS_HINT, &out, &w, &held, e);
    att_cancel_set(NULL);
    d[STAGE_COMPUTE] = lap(&mark);
    if (crc)
        goto done;
    /* 3. encode: the JSON now, binary data as it is sent */
    res->st = v2_stream_new(&r, repo_ref_name(ref), out, w);
    out = w = NULL;
    d[STAGE_ENCODE] = lap(&mark);
    if (!res->st) {
        fail_with(e, ERR_INTERNAL, "out of memory encoding the response");
        if (r.c.seq.n)
            sequence_sent(held);
        goto done;
    }
    if (r.c.seq.n) /* the idle timer from the answer's end */
        res->done = sequence_sent, res->done_cls = held;
    ok = 1;
done:
    record(d, ok, counted ? repo_ref_name(ref) : NULL, r.c.p.N);
    free(out);
    free(w);
    v2_request_deinit(&r);
    repo_release(ref);
    return ok ? 0 : -1;
}

void service_infer(const struct codec_limits *lim, const char *model, const char *version,
                   const char *body, size_t len, long long header_len,
                   const struct service_times *t, void (*release)(void *), void *cls,
                   struct route_response *a)
{
    memset(a, 0, sizeof *a);
    struct service_result res;
    if (service_infer_run(lim, model, version, body, len, header_len, t, release, cls, &res)) {
        service_v2_error(a, res.e.code, res.e.msg);
        timing(a, res.stages);
        return;
    }
    struct stream *vs = res.st;
    a->status = 200;
    a->reader = vs, a->read = answer_read, a->free_reader = answer_free;
    a->len = stream_size(vs);
    a->done = res.done, a->done_cls = res.done_cls;
    if (stream_pieces(vs) > 0) { /* binary outputs */
        a->content_type = "application/octet-stream";
        char hl[24];
        snprintf(hl, sizeof hl, "%zu", stream_text_len(vs));
        route_header_set(a, "Inference-Header-Content-Length", hl);
    }
    timing(a, res.stages);
}
