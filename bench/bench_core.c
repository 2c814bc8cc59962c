/* bench_core.c -- the attention core against its ceilings, in one run.
 *
 *   bench_core core  OUTDIR   table 1: core vs same-run sgemm vs PyTorch
 *   bench_core pe    OUTDIR   table 1b: positional encoding vs compute, new and old
 *   bench_core peaked OUTDIR  table 1c: peaked scores (subnormal weights) vs ordinary
 *   bench_core causal OUTDIR  table 1d: causal and windows vs unmasked, window time vs L
 *   bench_core scale OUTDIR   table 2: time and peak RSS versus L
 *   bench_core one L E H need_weights threads   (child of "scale": one call)
 *
 * Every ratio compares numbers measured in this invocation: the machines are
 * shared and noisy, so absolute times mean little from one run to the next.
 * Times are medians of repeated calls after a warm-up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

void openblas_set_num_threads(int num_threads);

#include "bench/timing.h"
#include "core/attention.h"
#include "bench/bench_inputs.h"

struct problem {
    int L, E, H;
    float *x, *key, *value, *w_in, *b_in, *w_out, *b_out;
};

/* Self-attention inputs with projections; key and value are separate
 * copies of x when `separate` (so memory counts three input tensors). */
static void problem_init(struct problem *p, int L, int E, int H, int separate)
{
    unsigned long long s = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)(L * 131 + E);
    p->L = L, p->E = E, p->H = H;
    p->x = randv((size_t)L * E, 1.0f, &s);
    p->key = p->value = p->x;
    if (separate) {
        p->key = malloc((size_t)L * E * sizeof(float));
        p->value = malloc((size_t)L * E * sizeof(float));
        memcpy(p->key, p->x, (size_t)L * E * sizeof(float));
        memcpy(p->value, p->x, (size_t)L * E * sizeof(float));
    }
    p->w_in = randv((size_t)3 * E * E, 1.0f / sqrtf((float)E), &s);
    p->b_in = randv((size_t)3 * E, 0.1f, &s);
    p->w_out = randv((size_t)E * E, 1.0f / sqrtf((float)E), &s);
    p->b_out = randv((size_t)E, 0.1f, &s);
}

static void problem_params(const struct problem *p, struct att_params *a, int mode)
{
    att_params_init(a);
    a->N = 1, a->L = p->L, a->S = p->L, a->E = p->E, a->kdim = p->E, a->vdim = p->E;
    a->H = p->H;
    a->query = p->x, a->key = p->key, a->value = p->value;
    a->w[ATT_W_IN] = p->w_in, a->w[ATT_W_IN_BIAS] = p->b_in;
    a->w[ATT_W_OUT] = p->w_out, a->w[ATT_W_OUT_BIAS] = p->b_out;
    const size_t E = (size_t)p->E;
    a->w_len[ATT_W_IN] = 3 * E * E, a->w_len[ATT_W_IN_BIAS] = 3 * E;
    a->w_len[ATT_W_OUT] = E * E, a->w_len[ATT_W_OUT_BIAS] = E;
    a->weights_mode = mode;
}

/* Median ms of reps calls of att_forward. */
static double time_core(const struct problem *p, int mode, int reps, float *out, float *w)
{
    struct att_params a;
    struct att_error err;
    problem_params(p, &a, mode);
    double t[64];
    if (att_forward(out, w, &a, &err) != ATT_OK) { /* warm-up */
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        att_forward(out, w, &a, &err);
        t[r] = now_ms() - t0;
    }
    return median(t, reps);
}

/* FLOPs of one call: four E×E projections and the two attention products. */
static double flops(int L, int E)
{
    return 8.0 * L * E * (double)E + 4.0 * L * (double)L * E;
}

/* GFLOP/s of a square n×n×n cblas_sgemm, median of reps. */
static double sgemm_gflops(int n, int reps)
{
    unsigned long long s = 7;
    float *a = randv((size_t)n * n, 1, &s), *b = randv((size_t)n * n, 1, &s);
    float *c = malloc((size_t)n * n * sizeof *c);
    double t[64];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        t[r] = now_ms() - t0;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * (double)n / (median(t, reps) * 1e6);
}

static void write_file(const char *path, const float *x, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof *x, n, f) != n) {
        fprintf(stderr, "bench: cannot write %s\n", path);
        exit(1);
    }
    fclose(f);
}

/* ---------------------------------------------------------------------- */
/* Table 1                                                                 */

static const int shapes[][3] = {{128, 512, 8}, {512, 768, 12}, {1024, 1024, 16}};
#define NSHAPES 3

static int core_table(const char *dir)
{
    char path[512];
    struct problem pr[NSHAPES];
    snprintf(path, sizeof path, "%s/torch", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/torch/cases.txt", dir);
    FILE *cases = fopen(path, "w");
    for (int i = 0; i < NSHAPES; i++) {
        const int L = shapes[i][0], E = shapes[i][1], H = shapes[i][2];
        problem_init(&pr[i], L, E, H, 0);
        char name[64], file[600];
        snprintf(name, sizeof name, "L%d_E%d_H%d", L, E, H);
        fprintf(cases, "%s %d %d %d %d\n", name, L, E, H, L >= 1024 ? 7 : 15);
        const struct { const char *ext; const float *x; size_t n; } files[] = {
            {"x", pr[i].x, (size_t)L * E},         {"w_in", pr[i].w_in, (size_t)3 * E * E},
            {"b_in", pr[i].b_in, (size_t)3 * E},   {"w_out", pr[i].w_out, (size_t)E * E},
            {"b_out", pr[i].b_out, (size_t)E}};
        for (int f = 0; f < 5; f++) {
            snprintf(file, sizeof file, "%s/torch/%s.%s.bin", dir, name, files[f].ext);
            write_file(file, files[f].x, files[f].n);
        }
    }
    fclose(cases);

    snprintf(path, sizeof path, "%s/core.csv", dir);
    FILE *csv = fopen(path, "w");
    fprintf(csv, "L,E,H,threads,need_weights,core_ms,core_gflops,sgemm_n,sgemm_gflops,"
                 "frac_of_sgemm,torch_ms,speedup_vs_torch,max_abs_diff_vs_torch\n");
    printf("\n1. Core vs same-run sgemm ceiling and PyTorch nn.MultiheadAttention "
           "(N=1, self-attention with projections)\n");
    printf("%5s %5s %3s %3s %-8s %9s %8s %12s %9s %9s %9s %10s\n", "L", "E", "H", "thr",
           "weights", "core ms", "GFLOP/s", "sgemm GF/s", "of sgemm", "torch ms", "speedup",
           "max|d|");
    int misses = 0;
    for (int threads = 1; threads <= 2; threads++) {
        att_init(threads);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "OPENBLAS_NUM_THREADS=%d OMP_NUM_THREADS=%d /usr/bin/python3 "
                 "bench/torch_mha.py %s/torch %d", threads, threads, dir, threads);
        FILE *py = popen(cmd, "r");
        double torch_ms[NSHAPES][2] = {{0}};
        char name[64];
        int need;
        double ms;
        while (py && fscanf(py, "%63s %d %lf", name, &need, &ms) == 3)
            for (int i = 0; i < NSHAPES; i++) {
                char want[64];
                snprintf(want, sizeof want, "L%d_E%d_H%d", shapes[i][0], shapes[i][1],
                         shapes[i][2]);
                if (strcmp(want, name) == 0)
                    torch_ms[i][need] = ms;
            }
        if (!py || pclose(py) != 0)
            fprintf(stderr, "bench: PyTorch baseline failed (is python3-torch installed?)\n");
        for (int i = 0; i < NSHAPES; i++) {
            const int L = shapes[i][0], E = shapes[i][1], H = shapes[i][2];
            float *out = malloc((size_t)L * E * sizeof *out);
            float *w = malloc((size_t)H * L * L * sizeof *w);
            const int n = (int)cbrt((double)L * E * E);
            /* the ceiling: OpenBLAS's own threading on one big product */
            openblas_set_num_threads(threads);
            const double sg = sgemm_gflops(n, 9);
            att_init(threads); /* back to single-threaded OpenBLAS */
            /* accuracy: the core's output in both modes against PyTorch's
             * (written by its need_weights=False call; the output does not
             * depend on need_weights); nan when PyTorch did not run */
            snprintf(path, sizeof path, "%s/torch/L%d_E%d_H%d.torch_out.bin", dir, L, E, H);
            float *t = malloc((size_t)L * E * sizeof *t);
            FILE *f = fopen(path, "rb");
            const int have_torch = t && f && fread(t, sizeof *t, (size_t)L * E, f) == (size_t)L * E;
            if (f)
                fclose(f);
            for (int nw = 1; nw >= 0; nw--) {
                const int reps = L >= 1024 ? 7 : 15;
                double core = time_core(&pr[i], nw ? ATT_WEIGHTS_PER_HEAD : ATT_WEIGHTS_NONE,
                                        reps, out, w);
                double gf = flops(L, E) / (core * 1e6);
                double maxd = have_torch ? 0 : NAN;
                for (size_t k = 0; have_torch && k < (size_t)L * E; k++)
                    maxd = fmax(maxd, fabs((double)t[k] - out[k]));
                const double tm = torch_ms[i][nw];
                const double speed = tm > 0 ? tm / core : NAN;
                const double target = nw ? 1.5 : 1.2;
                misses += !(speed >= target);
                printf("%5d %5d %3d %3d %-8s %9.2f %8.1f %7.1f@%-4d %8.0f%% %9.2f %8.2fx%s %10.2g\n",
                       L, E, H, threads, nw ? "per-head" : "none", core, gf, sg, n,
                       100 * gf / sg, tm, speed, speed >= target ? " " : "!", maxd);
                fprintf(csv, "%d,%d,%d,%d,%d,%.4f,%.2f,%d,%.2f,%.4f,%.4f,%.4f,%.3g\n", L, E, H,
                        threads, nw, core, gf, n, sg, gf / sg, tm, speed, maxd);
            }
            free(out), free(w), free(t);
        }
    }
    fclose(csv);
    printf("(speedup targets: >= 1.5x with per-head weights, >= 1.2x without; '!' marks a "
           "miss: %d)\n", misses);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Table 1b: the positional encoding against the compute it rides on.      */

/* The encoding as it was before its rewrite (pow and sin/cos per element of
 * every batch item), kept here only for the before/after figure. */
static void posenc_old(float *x, int N, int T, int D)
{
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            double angle = t / pow(10000.0, (double)(i - i % 2) / D);
            float pe = (float)(i % 2 ? cos(angle) : sin(angle));
            for (int n = 0; n < N; n++)
                x[((size_t)n * T + t) * D + i] += pe;
        }
    }
}

/* Median ms of the three encodings the core runs per call (query, key,
 * value: three (1, L, E) copies), timed alone. */
static double time_pe3(void (*fn)(float *, int, int, int), float *const buf[3], int L, int E,
                       int reps)
{
    double t[16];
    for (int r = 0; r < reps; r++) {
        double t0 = now_ms();
        for (int b = 0; b < 3; b++)
            fn(buf[b], 1, L, E);
        t[r] = now_ms() - t0;
    }
    return median(t, reps);
}

static int pe_table(const char *dir)
{
    const int L = 1024, E = 4096, H = 16, reps = 5;
    char path[512];
    snprintf(path, sizeof path, "%s/posenc.csv", dir);
    FILE *csv = fopen(path, "w");
    fprintf(csv, "projections,compute_ms,compute_pe_ms,delta_ms,pe_new_ms,pe_old_ms,"
                 "new_pct_of_compute,delta_pct_of_compute\n");
    att_init(1);
    struct problem pr;
    problem_init(&pr, L, E, H, 0);
    const size_t n = (size_t)L * E;
    float *out = malloc(n * sizeof *out), *buf[3], *old1 = malloc(n * sizeof *old1);
    for (int b = 0; b < 3; b++)
        buf[b] = calloc(n, sizeof *buf[b]);

    /* The new encoding is the old one, bit for bit, on this shape? */
    att_add_positional_encoding(buf[0], 1, L, E);
    memset(old1, 0, n * sizeof *old1);
    posenc_old(old1, 1, L, E);
    size_t differ = 0;
    for (size_t k = 0; k < n; k++)
        differ += buf[0][k] != old1[k];

    /* The encoding alone, as the core calls it: new first, then the old loop
     * (fewer repetitions: 0.7 s each). */
    const double pe_new = time_pe3(att_add_positional_encoding, buf, L, E, 15);
    const double pe_old = time_pe3(posenc_old, buf, L, E, 3);

    printf("\n1b. Positional encoding: L=S=%d, E=%d, H=%d, N=1, self-attention, "
           "need_weights false, 1 thread; medians\n", L, E, H);
    printf("%-11s %10s %10s %9s %10s %10s %8s %9s %9s\n", "projections", "compute ms",
           "+PE ms", "delta ms", "PE new ms", "PE old ms", "old/new", "new/comp",
           "delta/comp");
    int miss = 0;
    for (int packed = 1; packed >= 0; packed--) {
        struct att_params a[2];
        struct att_error err;
        for (int pe = 0; pe <= 1; pe++) {
            problem_params(&pr, &a[pe], ATT_WEIGHTS_NONE);
            if (!packed)
                a[pe].w[ATT_W_IN] = a[pe].w[ATT_W_IN_BIAS] = NULL,
                a[pe].w[ATT_W_OUT] = a[pe].w[ATT_W_OUT_BIAS] = NULL,
                a[pe].w_len[ATT_W_IN] = a[pe].w_len[ATT_W_IN_BIAS] = 0,
                a[pe].w_len[ATT_W_OUT] = a[pe].w_len[ATT_W_OUT_BIAS] = 0;
            a[pe].positional_encoding = pe;
            if (att_forward(out, NULL, &a[pe], &err) != ATT_OK) { /* warm-up */
                fprintf(stderr, "bench: %s\n", err.msg);
                exit(1);
            }
        }
        /* alternate the two, so drift on a shared machine hits both */
        double t[2][16];
        for (int r = 0; r < reps; r++)
            for (int pe = 0; pe <= 1; pe++) {
                double t0 = now_ms();
                att_forward(out, NULL, &a[pe], &err);
                t[pe][r] = now_ms() - t0;
            }
        const double c0 = median(t[0], reps), c1 = median(t[1], reps);
        const double pct = 100 * pe_new / c0, dpct = 100 * (c1 - c0) / c0;
        miss += !(dpct < 5);
        printf("%-11s %10.1f %10.1f %9.1f %10.2f %10.1f %7.0fx %8.2f%% %8.2f%%%s\n",
               packed ? "packed" : "identity", c0, c1, c1 - c0, pe_new, pe_old, pe_old / pe_new,
               pct, dpct, dpct < 5 ? "" : "!");
        fprintf(csv, "%s,%.3f,%.3f,%.3f,%.4f,%.3f,%.4f,%.4f\n", packed ? "packed" : "identity",
                c0, c1, c1 - c0, pe_new, pe_old, pct, dpct);
    }
    printf("(target: PE adds < 5%% to att_forward (delta/comp); '!' marks a miss: %d.\n"
           " delta: att_forward with PE minus without, all it costs (self-attention now\n"
           " encodes its one input once, straight into the projection buffer when that is\n"
           " the identity); PE new/old: three encodings (query, key, value, as the old core\n"
           " ran them) timed alone. New vs old encoding: %zu of %zu floats differ)\n",
           miss, differ, n);
    fclose(csv);
    for (int b = 0; b < 3; b++)
        free(buf[b]);
    free(out), free(old1);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Table 1c: peaked scores. Inputs 20x larger make scores 400x larger and
 * many softmax weights subnormal (the column says how many, IEEE); the core flushes them in the
 * softmax (attention.h, Subnormals) so the time should not change. With an
 * out-projection scaled by 1e30 the flush could matter, so the core
 * computes the call again with IEEE weights: that row shows the price of
 * the exact path (a second pass, plus subnormal arithmetic).              */

static int peaked_table(const char *dir)
{
    (void)dir;
    const int L = 512, E = 768, H = 12, reps = 7;
    struct problem pr;
    problem_init(&pr, L, E, H, 0);
    float *out = malloc((size_t)L * E * sizeof *out);
    float *w = malloc((size_t)H * L * L * sizeof *w);
    float *x6 = malloc((size_t)L * E * sizeof *x6), *wo30 = malloc((size_t)E * E * sizeof *wo30);
    float *x1 = pr.x, *wo1 = pr.w_out;
    for (size_t i = 0; i < (size_t)L * E; i++)
        x6[i] = 20.0f * x1[i];
    for (size_t i = 0; i < (size_t)E * E; i++)
        wo30[i] = 1e30f * wo1[i];
    att_init(1);
    printf("\n1c. Peaked scores: L=S=%d, E=%d, H=%d, per-head weights, 1 thread; "
           "medians of %d\n", L, E, H, reps);
    printf("%-44s %10s %12s %10s\n", "inputs", "ms", "subnormal w", "vs x1");
    double base = 0.0;
    for (int row = 0; row < 3; row++) {
        pr.x = pr.key = pr.value = row == 0 ? x1 : x6;
        pr.w_out = row == 2 ? wo30 : wo1;
        const double ms = time_core(&pr, ATT_WEIGHTS_PER_HEAD, reps, out, w);
        size_t sub = 0, n = (size_t)H * L * L;
        for (size_t i = 0; i < n; i++)
            sub += w[i] != 0.0f && fabsf(w[i]) < 1.17549435e-38f;
        if (row == 0)
            base = ms;
        static const char *const names[] = {
            "x (ordinary)", "20x (peaked: weights flushed)",
            "20x, Wo x 1e30 (flush may matter: IEEE again)"};
        printf("%-44s %10.2f %11.1f%% %9.2fx\n", names[row], ms, 100.0 * sub / n, ms / base);
    }
    printf("(target: peaked scores cost no more than ordinary ones, < 1.2x)\n");
    pr.x = pr.key = pr.value = x1, pr.w_out = wo1;
    free(out), free(w), free(x6), free(wo30);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Table 2: one call per child process, so ru_maxrss is that call's peak.  */

static int one(int L, int E, int H, int need, int threads)
{
    att_init(threads);
    struct problem p;
    problem_init(&p, L, E, H, 1);
    float *out = malloc((size_t)L * E * sizeof *out);
    float *w = need ? malloc((size_t)H * L * L * sizeof *w) : NULL;
    double ms = time_core(&p, need ? ATT_WEIGHTS_PER_HEAD : ATT_WEIGHTS_NONE,
                          L >= 4096 ? 1 : 3, out, w);
    printf("%.4f\n", ms);
    return 0;
}

static int run_child(const char *self, int L, int E, int H, int need, double *ms, long *rss_kb)
{
    char cmd[4][16];
    snprintf(cmd[0], 16, "%d", L), snprintf(cmd[1], 16, "%d", E);
    snprintf(cmd[2], 16, "%d", H), snprintf(cmd[3], 16, "%d", need);
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(self, self, "one", cmd[0], cmd[1], cmd[2], cmd[3], "1", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int st;
    struct rusage ru;
    wait4(pid, &st, 0, &ru);
    *ms = atof(buf);
    *rss_kb = ru.ru_maxrss;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int scale_table(const char *self, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/scaling.csv", dir);
    FILE *csv = fopen(path, "w");
    fprintf(csv, "L,need_weights,ms,peak_rss_mb,io_mb\n");
    const int E = 512, H = 8;
    printf("\n2. Scaling: E=%d, H=%d, N=1, L=S, 1 BLAS thread; one process per point "
           "(peak RSS includes the inputs)\n", E, H);
    printf("%6s %-8s %10s %12s %12s %8s\n", "L", "weights", "ms", "peak RSS MB", "in+out MB",
           "RSS/io");
    const int lens[] = {64, 128, 256, 512, 1024, 2048, 4096, 8192};
    double at1024[2] = {0};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (int need = 0; need <= 1; need++) {
            const int L = lens[i];
            if (need && L > 4096)
                continue; /* (H, L, S) weights at 8192: 2 GiB of output */
            double ms;
            long rss;
            if (run_child(self, L, E, H, need, &ms, &rss)) {
                fprintf(stderr, "bench: child L=%d failed\n", L);
                continue;
            }
            /* inputs: query, key, value, 4 E×E weights; outputs: out (+ weights) */
            double io = (3.0 * L * E + 4.0 * E * E + 4.0 * E + (double)L * E +
                         (need ? (double)H * L * L : 0)) * 4 / 1048576.0;
            if (L == 1024)
                at1024[need] = ms;
            printf("%6d %-8s %10.2f %12.1f %12.1f %7.2fx\n", L, need ? "per-head" : "none", ms,
                   rss / 1024.0, io, rss / 1024.0 / io);
            fprintf(csv, "%d,%d,%.4f,%.2f,%.2f\n", L, need, ms, rss / 1024.0, io);
        }
    }
    fclose(csv);
    printf("(target: at L=8192 without weights, peak RSS < 2x in+out; at L=1024 the "
           "weight-free path %.2f ms vs full path %.2f ms: %.2fx)\n", at1024[0], at1024[1],
           at1024[0] > 0 ? at1024[1] / at1024[0] : NAN);
    return 0;
}

int main(int argc, char **argv)
{
    const char *core = att_blas_select_kernels(argv); /* may re-exec */
    if (argc == 3)
        printf("OpenBLAS kernels: %s (OPENBLAS_CORETYPE=%s)\n", core,
               getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    if (argc == 7 && strcmp(argv[1], "one") == 0)
        return one(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc == 3 && strcmp(argv[1], "core") == 0)
        return core_table(argv[2]);
    if (argc == 3 && strcmp(argv[1], "pe") == 0)
        return pe_table(argv[2]);
    if (argc == 3 && strcmp(argv[1], "peaked") == 0)
        return peaked_table(argv[2]);
    if (argc == 3 && strcmp(argv[1], "causal") == 0)
        return causal_table(argv[2]);
    if (argc == 3 && strcmp(argv[1], "scale") == 0)
        return scale_table(argv[0], argv[2]);
    fprintf(stderr, "usage: %s core|pe|peaked|causal|scale OUTDIR | one L E H need_weights threads\n",
            argv[0]);
    return 2;
}
