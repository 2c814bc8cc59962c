/* codec_shared.h -- what the test_codec*.c files share. */
#ifndef TESTS_CODEC_SHARED_H
#define TESTS_CODEC_SHARED_H

#include "codec/codec.h"
#include "lib/errors.h"

/* Decode the POST /attention body (a string) into r with test_limits(). */
int codect_decode(struct codec_request *r, const char *body, struct failure *e);

#endif
