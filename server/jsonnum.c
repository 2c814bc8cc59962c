/* jsonnum.c -- fast numeric JSON: shortest float32 output, DOM-free array
 * input; see jsonnum.h. */
#include "server/jsonnum.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *jsonnum_status_str(int status)
{
    switch (status) {
    case JSONNUM_OK:         return "ok";
    case JSONNUM_ERR_SYNTAX: return "not valid JSON";
    case JSONNUM_ERR_TYPE:   return "not a number or an array";
    case JSONNUM_ERR_SHAPE:  return "ragged or empty array";
    case JSONNUM_ERR_DEPTH:  return "nested too deep";
    case JSONNUM_ERR_RANGE:  return "out of float32 range";
    case JSONNUM_ERR_LIMIT:  return "too many numbers";
    case JSONNUM_ERR_NOMEM:  return "out of memory";
    default:                 return "unknown status";
    }
}

/* ---------------------------------------------------------------------- */
/* Writing: Ryu for float32                                                */

/* Ryu's tables, generated with Python integers:
 *   POW5_INV_SPLIT[q] = 2^(bitlen(5^q) - 1 + 59) // 5^q + 1      (q = 0..31)
 *   POW5_SPLIT[i]     = the top 61 bits of 5^i, i.e. 5^i scaled by a power
 *                       of two into [2^60, 2^61)                  (i = 0..47)
 * Indices reached: q ≤ 30 (largest binary exponent 102), i ≤ 47 (smallest
 * 2^-151, including the i + 1 look-up). */
#define POW5_INV_BITCOUNT 59
#define POW5_BITCOUNT 61

static const uint64_t POW5_INV_SPLIT[32] = {
    0x0800000000000001u, 0x0666666666666667u, 0x051eb851eb851eb9u,
    0x04189374bc6a7efau, 0x068db8bac710cb2au, 0x053e2d6238da3c22u,
    0x0431bde82d7b634eu, 0x06b5fca6af2bd216u, 0x055e63b88c230e78u,
    0x044b82fa09b5a52du, 0x06df37f675ef6eaeu, 0x057f5ff85e592558u,
    0x0465e6604b7a8447u, 0x0709709a125da071u, 0x05a126e1a84ae6c1u,
    0x0480ebe7b9d58567u, 0x0734aca5f6226f0bu, 0x05c3bd5191b525a3u,
    0x049c97747490eae9u, 0x0760f253edb4ab0eu, 0x05e72843249088d8u,
    0x04b8ed0283a6d3e0u, 0x078e480405d7b966u, 0x060b6cd004ac9452u,
    0x04d5f0a66a23a9dbu, 0x07bcb43d769f762bu, 0x063090312bb2c4efu,
    0x04f3a68dbc8f03f3u, 0x07ec3daf94180651u, 0x065697bfa9acd1dau,
    0x051212ffbaf0a7e2u, 0x040e7599625a1fe8u,
};

static const uint64_t POW5_SPLIT[48] = {
    0x1000000000000000u, 0x1400000000000000u, 0x1900000000000000u,
    0x1f40000000000000u, 0x1388000000000000u, 0x186a000000000000u,
    0x1e84800000000000u, 0x1312d00000000000u, 0x17d7840000000000u,
    0x1dcd650000000000u, 0x12a05f2000000000u, 0x174876e800000000u,
    0x1d1a94a200000000u, 0x12309ce540000000u, 0x16bcc41e90000000u,
    0x1c6bf52634000000u, 0x11c37937e0800000u, 0x16345785d8a00000u,
    0x1bc16d674ec80000u, 0x1158e460913d0000u, 0x15af1d78b58c4000u,
    0x1b1ae4d6e2ef5000u, 0x10f0cf064dd59200u, 0x152d02c7e14af680u,
    0x1a784379d99db420u, 0x108b2a2c28029094u, 0x14adf4b7320334b9u,
    0x19d971e4fe8401e7u, 0x1027e72f1f128130u, 0x1431e0fae6d7217cu,
    0x193e5939a08ce9dbu, 0x1f8def8808b02452u, 0x13b8b5b5056e16b3u,
    0x18a6e32246c99c60u, 0x1ed09bead87c0378u, 0x13426172c74d822bu,
    0x1812f9cf7920e2b6u, 0x1e17b84357691b64u, 0x12ced32a16a1b11eu,
    0x178287f49c4a1d66u, 0x1d6329f1c35ca4bfu, 0x125dfa371a19e6f7u,
    0x16f578c4e0a060b5u, 0x1cb2d6f618c878e3u, 0x11efc659cf7d4b8du,
    0x166bb7f0435c9e71u, 0x1c06a5ec5433c60du, 0x118427b3b4a05bc8u,
};

/* ceil(log2(5^e)) for 0 < e ≤ 3528, and 1 for e = 0: bitlen(5^e). */
static inline int32_t pow5bits(int32_t e)
{
    return (int32_t)(((uint32_t)e * 1217359u) >> 19) + 1;
}

/* floor(log10(2^e)) and floor(log10(5^e)) for 0 ≤ e ≤ 1650. */
static inline uint32_t log10_pow2(int32_t e)
{
    return ((uint32_t)e * 78913u) >> 18;
}

static inline uint32_t log10_pow5(int32_t e)
{
    return ((uint32_t)e * 732923u) >> 20;
}

/* floor(m · factor / 2^shift), shift > 32, from two 32×32→64 products. */
static inline uint32_t mul_shift(uint32_t m, uint64_t factor, int32_t shift)
{
    const uint64_t lo = (uint64_t)m * (uint32_t)factor;
    const uint64_t hi = (uint64_t)m * (uint32_t)(factor >> 32);
    return (uint32_t)(((lo >> 32) + hi) >> (shift - 32));
}

static inline int multiple_of_pow5(uint32_t v, uint32_t p)
{
    uint32_t n = 0;
    while (v % 5 == 0 && v) {
        v /= 5;
        n++;
    }
    return n >= p;
}

static inline int multiple_of_pow2(uint32_t v, uint32_t p)
{
    return (v & ((1u << p) - 1)) == 0;
}

/* Shortest decimal digits·10^exp10 in the round-trip interval of the finite,
 * nonzero float with the given IEEE fields; of several, the nearest. */
static inline void ryu_f32(uint32_t ieee_m, uint32_t ieee_e, uint32_t *digits, int32_t *exp10)
{
    /* 1. The float as m2·2^e2, and its interval (mm, mp) around mv, all ×4. */
    int32_t e2;
    uint32_t m2;
    if (ieee_e == 0) {
        e2 = 1 - 127 - 23 - 2;
        m2 = ieee_m;
    } else {
        e2 = (int32_t)ieee_e - 127 - 23 - 2;
        m2 = (1u << 23) | ieee_m;
    }
    const int accept_bounds = (m2 & 1) == 0; /* round-half-even reads the ends back */
    const uint32_t mv = 4 * m2, mp = 4 * m2 + 2;
    const uint32_t mm_shift = ieee_m != 0 || ieee_e <= 1; /* lower gap halves at 2^k */
    const uint32_t mm = 4 * m2 - 1 - mm_shift;

    /* 2. vr, vp, vm = mv, mp, mm · 2^e2 / 10^e10, truncated, plus whether
     *    the dropped parts were zero (needed to round exactly). */
    uint32_t vr, vp, vm;
    int32_t e10;
    int vm_tz = 0, vr_tz = 0;
    uint32_t last = 0;
    if (e2 >= 0) {
        const uint32_t q = log10_pow2(e2);
        e10 = (int32_t)q;
        const int32_t k = POW5_INV_BITCOUNT + pow5bits((int32_t)q) - 1;
        const int32_t i = -e2 + (int32_t)q + k;
        vr = mul_shift(mv, POW5_INV_SPLIT[q], i);
        vp = mul_shift(mp, POW5_INV_SPLIT[q], i);
        vm = mul_shift(mm, POW5_INV_SPLIT[q], i);
        if (q != 0 && (vp - 1) / 10 <= vm / 10) {
            /* The loop in 3 removes no digit: find the last removed one here. */
            const int32_t l = POW5_INV_BITCOUNT + pow5bits((int32_t)q - 1) - 1;
            last = mul_shift(mv, POW5_INV_SPLIT[q - 1], -e2 + (int32_t)q - 1 + l) % 10;
        }
        if (q <= 9) {
            /* Only one of mp, mv, mm can be a multiple of 5, if any. */
            if (mv % 5 == 0)
                vr_tz = multiple_of_pow5(mv, q);
            else if (accept_bounds)
                vm_tz = multiple_of_pow5(mm, q);
            else
                vp -= (uint32_t)multiple_of_pow5(mp, q);
        }
    } else {
        const uint32_t q = log10_pow5(-e2);
        e10 = (int32_t)q + e2;
        const int32_t i = -e2 - (int32_t)q;
        const int32_t k = pow5bits(i) - POW5_BITCOUNT;
        int32_t j = (int32_t)q - k;
        vr = mul_shift(mv, POW5_SPLIT[i], j);
        vp = mul_shift(mp, POW5_SPLIT[i], j);
        vm = mul_shift(mm, POW5_SPLIT[i], j);
        if (q != 0 && (vp - 1) / 10 <= vm / 10) {
            j = (int32_t)q - 1 - (pow5bits(i + 1) - POW5_BITCOUNT);
            last = mul_shift(mv, POW5_SPLIT[i + 1], j) % 10;
        }
        if (q <= 1) {
            /* mv = 4·m2 has at least 2 trailing zero bits. */
            vr_tz = 1;
            if (accept_bounds)
                vm_tz = mm_shift == 1; /* mm = mv - 2 has 1 trailing zero bit */
            else
                --vp;                  /* mp = mv + 2 has 1 too */
        } else if (q < 31) {
            vr_tz = multiple_of_pow2(mv, q - 1);
        }
    }

    /* 3. Drop digits while the interval still holds a shorter number. */
    int32_t removed = 0;
    uint32_t out;
    if (vm_tz || vr_tz) {
        /* Rare: exact ends, ties to even. */
        while (vp / 10 > vm / 10) {
            vm_tz &= vm % 10 == 0;
            vr_tz &= last == 0;
            last = vr % 10;
            vr /= 10, vp /= 10, vm /= 10;
            removed++;
        }
        if (vm_tz) {
            while (vm % 10 == 0) {
                vr_tz &= last == 0;
                last = vr % 10;
                vr /= 10, vp /= 10, vm /= 10;
                removed++;
            }
        }
        if (vr_tz && last == 5 && vr % 2 == 0)
            last = 4; /* exactly halfway: round to even */
        out = vr + ((vr == vm && (!accept_bounds || !vm_tz)) || last >= 5);
    } else {
        while (vp / 10 > vm / 10) {
            last = vr % 10;
            vr /= 10, vp /= 10, vm /= 10;
            removed++;
        }
        out = vr + (vr == vm || last >= 5);
    }
    *digits = out;
    *exp10 = e10 + removed;
}

static const char DIGIT_PAIRS[200] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Write v, which has exactly n decimal digits, at p. */
static inline void put_digits(char *p, uint32_t v, int n)
{
    char *q = p + n;
    while (v >= 100) {
        const uint32_t r = v % 100;
        v /= 100;
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * r, 2);
    }
    if (v >= 10) {
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * v, 2);
    } else {
        *--q = (char)('0' + v);
    }
}

static inline int digit_count(uint32_t v)
{
    int n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* 10^k as the nearest double, k = -60 .. 40 (every d·10^e Ryu writes for a
 * float32 has -54 <= e <= 38). */
#define POW10_WIDE_MIN (-60)
static const double POW10_WIDE[101] = {
    1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53, 1e-52, 1e-51, 1e-50, 1e-49,
    1e-48, 1e-47, 1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39, 1e-38, 1e-37,
    1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25,
    1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13,
    1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1,
    1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
    1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40,
};

/* Ryu's digits read back as the float by strtof, but many readers go
 * through a double first ((float)strtod: Python, JavaScript, jansson, this
 * service's own parser), and that rounds twice. A decimal within half a
 * double ulp of the midpoint between f and a neighbour becomes that
 * midpoint, which then rounds to even: away from f when f's mantissa is
 * odd (0x15ae43fd, "7.038531e-26", reads back as 0x15ae43fe). For even f
 * the midpoints themselves read back as f, so nothing is lost.
 *
 * So for odd f: a cheap estimate of d·10^e in double (two roundings,
 * relative error below 2^-52) clears every decimal farther than 2^-49 from
 * both midpoints (the danger zone is 2^-53 wide). The few it cannot clear
 * are checked exactly with strtod; one that fails is replaced by the
 * correctly rounded decimal with one more digit, or two, ... up to 9 (a
 * 9-digit decimal is within 2^-27 of f, the midpoints are 2^-25 away, so it
 * always reads back both ways). Any other decimal as short as Ryu's is
 * farther from f, so no shorter one is missed. */
static inline int near_a_midpoint(uint32_t d, int32_t e, uint32_t ieee_e, double x)
{
    const double c = (double)d * POW10_WIDE[e - POW10_WIDE_MIN];
    uint64_t hb = (uint64_t)((ieee_e ? ieee_e : 1) + 1023 - 151) << 52; /* half an ulp */
    double half;
    memcpy(&half, &hb, sizeof half);
    /* |c - x| is exact (Sterbenz: c is within a factor 2 of x), and within
     * 2^-49 of half an ulp when c is that near a midpoint */
    return fabs(fabs(c - x) - half) <= x * 0x1p-49;
}

static uint32_t float_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* The exact check and the longer candidates for near_a_midpoint(): x is
 * |f| > 0 with the given bits; *digits and *exp10 are Ryu's, replaced when
 * they fail. Rare (14 of all 2^32 floats), so printf and strtod. */
static void fix_double_route(uint32_t *digits, int32_t *exp10, float x, uint32_t bits)
{
    char s[40];
    snprintf(s, sizeof s, "%ue%d", (unsigned)*digits, (int)*exp10);
    if (float_bits((float)strtod(s, NULL)) == bits)
        return;
    for (int p = digit_count(*digits) + 1; p <= 9; p++) {
        snprintf(s, sizeof s, "%.*e", p - 1, (double)x); /* glibc: exact, to nearest */
        if (float_bits((float)strtod(s, NULL)) != bits || float_bits(strtof(s, NULL)) != bits)
            continue;
        uint32_t d = 0;
        const char *c = s;
        for (; *c != 'e'; c++)
            if (*c >= '0' && *c <= '9')
                d = d * 10 + (uint32_t)(*c - '0');
        int32_t e = (int32_t)strtol(c + 1, NULL, 10) - (p - 1);
        while (d % 10 == 0) {
            d /= 10;
            e++;
        }
        *digits = d, *exp10 = e;
        return;
    }
}

static inline int format_float(char *dst, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    const uint32_t ieee_m = bits & ((1u << 23) - 1), ieee_e = (bits >> 23) & 0xff;
    char *p = dst;

    if (ieee_e == 0xff) { /* infinity or NaN: JSON has neither */
        memcpy(dst, "null", 5);
        return 4;
    }
    if (bits >> 31)
        *p++ = '-';
    if (ieee_e == 0 && ieee_m == 0) {
        *p++ = '0';
        *p = '\0';
        return (int)(p - dst);
    }

    uint32_t d;
    int32_t e;
    ryu_f32(ieee_m, ieee_e, &d, &e);
    while (d % 10 == 0) { /* value = d·10^e with no trailing zeros in d */
        d /= 10;
        e++;
    }
    /* & rather than &&: odd or even is a coin toss, not worth a branch */
    if ((ieee_m & 1) & near_a_midpoint(d, e, ieee_e, fabs((double)f)))
        fix_double_route(&d, &e, fabsf(f), bits & 0x7fffffffu);

    /* Value = 0.D·10^k with n digits D. Fixed: "0.00D", "DD.D" or "D00";
     * scientific: "D.DDe-E". The shorter wins, fixed on a tie. */
    const int n = digit_count(d), k = n + e, se = k - 1;
    const int fixed_len = k <= 0 ? 2 - k + n : k < n ? n + 1 : k;
    const int sci_len = n + (n > 1) + 1 + (se < 0) + (se <= -10 || se >= 10 ? 2 : 1);
    if (fixed_len <= sci_len) {
        if (k <= 0) {
            p[0] = '0', p[1] = '.';
            memset(p + 2, '0', (size_t)-k);
            put_digits(p + 2 - k, d, n);
        } else if (k < n) {
            char t[10];
            put_digits(t, d, n);
            memcpy(p, t, (size_t)k);
            p[k] = '.';
            memcpy(p + k + 1, t + k, (size_t)(n - k));
        } else {
            put_digits(p, d, n);
            memset(p + n, '0', (size_t)(k - n));
        }
        p += fixed_len;
    } else {
        put_digits(p + 1, d, n); /* "D.DD": first digit moves left over the point */
        p[0] = p[1];
        if (n > 1) {
            p[1] = '.';
            p += n + 1;
        } else {
            p += 1;
        }
        *p++ = 'e';
        int x = se;
        if (x < 0) {
            *p++ = '-';
            x = -x;
        }
        if (x >= 10) {
            memcpy(p, DIGIT_PAIRS + 2 * x, 2);
            p += 2;
        } else {
            *p++ = (char)('0' + x);
        }
    }
    *p = '\0';
    return (int)(p - dst);
}

int jsonnum_format_float(char *dst, float f)
{
    return format_float(dst, f);
}

size_t jsonnum_format_array(char *dst, const float *x, size_t n)
{
    char *p = dst;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        p += format_float(p, x[i]);
    }
    *p++ = ']';
    *p = '\0';
    return (size_t)(p - dst);
}

/* ---------------------------------------------------------------------- */
/* Reading                                                                 */

struct parser {
    const char *s;
    size_t len;
    float *data;
    size_t count, cap, max_count;
    unsigned flags;
    struct jsonnum_error *err;
};

static int fail(struct parser *ps, int code, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(struct parser *ps, int code, size_t at, const char *fmt, ...)
{
    va_list ap;
    ps->err->code = code;
    ps->err->offset = at;
    va_start(ap, fmt);
    vsnprintf(ps->err->msg, sizeof ps->err->msg, fmt, ap);
    va_end(ap);
    return code;
}

static inline int is_ws(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int is_digit(char c)
{
    return (unsigned char)(c - '0') < 10;
}

static inline size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws(s[i]))
        i++;
    return i;
}

/* The error for a token that is neither a number nor an array. The
 * characters that can start another JSON value make it TYPE (valid JSON
 * perhaps, but not numbers); anything else is not JSON at all. */
static int bad_token(struct parser *ps, size_t at, const char *where)
{
    const char c = ps->s[at];
    if (c == '"' || c == '{' || c == 't' || c == 'f' || c == 'n')
        return fail(ps, JSONNUM_ERR_TYPE, at, "%s: %s, not a number",
                    where, c == '"' ? "a string" : c == '{' ? "an object" : "a literal");
    return fail(ps, JSONNUM_ERR_SYNTAX, at, "%s: unexpected character '%c'", where,
                (unsigned char)c < 0x20 || (unsigned char)c >= 0x7f ? '?' : c);
}

static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

static const uint64_t POW10_INT[16] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u,
    1000000000u, 10000000000u, 100000000000u, 1000000000000u, 10000000000000u,
    100000000000000u, 1000000000000000u,
};

#define TWO53 (1ull << 53)

/* One number token at *pos into *out, as (float)json_number_value would
 * give it; *pos moves past the token. The token must be followed by a
 * delimiter inside the text (whitespace, ',' or ']'): that makes strtod stop
 * where the JSON grammar stops, and turns "0x1", "01", "1.5.2" into syntax
 * errors before any conversion. A NUL also ends a token, as for jansson. */
static inline int parse_number(struct parser *ps, size_t *pos, float *out)
{
    const char *s = ps->s, *p = s + *pos, *end = s + ps->len;
    const size_t at = *pos;

    /* 1. Grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, gathering
     *    up to 19 significant digits into w and the decimal exponent. */
    int neg = 0, is_int = 1, many = 0, sd = 0, frac = 0;
    uint64_t w = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (p == end || !is_digit(*p))
        return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit after '-'");
    if (*p == '0') {
        p++;
    } else {
        do {
            if (sd < 19) {
                w = w * 10 + (uint64_t)(*p - '0');
                sd++;
            } else {
                many = 1;
            }
            p++;
        } while (p < end && is_digit(*p));
    }
    if (p < end && *p == '.') {
        is_int = 0;
        p++;
        if (p == end || !is_digit(*p))
            return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit after '.'");
        do {
            if (sd < 19 && frac < 100000) {
                w = w * 10 + (uint64_t)(*p - '0');
                sd += w != 0; /* leading zeros of 0.000123 are not significant */
                frac++;
            } else {
                many = 1;
            }
            p++;
        } while (p < end && is_digit(*p));
    }
    int ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        is_int = 0;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-'))
            eneg = *p++ == '-';
        if (p == end || !is_digit(*p))
            return fail(ps, JSONNUM_ERR_SYNTAX, at, "invalid number: no digit in the exponent");
        do {
            if (ex < 100000) /* saturate: 1e100000 and 1e999999 are both overflow */
                ex = ex * 10 + (*p - '0');
            p++;
        } while (p < end && is_digit(*p));
        if (eneg)
            ex = -ex;
    }
    if (p == end)
        return fail(ps, JSONNUM_ERR_SYNTAX, (size_t)(p - s), "unexpected end of text");
    if (!is_ws(*p) && *p != ',' && *p != ']' && *p != '\0')
        return fail(ps, JSONNUM_ERR_SYNTAX, (size_t)(p - s),
                    "invalid number: unexpected '%c' after it",
                    (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?' : *p);
    /* jansson drops one NUL byte right after a number: its lexer reads it
     * as lookahead, ungets it, and an unget NUL reads as "buffer empty".
     * Skip it too, so that SYNTAX keeps meaning "jansson rejects". */
    *pos = (size_t)(p - s) + (*p == '\0');

    /* 2. Convert. */
    if (is_int && !many && w <= (uint64_t)LLONG_MAX + (uint64_t)neg) {
        /* jansson: strtoll; the value as a double. Beyond long long, an
         * integer is read as a real (below), as jsonnum_standin() has it. */
        const long long v = !neg ? (long long)w
                            : w == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)w;
        *out = (float)(double)v; /* "-0" is the integer 0: +0 */
        return 0;
    }
    const int e10 = ex - frac;
    double d;
    if (!many && w <= TWO53 && e10 >= -22 && e10 <= 22) {
        /* Clinger: w and 10^|e10| are exact doubles, one rounding. */
        d = e10 < 0 ? (double)w / POW10[-e10] : (double)w * POW10[e10];
    } else if (!many && w == 0) {
        d = 0.0;
    } else if (!many && e10 > 22 && e10 <= 22 + 15 && w <= TWO53 / POW10_INT[e10 - 22]) {
        d = (double)(w * POW10_INT[e10 - 22]) * 1e22; /* still one rounding */
    } else {
        /* strtod stops at the delimiter checked above. */
        d = strtod(s + at, NULL); /* ±HUGE_VAL beyond double: out of range too */
        *out = (float)d;
        if (isinf(*out))
            return fail(ps, JSONNUM_ERR_RANGE, at, "number %.*s is out of float32 range",
                        (int)(*pos - at < 40 ? *pos - at : 40), s + at);
        return 0;
    }
    *out = (float)(neg ? -d : d); /* below 2^53·10^22: always a finite float */
    return 0;
}

/* The length of "-inf" or "-Infinity" (quotes included, written exactly
 * so) at s[i], or 0. */
static size_t neg_inf_word(const char *s, size_t len, size_t i)
{
    static const char *const words[2] = {"\"-inf\"", "\"-Infinity\""};
    for (int k = 0; k < 2; k++) {
        const size_t n = strlen(words[k]);
        if (len - i >= n && memcmp(s + i, words[k], n) == 0)
            return n;
    }
    return 0;
}

static int push(struct parser *ps, float v, size_t at)
{
    if (ps->count == ps->cap) {
        if (ps->count >= ps->max_count)
            return fail(ps, JSONNUM_ERR_LIMIT, at, "more than %zu numbers", ps->max_count);
        size_t cap = ps->cap ? ps->cap * 2 : 1024;
        if (cap > ps->max_count || cap < ps->cap)
            cap = ps->max_count;
        if (cap > SIZE_MAX / sizeof(float))
            return fail(ps, JSONNUM_ERR_NOMEM, at, "array too large");
        /* Large blocks are mmap'd: realloc moves pages, copies nothing, and
         * untouched capacity never becomes resident. */
        float *nd = realloc(ps->data, cap * sizeof(float));
        if (!nd)
            return fail(ps, JSONNUM_ERR_NOMEM, at, "out of memory for %zu numbers", cap);
        ps->data = nd, ps->cap = cap;
    }
    ps->data[ps->count++] = v;
    return 0;
}

/* The array walk, iterative: depth is the open array (0 = outermost),
 * idx[depth] its elements so far, shape[d] known (nonzero) once the first
 * array at depth d has closed, ndim known (nonzero) once the first number
 * is read. Later arrays at depth d are checked against shape[d]. */
static int parse(struct parser *ps, struct jsonnum_array *a, size_t *consumed)
{
    const char *s = ps->s;
    const size_t len = ps->len;
    long long idx[JSONNUM_MAX_RANK] = {0};
    int depth = 0, ndim = 0, rc;

    size_t i = skip_ws(s, len, 0);
    if (i == len)
        return fail(ps, JSONNUM_ERR_SYNTAX, i, "no value: the text is empty");
    if (s[i] == '-' || is_digit(s[i]))
        return fail(ps, JSONNUM_ERR_TYPE, i, "a number, not an array");
    if (s[i] != '[')
        return bad_token(ps, i, "not an array");
    i++;

    for (;;) {
        /* 1. An element (or the ']' of an empty array). */
        i = skip_ws(s, len, i);
        if (i == len)
            return fail(ps, JSONNUM_ERR_SYNTAX, i, "unexpected end of text");
        char c = s[i];
        if (c == ']')
            return idx[depth] ? fail(ps, JSONNUM_ERR_SYNTAX, i, "']' after ','")
                              : fail(ps, JSONNUM_ERR_SHAPE, i, "empty array");
        if (a->shape[depth] && idx[depth] == a->shape[depth])
            return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: more than %lld elements at "
                        "depth %d", a->shape[depth], depth);
        if (c == '[') {
            if (ndim && depth + 1 >= ndim)
                return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: an array where a "
                            "number is expected");
            if (!ndim && depth + 1 >= JSONNUM_MAX_RANK)
                return fail(ps, JSONNUM_ERR_DEPTH, i, "more than %d dimensions",
                            JSONNUM_MAX_RANK);
            idx[++depth] = 0;
            i++;
            continue;
        }
        /* a number, or -infinity in words (JSONNUM_NEG_INF) */
        const size_t word = c == '"' && (ps->flags & JSONNUM_NEG_INF) ? neg_inf_word(s, len, i)
                                                                       : 0;
        if (c != '-' && !is_digit(c) && !word)
            return bad_token(ps, i, "array element");
        if (!ndim)
            ndim = depth + 1;
        else if (depth + 1 != ndim)
            return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: a number where an array is "
                        "expected");
        float v = 0;
        const size_t at = i;
        if (word)
            i += word, v = -INFINITY;
        else if ((rc = parse_number(ps, &i, &v)))
            return rc;
        if ((rc = push(ps, v, at)))
            return rc;
        idx[depth]++;

        /* 2. After a value: ',' or ']' (which may close several arrays). */
        for (;;) {
            i = skip_ws(s, len, i);
            if (i == len)
                return fail(ps, JSONNUM_ERR_SYNTAX, i, "unexpected end of text");
            c = s[i];
            if (c == ',') {
                i++;
                break;
            }
            if (c != ']')
                return fail(ps, JSONNUM_ERR_SYNTAX, i, "expected ',' or ']'");
            if (!a->shape[depth])
                a->shape[depth] = idx[depth];
            else if (idx[depth] != a->shape[depth])
                return fail(ps, JSONNUM_ERR_SHAPE, i, "ragged array: %lld elements where %lld "
                            "expected at depth %d", idx[depth], a->shape[depth], depth);
            i++;
            if (depth == 0) {
                /* Every array at depth d had shape[d] elements, every number
                 * sat at depth ndim: count is the shape's product. */
                a->ndim = ndim;
                *consumed = i;
                return 0;
            }
            idx[--depth]++;
        }
    }
}

int jsonnum_parse_array(struct jsonnum_array *a, const char *s, size_t len, size_t max_count,
                        size_t *consumed, struct jsonnum_error *err)
{
    return jsonnum_parse_array_opt(a, s, len, max_count, 0, consumed, err);
}

int jsonnum_parse_array_opt(struct jsonnum_array *a, const char *s, size_t len,
                            size_t max_count, unsigned flags, size_t *consumed,
                            struct jsonnum_error *err)
{
    struct parser ps = {.s = s, .len = len, .max_count = max_count, .flags = flags,
                        .err = err};
    memset(a, 0, sizeof *a);
    err->code = 0, err->offset = 0, err->msg[0] = '\0';
    int rc = parse(&ps, a, consumed);
    if (rc) {
        free(ps.data);
        memset(a, 0, sizeof *a);
        return rc;
    }
    a->count = ps.count;
    a->data = ps.data;
    if (ps.cap > ps.count) { /* give back the spare capacity; keep it if that fails */
        float *nd = realloc(ps.data, ps.count * sizeof(float));
        if (nd)
            a->data = nd;
    }
    return 0;
}

void jsonnum_array_deinit(struct jsonnum_array *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---------------------------------------------------------------------- */
/* Stand-ins for the numbers jansson cannot hold                           */

/* Length of the RFC 8259 number token at s[i], or 0 when none starts there;
 * *is_int: no fraction, no exponent. s[len] is a NUL. */
static size_t number_token(const char *s, size_t len, size_t i, int *is_int)
{
    size_t j = i + (s[i] == '-');
    if (j == len || !is_digit(s[j]))
        return 0;
    if (s[j] == '0')
        j++;
    else
        while (is_digit(s[j]))
            j++;
    *is_int = 1;
    if (s[j] == '.' && is_digit(s[j + 1])) {
        *is_int = 0;
        for (j += 2; is_digit(s[j]); j++)
            ;
    }
    if (s[j] == 'e' || s[j] == 'E') {
        size_t k = j + 1 + (s[j + 1] == '+' || s[j + 1] == '-');
        if (is_digit(s[k])) {
            *is_int = 0;
            for (j = k; is_digit(s[j]); j++)
                ;
        }
    }
    return j - i;
}

/* The shortest "DIGITSeEXP" (no point: jansson reads it as a real) that
 * strtod reads back as d, finite; t needs 32 bytes. Returns its length. */
static int shortest_real(char *t, double d)
{
    char e[32];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, d);
        if (strtod(e, NULL) == d)
            break;
    }
    snprintf(e, sizeof e, "%.*e", p - 1, d);
    int n = 0;
    const char *c = e;
    for (; *c != 'e'; c++)
        if (*c == '-' || (*c >= '0' && *c <= '9'))
            t[n++] = *c;
    return n + snprintf(t + n, 32 - (size_t)n, "e%d", (int)strtol(c + 1, NULL, 10) - (p - 1));
}

size_t jsonnum_standin(char *s, size_t len)
{
    size_t replaced = 0, i = 0;
    while (i < len) {
        if (s[i] == '"') { /* a string, to its closing quote */
            for (i++; i < len && s[i] != '"'; i += s[i] == '\\' ? 2 : 1)
                ;
            i++;
            continue;
        }
        int is_int;
        const size_t k = s[i] == '-' || is_digit(s[i]) ? number_token(s, len, i, &is_int) : 0;
        if (k == 0) {
            i++;
            continue;
        }
        /* jansson's own tests: strtoll's ERANGE, strtod's ±HUGE_VAL with
         * ERANGE. Both stop where the token does (s[len] is a NUL). */
        errno = 0;
        double d = 0;
        if (is_int)
            (void)strtoll(s + i, NULL, 10);
        else
            d = strtod(s + i, NULL);
        if (errno == ERANGE && (is_int || d == HUGE_VAL || d == -HUGE_VAL)) {
            d = strtod(s + i, NULL);
            char t[32];
            int n = isinf(d) ? snprintf(t, sizeof t, "%s", d < 0 ? "-1e39" : "1e39")
                             : shortest_real(t, d);
            if ((size_t)n <= k) { /* always: 19 digits or more, at most 17 kept */
                memset(s + i, ' ', k - (size_t)n);
                memcpy(s + i + k - (size_t)n, t, (size_t)n);
                replaced++;
            }
        }
        i += k;
    }
    return replaced;
}
