/* oip_json.h -- the other calls' JSON answers as their messages, and
 * their small requests (codec/oip_json.c); see codec/oip.h, which
 * includes it. */
#ifndef CODEC_OIP_JSON_H
#define CODEC_OIP_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "lib/errors.h"

/* The messages the other calls answer. */
enum oip_message {
    OIP_SERVER_LIVE_RESPONSE,
    OIP_SERVER_READY_RESPONSE,
    OIP_MODEL_READY_RESPONSE,
    OIP_SERVER_METADATA_RESPONSE,
    OIP_MODEL_METADATA_RESPONSE,
    OIP_MODEL_CONFIG_RESPONSE,
    OIP_MODEL_STATISTICS_RESPONSE,
    OIP_REPOSITORY_INDEX_RESPONSE,
    OIP_REPOSITORY_MODEL_LOAD_RESPONSE,
    OIP_REPOSITORY_MODEL_UNLOAD_RESPONSE,
};

/* j (the protobuf JSON mapping: fields by name, 64-bit integers as numbers
 * or strings, enums by name, maps as objects; a field the message lacks is
 * skipped) serialized as message m: *out malloc'd (NULL for an empty
 * message), *len bytes. Returns 0, or -1 with err filled. */
int oip_json_encode(enum oip_message m, const json_t *j, unsigned char **out, size_t *len,
                    struct failure *err);

/* The fields `name` (1) and `version` (2) of a ModelReadyRequest,
 * ModelMetadataRequest, ModelConfigRequest or ModelStatisticsRequest,
 * cut to fit (a longer one is refused). */
int oip_name_version(const unsigned char *msg, size_t len, char *name, size_t namelen,
                     char *version, size_t versionlen, struct failure *err);

/* A RepositoryIndexRequest's `ready`. */
int oip_repository_index(const unsigned char *msg, size_t len, int *ready, struct failure *err);

/* A RepositoryModelLoadRequest or RepositoryModelUnloadRequest: the model's
 * name, and the body HTTP's load or unload takes ({"parameters": {...}}:
 * string_param as a string, bool_param, int64_param, and bytes_param as
 * base64 text, as Triton's HTTP "file:" parameters carry it), malloc'd in
 * *body. */
int oip_repository_model(const unsigned char *msg, size_t len, char *model, size_t modellen,
                         char **body, size_t *bodylen, struct failure *err);

#endif
