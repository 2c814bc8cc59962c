#!/usr/bin/python3
"""Generate the server-held model fixtures into tests/models/.

Run with Debian's PyTorch 1.13:  /usr/bin/python3 tests/gen_models.py
Deterministic: running it again gives byte-identical files.

  repo/<name>/{config.json,model.safetensors}  good models, one set of
      weights (E=16, H=4) in four layouts (torch_mha packed, torch_mha
      separate with kdim=12 and vdim=20 (its own weights), hf_bert with a
      prefix among other layers' tensors, hf_gpt2 transposed), each in F32,
      F16 and BF16; and gpt2_causal_f32, whose config sets defaults.
  golden/<name>.json  one case per model, in tests/golden's format
      ({name, description, request, expected, expected_float32}); request is
      a POST /attention body naming the model instead of carrying weights
      and num_heads. The expected values use the weights as the file holds
      them (rounded to F16/BF16, then float32), computed as gen_golden.py
      does (PyTorch float64, checked against numpy).
  broken/<case>/{config.json,model.safetensors} and broken/expected.json
      (case -> a substring the load error must contain).
  hf/, repo/llama_l1 ..., golden/hf/, broken/hf_*: the Hugging Face
      checkpoints of the hf_llama, hf_mistral and hf_gemma2 formats, made by
      gen_hf.py (see there).

The safetensors files are written here (no safetensors package): header
keys sorted, padded with spaces to a multiple of 8, as the reference
writer does.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_golden as gg  # noqa: E402  (the golden machinery, shared)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
E, H, KDIM, VDIM = 16, 4, 12, 20
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


# ------------------------------------------------------------ file writing

def st_bytes(tensors, metadata=None, dtype="F32", header_patch=None):
    """safetensors bytes for {name: np.float32 array}, all converted to
    dtype. header_patch(header_dict) may break the header on purpose."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        t = torch.from_numpy(np.ascontiguousarray(tensors[name], dtype=np.float32))
        t = t.to(DTYPES[dtype])
        raw = (t.view(torch.int16) if dtype != "F32" else t).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    if header_patch:
        header_patch(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def rounded(a, dtype):
    """a as the file holds it in dtype, back in float32."""
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    return t.to(DTYPES[dtype]).to(torch.float32).numpy()


def write_model(folder, config, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as fh:
        fh.write(json.dumps(config, indent=1, sort_keys=True) + "\n")
    with open(os.path.join(folder, "model.safetensors"), "wb") as fh:
        fh.write(data)


# ------------------------------------------------------------------ weights

def weights():
    g = gg.Gen(7100)
    w = {"Wq": g.weight(E, E), "Wk": g.weight(E, E), "Wv": g.weight(E, E),
         "bq": g.bias(E), "bk": g.bias(E), "bv": g.bias(E),
         "Wo": g.weight(E, E), "bo": g.bias(E)}
    sep = {"Wq": g.weight(E, E), "Wk": g.weight(E, KDIM), "Wv": g.weight(E, VDIM),
           "b_in": g.bias(3 * E), "Wo": g.weight(E, E), "bo": g.bias(E)}
    other = {"Wq": g.weight(E, E), "Wk": g.weight(E, E), "Wv": g.weight(E, E),
             "bq": g.bias(E), "bk": g.bias(E), "bv": g.bias(E),
             "Wo": g.weight(E, E), "bo": g.bias(E)}
    return w, sep, other, g


def mha_state(w):
    """nn.MultiheadAttention's own state_dict, loaded with w."""
    mha = torch.nn.MultiheadAttention(E, H)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.concatenate([w["Wq"], w["Wk"], w["Wv"]])))
        mha.in_proj_bias.copy_(torch.from_numpy(np.concatenate([w["bq"], w["bk"], w["bv"]])))
        mha.out_proj.weight.copy_(torch.from_numpy(w["Wo"]))
        mha.out_proj.bias.copy_(torch.from_numpy(w["bo"]))
    return {k: v.numpy() for k, v in mha.state_dict().items()}


def mha_sep_state(s):
    mha = torch.nn.MultiheadAttention(E, H, kdim=KDIM, vdim=VDIM)
    with torch.no_grad():
        for name, key in (("q_proj_weight", "Wq"), ("k_proj_weight", "Wk"),
                          ("v_proj_weight", "Wv"), ("in_proj_bias", "b_in")):
            getattr(mha, name).copy_(torch.from_numpy(s[key]))
        mha.out_proj.weight.copy_(torch.from_numpy(s["Wo"]))
        mha.out_proj.bias.copy_(torch.from_numpy(s["bo"]))
    sd = {k: v.numpy() for k, v in mha.state_dict().items()}
    assert "in_proj_weight" not in sd and sd["k_proj_weight"].shape == (E, KDIM)
    return sd


def bert_layer(w, i):
    p = f"bert.encoder.layer.{i}."
    return {p + "attention.self.query.weight": w["Wq"], p + "attention.self.query.bias": w["bq"],
            p + "attention.self.key.weight": w["Wk"], p + "attention.self.key.bias": w["bk"],
            p + "attention.self.value.weight": w["Wv"], p + "attention.self.value.bias": w["bv"],
            p + "attention.output.dense.weight": w["Wo"],
            p + "attention.output.dense.bias": w["bo"],
            p + "attention.output.LayerNorm.weight": np.ones(E, np.float32),
            p + "attention.output.LayerNorm.bias": np.zeros(E, np.float32)}


def bert_state(w, other, g):
    sd = {**bert_layer(other, 0), **bert_layer(w, 1)}
    sd["bert.embeddings.word_embeddings.weight"] = g.normal(10, E)
    sd["bert.embeddings.LayerNorm.weight"] = np.ones(E, np.float32)
    return sd


def gpt2_layer(w, i):
    p = f"h.{i}."
    return {p + "attn.c_attn.weight": np.concatenate([w["Wq"], w["Wk"], w["Wv"]]).T.copy(),
            p + "attn.c_attn.bias": np.concatenate([w["bq"], w["bk"], w["bv"]]),
            p + "attn.c_proj.weight": w["Wo"].T.copy(), p + "attn.c_proj.bias": w["bo"],
            p + "ln_1.weight": np.ones(E, np.float32),
            p + "attn.bias": np.tril(np.ones((4, 4), np.float32))[None, None]}


def gpt2_state(w, other, g):
    sd = {**gpt2_layer(other, 0), **gpt2_layer(w, 1)}
    sd["wte"] = g.normal(10, E)
    return sd


# ------------------------------------------------------------------ goldens

def golden(name, desc, model_req, weights_json, num_heads, defaults):
    """Write golden/<name>.json: model_req is the public request; the
    expected values come from the same request with weights, num_heads and
    the model's defaults (where the request does not set them) filled in."""
    full = dict(model_req)
    del full["model"]
    for k, v in defaults.items():
        full.setdefault(k, v)
    full["num_heads"] = num_heads
    full["weights"] = weights_json
    r = gg.resolve(full)
    out, wts, _ = gg.expected_torch(r)
    ref_out, ref_wts = gg.expected_numpy(r)
    assert np.allclose(out, ref_out, rtol=1e-10, atol=1e-10), name
    assert np.allclose(wts, ref_wts, rtol=1e-10, atol=1e-10), name
    out32, wts32, _ = gg.expected_torch(r, torch.float32)
    if not r["batched"]:
        out, wts, out32, wts32 = out[0], wts[0], out32[0], wts32[0]
    expected = {"output": gg.tensor_json(out.astype(np.float32))}
    expected32 = {"output": gg.tensor_json(out32.astype(np.float32))}
    if r["need_weights"]:
        expected["attention_weights"] = gg.tensor_json(wts.astype(np.float32))
        expected32["attention_weights"] = gg.tensor_json(wts32.astype(np.float32))
    doc = {"name": name, "description": desc, "request": model_req, "expected": expected,
           "expected_float32": expected32}
    os.makedirs(os.path.join(ROOT, "golden"), exist_ok=True)
    with open(os.path.join(ROOT, "golden", name + ".json"), "w") as fh:
        fh.write(gg.dump(doc) + "\n")


def packed_json(w, dtype):
    q = lambda a: gg.tensor_json(rounded(a, dtype))  # noqa: E731
    return {"in_proj_weight": q(np.concatenate([w["Wq"], w["Wk"], w["Wv"]])),
            "in_proj_bias": q(np.concatenate([w["bq"], w["bk"], w["bv"]])),
            "out_proj_weight": q(w["Wo"]), "out_proj_bias": q(w["bo"])}


def sep_json(s, dtype):
    q = lambda a: gg.tensor_json(rounded(a, dtype))  # noqa: E731
    return {"q_proj_weight": q(s["Wq"]), "k_proj_weight": q(s["Wk"]),
            "v_proj_weight": q(s["Wv"]), "in_proj_bias": q(s["b_in"]),
            "out_proj_weight": q(s["Wo"]), "out_proj_bias": q(s["bo"])}


def good_models():
    w, sep, other, g = weights()
    files = {"mha": ({"format": "torch_mha", "num_heads": H}, mha_state(w)),
             "mha_sep": ({"format": "torch_mha", "num_heads": H}, mha_sep_state(sep)),
             "bert": ({"format": "hf_bert", "prefix": "bert.encoder.layer.1.", "num_heads": H,
                       "hidden_size": E}, bert_state(w, other, g)),
             "gpt2": ({"format": "hf_gpt2", "prefix": "h.1.", "num_heads": H},
                      gpt2_state(w, other, g))}
    rq = gg.Gen(7200)
    self_q = gg.tensor_json(rq.normal(1, 4, E))
    cross = {"query": gg.tensor_json(rq.normal(1, 3, E)),
             "key": gg.tensor_json(rq.normal(1, 5, KDIM)),
             "value": gg.tensor_json(rq.normal(1, 5, VDIM))}
    for dtype in DTYPES:
        for base, (config, sd) in files.items():
            name = f"{base}_{dtype.lower()}"
            write_model(os.path.join(ROOT, "repo", name), config,
                        st_bytes(sd, {"format": "pt"}, dtype))
            if base == "mha_sep":
                req, wj = {"model": name, **cross}, sep_json(sep, dtype)
                desc = f"torch_mha separate q/k/v (kdim {KDIM}, vdim {VDIM}), {dtype}"
            else:
                req, wj = {"model": name, "query": self_q}, packed_json(w, dtype)
                desc = f"{config['format']} layout of the shared weights, {dtype}"
            golden(name, desc, req, wj, H, {})
    config, sd = files["gpt2"]
    config = dict(config, defaults={"attn_mask": "causal", "need_weights": True})
    write_model(os.path.join(ROOT, "repo", "gpt2_causal_f32"), config,
                st_bytes(sd, None, "F32"))
    golden("gpt2_causal_f32", "hf_gpt2 whose config.json defaults attn_mask to causal; the "
           "request does not set it", {"model": "gpt2_causal_f32", "query": self_q},
           packed_json(w, "F32"), H, config["defaults"])
    return w, files


# ------------------------------------------------------------------ broken

def broken_models(files):
    cases = {}
    mha_cfg, mha_sd = files["mha"]
    good = st_bytes(mha_sd)
    n = struct.unpack("<Q", good[:8])[0]

    def case(name, expect, data, config=None):
        write_model(os.path.join(ROOT, "broken", name), config or mha_cfg, data)
        cases[name] = expect

    def patch(fn):
        return st_bytes(mha_sd, header_patch=fn)

    def shift(key, by):
        def fn(h):
            h[key]["data_offsets"] = [o + by for o in h[key]["data_offsets"]]
        return fn

    case("too_small", "header too small", good[:5])
    case("truncated", "missing bytes", good[:-10])
    case("header_too_large", "header too large", struct.pack("<Q", 200_000_000) + good[8:])
    case("header_past_end", "invalid header length", struct.pack("<Q", len(good)) + good[8:])
    case("trailing_bytes", "trailing bytes", good + b"\0" * 4)
    # sorted by offset: in_proj_bias, in_proj_weight, out_proj.bias, out_proj.weight
    case("overlapping_offsets", "overlap", patch(shift("out_proj.weight", -8)))

    def hole(h):
        for k in ("out_proj.bias", "out_proj.weight"):
            h[k]["data_offsets"] = [o + 4 for o in h[k]["data_offsets"]]
    case("holey_offsets", "leave a hole", patch(hole) + b"\0" * 4)

    def wrong_size(h):
        h["out_proj.bias"]["shape"] = [E + 1]
    case("wrong_byte_size", "needs 68", patch(wrong_size))

    def meta(h):
        h["__metadata__"] = {"format": "pt", "step": 3}
    case("nonstring_metadata", "__metadata__ \"step\" is not a string", patch(meta))

    def unknown_dtype(h):
        h["in_proj_bias"]["dtype"] = "Q4"
    case("unknown_dtype", "unknown dtype \"Q4\"", patch(unknown_dtype))

    def unknown_field(h):
        h["in_proj_bias"]["offset"] = 0
    case("unknown_field", "unknown field \"offset\"", patch(unknown_field))

    # I8: a dtype the reader knows but cannot convert
    i8_bytes = st_bytes({k: v for k, v in mha_sd.items() if k != "out_proj.weight"})
    hdr = json.loads(i8_bytes[8:8 + struct.unpack("<Q", i8_bytes[:8])[0]])
    end = max(t["data_offsets"][1] for t in hdr.values())
    hdr["out_proj.weight"] = {"dtype": "I8", "shape": [E, E], "data_offsets": [end, end + E * E]}
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    data = i8_bytes[8 + struct.unpack("<Q", i8_bytes[:8])[0]:] + bytes(range(E * E))
    case("unconvertible_dtype", "out_proj.weight has dtype I8",
         struct.pack("<Q", len(text)) + text + data)

    bad = good[:8] + good[8:].replace(b'"in_proj_bias":', b'"in_proj_bias";', 1)
    case("invalid_json_header", "header is not valid JSON", bad)
    with_meta = st_bytes(mha_sd, {"format": "pt"})
    case("non_utf8_header", "not valid UTF-8", with_meta.replace(b'"pt"', b'"\xff\xfe"', 1))
    dup = good[:8] + good[8:].replace(b'{"in_proj_bias"', b'{"in_proj_bias":1,"in_proj_bias"', 1)
    dup = struct.pack("<Q", len(dup) - 8 - (len(good) - 8 - n)) + dup[8:]
    case("duplicate_key", "duplicate", dup)

    # shapes against the format
    sd = dict(mha_sd)
    sd["out_proj.weight"] = mha_sd["out_proj.weight"][:, :8].copy()
    case("wrong_shape", "out_proj.weight has shape (16, 8), expected (16, 16)", st_bytes(sd))
    sd = dict(mha_sd)
    sd["out_proj.weight"] = np.zeros((60000, 0), np.float32)  # E from an empty tensor
    case("empty_e_tensor", "out_proj.weight has shape (60000, 0), expected (60000, 60000)",
         st_bytes(sd))
    sd = dict(mha_sd)
    sd["in_proj_weight"] = mha_sd["in_proj_weight"][:40].copy()
    case("wrong_e", "in_proj_weight has shape (40, 16), expected (48, 16)", st_bytes(sd))
    case("e_not_divisible", "not divisible by num_heads = 5", good,
         {"format": "torch_mha", "num_heads": 5})
    sd = {k: v for k, v in mha_sd.items() if k != "out_proj.weight"}
    case("missing_key", "missing key out_proj.weight", st_bytes(sd))
    bert_cfg, bert_sd = files["bert"]
    sd = {k: v for k, v in bert_sd.items() if not k.endswith("layer.1.attention.self.key.bias")}
    case("missing_bert_key", "missing key bert.encoder.layer.1.attention.self.key.bias",
         st_bytes(sd), bert_cfg)
    sd = dict(bert_sd)
    sd["bert.encoder.layer.1.attention.self.key.weight"] = np.zeros((E, 8), np.float32)
    case("bert_wrong_shape", "bert.encoder.layer.1.attention.self.key.weight has shape (16, 8), "
         "expected (16, 16)", st_bytes(sd), bert_cfg)
    case("wrong_prefix", "missing key bert.encoder.layer.7.attention.self.query.weight",
         st_bytes(bert_sd), dict(bert_cfg, prefix="bert.encoder.layer.7."))
    gpt_cfg, gpt_sd = files["gpt2"]
    sd = dict(gpt_sd)
    sd["h.1.attn.c_attn.weight"] = gpt_sd["h.1.attn.c_attn.weight"].T.copy()
    case("gpt2_not_transposed", "h.1.attn.c_attn.weight has shape (48, 16), expected (16, 48)",
         st_bytes(sd), gpt_cfg)
    sd = dict(mha_sd)
    sd["out_proj.bias"] = np.full(E, np.inf, np.float32)
    case("nonfinite_weight", "out_proj.bias[0] is not finite", st_bytes(sd))

    # config.json
    case("attention", "reserved", good)
    case("unknown_format", "format \"llama\" is unknown", good,
         {"format": "llama", "num_heads": H})
    case("bad_default_value", "defaults.attn_mask", good,
         {"format": "torch_mha", "num_heads": H, "defaults": {"attn_mask": "upper"}})
    case("unknown_default", "defaults.num_heads is not an option", good,
         {"format": "torch_mha", "num_heads": H, "defaults": {"num_heads": 2}})
    case("bad_scale_default", "defaults.scale", good,
         {"format": "torch_mha", "num_heads": H, "defaults": {"scale": 1e39}})
    case("no_num_heads", "num_heads", good, {"format": "torch_mha"})
    write_model(os.path.join(ROOT, "broken", "bad_config_json"), mha_cfg, good)
    with open(os.path.join(ROOT, "broken", "bad_config_json", "config.json"), "w") as fh:
        fh.write('{"format": "torch_mha", "num_heads": 4,}\n')
    cases["bad_config_json"] = "config.json: "
    return cases


def main():
    torch.set_num_threads(1)
    for sub in ("repo", "golden", "broken", "hf"):
        shutil.rmtree(os.path.join(ROOT, sub), ignore_errors=True)
    w, files = good_models()
    cases = broken_models(files)
    import gen_hf  # noqa: E402  (imports this module: after it is loaded)
    cases.update(gen_hf.main())
    with open(os.path.join(ROOT, "broken", "expected.json"), "w") as fh:
        fh.write(json.dumps(cases, indent=1, sort_keys=True) + "\n")
    print("wrote", ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
