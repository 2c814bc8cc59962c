/* pb_write.c -- the protobuf wire format into a growable buffer; see
 * pb_write.h. */
#include "codec/pb_write.h"

#include <stdlib.h>
#include <string.h>

int pb_reserve(struct pb_buf *b, size_t n)
{
    if (b->nomem)
        return -1;
    if (n <= b->cap - b->len)
        return 0;
    if (n > SIZE_MAX / 2 - b->len) {
        b->nomem = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->nomem = 1;
        return -1;
    }
    b->p = p, b->cap = cap;
    return 0;
}

void pb_bytes(struct pb_buf *b, const void *s, size_t n)
{
    if (n == 0 || (n > b->cap - b->len && pb_reserve(b, n)) || b->nomem)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void pb_str(struct pb_buf *b, const char *s)
{
    pb_bytes(b, s, strlen(s));
}

void pb_byte_slow(struct pb_buf *b, unsigned char c)
{
    pb_bytes(b, &c, 1);
}

size_t pb_varint_put(unsigned char *dst, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (unsigned char)v;
    return n;
}

size_t pb_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

void pb_varint(struct pb_buf *b, uint64_t v)
{
    unsigned char t[PB_VARINT_MAX];
    const size_t n = pb_varint_put(t, v);
    pb_bytes(b, t, n);
}

void pb_tag(struct pb_buf *b, unsigned field, enum pb_wire w)
{
    pb_varint(b, (uint64_t)field << 3 | (uint64_t)w);
}

void pb_varint_field(struct pb_buf *b, unsigned field, uint64_t v)
{
    pb_tag(b, field, PB_VARINT);
    pb_varint(b, v);
}

void pb_len_field(struct pb_buf *b, unsigned field, const void *s, size_t n)
{
    pb_tag(b, field, PB_LEN);
    pb_varint(b, n);
    pb_bytes(b, s, n);
}

void pb_string(struct pb_buf *b, unsigned field, const char *s)
{
    pb_len_field(b, field, s, strlen(s));
}

void pb_fixed64(struct pb_buf *b, uint64_t v)
{
    unsigned char t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (unsigned char)(v >> (8 * i));
    pb_bytes(b, t, sizeof t);
}

void pb_fixed32(struct pb_buf *b, uint32_t v)
{
    unsigned char t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (unsigned char)(v >> (8 * i));
    pb_bytes(b, t, sizeof t);
}
