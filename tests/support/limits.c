/* limits.c -- see limits.h. */
#include "tests/support/limits.h"

#include "api/service.h"
#include "config/config.h"

struct codec_limits test_limits(void)
{
    struct cfg c;
    cfg_defaults(&c);
    return service_limits(&c);
}
