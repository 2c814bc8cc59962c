#include "tests/support/golden.h"
#include "tests/support/check.h"
#include "tests/support/testdata.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *keep(struct golden *g, void *b)
{
    if (b && g->nbufs < GOLDEN_MAX_BUFS)
        g->bufs[g->nbufs++] = b;
    return b;
}

/* Read a flat {"shape", "data"} tensor; data as floats, or bytes for bools. */
static int read_tensor(struct golden *g, json_t *t, int *ndim, int shape[4],
                       float **f, uint8_t **u8, size_t *count, char *errbuf)
{
    json_t *sh = json_object_get(t, "shape"), *data = json_object_get(t, "data");
    if (!json_is_array(sh) || !json_is_array(data) || json_array_size(sh) > 4) {
        snprintf(errbuf, 256, "tensor is not {shape, data}");
        return -1;
    }
    *ndim = (int)json_array_size(sh);
    size_t n = 1;
    for (int i = 0; i < *ndim; i++) {
        shape[i] = (int)json_integer_value(json_array_get(sh, i));
        n *= (size_t)shape[i];
    }
    if (json_array_size(data) != n) {
        snprintf(errbuf, 256, "data length %zu, shape says %zu", json_array_size(data), n);
        return -1;
    }
    *count = n;
    int is_bool = n > 0 && json_is_boolean(json_array_get(data, 0));
    if (is_bool && u8) {
        *u8 = keep(g, malloc(n ? n : 1));
        for (size_t i = 0; i < n; i++)
            (*u8)[i] = json_is_true(json_array_get(data, i));
    } else {
        *f = keep(g, malloc((n ? n : 1) * sizeof **f));
        for (size_t i = 0; i < n; i++)
            (*f)[i] = (float)json_number_value(json_array_get(data, i));
    }
    return 0;
}

/* The variant fields of request req (attention.h, "Variants"). */
static int read_variants(struct golden *g, json_t *req, char *errbuf)
{
    struct att_params *p = &g->p;
    json_t *t;
    p->Hkv = (int)json_integer_value(json_object_get(req, "num_kv_heads"));
    p->head_dim = (int)json_integer_value(json_object_get(req, "head_dim"));
    p->query_position_offset = json_integer_value(json_object_get(req, "query_position_offset"));
    if ((t = json_object_get(req, "rope"))) {
        const char *style = json_string_value(json_object_get(t, "style"));
        p->rope_style = !style ? -1 : !strcmp(style, "half") ? ATT_ROPE_HALF
                      : !strcmp(style, "interleaved") ? ATT_ROPE_INTERLEAVED : -1;
        if (p->rope_style < 0) {
            snprintf(errbuf, 256, "rope style %s is unknown", style ? style : "(none)");
            return -1;
        }
        p->rope_theta = json_number_value(json_object_get(t, "theta"));
        p->rope_rotary_dim = (int)json_integer_value(json_object_get(t, "rotary_dim"));
    }
    if (json_is_true(json_object_get(req, "alibi"))) {
        float *s = keep(g, malloc((size_t)p->H * sizeof *s));
        att_alibi_slopes(s, p->H);
        p->alibi_slopes = s;
    } else if ((t = json_object_get(req, "alibi_slopes"))) {
        float *s = keep(g, malloc((json_array_size(t) + 1) * sizeof *s));
        for (size_t h = 0; h < json_array_size(t); h++)
            s[h] = (float)json_number_value(json_array_get(t, h));
        p->alibi_slopes = s;
    }
    if ((t = json_object_get(req, "window"))) {
        p->has_window = 1;
        p->window_left = (int)json_integer_value(json_array_get(t, 0));
        p->window_right = (int)json_integer_value(json_array_get(t, 1));
    }
    if ((t = json_object_get(req, "softcap")))
        p->softcap = (float)json_number_value(t);
    return 0;
}

int golden_load(struct golden *g, const char *path, char *errbuf)
{
    memset(g, 0, sizeof *g);
    att_params_init(&g->p);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(errbuf, 256, "%s: %s", path, jerr.text);
        return -1;
    }
    int rc = -1, nd, sh[4];
    size_t cnt;
    struct att_params *p = &g->p;
    json_t *req = json_object_get(root, "request"), *exp = json_object_get(root, "expected");
    snprintf(g->name, sizeof g->name, "%s", json_string_value(json_object_get(root, "name")));

    float *qf = NULL, *kf = NULL, *vf = NULL;
    if (read_tensor(g, json_object_get(req, "query"), &nd, sh, &qf, NULL, &cnt, errbuf))
        goto done;
    int batched = nd == 3;
    p->N = batched ? sh[0] : 1, p->L = sh[nd - 2], p->E = sh[nd - 1];
    p->query = qf;
    p->key = qf, p->S = p->L, p->kdim = p->E;
    json_t *t;
    if ((t = json_object_get(req, "key"))) {
        if (read_tensor(g, t, &nd, sh, &kf, NULL, &cnt, errbuf))
            goto done;
        p->key = kf, p->S = sh[nd - 2], p->kdim = sh[nd - 1];
    }
    p->value = p->key, p->vdim = p->kdim;
    if ((t = json_object_get(req, "value"))) {
        if (read_tensor(g, t, &nd, sh, &vf, NULL, &cnt, errbuf))
            goto done;
        p->value = vf, p->vdim = sh[nd - 1];
    }
    p->H = (int)json_integer_value(json_object_get(req, "num_heads"));
    if (read_variants(g, req, errbuf))
        goto done;

    json_t *w = json_object_get(req, "weights");
    for (int i = 0; i < ATT_NWEIGHTS; i++) {
        float *f = NULL;
        if ((t = json_object_get(w, att_weight_name((enum att_weight)i)))) {
            if (read_tensor(g, t, &nd, sh, &f, NULL, &cnt, errbuf))
                goto done;
            p->w[i] = f, p->w_len[i] = cnt;
        }
    }

    if ((t = json_object_get(req, "attn_mask"))) {
        if (json_is_string(t)) {
            p->mask_kind = strcmp(json_string_value(t), "causal_lower_right")
                               ? ATT_MASK_CAUSAL : ATT_MASK_CAUSAL_LOWER_RIGHT;
        } else {
            float *f = NULL;
            uint8_t *u = NULL;
            if (read_tensor(g, t, &p->mask_ndim, sh, &f, &u, &cnt, errbuf))
                goto done;
            memcpy(p->mask_shape, sh, sizeof p->mask_shape);
            p->mask_kind = u ? ATT_MASK_BOOL : ATT_MASK_FLOAT;
            p->bool_mask = u, p->float_mask = f;
        }
    }
    if ((t = json_object_get(req, "key_padding_mask"))) {
        float *f = NULL;
        uint8_t *u = NULL;
        if (read_tensor(g, t, &nd, sh, &f, &u, &cnt, errbuf))
            goto done;
        p->key_padding_mask = u;
    }
    t = json_object_get(req, "need_weights");
    int need = t ? json_is_true(t) : 1;
    int avg = json_is_true(json_object_get(req, "average_attn_weights"));
    p->weights_mode = !need ? ATT_WEIGHTS_NONE : avg ? ATT_WEIGHTS_AVERAGE : ATT_WEIGHTS_PER_HEAD;
    if ((t = json_object_get(req, "scale")))
        p->has_scale = 1, p->scale = (float)json_number_value(t);
    p->positional_encoding = json_object_get(req, "positional_encoding") != NULL;

    if (read_tensor(g, json_object_get(exp, "output"), &nd, sh, &g->expected_out, NULL,
                    &g->expected_out_len, errbuf))
        goto done;
    if ((t = json_object_get(exp, "attention_weights")) &&
        read_tensor(g, t, &nd, sh, &g->expected_weights, NULL, &g->expected_weights_len,
                    errbuf))
        goto done;
    g->expected_out32 = g->expected_out, g->expected_weights32 = g->expected_weights;
    json_t *e32 = json_object_get(root, "expected_float32");
    size_t n32 = 0;
    if ((t = json_object_get(e32, "output")) &&
        (read_tensor(g, t, &nd, sh, &g->expected_out32, NULL, &n32, errbuf) ||
         n32 != g->expected_out_len))
        goto done;
    if ((t = json_object_get(e32, "attention_weights")) &&
        (read_tensor(g, t, &nd, sh, &g->expected_weights32, NULL, &n32, errbuf) ||
         n32 != g->expected_weights_len))
        goto done;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

int golden_check(const struct golden *g, golden_forward_fn forward, const char *label,
                 double out_atol, double out_rtol, double w_atol)
{
    size_t olen, wlen;
    struct att_error err;
    if (att_check(&g->p, &olen, &wlen, &err) != ATT_OK) {
        fprintf(stderr, "%s (%s): att_check: %s\n", g->name, label, err.msg);
        return 0;
    }
    if (olen != g->expected_out_len || wlen != g->expected_weights_len) {
        fprintf(stderr, "%s (%s): sizes %zu, %zu; PyTorch's %zu, %zu\n", g->name, label, olen,
                wlen, g->expected_out_len, g->expected_weights_len);
        return 0;
    }
    float *out = malloc(olen * sizeof *out), *w = wlen ? malloc(wlen * sizeof *w) : NULL;
    char name[160];
    snprintf(name, sizeof name, "%s (%s)", g->name, label);
    int ok = out && (w || !wlen);
    if (ok && forward(out, w, &g->p, &err) != ATT_OK) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        ok = 0;
    }
    if (ok)
        ok = check_tensor_torch(name, out, g->expected_out, g->expected_out32, olen, out_atol,
                                out_rtol);
    if (ok && wlen)
        ok = check_tensor_torch(name, w, g->expected_weights, g->expected_weights32, wlen,
                                w_atol, 0.0);
    free(out), free(w);
    return ok;
}

void golden_deinit(struct golden *g)
{
    for (int i = 0; i < g->nbufs; i++)
        free(g->bufs[i]);
    g->nbufs = 0;
}

static const char *golden_dir(void)
{
    return getenv("GOLDEN_DIR") ? getenv("GOLDEN_DIR") : "tests/golden";
}

static const char *variants_dir(void)
{
    const char *dir = getenv("GOLDEN_VARIANTS_DIR");
    return dir ? dir : "tests/golden_variants";
}

int golden_list(char **paths, int max)
{
    return testdata_list(golden_dir(), paths, max);
}

int golden_list_variants(char **paths, int max)
{
    return testdata_list(variants_dir(), paths, max);
}

int golden_count(void)
{
    return testdata_count(golden_dir());
}

int golden_count_variants(void)
{
    return testdata_count(variants_dir());
}

void golden_weight_lens(struct att_params *p)
{
    struct att_weight_shape s[ATT_NWEIGHTS];
    att_weight_shapes(s, p);
    for (int i = 0; i < ATT_NWEIGHTS; i++)
        p->w_len[i] = p->w[i] ? (size_t)s[i].d0 * (size_t)(s[i].ndim == 2 ? s[i].d1 : 1) : 0;
}
