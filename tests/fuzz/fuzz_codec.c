/* fuzz_codec.c -- libFuzzer entry for the request decoders (the fast
 * decoder and the jansson decoder, which must agree: any difference aborts)
 * and, when a request decodes, the core and the encoder.
 *
 *   make fuzz            builds build/fuzz/fuzz_codec (clang) and runs it
 *                        for FUZZ_SECONDS (default 60) on tests/cases and
 *                        tests/golden as the seed corpus.
 *
 * Limits are small so that a decoded request is cheap to compute. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <stdio.h>

#include "core/attention.h"
#include "server/codec.h"
#include "tests/codec_compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct codec_limits lim = {4096, 4, 64, 64, 64, 8, 1 << 16};
    /* the fast decoder must say exactly what the jansson decoder says */
    const char *diff = codec_compare_paths((const char *)data, size, &lim);
    if (diff) {
        fprintf(stderr, "fast decoder and jansson decoder disagree: %s\n", diff);
        abort();
    }
    struct codec_request r;
    struct codec_error err;
    if (codec_decode_request(&r, (const char *)data, size, &lim, &err) == 0) {
        size_t out_len, w_len;
        if (att_check(&r.p, &out_len, &w_len, NULL) == ATT_OK) {
            float *out = malloc(out_len * sizeof *out);
            float *w = w_len ? malloc(w_len * sizeof *w) : NULL;
            if (out && att_forward(out, w, &r.p, NULL) == ATT_OK) {
                size_t len;
                free(codec_encode_response(&r, out, w, &len));
            }
            free(out);
            free(w);
        }
    }
    codec_request_deinit(&r);
    return 0;
}
