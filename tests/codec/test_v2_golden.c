/* test_v2_golden.c -- the Open Inference Protocol infer codec
 * (codec/v2.h) on every golden case, through the built-in model and a
 * hand-built server-held model. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "api/service.h"
#include "codec/v2.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/support/golden_v2.h"
#include "tests/support/limits.h"
#include "tests/codec/v2_codec_shared.h"

/* ---------------------------------------------------------------------- */
/* Golden cases                                                            */

/* A golden request (a POST /attention body) as a v2 infer request: each
 * tensor an input (the weights too, unless a model holds them), the
 * options as parameters; binary: the data of query, value, the padding
 * mask and the weights binary, key's and attn_mask's JSON. Returns the
 * body; *hl is -1 without binary data. */
static char *golden_to_v2(json_t *req, int binary, int with_weights, size_t *len, long long *hl)
{
    json_t *v2 = golden_v2(req, with_weights ? 0 : GOLDEN_V2_HELD);
    json_object_set_new(v2, "id", json_string("golden"));
    char *body = golden_v2_body(v2, binary ? GOLDEN_V2_MIXED : GOLDEN_V2_JSON, len, hl);
    json_decref(v2);
    return body;
}

/* Decode body for m, compute, compare with g's expected values, and check
 * the answer carries exactly the computed floats. */
static int run_golden(const struct golden *g, const char *body, size_t len, long long hl,
                      const struct model *m, int binary_out)
{
    const struct codec_limits lim = test_limits();
    struct v2_request r;
    struct failure e;
    cr_assert_eq(v2_decode_infer(&r, body, len, hl, m, &lim, &e), 0, "%s: %s", g->name, e.msg);
    r.binary[V2_OUT_OUTPUT] = r.binary[V2_OUT_WEIGHTS] = binary_out;
    cr_assert_eq(r.c.out_len, g->expected_out_len, "%s", g->name);
    cr_assert_eq(r.c.weights_len, g->expected_weights_len, "%s", g->name);
    float *out = malloc(r.c.out_len * 4), *w = r.c.weights_len ? malloc(r.c.weights_len * 4)
                                                                 : NULL;
    struct att_error ae;
    cr_assert_eq(att_forward_checked(out, w, &r.c.p, &ae), ATT_OK, "%s: %s", g->name, ae.msg);
    int ok = check_tensor_torch(g->name, out, g->expected_out, g->expected_out32, r.c.out_len,
                                1e-4, 1e-4);
    if (w)
        ok &= check_tensor_torch(g->name, w, g->expected_weights, g->expected_weights32,
                                 r.c.weights_len, 1e-5, 0.0);
    struct stream *st = v2_stream_new(&r, "attention", out, w);
    cr_assert_not_null(st);
    size_t at = 0;
    v2ct_check_answer_floats(st, "output", out, r.c.out_len, binary_out, &at);
    if (w)
        v2ct_check_answer_floats(st, "attention_weights", w, r.c.weights_len, binary_out, &at);
    cr_assert_eq(stream_text_len(st) + at, stream_size(st));
    stream_free(st);
    v2_request_deinit(&r);
    return ok;
}

Test(v2_codec, golden_cases_through_the_built_in_model, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    int failed = 0, runs = 0;
    cr_assert(n > 0 && n == golden_count(), "listed %d of the %d golden cases in tests/golden",
              n, golden_count());
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        json_t *c = json_load_file(paths[i], 0, NULL);
        for (int binary = 0; binary < 2; binary++) {
            size_t len;
            long long hl;
            char *body = golden_to_v2(json_object_get(c, "request"), binary, 1, &len, &hl);
            failed += !run_golden(&g, body, len, hl, NULL, binary);
            runs++;
            free(body);
        }
        json_decref(c);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d of %d golden runs out of tolerance", failed, runs);
}

Test(v2_codec, golden_cases_through_a_server_held_model, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    int failed = 0, runs = 0;
    for (int i = 0; i < n; i++) {
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        /* the case's weights and sizes, held by a model */
        struct model m;
        v2ct_test_model(&m, NULL);
        m.E = g.p.E, m.kdim = g.p.kdim, m.vdim = g.p.vdim, m.H = g.p.H;
        for (int w = 0; w < ATT_NWEIGHTS; w++)
            m.w[w] = (float *)g.p.w[w], m.w_len[w] = g.p.w_len[w];
        json_t *c = json_load_file(paths[i], 0, NULL);
        size_t len;
        long long hl;
        char *body = golden_to_v2(json_object_get(c, "request"), i % 2, 0, &len, &hl);
        failed += !run_golden(&g, body, len, hl, &m, i % 2);
        runs++;
        free(body);
        json_decref(c);
        v2ct_test_model_deinit(&m);
        golden_deinit(&g);
        free(paths[i]);
    }
    cr_assert(runs > 0 && runs == golden_count(), "ran %d of the %d golden cases", runs,
              golden_count());
    cr_assert_eq(failed, 0, "%d of %d golden runs out of tolerance", failed, runs);
}
