/* cors.c -- the CORS policy and its headers; see cors.h. */
#include "http/cors.h"

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

void cors_add_headers(struct MHD_Response *resp, const char *policy, const char *origin)
{
    if (!cors_enabled(policy))
        return;
    const char *allow = cors_allow_origin(policy, origin);
    if (strcmp(policy, "*") != 0)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Origin");
    if (!allow)
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
    MHD_add_response_header(resp, "Access-Control-Expose-Headers", CORS_EXPOSE_HEADERS);
}

void cors_add_preflight_headers(struct MHD_Response *resp, const char *policy,
                                const char *origin, const char *methods)
{
    if (!cors_enabled(policy) || !cors_allow_origin(policy, origin))
        return;
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
    MHD_add_response_header(resp, "Access-Control-Allow-Headers", CORS_ALLOW_HEADERS);
    MHD_add_response_header(resp, "Access-Control-Max-Age", CORS_MAX_AGE);
}
