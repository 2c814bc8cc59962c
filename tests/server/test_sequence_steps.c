/* test_sequence_steps.c -- sequences (docs/sequences.md) end to end over
 * HTTP with the built-in model: every step equals the stateless answer on
 * the whole history; sequences interleaved stay apart; X-Sequence-Id;
 * fp16 and bf16 caches; concurrent steps of one sequence take turns. */
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

#include "tests/server/sequence_shared.h"

#define MAXT 32

struct history {
    float k[MAXT * E], v[MAXT * E];
    int len;
};

/* One step of sequence id (weights given only at the start) and the
 * stateless request on the whole history: the same output, weights and
 * the cache length. */
static void step_and_compare(int port, const char *id, struct history *hs, int S, int L,
                             const float *w_in, const float *w_out, int start)
{
    float q[MAXT * E], out[MAXT * E], want[MAXT * E];
    float wts[H * MAXT * MAXT], wwant[H * MAXT * MAXT];
    seqt_fill(q, (size_t)L * E);
    seqt_fill(hs->k + hs->len * E, (size_t)S * E);
    seqt_fill(hs->v + hs->len * E, (size_t)S * E);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:{s:s}}", "query", seqt_mat(q, L, E), "key",
                          seqt_mat(hs->k + hs->len * E, S, E), "value",
                          seqt_mat(hs->v + hs->len * E, S, E), "num_heads", H, "sequence_id", id,
                          "rope", "style", "half");
    if (start) {
        json_object_set_new(b, "sequence_start", json_true());
        json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "in_proj_weight",
                                                    seqt_mat(w_in, 3 * E, E), "out_proj_weight",
                                                    seqt_mat(w_out, E, E)));
    }
    struct http_reply a = seqt_attention(port, b);
    cr_assert_eq(a.status, 200, "step of %s at %d: %ld %s", id, hs->len, a.status, a.body);
    const int total = hs->len + S;
    cr_assert_eq(seqt_int_of(&a, "cache_length"), total, "%s", a.body);
    cr_assert_eq(seqt_int_of(&a, "source_len"), total, "%s", a.body);
    const size_t n = seqt_answer_floats(&a, "output", out, sizeof out / sizeof *out);
    const size_t nw = seqt_answer_floats(&a, "attention_weights", wts, sizeof wts / sizeof *wts);
    free(a.body);

    json_t *s = json_pack("{s:o, s:o, s:o, s:i, s:s, s:i, s:{s:s}, s:{s:o, s:o}}", "query",
                          seqt_mat(q, L, E), "key", seqt_mat(hs->k, total, E), "value",
                          seqt_mat(hs->v, total, E), "num_heads", H, "attn_mask",
                          "causal_lower_right", "query_position_offset", hs->len + S - L,
                          "rope", "style", "half", "weights", "in_proj_weight",
                          seqt_mat(w_in, 3 * E, E), "out_proj_weight", seqt_mat(w_out, E, E));
    a = seqt_attention(port, s);
    cr_assert_eq(a.status, 200, "stateless: %ld %s", a.status, a.body);
    cr_assert_eq(seqt_answer_floats(&a, "output", want, sizeof want / sizeof *want), n);
    cr_assert_eq(seqt_answer_floats(&a, "attention_weights", wwant, sizeof wwant / sizeof *wwant), nw);
    free(a.body);
    cr_assert_eq(n, (size_t)L * E);
    cr_assert_eq(nw, (size_t)H * L * total);
    seqt_expect_close(out, want, n, "output");
    seqt_expect_close(wts, wwant, nw, "attention_weights");
    hs->len = total;
}

Test(sequence_steps, builtin_steps_equal_the_stateless_answer)
{
    struct server s;
    server_start(&s, NULL);
    float w_in[3 * E * E], w_out[E * E];
    seqt_fill(w_in, sizeof w_in / sizeof *w_in);
    seqt_fill(w_out, sizeof w_out / sizeof *w_out);
    struct history hs = {.len = 0};
    /* a prompt (S > L answers its last L rows), then decode steps and chunks */
    const int S[] = {5, 1, 1, 3, 1, 2}, L[] = {2, 1, 1, 3, 1, 1};
    for (int i = 0; i < 6; i++)
        step_and_compare(s.port, "builtin-a", &hs, S[i], L[i], w_in, w_out, i == 0);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_steps, interleaved_sequences_stay_apart)
{
    struct server s;
    server_start(&s, NULL);
    float w_in[2][3 * E * E], w_out[2][E * E];
    seqt_fill(&w_in[0][0], sizeof w_in / sizeof(float));
    seqt_fill(&w_out[0][0], sizeof w_out / sizeof(float));
    struct history hs[2] = {{.len = 0}, {.len = 0}};
    const char *ids[2] = {"7f3c-one", "7f3c-two"};
    for (int i = 0; i < 8; i++) {
        const int k = (i * 5 / 3) % 2; /* an irregular interleaving */
        step_and_compare(s.port, ids[k], &hs[k], 1 + i % 3, 1, w_in[k], w_out[k],
                         hs[k].len == 0);
    }
    cr_assert(hs[0].len > 0 && hs[1].len > 0);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_steps, x_sequence_id_is_the_same_id)
{
    struct server s;
    server_start(&s, NULL);
    const char *const h42[] = {"X-Sequence-Id: 42", NULL};
    const char *const h43[] = {"X-Sequence-Id: 43", NULL};
    json_t *b = seqt_tiny_step(NULL, 0);
    json_object_set_new(b, "sequence_id", json_integer(42));
    json_object_set_new(b, "sequence_start", json_true());
    struct http_reply a = seqt_attention(s.port, b);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* the header alone, and the string "42": the same sequence */
    a = seqt_send_json(s.port, "/attention", seqt_tiny_step(NULL, 0), h42);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 2);
    free(a.body);
    a = seqt_send_json(s.port, "/attention", seqt_tiny_step("42", 0), h42);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 3, "%s", a.body);
    free(a.body);
    /* different: 400 */
    a = seqt_send_json(s.port, "/attention", seqt_tiny_step("42", 0), h43);
    expect_error(&a, 400, "invalid_parameter", "X-Sequence-Id '43' differs");
    free(a.body);
    /* the largest uint64 id, as a number and as text */
    b = seqt_tiny_step(NULL, 1);
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    char body[512];
    snprintf(body, sizeof body, "%.*s,\"sequence_id\":18446744073709551615}",
             (int)strlen(text) - 1, text);
    free(text);
    a = request(s.port, "POST", "/attention", body, strlen(body), NULL, 0);
    cr_assert_eq(a.status, 200, "%s: %s", body, a.body);
    free(a.body);
    const char *const hmax[] = {"X-Sequence-Id: 18446744073709551615", NULL};
    a = seqt_send_json(s.port, "/attention", seqt_tiny_step(NULL, 0), hmax);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 2, "%s", a.body);
    free(a.body);
    /* v2 too: the header on infer */
    float q[E];
    seqt_fill(q, E);
    json_t *v = json_pack("{s:[o], s:{s:i}}", "inputs", seqt_input("query", q, 1, E), "parameters",
                          "num_heads", H);
    a = seqt_send_json(s.port, "/v2/models/attention/infer", v, h42);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"parameters\":{\"cache_length\":4}"), "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Cache types                                                             */

/* With identity projections and no RoPE, an FP16 or BF16 cache answers as
 * the stateless request on key and value rounded to that type; the cache
 * takes half the bytes of FP32. */
Test(sequence_steps, fp16_and_bf16_caches_round_keys_and_values)
{
    struct server s;
    server_start(&s, NULL);
    const char *dtypes[] = {"FP32", "FP16", "BF16"};
    double bytes[3];
    for (int t = 0; t < 3; t++) {
        float k[8 * E], v[8 * E], kr[8 * E], vr[8 * E], q[E], out[E], want[E];
        int len = 0;
        for (int i = 0; i < 3; i++) {
            const int S = i ? 1 : 4;
            seqt_fill(q, E);
            seqt_fill(k + len * E, (size_t)S * E);
            seqt_fill(v + len * E, (size_t)S * E);
            for (int j = len * E; j < (len + S) * E; j++) {
                kr[j] = seqt_round(t, k[j]);
                vr[j] = seqt_round(t, v[j]);
            }
            json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", seqt_mat(q, 1, E),
                                  "key", seqt_mat(k + len * E, S, E), "value",
                                  seqt_mat(v + len * E, S, E), "num_heads", H, "sequence_id",
                                  dtypes[t], "need_weights", 0);
            if (i == 0) {
                json_object_set_new(b, "sequence_start", json_true());
                json_object_set_new(b, "kv_cache_dtype", json_string(dtypes[t]));
            }
            struct http_reply a = seqt_attention(s.port, b);
            cr_assert_eq(a.status, 200, "%s: %s", dtypes[t], a.body);
            cr_assert_eq(seqt_answer_floats(&a, "output", out, E), (size_t)E);
            free(a.body);
            len += S;
            json_t *st = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", seqt_mat(q, 1, E),
                                   "key", seqt_mat(kr, len, E), "value", seqt_mat(vr, len, E),
                                   "num_heads", H, "attn_mask", "causal_lower_right",
                                   "need_weights", 0);
            a = seqt_attention(s.port, st);
            cr_assert_eq(a.status, 200, "%s", a.body);
            cr_assert_eq(seqt_answer_floats(&a, "output", want, E), (size_t)E);
            free(a.body);
            seqt_expect_close(out, want, E, dtypes[t]);
        }
        bytes[t] = server_metric(s.port, "attention_sequence_bytes");
        json_t *end = json_pack("{s:s, s:b}", "sequence_id", dtypes[t], "sequence_end", 1);
        struct http_reply a = seqt_attention(s.port, end);
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    cr_assert(bytes[0] > 0 && bytes[1] == bytes[0] / 2 && bytes[2] == bytes[0] / 2,
              "bytes FP32 %g, FP16 %g, BF16 %g", bytes[0], bytes[1], bytes[2]);
    /* beyond FP16's range: 400 naming the row; nothing appended */
    json_t *b = seqt_tiny_step("fp16-range", 1);
    json_object_set_new(b, "kv_cache_dtype", json_string("FP16"));
    struct http_reply a = seqt_attention(s.port, b);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    b = json_pack("{s:[[f, f, f, f]], s:[[f, f, f, f]], s:i, s:s}", "query", 0.0, 0.0, 0.0, 0.0,
                  "key", 1.0, 70000.0, 0.0, 0.0, "num_heads", H, "sequence_id", "fp16-range");
    a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "row 0");
    free(a.body);
    a = seqt_attention(s.port, seqt_tiny_step("fp16-range", 0));
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 2, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Concurrent steps of one sequence take turns                             */

struct stepper {
    int port, n;
    long long lengths[8];  /* N at most */
    int ok;
};

static void *steps(void *arg)
{
    struct stepper *st = arg;
    st->ok = 1;
    for (int i = 0; i < st->n; i++) {
        float q[E];
        seqt_fill(q, E); /* (rnd is not thread-safe: any values do) */
        json_t *b = json_pack("{s:o, s:i, s:s, s:b}", "query", seqt_mat(q, 1, E), "num_heads", H,
                              "sequence_id", "shared-seq", "need_weights", 0);
        char *text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        struct http_reply a = request(st->port, "POST", "/attention", text, strlen(text), NULL, 0);
        free(text);
        json_t *j = a.status == 200 ? json_loadb(a.body, a.len, 0, NULL) : NULL;
        st->lengths[i] = j ? json_integer_value(json_object_get(j, "cache_length")) : -1;
        st->ok &= j != NULL;
        json_decref(j);
        free(a.body);
    }
    return NULL;
}

Test(sequence_steps, concurrent_steps_of_one_sequence_take_turns)
{
    struct server s;
    const char *const flags[] = {"--workers", "4", NULL};
    server_start(&s, flags);
    struct http_reply a = seqt_attention(s.port, seqt_tiny_step("shared-seq", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    enum { T = 4, N = 8 };
    struct stepper st[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        st[t] = (struct stepper){.port = s.port, .n = N};
        pthread_create(&th[t], NULL, steps, &st[t]);
    }
    int seen[2 + T * N] = {0};
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert(st[t].ok, "a concurrent step failed");
        for (int i = 0; i < N; i++) {
            const long long l = st[t].lengths[i];
            cr_assert(l >= 2 && l < 2 + T * N, "cache_length %lld", l);
            cr_assert(!seen[l], "two steps answered cache_length %lld", l);
            seen[l] = 1;
        }
    }
    a = seqt_attention(s.port, seqt_tiny_step("shared-seq", 0));
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 2 + T * N, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}
