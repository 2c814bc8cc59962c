/* model.h -- a server-held model: one layer of multi-head attention
 * weights, read from a model repository folder DIR/<name>/ that holds
 * config.json and model.safetensors (model/safetensors.h reads the file).
 *
 *     struct model *m;
 *     char err[512];
 *     if (model_load(&m, "/srv/models", "bert-l3", err, sizeof err) != 0)
 *         fprintf(stderr, "bert-l3: %s\n", err);   (names the key and shapes)
 *     ... m->in_proj_weight ... (float32, PyTorch Linear layout, out x in)
 *     model_free(m);
 *
 * config.json:
 *   {"format": "torch_mha" | "hf_bert" | "hf_gpt2",
 *    "prefix": "bert.encoder.layer.3.",      (optional, default "")
 *    "num_heads": 12,
 *    "defaults": {"attn_mask": "causal", "scale": 0.125}}   (optional)
 *   Any other top-level key is kept (m->config) and ignored.
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
 * F32, F16 and BF16 tensors are converted to float32 once, at load; only
 * the tensors above are read from the (mmap'ed) file.
 *
 * A model is immutable once loaded, and may be shared between threads.
 */
#ifndef MODEL_MODEL_H
#define MODEL_MODEL_H

#include <jansson.h>
#include <stddef.h>

enum model_format { MODEL_TORCH_MHA, MODEL_HF_BERT, MODEL_HF_GPT2 };

/* Name of a format as config.json spells it ("torch_mha", ...). */
const char *model_format_name(int format);

struct model {
    char name[128];
    int format;           /* enum model_format */
    int E, kdim, vdim, H; /* embed dim, key dim, value dim, num_heads */
    /* float32, owned (malloc'd), PyTorch layout as struct att_params
     * wants it; NULL = absent (identity matrix / zero bias). Either
     * in_proj_weight, or q/k/v_proj_weight. */
    float *in_proj_weight;  /* (3E, E) */
    float *q_proj_weight;   /* (E, E) */
    float *k_proj_weight;   /* (E, kdim) */
    float *v_proj_weight;   /* (E, vdim) */
    float *in_proj_bias;    /* (3E) */
    float *out_proj_weight; /* (E, E) */
    float *out_proj_bias;   /* (E) */
    json_t *defaults;       /* object of POST /attention options (owned, never NULL) */
    json_t *config;         /* config.json as read (owned, never NULL) */
    size_t bytes;           /* bytes of float32 weights held */
    char dtype[8];          /* dtype of the weights in the file: "F32", "F16", "BF16" */
};

/* The options "defaults" may set, as POST /attention names them:
 * need_weights, average_attn_weights (booleans), attn_mask ("causal"),
 * scale (number > 0), positional_encoding ("sinusoidal"), output_encoding
 * ("json" or "base64"). */
int model_is_default_option(const char *key);

/* Load DIR/<name>/ (config.json + model.safetensors). Returns 0 with *out
 * set, or -1 with err naming the problem (the file, the key, the shapes).
 * name "attention" is reserved (a load error). */
int model_load(struct model **out, const char *dir, const char *name, char *err,
               size_t errlen);

/* model_load() on memory: config (config_len bytes of config.json) and st
 * (st_len bytes of model.safetensors), both borrowed, for tests and the
 * fuzzer. The messages are model_load()'s. */
int model_parse(struct model **out, const char *name, const char *config, size_t config_len,
                const void *st, size_t st_len, char *err, size_t errlen);

void model_free(struct model *m);

#endif
