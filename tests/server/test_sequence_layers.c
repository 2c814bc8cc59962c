/* test_sequence_layers.c -- the layers of a sequence (docs/sequences.md)
 * over HTTP: each layer's steps equal the stateless answer over that
 * layer's own history, on both protocols and all three cache dtypes; a
 * start joins a layer without a cache and restarts the whole sequence on a
 * layer with one; an end on any layer frees every layer; `layer` outside
 * 0 .. max_layers-1 or outside a sequence is refused; memory, the budget
 * and eviction count whole sequences. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/batch_shared.h"
#include "tests/server/sequence_shared.h"

#define NL 4 /* layers a test uses */

/* A shape per cache dtype: grouped and multi-query KV heads, E 8 to 32. */
static const struct bt_shape shapes[3] = {
    {16, 4, 2, BT_FP32},
    {8, 2, 1, BT_FP16},
    {32, 4, 1, BT_BF16},
};

enum proto { POST, V2_JSON, V2_BINARY };

static const char *const proto_names[3] = {"POST", "v2 JSON", "v2 binary"};

/* One step of id at layer (S key/value rows, L query rows) on proto,
 * checked against the layer's history h, which it extends. */
static void layer_step(int port, enum proto p, const struct bt_shape *sh, const char *id,
                       struct bt_hist *h, int layer, int S, int L, int start)
{
    struct bt_step st;
    struct bt_hist *const hs[1] = {h};
    bt_step_new(&st, sh, 1, L, S, hs);
    char what[160];
    snprintf(what, sizeof what, "%s %s '%s' layer %d%s", proto_names[p],
             bt_dtype_names[sh->dtype], id, layer, start ? " (start)" : "");
    if (p == POST)
        bt_post_step_ok(port, sh, &st, hs, json_string(id), layer, start, what);
    else
        bt_v2_step_ok(port, sh, &st, hs, &id, BT_PARAM, p == V2_BINARY, layer, start, what);
}

/* A one-row step of id at layer on proto is refused as a sequence that
 * does not exist. */
static void expect_gone(int port, enum proto p, const struct bt_shape *sh, const char *id,
                        int layer)
{
    struct bt_step st;
    bt_step_new(&st, sh, 1, 1, 1, NULL);
    struct http_reply a;
    char quoted[160];
    snprintf(quoted, sizeof quoted, "'%s'", id);
    if (p == POST) {
        a = seqt_attention(port, bt_post_body(sh, &st, json_string(id), layer));
        expect_error(&a, 400, "sequence_not_found", quoted);
    } else {
        a = bt_v2_send(port, bt_v2_body(sh, &st, &id, 1, BT_PARAM, layer), p == V2_BINARY, NULL);
        expect_v2_error(&a, 400, "does not exist");
        cr_assert(strstr(a.body, quoted), "%s", a.body);
    }
    free(a.body);
}

/* End id on proto at layer without a step: 200. */
static void end_without_step(int port, enum proto p, const char *id, int layer)
{
    struct http_reply a;
    if (p == POST) {
        a = seqt_attention(port, json_pack("{s:s, s:b, s:i}", "sequence_id", id, "sequence_end",
                                           1, "layer", layer));
    } else {
        json_t *v = json_pack("{s:{s:s, s:b, s:i}}", "parameters", "sequence_id", id,
                              "sequence_end", 1, "layer", layer);
        a = bt_v2_send(port, v, 0, NULL);
    }
    cr_assert_eq(a.status, 200, "end of '%s' at layer %d: %ld %s", id, layer, a.status, a.body);
    free(a.body);
}

/* Every layer of one sequence, on every protocol and cache dtype. */
Test(sequence_layers, each_layer_equals_the_stateless_answer_over_its_own_history)
{
    struct server s;
    server_start(&s, NULL);
    for (int p = POST; p <= V2_BINARY; p++)
        for (int t = 0; t < 3; t++) {
            const struct bt_shape *sh = &shapes[t];
            char id[64];
            snprintf(id, sizeof id, "layers-%d-%s", p, bt_dtype_names[t]);
            static struct bt_hist h[NL];
            memset(h, 0, sizeof h);
            /* a prompt on layer 0; layer 1 begins at its first step */
            layer_step(s.port, p, sh, id, &h[0], 0, 5, 2, 1);
            layer_step(s.port, p, sh, id, &h[1], 1, 3, 1, 0);
            layer_step(s.port, p, sh, id, &h[0], 0, 1, 1, 0);
            /* a start on layer 2, which has no cache: it joins, the others kept */
            layer_step(s.port, p, sh, id, &h[2], 2, 4, 4, 1);
            layer_step(s.port, p, sh, id, &h[3], 3, 2, 1, 0);
            for (int l = 0; l < NL; l++) /* decode steps, every layer its own length */
                layer_step(s.port, p, sh, id, &h[l], l, 1, 1, 0);
            layer_step(s.port, p, sh, id, &h[1], 1, 2, 2, 0);
            for (int l = NL - 1; l >= 0; l--)
                layer_step(s.port, p, sh, id, &h[l], l, 1, 1, 0);
            cr_assert(h[0].len == 8 && h[1].len == 7 && h[2].len == 6 && h[3].len == 4);
            /* a start on layer 1, which has a cache: the whole sequence
             * starts afresh, every layer's cache from its next step */
            memset(h, 0, sizeof h);
            layer_step(s.port, p, sh, id, &h[1], 1, 2, 1, 1);
            layer_step(s.port, p, sh, id, &h[0], 0, 1, 1, 0);
            layer_step(s.port, p, sh, id, &h[3], 3, 3, 2, 0);
            layer_step(s.port, p, sh, id, &h[1], 1, 1, 1, 0);
            cr_assert(h[0].len == 1 && h[1].len == 3 && h[3].len == 3);
            /* an end on layer 2 (no cache there) frees every layer */
            end_without_step(s.port, p, id, 2);
            for (int l = 0; l < NL; l++)
                expect_gone(s.port, p, sh, id, l);
        }
    bt_expect_no_sequences(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* A step that ends the sequence on layer 3 answers over layer 3's cache,
 * then every layer is gone. */
Test(sequence_layers, an_end_with_a_step_on_one_layer_frees_every_layer)
{
    struct server s;
    server_start(&s, NULL);
    const struct bt_shape *sh = &shapes[0];
    static struct bt_hist h[NL];
    for (int l = 0; l < NL; l++)
        layer_step(s.port, POST, sh, "end-3", &h[l], l, 2 + l, 1, l == 0);
    struct bt_step st;
    struct bt_hist *const h3[1] = {&h[3]};
    bt_step_new(&st, sh, 1, 1, 1, h3);
    json_t *b = bt_post_body(sh, &st, json_string("end-3"), 3);
    json_object_set_new(b, "sequence_end", json_true());
    struct http_reply a = seqt_attention(s.port, b);
    struct bt_answer ans;
    bt_post_answer(&a, &ans);
    bt_check(s.port, sh, &st, h3, &ans, 0, "the ending step on layer 3");
    for (int l = 0; l < NL; l++)
        expect_gone(s.port, V2_JSON, sh, "end-3", l);
    bt_expect_no_sequences(s.port);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Bad `layer`                                                             */

/* A POST step of id (NULL: none) at layer (a JSON value, taken) is a 400
 * whose message contains msg. */
static void post_layer_refused(int port, const struct bt_shape *sh, const char *id,
                               json_t *layer, const char *msg)
{
    struct bt_step st;
    bt_step_new(&st, sh, 1, 1, 1, NULL);
    json_t *b = bt_post_body(sh, &st, json_string(id ? id : "x"), -1);
    if (!id)
        json_object_del(b, "sequence_id");
    json_object_set_new(b, "layer", layer);
    struct http_reply a = seqt_attention(port, b);
    expect_error(&a, 400, "invalid_parameter", msg);
    free(a.body);
}

static void v2_layer_refused(int port, const struct bt_shape *sh, const char *id,
                             json_t *layer, const char *msg)
{
    struct bt_step st;
    bt_step_new(&st, sh, 1, 1, 1, NULL);
    const char *some = id ? id : "x";
    json_t *v = bt_v2_body(sh, &st, &some, 1, BT_PARAM, -1);
    json_t *par = json_object_get(v, "parameters");
    if (!id)
        json_object_del(par, "sequence_id");
    json_object_set_new(par, "layer", layer);
    struct http_reply a = bt_v2_send(port, v, 0, NULL);
    expect_v2_error(&a, 400, msg);
    free(a.body);
}

Test(sequence_layers, a_layer_out_of_range_or_outside_a_sequence_is_400_naming_layer)
{
    struct server s;
    const char *const flags[] = {"--max-layers", "4", NULL};
    server_start(&s, flags);
    const struct bt_shape *sh = &shapes[1];
    static struct bt_hist h[NL];
    layer_step(s.port, POST, sh, "lim", &h[3], 3, 2, 1, 1); /* a start on layer 3 */
    layer_step(s.port, POST, sh, "lim", &h[0], 0, 1, 1, 0);
    const char *ids[2] = {"lim", NULL};
    for (int i = 0; i < 2; i++) {
        post_layer_refused(s.port, sh, ids[i], json_integer(4), "layer");
        post_layer_refused(s.port, sh, ids[i], json_integer(-1), "layer");
        post_layer_refused(s.port, sh, ids[i], json_string("2"), "layer");
        post_layer_refused(s.port, sh, ids[i], json_real(1.5), "layer");
        v2_layer_refused(s.port, sh, ids[i], json_integer(4), "layer");
        v2_layer_refused(s.port, sh, ids[i], json_integer(-1), "layer");
    }
    /* a layer inside its range, without a sequence: the rule named */
    post_layer_refused(s.port, sh, NULL, json_integer(1), "layer applies to a sequence only");
    v2_layer_refused(s.port, sh, NULL, json_integer(1), "layer applies to a sequence only");
    post_layer_refused(s.port, sh, NULL, json_integer(0), "layer applies to a sequence only");
    /* a start on a layer without a cache that fixes other things: no join */
    struct bt_step st;
    bt_step_new(&st, sh, 1, 1, 1, NULL);
    json_t *b = bt_post_body(sh, &st, json_string("lim"), 2);
    json_object_set_new(b, "sequence_start", json_true());
    json_object_set_new(b, "kv_cache_dtype", json_string("BF16")); /* lim is FP16 */
    struct http_reply a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "kv_cache_dtype");
    free(a.body);
    /* none of these changed a cache; no layer is layer 0 */
    cr_assert_eq(bt_probe(s.port, sh, "lim", 3, &h[3]), 3);
    cr_assert_eq(bt_probe(s.port, sh, "lim", -1, &h[0]), 2);
    cr_assert_eq(bt_probe(s.port, sh, "lim", 0, &h[0]), 3);
    cr_assert_eq(server_stop(&s), 0);
    /* the default: 256 layers */
    server_start(&s, NULL);
    static struct bt_hist g[2];
    layer_step(s.port, V2_JSON, sh, "deep", &g[0], 255, 1, 1, 1);
    layer_step(s.port, POST, sh, "deep", &g[1], 0, 2, 1, 0);
    post_layer_refused(s.port, sh, "deep", json_integer(256), "layer");
    v2_layer_refused(s.port, sh, "deep", json_integer(256), "layer");
    cr_assert_eq(bt_probe(s.port, sh, "deep", 255, &g[0]), 2);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Memory, the budget and eviction count whole sequences                   */

Test(sequence_layers, the_bytes_count_every_layer_and_an_end_frees_them)
{
    struct server s;
    server_start(&s, NULL);
    for (int t = 0; t < 3; t++) {
        const struct bt_shape sh = {16, 4, 2, (enum bt_dtype)t};
        static struct bt_hist h[3];
        memset(h, 0, sizeof h);
        double bytes[4] = {server_metric(s.port, "attention_sequence_bytes")};
        for (int l = 0; l < 3; l++) {
            layer_step(s.port, POST, &sh, "mem", &h[l], l, 3, 1, l == 0);
            bytes[l + 1] = server_metric(s.port, "attention_sequence_bytes");
        }
        const double layer = bytes[3] - bytes[2];
        cr_assert(bytes[0] == 0 && layer > 0 && bytes[2] - bytes[1] == layer &&
                      bytes[1] >= layer,
                  "%s: bytes %g, %g, %g, %g after 0 to 3 layers", bt_dtype_names[t], bytes[0],
                  bytes[1], bytes[2], bytes[3]);
        /* the next rows fit the blocks the layers have: nothing more */
        layer_step(s.port, POST, &sh, "mem", &h[1], 1, 2, 1, 0);
        cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), bytes[3]);
        end_without_step(s.port, t == 1 ? V2_JSON : POST, "mem", t);
        bt_expect_no_sequences(s.port);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* A step of id at layer: S rows 1 wide projected to 512 (one head), so
 * that a block of a layer's cache (256 tokens) holds 1 MiB in FP32. The
 * same weights on every step (a layer's first step without them would be
 * refused: the key is not E wide). */
static struct http_reply wide_step(int port, const char *id, int layer, int S, int start)
{
    static float w[512];
    if (w[0] == 0)
        seqt_fill(w, 512);
    float q[512], kv[64];
    seqt_fill(q, 512);
    seqt_fill(kv, (size_t)S);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b, s:i}", "query", seqt_mat(q, 1, 512),
                          "key", seqt_mat(kv, S, 1), "value", seqt_mat(kv, S, 1), "num_heads",
                          1, "sequence_id", id, "need_weights", 0, "layer", layer);
    json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "k_proj_weight",
                                                seqt_mat(w, 512, 1), "v_proj_weight",
                                                seqt_mat(w, 512, 1)));
    if (start)
        json_object_set_new(b, "sequence_start", json_true());
    return seqt_attention(port, b);
}

static void wide_ok(int port, const char *id, int layer, int S, int start, long long len)
{
    struct http_reply a = wide_step(port, id, layer, S, start);
    cr_assert_eq(a.status, 200, "'%s' layer %d: %ld %s", id, layer, a.status, a.body);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), len, "%s", a.body);
    free(a.body);
}

Test(sequence_layers, max_sequence_bytes_counts_every_layer_and_evicts_whole_sequences)
{
    struct server s;
    /* two layers' blocks (1 MiB each) and the kept weights fit, three do not */
    const char *const flags[] = {"--max-sequence-bytes", "2560K", NULL};
    server_start(&s, flags);
    wide_ok(s.port, "big", 0, 10, 1, 10);
    wide_ok(s.port, "big", 1, 20, 0, 20);
    const double two = server_metric(s.port, "attention_sequence_bytes");
    cr_assert_geq(two, 2 << 20);
    /* a third layer would make its own sequence pass the budget: never */
    struct http_reply a = wide_step(s.port, "big", 2, 1, 0);
    expect_error(&a, 413, "payload_too_large", "max_sequence_bytes");
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), two);
    wide_ok(s.port, "big", 0, 1, 0, 11); /* as it was */
    wide_ok(s.port, "big", 1, 1, 0, 21);
    /* a new sequence needs a block: the idle one goes, every layer of it */
    wide_ok(s.port, "next", 3, 5, 1, 5);
    for (int l = 0; l < 2; l++) {
        a = wide_step(s.port, "big", l, 1, 0);
        expect_error(&a, 400, "sequence_not_found", "'big'");
        free(a.body);
    }
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 1);
    cr_assert_lt(server_metric(s.port, "attention_sequence_bytes"), two);
    cr_assert_eq(server_stop(&s), 0);
}

/* With max_sequences 2, a new sequence evicts the least recently used
 * whole: a step on any layer is a use, and all the layers go. */
Test(sequence_layers, eviction_takes_a_whole_sequence)
{
    for (int k = 0; k < 9; k++) { /* every protocol, every dtype */
        const int t = k % 3;
        const enum proto p = (enum proto)(k / 3);
        struct server s;
        const char *const flags[] = {"--max-sequences", "2", NULL};
        server_start(&s, flags);
        const struct bt_shape *sh = &shapes[t];
        static struct bt_hist a[2], b[2], c[1];
        memset(a, 0, sizeof a), memset(b, 0, sizeof b), memset(c, 0, sizeof c);
        layer_step(s.port, p, sh, "ev-a", &a[0], 0, 3, 1, 1);
        const double one = server_metric(s.port, "attention_sequence_bytes");
        layer_step(s.port, p, sh, "ev-b", &b[0], 0, 2, 1, 1);
        layer_step(s.port, p, sh, "ev-b", &b[1], 1, 2, 1, 0);
        layer_step(s.port, p, sh, "ev-a", &a[1], 1, 1, 1, 0); /* a is now the newest */
        const double before = server_metric(s.port, "attention_sequence_bytes");
        cr_assert_eq(before, 4 * one, "%s %s: %g bytes for 4 layers of %g", proto_names[p],
                     bt_dtype_names[t], before, one);
        layer_step(s.port, p, sh, "ev-c", &c[0], 2, 1, 1, 1);
        for (int l = 0; l < 2; l++)
            expect_gone(s.port, p, sh, "ev-b", l);
        cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
        cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
        cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), 3 * one);
        for (int l = 0; l < 2; l++) /* a kept every layer, as it was */
            bt_probe(s.port, sh, "ev-a", l, &a[l]);
        cr_assert_eq(server_stop(&s), 0);
    }
}
