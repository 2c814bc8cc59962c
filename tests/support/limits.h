/* limits.h -- the codec limits the unit tests decode with: those of a
 * server started with the default settings (cfg_defaults, service_limits),
 * so a test sees what a client of `make run` sees. */
#ifndef TESTS_LIMITS_H
#define TESTS_LIMITS_H

#include "codec/codec.h"

struct codec_limits test_limits(void);

#endif
