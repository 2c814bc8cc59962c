/* bench_subnormal.c -- do FTZ/DAZ still buy anything?
 *
 *   bench_subnormal [CSV]          one table per OpenBLAS kernel set: runs
 *                                  itself once with OPENBLAS_CORETYPE=SkylakeX
 *                                  and once with Haswell (OpenBLAS reads the
 *                                  variable when it loads, so each needs its
 *                                  own process)
 *   bench_subnormal one CSV        the rows for the kernels this process has
 *
 * Single-threaded cblas_sgemm at shapes the core runs, with normal operands,
 * with 0.1% and with half of A subnormal, and with products that underflow
 * into the subnormal range; then the core's kind of vector loops over subnormal data.
 * Each is timed with MXCSR's FTZ|DAZ bits cleared (IEEE, what the core does
 * now) and set, in the same process, and compared with normal operands
 * under the same setting. Medians of repeated calls after a warm-up. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xmmintrin.h>

#include <cblas.h>

void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);

#include "bench/timing.h"

#define MXCSR_FTZ_DAZ 0x8040u

static unsigned long long rng = 0x243F6A8885A308D3ULL;

static double uniform(void) /* [0, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

enum operands { OP_NORMAL, OP_FEW_SUBNORMAL, OP_HALF_SUBNORMAL, OP_UNDERFLOW, NOPS };
static const char *op_name[NOPS] = {"normal", "A 0.1% subnormal", "A 50% subnormal",
                                    "products underflow"};

/* n floats for one operand: uniform in ±[0.5, 1) times scale; a fraction
 * p_sub of them (at random) is instead a subnormal of magnitude
 * 1e-42 .. 1e-39, log-uniform, random sign. */
static void fill(float *x, size_t n, float scale, double p_sub)
{
    for (size_t i = 0; i < n; i++) {
        const float sign = uniform() < 0.5 ? -1.0f : 1.0f;
        if (uniform() < p_sub)
            x[i] = sign * (float)pow(10.0, -42.0 + 3.0 * uniform());
        else
            x[i] = sign * scale * (float)(0.5 + 0.5 * uniform());
    }
}

/* Operands for a case: normal is ±[0.5, 1) (and 1/sqrt(K) for B, so sums
 * stay near 1); the subnormal cases replace some of A; underflow scales both by 1e-20, so every product is about
 * 1e-40 and every sum subnormal. */
static void make_case(float *a, float *b, int M, int N, int K, int op)
{
    const float sa = op == OP_UNDERFLOW ? 1e-20f : 1.0f;
    const float sb = (op == OP_UNDERFLOW ? 1e-20f : 1.0f) / sqrtf((float)K);
    fill(a, (size_t)M * K, sa,
         op == OP_HALF_SUBNORMAL ? 0.5 : op == OP_FEW_SUBNORMAL ? 0.001 : 0.0);
    fill(b, (size_t)K * N, sb, 0.0);
}

static int count_subnormal(const float *x, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += x[i] != 0 && fpclassify(x[i]) == FP_SUBNORMAL;
    return c;
}

/* Median ms of C = A·B under the given MXCSR; at least 3 calls, at most
 * 15, stopping after about a second. */
static double time_sgemm(float *c, const float *a, const float *b, int M, int N, int K,
                         unsigned csr)
{
    const unsigned old = _mm_getcsr();
    _mm_setcsr(csr);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
    double t[15], total = 0;
    int r = 0;
    while (r < 15 && (r < 3 || total < 1000)) {
        const double t0 = now_ms();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1, a, K, b, N, 0, c, N);
        t[r] = now_ms() - t0;
        total += t[r++];
    }
    _mm_setcsr(old);
    return median(t, r);
}

/* The core's vector loops, compiled as the core compiles them (one clone
 * per instruction set): scale a row by 1/sum (the end of the softmax) and
 * accumulate weight·value rows (a context row). */
__attribute__((target_clones("avx512f", "avx2", "default")))
static float loops(float *row, const float *v, int S, int reps)
{
    float acc = 0;
    for (int r = 0; r < reps; r++) {
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < S; j++)
            sum += row[j];
        const float inv = 1.0f / (sum + 1.0f);
#pragma omp simd
        for (int j = 0; j < S; j++)
            row[j] = row[j] * inv + v[j] * 0.5f;
        acc += row[r % S];
    }
    return acc;
}

static double time_loops(float *row, const float *init, const float *v, int S, unsigned csr)
{
    const unsigned old = _mm_getcsr();
    _mm_setcsr(csr);
    double t[9];
    volatile float sink = 0;
    for (int r = 0; r < 9; r++) {
        memcpy(row, init, (size_t)S * sizeof *row);
        const double t0 = now_ms();
        sink += loops(row, v, S, 64);
        t[r] = now_ms() - t0;
    }
    (void)sink;
    _mm_setcsr(old);
    return median(t, 9);
}

static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512], name[256] = "", fam[32] = "", model[32] = "";
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *val = colon + 1 + (colon[1] == ' ');
        val[strcspn(val, "\n")] = '\0';
        if (!name[0] && strncmp(line, "model name", 10) == 0)
            snprintf(name, sizeof name, "%s", val);
        else if (!fam[0] && strncmp(line, "cpu family", 10) == 0)
            snprintf(fam, sizeof fam, "%s", val);
        else if (!model[0] && strncmp(line, "model\t", 6) == 0)
            snprintf(model, sizeof model, "%s", val);
    }
    fclose(f);
    snprintf(buf, n, "%s (family %s, model %s)", name, fam, model);
}

static const int shapes[][3] = {
    {512, 512, 64},  /* scores: q·kᵀ for one head, d = 64 */
    {512, 64, 512},  /* context: weights·v for one head */
    {512, 768, 768}, /* a projection, L = 512, E = 768 */
};
#define NSHAPES 3

static int one(const char *csv_path)
{
    openblas_set_num_threads(1);
    const char *core = openblas_get_corename();
    FILE *csv = csv_path ? fopen(csv_path, "a") : NULL;
    printf("\nOpenBLAS kernels: %s (OPENBLAS_CORETYPE=%s), 1 thread\n", core,
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset");
    printf("%-8s %-13s %-19s %6s %9s %11s %9s %9s %9s %11s\n", "op", "M x N x K", "operands",
           "sub C%", "IEEE ms", "FTZ/DAZ ms", "IEEE/nrm", "FTZ/nrm", "IEEE/FTZ", "max|C diff|");
    for (int s = 0; s < NSHAPES; s++) {
        const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
        float *c = malloc((size_t)M * N * sizeof *c), *c2 = malloc((size_t)M * N * sizeof *c);
        double base[2] = {0, 0};
        for (int op = 0; op < NOPS; op++) {
            make_case(a, b, M, N, K, op);
            const unsigned csr = _mm_getcsr() & ~MXCSR_FTZ_DAZ;
            const double ieee = time_sgemm(c, a, b, M, N, K, csr);
            const int sub = count_subnormal(c, (size_t)M * N);
            const double ftz = time_sgemm(c2, a, b, M, N, K, csr | MXCSR_FTZ_DAZ);
            double maxd = 0;
            for (size_t i = 0; i < (size_t)M * N; i++)
                maxd = fmax(maxd, fabs((double)c[i] - c2[i]));
            if (op == OP_NORMAL)
                base[0] = ieee, base[1] = ftz;
            char shape[32];
            snprintf(shape, sizeof shape, "%dx%dx%d", M, N, K);
            printf("%-8s %-13s %-19s %5.0f%% %9.3f %11.3f %8.2fx %8.2fx %8.2fx %11.2g\n", "sgemm",
                   shape, op_name[op], 100.0 * sub / ((double)M * N), ieee, ftz,
                   ieee / base[0], ftz / base[1], ieee / ftz, maxd);
            if (csv)
                fprintf(csv, "%s,sgemm,%s,%s,%.4f,%.4f,%.4f,%.4f,%.3g\n", core, shape,
                        op_name[op], ieee, ftz, ieee / base[0], ftz / base[1], maxd);
        }
        free(a), free(b), free(c), free(c2);
    }

    /* The softmax's last step and a context accumulation over a row of
     * 4096 values: normal weights, and weights like e^-90..e^-100 (what a
     * softmax gives far below the row's maximum), all subnormal. */
    const int S = 4096;
    float *row = malloc(S * sizeof *row), *init = malloc(S * sizeof *init);
    float *v = malloc(S * sizeof *v);
    double base[2] = {0, 0};
    for (int sub = 0; sub <= 1; sub++) {
        for (int j = 0; j < S; j++) {
            init[j] = sub ? (float)exp(-90.0 - 10.0 * uniform()) : (float)(0.5 + 0.5 * uniform());
            v[j] = sub ? (float)exp(-95.0 - 5.0 * uniform()) : (float)uniform();
        }
        const unsigned csr = _mm_getcsr() & ~MXCSR_FTZ_DAZ;
        const double ieee = time_loops(row, init, v, S, csr);
        const double ftz = time_loops(row, init, v, S, csr | MXCSR_FTZ_DAZ);
        if (!sub)
            base[0] = ieee, base[1] = ftz;
        printf("%-8s %-13s %-19s %6s %9.3f %11.3f %8.2fx %8.2fx %8.2fx %11s\n", "loops",
               "64 x 4096", sub ? "all subnormal" : "normal", "", ieee, ftz, ieee / base[0],
               ftz / base[1], ieee / ftz, "");
        if (csv)
            fprintf(csv, "%s,loops,64x4096,%s,%.4f,%.4f,%.4f,%.4f,\n", core,
                    sub ? "all subnormal" : "normal", ieee, ftz, ieee / base[0], ftz / base[1]);
    }
    free(row), free(init), free(v);
    if (csv)
        fclose(csv);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "one") == 0)
        return one(argc >= 3 ? argv[2] : NULL);
    const char *csv = argc >= 2 ? argv[1] : NULL;
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (f) {
            fprintf(f, "kernels,op,shape,operands,ieee_ms,ftz_daz_ms,ieee_vs_normal,"
                       "ftz_vs_normal,max_abs_diff\n");
            fclose(f);
        }
    }
    char cpu[400];
    cpu_name(cpu, sizeof cpu);
    printf("\n5. Subnormals: cblas_sgemm and the core's vector loops with MXCSR FTZ|DAZ "
           "cleared (IEEE) and set\nCPU: %s\n", cpu);
    printf("(IEEE/nrm, FTZ/nrm: time against normal operands under the same setting; "
           "sub C%%: subnormal results, IEEE)\n");
    fflush(stdout);
    const char *types[] = {"SkylakeX", "Haswell"};
    for (int i = 0; i < 2; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            setenv("OPENBLAS_CORETYPE", types[i], 1);
            setenv("OPENBLAS_NUM_THREADS", "1", 1);
            execl("/proc/self/exe", argv[0], "one", csv, (char *)NULL);
            _exit(127);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fprintf(stderr, "bench_subnormal: the %s run failed\n", types[i]);
    }
    return 0;
}
