/* utf8.h -- well-formed UTF-8 (RFC 3629), the one rule for every reader
 * that checks it: no overlong forms, no surrogates (U+D800..U+DFFF),
 * nothing past U+10FFFF (what Rust's str::from_utf8 and JSON require).
 * The JSON syntax check (codec/scan_json.c), the safetensors header
 * (model/safetensors.c) and error messages (lib/errors.c) use it.
 *
 *     if (!utf8_valid(header, len)) refuse;
 *     size_t k = utf8_seq(s, n);    (0: s does not start a valid sequence)
 */
#ifndef LIB_UTF8_H
#define LIB_UTF8_H

#include <stddef.h>

/* Bytes (1 to 4) of the well-formed sequence s starts (n bytes left), or 0
 * when it starts none (n == 0 included). */
size_t utf8_seq(const unsigned char *s, size_t n);

/* 1 when s[0..n) is well-formed UTF-8, else 0. */
int utf8_valid(const void *s, size_t n);

/* The NUL-terminated src into dst (n >= 1 bytes) as valid UTF-8: each byte
 * that does not start a well-formed sequence becomes U+FFFD; cut at a
 * character boundary when dst is full. */
void utf8_clean(char *dst, size_t n, const char *src);

#endif
