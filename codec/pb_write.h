/* pb_write.h -- a growable byte buffer and the protobuf wire format
 * written into it (varints, tags, length-delimited and fixed fields), for
 * the messages codec/oip_*.c write themselves; the JSON text of a
 * transcoded request is written into the same buffer.
 *
 *     struct pb_buf b = {0};
 *     pb_string(&b, 1, "name");          (field 1, length-delimited)
 *     pb_varint_field(&b, 2, 7);
 *     if (b.nomem) ... ; free(b.p);
 *
 * A failed allocation sets nomem and makes every later call a no-op, so a
 * writer checks once at the end. */
#ifndef CODEC_PB_WRITE_H
#define CODEC_PB_WRITE_H

#include <stddef.h>
#include <stdint.h>

#define PB_VARINT_MAX 10 /* bytes of the longest varint */

/* Wire types. */
enum pb_wire { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };

struct pb_buf {
    unsigned char *p; /* malloc'd, len bytes used of cap */
    size_t len, cap;
    int nomem;
};

/* Room for n more bytes: 0, or -1 (nomem set). */
int pb_reserve(struct pb_buf *b, size_t n);
/* Append n bytes of s; the NUL-terminated s; one byte. */
void pb_bytes(struct pb_buf *b, const void *s, size_t n);
void pb_str(struct pb_buf *b, const char *s);
void pb_byte_slow(struct pb_buf *b, unsigned char c);
static inline void pb_byte(struct pb_buf *b, unsigned char c)
{
    if (b->len < b->cap && !b->nomem)
        b->p[b->len++] = c;
    else
        pb_byte_slow(b, c);
}

/* v as a varint at dst (PB_VARINT_MAX bytes): its length. */
size_t pb_varint_put(unsigned char *dst, uint64_t v);
/* Bytes of v as a varint. */
size_t pb_varint_len(uint64_t v);

void pb_varint(struct pb_buf *b, uint64_t v);
void pb_tag(struct pb_buf *b, unsigned field, enum pb_wire w);
void pb_varint_field(struct pb_buf *b, unsigned field, uint64_t v);
/* Field of wire type PB_LEN: tag, length n, the n bytes of s. */
void pb_len_field(struct pb_buf *b, unsigned field, const void *s, size_t n);
void pb_string(struct pb_buf *b, unsigned field, const char *s);
/* Little-endian fixed-width values (no tag). */
void pb_fixed64(struct pb_buf *b, uint64_t v);
void pb_fixed32(struct pb_buf *b, uint32_t v);

#endif
