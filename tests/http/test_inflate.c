/* test_inflate.c -- http/inflate: compressed request bodies. Round trips
 * through zlib's own compressor in every format the module reads, fed whole,
 * a byte at a time and in random pieces; the limit on the inflated size,
 * a decompression bomb included; and every way a body can be refused. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "http/inflate.h"
#include "tests/support/check.h"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

enum format { GZIP, ZLIB, RAW };

/* n bytes of JSON-like text: compressible, but not a run of one byte. */
static char *sample_text(size_t n, uint64_t seed)
{
    static const char *words[] = {"{\"query\": [", "0.125, ", "-3.5e-2, ", "[1, 2, 3], ",
                                  "\"key\": ", "17, ", "0.000244140625, ", "],\n"};
    char *s = malloc(n);
    cr_assert(s);
    for (size_t i = 0; i < n;) {
        const char *w = words[check_xorshift_star(&seed) % 8];
        for (size_t k = 0; w[k] && i < n; k++)
            s[i++] = w[k];
    }
    return s;
}

/* data compressed by zlib in format f at level; *out_len its length. */
static unsigned char *compress_as(enum format f, int level, const void *data, size_t n,
                                  size_t *out_len)
{
    z_stream zs = {0};
    int bits = f == GZIP ? 15 + 16 : f == ZLIB ? 15 : -15;
    cr_assert_eq(deflateInit2(&zs, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&zs, (uLong)n);
    unsigned char *out = malloc(cap);
    cr_assert(out);
    zs.next_in = (unsigned char *)(uintptr_t)data;
    zs.avail_in = (uInt)n;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    *out_len = zs.total_out;
    deflateEnd(&zs);
    return out;
}

/* n bytes of sample text, and the same compressed by zlib. */
struct sample {
    char *text;
    size_t n;
    unsigned char *z;
    size_t zn;
};

static struct sample sample_new(enum format f, int level, size_t n, uint64_t seed)
{
    struct sample s = {.text = sample_text(n, seed), .n = n};
    s.z = compress_as(f, level, s.text, n, &s.zn);
    return s;
}

static void sample_free(struct sample *s)
{
    free(s->text);
    free(s->z);
}

/* What the sink saw. */
struct got {
    char *p;
    size_t len, cap;
    size_t calls, biggest; /* sink calls, and the largest piece */
    int fail_after;        /* > 0: the sink fails on that call */
};

static int collect(void *cls, const char *out, size_t n)
{
    struct got *g = cls;
    cr_assert_gt(n, 0, "the sink got an empty piece");
    g->calls++;
    if (n > g->biggest)
        g->biggest = n;
    if (g->fail_after > 0 && g->calls == (size_t)g->fail_after)
        return -1;
    if (g->len + n > g->cap) {
        g->cap = (g->len + n) * 2;
        g->p = realloc(g->p, g->cap);
        cr_assert(g->p);
    }
    memcpy(g->p + g->len, out, n);
    g->len += n;
    return 0;
}

/* How a body is cut into feed calls: whole, a byte at a time, or random
 * piece sizes from 1 to 3000 bytes drawn from the seed. */
enum pieces { WHOLE, BYTES, RANDOM };

/* Feeds data to st as `how` says and finishes it. Returns the first
 * failure (err filled) or 0; *at is the offset of the piece that failed
 * (n when only finish did). */
static int feed_all(struct inflate *st, const void *data, size_t n, enum pieces how,
                    uint64_t seed, struct got *g, struct failure *err, size_t *at)
{
    const char *p = data;
    size_t off = 0;
    while (off < n) {
        size_t k = how == WHOLE   ? n - off
                   : how == BYTES ? 1
                                  : 1 + check_xorshift_star(&seed) % 3000;
        if (k > n - off)
            k = n - off;
        int rc = inflate_feed(st, p + off, k, collect, g, err);
        if (rc != 0) {
            if (at)
                *at = off;
            return rc;
        }
        off += k;
    }
    if (at)
        *at = n;
    return inflate_finish(st, err);
}

/* Inflates body under coding with max_out, in pieces `how`; returns the
 * status and fills g and err. */
static int inflate_body(const char *coding, size_t max_out, const void *body, size_t n,
                        enum pieces how, uint64_t seed, struct got *g, struct failure *err)
{
    struct inflate *st = inflate_new(coding, max_out, err);
    cr_assert(st, "inflate_new(\"%s\"): %s", coding, err->msg);
    int rc = feed_all(st, body, n, how, seed, g, err, NULL);
    if (rc == 0)
        cr_assert_eq(inflate_total(st), g->len);
    inflate_free(st);
    return rc;
}

static void expect_refused(int rc, const struct failure *err, int code, const char *part)
{
    cr_assert_eq(rc, INFLATE_EREFUSED, "rc %d (%s)", rc, err->msg);
    cr_assert_eq(err->code, code, "code %d, expected %d (%s)", err->code, code, err->msg);
    cr_assert(strstr(err->msg, part), "message \"%s\" lacks \"%s\"", err->msg, part);
}

/* ---------------------------------------------------------------------- */
/* Round trips                                                             */

Test(inflate, round_trips_gzip_zlib_and_raw_deflate_in_any_pieces)
{
    static const struct {
        enum format f;
        const char *coding;
    } cases[] = {
        {GZIP, "gzip"}, {GZIP, " X-GZip\t"}, {ZLIB, "deflate"}, {RAW, "Deflate "},
    };
    static const int levels[] = {0, 1, 9};
    const size_t n = 200000; /* several 64 KiB chunks */
    char *text = sample_text(n, 7);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t l = 0; l < 3; l++) {
            size_t zn;
            unsigned char *z = compress_as(cases[c].f, levels[l], text, n, &zn);
            for (int how = WHOLE; how <= RANDOM; how++) {
                struct got g = {0};
                struct failure err = {0};
                int rc = inflate_body(cases[c].coding, n, z, zn, (enum pieces)how,
                                      (uint64_t)(c * 31 + l + 1), &g, &err);
                cr_assert_eq(rc, 0, "\"%s\" level %d pieces %d: %s", cases[c].coding,
                             levels[l], how, err.msg);
                cr_assert_eq(g.len, n, "\"%s\" level %d pieces %d: %zu bytes",
                             cases[c].coding, levels[l], how, g.len);
                cr_assert(memcmp(g.p, text, n) == 0, "\"%s\" level %d pieces %d differ",
                          cases[c].coding, levels[l], how);
                cr_assert_leq(g.biggest, INFLATE_CHUNK);
                free(g.p);
            }
            free(z);
        }
    free(text);
}

Test(inflate, concatenated_gzip_members_are_one_body)
{
    /* three members, the middle one empty (RFC 1952 §2.2) */
    char *a = sample_text(70000, 1), *b = sample_text(5000, 2);
    size_t na, nb, ne;
    unsigned char *za = compress_as(GZIP, 6, a, 70000, &na);
    unsigned char *ze = compress_as(GZIP, 6, "", 0, &ne);
    unsigned char *zb = compress_as(GZIP, 6, b, 5000, &nb);
    size_t zn = na + ne + nb;
    unsigned char *z = malloc(zn);
    cr_assert(z);
    memcpy(z, za, na);
    memcpy(z + na, ze, ne);
    memcpy(z + na + ne, zb, nb);
    for (int how = WHOLE; how <= RANDOM; how++) {
        struct got g = {0};
        struct failure err = {0};
        int rc = inflate_body("gzip", 75000, z, zn, (enum pieces)how, 5, &g, &err);
        cr_assert_eq(rc, 0, "pieces %d: %s", how, err.msg);
        cr_assert_eq(g.len, 75000, "pieces %d: %zu bytes", how, g.len);
        cr_assert(memcmp(g.p, a, 70000) == 0 && memcmp(g.p + 70000, b, 5000) == 0);
        free(g.p);
    }
    free(a), free(b), free(za), free(ze), free(zb), free(z);
}

Test(inflate, identity_passes_the_pieces_through_unchanged)
{
    static const char *codings[] = {NULL, "", "  ", "identity", " IDENTITY\t"};
    char *text = sample_text(10000, 3);
    for (size_t c = 0; c < sizeof codings / sizeof codings[0]; c++) {
        struct failure err = {0};
        struct inflate *st = inflate_new(codings[c], 10000, &err);
        cr_assert(st, "\"%s\": %s", codings[c] ? codings[c] : "(null)", err.msg);
        struct got g = {0};
        cr_assert_eq(feed_all(st, text, 10000, RANDOM, 9, &g, &err, NULL), 0, "%s", err.msg);
        cr_assert_eq(g.len, 10000);
        cr_assert(memcmp(g.p, text, 10000) == 0);
        /* the same pieces: one sink call per non-empty feed */
        uint64_t seed = 9;
        size_t feeds = 0;
        for (size_t off = 0; off < 10000; feeds++)
            off += 1 + check_xorshift_star(&seed) % 3000;
        cr_assert_eq(g.calls, feeds);
        free(g.p);
        inflate_free(st);
    }
    free(text);
}

/* ---------------------------------------------------------------------- */
/* The limit                                                               */

Test(inflate, a_bomb_stops_at_the_limit_long_before_its_end)
{
    const size_t big = (size_t)10 << 20, max = (size_t)1 << 20;
    char *zeros = calloc(1, big);
    cr_assert(zeros);
    size_t zn;
    unsigned char *z = compress_as(GZIP, 9, zeros, big, &zn);
    free(zeros);
    cr_assert_lt(zn, 20000, "10 MB of zeros compressed to %zu bytes", zn);

    struct failure err = {0};
    struct inflate *st = inflate_new("gzip", max, &err);
    cr_assert(st);
    struct got g = {0};
    size_t at;
    int rc = feed_all(st, z, zn, BYTES, 0, &g, &err, &at);
    expect_refused(rc, &err, ERR_PAYLOAD_TOO_LARGE, "more than 1048576 bytes (max_body_bytes)");
    cr_assert_leq(g.len, max, "the sink saw %zu bytes", g.len);
    cr_assert_leq(inflate_total(st), max);
    /* refused in the piece whose bytes pass the limit: 1 MB of the 10 MB
     * is about a tenth of the input */
    cr_assert_lt(at, zn / 5, "refused at input byte %zu of %zu", at, zn);

    /* the failure is final: no more sink calls, the same error again */
    size_t calls = g.calls;
    struct failure again = {0};
    cr_assert_eq(inflate_feed(st, (const char *)z + at + 1, zn - at - 1, collect, &g,
                                   &again),
                 INFLATE_EREFUSED);
    cr_assert_eq(again.code, ERR_PAYLOAD_TOO_LARGE);
    cr_assert_str_eq(again.msg, err.msg);
    cr_assert_eq(g.calls, calls);
    memset(&again, 0, sizeof again);
    cr_assert_eq(inflate_finish(st, &again), INFLATE_EREFUSED);
    cr_assert_eq(again.code, ERR_PAYLOAD_TOO_LARGE);
    inflate_free(st);
    free(g.p);
    free(z);
}

Test(inflate, the_limit_counts_inflated_bytes_and_is_inclusive)
{
    const size_t n = 150000;
    struct sample s = sample_new(ZLIB, 6, n, 4);
    const char *text = s.text;
    for (int how = WHOLE; how <= RANDOM; how++) {
        struct got g = {0};
        struct failure err = {0};
        cr_assert_eq(inflate_body("deflate", n, s.z, s.zn, (enum pieces)how, 11, &g, &err), 0,
                     "exactly the limit: %s", err.msg);
        free(g.p);

        memset(&g, 0, sizeof g);
        int rc = inflate_body("deflate", n - 1, s.z, s.zn, (enum pieces)how, 11, &g, &err);
        expect_refused(rc, &err, ERR_PAYLOAD_TOO_LARGE, "more than 149999 bytes");
        cr_assert_leq(g.len, n - 1);
        cr_assert(memcmp(g.p, text, g.len) == 0);
        free(g.p);

        /* identity: the same limit on the bytes as sent */
        memset(&g, 0, sizeof g);
        cr_assert_eq(inflate_body("identity", n, text, n, (enum pieces)how, 11, &g, &err), 0);
        free(g.p);
        memset(&g, 0, sizeof g);
        rc = inflate_body(NULL, n - 1, text, n, (enum pieces)how, 11, &g, &err);
        expect_refused(rc, &err, ERR_PAYLOAD_TOO_LARGE, "more than 149999 bytes");
        cr_assert_leq(g.len, n - 1);
        free(g.p);
    }
    sample_free(&s);
}

Test(inflate, no_limit_at_all_does_not_overflow)
{
    struct sample s = sample_new(GZIP, 6, 100000, 5);
    struct got g = {0};
    struct failure err = {0};
    cr_assert_eq(inflate_body("gzip", SIZE_MAX, s.z, s.zn, RANDOM, 2, &g, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(g.len, s.n);
    cr_assert(memcmp(g.p, s.text, s.n) == 0);
    free(g.p);
    sample_free(&s);
}

Test(inflate, compressed_bytes_are_bounded_too)
{
    /* incompressible bytes of exactly the limit, stored or not, pass */
    const size_t n = 300000;
    unsigned char *noise = malloc(n);
    cr_assert(noise);
    uint64_t seed = 99;
    for (size_t i = 0; i < n; i++)
        noise[i] = (unsigned char)(check_xorshift_star(&seed) >> 56);
    for (int f = GZIP; f <= RAW; f++)
        for (int level = 0; level <= 9; level += 9) {
            size_t zn;
            unsigned char *z = compress_as((enum format)f, level, noise, n, &zn);
            struct got g = {0};
            struct failure err = {0};
            int rc = inflate_body(f == GZIP ? "gzip" : "deflate", n, z, zn, RANDOM, 1, &g, &err);
            cr_assert_eq(rc, 0, "format %d level %d, %zu bytes compressed: %s", f, level, zn,
                         err.msg);
            cr_assert_eq(g.len, n);
            free(g.p), free(z);
        }
    free(noise);

    /* empty gzip members and empty stored blocks inflate to nothing: the
     * input bound stops them (max_out 1000: at most 1000 + 0 + 1024 bytes) */
    size_t en;
    unsigned char *empty = compress_as(GZIP, 6, "", 0, &en);
    static const unsigned char stored[5] = {0x00, 0x00, 0x00, 0xff, 0xff};
    const size_t total = 100000;
    unsigned char *body = malloc(total);
    cr_assert(body);
    for (int c = 0; c < 2; c++) {
        const unsigned char *unit = c == 0 ? empty : stored;
        size_t un = c == 0 ? en : sizeof stored;
        size_t len = total / un * un;
        for (size_t off = 0; off < len; off += un)
            memcpy(body + off, unit, un);
        struct failure err = {0};
        struct inflate *st = inflate_new(c == 0 ? "gzip" : "deflate", 1000, &err);
        cr_assert(st);
        struct got g = {0};
        size_t at;
        int rc = feed_all(st, body, len, BYTES, 0, &g, &err, &at);
        expect_refused(rc, &err, ERR_PAYLOAD_TOO_LARGE, "passes 2024 compressed bytes");
        cr_assert_eq(at, 2024, "%s: refused at byte %zu", c == 0 ? "gzip" : "deflate", at);
        cr_assert_eq(g.len, 0);
        inflate_free(st);
    }
    free(body), free(empty);
}

/* ---------------------------------------------------------------------- */
/* Refusals                                                                */

Test(inflate, every_truncation_is_refused)
{
    static const struct {
        enum format f;
        const char *coding;
    } cases[] = {{GZIP, "gzip"}, {ZLIB, "deflate"}, {RAW, "deflate"}};
    for (size_t c = 0; c < 3; c++) {
        struct sample s = sample_new(cases[c].f, 6, 3000, 6);
        /* every proper prefix, the empty body included */
        for (size_t cut = 0; cut < s.zn; cut++) {
            struct got g = {0};
            struct failure err = {0};
            int rc = inflate_body(cases[c].coding, 3000, s.z, cut, RANDOM, cut + 1, &g, &err);
            cr_assert_eq(rc, INFLATE_EREFUSED, "format %d cut at %zu of %zu: rc %d",
                         cases[c].f, cut, s.zn, rc);
            cr_assert_eq(err.code, ERR_BAD_REQUEST, "format %d cut at %zu: %s", cases[c].f,
                         cut, err.msg);
            free(g.p);
        }
        /* the message of a clean cut says so */
        struct got g = {0};
        struct failure err = {0};
        int rc = inflate_body(cases[c].coding, 3000, s.z, s.zn - 1, BYTES, 0, &g, &err);
        expect_refused(rc, &err, ERR_BAD_REQUEST, "truncated");
        free(g.p);
        sample_free(&s);
    }
}

Test(inflate, corrupt_data_is_refused_with_zlibs_message)
{
    struct sample s = sample_new(GZIP, 6, 20000, 8);
    struct got g = {0};
    struct failure err = {0};

    /* a wrong CRC-32 in the gzip trailer */
    s.z[s.zn - 6] ^= 0x40;
    int rc = inflate_body("gzip", 20000, s.z, s.zn, RANDOM, 3, &g, &err);
    expect_refused(rc, &err, ERR_BAD_REQUEST, "incorrect data check");
    sample_free(&s);

    /* not gzip at all */
    free(g.p), memset(&g, 0, sizeof g);
    rc = inflate_body("gzip", 20000, "{\"query\": []}", 13, WHOLE, 0, &g, &err);
    expect_refused(rc, &err, ERR_BAD_REQUEST, "the gzip body is corrupt: incorrect header check");
    cr_assert_eq(g.len, 0);

    /* a zlib stream with a wrong Adler-32 */
    s = sample_new(ZLIB, 6, 20000, 8);
    s.z[s.zn - 1] ^= 1;
    free(g.p), memset(&g, 0, sizeof g);
    rc = inflate_body("deflate", 20000, s.z, s.zn, BYTES, 0, &g, &err);
    expect_refused(rc, &err, ERR_BAD_REQUEST, "the deflate body is corrupt: incorrect data check");

    /* raw deflate with an invalid block type (BTYPE = 11) */
    free(g.p), memset(&g, 0, sizeof g);
    rc = inflate_body("deflate", 20000, "\x07\x00\x00", 3, BYTES, 0, &g, &err);
    expect_refused(rc, &err, ERR_BAD_REQUEST, "invalid block type");

    /* a zlib stream that asks for a preset dictionary (FDICT) */
    z_stream zs = {0};
    unsigned char dz[64];
    cr_assert_eq(deflateInit(&zs, 6), Z_OK);
    cr_assert_eq(deflateSetDictionary(&zs, (const Bytef *)"query", 5), Z_OK);
    zs.next_in = (unsigned char *)"query query";
    zs.avail_in = 11;
    zs.next_out = dz;
    zs.avail_out = sizeof dz;
    cr_assert_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t dn = zs.total_out;
    deflateEnd(&zs);
    free(g.p), memset(&g, 0, sizeof g);
    rc = inflate_body("deflate", 100, dz, dn, WHOLE, 0, &g, &err);
    expect_refused(rc, &err, ERR_BAD_REQUEST, "preset dictionary");
    free(g.p);
    sample_free(&s);
}

Test(inflate, bytes_after_the_end_are_refused)
{
    static const struct {
        enum format f;
        const char *coding, *part;
    } cases[] = {
        {GZIP, "gzip", "bytes after its member 1 that do not start another member"},
        {ZLIB, "deflate", "bytes after the end of its stream"},
        {RAW, "deflate", "bytes after the end of its stream"},
    };
    for (size_t c = 0; c < 3; c++) {
        struct sample s = sample_new(cases[c].f, 6, 5000, 10);
        unsigned char *zt = malloc(s.zn + 3);
        cr_assert(zt);
        memcpy(zt, s.z, s.zn);
        memcpy(zt + s.zn, "{}\n", 3);
        for (int how = WHOLE; how <= RANDOM; how++) {
            struct got g = {0};
            struct failure err = {0};
            int rc = inflate_body(cases[c].coding, 5000, zt, s.zn + 3, (enum pieces)how, 4,
                                  &g, &err);
            expect_refused(rc, &err, ERR_BAD_REQUEST, cases[c].part);
            free(g.p);
        }
        free(zt);
        sample_free(&s);
    }
}

Test(inflate, unknown_codings_are_415_naming_the_coding)
{
    static const struct {
        const char *coding, *quoted;
    } cases[] = {
        {"br", "\"br\""},
        {"compress", "\"compress\""},
        {" gzip, identity ", "\"gzip, identity\""},
        {"gzip;q=1", "\"gzip;q=1\""},
        {"gzipx", "\"gzipx\""},
        {"x-deflate", "\"x-deflate\""},
        {"zstd", "\"zstd\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct failure err = {0};
        cr_assert_null(inflate_new(cases[c].coding, 100, &err), "\"%s\" was accepted",
                       cases[c].coding);
        cr_assert_eq(err.code, ERR_UNSUPPORTED_MEDIA_TYPE, "\"%s\"", cases[c].coding);
        cr_assert(strstr(err.msg, cases[c].quoted), "\"%s\": %s", cases[c].coding, err.msg);
        cr_assert(strstr(err.msg, "gzip, deflate or identity"), "%s", err.msg);
    }
    /* a long value is cut, so the message stays whole */
    char longv[300];
    memset(longv, 'a', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    struct failure err = {0};
    cr_assert_null(inflate_new(longv, 100, &err));
    cr_assert_eq(err.code, ERR_UNSUPPORTED_MEDIA_TYPE);
    cr_assert(strstr(err.msg, "aaa...\" is not supported"), "%s", err.msg);
}

Test(inflate, a_failing_sink_stops_the_stream)
{
    struct sample s = sample_new(GZIP, 6, 300000, 12);
    static const char *codings[] = {"gzip", "identity"};
    for (int c = 0; c < 2; c++) {
        struct got g = {.fail_after = 2};
        struct failure err = {0};
        const void *body = c == 0 ? (const void *)s.z : s.text;
        size_t n = c == 0 ? s.zn : s.n;
        int rc = inflate_body(codings[c], 300000, body, n, RANDOM, 6, &g, &err);
        cr_assert_eq(rc, INFLATE_ESINK, "%s: rc %d", codings[c], rc);
        cr_assert_eq(err.code, ERR_INTERNAL);
        cr_assert_eq(g.calls, 2, "%s: %zu sink calls", codings[c], g.calls);
        free(g.p);
    }
    sample_free(&s);
}
