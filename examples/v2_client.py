#!/usr/bin/python3
"""v2_client.py -- a client of the service's Open Inference Protocol (KServe v2)
endpoints, with Python's standard library only (tensors are array('f'):
flat, row-major float32, with their shape beside them).

    /usr/bin/python3 examples/v2_client.py --url http://127.0.0.1:8080 --model digits-reverse

Asks for the server metadata, the model list and the model's metadata, then
calls the model twice on the same random query: with JSON tensors, and with
binary tensors (Triton's binary tensor data extension: the JSON part, then
the raw little-endian float32 bytes, its length in the
Inference-Header-Content-Length header; the answer comes back the same way).
Prints the shapes and a few values, and checks that both answers agree.
The built-in model "attention" works too (--model attention): its weights
are then identities and num_heads is sent as a parameter.
"""
import argparse
import array
import json
import math
import random
import sys
import urllib.error
import urllib.request

HEADER_LEN = "Inference-Header-Content-Length"


def call(url, body=None, headers=None):
    """GET (body None) or POST url; returns (status, headers, body bytes).
    A non-2xx answer under /v2 is {"error": message}: printed, then exit."""
    req = urllib.request.Request(url, data=body, headers=headers or {},
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            text = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        sys.exit(f"{req.method} {url}: {e.code}: {text}")


def get_json(url):
    return json.loads(call(url)[2])


def meta_dim(meta, name):
    """The last dimension of input `name` in the metadata (-1: any)."""
    for t in meta["inputs"]:
        if t["name"] == name:
            return t["shape"][-1]
    return -1


class Tensor:
    """A float32 tensor: its shape and its values, flat and row-major."""

    def __init__(self, shape, values):
        self.shape = list(shape)
        self.data = array.array("f", values)
        if len(self.data) != math.prod(self.shape):
            sys.exit(f"a tensor of shape {self.shape} with {len(self.data)} values")

    def to_le_bytes(self):
        """The values as little-endian float32 bytes (the binary extension's)."""
        b = array.array("f", self.data)
        if sys.byteorder == "big":
            b.byteswap()
        return b.tobytes()

    @classmethod
    def from_le_bytes(cls, shape, raw):
        data = array.array("f")
        data.frombytes(raw)
        if sys.byteorder == "big":
            data.byteswap()
        return cls(shape, data)


def random_tensor(shape, rng):
    """Standard normal float32 values."""
    return Tensor(shape, (rng.gauss(0.0, 1.0) for _ in range(math.prod(shape))))


def make_inputs(meta, L, S, rng):
    """Random query (1, L, E), and key and value (1, S, kdim/vdim) when the
    model's kdim or vdim is not E; the request parameters it needs."""
    E = meta_dim(meta, "query")
    params = {}
    if E == -1:  # the built-in model: any E, num_heads in the request
        E = 8
        params["num_heads"] = 2
    tensors = {"query": random_tensor((1, L, E), rng)}
    kdim, vdim = meta_dim(meta, "key"), meta_dim(meta, "value")
    if kdim not in (-1, E) or vdim not in (-1, E):
        tensors["key"] = random_tensor((1, S, kdim), rng)
        tensors["value"] = random_tensor((1, S, vdim), rng)
    return tensors, params


def infer_json(base, model, tensors, params):
    """Infer with the tensors in the JSON body ("data" flat, row-major)."""
    request = {
        "id": "json-1",
        "parameters": params,
        "inputs": [{"name": n, "shape": t.shape, "datatype": "FP32",
                    "data": t.data.tolist()} for n, t in tensors.items()],
    }
    status, headers, body = call(f"{base}/v2/models/{model}/infer",
                                 json.dumps(request).encode(),
                                 {"Content-Type": "application/json",
                                  "X-Request-Id": "v2-client-json"})
    answer = json.loads(body)
    outputs = {o["name"]: Tensor(o["shape"], o["data"]) for o in answer["outputs"]}
    return answer, headers, outputs


def infer_binary(base, model, tensors, params):
    """Infer with binary inputs and outputs: body = JSON + raw bytes."""
    raw = [t.to_le_bytes() for t in tensors.values()]
    request = {
        "id": "binary-1",
        "parameters": dict(params, binary_data_output=True),
        "inputs": [{"name": n, "shape": t.shape, "datatype": "FP32",
                    "parameters": {"binary_data_size": len(b)}}
                   for (n, t), b in zip(tensors.items(), raw)],
    }
    head = json.dumps(request).encode()
    status, headers, body = call(f"{base}/v2/models/{model}/infer", head + b"".join(raw),
                                 {"Content-Type": "application/octet-stream",
                                  HEADER_LEN: str(len(head)),
                                  "X-Request-Id": "v2-client-binary"})
    # The answer: its JSON part (Inference-Header-Content-Length bytes; the
    # whole body when no output is binary), then each binary output's
    # binary_data_size bytes, in the order of "outputs".
    n = int(headers.get(HEADER_LEN, len(body)))
    answer = json.loads(body[:n])
    outputs, at = {}, n
    for o in answer["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            outputs[o["name"]] = Tensor(o["shape"], o["data"])
        else:
            outputs[o["name"]] = Tensor.from_le_bytes(o["shape"], body[at:at + size])
            at += size
    if at != len(body):
        sys.exit(f"binary answer: {len(body) - at} bytes left over after the outputs")
    return answer, headers, outputs


def show(title, answer, headers, outputs):
    print(f"{title}: id {answer.get('id')}, X-Request-Id {headers.get('X-Request-Id')}, "
          f"{headers.get('Content-Type')}")
    print(f"  Server-Timing: {headers.get('Server-Timing')}")
    for name, t in outputs.items():
        print(f"  {name} {t.shape}: [{' '.join(f'{v:.5g}' for v in t.data[:4])}] ...")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="the server")
    ap.add_argument("--model", default="attention", help="a model's name")
    ap.add_argument("--length", type=int, default=4, help="query length L (and S)")
    args = ap.parse_args()
    base, model = args.url.rstrip("/"), args.model

    server = get_json(f"{base}/v2")
    print(f"server: {server['name']} {server['version']}, "
          f"extensions {', '.join(server['extensions'])}")
    print(f"models: {', '.join(get_json(f'{base}/v2/models')['models'])}")
    call(f"{base}/v2/models/{model}/ready")  # exits with the reason when not ready
    meta = get_json(f"{base}/v2/models/{model}")
    print(f"model {meta['name']} ({meta['platform']}, versions {meta['versions']}), "
          f"parameters {meta.get('parameters', {})}")
    for kind in ("inputs", "outputs"):
        print(f"  {kind}: " + ", ".join(f"{t['name']} {t['datatype']} {t['shape']}"
                                       for t in meta[kind]))

    rng = random.Random(0)
    tensors, params = make_inputs(meta, args.length, args.length, rng)
    a_json = infer_json(base, model, tensors, params)
    show("infer, JSON", *a_json)
    a_bin = infer_binary(base, model, tensors, params)
    show("infer, binary", *a_bin)
    for name, t in a_json[2].items():
        other = a_bin[2][name]
        if other.shape != t.shape:
            sys.exit(f"{name}: shape {t.shape} in JSON, {other.shape} in binary")
        d = max((abs(x - y) for x, y in zip(t.data, other.data)), default=0.0)
        print(f"  {name}: JSON and binary answers differ by at most {d:g}")
        if d != 0.0:
            sys.exit("the JSON and binary answers differ")


if __name__ == "__main__":
    main()
