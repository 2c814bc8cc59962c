/* loaded.h -- what a loaded model is: struct model, its formats' names
 * and the built-in model's name. The shared names of model/: the loaders
 * (model.c, hf.c, load.c, defaults.c) fill a struct model, and everyone
 * else reads one through model/model.h, which includes this. Types, macros
 * and one static inline only (no .c of its own: scripts/calls.sh).
 */
#ifndef MODEL_LOADED_H
#define MODEL_LOADED_H

#include <jansson.h>
#include <stddef.h>

#include "core/attention.h"

/* The name of the built-in model: no struct model, the weights are in the
 * request (both protocols say so; the registry always serves it). */
#define MODEL_BUILTIN "attention"

enum model_format {
    MODEL_TORCH_MHA, MODEL_HF_BERT, MODEL_HF_GPT2,
    MODEL_HF_LLAMA, MODEL_HF_MISTRAL, MODEL_HF_GEMMA2,
    MODEL_NFORMATS
};

/* Name of a format as config.json spells it ("torch_mha", ...); "unknown"
 * out of range. Inline: the loaders below model.c name formats too. */
static inline const char *model_format_name(int format)
{
    static const char *const names[MODEL_NFORMATS] = {
        "torch_mha", "hf_bert", "hf_gpt2", "hf_llama", "hf_mistral", "hf_gemma2"};
    return format >= 0 && format < MODEL_NFORMATS ? names[format] : "unknown";
}

struct model {
    char name[128];
    int format;           /* enum model_format */
    int E, kdim, vdim, H; /* embed dim, key dim, value dim, num_heads */
    int Hkv;              /* key/value heads (= H but in the hf_* decoder formats) */
    int head_dim;         /* d (= E / H but in the hf_* decoder formats) */
    int layer;            /* hf_* decoder formats: the layer served; else -1 */
    /* The weights (enum att_weight, core/attention.h), float32, owned
     * (malloc'd), PyTorch layout as struct att_params wants it; NULL =
     * absent (identity matrix / zero bias). Either w[ATT_W_IN], or
     * w[ATT_W_Q], w[ATT_W_K] and w[ATT_W_V]. Dq = H·d and Dkv = Hkv·d are
     * both E in torch_mha, hf_bert and hf_gpt2; kdim = vdim = E in the
     * hf_* decoder formats. */
    float *w[ATT_NWEIGHTS];
    size_t w_len[ATT_NWEIGHTS]; /* floats in each array of w (0 when NULL) */
    json_t *defaults;       /* object of POST /attention options (owned, never NULL;
                               checked against options/options.h's rows, defaults.c) */
    json_t *config;         /* config.json as read (owned, never NULL) */
    json_t *hf_config;      /* hf_* decoder formats: the checkpoint's config.json
                               (owned); else NULL */
    size_t bytes;           /* bytes of float32 weights held */
    char dtype[8];          /* dtype of the weights in the file: "F32", "F16", "BF16" */
};

#endif
