#include "tests/support/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int check_tensor(const char *name, const float *got, const float *want, size_t n,
                 double atol, double rtol)
{
    return check_tensor_torch(name, got, want, NULL, n, atol, rtol);
}

int check_tensor_torch(const char *name, const float *got, const float *want,
                       const float *want32, size_t n, double atol, double rtol)
{
    double maxd = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double tol = atol + rtol * fabs((double)want[i]);
        if (want32 && CHECK_TORCH32_FACTOR * fabs((double)want32[i] - want[i]) > tol)
            tol = CHECK_TORCH32_FACTOR * fabs((double)want32[i] - want[i]);
        if (!(d <= tol)) { /* NaN fails too */
            if (bad < 5)
                fprintf(stderr, "  %s[%zu]: got %.9g want %.9g (|d| %.3g)\n",
                        name, i, (double)got[i], (double)want[i], d);
            bad++;
        }
        if (d > maxd || isnan(d))
            maxd = d;
    }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu elements out of tolerance, max |d| %.3g\n",
                name, bad, n, maxd);
    return bad == 0;
}

unsigned long long check_xorshift(unsigned long long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

uint64_t check_xorshift_star(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

float check_randf(unsigned long long *s)
{
    return (float)((check_xorshift(s) >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

long check_status_kib(int pid, const char *key)
{
    char path[64], line[256];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/status", pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    FILE *f = fopen(path, "r");
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0)
            v = atol(line + strlen(key));
    if (f)
        fclose(f);
    return v;
}

static long peak_base;

int check_peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f || fputs("5", f) < 0 || fclose(f) != 0)
        return -1;
    peak_base = check_status_kib(0, "VmRSS:");
    return 0;
}

long check_peak_kib(void)
{
    return check_status_kib(0, "VmHWM:") - peak_base;
}

const char *check_peak_unmeasurable(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return "resident memory means nothing under AddressSanitizer (shadow memory, "
           "quarantine); the plain build runs this test";
#endif
    if (check_peak_reset())
        return "/proc/self/clear_refs is not writable here, so the peak resident memory "
               "cannot be measured";
    return NULL;
}

int check_peak_children(int n, int (*run)(int i, void *ctx), void *ctx)
{
    int failed = 0;
    for (int i = 0; i < n; i++) {
        fflush(NULL);
        const pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            void *volatile served = malloc(30u << 20);
            free(served);
            _exit(run(i, ctx) ? 1 : 0);
        }
        int st;
        failed += waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return failed;
}

int check_peak_within(const char *label, size_t len, double most_x)
{
    const long peak = check_peak_kib();
    const double ratio = (double)peak * 1024 / (double)len;
    fprintf(stderr, "%s: %.1f MB body, peak %.1f MB (%.2fx the body)\n", label,
            (double)len / 1e6, (double)peak * 1024 / 1e6, ratio);
    if (ratio <= most_x)
        return 1;
    fprintf(stderr, "%s: decoding a %.1f MB body took %.1f MB at its peak, %.1fx the body "
            "(at most %gx)\n", label, (double)len / 1e6, (double)peak * 1024 / 1e6, ratio,
            most_x);
    return 0;
}

float *check_randv(size_t n, float amp, unsigned long long *state)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    if (!x)
        abort();
    for (size_t i = 0; i < n; i++)
        x[i] = amp * check_randf(state);
    return x;
}

unsigned char *check_randb(size_t n, double p_true, unsigned long long *state)
{
    unsigned char *x = malloc(n ? n : 1);
    if (!x)
        abort();
    for (size_t i = 0; i < n; i++)
        x[i] = (check_randf(state) + 1.0f) * 0.5f < p_true;
    return x;
}

void check_topk_row(float *vals, int *idx, const float *row, int S, int k)
{
    for (int x = 0; x < k; x++) {
        int best = -1;
        for (int j = 0; j < S; j++) {
            int taken = 0;
            for (int y = 0; y < x && !taken; y++)
                taken = idx[y] == j;
            if (!taken && (best < 0 || row[j] > row[best] || (row[j] == row[best] && j < best)))
                best = j;
        }
        vals[x] = row[best], idx[x] = best;
    }
}

void check_pool(float *dst, const float *full, size_t planes, int L, int S, int p)
{
    const int LT = (L - 1) / p + 1, ST = (S - 1) / p + 1;
    for (size_t pn = 0; pn < planes; pn++)
        for (int ti = 0; ti < LT; ti++)
            for (int tj = 0; tj < ST; tj++) {
                double s = 0.0;
                int cells = 0;
                for (int i = ti * p; i < L && i < ti * p + p; i++)
                    for (int j = tj * p; j < S && j < tj * p + p; j++, cells++)
                        s += (double)full[(pn * L + i) * S + j];
                dst[(pn * LT + ti) * ST + tj] = (float)(s / cells);
            }
}
