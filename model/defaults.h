/* defaults.h -- a model's "defaults": the POST /attention options it sets
 * when a request does not (model.h). The loaders (model.c, hf.c) call it
 * last, once the model's shapes are known; it calls only load_fail(). */
#ifndef MODEL_DEFAULTS_H
#define MODEL_DEFAULTS_H

#include <jansson.h>
#include <stddef.h>

#include "model/loaded.h"

/* m->defaults: derived (owned: taken, may be NULL = none) overridden by
 * the config's own "defaults" object user (borrowed, may be NULL), each
 * of its values checked; a null value removes a derived default. Also
 * checks num_kv_heads and head_dim against the model's. 0 or -1. */
int model_set_defaults(struct model *m, json_t *derived, json_t *user, char *err,
                       size_t errlen);

#endif
