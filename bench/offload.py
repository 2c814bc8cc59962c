#!/usr/bin/python3
"""offload.py -- `make bench` (section 4c): a decoder's attention on the
server against the same decoder's attention in PyTorch, at contexts of
2 048 tokens and more.

examples/offload/'s Llama-architecture decoder (seeded weights) generates
greedily for a batch of OFFLOAD_BATCH prompts of OFFLOAD_PROMPTS tokens
(MIN:MAX, spread evenly) and OFFLOAD_NEW new tokens, for each cache dtype
of OFFLOAD_DTYPES, with three attention backends:

- local (SDPA): PyTorch's scaled dot-product attention over caches kept in
  the process, the KV heads repeated (repeat_interleave), a mask for the
  ragged lengths -- what a PyTorch 1.13 decoder has;
- local (grouped): softmax(q·kᵀ/√d)·v written out, the query heads of a KV
  head grouped by a view (no copy of the cache);
- server: one v2 binary request per layer per token for the whole batch to
  an attention-server started here with its default settings (2 workers x 1
  thread), the caches on the server.

Prints per backend the prompts' time, the decode steps' tokens per second
and the time in attention per decode step (every layer, the whole batch;
round trips included for the server) and per generated token (the step's
over the batch), the ratio server / local, and
whether the backends gave the same tokens and logits. PyTorch uses every
core; the server too, while the decoder waits for its answer. The target
(docs/performance.md): server <= local per step.

Usage: bench/offload.py SERVER_BINARY [CSV_OUT]
Env: OFFLOAD_SHAPE ("layers=2,heads=8,kv_heads=2,head_dim=128,hidden=512,vocab=512"),
     OFFLOAD_BATCH (8), OFFLOAD_PROMPTS ("2048:2304"), OFFLOAD_NEW (32),
     OFFLOAD_DTYPES ("FP32,FP16").
"""
import os
import sys

import torch

import serverproc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "offload"))
import generate  # noqa: E402
import llama  # noqa: E402
import remote  # noqa: E402

SHAPE = os.environ.get("OFFLOAD_SHAPE", "layers=2,heads=8,kv_heads=2,head_dim=128,hidden=512,vocab=512")
BATCH = int(os.environ.get("OFFLOAD_BATCH", "8"))
PROMPTS = os.environ.get("OFFLOAD_PROMPTS", "2048:2304")
NEW = int(os.environ.get("OFFLOAD_NEW", "32"))
DTYPES = os.environ.get("OFFLOAD_DTYPES", "FP32,FP16").split(",")
BACKENDS = [("local (SDPA)", "sdpa"), ("local (grouped)", "grouped"), ("server", None)]


def main():
    binary = sys.argv[1]
    csv = sys.argv[2] if len(sys.argv) > 2 else None
    torch.set_num_threads(os.cpu_count())
    dims = {k: int(v) for k, v in (p.split("=") for p in SHAPE.split(","))}
    proc, port = serverproc.start(binary, ["--log-level", "warn"], "offload")
    rows = ["dtype,backend,prompts_s,decode_tok_s,attention_ms_per_step,attention_ms_per_token"]
    try:
        for n, dtype in enumerate(DTYPES):
            shape = llama.Shape(cache_dtype=dtype, **dims)
            model = llama.Llama(shape, 0)
            prompts = generate.make_prompts(BATCH, PROMPTS, shape.vocab, 0)
            if n == 0:
                ctx = (min(map(len, prompts)), max(map(len, prompts)) + NEW - 1)
                print(f"4c. A decoder's attention on the server vs in PyTorch "
                      f"(examples/offload/: {shape.layers} layers, H {shape.heads}, "
                      f"Hkv {shape.kv_heads}, d {shape.head_dim}, hidden {shape.hidden}; "
                      f"batch {BATCH}, contexts {ctx[0]} to {ctx[1]} tokens, {NEW} new tokens; "
                      f"{torch.get_num_threads()} PyTorch threads; server: its defaults)")
                print(f"{'cache':<6} {'backend':<16} {'prompts s':>10} {'decode tok/s':>13} "
                      f"{'attention ms/step':>18} {'ms/token':>9} {'server/this':>12}")
            out = {}
            with torch.no_grad():
                for name, kernel in BACKENDS:
                    if kernel:
                        backend = llama.LocalAttention(shape, kernel)
                    else:
                        backend = remote.ServerAttention(shape, f"http://127.0.0.1:{port}")
                    out[name] = llama.generate(model, backend, prompts, NEW)
                    if not kernel:
                        backend.close()
            server_ms = out["server"][2]["decode_attention_s"] / (NEW - 1) * 1e3
            for name, _ in BACKENDS:
                t = out[name][2]
                ms = t["decode_attention_s"] / (NEW - 1) * 1e3
                tok_s = BATCH * (NEW - 1) / t["decode_s"]
                ratio = f"{server_ms / ms:.2f}x" if name != "server" else ""
                print(f"{dtype:<6} {name:<16} {t['prompt_s']:>10.2f} {tok_s:>13.1f} "
                      f"{ms:>18.1f} {ms / BATCH:>9.2f} {ratio:>12}")
                rows.append(f"{dtype},{name},{t['prompt_s']:.3f},{tok_s:.2f},{ms:.3f},"
                            f"{ms / BATCH:.3f}")
            for name, _ in BACKENDS[:2]:
                same, rel = generate.compare(out[name][:2], out["server"][:2], 0)
                print(f"{'':<6} {name} vs server: tokens {'equal' if same else 'DIFFER'}, "
                      f"logits' largest relative difference {rel:.1e} "
                      f"(tolerance {generate.RTOL[dtype]:.2g})")
        print(f"(attention ms/step: every layer, one decode step of the whole batch, round trips "
              f"included; ms/token: per generated token, the step's / {BATCH}; "
              f"target: server <= local)")
    finally:
        proc.terminate()
        proc.wait()
    if csv:
        with open(csv, "w") as f:
            f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
