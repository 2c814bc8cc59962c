#!/usr/bin/python3
"""generate.py -- llama.py's decoder generating greedily for a batch of
prompts, its attention in its own process (--backend local), on the
attention server (--backend server), or both, compared (--backend both, the
default): the same tokens, and logits within a relative tolerance
(|a - b| <= rtol · max |a| per sequence and token; rtol 1e-4 with an FP32
cache, RTOL below).

    /usr/bin/python3 examples/offload/generate.py --url http://localhost:8080 \\
        --layers 4 --heads 8 --kv-heads 2 --head-dim 32 --cache-dtype FP16 \\
        --prompts 8 --new-tokens 64

The weights come from --seed, the prompts (random token ids, lengths spread
evenly over --prompt-lengths MIN:MAX) from --seed too. Prints, per backend,
the time of the prompts, the decode steps' tokens per second and the time in
attention per decode step (all layers, the whole batch, round trips
included for the server) and per generated token (the step's over the
batch), the ratio server/local with both, and the comparison. Exits 1 when
the backends disagree, 2 on a server error. Docs: docs/offload.md.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
import remote  # noqa: E402


# The tolerance of the comparison per cache dtype. Both backends round the
# float32 keys and values to the cache dtype; where those rows differ in
# their last bits (the attention of the layer below differs there), a value
# near a rounding boundary lands one unit of the cache dtype apart (2^-11
# of it in FP16, 2^-8 in BF16), which bounds the logits' difference too
# (seen: 7e-5 FP16, 3e-4 BF16, against 1e-6 with an FP32 cache).
RTOL = {"FP32": 1e-4, "FP16": 2.0 ** -11, "BF16": 2.0 ** -8}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("local", "server", "both"), default="both")
    p.add_argument("--url", default="http://localhost:" + os.environ.get("ATTN_PORT", "8080"),
                   help="the attention server (default http://localhost:$ATTN_PORT or 8080)")
    g = p.add_argument_group("the model's shapes")
    g.add_argument("--layers", type=int, default=4)
    g.add_argument("--heads", type=int, default=8)
    g.add_argument("--kv-heads", type=int, default=2)
    g.add_argument("--head-dim", type=int, default=32)
    g.add_argument("--vocab", type=int, default=512)
    g.add_argument("--hidden", type=int, default=0, help="default heads x head-dim")
    g.add_argument("--ffn", type=int, default=0, help="default 8/3 hidden, rounded up to 32")
    g.add_argument("--cache-dtype", choices=tuple(llama.CACHE_DTYPES), default="FP32")
    g.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("the generation")
    g.add_argument("--prompts", type=int, default=8, help="the batch's size B")
    g.add_argument("--prompt-lengths", default="3:40", metavar="MIN:MAX")
    g.add_argument("--new-tokens", type=int, default=64)
    g.add_argument("--local-kernel", choices=("sdpa", "grouped"), default="sdpa",
                   help="the local backend's: PyTorch's SDPA over repeated KV heads, or "
                        "softmax(q k^T) v with the heads grouped by a view (llama.py)")
    g.add_argument("--rtol", type=float, default=None,
                   help="default 1e-4 with an FP32 cache, 2^-11 FP16, 2^-8 BF16 (docs/offload.md)")
    g.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="PyTorch's threads (default: every core)")
    g.add_argument("--show", type=int, default=2, help="sequences whose tokens are printed")
    return p.parse_args(argv)


def make_prompts(n, lengths, vocab, seed):
    lo, _, hi = lengths.partition(":")
    lo, hi = int(lo), int(hi or lo)
    g = torch.Generator().manual_seed(seed + 1)
    sizes = [lo + (hi - lo) * i // max(n - 1, 1) for i in range(n)]
    return [torch.randint(vocab, (size,), generator=g).tolist() for size in sizes]


def compare(ref, other, rtol):
    """(tokens equal, largest |a - b| / max |a| over every sequence and token)"""
    (t_a, l_a), (t_b, l_b) = ref, other
    scale = l_a.abs().amax(-1).clamp_min(1e-30)  # (steps, B)
    rel = ((l_a - l_b).abs().amax(-1) / scale).max().item()
    return torch.equal(t_a, t_b), rel


def run(args, shape, model, prompts, name):
    if name == "local":
        backend = llama.LocalAttention(shape, args.local_kernel)
    else:
        backend = remote.ServerAttention(shape, args.url)
    try:
        tokens, logits, t = llama.generate(model, backend, prompts, args.new_tokens)
    finally:
        if name == "server":
            backend.close()
    return tokens, logits, t


def main(argv=None):
    args = parse_args(argv)
    if args.rtol is None:
        args.rtol = RTOL[args.cache_dtype]
    torch.set_num_threads(args.threads)
    shape = llama.Shape(layers=args.layers, heads=args.heads, kv_heads=args.kv_heads,
                        head_dim=args.head_dim, vocab=args.vocab, hidden=args.hidden,
                        ffn=args.ffn, cache_dtype=args.cache_dtype)
    model = llama.Llama(shape, args.seed)
    prompts = make_prompts(args.prompts, args.prompt_lengths, shape.vocab, args.seed)
    names = ["local", "server"] if args.backend == "both" else [args.backend]
    print(f"model: {shape.layers} layers, H {shape.heads}, Hkv {shape.kv_heads}, "
          f"d {shape.head_dim}, hidden {shape.hidden}, ffn {shape.ffn}, vocab {shape.vocab}, "
          f"cache {shape.cache_dtype}; batch {len(prompts)} prompts of "
          f"{min(map(len, prompts))} to {max(map(len, prompts))} tokens, "
          f"{args.new_tokens} new tokens each; {args.threads} PyTorch thread(s)")
    results = {}
    with torch.no_grad():
        for name in names:
            try:
                results[name] = run(args, shape, model, prompts, name)
            except (remote.ServerError, OSError) as e:
                print(f"{name}: {e}", file=sys.stderr)
                return 2
    print(f"{'backend':<8} {'prompts s':>10} {'decode tok/s':>13} {'attention ms/step':>18} "
          f"{'ms/token':>9} {'attention share':>16}")
    for name, (_, _, t) in results.items():
        step_ms = t["decode_attention_s"] / max(t["decode_steps"], 1) * 1e3
        print(f"{name:<8} {t['prompt_s']:>10.3f} "
              f"{len(prompts) * t['decode_steps'] / max(t['decode_s'], 1e-9):>13.1f} "
              f"{step_ms:>18.3f} {step_ms / len(prompts):>9.3f} "
              f"{t['decode_attention_s'] / max(t['decode_s'], 1e-9):>15.0%}")
    if len(results) == 2:
        a, b = results["local"][2], results["server"][2]
        print(f"server/local: attention per step {b['decode_attention_s'] / a['decode_attention_s']:.2f}x, "
              f"decode time {b['decode_s'] / a['decode_s']:.2f}x (attention per step: all "
              f"{shape.layers} layers, the batch of {len(prompts)}, round trips included)")
    for name, (tokens, _, _) in results.items():
        for i in range(min(args.show, len(prompts))):
            print(f"{name} sequence {i}: {tokens[i, :16].tolist()}")
    if len(results) < 2:
        return 0
    same, rel = compare(results["local"][:2], results["server"][:2], args.rtol)
    ok = same and rel <= args.rtol
    print(f"{'ok' if ok else 'MISMATCH'}: tokens {'equal' if same else 'differ'}, logits' largest "
          f"|local - server| / max |local| = {rel:.2e} (tolerance {args.rtol:.2g}), "
          f"{len(prompts)} x {args.new_tokens} tokens")
    if not same:
        t_l, t_s = results["local"][0], results["server"][0]
        b, s = (t_l != t_s).nonzero()[0].tolist()
        print(f"first difference: sequence {b}, token {s}: local {t_l[b, s].item()}, "
              f"server {t_s[b, s].item()}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
