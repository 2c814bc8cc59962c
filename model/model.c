/* model.c -- see model.h. model_load() reads config.json, opens
 * model.safetensors, reads and converts the used tensors to float32 and
 * closes the file; model_parse() is the same on two buffers. Each format
 * of one file has its own small mapping function; all of them go through
 * load_take() (load.h), which finds a key, checks its dtype and shape and
 * converts it. The hf_llama, hf_mistral and hf_gemma2 formats read a
 * checkpoint folder instead: hf.c. Then the defaults: defaults.c. */
#include "model/model.h"

#include "model/defaults.h"
#include "model/hf.h"
#include "model/load.h"
#include "model/safetensors.h"
#include "options/options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention.h"

/* config.json's format. */
static int config_format(struct model *m, json_t *cfg, char *err, size_t errlen)
{
    if (!json_is_object(cfg))
        return load_fail(err, errlen, "config.json: not a JSON object");
    const char *fmt = json_string_value(json_object_get(cfg, "format"));
    m->format = -1;
    for (int i = 0; fmt && i < MODEL_NFORMATS; i++)
        if (!strcmp(fmt, model_format_name(i)))
            m->format = i;
    if (m->format < 0)
        return load_fail(err, errlen, "config.json: format %s%.40s%s is unknown (torch_mha, "
                         "hf_bert, hf_gpt2, hf_llama, hf_mistral or hf_gemma2)",
                         fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "");
    return 0;
}

/* config.json's known keys for the formats of one file: prefix, num_heads. */
static int check_config(struct model *m, json_t *cfg, const char **prefix, char *err,
                        size_t errlen)
{
    json_t *p = json_object_get(cfg, "prefix");
    if (p && (!json_is_string(p) || json_string_length(p) > MODEL_PREFIX_MAX))
        return load_fail(err, errlen, "config.json: prefix is not a string of at most %d "
                         "bytes", MODEL_PREFIX_MAX);
    *prefix = p ? json_string_value(p) : "";
    json_t *h = json_object_get(cfg, opt_name(OPT_NUM_HEADS));
    if (!json_is_integer(h) || json_integer_value(h) < 1 || json_integer_value(h) > 65536)
        return load_fail(err, errlen, "config.json: num_heads is not an integer in 1..65536");
    m->H = (int)json_integer_value(h);
    return 0;
}

/* E from key, an (E, E) tensor (E in 1..65536), checked against
 * num_heads. Every later shape is a multiple of E, so a file that passes
 * here cannot make the loader allocate more than it holds. */
static int embed_dim(struct load *ld, const char *key)
{
    const struct st_tensor *t = load_find(ld, key);
    if (!t)
        return load_fail(ld->err, ld->errlen, "%s: missing key %s%s", ld->file, ld->prefix,
                         key);
    long e = t->ndim >= 1 && t->shape[0] >= 1 && t->shape[0] <= 65536 ? (long)t->shape[0] : 0;
    if (!e)
        return load_fail(ld->err, ld->errlen, "model.safetensors: %s has first dimension %llu, "
                         "expected E in 1..65536", t->name,
                         t->ndim ? (unsigned long long)t->shape[0] : 0ULL);
    if (!load_checked(ld, key, e, e))
        return -1;
    ld->m->E = (int)e;
    if (ld->m->E % ld->m->H)
        return load_fail(ld->err, ld->errlen, "model.safetensors: E = %d (from %s) is not "
                         "divisible by num_heads = %d", ld->m->E, t->name, ld->m->H);
    ld->m->kdim = ld->m->vdim = ld->m->E;
    return 0;
}

static int map_torch_mha(struct load *ld)
{
    struct model *m = ld->m;
    if (embed_dim(ld, "out_proj.weight"))
        return -1;
    long E = m->E;
    /* the keys of nn.MultiheadAttention's state_dict: the request's names
     * (att_weight_name), but out_proj.weight and out_proj.bias */
    const char *in = att_weight_name(ATT_W_IN), *q = att_weight_name(ATT_W_Q);
    const char *kn = att_weight_name(ATT_W_K), *vn = att_weight_name(ATT_W_V);
    if (load_find(ld, in) && load_find(ld, q))
        return load_fail(ld->err, ld->errlen, "model.safetensors: both %s%s and %s%s: one "
                         "layout only", ld->prefix, in, ld->prefix, q);
    if (load_find(ld, in) || !load_find(ld, q)) {
        if (load_take(ld, &m->w[ATT_W_IN], in, 0, 3 * E, E))
            return -1;
    } else {
        /* kdim, vdim from the k/v weights' second dimension */
        const struct st_tensor *k = load_find(ld, kn), *v = load_find(ld, vn);
        if (k && k->ndim == 2 && k->shape[1] >= 1 && k->shape[1] <= 65536)
            m->kdim = (int)k->shape[1];
        if (v && v->ndim == 2 && v->shape[1] >= 1 && v->shape[1] <= 65536)
            m->vdim = (int)v->shape[1];
        if (load_take(ld, &m->w[ATT_W_Q], q, 0, E, E) ||
            load_take(ld, &m->w[ATT_W_K], kn, 0, E, m->kdim) ||
            load_take(ld, &m->w[ATT_W_V], vn, 0, E, m->vdim))
            return -1;
    }
    return load_take(ld, &m->w[ATT_W_IN_BIAS], att_weight_name(ATT_W_IN_BIAS), 1, 3 * E, -1) ||
                   load_take(ld, &m->w[ATT_W_OUT], "out_proj.weight", 0, E, E) ||
                   load_take(ld, &m->w[ATT_W_OUT_BIAS], "out_proj.bias", 1, E, -1)
               ? -1
               : 0;
}

/* q, k and v straight into the stacked in_proj_weight and in_proj_bias. */
static int map_hf_bert(struct load *ld)
{
    static const char *const w[3] = {"attention.self.query.weight", "attention.self.key.weight",
                                     "attention.self.value.weight"};
    static const char *const b[3] = {"attention.self.query.bias", "attention.self.key.bias",
                                     "attention.self.value.bias"};
    struct model *m = ld->m;
    if (embed_dim(ld, w[0]))
        return -1;
    size_t E = (size_t)m->E;
    const struct st_tensor *tw[3], *tb[3];
    for (size_t i = 0; i < 3; i++) /* all there before the allocation */
        if (!(tw[i] = load_checked(ld, w[i], (long)E, (long)E)) ||
            !(tb[i] = load_checked(ld, b[i], (long)E, -1)))
            return -1;
    m->w[ATT_W_IN] = malloc(3 * E * E * sizeof(float));
    m->w[ATT_W_IN_BIAS] = malloc(3 * E * sizeof(float));
    if (!m->w[ATT_W_IN] || !m->w[ATT_W_IN_BIAS])
        return load_fail(ld->err, ld->errlen, "out of memory");
    for (size_t i = 0; i < 3; i++)
        if (load_convert(ld, m->w[ATT_W_IN] + i * E * E, tw[i]) ||
            load_convert(ld, m->w[ATT_W_IN_BIAS] + i * E, tb[i]))
            return -1;
    return load_take(ld, &m->w[ATT_W_OUT], "attention.output.dense.weight", 0, (long)E,
                     (long)E) ||
                   load_take(ld, &m->w[ATT_W_OUT_BIAS], "attention.output.dense.bias", 0,
                             (long)E, -1)
               ? -1
               : 0;
}

/* (rows, cols) row-major into (cols, rows), malloc'd. */
static float *transpose(struct load *ld, const float *a, size_t rows, size_t cols)
{
    float *t = malloc(rows * cols * sizeof *t);
    if (!t) {
        load_fail(ld->err, ld->errlen, "out of memory");
        return NULL;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            t[c * rows + r] = a[r * cols + c];
    return t;
}

static int map_hf_gpt2(struct load *ld)
{
    struct model *m = ld->m;
    if (embed_dim(ld, "attn.c_proj.weight"))
        return -1;
    size_t E = (size_t)m->E;
    float *cw = NULL, *pw = NULL;
    int rc = -1;
    /* Conv1D stores (in, out) and computes x·W: transposed to Linear's (out, in) */
    if (load_take(ld, &cw, "attn.c_attn.weight", 0, (long)E, 3 * (long)E) ||
        load_take(ld, &m->w[ATT_W_IN_BIAS], "attn.c_attn.bias", 0, 3 * (long)E, -1) ||
        load_take(ld, &pw, "attn.c_proj.weight", 0, (long)E, (long)E) ||
        load_take(ld, &m->w[ATT_W_OUT_BIAS], "attn.c_proj.bias", 0, (long)E, -1))
        goto done;
    if ((m->w[ATT_W_IN] = transpose(ld, cw, E, 3 * E)) &&
        (m->w[ATT_W_OUT] = transpose(ld, pw, E, E)))
        rc = 0;
done:
    free(cw), free(pw);
    return rc;
}

/* m->w_len from the shapes each array was checked and allocated at (the
 * core's, att_weight_shapes), and the bytes of float32 the model holds
 * (gpt2's temporaries gone). */
static void set_lens(struct model *m)
{
    const struct att_params p = {.E = m->E, .kdim = m->kdim, .vdim = m->vdim, .H = m->H,
                                 .Hkv = m->Hkv, .head_dim = m->head_dim};
    struct att_weight_shape s[ATT_NWEIGHTS];
    att_weight_shapes(s, &p);
    size_t n = 0;
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const size_t len = (size_t)s[i].d0 * (s[i].ndim == 2 ? (size_t)s[i].d1 : 1);
        n += m->w_len[i] = m->w[i] ? len : 0;
    }
    m->bytes = n * sizeof(float);
}

static int name_ok(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (!n || n >= sizeof ((struct model *)0)->name || name[0] == '.')
        return load_fail(err, errlen, "model name \"%.64s\" is not allowed (1..127 characters, "
                    "not starting with '.')", name);
    for (size_t i = 0; i < n; i++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-",
                    name[i]))
            return load_fail(err, errlen, "model name \"%.64s\" has a character outside "
                        "[A-Za-z0-9_.-]", name);
    if (!strcmp(name, MODEL_BUILTIN))
        return load_fail(err, errlen, "model name \"" MODEL_BUILTIN "\" is reserved");
    return 0;
}

/* A new model holding cfg (takes ownership), its name and format set. */
static struct model *model_new(const char *name, json_t *cfg, char *err, size_t errlen)
{
    struct model *m = calloc(1, sizeof *m);
    if (!m) {
        json_decref(cfg);
        load_fail(err, errlen, "out of memory");
        return NULL;
    }
    m->config = cfg;
    m->layer = -1;
    snprintf(m->name, sizeof m->name, "%s", name);
    if (config_format(m, cfg, err, errlen)) {
        model_free(m);
        return NULL;
    }
    return m;
}

static int is_hf_decoder(const struct model *m)
{
    return m->format == MODEL_HF_LLAMA || m->format == MODEL_HF_MISTRAL ||
           m->format == MODEL_HF_GEMMA2;
}

/* The formats of one file, once it is open: config, the format's keys,
 * the defaults. */
static int build(struct model *m, const struct st_file *f, char *err, size_t errlen)
{
    struct load ld = {m, f, "model.safetensors", "", err, errlen};
    if (check_config(m, m->config, &ld.prefix, err, errlen))
        return -1;
    int rc = m->format == MODEL_TORCH_MHA ? map_torch_mha(&ld)
             : m->format == MODEL_HF_BERT ? map_hf_bert(&ld)
                                          : map_hf_gpt2(&ld);
    if (rc)
        return -1;
    m->Hkv = m->H;
    m->head_dim = m->E / m->H;
    return model_set_defaults(m, NULL, json_object_get(m->config, "defaults"), err, errlen);
}

/* *out = m, or m freed on failure (rc). */
static int finish(struct model **out, struct model *m, int rc)
{
    if (rc) {
        model_free(m);
        return -1;
    }
    set_lens(m);
    *out = m;
    return 0;
}

int model_parse(struct model **out, const char *name, const char *config, size_t config_len,
                const void *st, size_t st_len, char *err, size_t errlen)
{
    *out = NULL;
    if (name_ok(name, err, errlen))
        return -1;
    json_error_t jerr;
    json_t *cfg = json_loadb(config, config_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!cfg)
        return load_fail(err, errlen, "config.json: %s (line %d)", jerr.text, jerr.line);
    struct model *m = model_new(name, cfg, err, errlen);
    if (!m)
        return -1;
    if (is_hf_decoder(m))
        return finish(out, m, load_fail(err, errlen, "config.json: format %s reads a "
                                        "checkpoint folder: model_load() only",
                                        model_format_name(m->format)));
    struct st_file f;
    char msg[256];
    if (st_parse(&f, st, st_len, msg, sizeof msg))
        return finish(out, m, load_fail(err, errlen, "model.safetensors: %s", msg));
    int rc = build(m, &f, err, errlen);
    st_close(&f);
    return finish(out, m, rc);
}

int model_load(struct model **out, const char *dir, const char *name, char *err,
               size_t errlen)
{
    *out = NULL;
    if (name_ok(name, err, errlen))
        return -1;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s/config.json", dir, name) >= (int)sizeof path)
        return load_fail(err, errlen, "model folder path too long");
    json_t *cfg = load_read_json(path, "config.json", err, errlen);
    if (!cfg)
        return -1;
    struct model *m = model_new(name, cfg, err, errlen);
    if (!m)
        return -1;
    if (is_hf_decoder(m)) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        return finish(out, m, model_load_hf(m, cfg, path, err, errlen));
    }
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, name);
    struct st_file f;
    char msg[sizeof path + 256];
    if (st_open(&f, path, msg, sizeof msg)) {
        /* st_open names the path; the file's name alone is enough here */
        const char *tail = strstr(msg, "model.safetensors: ");
        return finish(out, m, load_fail(err, errlen, "%s", tail ? tail : msg));
    }
    int rc = build(m, &f, err, errlen);
    st_close(&f);
    return finish(out, m, rc);
}

void model_free(struct model *m)
{
    if (!m)
        return;
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        free(m->w[i]);
    json_decref(m->defaults);
    json_decref(m->config);
    json_decref(m->hf_config);
    free(m);
}
