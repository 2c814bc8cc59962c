/* test_trained.c -- the trained model shipped in models/ (written by
 * models/train_digits_reverse.py) over HTTP, against the real server started
 * as `make run` starts it: on its default model repository, "models" in the
 * working directory (the repository's root under `make http-test`).
 *
 * The input is built as the web page builds it, from the model's own
 * config.json (GET /v2/models/digits-reverse/config.json): each digit's row of
 * "embedding"; the server adds the positional encoding (the model's
 * defaults). The heads the training script lists under "pattern" must put
 * most of each query's weight on the mirrored key, the average over heads
 * must peak there, the unembedding (+ unembedding_bias) must decode the
 * reversed digits, and the served answer must equal PyTorch's forward pass
 * of the same weights (the golden case the script wrote). Also: a missing
 * default repository is not an error, an explicitly named one is. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"
#include "tests/support/testdata.h"

#define MODEL "digits-reverse"
#define GOLDEN "tests/models/trained/" MODEL ".json"
/* Each query's weight on the mirrored key, in every head "pattern" lists.
 * The training script measures it on 2000 held-out sequences (config.json:
 * training.mirrored_weight_min_per_head); this is well below that. */
#define MIRROR_MIN 0.5
#define NIN 8 /* inputs per request */

/* The model as the page sees it: sizes and tables from config.json. */
struct trained {
    json_t *cfg;
    int L, E, H, V;
    json_t *vocab, *embedding, *heads, *unembedding, *unembedding_bias;
};

static void trained_read(struct trained *t, int port)
{
    t->cfg = http_get_json(port, "/v2/models/" MODEL "/config.json");
    json_t *in = json_object_get(t->cfg, "input");
    t->L = (int)json_integer_value(json_object_get(in, "length"));
    t->H = (int)json_integer_value(json_object_get(t->cfg, "num_heads"));
    t->vocab = json_object_get(t->cfg, "vocab");
    t->embedding = json_object_get(t->cfg, "embedding");
    t->V = (int)json_array_size(t->vocab);
    t->E = (int)json_array_size(json_array_get(t->embedding, 0));
    t->heads = json_object_get(json_object_get(t->cfg, "pattern"), "heads");
    t->unembedding = json_object_get(t->cfg, "unembedding");
    t->unembedding_bias = json_object_get(t->cfg, "unembedding_bias");
    cr_assert(t->L >= 2 && t->H >= 1 && t->V == 10 && t->E >= t->H, "L %d H %d V %d E %d",
              t->L, t->H, t->V, t->E);
    cr_assert_eq((int)json_array_size(t->embedding), t->V, "one embedding row per token");
    cr_assert_eq((int)json_array_size(t->unembedding), t->V, "one unembedding row per token");
    cr_assert_eq((int)json_array_size(json_array_get(t->unembedding, 0)), t->E,
                 "unembedding rows of E numbers");
    cr_assert_eq((int)json_array_size(t->unembedding_bias), t->V, "one unembedding_bias per token");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(t->cfg, "pattern"),
                                                       "kind")), "anti-diagonal");
    cr_assert_gt(json_array_size(t->heads), 0, "no head listed under pattern.heads");
    const char *ex = json_string_value(json_object_get(in, "example"));
    cr_assert(ex && (int)strlen(ex) == t->L, "input.example \"%s\" is not %d digits", ex, t->L);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(t->cfg, "defaults"),
                                                       "positional_encoding")), "sinusoidal");
}

/* Token id of one character: its index in vocab. */
static int token_of(const struct trained *t, char c)
{
    for (int v = 0; v < t->V; v++) {
        const char *s = json_string_value(json_array_get(t->vocab, (size_t)v));
        if (s && s[0] == c && !s[1])
            return v;
    }
    cr_assert_fail("'%c' is not in the vocabulary", c);
    return -1;
}

/* {"shape": [n, L, E], "data": [...]}: each digit's embedding row. */
static json_t *embed(const struct trained *t, char in[][64], int n)
{
    json_t *data = json_array();
    for (int k = 0; k < n; k++)
        for (int i = 0; i < t->L; i++) {
            json_t *row = json_array_get(t->embedding, (size_t)token_of(t, in[k][i]));
            for (int e = 0; e < t->E; e++)
                json_array_append_new(data, json_real(json_number_value(json_array_get(row, (size_t)e))));
        }
    return json_pack("{s:[i,i,i],s:o}", "shape", n, t->L, t->E, "data", data);
}

/* The inputs: the example, constant runs (the pattern is positional, not
 * the digits'), a ramp, and pseudo-random digits. */
static void inputs(const struct trained *t, char in[NIN][64])
{
    snprintf(in[0], 64, "%s", json_string_value(json_object_get(json_object_get(t->cfg, "input"),
                                                                "example")));
    unsigned x = 12345;
    for (int k = 1; k < NIN; k++)
        for (int i = 0; i <= t->L; i++) {
            x = x * 1103515245u + 12345u;
            in[k][i] = i == t->L ? '\0'
                       : k == 1  ? '0'
                       : k == 2  ? '9'
                       : k == 3  ? (char)('0' + i % 10)
                                 : (char)('0' + (x >> 16) % 10);
        }
}

/* POST /attention with the model; the answer's output and weights. */
static json_t *attend(int port, const struct trained *t, char in[][64], int n, int average)
{
    json_t *req = json_pack("{s:s,s:o,s:b,s:b}", "model", MODEL, "query", embed(t, in, n),
                            "need_weights", 1, "average_attn_weights", average);
    char *body = json_dumps(req, JSON_COMPACT);
    struct http_reply a = post(port, body);
    cr_assert_eq(a.status, 200, "%ld %.300s", a.status, a.body);
    json_t *r = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(r);
    free(a.body), free(body), json_decref(req);
    return r;
}

/* The server as `make run` starts it, ready (its models loaded). */
static void start_default(struct server *s)
{
    server_start_default(s, NULL);
    server_wait_ready(s);
}

/* ---------------------------------------------------------------------- */

Test(trained, the_default_repository_serves_the_trained_model)
{
    struct server s;
    start_default(&s);
    json_t *l = http_get_json(s.port, "/v2/models");
    int found = 0;
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(l, "models"), k, e)
        found |= strcmp(json_string_value(e), MODEL) == 0;
    cr_assert(found, "%s is not among the served models", MODEL);
    json_decref(l);
    struct http_reply a = request(s.port, "GET", "/v2/models/" MODEL "/ready", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "%s is not ready", MODEL);
    free(a.body);
    cr_assert_eq(server_stop(&s), 0);
}

/* The pattern the training script says the heads learned is there, in the
 * weights the server computes from the page's input. */
Test(trained, served_heads_attend_to_the_mirrored_position, .timeout = 60)
{
    struct server s;
    start_default(&s);
    struct trained t;
    trained_read(&t, s.port);
    char in[NIN][64];
    inputs(&t, in);
    const int L = t.L, H = t.H;

    /* per head: (N, H, L, L) */
    json_t *r = attend(s.port, &t, in, NIN, 0);
    size_t nw;
    float *w = flatten(json_object_get(r, "attention_weights"), &nw);
    cr_assert_eq(nw, (size_t)NIN * H * L * L, "%zu weights", nw);
    double lowest = 1.0;
    size_t hk;
    json_t *hv;
    json_array_foreach(t.heads, hk, hv) {
        int h = (int)json_integer_value(hv);
        cr_assert(h >= 0 && h < H, "pattern head %d of %d", h, H);
        for (int n = 0; n < NIN; n++)
            for (int i = 0; i < L; i++) {
                double m = w[(((size_t)n * H + h) * L + i) * L + (L - 1 - i)];
                lowest = m < lowest ? m : lowest;
                cr_assert_gt(m, MIRROR_MIN, "input %s head %d query %d: weight %.4f on key %d",
                             in[n], h, i, m, L - 1 - i);
            }
    }
    loud("trained: lowest weight on the mirrored key in the pattern heads: %.4f", lowest);
    free(w);

    /* the unembedding (V x E) and its bias (V) decode the reversed digits:
     * logits = output . unembedding^T + unembedding_bias */
    size_t no;
    float *out = flatten(json_object_get(r, "output"), &no);
    cr_assert_eq(no, (size_t)NIN * L * t.E);
    json_t *rw = t.unembedding, *rb = t.unembedding_bias;
    for (int n = 0; n < NIN; n++) {
        char got[64];
        for (int i = 0; i < L; i++) {
            int best = 0;
            double best_logit = -1e300;
            for (int v = 0; v < t.V; v++) {
                double z = json_number_value(json_array_get(rb, (size_t)v));
                for (int e = 0; e < t.E; e++)
                    z += out[((size_t)n * L + i) * t.E + e] *
                         json_number_value(json_array_get(json_array_get(rw, (size_t)v),
                                                          (size_t)e));
                if (z > best_logit)
                    best_logit = z, best = v;
            }
            got[i] = json_string_value(json_array_get(t.vocab, (size_t)best))[0];
        }
        got[L] = '\0';
        for (int i = 0; i < L; i++)
            cr_assert_eq(got[i], in[n][L - 1 - i], "%s decodes as %s", in[n], got);
    }
    free(out);
    json_decref(r);

    /* averaged over heads: (N, L, L), every row peaks on the mirrored key */
    r = attend(s.port, &t, in, NIN, 1);
    w = flatten(json_object_get(r, "attention_weights"), &nw);
    cr_assert_eq(nw, (size_t)NIN * L * L, "%zu averaged weights", nw);
    for (int n = 0; n < NIN; n++)
        for (int i = 0; i < L; i++) {
            const float *row = w + ((size_t)n * L + i) * L;
            int arg = 0;
            for (int j = 1; j < L; j++)
                arg = row[j] > row[arg] ? j : arg;
            cr_assert_eq(arg, L - 1 - i, "input %s query %d: the average peaks on key %d",
                         in[n], i, arg);
        }
    free(w);
    json_decref(r);
    json_decref(t.cfg);
    cr_assert_eq(server_stop(&s), 0);
}

/* The server's answer is PyTorch's forward pass of the shipped weights on
 * the same input (the training script's golden case): the training, the
 * file and the server saw the same layer and the same positional encoding. */
Test(trained, served_model_agrees_with_pytorch, .timeout = 60)
{
    struct server s;
    start_default(&s);
    for (int form = 1; form <= 3; form++)
        cr_assert(check_golden(s.port, GOLDEN, form, form == 3), "form %d", form);
    cr_assert(v2_golden(s.port, GOLDEN, MODEL, 0), "v2 json");
    cr_assert(v2_golden(s.port, GOLDEN, MODEL, 1), "v2 binary");
    cr_assert_eq(server_stop(&s), 0);
}

/* Run bin with args in the current directory until it exits (it must, on
 * its own, within 10 s); its stderr into log. The exit status. */
static int run_to_exit(const char *const *argv, const char *log)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        FILE *f = freopen(log, "w", stderr);
        (void)f;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert_fail("%s did not exit", argv[0]);
    return -1;
}

static int file_has(const char *path, const char *text)
{
    char *buf = testdata_read(path, NULL);
    const int has = buf && strstr(buf, text) != NULL;
    free(buf);
    return has;
}

/* Run from a directory without "models": the default is skipped with one
 * log line; the same directory named explicitly stops start-up. */
Test(trained, a_missing_default_repository_is_skipped_an_explicit_one_is_not)
{
    char bin[PATH_MAX], cwd[PATH_MAX], dir[] = "/tmp/attn-cwd-XXXXXX";
    cr_assert_not_null(realpath(getenv("ATTN_SERVER") ? getenv("ATTN_SERVER")
                                                      : "build/attention-server", bin));
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(chdir(dir), 0);
    setenv("ATTN_SERVER", bin, 1);
    unsetenv("ATTN_MODEL_REPOSITORY");

    struct server s;
    start_default(&s);
    cr_assert(file_has(s.log, "no model repository at 'models'"), "log %s", s.log);
    json_t *l = http_get_json(s.port, "/v2/models");
    json_t *names = json_object_get(l, "models");
    cr_assert_eq(json_array_size(names), 1);
    cr_assert_str_eq(json_string_value(json_array_get(names, 0)), "attention");
    json_decref(l);
    cr_assert_eq(server_stop(&s), 0);

    char log[PATH_MAX];
    snprintf(log, sizeof log, "%s/log", dir);
    const char *const explicit_flag[] = {bin, "--port", "0", "--bind", "127.0.0.1",
                                         "--model-repository", "models", NULL};
    cr_assert_neq(run_to_exit(explicit_flag, log), 0, "an explicit missing repository started");
    cr_assert(file_has(log, "model_repository 'models' cannot be listed"));
    setenv("ATTN_MODEL_REPOSITORY", "models", 1);
    const char *const from_env[] = {bin, "--port", "0", "--bind", "127.0.0.1", NULL};
    cr_assert_neq(run_to_exit(from_env, log), 0, "ATTN_MODEL_REPOSITORY=models started");
    unsetenv("ATTN_MODEL_REPOSITORY");
    unlink(log);
    cr_assert_eq(chdir(cwd), 0);
    rmdir(dir);
}

/* The log line of the loaded model gives its size in a unit that reads:
 * digits-reverse holds (4·E² + 4·E)·4 = 16 896 bytes of float32 weights,
 * "16.9 KB", not "0.0 MB". */
Test(trained, the_load_line_gives_the_size_in_kb)
{
    struct server s;
    start_default(&s);
    cr_assert(file_has(s.log, "model " MODEL ": loaded (torch_mha, E 32, heads 4, kv heads 4, "
                              "head_dim 8, F32, 16.9 KB)"), "log %s", s.log);
    cr_assert(!file_has(s.log, " 0.0 MB)"), "log %s", s.log);
    cr_assert_eq(server_stop(&s), 0);
}
