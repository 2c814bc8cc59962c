/* roundtrip_all.c -- every finite float32 through jsonnum_format_float and
 * back, both ways a client reads JSON: strtof (decimal -> float32 directly)
 * and (float)strtod (decimal -> double -> float32, as Python, JavaScript and
 * this service's own parser do). Not part of `make test`: it takes minutes.
 *
 *   make roundtrip-check                 the writer in the working tree
 *   make roundtrip-check BASE=<commit>   also the writer at <commit>: its
 *                                        failures, and how many outputs differ
 *
 *   build/roundtrip/roundtrip_all [--threads N] [--from HEX] [--to HEX]
 *
 * Checks all 2^32 bit patterns except NaN and infinity (2^32 - 2^24 floats)
 * on N threads (2 by default), prints progress, the failing floats (the
 * first 200) and a summary line; exits 1 when any float fails. glibc's strtof
 * and strtod are correctly rounded, so they are the reference.
 *
 * It also lists the near misses: floats with an odd mantissa whose output
 * lies within 2^-50 (relative) of a midpoint between the float and a
 * neighbour. Through a double, a decimal within 2^-53 of such a midpoint
 * becomes the midpoint and rounds to the even neighbour; these are the hard
 * cases for regression tests. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/jsonnum.h"
#include "tests/support/check.h"

#ifdef ROUNDTRIP_BASE
/* The same function at another commit, its symbols renamed (Makefile). */
int base_jsonnum_format_float(char *dst, float f);
#endif

#define CHUNK (1u << 20) /* floats a thread takes at a time */
#define MAX_SHOWN 200

static uint64_t range_from, range_to; /* [from, to) */
static atomic_uint_fast64_t next_chunk, done_count;
static atomic_long fails_direct, fails_double, base_fails, changed, near_misses;
static pthread_mutex_t show_lock = PTHREAD_MUTEX_INITIALIZER;
static int shown;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether d, the double of a decimal written for the float with these
 * bits (odd mantissa), is within 2^-50 of a midpoint next to the float.
 * Doubles are exact enough: the midpoints are doubles, d is the decimal to
 * within 2^-53. */
static int near_miss(double d, uint32_t bits)
{
    const double x = fabs((double)check_bits_float(bits));
    const double up = ((double)nextafterf((float)x, INFINITY) - x) / 2;
    const double down = (x - (double)nextafterf((float)x, 0)) / 2;
    const double tol = x * 0x1p-50;
    d = fabs(d);
    return fabs(d - (x + up)) <= tol || fabs(d - (x - down)) <= tol;
}

/* 0 when s reads back as bits both ways; else 1 (strtof) | 2 (via double).
 * *d: strtod(s). */
static int check(const char *s, uint32_t bits, double *d)
{
    int bad = 0;
    *d = strtod(s, NULL);
    if (check_float_bits(strtof(s, NULL)) != bits)
        bad |= 1;
    if (check_float_bits((float)*d) != bits)
        bad |= 2;
    return bad;
}

static void show(const char *who, uint32_t bits, const char *s, int bad)
{
    pthread_mutex_lock(&show_lock);
    if (shown++ < MAX_SHOWN)
        printf("  %s 0x%08" PRIx32 " (%.9g) written %s: strtof 0x%08" PRIx32
               ", (float)strtod 0x%08" PRIx32 "%s%s%s\n",
               who, bits, (double)check_bits_float(bits), s, check_float_bits(strtof(s, NULL)),
               check_float_bits((float)strtod(s, NULL)), bad & 1 ? " [direct fails]" : "",
               bad & 2 ? " [double fails]" : "", bad & 4 ? " [near miss, reads back]" : "");
    pthread_mutex_unlock(&show_lock);
}

static void *worker(void *arg)
{
    (void)arg;
    char s[JSONNUM_FLOAT_MAX + 16];
    for (;;) {
        const uint64_t c = atomic_fetch_add(&next_chunk, 1);
        const uint64_t lo = range_from + c * CHUNK;
        if (lo >= range_to)
            break;
        const uint64_t hi = lo + CHUNK < range_to ? lo + CHUNK : range_to;
        long fd = 0, fdd = 0, fb = 0, ch = 0, nm = 0;
        uint64_t n = 0;
        for (uint64_t b = lo; b < hi; b++) {
            const uint32_t bits = (uint32_t)b;
            if ((bits & 0x7f800000u) == 0x7f800000u)
                continue; /* NaN, infinity: written null */
            n++;
            jsonnum_format_float(s, check_bits_float(bits));
            double d;
            int bad = check(s, bits, &d);
            if (bad) {
                fd += bad & 1;
                fdd += (bad & 2) >> 1;
                show("now ", bits, s, bad);
            } else if ((bits & 1) && near_miss(d, bits)) {
                nm++;
                show("now ", bits, s, 4);
            }
#ifdef ROUNDTRIP_BASE
            char t[JSONNUM_FLOAT_MAX + 16];
            base_jsonnum_format_float(t, check_bits_float(bits));
            ch += strcmp(s, t) != 0;
            int bb = check(t, bits, &d);
            if (bb) {
                fb++;
                show("base", bits, t, bb);
            }
#endif
        }
        atomic_fetch_add(&fails_direct, fd);
        atomic_fetch_add(&fails_double, fdd);
        atomic_fetch_add(&base_fails, fb);
        atomic_fetch_add(&changed, ch);
        atomic_fetch_add(&near_misses, nm);
        atomic_fetch_add(&done_count, n);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 2;
    range_from = 0, range_to = 1ull << 32;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--from"))
            range_from = strtoull(argv[i + 1], NULL, 16);
        else if (!strcmp(argv[i], "--to"))
            range_to = strtoull(argv[i + 1], NULL, 16);
        else {
            fprintf(stderr, "usage: %s [--threads N] [--from HEX] [--to HEX]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > 64 || range_to > 1ull << 32 || range_from >= range_to) {
        fprintf(stderr, "%s: bad arguments\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("round trip of every finite float32 in [0x%08" PRIx64 ", 0x%09" PRIx64
           "), %d threads%s\n", range_from, range_to, threads,
#ifdef ROUNDTRIP_BASE
           ", compared with the base writer"
#else
           ""
#endif
    );
    const double t0 = now();
    pthread_t tid[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&tid[i], NULL, worker, NULL);
    const uint64_t total_chunks = (range_to - range_from + CHUNK - 1) / CHUNK;
    uint64_t reported = 0;
    for (;;) {
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        const uint64_t c = atomic_load(&next_chunk);
        if (c >= total_chunks + (uint64_t)threads)
            break; /* every worker has asked past the end: all are finishing */
        if (c * 32 / total_chunks > reported) {
            reported = c * 32 / total_chunks;
            printf("  %3" PRIu64 "%%  %.0f s  failures so far: %ld direct, %ld via double\n",
                   reported * 100 / 32, now() - t0, atomic_load(&fails_direct),
                   atomic_load(&fails_double));
        }
    }
    for (int i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    const double secs = now() - t0;
    const long fd = atomic_load(&fails_direct), fdd = atomic_load(&fails_double);
    printf("checked %" PRIu64 " floats in %.1f s: %ld fail strtof, %ld fail (float)strtod; "
           "%ld near misses\n", (uint64_t)atomic_load(&done_count), secs, fd, fdd,
           atomic_load(&near_misses));
#ifdef ROUNDTRIP_BASE
    printf("base writer: %ld floats fail a round trip; outputs that differ from it: %ld\n",
           atomic_load(&base_fails), atomic_load(&changed));
#endif
    return fd || fdd ? 1 : 0;
}
