/* sequence_shared.c -- see sequence_shared.h. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/sequence_shared.h"

unsigned seqt_seed = 12345;

float seqt_rnd(void)
{
    seqt_seed = seqt_seed * 1103515245u + 12345u;
    return (float)((seqt_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

void seqt_fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = seqt_rnd();
}

/* (n, w) floats as nested JSON arrays. */
json_t *seqt_mat(const float *x, int n, int w)
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
json_t *seqt_input(const char *name, const float *x, int n, int w)
{
    json_t *d = json_array();
    for (int i = 0; i < n * w; i++)
        json_array_append_new(d, json_real(x[i]));
    return json_pack("{s:s, s:s, s:[i, i], s:o}", "name", name, "datatype", "FP32", "shape", n,
                     w, "data", d);
}

/* POST body (taken) to path with extra headers (NULL-terminated or NULL). */
struct http_reply seqt_send_json(int port, const char *path, json_t *body,
                            const char *const *headers)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    struct http_reply a = request_with(port, "POST", path, text, strlen(text), NULL, 0, headers);
    free(text);
    return a;
}

struct http_reply seqt_attention(int port, json_t *body)
{
    return seqt_send_json(port, "/attention", body, NULL);
}

/* The numbers of field name of an /attention answer into out (at most max). */
size_t seqt_answer_floats(const struct http_reply *a, const char *name, float *out, size_t max)
{
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %s", a->body);
    size_t n = 0;
    flatten_into(json_object_get(j, name), out, &n, max);
    json_decref(j);
    return n;
}

long long seqt_int_of(const struct http_reply *a, const char *name)
{
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %s", a->body);
    json_t *v = json_object_get(j, name);
    cr_assert(json_is_integer(v), "no integer %s in %s", name, a->body);
    const long long x = json_integer_value(v);
    json_decref(j);
    return x;
}

/* x rounded as a cache of dtype 0 (FP32), 1 (FP16) or 2 (BF16) stores it. */
float seqt_round(int dtype, float x)
{
    if (dtype == 1 && x != 0 && isfinite(x)) { /* to nearest, ties to even (rint) */
        int ex;
        frexpf(x, &ex); /* |x| = m * 2^ex, m in [0.5, 1): a half's ulp is 2^(ex - 11) */
        const float ulp = ldexpf(1.0f, (ex - 1 < -14 ? -14 : ex - 1) - 10);
        const float r = rintf(x / ulp) * ulp;
        return fabsf(r) > 65504.0f ? copysignf(INFINITY, x) : r;
    }
    if (dtype == 2) { /* to nearest, ties to even */
        unsigned u;
        memcpy(&u, &x, sizeof u);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x, &u, sizeof x);
    }
    return x;
}

void seqt_expect_close(const float *got, const float *want, size_t n, const char *what)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, fabs((double)got[i] - want[i]));
    cr_assert(max <= 2e-5, "%s: max |diff| %g over %zu values", what, max, n);
}

/* ---------------------------------------------------------------------- */
/* The built-in model over POST /attention                                 */

/* A step with key/value of one row and query of one row (E wide, identity
 * weights): the body. */
json_t *seqt_tiny_step(const char *id, int start)
{
    float x[E];
    seqt_fill(x, E);
    json_t *b = json_pack("{s:o, s:i}", "query", seqt_mat(x, 1, E), "num_heads", H);
    if (id)
        json_object_set_new(b, "sequence_id", json_string(id));
    if (start)
        json_object_set_new(b, "sequence_start", json_true());
    return b;
}
