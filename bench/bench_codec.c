/* bench_codec.c -- the codec against jansson's DOM, on the same tensors.
 *
 *   bench_codec OUTDIR
 *
 * Decode: one 512×768 float tensor as a request, written as nested arrays,
 * as {"shape", "data"} and as base64, through codec_decode_request(); the
 * baseline is json_loadb() of the nested text plus a json_real_value() copy
 * into floats, run in the same process. Encode: codec_encode_response() of
 * the same tensor (JSON and base64) against json_dumps() with
 * JSON_REAL_PRECISION(9). Peak bytes held by jansson are counted through
 * json_set_alloc_funcs(). Medians of repeated runs. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/timing.h"
#include "lib/base64.h"
#include "codec/codec.h"
#include "codec/request.h"
#include "codec/response.h"

#define ROWS 512
#define COLS 768
#define REPS 7

/* Counting allocator for jansson: current and peak bytes. */
static size_t cur_bytes, peak_bytes;

static void *count_malloc(size_t n)
{
    size_t *p = malloc(n + 16);
    if (!p)
        return NULL;
    p[0] = n;
    cur_bytes += n;
    if (cur_bytes > peak_bytes)
        peak_bytes = cur_bytes;
    return (char *)p + 16;
}

static void count_free(void *q)
{
    if (!q)
        return;
    size_t *p = (size_t *)((char *)q - 16);
    cur_bytes -= p[0];
    free(p);
}

struct text {
    char *s;
    size_t len;
};

static struct text body_of(const float *x, int form)
{
    /* form 0 nested, 1 flat, 2 base64 */
    size_t cap = (size_t)ROWS * COLS * 20 + 4096, o = 0;
    char *s = malloc(cap);
    o += (size_t)sprintf(s + o, "{\"num_heads\":12,\"need_weights\":false,\"query\":");
    if (form == 2) {
        o += (size_t)sprintf(s + o, "{\"shape\":[%d,%d],\"dtype\":\"float32\",\"b64\":\"", ROWS, COLS);
        o += base64_encode(s + o, (const unsigned char *)x, (size_t)ROWS * COLS * 4);
        o += (size_t)sprintf(s + o, "\"}}");
    } else {
        if (form == 1)
            o += (size_t)sprintf(s + o, "{\"shape\":[%d,%d],\"data\":[", ROWS, COLS);
        else
            s[o++] = '[';
        for (int i = 0; i < ROWS; i++) {
            if (form == 0)
                o += (size_t)sprintf(s + o, "%s[", i ? "," : "");
            for (int j = 0; j < COLS; j++)
                o += (size_t)sprintf(s + o, "%s%.9g", (j || (form == 1 && i)) ? "," : "",
                                     (double)x[(size_t)i * COLS + j]);
            if (form == 0)
                s[o++] = ']';
        }
        o += (size_t)sprintf(s + o, form == 1 ? "]}}" : "]}");
    }
    s[o] = '\0';
    return (struct text){s, o};
}

/* The baseline: jansson DOM, then copy every number into floats. */
static double jansson_decode(const struct text *t, float *dst)
{
    json_error_t e;
    json_t *root = json_loadb(t->s, t->len, JSON_REJECT_DUPLICATES, &e);
    json_t *q = json_object_get(root, "query");
    size_t k = 0;
    for (size_t i = 0; i < json_array_size(q); i++) {
        json_t *row = json_array_get(q, i);
        for (size_t j = 0; j < json_array_size(row); j++)
            dst[k++] = (float)json_number_value(json_array_get(row, j));
    }
    json_decref(root);
    return (double)k;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "build/bench";
    json_set_alloc_funcs(count_malloc, count_free);
    float *x = malloc((size_t)ROWS * COLS * sizeof *x), *dst = malloc((size_t)ROWS * COLS * sizeof *dst);
    unsigned long long s = 1;
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2 - 1);
    }
    struct codec_limits lim = {1 << 24, 64, 4096, 4096, 4096, 256, 1 << 26, 256};
    struct text texts[3] = {body_of(x, 0), body_of(x, 1), body_of(x, 2)};
    const char *names[3] = {"nested JSON", "flat JSON", "base64"};
    double t[REPS];

    char path[512];
    snprintf(path, sizeof path, "%s/codec.csv", dir);
    FILE *csv = fopen(path, "w");
    fprintf(csv, "op,form,bytes,ms,mb_per_s,baseline_ms,speedup,peak_jansson_bytes\n");

    printf("3. Codec: one %d x %d float tensor (%.1f MB of floats); medians of %d\n", ROWS, COLS,
           ROWS * COLS * 4 / 1048576.0, REPS);
    /* baseline decode */
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ms();
        jansson_decode(&texts[0], dst);
        t[r] = now_ms() - t0;
    }
    peak_bytes = cur_bytes = 0;
    jansson_decode(&texts[0], dst);
    const size_t base_peak = peak_bytes;
    const double base_ms = median(t, REPS);
    printf("%-8s %-28s %9s %9s %9s %9s %14s\n", "op", "form", "MB", "ms", "MB/s", "speedup",
           "jansson peak MB");
    printf("%-8s %-28s %9.1f %9.1f %9.1f %9s %14.1f\n", "decode", "jansson DOM (nested JSON)",
           texts[0].len / 1048576.0, base_ms, texts[0].len / 1048576.0 / base_ms * 1e3, "1.00x",
           base_peak / 1048576.0);
    fprintf(csv, "decode,jansson,%zu,%.3f,%.1f,%.3f,1,%zu\n", texts[0].len, base_ms,
            texts[0].len / 1048576.0 / base_ms * 1e3, base_ms, base_peak);
    for (int f = 0; f < 3; f++) {
        struct codec_request req;
        struct failure err;
        for (int r = 0; r < REPS; r++) {
            double t0 = now_ms();
            if (codec_decode_request(&req, texts[f].s, texts[f].len, &lim, NULL, &err) != 0) {
                fprintf(stderr, "bench_codec: %s\n", err.msg);
                return 1;
            }
            t[r] = now_ms() - t0;
            codec_request_deinit(&req);
        }
        peak_bytes = cur_bytes = 0;
        codec_decode_request(&req, texts[f].s, texts[f].len, &lim, NULL, &err);
        for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
            if (req.p.query[i] != x[i]) {
                fprintf(stderr, "bench_codec: decoded value %zu differs\n", i);
                return 1;
            }
        codec_request_deinit(&req);
        const double ms = median(t, REPS);
        char label[64];
        snprintf(label, sizeof label, "codec (%s)", names[f]);
        printf("%-8s %-28s %9.1f %9.1f %9.1f %8.2fx %14.1f\n", "decode", label,
               texts[f].len / 1048576.0, ms, texts[f].len / 1048576.0 / ms * 1e3, base_ms / ms,
               peak_bytes / 1048576.0);
        fprintf(csv, "decode,%s,%zu,%.3f,%.1f,%.3f,%.3f,%zu\n", names[f], texts[f].len, ms,
                texts[f].len / 1048576.0 / ms * 1e3, base_ms, base_ms / ms, peak_bytes);
    }

    /* encode: baseline json_dumps of the nested array, 9 significant digits */
    json_t *arr = json_array();
    for (int i = 0; i < ROWS; i++) {
        json_t *row = json_array();
        for (int j = 0; j < COLS; j++)
            json_array_append_new(row, json_real(x[(size_t)i * COLS + j]));
        json_array_append_new(arr, row);
    }
    size_t base_len = 0;
    for (int r = 0; r < REPS; r++) {
        double t0 = now_ms();
        char *out = json_dumps(arr, JSON_COMPACT | JSON_REAL_PRECISION(9));
        t[r] = now_ms() - t0;
        base_len = strlen(out);
        count_free(out); /* jansson's allocator */
    }
    json_decref(arr);
    const double enc_base = median(t, REPS);
    printf("%-8s %-28s %9.1f %9.1f %9.1f %9s\n", "encode", "json_dumps, 9 digits",
           base_len / 1048576.0, enc_base, base_len / 1048576.0 / enc_base * 1e3, "1.00x");
    fprintf(csv, "encode,json_dumps,%zu,%.3f,%.1f,%.3f,1,0\n", base_len, enc_base,
            base_len / 1048576.0 / enc_base * 1e3, enc_base);
    for (int f = 0; f < 2; f++) {
        struct codec_request req;
        struct failure err;
        const char *b = f ? "{\"query\":[[1]],\"num_heads\":1,\"output_encoding\":\"base64\","
                            "\"need_weights\":false}"
                          : "{\"query\":[[1]],\"num_heads\":1,\"need_weights\":false}";
        codec_decode_request(&req, b, strlen(b), &lim, NULL, &err);
        req.p.L = ROWS, req.p.E = COLS, req.p.H = 1; /* encode an L×E output */
        size_t len = 0;
        for (int r = 0; r < REPS; r++) {
            double t0 = now_ms();
            char *out = codec_encode_response(&req, x, NULL, &len);
            t[r] = now_ms() - t0;
            free(out);
        }
        codec_request_deinit(&req);
        const double ms = median(t, REPS);
        printf("%-8s %-28s %9.1f %9.1f %9.1f %8.2fx\n", "encode",
               f ? "codec (base64)" : "codec (nested JSON, shortest)", len / 1048576.0, ms,
               len / 1048576.0 / ms * 1e3, enc_base / ms);
        fprintf(csv, "encode,%s,%zu,%.3f,%.1f,%.3f,%.3f,0\n", f ? "base64" : "nested JSON", len,
                ms, len / 1048576.0 / ms * 1e3, enc_base, enc_base / ms);
    }
    printf("(targets: decoding numeric JSON >= 3x jansson's DOM, memory ~4 bytes a number; "
           "encoding >= 3x json_dumps)\n");
    fclose(csv);
    for (int f = 0; f < 3; f++)
        free(texts[f].s);
    free(x), free(dst);
    return 0;
}
