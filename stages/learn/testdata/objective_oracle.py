"""PyTorch oracle of the learner's policy loss, written from the semantics of verl's
trainer/ppo/core_algos.py (compute_policy_loss_vanilla with dual clip, compute_policy_loss_gspo,
agg_loss, kl_penalty, the rollout correction's truncated or masked IS weights) and the DrMAS
reference code's balance_loss_by_agent_freq. Reads cases as JSON on stdin; writes, per case, the
loss, d loss/d log-prob and d loss/d entropy per token, and the clip counts, as JSON on stdout."""
import json
import sys
from collections import Counter

import torch

torch.set_default_dtype(torch.float64)


def pad(rows, key, T):
    out = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        v = r[key]
        out[i, : len(v)] = torch.tensor(v, dtype=torch.float64)
    return out


def agg_loss(loss_mat, mask, mode):
    if mode == "token-mean":
        return (loss_mat * mask).sum() / mask.sum()
    if mode == "seq-mean-token-sum":
        return torch.mean(torch.sum(loss_mat * mask, dim=-1))
    if mode == "seq-mean-token-mean":
        return torch.mean(torch.sum(loss_mat * mask, dim=-1) / torch.sum(mask, dim=-1))
    if mode == "seq-mean-token-sum-norm":
        return torch.sum(torch.sum(loss_mat * mask, dim=-1)) / mask.shape[-1]
    raise ValueError(mode)


def kl_penalty(logprob, ref, kind):
    if kind == "k1":
        return logprob - ref
    if kind == "abs":
        return (logprob - ref).abs()
    if kind == "k2":
        return 0.5 * (logprob - ref).square()
    kl = ref - logprob
    return torch.exp(kl) - kl - 1


def rollout_weights(old, behav, mask, level, cap, mask_mode):
    with torch.no_grad():
        log_ratio = (old - behav) * mask
        if level == "sequence":
            log_ratio = log_ratio.sum(dim=-1, keepdim=True).expand_as(old)
        ratio = torch.exp(log_ratio)
        if mask_mode:
            return ((ratio >= 1 / cap) & (ratio <= cap)).double()
        return torch.clamp(ratio, max=cap)


def balance_weights(rows):
    keys = [(r["uid"], r["agent"]) for r in rows]
    counts = Counter(keys)
    raw = torch.tensor([1.0 / counts[k] for k in keys])
    return raw / raw.mean()


def case(c):
    rows, o = c["rows"], c["opts"]
    mode = o.get("loss_agg") or "token-mean"
    T = max(len(r["lp"]) for r in rows)
    if mode == "seq-mean-token-sum-norm":
        T = o["norm_len"]  # verl's constant is the padded length
    mask = torch.zeros(len(rows), T)
    for i, r in enumerate(rows):
        mask[i, : len(r["lp"])] = 1
    log_prob = pad(rows, "lp", T).requires_grad_(True)
    entropy = pad(rows, "ent", T).requires_grad_(True)
    old, ref, behav = pad(rows, "old", T), pad(rows, "ref", T), pad(rows, "behav", T)
    adv = torch.tensor([r["adv"] for r in rows]).unsqueeze(-1).expand(len(rows), T)
    negative_approx_kl = log_prob - old
    if o.get("seq_ratio"):
        lo, hi = o["seq_clip_low"], o["seq_clip_high"]
        seq_kl = torch.sum(negative_approx_kl * mask, dim=-1) / torch.sum(mask, dim=-1).clamp(min=1)
        log_s = log_prob - log_prob.detach() + seq_kl.detach().unsqueeze(-1)
        ratio = torch.exp(torch.clamp(log_s, max=10.0))
    else:
        lo, hi = o["clip_low"], o["clip_high"]
        ratio = torch.exp(negative_approx_kl)
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - lo, 1 + hi)
    clip1 = torch.maximum(pg1, pg2)
    clipped = int(((pg2 > pg1).double() * mask).sum())
    pg = clip1
    dual = 0
    if o.get("clip_c", 0) > 0:
        pg3 = -adv * o["clip_c"]
        pg = torch.where(adv < 0, torch.min(pg3, clip1), clip1)
        dual = int(((clip1 > pg3) & (adv < 0)).double().mul(mask).sum())
    if o.get("rollout_is"):
        pg = pg * rollout_weights(old, behav, mask, o["rollout_is"], o["is_cap"], o.get("is_mask", False))
    if o.get("agent_balance"):
        pg = pg * balance_weights(rows).unsqueeze(-1)
    loss = agg_loss(pg, mask, mode)
    if o.get("entropy_coef", 0) != 0:
        loss = loss - o["entropy_coef"] * agg_loss(entropy, mask, mode)
    if o.get("kl_coef", 0) > 0:
        loss = loss + o["kl_coef"] * agg_loss(kl_penalty(log_prob, ref, o.get("kl_type") or "k3"), mask, mode)
    loss.backward()
    d = [log_prob.grad[i, : len(r["lp"])].tolist() for i, r in enumerate(rows)]
    ge = entropy.grad if entropy.grad is not None else torch.zeros_like(entropy)
    de = [ge[i, : len(r["lp"])].tolist() for i, r in enumerate(rows)]
    # Dual clip replaces the clipped loss of its tokens; count clipping as the learner does.
    return {"loss": loss.item(), "d": d, "de": de, "clipped": clipped, "dual": dual}


json.dump([case(c) for c in json.load(sys.stdin)], sys.stdout)
