/* test_http_admin.c -- what the server shows to whom: the admin surface
 * (the model repository endpoints, behind admin_token) kept out of reach of
 * web pages (CORS), a model's load error kept from clients without the
 * token, the static files kept to the folder, and the exit statuses of a
 * start-up that fails. The real server, over HTTP on loopback. */
#define _GNU_SOURCE /* timegm */ /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include <arpa/inet.h>
#include <errno.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/http_golden.h"
#include "tests/support/http_util.h"

#define TOKEN "test-admin-token-0123456789"
#define AUTH "Authorization: Bearer " TOKEN

static void run(const char *cmd)
{
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    run(cmd);
}

/* ---------------------------------------------------------------------- */
/* CORS: the repository endpoints are not for web pages                    */

/* Before: OPTIONS .../unload answered 204 with Access-Control-Allow-Origin
 * and Authorization among the allowed headers, so a page on a listed origin
 * holding the token could load and unload models. */
static void check_no_cors_on_the_repository(const char *policy, const char *origin)
{
    const char *flags[] = {"--cors-allow-origin", policy, "--admin-token", TOKEN, NULL};
    struct server s;
    server_start(&s, flags);
    char o[128];
    snprintf(o, sizeof o, "Origin: %s", origin);
    const char *preflight[] = {o, "Access-Control-Request-Method: POST",
                               "Access-Control-Request-Headers: authorization, content-type",
                               NULL};
    static const char *const repo_paths[] = {"/v2/repository/models/x/unload",
                                             "/v2/repository/models/x/load",
                                             "/v2/repository/index"};
    for (size_t i = 0; i < sizeof repo_paths / sizeof repo_paths[0]; i++) {
        struct http_reply a = request_with(s.port, "OPTIONS", repo_paths[i], NULL, 0, NULL, 0,
                                       preflight);
        expect_v2_error(&a, 405, "use POST");
        cr_expect(has_header(&a, "Allow", "POST"), "%s", a.headers);
        cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s %s: %s", policy,
                  repo_paths[i], a.headers);
        free(a.body);
        /* the real request: answered, with no header a browser would honour */
        const char *with_token[] = {o, AUTH, NULL};
        a = request_with(s.port, "POST", repo_paths[i], "", 0, NULL, 0, with_token);
        cr_expect(a.status == 200 || a.status == 404, "%s: %ld %s", repo_paths[i], a.status,
                  a.body);
        cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s: %s", repo_paths[i],
                  a.headers);
        free(a.body);
        const char *without[] = {o, NULL};
        a = request_with(s.port, "POST", repo_paths[i], "", 0, NULL, 0, without);
        expect_v2_error(&a, 401, "Bearer");
        cr_expect(has_header(&a, "WWW-Authenticate", "Bearer realm=\"attention-admin\""), "%s",
                  a.headers);
        cr_expect(strstr(a.headers, "Access-Control-") == NULL, "%s: %s", repo_paths[i],
                  a.headers);
        free(a.body);
    }
    /* the other endpoints keep CORS, without Authorization */
    static const char *const open_paths[] = {"/attention", "/v2/models/attention/infer",
                                             "/v2/models/attention/ready"};
    for (size_t i = 0; i < sizeof open_paths / sizeof open_paths[0]; i++) {
        struct http_reply a = request_with(s.port, "OPTIONS", open_paths[i], NULL, 0, NULL, 0,
                                       preflight);
        cr_expect_eq(a.status, 204, "%s: %ld", open_paths[i], a.status);
        cr_expect(strstr(a.headers, "Access-Control-Allow-Origin: ") != NULL, "%s: %s",
                  open_paths[i], a.headers);
        cr_expect(has_header(&a, "Access-Control-Allow-Headers", SERVICE_CORS_ALLOW), "%s",
                  a.headers);
        cr_expect(strcasestr(a.headers, "Authorization") == NULL, "%s", a.headers);
        free(a.body);
    }
    cr_expect_eq(server_stop(&s), 0);
}

Test(admin, repository_endpoints_send_no_cors_headers_preflight_included)
{
    check_no_cors_on_the_repository("https://a.example, http://localhost:3000",
                                    "https://a.example");
    check_no_cors_on_the_repository("*", "https://anywhere.example");
}

/* ---------------------------------------------------------------------- */
/* A model's load error is the operator's                                  */

/* A repository in a fresh folder: "bad", whose checkpoint config has a
 * field the loader refuses, and "abs", a Llama layer whose checkpoint is
 * named by its absolute path. */
static void make_repo(char *dir, char *ckpt, size_t ckptlen)
{
    char cwd[PATH_MAX - 64], cmd[3 * PATH_MAX];
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(ckpt, ckptlen, "%s/tests/models/hf/llama", cwd);
    snprintf(cmd, sizeof cmd, "cp -r tests/models/broken/hf_unknown_field '%s/bad' && "
             "mkdir '%s/abs' && printf '{\"format\": \"hf_llama\", \"checkpoint\": \"%s\", "
             "\"layer\": 1}' > '%s/abs/config.json'", dir, dir, ckpt, dir);
    run(cmd);
}

/* The time in "... since 2026-11-26T15:40:00Z)", as seconds since the epoch;
 * -1 without one. */
static time_t since_of(const char *msg)
{
    const char *p = strstr(msg, " since ");
    struct tm tm = {0};
    if (!p)
        return -1;
    const char *end = strptime(p + 7, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cr_expect(end && *end == ')', "not RFC 3339 UTC then ')': %s", p + 7);
    return end ? timegm(&tm) : -1;
}

/* The answer says "not ready" and since when, and nothing of the reason. */
static void expect_not_ready(const struct http_reply *a, const char *what, const char *state)
{
    cr_expect_eq(a->status, 503, "%s: %ld %s", what, a->status, a->body);
    cr_expect(a->body && strstr(a->body, "is not ready (") != NULL, "%s: %s", what, a->body);
    cr_expect(a->body && strstr(a->body, state) != NULL, "%s: no %s in %s", what, state,
              a->body);
    cr_expect(a->body && since_of(a->body) > 0, "%s: no time in %s", what, a->body);
    /* the refused field of the checkpoint's config, and any path */
    cr_expect(a->body && strstr(a->body, "attention_chunk_size") == NULL, "%s: %s", what,
              a->body);
    cr_expect(a->body && strstr(a->body, "config.json") == NULL, "%s: %s", what, a->body);
    cr_expect(a->body && strstr(a->body, "/") == NULL, "%s: a path in %s", what, a->body);
}

Test(admin, clients_without_the_token_see_not_ready_and_since_when, .timeout = 60)
{
    char dir[] = "/tmp/attn-admin-XXXXXX", ckpt[PATH_MAX];
    make_repo(dir, ckpt, sizeof ckpt);
    const char *flags[] = {"--model-repository", dir, "--admin-token", TOKEN, NULL};
    struct server s;
    const time_t t0 = time(NULL);
    server_start_ready(&s, flags);

    /* 1. the failed load, everywhere a client without the token asks */
    struct http_reply a = request(s.port, "GET", "/v2/models/bad/ready", NULL, 0, NULL, 0);
    expect_not_ready(&a, "GET ready", "UNAVAILABLE");
    const time_t since = since_of(a.body ? a.body : "");
    cr_expect(since >= t0 - 1 && since <= time(NULL) + 1, "since %lld, started at %lld",
              (long long)since, (long long)t0);
    free(a.body);
    a = request(s.port, "GET", "/v2/models/bad", NULL, 0, NULL, 0);
    expect_not_ready(&a, "GET metadata", "UNAVAILABLE");
    free(a.body);
    a = request(s.port, "GET", "/v2/models/bad/config.json", NULL, 0, NULL, 0);
    expect_not_ready(&a, "GET config", "UNAVAILABLE");
    free(a.body);
    const char *v2 = "{\"inputs\": [{\"name\": \"query\", \"datatype\": \"FP32\", "
                     "\"shape\": [1, 32], \"data\": [0]}]}";
    a = request(s.port, "POST", "/v2/models/bad/infer", v2, strlen(v2), NULL, 0);
    expect_not_ready(&a, "infer", "UNAVAILABLE");
    free(a.body);
    const char *att = "{\"model\": \"bad\", \"query\": [[1]]}";
    a = post(s.port, att);
    expect_error(&a, 503, "model_not_ready", "is not ready (UNAVAILABLE since ");
    expect_not_ready(&a, "POST /attention", "UNAVAILABLE");
    free(a.body);

    /* 2. the authenticated index keeps the reason */
    const char *auth[] = {AUTH, NULL};
    a = request_with(s.port, "POST", "/v2/repository/index", "", 0, NULL, 0, auth);
    cr_assert_eq(a.status, 200, "%s", a.body);
    cr_expect(strstr(a.body, "attention_chunk_size") != NULL, "the index lost the reason: %s",
              a.body);
    free(a.body);

    /* 3. the config of an HF model shows no absolute path */
    a = request(s.port, "GET", "/v2/models/abs/config.json", NULL, 0, NULL, 0);
    cr_assert_eq(a.status, 200, "%s", a.body);
    json_t *cfg = json_loadb(a.body, a.len, 0, NULL);
    cr_assert_not_null(cfg, "%s", a.body);
    cr_expect_str_eq(json_string_value(json_object_get(cfg, "checkpoint")), "llama", "%s",
                     a.body);
    cr_expect_eq(json_integer_value(json_object_get(cfg, "layer")), 1, "%s", a.body);
    cr_expect(strstr(a.body, ckpt) == NULL && strstr(a.body, "/tmp") == NULL, "%s", a.body);
    json_decref(cfg);
    free(a.body);

    /* 4. an unload: not ready since the unload */
    const time_t t1 = time(NULL);
    a = request_with(s.port, "POST", "/v2/repository/models/abs/unload", "", 0, NULL, 0, auth);
    cr_assert_eq(a.status, 200, "%s", a.body);
    free(a.body);
    a = request(s.port, "GET", "/v2/models/abs/ready", NULL, 0, NULL, 0);
    expect_not_ready(&a, "after unload", "UNLOADED");
    const time_t unloaded = since_of(a.body ? a.body : "");
    cr_expect(unloaded >= t1 - 1 && unloaded <= time(NULL) + 1, "since %lld, unloaded at %lld",
              (long long)unloaded, (long long)t1);
    free(a.body);
    cr_expect_eq(server_stop(&s), 0);
    remove_tree(dir);
}

/* ---------------------------------------------------------------------- */
/* Static files: regular files inside the folder, no dotfiles              */

Test(admin, static_files_are_regular_files_inside_the_folder_and_no_dotfiles, .timeout = 60)
{
    char dir[] = "/tmp/attn-static-XXXXXX", out[] = "/tmp/attn-outside-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_not_null(mkdtemp(out));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && echo '<p>in</p>' > index.html && echo '{\"in\": 1}' > in.json && "
             "mkdir sub && echo '{\"sub\": 1}' > sub/in.json && "
             "echo '{\"hidden\": 1}' > .hidden.json && mkdir .git && "
             "echo '{\"git\": 1}' > .git/x.json && "
             "echo '{\"secret\": 1}' > '%s/secret.json' && "
             "ln -s '%s/secret.json' link.json && ln -s '%s' linkdir && "
             "ln -s in.json alias.json && mkfifo fifo.json", dir, out, out, out);
    run(cmd);
    const char *flags[] = {"--static-dir", dir, NULL};
    struct server s;
    server_start(&s, flags);
    static const char *const served[] = {"/", "/index.html", "/in.json", "/sub/in.json"};
    for (size_t i = 0; i < sizeof served / sizeof served[0]; i++) {
        struct http_reply a = request(s.port, "GET", served[i], NULL, 0, NULL, 0);
        cr_expect_eq(a.status, 200, "%s: %ld", served[i], a.status);
        free(a.body);
    }
    static const char *const refused[] = {
        "/link.json",         /* a symbolic link to a file outside */
        "/linkdir/secret.json", /* through a link to a folder outside */
        "/alias.json",        /* a link, even to a file inside */
        "/.hidden.json",      /* a dotfile */
        "/.git/x.json",       /* in a dot-folder */
        "/fifo.json",         /* not a regular file */
        "/missing.json",      /* and what is not there, for comparison */
    };
    char body0[256] = "";
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct http_reply a = request(s.port, "GET", refused[i], NULL, 0, NULL, 0);
        expect_error(&a, 404, "not_found", refused[i]);
        cr_expect(a.body && strstr(a.body, "{\"secret\": 1}") == NULL &&
                  strstr(a.body, "{\"hidden\": 1}") == NULL, "%s: %s", refused[i], a.body);
        /* the same answer as a missing file, the path aside */
        char shape[256];
        snprintf(shape, sizeof shape, "%s", a.body ? a.body : "");
        char *at = strstr(shape, refused[i]);
        if (at)
            memmove(at, at + strlen(refused[i]), strlen(at + strlen(refused[i])) + 1);
        if (i == 0)
            snprintf(body0, sizeof body0, "%s", shape);
        else
            cr_expect_str_eq(shape, body0, "%s answers unlike the others", refused[i]);
        free(a.body);
    }
    cr_expect_eq(server_stop(&s), 0);
    remove_tree(dir);
    remove_tree(out);
}

/* ---------------------------------------------------------------------- */
/* Exit statuses: 2 for a refused setting, 1 for the system's failures     */

Test(admin, a_refused_setting_exits_2_a_failure_exits_1, .timeout = 120)
{
    static char out[1 << 15];
    char args[512];
    static const struct {
        const char *args, *says;
    } refused[] = {
        {"--workers 0", "1..64"},                         /* a value out of range */
        {"--static-dir /", "would be served"},            /* a folder refused */
        {"--static-dir /etc", "would be served"},
        {"--static-dir README.md", "not a directory"},
        {"--model-repository /nonexistent/models", "cannot be listed"},
        {"--tls-cert-file /nonexistent/cert.pem", "set both or neither"},
        {"--tls-cert-file /nonexistent/c.pem --tls-key-file /nonexistent/k.pem",
         "tls_cert_file: "},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int st = server_startup_output(refused[i].args, out, sizeof out);
        cr_expect_eq(st, 2, "%s: exit %d, want 2: %s", refused[i].args, st, out);
        cr_expect(strstr(out, refused[i].says) != NULL, "%s: no '%s' in %s", refused[i].args,
                  refused[i].says, out);
    }
    /* the port in use: the machine's state, not the setting's value */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, len) == 0 && listen(fd, 1) == 0 &&
              getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    snprintf(args, sizeof args, "--port %d", ntohs(sa.sin_port));
    int st = server_startup_output(args, out, sizeof out);
    cr_expect_eq(st, 1, "port in use: exit %d, want 1: %s", st, out);
    char says[128];
    snprintf(says, sizeof says, "attention-server: could not listen on 127.0.0.1:%d: %s\n",
             ntohs(sa.sin_port), strerror(EADDRINUSE));
    cr_expect(strstr(out, says) != NULL, "port in use: no '%s' in:\n%s", says, out);
    close(fd);
    /* --help says so */
    st = server_startup_output("--help", out, sizeof out);
    cr_expect_eq(st, 0);
    cr_expect(strstr(out, "Exit status: 0 ") != NULL && strstr(out, "; 2 when start-up") &&
              strstr(out, "; 1 for any other failure"), "%s", out);
    /* a directory setting names its value DIR, a file setting FILE */
    cr_expect(strstr(out, "--model-repository DIR ") && strstr(out, "--static-dir DIR ") &&
              strstr(out, "--tls-cert-file FILE "), "%s", out);
}
