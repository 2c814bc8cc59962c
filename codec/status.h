/* status.h -- the core's status codes (enum att_status,
 * core/attention.h) as the API's errors (lib/errors.h), for both
 * protocols (codec/status.c). */
#ifndef CODEC_STATUS_H
#define CODEC_STATUS_H

#include "lib/errors.h"

/* The error that answers a core status (enum att_status, core/attention.h):
 * ATT_ERANGE, finite inputs whose result overflows, is invalid_parameter
 * (codec/status.c). */
enum http_error http_error_from_att(int att_status);

#endif
