/* v2.c -- the Open Inference Protocol endpoints besides infer; see v2.h. */
#include "api/v2.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/models.h"
#include "api/sequence_store.h"
#include "options/options.h"
#include "codec/v2.h"
#include "model/repo.h"

#define SERVER_NAME "attention-service"
/* openapi.yaml's info.version, the one place the number is written (the
 * Makefile passes it; GET /v2 says it) */
#ifndef ATTN_VERSION
#define ATTN_VERSION "unknown" /* a build outside the Makefile (lint) */
#endif
#define SERVER_VERSION ATTN_VERSION

/* The extensions implemented, as GET /v2 lists them. */
static const char *const extensions[] = {"binary_tensor_data", "statistics", "model_repository",
                                         "model_configuration", "sequence",
                                         "sequence(string_id)"};

/* ---------------------------------------------------------------------- */

static void answer_json(struct route_response *a, int status, json_t *o)
{
    if (!o) {
        service_v2_error(a, ERR_INTERNAL, "out of memory");
        return;
    }
    route_response_free(a);
    a->status = status;
    a->body = json_dumps(o, JSON_COMPACT);
    a->len = a->body ? strlen(a->body) : 0;
    json_decref(o);
    if (!a->body)
        service_v2_error(a, ERR_INTERNAL, "out of memory");
}

static void answer_empty(struct route_response *a)
{
    route_response_free(a);
    a->status = 200;
    a->body = malloc(1);
    a->len = 0;
}

static json_t *tensor_meta(const char *name, const char *dtype, int d0, int d1, int d2)
{
    json_t *shape = json_array();
    const int d[3] = {d0, d1, d2};
    for (int i = 0; i < 3 && shape; i++)
        if (d[i] != 0)
            json_array_append_new(shape, json_integer(d[i]));
    return json_pack("{s:s, s:s, s:o}", "name", name, "datatype", dtype, "shape", shape);
}

/* Model metadata: the inputs and outputs, -1 for a variable dimension.
 * query is shown as [N, L, E]; [L, E] (no batch) is accepted too. */
static json_t *model_meta(const char *name, const struct model *m)
{
    const int E = m ? m->E : -1, kd = m ? m->kdim : -1, vd = m ? m->vdim : -1;
    json_t *in = json_array(), *out = json_array();
    json_array_append_new(in, tensor_meta(opt_name(OPT_QUERY), "FP32", -1, -1, E));
    json_array_append_new(in, tensor_meta(opt_name(OPT_KEY), "FP32", -1, -1, kd));
    json_array_append_new(in, tensor_meta(opt_name(OPT_VALUE), "FP32", -1, -1, vd));
    json_array_append_new(in, tensor_meta(opt_name(OPT_ATTN_MASK), "BOOL", -1, -1, -1));
    json_array_append_new(in, tensor_meta(opt_name(OPT_KEY_PADDING_MASK), "BOOL", -1, -1, 0));
    /* a batch of sequences: one id and optional start and end flags per item */
    json_array_append_new(in, tensor_meta(opt_name(OPT_SEQUENCE_ID), "UINT64", -1, 0, 0));
    json_array_append_new(in, tensor_meta(opt_name(OPT_SEQUENCE_START), "BOOL", -1, 0, 0));
    json_array_append_new(in, tensor_meta(opt_name(OPT_SEQUENCE_END), "BOOL", -1, 0, 0));
    if (!m) { /* the weights, of the core's ranks (any sizes make them) */
        const struct att_params one = {.E = 1, .kdim = 1, .vdim = 1, .H = 1};
        struct att_weight_shape s[ATT_NWEIGHTS];
        att_weight_shapes(s, &one);
        for (int i = 0; i < ATT_NWEIGHTS; i++)
            json_array_append_new(in, tensor_meta(att_weight_name((enum att_weight)i), "FP32",
                                                  -1, s[i].ndim == 2 ? -1 : 0, 0));
    }
    json_array_append_new(out, tensor_meta(v2_output_name(V2_OUT_OUTPUT), "FP32", -1, -1, E));
    json_t *wshape = json_pack("[i,i,i,i]", -1, m ? m->H : -1, -1, -1);
    /* the weights, in full or reduced (parameters weights_top_k, weights_pool) */
    for (int k = V2_OUT_WEIGHTS; k < V2_OUT_CACHE_LENGTH; k++)
        json_array_append_new(out, json_pack("{s:s, s:s, s:O}", "name",
                                             v2_output_name((enum v2_output)k), "datatype",
                                             k == V2_OUT_TOPK_INDICES ? "INT32" : "FP32",
                                             "shape", wshape));
    json_decref(wshape);
    json_array_append_new(out, tensor_meta(v2_output_name(V2_OUT_CACHE_LENGTH), "INT64", -1, 0,
                                           0));
    json_t *o = json_pack("{s:s, s:[s], s:s, s:o, s:o}", "name", name, "versions", REPO_VERSION,
                          "platform", m ? "attention_safetensors" : "attention_builtin",
                          "inputs", in, "outputs", out);
    if (o && m) {
        /* the dimensions the weights have (defaults, else H and E / H) */
        json_t *kv = json_object_get(m->defaults, opt_name(OPT_NUM_KV_HEADS));
        json_t *hd = json_object_get(m->defaults, opt_name(OPT_HEAD_DIM));
        kv = kv ? json_incref(kv) : json_integer(m->H);
        hd = hd ? json_incref(hd) : json_integer(m->E / m->H);
        json_object_set_new(o, "parameters",
                            json_pack("{s:i, s:o, s:o, s:s, s:s, s:O}", opt_name(OPT_NUM_HEADS),
                                      m->H, opt_name(OPT_NUM_KV_HEADS), kv,
                                      opt_name(OPT_HEAD_DIM), hd, "format",
                                      model_format_name(m->format), "dtype", m->dtype,
                                      "defaults", m->defaults));
    }
    return o;
}

/* Triton's model configuration (model_config.proto's ModelConfig as JSON,
 * what tritonclient's get_model_config() returns), made from the model
 * metadata (model_meta) so that the two cannot disagree:
 * - max_batch_size 0: the dims are the metadata's full shapes, -1 where a
 *   size is free (the batch N is the model's own, and optional);
 * - data_type: "TYPE_" + the metadata's datatype (BYTES is TYPE_STRING);
 *   every input but query is optional (codec/v2.c requires only query);
 * - sequence_batching: every model takes sequences (api/sequence_store.h), idle
 *   for at most sequence_idle_timeout; one is controlled by request
 *   parameters (sequence_id, sequence_start, sequence_end), a batch of them
 *   by the optional inputs of those names (one per batch item), not by
 *   Triton's control tensors, so there is no control_input;
 * - parameters: the metadata's, each as {"string_value": text} (JSON text
 *   for what is not a string). */
static json_t *config_tensors(const json_t *meta_list, int inputs)
{
    json_t *list = json_array(), *t;
    size_t i;
    json_array_foreach(meta_list, i, t) {
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *dt = json_string_value(json_object_get(t, "datatype"));
        char type[32];
        snprintf(type, sizeof type, "TYPE_%s", strcmp(dt, "BYTES") ? dt : "STRING");
        json_t *c = json_pack("{s:s, s:s, s:O}", "name", name, "data_type", type, "dims",
                              json_object_get(t, "shape"));
        if (c && inputs)
            json_object_set_new(c, "optional",
                                json_boolean(strcmp(name, opt_name(OPT_QUERY)) != 0));
        json_array_append_new(list, c);
    }
    return list;
}

static json_t *model_config(const char *name, const struct model *m)
{
    json_t *meta = model_meta(name, m), *params = json_object(), *v;
    const char *key;
    json_object_foreach(json_object_get(meta, "parameters"), key, v) {
        char *text = json_is_string(v) ? NULL : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        json_object_set_new(params, key, json_pack("{s:s}", "string_value",
                                                   text ? text : json_string_value(v)));
        free(text);
    }
    const json_int_t idle_us = (json_int_t)(seq_idle_timeout() * 1e6);
    json_t *c = json_pack("{s:s, s:O, s:s, s:i, s:o, s:o, s:{s:I}, s:o}", "name", name,
                          "platform", json_object_get(meta, "platform"), "backend", "attention",
                          "max_batch_size", 0, "input",
                          config_tensors(json_object_get(meta, "inputs"), 1), "output",
                          config_tensors(json_object_get(meta, "outputs"), 0),
                          "sequence_batching", "max_sequence_idle_microseconds", idle_us,
                          "parameters", params);
    json_decref(meta);
    return c;
}

/* A model's config.json as GET .../config.json shows it: as written, except a
 * Hugging Face model's checkpoint, shown by its folder's name alone (the
 * path, absolute or through the model's folder, is the server's disk). */
static json_t *public_config(const struct model *m)
{
    json_t *c = json_deep_copy(m->config);
    const char *ck = json_string_value(json_object_get(c, "checkpoint"));
    if (ck) {
        size_t n = strlen(ck);
        while (n > 1 && ck[n - 1] == '/')
            n--;
        const char *name = ck + n;
        while (name > ck && name[-1] != '/')
            name--;
        json_object_set_new(c, "checkpoint", json_stringn(name, (size_t)(ck + n - name)));
    }
    return c;
}

/* A model route's model, held; answers 404/503 itself (returns NULL). */
static struct repo_ref *held(const struct v2_route *rt, struct route_response *a)
{
    struct repo_ref *ref = NULL;
    char why[600];
    int code;
    if (models_acquire(&ref, rt->model, rt->version[0] ? rt->version : NULL, &code, why,
                       sizeof why))
        service_v2_error(a, code, why);
    return ref;
}

void v2_handle_get(const struct v2_route *rt, const struct v2_server_state *s,
                   struct route_response *a)
{
    memset(a, 0, sizeof *a);
    struct repo_ref *ref;
    switch (rt->kind) {
    case V2_SERVER: {
        json_t *ext = json_array();
        for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
            json_array_append_new(ext, json_string(extensions[i]));
        answer_json(a, 200, json_pack("{s:s, s:s, s:o}", "name", SERVER_NAME, "version",
                                      SERVER_VERSION, "extensions", ext));
        return;
    }
    case V2_LIVE:
        answer_empty(a);
        return;
    case V2_READY:
        if (s->draining)
            service_v2_error(a, ERR_SHUTTING_DOWN, "not ready: the server is draining");
        else if (!repo_loading_done())
            service_v2_error(a, ERR_MODEL_NOT_READY, "not ready: models are still loading");
        else
            answer_empty(a);
        return;
    case V2_MODELS:
        answer_json(a, 200, json_pack("{s:o}", "models", models_names()));
        return;
    case V2_ALL_STATS:
        answer_json(a, 200, models_stats(NULL));
        return;
    case V2_MODEL_STATS: {
        int state;
        char reason[8];
        const int known = repo_state(rt->model, &state, reason, sizeof reason) == 0;
        if (!known || (rt->version[0] && strcmp(rt->version, REPO_VERSION))) {
            char msg[600];
            if (!known)
                models_unknown(msg, sizeof msg, rt->model);
            else
                snprintf(msg, sizeof msg, "unknown model '%.128s' version %.32s", rt->model,
                         rt->version);
            service_v2_error(a, ERR_NOT_FOUND, msg);
            return;
        }
        answer_json(a, 200, models_stats(rt->model));
        return;
    }
    case V2_MODEL_READY:
        if ((ref = held(rt, a))) {
            answer_empty(a);
            repo_release(ref);
        }
        return;
    case V2_MODEL:
        if ((ref = held(rt, a))) {
            answer_json(a, 200, model_meta(rt->model, repo_model(ref)));
            repo_release(ref);
        }
        return;
    case V2_MODEL_CONFIG:
        if ((ref = held(rt, a))) {
            answer_json(a, 200, model_config(rt->model, repo_model(ref)));
            repo_release(ref);
        }
        return;
    case V2_MODEL_CONFIG_JSON:
        if ((ref = held(rt, a))) {
            const struct model *m = repo_model(ref);
            answer_json(a, 200, m ? public_config(m)
                                  : json_pack("{s:s, s:s}", "name", REPO_BUILTIN, "format",
                                              "builtin"));
            repo_release(ref);
        }
        return;
    default:
        service_v2_error(a, ERR_INTERNAL, "not a GET route");
    }
}

/* The body of a repository request: empty, or a JSON object. */
static json_t *repo_body(const char *body, size_t len, struct route_response *a)
{
    json_error_t je;
    json_t *o = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &je) : json_object();
    if (!o || !json_is_object(o)) {
        char msg[300];
        snprintf(msg, sizeof msg, "the body must be empty or a JSON object%s%s",
                 o ? "" : ": ", o ? "" : je.text);
        service_v2_error(a, ERR_INVALID_JSON, msg);
        json_decref(o);
        return NULL;
    }
    return o;
}

void v2_handle_repository(const struct v2_route *rt, const char *body, size_t len,
                          struct route_response *a)
{
    memset(a, 0, sizeof *a);
    json_t *o = repo_body(body, len, a);
    if (!o)
        return;
    char why[600];
    int rc;
    switch (rt->kind) {
    case V2_REPO_INDEX: {
        json_t *ready = json_object_get(o, "ready");
        if (ready && !json_is_boolean(ready)) {
            service_v2_error(a, ERR_INVALID_PARAMETER, "ready must be true or false");
            break;
        }
        answer_json(a, 200, models_index(json_is_true(ready)));
        break;
    }
    case V2_REPO_LOAD:
        if (json_object_get(json_object_get(o, "parameters"), "config") ||
            json_object_size(json_object_get(o, "parameters")) > 0) {
            service_v2_error(a, ERR_INVALID_PARAMETER, "load takes no parameters: models "
                             "load from model_repository only (no config or file upload)");
            break;
        }
        rc = repo_load(rt->model, why, sizeof why);
        if (rc == REPO_OK) {
            seq_drop_model(rt->model); /* its sequences' caches are the old weights' */
            answer_empty(a);
        } else
            service_v2_error(a, rc == REPO_EINVAL ? ERR_NOT_FOUND : ERR_INVALID_PARAMETER, why);
        break;
    case V2_REPO_UNLOAD:
        rc = repo_unload(rt->model, why, sizeof why);
        if (rc == REPO_ENOTFOUND)
            models_unknown(why, sizeof why, rt->model);
        if (rc == REPO_OK) {
            seq_drop_model(rt->model);
            answer_empty(a);
        } else
            service_v2_error(a, rc == REPO_ENOTFOUND ? ERR_NOT_FOUND : ERR_INVALID_PARAMETER,
                             why);
        break;
    default:
        service_v2_error(a, ERR_INTERNAL, "not a repository route");
    }
    json_decref(o);
}
