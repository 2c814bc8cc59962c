#!/usr/bin/python3
"""reduced_weights.py -- `make bench`: the reduced attention weights at
L = S = 4096, H = 16, E = 64 (N = 1) against the full weights.

Each row starts its own attention-server (so its peak RSS, VmHWM, is that
row's), posts one request with a base64 query, reads the answer through and
prints the end-to-end time, the answer's size and the server's peak RSS.
The full weights (268 M floats, 1 GiB) need max_weights_elements and
max_answer_bytes raised, and are asked for in base64 (as JSON text they
would be 3-4 GB); the reduced ones run under the default limits.

Usage: bench/reduced_weights.py SERVER_BINARY [CSV_OUT]
"""
import base64
import http.client
import json
import random
import struct
import sys
import time

import serverproc

L = S = 4096
H, E = 16, 64


def start(binary, flags):
    return serverproc.start(binary, flags, "reduced_weights")


def peak_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run(binary, name, extra, flags, query):
    p, port = start(binary, flags)
    try:
        body = json.dumps({"query": query, "num_heads": H, **extra}).encode()
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        t0 = time.monotonic()
        c.request("POST", "/attention", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        n = 0
        while True:
            chunk = r.read(1 << 20)
            if not chunk:
                break
            n += len(chunk)
        dt = time.monotonic() - t0
        c.close()  # else SIGTERM's drain waits for the idle connection
        return name, r.status, dt, n / 1e6, peak_mb(p.pid)
    finally:
        p.terminate()
        p.wait()


def main():
    binary = sys.argv[1]
    rnd = random.Random(4096)
    q = struct.pack(f"<{L * E}f", *(rnd.uniform(-1, 1) for _ in range(L * E)))
    query = {"shape": [1, L, E], "dtype": "float32", "b64": base64.b64encode(q).decode()}
    big = ["--max-weights-elements", str(H * L * S), "--max-answer-bytes", "4G"]
    rows = [
        ("need_weights false", {"need_weights": False}, []),
        ("full weights, base64", {"output_encoding": "base64"}, big),
        ("weights_top_k 8, json", {"weights_top_k": 8}, []),
        ("weights_top_k 8, base64", {"weights_top_k": 8, "output_encoding": "base64"}, []),
        ("weights_pool 32, json", {"weights_pool": 32}, []),
        ("weights_pool 32, base64", {"weights_pool": 32, "output_encoding": "base64"}, []),
    ]
    print(f"Reduced weights: L = S = {L}, H = {H}, E = {E}, N = 1, one server per row "
          "(peak RSS = its VmHWM)")
    print(f"{'request':26} {'status':>6} {'e2e s':>7} {'answer MB':>10} {'peak RSS MB':>12}")
    out = []
    for name, extra, flags in rows:
        row = run(binary, name, extra, flags, query)
        out.append(row)
        print(f"{row[0]:26} {row[1]:6d} {row[2]:7.2f} {row[3]:10.1f} {row[4]:12.0f}")
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write("request,status,e2e_s,answer_mb,peak_rss_mb\n")
            for r in out:
                f.write(f"{r[0]},{r[1]},{r[2]:.3f},{r[3]:.1f},{r[4]:.0f}\n")


if __name__ == "__main__":
    main()
