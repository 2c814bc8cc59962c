/* test_sequence_batches_v2.c -- a batch of sequences in one v2 infer
 * request (docs/sequences.md): the ids as an input tensor sequence_id
 * (UINT64 or BYTES, JSON or binary data), BOOL inputs sequence_start and
 * sequence_end; ragged caches each equal to the stateless answer on all
 * three cache dtypes, the output cache_length INT64 [B]; refusals name the
 * item and change nothing; the metadata lists the inputs. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/batch_shared.h"
#include "tests/server/sequence_shared.h"

static const struct bt_shape shapes[3] = {
    {16, 4, 2, BT_FP32},
    {8, 2, 1, BT_FP16},
    {32, 4, 2, BT_BF16},
};

/* One item's step in v2's scalar form (the sequence_id parameter). */
static void one_step(int port, const struct bt_shape *sh, const char *id, enum bt_ids how,
                     struct bt_hist *h, int layer, int S, int L, int start)
{
    struct bt_step st;
    struct bt_hist *const hs[1] = {h};
    bt_step_new(&st, sh, 1, L, S, hs);
    char what[160];
    snprintf(what, sizeof what, "v2 %s '%s' layer %d alone", bt_dtype_names[sh->dtype], id, layer);
    bt_v2_step_ok(port, sh, &st, hs, &id, how == BT_UINT64 ? BT_PARAM_INT : BT_PARAM, 0, layer,
                  start, what);
}

/* A batch step of the n items ids at layer (the sequence_id tensor). */
static void batch_step(int port, const struct bt_shape *sh, const char *const *ids, int n,
                       enum bt_ids how, int binary, struct bt_hist *const *h, int layer, int S,
                       int L, int start)
{
    struct bt_step st;
    bt_step_new(&st, sh, n, L, S, h);
    char what[200];
    snprintf(what, sizeof what, "v2 %s %s%s batch of %d ('%s'...) layer %d, S %d L %d",
             bt_dtype_names[sh->dtype], how == BT_BYTES ? "BYTES" : "UINT64",
             binary ? " binary" : "", n, ids[0], layer, S, L);
    bt_v2_step_ok(port, sh, &st, h, ids, how, binary, layer, start, what);
}

Test(sequence_batches_v2, ragged_batches_equal_the_stateless_answers)
{
    struct server s;
    server_start(&s, NULL);
    for (int how = BT_UINT64; how <= BT_BYTES; how++)
        for (int bin = 0; bin < 2; bin++)
            for (int t = 0; t < 3; t++) {
                const struct bt_shape *sh = &shapes[t];
                char names[4][40];
                const char *ids[4];
                for (int b = 0; b < 4; b++) {
                    if (how == BT_UINT64)
                        snprintf(names[b], 40, "%d", 910000 + bin * 100 + t * 10 + b);
                    else
                        snprintf(names[b], 40, "v2-rag-%d-%d-%d", bin, t, b);
                    ids[b] = names[b];
                }
                static struct bt_hist h[4][3];
                memset(h, 0, sizeof h);
                struct bt_hist *p[4];
                /* prompts of different lengths, one by one */
                const int P[3] = {4, 1, 7}, PL[3] = {2, 1, 3};
                for (int b = 0; b < 3; b++)
                    one_step(s.port, sh, ids[b], (enum bt_ids)how, &h[b][0], -1, P[b], PL[b], 1);
                for (int b = 0; b < 3; b++)
                    p[b] = &h[b][0];
                batch_step(s.port, sh, ids, 3, (enum bt_ids)how, bin, p, -1, 1, 1, 0);
                batch_step(s.port, sh, ids, 3, (enum bt_ids)how, bin, p, 0, 2, 2, 0);
                /* layer 2 begins at the batch; then ragged */
                for (int b = 0; b < 3; b++)
                    p[b] = &h[b][2];
                batch_step(s.port, sh, ids, 3, (enum bt_ids)how, bin, p, 2, 3, 1, 0);
                one_step(s.port, sh, ids[0], (enum bt_ids)how, &h[0][2], 2, 1, 1, 0);
                batch_step(s.port, sh, ids, 3, (enum bt_ids)how, bin, p, 2, 1, 1, 0);
                /* a batch of one starts item 3 (BOOL sequence_start) */
                p[0] = &h[3][0];
                batch_step(s.port, sh, ids + 3, 1, (enum bt_ids)how, bin, p, 0, 2, 1, 1);
                /* four at once, in another order */
                const char *four[4] = {ids[3], ids[0], ids[2], ids[1]};
                const int ix[4] = {3, 0, 2, 1};
                for (int b = 0; b < 4; b++)
                    p[b] = &h[ix[b]][0];
                batch_step(s.port, sh, four, 4, (enum bt_ids)how, bin, p, 0, 1, 1, 0);
                cr_assert(h[2][0].len == 7 + 1 + 2 + 1 && h[3][0].len == 3);
            }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Refusals                                                                */

/* A v2 batch step of ids (n) refused with 400 naming msg; big: a key value
 * beyond FP16's range in item big - 1; starts: a BOOL sequence_start or
 * NULL; extra: an input (taken) or NULL. */
static void v2_refused(int port, const struct bt_shape *sh, const char *const *ids, int n,
                       enum bt_ids how, int binary, int big, const int *starts, json_t *extra,
                       const char *msg)
{
    struct bt_step st;
    bt_step_new(&st, sh, n, 1, 1, NULL);
    if (big)
        st.k[big - 1][0] = 70000.0f;
    json_t *v = bt_v2_body(sh, &st, ids, n, how, 0), *in = json_object_get(v, "inputs");
    if (starts)
        json_array_append_new(in, bt_v2_bools("sequence_start", starts, n));
    if (extra)
        json_array_append_new(in, extra);
    struct http_reply a = bt_v2_send(port, v, binary, NULL);
    expect_v2_error(&a, 400, msg);
    free(a.body);
}

Test(sequence_batches_v2, a_refused_item_is_named_and_no_sequence_changes)
{
    struct server s;
    server_start(&s, NULL);
    for (int k = 0; k < 6; k++) {
        const int how = k < 3 ? BT_UINT64 : BT_BYTES, t = k % 3;
        const struct bt_shape *sh = &shapes[t];
        const int bin = k % 2; /* JSON and binary, each id type and dtype */
        const int u = how == BT_UINT64;
        char names[4][32];
        snprintf(names[0], 32, u ? "50%d1" : "v2r-a-%d", t);
        snprintf(names[1], 32, u ? "50%d2" : "v2r-b-%d", t);
        snprintf(names[2], 32, u ? "50%d9" : "v2r-ghost-%d", t);
        snprintf(names[3], 32, u ? "50%d3" : "v2r-new-%d", t);
        const char *ids[2] = {names[0], names[1]};
        const char *ghost = names[2], *fresh = names[3];
        static struct bt_hist h[2];
        memset(h, 0, sizeof h);
        one_step(s.port, sh, ids[0], (enum bt_ids)how, &h[0], 0, 3, 1, 1);
        one_step(s.port, sh, ids[1], (enum bt_ids)how, &h[1], 0, 1, 1, 1);
        char msg[120];
        /* an unknown id */
        const char *with_ghost[2] = {ids[0], ghost};
        snprintf(msg, sizeof msg, "sequence_id[1] '%s'", ghost);
        v2_refused(s.port, sh, with_ghost, 2, (enum bt_ids)how, bin, 0, NULL, NULL, msg);
        /* a start in a refused batch makes nothing */
        const char *starting[2] = {fresh, ghost};
        v2_refused(s.port, sh, starting, 2, (enum bt_ids)how, bin, 0, (const int[]){1, 0}, NULL,
                   msg);
        /* the same id twice */
        const char *aa[3] = {ids[1], ids[0], ids[1]};
        snprintf(msg, sizeof msg, "sequence_id[2] '%s' is also sequence_id[0]", ids[1]);
        v2_refused(s.port, sh, aa, 3, (enum bt_ids)how, bin, 0, NULL, NULL, msg);
        /* 0 or "": not an id */
        const char *zero[2] = {ids[0], u ? "0" : ""};
        v2_refused(s.port, sh, zero, 2, (enum bt_ids)how, bin, 0, NULL, NULL, "sequence_id[1]");
        /* beyond the FP16 cache's range in item 1 */
        snprintf(msg, sizeof msg, "sequence_id[1] '%s'", ids[1]);
        if (sh->dtype == BT_FP16)
            v2_refused(s.port, sh, ids, 2, (enum bt_ids)how, bin, 2, NULL, NULL, msg);
        /* a start flag per item: B of them */
        v2_refused(s.port, sh, ids, 2, (enum bt_ids)how, bin, 0, NULL,
                   bt_v2_bools("sequence_start", (const int[]){0, 0, 0}, 3), "sequence_start");
        /* the tensor and the parameter both */
        struct bt_step st;
        bt_step_new(&st, sh, 2, 1, 1, NULL);
        json_t *v = bt_v2_body(sh, &st, ids, 2, (enum bt_ids)how, 0);
        json_object_set_new(json_object_get(v, "parameters"), "sequence_id",
                            json_string(ids[0]));
        struct http_reply a = bt_v2_send(s.port, v, bin, NULL);
        expect_v2_error(&a, 400, "sequence_id");
        free(a.body);
        /* as they were; the new one never made */
        cr_assert_eq(bt_probe(s.port, sh, ids[0], 0, &h[0]), 4);
        cr_assert_eq(bt_probe(s.port, sh, ids[1], 0, &h[1]), 2);
        bt_step_new(&st, sh, 1, 1, 1, NULL);
        a = seqt_attention(s.port, bt_post_body(sh, &st, json_string(fresh), 0));
        expect_error(&a, 400, "sequence_not_found", fresh);
        free(a.body);
        /* X-Sequence-Id on a batch: the placement key, not compared */
        struct bt_hist *p[2] = {&h[0], &h[1]};
        bt_step_new(&st, sh, 2, 1, 2, p);
        a = bt_v2_send(s.port, bt_v2_body(sh, &st, ids, 2, (enum bt_ids)how, 0), bin,
                       "X-Sequence-Id: v2-rack-3");
        struct bt_answer ans;
        bt_v2_answer(&a, 1, &ans);
        bt_check(s.port, sh, &st, p, &ans, 1, "v2 batch with a placement key");
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Ends                                                                    */

Test(sequence_batches_v2, sequence_end_as_a_bool_input_frees_every_item_and_layer)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape *sh = &shapes[t];
        const char *ids[3] = {"v2e-a", "v2e-b", "v2e-c"};
        static struct bt_hist h[3][2];
        memset(h, 0, sizeof h);
        struct bt_hist *p[3];
        for (int b = 0; b < 3; b++)
            one_step(s.port, sh, ids[b], BT_BYTES, &h[b][0], 0, 2 + b, 1, 1);
        for (int b = 0; b < 3; b++)
            p[b] = &h[b][1];
        batch_step(s.port, sh, ids, 3, BT_BYTES, t == 1, p, 1, 2, 2, 0);
        /* an end flag on a step: item 2 goes after its answer */
        struct bt_step st;
        bt_step_new(&st, sh, 3, 1, 1, p);
        json_t *v = bt_v2_body(sh, &st, ids, 3, BT_BYTES, 1);
        json_array_append_new(json_object_get(v, "inputs"),
                              bt_v2_bools("sequence_end", (const int[]){0, 0, 1}, 3));
        struct http_reply a = bt_v2_send(s.port, v, t == 2, NULL);
        struct bt_answer ans;
        bt_v2_answer(&a, 1, &ans);
        bt_check(s.port, sh, &st, p, &ans, 1, "v2 batch ending item 2");
        struct bt_step one;
        bt_step_new(&one, sh, 1, 1, 1, NULL);
        a = seqt_attention(s.port, bt_post_body(sh, &one, json_string("v2e-c"), 0));
        expect_error(&a, 400, "sequence_not_found", "'v2e-c'");
        free(a.body);
        /* an end without a query: every item, every layer */
        v = bt_v2_body(sh, NULL, ids, 2, BT_BYTES, -1);
        json_object_clear(json_object_get(v, "parameters")); /* no step: nothing to say */
        json_array_append_new(json_object_get(v, "inputs"),
                              bt_v2_bools("sequence_end", (const int[]){1, 1}, 2));
        a = bt_v2_send(s.port, v, t == 0, NULL);
        cr_assert_eq(a.status, 200, "%s", a.body);
        json_t *head = answer_head(&a), *o, *two = json_pack("[i]", 2);
        size_t i;
        int seen = 0;
        json_array_foreach(json_object_get(head, "outputs"), i, o)
            seen |= !strcmp(json_string_value(json_object_get(o, "name")), "cache_length") &&
                    json_equal(json_object_get(o, "shape"), two);
        cr_assert(seen, "no cache_length [2] in %s", a.body);
        json_decref(head), json_decref(two);
        free(a.body);
        for (int b = 0; b < 3; b++)
            for (int l = 0; l < 2; l++) {
                a = seqt_attention(s.port, bt_post_body(sh, &one, json_string(ids[b]), l));
                expect_error(&a, 400, "sequence_not_found", ids[b]);
                free(a.body);
            }
        bt_expect_no_sequences(s.port);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* A start flag for one item; outputs naming only "output" still answer
 * cache_length; an end by the parameter sequence_end with the ids' tensor
 * and no query. */
Test(sequence_batches_v2, cache_length_always_and_an_end_by_the_parameter)
{
    struct server s;
    server_start(&s, NULL);
    const struct bt_shape *sh = &shapes[2];
    const char *ids[2] = {"601", "602"};
    static struct bt_hist h[2];
    struct bt_hist *p[2] = {&h[0], &h[1]};
    one_step(s.port, sh, ids[0], BT_UINT64, &h[0], 3, 3, 1, 1);
    /* 602 starts in a batch beside 601, which goes on */
    struct bt_step st;
    bt_step_new(&st, sh, 2, 1, 2, p);
    json_t *v = bt_v2_body(sh, &st, ids, 2, BT_UINT64, 3);
    json_array_append_new(json_object_get(v, "inputs"),
                          bt_v2_bools("sequence_start", (const int[]){0, 1}, 2));
    json_object_set_new(json_object_get(v, "parameters"), "kv_cache_dtype", json_string("BF16"));
    struct http_reply a = bt_v2_send(s.port, v, 1, NULL);
    struct bt_answer ans;
    bt_v2_answer(&a, 1, &ans);
    bt_check(s.port, sh, &st, p, &ans, 1, "v2 batch starting its item 1");
    bt_step_new(&st, sh, 2, 1, 1, p);
    v = bt_v2_body(sh, &st, ids, 2, BT_UINT64, 3);
    json_object_set_new(v, "outputs", json_pack("[{s:s}]", "name", "output"));
    a = bt_v2_send(s.port, v, 0, NULL);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *head = answer_head(&a), *o;
    json_t *want = json_pack("[i, i]", 6, 3);
    size_t i;
    int found = 0;
    json_array_foreach(json_object_get(head, "outputs"), i, o) {
        const char *name = json_string_value(json_object_get(o, "name"));
        cr_assert(strcmp(name, "attention_weights"), "weights not asked for: %s", a.body);
        if (!strcmp(name, "cache_length"))
            found = json_equal(json_object_get(o, "data"), want);
    }
    cr_assert(found, "no cache_length [6, 3]: %s", a.body);
    json_decref(head), json_decref(want);
    free(a.body);
    v = bt_v2_body(sh, NULL, ids, 2, BT_UINT64, -1);
    json_object_clear(json_object_get(v, "parameters"));
    json_object_set_new(json_object_get(v, "parameters"), "sequence_end", json_true());
    a = bt_v2_send(s.port, v, 0, NULL);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    bt_expect_no_sequences(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* The model's metadata                                                    */

/* The member of list (an array of {name, ...}) called name, or NULL. */
static json_t *named(json_t *list, const char *name)
{
    size_t i;
    json_t *m;
    json_array_foreach(list, i, m)
        if (!strcmp(json_string_value(json_object_get(m, "name")), name))
            return m;
    return NULL;
}

/* m is a metadata tensor of datatype dt and shape [-1]. */
static void expect_tensor(json_t *m, const char *dt)
{
    json_t *shape = json_object_get(m, "shape");
    const char *name = json_string_value(json_object_get(m, "name"));
    cr_assert_str_eq(json_string_value(json_object_get(m, "datatype")), dt, "%s", name);
    cr_assert(json_array_size(shape) == 1 && json_integer_value(json_array_get(shape, 0)) == -1,
              "%s: not of shape [-1]", name);
}

Test(sequence_batches_v2, the_metadata_lists_the_batch_inputs_and_cache_length)
{
    struct server s;
    server_start(&s, NULL);
    json_t *md = http_get_json(s.port, "/v2/models/attention");
    const char *in[3][2] = {
        {"sequence_id", "UINT64"}, {"sequence_start", "BOOL"}, {"sequence_end", "BOOL"}};
    for (int i = 0; i < 3; i++) {
        json_t *m = named(json_object_get(md, "inputs"), in[i][0]);
        cr_assert_not_null(m, "no input %s in the metadata", in[i][0]);
        expect_tensor(m, in[i][1]);
    }
    json_t *cl = named(json_object_get(md, "outputs"), "cache_length");
    cr_assert_not_null(cl, "no output cache_length in the metadata");
    expect_tensor(cl, "INT64");
    json_decref(md);
    /* Triton's model configuration: optional inputs */
    json_t *cfg = http_get_json(s.port, "/v2/models/attention/config");
    for (int i = 0; i < 3; i++) {
        json_t *m = named(json_object_get(cfg, "input"), in[i][0]);
        cr_assert_not_null(m, "no input %s in the config", in[i][0]);
        cr_assert(json_is_true(json_object_get(m, "optional")), "%s is not optional",
                  in[i][0]);
    }
    cr_assert_not_null(named(json_object_get(cfg, "output"), "cache_length"));
    json_decref(cfg);
    cr_assert_eq(server_stop(&s), 0);
}
