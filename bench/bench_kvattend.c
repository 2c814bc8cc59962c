/* bench_kvattend.c -- a decode step (one query row over a sequence's cache,
 * core/kvcache.h) against the memory's streaming read, in one run.
 *
 *   bench_kvattend OUTDIR [MAX_TOKENS]
 *   BENCH_DECODE_ONLY=0|1|2 bench_kvattend ...   one cache type, no table (a profiler's run)
 *
 * Shape: H 32, Hkv 8, d 128, identity projections (query 4096 wide,
 * key/value 1024 wide), caches of 1 k … 64 k tokens (MAX_TOKENS, 65536 by
 * default), FP32/FP16/BF16, 1 and 2 threads. Per point: the step's median
 * time, its effective read bandwidth (the cache's key and value bytes over
 * that time), and a streaming read of a buffer of the same size (vectorised
 * sum; 1 and 2 threads) measured in this run. Then PyTorch doing the same
 * step on cached FP32 tensors (bench/torch_kvattend.py: softmax(q·Kᵀ)·V, the
 * KV heads grouped by a reshape), and the ratios of the Speed
 * section. CSV in OUTDIR/decode.csv. Timings are for reading, never a
 * pass/fail. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/stream.h"
#include "bench/timing.h"
#include "core/attention.h"
#include "core/kvcache.h"

#define NH 32
#define NKV 8
#define HD 128
#define NSIZES 7
#define PROMPT 1024 /* rows per step while filling */

static const char *const dtype_name[] = {"FP32", "FP16", "BF16"};

static float *randv(size_t n, unsigned long long *s)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
        x[i] = (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    return x;
}

/* ---- The streaming read (stream.h's sum_floats), on 1 or 2 threads ----- */

struct stream_part {
    const float *x;
    size_t n;
    float sum;
};

static void *stream_run(void *arg)
{
    struct stream_part *sp = arg;
    sp->sum = sum_floats(sp->x, sp->n);
    return NULL;
}

static volatile float sink;

/* One read of buf (n floats) on nt threads (1 or 2); milliseconds. */
static double stream_once(const float *buf, size_t n, int nt)
{
    struct stream_part sp[2] = {{buf, n / (size_t)nt, 0.0f},
                                {buf + n / (size_t)nt, n - n / (size_t)nt, 0.0f}};
    pthread_t th;
    const double t0 = now_ms();
    if (nt > 1)
        pthread_create(&th, NULL, stream_run, &sp[1]);
    stream_run(&sp[0]);
    if (nt > 1)
        pthread_join(th, NULL);
    const double t = now_ms() - t0;
    sink = sp[0].sum + sp[1].sum;
    return t;
}

/* Repetitions: at least 5 and about 0.4 s for a step of ms. */
static int reps_for(double ms)
{
    const int r = (int)(400.0 / (ms > 0.01 ? ms : 0.01));
    return r < 5 ? 5 : r > 200 ? 200 : r;
}

/* ---- The decode step ---------------------------------------------------- */

struct point {
    long long tokens;
    double bytes;         /* the cache's key and value bytes */
    double step[2];       /* ms, 1 and 2 threads */
    double stream[2];     /* ms */
};

static void params(struct att_params *p, int L, int S, const float *q, const float *kv)
{
    att_params_init(p);
    p->N = 1, p->L = L, p->S = S, p->E = NH * HD, p->kdim = p->vdim = NKV * HD;
    p->H = NH, p->Hkv = NKV, p->head_dim = HD;
    p->query = q, p->key = kv, p->value = kv;
    p->mask_kind = ATT_MASK_CAUSAL;
}

static double step_once(struct att_kv *c, float *out, const float *q, const float *kv)
{
    struct att_params p;
    params(&p, 1, 1, q, kv);
    struct att_error err;
    const double t0 = now_ms();
    if (att_step(out, NULL, &p, c, &err) != ATT_OK) {
        fprintf(stderr, "bench_kvattend: %s\n", err.msg);
        exit(1);
    }
    return now_ms() - t0;
}

/* The step's and the streaming read's median times (ms), their
 * repetitions interleaved (step, read, step, read, …), so that both see
 * the same moments of a shared machine's load. */
static void pair_ms(struct att_kv *c, float *out, const float *q, const float *kv,
                    const float *buf, size_t nf, int nt, double *step, double *stream)
{
    double ts[200], tr[200];
    step_once(c, out, q, kv); /* warm-up */
    const double t1 = step_once(c, out, q, kv), t2 = stream_once(buf, nf, nt);
    const int reps = reps_for(t1 + t2);
    for (int r = 0; r < reps; r++) {
        ts[r] = step_once(c, out, q, kv);
        tr[r] = stream_once(buf, nf, nt);
    }
    *step = median(ts, reps), *stream = median(tr, reps);
}

/* The points of one cache type, the cache grown from one size to the next. */
static void run_dtype(int dtype, const long long *sizes, int nsizes, struct point *pt)
{
    unsigned long long s = 0x9E3779B97F4A7C15ULL + (unsigned long long)dtype;
    float *q = randv((size_t)NH * HD, &s), *out = malloc((size_t)NH * HD * sizeof *out);
    float *prompt = randv((size_t)PROMPT * NKV * HD, &s), *qp = randv((size_t)NH * HD, &s);
    struct att_kv *c = att_kv_new(NKV, HD, dtype);
    const size_t esize = dtype == ATT_KV_F32 ? 4 : 2;
    for (int i = 0; i < nsizes; i++) {
        att_init(1);
        while (att_kv_len(c) < sizes[i]) { /* prompt chunks, their last rows answered */
            const long long left = sizes[i] - att_kv_len(c);
            struct att_params p;
            params(&p, 1, left < PROMPT ? (int)left : PROMPT, qp, prompt);
            struct att_error err;
            if (att_step(out, NULL, &p, c, &err) != ATT_OK) {
                fprintf(stderr, "bench_kvattend: %s\n", err.msg);
                exit(1);
            }
        }
        pt[i].tokens = att_kv_len(c);
        pt[i].bytes = 2.0 * (double)pt[i].tokens * NKV * HD * (double)esize;
        const size_t nf = (size_t)(pt[i].bytes / 4.0);
        float *buf = malloc(nf * sizeof *buf);
        for (size_t x = 0; x < nf; x++)
            buf[x] = 1.0f;
        for (int t = 0; t < 2; t++) {
            att_init(t + 1);
            pair_ms(c, out, q, prompt, buf, nf, t + 1, &pt[i].step[t], &pt[i].stream[t]);
        }
        free(buf);
        /* (the timed steps appended a few hundred tokens at most) */
        fprintf(stderr, "  %s %lld tokens done\n", dtype_name[dtype], pt[i].tokens);
    }
    att_kv_free(c);
    free(q), free(out), free(prompt), free(qp);
}

/* PyTorch's step times (ms) for FP32 at the token counts, threads 1 and 2;
 * -1 where it gave none. */
static void run_torch(const struct point *pt, int nsizes, double torch_ms[][2])
{
    char cmd[1024];
    int n = snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/torch_kvattend.py %d %d %d",
                     NH, NKV, HD);
    for (int i = 0; i < nsizes; i++)
        n += snprintf(cmd + n, sizeof cmd - (size_t)n, " %lld", pt[i].tokens);
    for (int i = 0; i < nsizes; i++)
        torch_ms[i][0] = torch_ms[i][1] = -1.0;
    FILE *f = popen(cmd, "r");
    if (!f)
        return;
    long long T;
    int th;
    double ms;
    while (fscanf(f, "%lld %d %lf", &T, &th, &ms) == 3)
        for (int i = 0; i < nsizes; i++)
            if (pt[i].tokens == T && th >= 1 && th <= 2)
                torch_ms[i][th - 1] = ms;
    pclose(f);
}

int main(int argc, char **argv)
{
    att_blas_select_kernels(argv);
    if (argc < 2) {
        fprintf(stderr, "usage: bench_kvattend OUTDIR [MAX_TOKENS]\n");
        return 2;
    }
    const long long max_tokens = argc > 2 ? atoll(argv[2]) : 65536;
    long long sizes[NSIZES];
    int nsizes = 0;
    for (long long t = 1024; t <= max_tokens && nsizes < NSIZES; t *= 2)
        sizes[nsizes++] = t;
    struct point pt[3][NSIZES];
    /* BENCH_DECODE_ONLY=0|1|2: one cache type alone (for a profiler) */
    const char *only = getenv("BENCH_DECODE_ONLY");
    for (int dt = 0; dt < 3; dt++)
        if (!only || atoi(only) == dt)
            run_dtype(dt, sizes, nsizes, pt[dt]);
    if (only) {
        const int dt = atoi(only);
        for (int i = 0; i < nsizes; i++)
            for (int t = 0; t < 2; t++)
                printf("%s %lld tokens, %d thread(s): step %.3f ms (%.2f GB/s), stream %.3f ms\n",
                       dtype_name[dt], pt[dt][i].tokens, t + 1, pt[dt][i].step[t],
                       pt[dt][i].bytes / pt[dt][i].step[t] / 1e6, pt[dt][i].stream[t]);
        return 0;
    }
    double torch_ms[NSIZES][2];
    run_torch(pt[0], nsizes, torch_ms);

    char path[512];
    snprintf(path, sizeof path, "%s/decode.csv", argv[1]);
    FILE *csv = fopen(path, "w");
    if (csv)
        fprintf(csv, "dtype,tokens,threads,step_ms,step_gbs,stream_ms,stream_gbs,ratio,torch_ms\n");
    printf("\n1e. Decode step (L 1, H %d, Hkv %d, d %d, identity projections) against a "
           "streaming read of the cache's bytes, same run\n", NH, NKV, HD);
    printf("%-5s %7s %3s %10s %8s %10s %8s %6s %10s %7s\n", "cache", "tokens", "thr", "step ms",
           "GB/s", "stream ms", "GB/s", "ratio", "torch ms", "speedup");
    for (int dt = 0; dt < 3; dt++)
        for (int i = 0; i < nsizes; i++)
            for (int t = 0; t < 2; t++) {
                const struct point *p = &pt[dt][i];
                const double gbs = p->bytes / p->step[t] / 1e6, sgbs = p->bytes / p->stream[t] / 1e6;
                const double tm = dt == 0 ? torch_ms[i][t] : -1.0;
                printf("%-5s %7lld %3d %10.3f %8.2f %10.3f %8.2f %6.2f", dtype_name[dt], p->tokens,
                       t + 1, p->step[t], gbs, p->stream[t], sgbs, gbs / sgbs);
                if (tm > 0)
                    printf(" %10.3f %6.2fx\n", tm, tm / p->step[t]);
                else
                    printf(" %10s %7s\n", "-", "-");
                if (csv)
                    fprintf(csv, "%s,%lld,%d,%.4f,%.3f,%.4f,%.3f,%.3f,%.4f\n", dtype_name[dt],
                            p->tokens, t + 1, p->step[t], gbs, p->stream[t], sgbs, gbs / sgbs, tm);
            }
    if (csv)
        fclose(csv);

    /* The Speed section's ratios, at 32 k (or the largest size) and 64 k. */
    int i32 = nsizes - 1, i64 = nsizes - 1;
    for (int i = 0; i < nsizes; i++)
        if (pt[0][i].tokens == 32768)
            i32 = i;
    const struct point *f32 = &pt[0][i32];
    printf("\nAt %lld tokens, one thread: FP32 step %.2f GB/s = %.2fx the streaming read "
           "(goal >= 0.8)\n", f32->tokens, f32->bytes / f32->step[0] / 1e6,
           (f32->bytes / f32->step[0]) / (f32->bytes / f32->stream[0]));
    for (int dt = 1; dt < 3; dt++)
        printf("At %lld tokens, one thread: %s step time = %.2fx FP32's (goal <= 0.55)\n",
               f32->tokens, dtype_name[dt], pt[dt][i32].step[0] / f32->step[0]);
    /* Compute or memory: the time a token takes with the cache in L3 (the
     * smallest size), times the tokens, against the time measured and the
     * streaming read of the same bytes; where the first is near the
     * second, the arithmetic (and the conversion) bounds the step. */
    for (int dt = 0; dt < 3; dt++) {
        const struct point *small = &pt[dt][0], *p = &pt[dt][i32];
        const double per = small->step[0] / (double)small->tokens;
        printf("%s, one thread: %.1f ns a token in cache (%lld tokens) -> %.2f ms at %lld "
               "tokens; measured %.2f ms, the streaming read of its bytes %.2f ms\n",
               dtype_name[dt], per * 1e6, small->tokens, per * (double)p->tokens, p->tokens,
               p->step[0], p->stream[0]);
    }
    for (int dt = 0; dt < 3; dt++) {
        const struct point *p = &pt[dt][i64];
        const double su = p->step[0] / p->step[1], ssu = p->stream[0] / p->stream[1];
        printf("At %lld tokens, %s: 2-thread speed-up %.2fx, streaming read's %.2fx: "
               "%.2f of it (goal >= 0.8)\n", p->tokens, dtype_name[dt], su, ssu, su / ssu);
    }
    int faster = 1, have = 0;
    for (int i = 0; i < nsizes; i++)
        for (int t = 0; t < 2; t++)
            if (torch_ms[i][t] > 0)
                have = 1, faster &= pt[0][i].step[t] < torch_ms[i][t];
    printf("PyTorch on cached FP32 tensors: %s\n",
           !have ? "not measured (no /usr/bin/python3 with torch)"
                 : faster ? "slower than the decode step at every size and thread count"
                          : "faster than the decode step somewhere (see the table)");
    return 0;
}
