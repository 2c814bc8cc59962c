#!/usr/bin/env python3
"""Write tests/cases/*.json: one invalid request per file, with the answer
the service must give. Each file: {"status", "code", "message_contains",
and "body" (a JSON request) or "raw" (the exact body text), and "stage":
"compute" when the request is well formed and the computation refuses it
(the range rule)}.

Both the codec's unit test and the HTTP integration test run every file.
Regenerate with: python3 tests/gen_cases.py (plain Python, no packages).
"""
import base64
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases")

Q = [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.0, 1.1, 1.2], [1.3, 1.4, 1.5, 1.6]]


def b64f(*xs):
    """float32 values as the {shape, dtype, b64} form's b64 string"""
    return base64.b64encode(struct.pack("<%df" % len(xs), *xs)).decode()


INF = float("inf")
MASK0 = [[0, 0, 0, 0]] * 4


def mask_with(i, j, x):
    """the 4x4 zero mask with x at [i][j]"""
    m = [row[:] for row in MASK0]
    m[i][j] = x
    return m


def req(**kw):
    r = {"query": Q, "num_heads": 2}
    r.update(kw)
    return {k: v for k, v in r.items() if v is not None}


cases = {
    # invalid_json
    "json_syntax": (400, "invalid_json", "invalid JSON at line 1", None, '{"query": [[1, 2]'),
    "json_empty_body": (400, "invalid_json", "empty", None, ""),
    "json_not_object": (400, "invalid_json", "must be a JSON object", None, "[1, 2]"),
    "json_duplicate_key": (400, "invalid_json", "duplicate", None,
                           '{"num_heads": 1, "num_heads": 2, "query": [[1]]}'),
    "json_deep_nesting": (400, "invalid_json", "depth", None, "[" * 10000 + "]" * 10000),
    "json_garbage_bytes": (400, "invalid_json", "invalid JSON", None, "\x01\x02garbage\xff"),
    # a NUL inside a value once sent the fast decoder's value skipper into an
    # endless loop (found by make fuzz)
    # (jansson, the reference, ignores one NUL right after a number; these
    # NULs stand where a value starts)
    "json_nul_in_value": (400, "invalid_json", "invalid JSON", None, '{"num_heads": 1, "query": [[1]], "scale": \x001}'),
    "json_nul_in_shape": (400, "invalid_json", "invalid JSON", None, '{"query": {"shape": [2, \x002], "data": [1, 2, 3, 4]}, "num_heads": 1}'),
    # invalid_tensor
    "tensor_ragged": (400, "invalid_tensor", "query[1]: ragged array", req(query=[[1, 2], [3]], num_heads=1), None),
    "tensor_ragged_deeper": (400, "invalid_tensor", "ragged", req(query=[[1, 2], [3, [4]]], num_heads=1), None),
    "tensor_string_element": (400, "invalid_tensor", "query[0][1] is not a number", req(query=[[1, "a"]], num_heads=1), None),
    "tensor_null_element": (400, "invalid_tensor", "is not a number", req(query=[[1, None]], num_heads=1), None),
    "tensor_float32_overflow": (400, "invalid_tensor", "out of float32 range", req(query=[[1e39, 0]], num_heads=1), None),
    # numbers jansson cannot hold are still JSON numbers: beyond double is
    # beyond float32 (this case once answered invalid_json), and so is an
    # integer of 40 digits
    "tensor_number_beyond_double": (400, "invalid_tensor", "query[0][0] is out of float32 range", None,
                                    '{"query": [[1e400]], "num_heads": 1}'),
    "tensor_integer_beyond_float32": (400, "invalid_tensor", "query[0][1] is out of float32 range", None,
                                      '{"query": [[1, 1000000000000000000000000000000000000000]], "num_heads": 1}'),
    "tensor_shape_beyond_2_63": (413, "payload_too_large", "query.shape[0] is beyond 2^63", None,
                                 '{"query": {"shape": [100000000000000000000, 1], "data": [1]}, "num_heads": 1}'),
    # -inf: in float masks only, as "-inf", "-Infinity" or base64 bits
    "tensor_mask_plus_inf_string": (400, "invalid_tensor", 'attn_mask[1][2] is not a number or "-inf"', req(attn_mask=mask_with(1, 2, "+inf")), None),
    "tensor_mask_nan_string": (400, "invalid_tensor", 'attn_mask[3][0] is not a number or "-inf"', req(attn_mask=mask_with(3, 0, "NaN")), None),
    "tensor_mask_null": (400, "invalid_tensor", 'attn_mask[0][1] is null; JavaScript', req(attn_mask=mask_with(0, 1, None)), None),
    "tensor_mask_b64_plus_inf": (400, "invalid_tensor", "attn_mask element 5 is NaN or +inf", req(attn_mask={"shape": [4, 4], "dtype": "float32", "b64": b64f(*([0.0] * 5 + [INF] + [0.0] * 10))}), None),
    "tensor_neg_inf_string_in_query": (400, "invalid_tensor", "query[0][1] is not a number", req(query=[[1, "-inf"]], num_heads=1), None),
    "tensor_neg_inf_b64_in_query": (400, "invalid_tensor", "query element 1 is not finite", req(query={"shape": [1, 2], "dtype": "float32", "b64": b64f(1.0, -INF)}, num_heads=1), None),
    "tensor_neg_inf_in_weights": (400, "invalid_tensor", "weights.out_proj_bias[1] is not a number", req(weights={"out_proj_bias": [0, "-Infinity", 0, 0]}), None),
    "tensor_neg_inf_in_padding_mask": (400, "invalid_tensor", "key_padding_mask[1] is not a boolean", req(key_padding_mask=[False, "-inf", False, False]), None),
    "tensor_bad_base64": (400, "invalid_tensor", "not valid base64", req(query={"shape": [1, 2], "dtype": "float32", "b64": "AAA*AAAAAAA="}, num_heads=1), None),
    "tensor_base64_length": (400, "invalid_tensor", "query.b64", req(query={"shape": [1, 2], "dtype": "float32", "b64": "AAAAAA=="}, num_heads=1), None),
    "tensor_base64_nan": (400, "invalid_tensor", "not finite", req(query={"shape": [1, 1], "dtype": "float32", "b64": "AADAfw=="}, num_heads=1), None),
    "tensor_shape_data_mismatch": (400, "invalid_tensor", "query.data has 3 elements but shape (2, 2) needs 4", req(query={"shape": [2, 2], "data": [1, 2, 3]}, num_heads=1), None),
    "tensor_shape_not_integers": (400, "invalid_tensor", "query.shape[1] is not an integer", req(query={"shape": [2, "x"], "data": [1, 2]}, num_heads=1), None),
    "tensor_zero_dimension": (400, "invalid_tensor", "dimension 0 is 0", req(query={"shape": [0, 2], "data": []}, num_heads=1), None),
    "tensor_empty_array": (400, "invalid_tensor", "empty dimension", req(query=[], num_heads=1), None),
    "tensor_scalar": (400, "invalid_tensor", "query must be a tensor", req(query=5, num_heads=1), None),
    "tensor_too_many_dims": (400, "invalid_tensor", "more than 4 dimensions", req(query=[[[[[1]]]]], num_heads=1), None),
    "tensor_unknown_field": (400, "invalid_tensor", "unknown field 'foo'", req(query={"shape": [1, 1], "data": [1], "foo": 1}, num_heads=1), None),
    "tensor_unknown_field_typo": (400, "invalid_tensor", "query has an unknown field 'dtpye' (did you mean 'dtype'?)", req(query={"shape": [1, 1], "dtpye": "float32", "b64": "AACAPw=="}, num_heads=1), None),
    "tensor_data_and_b64": (400, "invalid_tensor", "exactly one of", req(query={"shape": [1, 1], "data": [1], "dtype": "float32", "b64": "AACAPw=="}, num_heads=1), None),
    "tensor_bad_dtype": (400, "invalid_tensor", "dtype", req(query={"shape": [1, 1], "dtype": "float64", "b64": "AAAAAAAA8D8="}, num_heads=1), None),
    "tensor_padding_not_bool": (400, "invalid_tensor", "key_padding_mask[0] is not a boolean", req(key_padding_mask=[1, 0, 0, 0]), None),
    "tensor_mask_mixed": (400, "invalid_tensor", "attn_mask[0][1] is not a boolean", req(attn_mask=[[True, 0.5, False, False]] * 4), None),
    # shape_mismatch
    "shape_query_rank1": (400, "shape_mismatch", "query must have rank 2", req(query=[1, 2], num_heads=1), None),
    "shape_key_rank": (400, "shape_mismatch", "key has rank 3 but query has rank 2", req(key=[Q]), None),
    "shape_batch_differs": (400, "shape_mismatch", "key has batch size 2 but query has 1", req(query=[Q], key=[Q, Q]), None),
    "shape_key_value_length": (400, "shape_mismatch", "key has source length 4 but value has 3", req(key=Q, value=Q[:3]), None),
    "shape_in_proj_weight": (400, "shape_mismatch", "weights.in_proj_weight has shape (4, 4), expected (12, 4)", req(weights={"in_proj_weight": Q}), None),
    "shape_out_proj_bias": (400, "shape_mismatch", "weights.out_proj_bias has shape (3,), expected (4,)", req(weights={"out_proj_bias": [0, 0, 0]}), None),
    "shape_attn_mask": (400, "shape_mismatch", "attn_mask has shape (3, 5), expected (4, 4) or (2, 4, 4)", req(attn_mask=[[False] * 5] * 3), None),
    # "causal" takes L != S (upper-left) since the attention variants, so
    # the case that refused it asks with L != S for a word there is not
    "param_attn_mask_causal_upper_right": (400, "invalid_parameter", 'attn_mask must be "causal", "causal_lower_right" or a tensor, not "causal_upper_right"', req(key=Q[:3], attn_mask="causal_upper_right"), None),
    "shape_kdim_without_projection": (400, "shape_mismatch", "key has 2 features but embed_dim is 4", req(key=[[1, 2]] * 4), None),
    "shape_padding": (400, "shape_mismatch", "key_padding_mask has shape (3,), expected (4,)", req(key_padding_mask=[True, False, False]), None),
    "shape_mask_rank": (400, "shape_mismatch", "attn_mask must have rank 2", req(attn_mask=[True, False, False, False]), None),
    # invalid_parameter
    "param_missing_num_heads": (400, "invalid_parameter", "num_heads is required", req(num_heads=None), None),
    "param_num_heads_zero": (400, "invalid_parameter", "num_heads must be an integer >= 1", req(num_heads=0), None),
    "param_num_heads_string": (400, "invalid_parameter", "num_heads must be an integer", req(num_heads="2"), None),
    "param_num_heads_real": (400, "invalid_parameter", "num_heads must be an integer", None, '{"query": [[1, 2]], "num_heads": 2.0}'),
    "param_not_divisible": (400, "invalid_parameter", "embed_dim 4 is not divisible by num_heads 3", req(num_heads=3), None),
    "param_missing_query": (400, "invalid_parameter", "query is required", {"num_heads": 1}, None),
    "param_unknown_field": (400, "invalid_parameter", "unknown field 'querry' (did you mean 'query'?)", req(querry=Q), None),
    "param_unknown_field_swapped": (400, "invalid_parameter", "unknown field 'nmu_heads' (did you mean 'num_heads'?)", req(num_heads=None, nmu_heads=2), None),
    "param_unknown_weight": (400, "invalid_parameter", "weights has an unknown field 'wq'", req(weights={"wq": Q}), None),
    "param_unknown_weight_typo": (400, "invalid_parameter", "weights has an unknown field 'out_proj_bais' (did you mean 'out_proj_bias'?)", req(weights={"out_proj_bais": [0, 0, 0, 0]}), None),
    "param_weights_not_object": (400, "invalid_parameter", "weights must be an object", req(weights=[1]), None),
    "param_attn_mask_word": (400, "invalid_parameter", "attn_mask must be \"causal\", \"causal_lower_right\" or a tensor", req(attn_mask="bidirectional"), None),
    # the attention variants (docs/variants.md): 400 naming the field
    "variant_kv_heads_not_dividing": (400, "invalid_parameter", "num_kv_heads is 3, which does not divide num_heads 2", req(num_kv_heads=3), None),
    "variant_kv_heads_zero": (400, "invalid_parameter", "num_kv_heads must be an integer >= 1", req(num_kv_heads=0), None),
    "variant_kv_heads_real": (400, "invalid_parameter", "num_kv_heads must be an integer >= 1", req(num_kv_heads=1.5), None),
    "variant_head_dim_zero": (400, "invalid_parameter", "head_dim must be an integer >= 1", req(head_dim=0), None),
    "variant_head_dim_limit": (413, "payload_too_large", "head_dim 4096 times num_heads 2 exceeds the limit 4096 (max_embed_dim)", req(head_dim=4096), None),
    "variant_head_dim_identity": (400, "shape_mismatch", "weights.q_proj_weight is absent, and the identity needs num_heads x head_dim = 6 to equal embed_dim 4", req(head_dim=3), None),
    "variant_kv_heads_identity": (400, "shape_mismatch", "weights.k_proj_weight is absent, and the identity needs num_kv_heads x head_dim = 2 to equal kdim 4", req(num_kv_heads=1), None),
    "variant_gqa_weight_shape": (400, "shape_mismatch", "weights.k_proj_weight has shape (4, 4), expected (2, 4)", req(num_kv_heads=1, weights={"k_proj_weight": Q}), None),
    "variant_gqa_in_proj_shape": (400, "shape_mismatch", "weights.in_proj_weight has shape (12, 4), expected (8, 4)", req(num_kv_heads=1, weights={"in_proj_weight": Q * 3}), None),
    "variant_head_dim_out_proj_shape": (400, "shape_mismatch", "weights.out_proj_weight has shape (4, 4), expected (4, 2)", req(head_dim=1, weights={"q_proj_weight": Q[:2], "k_proj_weight": Q[:2], "v_proj_weight": Q[:2], "out_proj_weight": Q}), None),
    "variant_rope_style_missing": (400, "invalid_parameter", "rope.style is required with rope.theta", req(rope={"theta": 500000}), None),
    "variant_rope_style_unknown": (400, "invalid_parameter", 'rope.style must be "half"', req(rope={"style": "neox"}), None),
    "variant_rope_not_object": (400, "invalid_parameter", "rope must be an object", req(rope="half"), None),
    "variant_rope_unknown_field": (400, "invalid_parameter", "rope has an unknown field 'base'", req(rope={"style": "half", "base": 10000}), None),
    "variant_rope_unknown_field_typo": (400, "invalid_parameter", "rope has an unknown field 'thetta' (did you mean 'theta'?)", req(rope={"style": "half", "thetta": 10000}), None),
    "variant_rope_theta_zero": (400, "invalid_parameter", "rope.theta must be a number > 0", req(rope={"style": "half", "theta": 0}), None),
    "variant_rope_rotary_dim_odd": (400, "invalid_parameter", "rope.rotary_dim is 1: it must be even", req(rope={"style": "half", "rotary_dim": 1}), None),
    "variant_rope_rotary_dim_above_d": (400, "invalid_parameter", "rope.rotary_dim is 4, more than head_dim 2", req(rope={"style": "interleaved", "rotary_dim": 4}), None),
    "variant_rope_odd_head_dim": (400, "invalid_parameter", "head_dim 1 is odd", req(num_heads=4, rope={"style": "half"}), None),
    "variant_offset_negative": (400, "invalid_parameter", "query_position_offset must be an integer from 0 to 2^52", req(query_position_offset=-1), None),
    "variant_offset_real": (400, "invalid_parameter", "query_position_offset must be an integer", req(query_position_offset=2.5), None),
    "variant_alibi_and_slopes": (400, "invalid_parameter", "alibi and alibi_slopes cannot be used together", req(alibi=True, alibi_slopes=[0.5, 0.25]), None),
    "variant_alibi_not_bool": (400, "invalid_parameter", "alibi must be true or false", req(alibi="yes"), None),
    "variant_alibi_slopes_count": (400, "shape_mismatch", "alibi_slopes has shape (3,), expected (2,)", req(alibi_slopes=[0.5, 0.25, 0.125]), None),
    "variant_alibi_slopes_not_numbers": (400, "invalid_tensor", "alibi_slopes[1] is not a number", req(alibi_slopes=[0.5, "x"]), None),
    "variant_window_left_below_minus_1": (400, "invalid_parameter", "window[0] (left) must be an integer >= -1", req(window=[-2, 0]), None),
    "variant_window_right_real": (400, "invalid_parameter", "window[1] (right) must be an integer >= -1", req(window=[3, 0.5]), None),
    "variant_window_not_pair": (400, "invalid_parameter", "window must be [left, right]", req(window=[3]), None),
    "variant_softcap_zero": (400, "invalid_parameter", "softcap must be a number > 0", req(softcap=0), None),
    "variant_softcap_string": (400, "invalid_parameter", "softcap must be a number > 0", req(softcap="50"), None),
    "param_need_weights_type": (400, "invalid_parameter", "need_weights must be true or false", req(need_weights="yes"), None),
    "param_average_type": (400, "invalid_parameter", "average_attn_weights must be true or false", req(average_attn_weights=1), None),
    "param_scale_negative": (400, "invalid_parameter", "scale must be a number > 0", req(scale=-1), None),
    "param_scale_string": (400, "invalid_parameter", "scale must be a number > 0", req(scale="big"), None),
    "param_positional": (400, "invalid_parameter", "positional_encoding must be \"sinusoidal\"", req(positional_encoding="learned"), None),
    "param_output_encoding": (400, "invalid_parameter", "output_encoding must be \"json\" or \"base64\"", req(output_encoding="hex"), None),
    "param_tokens_type": (400, "invalid_parameter", "tokens[1] is not a string", req(tokens=["a", 1, "c", "d"]), None),
    # labels: exactly one per query position (L) and per key position (S),
    # the same for every batch item
    "param_tokens_count": (400, "invalid_parameter", "tokens has 3 entries but query has L = 4", req(tokens=["a", "b", "c"]), None),
    "param_tokens_per_batch_item": (400, "invalid_parameter", "tokens has 8 entries but query has L = 4", req(query=[Q, Q], tokens=list("abcdefgh")), None),
    "param_key_tokens_count": (400, "invalid_parameter", "key_tokens has 1 entries but the keys have S = 4", req(key_tokens=["x"]), None),
    "param_key_tokens_cross": (400, "invalid_parameter", "key_tokens has 4 entries but the keys have S = 2", req(key=Q[:2], tokens=list("abcd"), key_tokens=list("wxyz")), None),
    "param_packed_and_separate": (400, "invalid_parameter", "mutually exclusive", req(weights={"in_proj_weight": Q * 3, "q_proj_weight": Q}), None),
    # the range rule (docs/numerics.md, "Semantics"): finite inputs, a result beyond float32
    "range_row_below_minus_flt_max": (400, "invalid_parameter", "every unmasked attention score of query 0 (batch 0, head 0) is below -3.4e38",
                                      {"query": [[1e20]], "key": [[-1e20], [-2e20]], "value": [[1], [2]], "num_heads": 1,
                                       "weights": {"out_proj_bias": [0.5]}}, None),
    "range_mask_minus_flt_max": (400, "invalid_parameter", "is below -3.4e38",
                                 {"query": [[1e16]], "key": [[-1e16], [-2e16]], "value": [[1], [2]], "num_heads": 1,
                                  "attn_mask": [[-3.4028234663852886e38, -3.4028234663852886e38]]}, None),
    "range_score_above_flt_max": (400, "invalid_parameter", "an attention score (q.k plus attn_mask) exceeds 3.4e38",
                                  {"query": [[1e20, 1e20]], "num_heads": 1}, None),
    "range_projection": (400, "invalid_parameter", "the query projection exceeds 3.4e38",
                         {"query": [[3e38]], "num_heads": 1, "weights": {"in_proj_bias": [3e38, 0, 0]}}, None),
    "range_scaled_query": (400, "invalid_parameter", "the scaled query q*scale exceeds 3.4e38",
                           {"query": [[1e10]], "num_heads": 1, "scale": 1e30}, None),
    "range_output": (400, "invalid_parameter", "the output exceeds 3.4e38",
                     {"query": [[1]], "value": [[3e38]], "num_heads": 1, "weights": {"out_proj_weight": [[2]]}}, None),
    # payload_too_large (default limits)
    "limit_billion_elements": (413, "payload_too_large", "max_tensor_elements", req(query={"shape": [1000, 1000000], "data": []}), None),
    "limit_target_len": (413, "payload_too_large", "target length 4097 exceeds the limit 4096 (max_target_len)", req(query={"shape": [4097, 1], "data": [0] * 4097}, num_heads=1), None),
    "limit_num_heads": (413, "payload_too_large", "num_heads 100000 exceeds the limit 256 (max_heads)", req(num_heads=100000), None),
    "limit_num_heads_beyond_2_63": (413, "payload_too_large", "num_heads is beyond 2^63; the limit is 256 (max_heads)", None,
                                    '{"query": [[1, 2]], "num_heads": 100000000000000000000}'),
    "limit_weights_output": (413, "payload_too_large", "max_weights_elements", req(query={"shape": [5, 4096, 1], "data": [0] * (5 * 4096)}, num_heads=1), None),
}

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    if old.endswith(".json"):
        os.remove(os.path.join(OUT, old))
for name, (status, code, contains, body, raw) in sorted(cases.items()):
    case = {"status": status, "code": code, "message_contains": contains}
    if name.startswith("range_"):  # decodes fine; the computation refuses it
        case["stage"] = "compute"
    if raw is not None:
        case["raw"] = raw
    else:
        case["body"] = body
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump(case, f, separators=(",", ":"))
        f.write("\n")
print(f"wrote {len(cases)} cases to {OUT}")
