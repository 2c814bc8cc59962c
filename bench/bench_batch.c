/* bench_batch.c -- a layer step of a batch of sequences on the server's
 * compute path against the memory's all-core streaming read, and the
 * memory 8 GiB of caches take.
 *
 *   bench_batch OUTDIR
 *   BENCH_BATCH_RSS=0 bench_batch OUTDIR    the step alone (a quick run)
 *   BENCH_BATCH_DTYPE=FP16 bench_batch ...  the step of one cache type (a profiler's run)
 *
 * In process, no HTTP: api/sequence.h's sequence_step() on a request built
 * by hand as the codec builds it (B 16 sequences, a one-row step each: H 32,
 * Hkv 8, d 128, identity projections, query 4096 wide, key/value 1024 wide,
 * causal lower-right), with a worker pool of the machine's CPUs as the
 * core's runner (as main.c sets it) and the step run as one of its jobs
 * (as a request is).
 *
 * 1. Each of the 16 sequences is started with 4 096 tokens (one start step
 *    of S 4 096 each), then the B 16 step is timed against a streaming read
 *    of the 16 caches' key and value bytes (stream.h's sum, spread over the
 *    pool the same way), the two interleaved (step, read, step, read, ...)
 *    so that both see the same moments of a shared machine's load; medians
 *    of REPS. The step's bytes are those of the tokens it attends (4 096
 *    and the few the timed steps appended). FP16 is the Speed section's
 *    figure; FP32 and BF16 are for reference.
 * 2. 16 sequences x 32 layers x 4 096 tokens FP16 (8 GiB counted by the
 *    store): VmRSS before and after, against the bytes the store counts.
 *
 * Timings are for reading, never a pass/fail. CSV in OUTDIR/batch.csv. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/sequence.h"
#include "api/sequence_store.h"
#include "bench/bench_inputs.h"
#include "bench/stream.h"
#include "bench/timing.h"
#include "lib/pool.h"

#define B 16
#define TOKENS 4096
#define NH 32
#define NKV 8
#define HD 128
#define EQ (NH * HD)  /* query width */
#define EKV (NKV * HD) /* key and value width */
#define REPS 21
#define WARM 3
#define LAYERS 32     /* part 2: 16 x 32 x 4 096 tokens FP16 = 8 GiB */
#define CHUNKS 64     /* the streaming read's parts, taken by the pool's threads */

static const char *const dtype_name[] = {"FP32", "FP16", "BF16"};

static const struct codec_limits lim = {
    .max_tensor_elements = 1LL << 32, .max_batch = 64, .max_target_len = 65536,
    .max_source_len = 65536, .max_embed_dim = EQ, .max_heads = 64,
    .max_weights_elements = 1 << 24, .max_layers = 256,
};

static struct pool *pool;

/* ---- A job on the pool, waited for ---------------------------------------- */

struct job {
    void (*fn)(void *arg);
    void *arg;
    double ms; /* fn's time on the worker */
    int done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void job_run(void *a)
{
    struct job *j = a;
    const double t0 = now_ms();
    j->fn(j->arg);
    j->ms = now_ms() - t0;
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* fn(arg) run on a worker, as a request is; its time there (ms). */
static double on_worker(void (*fn)(void *arg), void *arg)
{
    struct job j = {fn, arg, 0.0, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER};
    if (pool_submit(pool, job_run, &j) != POOL_OK) {
        fprintf(stderr, "bench_batch: the pool refused a job\n");
        exit(1);
    }
    pthread_mutex_lock(&j.mu);
    while (!j.done)
        pthread_cond_wait(&j.cv, &j.mu);
    pthread_mutex_unlock(&j.mu);
    return j.ms;
}

/* The core's runner (core/blas.h) on the pool, as main.c sets it. */
static void pool_run(void *ctx, int n, att_task_fn fn, void *arg)
{
    pool_parallel(ctx, n, fn, arg);
}

/* ---- Steps ------------------------------------------------------------------ */

/* A step of n sequences (ids[0 .. n)) at layer: L 1, S rows each. */
struct step {
    const char *const *ids;
    int n, S, start, layer;
    enum att_kv_dtype dtype;
    const float *q, *k, *v; /* (n, 1, EQ), (n, S, EKV) */
    long long tokens;       /* after it: the items' cache lengths summed */
};

static void step_run(void *arg)
{
    struct step *s = arg;
    struct codec_sequence_item item[B];
    struct codec_request r;
    memset(&r, 0, sizeof r);
    att_params_init(&r.p);
    r.p.N = s->n, r.p.L = 1, r.p.S = s->S, r.p.E = EQ, r.p.kdim = r.p.vdim = EKV;
    r.p.H = NH, r.p.Hkv = NKV, r.p.head_dim = HD;
    r.p.query = s->q, r.p.key = s->k, r.p.value = s->v;
    r.p.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    r.batched = 1;
    memset(item, 0, sizeof item);
    for (int b = 0; b < s->n; b++) {
        snprintf(item[b].id, sizeof item[b].id, "%s", s->ids[b]);
        item[b].start = s->start;
    }
    r.seq.n = s->n, r.seq.array = 1, r.seq.item = item, r.seq.layer = s->layer;
    r.seq.dtype = s->dtype, r.seq.dtype_asked = 1;
    float *out = NULL, *w = NULL;
    void *held = NULL;
    struct failure err;
    if (sequence_step(&r, "attention", NULL, &lim, "max_weights_elements", &out, &w, &held,
                      &err)) {
        fprintf(stderr, "bench_batch: step of '%s': %s\n", s->ids[0], err.msg);
        exit(1);
    }
    s->tokens = 0;
    for (int b = 0; b < s->n; b++)
        s->tokens += item[b].length;
    free(out), free(w);
    sequence_sent(held); /* the answer "sent": the sequences idle again */
}

/* Sequences ids[0 .. n) each started on layer with TOKENS tokens (one
 * start step each, S TOKENS: its one query row is cheap). */
static void fill(const char *const *ids, int n, int layer, enum att_kv_dtype dt, const float *q,
                 const float *kv)
{
    for (int b = 0; b < n; b++) {
        struct step s = {ids + b, 1, TOKENS, 1, layer, dt, q, kv, kv, 0};
        step_run(&s);
    }
}

static void end_all(const char *const *ids, int n)
{
    int which = 0;
    if (seq_end(ids, n, &which)) {
        fprintf(stderr, "bench_batch: sequence '%s' is gone\n", ids[which]);
        exit(1);
    }
}

/* ---- The streaming read, on the pool ---------------------------------------- */

struct sread {
    const float *x;
    size_t n;
    float part[CHUNKS];
};

static void stream_task(void *arg, int i)
{
    struct sread *st = arg;
    const size_t a = st->n * (size_t)i / CHUNKS, b = st->n * (size_t)(i + 1) / CHUNKS;
    st->part[i] = sum_floats(st->x + a, b - a);
}

static volatile float sink;

static void stream_run(void *arg)
{
    struct sread *st = arg;
    pool_parallel(pool, CHUNKS, stream_task, st);
    float s = 0.0f;
    for (int i = 0; i < CHUNKS; i++)
        s += st->part[i];
    sink = s;
}

/* ---- 1. The B 16 step against the streaming read ----------------------------- */

struct result {
    double step_ms, step_gbs, stream_ms, stream_gbs;
};

static void run_dtype(enum att_kv_dtype dt, char *const *ids, const float *qs, const float *kvs,
                      const float *q, const float *kv, struct result *res)
{
    const char *const *cids = (const char *const *)ids;
    const size_t esize = dt == ATT_KV_F32 ? 4 : 2;
    const size_t bytes = (size_t)B * TOKENS * EKV * 2 * esize; /* keys and values */
    float *buf = malloc(bytes);
    if (!buf) {
        fprintf(stderr, "bench_batch: out of memory\n");
        exit(1);
    }
    for (size_t x = 0; x < bytes / sizeof *buf; x++)
        buf[x] = 1.0f;
    fill(cids, B, 0, dt, q, kv);
    struct step s = {cids, B, 1, 0, 0, dt, qs, kvs, kvs, 0};
    struct sread st = {buf, bytes / sizeof *buf, {0}};
    for (int r = 0; r < WARM; r++) /* the first grows every cache by a block */
        on_worker(step_run, &s), on_worker(stream_run, &st);
    double ts[REPS], tr[REPS], tokens = 0.0;
    for (int r = 0; r < REPS; r++) {
        ts[r] = on_worker(step_run, &s);
        tokens += (double)s.tokens / REPS; /* attended: the caches after the append */
        tr[r] = on_worker(stream_run, &st);
    }
    end_all(cids, B);
    free(buf);
    res->step_ms = median(ts, REPS), res->stream_ms = median(tr, REPS);
    res->step_gbs = tokens * EKV * 2.0 * (double)esize / res->step_ms / 1e6;
    res->stream_gbs = (double)bytes / res->stream_ms / 1e6;
}

/* ---- 2. RSS at 8 GiB of caches ----------------------------------------------- */

static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1.0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtod(line + 6, NULL);
    if (f)
        fclose(f);
    return kb * 1024.0;
}

static void run_rss(char *const *ids, const float *q, const float *kv, FILE *csv)
{
    const char *const *cids = (const char *const *)ids;
    const double idle = rss_bytes();
    const double t0 = now_ms();
    for (int l = 0; l < LAYERS; l++) /* the first layer starts, the others join */
        fill(cids, B, l, ATT_KV_F16, q, kv);
    const double fill_s = (now_ms() - t0) / 1e3;
    struct seq_stats ss;
    seq_stats(&ss);
    const double full = rss_bytes();
    end_all(cids, B);
    const double after = rss_bytes();
    const double ratio = (full - idle) / (double)ss.bytes;
    printf("\n1h. RSS at %.2f GiB of caches (%d sequences x %d layers x %d tokens FP16, filled "
           "in %.1f s, in process)\n", (double)ss.bytes / 1073741824.0, B, LAYERS, TOKENS,
           fill_s);
    printf("idle RSS %.0f MiB, full %.0f MiB, after the ends %.0f MiB: (RSS - idle) / counted "
           "bytes = %.3f (goal <= 1.1)\n", idle / 1048576.0, full / 1048576.0, after / 1048576.0,
           ratio);
    if (csv)
        fprintf(csv, "rss,FP16,%lld,%.0f,%.0f,%.0f,%.4f\n", ss.bytes, idle, full, after, ratio);
}

int main(int argc, char **argv)
{
    att_blas_select_kernels(argv);
    const char *outdir = argc > 1 ? argv[1] : ".";
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    att_init(1); /* the server's default threads_per_request */
    pool = pool_new(cpus < 1 ? 1 : (int)cpus, 64, 0);
    if (!pool) {
        fprintf(stderr, "bench_batch: no pool\n");
        return 1;
    }
    att_set_runner(&(struct att_runner){pool_run, pool, pool_workers(pool)});
    seq_init(&(struct seq_limits){1000, 3600, 1LL << 40});
    unsigned long long rs = 0x9E3779B97F4A7C15ULL;
    float *q = randv(EQ, 1.0f, &rs), *kv = randv((size_t)TOKENS * EKV, 1.0f, &rs);
    float *qs = randv((size_t)B * EQ, 1.0f, &rs), *kvs = randv((size_t)B * EKV, 1.0f, &rs);
    char *ids[B];
    for (int b = 0; b < B; b++) {
        ids[b] = malloc(16);
        snprintf(ids[b], 16, "s%d", b);
    }
    struct result res[3];
    const enum att_kv_dtype order[3] = {ATT_KV_F16, ATT_KV_F32, ATT_KV_BF16};
    const char *only = getenv("BENCH_BATCH_DTYPE");
    int ran[3] = {0};
    for (int i = 0; i < 3; i++) {
        if (only && strcmp(only, dtype_name[order[i]]))
            continue;
        run_dtype(order[i], ids, qs, kvs, q, kv, &res[order[i]]);
        ran[order[i]] = 1;
        fprintf(stderr, "bench_batch: %s done\n", dtype_name[order[i]]);
    }
    FILE *csv = csv_open(outdir, "batch.csv", "part,dtype,step_ms,step_gbs,stream_ms,stream_gbs,ratio");
    printf("1g. A layer step of B %d sequences x %d cached tokens (L 1, H %d, Hkv %d, d %d, "
           "identity projections; sequence_step on a pool of %ld workers, in process) against "
           "an all-core streaming read of the caches' bytes, interleaved, median of %d\n", B,
           TOKENS, NH, NKV, HD, cpus, REPS);
    printf("%-5s %10s %8s %10s %8s %6s\n", "cache", "step ms", "GB/s", "stream ms", "GB/s",
           "ratio");
    for (int i = 0; i < 3; i++) {
        const struct result *r = &res[order[i]];
        if (!ran[order[i]])
            continue;
        printf("%-5s %10.2f %8.2f %10.2f %8.2f %6.2f\n", dtype_name[order[i]], r->step_ms,
               r->step_gbs, r->stream_ms, r->stream_gbs, r->step_gbs / r->stream_gbs);
        if (csv)
            fprintf(csv, "step,%s,%.4f,%.3f,%.4f,%.3f,%.4f\n", dtype_name[order[i]], r->step_ms,
                    r->step_gbs, r->stream_ms, r->stream_gbs, r->step_gbs / r->stream_gbs);
    }
    printf("(goal: FP16 ratio >= 0.8; FP32 and BF16 for reference)\n");
    const char *rss = getenv("BENCH_BATCH_RSS");
    if (!only && (!rss || strcmp(rss, "0")))
        run_rss(ids, q, kv, csv);
    if (csv)
        fclose(csv);
    att_set_runner(NULL);
    pool_free(pool);
    seq_shutdown();
    for (int b = 0; b < B; b++)
        free(ids[b]);
    free(q), free(kv), free(qs), free(kvs);
    return 0;
}
