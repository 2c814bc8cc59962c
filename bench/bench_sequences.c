/* bench_sequences.c -- a one-row step of a sequence with 10, 10 000 and
 * 100 000 sequences held: the store's lookup and eviction choice must not
 * grow with them (api/sequence_store.c).
 *
 *   bench_sequences OUTDIR
 *
 * In process, through service_attention() (decode, the store, the step,
 * encode; no HTTP): the same 10 active sequences take the same steps in
 * every configuration, among N - 10 idle ones (started, one token each).
 * The ratio is against the 10-sequence figure of this same run; rounds of
 * the three configurations interleave, so that all see the same load.
 * Median of the rounds' mean step time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/service.h"
#include "api/sequence_store.h"
#include "bench/timing.h"

#define ACTIVE 10
#define STEPS 40  /* per active sequence and round */
#define ROUNDS 5

static const int counts[] = {10, 10000, 100000};
#define NCONF (int)(sizeof counts / sizeof *counts)

static const struct codec_limits lim = {
    .max_tensor_elements = 1 << 24, .max_batch = 64, .max_target_len = 65536,
    .max_source_len = 65536, .max_embed_dim = 4096, .max_heads = 64,
    .max_weights_elements = 1 << 24,
};

/* One step of id (start or not): 200, or exit. */
static void step(const char *id, int start)
{
    char body[256];
    const int n = snprintf(body, sizeof body, "{\"query\":[[0.5,-1,0.25,2]],\"num_heads\":2,"
                           "\"sequence_id\":\"%s\",\"sequence_start\":%s}", id,
                           start ? "true" : "false");
    const double t = service_now();
    const struct service_times tm = {.first_byte = t, .body_done = t};
    struct route_response a;
    service_attention(&lim, body, (size_t)n, &tm, NULL, NULL, &a);
    if (a.status != 200) {
        fprintf(stderr, "bench_sequences: step of %s: %d %.*s\n", id, a.status, (int)a.len,
                a.body ? a.body : "");
        exit(1);
    }
    route_response_free(&a); /* the answer "sent": the sequence idle again */
}

/* The store with n sequences, ACTIVE of them "a<i>", the rest idle. */
static void fill(int n)
{
    const struct seq_limits l = {counts[NCONF - 1] + 1, 3600, 1LL << 40};
    seq_init(&l);
    char id[32];
    for (int i = 0; i < n; i++) {
        if (i < ACTIVE)
            snprintf(id, sizeof id, "a%d", i);
        else
            snprintf(id, sizeof id, "idle-%d", i);
        step(id, 1);
    }
}

/* Mean microseconds per step of ACTIVE x STEPS steps, round robin. */
static double round_us(void)
{
    char id[32];
    const double t0 = now_ms();
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < ACTIVE; i++) {
            snprintf(id, sizeof id, "a%d", i);
            step(id, 0);
        }
    return (now_ms() - t0) * 1e3 / (ACTIVE * STEPS);
}

int main(int argc, char **argv)
{
    const char *outdir = argc > 1 ? argv[1] : ".";
    double us[NCONF][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int c = 0; c < NCONF; c++) {
            fill(counts[c]);
            round_us(); /* warm: the caches' first tokens */
            us[c][r] = round_us();
        }
        fprintf(stderr, "bench_sequences: round %d/%d done\n", r + 1, ROUNDS);
    }
    seq_shutdown();
    FILE *csv = csv_open(outdir, "sequence_store.csv", "sequences,step_us,ratio");
    printf("1f. A one-row step (E 4, 2 heads, in process) with N sequences held "
           "(median of %d rounds of %d steps)\n", ROUNDS, ACTIVE * STEPS);
    printf("%12s %12s %10s\n", "sequences", "step (us)", "vs 10");
    const double base = median(us[0], ROUNDS);
    for (int c = 0; c < NCONF; c++) {
        const double m = c ? median(us[c], ROUNDS) : base;
        printf("%12d %12.2f %9.2fx\n", counts[c], m, m / base);
        if (csv)
            fprintf(csv, "%d,%.3f,%.4f\n", counts[c], m, m / base);
    }
    if (csv)
        fclose(csv);
    return 0;
}
