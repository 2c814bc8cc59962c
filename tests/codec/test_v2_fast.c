/* test_v2_fast.c -- the v2 decoder's fast reading of JSON "data"
 * (codec/v2_scan.c): bit for bit what jansson reads, flat and nested,
 * for every golden case; and the memory a large JSON request takes to
 * decode (codec/v2.h: at most 3x the body beyond the body). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "api/service.h"
#include "codec/v2.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/support/golden_v2.h"
#include "tests/support/limits.h"

/* A golden request as a v2 body with JSON data, flat or nested; escaped:
 * every input's name written with an escape ("\u0071uery"), which the
 * fast reader leaves to jansson. */
static char *to_v2(json_t *req, int nested, int escaped)
{
    json_t *root = golden_v2(req, nested ? GOLDEN_V2_NESTED : 0);
    char *json = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!escaped)
        return json;
    char *out = malloc(strlen(json) * 2 + 1), *o = out;
    for (const char *s = json; *s;) {
        if (strncmp(s, "\"name\":\"", 8) == 0) {
            o += sprintf(o, "\"name\":\"\\u%04x", (unsigned char)s[8]);
            s += 9;
        } else {
            *o++ = *s++;
        }
    }
    *o = '\0';
    free(json);
    return out;
}

/* Decode and compute body; the floats into out and w (malloc'd). */
static void run(const char *name, const char *body, enum codec_path path, float **out,
                float **w, size_t *olen, size_t *wlen)
{
    const struct codec_limits lim = test_limits();
    struct v2_request r;
    struct failure e;
    cr_assert_eq(v2_decode_infer(&r, body, strlen(body), -1, NULL, &lim, &e), 0, "%s: %s", name,
                 e.msg);
    cr_assert_eq(r.c.path, path, "%s: decoded by path %d", name, r.c.path);
    *olen = r.c.out_len, *wlen = r.c.weights_len;
    *out = malloc(*olen * 4), *w = *wlen ? malloc(*wlen * 4) : NULL;
    struct att_error ae;
    cr_assert_eq(att_forward_checked(*out, *w, &r.c.p, &ae), ATT_OK, "%s: %s", name, ae.msg);
    v2_request_deinit(&r);
}

/* Every golden case, its data flat and nested: the answer of the fast
 * reader is bit for bit that of jansson's (the same request with escaped
 * names, which the fast reader leaves to it). */
Test(v2_fast, golden_cases_read_fast_equal_jansson_bit_for_bit, .timeout = 60)
{
    att_init(1);
    char *paths[64];
    const int n = golden_list(paths, 64);
    cr_assert(n > 0 && n == golden_count(), "listed %d of the %d golden cases in tests/golden",
              n, golden_count());
    for (int i = 0; i < n; i++) {
        json_t *c = json_load_file(paths[i], 0, NULL);
        json_t *req = json_object_get(c, "request");
        for (int nested = 0; nested < 2; nested++) {
            char *fast = to_v2(req, nested, 0), *slow = to_v2(req, nested, 1);
            float *o1, *w1, *o2, *w2;
            size_t ol1, wl1, ol2, wl2;
            run(paths[i], fast, CODEC_PATH_FAST, &o1, &w1, &ol1, &wl1);
            run(paths[i], slow, CODEC_PATH_JANSSON, &o2, &w2, &ol2, &wl2);
            cr_assert(ol1 == ol2 && wl1 == wl2, "%s: sizes differ", paths[i]);
            cr_assert_eq(memcmp(o1, o2, ol1 * 4), 0, "%s (%s): output differs", paths[i],
                         nested ? "nested" : "flat");
            cr_assert(wl1 == 0 || memcmp(w1, w2, wl1 * 4) == 0, "%s: weights differ",
                      paths[i]);
            free(o1), free(w1), free(o2), free(w2), free(fast), free(slow);
        }
        json_decref(c);
        free(paths[i]);
    }
}

/* ---------------------------------------------------------------------- */
/* Memory                                                                  */

enum big { BIG_ZEROS, BIG_NESTED, BIG_DECIMAL, BIG_BOOL_MASK, BIG_RAGGED, BIG_UNKNOWN_FIELD,
            BIG_UNKNOWN_PARAMETER, BIG_TRITON_PARAMETER, BIG_COUNT };

/* About target bytes of a v2 request: query (L, 1024) as "0," flat or
 * nested, or as 12-byte decimals; a (L, L) BOOL mask; nested data whose
 * last row is one short (refused); or a small query and "0," as the value
 * of an unknown field, an unknown parameter (refused) or a parameter of
 * Triton's (triton_..., ignored). */
static char *big_body(enum big which, size_t target, size_t *len)
{
    char *b = malloc(target + (1 << 20));
    if (which >= BIG_UNKNOWN_FIELD) { /* a small query; "0," in an ignored value */
        size_t n = (size_t)sprintf(b, "{\"inputs\": [{\"name\": \"query\", \"shape\": [1, 2], "
                                      "\"datatype\": \"FP32\", \"data\": [1, 2]}], "
                                      "\"parameters\": {\"num_heads\": 1%s: [0",
                                   which == BIG_UNKNOWN_FIELD       ? "}, \"junk\""
                                   : which == BIG_UNKNOWN_PARAMETER ? ", \"junk\""
                                                                    : ", \"triton_junk\"");
        while (n < target)
            memcpy(b + n, ",0", 2), n += 2;
        n += (size_t)sprintf(b + n, "]%s}", which == BIG_UNKNOWN_FIELD ? "" : "}");
        *len = n;
        return b;
    }
    const size_t E = 1024;
    const size_t per = which == BIG_DECIMAL ? 12 : 2;
    /* the mask: (1024, 1024) of true and false, ~5.5 MB, after a 2 MB query */
    const size_t L = which == BIG_BOOL_MASK ? 1024 : target / (per * E);
    size_t n = 0;
    const char *num = which == BIG_DECIMAL ? "0.123456789" : "0";
    n += (size_t)sprintf(b, "{\"parameters\": {\"num_heads\": 1, \"need_weights\": false}, "
                            "\"inputs\": [{\"name\": \"query\", \"shape\": [%zu, %zu], "
                            "\"datatype\": \"FP32\", \"data\": [", L, E);
    const int nested = which != BIG_ZEROS && which != BIG_DECIMAL;
    for (size_t i = 0; i < L; i++) {
        n += (size_t)sprintf(b + n, "%s%s", i ? "," : "", nested ? "[" : "");
        const size_t cols = which == BIG_RAGGED && i == L - 1 ? E - 1 : E;
        for (size_t j = 0; j < cols; j++)
            n += (size_t)sprintf(b + n, "%s%s", j ? "," : "", num);
        if (nested)
            b[n++] = ']';
    }
    b[n++] = ']';
    b[n++] = '}';
    if (which == BIG_BOOL_MASK) {
        n += (size_t)sprintf(b + n, ", {\"name\": \"attn_mask\", \"shape\": [%zu, %zu], "
                                    "\"datatype\": \"BOOL\", \"data\": [", L, L);
        for (size_t i = 0; i < L; i++) {
            b[n++] = i ? ',' : '[';
            if (i)
                b[n++] = '[';
            for (size_t j = 0; j < L; j++)
                n += (size_t)sprintf(b + n, "%s%s", j ? "," : "", j > i ? "true" : "false");
            b[n++] = ']';
        }
        b[n++] = ']';
        b[n++] = '}';
    }
    n += (size_t)sprintf(b + n, "]}");
    *len = n;
    return b;
}

/* Decoding memory (codec/v2.h): at most 3x the body beyond the body, peak
 * resident memory around one decode (VmHWM, reset through
 * /proc/self/clear_refs), as test_codec.c measures POST /attention's.
 * jansson's DOM of these bodies cost 3.6x (decimals) to 21x ("0,"). */
static const struct { const char *name; const char *msg; } big_want[BIG_COUNT] = {
    {"v2 flat 0,", NULL}, {"v2 nested 0,", NULL}, {"v2 decimals", NULL}, {"v2 bool mask", NULL},
    {"v2 nested, ragged", "ragged array"}, {"v2 unknown field", "unknown field 'junk'"},
    {"v2 unknown parameter", "unknown parameter 'junk'"}, {"v2 triton_ parameter", NULL},
};

/* One decode of big body w, measured; 0 when it is as big_want says. */
static int decode_big(int w, void *ctx)
{
    (void)ctx;
    const struct codec_limits lim = test_limits();
    size_t len;
    char *body = big_body((enum big)w, 8u << 20, &len);
    check_peak_reset();
    struct v2_request r;
    struct failure e = {0};
    const int rc = v2_decode_infer(&r, body, len, -1, NULL, &lim, &e);
    int bad = !check_peak_within(big_want[w].name, len, 3.0);
    if (big_want[w].msg ? rc == 0 || !strstr(e.msg, big_want[w].msg) : rc != 0)
        bad = fprintf(stderr, "%s: answered %d '%s'\n", big_want[w].name, rc, e.msg);
    v2_request_deinit(&r);
    free(body);
    return bad;
}

Test(v2_fast, decoding_a_large_json_request_is_within_3x_the_body, .timeout = 120)
{
    const char *why = check_peak_unmeasurable();
    if (why)
        cr_skip_test("SKIPPED: %s", why);
    const int failed = check_peak_children(BIG_COUNT, decode_big, NULL);
    cr_expect_eq(failed, 0, "%d of %d bodies failed, see above", failed, BIG_COUNT);
}

/* A large JSON part (past CODEC_FAST_ERRORS_FROM): a data array the fast
 * reader refuses is answered with its message, naming the input, unless
 * something the schema reads first is wrong; a syntax error anywhere is
 * invalid JSON. */
Test(v2_fast, large_refused_data_is_answered_without_jansson)
{
    static const struct { const char *name, *dt, *tail, *msg; int code; } cases[] = {
        {"query", "FP32", ",true]", "input 'query': data: ", ERR_INVALID_TENSOR},
        {"query", "FP32", ",,1]", "invalid JSON at line 1", ERR_INVALID_JSON},
        {"query", "FP32", ",1,1]", "does not match the true shape of data", ERR_INVALID_TENSOR},
        {"query", "BOOL", ",true]", "has datatype BOOL; it takes FP32", ERR_INVALID_TENSOR},
        {"quary", "FP32", ",true]", "unknown input 'quary'", ERR_INVALID_PARAMETER},
        {"key_padding_mask", "BOOL", ",1]", "input 'key_padding_mask': data: ",
         ERR_INVALID_TENSOR},
    };
    const struct codec_limits lim = test_limits();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t count = 100000;
        char *b = malloc(6 * count + 4096);
        size_t n = (size_t)sprintf(b, "{\"parameters\": {\"num_heads\": 1}, \"inputs\": [{"
                                      "\"name\": \"%s\", \"shape\": [%zu, 1], \"datatype\": "
                                      "\"%s\", \"data\": [%s", cases[k].name, count,
                                   cases[k].dt, cases[k].name[0] == 'k' ? "true" : "0");
        const char *item = cases[k].name[0] == 'k' ? ",true" : ",0";
        for (size_t i = 2; i < count; i++)
            n += (size_t)sprintf(b + n, "%s", item);
        n += (size_t)sprintf(b + n, "%s}]}", cases[k].tail);
        struct v2_request r;
        struct failure e = {0};
        const int rc = v2_decode_infer(&r, b, n, -1, NULL, &lim, &e);
        cr_expect(rc == -1 && e.code == cases[k].code && strstr(e.msg, cases[k].msg),
                  "case %zu: rc %d, %d '%s'; expected %d '%s'", k, rc, e.code, e.msg,
                  cases[k].code, cases[k].msg);
        cr_expect(r.c.path == CODEC_PATH_FAST || cases[k].code == ERR_INVALID_JSON,
                  "case %zu: decoded by path %d", k, r.c.path);
        v2_request_deinit(&r);
        free(b);
    }
}
