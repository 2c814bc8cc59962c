/* json_small.h -- a JSON text of the plain form a client's small request
 * header takes, read straight into jansson's values without jansson's
 * reader (which costs most of a small v2 binary request's decoding);
 * internal to the codec (scan_load_blanked). */
#ifndef CODEC_JSON_SMALL_H
#define CODEC_JSON_SMALL_H

#include <jansson.h>
#include <stddef.h>

/* s (n bytes): an object or an array, as json_loadb(s, n,
 * JSON_REJECT_DUPLICATES, ...) reads it, when every string in it is
 * printable ASCII without escapes, nesting is shallow, no key repeats in an
 * object and no number overflows; else NULL (the caller asks jansson, which
 * then says what is wrong, or reads what this leaves to it). Never a value
 * jansson would not give. */
json_t *json_small_load(const char *s, size_t n);

#endif
