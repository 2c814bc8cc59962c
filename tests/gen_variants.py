#!/usr/bin/python3
"""Generate the golden cases of the attention variants into tests/golden_variants/.

Run with Debian's PyTorch 1.13:  /usr/bin/python3 tests/gen_variants.py

Same file format as tests/golden/ ({name, description, request, expected,
expected_float32}); the request is a POST /attention body with the variant
fields (num_kv_heads, head_dim, rope {style, theta, rotary_dim},
query_position_offset, alibi | alibi_slopes, window [left, right], softcap,
attn_mask "causal" | "causal_lower_right").

The expected values are computed in float64 from the definitions, with plain
tensor operations (PyTorch 1.13 has neither SDPA nor enable_gqa):
  * projections as PyTorch Linear: q (H·d, E), k and v (Hkv·d, kdim/vdim),
    packed in_proj_weight (H·d + 2·Hkv·d, E), out (E, H·d);
  * Hugging Face Llama eager attention: repeat_kv, rotate_half and
    apply_rotary_pos_emb (GPT-NeoX "half" style), inv_freq =
    1 / theta^(arange(0, rd, 2) / rd), partial rotary as GPT-NeoX (the first
    rd dims rotate); FlashAttention's apply_rotary_emb_torch for the
    interleaved (GPT-J) style. cos/sin are computed in float64 (Hugging Face
    computes the angles in float32, 0.01 rad off at position 10^5);
  * q·scale, then scores = q·kᵀ; Gemma 2's soft-cap c·tanh(s/c); ALiBi as
    FlashAttention's attention_ref, -slope·|q_pos − k_pos|; the float mask;
  * blocked keys: causal upper-left ones(L, S).tril(0) (SDPA's is_causal),
    lower-right ones(L, S).tril(S − L) (torch causal_lower_right), bool mask,
    key padding, window p − left <= j <= p + right (−1 unlimited) with
    p = query_position_offset + i; a row that sees no key is all zeros
    (FlashAttention: "the output will be zero").
`alibi: true` uses the paper's slopes rounded to float32 (the service's
slopes are float32).

Cross-checks (asserted on every run):
  * every case against an independent element-by-element float64 loop;
  * RoPE interleaved == RoPE half on q/k weights permuted as Hugging Face's
    convert_llama_weights_to_hf permute() does (full and partial rotary);
  * ALiBi slopes: the paper's get_slopes == BLOOM's build_alibi_tensor ==
    MPT's gen_slopes, for 1..64 heads;
  * window [W − 1, 0] == Hugging Face's sliding-window causal mask for W;
    with the offset S − L our window and ALiBi == FlashAttention's
    construct_local_mask and attn_bias_from_alibi_slopes;
  * causal lower-right == FlashAttention's (col > row + S − L) mask;
  * repeat_kv == repeat_interleave.
Floats are written in float32's shortest form (they parse back exactly).
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_golden import Gen, dump, sinusoidal_pe  # noqa: E402

torch.set_num_threads(1)
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden_variants")
F64 = torch.float64


def short(x):
    """A float32 as the double whose repr is float32's shortest decimal."""
    s = str(np.float32(x))
    v = float(s)
    assert np.float32(v) == np.float32(x) and np.float32(s) == np.float32(x), s
    return v


def tj(a):
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return {"shape": list(a.shape), "data": [bool(x) for x in a.ravel()]}
    a = a.astype(np.float32)
    assert np.isfinite(a).all()
    return {"shape": list(a.shape), "data": [short(x) for x in a.ravel()]}


def arr(t):
    return np.asarray(t["data"], dtype=np.float32 if not isinstance(t["data"][0], bool)
                      else np.bool_).reshape(t["shape"])


# ------------------------------------------------------------ definitions

def alibi_paper(n):
    """ofirpress/attention_with_linear_biases, fairseq transformer.py."""
    def pow2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return pow2(n)
    c = 2 ** math.floor(math.log2(n))
    return pow2(c) + alibi_paper(2 * c)[0::2][:n - c]


def alibi_bloom(n):
    """transformers modeling_bloom.build_alibi_tensor's slopes."""
    c = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(c) - 3))), dtype=F64)
    slopes = torch.pow(base, torch.arange(1, 1 + c, dtype=F64))
    if c != n:
        extra = torch.tensor(2 ** (-(2 ** -(math.log2(2 * c) - 3))), dtype=F64)
        rem = min(c, n - c)
        slopes = torch.cat([slopes, torch.pow(extra, torch.arange(1, 1 + 2 * rem, 2, dtype=F64))])
    return slopes.tolist()


def alibi_mpt(n, alibi_bias_max=8):
    """MPT's gen_slopes."""
    n2 = 2 ** math.ceil(math.log2(n))
    m = torch.arange(1, n2 + 1, dtype=F64) * alibi_bias_max / n2
    slopes = 1.0 / torch.pow(2, m)
    if n2 != n:
        slopes = torch.cat([slopes[1::2], slopes[::2]])[:n]
    return slopes.tolist()


def rotate_half(x):
    """Hugging Face Llama."""
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotate_interleaved(x):
    """FlashAttention rotary.py rotate_half(x, interleaved=True)."""
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def rope_cos_sin(pos, rd, theta):
    """(T, rd/2) cos and sin, float64: angle = pos · theta^(-2i/rd)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=F64) / rd))
    freqs = torch.outer(torch.as_tensor(pos, dtype=F64), inv_freq)
    return freqs.cos(), freqs.sin()


def apply_rope(x, pos, rope, dtype):
    """x: (N, heads, T, d); rotate the first rotary_dim dims at pos (T)."""
    d = x.shape[-1]
    rd = rope.get("rotary_dim", d)
    cos, sin = rope_cos_sin(pos, rd, rope.get("theta", 10000.0))
    if rope["style"] == "half":
        cos, sin, rot = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1), rotate_half
    else:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rot = rotate_interleaved
    cos, sin = cos.to(dtype), sin.to(dtype)
    xr, xp = x[..., :rd], x[..., rd:]
    return torch.cat((xr * cos + rot(xr) * sin, xp), dim=-1)


def repeat_kv(x, n_rep):
    """Hugging Face Llama: (N, Hkv, S, d) -> (N, Hkv·n_rep, S, d)."""
    b, hkv, s, d = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, hkv, n_rep, s, d).reshape(b, hkv * n_rep, s, d)


def visible(L, S, offset, attn_mask, window):
    """(L, S) bool: the keys the causal masks (by index) and the window (by
    position) leave visible."""
    vis = torch.ones(L, S, dtype=torch.bool)
    if attn_mask == "causal":
        vis &= torch.ones(L, S, dtype=torch.bool).tril(0)
    elif attn_mask == "causal_lower_right":
        vis &= torch.ones(L, S, dtype=torch.bool).tril(S - L)
    if window is not None:
        p = offset + torch.arange(L)[:, None]
        j = torch.arange(S)[None, :]
        left, right = window
        if left >= 0:
            vis &= j >= p - left
        if right >= 0:
            vis &= j <= p + right
    return vis


# ---------------------------------------------------------------- resolve

def resolve(req):
    """The request as batched float32 arrays and resolved parameters."""
    q = arr(req["query"])
    batched = q.ndim == 3
    k = arr(req["key"]) if "key" in req else q.copy()
    v = arr(req["value"]) if "value" in req else k.copy()
    if not batched:
        q, k, v = q[None], k[None], v[None]
    N, L, E = q.shape
    S, kdim, vdim = k.shape[1], k.shape[2], v.shape[2]
    H = req["num_heads"]
    Hkv = req.get("num_kv_heads", H)
    d = req.get("head_dim", E // H if E % H == 0 else None)
    Dq, Dkv = H * d, Hkv * d
    if req.get("positional_encoding") == "sinusoidal":
        q = (q + sinusoidal_pe(L, E)[None]).astype(np.float32)
        k = (k + sinusoidal_pe(S, kdim)[None]).astype(np.float32)
        v = (v + sinusoidal_pe(S, vdim)[None]).astype(np.float32)
    w = {name: arr(t) for name, t in req.get("weights", {}).items()}
    if "in_proj_weight" in w:
        P = w["in_proj_weight"]
        assert P.shape == (Dq + 2 * Dkv, E)
        Wq, Wk, Wv = P[:Dq], P[Dq:Dq + Dkv], P[Dq + Dkv:]
    else:
        def eye(name, rows, cols):
            if name in w:
                assert w[name].shape == (rows, cols), name
                return w[name]
            assert rows == cols, name + " absent needs a square identity"
            return np.eye(rows, dtype=np.float32)
        Wq, Wk, Wv = eye("q_proj_weight", Dq, E), eye("k_proj_weight", Dkv, kdim), \
            eye("v_proj_weight", Dkv, vdim)
    b_in = w.get("in_proj_bias", np.zeros(Dq + 2 * Dkv, np.float32))
    Wo = w.get("out_proj_weight")
    Wo = np.eye(E, dtype=np.float32) if Wo is None else Wo
    assert Wo.shape == (E, Dq)
    bo = w.get("out_proj_bias", np.zeros(E, np.float32))

    block = np.zeros((1, L, S), bool)
    add = np.zeros((1, L, S), np.float32)
    am = req.get("attn_mask")
    causal = am if isinstance(am, str) else None
    if am is not None and causal is None:
        a = arr(am)
        a = a[None] if a.ndim == 2 else a
        if a.dtype == np.bool_:
            block = a
        else:
            add = a
    kpm = arr(req["key_padding_mask"]).reshape(N, S) if "key_padding_mask" in req else None
    if req.get("alibi") is True:
        slopes = np.float32(alibi_paper(H))
    elif "alibi_slopes" in req:
        slopes = np.float32(req["alibi_slopes"])
    else:
        slopes = None
    return dict(q=q, k=k, v=v, batched=batched, N=N, L=L, S=S, E=E, H=H, Hkv=Hkv, d=d,
                Wq=Wq, Wk=Wk, Wv=Wv, bq=b_in[:Dq], bk=b_in[Dq:Dq + Dkv], bv=b_in[Dq + Dkv:],
                Wo=Wo, bo=bo, block=block, add=add, kpm=kpm, causal=causal,
                window=req.get("window"), offset=req.get("query_position_offset", 0),
                rope=req.get("rope"), slopes=slopes, softcap=req.get("softcap"),
                scale=req.get("scale"), need_weights=req.get("need_weights", True),
                average=req.get("average_attn_weights", False))


# ------------------------------------------------------ expected, in torch

def expected_torch(r, dtype=F64):
    """(out (N, L, E), weights (N, H, L, S)) in dtype, from the definitions."""
    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a)).to(dtype)
    N, L, S, E, H, Hkv, d = (r[x] for x in ("N", "L", "S", "E", "H", "Hkv", "d"))
    q = (t(r["q"]) @ t(r["Wq"]).T + t(r["bq"])).view(N, L, H, d).transpose(1, 2)
    k = (t(r["k"]) @ t(r["Wk"]).T + t(r["bk"])).view(N, S, Hkv, d).transpose(1, 2)
    v = (t(r["v"]) @ t(r["Wv"]).T + t(r["bv"])).view(N, S, Hkv, d).transpose(1, 2)
    if r["rope"]:
        q = apply_rope(q, r["offset"] + np.arange(L), r["rope"], dtype)
        k = apply_rope(k, np.arange(S), r["rope"], dtype)
    k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
    if r["scale"] is None:   # PyTorch's q / sqrt(d), in dtype
        q = q / math.sqrt(d)
    else:
        q = q * torch.tensor(r["scale"], dtype=torch.float32).to(dtype)
    s = q @ k.transpose(-1, -2)                                     # (N, H, L, S)
    if r["softcap"]:
        c = float(np.float32(r["softcap"]))
        s = torch.tanh(s / c) * c
    if r["slopes"] is not None:
        pos = r["offset"] + torch.arange(L, dtype=F64)[:, None]
        dist = (pos - torch.arange(S, dtype=F64)[None, :]).abs()
        s = s + (-t(r["slopes"]).to(F64)[:, None, None] * dist).to(dtype)
    add = t(r["add"])
    s = s + (add.view(N, H, L, S) if add.shape[0] > 1 else add)
    blocked = torch.from_numpy(r["block"].copy())
    blocked = blocked.view(N, H, L, S) if blocked.shape[0] > 1 else blocked.expand(N, H, L, S)
    blocked = blocked | ~visible(L, S, r["offset"], r["causal"], r["window"])
    if r["kpm"] is not None:
        blocked = blocked | torch.from_numpy(r["kpm"])[:, None, None, :]
    s = s.masked_fill(blocked, -math.inf)
    p = torch.softmax(s, dim=-1)
    p = p.masked_fill(blocked.all(dim=-1, keepdim=True), 0.0)       # rows that see nothing
    ctx = (p @ v).transpose(1, 2).reshape(N, L, H * d)
    out = ctx @ t(r["Wo"]).T + t(r["bo"])
    return out.numpy().astype(np.float64), p.numpy().astype(np.float64)


def expected_loops(r):
    """The same, element by element in float64 with math, written from
    variants.h's formulas rather than from tensor operations."""
    N, L, S, E, H, Hkv, d = (r[x] for x in ("N", "L", "S", "E", "H", "Hkv", "d"))
    f = lambda a: np.asarray(a, np.float64)
    Q = f(r["q"]) @ f(r["Wq"]).T + f(r["bq"])
    K = f(r["k"]) @ f(r["Wk"]).T + f(r["bk"])
    V = f(r["v"]) @ f(r["Wv"]).T + f(r["bv"])

    def rotate(x, pos):
        rope = r["rope"]
        rd, theta = rope.get("rotary_dim", d), rope.get("theta", 10000.0)
        x = x.copy()
        for i in range(rd // 2):
            a, b = (2 * i, 2 * i + 1) if rope["style"] == "interleaved" else (i, i + rd // 2)
            ang = pos * theta ** (-2.0 * i / rd)
            xa, xb = x[a], x[b]
            x[a], x[b] = xa * math.cos(ang) - xb * math.sin(ang), xb * math.cos(ang) + xa * math.sin(ang)
        return x

    out = np.zeros((N, L, E))
    wts = np.zeros((N, H, L, S))
    for n in range(N):
        ctx = np.zeros((L, H * d))
        for h in range(H):
            g = h // (H // Hkv)
            for i in range(L):
                qpos = r["offset"] + i
                qv = Q[n, i, h * d:(h + 1) * d]
                if r["rope"]:
                    qv = rotate(qv, qpos)
                qv = qv / math.sqrt(d) if r["scale"] is None else qv * float(np.float32(r["scale"]))
                row = np.full(S, -math.inf)
                for j in range(S):
                    if r["causal"] == "causal" and j > i:
                        continue
                    if r["causal"] == "causal_lower_right" and j > i + S - L:
                        continue
                    if r["window"] is not None:
                        lo, hi = r["window"]
                        if (lo >= 0 and j < qpos - lo) or (hi >= 0 and j > qpos + hi):
                            continue
                    if r["block"][(n * H + h) if r["block"].shape[0] > 1 else 0, i, j]:
                        continue
                    if r["kpm"] is not None and r["kpm"][n, j]:
                        continue
                    kv = K[n, j, g * d:(g + 1) * d]
                    if r["rope"]:
                        kv = rotate(kv, j)
                    s = float(qv @ kv)
                    if r["softcap"]:
                        c = float(np.float32(r["softcap"]))
                        s = c * math.tanh(s / c)
                    if r["slopes"] is not None:
                        s -= float(r["slopes"][h]) * abs(qpos - j)
                    s += float(r["add"][(n * H + h) if r["add"].shape[0] > 1 else 0, i, j])
                    row[j] = s
                if np.isneginf(row).all():
                    continue
                e = np.exp(row - row.max())
                wts[n, h, i] = e / e.sum()
                ctx[i, h * d:(h + 1) * d] = wts[n, h, i] @ V[n, :, g * d:(g + 1) * d]
        out[n] = ctx @ f(r["Wo"]).T + f(r["bo"])
    return out, wts


# ------------------------------------------------------------ cross-checks

def llama_permute(w, n_heads, rd):
    """convert_llama_weights_to_hf permute(), on the first rd rows of each
    head: interleaved (Meta) order -> half (HF) order."""
    d = w.shape[0] // n_heads
    w = w.reshape(n_heads, d, -1).copy()
    rot = w[:, :rd].reshape(n_heads, rd // 2, 2, -1).transpose(0, 2, 1, 3)
    w[:, :rd] = rot.reshape(n_heads, rd, -1)
    return w.reshape(n_heads * d, -1)


def cross_checks():
    for n in range(1, 65):
        a, b, c = alibi_paper(n), alibi_bloom(n), alibi_mpt(n)
        assert np.allclose(a, b, rtol=1e-14, atol=0) and np.allclose(a, c, rtol=1e-14, atol=0), n
    x = torch.randn(2, 3, 5, 4, dtype=F64)
    assert torch.equal(repeat_kv(x, 3), x.repeat_interleave(3, dim=1))
    for L, S in ((3, 7), (7, 3), (5, 5)):
        row, col = torch.arange(L)[:, None], torch.arange(S)[None, :]
        assert torch.equal(visible(L, S, 0, "causal_lower_right", None), ~(col > row + S - L))
        for W in (1, 2, 4, 9):   # Hugging Face: blocked when j > q_pos or j <= q_pos - W
            for off in (0, S - L, 11):
                q_pos = off + row
                hf = ~((col > q_pos) | (col <= q_pos - W))
                assert torch.equal(visible(L, S, off, None, [W - 1, 0]), hf), (L, S, W, off)
        for left, right in ((0, 0), (2, 1), (1, 3)):   # FlashAttention's construct_local_mask
            fa = (col > torch.minimum(row + S - L + right, torch.tensor(S))) | \
                 (col < row + S - L - left)
            assert torch.equal(visible(L, S, S - L, None, [left, right]), ~fa)
        slopes = torch.tensor(alibi_paper(4), dtype=F64)   # FA attn_bias_from_alibi_slopes
        fa_bias = -slopes[:, None, None] * (row + S - L - col).abs()
        ours = -slopes[:, None, None] * ((S - L) + torch.arange(L)[:, None] - col).abs()
        assert torch.equal(fa_bias, ours.to(F64))
    # RoPE interleaved on (Wq, Wk) == RoPE half on the permuted weights
    g = Gen(7)
    E, H, Hkv, d = 16, 4, 2, 4
    for rd in (4, 2):
        x = g.normal(1, 6, E)
        Wq, Wk = g.weight(H * d, E), g.weight(Hkv * d, E)
        scores = []
        for style, wq, wk in (("interleaved", Wq, Wk),
                              ("half", llama_permute(Wq, H, rd), llama_permute(Wk, Hkv, rd))):
            q = torch.from_numpy(x @ wq.T.astype(np.float64)).view(1, 6, H, d).transpose(1, 2)
            k = torch.from_numpy(x @ wk.T.astype(np.float64)).view(1, 6, Hkv, d).transpose(1, 2)
            rope = {"style": style, "rotary_dim": rd, "theta": 100.0}
            q = apply_rope(q, 100000 + np.arange(6), rope, F64)
            k = repeat_kv(apply_rope(k, np.arange(6), rope, F64), H // Hkv)
            scores.append(q @ k.transpose(-1, -2))
        assert torch.allclose(scores[0], scores[1], rtol=0, atol=1e-12), \
            (scores[0] - scores[1]).abs().max()
    print("cross-checks: ALiBi slopes (paper, BLOOM, MPT; 1..64 heads), repeat_kv, "
          "causal lower-right, window vs HF sliding and FA local masks, ALiBi vs FA, "
          "RoPE interleaved vs half with the Llama permutation: all agree")


# ------------------------------------------------------------------ cases

def build(g, L, E, H, N=None, S=None, Hkv=None, head_dim=None, kdim=None, vdim=None,
          proj="sep", bias=True, out=True, qstd=1.0, mask=None, padding=False, **extra):
    """A request: query (N, L, E) (unbatched when N is None), key (S, kdim)
    and value (S, vdim) when they differ from the query, projections per
    proj ("sep", "packed", "none"), masks, and the variant fields in extra."""
    S = L if S is None else S
    Hk = H if Hkv is None else Hkv
    d = head_dim or E // H
    Dq, Dkv = H * d, Hk * d
    lead = () if N is None else (N,)
    req = {"query": tj(g.normal(*lead, L, E)), "num_heads": H}
    if Hkv is not None:
        req["num_kv_heads"] = Hkv
    if head_dim is not None:
        req["head_dim"] = head_dim
    kdim, vdim = kdim or E, vdim or kdim or E
    if S != L or kdim != E or vdim != kdim:
        req["key"] = tj(g.normal(*lead, S, kdim))
    if vdim != kdim or "key" in req:
        req["value"] = tj(g.normal(*lead, S, vdim))
    w = {}
    if proj == "packed":
        P = g.weight(Dq + 2 * Dkv, E)
        P[:Dq] *= np.float32(qstd)
        w["in_proj_weight"] = tj(P)
    elif proj == "sep":
        w["q_proj_weight"] = tj(g.weight(Dq, E) * np.float32(qstd))
        w["k_proj_weight"] = tj(g.weight(Dkv, kdim))
        w["v_proj_weight"] = tj(g.weight(Dkv, vdim))
    if bias and proj != "none":
        w["in_proj_bias"] = tj(g.bias(Dq + 2 * Dkv))
    if out:
        w["out_proj_weight"] = tj(g.weight(E, Dq))
        w["out_proj_bias"] = tj(g.bias(E))
    if w:
        req["weights"] = w
    n = 1 if N is None else N
    if mask == "bool2":
        req["attn_mask"] = tj(g.bools(L, S))
    elif mask == "bool3":
        req["attn_mask"] = tj(g.bools(n * H, L, S))
    elif mask == "float2":
        req["attn_mask"] = tj(g.float_mask(L, S))
    elif mask == "float3":
        req["attn_mask"] = tj(g.float_mask(n * H, L, S))
    elif mask is not None:
        req["attn_mask"] = mask
    if padding:
        kpm = g.bools(*lead, S, p=0.25)
        kpm[..., 0] = False
        req["key_padding_mask"] = tj(kpm)
    req.update(extra)
    return req


HALF, INTER = {"style": "half"}, {"style": "interleaved"}
LR = "causal_lower_right"

CASES = [
    # GQA, MQA, head_dim
    ("gqa_groups_of_two", "GQA H=4, Hkv=2 (query heads 0,1 -> KV 0; 2,3 -> KV 1), batched, separate projections.",
     dict(N=2, L=5, E=16, H=4, Hkv=2)),
    ("mqa_packed_averaged", "MQA H=4, Hkv=1, packed in_proj_weight (H*d + 2*Hkv*d, E) = (24, 16), averaged weights.",
     dict(L=6, E=16, H=4, Hkv=1, proj="packed", average_attn_weights=True)),
    ("gqa_hkv_equals_h", "num_kv_heads = num_heads given explicitly, cross-attention L=4, S=6, no weights.",
     dict(N=1, L=4, S=6, E=8, H=2, Hkv=2, need_weights=False)),
    ("gqa_identity_kv", "GQA with absent matrices: key and value have Hkv*d = 8 features (identity), query and out E = H*d = 16.",
     dict(L=3, S=5, E=16, H=4, Hkv=2, kdim=8, vdim=8, proj="none", out=False)),
    ("head_dim_gemma", "head_dim 8 independent of E/H (E=12, H=3), MQA, key kdim 6, value vdim 5, out (12, 24).",
     dict(N=1, L=4, S=6, E=12, H=3, Hkv=1, head_dim=8, kdim=6, vdim=5)),
    ("head_dim_small_packed", "head_dim 3 < E/H (E=16, H=2), packed (18, 16), unbatched.",
     dict(L=5, E=16, H=2, head_dim=3, proj="packed")),
    # RoPE
    ("rope_half", "RoPE half (GPT-NeoX / HF Llama), theta 10000 by default, rotary_dim d = 8.",
     dict(N=1, L=6, E=16, H=2, rope=HALF)),
    ("rope_interleaved", "RoPE interleaved (GPT-J / Meta), same shapes as rope_half.",
     dict(N=1, L=6, E=16, H=2, rope=INTER)),
    ("rope_partial_half", "RoPE half on rotary_dim 4 of d = 8 (the rest passes through), theta 500.",
     dict(N=1, L=6, E=16, H=2, rope={"style": "half", "theta": 500.0, "rotary_dim": 4})),
    ("rope_partial_interleaved_gqa", "RoPE interleaved on rotary_dim 6 of d = 8 (3 pairs), GQA H=4, Hkv=2, head_dim 8 (E=16).",
     dict(N=1, L=5, E=16, H=4, Hkv=2, head_dim=8, rope={"style": "interleaved", "theta": 10000.0, "rotary_dim": 6})),
    ("rope_offset_1e5", "RoPE half at query positions 100000.. (keys at 0..6), one head of d = 16: angles up to 1e5 rad.",
     dict(N=1, L=3, S=7, E=16, H=1, rope=HALF, query_position_offset=100000)),
    ("rope_offset_123456_mqa", "RoPE interleaved at query positions 123456.., MQA H=4, Hkv=1, averaged weights.",
     dict(L=2, S=5, E=16, H=4, Hkv=1, head_dim=8, rope=INTER, query_position_offset=123456,
          average_attn_weights=True)),
    # ALiBi
    ("alibi_4_heads", "ALiBi (paper slopes 2^-2, 2^-4, 2^-6, 2^-8), bidirectional, cross L=5, S=7.",
     dict(N=1, L=5, S=7, E=16, H=4, alibi=True)),
    ("alibi_6_heads_causal", "ALiBi with 6 heads (not a power of two: 4 slopes, then 2 of 8), causal.",
     dict(N=1, L=6, E=12, H=6, alibi=True, mask="causal")),
    ("alibi_12_heads_decode", "ALiBi 12 heads (head_dim 2), causal_lower_right with query_position_offset S - L = 5 (L=3, S=8), averaged.",
     dict(N=1, L=3, S=8, E=12, H=12, head_dim=2, alibi=True, mask=LR, query_position_offset=5,
          average_attn_weights=True)),
    ("alibi_slopes_custom", "alibi_slopes [0.3, 1.5, 0.0] given, query_position_offset 2, bidirectional.",
     dict(N=1, L=4, S=6, E=12, H=3, alibi_slopes=[0.3, 1.5, 0.0], query_position_offset=2)),
    # windows
    ("window_odd", "window [2, 1]: query i sees keys i-2 .. i+1, L=S=9.",
     dict(N=1, L=9, E=8, H=2, window=[2, 1])),
    ("window_sliding_w4", "window [3, 0] = Hugging Face sliding_window 4 (4 keys including itself).",
     dict(N=1, L=8, E=8, H=2, window=[3, 0])),
    ("window_left_unlimited", "window [-1, 2]: every key before, 2 after.",
     dict(N=1, L=6, E=8, H=2, window=[-1, 2])),
    ("window_right_unlimited", "window [1, -1], cross L=5, S=7.",
     dict(N=1, L=5, S=7, E=8, H=2, window=[1, -1])),
    ("window_rows_see_nothing", "window [1, 0] at query_position_offset 6, L=4, S=8: the last row sees no key (zeros).",
     dict(N=1, L=4, S=8, E=8, H=2, window=[1, 0], query_position_offset=6)),
    ("window_and_causal", "window [2, 2] with causal (upper-left): keys i-2 .. i.",
     dict(N=1, L=6, E=8, H=2, window=[2, 2], mask="causal")),
    # soft-cap
    ("softcap_large_scores", "softcap 3 on scores up to ~30 (query projection scaled by 4).",
     dict(N=1, L=6, E=16, H=2, softcap=3.0, qstd=4.0)),
    ("softcap_bool_mask_padding", "softcap 1.5 with a 3-D bool mask and key padding, batched.",
     dict(N=2, L=4, S=5, E=8, H=2, softcap=1.5, qstd=3.0, mask="bool3", padding=True)),
    ("softcap_float_mask_window", "softcap 5 before a 2-D float mask, window [1, 1].",
     dict(N=1, L=6, E=8, H=2, softcap=5.0, qstd=4.0, mask="float2", window=[1, 1])),
    # causal alignment
    ("causal_upper_left_l_lt_s", "causal upper-left with L=3 < S=6: query i sees keys 0..i.",
     dict(N=1, L=3, S=6, E=8, H=2, mask="causal")),
    ("causal_upper_left_l_gt_s", "causal upper-left with L=6 > S=3.",
     dict(N=1, L=6, S=3, E=8, H=2, mask="causal")),
    ("causal_lower_right_l_lt_s", "causal_lower_right with L=3 < S=6: query i sees keys 0..i+3.",
     dict(N=1, L=3, S=6, E=8, H=2, mask=LR)),
    ("causal_lower_right_l_gt_s", "causal_lower_right with L=6 > S=3: rows 0-2 see no key (zeros).",
     dict(N=1, L=6, S=3, E=8, H=2, mask=LR, average_attn_weights=True)),
    # combinations
    ("llama_layer", "Llama-style: MQA H=2, Hkv=1, RoPE half theta 500000, causal, key padding, batched.",
     dict(N=2, L=5, E=16, H=2, Hkv=1, rope={"style": "half", "theta": 500000.0}, mask="causal",
          padding=True)),
    ("mistral_decode", "Mistral-style decode: GQA, RoPE half, window [3, 0], causal_lower_right, offset S - L = 5.",
     dict(N=1, L=3, S=8, E=16, H=4, Hkv=2, rope=HALF, window=[3, 0], mask=LR,
          query_position_offset=5)),
    ("gemma2_layer", "Gemma 2-style: head_dim 8 (E=24, H=4), GQA Hkv=2, scale 0.25, softcap 2, window [3, 0], RoPE half, averaged.",
     dict(N=1, L=6, E=24, H=4, Hkv=2, head_dim=8, scale=0.25, softcap=2.0, window=[3, 0],
          rope=HALF, qstd=3.0, average_attn_weights=True)),
    ("alibi_window_softcap_batched", "FlashAttention attention_ref's options together: ALiBi, window [2, 1], softcap 2, lower-right, batched, no weights.",
     dict(N=2, L=4, S=6, E=16, H=4, alibi=True, window=[2, 1], softcap=2.0, mask=LR,
          need_weights=False)),
    ("everything_mixed", "RoPE interleaved, sinusoidal PE, 3-D float mask, alibi_slopes, head_dim 6, GQA H=4 Hkv=2, offset 9.",
     dict(N=2, L=3, S=5, E=8, H=4, Hkv=2, head_dim=6, rope=INTER, positional_encoding="sinusoidal",
          mask="float3", alibi_slopes=[0.5, 0.25, 0.125, 1.0], query_position_offset=9)),
    ("unbatched_gqa_rope_window", "Unbatched GQA (H=6, Hkv=3), RoPE half rotary_dim 2, window [2, 0] at offset 3.",
     dict(L=5, E=24, H=6, Hkv=3, rope={"style": "half", "rotary_dim": 2}, window=[2, 0],
          query_position_offset=3)),
]


def main():
    cross_checks()
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for idx, (name, desc, spec) in enumerate(CASES):
        g = Gen(31000 + idx)
        req = build(g, **spec)
        r = resolve(req)
        out, wts = expected_torch(r)
        lout, lwts = expected_loops(r)
        assert np.allclose(out, lout, rtol=1e-10, atol=1e-10), (name, np.abs(out - lout).max())
        assert np.allclose(wts, lwts, rtol=1e-10, atol=1e-10), (name, np.abs(wts - lwts).max())
        out32, wts32 = expected_torch(r, torch.float32)
        assert np.isfinite(out32).all() and np.abs(wts32 - wts).max() < 1e-3, name
        if r["average"]:
            wts, wts32 = wts.mean(axis=1), wts32.mean(axis=1)
        if not r["batched"]:
            out, wts, out32, wts32 = out[0], wts[0], out32[0], wts32[0]
        expected = {"output": tj(out)}
        expected32 = {"output": tj(out32)}
        if r["need_weights"]:
            expected["attention_weights"] = tj(wts)
            expected32["attention_weights"] = tj(wts32)
        doc = {"name": name, "description": desc, "request": req, "expected": expected,
               "expected_float32": expected32}
        text = dump(doc) + "\n"
        json.loads(text)
        with open(os.path.join(OUT_DIR, name + ".json"), "w") as fh:
            fh.write(text)
        total += len(text)
        blocked_rows = int((np.abs(wts).sum(axis=-1) == 0).sum()) if r["need_weights"] else 0
        print(f"{name}: output {list(out.shape)}, {len(text)} bytes, rows seeing no key "
              f"{blocked_rows}, float32 vs float64 {np.abs(out32 - out).max():.2g}")
    print(f"{len(CASES)} cases, {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
