/* bench_jsonnum.c -- lib/jsonnum against jansson on one 512×768 float
 * tensor, in the same process.
 *
 *   bench_jsonnum [--rows R] [--cols C] [--runs N] [--csv FILE]
 *
 * Decode: jansson's json_loadb + a walk copying (float)json_number_value into
 * a float array (what codec.c does), against jsonnum_parse_array, on the same
 * text, nested ("[[...], ...]") and flat ("[...]"), printed with %.9g.
 * Encode: json_dumps(JSON_REAL_PRECISION(9)) of a prebuilt json array (and
 * with JSON_COMPACT), the codec's old "%.*g then strtof" loop, and
 * jsonnum_format_array, all writing the same tensor as nested arrays.
 * Each figure is the median of --runs runs (default 7); ratios compare times
 * on the same tensor. MB/s counts the bytes of JSON read or written.
 *
 * Heap: this program replaces malloc, calloc, realloc and free with
 * counting wrappers around glibc's own (__libc_malloc & co.), so "peak heap"
 * is the largest number of bytes held at once (malloc_usable_size), above
 * what was held before the decode started -- the DOM or the float buffer,
 * not the text. */
#include <jansson.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "lib/jsonnum.h"

/* ---------------------------------------------------------------------- */
/* Counting allocator (single-threaded program)                            */

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static long long heap_now, heap_peak;

static void heap_add(long long n)
{
    heap_now += n;
    if (heap_now > heap_peak)
        heap_peak = heap_now;
}

void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    if (p)
        heap_add((long long)malloc_usable_size(p));
    return p;
}

void *calloc(size_t n, size_t size)
{
    void *p = __libc_calloc(n, size);
    if (p)
        heap_add((long long)malloc_usable_size(p));
    return p;
}

void *realloc(void *p, size_t n)
{
    const long long old = p ? (long long)malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    if (q)
        heap_add((long long)malloc_usable_size(q) - old);
    else if (p && n == 0)
        heap_now -= old;
    return q;
}

void free(void *p)
{
    if (p)
        heap_now -= (long long)malloc_usable_size(p);
    __libc_free(p);
}

/* ---------------------------------------------------------------------- */

/* seconds */
static double now(void)
{
    return now_ms() * 1e-3;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Roughly normal (sum of four uniforms), like activations and weights. */
static float rand_float(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++)
        s += (double)(rng_next() >> 11) / 9007199254740992.0 - 0.5;
    return (float)s;
}

/* x: (rows, cols) as "[[a, b], [c, d]]" (nested) or "[a, b, c, d]", %.9g. */
static char *print_text(const float *x, int rows, int cols, int nested, size_t *len)
{
    const size_t n = (size_t)rows * (size_t)cols;
    char *t = malloc(n * 20 + (size_t)rows * 4 + 16), *p = t;
    *p++ = '[';
    for (int r = 0; r < rows; r++) {
        if (r)
            p += sprintf(p, ", ");
        if (nested)
            *p++ = '[';
        for (int c = 0; c < cols; c++)
            p += sprintf(p, "%s%.9g", c ? ", " : "", (double)x[(size_t)r * cols + c]);
        if (nested)
            *p++ = ']';
    }
    *p++ = ']';
    *p = '\0';
    *len = (size_t)(p - t);
    return t;
}

/* The jansson decode codec.c does: DOM, then (float)json_number_value. */
static float *jansson_decode(const char *text, size_t len, size_t n, json_t **root)
{
    json_error_t je;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!*root) {
        fprintf(stderr, "jansson: %s\n", je.text);
        exit(1);
    }
    float *out = malloc(n * sizeof(float));
    size_t at = 0;
    json_t *a = *root;
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *row = json_array_get(a, i);
        if (json_is_array(row))
            for (size_t j = 0; j < json_array_size(row); j++)
                out[at++] = (float)json_number_value(json_array_get(row, j));
        else
            out[at++] = (float)json_number_value(row);
    }
    return out;
}

struct result {
    const char *name;
    double sec, mbs;
    long long heap;
};

static void print_row(const struct result *r, size_t count, FILE *csv)
{
    printf("  %-44s %9.2f ms %9.1f MB/s", r->name, r->sec * 1e3, r->mbs);
    if (r->heap >= 0)
        printf("   peak heap %7.2f MB (%5.1f B/number)", (double)r->heap / 1e6,
               (double)r->heap / (double)count);
    printf("\n");
    if (csv)
        fprintf(csv, "\"%s\",%.6f,%.2f,%lld\n", r->name, r->sec * 1e3, r->mbs, r->heap);
}

int main(int argc, char **argv)
{
    int rows = 512, cols = 768, runs = 7;
    const char *csv_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rows") && i + 1 < argc)
            rows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc)
            cols = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc)
            csv_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--rows R] [--cols C] [--runs N] [--csv FILE]\n",
                    argv[0]);
            return 2;
        }
    }
    if (rows < 1 || cols < 1 || runs < 1 || runs > 99) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "name,ms,mb_per_s,peak_heap_bytes\n");

    const size_t n = (size_t)rows * (size_t)cols;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = rand_float();
    double t[99];

    printf("jsonnum vs jansson %s: (%d, %d) = %zu float32, median of %d runs\n",
           JANSSON_VERSION, rows, cols, n, runs);

    /* 1. Decode, nested then flat. */
    double ratio_nested = 0, ratio_flat = 0;
    for (int nested = 1; nested >= 0; nested--) {
        size_t len;
        char *text = print_text(x, rows, cols, nested, &len);
        printf("decode, %s text, %.2f MB:\n", nested ? "nested" : "flat", (double)len / 1e6);

        struct result rj = {.name = nested ? "jansson json_loadb + copy to float"
                                           : "jansson json_loadb + copy to float (flat)"};
        struct result rn = {.name = nested ? "jsonnum_parse_array"
                                           : "jsonnum_parse_array (flat)"};
        float *ref = NULL;
        for (int k = 0; k < runs; k++) {
            json_t *root;
            long long base = heap_now;
            heap_peak = heap_now;
            double t0 = now();
            float *f = jansson_decode(text, len, n, &root);
            t[k] = now() - t0;
            rj.heap = heap_peak - base;
            json_decref(root);
            if (!ref)
                ref = f;
            else
                free(f);
        }
        rj.sec = median(t, runs);

        for (int k = 0; k < runs; k++) {
            struct jsonnum_array a;
            struct jsonnum_error e;
            size_t used;
            long long base = heap_now;
            heap_peak = heap_now;
            double t0 = now();
            int rc = jsonnum_parse_array(&a, text, len, SIZE_MAX, &used, &e);
            t[k] = now() - t0;
            rn.heap = heap_peak - base;
            if (rc || a.count != n || memcmp(a.data, ref, n * sizeof(float))) {
                fprintf(stderr, "jsonnum disagrees with jansson: %s (%s)\n",
                        jsonnum_status_str(rc), e.msg);
                return 1;
            }
            jsonnum_array_deinit(&a);
        }
        rn.sec = median(t, runs);
        rj.mbs = (double)len / rj.sec / 1e6;
        rn.mbs = (double)len / rn.sec / 1e6;
        print_row(&rj, n, csv);
        print_row(&rn, n, csv);
        const double ratio = rj.sec / rn.sec;
        printf("  %-44s %9.2fx faster, %.1fx less heap (bit-identical floats)\n",
               "jsonnum / jansson", ratio, (double)rj.heap / (double)rn.heap);
        if (nested)
            ratio_nested = ratio;
        else
            ratio_flat = ratio;
        free(ref);
        free(text);
    }

    /* 2. Encode the tensor as nested arrays. */
    printf("encode, nested arrays:\n");
    json_t *root = json_array();
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (int c = 0; c < cols; c++)
            json_array_append_new(row, json_real((double)x[(size_t)r * cols + c]));
        json_array_append_new(root, row);
    }
    const struct { const char *name; size_t flags; } dumps[] = {
        {"json_dumps(JSON_REAL_PRECISION(9))", JSON_REAL_PRECISION(9)},
        {"json_dumps(JSON_REAL_PRECISION(9)|COMPACT)", JSON_REAL_PRECISION(9) | JSON_COMPACT},
    };
    double dumps_sec = 0;
    for (int v = 0; v < 2; v++) {
        struct result r = {dumps[v].name, 0, 0, -1};
        size_t len = 0;
        for (int k = 0; k < runs; k++) {
            double t0 = now();
            char *s = json_dumps(root, dumps[v].flags);
            t[k] = now() - t0;
            len = strlen(s);
            free(s);
        }
        r.sec = median(t, runs);
        r.mbs = (double)len / r.sec / 1e6;
        if (v == 0)
            dumps_sec = r.sec;
        print_row(&r, n, csv);
    }
    json_decref(root);

    char *buf = malloc(JSONNUM_ARRAY_MAX(n) + (size_t)rows * 2 + 8);
    {   /* the codec's old put_float: %.*g for 6..9 digits until strtof agrees */
        struct result r = {"%.*g + strtof loop (codec.c put_float)", 0, 0, -1};
        size_t len = 0;
        for (int k = 0; k < runs; k++) {
            double t0 = now();
            char *p = buf;
            *p++ = '[';
            for (int rr = 0; rr < rows; rr++) {
                if (rr)
                    *p++ = ',';
                *p++ = '[';
                for (int c = 0; c < cols; c++) {
                    const float f = x[(size_t)rr * cols + c];
                    int m = 0;
                    if (c)
                        *p++ = ',';
                    for (int prec = 6; prec <= 9; prec++) {
                        m = snprintf(p, 32, "%.*g", prec, (double)f);
                        if (strtof(p, NULL) == f)
                            break;
                    }
                    p += m;
                }
                *p++ = ']';
            }
            *p++ = ']';
            t[k] = now() - t0;
            len = (size_t)(p - buf);
        }
        r.sec = median(t, runs);
        r.mbs = (double)len / r.sec / 1e6;
        print_row(&r, n, csv);
    }
    struct result re = {"jsonnum_format_array per row", 0, 0, -1};
    size_t enc_len = 0;
    for (int k = 0; k < runs; k++) {
        double t0 = now();
        char *p = buf;
        *p++ = '[';
        for (int r = 0; r < rows; r++) {
            if (r)
                *p++ = ',';
            p += jsonnum_format_array(p, x + (size_t)r * cols, (size_t)cols);
        }
        *p++ = ']';
        *p = '\0';
        t[k] = now() - t0;
        enc_len = (size_t)(p - buf);
    }
    re.sec = median(t, runs);
    re.mbs = (double)enc_len / re.sec / 1e6;
    print_row(&re, n, csv);
    {   /* what was written reads back to the same floats */
        struct jsonnum_array a;
        struct jsonnum_error e;
        size_t used;
        if (jsonnum_parse_array(&a, buf, enc_len, SIZE_MAX, &used, &e) || a.count != n) {
            fprintf(stderr, "encoded text does not parse: %s\n", e.msg);
            return 1;
        }
        for (size_t i = 0; i < n; i++)
            if (a.data[i] != x[i]) {
                fprintf(stderr, "encoded float %zu does not read back\n", i);
                return 1;
            }
        jsonnum_array_deinit(&a);
    }
    const double ratio_enc = dumps_sec / re.sec;
    printf("  %-44s %9.2fx faster than json_dumps(JSON_REAL_PRECISION(9)), %.2f MB "
           "(round trip checked)\n", "jsonnum / jansson", ratio_enc, (double)enc_len / 1e6);

    printf("targets (>= 3x): decode nested %.2fx %s, decode flat %.2fx %s, encode %.2fx %s\n",
           ratio_nested, ratio_nested >= 3 ? "met" : "NOT MET", ratio_flat,
           ratio_flat >= 3 ? "met" : "NOT MET", ratio_enc, ratio_enc >= 3 ? "met" : "NOT MET");
    if (csv)
        fclose(csv);
    free(buf);
    free(x);
    return 0;
}
