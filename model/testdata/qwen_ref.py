"""Reference Qwen2 / Qwen3 / Llama decoder for drmas's parity tests.

Written from the semantics of transformers' modeling_qwen2.py and
modeling_qwen3.py (pre-norm blocks, float32-style RMSNorm without +1,
rotate-half RoPE (with Llama 3's rope_scaling), grouped-query attention, q/k norms for Qwen3, SwiGLU MLP,
tied or untied lm_head), in plain torch so that it runs on Debian's torch 1.13
without transformers.

usage: qwen_ref.py JOBS.json, JOBS.json = [[IN.json, WEIGHTS.safetensors, OUT.safetensors], ...]
(one process for many models: importing torch is the slow part)

IN.json: {"config": ArchConfig as JSON, "seqs": [{"prompt": [...], "response": [...]}],
          "temperature": T, "dlogprob": [[...]], "dentropy": [[...]], "dtype": "float64"|"float32"}
OUT.safetensors: "logprob.<i>", "entropy.<i>" per sequence and "grad.<tensor name>" per tensor
(float64 computation unless dtype says float32; written as F32).
"""
import json
import math
import struct
import sys

import torch


def read_safetensors(path):
    """The tensors of a safetensors file (F32, F16 or BF16) as float32, by name."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        buf = bytearray(raw[base + lo : base + hi])
        if info["dtype"] == "F32":
            t = torch.frombuffer(buf, dtype=torch.float32)
        elif info["dtype"] == "F16":
            t = torch.frombuffer(buf, dtype=torch.float16).to(torch.float32)
        elif info["dtype"] == "BF16":
            # A bfloat16 is the top half of a float32's bits.
            t = (torch.frombuffer(buf, dtype=torch.int16).to(torch.int32) << 16).view(torch.float32)
        else:
            raise SystemExit("unsupported dtype " + info["dtype"])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x, w, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def llama3_scale(inv, rs):
    """Llama 3.1's frequency rescaling (transformers' rope_type "llama3"), from its
    definition: a wavelength shorter than ctx/high_freq_factor keeps its frequency, one
    longer than ctx/low_freq_factor is slowed by factor, and in between the frequency
    moves linearly in ctx/wavelength from f/factor (at low_freq_factor) to f (at
    high_freq_factor)."""
    ctx = float(rs["original_max_position_embeddings"])
    lo, hi, factor = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
    cycles = ctx * inv / (2 * math.pi)  # = ctx / wavelength
    t = ((cycles - lo) / (hi - lo)).clamp(0.0, 1.0)
    return inv / factor + t * (inv - inv / factor)


def rope_cos_sin(n, hd, theta, dtype, scaling=None):
    # Angles in float64, then rounded to the compute dtype (drmas does the same;
    # transformers computes them in float32).
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    if scaling:
        if scaling.get("rope_type") != "llama3":
            raise SystemExit("unsupported rope_scaling %r" % scaling)
        inv = llama3_scale(inv, scaling)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((ang, ang), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def forward(cfg, W, ids, dtype):
    """Logits [L, V] of one sequence."""
    H, KV, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    eps, L = cfg["rms_norm_eps"], len(ids)
    x = W["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.long)]
    cos, sin = rope_cos_sin(L, hd, cfg["rope_theta"], dtype, cfg.get("rope_scaling"))
    mask = torch.full((L, L), float("-inf"), dtype=dtype).triu(1)
    for l in range(cfg["layers"]):
        p = "model.layers.%d." % l
        g = lambda n: W.get(p + n)
        h = rms_norm(x, g("input_layernorm.weight"), eps)

        def proj(name):
            y = h @ g("self_attn.%s_proj.weight" % name).T
            b = g("self_attn.%s_proj.bias" % name)
            return y if b is None else y + b

        q = proj("q").view(L, H, hd).transpose(0, 1)
        k = proj("k").view(L, KV, hd).transpose(0, 1)
        v = proj("v").view(L, KV, hd).transpose(0, 1)
        if cfg["qk_norm"]:
            q = rms_norm(q, g("self_attn.q_norm.weight"), eps)
            k = rms_norm(k, g("self_attn.k_norm.weight"), eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = H // KV
        k = k.repeat_interleave(rep, dim=0)
        v = v.repeat_interleave(rep, dim=0)
        s = (q @ k.transpose(1, 2)) / math.sqrt(hd) + mask
        a = torch.softmax(s, dim=-1) @ v
        o = a.transpose(0, 1).reshape(L, H * hd) @ g("self_attn.o_proj.weight").T
        if g("self_attn.o_proj.bias") is not None:
            o = o + g("self_attn.o_proj.bias")
        x = x + o
        h = rms_norm(x, g("post_attention_layernorm.weight"), eps)
        m = torch.nn.functional.silu(h @ g("mlp.gate_proj.weight").T) * (h @ g("mlp.up_proj.weight").T)
        x = x + m @ g("mlp.down_proj.weight").T
    x = rms_norm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]
    return x @ head.T


def backward_weighted(spec, cfg, W, dtype):
    """Runs every sequence of spec through the decoder with weights W, back-propagates
    sum(dlogprob * logprob) + sum(dentropy * entropy), and returns the per-sequence
    "logprob.<i>" and "entropy.<i>" tensors."""
    T = spec["temperature"]
    loss = torch.zeros((), dtype=dtype)
    out = {}
    for i, s in enumerate(spec["seqs"]):
        ids = s["prompt"] + s["response"][:-1]
        P, R = len(s["prompt"]), len(s["response"])
        z = forward(cfg, W, ids, dtype)[P - 1 : P - 1 + R] / T
        logp_all = torch.log_softmax(z, dim=-1)
        tgt = torch.tensor(s["response"], dtype=torch.long)
        lp = logp_all.gather(1, tgt[:, None])[:, 0]
        ent = -(logp_all.exp() * logp_all).sum(-1)
        loss = loss + (torch.tensor(spec["dlogprob"][i], dtype=dtype) * lp).sum()
        loss = loss + (torch.tensor(spec["dentropy"][i], dtype=dtype) * ent).sum()
        out["logprob.%d" % i] = lp.detach()
        out["entropy.%d" % i] = ent.detach()
    loss.backward()
    return out


def run(in_path, weights_path, out_path):
    spec = json.load(open(in_path))
    dtype = torch.float64 if spec.get("dtype", "float64") == "float64" else torch.float32
    cfg = spec["config"]
    W = {n: t.to(dtype).requires_grad_(True) for n, t in read_safetensors(weights_path).items()}
    out = backward_weighted(spec, cfg, W, dtype)
    for n, t in W.items():
        out["grad." + n] = t.grad if t.grad is not None else torch.zeros_like(t)
    write_safetensors(out_path, out)


def main():
    for job in json.load(open(sys.argv[1])):
        run(*job)


if __name__ == "__main__":
    main()
