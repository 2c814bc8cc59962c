#!/usr/bin/python3
"""PyTorch baseline for `make bench`: nn.MultiheadAttention on the values the
C bench wrote, timed the same way (median of repeated calls).

Usage: /usr/bin/python3 bench/torch_mha.py DIR THREADS
DIR/cases.txt has one line per case: "name L E H reps"; DIR/<name>.x.bin,
.w_in.bin, .b_in.bin, .w_out.bin, .b_out.bin are float32 row-major. Prints
one line per case and mode: "name need_weights ms", and writes the
need_weights=False output to DIR/<name>.torch_out.bin for the accuracy check.
"""
import statistics
import sys
import time

import numpy as np
import torch


def load(path, *shape):
    return torch.from_numpy(np.fromfile(path, dtype=np.float32).reshape(*shape))


def main():
    d, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    for line in open(f"{d}/cases.txt"):
        name, L, E, H, reps = line.split()
        L, E, H, reps = int(L), int(E), int(H), int(reps)
        x = load(f"{d}/{name}.x.bin", 1, L, E)
        mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
        with torch.no_grad():
            mha.in_proj_weight.copy_(load(f"{d}/{name}.w_in.bin", 3 * E, E))
            mha.in_proj_bias.copy_(load(f"{d}/{name}.b_in.bin", 3 * E))
            mha.out_proj.weight.copy_(load(f"{d}/{name}.w_out.bin", E, E))
            mha.out_proj.bias.copy_(load(f"{d}/{name}.b_out.bin", E))
        mha.eval()
        with torch.no_grad():
            for need in (True, False):
                kw = dict(need_weights=need, average_attn_weights=False)
                out, _ = mha(x, x, x, **kw)  # warm-up
                times = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    out, _ = mha(x, x, x, **kw)
                    times.append((time.perf_counter() - t0) * 1e3)
                print(f"{name} {int(need)} {statistics.median(times):.4f}", flush=True)
                if not need:
                    out.numpy().astype(np.float32).tofile(f"{d}/{name}.torch_out.bin")


if __name__ == "__main__":
    main()
