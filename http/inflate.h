/* inflate.h -- request bodies sent with Content-Encoding: gzip or deflate,
 * inflated as they arrive, with the body limit applied to what they
 * inflate to.
 *
 * A client may compress a request body (RFC 9110 §8.4). The limit that
 * protects the server is on the bytes it must hold and parse, so it is
 * applied to the inflated body: a 10 KB body that inflates to 10 MB is
 * refused with 413 as soon as the inflated bytes pass the limit, after
 * inflating at most max_out + 1 bytes of it (a decompression bomb costs
 * no more CPU or memory than a body of the limit's size). The HTTP layer
 * creates one stream per request and feeds it the pieces libmicrohttpd
 * hands over; each inflated chunk (at most INFLATE_CHUNK bytes) goes
 * to a sink, such as the function that appends to the request's buffer:
 *
 *     struct failure e;
 *     struct inflate *bi = inflate_new(content_encoding, max_body, &e);
 *     if (!bi)                  answer e.code (415 for an unknown coding,
 *                               with "Accept-Encoding: " INFLATE_ACCEPT_ENCODING)
 *     for each piece of the body:
 *         if (inflate_feed(bi, piece, n, append, req, &e) != 0)
 *             answer e.code with e.msg (413, 400, or the sink's failure)
 *     at the end of the body:
 *         if (inflate_finish(bi, &e) != 0)  answer e.code with e.msg (400)
 *     inflate_free(bi);   (NULL is fine; also for aborted requests)
 *
 * Codings, compared case-insensitively, with spaces and tabs around them
 * ignored:
 *   - NULL, "" or "identity": the body passes to the sink unchanged (same
 *     pieces), and max_out still applies.
 *   - "gzip" or "x-gzip" (RFC 9110 §8.4.1.3): the gzip format (RFC 1952).
 *     Concatenated members are one body, as RFC 1952 §2.2 and gunzip read
 *     them; bytes after a member that do not start another one are refused.
 *   - "deflate": the zlib format (RFC 1950), as RFC 9110 §8.4.1.2 defines
 *     it; some clients send raw deflate (RFC 1951) under this name, so a
 *     body whose first two bytes are not a zlib header is read as raw
 *     deflate (a zlib header: CM = 8, CINFO ≤ 7, the 16 bits a multiple
 *     of 31; a raw stream starts that way only with a non-final stored
 *     block whose padding bits are not zero, which zlib never writes).
 *     Bytes after the end of the stream are refused.
 *   - anything else, lists ("gzip, identity") included: 415 with a message
 *     quoting the coding. RFC 9110 §15.5.16 asks for an Accept-Encoding
 *     header in that answer naming the codings that would have been taken.
 *
 * Errors (struct failure, lib/errors.h; code is an enum http_error):
 *   ERR_UNSUPPORTED_MEDIA_TYPE 415  an unknown coding (inflate_new)
 *   ERR_PAYLOAD_TOO_LARGE      413  the body inflates past max_out (the sink
 *                                   has seen at most max_out bytes), or its
 *                                   compressed bytes pass max_out + max_out/1024
 *                                   + 1024, more than such a body compresses to
 *                                   (empty gzip members inflate to nothing)
 *   ERR_BAD_REQUEST            400  corrupt data (zlib's message quoted),
 *                                   a truncated stream, trailing bytes, a
 *                                   zlib stream that needs a dictionary
 *   ERR_INTERNAL               500  out of memory, or the sink failed
 * A failure is final: later feed and finish calls on the same stream do
 * nothing and return the same error again.
 *
 * Memory: with a coding, one allocation of about 64 KiB (the state and the
 * output buffer) in inflate_new, and zlib's own state (about 7 KiB,
 * plus its 32 KiB window once output starts). Identity needs only the
 * small struct. Threading: a stream is used by one thread at a time.
 */
#ifndef HTTP_INFLATE_H
#define HTTP_INFLATE_H

#include <stddef.h>

#include "lib/errors.h"

/* The most bytes one sink call receives for a compressed body. */
#define INFLATE_CHUNK ((size_t)64 << 10)

/* The codings accepted besides identity, for the Accept-Encoding header of
 * a 415 answer (RFC 9110 §12.5.3). */
#define INFLATE_ACCEPT_ENCODING "gzip, deflate"

/* inflate_feed() and inflate_finish() results. */
enum inflate_status {
    INFLATE_OK = 0,
    INFLATE_EREFUSED = -1, /* the body is refused: err says why (400, 413, 500) */
    INFLATE_ESINK = -2,    /* the sink returned nonzero; err is a generic 500 and
                                   the sink's cls knows the real reason */
};

struct inflate;

/* Receives inflated bytes (out: n ≥ 1 bytes, borrowed for the call).
 * Returns 0 to go on, nonzero to stop the stream (INFLATE_ESINK). */
typedef int (*inflate_sink)(void *cls, const char *out, size_t n);

/* A stream for a body sent with the Content-Encoding header value
 * content_encoding (borrowed; NULL when the header is absent) that may
 * inflate to at most max_out bytes. Returns NULL with err filled: 415 for a
 * coding other than those listed above, 500 when out of memory. */
struct inflate *inflate_new(const char *content_encoding, size_t max_out,
                                      struct failure *err);

/* Inflates the next n bytes of the body (in, borrowed) and passes the
 * result to sink(cls, ...) in pieces of at most INFLATE_CHUNK bytes,
 * before returning. Refuses (err filled) the moment the total would pass
 * max_out, without calling the sink for the chunk that passes it; when the
 * compressed bytes fed so far pass their bound (above); and on corrupt
 * data. n == 0 is a no-op. Returns an enum inflate_status. */
int inflate_feed(struct inflate *st, const char *in, size_t n,
                      inflate_sink sink, void *cls, struct failure *err);

/* The body has ended: 0 when the stream ended properly (for gzip, at the
 * end of a member), INFLATE_EREFUSED with err filled when it was cut
 * short (an empty body with a coding is cut short too) or had failed
 * before. Identity always ends properly. */
int inflate_finish(struct inflate *st, struct failure *err);

/* Bytes passed to the sink so far (the inflated body's length once
 * finished). */
size_t inflate_total(const struct inflate *st);

/* Frees st and zlib's state; NULL is a no-op. */
void inflate_free(struct inflate *st);

#endif
