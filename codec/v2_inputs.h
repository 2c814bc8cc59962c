/* v2_inputs.h -- the names of a v2 request's inputs (enum IN_* of
 * codec/v2_internal.h) and the checks of an "inputs" or "outputs" item
 * and of an object's fields: the bottom of the v2 decoder, which
 * codec/v2.c, v2_params.c and v2_scan.c call. */
#ifndef CODEC_V2_INPUTS_H
#define CODEC_V2_INPUTS_H

#include <jansson.h>

#include "lib/errors.h"

/* The input named so (its enum position), or -1; and the name of one. */
int v2_input_index(const char *name);
const char *v2_input_name(int idx);

/* Item i of the array list (of inputs or of outputs: what) with its
 * "name": the name, *x the item; NULL with err filled when the item is not
 * an object with a string name. */
const char *v2_named_item(json_t *list, size_t i, const char *what, json_t **x,
                          struct failure *err);
/* Refuse a field of obj that list (NULL-terminated) lacks; what names obj. */
int v2_known_fields(json_t *obj, const char *const *list, const char *what,
                    struct failure *err);

#endif
