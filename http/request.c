/* request.c -- what a request carries besides its body: its X-Request-Id,
 * on a ROUTE_ADMIN row the admin token, and the headers its row reads
 * (once each). Part of the HTTP transport (http/http.c); see request.h. */
#include "http/request.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/errors.h"
#include "lib/access_log.h"

/* a and b equal, in time that depends on their lengths only. */
static int same_secret(const char *a, const char *b)
{
    const size_t n = strlen(a), m = strlen(b);
    unsigned char d = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i % (m ? m : 1)]);
    return d == 0;
}

int request_check_token(struct req *r, char *msg, size_t msglen)
{
    const char *want = r->srv->opt.admin_token;
    if (!want[0]) {
        snprintf(msg, msglen, "%s", r->srv->table->admin_off);
        return ERR_FORBIDDEN;
    }
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        snprintf(msg, msglen, "this endpoint needs Authorization: Bearer <admin_token>");
        return ERR_UNAUTHORIZED;
    }
    h += 7;
    while (*h == ' ')
        h++;
    if (!same_secret(h, want)) {
        snprintf(msg, msglen, "the bearer token is not the admin_token");
        return ERR_FORBIDDEN;
    }
    return -1;
}

struct occurrences {
    const char *name; /* n bytes, not terminated */
    size_t n;
    int count;
};

static enum MHD_Result count_name(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind, (void)value;
    struct occurrences *o = cls;
    if (strlen(key) == o->n && strncasecmp(key, o->name, o->n) == 0)
        o->count++;
    return MHD_YES;
}

int request_check_once(struct req *r, char *msg, size_t msglen)
{
    struct occurrences o;
    for (const char *p = r->route->reads; (o.name = route_list_next(&p, &o.n));) {
        o.count = 0;
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_name, &o);
        if (o.count > 1) { /* which one is meant? (a proxy may read the other) */
            snprintf(msg, msglen, "%d %.*s headers; send one", o.count, (int)o.n, o.name);
            return ERR_BAD_REQUEST;
        }
    }
    return -1;
}

void request_id_make(struct req *r)
{
    request_id_of(r->request_id,
                  MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id"));
}
