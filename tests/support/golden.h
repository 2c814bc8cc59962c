/* golden.h -- load a PyTorch golden case (tests/golden/NAME.json) for the core.
 *
 * A case file holds {"name", "request": <POST /attention body, tensors in
 * the flat {"shape", "data"} form>, "expected": {"output", "attention_weights"},
 * "expected_float32": the same from PyTorch in float32}; "expected" is
 * PyTorch float64's answer.
 * golden_load() maps the request onto a struct att_params the way the HTTP
 * API defines it (key defaults to query, value to key, unbatched = N 1), so
 * the core can be checked against PyTorch without the server. */
#ifndef TESTS_GOLDEN_H
#define TESTS_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "core/attention.h"

#define GOLDEN_MAX_BUFS 24

struct golden {
    char name[96];
    struct att_params p;        /* points into bufs */
    float *expected_out;        /* (N·L·E) */
    size_t expected_out_len;
    float *expected_weights;    /* NULL when need_weights is false */
    size_t expected_weights_len;
    float *expected_out32;      /* PyTorch float32's answers ("expected_float32"); */
    float *expected_weights32;  /* each the float64 one when the file has none */
    void *bufs[GOLDEN_MAX_BUFS]; /* owned */
    int nbufs;
};

/* Load path into g (caller storage). Returns 0, or -1 with a message in
 * errbuf (size 256). Free with golden_deinit() either way. */
int golden_load(struct golden *g, const char *path, char *errbuf);
void golden_deinit(struct golden *g);

/* Run forward (att_forward, att_forward_ref, ...) on g's request and compare
 * with PyTorch's answers by check_tensor_torch() (tests/support/check.h): outputs
 * within out_atol + out_rtol·|x|, weights within w_atol. Returns 1 when all
 * agree; 0 with the reason on stderr (a refusal by att_check() or forward,
 * sizes that differ, values out of tolerance). label names the path. */
typedef int (*golden_forward_fn)(float *out, float *weights, const struct att_params *p,
                                 struct att_error *err);
int golden_check(const struct golden *g, golden_forward_fn forward, const char *label,
                 double out_atol, double out_rtol, double w_atol);

/* List tests/golden/NAME.json (or $GOLDEN_DIR): fills up to max paths
 * (caller frees each) and returns how many were found. */
int golden_list(char **paths, int max);
/* The same for tests/golden_variants (or $GOLDEN_VARIANTS_DIR). */
int golden_list_variants(char **paths, int max);
/* How many cases each of the two folders holds (testdata_count). */
int golden_count(void);
int golden_count_variants(void);

/* Set the element count of each of p's weight arrays that is not NULL to
 * what att_weight_shapes() gives: for tests whose arrays were built to
 * those shapes. A test of the core's refusal sets the counts itself. */
void golden_weight_lens(struct att_params *p);

#endif
