/* suggest.c -- the nearest known name to an unknown one; see suggest.h. */
#include "lib/suggest.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* Names longer than this are never near anything (the rows below are on
 * the stack). */
#define LONGEST 128

int suggest_distance(const char *a, const char *b)
{
    enum { FAR = SUGGEST_MAX_DISTANCE + 1 };
    const size_t n = strlen(a), m = strlen(b);
    if (n > LONGEST || m > LONGEST || (n > m ? n - m : m - n) > SUGGEST_MAX_DISTANCE)
        return FAR;
    /* optimal string alignment, three rows: d[i] is rows[i % 3] */
    int rows[3][LONGEST + 1];
    for (size_t j = 0; j <= m; j++)
        rows[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int *d = rows[i % 3];
        const int *p = rows[(i + 2) % 3], *pp = rows[(i + 1) % 3]; /* d[i-1], d[i-2] */
        d[0] = (int)i;
        int low = d[0];
        for (size_t j = 1; j <= m; j++) {
            const int cost = a[i - 1] != b[j - 1];
            int v = p[j] + 1;
            if (d[j - 1] + 1 < v)
                v = d[j - 1] + 1;
            if (p[j - 1] + cost < v)
                v = p[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            d[j] = v;
            if (v < low)
                low = v;
        }
        if (low > SUGGEST_MAX_DISTANCE) /* no later row has less */
            return FAR;
    }
    const int r = rows[n % 3][m];
    return r > SUGGEST_MAX_DISTANCE ? FAR : r;
}

const char *suggest_nearest(const char *word, const char *const *list, size_t n)
{
    const char *best = NULL;
    int best_d = SUGGEST_MAX_DISTANCE + 1;
    for (size_t i = 0; i < n; i++) {
        if (!list[i] || strcmp(word, list[i]) == 0)
            continue;
        const int d = suggest_distance(word, list[i]);
        if (d < best_d)
            best = list[i], best_d = d;
    }
    return best;
}

const char *suggest_hint(char *buf, size_t n, const char *word, const char *const *list,
                         size_t count)
{
    const char *near = suggest_nearest(word, list, count);
    if (near)
        snprintf(buf, n, " (did you mean '%s'?)", near);
    else if (n)
        buf[0] = '\0';
    return buf;
}

void suggest_unknown_model(char *buf, size_t n, const char *name)
{
    json_t *names = repo_names();
    const size_t count = json_array_size(names);
    const char *near = NULL;
    int near_d = SUGGEST_MAX_DISTANCE + 1;
    for (size_t i = 0; i < count; i++) {
        const char *s = json_string_value(json_array_get(names, i));
        const int d = s && strcmp(s, name) ? suggest_distance(name, s) : near_d;
        if (d < near_d)
            near = s, near_d = d;
    }
    size_t len = (size_t)snprintf(buf, n, "unknown model '%.64s'", name);
    if (near && len < n)
        len += (size_t)snprintf(buf + len, n - len, " (did you mean '%s'?)", near);
    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "; the models served are");
    /* as many as fit (at most SUGGEST_MAX_MODELS), room kept for the tail */
    static const char tail[] = ", … (GET /v2/models lists them)";
    size_t i = 0;
    for (; i < count && i < SUGGEST_MAX_MODELS; i++) {
        const char *s = json_string_value(json_array_get(names, i));
        const size_t need = strlen(s) + 2 + (i + 1 < count ? sizeof tail : 1);
        if (len + need > n)
            break;
        len += (size_t)snprintf(buf + len, n - len, "%s %s", i ? "," : "", s);
    }
    if (i < count && len < n)
        snprintf(buf + len, n - len, "%s", tail);
    json_decref(names);
}

int suggest_acquire(struct repo_ref **ref, const char *name, const char *version, char *why,
                    size_t whylen)
{
    const int rc = repo_acquire(ref, name, version, why, whylen);
    int state;
    char reason[8];
    if (rc == REPO_ENOTFOUND && repo_state(name, &state, reason, sizeof reason) != 0)
        suggest_unknown_model(why, whylen, name);
    return rc;
}
