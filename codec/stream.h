/* stream.h -- a 200 body sent as it is read, the one stream encoder of
 * both protocols: JSON text written at once, and the big tensors' bytes
 * spliced in at offsets of that text only when the sender reads them,
 * either raw (v2 binary_data) or as base64 (POST /attention with
 * output_encoding "base64"). The float buffers the pieces point into are
 * the stream's (freed with it). codec_stream_new() and v2_stream_new()
 * make one; the sender reads it.
 *
 *     struct stream *st = stream_new(out, w);      (owns out and w)
 *     ... write st->text ...; stream_piece(st, at, bytes, n, STREAM_BASE64);
 *     stream_done(st, text_len);
 *     stream_size(st); stream_read(st, pos, dst, max); ...; stream_free(st);
 */
#ifndef CODEC_STREAM_H
#define CODEC_STREAM_H

#include <stddef.h>

#define STREAM_MAX_PIECES 6 /* v2: one per output; /attention: output and weights (top-k: 2) */

enum stream_coding { STREAM_RAW, STREAM_BASE64 };
#define STREAM_AT_END ((size_t)-1) /* a piece's offset: after the whole text */

struct stream {
    char *text;      /* the JSON text, without the pieces (malloc'd, owned) */
    size_t text_len; /* its bytes */
    size_t total;    /* bytes of the whole body */
    struct {
        size_t at;                /* offset in text where it goes */
        const unsigned char *src; /* its bytes (in out or weights) */
        size_t nbytes;            /* of src */
        size_t len;               /* bytes it takes in the body (base64: BASE64_LEN) */
        int coding;               /* enum stream_coding */
    } piece[STREAM_MAX_PIECES];
    int npieces;
    float *out, *weights; /* owned */
    void *extra;          /* owned: other bytes a piece points into (v2's cache_length), or NULL */
};

/* A stream owning out and weights (malloc'd or NULL), text NULL; NULL when
 * out of memory (out and weights freed). */
struct stream *stream_new(float *out, float *weights);
/* Free st, its text, out and weights. NULL: nothing. */
void stream_free(struct stream *st);

/* Add a piece of nbytes at src, to go at offset at of the text (at no
 * smaller than the last piece's; STREAM_AT_END: after the text). 0, or -1 when the stream has
 * STREAM_MAX_PIECES already (the caller writes it into the text). */
int stream_piece(struct stream *st, size_t at, const void *src, size_t nbytes, int coding);
/* The text is written: text_len bytes; sets total (and the offsets
 * STREAM_AT_END). */
void stream_done(struct stream *st, size_t text_len);
/* Copy up to max bytes of the body from offset pos into dst; returns how
 * many (0 at the end). Any pos and max work; reads do not change st. */
size_t stream_read(const struct stream *st, size_t pos, char *dst, size_t max);
/* Bytes of the whole body; of its text (v2: the JSON part, the
 * Inference-Header-Content-Length); how many pieces it splices in. */
size_t stream_size(const struct stream *st);
size_t stream_text_len(const struct stream *st);
int stream_pieces(const struct stream *st);

#endif
