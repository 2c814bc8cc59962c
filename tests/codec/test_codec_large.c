/* test_codec_large.c -- large bodies: answered by the fast decoder, in
 * memory proportional to the body, never by a DOM of the whole body; big
 * tensor buffers reused on the same thread. */
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
#include "codec/request.h"
#include "lib/errors.h"
#include "api/service.h"
#include "tests/support/check.h"
#include "tests/support/codec_compare.h"
#include "tests/support/limits.h"
#include "tests/support/fixture.h"
#include "tests/support/testdata.h"

/* ---------------------------------------------------------------------- */
/* Large bodies: answered by the fast decoder, in memory proportional to
 * the body, never by a DOM of the whole body.                           */

/* Every invalid case, padded with spaces beyond CODEC_FAST_ERRORS_FROM (so
 * its line numbers stay), gets the same status, slug and message phrase
 * from the fast decoder as the small case gets from the reference, and the
 * well-formed ones (stage "compute") are accepted. */
Test(codec, large_bodies_get_every_case_answer_from_the_fast_decoder, .timeout = 60)
{
    char *paths[128];
    int ncases = fixture_list("tests/cases", paths, 128), n = 0, failed = 0;
    const size_t pad = CODEC_FAST_ERRORS_FROM + 1;
    for (int k = 0; k < ncases; k++) {
        json_t *c = json_load_file(paths[k], JSON_ALLOW_NUL, NULL);
        cr_assert_not_null(c, "%s", paths[k]);
        size_t blen;
        char *small = testdata_body(c, &blen);
        if (blen == 0) { /* padded, an empty body is no longer empty */
            free(small), free(paths[k]), json_decref(c);
            continue;
        }
        char *body = malloc(pad + blen);
        memset(body, ' ', pad);
        memcpy(body + pad, small, blen);
        const char *code = json_string_value(json_object_get(c, "code"));
        const char *want = json_string_value(json_object_get(c, "message_contains"));
        const char *stage = json_string_value(json_object_get(c, "stage"));
        int status = (int)json_integer_value(json_object_get(c, "status"));
        struct codec_request r;
        struct failure e = {0};
        struct codec_limits lim = test_limits();
        int rc = codec_decode_request(&r, body, pad + blen, &lim, NULL, &e);
        if (r.path != CODEC_PATH_FAST) {
            fprintf(stderr, "%s: answered by path %d, not the fast decoder\n", paths[k], r.path);
            failed++;
        } else if (stage && strcmp(stage, "compute") == 0 ? rc != 0
                   : rc == 0 || strcmp(http_error_slug(e.code), code) != 0 ||
                     http_error_status(e.code) != status || !strstr(e.msg, want)) {
            fprintf(stderr, "%s padded: got %s '%s', want %s containing '%s'\n", paths[k],
                    rc ? http_error_slug(e.code) : "success", rc ? e.msg : "", code, want);
            failed++;
        }
        codec_request_deinit(&r);
        free(body), free(small), free(paths[k]);
        json_decref(c);
        n++;
    }
    cr_assert_eq(failed, 0, "%d of %d padded cases answered wrongly", failed, n);
}

/* The bodies of the memory test, about mb MiB each. */
enum big_body { BIG_UNKNOWN_FIELD, BIG_EMPTY_TOKENS, BIG_TENSOR_BAD_HEADS, BIG_TENSOR,
                BIG_BOOL_MASK, BIG_BASE64, BIG_COUNT };

static char *big_body(enum big_body which, size_t target, size_t *len)
{
    char *b = malloc(target + (1 << 20));
    size_t n = 0;
    switch (which) {
    case BIG_UNKNOWN_FIELD: /* {"query": ..., "junk": [0,0,...]} */
        n += (size_t)sprintf(b, "{\"query\": [[1, 2]], \"num_heads\": 1, \"junk\": [0");
        while (n < target)
            memcpy(b + n, ",0", 2), n += 2;
        n += (size_t)sprintf(b + n, "]}");
        break;
    case BIG_EMPTY_TOKENS: /* millions of "" */
        n += (size_t)sprintf(b, "{\"query\": [[1, 2]], \"num_heads\": 1, \"tokens\": [\"\"");
        while (n < target)
            memcpy(b + n, ",\"\"", 3), n += 3;
        n += (size_t)sprintf(b + n, "]}");
        break;
    case BIG_TENSOR_BAD_HEADS: /* (4, rows, 1024) of 1, num_heads 3 or 4 */
    case BIG_TENSOR: {
        const size_t rows = target / (2 * 4096);
        n += (size_t)sprintf(b, "{\"query\": {\"shape\": [4, %zu, 1024], \"data\": [1", rows);
        for (size_t i = 1; i < 4 * rows * 1024; i++)
            memcpy(b + n, ",1", 2), n += 2;
        n += (size_t)sprintf(b + n, "]}, \"num_heads\": %d, \"need_weights\": false}",
                             which == BIG_TENSOR ? 4 : 3);
        break;
    }
    case BIG_BOOL_MASK: { /* a causal mask of true and false, (L, L) */
        size_t L = 1;
        while ((L + 1) * (L + 1) * 6 < target)
            L++;
        n += (size_t)sprintf(b, "{\"query\": {\"shape\": [%zu, 1], \"data\": [0", L);
        for (size_t i = 1; i < L; i++)
            memcpy(b + n, ",0", 2), n += 2;
        n += (size_t)sprintf(b + n, "]}, \"num_heads\": 1, \"need_weights\": false, "
                                    "\"attn_mask\": [");
        for (size_t i = 0; i < L; i++) {
            b[n++] = i ? ',' : ' ';
            b[n++] = '[';
            for (size_t j = 0; j < L; j++) {
                if (j)
                    b[n++] = ',';
                memcpy(b + n, j > i ? "true" : "false", j > i ? 4 : 5), n += j > i ? 4 : 5;
            }
            b[n++] = ']';
        }
        n += (size_t)sprintf(b + n, "]}");
        break;
    }
    default: { /* (4, rows, 1024) float32 in base64, rows a multiple of 3 */
        const size_t rows = target / (4 * 1024 * 16 / 3) / 3 * 3;
        n += (size_t)sprintf(b, "{\"query\": {\"shape\": [4, %zu, 1024], \"dtype\": \"float32\", "
                                "\"b64\": \"", rows);
        for (size_t i = 0; i < 4 * rows * 1024; i += 3) /* 1, 2, 3 */
            memcpy(b + n, "AACAPwAAAEAAAEBA", 16), n += 16;
        n += (size_t)sprintf(b + n, "\"}, \"num_heads\": 4, \"need_weights\": false}");
        break;
    }
    }
    *len = n;
    return b;
}

/* Decoding memory (docs/api.md, Request): at most 3x the body beyond the body
 * itself, whatever the body holds. Peak resident memory is measured around
 * one decode (VmHWM, reset through /proc/self/clear_refs). The whole-body
 * DOM cost 14-31x on these bodies (unknown field 20x, empty tokens 31x,
 * a tensor with a bad num_heads 22x). */
static const struct { const char *name; int code; const char *msg; } big_want[BIG_COUNT] = {
    {"unknown field", ERR_INVALID_PARAMETER, "unknown field 'junk'"},
    {"empty tokens", ERR_INVALID_PARAMETER, "tokens has"},
    {"tensor, bad num_heads", ERR_INVALID_PARAMETER, "not divisible by num_heads 3"},
    {"valid tensor", -1, NULL},
    {"bool mask", -1, NULL},
    {"base64 tensor", -1, NULL},
};

/* One decode of big body w, measured; 0 when it is as big_want says. */
static int decode_big(int w, void *ctx)
{
    (void)ctx;
    struct codec_limits lim = test_limits();
    size_t len;
    char *body = big_body((enum big_body)w, 16u << 20, &len);
    check_peak_reset();
    struct codec_request r;
    struct failure e = {0};
    int rc = codec_decode_request(&r, body, len, &lim, NULL, &e);
    int bad = !check_peak_within(big_want[w].name, len, 3.0);
    if (big_want[w].msg ? rc == 0 || e.code != big_want[w].code ||
                              !strstr(e.msg, big_want[w].msg)
                        : rc != 0)
        bad = fprintf(stderr, "%s: answered %d '%s'\n", big_want[w].name, rc, e.msg);
    if (r.path != CODEC_PATH_FAST)
        bad = fprintf(stderr, "%s: decoded by path %d\n", big_want[w].name, r.path);
    codec_request_deinit(&r);
    free(body);
    return bad;
}

Test(codec, decoding_memory_is_within_3x_the_body, .timeout = 120)
{
    const char *why = check_peak_unmeasurable();
    if (why)
        cr_skip_test("SKIPPED: %s", why);
    const int failed = check_peak_children(BIG_COUNT, decode_big, NULL);
    cr_expect_eq(failed, 0, "%d of %d bodies failed, see above", failed, BIG_COUNT);
}

/* A big base64 tensor's buffer is kept on the thread when the request is
 * done, and the next request decoded on that thread writes into it (pages
 * already mapped); a thread that exits frees what it kept (LSan checks
 * that under make SANITIZE=address). */
static void *decode_twice(void *arg)
{
    (void)arg;
    const size_t count = 512 * 768; /* 1.5 MB: above the size kept */
    float *x = calloc(count, sizeof *x);
    char *body = malloc(BASE64_LEN(count * 4) + 256);
    size_t o = (size_t)sprintf(body, "{\"query\": {\"shape\": [512, 768], \"dtype\": \"float32\", "
                                     "\"b64\": \"");
    o += base64_encode(body + o, (const unsigned char *)x, count * 4);
    o += (size_t)sprintf(body + o, "\"}, \"num_heads\": 8}");
    struct codec_limits lim = test_limits();
    struct codec_request r;
    struct failure e;
    const float *first = NULL;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(codec_decode_request(&r, body, o, &lim, NULL, &e), 0, "%s", e.msg);
        if (i == 0)
            first = r.p.query;
        else
            cr_assert_eq(r.p.query, first, "the second decode did not reuse the buffer");
        codec_request_deinit(&r);
    }
    free(body);
    free(x);
    return NULL;
}

Test(codec, big_tensor_buffers_are_reused_on_the_same_thread)
{
    pthread_attr_t a;
    pthread_t t;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 4u << 20); /* the decoder wants >= 1 MiB */
    cr_assert_eq(pthread_create(&t, &a, decode_twice, NULL), 0);
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
}
