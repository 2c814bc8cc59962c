/* bench_model.c -- what loading one server-held model costs.
 *
 *   bench_model OUTDIR     writes OUTDIR/models/bert12_l3/ (a 12-layer,
 *                          E=768 BERT-layout F32 checkpoint with the
 *                          embeddings, feed-forward and LayerNorm tensors
 *                          too; config.json selects layer 3), then times
 *                          model_load() and reports RSS growth; a CSV row
 *                          goes to OUTDIR/model.csv.
 *
 * The file is written by a child process, so that the parent's peak RSS
 * (getrusage) counts only the loads. model_load() maps the file, converts
 * the layer's six tensors and unmaps it: RSS should grow by the layer's
 * float32 size (4·E² + 4·E floats, 9.4 MB), not the file's (~430 MB). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/timing.h"
#include "model/model.h"

#define E 768
#define LAYERS 12
#define FFN 3072
#define VOCAB 30522
#define RUNS 7

struct spec {
    char name[96];
    long rows, cols; /* cols 0: rank 1 */
};

static int specs(struct spec *s)
{
    static const struct {
        const char *name;
        long rows, cols;
    } layer[] = {
        {"attention.self.query.weight", E, E},   {"attention.self.query.bias", E, 0},
        {"attention.self.key.weight", E, E},     {"attention.self.key.bias", E, 0},
        {"attention.self.value.weight", E, E},   {"attention.self.value.bias", E, 0},
        {"attention.output.dense.weight", E, E}, {"attention.output.dense.bias", E, 0},
        {"attention.output.LayerNorm.weight", E, 0}, {"attention.output.LayerNorm.bias", E, 0},
        {"intermediate.dense.weight", FFN, E},   {"intermediate.dense.bias", FFN, 0},
        {"output.dense.weight", E, FFN},         {"output.dense.bias", E, 0},
        {"output.LayerNorm.weight", E, 0},       {"output.LayerNorm.bias", E, 0},
    };
    int n = 0;
    snprintf(s[n].name, sizeof s[n].name, "bert.embeddings.word_embeddings.weight");
    s[n].rows = VOCAB, s[n++].cols = E;
    snprintf(s[n].name, sizeof s[n].name, "bert.embeddings.position_embeddings.weight");
    s[n].rows = 512, s[n++].cols = E;
    for (int l = 0; l < LAYERS; l++)
        for (size_t k = 0; k < sizeof layer / sizeof layer[0]; k++) {
            snprintf(s[n].name, sizeof s[n].name, "bert.encoder.layer.%d.%s", l, layer[k].name);
            s[n].rows = layer[k].rows, s[n++].cols = layer[k].cols;
        }
    return n;
}

/* Write the checkpoint (header padded to 8 bytes, data in header order). */
static int write_file(const char *path)
{
    static struct spec s[2 + LAYERS * 16];
    int n = specs(s);
    size_t cap = 64 << 10, len = 0;
    char *h = malloc(cap);
    unsigned long long at = 0;
    len += (size_t)snprintf(h, cap, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        unsigned long long bytes = (unsigned long long)s[i].rows * (s[i].cols ? s[i].cols : 1) * 4;
        char shape[48];
        if (s[i].cols)
            snprintf(shape, sizeof shape, "[%ld,%ld]", s[i].rows, s[i].cols);
        else
            snprintf(shape, sizeof shape, "[%ld]", s[i].rows);
        len += (size_t)snprintf(h + len, cap - len,
                                ",\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                                s[i].name, shape, at, at + bytes);
        at += bytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8)
        h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned char n8[8];
    for (int i = 0; i < 8; i++)
        n8[i] = (unsigned char)((unsigned long long)len >> (8 * i));
    fwrite(n8, 1, 8, f);
    fwrite(h, 1, len, f);
    enum { CHUNK = 1 << 20 };
    float *chunk = malloc(CHUNK * sizeof *chunk);
    unsigned long long x = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < CHUNK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        chunk[i] = (float)((double)(x >> 40) / 16777216.0 - 0.5) * 0.05f;
    }
    for (unsigned long long left = at; left;) {
        size_t k = left < CHUNK * sizeof *chunk ? (size_t)left : CHUNK * sizeof *chunk;
        fwrite(chunk, 1, k, f);
        left -= k;
    }
    free(chunk);
    free(h);
    return fclose(f);
}

static double rss_mb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE) / 1e6;
}

static double maxrss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1e3; /* KiB on Linux */
}

int main(int argc, char **argv)
{
    const char *out = argc > 1 ? argv[1] : "build/bench";
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/models/bert12_l3", out);
    snprintf(path, sizeof path, "%s/models", out);
    mkdir(path, 0755);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *cf = fopen(path, "w");
    if (!cf) {
        perror(path);
        return 1;
    }
    fprintf(cf, "{\"format\": \"hf_bert\", \"prefix\": \"bert.encoder.layer.3.\", "
                "\"num_heads\": 12}\n");
    fclose(cf);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    pid_t pid = fork();
    if (pid == 0)
        _exit(write_file(path) ? 1 : 0);
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "bench_model: could not write %s\n", path);
        return 1;
    }
    struct stat sb;
    stat(path, &sb);
    snprintf(path, sizeof path, "%s/models", out);

    double rss0 = rss_mb(), peak0 = maxrss_mb(), ms[RUNS], held = 0, after_free = 0;
    size_t bytes = 0;
    for (int r = 0; r < RUNS; r++) {
        struct model *m;
        char err[512];
        double t0 = now_ms();
        if (model_load(&m, path, "bert12_l3", err, sizeof err)) {
            fprintf(stderr, "bench_model: %s\n", err);
            return 1;
        }
        ms[r] = now_ms() - t0;
        if (r == 0)
            held = rss_mb() - rss0, bytes = m->bytes;
        model_free(m);
        if (r == 0)
            after_free = rss_mb() - rss0;
    }
    double peak = maxrss_mb() - peak0, med = median(ms, RUNS);
    double layer = (double)bytes / 1e6, file = (double)sb.st_size / 1e6;
    printf("6. Server-held model: model_load of layer 3 of a 12-layer E=768 BERT (F32), "
           "median of %d\n", RUNS);
    printf("%10s %10s %12s %14s %14s %14s\n", "file MB", "layer MB", "load ms", "RSS held MB",
           "peak RSS +MB", "after free MB");
    printf("%10.1f %10.2f %12.2f %14.2f %14.2f %14.2f\n", file, layer, med, held, peak,
           after_free);
    printf("(RSS held / layer float32 size: %.2fx; / file size: %.3fx)\n", held / layer,
           held / file);
    snprintf(path, sizeof path, "%s/model.csv", out);
    FILE *csv = fopen(path, "w");
    if (csv) {
        fprintf(csv, "file_mb,layer_mb,load_ms,rss_held_mb,peak_rss_mb,after_free_mb\n");
        fprintf(csv, "%.1f,%.2f,%.2f,%.2f,%.2f,%.2f\n", file, layer, med, held, peak,
                after_free);
        fclose(csv);
    }
    return 0;
}
