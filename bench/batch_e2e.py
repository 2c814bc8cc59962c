#!/usr/bin/python3
"""batch_e2e.py -- `make bench` (section 4e): a layer step of a batch of
sequences end to end over HTTP against the server's own compute stage of the
same requests.

Shape: B 16 sequences, H 32, Hkv 8, d 128 with identity projections on the
built-in model (query 4096 wide, key/value 1024 wide), FP16 caches of
TOKENS tokens each, need_weights false, v2 infer with binary inputs and
outputs, one keep-alive connection (Python's http.client, the bodies encoded
before the clock starts).

1. Fill: each sequence started with TOKENS key/value rows (one query row),
   a v2 request of its own (the batch form, B 1).
2. STEPS one-row steps of all B sequences in one request (the batch's ids
   as the UINT64 input tensor sequence_id; query [B, 1, 4096], key and
   value [B, 1, 1024]), each timed at the client (from sending the body to
   the answer read through) and read from the answer's Server-Timing
   "compute;dur=" (the step's compute stage on the server). Medians of
   both; the ratio of the medians (goal <= 1.25).

The server runs with its default workers (the machine's CPUs x 1 thread)
and the body limit raised for the fill. No pass/fail: the figures and the
goal are printed.

Usage: bench/batch_e2e.py SERVER_BINARY [CSV_OUT]
Env: BATCH_TOKENS (4096), BATCH_STEPS (21), BATCH_B (16).
"""
import http.client
import os
import re
import statistics
import sys
import time

import numpy as np

import serverproc

H, HKV, D = 32, 8, 128
E, KDIM = H * D, HKV * D
B = int(os.environ.get("BATCH_B", "16"))
TOKENS = int(os.environ.get("BATCH_TOKENS", "4096"))
STEPS = int(os.environ.get("BATCH_STEPS", "21"))
WARM = 3
RNG = np.random.default_rng(30)
PATH = "/v2/models/attention/infer"


def start(binary):
    flags = ["--max-body-bytes", "1G", "--max-tensor-elements", str(1 << 30),
             "--max-source-len", "65536", "--log-level", "warn"]
    return serverproc.start(binary, flags, "batch_e2e")


def v2_body(ids, q, k, v, start=False, **params):
    """A v2 infer body of the batch form: ids (UINT64) and the tensors as binary inputs."""
    arrays = [("sequence_id", "UINT64", np.asarray(ids, dtype="<u8"))]
    if start:
        arrays.append(("sequence_start", "BOOL", np.ones(len(ids), dtype=np.uint8)))
    arrays += [("query", "FP32", q), ("key", "FP32", k), ("value", "FP32", v)]
    return serverproc.v2_binary(arrays, {
        "num_heads": H, "num_kv_heads": HKV, "head_dim": D, "need_weights": False,
        "binary_data_output": True, **params})


def rows(*shape):
    return RNG.uniform(-1, 1, size=shape).astype("<f4")


class Client:
    def __init__(self, port):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def v2(self, body_hlen):
        """(seconds from sending the body to the answer read through, compute ms)."""
        body, hlen = body_hlen
        t0 = time.perf_counter()
        self.c.request("POST", PATH, body, {"Content-Type": "application/octet-stream",
                                            "Inference-Header-Content-Length": str(hlen)})
        r = self.c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t0
        if r.status != 200:
            sys.exit(f"batch_e2e: {PATH} answered {r.status}: {data[:300]!r}")
        m = re.search(r"compute;dur=([0-9.]+)", r.getheader("Server-Timing") or "")
        if not m:
            sys.exit("batch_e2e: no compute stage in the answer's Server-Timing")
        return dt, float(m.group(1))

    def close(self):
        self.c.close()


def main():
    binary = sys.argv[1]
    csv = sys.argv[2] if len(sys.argv) > 2 else None
    ids = list(range(1, B + 1))
    p, port = start(binary)
    try:
        c = Client(port)
        kv = rows(1, TOKENS, KDIM)
        t0 = time.perf_counter()
        for i in ids:  # the fill: a start of TOKENS rows each
            c.v2(v2_body([i], rows(1, 1, E), kv, kv, start=True, kv_cache_dtype="FP16"))
        fill_s = time.perf_counter() - t0
        kv = None
        bodies = [v2_body(ids, rows(B, 1, E), rows(B, 1, KDIM), rows(B, 1, KDIM))
                  for _ in range(WARM + STEPS)]
        times = [c.v2(b) for b in bodies][WARM:]  # the first grows every cache by a block
        c.close()  # else SIGTERM's drain waits for the idle connection
    finally:
        p.terminate()
        p.wait()
    e2e = statistics.median(t * 1e3 for t, _ in times)
    comp = statistics.median(ms for _, ms in times)
    ratios = [t * 1e3 / ms for t, ms in times]
    print(f"4e. A layer step of B {B} sequences x {TOKENS} cached tokens end to end (v2 binary, "
          f"H {H}, Hkv {HKV}, d {D}, identity projections, FP16 caches; default workers; one "
          f"keep-alive connection, Python http.client), median of {STEPS}; fill {fill_s:.1f} s")
    print(f"{'body MB':>8} {'e2e ms':>9} {'compute ms':>11} {'e2e/compute':>12} "
          f"{'(per request: min, max)':>24}")
    print(f"{len(bodies[0][0]) / 1e6:>8.3f} {e2e:>9.2f} {comp:>11.2f} {e2e / comp:>11.2f}x "
          f"{min(ratios):>12.2f}x {max(ratios):>8.2f}x")
    print("(goal: end to end <= 1.25x the server's compute)")
    if csv:
        with open(csv, "w") as f:
            f.write("step,e2e_ms,compute_ms\n")
            f.writelines(f"{k},{t * 1e3:.3f},{ms:.3f}\n" for k, (t, ms) in enumerate(times))


if __name__ == "__main__":
    main()
