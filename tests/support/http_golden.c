/* http_golden.c -- the golden cases over HTTP, for test_http.c, test_v2.c
 * and test_http_variants.c; see http_golden.h. */
#include "tests/support/http_golden.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tests/support/check.h"

/* ---------------------------------------------------------------------- */
/* Tensors in three forms                                                  */

/* Flat floats of a response tensor, nested or base64; caller frees. */
float *flatten(json_t *t, size_t *n)
{
    if (json_is_object(t)) {
        const char *b64 = json_string_value(json_object_get(t, "b64"));
        size_t len = strlen(b64);
        float *f = malloc(len / 4 * 3 + 4);
        unsigned char *o = (unsigned char *)f;
        size_t k = 0;
        for (size_t i = 0; i + 4 <= len; i += 4) {
            unsigned v = 0;
            int pad = 0;
            for (int j = 0; j < 4; j++) {
                char ch = b64[i + j];
                int x = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? ch - 'a' + 26
                      : ch >= '0' && ch <= '9' ? ch - '0' + 52 : ch == '+' ? 62 : ch == '/' ? 63 : -1;
                if (x < 0)
                    pad++, x = 0;
                v = v << 6 | (unsigned)x;
            }
            o[k++] = (unsigned char)(v >> 16);
            if (pad < 2)
                o[k++] = (unsigned char)(v >> 8);
            if (pad < 1)
                o[k++] = (unsigned char)v;
        }
        *n = k / 4;
        return f;
    }
    /* nested arrays: depth-first */
    size_t cap = 1024, cnt = 0;
    float *f = malloc(cap * sizeof *f);
    json_t *stack[8];
    size_t idx[8];
    int d = 0;
    stack[0] = t, idx[0] = 0;
    while (d >= 0) {
        if (idx[d] == json_array_size(stack[d])) {
            d--;
            if (d >= 0)
                idx[d]++;
            continue;
        }
        json_t *e = json_array_get(stack[d], idx[d]);
        if (json_is_array(e)) {
            stack[++d] = e, idx[d] = 0;
            continue;
        }
        if (cnt == cap)
            f = realloc(f, (cap *= 2) * sizeof *f);
        f[cnt++] = (float)json_number_value(e);
        idx[d]++;
    }
    *n = cnt;
    return f;
}

static void shape_of(json_t *t, long long *shape, int *nd)
{
    json_t *sh = json_object_get(t, "shape");
    *nd = (int)json_array_size(sh);
    for (int i = 0; i < *nd; i++)
        shape[i] = json_integer_value(json_array_get(sh, (size_t)i));
}

static json_t *nest(json_t *data, const long long *shape, int nd, size_t *at)
{
    json_t *a = json_array();
    for (long long i = 0; i < shape[0]; i++)
        json_array_append_new(a, nd == 1 ? json_copy(json_array_get(data, (*at)++))
                                         : nest(data, shape + 1, nd - 1, at));
    return a;
}

/* Standard base64 of n bytes; caller frees. */
char *b64_encode(const unsigned char *bytes, size_t nb)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s = malloc(nb / 3 * 4 + 8);
    size_t o = 0;
    for (size_t i = 0; i < nb; i += 3) {
        unsigned v = (unsigned)bytes[i] << 16 | (i + 1 < nb ? (unsigned)bytes[i + 1] << 8 : 0) |
                     (i + 2 < nb ? bytes[i + 2] : 0);
        s[o++] = al[v >> 18], s[o++] = al[(v >> 12) & 63];
        s[o++] = i + 1 < nb ? al[(v >> 6) & 63] : '=';
        s[o++] = i + 2 < nb ? al[v & 63] : '=';
    }
    s[o] = '\0';
    return s;
}

/* Rewrite a flat {shape, data} tensor as nested arrays (form 1) or as
 * base64 (form 3; float data only). */
json_t *reform(json_t *t, int form)
{
    long long shape[4];
    int nd;
    shape_of(t, shape, &nd);
    json_t *data = json_object_get(t, "data");
    if (form == 1) {
        size_t at = 0;
        return nest(data, shape, nd, &at);
    }
    if (json_is_boolean(json_array_get(data, 0)))
        return json_copy(t);
    size_t n = json_array_size(data);
    unsigned char *bytes = malloc(n * 4 + 3);
    for (size_t i = 0; i < n; i++) {
        float f = (float)json_number_value(json_array_get(data, i));
        memcpy(bytes + 4 * i, &f, 4);
    }
    char *s = b64_encode(bytes, n * 4);
    json_t *r = json_pack("{s:O,s:s,s:s}", "shape", json_object_get(t, "shape"), "dtype",
                          "float32", "b64", s);
    free(bytes), free(s);
    return r;
}

/* Every tensor of a request rewritten in one form. */
static void reform_request(json_t *req, int form)
{
    const char *k;
    json_t *v;
    json_object_foreach(req, k, v) {
        if (json_is_object(v) && json_object_get(v, "shape"))
            json_object_set_new(req, k, reform(v, form));
    }
    json_t *w = json_object_get(req, "weights");
    json_object_foreach(w, k, v)
        json_object_set_new(w, k, reform(v, form));
}

/* POST a golden case in a form with an output encoding; compare. */
int check_golden(int port, const char *path, int form, int base64_out)
{
    json_t *g = json_load_file(path, 0, NULL);
    cr_assert_not_null(g, "%s", path);
    json_t *req = json_deep_copy(json_object_get(g, "request"));
    if (form != 2)
        reform_request(req, form);
    if (base64_out)
        json_object_set_new(req, "output_encoding", json_string("base64"));
    char *body = json_dumps(req, JSON_COMPACT);
    struct http_reply a = post(port, body);
    cr_assert_eq(a.status, 200, "%s form %d: %ld %s", path, form, a.status, a.body);
    json_t *resp = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(resp);
    json_t *exp = json_object_get(g, "expected"), *exp32 = json_object_get(g, "expected_float32");
    int ok = 1;
    const char *names[2] = {"output", "attention_weights"};
    for (int i = 0; i < 2; i++) {
        json_t *want = json_object_get(exp, names[i]), *got = json_object_get(resp, names[i]);
        if (!want) {
            ok &= got == NULL;
            continue;
        }
        cr_assert_not_null(got, "%s: no %s in response", path, names[i]);
        size_t nw, ng;
        float *fw = flatten(json_object_get(want, "data"), &nw), *fg = flatten(got, &ng);
        cr_assert_eq(ng, nw, "%s %s: %zu elements, want %zu", path, names[i], ng, nw);
        size_t n32 = 0;
        json_t *want32 = json_object_get(json_object_get(exp32, names[i]), "data");
        float *fw32 = want32 ? flatten(want32, &n32) : NULL;
        cr_assert(!fw32 || n32 == nw, "%s %s: expected_float32 has %zu elements", path,
                  names[i], n32);
        char label[300];
        snprintf(label, sizeof label, "%s %s (form %d, %s)", path, names[i], form,
                 base64_out ? "base64" : "json");
        ok &= i == 0 ? check_tensor_torch(label, fg, fw, fw32, nw, 1e-4, 1e-4)
                     : check_tensor_torch(label, fg, fw, fw32, nw, 1e-5, 0.0);
        free(fw), free(fg), free(fw32);
        /* the response's shape has the request's rank */
        if (i == 0 && !base64_out) {
            long long shape[4];
            int nd;
            shape_of(want, shape, &nd);
            json_t *x = got;
            for (int d = 0; d < nd; d++, x = json_array_get(x, 0))
                ok &= json_array_size(x) == (size_t)shape[d];
        }
    }
    json_decref(resp), json_decref(req), json_decref(g);
    free(body), free(a.body);
    return ok;
}

/* A v2 error: status, {"error": "<message containing text>"} and nothing else. */
void expect_v2_error(const struct http_reply *a, long status, const char *text)
{
    cr_assert_eq(a->status, status, "status %ld, want %ld: %s", a->status, status, a->body);
    json_t *j = json_loadb(a->body ? a->body : "", a->len, 0, NULL);
    cr_assert(j && json_is_string(json_object_get(j, "error")) && json_object_size(j) == 1,
              "not a v2 error body: %s", a->body);
    cr_assert(!text || strstr(json_string_value(json_object_get(j, "error")), text),
              "message '%s' lacks '%s'", a->body, text);
    json_decref(j);
}

/* ---------------------------------------------------------------------- */
/* Golden requests (POST /attention bodies) as v2 infer requests            */

struct http_reply infer(int port, const char *model, const char *body, size_t len,
                           long long hlen)
{
    char path[200], h[80];
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %lld", hlen);
    const char *headers[] = {h, NULL};
    return request_with(port, "POST", path, body, len, "application/octet-stream", 0,
                        hlen >= 0 ? headers : NULL);
}

/* GET path: asserts 200 and a JSON body; the body, parsed. */
json_t *http_get_json(int port, const char *path)
{
    struct http_reply a = request(port, "GET", path, NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "GET %s: %ld %s", path, a.status, a.body);
    json_t *j = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(j, "GET %s: not JSON: %s", path, a.body);
    free(a.body);
    return j;
}

/* The JSON part of an infer answer (all of it, or up to its
 * Inference-Header-Content-Length). */
json_t *answer_head(const struct http_reply *a)
{
    const char *hl = header(a, "Inference-Header-Content-Length");
    return json_loadb(a->body ? a->body : "", hl ? (size_t)atoll(hl) : a->len, 0, NULL);
}

/* The floats of output name in an infer answer (JSON or binary); NULL if absent. */
float *output_of(const struct http_reply *a, const char *name, size_t *n, json_t **shape)
{
    const char *hl = header(a, "Inference-Header-Content-Length");
    const size_t jl = hl ? (size_t)atoll(hl) : a->len;
    json_t *j = json_loadb(a->body, jl, 0, NULL);
    cr_assert_not_null(j, "answer JSON: %.300s", a->body);
    size_t at = jl, i;
    json_t *o;
    float *f = NULL;
    json_array_foreach(json_object_get(j, "outputs"), i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        const size_t bytes = bs ? (size_t)json_integer_value(bs) : 0;
        if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0) {
            if (shape)
                *shape = json_incref(json_object_get(o, "shape"));
            if (bs) {
                cr_assert_leq(at + bytes, a->len, "binary data past the end");
                *n = bytes / 4;
                f = malloc(bytes + 4);
                memcpy(f, a->body + at, bytes);
            } else {
                f = floats_of(json_object_get(o, "data"), n);
            }
        }
        at += bytes;
    }
    if (hl)
        cr_assert_eq(at, a->len, "binary outputs do not fill the body");
    json_decref(j);
    return f;
}

/* The numbers of a nested JSON array, in order, into out (at most max). */
void flatten_into(json_t *v, float *out, size_t *n, size_t max)
{
    if (json_is_number(v) && *n < max)
        out[(*n)++] = (float)json_number_value(v);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
        flatten_into(e, out, n, max);
}

/* The golden case at path through v2 (model: a server-held one, or NULL =
 * the built-in model with the weights as inputs), JSON or binary. */
int v2_golden(int port, const char *path, const char *model, int binary)
{
    json_t *g = json_load_file(path, 0, NULL);
    cr_assert_not_null(g, "%s", path);
    json_t *v2 = golden_v2(json_object_get(g, "request"), 0);
    json_t *id = json_string(path);
    json_object_set_new(v2, "id", id);
    if (binary)
        json_object_set_new(json_object_get(v2, "parameters"), "binary_data_output", json_true());
    size_t len;
    long long hlen;
    char *body = golden_v2_body(v2, binary ? GOLDEN_V2_BINARY : GOLDEN_V2_JSON, &len, &hlen);
    struct http_reply a = infer(port, model ? model : "attention", body, len, hlen);
    cr_assert_eq(a.status, 200, "%s (%s): %ld %.400s", path, binary ? "binary" : "json",
                 a.status, a.body);
    cr_assert(!binary || strstr(a.headers, "application/octet-stream"), "%s", a.headers);
    json_t *exp = json_object_get(g, "expected"), *exp32 = json_object_get(g, "expected_float32");
    int ok = 1;
    const char *names[2] = {"output", "attention_weights"};
    for (int i = 0; i < 2; i++) {
        json_t *want = json_object_get(exp, names[i]);
        size_t ng = 0, nw = 0, n32 = 0;
        json_t *shape = NULL;
        float *fg = output_of(&a, names[i], &ng, &shape);
        if (!want) {
            ok &= fg == NULL;
            continue;
        }
        cr_assert_not_null(fg, "%s: no %s", path, names[i]);
        ok &= json_equal(shape, json_object_get(want, "shape"));
        float *fw = floats_of(json_object_get(want, "data"), &nw);
        json_t *w32 = json_object_get(json_object_get(exp32, names[i]), "data");
        float *fw32 = w32 ? floats_of(w32, &n32) : NULL;
        cr_assert_eq(ng, nw, "%s %s: %zu elements, want %zu", path, names[i], ng, nw);
        char label[300];
        snprintf(label, sizeof label, "%s %s (v2 %s)", path, names[i], binary ? "binary" : "json");
        ok &= i == 0 ? check_tensor_torch(label, fg, fw, fw32, nw, 1e-4, 1e-4)
                     : check_tensor_torch(label, fg, fw, fw32, nw, 1e-5, 0.0);
        free(fg), free(fw), free(fw32);
        json_decref(shape);
    }
    /* the id is echoed */
    json_t *head = answer_head(&a);
    ok &= head && json_equal(json_object_get(head, "id"), json_object_get(v2, "id"));
    ok &= head && strcmp(json_string_value(json_object_get(head, "model_name")),
                         model ? model : "attention") == 0;
    json_decref(head);
    json_decref(v2), json_decref(g);
    free(body), free(a.body);
    return ok;
}
