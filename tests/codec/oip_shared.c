/* oip_shared.c -- see oip_shared.h. */
#include "tests/codec/oip_shared.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/limits.h"

void oipt_init(struct oipt_req *r, const char *model)
{
    memset(r, 0, sizeof *r);
    r->q = (Inference__ModelInferRequest)INFERENCE__MODEL_INFER_REQUEST__INIT;
    r->q.model_name = (char *)model;
    r->q.inputs = r->inp, r->q.outputs = r->outp, r->q.parameters = r->pep;
    r->q.raw_input_contents = r->raw;
}

Inference__ModelInferRequest__InferInputTensor *oipt_input(struct oipt_req *r, const char *name,
                                                           const char *datatype,
                                                           const int64_t *shape, int nd,
                                                           int typed)
{
    const size_t i = r->q.n_inputs++;
    cr_assert_lt(i, 4);
    Inference__ModelInferRequest__InferInputTensor *in = &r->in[i];
    *in = (Inference__ModelInferRequest__InferInputTensor)
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in->name = (char *)name, in->datatype = (char *)datatype;
    memcpy(r->shape[i], shape, (size_t)nd * sizeof *shape);
    in->shape = r->shape[i], in->n_shape = (size_t)nd;
    in->parameters = r->iep;
    if (typed) {
        r->c[i] = (Inference__InferTensorContents)INFERENCE__INFER_TENSOR_CONTENTS__INIT;
        in->contents = &r->c[i];
    }
    r->inp[i] = in;
    return in;
}

void oipt_raw(struct oipt_req *r, const void *p, size_t n)
{
    r->raw[r->q.n_raw_input_contents++] = (ProtobufCBinaryData){n, (uint8_t *)p};
}

void oipt_output(struct oipt_req *r, const char *name)
{
    const size_t i = r->q.n_outputs++;
    r->out[i] = (Inference__ModelInferRequest__InferRequestedOutputTensor)
        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
    r->out[i].name = (char *)name;
    r->out[i].parameters = r->oep;
    r->outp[i] = &r->out[i];
}

static Param *value(struct oipt_req *r)
{
    Param *p = &r->pv[r->npv++];
    *p = (Param)INFERENCE__INFER_PARAMETER__INIT;
    return p;
}

Param *oipt_param(struct oipt_req *r, const char *key)
{
    const size_t i = r->q.n_parameters++;
    r->pe[i] = (Inference__ModelInferRequest__ParametersEntry)
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
    r->pe[i].key = (char *)key, r->pe[i].value = value(r);
    r->pep[i] = &r->pe[i];
    return r->pe[i].value;
}

Param *oipt_input_param(struct oipt_req *r, const char *key)
{
    const size_t i = r->in[0].n_parameters++;
    r->ie[i] = (Inference__ModelInferRequest__InferInputTensor__ParametersEntry)
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__PARAMETERS_ENTRY__INIT;
    r->ie[i].key = (char *)key, r->ie[i].value = value(r);
    r->iep[i] = &r->ie[i];
    return r->ie[i].value;
}

Param *oipt_output_param(struct oipt_req *r, const char *key)
{
    const size_t i = r->out[0].n_parameters++;
    r->oe[i] = (Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry)
        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__PARAMETERS_ENTRY__INIT;
    r->oe[i].key = (char *)key, r->oe[i].value = value(r);
    r->oep[i] = &r->oe[i];
    return r->oe[i].value;
}

void oipt_int(Param *p, long long v)
{
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p->int64_param = v;
}

void oipt_uint(Param *p, unsigned long long v)
{
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
    p->uint64_param = v;
}

void oipt_double(Param *p, double v)
{
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM;
    p->double_param = v;
}

void oipt_bool(Param *p, int v)
{
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    p->bool_param = v;
}

void oipt_string(Param *p, const char *s)
{
    p->parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    p->string_param = (char *)s;
}

unsigned char *oipt_pack(const struct oipt_req *r, size_t *len)
{
    *len = inference__model_infer_request__get_packed_size(&r->q);
    unsigned char *b = malloc(*len + 1);
    cr_assert_eq(inference__model_infer_request__pack(&r->q, b), *len);
    return b;
}

int oipt_decode(struct oipt_req *r, struct oip_infer *in, struct failure *e)
{
    size_t len;
    unsigned char *b = oipt_pack(r, &len);
    const int rc = oip_infer_decode(in, b, len, e);
    free(b);
    return rc;
}

int oipt_v2(struct v2_request *v, const struct oip_infer *in, struct failure *e)
{
    const struct codec_limits lim = test_limits();
    return v2_decode_infer_seq(v, in->body, in->len, in->header_len, NULL, &lim, NULL, e);
}
