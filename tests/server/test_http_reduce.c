/* test_http_reduce.c -- the reduced attention weights over HTTP
 * (weights_top_k, weights_pool), POST /attention and v2, JSON, base64 and
 * binary, against the full weights the same server answers for the same
 * request; the refusals and max_weights_elements; and L = S = 4096 with 16
 * heads under the default limits, with its time and the server's peak
 * memory. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/check.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

/* Pooled means: one float32 rounding of a double mean (test_reduce.c). */
#define POOL_RTOL 2.4e-7
#define POOL_ATOL 1e-30

enum hmask { HM_NONE, HM_CAUSAL, HM_PAD };

/* One request's data: (N, L, E) query, (N, S, E) key and value, packed
 * in-projection weights, key padding (N, S). */
struct hcase {
    int batched, N, L, S, E, H, mask, avg;
    float *q, *k, *v, *w;
    unsigned char *pad;
};

static void hcase_make(struct hcase *c, unsigned long long seed)
{
    c->q = check_randv((size_t)c->N * c->L * c->E, 1.0f, &seed);
    c->k = check_randv((size_t)c->N * c->S * c->E, 1.0f, &seed);
    c->v = check_randv((size_t)c->N * c->S * c->E, 1.0f, &seed);
    c->w = check_randv((size_t)3 * c->E * c->E, 1.0f, &seed);
    c->pad = check_randb((size_t)c->N * c->S, 0.3, &seed);
    cr_assert(c->q && c->k && c->v && c->w && c->pad);
    for (int n = 0; n < c->N; n++)
        c->pad[(size_t)n * c->S] = 0; /* a key left in every row */
}

static void hcase_free(struct hcase *c)
{
    free(c->q), free(c->k), free(c->v), free(c->w), free(c->pad);
}

/* {"shape", "dtype", "b64"} of n elements of 4 (float32) or 1 (bool) bytes. */
static json_t *b64_tensor(const void *x, const long long *shape, int nd, const char *dtype)
{
    size_t n = 1;
    json_t *sh = json_array();
    for (int d = 0; d < nd; d++)
        n *= (size_t)shape[d], json_array_append_new(sh, json_integer(shape[d]));
    char *b = b64_encode(x, n * (strcmp(dtype, "bool") ? 4 : 1));
    json_t *t = json_pack("{s:o, s:s, s:s}", "shape", sh, "dtype", dtype, "b64", b);
    free(b);
    return t;
}

/* The POST /attention body of c (base64 tensors), asking for full weights. */
static json_t *attention_body(const struct hcase *c)
{
    const int b = c->batched;
    const long long qs[3] = {c->N, c->L, c->E}, ks[3] = {c->N, c->S, c->E};
    const long long ws[2] = {3LL * c->E, c->E}, ps[2] = {c->N, c->S};
    json_t *r = json_pack("{s:o, s:o, s:o, s:i, s:b, s:{s:o}}", "query",
                          b64_tensor(c->q, qs + !b, 3 - !b, "float32"), "key",
                          b64_tensor(c->k, ks + !b, 3 - !b, "float32"), "value",
                          b64_tensor(c->v, ks + !b, 3 - !b, "float32"), "num_heads", c->H,
                          "average_attn_weights", c->avg, "weights", "in_proj_weight",
                          b64_tensor(c->w, ws, 2, "float32"));
    if (c->mask == HM_CAUSAL)
        json_object_set_new(r, "attn_mask", json_string("causal"));
    if (c->mask == HM_PAD)
        json_object_set_new(r, "key_padding_mask", b64_tensor(c->pad, ps + !b, 2 - !b, "bool"));
    return r;
}

/* POST r (not consumed); the answer's JSON, the status checked. */
static json_t *post_req(int port, json_t *r, long want)
{
    char *body = json_dumps(r, JSON_COMPACT);
    struct http_reply a = post(port, body);
    free(body);
    cr_assert_eq(a.status, want, "status %ld: %.400s", a.status, a.body);
    json_t *j = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %.200s", a.body);
    free(a.body);
    return j;
}

/* The shape [N,] [H,] a, b that c's weights outputs have. */
static void expect_shape(json_t *t, const struct hcase *c, long long a, long long b)
{
    json_t *sh = json_is_object(t) ? json_object_get(t, "shape") : NULL;
    long long want[4];
    int nd = 0;
    if (c->batched)
        want[nd++] = c->N;
    if (!c->avg)
        want[nd++] = c->H;
    want[nd++] = a, want[nd++] = b;
    if (sh) { /* base64 */
        cr_assert_eq(json_array_size(sh), (size_t)nd);
        for (int d = 0; d < nd; d++)
            cr_assert_eq(json_integer_value(json_array_get(sh, d)), want[d], "dim %d", d);
        return;
    }
    json_t *x = t;
    for (int d = 0; d < nd; d++, x = json_array_get(x, 0))
        cr_assert_eq(json_array_size(x), (size_t)want[d], "dim %d", d);
}

/* Top-k (vals, idx as floats, or int32 bits when bits) of rows of S
 * against full. Returns mismatching rows. */
static int check_topk(const float *full, size_t rows, int S, int k, const float *vals,
                      const float *idx, int bits)
{
    float *ev = malloc((size_t)k * sizeof *ev);
    int *ei = malloc((size_t)k * sizeof *ei), bad = 0;
    for (size_t r = 0; r < rows; r++) {
        check_topk_row(ev, ei, full + r * S, S, k);
        for (int x = 0; x < k; x++) {
            int32_t got = 0;
            if (bits)
                memcpy(&got, &idx[r * k + x], sizeof got);
            else
                got = (int32_t)idx[r * k + x];
            if (memcmp(&vals[r * k + x], &ev[x], sizeof *ev) || got != ei[x]) {
                if (bad++ < 3)
                    fprintf(stderr, "row %zu slot %d: got %.9g @%d, want %.9g @%d\n", r, x,
                            (double)vals[r * k + x], (int)got, (double)ev[x], ei[x]);
                break;
            }
        }
    }
    free(ev), free(ei);
    return bad;
}

/* check_pool() into a new array. */
static float *naive_pool(const float *full, size_t planes, int L, int S, int p)
{
    float *o = malloc(planes * (size_t)((L - 1) / p + 1) * (size_t)((S - 1) / p + 1) * sizeof *o);
    cr_assert(o);
    check_pool(o, full, planes, L, S, p);
    return o;
}

/* Every reduction of c's request against its full weights, JSON and base64. */
static void attention_case(int port, const struct hcase *c)
{
    json_t *r = attention_body(c);
    json_t *a = post_req(port, r, 200);
    size_t nf, no, n;
    float *full = flatten(json_object_get(a, "attention_weights"), &nf);
    float *out = flatten(json_object_get(a, "output"), &no);
    const size_t planes = (size_t)c->N * (c->avg ? 1 : c->H), rows = planes * c->L;
    cr_assert_eq(nf, rows * c->S);
    const int ks[3] = {1, 3, c->S + 2}, ps[3] = {2, 3, c->L + 1};
    for (int b64 = 0; b64 < 2; b64++) {
        json_object_set_new(r, "output_encoding", json_string(b64 ? "base64" : "json"));
        for (int x = 0; x < 3; x++) {
            const int k = ks[x] < c->S ? ks[x] : c->S;
            json_object_set_new(r, "weights_top_k", json_integer(ks[x]));
            json_t *t = post_req(port, r, 200);
            cr_assert_null(json_object_get(t, "attention_weights"));
            json_t *tk = json_object_get(t, "attention_weights_top_k");
            expect_shape(json_object_get(tk, "values"), c, c->L, k);
            expect_shape(json_object_get(tk, "indices"), c, c->L, k);
            if (b64)
                cr_assert_str_eq(json_string_value(json_object_get(
                                     json_object_get(tk, "indices"), "dtype")), "int32");
            float *vals = flatten(json_object_get(tk, "values"), &n);
            cr_assert_eq(n, rows * k);
            float *idx = flatten(json_object_get(tk, "indices"), &n);
            cr_assert_eq(n, rows * k);
            cr_assert_eq(check_topk(full, rows, c->S, k, vals, idx, b64), 0,
                         "top-k %d (b64 %d, batched %d, avg %d, mask %d)", ks[x], b64,
                         c->batched, c->avg, c->mask);
            float *o2 = flatten(json_object_get(t, "output"), &n);
            cr_assert(check_tensor("output", o2, out, no, 0.0, 0.0));
            free(vals), free(idx), free(o2);
            json_decref(t);
        }
        json_object_del(r, "weights_top_k");
        for (int x = 0; x < 3; x++) {
            json_object_set_new(r, "weights_pool", json_integer(ps[x]));
            json_t *t = post_req(port, r, 200);
            json_t *pw = json_object_get(t, "attention_weights_pooled");
            const int LT = (c->L - 1) / ps[x] + 1, ST = (c->S - 1) / ps[x] + 1;
            expect_shape(pw, c, LT, ST);
            float *got = flatten(pw, &n), *want = naive_pool(full, planes, c->L, c->S, ps[x]);
            cr_assert_eq(n, planes * LT * ST);
            cr_assert(check_tensor("pooled", got, want, n, POOL_ATOL, POOL_RTOL),
                      "pool %d (b64 %d)", ps[x], b64);
            free(got), free(want);
            json_decref(t);
        }
        json_object_del(r, "weights_pool");
    }
    free(full), free(out);
    json_decref(a);
    json_decref(r);
}

Test(http_reduce, attention_topk_and_pool_match_the_full_weights, .timeout = 120)
{
    struct server s;
    server_start(&s, NULL);
    unsigned long long seed = 11;
    int n = 0;
    for (int batched = 0; batched < 2; batched++)
        for (int avg = 0; avg < 2; avg++)
            for (int mask = HM_NONE; mask <= HM_PAD; mask++) {
                struct hcase c = {.batched = batched, .N = batched ? 2 : 1,
                                  .L = 7 + 6 * avg, .S = 11 - 4 * mask, .H = 2 + mask % 2,
                                  .mask = mask, .avg = avg};
                c.E = 2 * c.H;
                hcase_make(&c, seed++);
                attention_case(s.port, &c);
                hcase_free(&c);
                n++;
            }
    cr_assert_eq(n, 12);
    cr_assert_eq(server_stop(&s), 0);
}

Test(http_reduce, attention_refusals_and_max_weights_elements, .timeout = 60)
{
    const char *const flags[] = {"--max-weights-elements", "100", NULL};
    struct server s;
    server_start(&s, flags);
    struct hcase c = {.batched = 1, .N = 1, .L = 20, .S = 20, .E = 2, .H = 1};
    hcase_make(&c, 5);
    json_t *r = attention_body(&c);
    static const struct {
        const char *top_k, *pool, *extra;
        long status;
        const char *slug, *text;
    } cases[] = {
        {NULL, NULL, NULL, 413, "payload_too_large", "weights_top_k or weights_pool"},
        {"5", NULL, NULL, 200, NULL, NULL},   /* 20 · 5 = 100 */
        {"6", NULL, NULL, 413, "payload_too_large", "top-k attention weights would have 120"},
        {NULL, "2", NULL, 200, NULL, NULL},   /* 10 · 10 = 100 */
        {NULL, "1", NULL, 413, "payload_too_large", "pooled attention weights would have 400"},
        {"2", "2", NULL, 400, "invalid_parameter", "weights_top_k and weights_pool"},
        {"2", NULL, "need_weights", 400, "invalid_parameter", "need_weights is false"},
        {NULL, "3", "need_weights", 400, "invalid_parameter", "need_weights is false"},
        {"2.0", NULL, NULL, 400, "invalid_parameter", "weights_top_k must be an integer >= 1"},
        {"0", NULL, NULL, 400, "invalid_parameter", "weights_top_k must be an integer >= 1"},
        {NULL, "-3", NULL, 400, "invalid_parameter", "weights_pool must be an integer >= 1"},
        {NULL, "\"2\"", NULL, 400, "invalid_parameter", "weights_pool must be an integer >= 1"},
        /* beyond long long: k beyond S is S, and S counts */
        {"99999999999999999999999", NULL, NULL, 413, "payload_too_large",
         "top-k attention weights would have 400 elements"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *x = json_deep_copy(r);
        if (cases[i].top_k)
            json_object_set_new(x, "weights_top_k", json_loads(cases[i].top_k, JSON_DECODE_ANY,
                                                               NULL));
        if (cases[i].pool)
            json_object_set_new(x, "weights_pool", json_loads(cases[i].pool, JSON_DECODE_ANY,
                                                              NULL));
        if (cases[i].extra)
            json_object_set_new(x, cases[i].extra, json_false());
        char *body = json_dumps(x, JSON_COMPACT);
        if (cases[i].top_k && strlen(cases[i].top_k) > 20) { /* beyond long long: as text */
            free(body);
            json_object_set_new(x, "weights_top_k", json_integer(777));
            body = json_dumps(x, JSON_COMPACT);
            char *at = strstr(body, "777");
            char *nb = malloc(strlen(body) + 32);
            snprintf(nb, strlen(body) + 32, "%.*s%s%s", (int)(at - body), body, cases[i].top_k,
                     at + 3);
            free(body);
            body = nb;
        }
        struct http_reply a = post(s.port, body);
        if (cases[i].status == 200)
            cr_assert_eq(a.status, 200, "case %zu: %ld %.300s", i, a.status, a.body);
        else
            expect_error(&a, cases[i].status, cases[i].slug, cases[i].text);
        free(a.body);
        free(body);
        json_decref(x);
    }
    json_decref(r);
    hcase_free(&c);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* v2                                                                      */

static json_t *v2_input(const char *name, const char *dtype, const float *x, const uint8_t *b,
                        const long long *shape, int nd)
{
    json_t *sh = json_array(), *data = json_array();
    size_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= (size_t)shape[d], json_array_append_new(sh, json_integer(shape[d]));
    for (size_t i = 0; i < n; i++)
        json_array_append_new(data, x ? json_real((double)x[i]) : json_boolean(b[i]));
    return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "datatype", dtype, "shape", sh,
                     "data", data);
}

/* c as a v2 infer request to the built-in model; params and outputs added. */
static json_t *v2_body(const struct hcase *c, json_t *params, json_t *outputs)
{
    const int b = c->batched;
    const long long qs[3] = {c->N, c->L, c->E}, ks[3] = {c->N, c->S, c->E};
    const long long ws[2] = {3LL * c->E, c->E}, ps[2] = {c->N, c->S};
    json_t *in = json_array();
    json_array_append_new(in, v2_input("query", "FP32", c->q, NULL, qs + !b, 3 - !b));
    json_array_append_new(in, v2_input("key", "FP32", c->k, NULL, ks + !b, 3 - !b));
    json_array_append_new(in, v2_input("value", "FP32", c->v, NULL, ks + !b, 3 - !b));
    json_array_append_new(in, v2_input("in_proj_weight", "FP32", c->w, NULL, ws, 2));
    if (c->mask == HM_PAD)
        json_array_append_new(in, v2_input("key_padding_mask", "BOOL", NULL, c->pad, ps + !b,
                                           2 - !b));
    json_object_set_new(params, "num_heads", json_integer(c->H));
    json_object_set_new(params, "average_attn_weights", json_boolean(c->avg));
    if (c->mask == HM_CAUSAL)
        json_object_set_new(params, "is_causal", json_true());
    json_t *r = json_pack("{s:o, s:o}", "parameters", params, "inputs", in);
    if (outputs)
        json_object_set_new(r, "outputs", outputs);
    return r;
}

static struct http_reply v2_post(int port, json_t *r)
{
    char *body = json_dumps(r, JSON_COMPACT);
    struct http_reply a = infer(port, "attention", body, strlen(body), -1);
    free(body);
    json_decref(r);
    return a;
}

/* Output name of a (JSON or binary), its element count checked. */
static float *v2_out(const struct http_reply *a, const char *name, size_t want, const char *dtype)
{
    size_t n = 0;
    json_t *shape = NULL;
    float *f = output_of(a, name, &n, &shape);
    cr_assert_not_null(f, "no output %s: %.300s", name, a->body);
    cr_assert_eq(n, want, "%s: %zu elements, want %zu", name, n, want);
    json_decref(shape);
    json_t *h = answer_head(a);
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(h, "outputs"), i, o)
        if (!strcmp(json_string_value(json_object_get(o, "name")), name))
            cr_assert_str_eq(json_string_value(json_object_get(o, "datatype")), dtype);
    json_decref(h);
    return f;
}

Test(http_reduce, v2_topk_and_pool_json_and_binary_match_the_full_weights, .timeout = 120)
{
    struct server s;
    server_start(&s, NULL);
    for (int v = 0; v < 4; v++) {
        struct hcase c = {.batched = v % 2, .N = 1 + v % 2, .L = 9, .S = 6 + v, .H = 2,
                          .E = 4, .mask = v % 3, .avg = v == 2};
        hcase_make(&c, 100 + (unsigned long long)v);
        struct http_reply a = v2_post(s.port, v2_body(&c, json_object(), NULL));
        cr_assert_eq(a.status, 200, "%.300s", a.body);
        const size_t planes = (size_t)c.N * (c.avg ? 1 : c.H), rows = planes * c.L;
        float *full = v2_out(&a, "attention_weights", rows * c.S, "FP32");
        free(a.body);
        for (int bin = 0; bin < 2; bin++) {
            const int k = 4;
            json_t *pr = json_pack("{s:i, s:b}", "weights_top_k", k, "binary_data_output", bin);
            a = v2_post(s.port, v2_body(&c, pr, NULL));
            cr_assert_eq(a.status, 200, "%.300s", a.body);
            float *vals = v2_out(&a, "attention_weights_top_k_values", rows * k, "FP32");
            float *idx = v2_out(&a, "attention_weights_top_k_indices", rows * k, "INT32");
            cr_assert_eq(check_topk(full, rows, c.S, k, vals, idx, bin), 0, "v %d bin %d", v, bin);
            cr_assert(strstr(a.body, "\"attention_weights\"") == NULL);
            free(vals), free(idx), free(a.body);

            pr = json_pack("{s:i, s:b}", "weights_pool", 4, "binary_data_output", bin);
            a = v2_post(s.port, v2_body(&c, pr, NULL));
            cr_assert_eq(a.status, 200, "%.300s", a.body);
            const size_t np = planes * ((c.L - 1) / 4 + 1) * ((c.S - 1) / 4 + 1);
            float *got = v2_out(&a, "attention_weights_pooled", np, "FP32");
            float *want = naive_pool(full, planes, c.L, c.S, 4);
            cr_assert(check_tensor("pooled", got, want, np, POOL_ATOL, POOL_RTOL));
            free(got), free(want), free(a.body);
        }
        /* outputs: the indices alone, as binary */
        json_t *outs = json_pack("[{s:s, s:{s:b}}]", "name", "attention_weights_top_k_indices",
                                 "parameters", "binary_data", 1);
        a = v2_post(s.port, v2_body(&c, json_pack("{s:i}", "weights_top_k", 2), outs));
        cr_assert_eq(a.status, 200, "%.300s", a.body);
        json_t *h = answer_head(&a);
        cr_assert_eq(json_array_size(json_object_get(h, "outputs")), 1);
        json_decref(h);
        float *idx = v2_out(&a, "attention_weights_top_k_indices", rows * 2, "INT32");
        float *vals = malloc(rows * 2 * sizeof *vals); /* the values from the full weights */
        for (size_t r = 0; r < rows; r++)
            for (int x = 0; x < 2; x++) {
                int32_t j;
                memcpy(&j, &idx[r * 2 + x], sizeof j);
                cr_assert(j >= 0 && j < c.S);
                vals[r * 2 + x] = full[r * c.S + j];
            }
        cr_assert_eq(check_topk(full, rows, c.S, 2, vals, idx, 1), 0);
        free(idx), free(vals), free(a.body), free(full);
        hcase_free(&c);
    }
    cr_assert_eq(server_stop(&s), 0);
}

Test(http_reduce, v2_refusals_and_outputs_the_parameters_do_not_make, .timeout = 60)
{
    struct server s;
    server_start(&s, NULL);
    struct hcase c = {.batched = 1, .N = 1, .L = 4, .S = 4, .H = 1, .E = 2};
    hcase_make(&c, 9);
    static const struct {
        const char *params, *outputs, *text;
    } cases[] = {
        {"{\"weights_top_k\": 2, \"weights_pool\": 2}", NULL,
         "parameters.weights_top_k and parameters.weights_pool cannot be used together"},
        {"{\"weights_top_k\": 2, \"need_weights\": false}", NULL, "need_weights is false"},
        {"{\"weights_pool\": 2.0}", NULL, "parameters.weights_pool must be an integer >= 1"},
        {"{\"weights_top_k\": 0}", NULL, "parameters.weights_top_k must be an integer >= 1"},
        {"{\"weights_top_k\": 2}", "[{\"name\": \"attention_weights\"}]",
         "the full weights are never made"},
        {"{}", "[{\"name\": \"attention_weights_pooled\"}]", "needs parameters.weights_pool"},
        {"{\"weights_pool\": 2}", "[{\"name\": \"attention_weights_top_k_values\"}]",
         "needs parameters.weights_top_k"},
        {"{\"weights_top_k\": 2}", "[{\"name\": \"attention_weights_topk\"}]", "unknown output"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *pr = json_loads(cases[i].params, 0, NULL);
        json_t *outs = cases[i].outputs ? json_loads(cases[i].outputs, 0, NULL) : NULL;
        struct http_reply a = v2_post(s.port, v2_body(&c, pr, outs));
        expect_v2_error(&a, 400, cases[i].text);
        free(a.body);
    }
    /* the metadata lists the reduced outputs */
    struct http_reply a = request(s.port, "GET", "/v2/models/attention", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    cr_assert(strstr(a.body, "\"attention_weights_top_k_indices\",\"datatype\":\"INT32\""),
              "%.600s", a.body);
    cr_assert(strstr(a.body, "\"attention_weights_pooled\""));
    free(a.body);
    hcase_free(&c);
    cr_assert_eq(server_stop(&s), 0);
}

/* ---------------------------------------------------------------------- */
/* L = S = 4096, 16 heads                                                  */

/* The full weights would be 268 M floats (1 GiB, 4× the default
 * max_weights_elements); the reduced ones fit the default limits, and the
 * server's peak memory stays far below the full weights'. Time is printed,
 * never asserted. */
Test(http_reduce, l4096_h16_topk_and_pool_under_the_default_limits, .timeout = 600)
{
    struct server s;
    server_start(&s, NULL);
    struct hcase c = {.batched = 1, .N = 1, .L = 4096, .S = 4096, .E = 64, .H = 16};
    unsigned long long seed = 4096;
    c.q = check_randv((size_t)c.L * c.E, 1.0f, &seed);
    const long long qs[3] = {1, c.L, c.E};
    json_t *r = json_pack("{s:o, s:i}", "query", b64_tensor(c.q, qs, 3, "float32"), "num_heads",
                          c.H);
    json_t *full = post_req(s.port, r, 413); /* the full weights: over the limit */
    json_decref(full);
    const long base = check_status_kib(s.pid, "VmHWM:");
    static const char *const keys[2] = {"weights_top_k", "weights_pool"};
    static const int vals[2] = {8, 32};
    for (int x = 0; x < 2; x++) {
        json_object_del(r, keys[0]);
        json_object_del(r, keys[1]);
        json_object_set_new(r, keys[x], json_integer(vals[x]));
        for (int enc = 0; enc < 2; enc++) {
            json_object_set_new(r, "output_encoding", json_string(enc ? "base64" : "json"));
            char *body = json_dumps(r, JSON_COMPACT);
            const double t0 = check_now();
            struct http_reply a = post(s.port, body);
            const double dt = check_now() - t0;
            free(body);
            cr_assert_eq(a.status, 200, "%ld %.300s", a.status, a.body);
            const long hwm = check_status_kib(s.pid, "VmHWM:");
            loud("L = S = 4096, H = 16, E = 64, %s %d, %s: %.2f s, %.1f MB answer, server "
                 "peak RSS %.0f MB (%.0f MB before the reduced requests)",
                 keys[x], vals[x], enc ? "base64" : "json", dt, (double)a.len / 1e6,
                 (double)hwm / 1024.0, (double)base / 1024.0);
            cr_assert_lt(hwm, 1024L * 1024L, "server peak RSS %ld KiB: not under 1 GiB", hwm);
            json_t *j = json_loadb(a.body, a.len, 0, NULL);
            cr_assert_not_null(j);
            json_t *t = x ? json_object_get(j, "attention_weights_pooled")
                          : json_object_get(json_object_get(j, "attention_weights_top_k"),
                                            "values");
            size_t n;
            float *f = flatten(t, &n);
            cr_assert_eq(n, x ? (size_t)16 * 128 * 128 : (size_t)16 * 4096 * 8);
            /* each row's top 8 are at most 1 and descending; each pooled plane averages 1/S */
            double sum = 0.0;
            for (size_t i = 0; i < n; i++) {
                cr_assert(f[i] >= 0.0f && f[i] <= 1.0f);
                if (!x && i % 8)
                    cr_assert(f[i] <= f[i - 1]);
                sum += (double)f[i];
            }
            if (x)
                cr_assert(fabs(sum / (double)n - 1.0 / 4096.0) < 1e-9, "mean %g", sum / n);
            free(f);
            json_decref(j);
            free(a.body);
        }
    }
    json_decref(r);
    free(c.q);
    cr_assert_eq(server_stop(&s), 0);
}
