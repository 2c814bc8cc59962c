/* test_grpc_transport.c -- grpc/: the transport serving a method table it
 * is handed (the tests' own, not the service's), to a client on gRPC's C
 * core: unary calls on the pool, a stream, an admin row, the refusals
 * (no method, the token, a message too large, too many calls), a deadline
 * seen by a slow handler, and the drain. Loopback only. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grpc/grpc.h"
#include "grpc/grpc_route.h"
#include "lib/pool.h"

/* ---------------------------------------------------------------------- */
/* The server's table                                                      */

static atomic_int tails_freed, saw_cancel, records, last_record_code;

static void tails_free(void *p)
{
    free(p);
    atomic_fetch_add(&tails_freed, 1);
}

static int msg_is(const struct grpc_route_request *rq, const char *s)
{
    return rq->len == strlen(s) && memcmp(rq->msg, s, rq->len) == 0;
}

static void answer_text(struct grpc_route_response *out, const char *s)
{
    out->len = strlen(s);
    out->body = malloc(out->len + 1);
    memcpy(out->body, s, out->len + 1);
}

/* The message back, its first half as the body and the rest as a tail;
 * "slow" waits for the call's end (3 s at most), "wait" 400 ms, "id" the
 * request id. */
static void echo(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    if (msg_is(rq, "slow")) {
        for (int i = 0; i < 300 && !*rq->cancelled; i++)
            usleep(10000);
        if (*rq->cancelled)
            atomic_store(&saw_cancel, 1);
        answer_text(out, "slow done");
        return;
    }
    if (msg_is(rq, "wait")) {
        usleep(400000);
        answer_text(out, "waited");
        return;
    }
    if (msg_is(rq, "id")) {
        answer_text(out, rq->request_id);
        return;
    }
    const size_t half = rq->len / 2;
    out->body = malloc(half + 1);
    memcpy(out->body, rq->msg, half);
    out->len = half;
    unsigned char *rest = malloc(rq->len - half + 1);
    memcpy(rest, rq->msg + half, rq->len - half);
    out->tail[0] = (struct grpc_route_tail){rest, rq->len - half};
    out->ntail = 1;
    out->free_tails = tails_free;
    out->tails_cls = rest;
}

/* Each message answered "r-<message>"; "b" fails as the api fails a
 * stream's request (an error in an OK message); "stop" ends the stream. */
static void stream(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    char text[64];
    if (msg_is(rq, "stop")) {
        grpc_route_fail(out, GRPC_CODE_INVALID_ARGUMENT, "stopped");
        return;
    }
    snprintf(text, sizeof text, "%s%.*s", msg_is(rq, "b") ? "error: " : "r-", (int)rq->len,
             (const char *)rq->msg);
    answer_text(out, text);
}

static void admin(const struct grpc_route_request *rq, struct grpc_route_response *out)
{
    (void)rq;
    answer_text(out, "admin ok");
}

static void record(const char *metric, int code, double seconds)
{
    (void)metric, (void)seconds;
    atomic_fetch_add(&records, 1);
    atomic_store(&last_record_code, code);
}

static const struct grpc_route rows[] = {
    {"/t.S/Echo", GRPC_ROUTE_POOL, "echo", echo},
    {"/t.S/Stream", GRPC_ROUTE_POOL | GRPC_ROUTE_STREAM, "stream", stream},
    {"/t.S/Admin", GRPC_ROUTE_ADMIN, "admin", admin},
};
static const struct grpc_route_table table = {rows, 3, "admin is off: set admin_token", record};

static struct pool *pool;
static struct grpc_transport *srv;

static struct grpc_options options(void)
{
    return (struct grpc_options){.address = "127.0.0.1", .max_calls = 16,
                                 .max_message_bytes = 1 << 20, .max_inflight_bytes = 4 << 20,
                                 .idle_timeout = 30, .admin_token = "s3cret",
                                 .tls_cert_file = "", .tls_key_file = ""};
}

/* ---------------------------------------------------------------------- */
/* The client                                                              */

static grpc_channel *chan;
static grpc_completion_queue *ccq;
static const char *trusted_pem; /* TLS: the server's certificate; NULL: plain */

static void serve(const struct grpc_options *o)
{
    char err[256];
    int setting = 0;
    pool = pool_new(2, 8, 0);
    srv = grpc_start(o, &table, pool, &setting, err, sizeof err);
    cr_assert_not_null(srv, "%s", err);
    grpc_init();
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", grpc_port(srv));
    grpc_channel_credentials *cr = trusted_pem
                                       ? grpc_ssl_credentials_create(trusted_pem, NULL, NULL, NULL)
                                       : grpc_insecure_credentials_create();
    chan = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    ccq = grpc_completion_queue_create_for_pluck(NULL);
}

static void unserve(void)
{
    grpc_channel_destroy(chan);
    grpc_completion_queue_shutdown(ccq);
    while (grpc_completion_queue_pluck(ccq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(ccq);
    grpc_shutdown();
    if (srv)
        grpc_stop(srv);
    pool_free(pool);
}

static int wait_tag(void *tag)
{
    const grpc_event ev = grpc_completion_queue_pluck(
        ccq, tag, gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(10, GPR_TIMESPAN)),
        NULL);
    cr_assert_eq(ev.type, GRPC_OP_COMPLETE, "no completion within 10 s");
    return ev.success;
}

/* One call: its ops' storage, and what came back. */
struct ucall {
    grpc_call *call;
    grpc_metadata md[2];
    size_t nmd;
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer *send, *recv;
    grpc_status_code status;
    grpc_slice details;
    char text[256];  /* the answer (or the status's details) */
    char tag;
};

static grpc_call *call_new(const char *method, int timeout_ms)
{
    const gpr_timespec d = timeout_ms > 0
                               ? gpr_time_add(gpr_now(GPR_CLOCK_REALTIME),
                                              gpr_time_from_millis(timeout_ms, GPR_TIMESPAN))
                               : gpr_inf_future(GPR_CLOCK_REALTIME);
    const grpc_slice m = grpc_slice_from_static_string(method);
    return grpc_channel_create_call(chan, NULL, GRPC_PROPAGATE_DEFAULTS, ccq, m, NULL, d, NULL);
}

static grpc_byte_buffer *bb_of(const void *p, size_t len)
{
    grpc_slice s = grpc_slice_from_copied_buffer(p, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

static void text_of(grpc_byte_buffer *bb, char *dst, size_t cap)
{
    grpc_byte_buffer_reader r;
    cr_assert(grpc_byte_buffer_reader_init(&r, bb));
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    snprintf(dst, cap, "%.*s", (int)GRPC_SLICE_LENGTH(s), (const char *)GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    grpc_byte_buffer_reader_destroy(&r);
}

/* Start a unary call (the whole of it in one batch); ufinish() waits. */
static void ustart(struct ucall *u, const char *method, const void *msg, size_t len,
                   const char *auth, int timeout_ms)
{
    memset(u, 0, sizeof *u);
    u->call = call_new(method, timeout_ms);
    if (auth)
        u->md[u->nmd++] = (grpc_metadata){.key = grpc_slice_from_static_string("authorization"),
                                          .value = grpc_slice_from_static_string(auth)};
    u->md[u->nmd++] = (grpc_metadata){.key = grpc_slice_from_static_string("x-request-id"),
                                      .value = grpc_slice_from_static_string("req-7")};
    u->send = bb_of(msg, len);
    grpc_metadata_array_init(&u->init_md);
    grpc_metadata_array_init(&u->trail_md);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = u->nmd;
    ops[0].data.send_initial_metadata.metadata = u->md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trail_md;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    cr_assert_eq(grpc_call_start_batch(u->call, ops, 6, &u->tag, NULL), GRPC_CALL_OK);
}

static void ufinish(struct ucall *u)
{
    wait_tag(&u->tag);
    if (u->recv)
        text_of(u->recv, u->text, sizeof u->text);
    else
        snprintf(u->text, sizeof u->text, "%.*s", (int)GRPC_SLICE_LENGTH(u->details),
                 (const char *)GRPC_SLICE_START_PTR(u->details));
    grpc_byte_buffer_destroy(u->send);
    if (u->recv)
        grpc_byte_buffer_destroy(u->recv);
    grpc_slice_unref(u->details);
    grpc_metadata_array_destroy(&u->init_md);
    grpc_metadata_array_destroy(&u->trail_md);
    grpc_call_unref(u->call);
}

static void unary(struct ucall *u, const char *method, const char *msg, const char *auth)
{
    ustart(u, method, msg, strlen(msg), auth, 0);
    ufinish(u);
}

/* u's status is st, and its answer (or status text) text unless NULL. */
static void expect_reply(const struct ucall *u, grpc_status_code st, const char *text)
{
    cr_expect_eq(u->status, st, "%d %s", u->status, u->text);
    if (text)
        cr_expect_str_eq(u->text, text);
}

/* A stream: open it, send and read one message at a time, close it. */
static grpc_metadata_array stream_md;

static grpc_call *sopen(const char *method)
{
    grpc_call *c = call_new(method, 0);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    char tag;
    cr_assert_eq(grpc_call_start_batch(c, &op, 1, &tag, NULL), GRPC_CALL_OK);
    cr_assert(wait_tag(&tag));
    grpc_metadata_array_init(&stream_md);
    return c;
}

/* Send msg and read the answer into dst; 0 when the stream has ended. */
static int sstep(grpc_call *c, const char *msg, char *dst, size_t cap, int first)
{
    grpc_byte_buffer *send = bb_of(msg, strlen(msg)), *recv = NULL;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_MESSAGE;
    ops[0].data.send_message.send_message = send;
    char tag;
    cr_assert_eq(grpc_call_start_batch(c, ops, 1, &tag, NULL), GRPC_CALL_OK);
    wait_tag(&tag);
    grpc_byte_buffer_destroy(send);
    size_t n = 0;
    if (first) {
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = &stream_md;
    }
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &recv;
    cr_assert_eq(grpc_call_start_batch(c, ops, n, &tag, NULL), GRPC_CALL_OK);
    wait_tag(&tag);
    if (!recv)
        return 0;
    text_of(recv, dst, cap);
    grpc_byte_buffer_destroy(recv);
    return 1;
}

/* Half-close (unless ended) and read the status; details into dst. */
static grpc_status_code sclose(grpc_call *c, int half_close, char *dst, size_t cap)
{
    grpc_metadata_array trail;
    grpc_metadata_array_init(&trail);
    grpc_status_code st;
    grpc_slice details;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (half_close)
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &trail;
    ops[n].data.recv_status_on_client.status = &st;
    ops[n++].data.recv_status_on_client.status_details = &details;
    char tag;
    cr_assert_eq(grpc_call_start_batch(c, ops, n, &tag, NULL), GRPC_CALL_OK);
    wait_tag(&tag);
    snprintf(dst, cap, "%.*s", (int)GRPC_SLICE_LENGTH(details),
             (const char *)GRPC_SLICE_START_PTR(details));
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&trail);
    grpc_metadata_array_destroy(&stream_md);
    grpc_call_unref(c);
    return st;
}

/* Until cond holds, 3 s at most. */
#define WAIT_FOR(cond)                                                                             \
    for (int w_ = 0; w_ < 300 && !(cond); w_++)                                                    \
    usleep(10000)

/* ---------------------------------------------------------------------- */

Test(grpc_transport, a_unary_call_runs_on_the_pool_and_its_tail_goes_without_a_copy, .timeout = 30,
     .init = cr_redirect_stderr)
{
    struct grpc_options o = options();
    o.log_requests = 1;
    serve(&o);
    struct ucall u;
    unary(&u, "/t.S/Echo", "hello, world", NULL);
    expect_reply(&u, GRPC_STATUS_OK, "hello, world");
    WAIT_FOR(atomic_load(&tails_freed) == 1);
    cr_expect_eq(atomic_load(&tails_freed), 1, "free_tails ran %d times", atomic_load(&tails_freed));
    unary(&u, "/t.S/Echo", "id", NULL);
    cr_expect_str_eq(u.text, "req-7", "the x-request-id metadata is the request id");
    WAIT_FOR(atomic_load(&records) == 2);
    cr_expect_eq(atomic_load(&records), 2);
    cr_expect_eq(atomic_load(&last_record_code), GRPC_CODE_OK);
    unserve();
    fflush(stderr);
    char line[256] = "";
    cr_assert_not_null(fgets(line, sizeof line, cr_get_redirected_stderr()));
    double ms = -1;
    char id[64] = "";
    cr_expect_eq(sscanf(line, "GRPC /t.S/Echo OK 12 %lfms id=%63s", &ms, id), 2, "%s", line);
    cr_expect_str_eq(id, "req-7", "%s", line);
}

Test(grpc_transport, a_path_no_row_names_is_unimplemented, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    struct ucall u;
    unary(&u, "/t.S/Nope", "x", NULL);
    expect_reply(&u, GRPC_STATUS_UNIMPLEMENTED, NULL);
    cr_expect(strstr(u.text, "/t.S/Nope"), "%s", u.text);
    unserve();
}

Test(grpc_transport, an_admin_row_needs_the_token, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    struct ucall u;
    unary(&u, "/t.S/Admin", "x", NULL);
    expect_reply(&u, GRPC_STATUS_UNAUTHENTICATED, NULL);
    unary(&u, "/t.S/Admin", "x", "Bearer wrong");
    expect_reply(&u, GRPC_STATUS_UNAUTHENTICATED, NULL);
    unary(&u, "/t.S/Admin", "x", "Bearer s3cret");
    expect_reply(&u, GRPC_STATUS_OK, "admin ok");
    unserve();
    o.admin_token = "";
    serve(&o);
    unary(&u, "/t.S/Admin", "x", "Bearer s3cret");
    expect_reply(&u, GRPC_STATUS_PERMISSION_DENIED, "admin is off: set admin_token");
    unserve();
}

Test(grpc_transport, a_message_over_the_limit_is_refused_and_the_server_goes_on, .timeout = 30)
{
    struct grpc_options o = options();
    o.max_message_bytes = 1024;
    serve(&o);
    char *big = malloc(4096);
    memset(big, 'x', 4096);
    struct ucall u;
    ustart(&u, "/t.S/Echo", big, 4096, NULL, 0);
    ufinish(&u);
    free(big);
    expect_reply(&u, GRPC_STATUS_RESOURCE_EXHAUSTED, NULL);
    unary(&u, "/t.S/Echo", "still here", NULL);
    expect_reply(&u, GRPC_STATUS_OK, "still here");
    unserve();
}

Test(grpc_transport, a_stream_answers_in_order_and_goes_on_past_a_failed_request, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    char got[128];
    grpc_call *c = sopen("/t.S/Stream");
    const char *send[] = {"a", "b", "c"}, *want[] = {"r-a", "error: b", "r-c"};
    for (int i = 0; i < 3; i++) {
        cr_assert(sstep(c, send[i], got, sizeof got, i == 0), "message %d", i);
        cr_expect_str_eq(got, want[i]);
    }
    cr_expect_eq(sclose(c, 1, got, sizeof got), GRPC_STATUS_OK, "%s", got);
    WAIT_FOR(atomic_load(&records) == 3);
    cr_expect_eq(atomic_load(&records), 3, "one record per message");

    c = sopen("/t.S/Stream"); /* an answer other than OK ends it with its status */
    cr_assert(sstep(c, "a", got, sizeof got, 1));
    cr_expect_not(sstep(c, "stop", got, sizeof got, 0));
    cr_expect_eq(sclose(c, 0, got, sizeof got), GRPC_STATUS_INVALID_ARGUMENT, "%s", got);
    cr_expect_str_eq(got, "stopped");
    unserve();
}

Test(grpc_transport, a_call_past_its_deadline_or_given_up_is_cancelled_for_its_handler,
     .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    struct ucall u;
    ustart(&u, "/t.S/Echo", "slow", 4, NULL, 300);
    ufinish(&u);
    expect_reply(&u, GRPC_STATUS_DEADLINE_EXCEEDED, NULL);
    WAIT_FOR(atomic_load(&saw_cancel));
    cr_expect(atomic_load(&saw_cancel), "the handler did not see cancelled turn");
    /* the same when the client gives up; the server serves on */
    atomic_store(&saw_cancel, 0);
    ustart(&u, "/t.S/Echo", "slow", 4, NULL, 0);
    usleep(150000);
    grpc_call_cancel(u.call, NULL);
    ufinish(&u);
    expect_reply(&u, GRPC_STATUS_CANCELLED, NULL);
    WAIT_FOR(atomic_load(&saw_cancel));
    cr_expect(atomic_load(&saw_cancel), "the handler did not see the client's cancel");
    unary(&u, "/t.S/Echo", "on", NULL);
    expect_reply(&u, GRPC_STATUS_OK, "on");
    unserve();
}

Test(grpc_transport, calls_over_max_calls_are_refused_at_once, .timeout = 30)
{
    struct grpc_options o = options();
    o.max_calls = 1;
    serve(&o);
    struct ucall slow, u;
    ustart(&slow, "/t.S/Echo", "wait", 4, NULL, 0);
    usleep(150000);
    unary(&u, "/t.S/Echo", "x", NULL);
    expect_reply(&u, GRPC_STATUS_RESOURCE_EXHAUSTED, NULL);
    ufinish(&slow);
    expect_reply(&slow, GRPC_STATUS_OK, "waited");
    unserve();
}

Test(grpc_transport, the_drain_lets_a_call_in_flight_finish_and_refuses_new_ones, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    struct ucall slow, u;
    ustart(&slow, "/t.S/Echo", "wait", 4, NULL, 0);
    usleep(150000);
    grpc_drain_begin(srv);
    usleep(200000); /* (a call crossing the GOAWAY gets the core's CANCELLED) */
    unary(&u, "/t.S/Echo", "x", NULL);
    expect_reply(&u, GRPC_STATUS_UNAVAILABLE, NULL);
    cr_expect_eq(grpc_drain(srv, 5), 0, "a call was cut");
    ufinish(&slow);
    expect_reply(&slow, GRPC_STATUS_OK, "waited");
    unserve();
}

Test(grpc_transport, the_drain_cuts_a_call_past_its_timeout, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    struct ucall slow;
    ustart(&slow, "/t.S/Echo", "slow", 4, NULL, 0);
    usleep(150000);
    cr_expect_eq(grpc_drain(srv, 0), 1, "the slow call was not cut");
    cr_expect(atomic_load(&saw_cancel), "the handler did not see cancelled turn");
    ufinish(&slow);
    expect_reply(&slow, GRPC_STATUS_UNAVAILABLE, NULL); /* (the core's status) */
    unserve();
}

Test(grpc_transport, a_port_in_use_and_an_unreadable_pem_are_errors, .timeout = 30)
{
    struct grpc_options o = options();
    serve(&o);
    char err[256];
    int setting = 1;
    struct grpc_options again = options();
    again.port = grpc_port(srv);
    cr_expect_null(grpc_start(&again, &table, pool, &setting, err, sizeof err));
    char want[64];
    snprintf(want, sizeof want, "could not listen on 127.0.0.1:%d", again.port);
    cr_expect_str_eq(err, want);
    cr_expect_eq(setting, 0);
    again.port = 0;
    again.tls_cert_file = "/nonexistent/cert.pem", again.tls_key_file = "/nonexistent/key.pem";
    cr_expect_null(grpc_start(&again, &table, pool, &setting, err, sizeof err));
    cr_expect_eq(setting, 1);
    cr_expect(strstr(err, "tls_cert_file: cannot read /nonexistent/cert.pem"), "%s", err);
    unserve();
}

Test(grpc_transport, tls_from_the_pem_pair, .timeout = 30)
{
    char dir[] = "/tmp/attn-grpc-tls-XXXXXX", cert[64], key[64], cmd[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cert, sizeof cert, "%s/cert.pem", dir);
    snprintf(key, sizeof key, "%s/key.pem", dir);
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 "
             "-keyout %s -out %s 2>/dev/null", key, cert);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    FILE *f = fopen(cert, "r");
    static char pem[8192];
    const size_t n = fread(pem, 1, sizeof pem - 1, f);
    fclose(f);
    pem[n] = '\0';
    trusted_pem = pem;
    struct grpc_options o = options();
    o.tls_cert_file = cert, o.tls_key_file = key;
    serve(&o);
    struct ucall u;
    unary(&u, "/t.S/Echo", "over tls", NULL);
    expect_reply(&u, GRPC_STATUS_OK, "over tls");
    unserve();
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
}
