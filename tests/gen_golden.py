#!/usr/bin/python3
"""Generate golden reference cases for POST /attention into tests/golden/.

Run with Debian's PyTorch 1.13:  /usr/bin/python3 tests/gen_golden.py

Each case is one JSON file {name, description, request, expected}. Inputs are
float32 drawn from a per-case numpy default_rng seed; the expected values are
computed by torch.nn.functional.multi_head_attention_forward in float64 on the
exact float32 inputs, then rounded to float32. Floats are written as
repr(float(x)), which parses back to the same float32.

How the service's semantics are mapped onto PyTorch 1.13:
  * batch_first (N, L, E) is transposed to PyTorch's (L, N, E); unbatched
    requests are run as N = 1 and squeezed.
  * absent key -> query, absent value -> key; absent matrices -> identity,
    absent biases -> zero (passed to torch explicitly).
  * a custom scale s is emulated by multiplying Wq and bq by s * sqrt(d).
  * sinusoidal PE is computed in float64, cast to float32 and added in
    float32 to query, key and value (each with its own length and width).
  * "causal" becomes a bool (L, S) mask with j > i blocked.
  * fully blocked rows: PyTorch yields NaN; the service gives that (row, head)
    all-zero weights and a zero context. Because a row may be fully blocked in
    one head only (3-D masks), torch is run with its out-projection replaced
    by a pass-through to get the per-head context, NaN contexts/weights are replaced by zero,
    and the real out-projection (and head averaging) is applied afterwards.
    A row blocked in every head thus ends up equal to out_proj_bias.
Every case is also checked against an independent numpy float64
implementation of the service's semantics.
"""
import json
import os
import sys

import numpy as np
import torch

torch.set_num_threads(1)  # deterministic reductions

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


from golden_ref import (Gen, expected_numpy, expected_torch, resolve,  # noqa: E402,F401
                        sinusoidal_pe, t64, tensor_json)


# ------------------------------------------------------------------ cases

def bmask(a):
    a = np.asarray(a)
    assert a.dtype == np.bool_, a.dtype
    return tensor_json(a)


def packed_weights(g, E):
    """All four weights, in_proj_weight packed (3E, E); drawn in this order."""
    return {"in_proj_weight": tensor_json(g.weight(3 * E, E)),
            "in_proj_bias": tensor_json(g.bias(3 * E)),
            "out_proj_weight": tensor_json(g.weight(E, E)),
            "out_proj_bias": tensor_json(g.bias(E))}


def separate_weights(g, E, kdim, vdim):
    """q/k/v projections apart (key width kdim, value width vdim), all biases."""
    return {"q_proj_weight": tensor_json(g.weight(E, E)),
            "k_proj_weight": tensor_json(g.weight(E, kdim)),
            "v_proj_weight": tensor_json(g.weight(E, vdim)),
            "in_proj_bias": tensor_json(g.bias(3 * E)),
            "out_proj_weight": tensor_json(g.weight(E, E)),
            "out_proj_bias": tensor_json(g.bias(E))}


def case_self_packed_unbatched(g):
    L, E, H = 4, 8, 2
    req = {"query": tensor_json(g.normal(L, E)), "num_heads": H,
           "weights": packed_weights(g, E)}
    return "Unbatched self-attention (only query given), packed in_proj_weight, all biases.", req


def case_cross_separate_batched(g):
    N, L, S, E, kdim, vdim, H = 2, 3, 5, 8, 6, 10, 2
    req = {"query": tensor_json(g.normal(N, L, E)),
           "key": tensor_json(g.normal(N, S, kdim)),
           "value": tensor_json(g.normal(N, S, vdim)), "num_heads": H,
           "weights": separate_weights(g, E, kdim, vdim)}
    return "Batched cross-attention, kdim=6, vdim=10, separate q/k/v weights, all biases.", req


def case_single_head_dim1(g):
    L, S, E, H = 3, 2, 1, 1
    req = {"query": tensor_json(g.normal(L, E)), "key": tensor_json(g.normal(S, E)),
           "num_heads": H,
           "weights": packed_weights(g, E)}
    return "E=1, one head, unbatched, key given and value defaulting to key, packed weights.", req


def case_head_dim1(g):
    N, L, S, E, H = 2, 5, 5, 4, 4
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E)}
    return "Head dim 1 (E=4, H=4), batched, packed weights.", req


def case_causal(g):
    N, L, E, H = 2, 6, 8, 4
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, L, E)),
           "value": tensor_json(g.normal(N, L, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": "causal"}
    return "Causal mask (\"causal\"), batched, L=S=6, H=4.", req


def case_bool_mask_2d_padding(g):
    N, L, S, E, H = 2, 4, 5, 8, 2
    mask = g.bools(L, S, p=0.3)
    kpm = np.array([[False, False, False, False, True],
                    [False, True, False, False, True]])
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": bmask(mask), "key_padding_mask": bmask(kpm)}
    return "Bool (L, S) attn_mask combined with (N, S) key_padding_mask.", req


def case_bool_mask_3d(g):
    N, L, S, E, H = 2, 3, 4, 6, 3
    mask = g.bools(N * H, L, S, p=0.3)
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": bmask(mask)}
    return "Bool (N*H, L, S) attn_mask, index n*H + h.", req


def case_float_mask_2d(g):
    L, S, E, H = 4, 6, 8, 2
    req = {"query": tensor_json(g.normal(L, E)), "key": tensor_json(g.normal(S, E)),
           "value": tensor_json(g.normal(S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": tensor_json(g.float_mask(L, S))}
    return "Unbatched, float (L, S) attn_mask added to the scores (some -1e4 entries).", req


def case_float_mask_3d_padding(g):
    N, L, S, E, H = 2, 3, 4, 8, 2
    kpm = np.array([[False, False, True, False], [True, False, False, False]])
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": tensor_json(g.float_mask(N * H, L, S)),
           "key_padding_mask": bmask(kpm)}
    return "Float (N*H, L, S) attn_mask combined with a key_padding_mask.", req


def case_fully_masked_rows(g):
    N, L, S, E, H = 2, 4, 4, 8, 2
    # 1 = blocked; rows written as strings of 0/1 per key.
    rows = lambda *rs: [[c == "1" for c in r_] for r_ in rs]
    mask = np.array([
        # n=0, h=0: row 0 blocked in both heads -> output row = out_proj_bias;
        # row 1 blocks keys 0-2 and key 3 is padded -> fully blocked in head 0 only
        rows("1111", "1110", "0100", "0000"),
        # n=0, h=1: row 3 fully blocked in head 1 only
        rows("1111", "0100", "1010", "1111"),
        # n=1 (every key padded anyway)
        rows("0000", "1000", "0000", "0010"),
        rows("0100", "0000", "0000", "1111"),
    ], dtype=bool)
    kpm = np.array(rows("0001", "1111"), dtype=bool)
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": bmask(mask), "key_padding_mask": bmask(kpm)}
    return ("Rows fully blocked in one or both heads (3-D bool mask + padding) and a batch "
            "item with every key padded: zero weights, zero context for that head.", req)


def case_identity_weights(g):
    L, S, E, H = 3, 5, 4, 2
    req = {"query": tensor_json(g.normal(L, E)), "key": tensor_json(g.normal(S, E)),
           "value": tensor_json(g.normal(S, E)), "num_heads": H}
    return "No weights object: identity projections, zero biases; unbatched cross-attention.", req


def case_partial_weights(g):
    N, L, S, E, H = 2, 4, 5, 8, 2
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": {"in_proj_bias": tensor_json(g.bias(3 * E)),
                       "out_proj_weight": tensor_json(g.weight(E, E))}}
    return "Only out_proj_weight and in_proj_bias given: identity q/k/v projections, zero out bias.", req


def case_averaged(g):
    N, L, S, E, H = 2, 4, 5, 8, 4
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "need_weights": True, "average_attn_weights": True}
    return "average_attn_weights true: weights (N, L, S), mean over heads.", req


def case_custom_scale(g):
    L, E, H = 5, 8, 2
    req = {"query": tensor_json(g.normal(L, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "scale": 0.2}
    return "Custom scale 0.2 instead of 1/sqrt(head_dim); unbatched self-attention.", req


def case_positional(g):
    # vdim = 5 (odd) so the PE of an odd width is covered too.
    N, L, S, E, kdim, vdim, H = 2, 6, 7, 8, 6, 5, 2
    req = {"query": tensor_json(g.normal(N, L, E)),
           "key": tensor_json(g.normal(N, S, kdim)),
           "value": tensor_json(g.normal(N, S, vdim)), "num_heads": H,
           "weights": separate_weights(g, E, kdim, vdim),
           "positional_encoding": "sinusoidal"}
    return ("Sinusoidal PE added to query (D=8), key (D=6) and value (D=5, odd) before "
            "projection; separate weights.", req)


def case_no_weights(g):
    N, L, E, H = 1, 4, 8, 2
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, L, E)),
           "num_heads": H,
           "weights": packed_weights(g, E),
           "need_weights": False}
    return "need_weights false: no attention_weights expected; N=1 batched, value defaults to key.", req


def case_larger(g):
    N, L, S, E, H = 1, 33, 47, 32, 4
    mask = g.bools(L, S, p=0.2)
    kpm = np.zeros((N, S), dtype=bool)
    kpm[0, -5:] = True
    kpm[0, 10] = True
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": packed_weights(g, E),
           "attn_mask": bmask(mask), "key_padding_mask": bmask(kpm)}
    return "Larger: N=1, L=33, S=47, E=32, H=4, packed, bool (L, S) mask + padding.", req



# Numbers at the edges: each answers what PyTorch float64 answers.
# Identity projections unless given, as the service defines them.

def f32(x):
    return np.asarray(x, dtype=np.float32)


def case_edge_scale_before_product(g):
    req = {"query": tensor_json(f32([[1e19, 1e19, 1e19, 1e19]])), "num_heads": 1}
    return ("q is scaled before q.k (PyTorch's order): q.k = 4e38 would overflow, "
            "q/2 . k = 2e38 does not.", req)


def case_edge_tiny_scale(g):
    req = {"query": tensor_json(f32([[1e20]])), "key": tensor_json(f32([[1e20], [-1e20]])),
           "value": tensor_json(f32([[1], [2]])), "num_heads": 1, "scale": 1e-30}
    return "A tiny custom scale multiplies q first: scores +-1e10, weights [1, 0].", req


def case_edge_overflowed_score_takes_no_weight(g):
    req = {"query": tensor_json(f32([[1e20]])), "key": tensor_json(f32([[-1e20], [1]])),
           "value": tensor_json(f32([[1], [2]])), "num_heads": 1,
           "weights": {"out_proj_bias": tensor_json(f32([0.5]))}}
    return ("A score below -FLT_MAX (-1e40) takes weight 0 because another score of its "
            "row is finite.", req)


def case_edge_float_mask_min(g):
    fmin = float(np.finfo(np.float32).min)
    req = {"query": tensor_json(f32([[1e16], [1]])), "key": tensor_json(f32([[-1e16], [0]])),
           "value": tensor_json(f32([[3], [5]])), "num_heads": 1,
           "attn_mask": tensor_json(f32([[fmin, 0.0], [fmin, 0.0]]))}
    return ("A float mask of -FLT_MAX (torch.finfo(float32).min) added to a score of -1e32 "
            "is below -FLT_MAX: weight 0 while the other key is finite.", req)


def case_edge_subnormal_value(g):
    req = {"query": tensor_json(f32([[1]])), "key": tensor_json(f32([[1]])),
           "value": tensor_json(f32([[1e-39]])), "num_heads": 1,
           "weights": {"v_proj_weight": tensor_json(f32([[1e38]]))}}
    return "A subnormal value (1e-39) times 1e38 is 0.1, not 0 (no DAZ/FTZ).", req


def case_edge_tiny_softmax_weight(g):
    req = {"query": tensor_json(f32([[1]])), "key": tensor_json(f32([[0], [-87.2]])),
           "value": tensor_json(f32([[0], [3e38]])), "num_heads": 1}
    return "A softmax weight of 1.35e-38 (score -87.2) times 3e38 is 4.04, not 0.", req


def case_edge_subnormal_softmax_weight(g):
    req = {"query": tensor_json(f32([[1], [1]])), "key": tensor_json(f32([[0], [-95]])),
           "value": tensor_json(f32([[0], [3e38]])), "num_heads": 1}
    return "A subnormal softmax weight (e^-95 = 5.5e-42) times 3e38 is 1.7e-3, not 0.", req


def case_edge_mask_pulls_score_into_range(g):
    req = {"query": tensor_json(f32([[1e20], [-1e20]])),
           "key": tensor_json(f32([[3.5e18], [3.6e18]])),
           "value": tensor_json(f32([[2], [3]])), "num_heads": 1,
           "attn_mask": tensor_json(f32([[-1e38, -1e38], [1e38, 1e38]]))}
    return ("The range rule is on the score plus the float mask: q.k of +-3.5e38 and "
            "+-3.6e38 are beyond FLT_MAX, but a mask of -+1e38 brings them back in range.", req)


def case_edge_positional_exact_weights(g):
    req = {"query": tensor_json(f32([[10, 0]])), "key": tensor_json(f32([[0, -1], [-14, 0]])),
           "value": tensor_json(f32([[0, 0], [1e35, 1e35]])), "num_heads": 1,
           "positional_encoding": "sinusoidal"}
    return ("A subnormal weight (5.7e-41) times 1e35 counts, so the core computes the "
            "softmax without flushing, a second time, with the positional encoding.", req)


def case_large_scores(g):
    N, L, S, E, H = 1, 24, 24, 128, 2
    req = {"query": tensor_json(g.normal(N, L, E, std=10.0)),
           "key": tensor_json(g.normal(N, S, E, std=10.0)),
           "value": tensor_json(g.normal(N, S, E)), "num_heads": H,
           "weights": {"in_proj_weight": tensor_json(g.weight(3 * E, E)),
                       "out_proj_weight": tensor_json(g.weight(E, E))}}
    return ("Scores with a standard deviation near 100: float32 PyTorch itself misses 1e-5 "
            "on weights; the tolerance is 4x its error.", req)


def case_averaged_blocked_heads(g):
    N, L, S, E, H = 1, 3, 4, 8, 4
    mask = g.bools(N * H, L, S, p=0.3)
    mask[1, 0, :] = True   # head 1 blocks query 0
    mask[2, 0, :] = True   # head 2 too
    mask[3, 2, :] = True   # head 3 blocks query 2
    mask[0, 1, :] = False
    req = {"query": tensor_json(g.normal(N, L, E)), "key": tensor_json(g.normal(N, S, E)),
           "num_heads": H, "attn_mask": bmask(mask), "average_attn_weights": True}
    return ("Averaged weights where some heads block a row: the mean over all H heads, "
            "blocked heads adding 0, so the row sums to live_heads / H.", req)


CASES = [
    ("self_packed_unbatched", case_self_packed_unbatched),
    ("cross_separate_batched", case_cross_separate_batched),
    ("single_head_dim1", case_single_head_dim1),
    ("head_dim1", case_head_dim1),
    ("causal", case_causal),
    ("bool_mask_2d_padding", case_bool_mask_2d_padding),
    ("bool_mask_3d", case_bool_mask_3d),
    ("float_mask_2d", case_float_mask_2d),
    ("float_mask_3d_padding", case_float_mask_3d_padding),
    ("fully_masked_rows", case_fully_masked_rows),
    ("identity_weights", case_identity_weights),
    ("partial_weights", case_partial_weights),
    ("averaged", case_averaged),
    ("custom_scale", case_custom_scale),
    ("positional", case_positional),
    ("no_weights", case_no_weights),
    ("larger", case_larger),
    ("edge_scale_before_product", case_edge_scale_before_product),
    ("edge_tiny_scale", case_edge_tiny_scale),
    ("edge_overflowed_score_takes_no_weight", case_edge_overflowed_score_takes_no_weight),
    ("edge_float_mask_min", case_edge_float_mask_min),
    ("edge_subnormal_value", case_edge_subnormal_value),
    ("edge_tiny_softmax_weight", case_edge_tiny_softmax_weight),
    ("edge_subnormal_softmax_weight", case_edge_subnormal_softmax_weight),
    ("large_scores", case_large_scores),
    ("averaged_blocked_heads", case_averaged_blocked_heads),
    ("edge_mask_pulls_score_into_range", case_edge_mask_pulls_score_into_range),
    ("edge_positional_exact_weights", case_edge_positional_exact_weights),
]


# ------------------------------------------------------------------ output

def dump(obj, indent=0):
    """JSON with one key per line; a tensor's data list stays on one line."""
    pad = "  " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad}  {json.dumps(k)}: {dump(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        return "[" + ", ".join(json.dumps(x, allow_nan=False) for x in obj) + "]"
    return json.dumps(obj, allow_nan=False)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    for idx, (name, fn) in enumerate(CASES):
        g = Gen(20240 + idx)
        desc, req = fn(g)
        r = resolve(req)
        out, wts, n_blocked = expected_torch(r)
        ref_out, ref_wts = expected_numpy(r)
        assert np.allclose(out, ref_out, rtol=1e-10, atol=1e-10), name
        assert np.allclose(wts, ref_wts, rtol=1e-10, atol=1e-10), name

        # PyTorch's own float32 answer; where float32 PyTorch overflows
        # (inf or NaN, or weights off by more than 0.01) it widens nothing:
        # the float64 value stands in.
        out32, wts32, _ = expected_torch(r, torch.float32)
        out32 = np.where(np.isfinite(out32), out32, out)
        wts32 = np.where(np.isfinite(wts32), wts32, wts)
        if np.abs(wts32 - wts).max() > 1e-2:  # float32 overflowed: a wrong answer,
            out32, wts32 = out, wts           # not a rounding error; widens nothing

        if not r["batched"]:
            out, wts, out32, wts32 = out[0], wts[0], out32[0], wts32[0]
        expected = {"output": tensor_json(out.astype(np.float32))}
        expected32 = {"output": tensor_json(out32.astype(np.float32))}
        if r["need_weights"]:
            expected["attention_weights"] = tensor_json(wts.astype(np.float32))
            expected32["attention_weights"] = tensor_json(wts32.astype(np.float32))
        doc = {"name": name, "description": desc, "request": req, "expected": expected,
               "expected_float32": expected32}
        text = dump(doc) + "\n"
        json.loads(text)  # well-formed
        path = os.path.join(OUT_DIR, name + ".json")
        with open(path, "w") as fh:
            fh.write(text)
        wshape = expected.get("attention_weights", {}).get("shape")
        print(f"wrote {os.path.relpath(path)}: output {list(out.shape)}, "
              f"weights {wshape}, fully blocked (n,h,row): {n_blocked}, {len(text)} bytes, "
              f"float32 PyTorch vs float64: output {np.abs(out32 - out).max():.2g}, "
              f"weights {np.abs(wts32 - wts).max() if r['need_weights'] else 0:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
