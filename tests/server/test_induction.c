/* test_induction.c -- the trained induction model shipped in models/
 * (induction-l0 and induction-l1, written by models/train_induction.py)
 * over HTTP, against the real server started as `make run` starts it, on
 * its default model repository.
 *
 * The stack is run as a client runs it, from the served config only (GET
 * /v2/models/induction-l0/config.json: vocab, embedding, positions,
 * unembedding, circuit): x0 = embedding[token] + positions[i], layer 0 by
 * v2 infer, x1 = x0 + its output, layer 1 by v2 infer, x2 = x1 + its
 * output, logits = x2 · unembeddingᵀ. On NSEQ random sequences of P
 * tokens with a segment of random length m (6 … P/2) at a random place s
 * repeated right after itself (a fixed seed), the three figures the issue
 * asks for must hold, measured as the training script measures them
 * (config.json: circuit.description): the next-token accuracy inside the
 * second copy (queries s+m … s+2m−2) at least ACC_MIN; the config's
 * previous-token head (layer 0) with a mean weight of at least PREV_MIN on
 * key i−1; the config's induction head (layer 1) with a mean weight of at
 * least IND_MIN on key i−m+1 over the second copy; those heads are the
 * ones of their layer that look there most (layer 1's heads may share the
 * job: within HEAD_TIE), and every head's figure is close to the one the
 * script measured (training.*_per_head). One step through sequences on both
 * layers equals the stateless row. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

#define L0 "induction-l0"
#define L1 "induction-l1"
#define ACC_MIN 0.9  /* next-token accuracy inside the second copy */
#define PREV_MIN 0.5 /* the previous-token head's mean weight on key i-1 */
#define IND_MIN 0.4  /* the induction head's mean weight on key i-m+1 */
#define M_MIN 6      /* the repeated segment: M_MIN ... P/2 tokens */
#define NSEQ 256     /* sequences measured */
#define NREQ 64      /* sequences per infer request */
#define TOL 2e-5     /* a sequence's row against the stateless one */
#define FIGURE_TOL 0.05 /* a figure here against the script's, on other sequences */
#define HEAD_TIE 0.03   /* layer-1 heads this close do the same job */

/* A rows × cols table of config.json as floats; caller frees. */
static float *table(json_t *cfg, const char *key, int rows, int cols)
{
    json_t *t = json_object_get(cfg, key);
    cr_assert_eq((int)json_array_size(t), rows, "%s: %zu rows, not %d", key,
                 json_array_size(t), rows);
    float *f = malloc((size_t)rows * cols * sizeof *f);
    cr_assert_not_null(f);
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array_get(t, (size_t)r);
        cr_assert_eq((int)json_array_size(row), cols, "%s row %d: not %d numbers", key, r, cols);
        for (int c = 0; c < cols; c++)
            f[(size_t)r * cols + c] = (float)json_number_value(json_array_get(row, (size_t)c));
    }
    return f;
}

/* The stack as a client sees it: sizes and tables of induction-l0's config. */
struct stack {
    json_t *cfg;
    int V, P, E, H;
    float *embedding, *positions, *unembedding;
    int prev_head, ind_head;
    double prev_weight, ind_weight, accuracy;
};

static void stack_read(struct stack *k, int port)
{
    k->cfg = http_get_json(port, "/v2/models/" L0 "/config.json");
    json_t *c = k->cfg, *in = json_object_get(c, "input");
    cr_assert_str_eq(json_string_value(json_object_get(c, "format")), "torch_mha");
    cr_assert_str_eq(json_string_value(json_object_get(c, "next_layer")), L1);
    json_t *d = json_object_get(c, "defaults");
    cr_assert_str_eq(json_string_value(json_object_get(d, "attn_mask")), "causal");
    cr_assert_null(json_object_get(d, "positional_encoding"), "a positional_encoding default "
                   "cannot be stepped in a sequence");
    k->H = (int)json_integer_value(json_object_get(c, "num_heads"));
    k->P = (int)json_integer_value(json_object_get(in, "length"));
    cr_assert_str_eq(json_string_value(json_object_get(in, "tokens")), "vocab");
    json_t *vocab = json_object_get(c, "vocab");
    k->V = (int)json_array_size(vocab);
    for (int v = 0; v < k->V; v++) {
        const char *s = json_string_value(json_array_get(vocab, (size_t)v));
        cr_assert(s && strlen(s) == 1 && s[0] > ' ' && s[0] < 127, "vocab %d is not one "
                  "printable character", v);
    }
    k->E = (int)json_array_size(json_array_get(json_object_get(c, "embedding"), 0));
    cr_assert(k->V >= 2 && k->P >= 2 * M_MIN && k->H >= 1 && k->E % k->H == 0,
              "V %d P %d E %d H %d", k->V, k->P, k->E, k->H);
    k->embedding = table(c, "embedding", k->V, k->E);
    k->positions = table(c, "positions", k->P, k->E);
    k->unembedding = table(c, "unembedding", k->V, k->E);

    json_t *ci = json_object_get(c, "circuit");
    json_t *pt = json_object_get(ci, "previous_token"), *ih = json_object_get(ci, "induction");
    cr_assert_eq(json_integer_value(json_object_get(pt, "layer")), 0);
    cr_assert_eq(json_integer_value(json_object_get(ih, "layer")), 1);
    k->prev_head = (int)json_integer_value(json_object_get(pt, "head"));
    k->ind_head = (int)json_integer_value(json_object_get(ih, "head"));
    cr_assert(k->prev_head >= 0 && k->prev_head < k->H && k->ind_head >= 0 &&
              k->ind_head < k->H, "circuit heads %d, %d of %d", k->prev_head, k->ind_head, k->H);
    k->prev_weight = json_number_value(json_object_get(pt, "mean_weight"));
    k->ind_weight = json_number_value(json_object_get(ih, "mean_weight"));
    k->accuracy = json_number_value(json_object_get(ci, "accuracy"));
    cr_assert(json_is_string(json_object_get(ci, "description")));

    json_t *c1 = http_get_json(port, "/v2/models/" L1 "/config.json");
    cr_assert_str_eq(json_string_value(json_object_get(c1, "previous_layer")), L0);
    cr_assert_eq(json_integer_value(json_object_get(c1, "num_heads")), k->H);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(c1, "defaults"),
                                                       "attn_mask")), "causal");
    json_decref(c1);
}

static void stack_free(struct stack *k)
{
    free(k->embedding), free(k->positions), free(k->unembedding);
    json_decref(k->cfg);
}

/* x0 of n sequences of tokens (n, P): embedding row plus position row. */
static void embed(const struct stack *k, const int *tok, int n, float *x)
{
    for (int s = 0; s < n; s++)
        for (int i = 0; i < k->P; i++)
            for (int e = 0; e < k->E; e++)
                x[((size_t)s * k->P + i) * k->E + e] =
                    k->embedding[(size_t)tok[s * k->P + i] * k->E + e] +
                    k->positions[(size_t)i * k->E + e];
}

/* One v2 infer of model on rows × E floats of x, shaped shape[0..rank-1],
 * with parameters params (taken; NULL: none): the output into out and the
 * weights into w (either may be NULL). */
static void run_layer(int port, const char *model, const float *x, int rank, const int *shape,
                      json_t *params, float *out, float *w)
{
    json_t *sh = json_array(), *data = json_array();
    size_t n = 1;
    for (int r = 0; r < rank; r++)
        json_array_append_new(sh, json_integer(shape[r])), n *= (size_t)shape[r];
    for (size_t i = 0; i < n; i++)
        json_array_append_new(data, json_real(x[i]));
    json_t *req = json_pack("{s:[{s:s,s:s,s:o,s:o}]}", "inputs", "name", "query", "datatype",
                            "FP32", "shape", sh, "data", data);
    if (params)
        json_object_set_new(req, "parameters", params);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    struct http_reply a = infer(port, model, body, strlen(body), -1);
    free(body);
    cr_assert_eq(a.status, 200, "%s: %ld %.300s", model, a.status, a.body);
    size_t got;
    float *o = output_of(&a, "output", &got, NULL);
    cr_assert(o && got == n, "%s: output of %zu floats, not %zu", model, got, n);
    if (out)
        memcpy(out, o, n * sizeof *o);
    free(o);
    if (w) {
        float *ww = output_of(&a, "attention_weights", &got, NULL);
        cr_assert_not_null(ww, "%s: no attention_weights", model);
        memcpy(w, ww, got * sizeof *ww);
        free(ww);
    }
    free(a.body);
}

/* The whole stack on n sequences of tokens: x0, x1, x2 (n, P, E) and both
 * layers' weights (n, H, P, P). */
struct pass {
    float *x0, *x1, *x2, *w0, *w1;
};

static void pass_run(const struct stack *k, int port, const int *tok, int n, struct pass *p)
{
    const size_t nx = (size_t)n * k->P * k->E, nw = (size_t)n * k->H * k->P * k->P;
    p->x0 = malloc(nx * sizeof(float)), p->x1 = malloc(nx * sizeof(float));
    p->x2 = malloc(nx * sizeof(float));
    p->w0 = malloc(nw * sizeof(float)), p->w1 = malloc(nw * sizeof(float));
    cr_assert(p->x0 && p->x1 && p->x2 && p->w0 && p->w1);
    const int shape[] = {n, k->P, k->E};
    embed(k, tok, n, p->x0);
    run_layer(port, L0, p->x0, 3, shape, NULL, p->x1, p->w0);
    for (size_t i = 0; i < nx; i++)
        p->x1[i] += p->x0[i];
    run_layer(port, L1, p->x1, 3, shape, NULL, p->x2, p->w1);
    for (size_t i = 0; i < nx; i++)
        p->x2[i] += p->x1[i];
}

static void pass_free(struct pass *p)
{
    free(p->x0), free(p->x1), free(p->x2), free(p->w0), free(p->w1);
}

/* The token the logits x · unembeddingᵀ of one row of x2 pick. */
static int predict(const struct stack *k, const float *x)
{
    int best = 0;
    double best_z = -INFINITY;
    for (int v = 0; v < k->V; v++) {
        double z = 0;
        for (int e = 0; e < k->E; e++)
            z += (double)x[e] * k->unembedding[(size_t)v * k->E + e];
        if (z > best_z)
            best_z = z, best = v;
    }
    return best;
}

static unsigned lcg = 2023;

static int draw(int n)
{
    lcg = lcg * 1103515245u + 12345u;
    return (int)((lcg >> 16) % (unsigned)n);
}

/* n random sequences (n, P) of tokens, each with a segment of m[s] tokens
 * at start[s] repeated right after itself. */
static void sequences(const struct stack *k, int n, int *tok, int *start, int *m)
{
    for (int s = 0; s < n; s++) {
        int *t = tok + (size_t)s * k->P;
        for (int i = 0; i < k->P; i++)
            t[i] = draw(k->V);
        m[s] = M_MIN + draw(k->P / 2 - M_MIN + 1);
        start[s] = draw(k->P - 2 * m[s] + 1);
        for (int i = 0; i < m[s]; i++)
            t[start[s] + m[s] + i] = t[start[s] + i];
    }
}

/* The server as `make run` starts it, ready (its models loaded). */
static void start_default(struct server *s)
{
    server_start_default(s, NULL);
    server_wait_ready(s);
}

/* ---------------------------------------------------------------------- */

/* The figures of the issue, measured over the API as a client measures
 * them, and the circuit's heads are the ones that show them. */
Test(induction, served_stack_continues_repeats_with_an_induction_head, .timeout = 120)
{
    struct server s;
    start_default(&s);
    struct stack k;
    stack_read(&k, s.port);
    const int P = k.P, H = k.H;
    int *tok = malloc((size_t)NSEQ * P * sizeof *tok), start[NSEQ], m[NSEQ];
    cr_assert_not_null(tok);
    sequences(&k, NSEQ, tok, start, m);

    long right = 0, inside = 0, prev_n = 0;
    double prev[64] = {0}, ind[64] = {0};
    cr_assert_leq(H, 64);
    for (int b = 0; b < NSEQ; b += NREQ) {
        struct pass p;
        pass_run(&k, s.port, tok + (size_t)b * P, NREQ, &p);
        for (int n = 0; n < NREQ; n++) {
            const int q = b + n, *t = tok + (size_t)q * P;
            const float *w0 = p.w0 + (size_t)n * H * P * P, *w1 = p.w1 + (size_t)n * H * P * P;
            for (int h = 0; h < H; h++)
                for (int i = 1; i < P; i++)
                    prev[h] += w0[((size_t)h * P + i) * P + i - 1];
            prev_n += P - 1;
            for (int i = start[q] + m[q]; i <= start[q] + 2 * m[q] - 2; i++) {
                right += predict(&k, p.x2 + ((size_t)n * P + i) * k.E) == t[i + 1];
                inside++;
                for (int h = 0; h < H; h++)
                    ind[h] += w1[((size_t)h * P + i) * P + i - m[q] + 1];
            }
        }
        pass_free(&p);
    }
    const double acc = (double)right / (double)inside;
    int best_prev = 0, best_ind = 0;
    for (int h = 0; h < H; h++) {
        prev[h] /= (double)prev_n, ind[h] /= (double)inside;
        best_prev = prev[h] > prev[best_prev] ? h : best_prev;
        best_ind = ind[h] > ind[best_ind] ? h : best_ind;
    }
    loud("induction: %d sequences, accuracy inside the second copy %.4f (config %.4f); "
         "previous-token head 0.%d %.4f (config %.4f); induction head 1.%d %.4f (config %.4f)",
         NSEQ, acc, k.accuracy, best_prev, prev[best_prev], k.prev_weight, best_ind,
         ind[best_ind], k.ind_weight);
    cr_assert_geq(acc, ACC_MIN, "accuracy inside the second copy %.4f", acc);
    cr_assert_geq(prev[k.prev_head], PREV_MIN, "layer-0 head %d on the previous token: %.4f",
                  k.prev_head, prev[k.prev_head]);
    cr_assert_geq(ind[k.ind_head], IND_MIN, "layer-1 head %d on key i-m+1: %.4f", k.ind_head,
                  ind[k.ind_head]);
    cr_assert_eq(best_prev, k.prev_head, "head %d looks at the previous token most (%.4f), "
                 "not circuit.previous_token.head %d", best_prev, prev[best_prev], k.prev_head);
    /* Several layer-1 heads may do the same job: the circuit names the one
     * that looked there most on the training script's sequences, which
     * here must be the most within HEAD_TIE. */
    cr_assert_leq(ind[best_ind] - ind[k.ind_head], HEAD_TIE, "head %d looks at key i-m+1 most "
                  "(%.4f), circuit.induction.head %d %.4f", best_ind, ind[best_ind], k.ind_head,
                  ind[k.ind_head]);
    /* every head's figure is the one the script measured (other sequences: close) */
    json_t *tr = json_object_get(k.cfg, "training");
    for (int h = 0; h < H; h++) {
        const double p0 = json_number_value(json_array_get(
                         json_object_get(tr, "previous_token_weight_per_head"), (size_t)h)),
                     p1 = json_number_value(json_array_get(
                         json_object_get(tr, "induction_weight_per_head"), (size_t)h));
        cr_assert_lt(fabs(prev[h] - p0), FIGURE_TOL, "layer 0 head %d: %.4f, config %.4f", h,
                     prev[h], p0);
        cr_assert_lt(fabs(ind[h] - p1), FIGURE_TOL, "layer 1 head %d: %.4f, config %.4f", h,
                     ind[h], p1);
    }
    /* the config's figures describe the served model (other sequences: close, not equal) */
    cr_assert_lt(fabs(acc - k.accuracy), FIGURE_TOL, "accuracy %.4f, config %.4f", acc,
                 k.accuracy);
    cr_assert_lt(fabs(prev[k.prev_head] - k.prev_weight), FIGURE_TOL);
    cr_assert_lt(fabs(ind[k.ind_head] - k.ind_weight), FIGURE_TOL);
    free(tok);
    stack_free(&k);
    cr_assert_eq(server_stop(&s), 0);
}

static void expect_close(const float *got, const float *want, size_t n, const char *what)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fmax(max, fabs((double)got[i] - want[i]));
    cr_assert(max <= TOL, "%s: max |diff| %g over %zu values", what, max, n);
}

/* The stack stepped as the page steps it: each layer a sequence (no
 * positional_encoding default, so it can be), a prompt of T rows started
 * with sequence_start, then one row; that row's output and weights equal
 * the stateless answer's row T, and so does the prediction. Then
 * sequence_end on both. */
Test(induction, one_sequence_step_of_both_layers_equals_the_stateless_row, .timeout = 60)
{
    struct server s;
    start_default(&s);
    struct stack k;
    stack_read(&k, s.port);
    const int P = k.P, E = k.E, H = k.H, T = P / 2 + 4; /* inside the example's repeat */
    const char *ex = json_string_value(json_object_get(json_object_get(k.cfg, "input"),
                                                       "example"));
    cr_assert(ex && (int)strlen(ex) == P, "input.example is not %d tokens", P);
    int *tok = malloc((size_t)P * sizeof *tok);
    cr_assert_not_null(tok);
    json_t *vocab = json_object_get(k.cfg, "vocab");
    for (int i = 0; i < P; i++) {
        tok[i] = -1;
        for (int v = 0; v < k.V; v++)
            tok[i] = ex[i] == json_string_value(json_array_get(vocab, (size_t)v))[0] ? v : tok[i];
        cr_assert_geq(tok[i], 0, "'%c' is not in the vocabulary", ex[i]);
    }
    struct pass p; /* stateless: all P rows at once */
    pass_run(&k, s.port, tok, 1, &p);

    char id[2][64];
    const char *model[2] = {L0, L1};
    float row[2][512], w[512], x[2][512];
    cr_assert(E <= 512 && H * (T + 1) <= 512);
    memcpy(x[0], p.x0 + (size_t)T * E, (size_t)E * sizeof(float)); /* layer 0's new row */
    const float *in = p.x0;
    for (int l = 0; l < 2; l++) {
        snprintf(id[l], sizeof id[l], "induction-test-%d-%d", (int)getpid(), l);
        /* the prompt: rows 0 ... T-1 of this layer's input */
        const int pshape[] = {T, E}, rshape[] = {1, E};
        run_layer(s.port, model[l], in, 2, pshape,
                  json_pack("{s:s,s:b}", "sequence_id", id[l], "sequence_start", 1), NULL, NULL);
        /* the step: row T alone */
        run_layer(s.port, model[l], x[l], 2, rshape, json_pack("{s:s}", "sequence_id", id[l]),
                  row[l], w);
        const float *want = (l ? p.x2 : p.x1) + (size_t)T * E;
        float got[512];
        for (int e = 0; e < E; e++)
            got[e] = x[l][e] + row[l][e]; /* the residual */
        expect_close(got, want, (size_t)E, l ? "layer 1's step (x2)" : "layer 0's step (x1)");
        const float *ws = l ? p.w1 : p.w0;
        for (int h = 0; h < H; h++)
            expect_close(w + (size_t)h * (T + 1), ws + ((size_t)h * P + T) * P, (size_t)T + 1,
                         "the step's weights");
        if (l == 0)
            memcpy(x[1], got, (size_t)E * sizeof(float)); /* layer 1's new row: x1[T] */
        in = p.x1;
    }
    float x2[512];
    for (int e = 0; e < E; e++)
        x2[e] = x[1][e] + row[1][e];
    cr_assert_eq(predict(&k, x2), predict(&k, p.x2 + (size_t)T * E),
                 "the stepped prediction differs from the stateless one");
    for (int l = 0; l < 2; l++) {
        json_t *end = json_pack("{s:{s:s,s:b}}", "parameters", "sequence_id", id[l],
                                "sequence_end", 1);
        char *body = json_dumps(end, JSON_COMPACT);
        struct http_reply a = infer(s.port, model[l], body, strlen(body), -1);
        cr_assert_eq(a.status, 200, "ending %s: %ld %s", id[l], a.status, a.body);
        free(a.body), free(body), json_decref(end);
    }
    free(tok);
    pass_free(&p);
    stack_free(&k);
    cr_assert_eq(server_stop(&s), 0);
}
