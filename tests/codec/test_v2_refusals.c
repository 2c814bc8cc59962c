/* test_v2_refusals.c -- every refusal of the Open Inference Protocol
 * infer codec (codec/v2.h) names the problem. Bodies are written with '
 * for " (see v2ct_q()). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "api/service.h"
#include "codec/v2.h"
#include "tests/support/check.h"
#include "tests/support/golden.h"
#include "tests/support/golden_v2.h"
#include "tests/support/limits.h"
#include "tests/codec/v2_codec_shared.h"

/* ---------------------------------------------------------------------- */
/* Refusals                                                                */

#define Q22 "{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}"

#define P1 "'parameters': {'num_heads': 1}"

#define HL_JSON (-2) /* header length: the JSON text's */

struct refusal {
    const char *body; /* ' for " */
    int model;        /* 1: the tiny model (E 4, H 2), 2: it with bad defaults */
    const char *bin;  /* bytes after the JSON */
    size_t nbin;
    long long hl;     /* -1, HL_JSON or a number */
    int code;
    const char *msg;  /* a part of the message */
};

static const char inf_bits[] = "\0\0\x80\x3f\0\0\x80\x7f\0\0\0\0\0\0\0\0"; /* 1, +inf, 0, 0 */

static const struct refusal refusals[] = {
    /* the JSON part and its fields */
    {"{'inputs': [", 0, NULL, 0, -1, ERR_INVALID_JSON, "invalid JSON at line 1"},
    {"[1]", 0, NULL, 0, -1, ERR_INVALID_JSON, "must be a JSON object"},
    {"", 0, NULL, 0, -1, ERR_INVALID_JSON, "the request body is empty"},
    {"{'inputs': [" Q22 "], " P1 ", 'inputs': []}", 0, NULL, 0, -1, ERR_INVALID_JSON,
     "duplicate object key"},
    {"{'inputs': [" Q22 "], " P1 ", 'model': 'x'}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "the request has an unknown field 'model' (its fields are id, parameters, inputs, "
     "outputs, model_name)"},
    {"{'id': 5, 'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "id must be a string"},
    {"{" P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "inputs must be an array"},
    {"{'inputs': [5], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "inputs[0] must be an object with a string name"},
    {"{'inputs': [], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' is required"},
    {"{'inputs': [" Q22 ", {'name': 'foo', 'shape': [1], 'datatype': 'FP32', 'data': [1]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input 'foo'"},
    {"{'inputs': [" Q22 ", " Q22 "], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' already exists in request"},
    {"{'inputs': [{'name': 'query', 'shape': [3, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4, "
     "5, 6, 7, 8, 9, 10, 11, 12]}, {'name': 'out_proj_bias', 'shape': [4], 'datatype': 'FP32', "
     "'data': [0, 0, 0, 0]}]}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'out_proj_bias': model 'tiny' holds its own weights"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': [1], "
     "'content': 1}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' has an unknown field 'content'"},
    /* datatypes */
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'BOOL', 'data': [true]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query' has datatype BOOL; it takes "
     "FP32"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'INT32', "
     "'data': [0, 0, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype INT32; it takes BOOL or FP32"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [2], 'datatype': 'FP32', "
     "'data': [0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'key_padding_mask' has datatype FP32; it takes BOOL"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_bias', 'shape': [6], 'datatype': 'FP16', "
     "'data': [0, 0, 0, 0, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'in_proj_bias' has datatype FP16; it takes FP32"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'data': [1]}], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "input 'query': datatype must be a string"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [true, false, false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype FP32 but its data holds booleans"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'data': [[0, 1], [0, 0]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "input 'attn_mask' has datatype BOOL but its data holds numbers"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [2], 'datatype': 'BOOL', "
     "'data': [0, 1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "key_padding_mask.data[0] is not a boolean"},
    /* shapes against data */
    {"{'inputs': [{'name': 'query', 'shape': [2, 3], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4, 5]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': shape (2, 3) "
     "does not match the true shape of data: 5 elements where the shape needs 6"},
    {"{'inputs': [{'name': 'query', 'shape': [3, 2], 'datatype': 'FP32', 'data': [[1, 2, 3], "
     "[4, 5, 6]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': shape (3, 2) "
     "does not match the true shape (2, 3) of its nested data"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [[1, 2], "
     "[3]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1]: ragged array"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "[4]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[3] is not a number"},
    {"{'inputs': [{'name': 'query', 'shape': [-1, 2], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query: dimension 0 is -1; every dimension "
     "must be >= 1"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 0], 'datatype': 'FP32', 'data': []}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query: dimension 1 is 0"},
    {"{'inputs': [{'name': 'query', 'shape': [4294967296, 4294967296], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE,
     "max_tensor_elements"},
    {"{'inputs': [{'name': 'query', 'shape': [4097, 4097], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE,
     "query: shape (4097, 4097) has more than 16777216 elements"},
    {"{'inputs': [{'name': 'query', 'shape': [99999999999999999999, 1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_PAYLOAD_TOO_LARGE, "beyond 2^63"},
    {"{'inputs': [{'name': 'query', 'shape': [2.0, 1], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.shape[0] is not an integer"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1, 1, 1, 1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.shape must be an "
     "array of 1 to 4 integers"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': 1}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "input 'query': data must be an array"},
    /* values */
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, "
     "'-inf']}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1] is not a "
     "number"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, "
     "1e39]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[1] is out of float32 "
     "range"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [[1, "
     "1e400]]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR, "query.data[0][1] is out of "
     "float32 range"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [0, null, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_TENSOR,
     "attn_mask.data[1] is null"},
    /* binary data */
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 16, HL_JSON, ERR_INVALID_TENSOR,
     "query element 1 is not finite"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'FP32', "
     "'parameters': {'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 16, HL_JSON,
     ERR_INVALID_TENSOR, "attn_mask element 1 is NaN or +inf"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'parameters': {'binary_data_size': 4}}], " P1 "}", 0, "\0\2\0\0", 4, HL_JSON,
     ERR_INVALID_TENSOR, "attn_mask: bool byte 1 is 2, not 0 or 1"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'data': [1], "
     "'parameters': {'binary_data_size': 4}}], " P1 "}", 0, "\0\0\0\0", 4, HL_JSON,
     ERR_INVALID_PARAMETER, "input 'query' has both data and binary_data_size"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32'}], " P1 "}", 0, NULL,
     0, -1, ERR_INVALID_PARAMETER, "input 'query' has no data"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 12}}], " P1 "}", 0, inf_bits, 12, HL_JSON, ERR_INVALID_TENSOR,
     "input 'query': binary_data_size is 12 bytes but shape (2, 2) of FP32 needs 16"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': -16}}], " P1 "}", 0, inf_bits, 16, HL_JSON, ERR_INVALID_PARAMETER,
     "input 'query': binary_data_size must be an integer >= 0"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, inf_bits, 15, HL_JSON, ERR_INVALID_TENSOR,
     "input 'query': binary_data_size 16 goes past the end of the body (15 bytes"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, inf_bits + 8, 9, HL_JSON, ERR_INVALID_TENSOR,
     "1 bytes of binary data after the JSON part belong to no input"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, "\0", 1, HL_JSON, ERR_INVALID_TENSOR,
     "1 bytes of binary data after the JSON part belong to no input"},
    {"{'inputs': [{'name': 'query', 'shape': [2, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query' has binary_data_size but the request has no binary part"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, 1000, ERR_BAD_REQUEST,
     "Inference-Header-Content-Length 1000 is beyond the body's"},
    {"{'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, 0, ERR_BAD_REQUEST,
     "a raw binary request) is not supported"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 1], 'datatype': 'FP32', 'parameters': 5}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "input 'query': parameters must be an "
     "object"},
    /* parameters */
    {"{'inputs': [" Q22 "], 'parameters': 1}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters must be an object"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'need_weights': 'no'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.need_weights must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'average_attn_weights': 1}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.average_attn_weights must be true or "
     "false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'is_causal': 1}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.is_causal must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'binary_data_output': 'true'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.binary_data_output must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': 0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': 1e39}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'scale': '0.5'}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.scale must be a number > 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'positional_encoding': 'rope'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.positional_encoding must be "
     "\"sinusoidal\""},
    {"{'inputs': [" Q22 "]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.num_heads is required by the built-in model 'attention'"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 2.0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.num_heads must be an integer >= 1"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 0}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.num_heads must be an integer >= 1"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1e30}}", 0, NULL, 0, -1,
     ERR_PAYLOAD_TOO_LARGE, "parameters.num_heads is beyond 2^63"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1000}}", 0, NULL, 0, -1,
     ERR_PAYLOAD_TOO_LARGE, "parameters.num_heads 1000 exceeds the limit 256 (max_heads)"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 3}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "embed_dim 2 is not divisible by num_heads 3"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}], 'parameters': {'num_heads': 4}}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.num_heads is 4 but model 'tiny' has 2 heads; "
     "leave parameters.num_heads out or give 2"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [2, 2], 'datatype': 'BOOL', "
     "'data': [false, false, false, false]}], 'parameters': {'num_heads': 1, 'is_causal': "
     "true}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.is_causal is true and the "
     "request has an attn_mask input"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}]}", 2, NULL, 0, -1, ERR_INVALID_PARAMETER, "model 'tiny' defaults.need_weights must "
     "be true or false"},
    /* shapes against each other, and against a model */
    {"{'inputs': [" Q22 "]}", 1, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "embed_dim (query's last dimension) is 2 but model 'tiny' takes 4"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}, {'name': 'key', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}]}", 1, NULL, 0,
     -1, ERR_SHAPE_MISMATCH, "kdim (key's last dimension) is 2 but model 'tiny' "
     "takes 4"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, "
     "4]}, {'name': 'value', 'shape': [1, 3], 'datatype': 'FP32', 'data': [1, 2, 3]}]}", 1,
     NULL, 0, -1, ERR_SHAPE_MISMATCH, "vdim (value's last dimension) is 3 but model "
     "'tiny' takes 4"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_weight', 'shape': [2, 2], 'datatype': 'FP32', "
     "'data': [1, 0, 0, 1]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "in_proj_weight has shape (2, 2), expected (6, 2)"},
    {"{'inputs': [" Q22 ", {'name': 'out_proj_bias', 'shape': [3], 'datatype': 'FP32', "
     "'data': [1, 0, 0]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "out_proj_bias has shape (3,), expected (2,)"},
    {"{'inputs': [{'name': 'query', 'shape': [4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}], "
     P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH, "query must have rank 2 (L, E) or 3"},
    {"{'inputs': [" Q22 ", {'name': 'key', 'shape': [1, 2, 2], 'datatype': 'FP32', "
     "'data': [1, 2, 3, 4]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "key has rank 3 but query has rank 2"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [4], 'datatype': 'BOOL', "
     "'data': [false, false, false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "attn_mask must have rank 2 (L, S) or 3"},
    {"{'inputs': [" Q22 ", {'name': 'attn_mask', 'shape': [1, 2], 'datatype': 'BOOL', "
     "'data': [false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "attn_mask has shape (1, 2), expected (2, 2)"},
    {"{'inputs': [" Q22 ", {'name': 'key_padding_mask', 'shape': [1, 2], 'datatype': 'BOOL', "
     "'data': [false, false]}], " P1 "}", 0, NULL, 0, -1, ERR_SHAPE_MISMATCH,
     "key_padding_mask has shape (1, 2), expected (2,)"},
    {"{'inputs': [{'name': 'query', 'shape': [4097, 1], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 16388}}], " P1 "}", 0, NULL, 16388, HL_JSON, ERR_PAYLOAD_TOO_LARGE,
     "target length 4097 exceeds the limit 4096 (max_target_len)"},
    {"{'inputs': [{'name': 'query', 'shape': [4096, 8], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 131072}}], 'parameters': {'num_heads': 8}}", 0, NULL, 131072,
     HL_JSON, ERR_PAYLOAD_TOO_LARGE, "more than 67108864 (max_weights_elements); leave "
     "attention_weights out of outputs"},
    /* outputs */
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': {}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "outputs must be an array"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'logits'}]}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown output 'logits'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output'}, {'name': 'output'}]}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "output 'output' already exists in request"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': ['output']}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "outputs[0] must be an object with a string name"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'datatype': 'FP32'}]}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "output 'output' has an unknown field 'datatype'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'binary_data': 1}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.binary_data must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'need_weights': false}, "
     "'outputs': [{'name': 'attention_weights'}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'attention_weights' is requested but parameters.need_weights is false"},
    /* unknown names: the nearest known one (suggest.h) */
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 2, 'is_casual': true}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown parameter 'is_casual' (did you mean 'is_causal'?)"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'junk': [1, 2]}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown parameter 'junk'"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'binary_data_outptu': true}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown parameter 'binary_data_outptu' (did you mean "
     "'binary_data_output'?)"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'binary_data_sise': 8}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': unknown parameter 'binary_data_sise' (did you mean 'binary_data_size'?)"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'num_heads': 1}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': unknown parameter 'num_heads'"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'binary_dat': true}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': unknown parameter 'binary_dat' (did you mean 'binary_data'?)"},
    {"{'inputs': [" Q22 "], 'parametres': {'num_heads': 1}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "the request has an unknown field 'parametres' (did you mean "
     "'parameters'? its fields are"},
    {"{'inputs': [{'name': 'query', 'shap': [1, 2], 'datatype': 'FP32', 'data': [1, 2]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "input 'query' has an unknown field "
     "'shap' (did you mean 'shape'? its fields are"},
    {"{'inputs': [" Q22 ", {'name': 'qeury', 'shape': [1], 'datatype': 'FP32', 'data': [1]}], "
     P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input 'qeury' (did you mean "
     "'query'?)"},
    {"{'inputs': [" Q22 ", {'name': 'in_proj_weigth', 'shape': [1], 'datatype': 'FP32', "
     "'data': [1]}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER, "unknown input "
     "'in_proj_weigth' (did you mean 'in_proj_weight'?)"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'outptu'}]}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "unknown output 'outptu' (did you mean 'output'?)"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'attention_weight'}]}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "unknown output 'attention_weight' (did you mean "
     "'attention_weights'?)"},
    /* reserved names: their types; the extensions the server does not have */
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 42, "
     "'query_position_offset': 1}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.query_position_offset cannot be given inside a sequence"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 'abc', "
     "'kv_cache_dtype': 'FP8'}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.kv_cache_dtype must be \"FP32\", \"FP16\" or \"BF16\""},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'kv_cache_dtype': 'FP16'}}", 0,
     NULL, 0, -1, ERR_INVALID_PARAMETER, "parameters.kv_cache_dtype applies to a sequence only"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 'a b'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_id must be at most 128 visible ASCII"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_start': true}}", 0, NULL,
     0, -1, ERR_INVALID_PARAMETER, "parameters.sequence_start needs a sequence_id"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': 0, "
     "'sequence_end': true}}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "parameters.sequence_end needs a sequence_id"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_id': -1}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_id must be a string or an integer from 0 "
     "to 18446744073709551615"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'sequence_start': 0}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.sequence_start must be true or false"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'priority': 'high'}}", 0, NULL, 0,
     -1, ERR_INVALID_PARAMETER, "parameters.priority must be an integer >= 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'timeout': -5}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.timeout must be an integer >= 0"},
    {"{'inputs': [" Q22 "], 'parameters': {'num_heads': 1, 'headers': 'x'}}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "parameters.headers must be an object"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'data': [1, 2], "
     "'parameters': {'content_type': 5}}], " P1 "}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "input 'query': parameters.content_type must be a string"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'classification': 3}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.classification: Triton's classification extension is not "
     "supported"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'shared_memory_region': 'r', 'shared_memory_byte_size': 8}}], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "input 'query': parameters.shared_memory_region: Triton's "
     "shared-memory extension is not supported"},
    {"{'inputs': [" Q22 "], " P1 ", 'outputs': [{'name': 'output', 'parameters': "
     "{'shared_memory_offset': 0}}]}", 0, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "output 'output': parameters.shared_memory_offset: Triton's shared-memory extension"},
    /* KServe's model_name: the path's model */
    {"{'model_name': 'bert', 'inputs': [" Q22 "], " P1 "}", 0, NULL, 0, -1,
     ERR_INVALID_PARAMETER, "model_name must be the name of the model in the path, "
     "'attention'"},
    {"{'model_name': 'attention', 'inputs': [" Q22 "]}", 1, NULL, 0, -1, ERR_INVALID_PARAMETER,
     "model_name must be the name of the model in the path, 'tiny'"},
    /* binary data without Inference-Header-Content-Length */
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, "\0\0\x80\x3f\0\0\0\x40", 8, -1,
     ERR_BAD_REQUEST, "the body has 8 bytes after its JSON part (139 bytes): a request with "
     "binary tensor data needs the header Inference-Header-Content-Length: 139"},
    {"{'inputs': [{'name': 'query', 'shape': [1, 2], 'datatype': 'FP32', 'parameters': "
     "{'binary_data_size': 8}}], " P1 "}", 0, "    \x0a\x0d\x09 ", 8, -1, ERR_INVALID_PARAMETER,
     "input 'query' has binary_data_size but the request has no binary part"},
};

/* Every refusal, and again with the JSON part padded past
 * CODEC_FAST_ERRORS_FROM (trailing spaces), where the fast reader of
 * "data" answers without handing a large body to jansson: the same
 * answer (these values are small). */
Test(v2_codec, every_refusal_names_the_problem)
{
    const struct codec_limits lim = test_limits();
    int failed = 0;
    const size_t n = sizeof refusals / sizeof refusals[0];
    for (size_t i = 0; i < 2 * n; i++) {
        const struct refusal *c = &refusals[i % n];
        const size_t pad = i < n ? 0 : CODEC_FAST_ERRORS_FROM + 1;
        if (pad && (c->hl >= 0 || (c->hl == -1 && c->nbin) || !c->body[0]))
            continue; /* a header length given as a number, binary bytes read as JSON,
                         the empty body */
        struct model m;
        v2ct_test_model(&m, c->model == 2 ? json_pack("{ss}", "need_weights", "no") : NULL);
        size_t len;
        long long hl;
        char *zeros = c->nbin && !c->bin ? calloc(1, c->nbin) : NULL;
        char *body = v2ct_with_binary(c->body, c->bin ? c->bin : zeros, c->nbin, &len, &hl);
        if (pad) { /* spaces after the JSON part */
            body = realloc(body, len + pad);
            memmove(body + hl + pad, body + hl, len - (size_t)hl);
            memset(body + hl, ' ', pad);
            len += pad, hl += (long long)pad;
        }
        if (c->hl != HL_JSON)
            hl = c->hl;
        struct v2_request r;
        struct failure e = {0};
        const int rc = v2_decode_infer(&r, body, len, hl, c->model ? &m : NULL, &lim, &e);
        if (rc != -1 || e.code != c->code || !strstr(e.msg, c->msg)) {
            cr_log_error("case %zu%s (%s): rc %d, %s: \"%s\"; expected %s: \"%s\"", i % n,
                         pad ? ", padded" : "", c->body, rc, http_error_slug(e.code), e.msg,
                         http_error_slug(c->code), c->msg);
            failed++;
        }
        v2_request_deinit(&r);
        free(body);
        free(zeros);
        v2ct_test_model_deinit(&m);
    }
    cr_log_info("%zu refusals", n);
    cr_assert_eq(failed, 0, "%d of %zu refusals answered wrongly", failed, n);
}
