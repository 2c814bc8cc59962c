/* scan.h -- the fast decoder's first pass over a POST /attention body.
 *
 * It reads the body's structure itself and every tensor straight into
 * floats (jsonnum.h for numbers, base64 decoded from the body in place), so
 * a big tensor never becomes a DOM; only small scalar fields go through
 * jansson. It returns a jansson object of the request's fields in which
 * each tensor is a placeholder for an entry of a struct scan_tensors; the
 * request schema (codec_request.c) reads that object exactly as it reads
 * one jansson loaded, and checks every tensor with tensor_check().
 *
 * It never reports an error: anything it does not handle cleanly (escapes
 * in keys, boolean arrays, duplicates, any doubt at all) returns NULL, and
 * the body goes to jansson, which says what is wrong. */
#ifndef SERVER_SCAN_H
#define SERVER_SCAN_H

#include <jansson.h>
#include <stddef.h>

#include "server/tensor.h"

#define SCAN_MAX_TENSORS 12

struct scan_tensors {
    struct tensor t[SCAN_MAX_TENSORS];
    int n;
};

/* The fields of body (len bytes) with placeholders for tensors whose data
 * is kept in a; NULL to leave the body to jansson. Caller json_decref()s. */
json_t *scan_request(const char *body, size_t len, long long max_elements,
                     struct scan_tensors *st, struct tensor_arena *a);

/* The tensor v stands for, when v is one of st's placeholders; else NULL. */
const struct tensor *scan_tensor_of(const struct scan_tensors *st, json_t *v);

#endif
