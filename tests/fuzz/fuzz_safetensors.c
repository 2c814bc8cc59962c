/* fuzz_safetensors.c -- libFuzzer entry for the safetensors reader and the
 * model mapping (model/safetensors.c, model/model.c). The first byte picks
 * one of the three formats' config.json (and the number of heads); the
 * rest is the file. st_parse() must accept it or say why; an accepted
 * file has every tensor inside the buffer and, when convertible, is
 * converted; model_parse() must give a model whose arrays match its
 * shapes, or an error.
 *
 *   make fuzz            builds build/fuzz/fuzz_safetensors (clang) and runs
 *                        it for FUZZ_SECONDS on the files of
 *                        tests/models/{repo,broken} as the seed corpus. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_file(const struct st_file *f, const uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < f->n; i++) {
        const struct st_tensor *t = &f->tensors[i];
        const uint8_t *p = t->data;
        if (p < buf || t->nbytes > len || p - buf > (ptrdiff_t)(len - t->nbytes))
            abort(); /* data outside the buffer */
        if (st_find(f, t->name) == NULL)
            abort();
        if (st_dtype_convertible(t->dtype) && t->count <= 4096) {
            float out[4096];
            if (st_to_f32(out, t) != 0)
                abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const configs[] = {
        "{\"format\":\"torch_mha\",\"num_heads\":%d}",
        "{\"format\":\"hf_bert\",\"num_heads\":%d,\"prefix\":\"bert.encoder.layer.1.\"}",
        "{\"format\":\"hf_gpt2\",\"num_heads\":%d,\"prefix\":\"h.1.\"}",
    };
    if (size < 1)
        return 0;
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    struct st_file f;
    char err[512];
    if (st_parse(&f, buf, len, err, sizeof err) == 0) {
        check_file(&f, buf, len);
        st_close(&f);
    } else if (!err[0]) {
        abort(); /* a refusal says why */
    }
    char cfg[160];
    int n = snprintf(cfg, sizeof cfg, configs[data[0] % 3], 1 + (data[0] >> 2) % 8);
    struct model *m = NULL;
    err[0] = 0;
    if (model_parse(&m, "fuzz", cfg, (size_t)n, buf, len, err, sizeof err) == 0) {
        size_t E = (size_t)m->E, sum = 0;
        if (m->E < 1 || m->E % m->H || !m->w[ATT_W_OUT] || !m->defaults)
            abort();
        /* touch every array to its full size: ASan catches a short one */
        const size_t len_of[ATT_NWEIGHTS] = {
            [ATT_W_IN] = 3 * E * E, [ATT_W_Q] = E * E, [ATT_W_K] = E * (size_t)m->kdim,
            [ATT_W_V] = E * (size_t)m->vdim, [ATT_W_IN_BIAS] = 3 * E, [ATT_W_OUT] = E * E,
            [ATT_W_OUT_BIAS] = E};
        for (int i = 0; i < ATT_NWEIGHTS; i++)
            for (size_t k = 0; m->w[i] && k < len_of[i]; k++)
                sum += m->w[i][k] != 0.0f;
        if (sum > m->bytes / sizeof(float))
            abort();
        model_free(m);
    } else if (m || !err[0]) {
        abort();
    }
    return 0;
}
