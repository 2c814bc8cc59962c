/* test_sequence_weights.c -- the built-in model's weights in a sequence's
 * layers (docs/sequences.md): a layer's first step keeps the weights it
 * gives; one that gives none takes those of the sequence's start (never
 * the identity in their place); later steps of a layer keep its own. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_util.h"
#include "tests/server/sequence_shared.h"

#define E 4
#define H 2

/* A one-row request: x as query, key and value; w (3E x E) or NULL; a step
 * of id on layer (id NULL: stateless, over the rows of hist (n of them)). */
static json_t *body(const float *x, const float *hist, int n, const float *w, const char *id,
                    int layer, int start)
{
    json_t *b = json_object();
    json_object_set_new(b, "query", seqt_mat(x, 1, E));
    json_object_set_new(b, "key", seqt_mat(id ? x : hist, id ? 1 : n, E));
    json_object_set_new(b, "value", seqt_mat(id ? x : hist, id ? 1 : n, E));
    json_object_set_new(b, "num_heads", json_integer(H));
    json_object_set_new(b, "need_weights", json_false());
    if (w) {
        json_t *ws = json_object();
        json_object_set_new(ws, "in_proj_weight", seqt_mat(w, 3 * E, E));
        json_object_set_new(b, "weights", ws);
    }
    if (id) {
        json_object_set_new(b, "sequence_id", json_string(id));
        json_object_set_new(b, "layer", json_integer(layer));
        if (start)
            json_object_set_new(b, "sequence_start", json_true());
    } else {
        json_object_set_new(b, "attn_mask", json_string("causal_lower_right"));
    }
    return b;
}

/* The answer's output row (200 expected). */
static void answer(int port, json_t *b, float *out)
{
    struct http_reply a = seqt_attention(port, b);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    cr_assert_eq(seqt_answer_floats(&a, "output", out, E), (size_t)E);
    free(a.body);
}

Test(sequence_weights, a_layer_without_weights_takes_the_starts)
{
    struct server s;
    server_start(&s, NULL);
    float w1[3 * E * E], w2[3 * E * E], x[3][E], got[E], want[E];
    seqt_fill(w1, 3 * E * E), seqt_fill(w2, 3 * E * E), seqt_fill(&x[0][0], 3 * E);
    answer(s.port, body(x[0], NULL, 0, w1, "wl", 0, 1), got);
    /* layer 1's first step gives none: the start's w1, not the identity */
    answer(s.port, body(x[1], NULL, 0, NULL, "wl", 1, 0), got);
    answer(s.port, body(x[1], x[1], 1, w1, NULL, 0, 0), want);
    seqt_expect_close(got, want, E, "layer 1 without weights (the start's)");
    answer(s.port, body(x[1], x[1], 1, NULL, NULL, 0, 0), want);
    cr_assert(memcmp(got, want, sizeof got), "layer 1 was stepped with the identity");
    /* layer 2 gives its own: kept for its later steps */
    answer(s.port, body(x[0], NULL, 0, w2, "wl", 2, 0), got);
    answer(s.port, body(x[0], x[0], 1, w2, NULL, 0, 0), want);
    seqt_expect_close(got, want, E, "layer 2 with its own weights");
    answer(s.port, body(x[1], NULL, 0, NULL, "wl", 2, 0), got);
    answer(s.port, body(x[1], &x[0][0], 2, w2, NULL, 0, 0), want);
    seqt_expect_close(got, want, E, "layer 2's second step (its own weights kept)");
    /* a later step of layer 0 that gives layer 2's weights: refused */
    struct http_reply a = seqt_attention(s.port, body(x[2], NULL, 0, w2, "wl", 0, 0));
    expect_error(&a, 400, "invalid_parameter", "weights differ");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}
