/* test_http_repo.c -- model files that change under the server: a load
 * that reads a file being truncated ends with an error naming the file, the
 * server (a child process here) lives on, and a served model keeps its
 * weights whatever happens to its file. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/http_util.h"
#include "tests/support/testdata.h"

#define TOKEN "test-admin-token-0123456789"
#define AUTH "Authorization: Bearer " TOKEN
#define BIG_E 3072 /* F16 in_proj (3E, E) + out_proj (E, E): 75.5 MB */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The torch_mha model.safetensors of E = BIG_E in F16, small finite values
 * that change with seed; returns its size. */
static long write_big(const char *path, unsigned seed)
{
    const long long E = BIG_E, nin = 3 * E * E, nout = E * E;
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "{\"in_proj_weight\":{\"dtype\":\"F16\",\"shape\":[%lld,%lld],"
                     "\"data_offsets\":[0,%lld]},\"out_proj.weight\":{\"dtype\":\"F16\","
                     "\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}}",
                     3 * E, E, 2 * nin, E, E, 2 * nin, 2 * (nin + nout));
    while (n % 8)
        hdr[n++] = ' ';
    FILE *f = fopen(path, "wb");
    cr_assert(f, "%s", path);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((unsigned long long)n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    static unsigned short buf[1 << 16];
    for (long long at = 0; at < nin + nout; at += 1 << 16) {
        for (int i = 0; i < 1 << 16; i++) /* |x| < 2^-7: exponents 0x01..0x07 */
            buf[i] = (unsigned short)(((unsigned)(at + i) * 2654435761u + seed) >> 16 & 0x9FFF);
        long long k = nin + nout - at < 1 << 16 ? nin + nout - at : 1 << 16;
        cr_assert_eq(fwrite(buf, 2, (size_t)k, f), (size_t)k);
    }
    cr_assert_eq(fclose(f), 0);
    return 8 + n + 2 * (nin + nout);
}

struct load_call {
    int port;
    const char *model;
    long status;
    char body[1024];
    double seconds;
};

static void *load_model(void *arg)
{
    struct load_call *c = arg;
    char path[160];
    snprintf(path, sizeof path, "/v2/repository/models/%s/load", c->model);
    const char *headers[] = {AUTH, NULL};
    double t0 = check_now();
    struct http_reply a = request_with(c->port, "POST", path, "", 0, NULL, 0, headers);
    c->seconds = check_now() - t0;
    c->status = a.status;
    snprintf(c->body, sizeof c->body, "%.*s", (int)a.len, a.body ? a.body : "");
    free(a.body);
    return NULL;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* The child is running and answers. */
static void alive(const struct server *s)
{
    int st;
    cr_assert_eq(waitpid(s->pid, &st, WNOHANG), 0, "the server died: %s %d",
                 WIFSIGNALED(st) ? "signal" : "exit",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    struct http_reply a = request(s->port, "GET", "/v2/health/live", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200);
    free(a.body);
}

static const char small_req[] =
    "{\"model\": \"small\", \"query\": [[0.5, -1, 2, 0.25, 1, 1, 0, 3, -2, 0.5, 1.5, 0, 1, "
    "-1, 0.75, 2]]}";

/* Finding: the file was mapped, and `cp new.safetensors model.safetensors`
 * during a load (it truncates first) made the converting thread fault:
 * Bus error, every model gone. */
Test(repo_files, a_model_file_truncated_during_a_load_fails_that_load_not_the_server,
     .timeout = 240)
{
    char dir[] = "/tmp/test_http_repo.XXXXXX", path[256], big[256];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/big", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/big/config.json", dir);
    write_text(path, "{\"format\": \"torch_mha\", \"num_heads\": 4}\n");
    snprintf(big, sizeof big, "%s/big/model.safetensors", dir);
    const long size = write_big(big, 1);
    snprintf(path, sizeof path, "%s/small", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/small/config.json", dir);
    cr_assert_eq(testdata_copy_file("tests/models/repo/mha_f32/config.json", path), 0);
    snprintf(path, sizeof path, "%s/small/model.safetensors", dir);
    cr_assert_eq(testdata_copy_file("tests/models/repo/mha_f32/model.safetensors", path), 0);

    struct server s;
    server_start_ready(&s, (const char *const[]){"--model-repository", dir, "--admin-token",
                                                 TOKEN, NULL});
    struct http_reply first = post(s.port, small_req);
    cr_assert_eq(first.status, 200, "%s", first.body);

    /* how long a whole load takes here, then truncations at points inside it */
    struct load_call c = {.port = s.port, .model = "big"};
    load_model(&c);
    cr_assert_eq(c.status, 200, "%s", c.body);
    const double whole = c.seconds;
    int hits = 0;
    for (int k = 1; k <= 6 && hits < 2; k++) {
        write_big(big, (unsigned)k + 1);
        pthread_t t;
        c = (struct load_call){.port = s.port, .model = "big"};
        cr_assert_eq(pthread_create(&t, NULL, load_model, &c), 0);
        sleep_s(whole * k / 8.0);
        cr_assert_eq(truncate(big, size / 3), 0);
        pthread_join(t, NULL);
        alive(&s);
        if (c.status != 200) {
            cr_assert(c.status >= 400 && c.status < 600, "%ld", c.status);
            cr_assert(strstr(c.body, "model.safetensors"), "the error names the file: %s",
                      c.body);
            hits += strstr(c.body, "changed while it was read") != NULL;
        }
        cr_log_info("truncated at %.0f%% of a %.2f s load: %ld %s", 100.0 * k / 8, whole,
                    c.status, c.body);
    }
    cr_assert_geq(hits, 1, "no truncation landed inside a load (a load takes %.2f s)", whole);
    /* a failed reload keeps the weights loaded before */
    struct http_reply a = request(s.port, "GET", "/v2/models/big/ready", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);

    /* a served model keeps its weights whatever happens to its file */
    snprintf(path, sizeof path, "%s/small/model.safetensors", dir);
    cr_assert_eq(truncate(path, 10), 0);
    struct http_reply again = post(s.port, small_req);
    cr_assert_eq(again.status, 200, "%s", again.body);
    cr_assert(first.len == again.len && !memcmp(first.body, again.body, first.len),
              "the answer changed with the file: %s / %s", first.body, again.body);
    /* and its reload now fails, naming the file, with the model still served */
    c = (struct load_call){.port = s.port, .model = "small"};
    load_model(&c);
    cr_assert_eq(c.status, 400, "%s", c.body);
    cr_assert(strstr(c.body, "model.safetensors"), "%s", c.body);
    free(again.body);
    again = post(s.port, small_req);
    cr_assert(again.status == 200 && first.len == again.len &&
              !memcmp(first.body, again.body, first.len), "%s", again.body);
    free(first.body), free(again.body);
    alive(&s);
    cr_assert_eq(server_stop(&s), 0);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}
