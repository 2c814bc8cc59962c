/* test_service.c -- the POST /attention job without HTTP: decode, compute,
 * encode, stage timings and metrics, through service_attention(). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "api/metrics.h"
#include "api/service.h"
#include "tests/support/limits.h"
#include "codec/status.h"
#include "codec/request.h"
#include "codec/response.h"

static void run(const char *body, struct route_response *a)
{
    const struct codec_limits lim = test_limits();
    const double now = service_now();
    /* 300 ms upload, 200 ms queue */
    const struct service_times t = {.first_byte = now - 0.5, .body_done = now - 0.2};
    service_attention(&lim, body, strlen(body), &t, NULL, NULL, a);
}

/* The whole answer: the buffer, or everything the reader gives. */
static char *answer_text(const struct route_response *a)
{
    char *s = malloc(a->len + 1);
    if (a->body) {
        memcpy(s, a->body, a->len);
    } else {
        cr_assert_not_null(a->read);
        size_t pos = 0, k;
        while ((k = a->read(a->reader, pos, s + pos, 1000)) > 0)
            pos += k;
        cr_assert_eq(pos, a->len);
    }
    s[a->len] = '\0';
    return s;
}

static const char *body_ok = "{\"query\": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]], "
                             "\"num_heads\": 2, \"attn_mask\": \"causal\"}";

Test(service, answers_what_the_codec_and_core_compute)
{
    struct route_response a;
    run(body_ok, &a);
    cr_assert_eq(a.status, 200);
    char *got = answer_text(&a);

    /* the same steps by hand */
    const struct codec_limits lim = test_limits();
    struct codec_request r;
    struct failure e;
    cr_assert_eq(codec_decode_request(&r, body_ok, strlen(body_ok), &lim, NULL, &e), 0);
    float *out = malloc(r.out_len * 4), *w = malloc(r.weights_len * 4);
    cr_assert_eq(att_forward(out, w, &r.p, NULL), ATT_OK);
    size_t len;
    char *want = codec_encode_response(&r, out, w, &len);
    cr_assert_str_eq(got, want);
    cr_assert(strstr(got, "[0.33023846,0.66976154,0]"), "%s", got);
    free(want), free(out), free(w), free(got);
    codec_request_deinit(&r);
    route_response_free(&a);
}

Test(service, base64_answers_come_from_a_reader)
{
    struct route_response a, b;
    run("{\"query\": [[1, 2], [3, 4]], \"num_heads\": 1, \"output_encoding\": \"base64\"}", &a);
    run("{\"query\": [[1, 2], [3, 4]], \"num_heads\": 1}", &b);
    cr_assert_eq(a.status, 200);
    cr_assert_null(a.body, "a base64 answer is encoded as it is read");
    char *s = answer_text(&a), *t = answer_text(&b);
    json_t *x = json_loads(s, 0, NULL), *y = json_loads(t, 0, NULL);
    cr_assert_not_null(x, "%s", s);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(x, "output"), "dtype")),
                     "float32");
    cr_assert(json_equal(json_object_get(x, "num_heads"), json_object_get(y, "num_heads")));
    json_decref(x), json_decref(y);
    free(s), free(t);
    route_response_free(&a);
    route_response_free(&b);
    cr_assert_null(a.reader);
}

static void expect_error(const char *body, int status, const char *slug, const char *words)
{
    struct route_response a;
    run(body, &a);
    cr_assert_eq(a.status, status, "%s: %d", body, a.status);
    json_t *j = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(j, "%.*s", (int)a.len, a.body);
    json_t *err = json_object_get(j, "error");
    cr_assert_str_eq(json_string_value(json_object_get(err, "code")), slug);
    cr_assert(strstr(json_string_value(json_object_get(err, "message")), words), "%s",
              json_string_value(json_object_get(err, "message")));
    const char *timing = route_header_get(&a, "Server-Timing");
    cr_assert(timing && strstr(timing, "decode;dur="), "%s", timing ? timing : "(none)");
    json_decref(j);
    route_response_free(&a);
}

Test(service, refusals_are_json_errors_from_the_one_table)
{
    expect_error("{\"query\": [[1, 2]", 400, "invalid_json", "invalid JSON");
    expect_error("{\"query\": [[1, 2, 3]], \"num_heads\": 2}", 400, "invalid_parameter",
                 "not divisible");
    /* well formed, but the core finds the result overflows float32 */
    expect_error("{\"query\": [[1e20]], \"key\": [[1e20]], \"value\": [[1]], \"num_heads\": 1, "
                 "\"scale\": 1e10}", 400, "invalid_parameter", "overflows float32");
}

/* Server-Timing: the five stages in order; the upload and the wait come
 * from the times the HTTP layer gives. */
Test(service, timing_names_five_stages_in_order)
{
    struct route_response a;
    run(body_ok, &a);
    const char *names[] = {"receive;dur=", "queue;dur=", "decode;dur=", "compute;dur=",
                           "encode;dur="};
    const char *timing = route_header_get(&a, "Server-Timing");
    cr_assert_not_null(timing);
    const char *at = timing;
    double v[5];
    for (int i = 0; i < 5; i++) {
        const char *p = strstr(at, names[i]);
        cr_assert_not_null(p, "%s missing or out of order in '%s'", names[i], timing);
        v[i] = strtod(p + strlen(names[i]), NULL);
        at = p + 1;
    }
    cr_assert(v[0] > 299 && v[0] < 301, "receive %g ms, want 300", v[0]);
    cr_assert(v[1] >= 200 && v[1] < 1000, "queue %g ms, want about 200", v[1]);
    route_response_free(&a);
}

static double metric(const char *name)
{
    size_t len;
    const struct metrics_gauges g = {0, 0, 1, 0, 0, 0, 0};
    char *m = metrics_write(&g, &len);
    const char *p = strstr(m, name);
    double v = p ? strtod(p + strlen(name), NULL) : -1;
    free(m);
    return v;
}

Test(service, stages_are_counted_in_the_metrics)
{
    const double before = metric("attention_stage_seconds_total{stage=\"receive\"} ");
    const double jobs = metric("attention_stage_duration_seconds_count{stage=\"receive\"} ");
    struct route_response a;
    run(body_ok, &a);
    route_response_free(&a);
    cr_assert_geq(metric("attention_stage_seconds_total{stage=\"receive\"} "), before + 0.299);
    cr_assert_eq(metric("attention_stage_duration_seconds_count{stage=\"receive\"} "),
                 jobs + 1);
    cr_assert_geq(metric("attention_stage_duration_seconds_bucket{stage=\"receive\",le=\"+Inf\"} "),
                  1);
}

/* An error message may quote bytes a client sent, or be cut inside a
 * character: the body is still JSON (UTF-8), with U+FFFD for each bad byte. */
Test(service, error_bodies_are_valid_json_whatever_the_message)
{
    const char *msgs[] = {"no file at /\xff.js", "cut in a character: \xc3",
                          "overlong \xc0\xaf and surrogate \xed\xa0\x80", "fine: \xc3\xa9"};
    const char *want[] = {"no file at /\xef\xbf\xbd.js", "cut in a character: \xef\xbf\xbd",
                          "overlong \xef\xbf\xbd\xef\xbf\xbd and surrogate "
                          "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", "fine: \xc3\xa9"};
    for (int i = 0; i < 4; i++) {
        size_t len;
        char *body = codec_error_body(ERR_NOT_FOUND, msgs[i], &len);
        cr_assert_not_null(body, "message %d", i);
        json_t *j = json_loadb(body, len, 0, NULL);
        cr_assert_not_null(j, "%s", body);
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"),
                                                           "message")), want[i]);
        json_decref(j);
        free(body);
    }
    /* through the service: jansson quotes the raw bytes of a bad key */
    struct route_response a;
    run("{\"q\\\xd9\x90\": 1}", &a);
    cr_assert_eq(a.status, 400, "%d %.*s", a.status, (int)a.len, a.body ? a.body : "");
    route_response_free(&a);
}
