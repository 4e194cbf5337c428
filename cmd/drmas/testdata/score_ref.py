"""PyTorch oracle for `drmas model score`: reads a Hugging Face model folder itself (config.json
and model.safetensors in BF16, F16 or F32, parsed here with struct/json/torch.frombuffer) and
prints the log-probability of each response token given every token before it, at temperature 1,
computed in float64 by model/testdata/qwen_ref.py's forward (written from transformers'
modeling_qwen2.py / modeling_qwen3.py).

usage: score_ref.py JOBS.json, JOBS.json = [{"model": DIR, "seqs": [{"prompt": [...], "response": [...]}, ...]}, ...]
(one process for every folder: importing torch is the slow part)
prints a JSON array with, per job, an array of log-probability arrays, one per sequence.
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "model", "testdata"))
import qwen_ref  # noqa: E402


def config(path):
    c = json.load(open(path))
    heads = c["num_attention_heads"]
    theta = c.get("rope_theta") or (c.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    return {
        "heads": heads,
        "kv_heads": c.get("num_key_value_heads") or heads,
        "head_dim": c.get("head_dim") or c["hidden_size"] // heads,
        "rms_norm_eps": c.get("rms_norm_eps", 1e-6),
        "rope_theta": theta,
        "layers": c["num_hidden_layers"],
        "qk_norm": c["model_type"] == "qwen3",
        "tie_word_embeddings": c.get("tie_word_embeddings", False),
    }


def score(folder, seqs):
    cfg = config(os.path.join(folder, "config.json"))
    W = {n: t.to(torch.float64) for n, t in qwen_ref.read_safetensors(os.path.join(folder, "model.safetensors")).items()}
    out = []
    with torch.no_grad():
        for j in seqs:
            P, R = len(j["prompt"]), len(j["response"])
            logits = qwen_ref.forward(cfg, W, j["prompt"] + j["response"][:-1], torch.float64)
            logp = torch.log_softmax(logits[P - 1 : P - 1 + R], dim=-1)
            tgt = torch.tensor(j["response"], dtype=torch.long)
            out.append(logp.gather(1, tgt[:, None])[:, 0].tolist())
    return out


def main():
    print(json.dumps([score(j["model"], j["seqs"]) for j in json.load(open(sys.argv[1]))]))


if __name__ == "__main__":
    main()
