/* batch_shared.c -- see batch_shared.h. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/check.h"
#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/server/batch_shared.h"
#include "tests/server/sequence_shared.h"

const char *const bt_dtype_names[3] = {"FP32", "FP16", "BF16"};

int bt_kvw(const struct bt_shape *sh)
{
    return sh->hkv * (sh->e / sh->h);
}

void bt_step_new(struct bt_step *st, const struct bt_shape *sh, int B, int L, int S,
                 struct bt_hist *const *hist)
{
    const int w = bt_kvw(sh);
    cr_assert(B <= BT_MAXB && L <= BT_MAXL && L <= S && sh->e <= BT_MAXW);
    st->B = B, st->L = L, st->S = S;
    for (int b = 0; b < B; b++) {
        seqt_fill(st->q[b], (size_t)L * sh->e);
        seqt_fill(st->k[b], (size_t)S * w);
        seqt_fill(st->v[b], (size_t)S * w);
        struct bt_hist *h = hist ? hist[b] : NULL;
        if (!h)
            continue;
        cr_assert_leq(h->len + S, BT_MAXT, "a history longer than the tests need");
        for (int j = 0; j < S * w; j++) {
            h->k[h->len * w + j] = seqt_round((int)sh->dtype, st->k[b][j]);
            h->v[h->len * w + j] = seqt_round((int)sh->dtype, st->v[b][j]);
        }
        h->len += S;
    }
}

void bt_step_undo(const struct bt_step *st, struct bt_hist *const *hist)
{
    for (int b = 0; b < st->B; b++)
        if (hist[b])
            hist[b]->len -= st->S;
}

/* ---------------------------------------------------------------------- */
/* Requests                                                                */

/* B items' rows (n rows w wide, item b at x + b·stride): (B, n, w), or,
 * for one item outside the batch form, (n, w). */
static json_t *rows(const float *x, size_t stride, int B, int n, int w, int array)
{
    if (!array)
        return seqt_mat(x, n, w);
    json_t *a = json_array();
    for (int b = 0; b < B; b++)
        json_array_append_new(a, seqt_mat(x + (size_t)b * stride, n, w));
    return a;
}

json_t *bt_post_body(const struct bt_shape *sh, const struct bt_step *st, json_t *ids, int layer)
{
    const int array = json_is_array(ids), w = bt_kvw(sh);
    cr_assert(array || st->B == 1);
    const size_t qs = BT_MAXL * BT_MAXW, ks = BT_MAXT * BT_MAXW;
    json_t *b = json_pack("{s:o, s:o, s:o, s:o, s:i, s:i, s:b}", "sequence_id", ids, "query",
                          rows(st->q[0], qs, st->B, st->L, sh->e, array), "key",
                          rows(st->k[0], ks, st->B, st->S, w, array), "value",
                          rows(st->v[0], ks, st->B, st->S, w, array), "num_heads", sh->h,
                          "num_kv_heads", sh->hkv, "need_weights", 1);
    if (layer >= 0)
        json_object_set_new(b, "layer", json_integer(layer));
    return b;
}

/* A v2 input of n flat floats with the shape (B, rows, w), or (rows, w). */
static json_t *v2_input(const char *name, const float *x, int B, int n, int w, int array,
                        size_t stride)
{
    json_t *d = json_array();
    for (int b = 0; b < B; b++)
        for (int i = 0; i < n * w; i++)
            json_array_append_new(d, json_real(x[b * stride + (size_t)i]));
    json_t *shape = array ? json_pack("[i, i, i]", B, n, w) : json_pack("[i, i]", n, w);
    return json_pack("{s:s, s:s, s:o, s:o}", "name", name, "datatype", "FP32", "shape", shape,
                     "data", d);
}

json_t *bt_v2_body(const struct bt_shape *sh, const struct bt_step *st, const char *const *ids,
                   int n, enum bt_ids how, int layer)
{
    const int array = how == BT_UINT64 || how == BT_BYTES, w = bt_kvw(sh);
    json_t *in = json_array(), *par = json_object();
    if (st) {
        n = st->B;
        cr_assert(array || n == 1);
        json_array_append_new(in, v2_input("query", st->q[0], n, st->L, sh->e, array,
                                           BT_MAXL * BT_MAXW));
        json_array_append_new(in, v2_input("key", st->k[0], n, st->S, w, array,
                                           BT_MAXT * BT_MAXW));
        json_array_append_new(in, v2_input("value", st->v[0], n, st->S, w, array,
                                           BT_MAXT * BT_MAXW));
    }
    if (array) {
        json_t *d = json_array();
        for (int b = 0; b < n; b++)
            json_array_append_new(d, how == BT_BYTES
                                         ? json_string(ids[b])
                                         : json_integer((json_int_t)strtoull(ids[b], NULL, 10)));
        json_array_append_new(in, json_pack("{s:s, s:s, s:[i], s:o}", "name", "sequence_id",
                                            "datatype", how == BT_BYTES ? "BYTES" : "UINT64",
                                            "shape", n, "data", d));
    } else {
        json_object_set_new(par, "sequence_id",
                            how == BT_PARAM_INT
                                ? json_integer((json_int_t)strtoull(ids[0], NULL, 10))
                                : json_string(ids[0]));
    }
    json_object_set_new(par, "num_heads", json_integer(sh->h));
    json_object_set_new(par, "num_kv_heads", json_integer(sh->hkv));
    if (layer >= 0)
        json_object_set_new(par, "layer", json_integer(layer));
    return json_pack("{s:o, s:o}", "inputs", in, "parameters", par);
}

json_t *bt_v2_bools(const char *name, const int *flags, int n)
{
    json_t *d = json_array();
    for (int b = 0; b < n; b++)
        json_array_append_new(d, json_boolean(flags[b]));
    return json_pack("{s:s, s:s, s:[i], s:o}", "name", name, "datatype", "BOOL", "shape", n,
                     "data", d);
}

/* Append the binary form of input in's data to *bin (length *blen). */
static void put_binary(json_t *in, unsigned char **bin, size_t *blen)
{
    const char *dt = json_string_value(json_object_get(in, "datatype"));
    json_t *d = json_object_get(in, "data"), *e;
    size_t i, need = 0;
    json_array_foreach(d, i, e) {
        need += json_is_string(e) ? 4 + json_string_length(e) : 8;
    }
    *bin = realloc(*bin, *blen + need + 1);
    cr_assert_not_null(*bin);
    const size_t at = *blen;
    json_array_foreach(d, i, e) {
        unsigned char *p = *bin + *blen;
        if (!strcmp(dt, "FP32")) {
            const float f = (float)json_number_value(e);
            memcpy(p, &f, 4), *blen += 4;
        } else if (!strcmp(dt, "BOOL")) {
            *p = (unsigned char)json_is_true(e), *blen += 1;
        } else if (!strcmp(dt, "UINT64")) {
            const uint64_t u = (uint64_t)json_integer_value(e);
            for (int k = 0; k < 8; k++)
                p[k] = (unsigned char)(u >> (8 * k));
            *blen += 8;
        } else { /* BYTES: a 4-byte little-endian length, then the bytes */
            const size_t n = json_string_length(e);
            for (int k = 0; k < 4; k++)
                p[k] = (unsigned char)(n >> (8 * k));
            memcpy(p + 4, json_string_value(e), n), *blen += 4 + n;
        }
    }
    json_object_del(in, "data");
    json_object_set_new(in, "parameters",
                        json_pack("{s:I}", "binary_data_size", (json_int_t)(*blen - at)));
}

struct http_reply bt_v2_send(int port, json_t *v2, int binary, const char *line)
{
    unsigned char *bin = NULL;
    size_t blen = 0;
    if (binary) {
        size_t i;
        json_t *in;
        json_array_foreach(json_object_get(v2, "inputs"), i, in) {
            put_binary(in, &bin, &blen);
        }
        json_t *par = json_object_get(v2, "parameters");
        if (!par)
            json_object_set_new(v2, "parameters", par = json_object());
        json_object_set_new(par, "binary_data_output", json_true());
    }
    char *head = json_dumps(v2, JSON_COMPACT);
    json_decref(v2);
    const size_t hl = strlen(head);
    char *body = realloc(head, hl + blen + 1);
    cr_assert_not_null(body);
    if (blen)
        memcpy(body + hl, bin, blen);
    body[hl + blen] = '\0';
    free(bin);
    char h[80];
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %zu", hl);
    const char *headers[3] = {NULL, NULL, NULL};
    int nh = 0;
    if (binary)
        headers[nh++] = h;
    if (line)
        headers[nh++] = line;
    struct http_reply a = request_with(port, "POST", "/v2/models/attention/infer", body,
                                       hl + blen, "application/octet-stream", 0, headers);
    free(body);
    return a;
}

/* ---------------------------------------------------------------------- */
/* Answers                                                                 */

/* The dimensions of a nested JSON array (descending its first elements). */
static int nested_shape(json_t *t, long long *shape, int max)
{
    int r = 0;
    for (; json_is_array(t) && r < max; t = json_array_get(t, 0))
        shape[r++] = (long long)json_array_size(t);
    return r;
}

void bt_post_answer(struct http_reply *a, struct bt_answer *ans)
{
    cr_assert_eq(a->status, 200, "%ld %.600s", a->status, a->body);
    json_t *j = json_loadb(a->body, a->len, 0, NULL);
    cr_assert_not_null(j, "not JSON: %.300s", a->body);
    memset(ans, 0, sizeof *ans);
    json_t *o = json_object_get(j, "output"), *w = json_object_get(j, "attention_weights");
    ans->ord = nested_shape(o, ans->oshape, 4);
    ans->wrd = nested_shape(w, ans->wshape, 5);
    flatten_into(o, ans->out, &ans->nout, sizeof ans->out / sizeof *ans->out);
    flatten_into(w, ans->w, &ans->nw, sizeof ans->w / sizeof *ans->w);
    json_t *cl = json_object_get(j, "cache_length"), *e;
    size_t i;
    if (json_is_integer(cl))
        ans->len[ans->nlen++] = json_integer_value(cl);
    json_array_foreach(cl, i, e) {
        cr_assert(json_is_integer(e) && i < BT_MAXB, "cache_length: %.300s", a->body);
        ans->len[ans->nlen++] = json_integer_value(e);
    }
    cr_assert_gt(ans->nlen, 0, "no cache_length: %.300s", a->body);
    ans->B = ans->ord == 3 ? (int)ans->oshape[0] : 1;
    json_decref(j);
    free(a->body);
    a->body = NULL;
}

/* Output "cache_length" of a v2 answer: INT64 [B], JSON or binary. */
static void v2_lengths(const struct http_reply *a, struct bt_answer *ans)
{
    const char *hl = header(a, "Inference-Header-Content-Length");
    const size_t jl = hl ? (size_t)strtoull(hl, NULL, 10) : a->len;
    json_t *j = json_loadb(a->body, jl, 0, NULL), *o;
    size_t at = jl, i;
    int found = 0;
    json_array_foreach(json_object_get(j, "outputs"), i, o) {
        json_t *bs = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
        const size_t bytes = bs ? (size_t)json_integer_value(bs) : 0;
        if (!strcmp(json_string_value(json_object_get(o, "name")), "cache_length")) {
            found = 1;
            cr_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "INT64");
            json_t *shape = json_object_get(o, "shape");
            cr_assert(json_array_size(shape) == 1, "cache_length's shape: %.400s", a->body);
            const size_t n = (size_t)json_integer_value(json_array_get(shape, 0));
            cr_assert(n <= BT_MAXB && (!bs || bytes == 8 * n), "%.400s", a->body);
            for (size_t b = 0; b < n; b++) {
                long long v = 0;
                if (bs)
                    memcpy(&v, a->body + at + 8 * b, 8); /* little-endian, as x86 */
                else
                    v = json_integer_value(json_array_get(json_object_get(o, "data"), b));
                ans->len[ans->nlen++] = v;
            }
        }
        at += bytes;
    }
    cr_assert(found, "no output cache_length: %.400s", a->body);
    json_decref(j);
}

void bt_v2_answer(struct http_reply *a, int array, struct bt_answer *ans)
{
    cr_assert_eq(a->status, 200, "%ld %.600s", a->status, a->body);
    memset(ans, 0, sizeof *ans);
    const char *names[2] = {"output", "attention_weights"};
    for (int t = 0; t < 2; t++) {
        json_t *shape = NULL, *d;
        size_t n, i;
        float *f = output_of(a, names[t], &n, &shape);
        cr_assert_not_null(f, "no %s: %.400s", names[t], a->body);
        cr_assert_leq(n, t ? sizeof ans->w / sizeof *ans->w : sizeof ans->out / sizeof *ans->out);
        memcpy(t ? ans->w : ans->out, f, n * sizeof *f);
        *(t ? &ans->nw : &ans->nout) = n;
        json_array_foreach(shape, i, d)
            (t ? ans->wshape : ans->oshape)[i] = json_integer_value(d);
        *(t ? &ans->wrd : &ans->ord) = (int)json_array_size(shape);
        json_decref(shape);
        free(f);
    }
    if (array) {
        v2_lengths(a, ans);
    } else {
        json_t *h = answer_head(a);
        json_t *cl = json_object_get(json_object_get(h, "parameters"), "cache_length");
        cr_assert(json_is_integer(cl), "no parameters.cache_length: %.400s", a->body);
        ans->len[ans->nlen++] = json_integer_value(cl);
        json_decref(h);
    }
    ans->B = ans->ord == 3 ? (int)ans->oshape[0] : 1;
    free(a->body);
    a->body = NULL;
}

/* The stateless answer over hist for query q (L rows): out (L, e), w
 * (h, L, len). */
static void stateless(int port, const struct bt_shape *sh, const struct bt_hist *hist,
                      const float *q, int L, float *out, float *w)
{
    const int kw = bt_kvw(sh);
    json_t *b = json_pack("{s:o, s:o, s:o, s:i, s:i, s:s, s:b}", "query", seqt_mat(q, L, sh->e),
                          "key", seqt_mat(hist->k, hist->len, kw), "value",
                          seqt_mat(hist->v, hist->len, kw), "num_heads", sh->h, "num_kv_heads",
                          sh->hkv, "attn_mask", "causal_lower_right", "need_weights", 1);
    struct http_reply a = seqt_attention(port, b);
    cr_assert_eq(a.status, 200, "stateless: %ld %s", a.status, a.body);
    const size_t no = (size_t)L * sh->e, nw = (size_t)sh->h * L * hist->len;
    cr_assert_eq(seqt_answer_floats(&a, "output", out, no), no);
    cr_assert_eq(seqt_answer_floats(&a, "attention_weights", w, nw), nw);
    free(a.body);
}

void bt_check(int port, const struct bt_shape *sh, const struct bt_step *st,
              struct bt_hist *const *hist, const struct bt_answer *ans, int array,
              const char *what)
{
    const int B = st->B, L = st->L, e = sh->e, h = sh->h;
    int smax = 0;
    for (int b = 0; b < B; b++)
        smax = hist[b]->len > smax ? hist[b]->len : smax;
    const long long ow[3] = {B, L, e}, ww[4] = {B, h, L, smax};
    const int od = array ? 3 : 2, wd = array ? 4 : 3;
    cr_assert_eq(ans->ord, od, "%s: output of rank %d", what, ans->ord);
    cr_assert_eq(ans->wrd, wd, "%s: attention_weights of rank %d", what, ans->wrd);
    for (int d = 0; d < od; d++)
        cr_assert_eq(ans->oshape[d], ow[d + 3 - od], "%s: output dim %d", what, d);
    for (int d = 0; d < wd; d++)
        cr_assert_eq(ans->wshape[d], ww[d + 4 - wd], "%s: weights dim %d is %lld, want %lld",
                     what, d, ans->wshape[d], ww[d + 4 - wd]);
    cr_assert_eq(ans->nlen, B, "%s: %d cache lengths", what, ans->nlen);
    for (int b = 0; b < B; b++) {
        const int len = hist[b]->len;
        char label[160];
        snprintf(label, sizeof label, "%s, item %d", what, b);
        cr_assert_eq(ans->len[b], len, "%s: cache_length %lld, want %d", label, ans->len[b], len);
        float want[BT_MAXL * BT_MAXW], wwant[BT_MAXH * BT_MAXL * BT_MAXT];
        float wgot[BT_MAXH * BT_MAXL * BT_MAXT];
        stateless(port, sh, hist[b], st->q[b], L, want, wwant);
        cr_assert(check_tensor(label, ans->out + (size_t)b * L * e, want, (size_t)L * e,
                               OUT_ATOL, OUT_RTOL), "%s: output differs", label);
        int nonzero = 0;
        for (int r = 0; r < h * L; r++) /* (head, query row) of item b */
            for (int j = 0; j < smax; j++) {
                const float x = ans->w[((size_t)b * h * L + r) * smax + j];
                if (j < len)
                    wgot[r * len + j] = x;
                else
                    nonzero += x != 0.0f;
            }
        cr_assert_eq(nonzero, 0, "%s: %d weights past the item's length are not 0", label,
                     nonzero);
        cr_assert(check_tensor(label, wgot, wwant, (size_t)h * L * len, W_ATOL, 0.0),
                  "%s: weights differ", label);
    }
}

void bt_post_step_ok(int port, const struct bt_shape *sh, const struct bt_step *st,
                     struct bt_hist *const *hist, json_t *ids, int layer, int start,
                     const char *what)
{
    const int array = json_is_array(ids);
    json_t *b = bt_post_body(sh, st, ids, layer);
    if (start) {
        json_object_set_new(b, "sequence_start", json_true());
        json_object_set_new(b, "kv_cache_dtype", json_string(bt_dtype_names[sh->dtype]));
    }
    struct http_reply a = seqt_attention(port, b);
    if (a.status != 200)
        cr_assert_fail("%s: %ld %.600s", what, a.status, a.body);
    struct bt_answer ans;
    bt_post_answer(&a, &ans);
    bt_check(port, sh, st, hist, &ans, array, what);
}

void bt_v2_step_ok(int port, const struct bt_shape *sh, const struct bt_step *st,
                   struct bt_hist *const *hist, const char *const *ids, enum bt_ids how,
                   int binary, int layer, int start, const char *what)
{
    const int array = how == BT_UINT64 || how == BT_BYTES;
    json_t *v = bt_v2_body(sh, st, ids, st->B, how, layer);
    if (start) {
        const int all[BT_MAXB] = {1, 1, 1, 1};
        if (array)
            json_array_append_new(json_object_get(v, "inputs"),
                                  bt_v2_bools("sequence_start", all, st->B));
        else
            json_object_set_new(json_object_get(v, "parameters"), "sequence_start", json_true());
        json_object_set_new(json_object_get(v, "parameters"), "kv_cache_dtype",
                            json_string(bt_dtype_names[sh->dtype]));
    }
    struct http_reply a = bt_v2_send(port, v, binary, NULL);
    if (a.status != 200)
        cr_assert_fail("%s: %ld %.600s", what, a.status, a.body);
    cr_assert(!binary || strstr(a.headers, "application/octet-stream"), "%s", a.headers);
    struct bt_answer ans;
    bt_v2_answer(&a, array, &ans);
    bt_check(port, sh, st, hist, &ans, array, what);
}

void bt_expect_refusal(const struct http_reply *a, long status, const char *text,
                       const char *more)
{
    cr_assert_eq(a->status, status, "want %ld, got %ld: %.600s", status, a->status, a->body);
    const char *t[2] = {text, more};
    for (int i = 0; i < 2; i++)
        cr_assert(!t[i] || (a->body && strstr(a->body, t[i])),
                  "the refusal does not say \"%s\": %.600s", t[i], a->body);
}

long long bt_probe(int port, const struct bt_shape *sh, const char *id, int layer,
                   struct bt_hist *hist)
{
    struct bt_step st;
    struct bt_hist *const h[1] = {hist};
    bt_step_new(&st, sh, 1, 1, 1, h);
    char what[200];
    snprintf(what, sizeof what, "probe of '%s' at layer %d", id, layer);
    bt_post_step_ok(port, sh, &st, h, json_string(id), layer, 0, what);
    return hist->len;
}

void bt_expect_no_sequences(int port)
{
    cr_assert_eq(server_metric(port, "attention_sequences_active"), 0);
    cr_assert_eq(server_metric(port, "attention_sequence_bytes"), 0);
}
