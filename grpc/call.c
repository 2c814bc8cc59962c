/* call.c -- one call on gRPC's C core, from its request_call slot to its
 * last tag; see grpc_route.h for what a row asks.
 *
 *   NEW        the call has come: arm another slot, copy its path and
 *              metadata, start {RECV_CLOSE_ON_SERVER} (its end: the
 *              client's cancel, the deadline, a drop, the drain's cut set
 *              `cancelled`), refuse it at once (max_calls, no row, the
 *              admin token) or start {RECV_MESSAGE}.
 *   RECV       a message, read into one contiguous slice: its handler runs
 *              on the pool (GRPC_ROUTE_POOL) or here; the answer is one
 *              send batch, started by whichever thread ran it. NULL: the
 *              client half-closed (a stream's end: status OK).
 *   SEND       the answer is out: a stream reads its next message (one in
 *              flight at a time, so answers go in order and a client that
 *              never reads holds one).
 *   CLOSED     the call has ended.
 * The call is freed (counted, logged) when its last tag has come back and
 * no job holds it: `refs` counts both. The completion queue's thread and a
 * job never start batches on one call at once: while a job holds it, the
 * queue's thread starts none for it (a call's job is its only one).
 */
#include "grpc/call.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void finish(struct gcall *c);

static void unref(struct gcall *c)
{
    if (atomic_fetch_sub(&c->refs, 1) == 1)
        finish(c);
}

static void slot_free(struct gcall *c)
{
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c);
}

void call_arm(struct grpc_transport *s)
{
    struct gcall *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->s = s;
    c->t_new = (struct gtag){TAG_NEW, c};
    c->t_closed = (struct gtag){TAG_CLOSED, c};
    c->t_recv = (struct gtag){TAG_RECV, c};
    c->t_send = (struct gtag){TAG_SEND, c};
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    pthread_mutex_lock(&s->lock);
    grpc_call_error e = GRPC_CALL_ERROR;
    if (!atomic_load(&s->draining)) {
        atomic_fetch_add(&s->armed, 1);
        e = grpc_server_request_call(s->srv, &c->call, &c->details, &c->md, s->cq, s->cq,
                                     &c->t_new);
        if (e != GRPC_CALL_OK)
            atomic_fetch_sub(&s->armed, 1);
    }
    pthread_mutex_unlock(&s->lock);
    if (e != GRPC_CALL_OK)
        slot_free(c);
}

/* ---------------------------------------------------------------------- */
/* What a call carries                                                     */

static const char *meta_of(const struct grpc_route_request *rq, const char *key)
{
    const struct gcall *c = rq->transport;
    for (size_t i = 0; i < c->meta_len;) {
        const char *k = c->meta + i, *v = k + strlen(k) + 1;
        if (strcmp(k, key) == 0)
            return v;
        i = (size_t)(v - c->meta) + strlen(v) + 1;
    }
    return NULL;
}

/* The metadata as key\0value\0 pairs (a value cut at a NUL it holds). */
static void meta_copy(struct gcall *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->md.count; i++)
        n += GRPC_SLICE_LENGTH(c->md.metadata[i].key) + GRPC_SLICE_LENGTH(c->md.metadata[i].value) + 2;
    if (!n || !(c->meta = malloc(n)))
        return;
    char *p = c->meta;
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_slice *kv[2] = {&c->md.metadata[i].key, &c->md.metadata[i].value};
        for (int j = 0; j < 2; j++) {
            const size_t len = GRPC_SLICE_LENGTH(*kv[j]);
            memcpy(p, GRPC_SLICE_START_PTR(*kv[j]), len);
            p[len] = '\0';
            p += strlen(p) + 1;
        }
    }
    c->meta_len = (size_t)(p - c->meta);
}

/* The call's id: its x-request-id metadata, or made up (lib/access_log.h). */
static void request_id_make(struct gcall *c)
{
    request_id_of(c->request_id, meta_of(&c->view, "x-request-id"));
}

/* The deadline as grpc_route_now() seconds; 0: none. */
static double deadline_of(const grpc_call_details *d, double now)
{
    if (gpr_time_cmp(d->deadline, gpr_inf_future(d->deadline.clock_type)) == 0)
        return 0;
    const gpr_timespec m = gpr_convert_clock_type(d->deadline, GPR_CLOCK_MONOTONIC);
    const double left = gpr_timespec_to_micros(gpr_time_sub(m, gpr_now(GPR_CLOCK_MONOTONIC)));
    return now + left * 1e-6;
}

static int same_secret(const char *a, const char *b)
{
    const size_t n = strlen(a), m = strlen(b);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (m ? m : 1)]);
    return diff == 0;
}

/* Whether an admin row's token is there; else out is the refusal. */
static int token_ok(struct gcall *c)
{
    const char *want = c->s->opt.admin_token;
    if (!want || !want[0]) {
        const char *off = c->s->table->admin_off;
        grpc_route_fail(&c->resp, GRPC_CODE_PERMISSION_DENIED, "%s",
                        off ? off : "no admin_token is set");
        return 0;
    }
    const char *h = meta_of(&c->view, "authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
        grpc_route_fail(&c->resp, GRPC_CODE_UNAUTHENTICATED,
                        "this method needs the metadata authorization: Bearer <admin_token>");
        return 0;
    }
    for (h += 7; *h == ' ';)
        h++;
    if (!same_secret(h, want)) {
        grpc_route_fail(&c->resp, GRPC_CODE_UNAUTHENTICATED,
                        "the bearer token is not the admin_token");
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------------- */
/* The answer                                                              */

/* The tails of one answer: free_tails runs when the last slice goes. */
struct tails {
    atomic_int n;
    void (*fn)(void *cls);
    void *cls;
};

static void tail_done(void *p)
{
    struct tails *t = p;
    if (atomic_fetch_sub(&t->n, 1) == 1) {
        t->fn(t->cls);
        free(t);
    }
}

/* The answer message, body then tails, without a copy. */
static grpc_byte_buffer *message_of(struct grpc_route_response *r, size_t *bytes)
{
    grpc_slice sl[1 + GRPC_ROUTE_TAILS];
    size_t n = 0;
    *bytes = r->len;
    if (r->body && r->len)
        sl[n++] = grpc_slice_new(r->body, r->len, free);
    else
        free(r->body);
    r->body = NULL, r->len = 0;
    const int nt = r->ntail < 0 ? 0 : r->ntail > GRPC_ROUTE_TAILS ? GRPC_ROUTE_TAILS : r->ntail;
    struct tails *t = nt && r->free_tails ? malloc(sizeof *t) : NULL;
    if (t) {
        atomic_init(&t->n, nt);
        t->fn = r->free_tails, t->cls = r->tails_cls;
        r->free_tails = NULL;
    }
    for (int i = 0; i < nt; i++) {
        void *data = (void *)r->tail[i].data; /* (read only: sent as is) */
        sl[n++] = t ? grpc_slice_new_with_user_data(data, r->tail[i].len, tail_done, t)
                    : grpc_slice_from_copied_buffer(r->tail[i].data, r->tail[i].len);
        *bytes += r->tail[i].len;
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(sl, n);
    for (size_t i = 0; i < n; i++)
        grpc_slice_unref(sl[i]);
    return bb; /* (tails copied: free_tails runs in grpc_route_response_free) */
}

/* Start the send batch of c->resp: an error's status; else a message
 * (and status OK for a unary call), or for a stream's end status OK
 * alone. Takes over one of the caller's refs for its tag. */
static void answer(struct gcall *c, int end)
{
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    struct grpc_route_response *r = &c->resp;
    if (!c->initial_sent) {
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
        c->initial_sent = 1;
    }
    c->code = r->code;
    if (r->code == GRPC_CODE_OK && !end) {
        size_t bytes = 0;
        c->send_bb = message_of(r, &bytes);
        c->sent_bytes += bytes;
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->send_bb;
    }
    if (r->code != GRPC_CODE_OK || !c->stream || end) {
        ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[n].data.send_status_from_server.status = (grpc_status_code)r->code;
        if (r->message && r->code != GRPC_CODE_OK) {
            c->status_text = grpc_slice_from_copied_string(r->message);
            c->has_status_text = 1;
            ops[n].data.send_status_from_server.status_details = &c->status_text;
        }
        n++;
        c->status_sent = 1;
    }
    grpc_route_response_free(r);
    if (grpc_call_start_batch(c->call, ops, n, &c->t_send, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "attention-server: grpc: could not send the answer of %s\n", c->path);
        call_event(&c->t_send, 0);
    }
}

/* Give the request message back (and its share of max_inflight_bytes). */
static void msg_release(struct gcall *c)
{
    if (c->has_msg)
        grpc_slice_unref(c->msg);
    c->has_msg = 0;
    atomic_fetch_sub(&c->s->inflight_bytes, c->charged);
    c->charged = 0;
    c->view.msg = NULL, c->view.len = 0;
}

static void run_handler(struct gcall *c)
{
    struct grpc_transport *s = c->s;
    if (c->cancelled) { /* nobody to answer: not computed */
        grpc_route_fail(&c->resp, GRPC_CODE_CANCELLED, "the call ended before its handler ran");
    } else {
        c->view.state = (struct grpc_route_state){atomic_load(&s->draining),
                                                  atomic_load(&s->inflight_bytes),
                                                  atomic_load(&s->calls_open)};
        c->route->handler(&c->view, &c->resp);
    }
    msg_release(c);
}

/* A stream's next message runs on the completion-queue thread itself,
 * with no hand-off to a worker and back, when it is small, the stream's
 * last handler took less than JOB_INLINE_S, and no job of the transport
 * is running or waiting (a one-row sequence step: the round trip is
 * mostly the hand-offs). A slower handler sends the next ones to the
 * pool again. */
#define INLINE_BYTES 65536
#define JOB_INLINE_S 0.001

static int may_inline(const struct gcall *c)
{
    return c->stream && c->view.len <= INLINE_BYTES && c->job_s > 0 &&
           c->job_s < JOB_INLINE_S && atomic_load(&c->s->jobs) == 0;
}

/* The handler, timed (for may_inline). */
static void run_timed(struct gcall *c)
{
    const double t0 = grpc_route_now();
    run_handler(c);
    c->job_s = grpc_route_now() - t0;
}

static void run_job(void *arg)
{
    struct gcall *c = arg;
    run_timed(c);
    atomic_fetch_sub(&c->s->jobs, 1);
    answer(c, 0); /* (the job's ref becomes the send's) */
}

/* Start a batch of one op, with a ref for its tag t. */
static void start_one(struct gcall *c, const grpc_op *op, struct gtag *t)
{
    atomic_fetch_add(&c->refs, 1);
    if (grpc_call_start_batch(c->call, op, 1, t, NULL) != GRPC_CALL_OK)
        unref(c);
}

/* Start {RECV_MESSAGE}. */
static void recv_next(struct gcall *c)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv_bb;
    start_one(c, &op, &c->t_recv);
}

/* Refuse now (c->resp holds the error). */
static void refuse(struct gcall *c)
{
    c->to_record = 1;
    atomic_fetch_add(&c->refs, 1);
    answer(c, 0);
}

/* ---------------------------------------------------------------------- */
/* Completions                                                             */

static void on_new(struct gcall *c)
{
    struct grpc_transport *s = c->s;
    call_arm(s);
    const int open = atomic_fetch_add(&s->calls_open, 1) + 1;
    atomic_init(&c->refs, 1);
    const grpc_slice m = c->details.method;
    const size_t plen = GRPC_SLICE_LENGTH(m) < sizeof c->path ? GRPC_SLICE_LENGTH(m)
                                                              : sizeof c->path - 1;
    memcpy(c->path, GRPC_SLICE_START_PTR(m), plen);
    c->path[plen] = '\0';
    meta_copy(c);
    const double now = grpc_route_now();
    c->view = (struct grpc_route_request){.request_id = c->request_id, .t_first = now,
                                          .deadline = deadline_of(&c->details, now),
                                          .cancelled = &c->cancelled, .metadata = meta_of,
                                          .transport = c};
    request_id_make(c);
    for (size_t i = 0; i < s->table->count; i++)
        if (grpc_slice_str_cmp(m, s->table->rows[i].path) == 0)
            c->route = &s->table->rows[i];
    c->view.route = c->route;
    c->stream = c->route && (c->route->flags & GRPC_ROUTE_STREAM);

    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    start_one(c, &op, &c->t_closed);

    if (open > s->opt.max_calls) {
        grpc_route_fail(&c->resp, GRPC_CODE_RESOURCE_EXHAUSTED,
                        "%d calls and streams are open already; retry later", s->opt.max_calls);
        refuse(c);
    } else if (!c->route) {
        grpc_route_fail(&c->resp, GRPC_CODE_UNIMPLEMENTED, "no method %s here", c->path);
        refuse(c);
    } else if ((c->route->flags & GRPC_ROUTE_ADMIN) && !token_ok(c)) {
        refuse(c);
    } else {
        recv_next(c);
    }
    unref(c);
}

/* A message has come (or the client's end, or the call's). */
static void on_recv(struct gcall *c, int ok)
{
    struct grpc_transport *s = c->s;
    grpc_byte_buffer *bb = c->recv_bb;
    c->recv_bb = NULL;
    if (!ok) { /* the call has failed (a message over the limit: the core's status) */
        if (bb)
            grpc_byte_buffer_destroy(bb);
        unref(c);
        return;
    }
    if (!bb) { /* half-closed: a stream's end, or a unary call without its message */
        if (c->stream) {
            c->resp.code = GRPC_CODE_OK;
            atomic_fetch_add(&c->refs, 1);
            answer(c, 1);
        } else {
            grpc_route_fail(&c->resp, GRPC_CODE_INVALID_ARGUMENT,
                            "the call carried no request message");
            refuse(c);
        }
        unref(c);
        return;
    }
    const size_t len = grpc_byte_buffer_length(bb);
    c->charged = (long long)len;
    const long long held = atomic_fetch_add(&s->inflight_bytes, c->charged) + c->charged;
    grpc_byte_buffer_reader rd;
    if (held > s->opt.max_inflight_bytes) {
        grpc_route_fail(&c->resp, GRPC_CODE_RESOURCE_EXHAUSTED,
                        "the server holds max_inflight_bytes of request messages already; "
                        "retry later");
    } else if (!grpc_byte_buffer_reader_init(&rd, bb)) {
        grpc_route_fail(&c->resp, GRPC_CODE_INTERNAL, "the message could not be read");
    } else {
        c->msg = grpc_byte_buffer_reader_readall(&rd);
        c->has_msg = 1;
        grpc_byte_buffer_reader_destroy(&rd);
    }
    grpc_byte_buffer_destroy(bb);
    if (!c->has_msg) {
        msg_release(c);
        refuse(c);
        unref(c);
        return;
    }
    c->view.msg = GRPC_SLICE_START_PTR(c->msg);
    c->view.len = GRPC_SLICE_LENGTH(c->msg);
    c->view.t_msg = grpc_route_now();
    c->to_record = 1;
    atomic_fetch_add(&c->refs, 1); /* the job's, then its send's */
    if (!(c->route->flags & GRPC_ROUTE_POOL)) {
        run_handler(c);
        answer(c, 0);
    } else if (may_inline(c)) {
        run_timed(c);
        answer(c, 0);
    } else {
        atomic_fetch_add(&s->jobs, 1);
        const int rc = pool_submit(s->pool, run_job, c);
        if (rc != POOL_OK) {
            atomic_fetch_sub(&s->jobs, 1);
            msg_release(c);
            if (rc == POOL_EFULL)
                grpc_route_fail(&c->resp, GRPC_CODE_RESOURCE_EXHAUSTED,
                                "the server is busy; retry later");
            else
                grpc_route_fail(&c->resp, GRPC_CODE_UNAVAILABLE, "the server is shutting down");
            answer(c, 0);
        }
    }
    unref(c);
}

static void on_send(struct gcall *c, int ok)
{
    struct grpc_transport *s = c->s;
    if (c->send_bb)
        grpc_byte_buffer_destroy(c->send_bb);
    c->send_bb = NULL;
    if (c->has_status_text)
        grpc_slice_unref(c->status_text);
    c->has_status_text = 0;
    c->send_ok = ok;
    if (c->stream && c->to_record && s->table->record)
        s->table->record(c->route->metric, c->code, grpc_route_now() - c->view.t_msg);
    c->to_record = 0;
    if (ok && c->stream && !c->status_sent)
        recv_next(c);
    unref(c);
}

void call_event(struct gtag *t, int ok)
{
    struct gcall *c = t->call;
    switch (t->kind) {
    case TAG_NEW:
        atomic_fetch_sub(&c->s->armed, 1);
        if (ok)
            on_new(c);
        else /* the server is shutting down: no call came */
            slot_free(c);
        break;
    case TAG_RECV:
        on_recv(c, ok);
        break;
    case TAG_SEND:
        on_send(c, ok);
        break;
    case TAG_CLOSED:
    default:
        unref(c);
        break;
    }
}

/* ---------------------------------------------------------------------- */

/* The last tag is back: count, log and free the call. */
static void finish(struct gcall *c)
{
    struct grpc_transport *s = c->s;
    const double secs = grpc_route_now() - c->view.t_first;
    int code = c->code;
    /* ended early: the client's status, as far as the server can tell (a
     * message over the limit is the core's RESOURCE_EXHAUSTED, counted as
     * CANCELLED here) */
    if (!c->status_sent || !c->send_ok || c->cancelled)
        code = c->view.deadline > 0 && grpc_route_now() >= c->view.deadline ? GRPC_CODE_DEADLINE_EXCEEDED
               : atomic_load(&s->cut)                                        ? GRPC_CODE_UNAVAILABLE
                                                                             : GRPC_CODE_CANCELLED;
    if (!c->stream && s->table->record)
        s->table->record(c->route ? c->route->metric : NULL, code, secs);
    if (s->opt.log_requests) {
        char path[4 * sizeof c->path];
        fprintf(stderr, "GRPC %s %s %zu %.1fms id=%s\n", log_escape(path, sizeof path, c->path),
                grpc_route_code_name(code), c->sent_bytes, secs * 1e3, c->request_id);
    }
    msg_release(c);
    grpc_route_response_free(&c->resp);
    free(c->meta);
    if (c->call)
        grpc_call_unref(c->call);
    slot_free(c);
    atomic_fetch_sub(&s->calls_open, 1);
}
