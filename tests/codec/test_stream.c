/* test_stream.c -- the one stream encoder (codec/stream.h): text with raw
 * and base64 pieces spliced in, read from every offset in reads of every
 * size, against the body written out whole. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/stream.h"
#include "lib/base64.h"

Test(stream, any_read_gives_the_body_written_whole)
{
    static const unsigned char a[] = "\x01\x02\x03\x04\x05", raw[] = "RAWBYTES";
    struct stream *st = stream_new(NULL, NULL);
    cr_assert_not_null(st);
    st->text = strdup("{\"x\":\"\",\"y\":\"\"}");
    cr_assert_eq(stream_piece(st, 6, a, 5, STREAM_BASE64), 0);
    cr_assert_eq(stream_piece(st, 13, a, 4, STREAM_BASE64), 0);
    cr_assert_eq(stream_piece(st, STREAM_AT_END, raw, 8, STREAM_RAW), 0);
    stream_done(st, strlen(st->text));
    cr_assert_eq(stream_text_len(st), 15);
    cr_assert_eq(stream_pieces(st), 3);
    char b1[16], b2[16];
    b1[base64_encode(b1, a, 5)] = '\0';
    b2[base64_encode(b2, a, 4)] = '\0';
    char want[128];
    snprintf(want, sizeof want, "{\"x\":\"%s\",\"y\":\"%s\"}RAWBYTES", b1, b2);
    cr_assert_eq(stream_size(st), strlen(want));
    const size_t total = stream_size(st);
    char got[128];
    for (size_t max = 1; max <= total + 1; max++)
        for (size_t from = 0; from <= total; from++) {
            size_t pos = from, k;
            memset(got, 0, sizeof got);
            while ((k = stream_read(st, pos, got + pos - from, max)) > 0)
                pos += k;
            cr_assert_eq(pos, total, "max %zu from %zu: ended at %zu", max, from, pos);
            cr_assert(memcmp(got, want + from, total - from) == 0,
                      "max %zu from %zu: %.*s", max, from, (int)(total - from), got);
        }
    /* full: the caller writes the piece itself */
    for (int i = stream_pieces(st); i < STREAM_MAX_PIECES; i++)
        cr_assert_eq(stream_piece(st, STREAM_AT_END, raw, 1, STREAM_RAW), 0);
    cr_assert_eq(stream_piece(st, STREAM_AT_END, raw, 1, STREAM_RAW), -1);
    stream_free(st);
}
