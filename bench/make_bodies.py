#!/usr/bin/env python3
"""Request bodies for the end-to-end bench (plain Python, no packages).

Usage: make_bodies.py OUTDIR
Writes tiny.json (L=4, E=8, H=2), medium.json (L=128, E=256, H=8), and the
large request (L=512, E=768, H=12, projection weights inline) in three
encodings: large_nested.json, large_flat.json, large_base64.json (inputs in
that form; outputs asked in JSON for the first two, base64 for the third).
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


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    jobs = [("tiny", 4, 8, 2, "nested", True), ("medium", 128, 256, 8, "flat", True)]
    jobs += [("large_" + f, 512, 768, 12, f, True) for f in ("nested", "flat", "base64")]
    for name, L, E, H, form, weights in jobs:
        rng = random.Random(42)  # the same values in every encoding
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(request(L, E, H, form, weights, rng), f, separators=(",", ":"))


if __name__ == "__main__":
    main()
