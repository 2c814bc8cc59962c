"""llama.py -- a Llama-architecture decoder whose attention is a backend.

The model: token embedding, then per layer RMSNorm, grouped-query attention
with rotary position embedding (RoPE, "half" layout: pairs i and i + d/2, as
Hugging Face Llama), a residual, RMSNorm, a SwiGLU MLP and a residual; a
final RMSNorm and the LM head. Its weights come from a fixed seed
(torch.manual_seed), its shapes are parameters (Shape).

Everything but the attention itself is this file's, for every backend: the
projections, RoPE at each sequence's positions (applied here to q and k, so
a backend receives rows already rotated), the output projection, the MLP,
greedy decoding. A backend is an object with

    begin(n, capacity)   n sequences, each at most capacity tokens long
    attend(layer, q, k, v, seqs, start)
                         q: (B, L, H, d), k and v: (B, L, Hkv, d) float32, the
                         new rows of the sequences seqs (B indices into the n)
                         at that layer; start: these are the sequences' first
                         rows (a prompt). Appends k and v to each sequence's
                         cache of that layer and returns the attention of q
                         over it, causal (lower-right), as (B, L, H·d)
    end()                frees the n sequences
    attention_seconds    the wall-clock time spent in attend() so far

LocalAttention below is the backend a model has in its own process: PyTorch's
scaled dot-product attention over caches it keeps (remote.py's
ServerAttention keeps them on the attention server).
"""
import dataclasses
import math
import time

import torch
import torch.nn.functional as F

# the cache element types of the server (kv_cache_dtype) and their torch types
CACHE_DTYPES = {"FP32": torch.float32, "FP16": torch.float16, "BF16": torch.bfloat16}


@dataclasses.dataclass
class Shape:
    """The model's shapes: hidden = heads · head_dim unless given, ffn the
    SwiGLU width (8/3 · hidden rounded up to 32 unless given)."""
    layers: int = 4
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 32
    vocab: int = 512
    hidden: int = 0
    ffn: int = 0
    rope_theta: float = 10000.0
    eps: float = 1e-5
    cache_dtype: str = "FP32"

    def __post_init__(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads {self.kv_heads} must divide heads {self.heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} must be even (RoPE)")
        if self.cache_dtype not in CACHE_DTYPES:
            raise ValueError(f"cache_dtype {self.cache_dtype!r}: one of {', '.join(CACHE_DTYPES)}")
        self.hidden = self.hidden or self.heads * self.head_dim
        self.ffn = self.ffn or (8 * self.hidden // 3 + 31) // 32 * 32


class Llama:
    """The decoder's weights (seeded) and its forward pass over a backend."""

    def __init__(self, shape, seed=0):
        s = self.shape = shape
        torch.manual_seed(seed)

        def linear(out_dim, in_dim):  # (out, in), variance kept through the product
            return torch.randn(out_dim, in_dim) / math.sqrt(in_dim)

        def norm():  # RMSNorm gains near 1
            return 1 + 0.1 * torch.randn(s.hidden)

        self.embed = torch.randn(s.vocab, s.hidden)
        self.layers = []
        for _ in range(s.layers):
            self.layers.append({
                "attn_norm": norm(),
                "wq": linear(s.heads * s.head_dim, s.hidden),
                "wk": linear(s.kv_heads * s.head_dim, s.hidden),
                "wv": linear(s.kv_heads * s.head_dim, s.hidden),
                "wo": linear(s.hidden, s.heads * s.head_dim),
                "mlp_norm": norm(),
                "w_gate": linear(s.ffn, s.hidden),
                "w_up": linear(s.ffn, s.hidden),
                "w_down": linear(s.hidden, s.ffn),
            })
        self.final_norm = norm()
        self.lm_head = linear(s.vocab, s.hidden)
        half = s.head_dim // 2
        self.inv_freq = s.rope_theta ** (-torch.arange(half, dtype=torch.float64) / half)

    def rms_norm(self, x, gain):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.shape.eps) * gain

    def rope(self, x, pos):
        """x: (B, L, heads, d) turned by its positions pos: (B, L), "half"
        layout: pair i is (x[i], x[i + d/2]), turned by pos · theta^(-2i/d)."""
        angle = (pos.to(torch.float64)[..., None] * self.inv_freq).to(torch.float32)
        cos, sin = angle.cos()[:, :, None, :], angle.sin()[:, :, None, :]
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

    def forward(self, tokens, pos, backend, seqs, start=False, last_only=False):
        """tokens, pos: (B, L) of the sequences seqs; returns the logits
        (B, L, vocab), or (B, vocab) of the last row with last_only."""
        s = self.shape
        B, L = tokens.shape
        x = self.embed[tokens]
        for i, w in enumerate(self.layers):
            h = self.rms_norm(x, w["attn_norm"])
            q = (h @ w["wq"].T).view(B, L, s.heads, s.head_dim)
            k = (h @ w["wk"].T).view(B, L, s.kv_heads, s.head_dim)
            v = (h @ w["wv"].T).view(B, L, s.kv_heads, s.head_dim)
            q, k = self.rope(q, pos), self.rope(k, pos)
            x = x + backend.attend(i, q, k, v, seqs, start) @ w["wo"].T
            h = self.rms_norm(x, w["mlp_norm"])
            x = x + (F.silu(h @ w["w_gate"].T) * (h @ w["w_up"].T)) @ w["w_down"].T
        if last_only:
            x = x[:, -1]
        return self.rms_norm(x, self.final_norm) @ self.lm_head.T


def generate(model, backend, prompts, new_tokens):
    """Greedy decoding of new_tokens tokens for each prompt (lists of token
    ids, of any lengths): each prompt is one chunk through every layer (its
    sequence's start), then the whole batch one token at a time. Returns
    (tokens (B, new_tokens), logits (new_tokens, B, vocab) of every choice,
    timings: a dict of seconds)."""
    n = len(prompts)
    backend.begin(n, max(len(p) for p in prompts) + new_tokens)
    try:
        return _generate(model, backend, prompts, new_tokens)
    except BaseException:
        try:  # the sequences are not left behind (on a server, until their timeout)
            backend.end()
        except Exception:  # the first error is the one to report
            pass
        raise


def _generate(model, backend, prompts, new_tokens):
    n = len(prompts)
    t0 = time.perf_counter()
    logits = [torch.empty(n, model.shape.vocab)]
    for b, p in enumerate(prompts):
        logits[0][b] = model.forward(torch.tensor([p]), torch.arange(len(p))[None], backend, [b],
                                     start=True, last_only=True)[0]
    t_prompts, a_prompts = time.perf_counter() - t0, backend.attention_seconds
    pos = torch.tensor([[len(p)] for p in prompts])
    tokens = [logits[0].argmax(-1)]
    every = list(range(n))
    for _ in range(new_tokens - 1):
        logits.append(model.forward(tokens[-1][:, None], pos, backend, every, last_only=True))
        tokens.append(logits[-1].argmax(-1))
        pos += 1
    t_decode = time.perf_counter() - t0 - t_prompts
    backend.end()
    return torch.stack(tokens, 1), torch.stack(logits), {
        "prompt_s": t_prompts, "prompt_attention_s": a_prompts, "decode_s": t_decode,
        "decode_attention_s": backend.attention_seconds - a_prompts, "decode_steps": new_tokens - 1}


class LocalAttention:
    """The attention in the model's process: a cache per layer, (n, Hkv,
    capacity, d) in the cache dtype (k and v rounded to it as they are
    appended, as the server's cache does), and PyTorch's scaled dot-product
    attention (torch 1.13's _scaled_dot_product_attention, the math kernel)
    over the cache as float32, its KV heads repeated for the query heads
    (repeat_interleave: 1.13 has no enable_gqa) and a boolean mask for the
    ragged lengths of a batch and the lower-right causal rule.

    kernel "grouped" computes softmax(q·kᵀ/√d)·v itself instead, the query
    heads of a KV head grouped by a reshape of the query: the cache is not
    repeated (nor copied, when it is FP32)."""

    def __init__(self, shape, kernel="sdpa"):
        if kernel not in ("sdpa", "grouped"):
            raise ValueError(f"kernel {kernel!r}: sdpa or grouped")
        self.shape = shape
        self.kernel = kernel
        self.attention_seconds = 0.0
        self.k = self.v = self.length = None

    def begin(self, n, capacity):
        s = self.shape
        dims = (n, s.kv_heads, capacity, s.head_dim)
        dtype = CACHE_DTYPES[s.cache_dtype]
        self.k = [torch.zeros(dims, dtype=dtype) for _ in range(s.layers)]
        self.v = [torch.zeros(dims, dtype=dtype) for _ in range(s.layers)]
        self.length = [[0] * n for _ in range(s.layers)]

    def attend(self, layer, q, k, v, seqs, start):
        t0 = time.perf_counter()
        s = self.shape
        B, L = q.shape[:2]
        K, V, length = self.k[layer], self.v[layer], self.length[layer]
        before = [length[b] for b in seqs]
        for i, b in enumerate(seqs):  # append, rounded to the cache dtype
            K[b, :, before[i]:before[i] + L] = k[i].transpose(0, 1)
            V[b, :, before[i]:before[i] + L] = v[i].transpose(0, 1)
            length[b] += L
        S = max(before) + L
        if seqs == list(range(K.shape[0])):
            Kc, Vc = K[:, :, :S], V[:, :, :S]
        else:
            idx = torch.tensor(seqs)
            Kc, Vc = K[idx, :, :S], V[idx, :, :S]
        group = s.heads // s.kv_heads
        mask = None
        if L > 1 or min(before) != max(before):
            # key j of item b: before it (< length) and not after the query
            # row i it answers (j <= before + i): lower-right, per item
            j = torch.arange(S)
            last = torch.tensor(before)[:, None] + torch.arange(L)[None, :]  # (B, L)
            mask = (j[None, None, :] <= last[:, :, None])[:, None]  # (B, 1, L, S)
        if self.kernel == "grouped":
            qg = q.view(B, L, s.kv_heads, group, s.head_dim).permute(0, 2, 3, 1, 4)
            qg = qg.reshape(B, s.kv_heads, group * L, s.head_dim)  # (B, Hkv, G·L, d)
            scores = qg @ Kc.float().transpose(-1, -2) / math.sqrt(s.head_dim)
            if mask is not None:  # (B, 1, L, S) repeated for the group's rows
                scores = scores.masked_fill(~mask.repeat(1, 1, group, 1), float("-inf"))
            out = (scores.softmax(-1) @ Vc.float()).view(B, s.kv_heads, group, L, s.head_dim)
            out = out.permute(0, 3, 1, 2, 4).reshape(B, L, s.heads * s.head_dim)
        else:
            Kc = Kc.float().repeat_interleave(group, dim=1)  # (B, H, S, d)
            Vc = Vc.float().repeat_interleave(group, dim=1)
            causal = B == 1 and before[0] == 0 and L > 1  # a prompt: the plain causal mask
            out, _ = F._scaled_dot_product_attention(q.transpose(1, 2), Kc, Vc,
                                                     None if causal else mask, 0.0, False, causal)
            out = out.transpose(1, 2).reshape(B, L, s.heads * s.head_dim)
        self.attention_seconds += time.perf_counter() - t0
        return out

    def end(self):
        self.k = self.v = self.length = None
