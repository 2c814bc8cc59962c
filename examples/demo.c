/* demo.c -- a four-token self-attention through the core, printed.
 * Shows the call sequence a caller of core/attention.h follows. */
#include <stdio.h>

#include "core/attention.h"

int main(void)
{
    enum { L = 4, E = 4, H = 2 };
    float x[L * E] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 1, 0, 0};
    float out[L * E], w[H * L * L];
    struct att_params p;
    struct att_error err;

    att_init(1);
    att_params_init(&p);
    p.N = 1, p.L = L, p.S = L, p.E = E, p.kdim = E, p.vdim = E, p.H = H;
    p.query = p.key = p.value = x;
    p.mask_kind = ATT_MASK_CAUSAL;
    p.weights_mode = ATT_WEIGHTS_PER_HEAD;
    if (att_forward(out, w, &p, &err) != ATT_OK) {
        fprintf(stderr, "attention: %s: %s\n", att_status_str(err.code), err.msg);
        return 1;
    }
    for (int h = 0; h < H; h++) {
        printf("head %d weights (causal):\n", h);
        for (int i = 0; i < L; i++) {
            for (int j = 0; j < L; j++)
                printf(" %.4f", (double)w[(h * L + i) * L + j]);
            printf("\n");
        }
    }
    printf("output:\n");
    for (int i = 0; i < L; i++) {
        for (int e = 0; e < E; e++)
            printf(" %.4f", (double)out[i * E + e]);
        printf("\n");
    }
    return 0;
}
