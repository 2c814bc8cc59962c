/* v2_codec_shared.c -- see v2_codec_shared.h. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "api/service.h"
#include "codec/v2.h"
#include "tests/support/check.h"
#include "tests/codec/v2_codec_shared.h"

/* s with every ' turned into " (malloc'd): JSON without escapes. */
char *v2ct_q(const char *s)
{
    char *d = strdup(s);
    for (char *c = d; *c; c++)
        if (*c == '\'')
            *c = '"';
    return d;
}

/* The JSON s (' for ") followed by n bytes of bin: body and header length. */
char *v2ct_with_binary(const char *s, const void *bin, size_t n, size_t *len, long long *hl)
{
    char *json = v2ct_q(s);
    const size_t j = strlen(json);
    char *body = malloc(j + n + 1);
    memcpy(body, json, j);
    if (n)
        memcpy(body + j, bin, n);
    free(json);
    *len = j + n, *hl = (long long)j;
    return body;
}

/* The whole answer, read in one piece. */
char *v2ct_read_all(const struct stream *st)
{
    const size_t n = stream_size(st);
    char *b = malloc(n + 1);
    cr_assert_eq(stream_read(st, 0, b, n + 1), n);
    b[n] = '\0';
    return b;
}

/* A model of E = 4, H = 2, identity projections, with defaults d (owned). */
void v2ct_test_model(struct model *m, json_t *d)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "tiny");
    m->E = m->kdim = m->vdim = 4, m->H = 2;
    m->defaults = d ? d : json_object();
    m->config = json_object();
}

void v2ct_test_model_deinit(struct model *m)
{
    json_decref(m->defaults);
    json_decref(m->config);
}

/* The floats of output k in the answer: JSON data or binary bytes. */
void v2ct_check_answer_floats(const struct stream *st, const char *name, const float *x,
                         size_t n, int binary, size_t *bin_at)
{
    char *all = v2ct_read_all(st);
    json_t *root = json_loadb(all, stream_text_len(st), 0, NULL);
    cr_assert_not_null(root, "the JSON part is not JSON");
    json_t *o = NULL, *v;
    size_t i;
    json_array_foreach(json_object_get(root, "outputs"), i, v) {
        if (strcmp(json_string_value(json_object_get(v, "name")), name) == 0)
            o = v;
    }
    cr_assert_not_null(o, "output %s missing", name);
    cr_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "FP32");
    if (binary) {
        cr_assert_null(json_object_get(o, "data"));
        cr_assert_eq(json_integer_value(json_object_get(json_object_get(o, "parameters"),
                                                        "binary_data_size")),
                     (json_int_t)(n * 4));
        cr_assert_eq(memcmp(all + stream_text_len(st) + *bin_at, x, n * 4), 0,
                     "%s: binary bytes differ from the floats", name);
        *bin_at += n * 4;
    } else {
        json_t *data = json_object_get(o, "data");
        cr_assert_eq(json_array_size(data), n);
        for (i = 0; i < n; i++) {
            /* (jansson reads "-0" as the integer 0) */
            const float f = (float)json_number_value(json_array_get(data, i));
            cr_assert(memcmp(&f, &x[i], 4) == 0 || (f == 0 && x[i] == 0), "%s[%zu]: %a written, %a read back", name, i,
                      (double)x[i], (double)f);
        }
    }
    json_decref(root);
    free(all);
}
