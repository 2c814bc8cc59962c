/* oip_infer.h -- a ModelInferRequest as the body of v2's HTTP infer
 * (codec/oip_infer.c); see codec/oip.h, which includes it, for the whole. */
#ifndef CODEC_OIP_INFER_H
#define CODEC_OIP_INFER_H

#include <stddef.h>

#include "lib/errors.h"

/* A ModelInferRequest in v2's HTTP form. */
struct oip_infer {
    char model[128];     /* model_name */
    char version[32];    /* model_version, "" when none */
    char *body;          /* malloc'd: the JSON header, then the inputs' bytes */
    size_t len;
    long long header_len; /* the JSON header's bytes (Inference-Header-Content-Length) */
};

/* Decode msg (a serialized ModelInferRequest):
 *   - inputs as raw_input_contents (one entry per input, in order; then no
 *     input has contents) or as typed contents (the field of the input's
 *     datatype: fp32_contents for FP32, int_contents for INT8/16/32, ...;
 *     FP16 and BF16 only raw), each written as the input's binary data;
 *   - parameters at the request's, an input's and an output's level, as
 *     JSON values of the same names (bool, int64, uint64 -- beyond int64
 *     too --, double, string), so the HTTP side's rules name them: unknown
 *     and reserved names behave as over HTTP;
 *   - every output answered as binary data (raw_output_contents); an
 *     output's binary_data and the request's binary_data_output, HTTP's
 *     own, are ignored;
 *   - model_name empty is refused; id kept as the request's "id".
 * Returns 0, or -1 with err filled (r must be deinit'ed either way). */
int oip_infer_decode(struct oip_infer *r, const unsigned char *msg, size_t len,
                     struct failure *err);
void oip_infer_deinit(struct oip_infer *r);

#endif
