/* base64.h -- base64, standard alphabet, padded (RFC 4648 section 4).
 *
 * Tensors travel as base64 of their little-endian bytes, both ways; the
 * encoder also writes any character range of an encoding, so an answer can
 * be encoded piece by piece as it is sent. Long inputs go through AVX2 where
 * the CPU has it (chosen at run time); the _scalar functions are the
 * portable reference, which gives the same bytes and the same errors. */
#ifndef LIB_BASE64_H
#define LIB_BASE64_H

#include <stddef.h>

/* Characters that n bytes encode to. */
#define BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Write the encoding of src (n bytes) to dst; returns BASE64_LEN(n). */
size_t base64_encode(char *dst, const unsigned char *src, size_t n);

/* Characters [from, from + max) of the encoding of src (n bytes), any from;
 * returns how many were written (fewer at the end of the encoding). */
size_t base64_encode_range(char *dst, size_t max, const unsigned char *src, size_t n,
                           size_t from);

/* Decode src (n characters) into dst (room for n / 4 * 3 bytes). Returns
 * the byte count, or -1 with the offset of the first bad character in
 * *bad_at (n when the length is not a multiple of 4). */
long long base64_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at);

/* The same two without vector code (tests and benchmarks compare them). */
size_t base64_encode_scalar(char *dst, const unsigned char *src, size_t n);
long long base64_decode_scalar(unsigned char *dst, const char *src, size_t n, size_t *bad_at);

#endif
