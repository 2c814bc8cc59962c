/* models.c -- a model by name from the registry; see models.h. */
#include "api/models.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/suggest.h"

json_t *models_names(void)
{
    struct repo_snapshot s;
    if (repo_snapshot(&s))
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < s.n && a; i++)
        json_array_append_new(a, json_string(s.models[i].name));
    repo_snapshot_free(&s);
    return a;
}

static json_t *index_row(const char *name, const char *state, const char *reason)
{
    return json_pack("{s:s, s:s, s:s, s:s}", "name", name, "version", REPO_VERSION, "state",
                     state, "reason", reason);
}

json_t *models_index(int ready_only)
{
    struct repo_snapshot s;
    if (repo_snapshot(&s))
        return NULL;
    json_t *a = json_array();
    for (size_t i = 0; i < s.n && a; i++) {
        const struct repo_info *m = &s.models[i];
        if (m->builtin || (ready_only && m->state != REPO_READY))
            continue;
        json_array_append_new(a, index_row(m->name, repo_state_str(m->state), m->reason));
    }
    if (s.reserved && !ready_only && a) /* a load error, not a model */
        json_array_append_new(a, index_row(REPO_BUILTIN, "UNAVAILABLE", s.reserved));
    repo_snapshot_free(&s);
    return a;
}

static json_t *stat_count(const struct repo_count *p)
{
    return json_pack("{s:I, s:I}", "count", (json_int_t)p->count, "ns", (json_int_t)p->ns);
}

static json_t *model_stats(const struct repo_info *m)
{
    static const struct repo_count zero;
    json_t *inf = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "success",
                            stat_count(&m->success), "fail", stat_count(&m->fail), "queue",
                            stat_count(&m->stage[REPO_QUEUE]), "compute_input",
                            stat_count(&m->stage[REPO_INPUT]), "compute_infer",
                            stat_count(&m->stage[REPO_INFER]), "compute_output",
                            stat_count(&m->stage[REPO_OUTPUT]), "cache_hit", stat_count(&zero),
                            "cache_miss", stat_count(&zero));
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:o, s:[]}", "name", m->name, "version",
                     REPO_VERSION, "last_inference", (json_int_t)m->last_ms, "inference_count",
                     (json_int_t)m->inference_count, "execution_count",
                     (json_int_t)m->execution_count, "inference_stats", inf, "batch_stats");
}

json_t *models_stats(const char *name)
{
    struct repo_snapshot s;
    if (repo_snapshot(&s))
        return NULL;
    json_t *a = json_array();
    int found = !name;
    for (size_t i = 0; i < s.n && a; i++)
        if (!name || strcmp(name, s.models[i].name) == 0) {
            json_array_append_new(a, model_stats(&s.models[i]));
            found = 1;
        }
    repo_snapshot_free(&s);
    if (!found) {
        json_decref(a);
        return NULL;
    }
    return json_pack("{s:o}", "model_stats", a);
}

void models_unknown(char *buf, size_t n, const char *name)
{
    json_t *names = models_names();
    const size_t count = json_array_size(names);
    const char **list = count ? calloc(count, sizeof *list) : NULL;
    for (size_t i = 0; list && i < count; i++)
        list[i] = json_string_value(json_array_get(names, i));
    const char *near = list ? suggest_nearest(name, list, count) : NULL;
    free(list);
    size_t len = (size_t)snprintf(buf, n, "unknown model '%.64s'", name);
    if (near && len < n)
        len += (size_t)snprintf(buf + len, n - len, " (did you mean '%s'?)", near);
    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "; the models served are");
    /* as many as fit (at most MODELS_MAX_LISTED), room kept for the tail */
    static const char tail[] = ", … (GET /v2/models lists them)";
    size_t i = 0;
    for (; i < count && i < MODELS_MAX_LISTED; i++) {
        const char *s = json_string_value(json_array_get(names, i));
        const size_t need = strlen(s) + 2 + (i + 1 < count ? sizeof tail : 1);
        if (len + need > n)
            break;
        len += (size_t)snprintf(buf + len, n - len, "%s %s", i ? "," : "", s);
    }
    if (i < count && len < n)
        snprintf(buf + len, n - len, "%s", tail);
    json_decref(names);
}

int models_acquire(struct repo_ref **ref, const char *name, const char *version, int *code,
                   char *why, size_t whylen)
{
    const int rc = repo_acquire(ref, name, version, why, whylen);
    if (rc == REPO_OK)
        return 0;
    *ref = NULL;
    int state;
    char reason[8];
    if (rc == REPO_ENOTFOUND && repo_state(name, &state, reason, sizeof reason) != 0)
        models_unknown(why, whylen, name);
    *code = rc == REPO_ENOTFOUND ? ERR_NOT_FOUND : ERR_MODEL_NOT_READY;
    return -1;
}

static int codec_acquire(void *ctx, const char *name, const struct model **m, void **ref,
                         struct failure *err)
{
    (void)ctx;
    struct repo_ref *r;
    int code;
    char why[sizeof err->msg];
    if (models_acquire(&r, name, NULL, &code, why, sizeof why))
        return fail_with(err, code, "%s", why);
    *m = repo_model(r); /* NULL: the built-in model, weights inline */
    *ref = r;
    return 0;
}

static void codec_release(void *ctx, void *ref)
{
    (void)ctx;
    repo_release(ref);
}

const struct codec_models models_codec = {codec_acquire, codec_release, NULL};
