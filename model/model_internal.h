/* model_internal.h -- what model.c and hf.c share; not an API (model.h is).
 *
 * model.c reads config.json and maps the safetensors formats of one file
 * (torch_mha, hf_bert, hf_gpt2); hf.c reads a Hugging Face checkpoint
 * folder (config.json, model.safetensors or shards) for the hf_llama,
 * hf_mistral and hf_gemma2 formats. Both go through the same checked
 * access to tensors below, and the same "defaults" rules. */
#ifndef MODEL_MODEL_INTERNAL_H
#define MODEL_MODEL_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "model/model.h"
#include "model/safetensors.h"

#define MODEL_PREFIX_MAX 256

/* State of one load: the model, the open file and its name in messages
 * ("model.safetensors", or a shard's name), the key prefix, the error. */
struct load {
    struct model *m;
    const struct st_file *f;
    const char *file;
    const char *prefix;
    char *err;
    size_t errlen;
};

/* snprintf into err; returns -1. */
int model_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* prefix + key in ld->f, or NULL. */
const struct st_tensor *model_find(const struct load *ld, const char *key);

/* The tensor prefix + key, checked: present, of shape (d0) or (d0, d1)
 * (d1 < 0: rank 1) and convertible; else NULL with err set. */
const struct st_tensor *model_checked(struct load *ld, const char *key, long d0, long d1);

/* A model_checked() tensor converted into dst (t->count floats); non-finite
 * values refused. */
int model_convert(struct load *ld, float *dst, const struct st_tensor *t);

/* model_checked() and model_convert() into a new array *out (malloc'd once
 * the shape is known to be in the file); an absent optional key leaves
 * *out NULL. */
int model_take(struct load *ld, float **out, const char *key, int optional, long d0, long d1);

/* m->defaults: derived (owned: taken, may be NULL = none) overridden by
 * the config's own "defaults" object user (borrowed, may be NULL), each
 * of its values checked; a null value removes a derived default. Also
 * checks num_kv_heads and head_dim against the model's. 0 or -1. */
int model_set_defaults(struct model *m, json_t *derived, json_t *user, char *err,
                       size_t errlen);

/* A JSON object file of at most 1 MiB (what names it in messages: e.g.
 * "config.json"); NULL with err set. */
json_t *model_read_json(const char *path, const char *what, char *err, size_t errlen);

/* The hf_llama, hf_mistral and hf_gemma2 formats (hf.c): cfg is the
 * model's config.json (m->config), folder DIR/<name>. 0 or -1. */
int model_load_hf(struct model *m, json_t *cfg, const char *folder, char *err, size_t errlen);

#endif
