/* batch_shared.h -- what the tests of layers and batches of sequences
 * share (docs/sequences.md): the histories a client keeps, steps of B
 * items on either protocol, their answers, and the check that every item
 * of an answer equals the stateless request over that item's history.
 *
 * The built-in model is used without weights (identity projections) and
 * without RoPE, so a cache holds the key and value rows as sent, rounded
 * to its dtype: a history keeps them rounded, and the stateless request
 * over it is the exact reference for all three dtypes. */
#ifndef TESTS_BATCH_SHARED_H
#define TESTS_BATCH_SHARED_H

#include <jansson.h>

#include "tests/support/http_util.h"

#define BT_MAXB 4  /* items of a batch */
#define BT_MAXL 4  /* query rows of a step */
#define BT_MAXT 40 /* tokens of one history */
#define BT_MAXW 32 /* the widest row (E, or Hkv·d) */
#define BT_MAXH 4  /* heads */

/* seqt_round's order */
enum bt_dtype { BT_FP32, BT_FP16, BT_BF16 };

extern const char *const bt_dtype_names[3];

/* e wide queries, h heads, hkv KV heads (key/value rows hkv·e/h wide),
 * the cache's dtype. */
struct bt_shape {
    int e, h, hkv;
    enum bt_dtype dtype;
};

/* The width of a key or value row. */
int bt_kvw(const struct bt_shape *sh);

/* One layer's cache as the client knows it: every key and value row
 * appended so far, rounded to the cache's dtype. */
struct bt_hist {
    float k[BT_MAXT * BT_MAXW], v[BT_MAXT * BT_MAXW];
    int len;
};

/* The rows a step sends for each of its B items: L query rows, S key and
 * value rows (unrounded). */
struct bt_step {
    int B, L, S;
    float q[BT_MAXB][BT_MAXL * BT_MAXW];
    float k[BT_MAXB][BT_MAXT * BT_MAXW], v[BT_MAXB][BT_MAXT * BT_MAXW];
};

/* Fill st with random rows for B items; append each item's key/value
 * rows to hist[b] (hist may be NULL: a step expected to be refused). */
void bt_step_new(struct bt_step *st, const struct bt_shape *sh, int B, int L, int S,
                 struct bt_hist *const *hist);

/* Undo what bt_step_new appended (the step was refused). */
void bt_step_undo(const struct bt_step *st, struct bt_hist *const *hist);

/* ---------------------------------------------------------------------- */
/* Requests                                                                */

/* POST /attention body of st: ids a string (N = 1, rank 2 tensors) or an
 * array of st->B ids (rank 3); layer < 0 leaves it out. num_heads,
 * num_kv_heads and need_weights are set; the caller adds the rest. */
json_t *bt_post_body(const struct bt_shape *sh, const struct bt_step *st, json_t *ids, int layer);

/* How a v2 request carries its ids. */
enum bt_ids {
    BT_PARAM,  /* the parameter sequence_id (one item): a string */
    BT_PARAM_INT, /* the parameter, an integer (the id's digits) */
    BT_UINT64, /* the input tensor sequence_id, UINT64 (the ids' digits) */
    BT_BYTES,  /* the input tensor, BYTES */
};

/* A v2 infer request of st (NULL: no query, key, value) for ids (st->B
 * of them, or n when st is NULL), flat data; layer < 0 leaves it out. */
json_t *bt_v2_body(const struct bt_shape *sh, const struct bt_step *st, const char *const *ids,
                   int n, enum bt_ids how, int layer);

/* A BOOL input of n flags. */
json_t *bt_v2_bools(const char *name, const int *flags, int n);

/* POST v2 (taken) to /v2/models/attention/infer: binary, every input's
 * data as binary and every output asked binary; line (or NULL) one more
 * header line. */
struct http_reply bt_v2_send(int port, json_t *v2, int binary, const char *line);

/* ---------------------------------------------------------------------- */
/* Answers                                                                 */

/* An answer read back: output (B, L, E), weights (B, H, L, Smax), the
 * cache lengths; shape the dimensions each tensor came with. */
struct bt_answer {
    int B;
    long long len[BT_MAXB];
    int nlen;
    float out[BT_MAXB * BT_MAXL * BT_MAXW];
    float w[BT_MAXB * BT_MAXH * BT_MAXL * BT_MAXT];
    size_t nout, nw;
    long long oshape[4], wshape[5];
    int ord, wrd; /* ranks */
};

/* The answer a of POST /attention (200 asserted; a's body is freed). */
void bt_post_answer(struct http_reply *a, struct bt_answer *ans);

/* The answer a of v2 (200 asserted; a's body is freed); array: the
 * lengths from the output cache_length, else the parameter. */
void bt_v2_answer(struct http_reply *a, int array, struct bt_answer *ans);

/* Each item b of ans equals the stateless request (POST /attention over
 * hist[b], causal lower-right) for the query rows of st: output,
 * per-head weights (zeros past the item's length) and cache_length. array:
 * the batch form's shapes (B, L, E) and (B, H, L, Smax), else (L, E). */
void bt_check(int port, const struct bt_shape *sh, const struct bt_step *st,
              struct bt_hist *const *hist, const struct bt_answer *ans, int array,
              const char *what);

/* A step of st on POST /attention answers 200 and equals the stateless
 * answers; start: sequence_start true (and the dtype) for every item. */
void bt_post_step_ok(int port, const struct bt_shape *sh, const struct bt_step *st,
                     struct bt_hist *const *hist, json_t *ids, int layer, int start,
                     const char *what);

/* The same over v2. */
void bt_v2_step_ok(int port, const struct bt_shape *sh, const struct bt_step *st,
                   struct bt_hist *const *hist, const char *const *ids, enum bt_ids how,
                   int binary, int layer, int start, const char *what);

/* Reply a has status, and its body says text and more (either may be
 * NULL): a refusal that names what it must. */
void bt_expect_refusal(const struct http_reply *a, long status, const char *text,
                       const char *more);

/* A one-row POST step of id at layer, checked against hist (which it
 * extends): how a test sees that a sequence's cache is what the client
 * thinks. Its cache length. */
long long bt_probe(int port, const struct bt_shape *sh, const char *id, int layer,
                   struct bt_hist *hist);

/* The server holds no sequence, and no byte of one. */
void bt_expect_no_sequences(int port);

#endif
