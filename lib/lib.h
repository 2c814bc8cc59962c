/* lib.h -- what the lib/ layer owns (the rule: scripts/layers.sh): the
 * leaf utilities every other layer may use, each with its own header, none
 * of which includes anything outside lib/:
 *
 *   base64.h   base64 (RFC 4648), the tensors' bytes both ways
 *   jsonnum.h  JSON numbers: reading them exactly, writing floats shortest
 *   utf8.h     well-formed UTF-8 (RFC 3629), the one validator
 *   pool.h     the worker pool and its bounded queue
 *   suggest.h  "did you mean ...?": edit distance over a list of names
 *   errors.h   the error table (HTTP_ERRORS) and struct failure
 *
 * Include the header you use; this one only says what the folder holds. */
#ifndef LIB_LIB_H
#define LIB_LIB_H

#include "lib/base64.h"
#include "lib/errors.h"
#include "lib/jsonnum.h"
#include "lib/pool.h"
#include "lib/suggest.h"
#include "lib/utf8.h"

#endif
