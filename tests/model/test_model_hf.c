/* test_model_hf.c -- model/hf.c: the hf_llama, hf_mistral and hf_gemma2
 * models of tests/models/repo (checkpoints in tests/models/hf, made by
 * tests/gen_hf.py) against the checkpoint's own tensors, shards included,
 * and the defaults each derives. (Their numbers against Hugging Face's
 * attention: test_model.c, hf_layers_match_hugging_face; their refusals:
 * the hf_* cases of tests/models/broken.) */
#include <criterion/criterion.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/model.h"
#include "model/safetensors.h"
#include "tests/support/check.h"

#define REPO "tests/models/repo"
#define HF "tests/models/hf"

static struct model *load(const char *name)
{
    struct model *m;
    char err[512];
    cr_assert_eq(model_load(&m, REPO, name, err, sizeof err), 0, "%s: %s", name, err);
    return m;
}

/* n floats of got against tensor name of the checkpoint file, exactly. */
static void same_as_file(const char *file, const char *name, const float *got, size_t n)
{
    struct st_file f;
    char err[256];
    cr_assert(got, "%s: not loaded", name);
    cr_assert_eq(st_open(&f, file, err, sizeof err), 0, "%s", err);
    const struct st_tensor *t = st_find(&f, name);
    cr_assert(t, "%s: not in %s", name, file);
    cr_assert_eq(t->count, n, "%s: %llu elements, the model has %zu", name,
                 (unsigned long long)t->count, n);
    float *want = malloc(n * sizeof *want);
    cr_assert_eq(st_read_f32(&f, want, t, err, sizeof err), 0, "%s", err);
    cr_assert(check_tensor(name, got, want, n, 0.0, 0.0), "%s differs from %s", name, file);
    free(want);
    st_close(&f);
}

/* defaults.key as compact JSON equals want (NULL: absent). */
static void has_default(const struct model *m, const char *key, const char *want)
{
    json_t *v = json_object_get(m->defaults, key);
    char *got = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!want)
        cr_assert_null(got, "%s: defaults.%s = %s, want none", m->name, key, got);
    else
        cr_assert(got && !strcmp(got, want), "%s: defaults.%s = %s, want %s", m->name, key,
                  got ? got : "(none)", want);
    free(got);
}

Test(model_hf, llama_layer_from_two_shards)
{
    struct model *m = load("llama_l1");
    cr_assert_eq(m->format, MODEL_HF_LLAMA);
    cr_assert(m->E == 32 && m->kdim == 32 && m->vdim == 32 && m->H == 4 && m->Hkv == 2 &&
                  m->head_dim == 8 && m->layer == 1,
              "E %d kdim %d vdim %d H %d Hkv %d d %d layer %d", m->E, m->kdim, m->vdim, m->H,
              m->Hkv, m->head_dim, m->layer);
    cr_assert(!m->w[ATT_W_IN] && !m->w[ATT_W_IN_BIAS] && !m->w[ATT_W_OUT_BIAS]);
    /* q, k in the first shard, v, o in the second */
    const char *s1 = HF "/llama/model-00001-of-00002.safetensors",
               *s2 = HF "/llama/model-00002-of-00002.safetensors";
    same_as_file(s1, "model.layers.1.self_attn.q_proj.weight", m->w[ATT_W_Q], 32 * 32);
    same_as_file(s1, "model.layers.1.self_attn.k_proj.weight", m->w[ATT_W_K], 16 * 32);
    same_as_file(s2, "model.layers.1.self_attn.v_proj.weight", m->w[ATT_W_V], 16 * 32);
    same_as_file(s2, "model.layers.1.self_attn.o_proj.weight", m->w[ATT_W_OUT], 32 * 32);
    cr_assert_eq(m->bytes, (32 * 32 + 2 * 16 * 32 + 32 * 32) * sizeof(float));
    cr_assert_str_eq(m->dtype, "F32");
    has_default(m, "num_kv_heads", "2");
    has_default(m, "head_dim", "8");
    has_default(m, "rope", "{\"style\":\"half\",\"theta\":10000.0,\"rotary_dim\":8}");
    has_default(m, "attn_mask", "\"causal_lower_right\"");
    has_default(m, "window", NULL);
    has_default(m, "softcap", NULL);
    has_default(m, "scale", NULL);
    cr_assert_eq(json_integer_value(json_object_get(m->hf_config, "num_hidden_layers")), 2);
    model_free(m);
}

Test(model_hf, llama_biases_stack_into_in_proj_bias)
{
    struct model *m = load("llama_bias_l0");
    cr_assert(m->H == 4 && m->Hkv == 1 && m->head_dim == 8 && m->E == 32);
    cr_assert_str_eq(m->dtype, "F16");
    const char *f = HF "/llama_bias/model.safetensors";
    same_as_file(f, "model.layers.0.self_attn.k_proj.weight", m->w[ATT_W_K], 8 * 32);
    cr_assert(m->w[ATT_W_IN_BIAS], "no in_proj_bias");
    same_as_file(f, "model.layers.0.self_attn.q_proj.bias", m->w[ATT_W_IN_BIAS], 32);
    same_as_file(f, "model.layers.0.self_attn.k_proj.bias", m->w[ATT_W_IN_BIAS] + 32, 8);
    same_as_file(f, "model.layers.0.self_attn.v_proj.bias", m->w[ATT_W_IN_BIAS] + 40, 8);
    same_as_file(f, "model.layers.0.self_attn.o_proj.bias", m->w[ATT_W_OUT_BIAS], 32);
    cr_assert_eq(m->bytes, (32 * 32 + 2 * 8 * 32 + 32 * 32 + 48 + 32) * sizeof(float));
    has_default(m, "num_kv_heads", "1");
    model_free(m);
}

Test(model_hf, mistral_window_and_a_users_override)
{
    struct model *m = load("mistral_l0");
    cr_assert_eq(m->format, MODEL_HF_MISTRAL);
    has_default(m, "window", "[2,0]"); /* sliding_window 3: the query and 2 before */
    has_default(m, "rope", "{\"style\":\"half\",\"theta\":1000000.0,\"rotary_dim\":8}");
    struct model *o = load("mistral_l0_full"); /* defaults {"window": null, "attn_mask": "causal"} */
    has_default(o, "window", NULL);
    has_default(o, "attn_mask", "\"causal\"");
    has_default(o, "num_kv_heads", "2");
    cr_assert(check_tensor("same weights", o->w[ATT_W_Q], m->w[ATT_W_Q], 32 * 32, 0, 0));
    model_free(o);
    model_free(m);
}

Test(model_hf, gemma2_head_dim_softcap_scale_and_the_window_by_layer)
{
    struct model *m[2] = {load("gemma2_l0"), load("gemma2_l1")};
    const char *f = HF "/gemma2/model.safetensors";
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(m[i]->format, MODEL_HF_GEMMA2);
        cr_assert(m[i]->H == 4 && m[i]->Hkv == 2 && m[i]->head_dim == 12 && m[i]->E == 32);
        char key[64];
        snprintf(key, sizeof key, "model.layers.%d.self_attn.q_proj.weight", i);
        same_as_file(f, key, m[i]->w[ATT_W_Q], 48 * 32); /* (H·d, E) = (48, 32) */
        snprintf(key, sizeof key, "model.layers.%d.self_attn.o_proj.weight", i);
        same_as_file(f, key, m[i]->w[ATT_W_OUT], 32 * 48);
        cr_assert_str_eq(m[i]->dtype, "BF16");
        has_default(m[i], "head_dim", "12");
        has_default(m[i], "softcap", "2.0");
        double scale = json_number_value(json_object_get(m[i]->defaults, "scale"));
        cr_assert_eq(scale, 1.0 / sqrt(10.0), "scale %.17g: query_pre_attn_scalar 10^-1/2",
                     scale);
    }
    has_default(m[0], "window", "[2,0]"); /* even layer: sliding, as HF's Gemma 2 */
    has_default(m[1], "window", NULL);
    model_free(m[0]);
    model_free(m[1]);
}

Test(model_hf, needs_a_folder)
{
    static const char cfg[] = "{\"format\":\"hf_llama\",\"checkpoint\":\"x\",\"layer\":0}";
    struct model *m;
    char err[512];
    cr_assert_eq(model_parse(&m, "x", cfg, strlen(cfg), "", 0, err, sizeof err), -1);
    cr_assert(strstr(err, "model_load() only"), "%s", err);
    cr_assert_null(m);
}

/* A temporary repository: model "m" with config.json cfg (%s: the
 * absolute path of tests/models/hf/mistral), loaded; 0 or -1 with err. */
static int load_with(const char *cfg_fmt, struct model **m, char *err, size_t errlen)
{
    char dir[] = "/tmp/test_model_hf.XXXXXX", path[512], ckpt[PATH_MAX];
    cr_assert(mkdtemp(dir) && realpath(HF "/mistral", ckpt));
    snprintf(path, sizeof path, "%s/m", dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/m/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, cfg_fmt, ckpt);
    fclose(f);
    int rc = model_load(m, dir, "m", err, errlen);
    unlink(path);
    snprintf(path, sizeof path, "%s/m", dir);
    rmdir(path);
    rmdir(dir);
    return rc;
}

Test(model_hf, a_users_defaults_are_checked_and_win)
{
    struct model *m;
    char err[512];
    cr_assert_eq(load_with("{\"format\": \"hf_mistral\", \"checkpoint\": \"%s\", \"layer\": 0, "
                           "\"defaults\": {\"sliding_window\": 5, \"head_dim\": 8, \"rope\": "
                           "{\"style\": \"interleaved\", \"rotary_dim\": 4}, \"softcap\": 30}}",
                           &m, err, sizeof err),
                 0, "%s", err);
    has_default(m, "window", "[4,0]"); /* Hugging Face's notation, stored as FA's */
    has_default(m, "rope", "{\"style\":\"interleaved\",\"rotary_dim\":4}");
    has_default(m, "softcap", "30");
    has_default(m, "head_dim", "8");
    model_free(m);
    static const struct {
        const char *defaults, *want;
    } bad[] = {
        {"{\"rope\": {\"style\": \"half\", \"rotary_dim\": 10}}", "defaults.rope"},
        {"{\"rope\": {\"theta\": 10000}}", "defaults.rope"},
        {"{\"head_dim\": 4}", "defaults.head_dim = 4"},
        {"{\"window\": [-2, 0]}", "defaults.window"},
        {"{\"softcap\": 0}", "defaults.softcap"},
        {"{\"attn_mask\": \"causal_upper\"}", "defaults.attn_mask"},
        {"{\"num_heads\": 4}", "defaults.num_heads is not an option"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"format\": \"hf_mistral\", \"checkpoint\": \"%%s\", "
                 "\"layer\": 0, \"defaults\": %s}", bad[i].defaults);
        cr_assert_eq(load_with(cfg, &m, err, sizeof err), -1, "%s loaded", bad[i].defaults);
        cr_assert(strstr(err, bad[i].want), "%s: got \"%s\", want \"%s\"", bad[i].defaults, err,
                  bad[i].want);
    }
    cr_assert_eq(load_with("{\"format\": \"hf_mistral\", \"checkpoint\": \"%s\", \"layer\": 0, "
                           "\"num_heads\": 8}", &m, err, sizeof err), -1);
    cr_assert(strstr(err, "num_heads does not match"), "%s", err);
    cr_assert_eq(load_with("{\"format\": \"hf_llama\", \"checkpoint\": \"%s\", \"layer\": 0}",
                           &m, err, sizeof err), -1);
    cr_assert(strstr(err, "model_type \"mistral\" is not hf_llama's"), "%s", err);
}
