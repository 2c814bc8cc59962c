#!/usr/bin/python3
"""Train the model of models/digits-reverse/: one attention layer that
reverses a sequence of digits, served by the attention service.

Run with Debian's PyTorch 1.13 (the first python3 on PATH may lack torch):

    /usr/bin/python3 models/train_digits_reverse.py

The task: input L = 8 digits, output position i is input position L-1-i.
The model is the layer the service computes plus what the web page does
around it:

    x[i]   = embedding[token_i] + PE(i)        (the page embeds, the server adds PE)
    y      = nn.MultiheadAttention(E, H, batch_first=True)(x, x, x)
    logits = y @ unembedding^T + unembedding_bias  (per position; not served:
                                                    the page does it)

There is no residual connection, so the answer for position i can only
come from the keys it attends to: the layer must learn to look at the
mirrored position L-1-i, an anti-diagonal pattern.

The loss is the cross-entropy of the reversed digits plus two things that
make the pattern plain to see without changing what it is (where each head
looks is learned from the task alone):
  - ENT x the mean entropy of the attention rows: with the task loss
    alone a head settles at about 0.5-0.65 of its weight on the mirrored
    key and the rest on its neighbours (the readout decodes the mixture),
    a blurred band;
  - DropHead (each head's context dropped with probability DROP, the
    others scaled up, per sequence): without it one head does the work and
    the other three attend elsewhere; with it each head must be able to
    answer alone, so all four learn the reversal.
While training, the attention runs on nn.MultiheadAttention's own
parameters by hand, to drop heads; the evaluation, the files and the
golden case use the module itself (the two agree within 1e-5, checked). PE(i) is the
sinusoidal encoding of core/posenc.c (element 2j sin(i / 10000^(2j/E)),
2j+1 the cos of the same angle, computed in float64 and rounded to
float32, then added in float32): tests/gen_golden.py's sinusoidal_pe,
which the golden tests prove equal to the server's.

Writes (byte-identical on every run: fixed seed, one thread, deterministic
algorithms, no times or dates in the files):
  models/digits-reverse/model.safetensors  the layer, format torch_mha (F32)
  models/digits-reverse/config.json        format, num_heads, defaults, and
      for the web page: vocab, embedding (V x E), unembedding (V x E) and
      unembedding_bias (V), input, task, answer, pattern
  tests/models/trained/digits-reverse.json a golden case: a POST /attention
      body naming the model, and PyTorch's float64 answer (tests/server/test_trained.c)
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import gen_golden as gg  # noqa: E402  (the PE and the golden machinery, shared)

NAME = "digits-reverse"
VOCAB = [str(d) for d in range(10)]
L, E, H = 8, 32, 4
SEED = 0
STEPS, BATCH, LR = 1500, 128, 1e-2
HELD_OUT = 2000
EXAMPLE = "31415926"
OTHERS = ["01234567", "98765432", "11223344", "27182818"]  # the golden case's other rows
ENT = 0.1   # weight of the attention-entropy penalty: each head commits to one key
DROP = 0.5  # DropHead: each head's context dropped with this probability while training
HEAD_MIN_MEAN = 0.9  # a head "learned the pattern" if its mean mirrored weight is at least this


class Reverser(nn.Module):
    def __init__(self, pe):
        super().__init__()
        self.embedding = nn.Embedding(len(VOCAB), E)
        self.attn = nn.MultiheadAttention(E, H, batch_first=True)
        self.readout = nn.Linear(E, len(VOCAB))
        self.register_buffer("pe", pe)

    def forward(self, tokens, keep=None):
        """keep: (B, H) 0/1, the heads kept (DropHead) while training; None:
        nn.MultiheadAttention itself, as served."""
        x = self.embedding(tokens) + self.pe[None]  # float32 + float32, as the server
        if keep is None:
            y, w = self.attn(x, x, x, need_weights=True, average_attn_weights=False)
            return self.readout(y), w
        # nn.MultiheadAttention's computation on its own parameters, with each
        # head's context dropped where keep is 0 and the rest scaled up
        B, d = x.shape[0], E // H
        q, k, v = F.linear(x, self.attn.in_proj_weight, self.attn.in_proj_bias).chunk(3, -1)
        q, k, v = (t.reshape(B, L, H, d).transpose(1, 2) for t in (q, k, v))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1)  # (B, H, L, L)
        ctx = (w @ v) * (keep * H / keep.sum(1, keepdim=True))[:, :, None, None]
        y = F.linear(ctx.transpose(1, 2).reshape(B, L, E), self.attn.out_proj.weight,
                     self.attn.out_proj.bias)
        return self.readout(y), w


def st_bytes(tensors):
    """safetensors bytes of {name: float32 array}, as tests/gen_models.py
    writes them: keys sorted, header padded with spaces to 8 bytes."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def floats(a):
    """float32 values as JSON numbers that parse back to the same float32
    (repr of the exact double)."""
    return [float(x) for x in np.asarray(a, dtype=np.float32).ravel()]


def rows(a):
    return [floats(r) for r in np.asarray(a, dtype=np.float32)]


def dump_config(cfg):
    """JSON, one key per line, each row of a table on one line."""
    def val(v, pad):
        if isinstance(v, dict):
            items = [f'{pad}  {json.dumps(k)}: {val(x, pad + "  ")}' for k, x in v.items()]
            return "{\n" + ",\n".join(items) + "\n" + pad + "}"
        if isinstance(v, list) and v and isinstance(v[0], list):
            inner = ",\n".join(pad + "  " + json.dumps(r) for r in v)
            return "[\n" + inner + "\n" + pad + "]"
        return json.dumps(v, allow_nan=False)
    return val(cfg, "") + "\n"


def digits(s):
    return [VOCAB.index(c) for c in s]


def main():
    t0 = time.time()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    pe = torch.from_numpy(gg.sinusoidal_pe(L, E))

    # Held-out sequences, never trained on (training batches drop them).
    g_test = torch.Generator().manual_seed(SEED + 1)
    test_x = torch.randint(0, 10, (HELD_OUT, L), generator=g_test)
    place = 10 ** torch.arange(L - 1, -1, -1)
    held = set((test_x * place).sum(1).tolist())
    g_train = torch.Generator().manual_seed(SEED + 2)

    model = Reverser(pe)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS)
    lossf = nn.CrossEntropyLoss()

    def evaluate():
        with torch.no_grad():
            logits, w = model(test_x)
            pred = logits.argmax(-1)
            target = test_x.flip(1)
            return ((pred == target).float().mean().item(),
                    (pred == target).all(1).float().mean().item(), w)

    print(f"training {NAME}: L={L} E={E} H={H} vocab {len(VOCAB)}, {STEPS} steps of "
          f"{BATCH}, seed {SEED}", flush=True)
    for step in range(1, STEPS + 1):
        x = torch.randint(0, 10, (BATCH, L), generator=g_train)
        x = x[torch.tensor([v not in held for v in (x * place).sum(1).tolist()])]
        keep = (torch.rand(x.shape[0], H, generator=g_train) >= DROP).float()
        keep[keep.sum(1) == 0, 0] = 1.0  # at least one head
        logits, wt = model(x, keep)
        loss = lossf(logits.reshape(-1, len(VOCAB)), x.flip(1).reshape(-1))
        entropy = -(wt * (wt + 1e-9).log()).sum(-1).mean()
        loss = loss + ENT * entropy
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 0 or step == STEPS:
            tok, seq, _ = evaluate()
            print(f"step {step:5d}  loss {loss.item():.4f}  held-out token acc {tok:.4f}  "
                  f"sequence acc {seq:.4f}  ({time.time() - t0:.1f} s)", flush=True)
    train_s = time.time() - t0

    model.eval()
    tok, seq, w = evaluate()
    # weight of query i on key L-1-i, per head: (HELD_OUT, H, L)
    mirror = w[:, :, torch.arange(L), torch.arange(L - 1, -1, -1)]
    mean_h = mirror.mean((0, 2))
    min_h = mirror.amin((0, 2))
    heads = [h for h in range(H) if mean_h[h] >= HEAD_MIN_MEAN]
    for h in range(H):
        print(f"head {h}: weight on the mirrored key: mean {mean_h[h]:.4f}, min {min_h[h]:.4f}"
              f"{'  (learned the pattern)' if h in heads else ''}")
    avg = w.mean(1)  # (HELD_OUT, L, L)
    anti = (avg.argmax(-1) == torch.arange(L - 1, -1, -1)).all().item()
    print(f"averaged over heads, argmax of every row is the mirrored key on every held-out "
          f"sequence: {anti}")
    with torch.no_grad():  # the training computation is nn.MultiheadAttention's
        _, w_manual = model(test_x, torch.ones(HELD_OUT, H))
    assert (w_manual - w).abs().max().item() < 1e-5
    torch.set_printoptions(precision=2, sci_mode=False, linewidth=120)
    print("mean attention over the held-out sequences, head by head (query rows, key columns):")
    print(w.mean(0))
    assert heads, "no head learned the anti-diagonal"
    assert seq >= 0.99, f"held-out sequence accuracy {seq} is too low"

    sd = model.attn.state_dict()
    W = {k: sd[k].detach().numpy().astype(np.float32) for k in
         ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")}
    emb = model.embedding.weight.detach().numpy().astype(np.float32)
    ro_w = model.readout.weight.detach().numpy().astype(np.float32)
    ro_b = model.readout.bias.detach().numpy().astype(np.float32)

    defaults = {"positional_encoding": "sinusoidal", "need_weights": True,
                "average_attn_weights": False}
    cfg = {
        "format": "torch_mha",
        "num_heads": H,
        "defaults": defaults,
        "task": f"reverses a sequence of {L} digits: output position i copies input "
                f"position {L - 1}-i",
        "input": {"tokens": "digits", "length": L, "example": EXAMPLE},
        "vocab": VOCAB,
        "answer": "reverse",  # the page marks each predicted digit right or wrong
        "pattern": {"kind": "anti-diagonal", "heads": heads,
                    "description": "query i puts most of its weight on key L-1-i"},
        "embedding": rows(emb),
        # the readout nn.Linear(E, V) as the induction model's unembedding:
        # logits = output . unembedding^T + unembedding_bias
        "unembedding": rows(ro_w),
        "unembedding_bias": floats(ro_b),
        "training": {"script": "models/train_digits_reverse.py", "seed": SEED,
                     "steps": STEPS, "batch": BATCH, "optimizer": f"Adam, one-cycle lr {LR}",
                     "attention_entropy_penalty": ENT, "drophead": DROP,
                     "held_out_sequences": HELD_OUT,
                     "held_out_token_accuracy": round(tok, 4),
                     "held_out_sequence_accuracy": round(seq, 4),
                     "mirrored_weight_mean_per_head": [round(float(v), 4) for v in mean_h],
                     "mirrored_weight_min_per_head": [round(float(v), 4) for v in min_h]},
    }
    folder = os.path.join(HERE, NAME)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        fh.write(dump_config(cfg))
    with open(os.path.join(folder, "model.safetensors"), "wb") as fh:
        fh.write(st_bytes(W))

    # The golden case: the example and a few others, embedded as the page
    # embeds them, through the served model; expected from PyTorch float64.
    inputs = [EXAMPLE] + OTHERS
    q = np.stack([emb[digits(s)] for s in inputs]).astype(np.float32)  # (N, L, E)
    req = {"model": NAME, "query": gg.tensor_json(q)}
    full = {k: v for k, v in req.items() if k != "model"}
    full.update(defaults)
    full["num_heads"] = H
    full["weights"] = {"in_proj_weight": gg.tensor_json(W["in_proj_weight"]),
                       "in_proj_bias": gg.tensor_json(W["in_proj_bias"]),
                       "out_proj_weight": gg.tensor_json(W["out_proj.weight"]),
                       "out_proj_bias": gg.tensor_json(W["out_proj.bias"])}
    r = gg.resolve(full)
    out, wts, _ = gg.expected_torch(r)
    ref_out, ref_wts = gg.expected_numpy(r)
    assert np.allclose(out, ref_out, rtol=1e-10, atol=1e-10)
    assert np.allclose(wts, ref_wts, rtol=1e-10, atol=1e-10)
    out32, wts32, _ = gg.expected_torch(r, torch.float32)
    # the training forward pass saw the same input as the golden (and so the server)
    with torch.no_grad():
        _, w_train = model(torch.tensor([digits(s) for s in inputs]))
    gap = np.abs(w_train.numpy() - wts).max()
    print(f"training forward pass vs float64 golden, attention weights: max |diff| {gap:.2g}")
    assert gap < 1e-5
    doc = {"name": NAME,
           "description": f"the trained {NAME} model on {', '.join(inputs)}, embedded with its "
                          "table; PE added by the server (the model's defaults)",
           "inputs": inputs,
           "request": req,
           "expected": {"output": gg.tensor_json(out.astype(np.float32)),
                        "attention_weights": gg.tensor_json(wts.astype(np.float32))},
           "expected_float32": {"output": gg.tensor_json(out32.astype(np.float32)),
                                "attention_weights": gg.tensor_json(wts32.astype(np.float32))}}
    gdir = os.path.join(ROOT, "tests", "models", "trained")
    os.makedirs(gdir, exist_ok=True)
    with open(os.path.join(gdir, NAME + ".json"), "w") as fh:
        fh.write(gg.dump(doc) + "\n")

    print(f"held-out ({HELD_OUT} sequences): token accuracy {tok:.4f}, sequence accuracy "
          f"{seq:.4f}; pattern heads {heads}")
    print(f"wrote models/{NAME}/config.json, models/{NAME}/model.safetensors, "
          f"tests/models/trained/{NAME}.json; training {train_s:.1f} s, "
          f"total {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
