/* test_sequence_models.c -- sequences of a served model over HTTP: its
 * steps over v2 and POST /attention equal the stateless answer, the
 * built-in model over v2, and a model's sequences go with it. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

#define REPO "tests/models/repo"
#include "tests/server/sequence_shared.h"

/* A server with the test models, ready. */
static void start_with_repo(struct server *s)
{
    const char *const flags[] = {"--model-repository", REPO, NULL};
    server_start_ready(s, flags);
}

/* ---------------------------------------------------------------------- */
/* A served model over v2                                                  */

#define ME 32 /* llama_l1: E 32, 4 heads, grouped KV heads, RoPE */

/* The v2 output of a body (taken) into out. */
static size_t v2_output(int port, json_t *body, float *out, size_t max, long long *cache_len)
{
    struct http_reply a = seqt_send_json(port, "/v2/models/llama_l1/infer", body, NULL);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    size_t n;
    float *got = output_of(&a, "output", &n, NULL);
    cr_assert(got && n <= max);
    memcpy(out, got, n * sizeof *got);
    free(got);
    if (cache_len) {
        json_t *h = answer_head(&a);
        json_t *cl = json_object_get(json_object_get(h, "parameters"), "cache_length");
        *cache_len = json_is_integer(cl) ? json_integer_value(cl) : -1;
        json_decref(h);
    }
    free(a.body);
    return n;
}

Test(sequence_models, served_model_steps_over_v2_equal_the_stateless_answer)
{
    struct server s;
    start_with_repo(&s);
    static float k[64 * ME], v[64 * ME];
    float q[8 * ME], out[8 * ME], want[8 * ME];
    int len = 0;
    const int S[] = {6, 1, 1, 4, 1}, L[] = {6, 1, 1, 2, 1};
    for (int i = 0; i < 5; i++) {
        seqt_fill(q, (size_t)L[i] * ME);
        seqt_fill(k + len * ME, (size_t)S[i] * ME);
        seqt_fill(v + len * ME, (size_t)S[i] * ME);
        json_t *b = json_pack("{s:[o, o, o], s:{s:s, s:b}}", "inputs",
                              seqt_input("query", q, L[i], ME), seqt_input("key", k + len * ME, S[i], ME),
                              seqt_input("value", v + len * ME, S[i], ME), "parameters",
                              "sequence_id", "llama-seq", "sequence_start", i == 0);
        long long cl;
        const size_t n = v2_output(s.port, b, out, sizeof out / sizeof *out, &cl);
        const int total = len + S[i];
        cr_assert_eq(cl, total);
        json_t *st = json_pack("{s:[o, o, o], s:{s:b, s:s, s:i}}", "inputs",
                               seqt_input("query", q, L[i], ME), seqt_input("key", k, total, ME),
                               seqt_input("value", v, total, ME), "parameters", "is_causal", 1,
                               "causal_alignment", "lower_right", "query_position_offset",
                               total - L[i]);
        cr_assert_eq(v2_output(s.port, st, want, sizeof want / sizeof *want, NULL), n);
        seqt_expect_close(out, want, n, "llama_l1 output");
        len = total;
    }
    /* a step to another model: 400 */
    seqt_fill(q, 16); /* mha_f32: E 16 */
    json_t *b = json_pack("{s:[o], s:{s:s}}", "inputs", seqt_input("query", q, 1, 16), "parameters",
                          "sequence_id", "llama-seq");
    struct http_reply a = seqt_send_json(s.port, "/v2/models/mha_f32/infer", b, NULL);
    expect_v2_error(&a, 400, "belongs to model 'llama_l1'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* A model's sequences go with it                                          */

#define TOKEN "test-admin-token-0123456789"

Test(sequence_models, unloading_or_reloading_a_model_drops_its_sequences)
{
    struct server s;
    const char *const flags[] = {"--model-repository", REPO, "--admin-token", TOKEN, NULL};
    server_start_ready(&s, flags);
    const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};
    const char *actions[] = {"load", "unload"};
    for (int i = 0; i < 2; i++) {
        float q[16]; /* mha_f32: E 16 */
        seqt_fill(q, 16);
        json_t *b = json_pack("{s:o, s:s, s:s, s:b}", "query", seqt_mat(q, 1, 16), "model",
                              "mha_f32", "sequence_id", "model-bound", "sequence_start", 1);
        struct http_reply a = seqt_attention(s.port, b);
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
        cr_assert_eq(server_metric(s.port, "attention_model_sequences_active{model=\"mha_f32\"}"), 1);
        char path[96];
        snprintf(path, sizeof path, "/v2/repository/models/mha_f32/%s", actions[i]);
        a = request_with(s.port, "POST", path, "{}", 2, NULL, 0, auth);
        cr_assert_eq(a.status, 200, "%s %s", actions[i], a.body);
        free(a.body);
        cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0, "%s kept the sequence",
                     actions[i]);
        if (i == 1) { /* back, for the step to find the model */
            a = request_with(s.port, "POST", "/v2/repository/models/mha_f32/load", "{}", 2,
                             NULL, 0, auth);
            cr_assert_eq(a.status, 200, "%s", a.body);
            free(a.body);
        }
        b = json_pack("{s:o, s:s, s:s}", "query", seqt_mat(q, 1, 16), "model", "mha_f32",
                      "sequence_id", "model-bound");
        a = seqt_attention(s.port, b);
        expect_error(&a, 400, "sequence_not_found", "'model-bound'");
        free(a.body);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* The other two pairings: a served model over POST /attention, the
 * built-in model over v2 (its weights as inputs at the start only)        */

Test(sequence_models, served_model_over_attention_and_builtin_over_v2)
{
    struct server s;
    start_with_repo(&s);
    static float k[32 * ME], v[32 * ME];
    float q[4 * ME], out[4 * ME], want[4 * ME];
    int len = 0;
    const int S[] = {3, 1, 2}, L[] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        seqt_fill(q, (size_t)L[i] * ME);
        seqt_fill(k + len * ME, (size_t)S[i] * ME);
        seqt_fill(v + len * ME, (size_t)S[i] * ME);
        json_t *b = json_pack("{s:o, s:o, s:o, s:s, s:s, s:b, s:b}", "query",
                              seqt_mat(q, L[i], ME), "key", seqt_mat(k + len * ME, S[i], ME), "value",
                              seqt_mat(v + len * ME, S[i], ME), "model", "llama_l1", "sequence_id",
                              "served-attn", "sequence_start", i == 0, "need_weights", 0);
        struct http_reply a = seqt_attention(s.port, b);
        cr_assert_eq(a.status, 200, "%s", a.body);
        const size_t n = seqt_answer_floats(&a, "output", out, sizeof out / sizeof *out);
        free(a.body);
        len += S[i];
        json_t *st = json_pack("{s:o, s:o, s:o, s:s, s:s, s:i, s:b}", "query", seqt_mat(q, L[i], ME),
                               "key", seqt_mat(k, len, ME), "value", seqt_mat(v, len, ME), "model",
                               "llama_l1", "attn_mask", "causal_lower_right",
                               "query_position_offset", len - L[i], "need_weights", 0);
        a = seqt_attention(s.port, st);
        cr_assert_eq(a.status, 200, "%s", a.body);
        cr_assert_eq(seqt_answer_floats(&a, "output", want, sizeof want / sizeof *want), n);
        free(a.body);
        seqt_expect_close(out, want, n, "llama_l1 over /attention");
    }

    /* the built-in model over v2 */
    float w_in[3 * E * E], bk[16 * E], bv[16 * E], bq[4 * E], bo[4 * E], bw[4 * E];
    seqt_fill(w_in, sizeof w_in / sizeof *w_in);
    len = 0;
    for (int i = 0; i < 3; i++) {
        seqt_fill(bq, (size_t)L[i] * E);
        seqt_fill(bk + len * E, (size_t)S[i] * E);
        seqt_fill(bv + len * E, (size_t)S[i] * E);
        json_t *in = json_pack("[o, o, o]", seqt_input("query", bq, L[i], E),
                               seqt_input("key", bk + len * E, S[i], E),
                               seqt_input("value", bv + len * E, S[i], E));
        if (i == 0)
            json_array_append_new(in, seqt_input("in_proj_weight", w_in, 3 * E, E));
        json_t *b = json_pack("{s:o, s:{s:i, s:s, s:b, s:b}}", "inputs", in, "parameters",
                              "num_heads", H, "sequence_id", "builtin-v2", "sequence_start",
                              i == 0, "need_weights", 0);
        struct http_reply a = seqt_send_json(s.port, "/v2/models/attention/infer", b, NULL);
        cr_assert_eq(a.status, 200, "%s", a.body);
        size_t n;
        float *got = output_of(&a, "output", &n, NULL);
        memcpy(bo, got, n * sizeof *got);
        free(got);
        free(a.body);
        len += S[i];
        json_t *st = json_pack("{s:[o, o, o, o], s:{s:i, s:b, s:s, s:i, s:b}}", "inputs",
                               seqt_input("query", bq, L[i], E), seqt_input("key", bk, len, E),
                               seqt_input("value", bv, len, E),
                               seqt_input("in_proj_weight", w_in, 3 * E, E), "parameters",
                               "num_heads", H, "is_causal", 1, "causal_alignment",
                               "lower_right", "query_position_offset", len - L[i],
                               "need_weights", 0);
        a = seqt_send_json(s.port, "/v2/models/attention/infer", st, NULL);
        cr_assert_eq(a.status, 200, "%s", a.body);
        size_t nw;
        got = output_of(&a, "output", &nw, NULL);
        cr_assert_eq(nw, n);
        memcpy(bw, got, n * sizeof *got);
        free(got);
        free(a.body);
        seqt_expect_close(bo, bw, n, "built-in over v2");
    }
    cr_assert_eq(server_stop(&s), 0);
}
