"""The golden machinery of tests/gen_golden.py: inputs drawn per case, the
request resolved to the service's semantics, the expected answer computed
by PyTorch (float64 on the float32 inputs) and by an independent numpy
reference. gen_golden.py, gen_variants.py, gen_models.py and gen_hf.py use
it through gen_golden (see its docstring for how the semantics map onto
PyTorch 1.13)."""
import math

import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------- helpers

class Gen:
    """Per-case deterministic float32 generator."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def normal(self, *shape, std=1.0):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def weight(self, out_dim, in_dim):
        return self.normal(out_dim, in_dim, std=1.0 / math.sqrt(in_dim))

    def bias(self, n):
        return self.normal(n, std=0.1)

    def bools(self, *shape, p=0.3):
        return self.rng.random(shape) < p

    def float_mask(self, *shape, p_block=0.15):
        m = self.normal(*shape, std=2.0)
        m[self.rng.random(shape) < p_block] = np.float32(-1e4)
        return m.astype(np.float32)


def tensor_json(a):
    a = np.asarray(a)
    if a.dtype == np.bool_:
        data = [bool(x) for x in a.ravel()]
    else:
        a32 = a.astype(np.float32)
        data = [float(x) for x in a32.ravel()]
        for x in data:
            if not math.isfinite(x):
                raise ValueError("non-finite value in tensor")
    return {"shape": list(a.shape), "data": data}


def sinusoidal_pe(T, D):
    """(T, D) float32; computed in float64 then cast."""
    pe = np.zeros((T, D), dtype=np.float64)
    pos = np.arange(T, dtype=np.float64)[:, None]
    for c in range(D):
        i = c // 2
        ang = pos[:, 0] / np.power(10000.0, (2.0 * i) / D)
        pe[:, c] = np.sin(ang) if c % 2 == 0 else np.cos(ang)
    return pe.astype(np.float32)


def t64(a):
    return torch.from_numpy(np.ascontiguousarray(np.asarray(a, dtype=np.float64)))


# ------------------------------------------------------- expected via torch

def resolve(req):
    """Turn a request into batched float32 arrays plus resolved parameters."""
    q = np.asarray(req["query"]["data"], dtype=np.float32).reshape(req["query"]["shape"])
    batched = q.ndim == 3
    k = (np.asarray(req["key"]["data"], dtype=np.float32).reshape(req["key"]["shape"])
         if "key" in req else q.copy())
    v = (np.asarray(req["value"]["data"], dtype=np.float32).reshape(req["value"]["shape"])
         if "value" in req else k.copy())
    if not batched:
        q, k, v = q[None], k[None], v[None]
    N, L, E = q.shape
    S, kdim, vdim = k.shape[1], k.shape[2], v.shape[2]
    H = req["num_heads"]
    if req.get("positional_encoding") == "sinusoidal":
        q = (q + sinusoidal_pe(L, E)[None]).astype(np.float32)
        k = (k + sinusoidal_pe(S, kdim)[None]).astype(np.float32)
        v = (v + sinusoidal_pe(S, vdim)[None]).astype(np.float32)

    w = req.get("weights", {})

    def get(name):
        if name not in w:
            return None
        return np.asarray(w[name]["data"], dtype=np.float32).reshape(w[name]["shape"])

    packed = get("in_proj_weight")
    if packed is not None:
        Wq, Wk, Wv = packed[:E], packed[E:2 * E], packed[2 * E:]
    else:
        Wq, Wk, Wv = get("q_proj_weight"), get("k_proj_weight"), get("v_proj_weight")
        if Wq is None:
            Wq = np.eye(E, dtype=np.float32)
        if Wk is None:
            assert kdim == E
            Wk = np.eye(E, dtype=np.float32)
        if Wv is None:
            assert vdim == E
            Wv = np.eye(E, dtype=np.float32)
    b_in = get("in_proj_bias")
    if b_in is None:
        b_in = np.zeros(3 * E, dtype=np.float32)
    Wo = get("out_proj_weight")
    if Wo is None:
        Wo = np.eye(E, dtype=np.float32)
    bo = get("out_proj_bias")
    if bo is None:
        bo = np.zeros(E, dtype=np.float32)

    # masks -> bool block mask (N*H or 1, L, S) and float add mask
    block = np.zeros((1, L, S), dtype=bool)
    add = np.zeros((1, L, S), dtype=np.float32)
    am = req.get("attn_mask")
    mask_kind = None
    if am == "causal":
        mask_kind = "bool"
        assert L == S
        block = np.triu(np.ones((L, S), dtype=bool), k=1)[None]
    elif am is not None:
        arr = np.asarray(am["data"]).reshape(am["shape"])
        if arr.ndim == 2:
            arr = arr[None]
        assert arr.shape[1:] == (L, S) and arr.shape[0] in (1, N * H)
        if all(isinstance(x, bool) for x in am["data"]):
            mask_kind = "bool"
            block = arr.astype(bool)
        else:
            mask_kind = "float"
            add = arr.astype(np.float32)
    kpm = None
    if "key_padding_mask" in req:
        kpm = np.asarray(req["key_padding_mask"]["data"], dtype=bool)
        kpm = kpm.reshape(N, S)

    return dict(q=q, k=k, v=v, batched=batched, N=N, L=L, S=S, E=E, kdim=kdim,
                vdim=vdim, H=H, packed=packed, Wq=Wq, Wk=Wk, Wv=Wv, b_in=b_in,
                Wo=Wo, bo=bo, mask_kind=mask_kind, block=block, add=add, kpm=kpm,
                scale=req.get("scale"),
                need_weights=req.get("need_weights", True),
                average=req.get("average_attn_weights", False))


def _call_without_out_proj(E, common, proj, dtype=torch.float64):
    """Run F.multi_head_attention_forward with its final out-projection
    replaced by the identity function: F.linear (looked up as a module
    global by multi_head_attention_forward) is wrapped for the duration of
    the call so that a call with the sentinel weight returns its input."""
    sentinel = torch.eye(E, dtype=dtype)
    orig_linear = F.linear
    seen = []

    def linear(x, w, b=None):
        if w is sentinel:
            seen.append(True)
            return x
        return orig_linear(x, w, b)

    F.linear = linear
    try:
        res = F.multi_head_attention_forward(out_proj_weight=sentinel,
                                             out_proj_bias=None, **common, **proj)
    finally:
        F.linear = orig_linear
    assert seen == [True], "out-projection pass-through not applied"
    return res


def expected_torch(r, dtype=torch.float64):
    """PyTorch's answer in dtype: float64 is the expected value, float32
    PyTorch's own float32 answer (its error against float64 widens the
    tolerance, see docs/numerics.md, "Accuracy")."""
    def tt(a):
        return t64(a).to(dtype)

    N, L, S, E, H = r["N"], r["L"], r["S"], r["E"], r["H"]
    d = E // H
    c = 1.0 if r["scale"] is None else r["scale"] * math.sqrt(d)
    Wq = tt(r["Wq"]) * c
    b_in = tt(r["b_in"]).clone()
    b_in[:E] *= c

    query = tt(r["q"]).transpose(0, 1)
    key = tt(r["k"]).transpose(0, 1)
    value = tt(r["v"]).transpose(0, 1)

    if r["mask_kind"] is None:
        attn_mask = None
    elif r["mask_kind"] == "bool":
        attn_mask = torch.from_numpy(r["block"].copy())
    else:
        attn_mask = tt(r["add"])
    if attn_mask is not None and attn_mask.shape[0] == 1:
        attn_mask = attn_mask[0]
    kpm = None if r["kpm"] is None else torch.from_numpy(r["kpm"].copy())

    common = dict(query=query, key=key, value=value, embed_dim_to_check=E,
                  num_heads=H, in_proj_bias=b_in, bias_k=None, bias_v=None,
                  add_zero_attn=False, dropout_p=0.0, training=False,
                  key_padding_mask=kpm, need_weights=True, attn_mask=attn_mask,
                  average_attn_weights=False)
    if r["packed"] is not None:
        w_packed = torch.cat([Wq, tt(r["Wk"]), tt(r["Wv"])], dim=0)
        proj = dict(in_proj_weight=w_packed, use_separate_proj_weight=False)
    else:
        proj = dict(in_proj_weight=None, use_separate_proj_weight=True,
                    q_proj_weight=Wq, k_proj_weight=tt(r["Wk"]),
                    v_proj_weight=tt(r["Wv"]))

    # Pass-through out-projection: the output is the concatenated per-head
    # context. (A matmul by an identity matrix would spread one head's NaN
    # over the whole row, since NaN * 0 = NaN.)
    ctx, wts = _call_without_out_proj(E, common, proj, dtype)
    ctx = ctx.transpose(0, 1).reshape(N, L, H, d)   # (N, L, H, d)
    wts = wts.clone()                               # (N, H, L, S)

    nan_rows = torch.isnan(wts).any(dim=-1)         # (N, H, L)
    if dtype == torch.float64:
        assert torch.equal(nan_rows, torch.isnan(wts).all(dim=-1))
        ctx_nan = torch.isnan(ctx).any(dim=-1).permute(0, 2, 1)  # (N, H, L)
        assert torch.equal(nan_rows, ctx_nan), "NaN context/weights disagree"
    wts[torch.isnan(wts)] = 0.0
    ctx[torch.isnan(ctx)] = 0.0

    out = F.linear(ctx.reshape(N, L, E), tt(r["Wo"]), tt(r["bo"]))

    # Plain call (real out-projection): must agree wherever nothing is blocked.
    out_direct, w_direct = F.multi_head_attention_forward(
        out_proj_weight=tt(r["Wo"]), out_proj_bias=tt(r["bo"]), **common, **proj)
    out_direct = out_direct.transpose(0, 1)
    ok_rows = ~nan_rows.any(dim=1)                  # (N, L)
    if dtype == torch.float64:
        assert torch.allclose(out[ok_rows], out_direct[ok_rows], rtol=1e-12, atol=1e-12)
        assert torch.isnan(out_direct[~ok_rows]).all()

    if r["average"]:
        wts = wts.mean(dim=1)                       # (N, L, S)
    out = out.numpy().astype(np.float64)
    wts = wts.numpy().astype(np.float64)
    if dtype == torch.float64:
        assert not np.isnan(out).any() and not np.isnan(wts).any()
    return out, wts, int(nan_rows.sum())


def expected_numpy(r):
    """Independent float64 implementation of the service semantics."""
    N, L, S, E, H = r["N"], r["L"], r["S"], r["E"], r["H"]
    d = E // H
    f = lambda a: np.asarray(a, dtype=np.float64)
    scale = 1.0 / math.sqrt(d) if r["scale"] is None else r["scale"]
    b = f(r["b_in"])
    Q = f(r["q"]) @ f(r["Wq"]).T + b[:E]
    K = f(r["k"]) @ f(r["Wk"]).T + b[E:2 * E]
    V = f(r["v"]) @ f(r["Wv"]).T + b[2 * E:]
    out_ctx = np.zeros((N, L, E))
    wts = np.zeros((N, H, L, S))
    for n in range(N):
        for h in range(H):
            m = n * H + h if r["block"].shape[0] > 1 else 0
            ma = n * H + h if r["add"].shape[0] > 1 else 0
            sl = slice(h * d, (h + 1) * d)
            sc = Q[n][:, sl] @ K[n][:, sl].T * scale + f(r["add"][ma])
            blk = r["block"][m].copy()
            if r["kpm"] is not None:
                blk |= r["kpm"][n][None, :]
            for i in range(L):
                allowed = ~blk[i]
                if not allowed.any():
                    continue
                s = sc[i][allowed]
                e = np.exp(s - s.max())
                p = np.zeros(S)
                p[allowed] = e / e.sum()
                wts[n, h, i] = p
                out_ctx[n, i, sl] = p @ V[n][:, sl]
    out = out_ctx @ f(r["Wo"]).T + f(r["bo"])
    if r["average"]:
        wts = wts.mean(axis=1)
    return out, wts
