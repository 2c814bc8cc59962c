/* test_spec.c -- the error table in lib/errors.h, openapi.yaml and the
 * reference in docs/ agree.
 *
 * HTTP_ERRORS is the one source of truth. openapi.yaml lists the slugs as the
 * enum of components/schemas/Error/properties/error/properties/code, with an
 * `x-status` map (slug: status) beside it; docs/api.md has a table with one row
 * per slug, e.g. "| 400 | `invalid_json` | ... |". Every mismatch is printed,
 * naming the side it is missing from.
 *
 * openapi.yaml is read with a small indentation-based block finder rather
 * than a YAML library: it handles the block-style mappings and lists the
 * spec is written in, and a test fails loudly if the path is not found.
 * Tests run from the repository root. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/routes.h"
#include "config/config.h"
#include "http/cors.h"
#include "lib/errors.h"
#include "tests/support/fixture.h"
#include "tests/support/http_util.h"

#define SPEC_PATH FIXTURE_SPEC
#define ERRORS_DOC "docs/api.md"      /* the error table */
#define CORS_DOC "docs/operations.md" /* the CORS headers */
#define MAX_ENTRIES 64

/* One non-blank, non-comment line of the YAML file, borrowed from the buffer. */
struct line {
    int indent;
    const char *text; /* after the indentation */
    int len;          /* without trailing spaces */
};

struct doc {
    char *buf;
    struct line *lines;
    int n;
};

/* A slug with its status; status 0 when the source gives none. */
struct entry {
    char slug[64];
    int status;
};

/* openapi.yaml split into lines (in a copy), dropping blank and
 * comment-only lines. */
static void doc_load(struct doc *d)
{
    d->buf = strdup(fixture_spec());
    cr_assert_not_null(d->buf);
    size_t cap = 1;
    for (const char *p = d->buf; *p; p++)
        cap += *p == '\n';
    d->lines = calloc(cap, sizeof *d->lines);
    cr_assert_not_null(d->lines);
    d->n = 0;
    for (char *p = d->buf; *p;) {
        char *end = strchr(p, '\n');
        char *next = end ? end + 1 : p + strlen(p);
        if (end)
            *end = '\0';
        int indent = 0;
        while (p[indent] == ' ')
            indent++;
        int len = (int)strlen(p + indent);
        while (len > 0 && isspace((unsigned char)p[indent + len - 1]))
            len--;
        if (len > 0 && p[indent] != '#')
            d->lines[d->n++] = (struct line){indent, p + indent, len};
        p = next;
    }
}

static void doc_free(struct doc *d)
{
    free(d->lines);
    free(d->buf);
}

/* Within lines [*lo, *hi), the direct child mapping key `key` ("key:" at the
 * block's shallowest indentation); narrow [*lo, *hi) to that key's value
 * block. Returns 0, or -1 when the key is absent. */
static int doc_enter(const struct doc *d, int *lo, int *hi, const char *key)
{
    if (*lo >= *hi)
        return -1;
    int indent = d->lines[*lo].indent;
    for (int i = *lo; i < *hi; i++)
        if (d->lines[i].indent < indent)
            indent = d->lines[i].indent;
    size_t klen = strlen(key);
    for (int i = *lo; i < *hi; i++) {
        const struct line *l = &d->lines[i];
        if (l->indent != indent || (size_t)l->len != klen + 1 || strncmp(l->text, key, klen) != 0 ||
            l->text[klen] != ':')
            continue;
        int j = i + 1;
        while (j < *hi && d->lines[j].indent > indent)
            j++;
        *lo = i + 1;
        *hi = j;
        return 0;
    }
    return -1;
}

/* Narrow to the value block of a '/'-separated key path from the top. */
static void doc_find(const struct doc *d, int *lo, int *hi, const char *path)
{
    char copy[256];
    cr_assert_lt(strlen(path), sizeof copy);
    strcpy(copy, path);
    *lo = 0;
    *hi = d->n;
    char *save = NULL;
    for (char *key = strtok_r(copy, "/", &save); key; key = strtok_r(NULL, "/", &save))
        cr_assert_eq(doc_enter(d, lo, hi, key), 0, "%s: no key '%s' on the path %s", SPEC_PATH, key,
                     path);
    cr_assert_lt(*lo, *hi, "%s: %s is empty or not a block", SPEC_PATH, path);
}

/* Copy a YAML scalar of n bytes, without quotes, into dst. */
static void scalar_copy(char *dst, size_t cap, const char *s, int n)
{
    while (n > 0 && isspace((unsigned char)*s))
        s++, n--;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0])
        s++, n -= 2;
    cr_assert_lt((size_t)n, cap, "scalar too long: %.*s", n, s);
    memcpy(dst, s, (size_t)n);
    dst[n] = '\0';
}

/* The code enum and x-status map of openapi.yaml's Error schema. Returns
 * the number of slugs; statuses are 0 until merge_statuses() fills them. */
static int spec_slugs(const struct doc *d, struct entry *out)
{
    static const char code_path[] = "components/schemas/Error/properties/error/properties/code";
    char path[128];
    int lo, hi, n = 0;

    snprintf(path, sizeof path, "%s/enum", code_path);
    doc_find(d, &lo, &hi, path);
    for (int i = lo; i < hi; i++) {
        const struct line *l = &d->lines[i];
        cr_assert(l->len > 2 && l->text[0] == '-' && l->text[1] == ' ',
                  "%s: %s: expected a block list item, got '%.*s'", SPEC_PATH, path, l->len,
                  l->text);
        cr_assert_lt(n, MAX_ENTRIES);
        scalar_copy(out[n].slug, sizeof out[n].slug, l->text + 2, l->len - 2);
        out[n].status = 0;
        n++;
    }
    return n;
}

/* The x-status map: slug: status. Returns the number of entries. */
static int spec_statuses(const struct doc *d, struct entry *out)
{
    static const char path[] = "components/schemas/Error/properties/error/properties/code/x-status";
    int lo, hi, n = 0;

    doc_find(d, &lo, &hi, path);
    for (int i = lo; i < hi; i++) {
        const struct line *l = &d->lines[i];
        const char *colon = memchr(l->text, ':', (size_t)l->len);
        cr_assert_not_null(colon, "%s: %s: expected 'slug: status', got '%.*s'", SPEC_PATH, path,
                           l->len, l->text);
        cr_assert_lt(n, MAX_ENTRIES);
        scalar_copy(out[n].slug, sizeof out[n].slug, l->text, (int)(colon - l->text));
        char num[16];
        scalar_copy(num, sizeof num, colon + 1, l->len - (int)(colon + 1 - l->text));
        char *end;
        long st = strtol(num, &end, 10);
        cr_assert(*num && !*end && st >= 100 && st <= 599,
                  "%s: %s: '%s' has status '%s', not an HTTP status", SPEC_PATH, path,
                  out[n].slug, num);
        out[n].status = (int)st;
        n++;
    }
    return n;
}

/* The HTTP_ERRORS table itself. */
static int code_slugs(struct entry *out)
{
    int n = 0;
    for (int e = 0; e < ERR_COUNT; e++, n++) {
        cr_assert_lt(strlen(http_error_slug(e)), sizeof out[n].slug);
        strcpy(out[n].slug, http_error_slug(e));
        out[n].status = http_error_status(e);
    }
    return n;
}

static const struct entry *find(const struct entry *v, int n, const char *slug)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].slug, slug) == 0)
            return &v[i];
    return NULL;
}

/* Report (without stopping) every slug of a that b lacks. Returns the count. */
static int report_missing(const struct entry *a, int na, const char *a_name, const struct entry *b,
                          int nb, const char *b_name)
{
    int missing = 0;
    for (int i = 0; i < na; i++)
        if (!find(b, nb, a[i].slug)) {
            cr_log_error("'%s' is in %s but missing from %s", a[i].slug, a_name, b_name);
            missing++;
        }
    return missing;
}

static int report_duplicates(const struct entry *v, int n, const char *name)
{
    int dups = 0;
    for (int i = 0; i < n; i++)
        if (find(v, i, v[i].slug)) {
            cr_log_error("'%s' appears twice in %s", v[i].slug, name);
            dups++;
        }
    return dups;
}

#define CODE_NAME "lib/errors.h (HTTP_ERRORS)"
#define ENUM_NAME "openapi.yaml (Error code enum)"
#define XSTATUS_NAME "openapi.yaml (Error code x-status)"

Test(spec, error_enum_equals_errors_table)
{
    struct doc d;
    struct entry code[MAX_ENTRIES], spec[MAX_ENTRIES];
    doc_load(&d);
    int nc = code_slugs(code), ns = spec_slugs(&d, spec);

    int bad = report_missing(code, nc, CODE_NAME, spec, ns, ENUM_NAME) +
              report_missing(spec, ns, ENUM_NAME, code, nc, CODE_NAME) +
              report_duplicates(spec, ns, ENUM_NAME);
    cr_expect_eq(bad, 0, "%d slug(s) differ between %s and %s (listed above)", bad, CODE_NAME,
                 ENUM_NAME);
    cr_expect_eq(ns, nc, "%s has %d slugs, %s has %d", ENUM_NAME, ns, CODE_NAME, nc);
    doc_free(&d);
}

Test(spec, x_status_equals_errors_table)
{
    struct doc d;
    struct entry code[MAX_ENTRIES], spec[MAX_ENTRIES];
    doc_load(&d);
    int nc = code_slugs(code), ns = spec_statuses(&d, spec);

    int bad = report_missing(code, nc, CODE_NAME, spec, ns, XSTATUS_NAME) +
              report_missing(spec, ns, XSTATUS_NAME, code, nc, CODE_NAME) +
              report_duplicates(spec, ns, XSTATUS_NAME);
    for (int i = 0; i < nc; i++) {
        const struct entry *s = find(spec, ns, code[i].slug);
        if (s && s->status != code[i].status) {
            cr_log_error("'%s' is %d in %s but %d in %s", code[i].slug, code[i].status, CODE_NAME,
                         s->status, XSTATUS_NAME);
            bad++;
        }
    }
    cr_expect_eq(bad, 0, "%d difference(s) between %s and %s (listed above)", bad, CODE_NAME,
                 XSTATUS_NAME);
    doc_free(&d);
}

/* Every status the table uses is documented: some operation under `paths`
 * lists it as a response ('<status>':). */
Test(spec, every_error_status_is_a_response)
{
    struct doc d;
    doc_load(&d);
    int lo, hi;
    doc_find(&d, &lo, &hi, "paths");
    for (int e = 0; e < ERR_COUNT; e++) {
        char key[16];
        snprintf(key, sizeof key, "'%d':", http_error_status(e));
        int found = 0;
        for (int i = lo; i < hi && !found; i++)
            found = (size_t)d.lines[i].len == strlen(key) &&
                    strncmp(d.lines[i].text, key, strlen(key)) == 0;
        cr_expect(found, "'%s' (%s) is status %d, which no operation in %s lists as a response",
                  http_error_slug(e), CODE_NAME, http_error_status(e), SPEC_PATH);
    }
    doc_free(&d);
}

/* Does the Markdown table row `row` have a cell whose trimmed text is `want`? */
static int row_has_cell(const char *row, size_t len, const char *want)
{
    size_t wlen = strlen(want);
    const char *end = row + len;
    for (const char *p = row; p < end;) {
        const char *bar = memchr(p, '|', (size_t)(end - p));
        const char *cell_end = bar ? bar : end;
        const char *a = p, *b = cell_end;
        while (a < b && isspace((unsigned char)*a))
            a++;
        while (b > a && isspace((unsigned char)b[-1]))
            b--;
        if ((size_t)(b - a) == wlen && memcmp(a, want, wlen) == 0)
            return 1;
        p = bar ? bar + 1 : end;
    }
    return 0;
}

Test(spec, docs_error_table_lists_every_slug)
{
    char *readme = fixture_read(ERRORS_DOC, NULL);
    int missing = 0;
    for (int e = 0; e < ERR_COUNT; e++) {
        char status[16], slug[80];
        snprintf(status, sizeof status, "%d", http_error_status(e));
        snprintf(slug, sizeof slug, "`%s`", http_error_slug(e));
        int found = 0;
        for (const char *p = readme; *p && !found;) {
            size_t len = strcspn(p, "\n");
            const char *q = p;
            while (q < p + len && (*q == ' ' || *q == '\t'))
                q++;
            found = *q == '|' && row_has_cell(q, len - (size_t)(q - p), status) &&
                    row_has_cell(q, len - (size_t)(q - p), slug);
            p += len + (p[len] == '\n');
        }
        if (!found) {
            cr_log_error("%s has no table row with cells '%s' and '%s'", ERRORS_DOC, status, slug);
            missing++;
        }
    }
    cr_expect_eq(missing, 0,
                 "%d slug(s) of %s missing from %s's error table (listed above), "
                 "e.g. a row \"| %d | `%s` | %s |\"",
                 missing, CODE_NAME, ERRORS_DOC, http_error_status(0), http_error_slug(0),
                 http_error_message(0));
    free(readme);
}

/* In text, every inline-code `Name: value` of the header name has value
 * (blanks and line breaks inside it count as one space); returns how many
 * there are. */
static int check_header_quotes(const char *text, const char *file, const char *name,
                               const char *value)
{
    char start[80];
    snprintf(start, sizeof start, "`%s: ", name);
    int n = 0;
    for (const char *p = strstr(text, start); p; p = strstr(p + 1, start), n++) {
        const char *q = p + strlen(start), *end = strchr(q, '`');
        cr_assert_not_null(end, "%s: an unclosed `%s: ...", file, name);
        char got[512];
        size_t k = 0;
        for (; q < end && k + 1 < sizeof got; q++)
            if (!isspace((unsigned char)*q))
                got[k++] = *q;
            else if (k > 0 && got[k - 1] != ' ')
                got[k++] = ' ';
        got[k] = '\0';
        cr_expect_str_eq(got, value, "%s says `%s: %s`; the server sends '%s' (the route "
                         "table's, http/cors.h)", file, name, got, value);
    }
    return n;
}

/* The CORS section of docs/operations.md quotes the headers the server sends (once they
 * differed: Content-Type only, while five were sent), which the transport makes from
 * the service's route table; the HTTP tests expect the same (SERVICE_CORS_*). */
Test(spec, cors_header_lists_in_the_docs_are_what_is_sent)
{
    struct cfg c;
    cfg_defaults(&c);
    struct cors_lists l;
    char err[200];
    cr_assert_eq(cors_lists_build(&l, routes_init(&c, NULL), err, sizeof err), 0, "%s", err);
    cr_expect_str_eq(l.allow, SERVICE_CORS_ALLOW);
    cr_expect_str_eq(l.expose, SERVICE_CORS_EXPOSE);
    char *readme = fixture_read(CORS_DOC, NULL);
    const char *spec = fixture_spec();
    cr_expect_geq(check_header_quotes(readme, CORS_DOC, "Access-Control-Allow-Headers",
                                      l.allow), 1, "%s quotes no "
                  "Access-Control-Allow-Headers", CORS_DOC);
    cr_expect_geq(check_header_quotes(readme, CORS_DOC, "Access-Control-Expose-Headers",
                                      l.expose), 1, "%s quotes no "
                  "Access-Control-Expose-Headers", CORS_DOC);
    check_header_quotes(spec, SPEC_PATH, "Access-Control-Allow-Headers", l.allow);
    check_header_quotes(spec, SPEC_PATH, "Access-Control-Expose-Headers", l.expose);
    cr_expect_not(route_list_has(l.allow, "Authorization"), "a page may send the admin token");
    free(readme);
}
