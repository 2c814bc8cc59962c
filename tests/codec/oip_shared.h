/* oip_shared.h -- what the test_oip*.c tests share: a ModelInferRequest
 * built from the generated structs (storage in one struct, no allocation),
 * packed, and a decoded request read by the HTTP side's decoder. */
#ifndef TESTS_OIP_SHARED_H
#define TESTS_OIP_SHARED_H

#include <stddef.h>

#include "grpc_service.pb-c.h"
#include "codec/oip.h"
#include "codec/v2.h"

typedef Inference__InferParameter Param;

struct oipt_req {
    Inference__ModelInferRequest q;
    Inference__ModelInferRequest__InferInputTensor in[4], *inp[4];
    Inference__InferTensorContents c[4];
    int64_t shape[4][4];
    Inference__ModelInferRequest__InferRequestedOutputTensor out[3], *outp[3];
    Inference__ModelInferRequest__ParametersEntry pe[8], *pep[8];
    Inference__ModelInferRequest__InferInputTensor__ParametersEntry ie[4], *iep[4];
    Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry oe[4], *oep[4];
    Param pv[16];
    int npv;
    ProtobufCBinaryData raw[4];
};

/* An empty request for model (not moved after: the message points into it). */
void oipt_init(struct oipt_req *r, const char *model);
/* Input i (the next one) named name; contents c[i] when typed is set. */
Inference__ModelInferRequest__InferInputTensor *oipt_input(struct oipt_req *r, const char *name,
                                                           const char *datatype,
                                                           const int64_t *shape, int nd,
                                                           int typed);
/* raw_input_contents' next entry. */
void oipt_raw(struct oipt_req *r, const void *p, size_t n);
void oipt_output(struct oipt_req *r, const char *name);
/* A parameter named key of the request, of input 0, of output 0: its value to set. */
Param *oipt_param(struct oipt_req *r, const char *key);
Param *oipt_input_param(struct oipt_req *r, const char *key);
Param *oipt_output_param(struct oipt_req *r, const char *key);
/* The parameter setters: int64, uint64, double, bool, string (borrowed). */
void oipt_int(Param *p, long long v);
void oipt_uint(Param *p, unsigned long long v);
void oipt_double(Param *p, double v);
void oipt_bool(Param *p, int v);
void oipt_string(Param *p, const char *s);

/* The request packed (malloc'd), *len bytes. */
unsigned char *oipt_pack(const struct oipt_req *r, size_t *len);
/* Pack, then oip_infer_decode into in: its return. */
int oipt_decode(struct oipt_req *r, struct oip_infer *in, struct failure *e);
/* in's body through v2_decode_infer_seq with the built-in model. */
int oipt_v2(struct v2_request *v, const struct oip_infer *in, struct failure *e);

#endif
