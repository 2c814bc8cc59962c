/* test_sequence_batches.c -- a batch of sequences in one POST /attention
 * (docs/sequences.md): items started one by one with prompts of different
 * lengths, then stepped together, each equal to the stateless answer over
 * its own history (ragged caches, weights padded with zeros), on all three
 * cache dtypes; all or nothing; the same id twice; an end by arrays frees
 * every item and layer; X-Sequence-Id is the batch's placement key. */
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

/* n ids as a JSON array: the ids of digits as integers, the others as
 * strings (ids compare as text). */
static json_t *id_array(const char *const *ids, int n)
{
    json_t *a = json_array();
    for (int b = 0; b < n; b++)
        json_array_append_new(a, strspn(ids[b], "0123456789") == strlen(ids[b])
                                     ? json_integer(strtoll(ids[b], NULL, 10))
                                     : json_string(ids[b]));
    return a;
}

/* n flags as a JSON array of booleans. */
static json_t *bools(const int *f, int n)
{
    json_t *a = json_array();
    for (int b = 0; b < n; b++)
        json_array_append_new(a, json_boolean(f[b]));
    return a;
}

/* One item's step (the scalar form) at layer, checked against h. */
static void one_step(int port, const struct bt_shape *sh, const char *id, struct bt_hist *h,
                     int layer, int S, int L, int start)
{
    struct bt_step st;
    struct bt_hist *const hs[1] = {h};
    bt_step_new(&st, sh, 1, L, S, hs);
    char what[160];
    snprintf(what, sizeof what, "%s '%s' layer %d alone", bt_dtype_names[sh->dtype], id, layer);
    bt_post_step_ok(port, sh, &st, hs, json_string(id), layer, start, what);
}

/* A batch step of the n items ids at layer, checked against their
 * histories h[b]. */
static void batch_step(int port, const struct bt_shape *sh, const char *const *ids, int n,
                       struct bt_hist *const *h, int layer, int S, int L, int start)
{
    struct bt_step st;
    bt_step_new(&st, sh, n, L, S, h);
    char what[160];
    snprintf(what, sizeof what, "%s batch of %d ('%s'...) layer %d, S %d L %d",
             bt_dtype_names[sh->dtype], n, ids[0], layer, S, L);
    bt_post_step_ok(port, sh, &st, h, id_array(ids, n), layer, start, what);
}

/* The histories of layer l of items ix[0..n) of h: what batch_step takes. */
#define LAYER_OF(h, l, p, ...)                                                                   \
    do {                                                                                        \
        const int ix_[] = {__VA_ARGS__};                                                        \
        for (size_t i_ = 0; i_ < sizeof ix_ / sizeof *ix_; i_++)                                \
            (p)[i_] = &(h)[ix_[i_]][l];                                                         \
    } while (0)

Test(sequence_batches, ragged_batches_equal_the_stateless_answers)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape *sh = &shapes[t];
        char names[5][32];
        snprintf(names[0], 32, "rag-a-%d", t);
        snprintf(names[1], 32, "rag-b-%d", t);
        snprintf(names[2], 32, "700%d", t); /* an integer in the arrays */
        snprintf(names[3], 32, "rag-f1-%d", t);
        snprintf(names[4], 32, "rag-f2-%d", t);
        const char *ids[5] = {names[0], names[1], names[2], names[3], names[4]};
        static struct bt_hist h[5][2];
        memset(h, 0, sizeof h);
        struct bt_hist *p[BT_MAXB];
        /* prompts of different lengths, one by one */
        const int P[3] = {5, 2, 9}, PL[3] = {1, 2, 3};
        for (int b = 0; b < 3; b++)
            one_step(s.port, sh, ids[b], &h[b][0], -1, P[b], PL[b], 1);
        /* then stepped together, each on its own cache */
        LAYER_OF(h, 0, p, 0, 1, 2);
        batch_step(s.port, sh, ids, 3, p, -1, 1, 1, 0);
        batch_step(s.port, sh, ids, 3, p, 0, 2, 2, 0);
        batch_step(s.port, sh, ids, 3, p, 0, 3, 1, 0);
        /* layer 1 begins at the batch's first step there; then ragged too */
        LAYER_OF(h, 1, p, 0, 1, 2);
        batch_step(s.port, sh, ids, 3, p, 1, 3, 1, 0);
        one_step(s.port, sh, ids[1], &h[1][1], 1, 2, 1, 0);
        batch_step(s.port, sh, ids, 3, p, 1, 1, 1, 0);
        /* sequence_start as an array: item 1 alone starts afresh (every layer) */
        h[1][0].len = h[1][1].len = 0;
        LAYER_OF(h, 0, p, 0, 1, 2);
        struct bt_step st;
        bt_step_new(&st, sh, 3, 1, 2, p);
        json_t *b = bt_post_body(sh, &st, id_array(ids, 3), 0);
        json_object_set_new(b, "sequence_start", bools((const int[]){0, 1, 0}, 3));
        json_object_set_new(b, "kv_cache_dtype", json_string(bt_dtype_names[t]));
        struct http_reply a = seqt_attention(s.port, b);
        struct bt_answer ans;
        bt_post_answer(&a, &ans);
        bt_check(s.port, sh, &st, p, &ans, 1, "a batch restarting its item 1");
        LAYER_OF(h, 1, p, 0, 1, 2);
        batch_step(s.port, sh, ids, 3, p, 1, 1, 1, 0); /* item 1's layer 1 begins again */
        cr_assert(h[1][1].len == 1 && h[0][1].len == 5);
        /* sequence_start true for every item; then four at once */
        LAYER_OF(h, 0, p, 3, 4);
        batch_step(s.port, sh, ids + 3, 2, p, 0, 4, 2, 1);
        const char *four[4] = {ids[0], ids[3], ids[2], ids[4]};
        LAYER_OF(h, 0, p, 0, 3, 2, 4);
        batch_step(s.port, sh, four, 4, p, 0, 1, 1, 0);
        /* the scalar form still answers one item's cache as before */
        one_step(s.port, sh, ids[2], &h[2][0], 0, 1, 1, 0);
        cr_assert_eq(h[2][0].len, 9 + 1 + 2 + 3 + 2 + 1 + 1);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* All or nothing                                                          */

/* A refused batch step of ids with these starts (NULL: none) at layer 0;
 * big: a key value beyond FP16's range in item big - 1 (0: none). */
static struct http_reply refused_step(int port, const struct bt_shape *sh,
                                      const char *const *ids, int n, const int *starts, int big)
{
    struct bt_step st;
    bt_step_new(&st, sh, n, 1, 2, NULL);
    if (big)
        st.k[big - 1][1] = 70000.0f;
    json_t *b = bt_post_body(sh, &st, id_array(ids, n), 0);
    if (starts) {
        json_object_set_new(b, "sequence_start", bools(starts, n));
        json_object_set_new(b, "kv_cache_dtype", json_string(bt_dtype_names[sh->dtype]));
    }
    return seqt_attention(port, b);
}

Test(sequence_batches, a_refused_item_refuses_the_batch_and_changes_no_sequence)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape *sh = &shapes[t];
        char a_[32], b_[32], c_[32], ghost[32], fresh[32], msg[96];
        snprintf(a_, 32, "aon-a-%d", t), snprintf(b_, 32, "aon-b-%d", t);
        snprintf(c_, 32, "aon-c-%d", t), snprintf(ghost, 32, "ghost-%d", t);
        snprintf(fresh, 32, "aon-new-%d", t);
        const char *ids[3] = {a_, b_, c_};
        static struct bt_hist h[3];
        memset(h, 0, sizeof h);
        const int P[3] = {3, 1, 2};
        for (int b = 0; b < 3; b++)
            one_step(s.port, sh, ids[b], &h[b], 0, P[b], 1, 1);
        /* an unknown id: its index and id named */
        const char *with_ghost[3] = {a_, ghost, c_};
        struct http_reply a = refused_step(s.port, sh, with_ghost, 3, NULL, 0);
        snprintf(msg, sizeof msg, "sequence_id[1] '%s'", ghost);
        expect_error(&a, 400, "sequence_not_found", msg);
        free(a.body);
        /* a start of a new id and a restart in a refused batch: neither happens */
        const char *starting[3] = {fresh, a_, ghost};
        a = refused_step(s.port, sh, starting, 3, (const int[]){1, 1, 0}, 0);
        snprintf(msg, sizeof msg, "sequence_id[2] '%s'", ghost);
        bt_expect_refusal(&a, 400, msg, NULL);
        free(a.body);
        struct bt_step st;
        bt_step_new(&st, sh, 1, 1, 1, NULL);
        a = seqt_attention(s.port, bt_post_body(sh, &st, json_string(fresh), 0));
        snprintf(msg, sizeof msg, "'%s'", fresh);
        expect_error(&a, 400, "sequence_not_found", msg);
        free(a.body);
        /* a value beyond the cache's range in the last item */
        if (sh->dtype == BT_FP16) {
            a = refused_step(s.port, sh, ids, 3, NULL, 3);
            snprintf(msg, sizeof msg, "sequence_id[2] '%s'", c_);
            bt_expect_refusal(&a, 400, msg, NULL);
            free(a.body);
        }
        /* every cache as it was: the next step of each equals the stateless
         * answer over the history without the refused rows */
        for (int b = 0; b < 3; b++)
            cr_assert_eq(bt_probe(s.port, sh, ids[b], 0, &h[b]), P[b] + 1);
    }
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 9);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_batches, the_same_id_twice_is_400_and_changes_nothing)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape *sh = &shapes[t];
        char a_[32], n_[32], x_[32], msg[120];
        snprintf(a_, 32, "twice-a-%d", t), snprintf(n_, 32, "4%d", t);
        snprintf(x_, 32, "twice-x-%d", t);
        static struct bt_hist h[2];
        memset(h, 0, sizeof h);
        one_step(s.port, sh, a_, &h[0], 0, 2, 1, 1);
        one_step(s.port, sh, n_, &h[1], 0, 3, 1, 1);
        const char *aba[3] = {a_, n_, a_};
        struct http_reply a = refused_step(s.port, sh, aba, 3, NULL, 0);
        snprintf(msg, sizeof msg, "sequence_id[2] '%s' is also sequence_id[0]", a_);
        expect_error(&a, 400, "invalid_parameter", msg);
        free(a.body);
        /* 4t and "4t" are one id */
        json_t *ids = json_pack("[s, i, s]", a_, 40 + t, n_);
        struct bt_step st;
        bt_step_new(&st, sh, 3, 1, 1, NULL);
        a = seqt_attention(s.port, bt_post_body(sh, &st, ids, 0));
        snprintf(msg, sizeof msg, "sequence_id[2] '%s' is also sequence_id[1]", n_);
        expect_error(&a, 400, "invalid_parameter", msg);
        free(a.body);
        /* twice in a start: no sequence made */
        const char *xx[2] = {x_, x_};
        a = refused_step(s.port, sh, xx, 2, (const int[]){1, 1}, 0);
        snprintf(msg, sizeof msg, "sequence_id[1] '%s' is also sequence_id[0]", x_);
        expect_error(&a, 400, "invalid_parameter", msg);
        free(a.body);
        cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2 * (t + 1));
        cr_assert_eq(bt_probe(s.port, sh, a_, 0, &h[0]), 3);
        cr_assert_eq(bt_probe(s.port, sh, n_, 0, &h[1]), 4);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Ends                                                                    */

/* A one-row step of id at layer is refused: no such sequence. */
static void expect_gone(int port, const struct bt_shape *sh, const char *id, int layer)
{
    struct bt_step st;
    bt_step_new(&st, sh, 1, 1, 1, NULL);
    struct http_reply a = seqt_attention(port, bt_post_body(sh, &st, json_string(id), layer));
    char quoted[64];
    snprintf(quoted, sizeof quoted, "'%s'", id);
    expect_error(&a, 400, "sequence_not_found", quoted);
    free(a.body);
}

Test(sequence_batches, an_end_by_arrays_frees_every_item_and_layer)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape *sh = &shapes[t];
        const char *ids[4] = {"end-a", "end-b", "end-c", "end-d"};
        static struct bt_hist h[4][2];
        memset(h, 0, sizeof h);
        struct bt_hist *p[BT_MAXB];
        for (int b = 0; b < 4; b++)
            one_step(s.port, sh, ids[b], &h[b][0], 0, 1 + b, 1, 1);
        for (int l = 0; l < 2; l++) {
            LAYER_OF(h, l, p, 0, 1, 2, 3);
            batch_step(s.port, sh, ids, 4, p, l, 2, 1, 0);
        }
        /* sequence_end as an array on a step: that item goes after its answer */
        LAYER_OF(h, 1, p, 2, 3);
        struct bt_step st;
        bt_step_new(&st, sh, 2, 1, 1, p);
        json_t *b = bt_post_body(sh, &st, id_array(ids + 2, 2), 1);
        json_object_set_new(b, "sequence_end", bools((const int[]){0, 1}, 2));
        struct http_reply a = seqt_attention(s.port, b);
        struct bt_answer ans;
        bt_post_answer(&a, &ans);
        bt_check(s.port, sh, &st, p, &ans, 1, "a batch ending its item 1");
        expect_gone(s.port, sh, "end-d", 0);
        bt_probe(s.port, sh, "end-c", 0, &h[2][0]);
        /* refused ends change nothing: an unknown id; start and end mixed */
        a = seqt_attention(s.port, json_pack("{s:[s, s], s:b}", "sequence_id", "end-a",
                                             "end-ghost", "sequence_end", 1));
        expect_error(&a, 400, "sequence_not_found", "sequence_id[1] 'end-ghost'");
        free(a.body);
        a = seqt_attention(s.port, json_pack("{s:[s, s], s:[b, b], s:[b, b]}", "sequence_id",
                                             "end-a", "end-b", "sequence_start", 0, 1,
                                             "sequence_end", 1, 0));
        cr_assert_eq(a.status, 400, "%s", a.body);
        free(a.body);
        bt_probe(s.port, sh, "end-a", 1, &h[0][1]);
        /* an end without a query ends every item, every layer */
        a = seqt_attention(s.port, json_pack("{s:[s, s, s], s:b}", "sequence_id", "end-a",
                                             "end-b", "end-c", "sequence_end", 1));
        cr_assert_eq(a.status, 200, "%s", a.body);
        json_t *j = json_loadb(a.body, a.len, 0, NULL);
        json_t *want = json_pack("{s:[i, i, i]}", "cache_length", 0, 0, 0);
        cr_assert(json_equal(j, want), "%s", a.body);
        json_decref(j), json_decref(want);
        free(a.body);
        for (int i = 0; i < 3; i++)
            for (int l = 0; l < 2; l++)
                expect_gone(s.port, sh, ids[i], l);
        bt_expect_no_sequences(s.port);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* X-Sequence-Id                                                           */

Test(sequence_batches, x_sequence_id_is_the_batch_placement_key_not_an_id)
{
    struct server s;
    server_start(&s, NULL);
    const struct bt_shape *sh = &shapes[0];
    const char *ids[2] = {"place-a", "place-b"};
    static struct bt_hist h[2];
    struct bt_hist *p[2] = {&h[0], &h[1]};
    one_step(s.port, sh, ids[0], &h[0], 0, 3, 1, 1);
    one_step(s.port, sh, ids[1], &h[1], 0, 1, 1, 1);
    /* a key that is none of the ids, or one of them: either routes only */
    const char *keys[3] = {"X-Sequence-Id: rack-7", "X-Sequence-Id: place-b",
                           "X-Sequence-Id: 42"};
    for (int k = 0; k < 3; k++) {
        struct bt_step st;
        bt_step_new(&st, sh, 2, 1, 1, p);
        const char *const hdr[] = {keys[k], NULL};
        struct http_reply a = seqt_send_json(s.port, "/attention",
                                             bt_post_body(sh, &st, id_array(ids, 2), 0), hdr);
        struct bt_answer ans;
        bt_post_answer(&a, &ans);
        bt_check(s.port, sh, &st, p, &ans, 1, keys[k]);
    }
    /* the key made no sequence */
    expect_gone(s.port, sh, "rack-7", 0);
    /* a key that is no id: 400 naming the header */
    char longkey[160];
    snprintf(longkey, sizeof longkey, "X-Sequence-Id: %0129d", 7);
    const char *const hdr[] = {longkey, NULL};
    struct bt_step st;
    bt_step_new(&st, sh, 2, 1, 1, NULL);
    struct http_reply a = seqt_send_json(s.port, "/attention",
                                         bt_post_body(sh, &st, id_array(ids, 2), 0), hdr);
    bt_expect_refusal(&a, 400, "X-Sequence-Id", NULL);
    free(a.body);
    cr_assert_eq(bt_probe(s.port, sh, ids[0], 0, &h[0]), 7);
    cr_assert_eq(server_stop(&s), 0);
}
