"""PyTorch side of benchqwen: the same model (testdata/qwen_ref.py's forward in
float32) on the same weights and threads. Prints one JSON line:
train_tok_s, decode_tok_s (wall), train_cpu_tok_s, decode_cpu_tok_s (per
CPU-second × threads), peak_rss_gb, logprob_sum; with "train_only" set in
IN.json, only the forward+backward's train_tok_s, train_cpu_tok_s and
logprob_sum (benchqwen's later rounds).

usage: torch_bench.py IN.json WEIGHTS.safetensors
"""
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "testdata"))
from qwen_ref import forward, rms_norm, rope_cos_sin, rotate_half  # noqa: E402


def load(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    base = 8 + n
    W = {}
    for name, info in header.items():
        lo, hi = info["data_offsets"]
        a = np.fromfile(path, dtype=np.float32, count=(hi - lo) // 4, offset=base + lo)
        W[name] = torch.from_numpy(a).reshape(info["shape"])
    return W


def train(cfg, W, toks, reps):
    for t in W.values():
        t.requires_grad_(True)
    ids, tgt = toks[:-1], torch.tensor(toks[1:], dtype=torch.long)
    best, best_cpu, lp_sum = float("inf"), float("inf"), 0.0
    for _ in range(reps):
        for t in W.values():
            t.grad = None
        t0, c0 = time.time(), time.process_time()
        logp = torch.log_softmax(forward(cfg, W, ids, torch.float32), dim=-1)
        lp = logp.gather(1, tgt[:, None])[:, 0]
        ent = -(logp.exp() * logp).sum(-1)
        (lp.sum() + 0.01 * ent.sum()).backward()
        best = min(best, time.time() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
        lp_sum = float(lp.sum())
    for t in W.values():
        t.grad = None
        t.requires_grad_(False)
    return len(toks) / best, len(toks) * torch.get_num_threads() / best_cpu, lp_sum


def decode(cfg, W, prompts, new):
    """Greedy decoding with a KV cache, all requests in one batch."""
    H, KV, hd, eps = cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    B, P = len(prompts), len(prompts[0])
    cap = P + new
    cos, sin = rope_cos_sin(cap, hd, cfg["rope_theta"], torch.float32)
    kc = [torch.zeros(B, KV, cap, hd) for _ in range(cfg["layers"])]
    vc = [torch.zeros(B, KV, cap, hd) for _ in range(cfg["layers"])]
    head = W["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else W["lm_head.weight"]

    def step(ids, p0):
        t = ids.shape[1]
        x = W["model.embed_tokens.weight"][ids]
        c, s = cos[p0 : p0 + t], sin[p0 : p0 + t]
        mask = torch.full((t, p0 + t), float("-inf")).triu(p0 + 1)
        for l in range(cfg["layers"]):
            p = "model.layers.%d." % l
            h = rms_norm(x, W[p + "input_layernorm.weight"], eps)

            def proj(n, heads):
                y = h @ W[p + "self_attn.%s_proj.weight" % n].T
                b = W.get(p + "self_attn.%s_proj.bias" % n)
                y = y if b is None else y + b
                return y.view(B, t, heads, hd).transpose(1, 2)

            q, k, v = proj("q", H), proj("k", KV), proj("v", KV)
            if cfg["qk_norm"]:
                q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
                k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
            q = q * c + rotate_half(q) * s
            k = k * c + rotate_half(k) * s
            kc[l][:, :, p0 : p0 + t] = k
            vc[l][:, :, p0 : p0 + t] = v
            K = kc[l][:, :, : p0 + t].repeat_interleave(H // KV, dim=1)
            V = vc[l][:, :, : p0 + t].repeat_interleave(H // KV, dim=1)
            a = torch.softmax(q @ K.transpose(2, 3) / math.sqrt(hd) + mask, dim=-1) @ V
            x = x + a.transpose(1, 2).reshape(B, t, H * hd) @ W[p + "self_attn.o_proj.weight"].T
            h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
            m = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
            x = x + m @ W[p + "mlp.down_proj.weight"].T
        return rms_norm(x[:, -1], W["model.norm.weight"], eps) @ head.T

    with torch.no_grad():
        t0, c0 = time.time(), time.process_time()
        nxt = step(torch.tensor(prompts, dtype=torch.long), 0).argmax(-1)
        out = [nxt]
        for i in range(1, new):
            nxt = step(nxt[:, None], P + i - 1).argmax(-1)
            out.append(nxt)
        n = B * new
        toks = torch.stack(out, dim=1).tolist()
        return n / (time.time() - t0), n * torch.get_num_threads() / (time.process_time() - c0), toks


def peak_rss_gb():
    """VmHWM, this process's own peak (ru_maxrss would include the Go parent's
    peak, which Linux carries across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e9
    return 0.0


def main():
    spec = json.load(open(sys.argv[1]))
    torch.set_num_threads(spec["threads"])
    cfg = spec["config"]
    W = load(sys.argv[2])
    train_tok_s, train_cpu, lp_sum = train(cfg, W, spec["tokens"], spec["reps"])
    if spec.get("train_only"):
        print(json.dumps({"train_tok_s": train_tok_s, "train_cpu_tok_s": train_cpu, "logprob_sum": lp_sum}))
        return
    rss = peak_rss_gb()
    dec, dec_cpu, toks = decode(cfg, W, spec["prompts"], spec["new"])
    print(json.dumps({"train_tok_s": train_tok_s, "train_cpu_tok_s": train_cpu, "decode_tok_s": dec,
                      "decode_cpu_tok_s": dec_cpu, "peak_rss_gb": rss, "logprob_sum": lp_sum, "tokens": toks}))


if __name__ == "__main__":
    main()
