/* model.h -- a server-held model: one layer of multi-head attention
 * weights, read from a model repository folder DIR/<name>/ that holds
 * config.json and model.safetensors (model/safetensors.h reads the file),
 * or config.json pointing at a Hugging Face checkpoint folder.
 *
 * The model/ layer (the rule: scripts/layers.sh) owns server-held models:
 * safetensors (safetensors.h), config.json and its three layouts (this
 * header, model.c), Hugging Face checkpoints (hf.h), the loaders' shared
 * steps (load.h), a model's defaults (defaults.h) and the registry
 * (repo.h, called from api/ only). model.c calls hf.c, defaults.c, load.c
 * and safetensors.c; each of those calls only the ones after it. It
 * includes model/, core/, lib/ and the options table (options/options.h)
 * that says what a model's "defaults" may be.
 *
 *     struct model *m;
 *     char err[512];
 *     if (model_load(&m, "/srv/models", "bert-l3", err, sizeof err) != 0)
 *         fprintf(stderr, "bert-l3: %s\n", err);   (names the key and shapes)
 *     ... m->w[ATT_W_IN] ... (float32, PyTorch Linear layout, out x in)
 *     model_free(m);
 *
 * config.json:
 *   {"format": "torch_mha" | "hf_bert" | "hf_gpt2",
 *    "prefix": "bert.encoder.layer.3.",      (optional, default "")
 *    num_heads: 12,                          (named as the option, options.h)
 *    "defaults": {attn_mask: causal, scale: 0.125}}   (optional; options.h's names)
 *   Any other top-level key is kept (m->config) and ignored.
 *
 * A Hugging Face decoder layer (docs/models.md "Hugging Face checkpoints"):
 *   {"format": "hf_llama" | "hf_mistral" | "hf_gemma2",
 *    "checkpoint": "/path/to/hf-folder",   (absolute, or relative to DIR/<name>)
 *    "layer": 3,
 *    "prefix": "model.layers.3.",          (optional, this default)
 *    num_heads: 32,                        (optional: must equal the checkpoint's)
 *    "hf_ignore": ["some_field"],          (optional: checkpoint config fields the
 *                                           user declares irrelevant to attention)
 *    "defaults": {...}}                    (optional: override the derived ones)
 *   The checkpoint's config.json gives H (num_attention_heads), Hkv
 *   (num_key_value_heads), E (hidden_size), d (head_dim, else E / H),
 *   rope_theta, sliding_window, attn_logit_softcapping,
 *   query_pre_attn_scalar and attention_bias; a field that changes the
 *   attention and is not implemented (rope_scaling, partial_rotary_factor
 *   != 1, ...) or that the loader does not know is a load error naming it.
 *   Its weights come from model.safetensors, or from the shards that
 *   model.safetensors.index.json names for the layer's tensors:
 *   self_attn.{q,k,v,o}_proj.weight, and .bias when attention_bias.
 *   The loader puts what it derived into m->defaults, in POST /attention's
 *   names: num_kv_heads, head_dim, rope {"style": "half", "theta",
 *   "rotary_dim"}, attn_mask causal_lower_right, window [W - 1, 0]
 *   (sliding_window W; hf_gemma2 on even layers only), softcap, scale
 *   (hf_gemma2: query_pre_attn_scalar^-1/2). A key of the model config's
 *   own defaults replaces the derived one; null removes it.
 *
 * Keys read (after the prefix):
 *   torch_mha: in_proj_weight (3E, E) or q_proj_weight (E, E) +
 *              k_proj_weight (E, kdim) + v_proj_weight (E, vdim);
 *              in_proj_bias (3E) optional; out_proj.weight (E, E);
 *              out_proj.bias (E) optional.
 *   hf_bert:   attention.self.{query,key,value}.{weight,bias} (E, E)/(E),
 *              attention.output.dense.{weight,bias} (E, E)/(E).
 *   hf_gpt2:   attn.c_attn.weight (E, 3E) and attn.c_attn.bias (3E),
 *              attn.c_proj.weight (E, E) and attn.c_proj.bias (E), stored
 *              in x out (applied as x·W): transposed here at load.
 *   hf_llama, hf_mistral, hf_gemma2: self_attn.q_proj.weight (H·d, E) ->
 *              q_proj_weight, k_proj / v_proj (Hkv·d, E) -> k/v_proj_weight,
 *              o_proj (E, H·d) -> out_proj_weight; the q, k, v biases
 *              stacked into in_proj_bias, o_proj.bias -> out_proj_bias.
 * F32, F16 and BF16 tensors are converted to float32 once, at load; only
 * the tensors above are read from the file (pread; never mapped).
 *
 * A model is immutable once loaded, and may be shared between threads.
 */
#ifndef MODEL_MODEL_H
#define MODEL_MODEL_H

#include <jansson.h>
#include <stddef.h>

#include "core/attention.h"
#include "model/loaded.h"


/* Load DIR/<name>/ (config.json + model.safetensors). Returns 0 with *out
 * set, or -1 with err naming the problem (the file, the key, the shapes).
 * name "attention" is reserved (a load error). The hf_* decoder formats
 * read the checkpoint folder that config.json names. */
int model_load(struct model **out, const char *dir, const char *name, char *err,
               size_t errlen);

/* model_load() on memory: config (config_len bytes of config.json) and st
 * (st_len bytes of model.safetensors), both borrowed, for tests and the
 * fuzzer. The messages are model_load()'s. The hf_* decoder formats,
 * which read a folder, are a load error here. */
int model_parse(struct model **out, const char *name, const char *config, size_t config_len,
                const void *st, size_t st_len, char *err, size_t errlen);

void model_free(struct model *m);

#endif
