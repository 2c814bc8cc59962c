"""remote.py -- the attention of llama.py's decoder on the attention server.

ServerAttention is a backend of llama.py (begin / attend / end): the caches
live on the server, one sequence per prompt holding one cache per layer.
Each attend() is ONE KServe v2 infer request, binary tensors in and out, to
the built-in model `attention` (no weights: identity projections, so the
rows sent are the keys, values and queries as they are):

    POST /v2/models/attention/infer
    Inference-Header-Content-Length: <length of the JSON part>
    X-Sequence-Id: <the batch's placement key>
    {"parameters": {"num_heads": H, "num_kv_heads": Hkv, "head_dim": d,
                    "layer": l, "is_causal": true, "need_weights": false,
                    "binary_data_output": true [, "kv_cache_dtype": "FP16"]},
     "inputs": [{"name": "query", "datatype": "FP32", "shape": [B, L, H·d],
                 "parameters": {"binary_data_size": B·L·H·d·4}},
                {"name": "key",   ... [B, L, Hkv·d]}, {"name": "value", ...},
                {"name": "sequence_id", "datatype": "UINT64", "shape": [B], ...}
                [, {"name": "sequence_start", "datatype": "BOOL", "shape": [B], ...}]]}
    <the tensors' bytes, little-endian, in the order of inputs>

and the answer is the JSON part (its length in the answer's
Inference-Header-Content-Length) naming the outputs "output" (B, L, H·d)
and "cache_length" (B), their bytes after it. A prompt is one request per
layer with B = 1 and L = its length, with sequence_start (the first layer's
creates the sequence, the others' join it: each layer's cache begins at its
first step); a decode step is one request per layer for the whole batch,
L = 1. end() ends every sequence with one request (sequence_end, no query).

One keep-alive connection (http.client); X-Sequence-Id carries the batch's
placement key, the same on every request of the batch, so that a load
balancer hashing the header keeps the batch on the replica holding its
caches (docs/deployment.md).
"""
import http.client
import json
import secrets
import time
import urllib.parse

import numpy as np
import torch

HEADER_LEN = "Inference-Header-Content-Length"
PATH = "/v2/models/attention/infer"


class ServerError(Exception):
    pass


class ServerAttention:
    def __init__(self, shape, url, key=None):
        self.shape = shape
        u = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
        self.key = key or "batch-" + secrets.token_hex(16)
        self.attention_seconds = 0.0
        self.requests = 0
        self.ids = self.length = None

    def post(self, params, inputs):
        """inputs: (name, datatype, numpy array); returns {output name: array}."""
        desc, raw = [], []
        for name, datatype, a in inputs:
            a = np.ascontiguousarray(a)
            desc.append({"name": name, "datatype": datatype, "shape": list(a.shape),
                         "parameters": {"binary_data_size": a.nbytes}})
            raw.append(a.tobytes())
        head = json.dumps({"parameters": {**params, "binary_data_output": True},
                           "inputs": desc}, separators=(",", ":")).encode()
        self.conn.request("POST", PATH, head + b"".join(raw),
                          {HEADER_LEN: str(len(head)), "X-Sequence-Id": self.key,
                           "Content-Type": "application/octet-stream"})
        r = self.conn.getresponse()
        body = r.read()
        self.requests += 1
        if r.status != 200:
            raise ServerError(f"POST {PATH} (layer {params.get('layer')}): {r.status} "
                              f"{body[:400].decode('utf-8', 'replace')}")
        n = int(r.getheader(HEADER_LEN) or len(body))
        answer, out, at = json.loads(body[:n]), {}, n
        types = {"FP32": "<f4", "INT64": "<i8"}
        for o in answer.get("outputs", []):
            size = o["parameters"]["binary_data_size"]
            out[o["name"]] = np.frombuffer(body[at:at + size],
                                           dtype=types[o["datatype"]]).reshape(o["shape"])
            at += size
        return out

    def begin(self, n, capacity):
        # unguessable 64-bit ids (docs/sequences.md), never 0
        self.ids = np.array([secrets.randbits(64) | 1 for _ in range(n)], dtype="<u8")
        self.length = np.zeros((self.shape.layers, n), dtype=np.int64)

    def attend(self, layer, q, k, v, seqs, start):
        t0 = time.perf_counter()
        s = self.shape
        B, L = q.shape[:2]
        params = {"num_heads": s.heads, "num_kv_heads": s.kv_heads, "head_dim": s.head_dim,
                  "layer": layer, "is_causal": True, "need_weights": False}
        inputs = [("query", "FP32", q.reshape(B, L, -1).numpy()),
                  ("key", "FP32", k.reshape(B, L, -1).numpy()),
                  ("value", "FP32", v.reshape(B, L, -1).numpy()),
                  ("sequence_id", "UINT64", self.ids[seqs])]
        if start:
            params["kv_cache_dtype"] = s.cache_dtype
            inputs.append(("sequence_start", "BOOL", np.ones(B, dtype=np.uint8)))
        out = self.post(params, inputs)
        self.length[layer, seqs] += L
        got = out.get("cache_length")
        if got is None or not np.array_equal(got, self.length[layer, seqs]):
            raise ServerError(f"layer {layer}: cache_length {got}, expected "
                              f"{self.length[layer, seqs]}")
        ctx = torch.from_numpy(out["output"].copy())
        self.attention_seconds += time.perf_counter() - t0
        return ctx

    def end(self):
        """Ends every sequence (all its layers) with one request, those
        started: a prompt's first request, at layer 0, was answered (a
        refused request changes no sequence)."""
        ids = self.ids[self.length[0] > 0]
        if len(ids) == 0:
            self.ids = self.length = None
            return
        out = self.post({}, [("sequence_id", "UINT64", ids),
                             ("sequence_end", "BOOL", np.ones(len(ids), dtype=np.uint8))])
        got = out.get("cache_length")
        if got is not None and np.any(got != 0):
            raise ServerError(f"sequence_end answered cache_length {got}")
        self.ids = self.length = None

    def close(self):
        self.conn.close()
