/* test_routes.c -- api/routes: the service's route table. Every row is
 * reachable (no row hides behind an earlier one), the columns agree with
 * each other, and a path that names nothing gets the 404 of the row that
 * takes it, in that row's error style. What the transport does with each
 * column is tests/http/test_route.c; each endpoint's answers are the
 * tests/server/ tests. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "api/routes.h"
#include "config/config.h"
#include "lib/errors.h"
#include "lib/pool.h"
#include "tests/support/fixture.h"

static const struct route_table *table(void)
{
    static struct cfg c;
    cfg_defaults(&c);
    return routes_init(&c, NULL);
}

/* A path the pattern matches: each {capture} as "m", an optional part
 * taken or not, a trailing * as "zz". */
static void sample(char *out, size_t n, const char *pattern, int with_option)
{
    size_t o = 0;
    int in_option = 0;
    for (const char *p = pattern; *p && o + 2 < n; p++) {
        if (*p == '[' || *p == ']') {
            in_option = *p == '[';
            continue;
        }
        if (in_option && !with_option)
            continue;
        if (*p == '{') {
            out[o++] = 'm';
            p = strchr(p, '}');
        } else if (*p == '*') {
            out[o++] = 'z', out[o++] = 'z';
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

Test(routes, every_row_is_reachable_by_a_path_of_its_own)
{
    const struct route_table *t = table();
    cr_assert_gt(t->count, 20, "every endpoint of the service: %zu rows", t->count);
    for (size_t i = 0; i < t->count; i++) {
        const struct route *row = &t->rows[i];
        char path[256];
        struct route_request rq = {0};
        sample(path, sizeof path, row->path, 1);
        const struct route *got = route_find(t, path, &rq);
        cr_assert_eq(got, row, "%s (from %s) is served by row %td (%s), not row %zu", path,
                     row->path, got ? got - t->rows : -1, got ? got->path : "none", i);
        /* without its optional part: this row, or one before it ("/v2") */
        sample(path, sizeof path, row->path, 0);
        got = route_find(t, path, &rq);
        cr_assert(got && got <= row, "%s (from %s) is served by %s", path, row->path,
                  got ? got->path : "no row");
    }
}

Test(routes, the_columns_agree)
{
    const struct route_table *t = table();
    struct route_request rq = {0};
    cr_assert(route_match(t->rows[t->count - 1].path, "", &rq), "the last row takes every path");
    for (size_t i = 0; i < t->count; i++) {
        const struct route *row = &t->rows[i];
        cr_assert_not_null(row->error, "%s: an error style", row->path);
        if (!row->methods) { /* names no endpoint: its check says why */
            cr_assert(!row->handler && row->check && !row->metric, "%s", row->path);
            continue;
        }
        cr_assert_not_null(row->handler, "%s: a handler", row->path);
        cr_assert_not_null(row->metric, "%s: a metric", row->path);
        if (row->flags & ROUTE_BODY)
            cr_assert_eq(row->methods, ROUTE_POST, "%s: a body is POSTed", row->path);
        if (row->flags & ROUTE_ADMIN) /* no web page may drive the admin rows */
            cr_assert_not(row->flags & ROUTE_CORS, "%s: admin rows have no CORS", row->path);
        const int repository = strncmp(row->path, "/v2/repository", 14) == 0;
        cr_assert_eq(repository, !!(row->flags & ROUTE_ADMIN),
                     "%s: the model repository, and only it, needs the admin token", row->path);
    }
}

/* The body of what the row that takes path answers when nothing is there
 * (its check, or its handler for a path with no file). */
static json_t *missing(const char *path)
{
    const struct route_table *t = table();
    struct route_request rq = {.path = path, .method = "GET"};
    const struct route *row = route_find(t, path, &rq);
    cr_assert_not_null(row, "%s", path);
    rq.route = row;
    struct route_response out = {0};
    char msg[240];
    if (row->methods) {
        cr_assert_not_null(row->exists, "%s: %s exists", path, row->path);
        cr_assert_not(row->exists(path), "%s", path);
        row->handler(&rq, &out);
    } else {
        const int e = row->check(&rq, msg, sizeof msg);
        row->error(&out, e, msg);
    }
    cr_assert_eq(out.status, 404, "%s: %d", path, out.status);
    cr_assert_str_eq(out.content_type, "application/json");
    json_t *j = json_loadb(out.body, out.len, 0, NULL);
    cr_assert_not_null(j, "%.*s", (int)out.len, out.body);
    route_response_free(&out);
    return j;
}

Test(routes, an_unknown_path_404s_in_the_style_of_its_row)
{
    /* under /v2: the Open Inference Protocol's {"error": msg} */
    json_t *j = missing("/v2/nope");
    cr_assert_str_eq(json_string_value(json_object_get(j, "error")), "no endpoint at /v2/nope");
    json_decref(j);
    j = missing("/v2/repository/nope");
    cr_assert_str_eq(json_string_value(json_object_get(j, "error")),
                     "no endpoint at /v2/repository/nope");
    json_decref(j);
    /* elsewhere: {"error": {"code", "message"}} */
    j = missing("/nope.html");
    json_t *e = json_object_get(j, "error");
    cr_assert_str_eq(json_string_value(json_object_get(e, "code")), "not_found");
    cr_assert_str_eq(json_string_value(json_object_get(e, "message")),
                     "no endpoint or file at /nope.html");
    json_decref(j);
}

/* The transport knows no protocol: no file of http/ names a header that a
 * row reads or sends (X-Sequence-Id, v2's Inference-Header-Content-Length,
 * ...) besides HTTP's own. It learns them from the table (route.h: reads,
 * sends); once http/cors.h listed v2's header itself. */
Test(routes, the_transport_names_no_header_of_a_protocol)
{
    const struct route_table *t = table();
    int names = 0;
    for (size_t i = 0; i < t->count; i++) {
        const char *lists[2] = {t->rows[i].reads, t->rows[i].sends};
        for (int k = 0; k < 2; k++) {
            size_t n;
            for (const char *p = lists[k], *name; (name = route_list_next(&p, &n));) {
                char h[64], cmd[160], found[512] = "";
                snprintf(h, sizeof h, "%.*s", (int)n, name);
                if (route_list_has(route_http_reads, h) || route_list_has(route_http_sends, h))
                    continue;
                names++;
                snprintf(cmd, sizeof cmd, "grep -rilF -- '%s' http", h);
                FILE *f = popen(cmd, "r");
                cr_assert_not_null(f);
                const size_t got = fread(found, 1, sizeof found - 1, f);
                found[got] = '\0';
                pclose(f);
                cr_expect_eq(got, 0, "%s, which %s %s, is named in http/ (the transport takes "
                             "it from the route table): %s", h, t->rows[i].path,
                             k ? "sends" : "reads", found);
            }
        }
    }
    cr_assert_geq(names, 3, "the rows declare X-Sequence-Id, Server-Timing and v2's header");
}

/* The paths of openapi.yaml (its "  /...:" lines under paths:), each
 * {parameter} written as "m", as sample() writes a capture. */
static int spec_paths(char paths[][128], int max)
{
    int n = 0;
    for (const char *l = fixture_spec(); *l && n < max;) {
        const size_t len = strcspn(l, "\n");
        if (strncmp(l, "  /", 3) == 0 && len >= 4 && l[len - 1] == ':') {
            char path[256];
            snprintf(path, sizeof path, "%.*s", (int)(len - 3), l + 2);
            sample(paths[n++], 128, path, 0);
        }
        l += len + (l[len] == '\n');
    }
    return n;
}

/* Every path of openapi.yaml is a row of the table that answers it (not a
 * fallback that only 404s), and every answering row is a path of the spec:
 * with its optional part and without. The last row (static files, every
 * path) is the spec's "/". */
Test(routes, the_spec_paths_are_the_rows_and_back)
{
    const struct route_table *t = table();
    static char paths[128][128];
    int n = spec_paths(paths, 128);
    cr_assert_gt(n, 10, "openapi.yaml: %d paths read", n);
    for (int i = 0; i < n; i++) {
        struct route_request rq = {0};
        const struct route *got = route_find(t, paths[i], &rq);
        cr_expect(got && got->handler, "openapi.yaml path %s is no row of api/routes.c", paths[i]);
    }
    for (size_t i = 0; i + 1 < t->count; i++) {
        if (!t->rows[i].handler)
            continue;
        for (int opt = 0; opt < 2; opt++) {
            char path[256];
            sample(path, sizeof path, t->rows[i].path, opt);
            int found = 0;
            for (int k = 0; k < n && !found; k++)
                found = strcmp(paths[k], path) == 0;
            cr_expect(found, "row %s (as %s) is no path of openapi.yaml", t->rows[i].path, path);
        }
    }
}
