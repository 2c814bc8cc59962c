/* test_sessions.c -- sequences (sessions, docs/sessions.md) end to end
 * over HTTP: every step equals the stateless answer on the whole history,
 * on both protocols, for the built-in model and a served one; sequences
 * interleaved stay apart; every refusal with its status and slug;
 * X-Sequence-Id; the limits, eviction and idle timeout; a refused step
 * leaves the sequence as it was. */
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

#define REPO "tests/models/repo"

/* ---------------------------------------------------------------------- */
/* Helpers                                                                 */

static unsigned seed = 12345;

static float rnd(void)
{
    seed = seed * 1103515245u + 12345u;
    return (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd();
}

/* (n, w) floats as nested JSON arrays. */
static json_t *mat(const float *x, int n, int w)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *r = json_array();
        for (int j = 0; j < w; j++)
            json_array_append_new(r, json_real(x[(size_t)i * w + j]));
        json_array_append_new(a, r);
    }
    return a;
}

/* A flat v2 input. */
static json_t *input(const char *name, const float *x, int n, int w)
{
    json_t *d = json_array();
    for (int i = 0; i < n * w; i++)
        json_array_append_new(d, json_real(x[i]));
    return json_pack("{s:s, s:s, s:[i, i], s:o}", "name", name, "datatype", "FP32", "shape", n,
                     w, "data", d);
}

/* POST body (taken) to path with extra headers (NULL-terminated or NULL). */
static struct http_reply send_json(int port, const char *path, json_t *body,
                                   const char *const *headers)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct http_reply a = request_with(port, "POST", path, text, strlen(text), NULL, 0, headers);
    free(text);
    return a;
}

static struct http_reply attention(int port, json_t *body)
{
    return send_json(port, "/attention", body, NULL);
}

/* The numbers of field name of an /attention answer into out (at most max). */
static size_t answer_floats(const struct http_reply *a, const char *name, float *out, size_t max)
{
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %s", a->body);
    size_t n = 0;
    flatten_into(json_object_get(j, name), out, &n, max);
    json_decref(j);
    return n;
}

static long long int_of(const struct http_reply *a, const char *name)
{
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %s", a->body);
    json_t *v = json_object_get(j, name);
    cr_assert(json_is_integer(v), "no integer %s in %s", name, a->body);
    const long long x = json_integer_value(v);
    json_decref(j);
    return x;
}

static void expect_close(const float *got, const float *want, size_t n, const char *what)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, fabs((double)got[i] - want[i]));
    cr_assert(max <= 2e-5, "%s: max |diff| %g over %zu values", what, max, n);
}

/* A server with the test models, ready. */
static void start_with_repo(struct server *s)
{
    const char *const flags[] = {"--model-repository", REPO, NULL};
    server_start_ready(s, flags);
}

/* ---------------------------------------------------------------------- */
/* The built-in model over POST /attention                                 */

#define E 4
#define H 2
#define MAXT 32

struct history {
    float k[MAXT * E], v[MAXT * E];
    int len;
};

/* One step of sequence id (weights given only at the start) and the
 * stateless request on the whole history: the same output, weights and
 * the cache length. */
static void step_and_compare(int port, const char *id, struct history *hs, int S, int L,
                             const float *w_in, const float *w_out, int start)
{
    float q[MAXT * E], out[MAXT * E], want[MAXT * E];
    float wts[H * MAXT * MAXT], wwant[H * MAXT * MAXT];
    fill(q, (size_t)L * E);
    fill(hs->k + hs->len * E, (size_t)S * E);
    fill(hs->v + hs->len * E, (size_t)S * E);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:{s:s}}", "query", mat(q, L, E), "key",
                          mat(hs->k + hs->len * E, S, E), "value",
                          mat(hs->v + hs->len * E, S, E), "num_heads", H, "sequence_id", id,
                          "rope", "style", "half");
    if (start) {
        json_object_set_new(b, "sequence_start", json_true());
        json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "in_proj_weight",
                                                    mat(w_in, 3 * E, E), "out_proj_weight",
                                                    mat(w_out, E, E)));
    }
    struct http_reply a = attention(port, b);
    cr_assert_eq(a.status, 200, "step of %s at %d: %ld %s", id, hs->len, a.status, a.body);
    const int total = hs->len + S;
    cr_assert_eq(int_of(&a, "cache_length"), total, "%s", a.body);
    cr_assert_eq(int_of(&a, "source_len"), total, "%s", a.body);
    const size_t n = answer_floats(&a, "output", out, sizeof out / sizeof *out);
    const size_t nw = answer_floats(&a, "attention_weights", wts, sizeof wts / sizeof *wts);
    free(a.body);

    json_t *s = json_pack("{s:o, s:o, s:o, s:i, s:s, s:i, s:{s:s}, s:{s:o, s:o}}", "query",
                          mat(q, L, E), "key", mat(hs->k, total, E), "value",
                          mat(hs->v, total, E), "num_heads", H, "attn_mask",
                          "causal_lower_right", "query_position_offset", hs->len + S - L,
                          "rope", "style", "half", "weights", "in_proj_weight",
                          mat(w_in, 3 * E, E), "out_proj_weight", mat(w_out, E, E));
    a = attention(port, s);
    cr_assert_eq(a.status, 200, "stateless: %ld %s", a.status, a.body);
    cr_assert_eq(answer_floats(&a, "output", want, sizeof want / sizeof *want), n);
    cr_assert_eq(answer_floats(&a, "attention_weights", wwant, sizeof wwant / sizeof *wwant), nw);
    free(a.body);
    cr_assert_eq(n, (size_t)L * E);
    cr_assert_eq(nw, (size_t)H * L * total);
    expect_close(out, want, n, "output");
    expect_close(wts, wwant, nw, "attention_weights");
    hs->len = total;
}

Test(sessions, builtin_steps_equal_the_stateless_answer)
{
    struct server s;
    server_start(&s, NULL);
    float w_in[3 * E * E], w_out[E * E];
    fill(w_in, sizeof w_in / sizeof *w_in);
    fill(w_out, sizeof w_out / sizeof *w_out);
    struct history hs = {.len = 0};
    /* a prompt (S > L answers its last L rows), then decode steps and chunks */
    const int S[] = {5, 1, 1, 3, 1, 2}, L[] = {2, 1, 1, 3, 1, 1};
    for (int i = 0; i < 6; i++)
        step_and_compare(s.port, "builtin-a", &hs, S[i], L[i], w_in, w_out, i == 0);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sessions, interleaved_sequences_stay_apart)
{
    struct server s;
    server_start(&s, NULL);
    float w_in[2][3 * E * E], w_out[2][E * E];
    fill(&w_in[0][0], sizeof w_in / sizeof(float));
    fill(&w_out[0][0], sizeof w_out / sizeof(float));
    struct history hs[2] = {{.len = 0}, {.len = 0}};
    const char *ids[2] = {"7f3c-one", "7f3c-two"};
    for (int i = 0; i < 8; i++) {
        const int k = (i * 5 / 3) % 2; /* an irregular interleaving */
        step_and_compare(s.port, ids[k], &hs[k], 1 + i % 3, 1, w_in[k], w_out[k],
                         hs[k].len == 0);
    }
    cr_assert(hs[0].len > 0 && hs[1].len > 0);
    cr_assert_eq(server_stop(&s), 0);
}

/* A step with key/value of one row and query of one row (E wide, identity
 * weights): the body. */
static json_t *tiny_step(const char *id, int start)
{
    float x[E];
    fill(x, E);
    json_t *b = json_pack("{s:o, s:i}", "query", mat(x, 1, E), "num_heads", H);
    if (id)
        json_object_set_new(b, "sequence_id", json_string(id));
    if (start)
        json_object_set_new(b, "sequence_start", json_true());
    return b;
}

/* body with `field` set to `value` (taken) is refused: 400
 * invalid_parameter, the message containing `msg`. */
static void expect_refused(int port, json_t *body, const char *field, json_t *value, const char *msg)
{
    json_object_set_new(body, field, value);
    struct http_reply a = attention(port, body);
    expect_error(&a, 400, "invalid_parameter", msg);
    free(a.body);
}

Test(sessions, every_refusal_has_its_status_and_slug)
{
    struct server s;
    const char *const flags[] = {"--model-repository", REPO, "--max-source-len", "4", NULL};
    server_start_ready(&s, flags);
    struct http_reply a;

    /* never started: its own slug, the id named, and what to do */
    a = attention(s.port, tiny_step("nobody-9", 0));
    expect_error(&a, 400, "sequence_not_found", "'nobody-9'");
    cr_assert(strstr(a.body, "start it again"), "%s", a.body);
    free(a.body);

    a = attention(s.port, tiny_step("e1", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* inside a sequence: query_position_offset, positional_encoding */
    expect_refused(s.port, tiny_step("e1", 0), "query_position_offset", json_integer(3),
                   "query_position_offset cannot be given");
    expect_refused(s.port, tiny_step("e1", 0), "positional_encoding", json_string("sinusoidal"),
                   "positional_encoding cannot be used");
    /* N = 1; S >= L */
    float x[2 * 2 * E];
    fill(x, sizeof x / sizeof *x);
    json_t *b = json_pack("{s:[o, o], s:i, s:s}", "query", mat(x, 2, E), mat(x + 2 * E, 2, E),
                  "num_heads", H, "sequence_id", "e1");
    a = attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "N = 1");
    free(a.body);
    b = json_pack("{s:o, s:o, s:i, s:s}", "query", mat(x, 2, E), "key", mat(x, 1, E),
                  "num_heads", H, "sequence_id", "e1");
    a = attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "S >= L");
    free(a.body);
    /* what the start fixed: num_heads, the model, the weights */
    expect_refused(s.port, tiny_step("e1", 0), "num_heads", json_integer(1),
                   "num_heads differs");
    expect_refused(s.port, tiny_step("e1", 0), "weights",
                   json_pack("{s:o}", "out_proj_weight", mat(x, E, E)), "the weights differ");
    float q16[16]; /* mha_f32: E 16 */
    fill(q16, 16);
    b = json_pack("{s:o, s:s, s:s}", "query", mat(q16, 1, 16), "model", "mha_f32",
                  "sequence_id", "e1");
    a = attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "belongs to model 'attention'");
    free(a.body);
    /* kv_cache_dtype: a sequence's only; one of three */
    expect_refused(s.port, tiny_step(NULL, 0), "kv_cache_dtype", json_string("FP16"),
                   "kv_cache_dtype applies to a sequence only");
    expect_refused(s.port, tiny_step("e2", 1), "kv_cache_dtype", json_string("FP8"),
                   "kv_cache_dtype must be");
    /* sequence_start without an id */
    b = tiny_step(NULL, 1);
    a = attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "sequence_start needs a sequence_id");
    free(a.body);
    /* the cap: max_source_len (4) tokens in all */
    for (int i = 0; i < 3; i++) { /* e1 holds 1 + 3 */
        a = attention(s.port, tiny_step("e1", 0));
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    a = attention(s.port, tiny_step("e1", 0));
    expect_error(&a, 400, "invalid_parameter", "max_source_len");
    free(a.body);
    /* none of these refusals lost anything: e1 still holds 4 rows */
    b = json_pack("{s:s, s:b}", "sequence_id", "e1", "sequence_end", 1);
    a = attention(s.port, b); /* ended without a step */
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = attention(s.port, tiny_step("e1", 0));
    expect_error(&a, 400, "sequence_not_found", "'e1'");
    free(a.body);
    b = json_pack("{s:s, s:b}", "sequence_id", "e1", "sequence_end", 1);
    a = attention(s.port, b); /* nothing to end */
    expect_error(&a, 400, "sequence_not_found", "'e1'");
    free(a.body);
    /* a start whose step is refused leaves no sequence */
    b = tiny_step("e3", 1);
    json_object_set_new(b, "key", mat(x, 1, E + 1));
    a = attention(s.port, b);
    cr_assert_eq(a.status, 400, "%s", a.body);
    free(a.body);
    a = attention(s.port, tiny_step("e3", 0));
    expect_error(&a, 400, "sequence_not_found", "'e3'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sessions, x_sequence_id_is_the_same_id)
{
    struct server s;
    server_start(&s, NULL);
    const char *const h42[] = {"X-Sequence-Id: 42", NULL};
    const char *const h43[] = {"X-Sequence-Id: 43", NULL};
    json_t *b = tiny_step(NULL, 0);
    json_object_set_new(b, "sequence_id", json_integer(42));
    json_object_set_new(b, "sequence_start", json_true());
    struct http_reply a = attention(s.port, b);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    /* the header alone, and the string "42": the same sequence */
    a = send_json(s.port, "/attention", tiny_step(NULL, 0), h42);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(int_of(&a, "cache_length"), 2);
    free(a.body);
    a = send_json(s.port, "/attention", tiny_step("42", 0), h42);
    cr_assert_eq(int_of(&a, "cache_length"), 3, "%s", a.body);
    free(a.body);
    /* different: 400 */
    a = send_json(s.port, "/attention", tiny_step("42", 0), h43);
    expect_error(&a, 400, "invalid_parameter", "X-Sequence-Id '43' differs");
    free(a.body);
    /* the largest uint64 id, as a number and as text */
    b = tiny_step(NULL, 1);
    char *text = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    char body[512];
    snprintf(body, sizeof body, "%.*s,\"sequence_id\":18446744073709551615}",
             (int)strlen(text) - 1, text);
    free(text);
    a = request(s.port, "POST", "/attention", body, strlen(body), NULL, 0);
    cr_assert_eq(a.status, 200, "%s: %s", body, a.body);
    free(a.body);
    const char *const hmax[] = {"X-Sequence-Id: 18446744073709551615", NULL};
    a = send_json(s.port, "/attention", tiny_step(NULL, 0), hmax);
    cr_assert_eq(int_of(&a, "cache_length"), 2, "%s", a.body);
    free(a.body);
    /* v2 too: the header on infer */
    float q[E];
    fill(q, E);
    json_t *v = json_pack("{s:[o], s:{s:i}}", "inputs", input("query", q, 1, E), "parameters",
                          "num_heads", H);
    a = send_json(s.port, "/v2/models/attention/infer", v, h42);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert(strstr(a.body, "\"parameters\":{\"cache_length\":4}"), "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* A served model over v2                                                  */

#define ME 32 /* llama_l1: E 32, 4 heads, grouped KV heads, RoPE */

/* The v2 output of a body (taken) into out. */
static size_t v2_output(int port, json_t *body, float *out, size_t max, long long *cache_len)
{
    struct http_reply a = send_json(port, "/v2/models/llama_l1/infer", body, NULL);
    cr_assert_eq(a.status, 200, "%ld %s", a.status, a.body);
    size_t n;
    float *got = output_of(&a, "output", &n, NULL);
    cr_assert(got && n <= max);
    memcpy(out, got, n * sizeof *got);
    free(got);
    if (cache_len) {
        json_t *h = answer_head(&a);
        json_t *cl = json_object_get(json_object_get(h, "parameters"), "cache_length");
        *cache_len = json_is_integer(cl) ? json_integer_value(cl) : -1;
        json_decref(h);
    }
    free(a.body);
    return n;
}

Test(sessions, served_model_steps_over_v2_equal_the_stateless_answer)
{
    struct server s;
    start_with_repo(&s);
    static float k[64 * ME], v[64 * ME];
    float q[8 * ME], out[8 * ME], want[8 * ME];
    int len = 0;
    const int S[] = {6, 1, 1, 4, 1}, L[] = {6, 1, 1, 2, 1};
    for (int i = 0; i < 5; i++) {
        fill(q, (size_t)L[i] * ME);
        fill(k + len * ME, (size_t)S[i] * ME);
        fill(v + len * ME, (size_t)S[i] * ME);
        json_t *b = json_pack("{s:[o, o, o], s:{s:s, s:b}}", "inputs",
                              input("query", q, L[i], ME), input("key", k + len * ME, S[i], ME),
                              input("value", v + len * ME, S[i], ME), "parameters",
                              "sequence_id", "llama-seq", "sequence_start", i == 0);
        long long cl;
        const size_t n = v2_output(s.port, b, out, sizeof out / sizeof *out, &cl);
        const int total = len + S[i];
        cr_assert_eq(cl, total);
        json_t *st = json_pack("{s:[o, o, o], s:{s:b, s:s, s:i}}", "inputs",
                               input("query", q, L[i], ME), input("key", k, total, ME),
                               input("value", v, total, ME), "parameters", "is_causal", 1,
                               "causal_alignment", "lower_right", "query_position_offset",
                               total - L[i]);
        cr_assert_eq(v2_output(s.port, st, want, sizeof want / sizeof *want, NULL), n);
        expect_close(out, want, n, "llama_l1 output");
        len = total;
    }
    /* a step to another model: 400 */
    fill(q, 16); /* mha_f32: E 16 */
    json_t *b = json_pack("{s:[o], s:{s:s}}", "inputs", input("query", q, 1, 16), "parameters",
                          "sequence_id", "llama-seq");
    struct http_reply a = send_json(s.port, "/v2/models/mha_f32/infer", b, NULL);
    expect_v2_error(&a, 400, "belongs to model 'llama_l1'");
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Limits                                                                  */

Test(sessions, max_sequences_evicts_the_least_recently_used_idle_one)
{
    struct server s;
    const char *const flags[] = {"--max-sequences", "2", NULL};
    server_start(&s, flags);
    const char *ids[] = {"lru-a", "lru-b"};
    for (int i = 0; i < 2; i++) {
        struct http_reply a = attention(s.port, tiny_step(ids[i], 1));
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    struct http_reply a = attention(s.port, tiny_step("lru-a", 0)); /* b is now the oldest */
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
    a = attention(s.port, tiny_step("lru-c", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = attention(s.port, tiny_step("lru-b", 0));
    expect_error(&a, 400, "sequence_not_found", "'lru-b'");
    free(a.body);
    a = attention(s.port, tiny_step("lru-a", 0));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(int_of(&a, "cache_length"), 3);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 2);
    cr_assert_gt(server_metric(s.port, "attention_sequence_bytes"), 0);
    /* ending them gives everything back */
    for (int i = 0; i < 2; i++) {
        json_t *b = json_pack("{s:s, s:b}", "sequence_id", i ? "lru-c" : "lru-a",
                              "sequence_end", 1);
        a = attention(s.port, b);
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
    fill(q, WIDE);
    fill(kv, (size_t)S);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", mat(q, 1, WIDE), "key",
                          mat(kv, S, 1), "value", mat(kv, S, 1), "num_heads", 1, "sequence_id",
                          id, "need_weights", 0);
    json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "k_proj_weight",
                                                mat(kw, WIDE, 1), "v_proj_weight",
                                                mat(vw, WIDE, 1)));
    if (start)
        json_object_set_new(b, "sequence_start", json_true());
    return b;
}

Test(sessions, max_sequence_bytes_refuses_what_cannot_fit_and_keeps_the_state)
{
    struct server s;
    /* one block and the two kept weights (2 x 512 floats) */
    const char *const flags[] = {"--max-sequence-bytes", "1028K", NULL};
    server_start(&s, flags);
    float kw[WIDE], vw[WIDE];
    fill(kw, WIDE);
    fill(vw, WIDE);
    struct http_reply a = attention(s.port, wide_step("big", 200, 1, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_bytes"), (1 << 20) + 2 * WIDE * 4);
    /* a second block would make it pass the budget on its own: never */
    a = attention(s.port, wide_step("big", 100, 0, kw, vw));
    expect_error(&a, 413, "payload_too_large", "max_sequence_bytes");
    cr_assert(!header(&a, "Retry-After"), "a retry cannot help: %s", a.headers);
    free(a.body);
    /* the refused step was not applied: 56 rows still fit the block */
    a = attention(s.port, wide_step("big", 56, 0, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_assert_eq(int_of(&a, "cache_length"), 256);
    free(a.body);
    /* a new sequence evicts the idle one to make room */
    a = attention(s.port, wide_step("big-2", 10, 1, kw, vw));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = attention(s.port, wide_step("big", 1, 0, kw, vw));
    expect_error(&a, 400, "sequence_not_found", "'big'");
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequence_evictions_total"), 1);
    cr_assert_eq(server_stop(&s), 0);
}

Test(sessions, an_idle_sequence_times_out)
{
    struct server s;
    const char *const flags[] = {"--sequence-idle-timeout", "1", NULL};
    server_start(&s, flags);
    struct http_reply a = attention(s.port, tiny_step("sleepy", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    usleep(2500 * 1000); /* well past the 1 s timeout */
    a = attention(s.port, tiny_step("sleepy", 0));
    expect_error(&a, 400, "sequence_not_found", "'sleepy'");
    free(a.body);
    cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Cache types                                                             */

static float to_f16(float x)
{
    return (float)(_Float16)x;
}

static float to_bf16(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* With identity projections and no RoPE, an FP16 or BF16 cache answers as
 * the stateless request on key and value rounded to that type; the cache
 * takes half the bytes of FP32. */
Test(sessions, fp16_and_bf16_caches_round_keys_and_values)
{
    struct server s;
    server_start(&s, NULL);
    const char *dtypes[] = {"FP32", "FP16", "BF16"};
    double bytes[3];
    for (int t = 0; t < 3; t++) {
        float k[8 * E], v[8 * E], kr[8 * E], vr[8 * E], q[E], out[E], want[E];
        int len = 0;
        for (int i = 0; i < 3; i++) {
            const int S = i ? 1 : 4;
            fill(q, E);
            fill(k + len * E, (size_t)S * E);
            fill(v + len * E, (size_t)S * E);
            for (int j = len * E; j < (len + S) * E; j++) {
                kr[j] = t == 1 ? to_f16(k[j]) : t == 2 ? to_bf16(k[j]) : k[j];
                vr[j] = t == 1 ? to_f16(v[j]) : t == 2 ? to_bf16(v[j]) : v[j];
            }
            json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", mat(q, 1, E),
                                  "key", mat(k + len * E, S, E), "value",
                                  mat(v + len * E, S, E), "num_heads", H, "sequence_id",
                                  dtypes[t], "need_weights", 0);
            if (i == 0) {
                json_object_set_new(b, "sequence_start", json_true());
                json_object_set_new(b, "kv_cache_dtype", json_string(dtypes[t]));
            }
            struct http_reply a = attention(s.port, b);
            cr_assert_eq(a.status, 200, "%s: %s", dtypes[t], a.body);
            cr_assert_eq(answer_floats(&a, "output", out, E), (size_t)E);
            free(a.body);
            len += S;
            json_t *st = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", mat(q, 1, E),
                                   "key", mat(kr, len, E), "value", mat(vr, len, E),
                                   "num_heads", H, "attn_mask", "causal_lower_right",
                                   "need_weights", 0);
            a = attention(s.port, st);
            cr_assert_eq(a.status, 200, "%s", a.body);
            cr_assert_eq(answer_floats(&a, "output", want, E), (size_t)E);
            free(a.body);
            expect_close(out, want, E, dtypes[t]);
        }
        bytes[t] = server_metric(s.port, "attention_sequence_bytes");
        json_t *end = json_pack("{s:s, s:b}", "sequence_id", dtypes[t], "sequence_end", 1);
        struct http_reply a = attention(s.port, end);
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
    }
    cr_assert(bytes[0] > 0 && bytes[1] == bytes[0] / 2 && bytes[2] == bytes[0] / 2,
              "bytes FP32 %g, FP16 %g, BF16 %g", bytes[0], bytes[1], bytes[2]);
    /* beyond FP16's range: 400 naming the row; nothing appended */
    json_t *b = tiny_step("fp16-range", 1);
    json_object_set_new(b, "kv_cache_dtype", json_string("FP16"));
    struct http_reply a = attention(s.port, b);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    b = json_pack("{s:[[f, f, f, f]], s:[[f, f, f, f]], s:i, s:s}", "query", 0.0, 0.0, 0.0, 0.0,
                  "key", 1.0, 70000.0, 0.0, 0.0, "num_heads", H, "sequence_id", "fp16-range");
    a = attention(s.port, b);
    expect_error(&a, 400, "invalid_parameter", "row 0");
    free(a.body);
    a = attention(s.port, tiny_step("fp16-range", 0));
    cr_assert_eq(int_of(&a, "cache_length"), 2, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* A model's sequences go with it                                          */

#define TOKEN "test-admin-token-0123456789"

Test(sessions, unloading_or_reloading_a_model_drops_its_sequences)
{
    struct server s;
    const char *const flags[] = {"--model-repository", REPO, "--admin-token", TOKEN, NULL};
    server_start_ready(&s, flags);
    const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};
    const char *actions[] = {"load", "unload"};
    for (int i = 0; i < 2; i++) {
        float q[16]; /* mha_f32: E 16 */
        fill(q, 16);
        json_t *b = json_pack("{s:o, s:s, s:s, s:b}", "query", mat(q, 1, 16), "model",
                              "mha_f32", "sequence_id", "model-bound", "sequence_start", 1);
        struct http_reply a = attention(s.port, b);
        cr_assert_eq(a.status, 200, "%s", a.body);
        free(a.body);
        cr_assert_eq(server_metric(s.port, "attention_model_sequences_active{model=\"mha_f32\"}"), 1);
        char path[96];
        snprintf(path, sizeof path, "/v2/repository/models/mha_f32/%s", actions[i]);
        a = request_with(s.port, "POST", path, "{}", 2, NULL, 0, auth);
        cr_assert_eq(a.status, 200, "%s %s", actions[i], a.body);
        free(a.body);
        cr_assert_eq(server_metric(s.port, "attention_sequences_active"), 0, "%s kept the sequence",
                     actions[i]);
        if (i == 1) { /* back, for the step to find the model */
            a = request_with(s.port, "POST", "/v2/repository/models/mha_f32/load", "{}", 2,
                             NULL, 0, auth);
            cr_assert_eq(a.status, 200, "%s", a.body);
            free(a.body);
        }
        b = json_pack("{s:o, s:s, s:s}", "query", mat(q, 1, 16), "model", "mha_f32",
                      "sequence_id", "model-bound");
        a = attention(s.port, b);
        expect_error(&a, 400, "sequence_not_found", "'model-bound'");
        free(a.body);
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* The other two pairings: a served model over POST /attention, the
 * built-in model over v2 (its weights as inputs at the start only)        */

Test(sessions, served_model_over_attention_and_builtin_over_v2)
{
    struct server s;
    start_with_repo(&s);
    static float k[32 * ME], v[32 * ME];
    float q[4 * ME], out[4 * ME], want[4 * ME];
    int len = 0;
    const int S[] = {3, 1, 2}, L[] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        fill(q, (size_t)L[i] * ME);
        fill(k + len * ME, (size_t)S[i] * ME);
        fill(v + len * ME, (size_t)S[i] * ME);
        json_t *b = json_pack("{s:o, s:o, s:o, s:s, s:s, s:b, s:b}", "query",
                              mat(q, L[i], ME), "key", mat(k + len * ME, S[i], ME), "value",
                              mat(v + len * ME, S[i], ME), "model", "llama_l1", "sequence_id",
                              "served-attn", "sequence_start", i == 0, "need_weights", 0);
        struct http_reply a = attention(s.port, b);
        cr_assert_eq(a.status, 200, "%s", a.body);
        const size_t n = answer_floats(&a, "output", out, sizeof out / sizeof *out);
        free(a.body);
        len += S[i];
        json_t *st = json_pack("{s:o, s:o, s:o, s:s, s:s, s:i, s:b}", "query", mat(q, L[i], ME),
                               "key", mat(k, len, ME), "value", mat(v, len, ME), "model",
                               "llama_l1", "attn_mask", "causal_lower_right",
                               "query_position_offset", len - L[i], "need_weights", 0);
        a = attention(s.port, st);
        cr_assert_eq(a.status, 200, "%s", a.body);
        cr_assert_eq(answer_floats(&a, "output", want, sizeof want / sizeof *want), n);
        free(a.body);
        expect_close(out, want, n, "llama_l1 over /attention");
    }

    /* the built-in model over v2 */
    float w_in[3 * E * E], bk[16 * E], bv[16 * E], bq[4 * E], bo[4 * E], bw[4 * E];
    fill(w_in, sizeof w_in / sizeof *w_in);
    len = 0;
    for (int i = 0; i < 3; i++) {
        fill(bq, (size_t)L[i] * E);
        fill(bk + len * E, (size_t)S[i] * E);
        fill(bv + len * E, (size_t)S[i] * E);
        json_t *in = json_pack("[o, o, o]", input("query", bq, L[i], E),
                               input("key", bk + len * E, S[i], E),
                               input("value", bv + len * E, S[i], E));
        if (i == 0)
            json_array_append_new(in, input("in_proj_weight", w_in, 3 * E, E));
        json_t *b = json_pack("{s:o, s:{s:i, s:s, s:b, s:b}}", "inputs", in, "parameters",
                              "num_heads", H, "sequence_id", "builtin-v2", "sequence_start",
                              i == 0, "need_weights", 0);
        struct http_reply a = send_json(s.port, "/v2/models/attention/infer", b, NULL);
        cr_assert_eq(a.status, 200, "%s", a.body);
        size_t n;
        float *got = output_of(&a, "output", &n, NULL);
        memcpy(bo, got, n * sizeof *got);
        free(got);
        free(a.body);
        len += S[i];
        json_t *st = json_pack("{s:[o, o, o, o], s:{s:i, s:b, s:s, s:i, s:b}}", "inputs",
                               input("query", bq, L[i], E), input("key", bk, len, E),
                               input("value", bv, len, E),
                               input("in_proj_weight", w_in, 3 * E, E), "parameters",
                               "num_heads", H, "is_causal", 1, "causal_alignment",
                               "lower_right", "query_position_offset", len - L[i],
                               "need_weights", 0);
        a = send_json(s.port, "/v2/models/attention/infer", st, NULL);
        cr_assert_eq(a.status, 200, "%s", a.body);
        size_t nw;
        got = output_of(&a, "output", &nw, NULL);
        cr_assert_eq(nw, n);
        memcpy(bw, got, n * sizeof *got);
        free(got);
        free(a.body);
        expect_close(bo, bw, n, "built-in over v2");
    }
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Concurrent steps of one sequence take turns                             */

struct stepper {
    int port, n;
    long long lengths[8];  /* N at most */
    int ok;
};

static void *steps(void *arg)
{
    struct stepper *st = arg;
    st->ok = 1;
    for (int i = 0; i < st->n; i++) {
        float q[E];
        fill(q, E); /* (rnd is not thread-safe: any values do) */
        json_t *b = json_pack("{s:o, s:i, s:s, s:b}", "query", mat(q, 1, E), "num_heads", H,
                              "sequence_id", "shared-seq", "need_weights", 0);
        char *text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        struct http_reply a = request(st->port, "POST", "/attention", text, strlen(text), NULL, 0);
        free(text);
        json_t *j = a.status == 200 ? json_loadb(a.body, a.len, 0, NULL) : NULL;
        st->lengths[i] = j ? json_integer_value(json_object_get(j, "cache_length")) : -1;
        st->ok &= j != NULL;
        json_decref(j);
        free(a.body);
    }
    return NULL;
}

Test(sessions, concurrent_steps_of_one_sequence_take_turns)
{
    struct server s;
    const char *const flags[] = {"--workers", "4", NULL};
    server_start(&s, flags);
    struct http_reply a = attention(s.port, tiny_step("shared-seq", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    enum { T = 4, N = 8 };
    struct stepper st[T];
    pthread_t th[T];
    for (int t = 0; t < T; t++) {
        st[t] = (struct stepper){.port = s.port, .n = N};
        pthread_create(&th[t], NULL, steps, &st[t]);
    }
    int seen[2 + T * N] = {0};
    for (int t = 0; t < T; t++) {
        pthread_join(th[t], NULL);
        cr_assert(st[t].ok, "a concurrent step failed");
        for (int i = 0; i < N; i++) {
            const long long l = st[t].lengths[i];
            cr_assert(l >= 2 && l < 2 + T * N, "cache_length %lld", l);
            cr_assert(!seen[l], "two steps answered cache_length %lld", l);
            seen[l] = 1;
        }
    }
    a = attention(s.port, tiny_step("shared-seq", 0));
    cr_assert_eq(int_of(&a, "cache_length"), 2 + T * N, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* Restarts, and many short sequences                                      */

Test(sessions, a_restart_loses_the_sequences)
{
    struct server s;
    server_start(&s, NULL);
    struct http_reply a = attention(s.port, tiny_step("before-restart", 1));
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
    server_start(&s, NULL);
    a = attention(s.port, tiny_step("before-restart", 0));
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
    fill(w, 256);
    for (int i = from; i < from + count; i++) {
        char id[32];
        snprintf(id, sizeof id, "soak-%d", i);
        for (int k = 0; k < 4; k++) {
            fill(q, 256);
            fill(kv, 64);
            json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:s, s:b}", "query", mat(q, 1, 256),
                                  "key", mat(kv, 64, 1), "value", mat(kv, 64, 1), "num_heads",
                                  1, "sequence_id", id, "need_weights", 0);
            if (k == 0) {
                json_object_set_new(b, "sequence_start", json_true());
                json_object_set_new(b, "weights", json_pack("{s:o, s:o}", "k_proj_weight",
                                                            mat(w, 256, 1), "v_proj_weight",
                                                            mat(w, 256, 1)));
            }
            if (k == 3)
                json_object_set_new(b, "sequence_end", json_true());
            struct http_reply a = attention(port, b);
            cr_assert_eq(a.status, 200, "%s step %d: %s", id, k, a.body);
            free(a.body);
        }
    }
}

Test(sessions, many_short_sequences_give_everything_back)
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
