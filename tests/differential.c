/* differential.c -- the old-vs-new differential: every golden body of both
 * protocols, every invalid body of tests/cases/, and a script of sequence
 * steps, sent to two builds of attention-server, whose answers must be the
 * same byte for byte.
 *
 *   differential OLD_SERVER NEW_SERVER MODEL_REPOSITORY
 *
 * Both servers are started on free loopback ports with the model
 * repository given (the test models, so that model-backed goldens work),
 * and sent, one request at a time:
 *   - each golden case of tests/golden, tests/golden_variants,
 *     tests/models/golden (hf/ too) and tests/models/trained as its POST
 *     /attention body, and as a v2 infer request (tests/support/golden_v2.h)
 *     with JSON data and with binary data (and binary outputs), to the
 *     model the case names or the built-in one;
 *   - each invalid-request case of tests/cases as a POST /attention body and,
 *     the same bytes, as a v2 infer request;
 *   - then the script of sequence steps of tests/differential_seq.c, on
 *     these servers and on a pair started again with small limits.
 * Compared: the status, the Content-Type, Inference-Header-Content-Length
 * and Retry-After headers, and the body. Prints the counts compared and
 * every difference (DIFFERENTIAL_VERBOSE=1: every answer of the new server,
 * in short); exits 1 when anything differs (2 when the servers cannot be
 * started).
 * `make differential BASE=<commit>` (scripts/differential.sh) builds the old
 * server and runs this. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/differential.h"
#include "tests/support/golden_v2.h"
#include "tests/support/testdata.h"

#define MAX_FILES 256

struct server diff_servers[2];
struct diff_counts diff_counts;

/* Print up to 160 bytes of s from at, non-printing bytes as \xNN. */
static void excerpt(const char *s, size_t len, size_t at)
{
    for (size_t i = at; i < len && i < at + 160; i++) {
        const unsigned char ch = (unsigned char)s[i];
        if (ch >= 32 && ch < 127)
            putchar(ch);
        else
            printf("\\x%02x", ch);
    }
    putchar('\n');
}

void diff_answers(const char *label, const char *path, const struct http_reply a[2])
{
    diff_counts.compared++;
    diff_counts.ok200 += a[1].status == 200;
    static const char *const names[] = {"Content-Type", "Inference-Header-Content-Length",
                                        "Retry-After"};
    enum { NH = sizeof names / sizeof names[0] };
    char hv[2][NH][256]; /* [answer][header] */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < NH; k++) {
            const char *v = header(&a[i], names[k]);
            snprintf(hv[i][k], sizeof hv[i][k], "%s", v ? v : "");
        }
    int same = a[0].status == a[1].status && a[0].len == a[1].len &&
               (a[0].len == 0 || memcmp(a[0].body, a[1].body, a[0].len) == 0);
    for (int k = 0; k < NH; k++)
        same &= strcmp(hv[0][k], hv[1][k]) == 0;
    if (getenv("DIFFERENTIAL_VERBOSE")) { /* each answer of the new server */
        printf("%s: %ld ", label, a[1].status);
        excerpt(a[1].body ? a[1].body : "", a[1].len < 160 ? a[1].len : 160, 0);
    }
    if (same)
        return;
    diff_counts.differ++;
    size_t at = 0;
    while (at < a[0].len && at < a[1].len && a[0].body[at] == a[1].body[at])
        at++;
    printf("DIFFERS %s (POST %s)\n", label, path);
    for (int i = 0; i < 2; i++) {
        printf("  %s: status %ld, %zu bytes, Content-Type '%s', "
               "Inference-Header-Content-Length '%s', Retry-After '%s'; from byte %zu: ",
               i ? "new" : "old", a[i].status, a[i].len, hv[i][0], hv[i][1], hv[i][2], at);
        excerpt(a[i].body ? a[i].body : "", a[i].len, at);
    }
}

long diff_compare(const char *label, const char *path, const char *body, size_t len,
                  long long hlen, const char *const *headers)
{
    char h[80];
    snprintf(h, sizeof h, "Inference-Header-Content-Length: %lld", hlen);
    const char *lines[8];
    int n = 0;
    if (hlen >= 0)
        lines[n++] = h;
    for (int i = 0; headers && headers[i] && n < 7; i++)
        lines[n++] = headers[i];
    lines[n] = NULL;
    struct http_reply a[2];
    for (int i = 0; i < 2; i++)
        a[i] = request_with(diff_servers[i].port, "POST", path, body, len,
                            hlen >= 0 ? "application/octet-stream" : "application/json", 0,
                            n ? lines : NULL);
    diff_answers(label, path, a);
    free(a[0].body), free(a[1].body);
    return a[1].status;
}

int diff_start(char *const bins[2], const char *const *flags)
{
    for (int i = 0; i < 2; i++) {
        char err[200];
        if (server_spawn(&diff_servers[i], bins[i], flags, err, sizeof err) ||
            server_ready_within(&diff_servers[i], 30)) {
            fprintf(stderr, "differential: %s: %s\n", bins[i],
                    diff_servers[i].port ? "not ready within 30 s" : err);
            for (int j = 0; j <= i; j++)
                if (diff_servers[j].pid > 0)
                    server_stop(&diff_servers[j]);
            return 2;
        }
        printf("%s server %s on port %d\n", i ? "new" : "old", bins[i], diff_servers[i].port);
    }
    return 0;
}

void diff_stop(void)
{
    for (int i = 0; i < 2; i++)
        server_stop(&diff_servers[i]);
}

/* One golden case: its /attention body, then v2 with JSON and binary data. */
static int golden(const char *path, int *counts)
{
    json_t *c = json_load_file(path, 0, NULL);
    json_t *req = json_object_get(c, "request");
    if (!json_is_object(req)) {
        fprintf(stderr, "differential: %s holds no request\n", path);
        json_decref(c);
        return -1;
    }
    size_t len;
    char *body = testdata_body(c, &len), label[600];
    snprintf(label, sizeof label, "%s (/attention)", path);
    diff_compare(label, "/attention", body, len, -1, NULL);
    free(body);
    counts[0]++;

    const char *model = json_string_value(json_object_get(req, "model"));
    char url[300];
    snprintf(url, sizeof url, "/v2/models/%s/infer", model ? model : "attention");
    json_t *v2 = golden_v2(req, 0);
    json_object_set_new(v2, "id", json_string(path));
    for (int binary = 0; binary < 2; binary++) {
        if (binary)
            json_object_set_new(json_object_get(v2, "parameters"), "binary_data_output",
                                json_true());
        long long hl;
        body = golden_v2_body(v2, binary ? GOLDEN_V2_BINARY : GOLDEN_V2_JSON, &len, &hl);
        snprintf(label, sizeof label, "%s (v2 %s)", path, binary ? "binary" : "JSON");
        diff_compare(label, url, body, len, hl, NULL);
        free(body);
        counts[1 + binary]++;
    }
    json_decref(v2);
    json_decref(c);
    return 0;
}

/* One invalid-request case, its bytes to both protocols. */
static int invalid(const char *path, int *counts)
{
    json_t *c = json_load_file(path, JSON_ALLOW_NUL, NULL);
    if (!c) {
        fprintf(stderr, "differential: cannot read %s\n", path);
        return -1;
    }
    size_t len;
    char *body = testdata_body(c, &len), label[600];
    snprintf(label, sizeof label, "%s (/attention)", path);
    diff_compare(label, "/attention", body, len, -1, NULL);
    snprintf(label, sizeof label, "%s (v2)", path);
    diff_compare(label, "/v2/models/attention/infer", body, len, -1, NULL);
    counts[3] += 2;
    free(body);
    json_decref(c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s OLD_SERVER NEW_SERVER MODEL_REPOSITORY\n", argv[0]);
        return 2;
    }
    const char *const flags[] = {"--port", "0", "--bind", "127.0.0.1", "--model-repository",
                                 argv[3], NULL};
    if (diff_start(argv + 1, flags))
        return 2;

    static const char *const golden_dirs[] = {"tests/golden", "tests/golden_variants",
                                              "tests/models/golden", "tests/models/golden/hf",
                                              "tests/models/trained"};
    int counts[4] = {0}, files = 0, bad = 0;
    char *paths[MAX_FILES];
    for (size_t d = 0; d <= sizeof golden_dirs / sizeof golden_dirs[0]; d++) {
        const int is_cases = d == sizeof golden_dirs / sizeof golden_dirs[0];
        const char *dir = is_cases ? "tests/cases" : golden_dirs[d];
        const int n = testdata_list(dir, paths, MAX_FILES);
        if (n == 0 || n == MAX_FILES) {
            fprintf(stderr, "differential: %s holds %d cases\n", dir, n);
            bad = 1;
        }
        for (int i = 0; i < n; i++) {
            bad |= (is_cases ? invalid : golden)(paths[i], counts) != 0;
            free(paths[i]);
        }
        printf("%-24s %3d files\n", dir, n);
        files += n;
    }
    printf("compared %d answers from %d files: %d golden /attention, %d golden v2 JSON, "
           "%d golden v2 binary, %d invalid (/attention and v2); %d answered 200; %d differ\n",
           diff_counts.compared, files, counts[0], counts[1], counts[2], counts[3],
           diff_counts.ok200, diff_counts.differ);
    const int golden_differ = diff_counts.differ;
    const int seq = diff_sequences(argv + 1); /* stops the servers */
    return golden_differ || bad || seq ? 1 : 0;
}
