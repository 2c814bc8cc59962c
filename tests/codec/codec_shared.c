/* codec_shared.c -- see codec_shared.h. */
#include <string.h>

#include "config/config.h"
#include "codec/codec.h"
#include "lib/errors.h"
#include "tests/support/limits.h"
#include "tests/codec/codec_shared.h"
#include "codec/request.h"

int codect_decode(struct codec_request *r, const char *body, struct failure *e)
{
    struct codec_limits lim = test_limits();
    return codec_decode_request(r, body, strlen(body), &lim, NULL, e);
}
