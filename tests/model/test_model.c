/* test_model.c -- model/safetensors.c and model/model.c: the reader's
 * conversions and what it accepts, every good model of tests/models/repo
 * against its layout and its golden case (tests/models/golden, made by
 * tests/gen_models.py), and every broken case of tests/models/broken
 * against the error its manifest expects. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/attention.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "tests/support/check.h"
#include "tests/support/fixture.h"
#include "tests/support/golden.h"
#include "tests/support/testdata.h"

#define REPO "tests/models/repo"
#define BROKEN "tests/models/broken"

/* A safetensors buffer: header text, then len bytes of data (malloc'd). */
static unsigned char *st_make(const char *header, const void *data, size_t len, size_t *total)
{
    size_t n = strlen(header);
    unsigned char *b = malloc(8 + n + len + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((unsigned long long)n >> (8 * i));
    memcpy(b + 8, header, n);
    if (len)
        memcpy(b + 8 + n, data, len);
    *total = 8 + n + len;
    return b;
}

/* st_parse on header + data: 0 or -1, err filled. */
static int parse(const char *header, const void *data, size_t len, char *err)
{
    size_t total;
    unsigned char *b = st_make(header, data, len, &total);
    struct st_file f;
    int rc = st_parse(&f, b, total, err, 256);
    if (!rc)
        st_close(&f);
    free(b);
    return rc;
}

/* The value of binary16 h, from its definition. */
static float f16_value(unsigned h)
{
    unsigned e = (h >> 10) & 31, m = h & 1023;
    float s = h & 0x8000 ? -1.0f : 1.0f;
    if (e == 31)
        return m ? NAN : s * INFINITY;
    return s * (e ? ldexpf((float)(1024 + m), (int)e - 25) : ldexpf((float)m, -24));
}

Test(safetensors, f16_and_bf16_convert_exactly)
{
    static uint16_t h[65536];
    static float got[65536];
    for (unsigned i = 0; i < 65536; i++)
        h[i] = (uint16_t)i; /* x86-64: little-endian as the format */
    for (int bf = 0; bf < 2; bf++) {
        char hdr[128], err[256];
        snprintf(hdr, sizeof hdr,
                 "{\"t\":{\"dtype\":\"%s\",\"shape\":[256,256],\"data_offsets\":[0,131072]}}",
                 bf ? "BF16" : "F16");
        size_t total;
        unsigned char *b = st_make(hdr, h, sizeof h, &total);
        struct st_file f;
        cr_assert_eq(st_parse(&f, b, total, err, sizeof err), 0, "%s", err);
        const struct st_tensor *t = st_find(&f, "t");
        cr_assert(t && t->count == 65536 && t->nbytes == 131072);
        cr_assert_eq(st_to_f32(got, t), 0);
        int bad = 0;
        for (unsigned i = 0; i < 65536 && bad < 5; i++) {
            float want;
            if (bf) {
                uint32_t u = i << 16;
                memcpy(&want, &u, 4);
            } else {
                want = f16_value(i);
            }
            int same = isnan(want) ? isnan(got[i]) : got[i] == want && !signbit(got[i]) ==
                                                                         !signbit(want);
            if (!same)
                fprintf(stderr, "%s 0x%04x: got %g, want %g\n", bf ? "BF16" : "F16", i,
                        (double)got[i], (double)want);
            bad += !same;
        }
        cr_assert_eq(bad, 0);
        st_close(&f);
        free(b);
    }
    cr_assert_eq(f16_value(0x0001), ldexpf(1.0f, -24)); /* the reference itself */
    cr_assert_eq(f16_value(0x3C00), 1.0f);
    cr_assert_eq(f16_value(0x7BFF), 65504.0f);
}

Test(safetensors, accepts_what_the_reference_accepts)
{
    char err[256];
    float d[3] = {1.0f, 2.0f, 3.0f};
    cr_assert_eq(parse("{}", NULL, 0, err), 0, "%s", err);
    cr_assert_eq(parse("  \n{}\t\r\n  ", NULL, 0, err), 0, "%s", err); /* padding */
    cr_assert_eq(parse("{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]},"
                       "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                       "\"v\":{\"data_offsets\":[4,12],\"shape\":[2],\"dtype\":\"F32\"},"
                       "\"__metadata__\":{\"format\":\"pt\"}}",
                       d, sizeof d, err),
                 0, "%s", err);
    /* listed out of offset order; rank 0 has one element */
    size_t total;
    unsigned char *b = st_make("{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                               "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
                               d, sizeof d, &total);
    struct st_file f;
    cr_assert_eq(st_parse(&f, b, total, err, sizeof err), 0, "%s", err);
    const struct st_tensor *a = st_find(&f, "a"), *bb = st_find(&f, "b");
    cr_assert(a && bb && !st_find(&f, "c"));
    cr_assert_eq(a->ndim, 0);
    cr_assert_eq(a->count, 1);
    float got[2];
    cr_assert_eq(st_to_f32(got, bb), 0);
    cr_assert(got[0] == 2.0f && got[1] == 3.0f);
    st_close(&f);
    free(b);
}

Test(safetensors, refuses_what_the_reference_refuses)
{
    static const struct {
        const char *header;
        size_t data;
        const char *want;
    } cases[] = {
        {"[]", 0, "not a JSON object"},
        {"{\"a\":1}", 0, "\"a\": entry is not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, "missing field \"data_offsets\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "end before"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "[begin, end]"},
        {"{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2,
         "not a whole number of bytes"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
         0, "element count overflows"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,0]}}",
         0, "byte size overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "hole"},
        {"{\"__metadata__\":[\"x\"]}", 0, "__metadata__ is not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "JSON"},
    };
    char err[256];
    static const unsigned char zero[8];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(parse(cases[i].header, zero, cases[i].data, err), -1, "%s",
                     cases[i].header);
        cr_assert(strstr(err, cases[i].want), "%s: got \"%s\", want \"%s\"", cases[i].header,
                  err, cases[i].want);
    }
    /* a header length that does not fit: the reference's HeaderTooLarge */
    unsigned char big[16] = {0, 0, 0, 0, 0, 0, 0, 0x80, '{', '}'};
    struct st_file f;
    cr_assert_eq(st_parse(&f, big, sizeof big, err, sizeof err), -1);
    cr_assert(strstr(err, "header too large"), "%s", err);
    cr_assert_eq(st_open(&f, "tests/models", err, sizeof err), -1);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
    char dir[] = "/tmp/test_model.XXXXXX", fifo[64];
    cr_assert(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int rc = st_open(&f, fifo, err, sizeof err); /* must not wait for a writer */
    unlink(fifo);
    rmdir(dir);
    cr_assert_eq(rc, -1);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
}

/* A file that shrinks or is rewritten after st_open(): the read of a tensor
 * ends with an error, never a SIGBUS (the file used to be mapped). */
Test(safetensors, a_file_that_changes_while_it_is_read_is_an_error)
{
    enum { COUNT = 3 << 20 }; /* 6 MB of F16: several pieces of the reader */
    char hdr[128], err[512], dir[] = "/tmp/test_model.XXXXXX", path[64];
    snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"F16\",\"shape\":[%d],"
             "\"data_offsets\":[0,%d]}}", COUNT, 2 * COUNT);
    unsigned short *h = malloc(2 * (size_t)COUNT);
    float *got = malloc(sizeof *got * (size_t)COUNT);
    cr_assert(h && got && mkdtemp(dir));
    for (int i = 0; i < COUNT; i++)
        h[i] = 0x3C00; /* 1.0 */
    size_t total;
    unsigned char *b = st_make(hdr, h, 2 * (size_t)COUNT, &total);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    for (int how = 0; how < 3; how++) {
        FILE *fp = fopen(path, "wb");
        cr_assert(fp && fwrite(b, 1, total, fp) == total && fclose(fp) == 0);
        struct st_file f;
        cr_assert_eq(st_open(&f, path, err, sizeof err), 0, "%s", err);
        const struct st_tensor *t = st_find(&f, "w");
        int fd = open(path, O_WRONLY);
        cr_assert(t && fd >= 0);
        if (how == 0) {      /* cp new model.safetensors: truncated first */
            cr_assert_eq(ftruncate(fd, (off_t)total / 2), 0);
        } else if (how == 1) { /* rewritten in place, same length, later */
            const unsigned short two = 0x4000;
            cr_assert_eq(pwrite(fd, &two, 2, (off_t)(total - 2)), 2);
            struct timespec ts[2] = {{0, UTIME_OMIT}, {time(NULL) + 5, 0}};
            cr_assert_eq(futimens(fd, ts), 0);
        } else {             /* replaced by a rename: the open file is the old one */
            char other[80];
            snprintf(other, sizeof other, "%s/new.safetensors", dir);
            FILE *np = fopen(other, "wb");
            cr_assert(np && fwrite(b, 1, 100, np) == 100 && fclose(np) == 0);
            cr_assert_eq(rename(other, path), 0);
        }
        close(fd);
        int rc = st_read_f32(&f, got, t, err, sizeof err);
        if (how < 2) {
            cr_assert_eq(rc, -1, "case %d: read a changed file", how);
            cr_assert(strstr(err, "changed while it was read"), "case %d: %s", how, err);
            cr_assert(strstr(err, "renaming"), "case %d: %s", how, err);
        } else {
            cr_assert_eq(rc, 0, "%s", err);
            cr_assert(got[0] == 1.0f && got[COUNT - 1] == 1.0f);
        }
        st_close(&f);
    }
    unlink(path);
    rmdir(dir);
    free(b), free(h), free(got);
}

static struct model *load(const char *name)
{
    struct model *m;
    char err[512];
    cr_assert_eq(model_load(&m, REPO, name, err, sizeof err), 0, "%s: %s", name, err);
    return m;
}

static void assert_same(const char *what, const float *a, const float *b, size_t n)
{
    cr_assert(a && b, "%s: missing", what);
    cr_assert(check_tensor(what, a, b, n, 0.0, 0.0), "%s differs", what);
}

Test(model, layouts_of_the_same_weights_agree)
{
    static const char *const dt[] = {"f32", "f16", "bf16"}, *const DT[] = {"F32", "F16", "BF16"};
    for (int d = 0; d < 3; d++) {
        char name[3][32];
        struct model *m[3];
        snprintf(name[0], 32, "mha_%s", dt[d]);
        snprintf(name[1], 32, "bert_%s", dt[d]);
        snprintf(name[2], 32, "gpt2_%s", dt[d]);
        for (int i = 0; i < 3; i++) {
            m[i] = load(name[i]);
            cr_assert(m[i]->E == 16 && m[i]->H == 4 && m[i]->kdim == 16 && m[i]->vdim == 16);
            cr_assert_eq(m[i]->format, i);
            cr_assert_str_eq(m[i]->dtype, DT[d]);
            cr_assert(!m[i]->w[ATT_W_Q] && !m[i]->w[ATT_W_K] && !m[i]->w[ATT_W_V]);
            cr_assert_eq(m[i]->bytes, (3 * 256 + 48 + 256 + 16) * sizeof(float));
            cr_assert(json_is_object(m[i]->defaults) && json_object_size(m[i]->defaults) == 0);
        }
        for (int i = 1; i < 3; i++) {
            assert_same(name[i], m[i]->w[ATT_W_IN], m[0]->w[ATT_W_IN], 3 * 256);
            assert_same(name[i], m[i]->w[ATT_W_IN_BIAS], m[0]->w[ATT_W_IN_BIAS], 48);
            assert_same(name[i], m[i]->w[ATT_W_OUT], m[0]->w[ATT_W_OUT], 256);
            assert_same(name[i], m[i]->w[ATT_W_OUT_BIAS], m[0]->w[ATT_W_OUT_BIAS], 16);
        }
        for (int i = 0; i < 3; i++)
            model_free(m[i]);
    }
    struct model *s = load("mha_sep_bf16");
    cr_assert(s->E == 16 && s->kdim == 12 && s->vdim == 20 && !s->w[ATT_W_IN]);
    cr_assert(s->w[ATT_W_Q] && s->w[ATT_W_K] && s->w[ATT_W_V] && s->w[ATT_W_IN_BIAS]);
    model_free(s);
    struct model *c = load("gpt2_causal_f32");
    cr_assert_str_eq(json_string_value(json_object_get(c->defaults, "attn_mask")), "causal");
    model_free(c);
}

/* The float32 arrays against the file itself: gpt2 transposed, bert stacked. */
Test(model, maps_the_file_onto_the_layout)
{
    struct st_file f;
    char err[256];
    float cw[16 * 48], kw[256];
    struct model *g = load("gpt2_f32");
    cr_assert_eq(st_open(&f, REPO "/gpt2_f32/model.safetensors", err, sizeof err), 0, "%s", err);
    const struct st_tensor *t = st_find(&f, "h.1.attn.c_attn.weight");
    cr_assert(t && t->count == 16 * 48 && st_read_f32(&f, cw, t, err, sizeof err) == 0);
    for (int r = 0; r < 48; r++)
        for (int col = 0; col < 16; col++)
            cr_assert_eq(g->w[ATT_W_IN][r * 16 + col], cw[col * 48 + r], "(%d, %d)", r, col);
    st_close(&f);
    model_free(g);
    struct model *b = load("bert_f16");
    cr_assert_eq(st_open(&f, REPO "/bert_f16/model.safetensors", err, sizeof err), 0, "%s", err);
    t = st_find(&f, "bert.encoder.layer.1.attention.self.key.weight");
    cr_assert(t && t->count == 256 && st_read_f32(&f, kw, t, err, sizeof err) == 0);
    assert_same("key rows of in_proj_weight", b->w[ATT_W_IN] + 256, kw, 256);
    t = st_find(&f, "bert.encoder.layer.0.attention.self.key.weight");
    cr_assert(t && st_read_f32(&f, kw, t, err, sizeof err) == 0);
    cr_assert_neq(memcmp(b->w[ATT_W_IN] + 256, kw, sizeof kw), 0, "layer 0 was read");
    st_close(&f);
    model_free(b);
}

/* A rope default onto p. */
static void apply_rope(struct att_params *p, json_t *v)
{
    const char *style = json_string_value(json_object_get(v, "style"));
    p->rope_style = style && !strcmp(style, "interleaved") ? ATT_ROPE_INTERLEAVED : ATT_ROPE_HALF;
    p->rope_theta = json_number_value(json_object_get(v, "theta"));
    p->rope_rotary_dim = (int)json_integer_value(json_object_get(v, "rotary_dim"));
}

/* The model's defaults where the request does not set the option, as
 * POST /attention reads them (the variants' names as model.h gives them). */
static void apply_defaults(struct att_params *p, json_t *defaults, json_t *req)
{
    const char *key;
    json_t *v;
    json_object_foreach (defaults, key, v) {
        if (json_object_get(req, key))
            continue;
        const char *s = json_string_value(v);
        if (!strcmp(key, "attn_mask"))
            p->mask_kind = !strcmp(s, "causal_lower_right") ? ATT_MASK_CAUSAL_LOWER_RIGHT
                                                             : ATT_MASK_CAUSAL;
        else if (!strcmp(key, "scale"))
            p->has_scale = 1, p->scale = (float)json_number_value(v);
        else if (!strcmp(key, "positional_encoding"))
            p->positional_encoding = 1;
        else if (!strcmp(key, "need_weights"))
            p->weights_mode = json_is_false(v) ? ATT_WEIGHTS_NONE : p->weights_mode;
        else if (!strcmp(key, "average_attn_weights"))
            p->weights_mode = json_is_true(v) && p->weights_mode != ATT_WEIGHTS_NONE
                                  ? ATT_WEIGHTS_AVERAGE
                                  : p->weights_mode;
        else if (!strcmp(key, "num_kv_heads"))
            p->Hkv = (int)json_integer_value(v);
        else if (!strcmp(key, "head_dim"))
            p->head_dim = (int)json_integer_value(v);
        else if (!strcmp(key, "rope"))
            apply_rope(p, v);
        else if (!strcmp(key, "window"))
            p->has_window = 1, p->window_left = (int)json_integer_value(json_array_get(v, 0)),
            p->window_right = (int)json_integer_value(json_array_get(v, 1));
        else if (!strcmp(key, "softcap"))
            p->softcap = (float)json_number_value(v);
        else if (!strcmp(key, "query_position_offset"))
            p->query_position_offset = json_integer_value(v);
        else
            cr_assert_fail("default %s is not mapped by this test", key);
    }
}

/* Every golden case of dir (count of them) through forward, the model's
 * weights and defaults in place of the request's. */
static void run_goldens(const char *dir, int count,
                        int (*forward)(float *, float *, const struct att_params *,
                                       struct att_error *))
{
    att_init(1);
    char *paths[64];
    int n = testdata_list(dir, paths, 64), failed = 0;
    cr_assert_eq(n, count, "expected %d golden cases in %s, found %d", count, dir, n);
    for (int i = 0; i < n; i++) {
        json_t *doc = json_load_file(paths[i], 0, NULL);
        json_t *req = json_object_get(doc, "request");
        const char *name = json_string_value(json_object_get(req, "model"));
        cr_assert(name && !json_object_get(req, "weights") && !json_object_get(req, "num_heads"),
                  "%s: request names a model and nothing else of it", paths[i]);
        struct model *m = load(name);
        struct golden g;
        char msg[256];
        cr_assert_eq(golden_load(&g, paths[i], msg), 0, "%s", msg);
        struct att_params *p = &g.p;
        p->H = m->H;
        for (int w = 0; w < ATT_NWEIGHTS; w++)
            p->w[w] = m->w[w], p->w_len[w] = m->w_len[w];
        apply_defaults(p, m->defaults, req);
        size_t olen, wlen;
        struct att_error err;
        cr_assert_eq(att_check(p, &olen, &wlen, &err), ATT_OK, "%s: %s", name, err.msg);
        cr_assert_eq(olen, g.expected_out_len, "%s: output length", name);
        cr_assert_eq(wlen, g.expected_weights_len, "%s: weights length", name);
        float *out = malloc(olen * sizeof *out), *w = wlen ? malloc(wlen * sizeof *w) : NULL;
        cr_assert_eq(forward(out, w, p, &err), ATT_OK, "%s: %s", name, err.msg);
        int ok = check_tensor_torch(name, out, g.expected_out, g.expected_out32, olen, OUT_ATOL,
                                    OUT_RTOL);
        if (wlen)
            ok &= check_tensor_torch(name, w, g.expected_weights, g.expected_weights32, wlen,
                                     W_ATOL, 0.0);
        failed += !ok;
        free(out), free(w);
        golden_deinit(&g);
        model_free(m);
        json_decref(doc);
        free(paths[i]);
    }
    cr_assert_eq(failed, 0, "%d golden comparisons failed", failed);
}

Test(model, matches_the_golden_cases)
{
    run_goldens("tests/models/golden", 13, att_forward);
}

/* The Hugging Face layers (tests/gen_hf.py) against HF's eager attention:
 * GQA, head_dim, RoPE, window, soft-cap and scale all from the defaults the
 * loader derived, through the reference (the fast kernel's variants are
 * checked against it in test_attention.c). */
Test(model, hf_layers_match_hugging_face)
{
    run_goldens("tests/models/golden/hf", 5, att_forward_ref);
}

Test(model, refuses_every_broken_case)
{
    json_error_t jerr;
    json_t *manifest = json_load_file(BROKEN "/expected.json", 0, &jerr);
    cr_assert(json_is_object(manifest), "%s", jerr.text);
    cr_assert_gt(json_object_size(manifest), 0, "expected.json lists no case");
    const char *name;
    json_t *want;
    json_object_foreach (manifest, name, want) {
        struct model *m = (struct model *)1;
        char err[512] = "";
        cr_assert_eq(model_load(&m, BROKEN, name, err, sizeof err), -1, "%s loaded", name);
        cr_assert_null(m, "%s: *out set on failure", name);
        cr_assert(strstr(err, json_string_value(want)), "%s: got \"%s\", want \"%s\"", name,
                  err, json_string_value(want));
    }
    /* every folder is a case of the manifest */
    DIR *d = opendir(BROKEN);
    cr_assert(d);
    size_t folders = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && !strchr(e->d_name, '.')) {
            cr_assert(json_object_get(manifest, e->d_name), "%s: not in expected.json",
                      e->d_name);
            folders++;
        }
    closedir(d);
    cr_assert_eq(folders, json_object_size(manifest));
    json_decref(manifest);
}

Test(model, refuses_unsafe_names)
{
    static const char *const names[] = {"", ".", "..", "../repo/mha_f32", ".hidden", "a/b",
                                        "a b", "attention", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct model *m;
        char err[512];
        cr_assert_eq(model_load(&m, REPO, names[i], err, sizeof err), -1, "\"%s\"", names[i]);
        cr_assert(strstr(err, "model name"), "\"%s\": %s", names[i], err);
    }
    struct model *m;
    char err[512];
    cr_assert_eq(model_load(&m, REPO, "no_such_model", err, sizeof err), -1);
    cr_assert(strstr(err, "config.json"), "%s", err);
    model_free(NULL);
}

Test(model, parses_from_memory)
{
    size_t len;
    char *buf = fixture_read(REPO "/mha_f32/model.safetensors", &len);
    static const char cfg[] = "{\"format\":\"torch_mha\",\"num_heads\":2,\"extra\":[1]}";
    struct model *m;
    char err[512];
    cr_assert_eq(model_parse(&m, "x", cfg, strlen(cfg), buf, len, err, sizeof err), 0, "%s",
                 err);
    cr_assert(m->H == 2 && m->E == 16 && json_object_get(m->config, "extra"));
    model_free(m);
    cr_assert_eq(model_parse(&m, "x", cfg, strlen(cfg), buf, len - 1, err, sizeof err), -1);
    cr_assert(strstr(err, "model.safetensors: ") && strstr(err, "missing bytes"), "%s", err);
    free(buf);
}
