/* test_codec_fast.c -- the fast decoder against the jansson reference:
 * the same answer, bit for bit, on every valid request and the same error
 * on every invalid one; streamed bodies and the golden requests. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "lib/base64.h"
#include "codec/codec.h"
#include "lib/errors.h"
#include "api/service.h"
#include "tests/support/check.h"
#include "tests/support/codec_compare.h"
#include "tests/support/fixture.h"
#include "tests/support/limits.h"
#include "tests/support/testdata.h"
#include "tests/codec/codec_shared.h"
#include "codec/request.h"
#include "codec/response.h"

/* ---------------------------------------------------------------------- */
/* The fast decoder against the jansson reference: the same answer, bit for
 * bit, on every valid request and the same error on every invalid one.   */

Test(codec, fast_path_agrees_with_jansson_on_valid_and_mutated_requests, .timeout = 240)
{
    struct codec_limits lim = test_limits();
    /* seeds: every golden request (the variants' too), every invalid
     * case, the sample request */
    char *seeds[256];
    size_t lens[256];
    int n = 0;
    const char *dirs[3] = {"tests/golden", "tests/golden_variants", "tests/cases"};
    for (int d = 0; d < 3; d++) {
        char *paths[128];
        int k = fixture_list(dirs[d], paths, 128);
        for (int i = 0; i < k; i++) {
            json_t *c = json_load_file(paths[i], JSON_ALLOW_NUL, NULL);
            if (n < 248)
                seeds[n] = testdata_body(c, &lens[n]), n++;
            json_decref(c);
            free(paths[i]);
        }
    }
    seeds[n] = fixture_read("examples/request.json", &lens[n]);
    n++;
    /* valid requests with the numbers at the edges */
    static const char *const edges[] = {
        "{\"query\": [[1, 100000000000000000000], [-1e-400, 2]], \"num_heads\": 1, "
        "\"attn_mask\": [[0, \"-inf\"], [\"-Infinity\", 0]]}",
        "{\"query\": {\"shape\": [2, 1], \"data\": [9223372036854775808, 3]}, \"num_heads\": 1, "
        "\"attn_mask\": {\"shape\": [2, 2], \"data\": [\"-inf\", 0, 1.5, \"-inf\"]}}",
        "{\"query\": [[1], [2]], \"num_heads\": 1, \"attn_mask\": {\"shape\": [2, 2], "
        "\"dtype\": \"float32\", \"b64\": \"AAAAAAAAgP8AAAA/AACA/w==\"}}",
    };
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        lens[n] = strlen(edges[i]);
        seeds[n++] = strdup(edges[i]);
    }
    const int want = testdata_count(dirs[0]) + testdata_count(dirs[1]) + testdata_count(dirs[2]);
    cr_assert_eq(n, want + 4, "%d seeds, want the %d cases and 4 more", n, want);

    /* each seed as is, then mutated: bytes replaced, inserted, deleted */
    static const char alphabet[] = "0123456789+-.eE,:[]{}\" \t\ntrufalsnbdhpA=/\\";
    unsigned long long st = 2024;
    int runs = 0, accepted = 0, failed = 0;
    for (int i = 0; i < n; i++) {
        for (int m = 0; m < 300; m++) {
            size_t len = lens[i];
            char *b = malloc(len + 16);
            memcpy(b, seeds[i], len + 1);
            int edits = m == 0 ? 0 : 1 + (int)((check_randf(&st) + 1) * 2);
            for (int e = 0; e < edits && len > 1; e++) {
                size_t at = (size_t)((check_randf(&st) + 1) * 0.5 * (double)(len - 1));
                char c = alphabet[(size_t)((check_randf(&st) + 1) * 0.5 * (sizeof alphabet - 2))];
                int op = (int)((check_randf(&st) + 1) * 1.5);
                if (m % 2) { /* odd runs: digits only, which mostly stays valid */
                    while (at < len && (b[at] < '0' || b[at] > '9'))
                        at++;
                    if (at < len)
                        b[at] = (char)('0' + (int)((check_randf(&st) + 1) * 4.99));
                } else if (op == 0) {
                    b[at] = c;
                } else if (op == 1) {
                    memmove(b + at + 1, b + at, len - at + 1);
                    b[at] = c, len++;
                } else {
                    memmove(b + at, b + at + 1, len - at);
                    len--;
                }
            }
            const char *diff = codec_compare_paths(b, len, &lim);
            if (diff) {
                if (failed < 5)
                    fprintf(stderr, "seed %d mutation %d: %s on: %.200s\n", i, m, diff, b);
                failed++;
            }
            struct codec_request r;
            struct failure e;
            accepted += codec_decode_request(&r, b, len, &lim, NULL, &e) == 0;
            codec_request_deinit(&r);
            free(b);
            runs++;
        }
        free(seeds[i]);
    }
    cr_log_info("%d requests compared, %d accepted", runs, accepted);
    cr_assert_gt(accepted, runs / 20, "too few valid inputs to mean anything (%d)", accepted);
    cr_assert_eq(failed, 0, "%d of %d inputs decoded differently by the fast decoder", failed,
                 runs);
}

/* Reading the streamed base64 body in pieces of any size gives exactly the
 * bytes codec_encode_response() writes in one go. */
Test(codec, streamed_base64_body_equals_the_whole_body)
{
    const char *bodies[] = {
        "{\"query\": [[[1,2,3,4]],[[5,6,7,8]]], \"num_heads\": 2, \"output_encoding\": "
        "\"base64\", \"tokens\": [\"a\"]}",
        "{\"query\": [[1,2,3],[4,5,6],[7,8,9],[1,1,1],[2,2,2]], \"num_heads\": 3, "
        "\"output_encoding\": \"base64\", \"average_attn_weights\": true}",
        "{\"query\": [[1,2]], \"num_heads\": 1, \"output_encoding\": \"base64\", "
        "\"need_weights\": false}",
    };
    unsigned long long st = 99;
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct codec_request r;
        struct failure e;
        cr_assert_eq(codect_decode(&r, bodies[i], &e), 0, "%s", e.msg);
        const size_t olen = r.out_len, wlen = r.weights_len;
        float *out = malloc(olen * 4), *w = wlen ? malloc(wlen * 4) : NULL;
        for (size_t k = 0; k < olen; k++)
            out[k] = check_randf(&st) * 100;
        for (size_t k = 0; k < wlen; k++)
            w[k] = (check_randf(&st) + 1) / 2;
        size_t len;
        char *whole = codec_encode_response(&r, out, w, &len);
        float *out2 = malloc(olen * 4), *w2 = wlen ? malloc(wlen * 4) : NULL;
        memcpy(out2, out, olen * 4);
        if (wlen)
            memcpy(w2, w, wlen * 4);
        struct stream *s = codec_stream_new(&r, out2, w2); /* takes out2, w2 */
        cr_assert_not_null(s);
        cr_assert_eq(stream_size(s), len, "body %zu: size %zu, want %zu", i,
                     stream_size(s), len);
        for (int trial = 0; trial < 20; trial++) {
            char *got = malloc(len + 8);
            size_t pos = 0;
            while (pos < len) {
                size_t max = 1 + (size_t)((check_randf(&st) + 1) * (trial < 10 ? 3.5 : 40));
                size_t k = stream_read(s, pos, got + pos, max);
                cr_assert_gt(k, 0, "stalled at %zu of %zu", pos, len);
                cr_assert_leq(k, max);
                pos += k;
            }
            cr_assert_eq(stream_read(s, len, got + len, 8), 0, "bytes past the end");
            cr_assert(memcmp(got, whole, len) == 0, "body %zu trial %d: %.*s\nwant %s", i,
                      trial, (int)len, got, whole);
            free(got);
        }
        stream_free(s);
        free(whole), free(out), free(w);
        codec_request_deinit(&r);
    }
}

/* The fast decoder is really taken: a typo in one of its key comparisons
 * would send every request through jansson with every other test green.
 * Each golden request goes through it, boolean masks included; and each of
 * the three tensor forms does (three_tensor_forms_... above checks the
 * floats). */
Test(codec, fast_decoder_reads_the_golden_requests)
{
    struct codec_limits lim = test_limits();
    char *paths[256];
    int n = fixture_list("tests/golden", paths, 128), fast = 0, failed = 0;
    const int nv = fixture_list("tests/golden_variants", paths + n, 128);
    n += nv;
    for (int i = 0; i < n; i++) {
        json_t *c = json_load_file(paths[i], 0, NULL);
        cr_assert_not_null(c, "%s", paths[i]);
        size_t len;
        char *body = testdata_body(c, &len);
        struct codec_request r;
        struct failure e;
        cr_assert_eq(codec_decode_request(&r, body, len, &lim, NULL, &e), 0, "%s: %s", paths[i],
                     e.msg);
        if (r.path != CODEC_PATH_FAST) {
            fprintf(stderr, "%s: decoded by path %d, want the fast decoder\n", paths[i], r.path);
            failed++;
        }
        fast += r.path == CODEC_PATH_FAST;
        codec_request_deinit(&r);
        free(body);
        json_decref(c);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d golden requests took the wrong decoder", failed);
    cr_assert_eq(fast, n, "only %d of %d golden requests took the fast decoder", fast, n);

    const char *forms[] = {
        "{\"query\": [[0.5, -1.25], [3, 0.001]], \"num_heads\": 1}",
        "{\"query\": {\"shape\": [2, 2], \"data\": [0.5, -1.25, 3, 0.001]}, \"num_heads\": 1}",
        "{\"query\": {\"shape\": [2, 2], \"dtype\": \"float32\", \"b64\": "
        "\"AAAAPwAAoL8AAEBAbxKDOg==\"}, \"num_heads\": 1, \"attn_mask\": {\"shape\": [2, 2], "
        "\"dtype\": \"bool\", \"b64\": \"AAEAAA==\"}, \"weights\": {\"out_proj_bias\": [1, 2]}}",
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct codec_request r;
        struct failure e;
        cr_assert_eq(codec_decode_request(&r, forms[i], strlen(forms[i]), &lim, NULL, &e), 0,
                     "form %zu: %s", i + 1, e.msg);
        cr_assert_eq(r.path, CODEC_PATH_FAST, "form %zu went to jansson", i + 1);
        codec_request_deinit(&r);
        cr_assert_eq(codec_decode_request_reference(&r, forms[i], strlen(forms[i]), &lim, NULL, &e),
                     0);
        cr_assert_eq(r.path, CODEC_PATH_JANSSON);
        codec_request_deinit(&r);
    }
}
