/* test_options.c -- the options table (options/options.h) against what reads
 * it and what documents it: every row is a property of openapi.yaml's
 * AttentionRequest (POST /attention) and its v2 parameters are properties
 * of InferParameters and accepted by the v2 parameter reader (and no other
 * option name is); a model default of an option the weights fix is
 * refused; the one rule of defaults (codec_values_defaults) merges rope
 * member by member for both protocols; the spec's weights are the core's. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options/options.h"
#include "codec/v2_params.h"
#include "codec/variants.h"
#include "model/model.h"
#include "tests/support/fixture.h"

#define SPEC_PATH FIXTURE_SPEC
#define REPO "tests/models/repo"

/* The names of the properties of components.schemas.<schema> (the keys
 * indented 8 spaces below its "properties:"), as one string "|a|b|...|". */
static char *schema_properties(const char *schema)
{
    const char *spec = fixture_spec();
    char head[96];
    snprintf(head, sizeof head, "\n    %s:\n", schema);
    const char *s = strstr(spec, head);
    cr_assert_not_null(s, "%s: no schema %s", SPEC_PATH, schema);
    s += strlen(head);
    const char *props = strstr(s, "\n      properties:\n");
    cr_assert_not_null(props, "%s: %s has no properties", SPEC_PATH, schema);
    static char out[8192];
    size_t n = 0;
    out[n++] = '|';
    /* the lines after "properties:" until one indented 6 or less */
    for (const char *l = props + strlen("\n      properties:\n"); *l;) {
        const char *eol = strchr(l, '\n');
        const size_t ll = eol ? (size_t)(eol - l) : strlen(l);
        size_t ind = 0;
        while (ind < ll && l[ind] == ' ')
            ind++;
        if (ind < ll && ind <= 6)
            break;
        const char *colon = memchr(l, ':', ll);
        if (ind == 8 && colon) {
            const size_t k = (size_t)(colon - (l + 8));
            cr_assert_lt(n + k + 2, sizeof out);
            memcpy(out + n, l + 8, k);
            n += k;
            out[n++] = '|';
        }
        if (!eol)
            break;
        l = eol + 1;
    }
    out[n] = '\0';
    return out;
}

static int has(const char *props, const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "|%s|", name);
    return strstr(props, key) != NULL;
}

Test(options, every_row_is_in_openapi)
{
    char *attention = strdup(schema_properties("AttentionRequest"));
    const char *infer = schema_properties("InferParameters");
    int rows = 0, v2 = 0;
    for (int id = 0; id < OPT_COUNT; id++) {
        const struct opt *o = opt_get((enum opt_id)id);
        cr_assert_not_null(o->name, "row %d has no name", id);
        cr_assert_not_null(o->doc, "%s has no doc line", o->name);
        cr_assert(!(o->flags & OPT_DEFAULT) || o->rule, "%s: a default without its rule",
                  o->name);
        if (o->flags & OPT_ATTENTION) {
            cr_assert(has(attention, o->name), "%s: AttentionRequest has no property %s",
                      SPEC_PATH, o->name);
            rows++;
        }
        for (int i = 0; opt_v2((enum opt_id)id, i); i++, v2++)
            cr_assert(has(infer, opt_v2((enum opt_id)id, i)),
                      "%s: InferParameters has no property %s (option %s)", SPEC_PATH,
                      opt_v2((enum opt_id)id, i), o->name);
    }
    /* and the other way: every documented field is a row */
    for (char *p = attention + 1, *bar; (bar = strchr(p, '|')); p = bar + 1) {
        *bar = '\0';
        cr_assert_geq(opt_find(p), 0, "%s: AttentionRequest.%s is not a row of the options "
                      "table", SPEC_PATH, p);
        rows--;
    }
    cr_assert_eq(rows, 0);
    cr_assert_gt(v2, 0);
    free(attention);
}

/* The weights: openapi.yaml's Weights schema names exactly the core's
 * weights (att_weight_name, in the enum's order), and a v2 input may be
 * each of them: an eighth weight cannot reach the code without the spec. */
Test(options, the_spec_weights_are_the_cores)
{
    char want[512];
    size_t n = 0;
    want[n++] = '|';
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        n += (size_t)snprintf(want + n, sizeof want - n, "%s|",
                              att_weight_name((enum att_weight)i));
    cr_assert_str_eq(schema_properties("Weights"), want,
                     "%s: the Weights schema's properties are not the core's weights", SPEC_PATH);
    const char *spec = fixture_spec();
    const char *inputs = strstr(spec, "enum: [query, key, value, attn_mask, key_padding_mask, ");
    cr_assert_not_null(inputs, "%s: the v2 input names' enum is missing", SPEC_PATH);
    const char *end = strchr(inputs, ']');
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        const char *w = att_weight_name((enum att_weight)i), *at = strstr(inputs, w);
        cr_assert(at && at < end, "%s: the v2 input names' enum lacks %s", SPEC_PATH, w);
    }
}

/* The request table of docs/api.md: its first column names (in
 * backquotes, several to a cell) every POST /attention option, and only
 * those. */
Test(options, every_row_is_in_the_api_docs)
{
    char *doc = fixture_read("docs/api.md", NULL);
    char *table = strstr(doc, "\n| `query` |");
    cr_assert_not_null(table, "docs/api.md has no request table (a row for query)");
    int seen[OPT_COUNT] = {0};
    for (char *line = table + 1; line[0] == '|'; line = strchr(line, '\n') + 1) {
        char *end = strchr(line + 1, '|');
        cr_assert_not_null(end);
        for (char *q = line; (q = memchr(q, '`', (size_t)(end - q))) && q < end;) {
            char *close = memchr(q + 1, '`', (size_t)(end - q - 1));
            cr_assert_not_null(close, "docs/api.md: an unclosed backquote in a first column");
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(close - q - 1), q + 1);
            const int id = opt_find(name);
            cr_assert_geq(id, 0, "docs/api.md documents %s, which is not a row of the options "
                          "table", name);
            seen[id] = 1;
            q = close + 1;
        }
        if (!strchr(line, '\n'))
            break;
    }
    for (int id = 0; id < OPT_COUNT; id++)
        if (opt_get((enum opt_id)id)->flags & OPT_ATTENTION)
            cr_expect(seen[id], "docs/api.md's request table has no row for %s",
                      opt_name((enum opt_id)id));
    free(doc);
}

/* The one place: outside options/options.c, no C file of the service spells
 * an option's wire name (its name or a v2 parameter name) as a string
 * literal; the others ask the table (opt_name, opt_v2). Hugging Face's
 * config keys that share a name stay with their reader, model/hf.c. */
static const char *const layers[] = {"lib", "core", "config", "options", "model", "codec", "api",
                                     "http"};
static const struct { const char *file, *name; } foreign[] = {
    {"model/hf.c", "head_dim"}, {"model/hf.c", "rope_theta"}, {"model/hf.c", "layer"}};

static int is_foreign(const char *file, const char *name)
{
    for (size_t k = 0; k < sizeof foreign / sizeof foreign[0]; k++)
        if (!strcmp(file, foreign[k].file) && !strcmp(name, foreign[k].name))
            return 1;
    return 0;
}

/* The literals of one source file, comments blanked: "|a|b|...|". */
static char *literals_of(const char *path)
{
    size_t len;
    char *src = fixture_read(path, &len);
    char *out = malloc(len + 2), *o = out;
    cr_assert_not_null(out);
    *o++ = '|';
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '/' && src[i + 1] == '*') {
            const char *e = strstr(src + i + 2, "*/");
            i = e ? (size_t)(e - src) + 1 : len;
        } else if (src[i] == '/' && src[i + 1] == '/') {
            while (i < len && src[i] != '\n')
                i++;
        } else if (src[i] == '\'' ) {
            i += src[i + 1] == '\\' ? 3 : 2; /* a character constant */
        } else if (src[i] == '"') {
            for (i++; i < len && src[i] != '"'; i++) {
                if (src[i] == '\\')
                    *o++ = src[i++];
                *o++ = src[i];
            }
            *o++ = '|';
        }
    }
    *o = '\0';
    free(src);
    return out;
}

Test(options, every_wire_name_is_spelled_in_one_c_file)
{
    char path[512];
    int files = 0;
    for (size_t l = 0; l <= sizeof layers / sizeof layers[0]; l++) {
        const char *dir = l < sizeof layers / sizeof layers[0] ? layers[l] : ".";
        DIR *d = opendir(dir);
        cr_assert_not_null(d, "cannot open %s/ (tests run from the repository root)", dir);
        for (struct dirent *e; (e = readdir(d));) {
            const size_t n = strlen(e->d_name);
            if (n < 3 || e->d_name[n - 2] != '.' || (e->d_name[n - 1] != 'c' &&
                                                     e->d_name[n - 1] != 'h'))
                continue;
            if (!strcmp(dir, ".") && strcmp(e->d_name, "main.c"))
                continue;
            snprintf(path, sizeof path, "%s%s", strcmp(dir, ".") ? dir : "", strcmp(dir, ".")
                     ? "/" : "");
            strncat(path, e->d_name, sizeof path - strlen(path) - 1);
            if (!strcmp(path, "options/options.c"))
                continue;
            char *lits = literals_of(path);
            files++;
            for (int id = 0; id < OPT_COUNT; id++) {
                const char *names[OPT_MAX_V2 + 1] = {opt_name((enum opt_id)id)};
                for (int i = 0; i < OPT_MAX_V2 && opt_v2((enum opt_id)id, i); i++)
                    names[i + 1] = opt_v2((enum opt_id)id, i);
                for (int i = 0; i <= OPT_MAX_V2 && names[i]; i++) {
                    char key[96];
                    snprintf(key, sizeof key, "|%s|", names[i]);
                    cr_expect(!strstr(lits, key) || is_foreign(path, names[i]),
                              "%s spells the option name \"%s\": ask the options table "
                              "(options/options.h) instead", path, names[i]);
                }
            }
            free(lits);
        }
        closedir(d);
    }
    cr_assert_gt(files, 50, "read %d source files", files);
}

Test(options, v2_reads_every_v2_name_of_the_table)
{
    const char *infer = schema_properties("InferParameters");
    for (int id = 0; id < OPT_COUNT; id++)
        for (int i = 0; opt_v2((enum opt_id)id, i); i++) {
            const char *name = opt_v2((enum opt_id)id, i);
            json_t *params = json_pack("{s:b}", name, 0);
            struct failure err = {0};
            cr_assert_eq(v2_check_parameters(params, V2_PARAMS_REQUEST, "", &err), 0,
                         "parameters.%s: %s", name, err.msg);
            int k = -1;
            cr_assert_eq(opt_find_v2(name, &k), id, "%s", name);
            cr_assert_eq(k, i, "%s", name);
            json_decref(params);
        }
    /* what InferParameters documents is a row's, or one v2 keeps itself */
    char *all = strdup(infer);
    for (char *p = all + 1, *bar; (bar = strchr(p, '|')); p = bar + 1) {
        *bar = '\0';
        int k;
        cr_assert(opt_find_v2(p, &k) >= 0 || v2_param_known(V2_PARAMS_REQUEST, p),
                  "%s: InferParameters.%s is neither an option nor reserved", SPEC_PATH, p);
    }
    free(all);
    /* a near miss is refused, naming the row's name */
    json_t *params = json_pack("{s:f}", "sofcap", 1.0);
    struct failure err = {0};
    cr_assert_eq(v2_check_parameters(params, V2_PARAMS_REQUEST, "", &err), -1);
    char want[96];
    snprintf(want, sizeof want, "(did you mean '%s'?)", opt_name(OPT_SOFTCAP));
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    json_decref(params);
}

/* A torch_mha model (H 2, E 16: Hkv 2, head_dim 8) with these defaults. */
static int load_with(const char *defaults, struct model **m, char *err, size_t errlen)
{
    static char *st;
    static size_t st_len;
    if (!st)
        st = fixture_read(REPO "/mha_f32/model.safetensors", &st_len);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"format\":\"torch_mha\",\"num_heads\":2,\"defaults\":%s}",
             defaults);
    return model_parse(m, "x", cfg, strlen(cfg), st, st_len, err, errlen);
}

Test(options, a_default_the_weights_fix_is_refused)
{
    int fixed = 0;
    for (int id = 0; id < OPT_COUNT; id++) {
        const struct opt *o = opt_get((enum opt_id)id);
        if (!(o->flags & OPT_FIXED))
            continue;
        fixed++;
        const int own = id == OPT_NUM_KV_HEADS ? 2 : 8;
        char defaults[128], err[512] = "";
        struct model *m = NULL;
        /* another value, and null, contradict the weights */
        const int bad[2] = {own + 1, -1};
        for (int k = 0; k < 2; k++) {
            if (k)
                snprintf(defaults, sizeof defaults, "{\"%s\":null}", o->name);
            else
                snprintf(defaults, sizeof defaults, "{\"%s\":%d}", o->name, bad[k]);
            cr_assert_eq(load_with(defaults, &m, err, sizeof err), -1, "%s loaded", defaults);
            char want[96];
            snprintf(want, sizeof want, "defaults.%s = ", o->name);
            cr_assert(strstr(err, want) && strstr(err, "contradicts the weights"), "%s: %s",
                      defaults, err);
        }
        /* its own value is allowed */
        snprintf(defaults, sizeof defaults, "{\"%s\":%d}", o->name, own);
        cr_assert_eq(load_with(defaults, &m, err, sizeof err), 0, "%s: %s", defaults, err);
        model_free(m);
    }
    cr_assert_eq(fixed, 2, "num_kv_heads and head_dim are the weights'");
    /* an option no row lets a model set */
    struct model *m = NULL;
    char err[512], defaults[128];
    snprintf(defaults, sizeof defaults, "{\"%s\":3}", opt_name(OPT_WEIGHTS_TOP_K));
    cr_assert_eq(load_with(defaults, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "is not an option a model may set"), "%s", err);
}

/* The one rule of defaults: a partial rope over the model's goes member by
 * member, for /attention's object and v2's parameters alike. */
Test(options, rope_defaults_merge_member_by_member)
{
    struct model *m = NULL;
    char err[512];
    cr_assert_eq(load_with("{\"rope\":{\"style\":\"interleaved\",\"theta\":500000,"
                           "\"rotary_dim\":4}}",
                           &m, err, sizeof err),
                 0, "%s", err);
    for (int v2 = 0; v2 < 2; v2++) {
        struct codec_values cv;
        codec_values_init(&cv);
        codec_values_defaults(&cv, m, v2);
        json_t *rope = json_pack("{s:f}", opt_member(OPT_ROPE, 1), 1e6);
        json_t *req = json_pack("{s:O}", opt_name(OPT_ROPE), rope);
        codec_values_over(&cv, req, v2);
        struct failure e;
        cr_assert_eq(codec_values_rope(&cv, rope, opt_name(OPT_ROPE), &e), 0, "%s", e.msg);
        cr_assert_str_eq(json_string_value(cv.v[CV_ROPE_STYLE]), "interleaved");
        cr_assert_eq(json_number_value(cv.v[CV_ROPE_THETA]), 1e6);
        cr_assert_eq(json_integer_value(cv.v[CV_ROPE_ROTARY_DIM]), 4);
        cr_assert_str_eq(cv.name[CV_ROPE_STYLE], v2 ? "model 'x' defaults.rope.style"
                                                    : "rope.style");
        json_decref(req);
        json_decref(rope);
        codec_values_deinit(&cv);
    }
    model_free(m);
}
