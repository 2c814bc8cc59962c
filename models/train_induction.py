#!/usr/bin/python3
"""Train the models of models/induction-l0/ and models/induction-l1/: the
two attention layers of a two-layer attention-only transformer that has
learned induction heads, served by the attention service.

Run with Debian's PyTorch 1.13 (the first python3 on PATH may lack torch):

    /usr/bin/python3 models/train_induction.py

The task: a random sequence of P tokens in which a segment of random length
m (M_MIN ... P/2) at a random place is repeated right after itself; predict
the next token at every position. Inside the second copy the next token is
the one after the previous occurrence of the current token, so a model that
finds it (an induction head) is right there; elsewhere it can only guess.
With the repeat always at the same place and of the same length, layer 1
finds the earlier copy by position and no induction head forms; the random
place and length make the model look up the token itself.

The model is what the service computes plus what a client does around it:

    x0     = embedding[token_i] + positions[i]       (the client)
    x1     = x0 + layer0(x0)                         (layer0 served as induction-l0)
    x2     = x1 + layer1(x1)                         (layer1 served as induction-l1)
    logits = x2 . unembedding^T                      (the client; no bias)

layer0 and layer1 are nn.MultiheadAttention(E, H, batch_first=True) with a
causal mask (the models' defaults: attn_mask "causal"). No MLP, no
LayerNorm. Two layers are the least that can form the circuit (Elhage et
al., "A Mathematical Framework for Transformer Circuits"): a layer-0
previous-token head writes "the token before me" into the residual, and a
layer-1 induction head matches it against the current token (K-composition)
and copies the token it finds.

The loss is the next-token cross-entropy at every position plus ENT x the
mean entropy of the attention rows (each head commits to a few keys, so
the maps read plainly). Adam with a one-cycle learning rate.

Measured at the end on HELD_OUT fresh sequences of the same kind, with
nn.MultiheadAttention itself as served (the figures go into config.json's
"circuit"):
  - accuracy: argmax of the logits = the next token, over the queries i of
    the second copy whose next token is in it too (s+m <= i <= s+2m-2,
    where the first copy starts at s);
  - previous_token: for each layer-0 head, its mean weight of query i on
    key i-1 over all queries 1..P-1; the head with the largest;
  - induction: for each layer-1 head, its mean weight of query i on key
    i-m+1 (the token after the previous occurrence of token i) over the same
    queries as the accuracy; the head with the largest.

Writes (byte-identical on every run on the same machine and thread count:
fixed seeds, THREADS threads, deterministic algorithms, no times or dates in
the files):
  models/induction-l0/model.safetensors  layer 0, format torch_mha (F32)
  models/induction-l0/config.json        format, num_heads, defaults, task, and
      for a client: vocab, embedding, positions, unembedding, input,
      next_layer, circuit, training
  models/induction-l1/model.safetensors  layer 1
  models/induction-l1/config.json        format, num_heads, defaults, task,
      previous_layer
"""
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_digits_reverse import dump_config, rows, st_bytes  # noqa: E402  (one writer of both)

NAMES = ("induction-l0", "induction-l1")
VOCAB = list("abcdefghijklmnopqrstuvwxyz234567")  # the base32 alphabet, lower case
V, P, E, H = len(VOCAB), 32, 64, 4
M_MIN = 6  # the repeated segment: M_MIN ... P/2 tokens
SEED = 0
THREADS = 1  # two threads ran 15x slower while other jobs shared the two cores
STEPS, BATCH, LR = 10000, 64, 3e-3
ENT = 0.01  # weight of the attention-entropy penalty
HELD_OUT = 2000
# a repeated segment of 10 distinct letters, none of them elsewhere
EXAMPLE = "k7qz" + "duplicates" * 2 + "wo3nyxb5"
assert len(EXAMPLE) == P


def batch(n, gen):
    """n sequences of P tokens, each with a segment of random length m at a
    random place s repeated right after itself: (tokens (n, P), s (n), m (n))."""
    x = torch.randint(0, V, (n, P), generator=gen)
    m = torch.randint(M_MIN, P // 2 + 1, (n,), generator=gen)
    s = (torch.rand(n, generator=gen) * (P - 2 * m + 1)).long()  # 0 ... P-2m
    i = torch.arange(P)[None]
    second = (i >= (s + m)[:, None]) & (i < (s + 2 * m)[:, None])
    src = (i - m[:, None]).clamp(min=0)
    x = torch.where(second, x.gather(1, src), x)
    return x, s, m


def causal_mask():
    return torch.ones(P, P, dtype=torch.bool).triu(1)  # True: key j > i is blocked


class Induction(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(V, E) * 0.5)
        self.positions = nn.Parameter(torch.randn(P, E) * 0.5)
        self.layer0 = nn.MultiheadAttention(E, H, batch_first=True)
        self.layer1 = nn.MultiheadAttention(E, H, batch_first=True)
        self.unembedding = nn.Parameter(torch.randn(V, E) * E ** -0.5)
        self.register_buffer("mask", causal_mask())

    def forward(self, tokens):
        x0 = self.embedding[tokens] + self.positions[None, : tokens.shape[1]]
        a0, w0 = self.layer0(x0, x0, x0, attn_mask=self.mask, need_weights=True,
                             average_attn_weights=False)
        x1 = x0 + a0
        a1, w1 = self.layer1(x1, x1, x1, attn_mask=self.mask, need_weights=True,
                             average_attn_weights=False)
        x2 = x1 + a1
        return x2 @ self.unembedding.T, w0, w1


def measure(model, x, s, m):
    """The figures of the module docstring on the sequences x: (accuracy,
    previous-token weight per layer-0 head, induction weight per layer-1
    head, accuracy over every query)."""
    with torch.no_grad():
        logits, w0, w1 = model(x)
    n = x.shape[0]
    i = torch.arange(P)[None]
    inside = (i >= (s + m)[:, None]) & (i <= (s + 2 * m - 2)[:, None])  # (n, P)
    right = logits[:, :-1].argmax(-1) == x[:, 1:]
    acc = right[inside[:, :-1]].float().mean().item()
    prev = w0[:, :, torch.arange(1, P), torch.arange(P - 1)].mean((0, 2))  # (H)
    key = (i - m[:, None] + 1).clamp(min=0)  # (n, P)
    on_key = w1.gather(3, key[:, None, :, None].expand(n, H, P, 1))[..., 0]  # (n, H, P)
    ind = (on_key * inside[:, None]).sum((0, 2)) / inside.sum()
    return acc, prev, ind, right.float().mean().item()


def main():
    t0 = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)
    torch.use_deterministic_algorithms(True)
    g_train = torch.Generator().manual_seed(SEED + 1)
    g_test = torch.Generator().manual_seed(SEED + 2)
    test_x, test_s, test_m = batch(HELD_OUT, g_test)

    model = Induction()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS)
    lossf = nn.CrossEntropyLoss()
    print(f"training {NAMES[0]}, {NAMES[1]}: V={V} P={P} E={E} H={H}, repeats of "
          f"{M_MIN}...{P // 2} tokens, {STEPS} steps of {BATCH}, seed {SEED}, "
          f"{THREADS} threads", flush=True)
    for step in range(1, STEPS + 1):
        x, _, _ = batch(BATCH, g_train)
        logits, w0, w1 = model(x)
        loss = lossf(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
        w = torch.cat([w0, w1], 1)
        entropy = -(w * (w + 1e-9).log()).sum(-1).mean()
        total = loss + ENT * entropy
        opt.zero_grad()
        total.backward()
        opt.step()
        sched.step()
        if step % 250 == 0 or step == STEPS:
            acc, prev, ind, _ = measure(model, test_x, test_s, test_m)
            print(f"step {step:5d}  loss {loss.item():.4f}  entropy {entropy.item():.3f}  "
                  f"held-out accuracy {acc:.4f}  previous-token {prev.max().item():.4f} "
                  f"(head {prev.argmax().item()})  induction {ind.max().item():.4f} "
                  f"(head {ind.argmax().item()})  ({time.time() - t0:.1f} s)", flush=True)
    train_s = time.time() - t0

    model.eval()
    acc, prev, ind, acc_all = measure(model, test_x, test_s, test_m)
    prev_head, ind_head = int(prev.argmax()), int(ind.argmax())
    for h in range(H):
        print(f"layer 0 head {h}: mean weight on the previous token {prev[h]:.4f}"
              f"{'  (previous-token head)' if h == prev_head else ''}")
    for h in range(H):
        print(f"layer 1 head {h}: mean weight on the token after the previous occurrence "
              f"{ind[h]:.4f}{'  (induction head)' if h == ind_head else ''}")
    ex = torch.tensor([[VOCAB.index(c) for c in EXAMPLE]])
    with torch.no_grad():
        pred = "".join(VOCAB[t] for t in model(ex)[0][0].argmax(-1).tolist())
    print(f"example {EXAMPLE}\n   next {pred}")

    def layer(mha):
        sd = mha.state_dict()
        return {k: sd[k].detach().numpy().astype(np.float32) for k in
                ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")}

    def table(p):
        return rows(p.detach().numpy().astype(np.float32))

    defaults = {"attn_mask": "causal", "need_weights": True, "average_attn_weights": False}
    cfg0 = {
        "format": "torch_mha",
        "num_heads": H,
        "defaults": defaults,
        "task": "layer 0 of a two-layer attention-only transformer that continues a repeated "
                "segment of tokens (induction heads): x1 = x0 + this layer's output, "
                "x0 = embedding[token] + positions[i]",
        "vocab": VOCAB,
        "input": {"tokens": "vocab", "length": P, "example": EXAMPLE},
        "next_layer": NAMES[1],
        "circuit": {
            "previous_token": {"layer": 0, "head": prev_head,
                               "mean_weight": round(float(prev[prev_head]), 4)},
            "induction": {"layer": 1, "head": ind_head,
                          "mean_weight": round(float(ind[ind_head]), 4)},
            "accuracy": round(acc, 4),
            "description": f"measured by {os.path.relpath(__file__, os.path.dirname(HERE))} "
                           f"on {HELD_OUT} random sequences of {P} tokens, each with a segment "
                           f"of random length m ({M_MIN} ... {P // 2}) at a random place s "
                           "repeated right after itself. accuracy: argmax of the logits is "
                           "the next token, over the queries i of the second copy whose next "
                           "token is in it too (s+m <= i <= s+2m-2). previous_token: the "
                           "layer-0 head with the largest mean weight of query i on key i-1 "
                           f"(queries 1 ... {P - 1}). induction: the layer-1 head with the "
                           "largest mean weight of query i on key i-m+1, the token after the "
                           "previous occurrence of token i, over the same queries as accuracy"},
        "embedding": table(model.embedding),
        "positions": table(model.positions),
        "unembedding": table(model.unembedding),
        "training": {"script": "models/train_induction.py", "seed": SEED, "threads": THREADS,
                     "steps": STEPS, "batch": BATCH, "optimizer": f"Adam, one-cycle lr {LR}",
                     "attention_entropy_penalty": ENT, "held_out_sequences": HELD_OUT,
                     "accuracy_every_query": round(acc_all, 4),
                     "previous_token_weight_per_head": [round(float(v), 4) for v in prev],
                     "induction_weight_per_head": [round(float(v), 4) for v in ind]},
    }
    cfg1 = {
        "format": "torch_mha",
        "num_heads": H,
        "defaults": defaults,
        "task": "layer 1 of the two-layer attention-only transformer of induction-l0 (its "
                "config has the tables and the circuit): x2 = x1 + this layer's output, "
                "logits = x2 . unembedding^T",
        "previous_layer": NAMES[0],
    }
    for name, cfg, mha in ((NAMES[0], cfg0, model.layer0), (NAMES[1], cfg1, model.layer1)):
        folder = os.path.join(HERE, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as fh:
            fh.write(dump_config(cfg))
        with open(os.path.join(folder, "model.safetensors"), "wb") as fh:
            fh.write(st_bytes(layer(mha)))

    print(f"held-out ({HELD_OUT} sequences): accuracy inside the second copy {acc:.4f} "
          f"(every query {acc_all:.4f}), previous-token head 0.{prev_head} mean weight "
          f"{prev[prev_head]:.4f}, induction head 1.{ind_head} mean weight {ind[ind_head]:.4f}")
    print(f"wrote models/{NAMES[0]}/ and models/{NAMES[1]}/ (config.json, model.safetensors); "
          f"training {train_s:.1f} s, total {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
