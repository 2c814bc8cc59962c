/* base64.c -- see base64.h.
 *
 * Two implementations. The portable one is the reference and does
 * everything: ends, padding, errors. On a CPU with AVX2 (picked at run time
 * with __builtin_cpu_supports, so the binary runs on any x86-64) vector
 * loops take the bulk of long inputs first, 24 bytes to 32 characters at a
 * time, with the algorithms of Muła and Lemire, "Faster Base64 Encoding and
 * Decoding Using AVX2 Instructions" (ACM TOMS 44(3), 2018), as aklomp/base64
 * writes them; they stop before the last 4 characters and before any
 * 32-character block holding a byte outside the alphabet, and the portable
 * code goes on from there, so both give the same bytes and the same errors
 * (tests/lib/test_base64.c compares them on every length and bad byte). */
#include "lib/base64.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define B64_X86 1
#endif

/* Each base64 character's value shifted into its place of a quad's 24 bits
 * (the first character's 6 bits on top), and bit 24 for every byte outside
 * the alphabet: OR the four and test bit 24 once. */
#define B64V(c) ((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' \
    : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 : (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 \
    : (c) == '+' ? 62 : (c) == '/' ? 63 : -1)
#define B64S(c, sh) (B64V(c) < 0 ? 0x1000000u : (uint32_t)B64V(c) << (sh))
#define B64_ROW(c, sh) B64S(c, sh), B64S(c + 1, sh), B64S(c + 2, sh), B64S(c + 3, sh), \
    B64S(c + 4, sh), B64S(c + 5, sh), B64S(c + 6, sh), B64S(c + 7, sh)
#define B64_TABLE(sh) { \
    B64_ROW(0, sh),   B64_ROW(8, sh),   B64_ROW(16, sh),  B64_ROW(24, sh),  B64_ROW(32, sh),  \
    B64_ROW(40, sh),  B64_ROW(48, sh),  B64_ROW(56, sh),  B64_ROW(64, sh),  B64_ROW(72, sh),  \
    B64_ROW(80, sh),  B64_ROW(88, sh),  B64_ROW(96, sh),  B64_ROW(104, sh), B64_ROW(112, sh), \
    B64_ROW(120, sh), B64_ROW(128, sh), B64_ROW(136, sh), B64_ROW(144, sh), B64_ROW(152, sh), \
    B64_ROW(160, sh), B64_ROW(168, sh), B64_ROW(176, sh), B64_ROW(184, sh), B64_ROW(192, sh), \
    B64_ROW(200, sh), B64_ROW(208, sh), B64_ROW(216, sh), B64_ROW(224, sh), B64_ROW(232, sh), \
    B64_ROW(240, sh), B64_ROW(248, sh) }
static const uint32_t b64_dec[4][256] = {B64_TABLE(18), B64_TABLE(12), B64_TABLE(6),
                                         B64_TABLE(0)};
#undef B64_TABLE
#undef B64_ROW
#undef B64S
#undef B64V

#define B64_BAD 0x1000000u

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters for every 12 bits of input: half the lookups. */
static char b64_pairs[4096][2];
static pthread_once_t b64_pairs_once = PTHREAD_ONCE_INIT;

static void b64_pairs_init(void)
{
    for (int i = 0; i < 4096; i++)
        b64_pairs[i][0] = b64_alphabet[i >> 6], b64_pairs[i][1] = b64_alphabet[i & 63];
}

/* ---------------------------------------------------------------------- */
/* Portable                                                                */

size_t base64_encode_scalar(char *dst, const unsigned char *src, size_t n)
{
    const char *a = b64_alphabet;
    pthread_once(&b64_pairs_once, b64_pairs_init);
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        const uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        memcpy(dst + o, b64_pairs[v >> 12], 2);
        memcpy(dst + o + 2, b64_pairs[v & 0xfff], 2);
        o += 4;
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)src[i] << 16;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63], dst[o++] = '=', dst[o++] = '=';
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8;
        dst[o++] = a[v >> 18], dst[o++] = a[(v >> 12) & 63];
        dst[o++] = a[(v >> 6) & 63], dst[o++] = '=';
    }
    return o;
}

/* Quads [i, full) of s (full a multiple of 4, before the last quad) into
 * dst from o; returns 0, or -1 with the offset of the bad byte. Every quad
 * here has a quad after it, so each may store 4 bytes: the 4th is the next
 * quad's first, written again by it. */
static int decode_quads(unsigned char *dst, size_t o, const unsigned char *s, size_t i,
                        size_t full, size_t *bad_at)
{
    for (; i < full; i += 4, o += 3) {
        const uint32_t v = b64_dec[0][s[i]] | b64_dec[1][s[i + 1]] | b64_dec[2][s[i + 2]] |
                           b64_dec[3][s[i + 3]];
        if (v & B64_BAD) {
            size_t j = 0;
            while (!(b64_dec[j][s[i + j]] & B64_BAD))
                j++;
            *bad_at = i + j;
            return -1;
        }
        const uint32_t be = __builtin_bswap32(v << 8);
        memcpy(dst + o, &be, 4);
    }
    return 0;
}

/* The last quad: "xxxx", "xxx=" or "xx==". Returns the bytes written. */
static long long decode_last(unsigned char *dst, size_t o, const unsigned char *q,
                             size_t at, size_t *bad_at)
{
    const int pad = q[3] == '=' ? (q[2] == '=' ? 2 : 1) : 0;
    uint32_t v = 0;
    for (int j = 0; j < 4 - pad; j++)
        v |= b64_dec[j][q[j]];
    if (v & B64_BAD) {
        int j = 0;
        while (!(b64_dec[j][q[j]] & B64_BAD))
            j++;
        *bad_at = at + (size_t)j;
        return -1;
    }
    dst[o++] = (unsigned char)(v >> 16);
    if (pad < 2)
        dst[o++] = (unsigned char)(v >> 8);
    if (pad < 1)
        dst[o++] = (unsigned char)v;
    return (long long)o;
}

/* Quads from character i (a multiple of 4) on, output from byte i / 4 * 3. */
static long long decode_from(unsigned char *dst, const unsigned char *s, size_t n, size_t i,
                             size_t *bad_at)
{
    if (n % 4) {
        *bad_at = n;
        return -1;
    }
    if (n == 0)
        return 0;
    const size_t full = n - 4; /* the last quad may hold padding */
    if (decode_quads(dst, i / 4 * 3, s, i, full, bad_at))
        return -1;
    return decode_last(dst, full / 4 * 3, s + full, full, bad_at);
}

long long base64_decode_scalar(unsigned char *dst, const char *src, size_t n, size_t *bad_at)
{
    return decode_from(dst, (const unsigned char *)src, n, 0, bad_at);
}

/* ---------------------------------------------------------------------- */
/* AVX2                                                                    */

#ifdef B64_X86
static int b64_has_avx2(void)
{
    __builtin_cpu_init(); /* idempotent; needed if called before constructors */
    return __builtin_cpu_supports("avx2");
}

/* 24 bytes, 12 in each 128-bit lane, into 32 characters. Returns the bytes
 * read: a multiple of 24, leaving at least 4 bytes unread (each step loads
 * 28). */
__attribute__((target("avx2")))
static size_t encode_avx2(char *dst, const unsigned char *src, size_t n)
{
    /* within each lane, bytes 3k+1, 3k, 3k+2, 3k+1: one 32-bit word per
     * 3 bytes, so 16-bit multiplies can move each 6-bit field into a byte */
    const __m256i spread = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
                                            1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    /* the offset from a 6-bit value to its character, by range:
     * 0-25 'A'-'Z' +65, 26-51 'a'-'z' +71, 52-61 '0'-'9' -4, 62 '+' -19, 63 '/' -16 */
    const __m256i offsets = _mm256_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4,
                                             -19, -16, 0, 0, 65, 71, -4, -4, -4, -4, -4, -4,
                                             -4, -4, -4, -4, -19, -16, 0, 0);
    size_t i = 0;
    for (; i + 28 <= n; i += 24, dst += 32) {
        const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 12));
        const __m256i in = _mm256_shuffle_epi8(
            _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), spread);
        /* the four 6-bit fields of each word into its four bytes */
        const __m256i t0 = _mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00));
        const __m256i t1 = _mm256_mulhi_epu16(t0, _mm256_set1_epi32(0x04000040));
        const __m256i t2 = _mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0));
        const __m256i t3 = _mm256_mullo_epi16(t2, _mm256_set1_epi32(0x01000010));
        const __m256i v = _mm256_or_si256(t1, t3);
        /* range index: 0 for 0-25, 1 for 26-51, 2-11 for 52-61, 12, 13 */
        __m256i idx = _mm256_subs_epu8(v, _mm256_set1_epi8(51));
        idx = _mm256_sub_epi8(idx, _mm256_cmpgt_epi8(v, _mm256_set1_epi8(25)));
        const __m256i out = _mm256_add_epi8(v, _mm256_shuffle_epi8(offsets, idx));
        _mm256_storeu_si256((__m256i *)(void *)dst, out);
    }
    return i;
}

/* 32 characters into 24 bytes at a time, from s until a block holds a byte
 * outside the alphabet or fewer than 32 characters remain before end.
 * Returns the characters read (a multiple of 32). */
__attribute__((target("avx2")))
static size_t decode_avx2(unsigned char *dst, const unsigned char *s, size_t end)
{
    /* A byte is valid when lut_lo[low nibble] & lut_hi[high nibble] == 0. */
    const __m256i lut_lo = _mm256_setr_epi8(
        0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1a, 0x1b, 0x1b,
        0x1b, 0x1a, 0x15, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x13, 0x1a,
        0x1b, 0x1b, 0x1b, 0x1a);
    const __m256i lut_hi = _mm256_setr_epi8(
        0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
        0x10, 0x10, 0x10, 0x10, 0x01, 0x02, 0x04, 0x08, 0x04, 0x08, 0x10, 0x10, 0x10, 0x10,
        0x10, 0x10, 0x10, 0x10);
    /* character to value, by high nibble ('/' one index lower) */
    const __m256i lut_roll = _mm256_setr_epi8(0, 16, 19, 4, -65, -65, -71, -71, 0, 0, 0, 0, 0,
                                              0, 0, 0, 0, 16, 19, 4, -65, -65, -71, -71, 0, 0,
                                              0, 0, 0, 0, 0, 0);
    const __m256i nib = _mm256_set1_epi8(0x0f), slash = _mm256_set1_epi8('/');
    /* in each lane, bytes 2,1,0 of each word: the 3 bytes it holds, in order */
    const __m256i pack = _mm256_setr_epi8(2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1, -1,
                                          -1, 2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, -1, -1,
                                          -1, -1);
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7); /* 24 bytes first */
    size_t i = 0;
    for (; i + 32 <= end; i += 32, dst += 24) {
        const __m256i str = _mm256_loadu_si256((const __m256i *)(const void *)(s + i));
        const __m256i hi_nib = _mm256_and_si256(_mm256_srli_epi32(str, 4), nib);
        const __m256i lo_nib = _mm256_and_si256(str, nib);
        const __m256i hi = _mm256_shuffle_epi8(lut_hi, hi_nib);
        const __m256i lo = _mm256_shuffle_epi8(lut_lo, lo_nib);
        if (!_mm256_testz_si256(lo, hi))
            break;
        const __m256i roll = _mm256_shuffle_epi8(
            lut_roll, _mm256_add_epi8(_mm256_cmpeq_epi8(str, slash), hi_nib));
        const __m256i v = _mm256_add_epi8(str, roll);
        /* four 6-bit values a word into 24 bits: ab and cd in 16 bits, then
         * abcd in 32, then the 3 bytes of each word packed, 12 a lane,
         * then the two lanes' 12 together */
        const __m256i ab = _mm256_maddubs_epi16(v, _mm256_set1_epi32(0x01400140));
        const __m256i abcd = _mm256_madd_epi16(ab, _mm256_set1_epi32(0x00011000));
        const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(abcd, pack),
                                                           lanes);
        _mm_storeu_si128((__m128i *)(void *)dst, _mm256_castsi256_si128(packed));
        _mm_storel_epi64((__m128i *)(void *)(dst + 16),
                         _mm256_extracti128_si256(packed, 1));
    }
    return i;
}
#endif

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */

size_t base64_encode(char *dst, const unsigned char *src, size_t n)
{
    size_t i = 0;
#ifdef B64_X86
    if (n >= 64 && b64_has_avx2())
        i = encode_avx2(dst, src, n);
#endif
    return i / 3 * 4 + base64_encode_scalar(dst + i / 3 * 4, src + i, n - i);
}

long long base64_decode(unsigned char *dst, const char *src, size_t n, size_t *bad_at)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;
#ifdef B64_X86
    if (n % 4 == 0 && n >= 64 && b64_has_avx2())
        i = decode_avx2(dst, s, n - 4);
#endif
    return decode_from(dst, s, n, i, bad_at);
}

size_t base64_encode_range(char *dst, size_t max, const unsigned char *src, size_t n,
                           size_t o)
{
    const size_t enc = BASE64_LEN(n);
    size_t done = 0;
    while (done < max && o < enc) {
        const size_t q = o / 4, within = o % 4, from = 3 * q;
        if (within == 0 && max - done >= 4) { /* whole quads straight into dst */
            size_t quads = (max - done) / 4;
            if (quads > enc / 4 - q)
                quads = enc / 4 - q;
            size_t bytes = 3 * quads;
            if (bytes > n - from)
                bytes = n - from;
            const size_t w = base64_encode(dst + done, src + from, bytes);
            done += w, o += w;
        } else { /* part of one quad */
            char tmp[4];
            base64_encode_scalar(tmp, src + from, n - from < 3 ? n - from : 3);
            size_t k = 4 - within;
            if (k > max - done)
                k = max - done;
            memcpy(dst + done, tmp + within, k);
            done += k, o += k;
        }
    }
    return done;
}
