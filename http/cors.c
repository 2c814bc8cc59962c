/* cors.c -- the CORS policy and its headers; see cors.h. */
#include "http/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

int cors_enabled(const char *policy)
{
    return policy[0] != '\0';
}

const char *cors_allow_origin(const char *policy, const char *origin)
{
    if (strcmp(policy, "*") == 0)
        return "*";
    if (!origin || !origin[0])
        return NULL;
    const size_t olen = strlen(origin);
    for (const char *p = policy; *p;) { /* "a, b,c": items trimmed of blanks */
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ","), t = n;
        while (t > 0 && p[t - 1] == ' ')
            t--;
        if (t > 0 && t == olen && strncasecmp(p, origin, t) == 0)
            return origin;
        p += n;
    }
    return NULL;
}

/* RFC 9110 §5.6.2: tchar. */
static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Append each name of list to dst (cap bytes, "A, B") that it does not
 * hold yet; 0, or -1 with err filled. */
static int add_names(char *dst, size_t cap, const char *list, char *err, size_t errlen)
{
    size_t n;
    for (const char *p = list, *name; (name = route_list_next(&p, &n));) {
        char h[128];
        snprintf(h, sizeof h, "%.*s", (int)n, name);
        size_t k = 0;
        while (is_tchar((unsigned char)h[k]))
            k++;
        if (h[k] || n >= sizeof h) {
            snprintf(err, errlen, "route table: '%s' is not a header name", h);
            return -1;
        }
        if (strcasecmp(h, "Authorization") == 0) {
            snprintf(err, errlen, "route table: a page may not send Authorization (CORS)");
            return -1;
        }
        if (route_list_has(dst, h))
            continue;
        const size_t used = strlen(dst);
        if (used + n + 3 > cap) {
            snprintf(err, errlen, "route table: the CORS list outgrows %zu bytes at %s", cap, h);
            return -1;
        }
        snprintf(dst + used, cap - used, "%s%s", used ? ", " : "", h);
    }
    return 0;
}

int cors_lists_build(struct cors_lists *l, const struct route_table *t, char *err,
                     size_t errlen)
{
    l->allow[0] = l->expose[0] = '\0';
    if (add_names(l->allow, sizeof l->allow, route_http_reads, err, errlen) ||
        add_names(l->expose, sizeof l->expose, route_http_sends, err, errlen))
        return -1;
    for (size_t i = 0; i < t->count; i++)
        if ((t->rows[i].flags & ROUTE_CORS) &&
            (add_names(l->allow, sizeof l->allow, t->rows[i].reads, err, errlen) ||
             add_names(l->expose, sizeof l->expose, t->rows[i].sends, err, errlen)))
            return -1;
    return 0;
}

void cors_add_headers(struct MHD_Response *resp, const char *policy, const char *origin,
                      const struct cors_lists *l)
{
    if (!cors_enabled(policy))
        return;
    const char *allow = cors_allow_origin(policy, origin);
    if (strcmp(policy, "*") != 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    if (!allow)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", l->expose);
}

void cors_add_preflight_headers(struct MHD_Response *resp, const char *policy,
                                const char *origin, const char *methods,
                                const struct cors_lists *l)
{
    if (!cors_enabled(policy) || !cors_allow_origin(policy, origin))
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", l->allow);
    MHD_add_response_header(resp, "Access-Control-Max-Age", CORS_MAX_AGE);
}
