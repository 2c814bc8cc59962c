/* hf.h -- the hf_llama, hf_mistral and hf_gemma2 formats (docs/models.md
 * "Hugging Face checkpoints"): one decoder layer's attention, read from a
 * Hugging Face checkpoint folder. model_load() calls it for these formats;
 * it calls down only (load.c, defaults.c, safetensors.c). */
#ifndef MODEL_HF_H
#define MODEL_HF_H

#include <jansson.h>
#include <stddef.h>

#include "model/loaded.h"

/* cfg is the model's config.json (m->config), folder DIR/<name>; m's
 * shapes, weights, hf_config and defaults are set. 0 or -1 with err set. */
int model_load_hf(struct model *m, json_t *cfg, const char *folder, char *err, size_t errlen);

#endif
