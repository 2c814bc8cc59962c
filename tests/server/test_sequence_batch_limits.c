/* test_sequence_batch_limits.c -- bad batches of sequences and the limits
 * that apply to them over POST /attention (docs/sequences.md): ids that are
 * no ids, shapes that do not match the ids, more items than max_batch,
 * masks a batch does not take, max_source_len per item, a layout other
 * than an item's start; each refusal names the field and item and changes
 * no sequence. A batch start evicts whole sequences; batches that share
 * sequences take turns. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/batch_shared.h"
#include "tests/server/sequence_shared.h"

static const struct bt_shape sh16 = {16, 4, 2, BT_FP32};

/* One item's step in the scalar form at layer, checked against h. */
static void one_step(int port, const struct bt_shape *sh, const char *id, struct bt_hist *h,
                     int layer, int S, int start)
{
    struct bt_step st;
    struct bt_hist *const hs[1] = {h};
    bt_step_new(&st, sh, 1, 1, S, hs);
    bt_post_step_ok(port, sh, &st, hs, json_string(id), layer, start, id);
}

/* A batch body of n items (S rows each, not kept) for ids (a JSON array,
 * taken). */
static json_t *batch_body(const struct bt_shape *sh, json_t *ids, int n, int S)
{
    struct bt_step st;
    bt_step_new(&st, sh, n, 1, S, NULL);
    return bt_post_body(sh, &st, ids, 0);
}

/* req (a body, taken) is refused with status, its message saying text
 * and more (or NULL). */
static void refused(int port, json_t *req, long status, const char *text, const char *more)
{
    struct http_reply a = seqt_attention(port, req);
    bt_expect_refusal(&a, status, text, more);
    free(a.body);
}

Test(sequence_batch_limits, ids_that_are_no_ids_are_400_naming_the_index)
{
    struct server s;
    server_start(&s, NULL);
    static struct bt_hist h[2];
    one_step(s.port, &sh16, "ok-a", &h[0], 0, 2, 1);
    one_step(s.port, &sh16, "ok-b", &h[1], 0, 1, 1);
    refused(s.port, batch_body(&sh16, json_pack("[s, i]", "ok-a", 0), 2, 1), 400,
            "sequence_id[1]", NULL);
    refused(s.port, batch_body(&sh16, json_pack("[s, s]", "ok-a", ""), 2, 1), 400,
            "sequence_id[1]", NULL);
    refused(s.port, batch_body(&sh16, json_pack("[s, b]", "ok-a", 1), 2, 1), 400,
            "sequence_id[1]", NULL);
    refused(s.port, batch_body(&sh16, json_pack("[i, s]", -3, "ok-b"), 2, 1), 400,
            "sequence_id[0]", NULL);
    char longid[160];
    snprintf(longid, sizeof longid, "%0129d", 5);
    refused(s.port, batch_body(&sh16, json_pack("[s, s]", "ok-a", longid), 2, 1), 400,
            "sequence_id[1]", NULL);
    /* no ids at all */
    struct bt_step st;
    bt_step_new(&st, &sh16, 1, 1, 1, NULL);
    json_t *b = bt_post_body(&sh16, &st, json_string("ok-a"), 0);
    json_object_set_new(b, "sequence_id", json_array());
    refused(s.port, b, 400, "sequence_id", NULL);
    cr_assert_eq(bt_probe(s.port, &sh16, "ok-a", 0, &h[0]), 3);
    cr_assert_eq(bt_probe(s.port, &sh16, "ok-b", 0, &h[1]), 2);
    cr_assert_eq(server_stop(&s), 0);
}

/* req (taken), whose query does not match its ids, is a 400 naming the
 * query or the ids. */
static void mismatch(int port, json_t *req)
{
    struct http_reply a = seqt_attention(port, req);
    bt_expect_refusal(&a, 400, NULL, NULL);
    cr_assert(strstr(a.body, "query") || strstr(a.body, "sequence_id"), "%s", a.body);
    free(a.body);
}

Test(sequence_batch_limits, the_tensors_and_flags_must_match_the_ids)
{
    struct server s;
    const char *const flags[] = {"--max-batch", "2", NULL};
    server_start(&s, flags);
    static struct bt_hist h[3];
    const char *ids[3] = {"m-a", "m-b", "m-c"};
    for (int i = 0; i < 3; i++)
        one_step(s.port, &sh16, ids[i], &h[i], 0, 1 + i, 1);
    /* more items than max_batch */
    struct http_reply a = seqt_attention(
        s.port, batch_body(&sh16, json_pack("[s, s, s]", "m-a", "m-b", "m-c"), 3, 1));
    cr_assert(a.status == 400 || a.status == 413, "%ld %s", a.status, a.body);
    bt_expect_refusal(&a, a.status, "max_batch", NULL);
    free(a.body);
    /* a query of rank 2 with an array of ids; 3 ids for 2 items */
    struct bt_step st;
    bt_step_new(&st, &sh16, 1, 1, 1, NULL);
    json_t *b = bt_post_body(&sh16, &st, json_string("m-a"), 0);
    json_object_set_new(b, "sequence_id", json_pack("[s]", "m-a"));
    mismatch(s.port, b);
    b = batch_body(&sh16, json_pack("[s, s]", "m-a", "m-b"), 2, 1);
    json_object_set_new(b, "sequence_id", json_pack("[s]", "m-c"));
    mismatch(s.port, b);
    /* key of another batch size than query */
    b = batch_body(&sh16, json_pack("[s, s]", "m-a", "m-b"), 2, 1);
    json_array_remove(json_object_get(b, "key"), 1);
    refused(s.port, b, 400, "key", NULL);
    /* flags: B of them, and arrays only with an array of ids */
    b = batch_body(&sh16, json_pack("[s, s]", "m-a", "m-b"), 2, 1);
    json_object_set_new(b, "sequence_start", json_pack("[b, b, b]", 0, 0, 0));
    refused(s.port, b, 400, "sequence_start", NULL);
    b = batch_body(&sh16, json_pack("[s, s]", "m-a", "m-b"), 2, 1);
    json_object_set_new(b, "sequence_end", json_pack("[b]", 1));
    refused(s.port, b, 400, "sequence_end", NULL);
    bt_step_new(&st, &sh16, 1, 1, 1, NULL);
    b = bt_post_body(&sh16, &st, json_string("m-a"), 0);
    json_object_set_new(b, "sequence_end", json_pack("[b]", 1));
    refused(s.port, b, 400, "sequence_end", NULL);
    b = batch_body(&sh16, json_pack("[s, s]", "m-a", "m-b"), 2, 1);
    json_object_set_new(b, "sequence_start", json_pack("[i, i]", 0, 1));
    refused(s.port, b, 400, "sequence_start", NULL);
    for (int i = 0; i < 3; i++) /* nothing changed */
        cr_assert_eq(bt_probe(s.port, &sh16, ids[i], 0, &h[i]), 2 + i);
    cr_assert_eq(server_stop(&s), 0);
}

/* A (B, L, S) boolean mask of false. */
static json_t *false_mask(int B, int L, int S)
{
    json_t *m = json_array();
    for (int b = 0; b < B; b++) {
        json_t *r = json_array();
        for (int i = 0; i < L; i++) {
            json_t *c = json_array();
            for (int j = 0; j < S; j++)
                json_array_append_new(c, json_false());
            json_array_append_new(r, c);
        }
        json_array_append_new(m, r);
    }
    return m;
}

Test(sequence_batch_limits, mask_tensors_are_400_and_causal_works_as_for_one_sequence)
{
    struct server s;
    server_start(&s, NULL);
    static struct bt_hist h[2];
    struct bt_hist *p[2] = {&h[0], &h[1]};
    one_step(s.port, &sh16, "mk-a", &h[0], 0, 3, 1);
    one_step(s.port, &sh16, "mk-b", &h[1], 0, 1, 1);
    /* shaped for the caches after the step, (2, 1, 4) and (2, 4): still 400 */
    json_t *b = batch_body(&sh16, json_pack("[s, s]", "mk-a", "mk-b"), 2, 1);
    json_object_set_new(b, "key_padding_mask", json_pack("[[b, b, b, b], [b, b, b, b]]", 0, 0, 0,
                                                         0, 0, 0, 0, 0));
    refused(s.port, b, 400, "key_padding_mask", NULL);
    b = batch_body(&sh16, json_pack("[s, s]", "mk-a", "mk-b"), 2, 1);
    json_object_set_new(b, "attn_mask", false_mask(2, 1, 4));
    refused(s.port, b, 400, "attn_mask", NULL);
    /* "causal": lower-right inside a sequence, as without it */
    const char *words[2] = {"causal", "causal_lower_right"};
    for (int w = 0; w < 2; w++) {
        struct bt_step st;
        bt_step_new(&st, &sh16, 2, 2, 2, p);
        b = bt_post_body(&sh16, &st, json_pack("[s, s]", "mk-a", "mk-b"), 0);
        json_object_set_new(b, "attn_mask", json_string(words[w]));
        struct http_reply a = seqt_attention(s.port, b);
        struct bt_answer ans;
        bt_post_answer(&a, &ans);
        bt_check(s.port, &sh16, &st, p, &ans, 1, words[w]);
    }
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_batch_limits, averaged_weights_are_b_l_smax_padded_with_zeros)
{
    struct server s;
    server_start(&s, NULL);
    static struct bt_hist h[2];
    one_step(s.port, &sh16, "avg-a", &h[0], 0, 5, 1);
    one_step(s.port, &sh16, "avg-b", &h[1], 0, 1, 1);
    json_t *b = batch_body(&sh16, json_pack("[s, s]", "avg-a", "avg-b"), 2, 2);
    json_object_set_new(b, "average_attn_weights", json_true());
    struct http_reply a = seqt_attention(s.port, b);
    struct bt_answer ans;
    bt_post_answer(&a, &ans);
    const int len[2] = {7, 3};
    cr_assert(ans.wrd == 3 && ans.wshape[0] == 2 && ans.wshape[1] == 1 && ans.wshape[2] == 7,
              "weights of rank %d (%lld, %lld, %lld)", ans.wrd, ans.wshape[0], ans.wshape[1],
              ans.wshape[2]);
    cr_assert(ans.nlen == 2 && ans.len[0] == 7 && ans.len[1] == 3);
    for (int i = 0; i < 2; i++) {
        double sum = 0;
        for (int j = 0; j < 7; j++) {
            const float x = ans.w[i * 7 + j];
            if (j < len[i])
                sum += x;
            else
                cr_assert_eq(x, 0.0f, "item %d key %d past its length: %g", i, j, (double)x);
        }
        cr_assert(sum > 1 - 1e-5 && sum < 1 + 1e-5, "item %d's weights sum to %g", i, sum);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Limits per item and per sequence                                        */

Test(sequence_batch_limits, max_source_len_applies_to_each_item)
{
    struct server s;
    const char *const flags[] = {"--max-source-len", "8", NULL};
    server_start(&s, flags);
    static struct bt_hist h[2];
    struct bt_hist *p[2] = {&h[0], &h[1]};
    one_step(s.port, &sh16, "cap-a", &h[0], 0, 6, 1);
    one_step(s.port, &sh16, "cap-b", &h[1], 0, 2, 1);
    refused(s.port, batch_body(&sh16, json_pack("[s, s]", "cap-a", "cap-b"), 2, 3), 400,
            "sequence_id[0] 'cap-a'", "max_source_len");
    struct bt_step st; /* both still fit two more rows */
    bt_step_new(&st, &sh16, 2, 1, 2, p);
    bt_post_step_ok(s.port, &sh16, &st, p, json_pack("[s, s]", "cap-a", "cap-b"), 0, 0,
                    "a batch up to max_source_len");
    cr_assert_eq(h[0].len, 8);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_batch_limits, a_layout_other_than_an_items_start_refuses_the_batch)
{
    struct server s;
    server_start(&s, NULL);
    static struct bt_hist h[2];
    const struct bt_shape mq = {16, 4, 1, BT_FP32}; /* b: one KV head */
    one_step(s.port, &sh16, "lay-a", &h[0], 0, 2, 1);
    one_step(s.port, &mq, "lay-b", &h[1], 0, 2, 1);
    refused(s.port, batch_body(&sh16, json_pack("[s, s]", "lay-a", "lay-b"), 2, 1), 400,
            "sequence_id[1] 'lay-b'", "num_kv_heads");
    cr_assert_eq(bt_probe(s.port, &sh16, "lay-a", 0, &h[0]), 3);
    cr_assert_eq(bt_probe(s.port, &mq, "lay-b", 0, &h[1]), 3);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_batch_limits, a_batch_start_evicts_whole_sequences)
{
    struct server s;
    const char *const flags[] = {"--max-sequences", "3", NULL};
    server_start(&s, flags);
    static struct bt_hist h[4][2];
    one_step(s.port, &sh16, "bx-a", &h[0][0], 0, 2, 1);
    one_step(s.port, &sh16, "bx-b", &h[1][0], 0, 2, 1);
    one_step(s.port, &sh16, "bx-b", &h[1][1], 1, 1, 0);
    one_step(s.port, &sh16, "bx-a", &h[0][1], 1, 1, 0); /* b is now the oldest */
    struct bt_step st;
    struct bt_hist *p[2] = {&h[2][0], &h[3][0]};
    bt_step_new(&st, &sh16, 2, 1, 3, p);
    bt_post_step_ok(s.port, &sh16, &st, p, json_pack("[s, s]", "bx-c", "bx-d"), 0, 1,
                    "a batch start of two");
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 3);
    for (int l = 0; l < 2; l++) {
        struct bt_step one;
        bt_step_new(&one, &sh16, 1, 1, 1, NULL);
        struct http_reply a = seqt_attention(s.port,
                                             bt_post_body(&sh16, &one, json_string("bx-b"), l));
        expect_error(&a, 400, "sequence_not_found", "'bx-b'");
        free(a.body);
        bt_probe(s.port, &sh16, "bx-a", l, &h[0][l]);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Batches that share sequences, at once                                   */

enum { RACE_T = 4, RACE_N = 8 };

struct racer {
    int port;
    const char *ids[2];
    long long lens[RACE_N][2]; /* each step's cache lengths, -1: failed */
};

/* RACE_N one-row steps of the batch r->ids (no assert off the main thread). */
static void *race(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < RACE_N; i++) {
        struct bt_step st;
        bt_step_new(&st, &sh16, 2, 1, 1, NULL); /* (rnd is not thread-safe: any values do) */
        json_t *b = bt_post_body(&sh16, &st, json_pack("[s, s]", r->ids[0], r->ids[1]), 0);
        json_object_set_new(b, "need_weights", json_false());
        char *text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        struct http_reply a = request(r->port, "POST", "/attention", text, strlen(text), NULL, 0);
        free(text);
        json_t *j = a.status == 200 ? json_loadb(a.body, a.len, 0, NULL) : NULL;
        json_t *cl = json_object_get(j, "cache_length");
        for (int k = 0; k < 2; k++)
            r->lens[i][k] = json_array_size(cl) == 2 ? json_integer_value(json_array_get(cl, k))
                                                     : -1;
        json_decref(j);
        free(a.body);
    }
    return NULL;
}

/* Four batches over three sequences, in either order, at once: every step
 * of a sequence sees its own cache length (none twice, none lost), and no
 * two batches wait for each other for ever (a step that never comes back
 * fails at the client's timeout, 120 s). */
Test(sequence_batch_limits, batches_sharing_sequences_take_turns)
{
    struct server s;
    const char *const flags[] = {"--workers", "4", NULL};
    server_start(&s, flags);
    const char *names[3] = {"race-a", "race-b", "race-c"};
    static struct bt_hist h[3];
    for (int i = 0; i < 3; i++)
        one_step(s.port, &sh16, names[i], &h[i], 0, 1, 1);
    const int pairs[RACE_T][2] = {{0, 1}, {1, 0}, {0, 2}, {2, 1}};
    struct racer r[RACE_T];
    pthread_t th[RACE_T];
    for (int t = 0; t < RACE_T; t++) {
        r[t] = (struct racer){.port = s.port,
                              .ids = {names[pairs[t][0]], names[pairs[t][1]]}};
        pthread_create(&th[t], NULL, race, &r[t]);
    }
    int seen[3][2 + RACE_T * RACE_N] = {{0}}, steps[3] = {0};
    for (int t = 0; t < RACE_T; t++) {
        pthread_join(th[t], NULL);
        for (int i = 0; i < RACE_N; i++)
            for (int k = 0; k < 2; k++) {
                const int q = pairs[t][k];
                const long long l = r[t].lens[i][k];
                cr_assert(l >= 2 && l < 2 + RACE_T * RACE_N, "%s: cache_length %lld",
                          names[q], l);
                cr_assert(!seen[q][l], "%s: two steps answered cache_length %lld", names[q], l);
                seen[q][l] = 1, steps[q]++;
            }
    }
    /* every step in the cache once: one more step of the three */
    struct http_reply a = seqt_attention(
        s.port, batch_body(&sh16, json_pack("[s, s, s]", names[0], names[1], names[2]), 3, 1));
    struct bt_answer ans;
    bt_post_answer(&a, &ans);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(ans.len[i], 1 + steps[i] + 1, "%s", names[i]);
    cr_assert_eq(server_stop(&s), 0);
}
