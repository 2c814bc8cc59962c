/* inflate.c -- compressed request bodies on zlib; see inflate.h.
 *
 * One z_stream per body. Each feed hands zlib the input and an output
 * window of at most INFLATE_CHUNK bytes, and never more than one byte
 * past what max_out still allows: zlib stops when the window is full, so
 * the total it produces never exceeds max_out + 1, and that extra byte is
 * what proves the body too large. The chunk that passes the limit is not
 * given to the sink.
 *
 * The compressed bytes are bounded too: empty gzip members (20 bytes each)
 * or empty stored blocks (5 bytes) inflate to nothing, so without a bound
 * on its input a stream could take bytes for ever without nearing max_out.
 * The bound, max_out + max_out/1024 + 1 KiB, is above what any body of at
 * most max_out bytes compresses to (zlib's deflateBound is n + n/4096 +
 * n/16384 + n/2^25 + 7 plus an 18-byte gzip wrapper; a gzip header's
 * optional name and comment fields are short in practice).
 *
 * "deflate" waits for the body's first two bytes to tell a zlib header from
 * raw deflate; until then they are kept in head[]. */
#include "http/inflate.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ZLIB_CONST /* next_in is const */
#include <zlib.h>

enum coding { CODING_IDENTITY, CODING_GZIP, CODING_DEFLATE };

struct inflate {
    enum coding coding;
    size_t max_out, total; /* total: bytes given to the sink */
    size_t max_in, in;     /* compressed bytes: the bound, and fed so far */
    int failed;            /* the enum inflate_status of a failure, or 0 */
    struct failure err;  /* the failure, returned again by later calls */
    int ended;             /* the stream (the last gzip member) has ended */
    int members;           /* gzip members that have ended */
    int chosen;            /* deflate: zlib or raw has been decided */
    unsigned char head[2]; /* deflate: the first bytes, until chosen */
    size_t nhead;
    z_stream zs;
    unsigned char out[]; /* INFLATE_CHUNK bytes, except for identity */
};

static const char *coding_name(enum coding c)
{
    return c == CODING_GZIP ? "gzip" : c == CODING_DEFLATE ? "deflate" : "identity";
}

/* The coding named by value (spaces and tabs around it ignored); -1 for
 * one this module does not inflate. */
static int coding_parse(const char *value, const char **start, size_t *len)
{
    static const struct {
        const char *name;
        enum coding coding;
    } names[] = {
        {"identity", CODING_IDENTITY},
        {"gzip", CODING_GZIP},
        {"x-gzip", CODING_GZIP},
        {"deflate", CODING_DEFLATE},
    };
    const char *s = value ? value : "";
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *start = s, *len = n;
    if (n == 0)
        return CODING_IDENTITY;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == n && strncasecmp(s, names[i].name, n) == 0)
            return (int)names[i].coding;
    return -1;
}

struct inflate *inflate_new(const char *content_encoding, size_t max_out,
                                      struct failure *err)
{
    const char *name;
    size_t len;
    int c = coding_parse(content_encoding, &name, &len);
    if (c < 0) {
        /* A client's bytes, quoted: codec_error_body makes them valid UTF-8
         * and JSON escapes the rest; the cut keeps the message short. */
        fail_with(err, ERR_UNSUPPORTED_MEDIA_TYPE,
                  "the content coding \"%.*s%s\" is not supported: send the body as gzip, "
                  "deflate or identity (one coding)",
                  len > 64 ? 64 : (int)len, name, len > 64 ? "..." : "");
        return NULL;
    }
    size_t size = sizeof(struct inflate) + (c == CODING_IDENTITY ? 0 : INFLATE_CHUNK);
    struct inflate *st = calloc(1, size);
    if (!st)
        goto oom;
    st->coding = (enum coding)c;
    st->max_out = max_out;
    size_t slack = max_out / 1024 + 1024;
    st->max_in = max_out > SIZE_MAX - slack ? SIZE_MAX : max_out + slack;
    if (st->coding == CODING_IDENTITY)
        return st;
    /* 15 + 16: gzip only; 15: zlib, switched to raw (-15) if the first two
     * bytes are not a zlib header. */
    if (inflateInit2(&st->zs, st->coding == CODING_GZIP ? 15 + 16 : 15) != Z_OK) {
        free(st);
        goto oom;
    }
    return st;
oom:
    fail_with(err, ERR_INTERNAL, "out of memory for the %s body's decoder",
              coding_name((enum coding)c));
    return NULL;
}

void inflate_free(struct inflate *st)
{
    if (!st)
        return;
    if (st->coding != CODING_IDENTITY)
        inflateEnd(&st->zs);
    free(st);
}

size_t inflate_total(const struct inflate *st)
{
    return st->total;
}

/* Records st->err as st's final state and copies it to err. */
static int refuse(struct inflate *st, struct failure *err, int status)
{
    st->failed = status;
    *err = st->err;
    return status;
}

static int too_large(struct inflate *st, struct failure *err)
{
    fail_with(&st->err, ERR_PAYLOAD_TOO_LARGE,
              "the body inflates to more than %zu bytes (max_body_bytes)", st->max_out);
    return refuse(st, err, INFLATE_EREFUSED);
}

static int sink_failed(struct inflate *st, struct failure *err)
{
    fail_with(&st->err, ERR_INTERNAL, "the inflated body could not be stored");
    return refuse(st, err, INFLATE_ESINK);
}

/* A zlib return other than Z_OK, Z_STREAM_END or Z_BUF_ERROR as a refusal. */
static int zlib_failed(struct inflate *st, int ret, struct failure *err)
{
    const char *what = coding_name(st->coding);
    const char *why = st->zs.msg ? st->zs.msg : "invalid data";
    if (ret == Z_MEM_ERROR)
        fail_with(&st->err, ERR_INTERNAL, "out of memory while inflating the %s body", what);
    else if (ret == Z_NEED_DICT)
        fail_with(&st->err, ERR_BAD_REQUEST,
                  "the deflate body needs a preset dictionary, which HTTP cannot name");
    else if (st->coding == CODING_GZIP && st->members > 0 && st->zs.total_out == 0)
        fail_with(&st->err, ERR_BAD_REQUEST,
                  "the gzip body has bytes after its member %d that do not start another "
                  "member: %s",
                  st->members, why);
    else
        fail_with(&st->err, ERR_BAD_REQUEST, "the %s body is corrupt: %s", what, why);
    return refuse(st, err, INFLATE_EREFUSED);
}

/* Inflates in[0..n) (n ≤ UINT_MAX) into the sink, chunk by chunk. */
static int run(struct inflate *st, const unsigned char *in, size_t n,
               inflate_sink sink, void *cls, struct failure *err)
{
    z_stream *zs = &st->zs;
    zs->next_in = in;
    zs->avail_in = (uInt)n;
    for (;;) {
        if (st->ended) {
            if (zs->avail_in == 0)
                return INFLATE_OK;
            if (st->coding != CODING_GZIP) {
                fail_with(&st->err, ERR_BAD_REQUEST,
                          "the deflate body has bytes after the end of its stream");
                return refuse(st, err, INFLATE_EREFUSED);
            }
            /* RFC 1952 §2.2: a gzip file is a series of members */
            if (inflateReset(zs) != Z_OK)
                return zlib_failed(st, Z_STREAM_ERROR, err);
            st->ended = 0;
        }
        /* 1. an output window of at most the chunk, and at most one byte
         *    past the limit (left ≤ max_out, so left + 1 only overflows
         *    when left == SIZE_MAX, which the first test catches) */
        size_t left = st->max_out - st->total;
        size_t cap = left >= INFLATE_CHUNK ? INFLATE_CHUNK : left + 1;
        zs->next_out = st->out;
        zs->avail_out = (uInt)cap;
        int ret = inflate(zs, Z_NO_FLUSH);
        if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR)
            return zlib_failed(st, ret, err);
        /* 2. the limit, before the sink sees the chunk */
        size_t got = cap - zs->avail_out;
        if (got > left)
            return too_large(st, err);
        if (got > 0 && sink(cls, (const char *)st->out, got) != 0)
            return sink_failed(st, err);
        st->total += got;
        if (ret == Z_STREAM_END) {
            st->ended = 1;
            st->members++;
            continue;
        }
        /* 3. a window zlib did not fill means it has used all the input */
        if (zs->avail_out != 0 || ret == Z_BUF_ERROR)
            return INFLATE_OK;
    }
}

/* Whether two bytes are a zlib header (RFC 1950 §2.2): CM = 8 (deflate),
 * CINFO ≤ 7 (a window of at most 32 KiB), CMF·256 + FLG a multiple of 31. */
static int zlib_header(const unsigned char h[2])
{
    return (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && ((unsigned)h[0] << 8 | h[1]) % 31 == 0;
}

/* deflate: keeps the first two bytes until they say zlib or raw, then
 * inflates them. *in and *n are advanced past what was kept. */
static int choose_format(struct inflate *st, const unsigned char **in, size_t *n,
                         inflate_sink sink, void *cls, struct failure *err)
{
    while (st->nhead < 2 && *n > 0) {
        st->head[st->nhead++] = **in;
        (*in)++, (*n)--;
    }
    if (st->nhead < 2)
        return INFLATE_OK;
    st->chosen = 1;
    if (!zlib_header(st->head) && inflateReset2(&st->zs, -15) != Z_OK)
        return zlib_failed(st, Z_STREAM_ERROR, err);
    return run(st, st->head, 2, sink, cls, err);
}

int inflate_feed(struct inflate *st, const char *in, size_t n,
                      inflate_sink sink, void *cls, struct failure *err)
{
    if (st->failed) {
        *err = st->err;
        return st->failed;
    }
    if (st->coding == CODING_IDENTITY) {
        if (n > st->max_out - st->total)
            return too_large(st, err);
        if (n > 0 && sink(cls, in, n) != 0)
            return sink_failed(st, err);
        st->total += n;
        return INFLATE_OK;
    }
    if (n > st->max_in - st->in) {
        fail_with(&st->err, ERR_PAYLOAD_TOO_LARGE,
                  "the %s body passes %zu compressed bytes, more than a body of at most %zu "
                  "bytes (max_body_bytes) compresses to",
                  coding_name(st->coding), st->max_in, st->max_out);
        return refuse(st, err, INFLATE_EREFUSED);
    }
    st->in += n;
    const unsigned char *p = (const unsigned char *)in;
    if (st->coding == CODING_DEFLATE && !st->chosen) {
        int rc = choose_format(st, &p, &n, sink, cls, err);
        if (rc != INFLATE_OK)
            return rc;
    }
    /* zlib counts input in uInt: hand it over in pieces that fit */
    while (n > 0) {
        size_t piece = n > UINT_MAX ? UINT_MAX : n;
        int rc = run(st, p, piece, sink, cls, err);
        if (rc != INFLATE_OK)
            return rc;
        p += piece, n -= piece;
    }
    return INFLATE_OK;
}

int inflate_finish(struct inflate *st, struct failure *err)
{
    if (st->failed) {
        *err = st->err;
        return st->failed;
    }
    if (st->coding == CODING_IDENTITY || st->ended)
        return INFLATE_OK;
    fail_with(&st->err, ERR_BAD_REQUEST,
              "the %s body ends before its compressed stream does (truncated after %zu "
              "inflated bytes)",
              coding_name(st->coding), st->total);
    return refuse(st, err, INFLATE_EREFUSED);
}
