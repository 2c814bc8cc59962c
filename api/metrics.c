#include "api/metrics.h"

#include "api/sequence_store.h"
#include "model/repo.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The declared labels; "other" always. Set at start-up, before any
 * request: read without a lock. */
static const char *ep_names[METRICS_ENDPOINTS] = {METRICS_OTHER};
static int ep_count = 1;
#define EP_COUNT METRICS_ENDPOINTS

/* Latency buckets (seconds), as Prometheus histograms want them: cumulative. */
static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define NBUCKETS (sizeof buckets / sizeof buckets[0])

static atomic_ulong requests[EP_COUNT][600];
/* gRPC calls per endpoint and code, and each code's name as recorded */
static atomic_ulong grpc_requests[EP_COUNT][METRICS_GRPC_CODES];
static const char *_Atomic grpc_names[METRICS_GRPC_CODES];
static atomic_ulong latency_count[EP_COUNT][NBUCKETS + 1];
static atomic_ulong latency_sum_us[EP_COUNT];
static atomic_ulong stage_sum_us[STAGE_COUNT], stage_count;
static atomic_ulong stage_hist[STAGE_COUNT][NBUCKETS + 1];

static const char *const stage_names[STAGE_COUNT] = {
    "receive", "queue", "decode", "compute", "encode"};

const char *metrics_stage_name(enum metrics_stage s)
{
    return (unsigned)s < STAGE_COUNT ? stage_names[s] : "other";
}

static size_t bucket_of(double seconds)
{
    size_t b = 0;
    while (b < NBUCKETS && seconds > buckets[b])
        b++;
    return b;
}

static int endpoint_of(const char *name)
{
    for (int i = 0; name && i < ep_count; i++)
        if (strcmp(ep_names[i], name) == 0)
            return i;
    return -1;
}

int metrics_endpoint_add(const char *name)
{
    int i = endpoint_of(name);
    if (i >= 0)
        return i;
    if (ep_count == METRICS_ENDPOINTS)
        return -1;
    ep_names[ep_count] = name;
    return ep_count++;
}

void metrics_record(const char *endpoint, int status, double seconds)
{
    int ep = endpoint_of(endpoint);
    if (ep < 0)
        ep = 0; /* other */
    if (status < 100 || status > 599)
        status = 500;
    atomic_fetch_add(&requests[ep][status], 1);
    atomic_fetch_add(&latency_count[ep][bucket_of(seconds)], 1);
    atomic_fetch_add(&latency_sum_us[ep], (unsigned long)(seconds * 1e6));
}

void metrics_record_grpc(const char *endpoint, int code, const char *name, double seconds)
{
    (void)seconds; /* the duration histogram is HTTP's */
    int ep = endpoint_of(endpoint);
    if (ep < 0)
        ep = 0;
    if (code < 0 || code >= METRICS_GRPC_CODES)
        code = 2, name = "UNKNOWN";
    atomic_store(&grpc_names[code], name ? name : "UNKNOWN");
    atomic_fetch_add(&grpc_requests[ep][code], 1);
}

/* attention_requests_total: HTTP's counts by status, then gRPC's by code. */
static void write_requests(FILE *f)
{
    fprintf(f, "# HELP attention_requests_total Requests answered, by protocol (http, grpc), "
               "endpoint and status (HTTP's status, gRPC's code name).\n"
               "# TYPE attention_requests_total counter\n");
    for (int e = 0; e < ep_count; e++)
        for (int s = 100; s < 600; s++) {
            unsigned long n = atomic_load(&requests[e][s]);
            if (n)
                fprintf(f, "attention_requests_total{protocol=\"http\",endpoint=\"%s\","
                           "status=\"%d\"} %lu\n", ep_names[e], s, n);
        }
    for (int e = 0; e < ep_count; e++)
        for (int c = 0; c < METRICS_GRPC_CODES; c++) {
            unsigned long n = atomic_load(&grpc_requests[e][c]);
            const char *name = atomic_load(&grpc_names[c]);
            if (n && name)
                fprintf(f, "attention_requests_total{protocol=\"grpc\",endpoint=\"%s\","
                           "status=\"%s\"} %lu\n", ep_names[e], name, n);
        }
}

void metrics_record_stages(const double s[STAGE_COUNT])
{
    for (int i = 0; i < STAGE_COUNT; i++) {
        atomic_fetch_add(&stage_sum_us[i], (unsigned long)(s[i] * 1e6));
        atomic_fetch_add(&stage_hist[i][bucket_of(s[i])], 1);
    }
    atomic_fetch_add(&stage_count, 1);
}

/* One histogram family: name{label="value",le=...} for each row of counts. */
static void write_histogram(FILE *f, const char *name, const char *label,
                            const char *const *values, int rows,
                            atomic_ulong (*count)[NBUCKETS + 1], atomic_ulong *sum_us)
{
    for (int e = 0; e < rows; e++) {
        unsigned long cum = 0;
        for (size_t b = 0; b <= NBUCKETS; b++) {
            cum += atomic_load(&count[e][b]);
            if (b < NBUCKETS)
                fprintf(f, "%s_bucket{%s=\"%s\",le=\"%g\"} %lu\n", name, label, values[e],
                        buckets[b], cum);
            else
                fprintf(f, "%s_bucket{%s=\"%s\",le=\"+Inf\"} %lu\n", name, label, values[e],
                        cum);
        }
        fprintf(f, "%s_sum{%s=\"%s\"} %.6f\n", name, label, values[e],
                (double)atomic_load(&sum_us[e]) / 1e6);
        fprintf(f, "%s_count{%s=\"%s\"} %lu\n", name, label, values[e], cum);
    }
}

/* The registry's per-model counters (one snapshot). 0, or -1 when out of memory. */
static int write_models(FILE *f)
{
    static const char *const stages[REPO_STAGES] = {"queue", "compute_input", "compute_infer",
                                                    "compute_output"};
    struct repo_snapshot s;
    if (repo_snapshot(&s))
        return -1;
    fprintf(f, "# HELP attention_model_requests_total Inference requests per model "
               "(POST /attention with \"model\", and /v2 infer), by result.\n"
               "# TYPE attention_model_requests_total counter\n");
    for (size_t i = 0; i < s.n; i++) {
        fprintf(f, "attention_model_requests_total{model=\"%s\",result=\"success\"} %llu\n",
                s.models[i].name, s.models[i].success.count);
        fprintf(f, "attention_model_requests_total{model=\"%s\",result=\"fail\"} %llu\n",
                s.models[i].name, s.models[i].fail.count);
    }
    fprintf(f, "# HELP attention_model_stage_seconds_total Time per model and stage of "
               "its successful requests.\n"
               "# TYPE attention_model_stage_seconds_total counter\n");
    for (size_t i = 0; i < s.n; i++)
        for (int st = 0; st < REPO_STAGES; st++)
            fprintf(f, "attention_model_stage_seconds_total{model=\"%s\",stage=\"%s\"} %.9f\n",
                    s.models[i].name, stages[st], (double)s.models[i].stage[st].ns * 1e-9);
    fprintf(f, "# HELP attention_model_ready Whether a model is ready (1) or not (0).\n"
               "# TYPE attention_model_ready gauge\n");
    for (size_t i = 0; i < s.n; i++)
        fprintf(f, "attention_model_ready{model=\"%s\"} %d\n", s.models[i].name,
                s.models[i].state == REPO_READY);
    repo_snapshot_free(&s);
    return 0;
}

/* One model's sequences (seq_each_model). */
static void model_sequences(const char *name, long long n, long long bytes, void *cls)
{
    FILE *f = cls;
    fprintf(f, "attention_model_sequences_active{model=\"%s\"} %lld\n"
               "attention_model_sequence_bytes{model=\"%s\"} %lld\n", name, n, name, bytes);
}

/* The sequences (api/sequence_store.h): all together, then per model. */
static void write_sequences(FILE *f)
{
    struct seq_stats st;
    seq_stats(&st);
    fprintf(f, "# HELP attention_sequences_active Sequences held (max_sequences).\n"
               "# TYPE attention_sequences_active gauge\nattention_sequences_active %lld\n"
               "# HELP attention_sequence_bytes Bytes of every sequence's KV cache, blocks "
               "allocated (max_sequence_bytes).\n"
               "# TYPE attention_sequence_bytes gauge\nattention_sequence_bytes %lld\n"
               "# HELP attention_sequence_evictions_total Sequences evicted for a limit or "
               "dropped after sequence_idle_timeout.\n"
               "# TYPE attention_sequence_evictions_total counter\n"
               "attention_sequence_evictions_total %llu\n"
               "# HELP attention_model_sequences_active Sequences held per model.\n"
               "# TYPE attention_model_sequences_active gauge\n"
               "# HELP attention_model_sequence_bytes KV cache bytes per model.\n"
               "# TYPE attention_model_sequence_bytes gauge\n",
            st.active, st.bytes, st.evictions);
    seq_each_model(model_sequences, f);
}

char *metrics_write(const struct metrics_gauges *g, size_t *len)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return NULL;
    fprintf(f, "# HELP attention_http_requests_total Requests answered, by endpoint and status.\n"
               "# TYPE attention_http_requests_total counter\n");
    for (int e = 0; e < ep_count; e++)
        for (int s = 100; s < 600; s++) {
            unsigned long n = atomic_load(&requests[e][s]);
            if (n)
                fprintf(f, "attention_http_requests_total{endpoint=\"%s\",status=\"%d\"} %lu\n",
                        ep_names[e], s, n);
        }
    write_requests(f);
    fprintf(f, "# HELP attention_http_request_duration_seconds Time from first byte to answer.\n"
               "# TYPE attention_http_request_duration_seconds histogram\n");
    write_histogram(f, "attention_http_request_duration_seconds", "endpoint", ep_names,
                    ep_count, latency_count, latency_sum_us);
    fprintf(f, "# HELP attention_stage_seconds_total Time spent per stage of POST /attention.\n"
               "# TYPE attention_stage_seconds_total counter\n");
    for (int i = 0; i < STAGE_COUNT; i++)
        fprintf(f, "attention_stage_seconds_total{stage=\"%s\"} %.6f\n", stage_names[i],
                (double)atomic_load(&stage_sum_us[i]) / 1e6);
    fprintf(f, "# HELP attention_stage_duration_seconds Time of each stage of POST /attention.\n"
               "# TYPE attention_stage_duration_seconds histogram\n");
    write_histogram(f, "attention_stage_duration_seconds", "stage", stage_names, STAGE_COUNT,
                    stage_hist, stage_sum_us);
    fprintf(f, "# HELP attention_jobs_total Attention jobs computed.\n"
               "# TYPE attention_jobs_total counter\nattention_jobs_total %lu\n",
            atomic_load(&stage_count));
    fprintf(f, "# HELP attention_queue_depth Jobs waiting for a worker.\n"
               "# TYPE attention_queue_depth gauge\nattention_queue_depth %d\n"
               "# HELP attention_workers_busy Workers computing a job.\n"
               "# TYPE attention_workers_busy gauge\nattention_workers_busy %d\n"
               "# HELP attention_workers Worker threads.\n"
               "# TYPE attention_workers gauge\nattention_workers %d\n"
               "# HELP attention_draining 1 while shutting down.\n"
               "# TYPE attention_draining gauge\nattention_draining %d\n"
               "# HELP attention_inflight_bytes Request body bytes held (max_inflight_bytes).\n"
               "# TYPE attention_inflight_bytes gauge\nattention_inflight_bytes %lld\n"
               "# HELP attention_answer_bytes Answer bytes computed and not yet sent "
               "(max_answer_bytes).\n"
               "# TYPE attention_answer_bytes gauge\nattention_answer_bytes %lld\n"
               "# HELP attention_connections_open Open TCP connections (max_connections).\n"
               "# TYPE attention_connections_open gauge\nattention_connections_open %d\n",
            g->queue_depth, g->busy_workers, g->workers, g->draining, g->inflight_bytes,
            g->answer_bytes, g->connections_open);
    write_sequences(f);
    const int models = write_models(f);
    if (fclose(f) != 0 || models) {
        free(text);
        return NULL;
    }
    *len = size;
    return text;
}
