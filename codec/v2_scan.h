/* v2_scan.h -- the fast reader of a v2 request's inputs' "data" arrays,
 * run before jansson reads the rest of the JSON part (codec/v2_scan.c;
 * its types in codec/v2_internal.h). */
#ifndef CODEC_V2_SCAN_H
#define CODEC_V2_SCAN_H

#include <jansson.h>

#include "codec/v2_internal.h"

/* Read the arrays of s (len bytes, the JSON part). errors: a large body
 * (never handed to jansson whole). 0, or -1 refused (err: invalid JSON). */
int v2_fast_scan(struct v2_fast *f, const char *s, size_t len, int errors,
                 const struct model *m, const struct codec_limits *lim,
                 struct tensor_arena *a, struct failure *err);
/* jansson over s with f's ranges replaced (a number it cannot hold: again
 * with its stand-in). NULL with je filled, or *nomem set. */
json_t *v2_fast_load(const struct v2_fast *f, const char *s, size_t n, json_error_t *je,
                     int *nomem);
void v2_fast_free(struct v2_fast *f);

/* Where a JSON object at the start of s ends, when it is valid JSON and
 * more than whitespace follows it (binary data sent without
 * Inference-Header-Content-Length); else 0. */
size_t v2_json_end(const char *s, size_t len);

#endif
