#!/usr/bin/env python3
"""Request bodies for the end-to-end bench (plain Python, no packages).

Usage: make_bodies.py OUTDIR
Writes tiny.json (L=4, E=8, H=2), medium.json (L=128, E=256, H=8), and the
large request (L=512, E=768, H=12, projection weights inline) in three
encodings: large_nested.json, large_flat.json, large_base64.json (inputs in
that form; outputs asked in JSON for the first two, base64 for the third).
The same large request against a server-held model: models/large/ (a
torch_mha model.safetensors of the same weights, F32), large_v2.bin (a
KServe v2 infer body with the query as binary data, outputs asked binary;
large_v2.hlen holds its Inference-Header-Content-Length) and
large_model_base64.json (POST /attention with "model" instead of weights).
"""
import base64
import json
import math
import os
import random
import struct
import sys


def rand(n, amp, rng):
    return [round(rng.uniform(-amp, amp), 6) for _ in range(n)]


def nested(data, shape):
    if len(shape) == 1:
        return data
    step = len(data) // shape[0]
    return [nested(data[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def tensor(data, shape, form):
    if form == "nested":
        return nested(data, shape)
    if form == "flat":
        return {"shape": shape, "data": data}
    raw = struct.pack("<%df" % len(data), *data)
    return {"shape": shape, "dtype": "float32", "b64": base64.b64encode(raw).decode()}


def request(L, E, H, form, weights, rng):
    req = {"query": tensor(rand(L * E, 1.0, rng), [L, E], form), "num_heads": H}
    if weights:
        a = 1 / math.sqrt(E)
        req["weights"] = {
            "in_proj_weight": tensor(rand(3 * E * E, a, rng), [3 * E, E], form),
            "in_proj_bias": tensor(rand(3 * E, 0.1, rng), [3 * E], form),
            "out_proj_weight": tensor(rand(E * E, a, rng), [E, E], form),
            "out_proj_bias": tensor(rand(E, 0.1, rng), [E], form),
        }
    if form == "base64":
        req["output_encoding"] = "base64"
    return req


def safetensors(path, tensors):
    """Write name -> (shape, floats) as an F32 safetensors file."""
    header, blobs, at = {}, [], 0
    for name, (shape, data) in tensors.items():
        raw = struct.pack("<%df" % len(data), *data)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def served_large(out, L, E, H):
    rng = random.Random(42)  # the same values as the large requests
    req = request(L, E, H, "flat", True, rng)
    w = req["weights"]
    model = os.path.join(out, "models", "large")
    os.makedirs(model, exist_ok=True)
    safetensors(os.path.join(model, "model.safetensors"), {
        "in_proj_weight": (w["in_proj_weight"]["shape"], w["in_proj_weight"]["data"]),
        "in_proj_bias": (w["in_proj_bias"]["shape"], w["in_proj_bias"]["data"]),
        "out_proj.weight": (w["out_proj_weight"]["shape"], w["out_proj_weight"]["data"]),
        "out_proj.bias": (w["out_proj_bias"]["shape"], w["out_proj_bias"]["data"]),
    })
    with open(os.path.join(model, "config.json"), "w") as f:
        json.dump({"format": "torch_mha", "num_heads": H}, f)
    q = req["query"]["data"]
    raw = struct.pack("<%df" % len(q), *q)
    head = json.dumps({"inputs": [{"name": "query", "datatype": "FP32", "shape": [L, E],
                                   "parameters": {"binary_data_size": len(raw)}}],
                       "parameters": {"binary_data_output": True}},
                      separators=(",", ":")).encode()
    with open(os.path.join(out, "large_v2.bin"), "wb") as f:
        f.write(head + raw)
    with open(os.path.join(out, "large_v2.hlen"), "w") as f:
        f.write("%d\n" % len(head))
    b64 = {"query": tensor(q, [L, E], "base64"), "model": "large", "output_encoding": "base64"}
    with open(os.path.join(out, "large_model_base64.json"), "w") as f:
        json.dump(b64, f, separators=(",", ":"))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    jobs = [("tiny", 4, 8, 2, "nested", True), ("medium", 128, 256, 8, "flat", True)]
    jobs += [("large_" + f, 512, 768, 12, f, True) for f in ("nested", "flat", "base64")]
    for name, L, E, H, form, weights in jobs:
        rng = random.Random(42)  # the same values in every encoding
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(request(L, E, H, form, weights, rng), f, separators=(",", ":"))
    served_large(out, 512, 768, 12)


if __name__ == "__main__":
    main()
