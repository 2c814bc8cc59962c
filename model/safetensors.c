/* safetensors.c -- see safetensors.h. The checks run in the reference
 * reader's order: header length, UTF-8, JSON, each entry's fields, then
 * the tensors in offset order (tiling, element count, byte size), then the
 * file's length. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/utf8.h"

/* The reference's enum Dtype with bitsize(). */
static const struct {
    const char *name;
    unsigned bits;
} dtypes[] = {
    {"BOOL", 8},   {"F4", 4},           {"F6_E2M3", 6},      {"F6_E3M2", 6},
    {"U8", 8},     {"I8", 8},           {"F8_E5M2", 8},      {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"I16", 16},
    {"U16", 16},   {"F16", 16},         {"BF16", 16},        {"I32", 32},
    {"U32", 32},   {"F32", 32},         {"C64", 64},         {"F64", 64},
    {"I64", 64},   {"U64", 64},
};

/* The reader's errors, in err (errlen bytes, may be 0): the expression's
 * value is -1. */
#define ST_FAIL(err, errlen, ...) (snprintf((err), (errlen), __VA_ARGS__), -1)

/* A JSON integer in [0, 2^63) into *v. */
static int get_u64(json_t *j, uint64_t *v)
{
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return -1;
    *v = (uint64_t)json_integer_value(j);
    return 0;
}

void st_shape_str(char *s, size_t n, const uint64_t *shape, int ndim)
{
    size_t at = (size_t)snprintf(s, n, "(");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(s + at, n - at, "%s%llu", i ? ", " : "",
                               (unsigned long long)shape[i]);
    if (at < n)
        snprintf(s + at, n - at, ")");
}

/* One header entry {dtype, shape, data_offsets} into t (begin in *begin);
 * the shape goes to dims. */
static int read_entry(struct st_tensor *t, uint64_t *begin, unsigned *bits, uint64_t *dims,
                      const char *name, json_t *e, char *err, size_t errlen)
{
    if (!json_is_object(e))
        return ST_FAIL(err, errlen, "tensor \"%s\": entry is not an object", name);
    const char *key;
    json_t *v;
    json_object_foreach (e, key, v)
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return ST_FAIL(err, errlen, "tensor \"%s\": unknown field \"%s\"", name, key);
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"),
           *off = json_object_get(e, "data_offsets");
    if (!dt || !sh || !off)
        return ST_FAIL(err, errlen, "tensor \"%s\": missing field \"%s\"", name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return ST_FAIL(err, errlen, "tensor \"%s\": dtype is not a string", name);
    t->dtype = NULL;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(json_string_value(dt), dtypes[i].name))
            t->dtype = dtypes[i].name, *bits = dtypes[i].bits;
    if (!t->dtype)
        return ST_FAIL(err, errlen, "tensor \"%s\": unknown dtype \"%.32s\"", name,
                       json_string_value(dt));
    if (!json_is_array(sh))
        return ST_FAIL(err, errlen, "tensor \"%s\": shape is not an array", name);
    t->ndim = (int)json_array_size(sh);
    for (int i = 0; i < t->ndim; i++)
        if (get_u64(json_array_get(sh, (size_t)i), &dims[i]))
            return ST_FAIL(err, errlen, "tensor \"%s\": shape[%d] is not a non-negative integer",
                           name, i);
    t->shape = dims;
    uint64_t end;
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        get_u64(json_array_get(off, 0), begin) || get_u64(json_array_get(off, 1), &end))
        return ST_FAIL(err, errlen, "tensor \"%s\": data_offsets is not [begin, end] "
                       "(non-negative integers)", name);
    if (end < *begin)
        return ST_FAIL(err, errlen, "tensor \"%s\": data_offsets [%llu, %llu] end before begin",
                       name, (unsigned long long)*begin, (unsigned long long)end);
    t->nbytes = end - *begin;
    t->name = name;
    return 0;
}

struct sorted {
    uint64_t begin;
    unsigned bits; /* of one element */
    struct st_tensor t;
};

static int by_offset(const void *a, const void *b)
{
    const struct sorted *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    uint64_t xe = x->begin + x->t.nbytes, ye = y->begin + y->t.nbytes;
    return xe < ye ? -1 : xe > ye;
}

/* Tiling from 0, element count and byte size, in offset order (the
 * reference's Metadata::validate). Sets *data_len. */
static int check_tiling(struct sorted *s, size_t n, uint64_t *data_len, char *err,
                        size_t errlen)
{
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        struct st_tensor *t = &s[i].t;
        uint64_t end = s[i].begin + t->nbytes;
        if (s[i].begin != at)
            return ST_FAIL(err, errlen,
                           "tensor \"%s\": data_offsets [%llu, %llu] %s: the data must be "
                           "tiled from 0 without gaps (previous tensor ends at %llu)",
                           t->name, (unsigned long long)s[i].begin,
                           (unsigned long long)end,
                           s[i].begin < at ? "overlap the previous tensor" : "leave a hole",
                           (unsigned long long)at);
        uint64_t count = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] && count > UINT64_MAX / t->shape[d])
                return ST_FAIL(err, errlen, "tensor \"%s\": element count overflows", t->name);
            count *= t->shape[d];
        }
        unsigned bits = s[i].bits;
        if (count > UINT64_MAX / bits)
            return ST_FAIL(err, errlen, "tensor \"%s\": byte size overflows", t->name);
        char sh[96];
        st_shape_str(sh, sizeof sh, t->shape, t->ndim);
        if (count * bits % 8)
            return ST_FAIL(err, errlen, "tensor \"%s\": %s %s is not a whole number of bytes",
                           t->name, t->dtype, sh);
        if (count * bits / 8 != t->nbytes)
            return ST_FAIL(err, errlen,
                           "tensor \"%s\": data_offsets hold %llu bytes, but dtype %s shape %s "
                           "needs %llu",
                           t->name, (unsigned long long)t->nbytes, t->dtype, sh,
                           (unsigned long long)(count * bits / 8));
        t->count = count;
        at += t->nbytes;
    }
    *data_len = at;
    return 0;
}

static int check_metadata(json_t *md, char *err, size_t errlen)
{
    const char *key;
    json_t *v;
    if (!json_is_object(md))
        return ST_FAIL(err, errlen, "__metadata__ is not an object of strings");
    json_object_foreach (md, key, v)
        if (!json_is_string(v))
            return ST_FAIL(err, errlen, "__metadata__ \"%s\" is not a string", key);
    return 0;
}

/* The header length N from the first bytes of a file of len bytes (avail
 * of them in b), checked: at least 8 bytes, N <= ST_MAX_HEADER, N within
 * the file. */
static int header_len(uint64_t *n, const unsigned char *b, size_t len, char *err,
                      size_t errlen)
{
    if (len < 8)
        return ST_FAIL(err, errlen, "header too small: %zu bytes, a file starts with 8", len);
    *n = 0;
    for (int i = 7; i >= 0; i--)
        *n = *n << 8 | b[i];
    if (*n > ST_MAX_HEADER)
        return ST_FAIL(err, errlen, "header too large: header length %llu > %u",
                       (unsigned long long)*n, ST_MAX_HEADER);
    if (*n > len - 8)
        return ST_FAIL(err, errlen, "invalid header length %llu: the file has %zu bytes",
                       (unsigned long long)*n, len);
    return 0;
}

/* Validate the header b[8 .. 8 + n) of a file of len bytes; with in_memory,
 * b is the whole file and the tensors' data point into it. */
static int parse(struct st_file *f, const unsigned char *b, uint64_t n, size_t len,
                 int in_memory, char *err, size_t errlen)
{
    if (!utf8_valid(b + 8, (size_t)n))
        return ST_FAIL(err, errlen, "header is not valid UTF-8");
    json_error_t jerr;
    json_t *h = json_loadb((const char *)b + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!h)
        return ST_FAIL(err, errlen, "header is not valid JSON: %s (at byte %d)", jerr.text,
                       jerr.position);
    struct sorted *s = NULL;
    size_t ndims = 0, nt = 0;
    const char *key;
    json_t *v;
    if (!json_is_object(h)) {
        snprintf(err, errlen, "header is not a JSON object");
        goto fail;
    }
    json_object_foreach (h, key, v)
        if (strcmp(key, "__metadata__")) {
            ndims += json_is_object(v) && json_is_array(json_object_get(v, "shape"))
                         ? json_array_size(json_object_get(v, "shape"))
                         : 0;
            nt++;
        }
    s = calloc(nt ? nt : 1, sizeof *s);
    f->dims = calloc(ndims ? ndims : 1, sizeof *f->dims);
    if (!s || !f->dims) {
        snprintf(err, errlen, "out of memory for %zu tensors", nt);
        goto fail;
    }
    size_t i = 0, d = 0;
    json_object_foreach (h, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (check_metadata(v, err, errlen))
                goto fail;
            f->metadata = v;
            continue;
        }
        if (read_entry(&s[i].t, &s[i].begin, &s[i].bits, f->dims + d, key, v, err, errlen))
            goto fail;
        d += (size_t)s[i].t.ndim;
        i++;
    }
    qsort(s, nt, sizeof *s, by_offset);
    uint64_t data_len = 0;
    if (check_tiling(s, nt, &data_len, err, errlen))
        goto fail;
    if (data_len != len - 8 - n) {
        uint64_t need = 8 + n + data_len;
        snprintf(err, errlen, "file is %zu bytes, but 8 + header %llu + data %llu = %llu: %s",
                 len, (unsigned long long)n, (unsigned long long)data_len,
                 (unsigned long long)need,
                 data_len < len - 8 - n ? "trailing bytes" : "missing bytes (truncated file)");
        goto fail;
    }
    f->tensors = malloc((nt ? nt : 1) * sizeof *f->tensors);
    if (!f->tensors) {
        snprintf(err, errlen, "out of memory for %zu tensors", nt);
        goto fail;
    }
    for (i = 0; i < nt; i++) {
        f->tensors[i] = s[i].t;
        f->tensors[i].offset = 8 + n + s[i].begin;
        f->tensors[i].data = in_memory ? b + f->tensors[i].offset : NULL;
    }
    free(s);
    f->n = nt;
    f->header = h;
    f->buf = in_memory ? b : NULL;
    f->len = len;
    return 0;
fail:
    free(s);
    free(f->dims);
    json_decref(h);
    memset(f, 0, sizeof *f);
    return -1;
}

int st_parse(struct st_file *f, const void *buf, size_t len, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    uint64_t n;
    if (header_len(&n, buf, len, err, errlen))
        return -1;
    return parse(f, buf, n, len, 1, err, errlen);
}

/* What the messages of a changed file end with. */
#define REPLACE_SAFELY                                                                      \
    "replace a model file by writing a new one elsewhere and renaming it over the old"

/* An open file's modification time, in ns. With its size, what tells that
 * it was rewritten (not the ctime: renaming a new file over it, the safe
 * way, changes the old one's link count and so its ctime; its device and
 * inode are the descriptor's, never another file's). */
static long long mtime_ns(const struct stat *sb)
{
    return (long long)sb->st_mtim.tv_sec * 1000000000LL + sb->st_mtim.tv_nsec;
}

/* n bytes at off into dst; 0, or -1 with err set (a short read: the file
 * shrank after it was opened). */
static int read_at(const struct st_file *f, void *dst, size_t n, uint64_t off, char *err,
                   size_t errlen)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(f->fd, (char *)dst + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return ST_FAIL(err, errlen, "read error at byte %llu: %s",
                           (unsigned long long)off + got, strerror(errno));
        if (r == 0) {
            struct stat sb;
            long long now = fstat(f->fd, &sb) == 0 ? (long long)sb.st_size : -1;
            return ST_FAIL(err, errlen, "changed while it was read: it had %zu bytes when "
                           "opened, now %lld (byte %llu is gone); " REPLACE_SAFELY, f->len, now,
                           (unsigned long long)off + got);
        }
        got += (size_t)r;
    }
    return 0;
}

int st_open(struct st_file *f, const char *path, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    if (fd < 0)
        return ST_FAIL(err, errlen, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ST_FAIL(err, errlen, "%s: not a regular file", path);
    }
    /* parse() fills the rest, and zeroes f when it fails */
    f->has_fd = 1, f->fd = fd, f->len = (size_t)sb.st_size, f->mtime_ns = mtime_ns(&sb);
    const size_t len = f->len;
    unsigned char first[8];
    unsigned char *head = NULL;
    uint64_t n = 0;
    char msg[256];
    int rc = read_at(f, first, len < 8 ? len : 8, 0, msg, sizeof msg) ||
             header_len(&n, first, len, msg, sizeof msg);
    if (!rc) {
        head = malloc(8 + (size_t)n);
        if (!head)
            rc = ST_FAIL(msg, sizeof msg, "out of memory for a header of %llu bytes",
                         (unsigned long long)n);
        else
            rc = read_at(f, head, 8 + (size_t)n, 0, msg, sizeof msg) ||
                 parse(f, head, n, len, 0, msg, sizeof msg);
    }
    free(head); /* the tensors' names live in f->header, not in these bytes */
    if (rc) {
        close(fd);
        memset(f, 0, sizeof *f);
        return ST_FAIL(err, errlen, "%s: %s", path, msg);
    }
    return 0;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

int st_dtype_convertible(const char *dtype)
{
    return !strcmp(dtype, "F32") || !strcmp(dtype, "F16") || !strcmp(dtype, "BF16");
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* IEEE binary16 to binary32, exactly: subnormals are normalised, infinities
 * and NaNs (payload kept) carried over. */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
    if (exp == 0x1F)
        return bits_f32(sign | 0x7F800000u | mant << 13);
    if (exp)
        return bits_f32(sign | (exp + 112u) << 23 | mant << 13);
    if (!mant)
        return bits_f32(sign);
    uint32_t e = 113; /* value = mant·2^-24: shift its leading 1 to bit 10 */
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return bits_f32(sign | e << 23 | (mant & 0x3FFu) << 13);
}

/* n elements of dtype at p into dst; -1 when dtype is not convertible. */
static int convert(float *dst, const unsigned char *p, size_t n, const char *dtype)
{
    if (!strcmp(dtype, "F32")) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(dst, p, n * sizeof *dst); /* the file's byte order is the host's */
#else
        for (size_t i = 0; i < n; i++, p += 4)
            dst[i] = bits_f32((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                              (uint32_t)p[3] << 24);
#endif
    } else if (!strcmp(dtype, "F16")) {
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    } else if (!strcmp(dtype, "BF16")) {
        for (size_t i = 0; i < n; i++, p += 2)
            dst[i] = bits_f32((uint32_t)p[0] << 16 | (uint32_t)p[1] << 24);
    } else {
        return -1;
    }
    return 0;
}

int st_to_f32(float *dst, const struct st_tensor *t)
{
    return t->data ? convert(dst, t->data, (size_t)t->count, t->dtype) : -1;
}

int st_read_f32(const struct st_file *f, float *dst, const struct st_tensor *t, char *err,
                size_t errlen)
{
    if (!st_dtype_convertible(t->dtype))
        return ST_FAIL(err, errlen, "tensor \"%s\": dtype %s cannot be converted to F32",
                       t->name, t->dtype);
    if (!f->has_fd)
        return st_to_f32(dst, t) ? ST_FAIL(err, errlen, "tensor \"%s\": no data", t->name) : 0;
    /* in pieces of at most 1 MiB of the file, converted as they come */
    enum { CHUNK = 1 << 20 };
    const size_t size = (size_t)(t->nbytes / (t->count ? t->count : 1));
    unsigned char *buf = malloc(t->nbytes < CHUNK ? (size_t)t->nbytes + 1 : CHUNK);
    if (!buf)
        return ST_FAIL(err, errlen, "out of memory");
    int rc = 0;
    for (size_t done = 0; !rc && done < (size_t)t->count;) {
        size_t k = (size_t)t->count - done;
        if (k > CHUNK / size)
            k = CHUNK / size;
        rc = read_at(f, buf, k * size, t->offset + done * size, err, errlen) ||
             convert(dst + done, buf, k, t->dtype);
        done += k;
    }
    free(buf);
    if (rc)
        return -1;
    /* a file rewritten in place while it was read (same length, or grown)
     * shows in its times; its bytes may then mix two versions */
    struct stat sb;
    if (fstat(f->fd, &sb) != 0)
        return ST_FAIL(err, errlen, "fstat: %s", strerror(errno));
    const int resized = (size_t)sb.st_size != f->len;
    if (resized || mtime_ns(&sb) != f->mtime_ns)
        return ST_FAIL(err, errlen, "changed while it was read (its %s differs from when it was "
                       "opened); " REPLACE_SAFELY, resized ? "size" : "modification time");
    return 0;
}

void st_close(struct st_file *f)
{
    json_decref(f->header);
    free(f->tensors);
    free(f->dims);
    if (f->has_fd)
        close(f->fd);
    memset(f, 0, sizeof *f);
}
