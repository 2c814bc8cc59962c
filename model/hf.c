/* hf.c -- see hf.h. The hf_llama, hf_mistral and hf_gemma2 formats
 * (model.h, docs/models.md "Hugging Face checkpoints"): one decoder layer's
 * attention, read from a Hugging Face checkpoint folder as transformers
 * saves it.
 *
 * 1. The model's config.json names the folder and the layer.
 * 2. The folder's config.json, read with the field names and class
 *    defaults of transformers' LlamaConfig, MistralConfig and Gemma2Config.
 *    Every field is either read, known not to change the attention, or
 *    declared so by the user (hf_ignore); any other is a load error, as is
 *    a field whose value the service does not implement (rope_scaling, ...).
 * 3. The tensors: model.safetensors, or model.safetensors.index.json's
 *    weight_map (name -> shard file); only the shards holding the layer's
 *    tensors are opened, each once, and all are closed before returning.
 * 4. The defaults derived from 2, under the POST /attention names. */
#include "model/hf.h"

#include "model/defaults.h"
#include "model/load.h"
#include "model/safetensors.h"

#include "options/options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SHARDS_MAX 8   /* 8 tensors at most: 8 files */
#define DIMS_MAX 65536 /* H, Hkv, E, d each */
#define PROJ_MAX (1L << 24) /* H·d + 2·Hkv·d: ints for the core */

/* What the checkpoint's config.json says about the attention. */
struct hfcfg {
    long long H, Hkv, E, d, layers; /* layers: 0 = unknown */
    double theta, softcap, qscalar; /* softcap 0: none; qscalar 0: none */
    long long window;               /* sliding_window W; 0: none */
    int bias, layer_slides;         /* attention_bias; this layer uses the window */
};

/* The checkpoint folder and the files opened from it. */
struct ckpt {
    char dir[4096];
    json_t *index;      /* model.safetensors.index.json (owned), or NULL */
    json_t *weight_map; /* borrowed from index */
    struct {
        char file[256];
        struct st_file f;
    } shard[SHARDS_MAX];
    int n;
};

static const char *const model_types[] = {"llama", "mistral", "gemma2"};

/* Fields every format reads, then each format's own. */
static const char *const read_common[] = {
    "model_type", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim",
    "rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor",
    "attention_bias", "num_hidden_layers", "sliding_window", NULL};
static const char *const read_gemma2[] = {"attn_logit_softcapping", "query_pre_attn_scalar",
                                          "layer_types", NULL};
/* Fields known not to change one layer's attention at inference. */
static const char *const irrelevant[] = {
    "architectures", "transformers_version", "torch_dtype", "dtype", "vocab_size",
    "intermediate_size", "hidden_act", "hidden_activation", "rms_norm_eps",
    "initializer_range", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id",
    "tie_word_embeddings", "max_position_embeddings", "mlp_bias", "pretraining_tp",
    "attention_dropout", "final_logit_softcapping", "cache_implementation", "_name_or_path",
    "attn_implementation", "_attn_implementation", "output_attentions",
    "output_hidden_states", "return_dict", "use_return_dict", NULL};

static int listed(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (!strcmp(*list, key))
            return 1;
    return 0;
}

/* 2. Every field of the checkpoint's config is accounted for. */
static int known_fields(const struct model *m, json_t *hc, json_t *ignore, char *err,
                        size_t errlen)
{
    const char *key;
    json_t *v;
    json_object_foreach (hc, key, v) {
        int user = 0;
        size_t i;
        json_t *x;
        json_array_foreach (ignore, i, x)
            user |= json_is_string(x) && !strcmp(json_string_value(x), key);
        if (listed(read_common, key) || listed(irrelevant, key) || user ||
            (m->format == MODEL_HF_GEMMA2 && listed(read_gemma2, key)))
            continue;
        return load_fail(err, errlen, "checkpoint config.json: field \"%.64s\" is not known "
                         "to the %s loader and may change the attention; if it does not, "
                         "list it in the model config's hf_ignore", key,
                         model_format_name(m->format));
    }
    return 0;
}

/* An integer field: absent -> dflt, null -> nullv, else lo..hi. */
static int int_field(json_t *hc, const char *key, long long dflt, long long nullv,
                     long long lo, long long hi, long long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(hc, key);
    *out = !v ? dflt : json_is_null(v) ? nullv : json_integer_value(v);
    if (v && !json_is_null(v) && (!json_is_integer(v) || *out < lo || *out > hi))
        return load_fail(err, errlen, "checkpoint config.json: %s is not an integer in "
                         "%lld..%lld", key, lo, hi);
    return 0;
}

/* A number field > 0: absent -> dflt, null -> nullv. */
static int num_field(json_t *hc, const char *key, double dflt, double nullv, double *out,
                     char *err, size_t errlen)
{
    json_t *v = json_object_get(hc, key);
    *out = !v ? dflt : json_is_null(v) ? nullv : json_number_value(v);
    if (v && !json_is_null(v) && (!json_is_number(v) || !(*out > 0) || !isfinite(*out)))
        return load_fail(err, errlen, "checkpoint config.json: %s is not a number > 0", key);
    return 0;
}

/* A field set to something the service does not compute. */
static int unsupported(json_t *v, const char *key, const char *why, char *err, size_t errlen)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    load_fail(err, errlen, "checkpoint config.json: %s = %.60s is not implemented (%s)", key,
              text ? text : "?", why);
    free(text);
    return -1;
}

/* RoPE: rope_theta, or transformers 5's rope_parameters; plain RoPE only. */
static int rope(json_t *hc, struct hfcfg *h, char *err, size_t errlen)
{
    json_t *v = json_object_get(hc, "rope_scaling");
    if (v && !json_is_null(v))
        return unsupported(v, "rope_scaling", "only plain RoPE, rope_theta", err, errlen);
    if (num_field(hc, "rope_theta", 10000.0, 10000.0, &h->theta, err, errlen))
        return -1;
    double prf;
    if (num_field(hc, "partial_rotary_factor", 1.0, 1.0, &prf, err, errlen))
        return -1;
    if (prf != 1.0)
        return unsupported(json_object_get(hc, "partial_rotary_factor"),
                           "partial_rotary_factor", "these models rotate the whole head",
                           err, errlen);
    json_t *rp = json_object_get(hc, "rope_parameters");
    if (!rp || json_is_null(rp))
        return 0;
    const char *type = json_string_value(json_object_get(rp, "rope_type"));
    const char *key;
    json_object_foreach (rp, key, v) {
        if (strcmp(key, "rope_type") && strcmp(key, "rope_theta") &&
            strcmp(key, "partial_rotary_factor"))
            return unsupported(rp, "rope_parameters", "only rope_type \"default\"", err,
                               errlen);
    }
    if (!json_is_object(rp) || !type || strcmp(type, "default"))
        return unsupported(rp, "rope_parameters", "only rope_type \"default\"", err, errlen);
    if (num_field(rp, "partial_rotary_factor", 1.0, 1.0, &prf, err, errlen))
        return -1;
    if (prf != 1.0)
        return unsupported(rp, "rope_parameters", "these models rotate the whole head", err,
                           errlen);
    return num_field(rp, "rope_theta", h->theta, h->theta, &h->theta, err, errlen);
}

/* Gemma 2's window on this layer: layer_types when given, else even layers
 * (HF: sliding_window if not bool(layer_idx % 2)). */
static int gemma2_window(json_t *hc, struct hfcfg *h, long long layer, char *err,
                         size_t errlen)
{
    json_t *lt = json_object_get(hc, "layer_types");
    if (!lt || json_is_null(lt)) {
        h->layer_slides = layer % 2 == 0;
        return 0;
    }
    const char *t = json_string_value(json_array_get(lt, (size_t)layer));
    if (!json_is_array(lt) || !t || (strcmp(t, "sliding_attention") &&
                                     strcmp(t, "full_attention")))
        return load_fail(err, errlen, "checkpoint config.json: layer_types[%lld] is not "
                         "\"sliding_attention\" or \"full_attention\"", layer);
    h->layer_slides = !strcmp(t, "sliding_attention");
    return 0;
}

/* 2. The checkpoint's config, with each format's class defaults. */
static int read_hf_config(const struct model *m, json_t *hc, long long layer,
                          struct hfcfg *h, char *err, size_t errlen)
{
    const int f = m->format, gemma = f == MODEL_HF_GEMMA2;
    const char *mt = json_string_value(json_object_get(hc, "model_type"));
    if (mt && strcmp(mt, model_types[f - MODEL_HF_LLAMA]))
        return load_fail(err, errlen, "checkpoint config.json: model_type \"%.40s\" is not "
                         "%s's (\"%s\")", mt, model_format_name(f),
                         model_types[f - MODEL_HF_LLAMA]);
    if (int_field(hc, "num_attention_heads", gemma ? 8 : 32, 0, 1, DIMS_MAX, &h->H, err,
                  errlen) ||
        int_field(hc, "hidden_size", gemma ? 2304 : 4096, 0, 1, DIMS_MAX, &h->E, err, errlen) ||
        int_field(hc, "num_key_value_heads", f == MODEL_HF_LLAMA ? h->H : gemma ? 4 : 8, h->H,
                  1, DIMS_MAX, &h->Hkv, err, errlen) ||
        int_field(hc, "num_hidden_layers", 0, 0, 1, 1L << 20, &h->layers, err, errlen))
        return -1;
    if (!h->H || !h->E)
        return load_fail(err, errlen, "checkpoint config.json: num_attention_heads or "
                         "hidden_size is null");
    if (h->H % h->Hkv)
        return load_fail(err, errlen, "checkpoint config.json: num_key_value_heads = %lld "
                         "does not divide num_attention_heads = %lld", h->Hkv, h->H);
    if (int_field(hc, "head_dim", gemma ? 256 : h->E / h->H, h->E / h->H, 1, DIMS_MAX, &h->d,
                  err, errlen))
        return -1;
    json_t *hd = json_object_get(hc, "head_dim");
    if ((hd ? json_is_null(hd) : !gemma) && h->E % h->H)
        return load_fail(err, errlen, "checkpoint config.json: hidden_size = %lld is not "
                         "divisible by num_attention_heads = %lld, and no head_dim", h->E,
                         h->H);
    if (h->d % 2)
        return load_fail(err, errlen, "checkpoint config.json: head_dim = %lld is odd: RoPE "
                         "rotates pairs", h->d);
    if ((h->H + 2 * h->Hkv) * h->d > PROJ_MAX)
        return load_fail(err, errlen, "checkpoint config.json: (num_attention_heads + 2 · "
                         "num_key_value_heads) · head_dim is over %ld", PROJ_MAX);
    if (h->layers && layer >= h->layers)
        return load_fail(err, errlen, "config.json: layer %lld is out of range: the "
                         "checkpoint has num_hidden_layers = %lld", layer, h->layers);
    json_t *ab = json_object_get(hc, "attention_bias");
    if (ab && !json_is_boolean(ab))
        return load_fail(err, errlen, "checkpoint config.json: attention_bias is not a "
                         "boolean");
    h->bias = json_is_true(ab);
    if (h->bias && f == MODEL_HF_MISTRAL)
        return unsupported(ab, "attention_bias", "Mistral's projections have no bias", err,
                           errlen);
    if (rope(hc, h, err, errlen) ||
        int_field(hc, "sliding_window", f == MODEL_HF_LLAMA ? 0 : 4096, 0, 1, 1LL << 40,
                  &h->window, err, errlen))
        return -1;
    if (f == MODEL_HF_LLAMA && h->window)
        return unsupported(json_object_get(hc, "sliding_window"), "sliding_window",
                           "Llama has no sliding window: use hf_mistral", err, errlen);
    h->layer_slides = h->window > 0;
    if (!gemma)
        return 0;
    if (num_field(hc, "attn_logit_softcapping", 50.0, 0.0, &h->softcap, err, errlen) ||
        num_field(hc, "query_pre_attn_scalar", 256.0, 0.0, &h->qscalar, err, errlen))
        return -1;
    if (!h->qscalar)
        return load_fail(err, errlen, "checkpoint config.json: query_pre_attn_scalar is "
                         "null");
    return gemma2_window(hc, h, layer, err, errlen);
}

/* 4. The defaults derived from h. */
static json_t *derived_defaults(const struct hfcfg *h)
{
    json_t *d = json_pack("{sI sI s{ss sf sI} ss}", opt_name(OPT_NUM_KV_HEADS), h->Hkv,
                          opt_name(OPT_HEAD_DIM), h->d, opt_name(OPT_ROPE),
                          opt_member(OPT_ROPE, 0), opt_choice(OPT_ROPE, 0),
                          opt_member(OPT_ROPE, 1), h->theta, opt_member(OPT_ROPE, 2), h->d,
                          opt_name(OPT_ATTN_MASK), opt_choice(OPT_ATTN_MASK, 1));
    if (d && h->layer_slides && h->window &&
        json_object_set_new(d, opt_name(OPT_WINDOW), json_pack("[Ii]", h->window - 1, 0)))
        goto oom;
    if (d && h->softcap > 0 &&
        json_object_set_new(d, opt_name(OPT_SOFTCAP), json_real(h->softcap)))
        goto oom;
    if (d && h->qscalar > 0 &&
        json_object_set_new(d, opt_name(OPT_SCALE), json_real(1.0 / sqrt(h->qscalar))))
        goto oom;
    return d;
oom:
    json_decref(d);
    return NULL;
}

/* 3. A shard's file name: a plain name in the folder. */
static int plain_name(const char *s)
{
    return s && s[0] && s[0] != '.' && !strchr(s, '/') && strlen(s) < 256;
}

/* 3. Point ld at the file holding prefix + key (opening it if needed). A
 * key the index does not list: -1 with err set, or 1 when optional. */
static int locate(struct ckpt *c, struct load *ld, const char *key, int optional)
{
    if (!c->weight_map) {
        ld->f = &c->shard[0].f, ld->file = c->shard[0].file;
        return optional && !load_find(ld, key);
    }
    char full[MODEL_PREFIX_MAX + 64];
    snprintf(full, sizeof full, "%s%s", ld->prefix, key);
    json_t *v = json_object_get(c->weight_map, full);
    if (!v && optional)
        return 1;
    if (!v)
        return load_fail(ld->err, ld->errlen, "model.safetensors.index.json: weight_map has "
                         "no %s (missing key)", full);
    const char *file = json_string_value(v);
    if (!plain_name(file))
        return load_fail(ld->err, ld->errlen, "model.safetensors.index.json: weight_map's "
                         "file for %s is not a file name in the folder", full);
    int i = 0;
    while (i < c->n && strcmp(c->shard[i].file, file))
        i++;
    if (i == c->n) {
        char path[sizeof c->dir + 260], msg[sizeof path + 256];
        snprintf(path, sizeof path, "%s/%s", c->dir, file);
        if (c->n == SHARDS_MAX)
            return load_fail(ld->err, ld->errlen, "model.safetensors.index.json: more than "
                             "%d shards for one layer", SHARDS_MAX);
        if (st_open(&c->shard[i].f, path, msg, sizeof msg)) {
            const char *tail = strrchr(msg, '/');
            return load_fail(ld->err, ld->errlen, "model.safetensors.index.json: shard %s "
                             "(of %s): %s", file, full, tail ? tail + 1 : msg);
        }
        snprintf(c->shard[i].file, sizeof c->shard[i].file, "%s", file);
        c->n++;
    }
    ld->f = &c->shard[i].f, ld->file = c->shard[i].file;
    return 0;
}

/* 3. Open the folder's single file, or read its index. */
static int ckpt_open(struct ckpt *c, char *err, size_t errlen)
{
    char path[sizeof c->dir + 64];
    struct stat sb;
    snprintf(path, sizeof path, "%s/model.safetensors", c->dir);
    if (!stat(path, &sb)) { /* transformers prefers the single file, as here */
        char msg[sizeof path + 256];
        snprintf(c->shard[0].file, sizeof c->shard[0].file, "model.safetensors");
        if (st_open(&c->shard[0].f, path, msg, sizeof msg)) {
            const char *tail = strstr(msg, "model.safetensors: ");
            return load_fail(err, errlen, "%s", tail ? tail : msg);
        }
        c->n = 1;
        return 0;
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", c->dir);
    if (!(c->index = load_read_json(path, "checkpoint model.safetensors.index.json (and no "
                                    "model.safetensors)", err, errlen)))
        return -1;
    c->weight_map = json_object_get(c->index, "weight_map");
    if (!json_is_object(c->weight_map))
        return load_fail(err, errlen, "model.safetensors.index.json: weight_map is not an "
                         "object");
    return 0;
}

static void ckpt_close(struct ckpt *c)
{
    for (int i = 0; i < c->n; i++)
        st_close(&c->shard[i].f);
    json_decref(c->index);
}

/* 3. The layer's tensors onto the model (model.h's layout). */
static int map_layer(struct ckpt *c, struct load *ld, const struct hfcfg *h)
{
    static const char *const proj[4] = {"self_attn.q_proj", "self_attn.k_proj",
                                        "self_attn.v_proj", "self_attn.o_proj"};
    struct model *m = ld->m;
    const long E = (long)h->E, dq = (long)(h->H * h->d), dkv = (long)(h->Hkv * h->d);
    const long rows[4] = {dq, dkv, dkv, E}, cols[4] = {E, E, E, dq};
    float **dst[4] = {&m->w[ATT_W_Q], &m->w[ATT_W_K], &m->w[ATT_W_V], &m->w[ATT_W_OUT]};
    char key[64];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "%s.weight", proj[i]);
        if (locate(c, ld, key, 0) || load_take(ld, dst[i], key, 0, rows[i], cols[i]))
            return -1;
    }
    for (int i = 0; i < 4 && !h->bias; i++) {
        snprintf(key, sizeof key, "%s.bias", proj[i]);
        int rc = locate(c, ld, key, 1);
        if (rc < 0)
            return -1;
        if (!rc)
            return load_fail(ld->err, ld->errlen, "%s: the checkpoint has %s%s, but its "
                             "config.json's attention_bias is false (or absent)", ld->file,
                             ld->prefix, key);
    }
    if (!h->bias)
        return 0;
    /* the weights above are in the file: dq + 2·dkv floats are backed */
    if (!(m->w[ATT_W_IN_BIAS] = malloc((size_t)(dq + 2 * dkv) * sizeof(float))))
        return load_fail(ld->err, ld->errlen, "out of memory");
    const long at[3] = {0, dq, dq + dkv};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%s.bias", proj[i]);
        const struct st_tensor *t;
        if (locate(c, ld, key, 0) || !(t = load_checked(ld, key, rows[i], -1)) ||
            load_convert(ld, m->w[ATT_W_IN_BIAS] + at[i], t))
            return -1;
    }
    return locate(c, ld, "self_attn.o_proj.bias", 0) ||
                   load_take(ld, &m->w[ATT_W_OUT_BIAS], "self_attn.o_proj.bias", 0, E, -1)
               ? -1
               : 0;
}

/* 1. The model's own config: checkpoint, layer, prefix, num_heads, hf_ignore. */
static int model_config(json_t *cfg, const char *folder, struct ckpt *c, long long *layer,
                        char *prefix, char *err, size_t errlen)
{
    const char *ck = json_string_value(json_object_get(cfg, "checkpoint"));
    if (!ck || !ck[0])
        return load_fail(err, errlen, "config.json: checkpoint (the Hugging Face folder) is "
                         "missing or not a string");
    int n = ck[0] == '/' ? snprintf(c->dir, sizeof c->dir, "%s", ck)
                         : snprintf(c->dir, sizeof c->dir, "%s/%s", folder, ck);
    if (n < 0 || (size_t)n >= sizeof c->dir)
        return load_fail(err, errlen, "config.json: checkpoint path too long");
    json_t *l = json_object_get(cfg, "layer");
    if (!json_is_integer(l) || json_integer_value(l) < 0 || json_integer_value(l) >= 1L << 20)
        return load_fail(err, errlen, "config.json: layer is not an integer >= 0");
    *layer = json_integer_value(l);
    json_t *p = json_object_get(cfg, "prefix");
    if (p && (!json_is_string(p) || json_string_length(p) > MODEL_PREFIX_MAX))
        return load_fail(err, errlen, "config.json: prefix is not a string of at most %d "
                         "bytes", MODEL_PREFIX_MAX);
    if (p)
        snprintf(prefix, MODEL_PREFIX_MAX + 1, "%s", json_string_value(p));
    else
        snprintf(prefix, MODEL_PREFIX_MAX + 1, "model.layers.%lld.", *layer);
    json_t *ig = json_object_get(cfg, "hf_ignore");
    if (ig && !json_is_array(ig))
        return load_fail(err, errlen, "config.json: hf_ignore is not an array of field "
                         "names");
    return 0;
}

int model_load_hf(struct model *m, json_t *cfg, const char *folder, char *err, size_t errlen)
{
    struct ckpt *c = calloc(1, sizeof *c);
    char prefix[MODEL_PREFIX_MAX + 1], path[sizeof c->dir + 16];
    struct hfcfg h = {0};
    long long layer = 0;
    int rc = -1;
    if (!c)
        return load_fail(err, errlen, "out of memory");
    if (model_config(cfg, folder, c, &layer, prefix, err, errlen))
        goto done;
    snprintf(path, sizeof path, "%s/config.json", c->dir);
    if (!(m->hf_config = load_read_json(path, "checkpoint config.json", err, errlen)))
        goto done;
    if (!json_is_object(m->hf_config)) {
        load_fail(err, errlen, "checkpoint config.json: not a JSON object");
        goto done;
    }
    if (known_fields(m, m->hf_config, json_object_get(cfg, "hf_ignore"), err, errlen) ||
        read_hf_config(m, m->hf_config, layer, &h, err, errlen))
        goto done;
    json_t *nh = json_object_get(cfg, opt_name(OPT_NUM_HEADS));
    if (nh && json_integer_value(nh) != h.H) {
        load_fail(err, errlen, "config.json: num_heads does not match the checkpoint's "
                  "num_attention_heads = %lld", h.H);
        goto done;
    }
    m->H = (int)h.H, m->Hkv = (int)h.Hkv, m->head_dim = (int)h.d, m->layer = (int)layer;
    m->E = m->kdim = m->vdim = (int)h.E;
    struct load ld = {m, NULL, "model.safetensors", prefix, err, errlen};
    if (ckpt_open(c, err, errlen) || map_layer(c, &ld, &h))
        goto done;
    json_t *d = derived_defaults(&h);
    if (!d) {
        load_fail(err, errlen, "out of memory");
        goto done;
    }
    rc = model_set_defaults(m, d, json_object_get(cfg, "defaults"), err, errlen);
done:
    ckpt_close(c); /* the files' pages leave the process here */
    free(c);
    return rc;
}
