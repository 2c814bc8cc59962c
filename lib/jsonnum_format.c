/* jsonnum_format.c -- the shortest float32 that survives both read-back
 * routes (Ryu, then the double-route fix); see jsonnum.h, "Writing". */
#include "lib/jsonnum.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

