/* test_codec.c -- request decoding (every tensor form, every invalid case
 * in tests/cases/, numbers at the edges) and response encoding (shortest
 * floats, base64). */
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
#include "codec/status.h"
#include "codec/codec.h"
#include "lib/errors.h"
#include "api/service.h"
#include "tests/support/check.h"
#include "tests/support/codec_compare.h"
#include "tests/support/limits.h"
#include "tests/support/fixture.h"
#include "tests/support/testdata.h"
#include "tests/codec/codec_shared.h"
#include "codec/request.h"
#include "codec/response.h"

Test(codec, three_tensor_forms_decode_to_the_same_floats)
{
    /* 0.5, -1.25, 3, 1e-3 as little-endian float32, base64 */
    const char *bodies[] = {
        "{\"query\": [[0.5, -1.25], [3, 0.001]], \"num_heads\": 1}",
        "{\"query\": {\"shape\": [2, 2], \"data\": [0.5, -1.25, 3, 0.001]}, \"num_heads\": 1}",
        "{\"query\": {\"shape\": [2, 2], \"dtype\": \"float32\", \"b64\": \"AAAAPwAAoL8AAEBAbxKDOg==\"},"
        " \"num_heads\": 1}",
    };
    const float want[4] = {0.5f, -1.25f, 3.0f, 0.001f};
    for (int i = 0; i < 3; i++) {
        struct codec_request r;
        struct failure e;
        cr_assert_eq(codect_decode(&r, bodies[i], &e), 0, "form %d: %s", i + 1, e.msg);
        cr_assert_eq(r.p.N, 1);
        cr_assert_eq(r.p.L, 2);
        cr_assert_eq(r.p.E, 2);
        cr_assert_eq(r.p.S, 2, "key defaults to query");
        cr_assert_eq(r.batched, 0);
        for (int j = 0; j < 4; j++)
            cr_assert_eq(r.p.query[j], want[j], "form %d element %d: %g", i + 1, j,
                         (double)r.p.query[j]);
        cr_assert_eq(r.p.key, r.p.query);
        cr_assert_eq(r.p.value, r.p.query);
        codec_request_deinit(&r);
    }
}

Test(codec, batched_cross_attention_with_all_options)
{
    const char *body =
        "{\"query\": [[[1,2,3,4]],[[5,6,7,8]]], \"key\": {\"shape\": [2,3,2], \"data\": "
        "[1,2,3,4,5,6,7,8,9,10,11,12]}, \"value\": [[[1],[2],[3]],[[4],[5],[6]]],"
        "\"num_heads\": 2, \"weights\": {\"k_proj_weight\": {\"shape\": [4,2], \"data\": "
        "[1,0,0,1,1,1,0,0]}, \"v_proj_weight\": [[1],[2],[3],[4]], \"out_proj_bias\": "
        "[0,0,0,1]}, \"attn_mask\": [[true, false, false]], \"key_padding_mask\": "
        "[[false,false,true],[false,true,false]], \"need_weights\": true, "
        "\"average_attn_weights\": true, \"scale\": 0.5, \"positional_encoding\": "
        "\"sinusoidal\", \"output_encoding\": \"base64\", \"tokens\": [\"a\"], "
        "\"key_tokens\": [\"x\",\"y\",\"z\"]}";
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codect_decode(&r, body, &e), 0, "%s", e.msg);
    const struct att_params *p = &r.p;
    cr_assert(r.batched);
    cr_assert_eq(p->N, 2);
    cr_assert_eq(p->L, 1);
    cr_assert_eq(p->S, 3);
    cr_assert_eq(p->E, 4);
    cr_assert_eq(p->kdim, 2);
    cr_assert_eq(p->vdim, 1);
    cr_assert_eq(p->key[11], 12.0f);
    cr_assert_eq(p->w[ATT_W_V][3], 4.0f);
    cr_assert_eq(p->w[ATT_W_OUT_BIAS][3], 1.0f);
    cr_assert_null(p->w[ATT_W_IN]);
    cr_assert_eq(p->mask_kind, ATT_MASK_BOOL);
    cr_assert_eq(p->mask_ndim, 2);
    cr_assert_eq(p->bool_mask[0], 1);
    cr_assert_eq(p->key_padding_mask[2], 1);
    cr_assert_eq(p->key_padding_mask[4], 1);
    cr_assert_eq(p->weights_mode, ATT_WEIGHTS_AVERAGE);
    cr_assert(p->has_scale && p->scale == 0.5f);
    cr_assert(p->positional_encoding);
    cr_assert(r.base64_out);
    cr_assert_str_eq(r.tokens_json, "[\"a\"]");
    cr_assert_str_eq(r.key_tokens_json, "[\"x\",\"y\",\"z\"]");
    codec_request_deinit(&r);
}

Test(codec, float_mask_and_causal_and_defaults)
{
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codect_decode(&r, "{\"query\": [[1],[2]], \"num_heads\": 1, \"attn_mask\": "
                            "[[0, -1.5],[2, 0]], \"need_weights\": false}", &e), 0, "%s", e.msg);
    cr_assert_eq(r.p.mask_kind, ATT_MASK_FLOAT);
    cr_assert_eq(r.p.float_mask[1], -1.5f);
    cr_assert_eq(r.p.weights_mode, ATT_WEIGHTS_NONE);
    codec_request_deinit(&r);
    cr_assert_eq(codect_decode(&r, "{\"query\": [[1],[2]], \"num_heads\": 1, \"attn_mask\": "
                            "\"causal\"}", &e), 0, "%s", e.msg);
    cr_assert_eq(r.p.mask_kind, ATT_MASK_CAUSAL);
    cr_assert_eq(r.p.weights_mode, ATT_WEIGHTS_PER_HEAD, "need_weights defaults to true");
    cr_assert_eq(r.p.has_scale, 0);
    cr_assert_eq(r.base64_out, 0);
    codec_request_deinit(&r);
}

/* Every file in tests/cases/ gives its status and slug, with a message
 * that contains the stated text. */
Test(codec, invalid_requests_from_tests_cases, .timeout = 30)
{
    char *paths[128];
    int ncases = fixture_list("tests/cases", paths, 128);
    int n = 0, failed = 0;
    for (int k = 0; k < ncases; k++) {
        const char *path = paths[k];
        json_error_t je;
        json_t *c = json_load_file(path, JSON_ALLOW_NUL, &je);
        cr_assert_not_null(c, "%s: %s", path, je.text);
        size_t blen;
        char *body = testdata_body(c, &blen);
        const char *code = json_string_value(json_object_get(c, "code"));
        const char *want = json_string_value(json_object_get(c, "message_contains"));
        int status = (int)json_integer_value(json_object_get(c, "status"));
        struct codec_request r;
        struct failure e = {0};
        struct codec_limits lim = test_limits();
        int rc = codec_decode_request(&r, body, blen, &lim, NULL, &e);
        const char *stage = json_string_value(json_object_get(c, "stage"));
        if (stage && strcmp(stage, "compute") == 0) {
            /* well formed: the codec must accept it (the HTTP test checks
             * the computation's refusal) */
            if (rc != 0) {
                fprintf(stderr, "%s: decoding failed: %s\n", path, e.msg);
                failed++;
            }
        } else if (rc == 0 || strcmp(http_error_slug(e.code), code) != 0 ||
            http_error_status(e.code) != status || !strstr(e.msg, want)) {
            fprintf(stderr, "%s: got %s %d '%s', want %s %d containing '%s'\n", path,
                    rc ? http_error_slug(e.code) : "success", rc ? http_error_status(e.code) : 200,
                    rc ? e.msg : "", code, status, want);
            failed++;
        }
        codec_request_deinit(&r);
        free(body);
        free(paths[k]);
        json_decref(c);
        n++;
    }
    cr_assert(n > 0 && n == testdata_count("tests/cases"),
              "went through %d of the %d cases in tests/cases", n, testdata_count("tests/cases"));
    cr_assert_eq(failed, 0, "%d of %d invalid-request cases answered wrongly", failed, n);
}

Test(codec, response_json_is_shortest_and_round_trips)
{
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codect_decode(&r, "{\"query\": [[1,2]], \"num_heads\": 1}", &e), 0, "%s", e.msg);
    const float out[2] = {0.1f, -3.4028235e38f};
    const float w[1] = {1.0f};
    size_t len;
    char *s = codec_encode_response(&r, out, w, &len);
    cr_assert_not_null(s);
    cr_assert_eq(strlen(s), len);
    cr_assert(strstr(s, "\"output\":[[0.1,-3.4028235e38]]"), "%s", s);
    cr_assert(strstr(s, "\"attention_weights\":[[[1]]]"), "%s", s);
    cr_assert(strstr(s, "\"num_heads\":1,\"head_dim\":2,\"embed_dim\":2,\"target_len\":1,"
                        "\"source_len\":1,\"batch\":1"), "%s", s);
    json_t *j = json_loads(s, 0, NULL);
    cr_assert_not_null(j, "response is not JSON: %s", s);
    json_decref(j);
    free(s);
    codec_request_deinit(&r);

    /* random floats, and one whose shortest decimal does not survive a
     * double ("7.038531e-26" reads back as 0x15ae43fe through one): what is
     * written reads back as the same float32, directly and through a
     * double */
    unsigned long long st = 12345;
    for (int i = 0; i < 20000; i++) {
        uint32_t bits = i == 0 ? 0x15ae43fdu : (uint32_t)check_xorshift(&st);
        float f;
        memcpy(&f, &bits, 4);
        if (!isfinite(f))
            continue;
        cr_assert_eq(codect_decode(&r, "{\"query\": [[1]], \"num_heads\": 1, \"need_weights\": "
                                "false}", &e), 0);
        s = codec_encode_response(&r, &f, NULL, &len);
        float back = strtof(strstr(s, "[[") + 2, NULL);
        float via_double = (float)strtod(strstr(s, "[[") + 2, NULL);
        cr_assert(memcmp(&back, &f, 4) == 0 && memcmp(&via_double, &f, 4) == 0,
                  "%a written as %s reads back as %a, through a double %a", (double)f, s,
                  (double)back, (double)via_double);
        free(s);
        codec_request_deinit(&r);
    }
}

Test(codec, base64_output_round_trips)
{
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codect_decode(&r, "{\"query\": [[1,2,3]], \"num_heads\": 1, \"output_encoding\": "
                            "\"base64\", \"need_weights\": false}", &e), 0, "%s", e.msg);
    const float out[3] = {0.5f, -1.25f, 3.0f};
    size_t len;
    char *s = codec_encode_response(&r, out, NULL, &len);
    cr_assert(strstr(s, "{\"output\":{\"shape\":[1,3],\"dtype\":\"float32\",\"b64\":"
                        "\"AAAAPwAAoL8AAEBA\"}"), "%s", s);
    cr_assert_null(strstr(s, "attention_weights"));
    free(s);
    codec_request_deinit(&r);

    unsigned char bytes[7] = {0, 1, 2, 250, 251, 252, 255}, back[8];
    char enc[16];
    for (size_t n = 0; n <= 7; n++) {
        size_t m = base64_encode(enc, bytes, n), bad;
        cr_assert_eq(m % 4, 0);
        cr_assert_eq(base64_decode(back, enc, m, &bad), (long long)n);
        cr_assert(memcmp(back, bytes, n) == 0);
    }
    size_t bad;
    cr_assert_eq(base64_decode(back, "AB=C", 4, &bad), -1);
    cr_assert_eq(base64_decode(back, "ABC", 3, &bad), -1);
}

Test(codec, error_body_names_slug_and_message)
{
    size_t len;
    char *s = codec_error_body(ERR_SHAPE_MISMATCH, "query \"x\" is wrong", &len);
    cr_assert_str_eq(s, "{\"error\":{\"code\":\"shape_mismatch\",\"message\":"
                        "\"query \\\"x\\\" is wrong\"}}");
    free(s);
}

Test(codec, escaped_base64_is_read_as_jansson_reads_it)
{
    /* "\/" is JSON for "/": the fast decoder leaves escapes to jansson. */
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codect_decode(&r, "{\"query\": {\"shape\": [1, 1], \"dtype\": \"float32\", \"b64\": "
                            "\"AAD\\/Pw==\"}, \"num_heads\": 1}", &e), 0, "%s", e.msg);
    cr_assert_eq(r.p.query[0], 1.9921875f);
    codec_request_deinit(&r);
    cr_assert_eq(codect_decode(&r, "{\"query\": {\"shape\": [1, 1], \"dtype\": \"float32\", \"b64\": "
                            "\"AAD\\u0041Pw==\"}, \"num_heads\": 1}", &e), 0, "%s", e.msg);
    cr_assert_eq(r.p.query[0], 1.5f, "\\u0041 is 'A': AADAPw== is 1.5");
    codec_request_deinit(&r);
}

/* ---------------------------------------------------------------------- */
/* Numbers at the edges: integers beyond long long, numbers beyond double,
 * integer fields, and -inf in float masks.                              */

static float first_query_value(const char *body, struct failure *e, int *rc)
{
    struct codec_request r;
    struct codec_limits lim = test_limits();
    *rc = codec_decode_request(&r, body, strlen(body), &lim, NULL, e);
    float v = *rc == 0 ? r.p.query[0] : NAN;
    codec_request_deinit(&r);
    const char *diff = codec_compare_paths(body, strlen(body), &lim);
    cr_expect_null(diff, "fast decoder and reference differ (%s) on %s", diff, body);
    return v;
}

Test(codec, any_json_number_is_a_tensor_value)
{
    /* JavaScript's JSON.stringify(1e20) is "100000000000000000000", beyond
     * long long, which jansson refuses; every form reads it as 1e20. */
    const char *ok[] = {
        "{\"query\": [[100000000000000000000]], \"num_heads\": 1}",
        "{\"query\": {\"shape\": [1, 1], \"data\": [100000000000000000000]}, \"num_heads\": 1}",
        "{\"query\": [[100000000000000000000.0]], \"num_heads\": 1}",
        "{\"query\": [[1e20]], \"num_heads\": 1}",
        "{\"num_heads\": 1, \"query\": [[100000000000000000000]], \"tokens\": [\"a\"]}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct failure e;
        int rc;
        float v = first_query_value(ok[i], &e, &rc);
        cr_expect_eq(rc, 0, "%s: %s", ok[i], e.msg);
        cr_expect_eq(v, 1e20f, "%s: %g", ok[i], (double)v);
    }
    struct failure e;
    int rc;
    float v = first_query_value("{\"query\": [[-123456789012345678901234567890]], "
                                "\"num_heads\": 1}", &e, &rc);
    cr_expect(rc == 0 && v == (float)strtod("-123456789012345678901234567890", NULL),
              "%d %s %g", rc, e.msg, (double)v);
    /* beyond float32: refused as a tensor value, wherever it is written */
    const char *range[] = {
        "{\"query\": [[1e400]], \"num_heads\": 1}",
        "{\"query\": [[-1e400]], \"num_heads\": 1}",
        "{\"query\": [[1e39]], \"num_heads\": 1}",
        "{\"query\": [[1000000000000000000000000000000000000000]], \"num_heads\": 1}",
        "{\"query\": {\"shape\": [1, 1], \"data\": [1e400]}, \"num_heads\": 1}",
        "{\"query\": [[1]], \"num_heads\": 1, \"weights\": {\"out_proj_bias\": [1e999]}}",
    };
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++) {
        first_query_value(range[i], &e, &rc);
        cr_expect(rc != 0 && e.code == ERR_INVALID_TENSOR && strstr(e.msg, "out of float32"),
                  "%s: %d %s", range[i], rc, e.msg);
    }
}

Test(codec, integer_fields_stay_integers)
{
    const struct { const char *body; int code; const char *msg; } cases[] = {
        {"{\"query\": [[1, 2]], \"num_heads\": 2.0}", ERR_INVALID_PARAMETER, "must be an integer"},
        {"{\"query\": [[1, 2]], \"num_heads\": 2e0}", ERR_INVALID_PARAMETER, "must be an integer"},
        {"{\"query\": [[1, 2]], \"num_heads\": 100000000000000000000}", ERR_PAYLOAD_TOO_LARGE,
         "num_heads is beyond 2^63"},
        {"{\"query\": [[1, 2]], \"num_heads\": 1e400}", ERR_PAYLOAD_TOO_LARGE, "beyond 2^63"},
        {"{\"query\": [[1, 2]], \"num_heads\": -100000000000000000000}", ERR_INVALID_PARAMETER,
         "must be an integer >= 1"},
        {"{\"query\": {\"shape\": [1, 2.0], \"data\": [1, 2]}, \"num_heads\": 1}",
         ERR_INVALID_TENSOR, "query.shape[1] is not an integer"},
        {"{\"query\": {\"shape\": [1, 100000000000000000000], \"data\": [1]}, \"num_heads\": 1}",
         ERR_PAYLOAD_TOO_LARGE, "query.shape[1] is beyond 2^63"},
        {"{\"query\": {\"shape\": [-100000000000000000000, 1], \"data\": [1]}, \"num_heads\": 1}",
         ERR_INVALID_TENSOR, "dimension 0 is below -2^63"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct failure e;
        int rc;
        first_query_value(cases[i].body, &e, &rc);
        cr_expect(rc != 0 && e.code == cases[i].code && strstr(e.msg, cases[i].msg),
                  "%s: %d %s %s", cases[i].body, rc, http_error_slug(e.code), e.msg);
    }
}

/* -inf blocks in a float mask, written as "-inf", "-Infinity" or the IEEE
 * bits in base64, mixed with numbers; nowhere else. */
Test(codec, neg_inf_in_float_masks_in_every_form)
{
    /* [[0, -inf], [0.5, -inf]]: 0, -inf, 0.5, -inf as float32 */
    const char *masks[] = {
        "[[0, \"-inf\"], [0.5, \"-Infinity\"]]",
        "[[0, \"-\\u0069nf\"], [0.5, \"-inf\"]]", /* escaped: the reference path */
        "{\"shape\": [2, 2], \"data\": [0, \"-inf\", 0.5, \"-inf\"]}",
        "{\"shape\": [2, 2], \"dtype\": \"float32\", \"b64\": \"AAAAAAAAgP8AAAA/AACA/w==\"}",
    };
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"query\": [[1], [2]], \"num_heads\": 1, \"attn_mask\": %s}",
                 masks[i]);
        struct codec_request r;
        struct failure e;
        cr_assert_eq(codect_decode(&r, body, &e), 0, "%s: %s", body, e.msg);
        cr_expect_eq(r.p.mask_kind, ATT_MASK_FLOAT);
        const float want[4] = {0.0f, -INFINITY, 0.5f, -INFINITY};
        for (int j = 0; j < 4; j++)
            cr_expect_eq(r.p.float_mask[j], want[j], "%s: element %d is %g", masks[i], j,
                         (double)r.p.float_mask[j]);
        codec_request_deinit(&r);
        struct codec_limits lim = test_limits();
        const char *diff = codec_compare_paths(body, strlen(body), &lim);
        cr_expect_null(diff, "%s: %s", masks[i], diff);
    }
}

/* tokens label the L query positions and key_tokens the S key positions,
 * one each, the same for every batch item: any other count is refused, on
 * both decoders and for large bodies. */
Test(codec, tokens_have_exactly_L_and_S_entries)
{
    struct codec_limits lim = test_limits();
    const struct { const char *body; const char *msg; } bad[] = {
        {"{\"query\": [[1], [2]], \"num_heads\": 1, \"tokens\": [\"a\"]}",
         "tokens has 1 entries but query has L = 2"},
        {"{\"query\": [[1], [2]], \"num_heads\": 1, \"tokens\": [\"a\", \"b\", \"c\"]}",
         "tokens has 3 entries but query has L = 2"},
        {"{\"query\": [[1], [2]], \"key\": [[1]], \"value\": [[1]], \"num_heads\": 1, "
         "\"key_tokens\": [\"x\", \"y\"]}", "key_tokens has 2 entries but the keys have S = 1"},
        {"{\"query\": [[[1], [2]], [[3], [4]]], \"num_heads\": 1, \"tokens\": [\"a\", \"b\", "
         "\"c\", \"d\"]}", "tokens has 4 entries but query has L = 2"},
        {"{\"query\": [[1]], \"num_heads\": 1, \"tokens\": []}", "tokens has 0 entries"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int large = 0; large < 2; large++) {
            const size_t n = strlen(bad[i].body), pad = large ? CODEC_FAST_ERRORS_FROM : 0;
            char *b = malloc(pad + n);
            memset(b, ' ', pad);
            memcpy(b + pad, bad[i].body, n);
            struct codec_request r;
            struct failure e;
            int rc = codec_decode_request(&r, b, pad + n, &lim, NULL, &e);
            cr_expect(rc != 0 && e.code == ERR_INVALID_PARAMETER && strstr(e.msg, bad[i].msg),
                      "%s (%s): %d %s", bad[i].body, large ? "large" : "small", rc, e.msg);
            cr_expect_eq(r.path, large ? CODEC_PATH_FAST : CODEC_PATH_JANSSON);
            codec_request_deinit(&r);
            free(b);
        }
        const char *diff = codec_compare_paths(bad[i].body, strlen(bad[i].body), &lim);
        cr_expect_null(diff, "%s: %s", bad[i].body, diff);
    }
    const char *ok = "{\"query\": [[[1], [2]], [[3], [4]]], \"key\": [[[1]], [[2]]], "
                     "\"num_heads\": 1, \"tokens\": [\"a\", \"b\"], \"key_tokens\": [\"x\"]}";
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codec_decode_request(&r, ok, strlen(ok), &lim, NULL, &e), 0, "%s", e.msg);
    cr_expect_str_eq(r.tokens_json, "[\"a\",\"b\"]");
    codec_request_deinit(&r);
}

/* A body cannot forge the fast decoder's placeholder for a tensor: the key
 * it uses, written with an escape, is an unknown field of a tensor. */
Test(codec, a_placeholder_key_in_the_body_is_an_unknown_field)
{
    struct codec_limits lim = test_limits();
    const char *tail = "{\"key\": [[5]], \"query\": {\"\\u0001tensor\": 0}, \"num_heads\": 1}";
    for (int large = 0; large < 2; large++) {
        const size_t n = strlen(tail), pad = large ? CODEC_FAST_ERRORS_FROM : 0;
        char *b = malloc(pad + n);
        memset(b, ' ', pad);
        memcpy(b + pad, tail, n);
        struct codec_request r;
        struct failure e;
        int rc = codec_decode_request(&r, b, pad + n, &lim, NULL, &e);
        cr_expect(rc != 0 && e.code == ERR_INVALID_TENSOR && strstr(e.msg, "unknown field"),
                  "%s: %d %s", large ? "large" : "small", rc, e.msg);
        codec_request_deinit(&r);
        free(b);
    }
}

/* tensor_check's scan: every non-finite bit pattern class at every place of
 * tensors as long as a few vector blocks, against isfinite() per element. */
Test(codec, tensor_check_finds_the_first_non_finite_at_any_place)
{
    const uint32_t specials[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                 0x7f800001u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u,
                                 0x80000000u};
    float x[70];
    for (size_t n = 1; n <= 70; n++) {
        for (size_t at = 0; at < n; at++) {
            for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
                for (size_t i = 0; i < n; i++)
                    x[i] = (float)i - 30.5f;
                memcpy(&x[at], &specials[k], 4);
                struct tensor t = {.f = x, .count = n, .ndim = 1, .shape = {(long long)n}};
                struct failure e;
                const int fin = isfinite(x[at]), neg_inf = x[at] == -INFINITY;
                cr_assert_eq(tensor_check(&t, TENSOR_FLOAT, "q", &e), fin ? 0 : -1,
                             "n=%zu at=%zu bits %08x", n, at, specials[k]);
                char want[64];
                snprintf(want, sizeof want, "q element %zu ", at);
                if (!fin)
                    cr_assert(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
                cr_assert_eq(tensor_check(&t, TENSOR_MASK, "m", &e), fin || neg_inf ? 0 : -1,
                             "mask n=%zu at=%zu bits %08x", n, at, specials[k]);
            }
        }
    }
}

/* A "b64" after its "shape" and "dtype" is decoded as its length says, which
 * also finds its end: every string around that length, with a quote, an
 * escape or a bad byte inside, is answered as the reference answers it. */
Test(codec, b64_read_at_its_known_length_fails_as_the_reference)
{
    struct codec_limits lim = test_limits();
    const char *good = "AAAAPwAAoL8AAEBAbxKDOg=="; /* 4 floats */
    const char *tails[] = {"", "AAAA", "==", "\\u0041", "\\"};
    for (size_t cut = 0; cut <= strlen(good); cut++) {
        for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
            for (int poke = -1; poke < (int)cut; poke++) {
                char b64[64], body[256];
                snprintf(b64, sizeof b64, "%.*s%s", (int)cut, good, tails[t]);
                if (poke >= 0)
                    b64[poke] = poke % 2 ? '"' : '*';
                const int n = snprintf(body, sizeof body, "{\"query\": {\"shape\": [2, 2], "
                                       "\"dtype\": \"float32\", \"b64\": \"%s\"}, "
                                       "\"num_heads\": 1}", b64);
                const char *d = codec_compare_paths(body, (size_t)n, &lim);
                cr_assert_null(d, "%s: %s", body, d);
            }
        }
    }
}
