/* status.c -- the core's status codes (core/attention.h) as the API's
 * errors (lib/errors.h); see codec/status.h. */
#include "codec/status.h"

#include "core/attention.h"

enum http_error http_error_from_att(int att_status)
{
    switch (att_status) {
    case ATT_EPARAM:  return ERR_INVALID_PARAMETER;
    case ATT_ESHAPE:  return ERR_SHAPE_MISMATCH;
    case ATT_ETOOBIG: return ERR_PAYLOAD_TOO_LARGE;
    case ATT_ERANGE:  return ERR_INVALID_PARAMETER;
    default:          return ERR_INTERNAL;
    }
}
