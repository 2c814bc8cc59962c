/* cpus.c -- the CPUs this process may use: affinity and cgroup quota. See cpus.h. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */ /* NOLINT(bugprone-reserved-identifier,cert-dcl37-c,cert-dcl51-cpp) */
#include "config/cpus.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read a small file into buf; 0, or -1 if it cannot be read or is empty. */
static int read_small(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = '\0';
    return n > 0 ? 0 : -1;
}

/* A strict decimal integer at *s, blanks before it skipped; -1 if none. */
static int parse_ll(const char **s, long long *v)
{
    while (**s == ' ' || **s == '\t')
        (*s)++;
    char *end;
    errno = 0;
    *v = strtoll(*s, &end, 10);
    if (end == *s || errno != 0)
        return -1;
    *s = end;
    return 0;
}

/* Only blanks and newlines left at s. */
static int rest_blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == '\0';
}

/* ceil(quota / period) clamped to 1..INT_MAX; 0 if either is not positive. */
static int quota_cpus(long long quota, long long period)
{
    if (quota <= 0 || period <= 0)
        return 0;
    long long n = quota / period + (quota % period != 0);
    return n > INT_MAX ? INT_MAX : (int)n;
}

/* v2: "<root><path>/cpu.max". 0 none or malformed, -1 no such file. */
static int read_v2(const char *root, const char *path)
{
    char file[4096], buf[128];
    snprintf(file, sizeof file, "%s%s/cpu.max", root, path);
    if (read_small(file, buf, sizeof buf) != 0)
        return -1;
    const char *s = buf;
    long long quota, period;
    if (strncmp(s, "max", 3) == 0)
        return 0; /* no quota */
    if (parse_ll(&s, &quota) != 0 || parse_ll(&s, &period) != 0 || !rest_blank(s))
        return 0;
    return quota_cpus(quota, period);
}

/* v1: "<dir>/cpu.cfs_quota_us" and "cpu.cfs_period_us". As read_v2. */
static int read_v1(const char *dir)
{
    char file[4096], qbuf[64], pbuf[64];
    snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
    if (read_small(file, qbuf, sizeof qbuf) != 0)
        return -1;
    snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
    if (read_small(file, pbuf, sizeof pbuf) != 0)
        return 0;
    const char *q = qbuf, *p = pbuf;
    long long quota, period;
    if (parse_ll(&q, &quota) != 0 || !rest_blank(q) || parse_ll(&p, &period) != 0 ||
        !rest_blank(p))
        return 0;
    return quota_cpus(quota, period);
}

/* The cgroup path of /proc/self/cgroup for v2 ("0::") or for v1's cpu
 * controller, into path ("" if absent). */
static void self_path(const char *self_cgroup, int v2, char *path, size_t len)
{
    path[0] = '\0';
    for (const char *line = self_cgroup; line != NULL && *line; ) {
        const char *nl = strchr(line, '\n');
        size_t n = nl != NULL ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', n);
        const char *c2 = c1 != NULL ? memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - line)) : NULL;
        if (c2 != NULL) {
            size_t clen = (size_t)(c2 - c1 - 1);
            int match = 0;
            if (v2)
                match = clen == 0 && strncmp(line, "0:", 2) == 0;
            else
                for (const char *c = c1 + 1; c < c2; ) { /* "cpu,cpuacct" */
                    const char *comma = memchr(c, ',', (size_t)(c2 - c));
                    const char *e = comma != NULL ? comma : c2;
                    if (e - c == 3 && strncmp(c, "cpu", 3) == 0)
                        match = 1;
                    c = comma != NULL ? comma + 1 : c2;
                }
            size_t plen = n - (size_t)(c2 + 1 - line);
            if (match && plen < len) {
                memcpy(path, c2 + 1, plen);
                path[plen] = '\0';
                if (plen == 1 && path[0] == '/')
                    path[0] = '\0';
                return;
            }
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
}

int cfg_cpu_quota(const char *cgroup_root, const char *self_cgroup)
{
    char path[2048], dir[4096];
    static const char *const v1_dirs[] = {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"};

    self_path(self_cgroup, 0, path, sizeof path); /* v1 */
    for (size_t i = 0; i < sizeof v1_dirs / sizeof v1_dirs[0]; i++) {
        int r = -1;
        if (path[0] != '\0') {
            snprintf(dir, sizeof dir, "%s%s%s", cgroup_root, v1_dirs[i], path);
            r = read_v1(dir);
        }
        if (r < 0) {
            snprintf(dir, sizeof dir, "%s%s", cgroup_root, v1_dirs[i]);
            r = read_v1(dir);
        }
        if (r >= 0)
            return r;
    }
    self_path(self_cgroup, 1, path, sizeof path); /* v2 */
    int r = path[0] != '\0' ? read_v2(cgroup_root, path) : -1;
    if (r < 0)
        r = read_v2(cgroup_root, "");
    return r > 0 ? r : 0;
}

void cfg_cpus_combine(int affinity, int quota, int threads_per_request, struct cfg_cpus *out)
{
    out->affinity = affinity < 1 ? 1 : affinity;
    out->quota = quota < 0 ? 0 : quota;
    out->cpus = out->quota > 0 && out->quota < out->affinity ? out->quota : out->affinity;
    int tpr = threads_per_request < 1 ? 1 : threads_per_request;
    out->workers = out->cpus / tpr < 1 ? 1 : out->cpus / tpr;
}

void cfg_cpus_detect(int threads_per_request, struct cfg_cpus *out)
{
    cpu_set_t set;
    int affinity = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        affinity = CPU_COUNT(&set);
    char self[4096];
    int have = read_small("/proc/self/cgroup", self, sizeof self) == 0;
    cfg_cpus_combine(affinity, cfg_cpu_quota("/sys/fs/cgroup", have ? self : NULL),
                     threads_per_request, out);
}
