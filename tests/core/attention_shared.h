/* attention_shared.h -- what the test_attention*.c files share: random
 * cases of parameters and inputs, the tolerances. */
#ifndef TESTS_ATTENTION_SHARED_H
#define TESTS_ATTENTION_SHARED_H

#include <stdint.h>

#include "core/attention.h"

/* Tolerances: OUT_ATOL, OUT_RTOL, W_ATOL (tests/support/check.h); against
 * PyTorch, or 4× PyTorch float32's own error if larger. */
#include "tests/support/check.h"

enum proj { PROJ_PACKED, PROJ_SEPARATE, PROJ_ABSENT };

enum mask { M_NONE, M_CAUSAL, M_BOOL2, M_BOOL3, M_FLOAT2, M_FLOAT3 };

struct rcase {
    int N, L, S, E, kdim, vdim, H;
    int proj;        /* enum proj */
    int bias;        /* biases present */
    int mask;        /* enum mask */
    int padding;     /* key_padding_mask present */
    int full_rows;   /* force fully blocked rows */
    int wmode;       /* enum att_weights_mode */
    int scale;       /* custom scale */
    int pe;          /* positional encoding */
    int self;        /* key and value are the query itself (needs L == S) */
};

/* Random inputs for a case, all in one struct so one free releases them. */
struct rinputs {
    float *q, *k, *v, *w_in, *wq, *wk, *wv, *b_in, *wo, *bo, *fmask;
    uint8_t *bmask, *pad;
};

void attt_rinputs_free(struct rinputs *in);

/* Fill p and in with random data for case c, seeded by seed. */
void attt_make_case(struct att_params *p, struct rinputs *in, const struct rcase *c,
               unsigned long long seed);

#endif
