#!/usr/bin/python3
"""PyTorch baseline for bench_kvattend: one decode step on cached FP32 tensors.

Usage: /usr/bin/python3 bench/torch_kvattend.py H HKV D TOKENS...
For each cache length T and 1 and 2 threads: q (H, d) against K, V
(Hkv, T, d) held as tensors, the H / Hkv query heads of a KV head grouped by
a reshape (a view, no copy of K or V): softmax(q·Kᵀ / sqrt(d))·V. Prints
"T threads ms", the median of repeated steps after a warm-up.
"""
import math
import statistics
import sys
import time

import torch


def step(q, k, v, scale):
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (Hkv, G, 1·T)
    return torch.matmul(torch.softmax(s, dim=-1), v)  # (Hkv, G, d)


def main():
    H, Hkv, d = (int(x) for x in sys.argv[1:4])
    G = H // Hkv
    scale = 1.0 / math.sqrt(d)
    with torch.no_grad():
        for T in (int(x) for x in sys.argv[4:]):
            k = torch.rand(Hkv, T, d) * 2 - 1
            v = torch.rand(Hkv, T, d) * 2 - 1
            q = (torch.rand(1, H * d) * 2 - 1).view(Hkv, G, d)  # grouped by a reshape
            for threads in (1, 2):
                torch.set_num_threads(threads)
                step(q, k, v, scale)
                t0 = time.perf_counter()
                step(q, k, v, scale)
                one = time.perf_counter() - t0
                reps = max(5, min(200, int(0.4 / max(one, 1e-5))))
                times = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    step(q, k, v, scale)
                    times.append((time.perf_counter() - t0) * 1e3)
                print(f"{T} {threads} {statistics.median(times):.4f}", flush=True)
            del k, v


if __name__ == "__main__":
    main()
