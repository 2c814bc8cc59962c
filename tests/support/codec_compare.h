/* codec_compare.h -- do two decoded requests say the same thing?
 * Used by the differential tests of the codec's fast decoder against its
 * jansson reference (tests/codec/test_codec.c, tests/fuzz/fuzz_codec.c). */
#ifndef TESTS_CODEC_COMPARE_H
#define TESTS_CODEC_COMPARE_H

#include "codec/codec.h"

/* Returns NULL when a and b (both decoded successfully) hold the same
 * sizes, options, bytes of every tensor and tokens; else what differs. */
const char *codec_compare(const struct codec_request *a, const struct codec_request *b);

/* Decode body both ways (codec_decode_request, which tries the fast decoder
 * first, and the reference) and compare acceptance and, when both accept,
 * the results. Returns NULL when they agree, else what differs. */
const char *codec_compare_paths(const char *body, size_t len, const struct codec_limits *lim);

#endif
