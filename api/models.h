/* models.h -- the model registry (model/repo.h) as the API asks it for a
 * model by name: the one place that turns its refusals into answers.
 *
 * An unknown model is 404 not_found, and its message names the nearest
 * model (lib/suggest.h) and lists the models served; a model that exists
 * but is not ready is 503 model_not_ready with the registry's message
 * (since when). Every handler that needs a model by name comes here:
 * POST /attention's "model" (through the codec's interface below), v2
 * infer, and the v2 model routes.
 *
 *     struct repo_ref *ref;
 *     int code;
 *     char why[240];
 *     if (models_acquire(&ref, "bert-l3", NULL, &code, why, sizeof why))
 *         return service_v2_error(a, code, why);
 *     ... repo_model(ref) ...; repo_release(ref);
 */
#ifndef API_MODELS_H
#define API_MODELS_H

#include <jansson.h>
#include <stddef.h>

#include "codec/codec.h"
#include "model/repo.h"

/* At most this many models are listed in an unknown model's message. */
#define MODELS_MAX_LISTED 20

/* A ready model by name and version (NULL: any), as repo_acquire(). 0 with
 * *ref (repo_release it), or -1 with *ref NULL, *code an enum http_error
 * (ERR_NOT_FOUND or ERR_MODEL_NOT_READY) and why (whylen bytes) the
 * message. A model that does not exist at all gets models_unknown()'s
 * message; a version it does not have, the registry's own. */
int models_acquire(struct repo_ref **ref, const char *name, const char *version, int *code,
                   char *why, size_t whylen);

/* "unknown model 'x' (did you mean 'y'?); the models served are a, b, ..."
 * for name, into buf (n bytes): as many names as fit (at most
 * MODELS_MAX_LISTED), then ", … (GET /v2/models lists them)". */
void models_unknown(char *buf, size_t n, const char *name);

/* The registry's snapshot (repo_snapshot) as the v2 protocol writes it.
 * Each returns a new JSON value, or NULL when out of memory. */
/* Names of every model, the built-in first (GET /v2/models' "models"). */
json_t *models_names(void);
/* The repository index (extension_model_repository): [{"name", "version",
 * "state", "reason"}], the repository's models only (ready_only: only the
 * ready ones), then a row for a reserved folder name not loaded. */
json_t *models_index(int ready_only);
/* {"model_stats": [...]} (extension_statistics) for name (NULL: every
 * model); NULL if name is unknown. */
json_t *models_stats(const char *name);

/* The registry lent to the /attention decoder (codec.h): acquire() is
 * models_acquire() with any version, release() repo_release(); the
 * reference it keeps (struct codec_request's model_ref) is a struct
 * repo_ref *. */
extern const struct codec_models models_codec;

#endif
