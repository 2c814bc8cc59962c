/* test_oip_answer.c -- v2's answer stream written as a ModelInferResponse
 * (codec/oip.h: oip_answer_encode, the outputs' bytes as tails) and as a
 * ModelStreamInferResponse, read back with protobuf-c; a stream's error. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/codec/oip_shared.h"

static const int64_t Q_SHAPE[] = {2, 4};
static const float Q[8] = {0.5f, -1.25f, 3.0f, 0.001f, 1, 2, 3, 4};

/* The v2 request of query (2, 4), two heads, id "r-7", and extra
 * parameters added by more (or NULL). */
static void decoded(struct v2_request *v, void (*more)(struct oipt_req *))
{
    struct oipt_req r;
    oipt_init(&r, "attention");
    oipt_input(&r, "query", "FP32", Q_SHAPE, 2, 0);
    oipt_raw(&r, Q, sizeof Q);
    oipt_int(oipt_param(&r, "num_heads"), 2);
    r.q.id = "r-7";
    if (more)
        more(&r);
    struct oip_infer in;
    struct failure e = {0};
    cr_assert_eq(oipt_decode(&r, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(oipt_v2(v, &in, &e), 0, "%s", e.msg);
    oip_infer_deinit(&in);
}

/* The answer's body and tails, one buffer (malloc'd), *len bytes. */
static unsigned char *joined(const struct oip_answer *a, size_t *len)
{
    size_t n = a->len;
    for (int i = 0; i < a->ntail; i++)
        n += a->tail[i].len;
    unsigned char *b = malloc(n + 1), *p = b;
    memcpy(p, a->body, a->len);
    p += a->len;
    for (int i = 0; i < a->ntail; i++, p += a->tail[i - 1].len)
        memcpy(p, a->tail[i].data, a->tail[i].len);
    *len = n;
    return b;
}

static void check_response(const Inference__ModelInferResponse *m, const float *out,
                           const float *w)
{
    cr_expect_str_eq(m->model_name, "attention");
    cr_expect_str_eq(m->model_version, "1");
    cr_expect_str_eq(m->id, "r-7");
    cr_assert_eq(m->n_outputs, 2);
    cr_assert_eq(m->n_raw_output_contents, 2);
    const Inference__ModelInferResponse__InferOutputTensor *o = m->outputs[0], *k = m->outputs[1];
    cr_expect_str_eq(o->name, "output");
    cr_expect_str_eq(o->datatype, "FP32");
    cr_assert_eq(o->n_shape, 2);
    cr_expect(o->shape[0] == 2 && o->shape[1] == 4);
    cr_expect_eq(o->n_parameters, 0, "binary_data_size is HTTP's own");
    cr_expect_str_eq(k->name, "attention_weights");
    cr_assert_eq(k->n_shape, 3);
    cr_expect(k->shape[0] == 2 && k->shape[1] == 2 && k->shape[2] == 2);
    cr_assert_eq(m->raw_output_contents[0].len, 32);
    cr_expect_eq(memcmp(m->raw_output_contents[0].data, out, 32), 0);
    cr_assert_eq(m->raw_output_contents[1].len, 32);
    cr_expect_eq(memcmp(m->raw_output_contents[1].data, w, 32), 0);
}

Test(oip, the_answer_is_a_model_infer_response_with_the_floats_as_raw_contents)
{
    struct v2_request v;
    decoded(&v, NULL);
    cr_assert_eq(v.n_outputs, 2);
    float *out = malloc(8 * sizeof *out), *w = malloc(8 * sizeof *w);
    float want_out[8], want_w[8];
    for (int i = 0; i < 8; i++)
        want_out[i] = out[i] = (float)i * 0.5f - 1, want_w[i] = w[i] = 1.0f / (float)(i + 1);
    struct stream *st = v2_stream_new(&v, "attention", out, w);
    cr_assert_not_null(st);
    struct oip_answer a;
    struct failure e = {0};
    cr_assert_eq(oip_answer_encode(&a, st, 0, &e), 0, "%s", e.msg);
    cr_expect_eq(a.ntail, 4, "a prefix and the bytes per output");
    cr_expect_eq(a.tail[1].data, st->piece[0].src, "the bytes are not copied");
    size_t len;
    unsigned char *b = joined(&a, &len);
    Inference__ModelInferResponse *m = inference__model_infer_response__unpack(NULL, len, b);
    cr_assert_not_null(m);
    check_response(m, want_out, want_w);
    inference__model_infer_response__free_unpacked(m, NULL);
    free(b);
    oip_answer_deinit(&a);

    /* the stream's: the same inside infer_response */
    cr_assert_eq(oip_answer_encode(&a, st, 1, &e), 0, "%s", e.msg);
    b = joined(&a, &len);
    Inference__ModelStreamInferResponse *s =
        inference__model_stream_infer_response__unpack(NULL, len, b);
    cr_assert_not_null(s);
    cr_expect_str_eq(s->error_message, "");
    cr_assert_not_null(s->infer_response);
    check_response(s->infer_response, want_out, want_w);
    inference__model_stream_infer_response__free_unpacked(s, NULL);
    free(b);
    oip_answer_deinit(&a);
    stream_free(st);
    v2_request_deinit(&v);
}

static void step(struct oipt_req *r)
{
    oipt_string(oipt_param(r, "sequence_id"), "s-1");
    oipt_bool(oipt_param(r, "need_weights"), 0);
}

Test(oip, a_steps_cache_length_is_a_response_parameter)
{
    struct v2_request v;
    decoded(&v, step);
    cr_assert_eq(v.c.seq.n, 1);
    v.c.seq.item[0].length = 5; /* as the step sets it */
    if (!v.c.out_len)
        v.c.out_len = 8; /* the service's, for a step */
    float *out = calloc(8, sizeof *out);
    struct stream *st = v2_stream_new(&v, "attention", out, NULL);
    cr_assert_not_null(st);
    struct oip_answer a;
    struct failure e = {0};
    cr_assert_eq(oip_answer_encode(&a, st, 0, &e), 0, "%s", e.msg);
    size_t len;
    unsigned char *b = joined(&a, &len);
    Inference__ModelInferResponse *m = inference__model_infer_response__unpack(NULL, len, b);
    cr_assert_not_null(m);
    cr_assert_eq(m->n_parameters, 1);
    cr_expect_str_eq(m->parameters[0]->key, "cache_length");
    cr_assert_eq(m->parameters[0]->value->parameter_choice_case,
                 INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM);
    cr_expect_eq(m->parameters[0]->value->int64_param, 5);
    cr_expect_eq(m->n_outputs, 1);
    cr_expect_eq(m->n_raw_output_contents, 1);
    inference__model_infer_response__free_unpacked(m, NULL);
    free(b);
    oip_answer_deinit(&a);
    stream_free(st);
    v2_request_deinit(&v);
}

Test(oip, a_stream_error_is_its_error_message)
{
    unsigned char *b;
    size_t len;
    cr_assert_eq(oip_stream_error("unknown model 'x'", &b, &len), 0);
    Inference__ModelStreamInferResponse *s =
        inference__model_stream_infer_response__unpack(NULL, len, b);
    cr_assert_not_null(s);
    cr_expect_str_eq(s->error_message, "unknown model 'x'");
    cr_expect_null(s->infer_response);
    inference__model_stream_infer_response__free_unpacked(s, NULL);
    free(b);
}
