/* suggest.c -- the nearest known name to an unknown one; see suggest.h. */
#include "lib/suggest.h"

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
