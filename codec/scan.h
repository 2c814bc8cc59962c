/* scan.h -- the fast decoder's pass over a POST /attention body.
 *
 * It walks the body's structure itself and reads every tensor straight
 * into floats (jsonnum.h for numbers, base64 decoded from the body in
 * place), so a big tensor never becomes a DOM. Then jansson loads the
 * body with the values it read blanked (scan_json.h), the one design of
 * both fast decoders (v2's walk is v2_scan.c): each tensor reads as a "0",
 * the placeholder for an entry of a struct scan_tensors, and a large body's
 * array or object where a small field belongs as "[]". The request schema
 * (codec/request.c) reads that object exactly as it reads one jansson
 * loaded, and checks every tensor with tensor_check().
 *
 * Two modes. Without errors (small bodies) it never reports an error:
 * anything it does not handle cleanly returns 1 and the body goes to
 * jansson, which says what is wrong. With errors (large bodies, where a
 * DOM of the whole body costs 20-30x its size) it never hands over: each
 * value it leaves to jansson is checked alone first (its refusal, in body
 * order, is the answer), an unknown field is refused before its value is
 * read, tokens are counted before they are loaded, a tensor it cannot read
 * is left to jansson when it is small (the reference's own messages) or
 * refused with the fast reader's message naming the field, the problem and
 * where (reported when the schema reaches that field, in the reference's
 * order); only a tensor of booleans or with escaped strings is loaded by
 * jansson, and never more than that one value.
 *
 * Files: scan.c (the request: fields, tensors, tokens) over scan_json.c
 * (the lexical layer: cursor, keys, values, the syntax check; its internal
 * header scan_json.h). */
#ifndef CODEC_SCAN_H
#define CODEC_SCAN_H

#include <jansson.h>
#include <stddef.h>

#include "codec/codec.h"
#include "lib/errors.h"
#include "codec/tensor.h"

#define SCAN_MAX_TENSORS 12

/* A value's extent up to which jansson may read it alone (a DOM of at most
 * ~30x this). */
#define SCAN_SMALL (64 * 1024)

/* The most text tokens or key_tokens may take (4096 labels of 256
 * bytes; their DOM and their copy for the answer cost up to 4x this). */
#define SCAN_TOKENS_MAX_BYTES (1024 * 1024)

struct scan_tensors {
    struct tensor t[SCAN_MAX_TENSORS];
    int bad[SCAN_MAX_TENSORS];              /* refused (large bodies): ... */
    struct failure err[SCAN_MAX_TENSORS]; /* ... with this answer */
    json_t *placeholder[SCAN_MAX_TENSORS];  /* borrowed: the root owns them */
    char key[SCAN_MAX_TENSORS][32];         /* the field it was read for, ... */
    int in_weights[SCAN_MAX_TENSORS];       /* ... of the request or of "weights" */
    int n;
};

/* The fields of body (len bytes) into *root, with placeholders for tensors
 * whose data is kept in a. Returns 0 (caller json_decref()s *root), 1 to
 * leave the body to jansson, or -1: refused, err says why (errors only). */
int scan_request(json_t **root, const char *body, size_t len, const struct codec_limits *lim,
                 int errors, struct scan_tensors *st, struct tensor_arena *a,
                 struct failure *err);

/* The tensor v stands for, when v is one of st's placeholders (the "0" a
 * tensor read became in the DOM, known by its address); else NULL.
 * *err: the fast reader's refusal of it (a large body), or NULL. */
const struct tensor *scan_tensor_of(const struct scan_tensors *st, const json_t *v,
                                    const struct failure **err);

/* Is body one JSON text, as jansson reads it (duplicate keys aside)? 0, or
 * -1 with err an invalid_json naming line and column. No DOM, no
 * allocation: a large body's refusal is checked against it, so that invalid
 * JSON anywhere is the answer, as it is for the reference. */
int scan_json_check(const char *body, size_t len, struct failure *err);

/* Is key a field of a request, of weights? (the one list of each) */
int scan_is_field(const char *key);
int scan_is_weight(const char *key);
/* The weight (enum att_weight) that key names (att_weight_name), or -1. */
int scan_weight_index(const char *key);
/* The refusal of an unknown field key of the request (in_weights: of
 * weights), naming the nearest field (suggest.h). Returns -1. */
int scan_unknown_field(struct failure *err, int in_weights, const char *key);

#endif
