/* models.c -- a model by name from the registry; see models.h. */
#include "api/models.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/suggest.h"

void models_unknown(char *buf, size_t n, const char *name)
{
    json_t *names = repo_names();
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
                         struct api_error *err)
{
    (void)ctx;
    struct repo_ref *r;
    int code;
    char why[sizeof err->msg];
    if (models_acquire(&r, name, NULL, &code, why, sizeof why))
        return api_fail(err, code, "%s", why);
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
