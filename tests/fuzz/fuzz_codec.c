/* fuzz_codec.c -- libFuzzer entry for the request decoders (the fast
 * decoder and jansson, which must agree: any difference aborts), then the
 * whole job as the server runs it (api/service.c: decode, compute,
 * encode), which must answer 200 or an error with a JSON body.
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

#include "api/service.h"
#include "tests/support/codec_compare.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct codec_limits lim = {4096, 4, 64, 64, 64, 8, 1 << 16, 256};
    /* the fast path must say exactly what the jansson reference says */
    const char *diff = codec_compare_paths((const char *)data, size, &lim);
    if (diff) {
        fprintf(stderr, "fast path and reference disagree: %s\n", diff);
        abort();
    }
    /* the job the server runs: decode, compute, encode */
    struct route_response a;
    const struct service_times t = {0, 0, NULL};
    service_attention(&lim, (const char *)data, size, &t, NULL, NULL, &a);
    if (a.status != 200 && (a.status < 400 || a.status > 599 || !a.body))
        abort();
    route_response_free(&a);
    return 0;
}
