/* tensor.c -- tensors from their JSON forms, counted and checked; see tensor.h. */
#include "codec/tensor.h"

#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"
#include "lib/suggest.h"

/* ---------------------------------------------------------------------- */
/* Big buffers kept for the thread's next request                          */

/* The tensors of a large request take megabytes, and each fresh page costs
 * a fault when it is first written: on the VMs measured, decoding 10 MB into
 * fresh pages took 14 ms against 1 ms into pages written before, and glibc
 * gives a big block's pages back when it is freed. So tensor_arena_free()
 * keeps each buffer of KEEP_MIN bytes or more on its thread (a pool worker:
 * the same thread decodes the next request), at most KEEP_SLOTS of them and
 * KEEP_BYTES in all, and tensor_read_b64() takes the smallest that fits.
 * What a thread keeps is freed when it exits. */
#define KEEP_MIN ((size_t)1 << 20)
#define KEEP_SLOTS 8
#define KEEP_BYTES ((size_t)48 << 20)

struct kept {
    void *p[KEEP_SLOTS];
    size_t size[KEEP_SLOTS]; /* malloc_usable_size; 0: slot empty */
    size_t bytes;
};

static pthread_key_t kept_key;
static int kept_key_ok;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

static void kept_destroy(void *v)
{
    struct kept *k = v;
    for (int i = 0; i < KEEP_SLOTS; i++)
        free(k->p[i]);
    free(k);
}

static void kept_init(void)
{
    kept_key_ok = pthread_key_create(&kept_key, kept_destroy) == 0;
}

/* This thread's kept buffers, created when asked (NULL: none, or no memory). */
static struct kept *kept_get(int create)
{
    pthread_once(&kept_once, kept_init);
    if (!kept_key_ok)
        return NULL;
    struct kept *k = pthread_getspecific(kept_key);
    if (!k && create) {
        k = calloc(1, sizeof *k);
        if (k && pthread_setspecific(kept_key, k) != 0) {
            free(k);
            k = NULL;
        }
    }
    return k;
}

/* n bytes: the smallest kept buffer that holds them, or malloc's. */
static void *buffer_new(size_t n)
{
    struct kept *k = n >= KEEP_MIN ? kept_get(0) : NULL;
    int best = -1;
    for (int i = 0; k && i < KEEP_SLOTS; i++)
        if (k->size[i] >= n && (best < 0 || k->size[i] < k->size[best]))
            best = i;
    if (best < 0)
        return malloc(n);
    void *p = k->p[best];
    k->bytes -= k->size[best];
    k->p[best] = NULL, k->size[best] = 0;
    return p;
}

/* Keep b for this thread when it is big and there is room, else free it. */
static void buffer_free(void *b)
{
    const size_t size = b ? malloc_usable_size(b) : 0;
    struct kept *k = size >= KEEP_MIN ? kept_get(1) : NULL;
    for (int i = 0; k && i < KEEP_SLOTS && k->bytes + size <= KEEP_BYTES; i++)
        if (!k->size[i]) {
            k->p[i] = b, k->size[i] = size, k->bytes += size;
            return;
        }
    free(b);
}

void *tensor_arena_keep(struct tensor_arena *a, void *b)
{
    if (!b)
        return NULL;
    if (a->n == TENSOR_ARENA_MAX) { /* cannot happen: fewer tensors than slots */
        free(b);
        return NULL;
    }
    a->bufs[a->n++] = b;
    return b;
}

void tensor_arena_free(struct tensor_arena *a)
{
    for (int i = 0; i < a->n; i++)
        buffer_free(a->bufs[i]);
    a->n = 0;
}

void tensor_shape_str(char *dst, size_t n, const long long *shape, int ndim)
{
    size_t o = (size_t)snprintf(dst, n, "(");
    for (int i = 0; i < ndim && o < n; i++)
        o += (size_t)snprintf(dst + o, n - o, "%s%lld", i ? ", " : "", shape[i]);
    if (o < n)
        snprintf(dst + o, n - o, ndim == 1 ? ",)" : ")");
}

int tensor_count(struct tensor *t, const char *name, long long max, struct failure *err)
{
    long long c = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 1)
            return fail_with(err, ERR_INVALID_TENSOR, "%s: dimension %d is %lld; every "
                             "dimension must be >= 1", name, i, t->shape[i]);
        if (t->shape[i] > max || c > max / t->shape[i]) {
            char s[96];
            tensor_shape_str(s, sizeof s, t->shape, t->ndim);
            return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s: shape %s has more than %lld "
                             "elements (max_tensor_elements)", name, s, max);
        }
        c *= t->shape[i];
    }
    t->count = (size_t)c;
    return 0;
}

static int check_kind(const struct tensor *t, enum tensor_kind kind, const char *name,
                      struct failure *err)
{
    if (t->is_bool && kind == TENSOR_FLOAT)
        return fail_with(err, ERR_INVALID_TENSOR, "%s must be float32, not bool", name);
    if (!t->is_bool && kind == TENSOR_BOOL)
        return fail_with(err, ERR_INVALID_TENSOR, "%s must hold booleans (dtype \"bool\")",
                         name);
    return 0;
}

/* Index of the first float whose exponent bits are all ones (inf or NaN)
 * and that -inf does not excuse, or n. One branch-free pass first: the
 * common answer is "none". Adding one to the exponent field carries into
 * the sign bit exactly when the field is all ones, so the pass is an
 * AND, an add and an OR a float, which vectorizes (a compare per float,
 * as written before, left GCC's loop scalar: 3.5 GB/s). */
static size_t first_nonfinite(const float *x, size_t n, int neg_inf_ok)
{
    const uint32_t *u = (const uint32_t *)(const void *)x;
    uint32_t carry = 0;
#pragma omp simd reduction(| : carry)
    for (size_t i = 0; i < n; i++)
        carry |= (u[i] & 0x7f800000u) + 0x00800000u;
    if (!(carry & 0x80000000u))
        return n;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && !(neg_inf_ok && x[i] == -INFINITY))
            return i;
    return n;
}

int tensor_check(const struct tensor *t, enum tensor_kind kind, const char *name,
                 struct failure *err)
{
    if (check_kind(t, kind, name, err))
        return -1;
    if (t->is_bool) {
        for (size_t i = 0; i < t->count; i++)
            if (t->u8[i] > 1)
                return fail_with(err, ERR_INVALID_TENSOR, "%s: bool byte %zu is %u, not 0 "
                                 "or 1", name, i, t->u8[i]);
        return 0;
    }
    const size_t i = first_nonfinite(t->f, t->count, kind == TENSOR_MASK);
    if (i < t->count)
        return fail_with(err, ERR_INVALID_TENSOR, kind == TENSOR_MASK
                         ? "%s element %zu is NaN or +inf (of the non-finite values, a float "
                          "mask takes -inf only)"
                         : "%s element %zu is not finite", name, i);
    return 0;
}

/* Decoded bytes as t's data. */
static void set_data(struct tensor *t, unsigned char *bytes)
{
    if (t->is_bool)
        t->u8 = bytes;
    else
        t->f = (float *)(void *)bytes; /* malloc'd: aligned; x86-64 is little-endian */
}

int tensor_read_b64(struct tensor *t, const char *b64, size_t n, struct tensor_arena *a,
                    const char *name, struct failure *err)
{
    size_t want = t->count * (t->is_bool ? 1 : 4), bad;
    if (n / 4 * 3 < want || n / 4 * 3 > want + 2)
        return fail_with(err, ERR_INVALID_TENSOR, "%s.b64 has %zu characters; shape needs %zu "
                         "bytes (%zu characters)", name, n, want, BASE64_LEN(want));
    unsigned char *bytes = tensor_arena_keep(a, buffer_new(n / 4 * 3 + 1));
    if (!bytes)
        return fail_with(err, ERR_INTERNAL, "out of memory decoding %s", name);
    long long got = base64_decode(bytes, b64, n, &bad);
    if (got < 0)
        return fail_with(err, ERR_INVALID_TENSOR, "%s.b64 is not valid base64 (at character "
                         "%zu)", name, bad);
    if ((size_t)got != want)
        return fail_with(err, ERR_INVALID_TENSOR, "%s.b64 decodes to %lld bytes; shape needs "
                         "%zu", name, got, want);
    set_data(t, bytes);
    return 0;
}

size_t tensor_read_b64_sized(struct tensor *t, const char *s, size_t avail,
                             struct tensor_arena *a)
{
    const size_t want = t->count * (t->is_bool ? 1 : 4), n = BASE64_LEN(want);
    size_t bad;
    if (n >= avail || s[n] != '"' || a->n == TENSOR_ARENA_MAX)
        return 0;
    unsigned char *bytes = buffer_new(n / 4 * 3 + 1);
    if (!bytes)
        return 0;
    if (base64_decode(bytes, s, n, &bad) != (long long)want) {
        buffer_free(bytes);
        return 0;
    }
    set_data(t, tensor_arena_keep(a, bytes));
    return n;
}

/* ---------------------------------------------------------------------- */
/* The JSON forms, through jansson                                         */

static int alloc_data(struct tensor *t, struct tensor_arena *a, struct failure *err)
{
    if (t->is_bool)
        t->u8 = tensor_arena_keep(a, malloc(t->count));
    else
        t->f = tensor_arena_keep(a, malloc(t->count * sizeof(float)));
    if (!t->f && !t->u8)
        return fail_with(err, ERR_INTERNAL, "out of memory for a tensor of %zu elements",
                         t->count);
    return 0;
}

/* One JSON number into a float32, or an error naming where it is. The value
 * is not printed: a number beyond double reaches here as its stand-in
 * (jsonnum_standin), not as written. */
static int to_float(float *dst, json_t *v, const char *name, const char *where,
                    struct failure *err)
{
    double d = json_number_value(v);
    float f = (float)d;
    if (!isfinite(d) || !isfinite(f))
        return fail_with(err, ERR_INVALID_TENSOR, "%s%s is out of float32 range (beyond "
                         "3.4028235e38 in magnitude)", name, where);
    *dst = f;
    return 0;
}

/* The JSON strings that stand for -infinity in a float mask: JSON has no
 * infinity, and JavaScript's JSON.stringify writes -Infinity as null. */
static int is_neg_inf_string(json_t *v)
{
    const char *s = json_string_value(v);
    return s && (strcmp(s, "-inf") == 0 || strcmp(s, "-Infinity") == 0);
}

/* Is v acceptable for kind k, given the tensor so far? */
static int leaf_ok(json_t *v, enum tensor_kind k, int is_bool)
{
    if (k == TENSOR_FLOAT)
        return json_is_number(v);
    if (k == TENSOR_BOOL)
        return json_is_boolean(v);
    return is_bool ? json_is_boolean(v) : json_is_number(v) || is_neg_inf_string(v);
}

static const char *kind_words(enum tensor_kind k, int is_bool)
{
    if (k == TENSOR_FLOAT)
        return "a number";
    if (k == TENSOR_BOOL)
        return "a boolean";
    return is_bool ? "a boolean (the mask's first element is one)"
                   : "a number or \"-inf\" (the mask's first element is not a boolean)";
}

static int store_leaf(struct tensor *t, size_t at, json_t *v, enum tensor_kind k,
                      const char *name, const char *where, struct failure *err)
{
    if (!leaf_ok(v, k, t->is_bool)) {
        if (k == TENSOR_MASK && !t->is_bool && json_is_null(v))
            return fail_with(err, ERR_INVALID_TENSOR, "%s%s is null; JavaScript's "
                             "JSON.stringify writes -Infinity so: send the string \"-inf\"",
                             name, where);
        return fail_with(err, ERR_INVALID_TENSOR, "%s%s is not %s", name, where,
                         kind_words(k, t->is_bool));
    }
    if (t->is_bool) {
        t->u8[at] = json_is_true(v);
        return 0;
    }
    if (json_is_string(v)) { /* "-inf" in a float mask (leaf_ok) */
        t->f[at] = -INFINITY;
        return 0;
    }
    return to_float(&t->f[at], v, name, where, err);
}

/* Nested arrays: walk depth d of array a, writing leaves from *at.
 * path (64 bytes) holds the index path so far, e.g. "[1][0]". */
static int fill_nested(struct tensor *t, json_t *a, int d, size_t *at, enum tensor_kind k,
                       const char *name, char *path, size_t plen, struct failure *err)
{
    if (!json_is_array(a))
        return fail_with(err, ERR_INVALID_TENSOR, "%s%s: ragged array, expected an array of "
                         "length %lld", name, path, t->shape[d]);
    size_t n = json_array_size(a);
    if (n != (size_t)t->shape[d])
        return fail_with(err, ERR_INVALID_TENSOR, "%s%s: ragged array, length %zu where "
                         "%lld expected", name, path, n, t->shape[d]);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        size_t pl = plen;
        if (plen < 48)
            pl += (size_t)snprintf(path + plen, 64 - plen, "[%zu]", i);
        int rc;
        if (d + 1 < t->ndim)
            rc = fill_nested(t, v, d + 1, at, k, name, path, pl, err);
        else if (json_is_array(v))
            rc = fail_with(err, ERR_INVALID_TENSOR, "%s%s: ragged array, nested deeper than "
                           "the first element", name, path);
        else
            rc = store_leaf(t, (*at)++, v, k, name, path, err);
        path[plen] = '\0';
        if (rc)
            return rc;
    }
    return 0;
}

static int from_nested(struct tensor *t, json_t *a, enum tensor_kind k, const char *name,
                       long long max, struct tensor_arena *ar, struct failure *err)
{
    json_t *x = a;
    t->ndim = 0;
    while (json_is_array(x)) {
        if (t->ndim == TENSOR_MAX_RANK)
            return fail_with(err, ERR_INVALID_TENSOR, "%s has more than %d dimensions", name,
                             TENSOR_MAX_RANK);
        t->shape[t->ndim++] = (long long)json_array_size(x);
        if (json_array_size(x) == 0)
            return fail_with(err, ERR_INVALID_TENSOR, "%s has an empty dimension", name);
        x = json_array_get(x, 0);
    }
    t->is_bool = k == TENSOR_BOOL || (k == TENSOR_MASK && json_is_boolean(x));
    if (tensor_count(t, name, max, err) || alloc_data(t, ar, err))
        return -1;
    char path[64] = "";
    size_t at = 0;
    return fill_nested(t, a, 0, &at, k, name, path, 0, err);
}

enum json_int json_int_value(json_t *v, long long *out)
{
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return JSON_INT_OK;
    }
    /* (every double beyond 2^52 is an integer) */
    if (json_is_real(v) && fabs(json_real_value(v)) >= 0x1p63)
        return json_real_value(v) > 0 ? JSON_INT_HUGE : JSON_INT_NEG_HUGE;
    return JSON_INT_NOT_INTEGER;
}

int tensor_shape_from_json(struct tensor *t, json_t *sh, const char *name, long long max,
                           struct failure *err)
{
    if (!json_is_array(sh) || json_array_size(sh) < 1 || json_array_size(sh) > TENSOR_MAX_RANK)
        return fail_with(err, ERR_INVALID_TENSOR, "%s.shape must be an array of 1 to %d "
                         "integers", name, TENSOR_MAX_RANK);
    t->ndim = (int)json_array_size(sh);
    for (int i = 0; i < t->ndim; i++) {
        switch (json_int_value(json_array_get(sh, (size_t)i), &t->shape[i])) {
        case JSON_INT_OK:
            break;
        case JSON_INT_HUGE:
            return fail_with(err, ERR_PAYLOAD_TOO_LARGE, "%s.shape[%d] is beyond 2^63, more "
                             "than %lld elements (max_tensor_elements)", name, i, max);
        case JSON_INT_NEG_HUGE:
            return fail_with(err, ERR_INVALID_TENSOR, "%s: dimension %d is below -2^63; every "
                             "dimension must be >= 1", name, i);
        default:
            return fail_with(err, ERR_INVALID_TENSOR, "%s.shape[%d] is not an integer", name, i);
        }
    }
    return tensor_count(t, name, max, err);
}

int tensor_unknown_field(struct failure *err, const char *name, const char *key)
{
    static const char *const fields[] = {"shape", "data", "dtype", "b64"};
    char hint[96];
    return fail_with(err, ERR_INVALID_TENSOR, "%s has an unknown field '%s'%s (a tensor is "
                     "nested arrays, {shape, data} or {shape, dtype, b64})", name, key,
                     suggest_hint(hint, sizeof hint, key, fields, 4));
}

/* {shape, data} or {shape, dtype, b64} */
static int from_object(struct tensor *t, json_t *obj, enum tensor_kind k, const char *name,
                       long long max, struct tensor_arena *ar, struct failure *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (strcmp(key, "shape") && strcmp(key, "data") && strcmp(key, "dtype") &&
            strcmp(key, "b64"))
            return tensor_unknown_field(err, name, key);
    }
    json_t *data = json_object_get(obj, "data"), *b64 = json_object_get(obj, "b64");
    json_t *dtype = json_object_get(obj, "dtype");
    if (tensor_shape_from_json(t, json_object_get(obj, "shape"), name, max, err))
        return -1;
    if ((data != NULL) == (b64 != NULL))
        return fail_with(err, ERR_INVALID_TENSOR, "%s needs exactly one of 'data' or 'b64'",
                         name);

    if (data) {
        if (dtype)
            return fail_with(err, ERR_INVALID_TENSOR, "%s: 'dtype' goes with 'b64', not "
                             "'data'", name);
        if (!json_is_array(data))
            return fail_with(err, ERR_INVALID_TENSOR, "%s.data must be a flat array", name);
        if (json_array_size(data) != t->count) {
            char s[96];
            tensor_shape_str(s, sizeof s, t->shape, t->ndim);
            return fail_with(err, ERR_INVALID_TENSOR, "%s.data has %zu elements but shape %s "
                             "needs %zu", name, json_array_size(data), s, t->count);
        }
        t->is_bool = k == TENSOR_BOOL || (k == TENSOR_MASK &&
                                          json_is_boolean(json_array_get(data, 0)));
        if (alloc_data(t, ar, err))
            return -1;
        for (size_t i = 0; i < t->count; i++) {
            char where[40];
            snprintf(where, sizeof where, ".data[%zu]", i);
            if (store_leaf(t, i, json_array_get(data, i), k, name, where, err))
                return -1;
        }
        return 0;
    }

    const char *dt = json_string_value(dtype);
    if (!dt || (strcmp(dt, "float32") && strcmp(dt, "bool")))
        return fail_with(err, ERR_INVALID_TENSOR, "%s.dtype must be \"float32\" (or \"bool\" "
                         "for masks) with 'b64'", name);
    t->is_bool = strcmp(dt, "bool") == 0;
    if (check_kind(t, k, name, err))
        return -1;
    if (!json_is_string(b64))
        return fail_with(err, ERR_INVALID_TENSOR, "%s.b64 must be a base64 string", name);
    return tensor_read_b64(t, json_string_value(b64), json_string_length(b64), ar, name, err);
}

int tensor_from_json(struct tensor *t, json_t *v, enum tensor_kind kind, const char *name,
                     long long max_elements, struct tensor_arena *a, struct failure *err)
{
    memset(t, 0, sizeof *t);
    if (json_is_array(v))
        return from_nested(t, v, kind, name, max_elements, a, err);
    if (json_is_object(v))
        return from_object(t, v, kind, name, max_elements, a, err);
    return fail_with(err, ERR_INVALID_TENSOR, "%s must be a tensor: nested arrays, {shape, "
                     "data} or {shape, dtype, b64}", name);
}
