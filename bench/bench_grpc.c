/* bench_grpc.c -- the Open Inference Protocol over gRPC against the same
 * requests over HTTP, end to end, on one server started here.
 *
 *   bench_grpc SERVER BODIES OUTDIR
 *   BENCH_GRPC_HTTP_ONLY=1 bench_grpc ...   HTTP alone (a server without gRPC)
 *
 * SERVER runs with its defaults on free loopback ports, HTTP and gRPC, with
 * BODIES/models (bench/make_bodies.py: the model "large") as its repository.
 * The gRPC client is gRPC's C core (the C API every binding wraps), its
 * messages packed by the protobuf-c code of proto/grpc_service.proto; the
 * HTTP client is libcurl on one kept-alive connection.
 *
 * a. Section 4's large binary case (L 512, E 768, H 12; 1.5 MB in, 14 MB
 *    out): ModelInfer with the query in raw_input_contents against POST
 *    /v2/models/large/infer with the same bytes (BODIES/large_v2.bin),
 *    interleaved, RUNS each after a warm-up. A call's compute is the model
 *    statistics' compute_infer (ns / count, GET /v2/models/large/stats
 *    before and after it), the same measure for both. Medians; target:
 *    gRPC end to end <= 1.25x its compute (HTTP's ratio for reference).
 * b. A one-row sequence step (bench/round_trip.py's: the built-in model,
 *    H 8, Hkv 2, d 64, query 512 wide, key/value 128, need_weights false,
 *    restarted every RESTART steps) over one ModelStreamInfer stream, each
 *    answer read before the next step, against the same step over HTTP
 *    keep-alive (v2 binary). Rounds of STEPS steps alternate the two;
 *    medians of the steps. Target: the stream's step <= HTTP's.
 *
 * Timings are for reading, never a pass/fail. CSV in OUTDIR/grpc.csv. */
#include <curl/curl.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/server.h"
#include "bench/timing.h"
#include "grpc_service.pb-c.h"

#define RUNS 5          /* part a: timed calls per protocol */
#define ROUNDS 8        /* part b: rounds per protocol */
#define STEPS 256       /* part b: steps per round */
#define RESTART 256     /* part b: a new sequence every this many steps */
#define NH 8
#define NKV 2
#define HD 64
#define METHOD "/inference.GRPCInferenceService/"

static void die(const char *what)
{
    fprintf(stderr, "bench_grpc: %s\n", what);
    exit(1);
}

/* ---- HTTP (libcurl, one kept-alive connection) --------------------------- */

struct buf {
    char *p;
    size_t len, cap;
    int keep; /* 0: count the bytes only */
};

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
    struct buf *b = u;
    size_t len = size * n;
    if (b->keep) {
        if (b->len + len + 1 > b->cap) {
            b->cap = 2 * (b->len + len + 1);
            b->p = realloc(b->p, b->cap);
            if (!b->p)
                die("out of memory");
        }
        memcpy(b->p + b->len, p, len);
        b->p[b->len + len] = '\0';
    }
    b->len += len;
    return len;
}

static CURL *curl;
static int http_port;

/* GET (body NULL) or POST path; the answer in b; exits unless 200. */
static void http(const char *path, const void *body, size_t len, long long header_len,
                 struct buf *b)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", http_port, path);
    struct curl_slist *h = NULL;
    b->len = 0;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, b);
    if (body) {
        char hl[96];
        snprintf(hl, sizeof hl, "Inference-Header-Content-Length: %lld", header_len);
        h = curl_slist_append(h, hl);
        h = curl_slist_append(h, "Content-Type: application/octet-stream");
        h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    }
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    long code = 0;
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    if (rc != CURLE_OK || code != 200) {
        fprintf(stderr, "bench_grpc: %s: %s, HTTP %ld %.*s\n", path, curl_easy_strerror(rc), code,
                b->keep ? (int)b->len : 0, b->keep && b->p ? b->p : "");
        exit(1);
    }
}

/* The model's compute_infer so far: nanoseconds and count. */
static void compute_so_far(const char *model, double *ns, double *count)
{
    char path[128];
    snprintf(path, sizeof path, "/v2/models/%s/stats", model);
    struct buf b = {.keep = 1};
    http(path, NULL, 0, 0, &b);
    json_t *j = json_loadb(b.p, b.len, 0, NULL);
    json_t *c = json_object_get(json_object_get(json_array_get(json_object_get(j, "model_stats"), 0),
                                                "inference_stats"), "compute_infer");
    if (!json_is_object(c))
        die("no model_stats[0].inference_stats.compute_infer in the statistics");
    *ns = json_number_value(json_object_get(c, "ns"));
    *count = json_number_value(json_object_get(c, "count"));
    json_decref(j);
    free(b.p);
}

/* ---- gRPC (the C core's client) ------------------------------------------ */

static grpc_channel *channel;
static grpc_completion_queue *cq;

static void grpc_connect(int port)
{
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    grpc_arg a = {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                  .value.integer = -1};
    grpc_channel_args args = {1, &a};
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    channel = grpc_channel_create(target, cr, &args);
    grpc_channel_credentials_release(cr);
    cq = grpc_completion_queue_create_for_next(NULL);
}

static void run_batch(grpc_call *c, grpc_op *ops, size_t n, const char *what)
{
    static char tag;
    if (grpc_call_start_batch(c, ops, n, &tag, NULL) != GRPC_CALL_OK)
        die(what);
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type != GRPC_OP_COMPLETE || ev.tag != &tag || !ev.success)
        die(what);
}

static grpc_call *new_call(const char *method, int seconds)
{
    grpc_slice m = grpc_slice_from_static_string(method);
    gpr_timespec dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                   gpr_time_from_seconds(seconds, GPR_TIMESPAN));
    return grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, dl, NULL);
}

/* A message (packed msg) as a byte buffer over msg itself (no copy). */
static grpc_byte_buffer *message(const uint8_t *msg, size_t len)
{
    grpc_slice s = grpc_slice_from_static_buffer(msg, len);
    return grpc_raw_byte_buffer_create(&s, 1);
}

/* A call's end: op (RECV_STATUS_ON_CLIENT) filled to receive its status
 * into e; end_check() exits unless it is OK, and frees e. */
struct end {
    grpc_metadata_array md;
    grpc_status_code status;
    grpc_slice details;
};

static void end_op(grpc_op *op, struct end *e)
{
    grpc_metadata_array_init(&e->md);
    e->status = GRPC_STATUS_UNKNOWN;
    e->details = grpc_empty_slice();
    op->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op->data.recv_status_on_client.trailing_metadata = &e->md;
    op->data.recv_status_on_client.status = &e->status;
    op->data.recv_status_on_client.status_details = &e->details;
}

static void end_check(struct end *e, const char *what)
{
    if (e->status != GRPC_STATUS_OK) {
        fprintf(stderr, "bench_grpc: %s: status %d: %s\n", what, (int)e->status,
                grpc_slice_to_c_string(e->details));
        exit(1);
    }
    grpc_slice_unref(e->details);
    grpc_metadata_array_destroy(&e->md);
}

/* One ModelInfer; returns the answer (the caller destroys it); exits
 * unless OK. */
static grpc_byte_buffer *model_infer(const uint8_t *msg, size_t len)
{
    grpc_call *c = new_call(METHOD "ModelInfer", 120);
    grpc_byte_buffer *send = message(msg, len);
    grpc_byte_buffer *recv[1] = {NULL}; /* filled by the batch */
    grpc_metadata_array imd;
    grpc_metadata_array_init(&imd);
    struct end e;
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &imd;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv[0];
    end_op(&ops[5], &e);
    run_batch(c, ops, 6, "ModelInfer: the call failed");
    end_check(&e, "ModelInfer");
    if (!recv[0])
        die("ModelInfer: no answer");
    grpc_metadata_array_destroy(&imd);
    grpc_byte_buffer_destroy(send);
    grpc_call_unref(c);
    return recv[0];
}

/* The stream of part b: one call, a step at a time. */
static grpc_call *stream;
static grpc_metadata_array stream_md;

static void stream_open(void)
{
    stream = new_call(METHOD "ModelStreamInfer", 3600);
    grpc_metadata_array_init(&stream_md);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    /* the server's initial metadata may come with its first answer: the
     * first step's batch receives it */
    run_batch(stream, &op, 1, "ModelStreamInfer: cannot open the stream");
}

/* Writes one request, reads its answer; exits on an error_message. */
static void stream_step(const uint8_t *msg, size_t len, int first)
{
    grpc_byte_buffer *send = message(msg, len);
    grpc_byte_buffer *recv[1] = {NULL}; /* filled by the batch */
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_MESSAGE;
    ops[0].data.send_message.send_message = send;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &recv[0];
    ops[2].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[2].data.recv_initial_metadata.recv_initial_metadata = &stream_md;
    run_batch(stream, ops, first ? 3 : 2, "ModelStreamInfer: a step failed");
    grpc_byte_buffer_destroy(send);
    if (!recv[0])
        die("ModelStreamInfer: the server ended the stream");
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, recv[0]))
        die("ModelStreamInfer: cannot read an answer");
    grpc_slice sl = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(recv[0]);
    Inference__ModelStreamInferResponse *a = inference__model_stream_infer_response__unpack(
        NULL, GRPC_SLICE_LENGTH(sl), GRPC_SLICE_START_PTR(sl));
    if (!a || a->error_message[0] || !a->infer_response) {
        fprintf(stderr, "bench_grpc: ModelStreamInfer: %s\n", a ? a->error_message : "bad answer");
        exit(1);
    }
    inference__model_stream_infer_response__free_unpacked(a, NULL);
    grpc_slice_unref(sl);
}

static void stream_close(void)
{
    struct end e;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    end_op(&ops[1], &e);
    run_batch(stream, ops, 2, "ModelStreamInfer: cannot close the stream");
    end_check(&e, "ModelStreamInfer");
    grpc_metadata_array_destroy(&stream_md);
    grpc_call_unref(stream);
}

/* ---- the requests --------------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0)
        die(path);
    uint8_t *p = malloc((size_t)st.st_size + 1);
    if (!p || fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        die(path);
    fclose(f);
    *len = (size_t)st.st_size;
    return p;
}

/* A request parameter: an int64 (s NULL, b < 0), a bool (b 0 or 1) or a
 * string. */
struct param {
    const char *key;
    long long i;
    int b;
    const char *s;
};

/* A packed ModelInferRequest: model, n FP32 inputs (names, shapes), their
 * raw bytes, and np parameters. */

static uint8_t *pack_request(const char *model, int n, const char *const *names,
                             const int64_t (*shapes)[2], ProtobufCBinaryData *raw,
                             const struct param *params, int np, size_t *len)
{
    Inference__ModelInferRequest r = INFERENCE__MODEL_INFER_REQUEST__INIT;
    Inference__ModelInferRequest__InferInputTensor in[3], *inp[3];
    Inference__ModelInferRequest__ParametersEntry pe[8], *pep[8];
    Inference__InferParameter pv[8];
    r.model_name = (char *)model;
    for (int i = 0; i < n; i++) {
        inference__model_infer_request__infer_input_tensor__init(&in[i]);
        in[i].name = (char *)names[i];
        in[i].datatype = "FP32";
        in[i].n_shape = 2;
        in[i].shape = (int64_t *)shapes[i];
        inp[i] = &in[i];
    }
    for (int i = 0; i < np; i++) {
        inference__model_infer_request__parameters_entry__init(&pe[i]);
        inference__infer_parameter__init(&pv[i]);
        pe[i].key = (char *)params[i].key;
        pe[i].value = &pv[i];
        if (params[i].s) {
            pv[i].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
            pv[i].string_param = (char *)params[i].s;
        } else if (params[i].b >= 0) {
            pv[i].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
            pv[i].bool_param = params[i].b;
        } else {
            pv[i].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
            pv[i].int64_param = params[i].i;
        }
        pep[i] = &pe[i];
    }
    r.n_inputs = (size_t)n;
    r.inputs = inp;
    r.n_parameters = (size_t)np;
    r.parameters = pep;
    r.n_raw_input_contents = (size_t)n;
    r.raw_input_contents = raw;
    *len = inference__model_infer_request__get_packed_size(&r);
    uint8_t *p = malloc(*len);
    if (!p)
        die("out of memory");
    inference__model_infer_request__pack(&r, p);
    return p;
}

/* The HTTP body of the same step: v2's JSON header, then the bytes. */
static char *step_body(const char *id, int start, ProtobufCBinaryData *raw, size_t *len,
                       long long *hlen)
{
    char head[1024];
    int h = snprintf(head, sizeof head,
                     "{\"inputs\":[{\"name\":\"query\",\"datatype\":\"FP32\",\"shape\":[1,%d],"
                     "\"parameters\":{\"binary_data_size\":%zu}},"
                     "{\"name\":\"key\",\"datatype\":\"FP32\",\"shape\":[1,%d],"
                     "\"parameters\":{\"binary_data_size\":%zu}},"
                     "{\"name\":\"value\",\"datatype\":\"FP32\",\"shape\":[1,%d],"
                     "\"parameters\":{\"binary_data_size\":%zu}}],"
                     "\"parameters\":{\"num_heads\":%d,\"num_kv_heads\":%d,\"head_dim\":%d,"
                     "\"need_weights\":false,\"binary_data_output\":true,\"sequence_id\":\"%s\"%s}}",
                     NH * HD, raw[0].len, NKV * HD, raw[1].len, NKV * HD, raw[2].len, NH, NKV, HD,
                     id, start ? ",\"sequence_start\":true" : "");
    *hlen = h;
    *len = (size_t)h + raw[0].len + raw[1].len + raw[2].len;
    char *b = malloc(*len);
    if (!b)
        die("out of memory");
    memcpy(b, head, (size_t)h);
    memcpy(b + h, raw[0].data, raw[0].len);
    memcpy(b + h + raw[0].len, raw[1].data, raw[1].len);
    memcpy(b + h + raw[0].len + raw[1].len, raw[2].data, raw[2].len);
    return b;
}

static float *random_row(int n, unsigned *seed)
{
    float *x = malloc((size_t)n * sizeof *x);
    if (!x)
        die("out of memory");
    for (int i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        x[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_grpc SERVER BODIES OUTDIR\n");
        return 2;
    }
    const char *bodies = argv[2], *outdir = argv[3];
    const char *e = getenv("BENCH_GRPC_HTTP_ONLY");
    const int with_grpc = !(e && strcmp(e, "1") == 0);
    char models[512], log[512], path[512];
    snprintf(models, sizeof models, "%s/models", bodies);
    snprintf(log, sizeof log, "%s/grpc_server.log", outdir);
    const int gport = with_grpc ? free_port() : 0;
    http_port = start_server(argv[1], models, gport, log);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    struct buf sink = {0};
    for (int i = 0;; i++) { /* ready: the large model loaded */
        char url[96];
        long code = 0;
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v2/models/large/ready", http_port);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
        if (curl_easy_perform(curl) == CURLE_OK &&
            curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200)
            break;
        if (i == 600)
            die("the model 'large' was not ready within 60 s");
        usleep(100000);
    }
    if (with_grpc) {
        grpc_init();
        grpc_connect(gport);
    }
    FILE *csv = csv_open(outdir, "grpc.csv", "case,protocol,e2e,compute_or_step,ratio");

    /* a. the large binary case */
    size_t blen, hl_len;
    snprintf(path, sizeof path, "%s/large_v2.bin", bodies);
    uint8_t *body = read_file(path, &blen);
    snprintf(path, sizeof path, "%s/large_v2.hlen", bodies);
    char *hl = (char *)read_file(path, &hl_len);
    const long long hlen = strtoll(hl, NULL, 10);
    ProtobufCBinaryData qraw = {blen - (size_t)hlen, body + hlen};
    static const char *const qname[] = {"query"};
    static const int64_t qshape[][2] = {{512, 768}};
    size_t mlen = 0;
    uint8_t *msg = with_grpc ? pack_request("large", 1, qname, qshape, &qraw, NULL, 0, &mlen) : NULL;
    double e2e[2][RUNS], comp[2][RUNS], ns0, n0, ns1, n1;
    size_t answer[2] = {0, 0};
    for (int r = -1; r < RUNS; r++) /* -1: the warm-up */
        for (int p = 0; p < 1 + with_grpc; p++) {
            compute_so_far("large", &ns0, &n0);
            double t = now_ms();
            if (p == 0) {
                http("/v2/models/large/infer", body, blen, hlen, &sink);
                answer[0] = sink.len;
            } else {
                grpc_byte_buffer *a = model_infer(msg, mlen);
                answer[1] = grpc_byte_buffer_length(a);
                grpc_byte_buffer_destroy(a);
            }
            t = now_ms() - t;
            compute_so_far("large", &ns1, &n1);
            if (r >= 0) {
                e2e[p][r] = t;
                comp[p][r] = (ns1 - ns0) / (n1 - n0 > 0 ? n1 - n0 : 1) / 1e6;
            }
        }
    printf("4f. The Open Inference Protocol over gRPC (gRPC's C core client) and over HTTP "
           "(libcurl, keep-alive), one server with its defaults\n");
    printf("large binary case (L 512, E 768, H 12; %.1f MB in), median of %d:\n",
           qraw.len / 1048576.0, RUNS);
    printf("%-22s %9s %9s %11s %12s\n", "protocol", "answer MB", "e2e ms", "compute ms", "e2e/compute");
    static const char *const proto_name[] = {"HTTP v2 binary", "gRPC ModelInfer"};
    for (int p = 0; p < 1 + with_grpc; p++) {
        const double te = median(e2e[p], RUNS), tc = median(comp[p], RUNS);
        printf("%-22s %9.1f %9.2f %11.2f %11.2fx\n", proto_name[p], answer[p] / 1048576.0, te, tc,
               te / tc);
        if (csv)
            fprintf(csv, "large,%s,%.3f,%.3f,%.4f\n", p ? "grpc" : "http", te, tc, te / tc);
    }
    printf("(target: gRPC end to end <= 1.25x its compute; HTTP for reference)\n");

    /* b. a one-row sequence step */
    unsigned seed = 30;
    float *q = random_row(NH * HD, &seed), *k = random_row(NKV * HD, &seed),
          *v = random_row(NKV * HD, &seed);
    ProtobufCBinaryData raw[3] = {{NH * HD * 4, (uint8_t *)q}, {NKV * HD * 4, (uint8_t *)k},
                                  {NKV * HD * 4, (uint8_t *)v}};
    static const char *const names[] = {"query", "key", "value"};
    static const int64_t shapes[][2] = {{1, NH * HD}, {1, NKV * HD}, {1, NKV * HD}};
    const struct param params[] = {
        {"num_heads", NH, -1, NULL},     {"num_kv_heads", NKV, -1, NULL},
        {"head_dim", HD, -1, NULL},      {"need_weights", 0, 0, NULL},
        {"sequence_id", 0, -1, "bench-grpc-stream"}, {"sequence_start", 0, 1, NULL}};
    size_t glen[2] = {0, 0}, hbl[2];
    uint8_t *gmsg[2] = {NULL, NULL};
    long long hbh[2];
    char *hbody[2];
    for (int s = 0; s < 2; s++) { /* [0] a step, [1] a start */
        hbody[s] = step_body("bench-grpc-http", s, raw, &hbl[s], &hbh[s]);
        if (with_grpc) /* every output raw, as HTTP's binary_data_output asks */
            gmsg[s] = pack_request("attention", 3, names, shapes, raw, params, 5 + s, &glen[s]);
    }
    const int nsteps = ROUNDS * STEPS;
    double *us[2];
    us[0] = malloc((size_t)nsteps * sizeof(double));
    us[1] = malloc((size_t)nsteps * sizeof(double));
    if (!us[0] || !us[1])
        die("out of memory");
    if (with_grpc)
        stream_open();
    int done[2] = {0, 0}, first = 1;
    for (int r = 0; r < ROUNDS + 1; r++) /* round 0: the warm-up */
        for (int p = 0; p < 1 + with_grpc; p++)
            for (int i = 0; i < STEPS; i++) {
                const int start = (r * STEPS + i) % RESTART == 0;
                double t = now_ms();
                if (p == 0) {
                    http("/v2/models/attention/infer", hbody[start], hbl[start], hbh[start], &sink);
                } else {
                    stream_step(gmsg[start], glen[start], first);
                    first = 0;
                }
                t = now_ms() - t;
                if (r > 0)
                    us[p][done[p]++] = t * 1e3;
            }
    if (with_grpc)
        stream_close();
    printf("one-row sequence step (H %d, Hkv %d, d %d, FP32 cache, need_weights false; a new "
           "sequence every %d steps), %d steps each:\n", NH, NKV, HD, RESTART, nsteps);
    printf("%-22s %10s %10s\n", "protocol", "median us", "mean us");
    static const char *const step_name[] = {"HTTP keep-alive", "gRPC ModelStreamInfer"};
    double med[2] = {0, 0};
    for (int p = 0; p < 1 + with_grpc; p++) {
        double sum = 0;
        for (int i = 0; i < nsteps; i++)
            sum += us[p][i];
        med[p] = median(us[p], nsteps);
        printf("%-22s %10.1f %10.1f\n", step_name[p], med[p], sum / nsteps);
        if (csv)
            fprintf(csv, "step,%s,%.3f,%.3f,%.4f\n", p ? "grpc" : "http", med[p], sum / nsteps,
                    med[p] / med[0]);
    }
    if (with_grpc)
        printf("gRPC stream step / HTTP keep-alive step: %.2f (target <= 1.00)\n", med[1] / med[0]);
    else
        printf("(BENCH_GRPC_HTTP_ONLY=1: gRPC not measured)\n");
    if (csv)
        fclose(csv);
    if (with_grpc) {
        grpc_channel_destroy(channel);
        grpc_completion_queue_shutdown(cq);
        while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(cq);
        grpc_shutdown();
    }
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    stop_server();
    return 0;
}
