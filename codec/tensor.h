/* tensor.h -- a tensor as a request carries it: dtype, shape and data.
 *
 * The wire protocols share this module: whatever the form a tensor arrives
 * in (nested JSON arrays, {"shape", "data"}, {"shape", "dtype", "b64"}, or
 * raw bytes), it ends as a struct tensor, and tensor_check() is the one
 * validation every tensor of every path goes through: dtype against what
 * the field may hold, and every value (floats finite, -inf only in a float
 * mask; bools 0 or 1). tensor_count() is the one place a shape becomes an
 * element count (dimensions >= 1, overflow, the element limit).
 *
 * Memory: the data of a tensor belongs to a struct tensor_arena, freed
 * whole with tensor_arena_free() when the request is done; buffers of
 * 1 MiB or more stay with the thread (up to 8, 48 MiB) for its next base64
 * tensor (tensor.c, KEEP_*), and go when the thread exits.
 *
 *     struct tensor t;
 *     if (tensor_from_json(&t, v, TENSOR_FLOAT, "query", max, &arena, &err) ||
 *         tensor_check(&t, TENSOR_FLOAT, "query", &err))
 *         ... err names the field and the problem ...
 */
#ifndef CODEC_TENSOR_H
#define CODEC_TENSOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errors.h"

#define TENSOR_MAX_RANK 4
#define TENSOR_ARENA_MAX 16

/* What a field may hold. */
enum tensor_kind {
    TENSOR_FLOAT, /* float32, finite */
    TENSOR_BOOL,  /* bools */
    TENSOR_MASK,  /* bools, or float32 that may hold -inf (an attention mask) */
};

struct tensor {
    int is_bool;  /* data in u8 (0 or 1 each), else in f */
    int ndim;
    long long shape[TENSOR_MAX_RANK];
    size_t count; /* product of shape (tensor_count) */
    float *f;     /* owned by an arena */
    uint8_t *u8;
};

struct tensor_arena {
    void *bufs[TENSOR_ARENA_MAX];
    int n;
};

/* Hand b (malloc'd, or NULL) to a; returns b, or NULL (b freed) when full. */
void *tensor_arena_keep(struct tensor_arena *a, void *b);
void tensor_arena_free(struct tensor_arena *a);

/* t->count from t->shape: every dimension >= 1 (invalid_tensor) and the
 * product at most max_elements (payload_too_large). */
int tensor_count(struct tensor *t, const char *name, long long max_elements,
                 struct failure *err);

/* The validation: is_bool against kind, then every value. */
int tensor_check(const struct tensor *t, enum tensor_kind kind, const char *name,
                 struct failure *err);

/* The data of t (shape counted, is_bool set) from n characters of base64
 * of its little-endian bytes: length and alphabet checked; values are left
 * to tensor_check(). */
int tensor_read_b64(struct tensor *t, const char *b64, size_t n, struct tensor_arena *a,
                    const char *name, struct failure *err);

/* The same when the string's end is not known yet: s (avail bytes, a JSON
 * string's text after its opening quote) is read as base64 of exactly t's
 * bytes followed by the closing '"'. Returns the characters read, or 0,
 * keeping nothing, when s is anything else (then find the end and call
 * tensor_read_b64, which says what is wrong). Decoding finds the end: no
 * separate search for the quote through megabytes. */
size_t tensor_read_b64_sized(struct tensor *t, const char *s, size_t avail,
                             struct tensor_arena *a);

/* t->ndim, t->shape and t->count from a JSON "shape" array of integers. */
int tensor_shape_from_json(struct tensor *t, json_t *shape, const char *name,
                           long long max_elements, struct failure *err);

/* The refusal of a tensor object's field key that is none of shape, data,
 * dtype and b64, naming the nearest (suggest.h); both decoders give it.
 * Returns -1. */
int tensor_unknown_field(struct failure *err, const char *name, const char *key);

/* A JSON tensor in any of its three forms, through jansson. */
int tensor_from_json(struct tensor *t, json_t *v, enum tensor_kind kind, const char *name,
                     long long max_elements, struct tensor_arena *a, struct failure *err);

/* "(2, 3)", "(4,)": a shape as Python prints it. */
void tensor_shape_str(char *dst, size_t n, const long long *shape, int ndim);

/* An integer field (num_heads, a shape dimension). jansson keeps 2 (an
 * integer) apart from 2.0 (a real), and 2.0 is refused. It cannot hold an
 * integer beyond long long: such a body is read with the real of the same
 * value in its place (jsonnum_standin), so an integral real beyond 2^63 in
 * magnitude is taken for what it is either way: far too large (or too
 * small) for any integer field. */
enum json_int { JSON_INT_OK, JSON_INT_NOT_INTEGER, JSON_INT_HUGE, JSON_INT_NEG_HUGE };
enum json_int json_int_value(json_t *v, long long *out);

#endif
