/* load.h -- the loader's shared state and steps, below every format:
 * model.c (torch_mha, hf_bert, hf_gpt2, read from one file) and hf.c
 * (hf_llama, hf_mistral, hf_gemma2, read from a checkpoint folder) both
 * read their tensors through it, and defaults.c reports its errors with
 * load_fail(). Not an API (model.h is); it calls only safetensors.c.
 *
 *     struct load ld = {m, &f, "model.safetensors", prefix, err, errlen};
 *     if (load_take(&ld, &m->w[ATT_W_OUT], "out_proj.weight", 0, E, E))
 *         return -1;   (err names the file, the key and the shapes)
 */
#ifndef MODEL_LOAD_H
#define MODEL_LOAD_H

#include <jansson.h>
#include <stddef.h>

#include "model/loaded.h"
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
int load_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* prefix + key in ld->f, or NULL. */
const struct st_tensor *load_find(const struct load *ld, const char *key);

/* The tensor prefix + key, checked: present, of shape (d0) or (d0, d1)
 * (d1 < 0: rank 1) and convertible; else NULL with err set. */
const struct st_tensor *load_checked(struct load *ld, const char *key, long d0, long d1);

/* A load_checked() tensor converted into dst (t->count floats); non-finite
 * values refused. */
int load_convert(struct load *ld, float *dst, const struct st_tensor *t);

/* load_checked() and load_convert() into a new array *out (malloc'd once
 * the shape is known to be in the file); an absent optional key leaves
 * *out NULL. */
int load_take(struct load *ld, float **out, const char *key, int optional, long d0, long d1);

/* A JSON object file of at most 1 MiB (what names it in messages: e.g.
 * "config.json"); NULL with err set. */
json_t *load_read_json(const char *path, const char *what, char *err, size_t errlen);

#endif
