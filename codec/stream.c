/* stream.c -- a body sent as it is read; see stream.h. */
#include "codec/stream.h"

#include <stdlib.h>
#include <string.h>

#include "lib/base64.h"

int stream_piece(struct stream *st, size_t at, const void *src, size_t nbytes, int coding)
{
    if (st->npieces >= STREAM_MAX_PIECES)
        return -1;
    st->piece[st->npieces].at = at;
    st->piece[st->npieces].src = src;
    st->piece[st->npieces].nbytes = nbytes;
    st->piece[st->npieces].len = coding == STREAM_BASE64 ? BASE64_LEN(nbytes) : nbytes;
    st->piece[st->npieces].coding = coding;
    st->npieces++;
    return 0;
}

void stream_done(struct stream *st, size_t text_len)
{
    st->text_len = st->total = text_len;
    for (int i = 0; i < st->npieces; i++) {
        if (st->piece[i].at == STREAM_AT_END)
            st->piece[i].at = text_len;
        st->total += st->piece[i].len;
    }
}

size_t stream_read(const struct stream *st, size_t pos, char *dst, size_t max)
{
    /* the body: text up to the next piece, the piece, ..., the rest of the
     * text; vstart is where text[tpos] (or the piece) starts in the body */
    size_t done = 0, vstart = 0, tpos = 0;
    for (int i = 0; i <= st->npieces && done < max; i++) {
        const size_t tend = i < st->npieces ? st->piece[i].at : st->text_len, tl = tend - tpos;
        if (pos < vstart + tl) {
            size_t k = vstart + tl - pos;
            if (k > max - done)
                k = max - done;
            memcpy(dst + done, st->text + tpos + (pos - vstart), k);
            done += k, pos += k;
        }
        vstart += tl, tpos = tend;
        if (i < st->npieces && done < max) {
            const size_t len = st->piece[i].len, from = pos - vstart;
            if (pos < vstart + len) {
                size_t k;
                if (st->piece[i].coding == STREAM_BASE64) {
                    k = base64_encode_range(dst + done, max - done, st->piece[i].src,
                                            st->piece[i].nbytes, from);
                } else {
                    k = len - from;
                    if (k > max - done)
                        k = max - done;
                    memcpy(dst + done, st->piece[i].src + from, k);
                }
                done += k, pos += k;
            }
            vstart += len;
        }
    }
    return done;
}

struct stream *stream_new(float *out, float *weights)
{
    struct stream *st = calloc(1, sizeof *st);
    if (!st) {
        free(out);
        free(weights);
        return NULL;
    }
    st->out = out, st->weights = weights;
    return st;
}

void stream_free(struct stream *st)
{
    if (!st)
        return;
    free(st->text);
    free(st->out);
    free(st->weights);
    free(st->extra);
    free(st);
}

size_t stream_size(const struct stream *st)
{
    return st->total;
}

size_t stream_text_len(const struct stream *st)
{
    return st->text_len;
}

int stream_pieces(const struct stream *st)
{
    return st->npieces;
}
