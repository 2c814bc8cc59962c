/* test_sequence_layers.c -- the store's layers and batches
 * (api/sequence_store.h): a cache per layer begun at its first step, a
 * start that joins or restarts, a failed first step that leaves no cache,
 * the bytes of every layer, a batch's budget judged whole, ends all or
 * none. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/sequence_store.h"

static struct seq_fixed fix4(void)
{
    struct seq_fixed f;
    memset(&f, 0, sizeof f);
    strcpy(f.model, "m");
    f.v[SEQ_FIX_H] = f.v[SEQ_FIX_HKV] = 1, f.v[SEQ_FIX_HEAD_DIM] = 4;
    f.v[SEQ_FIX_E] = f.v[SEQ_FIX_KDIM] = f.v[SEQ_FIX_VDIM] = 4;
    f.dtype = ATT_KV_F32;
    return f;
}

static void limits(int n, long long bytes)
{
    const struct seq_limits l = {n, 3600, bytes};
    seq_init(&l);
}

/* A step of S rows on layer of id (start or not), applied: 0, or the
 * error's code. */
static int step(const char *id, int start, int layer, int S)
{
    const struct seq_fixed f = fix4();
    struct seq_step st;
    struct failure e;
    if (seq_open(&st, id, start, layer, &f, &e))
        return e.code;
    float x[4 * 8], out[4 * 8];
    for (int i = 0; i < 4 * 8; i++)
        x[i] = 0.25f * (float)(i % 7);
    struct att_params p;
    att_params_init(&p);
    p.N = 1, p.L = S, p.S = S, p.E = p.kdim = p.vdim = 4, p.H = 1;
    p.query = p.key = p.value = x;
    p.mask_kind = ATT_MASK_CAUSAL_LOWER_RIGHT;
    st.tokens = att_kv_len(st.kv) + S;
    int which;
    if (seq_reserve(&(struct seq_step *){&st}, 1, &which, &e)) {
        seq_close(&st, 0, 0);
        return e.code;
    }
    struct att_error ae;
    const int rc = att_step(out, NULL, &p, st.kv, &ae);
    seq_close(&st, rc == ATT_OK, 0);
    return rc == ATT_OK ? 0 : -1;
}

/* The length of id's layer (without changing it), or -1: no sequence, -2:
 * no cache on that layer. */
static long long length(const char *id, int layer)
{
    const struct seq_fixed f = fix4();
    struct seq_step st;
    struct failure e;
    if (seq_open(&st, id, 0, layer, &f, &e))
        return -1;
    const long long n = st.fresh ? -2 : att_kv_len(st.kv);
    seq_close(&st, 0, 0); /* a failed first step: the layer stays without a cache */
    return n;
}

Test(sequence_layers, a_cache_per_layer)
{
    limits(8, 1 << 30);
    cr_assert_eq(step("a", 1, 0, 3), 0);
    cr_assert_eq(length("a", 0), 3);
    cr_assert_eq(length("a", 5), -2, "a layer's cache begins at its first step");
    cr_assert_eq(length("a", 5), -2, "a failed first step leaves no cache");
    cr_assert_eq(step("a", 0, 5, 2), 0);
    cr_assert_eq(length("a", 5), 2);
    cr_assert_eq(length("a", 0), 3);
    /* a start on a layer without a cache joins: the others are kept */
    cr_assert_eq(step("a", 1, 2, 1), 0);
    cr_assert_eq(length("a", 0), 3);
    cr_assert_eq(length("a", 2), 1);
    /* a start on a layer with a cache restarts every layer */
    cr_assert_eq(step("a", 1, 0, 1), 0);
    cr_assert_eq(length("a", 0), 1);
    cr_assert_eq(length("a", 5), -2);
    cr_assert_eq(length("a", 2), -2);
    seq_shutdown();
}

Test(sequence_layers, bytes_and_end_count_every_layer)
{
    limits(8, 1 << 30);
    cr_assert_eq(step("a", 1, 0, 1), 0);
    struct seq_stats s1, s2;
    seq_stats(&s1);
    cr_assert_eq(step("a", 0, 7, 1), 0);
    seq_stats(&s2);
    cr_assert_eq(s2.active, 1);
    cr_assert_eq(s2.bytes, 2 * s1.bytes, "layer 7's block counts: %lld, %lld", s1.bytes,
                 s2.bytes);
    const char *ids[] = {"a"};
    int which;
    cr_assert_eq(seq_end(ids, 1, &which), 0);
    seq_stats(&s2);
    cr_assert_eq(s2.active, 0);
    cr_assert_eq(s2.bytes, 0, "every layer freed");
    cr_assert_eq(length("a", 7), -1);
    seq_shutdown();
}

Test(sequence_layers, eviction_takes_every_layer)
{
    limits(1, 1 << 30);
    cr_assert_eq(step("a", 1, 0, 1), 0);
    cr_assert_eq(step("a", 0, 3, 1), 0);
    cr_assert_eq(step("b", 1, 0, 1), 0); /* past max_sequences: a goes */
    struct seq_stats s;
    seq_stats(&s);
    cr_assert_eq(s.active, 1);
    cr_assert_eq(s.evictions, 1);
    cr_assert_eq(length("a", 3), -1);
    cr_assert_eq(length("b", 0), 1);
    seq_shutdown();
}

Test(sequence_layers, ends_all_or_none)
{
    limits(8, 1 << 30);
    cr_assert_eq(step("a", 1, 0, 1), 0);
    cr_assert_eq(step("b", 1, 0, 1), 0);
    const char *ids[] = {"a", "zz", "b"};
    int which = -1;
    cr_assert_eq(seq_end(ids, 3, &which), -1);
    cr_assert_eq(which, 1);
    cr_assert_eq(length("a", 0), 1, "nothing ended");
    cr_assert_eq(seq_end((const char *[]){"a", "b"}, 2, &which), 0);
    cr_assert_eq(length("b", 0), -1);
    seq_shutdown();
}

/* A batch's budget is judged whole: two steps that fit alone but not
 * together are refused (503) and evict nobody; one that can never fit is
 * 413 naming its step. */
Test(sequence_layers, batch_budget_whole)
{
    const struct seq_fixed f = fix4();
    limits(8, 1 << 30);
    cr_assert_eq(step("idle", 1, 0, 1), 0);
    struct seq_stats s;
    seq_stats(&s);
    const long long block = s.bytes; /* one block of one layer */
    limits(8, 3 * block);
    cr_assert_eq(step("idle", 1, 0, 1), 0);
    struct seq_step a, b;
    struct failure e;
    cr_assert_eq(seq_open(&a, "a", 1, 0, &f, &e), 0);
    cr_assert_eq(seq_open(&b, "b", 1, 0, &f, &e), 0);
    a.tokens = 1, b.tokens = ATT_KV_BLOCK + 1; /* 1 + 2 blocks, with idle's: 4 > 3 */
    struct seq_step *both[] = {&a, &b};
    int which = 7;
    cr_assert_eq(seq_reserve(both, 2, &which, &e), 0, "%s", e.msg);
    seq_close(&a, 0, 0), seq_close(&b, 0, 0);
    seq_stats(&s);
    cr_assert_eq(s.evictions, 1, "idle made room for the batch");
    cr_assert_eq(step("idle", 1, 0, 1), 0);
    cr_assert_eq(seq_open(&a, "a", 1, 0, &f, &e), 0);
    cr_assert_eq(seq_open(&b, "b", 1, 0, &f, &e), 0);
    a.tokens = 1, b.tokens = 3 * ATT_KV_BLOCK + 1; /* 4 blocks alone */
    cr_assert_eq(seq_reserve(both, 2, &which, &e), -1);
    cr_assert_eq(e.code, ERR_PAYLOAD_TOO_LARGE);
    cr_assert_eq(which, 1);
    seq_close(&a, 0, 0), seq_close(&b, 0, 0);
    seq_stats(&s);
    cr_assert_eq(s.evictions, 1, "nobody evicted for a batch that cannot fit");
    cr_assert_eq(length("idle", 0), 1);
    seq_shutdown();
}
