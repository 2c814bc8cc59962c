#!/usr/bin/python3
"""Hugging Face checkpoint fixtures for the hf_llama, hf_mistral and
hf_gemma2 model formats; gen_models.py calls main() (run that one).

  hf/<ckpt>/       checkpoint folders as transformers saves them, written
      here from seeded weights (no transformers package): config.json with
      the model class's own field names, model.safetensors or shards with
      model.safetensors.index.json. llama (GQA H=4, Hkv=2, E=32, 2 layers,
      sharded in two files, layer 1's tensors in both), llama_bias (MQA,
      attention_bias, F16), mistral (sliding_window 3), gemma2 (head_dim 12
      != E/H, soft-cap, query_pre_attn_scalar, 2 layers: 0 slides, 1 not;
      BF16).
  repo/<name>/config.json  models pointing at them ("checkpoint", "layer").
  golden/hf/<name>.json  one case per model: request {"model", "query"};
      expected from Hugging Face's eager attention (LlamaAttention,
      MistralAttention, Gemma2Attention) re-expressed in plain torch ops,
      float64 (and float32), checked against a second formulation in
      numpy (interleaved RoPE on the un-permuted weights, per-head loops).
      The model's defaults (derived from the checkpoint) carry the
      variant options, so the request carries none.
  broken/<case>/{config.json,hf/}  checkpoints the loader must refuse;
      the cases are returned for broken/expected.json.
"""
import json
import math
import os

import numpy as np
import torch

import gen_golden as gg
import gen_models as gm

E, H, HKV, L, VOCAB, INTER = 32, 4, 2, 7, 16, 64
ARCH = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
        "gemma2": "Gemma2ForCausalLM"}
DROP = object()  # a config field left out


def hf_config(kind, layers, **kw):
    c = {"architectures": [ARCH[kind]], "model_type": kind, "hidden_size": E,
         "intermediate_size": INTER, "num_attention_heads": H, "num_key_value_heads": HKV,
         "num_hidden_layers": layers, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
         "vocab_size": VOCAB, "torch_dtype": "float32", "transformers_version": "4.44.2",
         "tie_word_embeddings": False, "initializer_range": 0.02, "use_cache": True,
         "bos_token_id": 1, "eos_token_id": 2, "attention_dropout": 0.0}
    if kind == "llama":
        c.update(hidden_act="silu", rope_theta=10000.0, rope_scaling=None,
                 attention_bias=False, mlp_bias=False, pretraining_tp=1, head_dim=E // H)
    elif kind == "mistral":
        c.update(hidden_act="silu", rope_theta=1000000.0, sliding_window=3)
    else:
        c.update(hidden_activation="gelu_pytorch_tanh", hidden_act="gelu_pytorch_tanh",
                 head_dim=12, query_pre_attn_scalar=10, attn_logit_softcapping=2.0,
                 final_logit_softcapping=30.0, sliding_window=3, rope_theta=10000.0,
                 attention_bias=False, cache_implementation="hybrid", pad_token_id=0,
                 torch_dtype="bfloat16")
    for k, v in kw.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return c


def layer_weights(g, Hq, Hk, d, bias):
    w = {"q": g.weight(Hq * d, E), "k": g.weight(Hk * d, E), "v": g.weight(Hk * d, E),
         "o": g.weight(E, Hq * d)}
    if bias:
        w.update(bq=g.bias(Hq * d), bk=g.bias(Hk * d), bv=g.bias(Hk * d), bo=g.bias(E))
    return w


def layer_state(g, w, i):
    p = f"model.layers.{i}."
    sd = {p + f"self_attn.{n}_proj.weight": w[n] for n in "qkvo"}
    sd.update({p + f"self_attn.{n}_proj.bias": w["b" + n] for n in "qkvo" if "b" + n in w})
    sd[p + "input_layernorm.weight"] = np.ones(E, np.float32)
    sd[p + "post_attention_layernorm.weight"] = np.ones(E, np.float32)
    sd[p + "mlp.gate_proj.weight"] = g.weight(INTER, E)
    sd[p + "mlp.up_proj.weight"] = g.weight(INTER, E)
    sd[p + "mlp.down_proj.weight"] = g.weight(E, INTER)
    return sd


def checkpoint_state(g, layers):
    sd = {"model.embed_tokens.weight": g.normal(VOCAB, E), "model.norm.weight":
          np.ones(E, np.float32), "lm_head.weight": g.normal(VOCAB, E)}
    for i, w in enumerate(layers):
        sd.update(layer_state(g, w, i))
    return sd


def write_checkpoint(folder, config, sd, dtype="F32", shard_of=None, index_patch=None):
    """shard_of(name) -> 1-based shard number, or None: one model.safetensors."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        fh.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    if shard_of is None:
        with open(os.path.join(folder, "model.safetensors"), "wb") as fh:
            fh.write(gm.st_bytes(sd, {"format": "pt"}, dtype))
        return
    n = max(shard_of(k) for k in sd)
    files = {k: f"model-{shard_of(k):05d}-of-{n:05d}.safetensors" for k in sd}
    total = 0
    for s in range(1, n + 1):
        part = {k: v for k, v in sd.items() if shard_of(k) == s}
        data = gm.st_bytes(part, {"format": "pt"}, dtype)
        total += sum(v.size for v in part.values()) * (4 if dtype == "F32" else 2)
        with open(os.path.join(folder, f"model-{s:05d}-of-{n:05d}.safetensors"), "wb") as fh:
            fh.write(data)
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(files.items()))}
    if index_patch:
        index_patch(index)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as fh:
        fh.write(json.dumps(index, indent=2) + "\n")


# ------------------------------------------------------------- references

def hf_eager(x, w, Hq, Hk, d, theta, window, softcap, scaling, dtype):
    """HF's eager attention of one decoder layer (LlamaAttention.forward with
    eager_attention_forward; Mistral's sliding window, Gemma 2's soft-cap
    and scaling), positions 0..L-1, causal mask: plain torch ops."""
    def t(a):
        return torch.from_numpy(np.asarray(a, np.float64)).to(dtype)
    X = t(x)
    n = X.shape[0]

    def proj(name, heads):
        y = X @ t(w[name]).T
        if "b" + name in w:
            y = y + t(w["b" + name])
        return y.view(n, heads, d).transpose(0, 1)
    q, k, v = proj("q", Hq), proj("k", Hk), proj("v", Hk)
    inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)

    def rotate_half(a):
        return torch.cat((-a[..., d // 2:], a[..., :d // 2]), dim=-1)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin

    def repeat_kv(a, rep):
        return a[:, None].expand(Hk, rep, n, d).reshape(Hk * rep, n, d)
    k, v = repeat_kv(k, Hq // Hk), repeat_kv(v, Hq // Hk)
    s = (q @ k.transpose(1, 2)) * scaling
    if softcap:
        s = torch.tanh(s / softcap) * softcap
    i, j = torch.arange(n)[:, None], torch.arange(n)[None]
    allowed = j <= i
    if window:
        allowed &= j > i - window
    s = s.masked_fill(~allowed, float("-inf"))
    p = torch.softmax(s, dim=-1)
    ctx = (p @ v).transpose(0, 1).reshape(n, Hq * d)
    out = ctx @ t(w["o"]).T
    if "bo" in w:
        out = out + t(w["bo"])
    return out.numpy(), p.numpy()


def unpermute(a, heads):
    """Inverse of convert_llama_weights_to_hf.py's permute: HF rows back
    to Meta's interleaved order."""
    rows, cols = a.shape
    return a.reshape(heads, 2, rows // heads // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def second_formulation(x, w, Hq, Hk, d, theta, window, softcap, scaling):
    """The same in numpy float64, per head and per key, with GPT-J/Meta
    interleaved RoPE on the un-permuted q and k weights."""
    x = x.astype(np.float64)
    q = x @ unpermute(w["q"], Hq).astype(np.float64).T
    k = x @ unpermute(w["k"], Hk).astype(np.float64).T
    v = x @ w["v"].astype(np.float64).T
    if "bq" in w:
        q += unpermute(w["bq"][:, None], Hq)[:, 0]
        k += unpermute(w["bk"][:, None], Hk)[:, 0]
        v += w["bv"]
    n = x.shape[0]

    def rope(a):
        out = a.copy()
        for m in range(n):
            for i in range(d // 2):
                ang = m * theta ** (-2.0 * i / d)
                c, s = math.cos(ang), math.sin(ang)
                x0, x1 = a[m, 2 * i], a[m, 2 * i + 1]
                out[m, 2 * i], out[m, 2 * i + 1] = x0 * c - x1 * s, x0 * s + x1 * c
        return out
    ctx = np.zeros((n, Hq * d))
    probs = np.zeros((Hq, n, n))
    for h in range(Hq):
        kv = h // (Hq // Hk)
        qh, kh = rope(q[:, h * d:(h + 1) * d]), rope(k[:, kv * d:(kv + 1) * d])
        vh = v[:, kv * d:(kv + 1) * d]
        for i in range(n):
            keys = [j for j in range(n) if j <= i and (not window or i - j < window)]
            sc = np.array([qh[i] @ kh[j] * scaling for j in keys])
            if softcap:
                sc = softcap * np.tanh(sc / softcap)
            e = np.exp(sc - sc.max())
            probs[h, i, keys] = e / e.sum()
            ctx[i, h * d:(h + 1) * d] = probs[h, i, keys] @ vh[keys]
    out = ctx @ w["o"].astype(np.float64).T + (w["bo"] if "bo" in w else 0)
    return out, probs


# ---------------------------------------------------------------- fixtures

def rounded_weights(w, dtype):
    return {k: gm.rounded(v, dtype) for k, v in w.items()}


def golden(name, desc, x, w, args):
    out, p = hf_eager(x, w, *args, torch.float64)
    out2, p2 = second_formulation(x, w, *args)
    assert np.allclose(out, out2, rtol=1e-10, atol=1e-10), name
    assert np.allclose(p, p2, rtol=1e-10, atol=1e-12), name
    out32, p32 = hf_eager(x, w, *args, torch.float32)
    doc = {"name": name, "description": desc,
           "request": {"model": name, "query": gg.tensor_json(x)},
           "expected": {"output": gg.tensor_json(out), "attention_weights": gg.tensor_json(p)},
           "expected_float32": {"output": gg.tensor_json(out32),
                                "attention_weights": gg.tensor_json(p32)}}
    os.makedirs(os.path.join(gm.ROOT, "golden", "hf"), exist_ok=True)
    with open(os.path.join(gm.ROOT, "golden", "hf", name + ".json"), "w") as fh:
        fh.write(gg.dump(doc) + "\n")


def model_config(folder, config):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        fh.write(json.dumps(config, indent=1, sort_keys=True) + "\n")


def llama_shard(name):
    """Layer 1's q and k in the first file, its v and o in the second."""
    if name.startswith("model.layers.1.") and not name.split("self_attn.")[-1][:1] in "qk":
        return 2
    return 2 if name in ("model.norm.weight", "lm_head.weight") else 1


def good():
    g = gg.Gen(7300)
    x = g.normal(L, E, std=1.5)
    llama = [layer_weights(g, H, HKV, 8, False) for _ in range(2)]
    llama_bias = layer_weights(g, H, 1, 8, True)
    mistral = layer_weights(g, H, HKV, 8, False)
    gemma = [layer_weights(g, H, HKV, 12, False) for _ in range(2)]
    hf = os.path.join(gm.ROOT, "hf")
    write_checkpoint(os.path.join(hf, "llama"), hf_config("llama", 2),
                     checkpoint_state(g, llama), "F32", llama_shard)
    write_checkpoint(os.path.join(hf, "llama_bias"),
                     hf_config("llama", 1, num_key_value_heads=1, attention_bias=True,
                               head_dim=DROP, torch_dtype="float16"),
                     checkpoint_state(g, [llama_bias]), "F16")
    write_checkpoint(os.path.join(hf, "mistral"), hf_config("mistral", 1),
                     checkpoint_state(g, [mistral]), "F32")
    write_checkpoint(os.path.join(hf, "gemma2"), hf_config("gemma2", 2),
                     checkpoint_state(g, gemma), "BF16")
    repo = os.path.join(gm.ROOT, "repo")
    cases = [
        ("llama_l1", "hf_llama", "llama", 1, llama[1], (H, HKV, 8, 10000.0, 0, 0, 8 ** -0.5),
         "hf_llama layer 1 of a sharded checkpoint (its tensors in both shards), GQA 4/2"),
        ("llama_bias_l0", "hf_llama", "llama_bias", 0, rounded_weights(llama_bias, "F16"),
         (H, 1, 8, 10000.0, 0, 0, 8 ** -0.5), "hf_llama with attention_bias, MQA, F16"),
        ("mistral_l0", "hf_mistral", "mistral", 0, mistral,
         (H, HKV, 8, 1e6, 3, 0, 8 ** -0.5), "hf_mistral, sliding_window 3, rope_theta 1e6"),
        ("gemma2_l0", "hf_gemma2", "gemma2", 0, rounded_weights(gemma[0], "BF16"),
         (H, HKV, 12, 10000.0, 3, 2.0, 10 ** -0.5),
         "hf_gemma2 layer 0 (even: sliding window 3), head_dim 12, soft-cap 2, "
         "query_pre_attn_scalar 10, BF16"),
        ("gemma2_l1", "hf_gemma2", "gemma2", 1, rounded_weights(gemma[1], "BF16"),
         (H, HKV, 12, 10000.0, 0, 2.0, 10 ** -0.5),
         "hf_gemma2 layer 1 (odd: no window), head_dim 12, soft-cap 2, BF16"),
    ]
    for name, fmt, ckpt, layer, w, args, desc in cases:
        model_config(os.path.join(repo, name),
                     {"format": fmt, "checkpoint": f"../../hf/{ckpt}", "layer": layer})
        golden(name, desc, x, w, args)
    # a user's defaults over the derived ones: no window, top-left causal
    model_config(os.path.join(repo, "mistral_l0_full"),
                 {"format": "hf_mistral", "checkpoint": "../../hf/mistral", "layer": 0,
                  "defaults": {"window": None, "attn_mask": "causal"}})
    return g, llama


def broken(g, llama):
    """broken/<case>/: config.json and hf/; returns {case: expected error}."""
    cases = {}
    root = os.path.join(gm.ROOT, "broken")
    one = checkpoint_state(g, [llama[0]])
    two = checkpoint_state(g, llama)

    def case(name, expect, hc=None, sd=None, layer=0, shard_of=None, index_patch=None,
             fmt="hf_llama", extra=None):
        folder = os.path.join(root, name)
        model_config(folder, {"format": fmt, "checkpoint": "hf", "layer": layer,
                              **(extra or {})})
        write_checkpoint(os.path.join(folder, "hf"), hc or hf_config("llama", 1),
                         one if sd is None else sd, "F32", shard_of, index_patch)
        cases[name] = expect

    case("hf_rope_scaling", "rope_scaling = {\"factor\":8.0,\"rope_type\":\"llama3\"} is not "
         "implemented", hf_config("llama", 1, rope_scaling={"factor": 8.0,
                                                           "rope_type": "llama3"}))
    case("hf_kv_not_dividing", "num_key_value_heads = 3 does not divide num_attention_heads "
         "= 4", hf_config("llama", 1, num_key_value_heads=3))

    def no_k(index):
        del index["weight_map"]["model.layers.1.self_attn.k_proj.weight"]
    case("hf_index_lacks_tensor", "weight_map has no model.layers.1.self_attn.k_proj.weight",
         hf_config("llama", 2), two, 1, llama_shard, no_k)
    sd = {k: v for k, v in two.items() if k != "model.layers.1.self_attn.v_proj.weight"}

    def relist(proj, file):
        def patch(index):
            index["weight_map"][f"model.layers.1.self_attn.{proj}_proj.weight"] = file
        return patch
    case("hf_shard_lacks_tensor", "model-00002-of-00002.safetensors: missing key "
         "model.layers.1.self_attn.v_proj.weight", hf_config("llama", 2), sd, 1, llama_shard,
         relist("v", "model-00002-of-00002.safetensors"))
    case("hf_missing_shard", "shard model-00003-of-00003.safetensors (of "
         "model.layers.1.self_attn.o_proj.weight)", hf_config("llama", 2), two, 1, llama_shard,
         relist("o", "model-00003-of-00003.safetensors"))
    case("hf_unknown_field", "field \"attention_chunk_size\" is not known to the hf_llama "
         "loader", hf_config("llama", 1, attention_chunk_size=8192))
    case("hf_partial_rotary", "partial_rotary_factor = 0.5 is not implemented",
         hf_config("llama", 1, partial_rotary_factor=0.5))
    case("hf_layer_out_of_range", "layer 5 is out of range", layer=5)
    sd = dict(one)
    sd["model.layers.0.self_attn.q_proj.bias"] = np.zeros(E, np.float32)
    case("hf_unexpected_bias", "the checkpoint has model.layers.0.self_attn.q_proj.bias, but "
         "its config.json's attention_bias is false", sd=sd)
    case("hf_missing_bias", "missing key model.layers.0.self_attn.q_proj.bias",
         hf_config("llama", 1, attention_bias=True))
    case("hf_llama_sliding", "sliding_window = 4096 is not implemented",
         hf_config("llama", 1, sliding_window=4096))
    case("hf_head_dim_mismatch", "model.layers.0.self_attn.q_proj.weight has shape (32, 32), "
         "expected (48, 32)", hf_config("llama", 1, head_dim=12))
    case("hf_model_type", "model_type \"qwen2\" is not hf_llama's",
         hf_config("llama", 1, model_type="qwen2"))
    case("hf_mistral_bias", "attention_bias = true is not implemented",
         hf_config("mistral", 1, attention_bias=True), fmt="hf_mistral")
    case("hf_bad_kv_default", "defaults.num_kv_heads = 4 contradicts the weights: their "
         "shapes give num_kv_heads 2", extra={"defaults": {"num_kv_heads": 4}})
    case("hf_no_checkpoint_config", "checkpoint config.json: No such file",
         extra={"checkpoint": "nowhere"})
    # null removes an option, but not one the weights fix (a request would
    # fall back to H and E / H and read past the weights)
    case("hf_null_kv_default", "defaults.num_kv_heads = null contradicts the weights: their "
         "shapes give num_kv_heads 2", extra={"defaults": {"num_kv_heads": None}})
    # drawn last: the cases above keep their bytes
    gemma = checkpoint_state(g, [layer_weights(g, H, HKV, 12, False)])
    case("hf_null_head_dim", "defaults.head_dim = null contradicts the weights: their shapes "
         "give head_dim 12", hf_config("gemma2", 1), gemma, fmt="hf_gemma2",
         extra={"defaults": {"head_dim": None}})
    return cases


def main():
    g, llama = good()
    return broken(g, llama)
