/* test_sequence_store.c -- the sequences' store (api/sequence_store.h): found by id,
 * started afresh, ended, evicted least recently used first (never a busy
 * one), the byte budget, a model's sequences dropped, one step at a time. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "api/sequence_store.h"

static void limits(int max_sequences, double idle, long long bytes)
{
    const struct seq_limits l = {max_sequences, idle, bytes};
    seq_init(&l);
}

static struct seq_fixed fixed(const char *model)
{
    struct seq_fixed f;
    memset(&f, 0, sizeof f);
    strcpy(f.model, model);
    f.v[SEQ_FIX_H] = f.v[SEQ_FIX_HKV] = 1, f.v[SEQ_FIX_HEAD_DIM] = 4;
    f.v[SEQ_FIX_E] = f.v[SEQ_FIX_KDIM] = f.v[SEQ_FIX_VDIM] = 4;
    f.dtype = ATT_KV_F32;
    return f;
}

/* One step's budget (seq_reserve for one), and one id ended. */
static int reserve1(struct seq_step *st, long long tokens, struct failure *e)
{
    int which;
    st->tokens = tokens;
    return seq_reserve(&st, 1, &which, e);
}

static int end1(const char *id)
{
    int which;
    return seq_end(&id, 1, &which);
}

/* Open id (start or not) and close it at once: 0, or the error code. */
static int touch(const char *id, int start, const char *model)
{
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed(model);
    if (seq_open(&st, id, start, 0, &f, &e))
        return e.code;
    if (reserve1(&st, 0, &e)) { /* a new one's place */
        seq_close(&st, 0, 0);
        return e.code;
    }
    seq_close(&st, 1, 0);
    return 0;
}

Test(sequence_store, a_step_needs_a_started_sequence)
{
    limits(8, 600, 1LL << 30);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("attention");
    cr_assert_eq(seq_open(&st, "x", 0, 0, &f, &e), -1);
    cr_assert_eq(e.code, ERR_SEQUENCE_NOT_FOUND);
    cr_assert(strstr(e.msg, "'x'") && strstr(e.msg, "start it again"), "%s", e.msg);
    cr_assert_eq(touch("x", 1, "attention"), 0);
    cr_assert_eq(touch("x", 0, "attention"), 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.active, 1);
    cr_assert_eq(end1("x"), 0);
    cr_assert_eq(end1("x"), -1);
    cr_assert_eq(touch("x", 0, "attention"), ERR_SEQUENCE_NOT_FOUND);
    seq_stats(&s);
    cr_assert_eq(s.active, 0);
    cr_assert_eq(s.bytes, 0);
}

Test(sequence_store, the_least_recently_used_idle_sequence_goes_first)
{
    limits(2, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    cr_assert_eq(touch("b", 1, "m"), 0);
    cr_assert_eq(touch("a", 0, "m"), 0); /* b is the oldest now */
    cr_assert_eq(touch("c", 1, "m"), 0);
    cr_assert_eq(touch("b", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
    cr_assert_eq(touch("a", 0, "m"), 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.evictions, 1);
    cr_assert_eq(s.active, 2);
    /* a busy sequence is never evicted: with both busy, a third is refused */
    struct seq_step sa, sc;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&sa, "a", 0, 0, &f, &e), 0);
    cr_assert_eq(seq_open(&sc, "c", 0, 0, &f, &e), 0);
    cr_assert_eq(touch("d", 1, "m"), ERR_OVERLOADED);
    seq_close(&sa, 1, 0);
    seq_close(&sc, 1, 0);
    cr_assert_eq(touch("d", 1, "m"), 0);
}

/* Append one token to st's cache (E = 4, one head). */
static void one_token(struct seq_step *st)
{
    static const float x[4] = {1, 2, 3, 4};
    float out[4];
    struct att_params p;
    att_params_init(&p);
    p.N = p.L = p.S = 1, p.E = p.kdim = p.vdim = 4, p.H = 1;
    p.query = p.key = p.value = x;
    struct att_error ae;
    cr_assert_eq(att_step(out, NULL, &p, st->kv, &ae), ATT_OK, "%s", ae.msg);
}

Test(sequence_store, the_byte_budget_evicts_or_refuses)
{
    struct seq_fixed f = fixed("m");
    struct att_kv *kv = att_kv_new(1, 4, ATT_KV_F32);
    const size_t block = att_kv_bytes_at(kv, 1); /* one block */
    att_kv_free(kv);
    limits(8, 600, (long long)block);
    struct seq_step a, b;
    struct failure e;
    cr_assert_eq(seq_open(&a, "a", 1, 0, &f, &e), 0);
    cr_assert_eq(reserve1(&a, 1, &e), 0, "%s", e.msg);
    one_token(&a); /* a's cache holds a block */
    cr_assert_eq(seq_open(&b, "b", 1, 0, &f, &e), 0);
    /* a holds the budget and is busy: b is refused */
    cr_assert_eq(reserve1(&b, 1, &e), -1);
    cr_assert_eq(e.code, ERR_OVERLOADED);
    cr_assert(strstr(e.msg, "max_sequence_bytes"), "%s", e.msg);
    seq_close(&a, 1, 0);
    /* a idle now: evicted for b */
    cr_assert_eq(reserve1(&b, 1, &e), 0, "%s", e.msg);
    seq_close(&b, 1, 0);
    cr_assert_eq(touch("a", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_leq(s.bytes, (long long)block);
}

Test(sequence_store, a_model_takes_its_sequences_with_it)
{
    limits(8, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m1"), 0);
    cr_assert_eq(touch("b", 1, "m2"), 0);
    seq_drop_model("m1");
    cr_assert_eq(touch("a", 0, "m1"), ERR_SEQUENCE_NOT_FOUND);
    cr_assert_eq(touch("b", 0, "m2"), 0);
}

Test(sequence_store, an_idle_sequence_times_out)
{
    limits(8, 0.2, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    usleep(500 * 1000);
    cr_assert_eq(touch("a", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
}

/* A second step of the same sequence waits for the first to close. */
static int second_done;
static void *second_step(void *arg)
{
    (void)arg;
    second_done = touch("a", 0, "m") == 0 ? 1 : -1;
    return NULL;
}

Test(sequence_store, steps_of_one_sequence_take_turns)
{
    limits(8, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0);
    second_done = 0;
    pthread_t t;
    pthread_create(&t, NULL, second_step, NULL);
    usleep(100 * 1000); /* (not a timing check: the second must still be waiting) */
    cr_assert_eq(second_done, 0, "a second step ran while the first held the sequence");
    seq_close(&st, 1, 0);
    pthread_join(t, NULL);
    cr_assert_eq(second_done, 1);
    /* ended while a step waits: that step finds no sequence */
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0);
    second_done = 0;
    pthread_create(&t, NULL, second_step, NULL);
    usleep(100 * 1000);
    seq_close(&st, 1, 1);
    pthread_join(t, NULL);
    cr_assert_eq(second_done, -1);
}

/* The built-in model's weights a sequence keeps count in the budget. */
Test(sequence_store, kept_weights_count_in_the_budget)
{
    static const float w[64] = {0};
    struct att_params p;
    att_params_init(&p);
    p.w[ATT_W_OUT] = w, p.w_len[ATT_W_OUT] = 64;
    limits(8, 600, 200);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("attention");
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f, &e), 0);
    cr_assert_eq(seq_weights(&st, &p, &e), 0, "%s", e.msg);
    cr_assert_eq(reserve1(&st, 0, &e), -1); /* 256 bytes alone: never fits 200 */
    cr_assert_eq(e.code, ERR_PAYLOAD_TOO_LARGE, "%s", e.msg);
    seq_close(&st, 0, 1);
    limits(8, 600, 256);
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f, &e), 0);
    cr_assert_eq(seq_weights(&st, &p, &e), 0, "%s", e.msg);
    cr_assert_eq(reserve1(&st, 0, &e), 0, "%s", e.msg);
    seq_close(&st, 1, 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.bytes, 256);
    /* a later step has them back, and may not change them */
    struct att_params later;
    att_params_init(&later);
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0);
    cr_assert_eq(seq_weights(&st, &later, &e), 0);
    cr_assert_eq(later.w_len[ATT_W_OUT], 64);
    seq_close(&st, 1, 0);
    static const float other[64] = {1};
    later.w[ATT_W_OUT] = other;
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0);
    cr_assert_eq(seq_weights(&st, &later, &e), -1);
    cr_assert_eq(e.code, ERR_INVALID_PARAMETER);
    seq_close(&st, 1, 1);
    seq_stats(&s);
    cr_assert_eq(s.bytes, 0);
}

/* A start refused after seq_open (its body checked later) evicts nobody:
 * the place is made only by seq_reserve. */
Test(sequence_store, a_refused_start_evicts_nobody)
{
    limits(2, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    cr_assert_eq(touch("b", 1, "m"), 0);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&st, "c", 1, 0, &f, &e), 0, "%s", e.msg);
    seq_close(&st, 0, 0); /* refused */
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.evictions, 0);
    cr_assert_eq(s.active, 2);
    cr_assert_eq(touch("a", 0, "m"), 0);
    cr_assert_eq(touch("b", 0, "m"), 0);
    /* one that reserves takes the least recently used place (a) */
    cr_assert_eq(seq_open(&st, "c", 1, 0, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(reserve1(&st, 1, &e), 0, "%s", e.msg);
    seq_close(&st, 1, 0);
    cr_assert_eq(touch("a", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
    cr_assert_eq(touch("b", 0, "m"), 0);
}

/* Busy sequences hold the rest of the budget: a step that would fit only
 * without them is refused (503) and evicts nobody idle. */
Test(sequence_store, a_step_that_cannot_fit_now_evicts_nobody)
{
    struct seq_fixed f = fixed("m");
    struct att_kv *kv = att_kv_new(1, 4, ATT_KV_F32);
    const size_t block = att_kv_bytes_at(kv, 1);
    att_kv_free(kv);
    limits(8, 600, 2 * (long long)block);
    struct seq_step a, b, c;
    struct failure e;
    cr_assert_eq(seq_open(&a, "idle", 1, 0, &f, &e), 0);
    cr_assert_eq(reserve1(&a, 1, &e), 0, "%s", e.msg);
    one_token(&a);
    seq_close(&a, 1, 0);
    cr_assert_eq(seq_open(&b, "busy", 1, 0, &f, &e), 0);
    cr_assert_eq(reserve1(&b, 1, &e), 0, "%s", e.msg);
    one_token(&b); /* busy holds a block, idle the other */
    cr_assert_eq(seq_open(&c, "new", 1, 0, &f, &e), 0);
    cr_assert_eq(reserve1(&c, 300, &e), -1); /* two blocks: only if busy went */
    cr_assert_eq(e.code, ERR_OVERLOADED, "%s", e.msg);
    cr_assert(strstr(e.msg, "nothing was evicted"), "%s", e.msg);
    seq_close(&c, 0, 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.evictions, 0);
    cr_assert_eq(touch("idle", 0, "m"), 0);
    /* one block fits by evicting the idle one */
    cr_assert_eq(seq_open(&c, "new", 1, 0, &f, &e), 0);
    cr_assert_eq(reserve1(&c, 1, &e), 0, "%s", e.msg);
    seq_close(&c, 1, 0);
    seq_close(&b, 1, 0);
    cr_assert_eq(touch("idle", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
    seq_stats(&s);
    cr_assert_eq(s.evictions, 1);
}

/* A start that waited behind a step whose sequence then ended starts it
 * afresh (not sequence_not_found). */
static int waiting_start;
static void *start_step(void *arg)
{
    (void)arg;
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    if (seq_open(&st, "a", 1, 0, &f, &e)) {
        waiting_start = -e.code;
        return NULL;
    }
    waiting_start = st.created ? 1 : 2;
    seq_close(&st, 1, 0);
    return NULL;
}

Test(sequence_store, a_start_waiting_its_turn_is_a_start)
{
    limits(8, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0);
    one_token(&st);
    waiting_start = 0;
    pthread_t t;
    pthread_create(&t, NULL, start_step, NULL);
    usleep(100 * 1000); /* (not a timing check: the start must still be waiting) */
    cr_assert_eq(waiting_start, 0);
    seq_close(&st, 1, 1); /* ends a */
    pthread_join(t, NULL);
    cr_assert_eq(waiting_start, 1, "the waiting start got %d", waiting_start);
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(att_kv_len(st.kv), 0); /* afresh */
    seq_close(&st, 1, 0);
}

/* The idle timer runs from the answer's end (seq_sent), and a refused
 * step does not restart it. */
Test(sequence_store, the_idle_timer_counts_answered_steps)
{
    limits(8, 0.5, 1LL << 30);
    struct seq_step st;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f, &e), 0);
    st.hold = 1;
    struct seq *held = seq_close(&st, 1, 0);
    cr_assert_not_null(held);
    usleep(700 * 1000); /* its answer takes longer to send than the timeout */
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.active, 1, "dropped while its answer was sent");
    seq_sent(held);
    cr_assert_eq(touch("a", 0, "m"), 0);
    /* refused steps 0.2 and 0.4 s later do not keep it alive past 0.5 s */
    for (int i = 0; i < 2; i++) {
        usleep(200 * 1000);
        cr_assert_eq(seq_open(&st, "a", 0, 0, &f, &e), 0, "%s", e.msg);
        seq_close(&st, 0, 0);
    }
    usleep(250 * 1000);
    cr_assert_eq(touch("a", 0, "m"), ERR_SEQUENCE_NOT_FOUND);
}

/* A restart replaces a live sequence only when its step succeeds. */
Test(sequence_store, a_failed_restart_keeps_the_live_sequence)
{
    limits(8, 600, 1LL << 30);
    struct seq_step st;
    struct failure e;
    struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f, &e), 0);
    cr_assert(st.created);
    one_token(&st);
    seq_close(&st, 1, 0);
    /* a restart (another head_dim) whose step fails: a as it was */
    f.v[SEQ_FIX_HEAD_DIM] = 2;
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f, &e), 0);
    cr_assert(!st.created && st.fixed->v[SEQ_FIX_HEAD_DIM] == 2 && att_kv_len(st.kv) == 0);
    seq_close(&st, 0, 0);
    const struct seq_fixed f4 = fixed("m");
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f4, &e), 0);
    cr_assert_eq(st.fixed->v[SEQ_FIX_HEAD_DIM], 4);
    cr_assert_eq(att_kv_len(st.kv), 1);
    seq_close(&st, 1, 0);
    /* one that succeeds: the fresh cache from then on */
    cr_assert_eq(seq_open(&st, "a", 1, 0, &f4, &e), 0);
    seq_close(&st, 1, 0);
    cr_assert_eq(seq_open(&st, "a", 0, 0, &f4, &e), 0);
    cr_assert_eq(att_kv_len(st.kv), 0);
    seq_close(&st, 1, 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.active, 1);
    cr_assert_eq(s.bytes, 0);
}

/* Two starts under way past max_sequences, one idle sequence: the first
 * to reserve takes its place, the second is refused (each makes room for
 * itself only). */
Test(sequence_store, starts_under_way_each_make_their_own_place)
{
    limits(1, 600, 1LL << 30);
    cr_assert_eq(touch("a", 1, "m"), 0);
    struct seq_step b, c;
    struct failure e;
    const struct seq_fixed f = fixed("m");
    cr_assert_eq(seq_open(&b, "b", 1, 0, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(seq_open(&c, "c", 1, 0, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(reserve1(&b, 1, &e), 0, "%s", e.msg);
    cr_assert_eq(reserve1(&c, 1, &e), -1);
    cr_assert_eq(e.code, ERR_OVERLOADED, "%s", e.msg);
    seq_close(&c, 0, 0);
    seq_close(&b, 1, 0);
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.active, 1);
    cr_assert_eq(s.evictions, 1);
    cr_assert_eq(touch("b", 0, "m"), 0);
}
