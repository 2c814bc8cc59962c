/* test_sequence_limits.c -- sequences' refusals and limits over HTTP:
 * every refusal with its status and slug; max_sequences, eviction,
 * max_sequence_bytes and the idle timeout; a refused step leaves the
 * sequence as it was; restarts and many short sequences. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

#include "tests/server/sequence_shared.h"

#define REPO "tests/models/repo"

/* body with `field` set to `value` (taken) is refused: 400
 * invalid_parameter, the message containing `msg`. */
static void expect_refused(int port, json_t *body, const char *field, json_t *value, const char *msg)
{
    json_object_set_new(body, field, value);
    struct http_reply a = seqt_attention(port, body);
    expect_error(&a, 400, "invalid_parameter", msg);
    free(a.body);
}

Test(sequence_limits, every_refusal_has_its_status_and_slug)
{
    struct server s;
    const char *const flags[] = {"--model-repository", REPO, "--max-source-len", "4", NULL};
    server_start_ready(&s, flags);
    struct http_reply a;

    /* never started: its own slug, the id named, and what to do */
    a = seqt_attention(s.port, seqt_tiny_step("nobody-9", 0));
    expect_error(&a, 400, "sequence_not_found", "'nobody-9'");
    cr_assert(strstr(a.body, "start it again"), "%s", a.body);
    free(a.body);

    a = seqt_attention(s.port, seqt_tiny_step("e1", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* inside a sequence: query_position_offset, positional_encoding */
    expect_refused(s.port, seqt_tiny_step("e1", 0), "query_position_offset", json_integer(3),
                   "query_position_offset cannot be given");
    expect_refused(s.port, seqt_tiny_step("e1", 0), "positional_encoding", json_string("sinusoidal"),
                   "positional_encoding cannot be used");
    /* N = 1; S >= L */
    float x[2 * 2 * E];
    seqt_fill(x, sizeof x / sizeof *x);
    json_t *b = json_pack("{s:[o, o], s:i, s:s}", "query", seqt_mat(x, 2, E), seqt_mat(x + 2 * E, 2, E),
                  "num_heads", H, "sequence_id", "e1");
    a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "N = 1");
    free(a.body);
    b = json_pack("{s:o, s:o, s:i, s:s}", "query", seqt_mat(x, 2, E), "key", seqt_mat(x, 1, E),
                  "num_heads", H, "sequence_id", "e1");
    a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "S >= L");
    free(a.body);
    /* what the start fixed: num_heads, the model, the weights */
    expect_refused(s.port, seqt_tiny_step("e1", 0), "num_heads", json_integer(1),
                   "num_heads differs");
    expect_refused(s.port, seqt_tiny_step("e1", 0), "weights",
                   json_pack("{s:o}", "out_proj_weight", seqt_mat(x, E, E)), "the weights differ");
    float q16[16]; /* mha_f32: E 16 */
    seqt_fill(q16, 16);
    b = json_pack("{s:o, s:s, s:s}", "query", seqt_mat(q16, 1, 16), "model", "mha_f32",
                  "sequence_id", "e1");
    a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "belongs to model 'attention'");
    free(a.body);
    /* kv_cache_dtype: a sequence's only; one of three */
    expect_refused(s.port, seqt_tiny_step(NULL, 0), "kv_cache_dtype", json_string("FP16"),
                   "kv_cache_dtype applies to a sequence only");
    expect_refused(s.port, seqt_tiny_step("e2", 1), "kv_cache_dtype", json_string("FP8"),
                   "kv_cache_dtype must be");
    /* sequence_start without an id */
    b = seqt_tiny_step(NULL, 1);
    a = seqt_attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "sequence_start needs a sequence_id");
    free(a.body);
    /* the cap: max_source_len (4) tokens in all */
    for (int i = 0; i < 3; i++) { /* e1 holds 1 + 3 */
        a = seqt_attention(s.port, seqt_tiny_step("e1", 0));
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    a = seqt_attention(s.port, seqt_tiny_step("e1", 0));
    expect_error(&a, 400, "invalid_parameter", "max_source_len");
    free(a.body);
    /* none of these refusals lost anything: e1 still holds 4 rows */
    b = json_pack("{s:s, s:b}", "sequence_id", "e1", "sequence_end", 1);
    a = seqt_attention(s.port, b); /* ended without a step */
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = seqt_attention(s.port, seqt_tiny_step("e1", 0));
    expect_error(&a, 400, "sequence_not_found", "'e1'");
    free(a.body);
    b = json_pack("{s:s, s:b}", "sequence_id", "e1", "sequence_end", 1);
    a = seqt_attention(s.port, b); /* nothing to end */
    expect_error(&a, 400, "sequence_not_found", "'e1'");
    free(a.body);
    /* a start whose step is refused leaves no sequence */
    b = seqt_tiny_step("e3", 1);
    json_object_set_new(b, "key", seqt_mat(x, 1, E + 1));
    a = seqt_attention(s.port, b);
    cr_assert_eq(a.status, 400, "%s", a.body);
    free(a.body);
    a = seqt_attention(s.port, seqt_tiny_step("e3", 0));
    expect_error(&a, 400, "sequence_not_found", "'e3'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Limits                                                                  */

Test(sequence_limits, max_sequences_evicts_the_least_recently_used_idle_one)
{
    struct server s;
    const char *const flags[] = {"--max-sequences", "2", NULL};
    server_start(&s, flags);
    const char *ids[] = {"lru-a", "lru-b"};
    for (int i = 0; i < 2; i++) {
        struct http_reply a = seqt_attention(s.port, seqt_tiny_step(ids[i], 1));
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    struct http_reply a = seqt_attention(s.port, seqt_tiny_step("lru-a", 0)); /* b is now the oldest */
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
    a = seqt_attention(s.port, seqt_tiny_step("lru-c", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = seqt_attention(s.port, seqt_tiny_step("lru-b", 0));
    expect_error(&a, 400, "sequence_not_found", "'lru-b'");
    free(a.body);
    a = seqt_attention(s.port, seqt_tiny_step("lru-a", 0));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 3);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
    cr_assert_gt(server_metric(s.port, "attention_sequence_bytes"), 0);
    /* ending them gives everything back */
    for (int i = 0; i < 2; i++) {
        json_t *b = json_pack("{s:s, s:b}", "sequence_id", i ? "lru-c" : "lru-a",
                              "sequence_end", 1);
        a = seqt_attention(s.port, b);
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0);
    cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), 0);
    cr_assert_eq(server_stop(&s), 0);
}

/* A step of S rows 1 wide projected to E = 512 (one head): a block of the
 * cache (ATT_KV_BLOCK = 256 tokens) holds 256 · 512 · 2 · 4 bytes = 1 MiB
 * in FP32. */
#define WIDE 512

static json_t *wide_step(const char *id, int S, int start, const float *kw, const float *vw)
{
    float q[WIDE], kv[512];
    seqt_fill(q, WIDE);
    seqt_fill(kv, (size_t)S);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", seqt_mat(q, 1, WIDE), "key",
                          seqt_mat(kv, S, 1), "value", seqt_mat(kv, S, 1), "num_heads", 1, "sequence_id",
                          id, "need_weights", 0);
    json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "k_proj_weight",
                                                seqt_mat(kw, WIDE, 1), "v_proj_weight",
                                                seqt_mat(vw, WIDE, 1)));
    if (start)
        json_object_set_new(b, "sequence_start", json_true());
    return b;
}

Test(sequence_limits, max_sequence_bytes_refuses_what_cannot_fit_and_keeps_the_state)
{
    struct server s;
    /* one block and the two kept weights (2 x 512 floats) */
    const char *const flags[] = {"--max-sequence-bytes", "1028K", NULL};
    server_start(&s, flags);
    float kw[WIDE], vw[WIDE];
    seqt_fill(kw, WIDE);
    seqt_fill(vw, WIDE);
    struct http_reply a = seqt_attention(s.port, wide_step("big", 200, 1, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), (1 << 20) + 2 * WIDE * 4);
    /* a second block would make it pass the budget on its own: never */
    a = seqt_attention(s.port, wide_step("big", 100, 0, kw, vw));
    expect_error(&a, 413, "payload_too_large", "max_sequence_bytes");
    cr_assert(!header(&a, "Retry-After"), "a retry cannot help: %s", a.headers);
    free(a.body);
    /* the refused step was not applied: 56 rows still fit the block */
    a = seqt_attention(s.port, wide_step("big", 56, 0, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(seqt_int_of(&a, "cache_length"), 256);
    free(a.body);
    /* a new sequence evicts the idle one to make room */
    a = seqt_attention(s.port, wide_step("big-2", 10, 1, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = seqt_attention(s.port, wide_step("big", 1, 0, kw, vw));
    expect_error(&a, 400, "sequence_not_found", "'big'");
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sequence_limits, an_idle_sequence_times_out)
{
    struct server s;
    const char *const flags[] = {"--sequence-idle-timeout", "1", NULL};
    server_start(&s, flags);
    struct http_reply a = seqt_attention(s.port, seqt_tiny_step("sleepy", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    usleep(2500 * 1000); /* well past the 1 s timeout */
    a = seqt_attention(s.port, seqt_tiny_step("sleepy", 0));
    expect_error(&a, 400, "sequence_not_found", "'sleepy'");
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Restarts, and many short sequences                                      */

Test(sequence_limits, a_restart_loses_the_sequences)
{
    struct server s;
    server_start(&s, NULL);
    struct http_reply a = seqt_attention(s.port, seqt_tiny_step("before-restart", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
    server_start(&s, NULL);
    a = seqt_attention(s.port, seqt_tiny_step("before-restart", 0));
    expect_error(&a, 400, "sequence_not_found", "'before-restart'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* The server's resident set, in KiB (/proc). */
static long rss_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* Short sequences, one after another: start, steps, end. Each fills a
 * block of its cache: 4 steps of 64 key/value rows, 1 wide, projected to
 * 256 (the weights given at the start): 256 tokens x 256 x 2 x 4 bytes,
 * 512 KiB written, which a cache not freed would leave resident (200 MiB
 * over 400 sequences). */
static void short_sequences(int port, int from, int count)
{
    float w[256], q[256], kv[64];
    seqt_fill(w, 256);
    for (int i = from; i < from + count; i++) {
        char id[32];
        snprintf(id, sizeof id, "soak-%d", i);
        for (int k = 0; k < 4; k++) {
            seqt_fill(q, 256);
            seqt_fill(kv, 64);
            json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", seqt_mat(q, 1, 256),
                                  "key", seqt_mat(kv, 64, 1), "value", seqt_mat(kv, 64, 1), "num_heads",
                                  1, "sequence_id", id, "need_weights", 0);
            if (k == 0) {
                json_object_set_new(b, "sequence_start", json_true());
                json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "k_proj_weight",
                                                            seqt_mat(w, 256, 1), "v_proj_weight",
                                                            seqt_mat(w, 256, 1)));
            }
            if (k == 3)
                json_object_set_new(b, "sequence_end", json_true());
            struct http_reply a = seqt_attention(port, b);
            cr_assert_eq(a.status, 200, "%s step %d: %s", id, k, a.body);
            free(a.body);
        }
    }
}

Test(sequence_limits, many_short_sequences_give_everything_back)
{
    /* a sanitized server keeps freed memory in ASan's quarantine (256 MB by
     * default): keep it small, so that RSS shows what is held (ignored by a
     * server built without ASan) */
    char asan[512];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=1", was ? was : "", was ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
    struct server s;
    server_start(&s, NULL);
    short_sequences(s.port, 0, 50); /* warm up the allocator */
    const long before = rss_kib(s.pid);
    short_sequences(s.port, 50, 400);
    const long after = rss_kib(s.pid);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0);
    cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), 0);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 0);
    cr_assert_lt(after - before, 8 * 1024, "RSS grew from %ld to %ld KiB over 400 sequences",
                 before, after);
    cr_assert_eq(server_stop(&s), 0);
}
