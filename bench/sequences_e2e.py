#!/usr/bin/python3
"""sequences_e2e.py -- `make bench` (section 4b): sequences end to end over
HTTP, each ratio against a stateless request timed in this same run.

Shape (issue 22): H 32, Hkv 8, d 128 with identity projections on the
built-in model (query 4096 wide, key/value 1024 wide), N = 1, FP32 cache,
need_weights false, output in base64.

1. Decode: a sequence started with a prompt chunk of CACHE key/value rows
   (one query row), then STEPS single-token steps (L = S = 1) timed one by
   one (median); against the stateless request that carries the whole cache
   (L = 1, S = CACHE + 1), as POST /attention base64 and as v2 infer with
   binary inputs, median of RUNS. Target: step >= 20x faster than the
   faster of the two stateless forms.
2. Chunks: a prompt of S rows starting a sequence (L = S, causal) against the
   stateless causal request of the same shape, and a chunk of S rows
   appended to a sequence holding C tokens against the stateless request
   with L = S, key/value C + S rows, causal_lower_right. Each timed step
   gets a fresh sequence (the fill is not timed). Target: <= 1.2x.

The server runs with its default workers (2 x 1 thread) and the limits
raised for the stateless bodies: max_body_bytes, max_tensor_elements,
max_source_len. Timings are wall-clock at the client (Python's
http.client on loopback, one keep-alive connection), the body already
encoded. No pass/fail: the figures and the targets are printed.

Usage: bench/sequences_e2e.py SERVER_BINARY [CSV_OUT]
Env: SEQUENCES_CACHE (16384), SEQUENCES_STEPS (200), SEQUENCES_RUNS (5),
     SEQUENCES_CHUNKS ("1024:0,4096:0,512:4096": S:C pairs, C = tokens cached before).
"""
import base64
import http.client
import json
import os
import statistics
import sys
import time

import numpy as np

import serverproc

H, HKV, D = 32, 8, 128
E, KDIM = H * D, HKV * D
CACHE = int(os.environ.get("SEQUENCES_CACHE", "16384"))
STEPS = int(os.environ.get("SEQUENCES_STEPS", "200"))
RUNS = int(os.environ.get("SEQUENCES_RUNS", "5"))
CHUNKS = [tuple(int(x) for x in p.split(":"))
          for p in os.environ.get("SEQUENCES_CHUNKS", "1024:0,4096:0,512:4096").split(",")]
RNG = np.random.default_rng(22)


def start(binary):
    flags = ["--max-body-bytes", "2G", "--max-tensor-elements", str(1 << 30),
             "--max-source-len", "1048576", "--max-answer-bytes", "1G",
             "--log-level", "warn"]
    return serverproc.start(binary, flags, "sequences_e2e")


def rows(n, width):
    return RNG.uniform(-1, 1, size=(n, width)).astype("<f4")


def b64(a):
    return {"shape": list(a.shape), "dtype": "float32",
            "b64": base64.b64encode(a.tobytes()).decode()}


def attention_body(q, k, v, **extra):
    body = {"query": b64(q), "num_heads": H, "num_kv_heads": HKV, "head_dim": D,
            "need_weights": False, "output_encoding": "base64", **extra}
    if k is not None:
        body["key"], body["value"] = b64(k), b64(v)
    return json.dumps(body, separators=(",", ":")).encode()


def v2_body(q, k, v, **params):
    return serverproc.v2_binary(
        [("query", "FP32", q), ("key", "FP32", k), ("value", "FP32", v)],
        {"num_heads": H, "num_kv_heads": HKV, "head_dim": D, "need_weights": False,
         "binary_data_output": True, **params})


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def post(self, path, body, headers=None):
        """Seconds from sending the body to the answer read through."""
        h = {"Content-Type": "application/json", **(headers or {})}
        t0 = time.perf_counter()
        self.c.request("POST", path, body, h)
        r = self.c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        if r.status != 200:
            sys.exit(f"sequences_e2e: {path} answered {r.status}: {data[:300]!r}")
        return dt

    def attention(self, body):
        return self.post("/attention", body)

    def v2(self, body_hlen):
        body, hlen = body_hlen
        return self.post("/v2/models/attention/infer", body,
                         {"Inference-Header-Content-Length": str(hlen)})

    def close(self):
        self.c.close()


def median_of(n, f):
    f()  # warm-up
    return statistics.median(f() for _ in range(n))


def decode(c, out):
    k, v = rows(CACHE + 1, KDIM), rows(CACHE + 1, KDIM)
    q = rows(1, E)
    # the stateless request carrying the whole cache, both encodings
    body = attention_body(q, k, v)
    t_b64 = median_of(RUNS, lambda: c.attention(body))
    mb_b64 = len(body) / 1e6
    body = None  # free it
    vb = v2_body(q, k, v)
    t_v2 = median_of(RUNS, lambda: c.v2(vb))
    mb_v2 = len(vb[0]) / 1e6
    vb = None
    # the sequence: a prompt chunk of CACHE rows (one query row), then steps
    sid = "bench-decode-5b1d0c7e"
    c.attention(attention_body(q, k[:CACHE], v[:CACHE], sequence_id=sid, sequence_start=True))
    step_rows = [(rows(1, E), rows(1, KDIM), rows(1, KDIM)) for _ in range(STEPS + 1)]
    bodies = [attention_body(*r, sequence_id=sid) for r in step_rows]
    times = [c.attention(b) for b in bodies]
    c.attention(json.dumps({"sequence_id": sid, "sequence_end": True}).encode())
    t_step = statistics.median(times[1:])  # the first is the warm-up
    best = min(t_b64, t_v2)
    print(f"4b. Sequences end to end over HTTP (H {H}, Hkv {HKV}, d {D}, identity projections, "
          f"FP32 cache, need_weights false; 2 workers x 1 thread; client: Python http.client)")
    print(f"Decode at a {CACHE}-token cache: {STEPS} single-token steps, stateless median of {RUNS}")
    print(f"{'request':<34} {'body MB':>9} {'ms':>10} {'vs step':>9}")
    print(f"{'step (L = S = 1, in a sequence)':<34} {len(bodies[1]) / 1e6:>9.3f} {t_step * 1e3:>10.2f} {1:>8.1f}x")
    print(f"{'stateless, /attention base64':<34} {mb_b64:>9.1f} {t_b64 * 1e3:>10.2f} {t_b64 / t_step:>8.1f}x")
    print(f"{'stateless, v2 binary':<34} {mb_v2:>9.1f} {t_v2 * 1e3:>10.2f} {t_v2 / t_step:>8.1f}x")
    print(f"step speed-up over the faster stateless request: {best / t_step:.1f}x (target >= 20x)")
    out.append(f"decode,{CACHE},1,step,{t_step * 1e3:.3f}")
    out.append(f"decode,{CACHE},1,stateless_base64,{t_b64 * 1e3:.3f}")
    out.append(f"decode,{CACHE},1,stateless_v2_binary,{t_v2 * 1e3:.3f}")


def chunk(c, s, cached, n, out):
    q, k, v = rows(s, E), rows(cached + s, KDIM), rows(cached + s, KDIM)
    mask = "causal" if cached == 0 else "causal_lower_right"
    stateless = attention_body(q, k, v, attn_mask=mask)
    t_stateless = median_of(RUNS, lambda: c.attention(stateless))
    stateless = None
    step = attention_body(q, k[cached:], v[cached:], sequence_id="bench-chunk-93e1",
                          **({} if cached else {"sequence_start": True}))
    fill = attention_body(q[:1], k[:cached], v[:cached], sequence_id="bench-chunk-93e1",
                          sequence_start=True) if cached else None

    def one():
        if fill:
            c.attention(fill)
        return c.attention(step)
    t_step = median_of(RUNS, one)
    c.attention(json.dumps({"sequence_id": "bench-chunk-93e1", "sequence_end": True}).encode())
    what = f"prompt of {s} rows" if cached == 0 else f"{s} rows onto {cached} cached"
    ratio = t_step / t_stateless
    print(f"{what:<28} {t_step * 1e3:>11.1f} {t_stateless * 1e3:>15.1f} {ratio:>8.2f}x")
    out.append(f"chunk,{cached},{s},step,{t_step * 1e3:.3f}")
    out.append(f"chunk,{cached},{s},stateless_causal,{t_stateless * 1e3:.3f}")


def main():
    binary = sys.argv[1]
    csv = sys.argv[2] if len(sys.argv) > 2 else None
    p, port = start(binary)
    out = ["part,cached,rows,request,ms"]
    try:
        c = Client(port)
        decode(c, out)
        print()
        print(f"Chunks (a prompt, or S rows appended): the step vs the stateless causal request "
              f"of the same shape, median of {RUNS}, /attention base64")
        print(f"{'chunk':<28} {'step ms':>11} {'stateless ms':>15} {'ratio':>9}")
        for s, cached in CHUNKS:
            chunk(c, s, cached, RUNS, out)
        print("(target: a chunk <= 1.2x the stateless causal request)")
        c.close()  # else SIGTERM's drain waits for the idle connection
    finally:
        p.terminate()
        p.wait()
    if csv:
        with open(csv, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
