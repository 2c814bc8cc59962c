/* status.h -- errors as the protocols answer them (codec/status.c): the
 * core's status codes (enum att_status, core/attention.h) as the API's
 * errors (lib/errors.h), and each protocol's error body. */
#ifndef CODEC_STATUS_H
#define CODEC_STATUS_H

#include <stddef.h>

#include "lib/errors.h"

/* The error that answers a core status (enum att_status, core/attention.h):
 * ATT_ERANGE, finite inputs whose result overflows, is invalid_parameter,
 * ATT_ECANCELLED (a call past its deadline) request_timeout
 * (codec/status.c). */
enum http_error http_error_from_att(int att_status);

/* The error bodies, malloc'd, their length in *len; NULL when out of
 * memory. msg is made valid UTF-8 (it may quote a name the client sent,
 * cut by bytes). POST /attention's: {"error": {"code": slug, "message":
 * msg}} (msg NULL: the error table's default message). */
char *codec_error_body(int code, const char *msg, size_t *len);
/* The Open Inference Protocol's: {"error": msg}. */
char *v2_error_body(const char *msg, size_t *len);

#endif
